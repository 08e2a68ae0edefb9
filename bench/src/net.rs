//! Where client and server run: both on loopback, or at the two ends of an
//! emulated long path (`ferry-wan`), each in its own network namespace.

use std::fs;
use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ferry_wan::{Link, LinkConfig, LinkGuard, LinkStats, PathConfig, Rate, Shaper, Side};

use crate::error::{BenchError, Result};

/// An emulated path as a scenario asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct WanPath {
    pub delay: Duration,
    pub rate: Rate,
    /// Random loss per packet, both directions.
    pub loss: f64,
    /// `tbf` reproduces the Globus reference's figures to 1 %
    /// (docs/wan-emulator.md); `forwarder` puts the queue in the network.
    pub shaper: Shaper,
    pub tuned: bool,
    /// The hosts' TCP congestion control (both namespaces), e.g. `cubic`
    /// for a site's untuned default; `None` keeps what the namespaces
    /// inherit from the root namespace.
    pub congestion: Option<String>,
}

impl WanPath {
    /// The papers' path: 1 Gbit/s, tuned hosts, `tbf` shaping, no loss.
    pub fn gbit(delay: Duration) -> WanPath {
        WanPath {
            delay,
            rate: Rate::from_bits_per_second(1_000_000_000),
            loss: 0.0,
            shaper: Shaper::Tbf,
            tuned: true,
            congestion: None,
        }
    }

    pub fn describe(&self) -> String {
        let mut s = format!("{}, {} one way", format_rate(self.rate), format_delay(self.delay));
        if self.loss > 0.0 {
            s += &format!(", {}% random loss each way", trim_float(self.loss * 100.0));
        }
        s += match self.shaper {
            Shaper::Tbf => ", tbf shaper",
            Shaper::Forwarder => ", forwarder shaper",
        };
        s += if self.tuned { ", tuned TCP buffers (64 MiB)" } else { ", untuned TCP buffers" };
        if let Some(cc) = &self.congestion {
            s += &format!(", {} hosts", cc.to_uppercase());
        }
        s
    }
}

/// "0 ms", "10 µs", "1 ms", "80 ms".
pub fn format_delay(d: Duration) -> String {
    let us = d.as_micros();
    if us == 0 {
        "0 ms".into()
    } else if us < 1000 {
        format!("{us} µs")
    } else {
        format!("{} ms", trim_float(us as f64 / 1000.0))
    }
}

/// "1 Gbit/s", "200 Mbit/s".
pub fn format_rate(r: Rate) -> String {
    let b = r.bits_per_second() as f64;
    if b >= 1e9 {
        format!("{} Gbit/s", trim_float(b / 1e9))
    } else {
        format!("{} Mbit/s", trim_float(b / 1e6))
    }
}

fn trim_float(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Makes `cc` the default TCP congestion control of both hosts of `link`.
/// The root namespace's allowed list holds `cc` only while the namespaces
/// are set (the guard restores it, also on error); sockets created later
/// with a namespace's default need no permission.
fn set_congestion(link: &LinkGuard, cc: &str) -> Result<()> {
    // A namespace may only make an allowed controller its default
    // (`tcp_set_default_congestion_control`); others must be allowed already.
    let _guard = AllowedCongestion::add(cc)?;
    for side in [Side::Client, Side::Server] {
        let mut c = link.command(side, "sysctl");
        c.args(["-q", "-w", &format!("net.ipv4.tcp_congestion_control={cc}")]);
        let out = c.output().map_err(|e| BenchError::io("sysctl".to_string(), e))?;
        if !out.status.success() {
            return Err(BenchError::Precondition(format!(
                "setting the emulated hosts' congestion control to {cc}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    Ok(())
}

/// Client and server placement.
#[derive(Debug)]
pub enum Net {
    Loopback,
    Wan { link: Box<LinkGuard>, path: WanPath },
}

static LINKS: AtomicU32 = AtomicU32::new(0);

impl Net {
    /// Brings an emulated link up (torn down when this value is dropped).
    pub fn wan(path: WanPath) -> Result<Net> {
        let n = LINKS.fetch_add(1, Ordering::Relaxed);
        let name = format!("fb{}-{n}", std::process::id());
        let mut cfg = LinkConfig::new(
            name,
            PathConfig { rate: Some(path.rate), loss: path.loss, ..PathConfig::delay_only(path.delay) },
        );
        cfg.shaper = path.shaper;
        cfg.tuned = path.tuned;
        let link = Link::up(cfg)?;
        if let Some(cc) = &path.congestion {
            set_congestion(&link, cc)?;
        }
        Ok(Net::Wan { link: Box::new(link), path })
    }

    pub fn describe(&self) -> String {
        match self {
            Net::Loopback => "loopback (127.0.0.1)".into(),
            Net::Wan { path, .. } => path.describe(),
        }
    }

    pub fn client_ip(&self) -> Ipv4Addr {
        match self {
            Net::Loopback => Ipv4Addr::LOCALHOST,
            Net::Wan { link, .. } => link.client_ip(),
        }
    }

    pub fn server_ip(&self) -> Ipv4Addr {
        match self {
            Net::Loopback => Ipv4Addr::LOCALHOST,
            Net::Wan { link, .. } => link.server_ip(),
        }
    }

    /// A command that runs `program` on one side.
    pub fn command(&self, side: Side, program: &str) -> Command {
        match self {
            Net::Loopback => Command::new(program),
            Net::Wan { link, .. } => link.command(side, program),
        }
    }

    /// A TCP port free on the server side right now (bound and released,
    /// as servers that need a port number up front must be given one).
    pub fn free_server_port(&self) -> Result<u16> {
        let ip = self.server_ip();
        let bind = move || -> std::io::Result<u16> { Ok(TcpListener::bind((ip, 0))?.local_addr()?.port()) };
        let port = match self {
            Net::Loopback => bind(),
            Net::Wan { link, .. } => link.run_in(Side::Server, bind)?,
        };
        port.map_err(|e| BenchError::io(format!("finding a free port on {ip}"), e))
    }

    /// Median of five TCP connect times across the path, in ms.
    pub fn connect_rtt_ms(&self) -> Result<Option<f64>> {
        match self {
            Net::Loopback => Ok(None),
            Net::Wan { link, .. } => {
                let mut s = ferry_wan::selftest::probe_rtt(link, 5)?;
                s.sort();
                Ok(Some(s[s.len() / 2].as_secs_f64() * 1e3))
            }
        }
    }

    /// The emulator's counters (for drops, loss and its CPU), if any.
    pub fn link_stats(&self) -> Option<LinkStats> {
        match self {
            Net::Loopback => None,
            Net::Wan { link, .. } => Some(link.stats()),
        }
    }

    /// Fails if a forwarder thread has stopped.
    pub fn check(&self) -> Result<()> {
        match self {
            Net::Loopback => Ok(()),
            Net::Wan { link, .. } => Ok(link.check()?),
        }
    }

    /// Tears an emulated link down, reporting anything left behind.
    pub fn down(self) -> Result<()> {
        match self {
            Net::Loopback => Ok(()),
            Net::Wan { link, .. } => {
                link.down()?;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays() {
        assert_eq!(format_delay(Duration::ZERO), "0 ms");
        assert_eq!(format_delay(Duration::from_micros(10)), "10 µs");
        assert_eq!(format_delay(Duration::from_millis(80)), "80 ms");
        assert_eq!(format_delay(Duration::from_micros(1500)), "1.5 ms");
        let mut p = WanPath::gbit(Duration::from_millis(30));
        p.loss = 0.001;
        assert_eq!(
            p.describe(),
            "1 Gbit/s, 30 ms one way, 0.1% random loss each way, tbf shaper, tuned TCP buffers (64 MiB)"
        );
    }
}

const ALLOWED_CC: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
const ALLOWED_CC_SAVED: &str = "/run/ferry-bench/allowed-cc";

fn io_err(what: String) -> impl FnOnce(std::io::Error) -> BenchError {
    move |e| BenchError::io(what, e)
}

/// Adds a congestion control (`cubic`) to the root namespace's allowed list
/// for the guard's life (a namespace may only choose an allowed one) and
/// restores the old list when dropped; a run killed by SIGKILL leaves the
/// old list in `/run/ferry-bench`, and the next guard puts it back. One
/// guard for every scenario (udt-*, quic, bottlenecks).
#[derive(Debug)]
pub struct AllowedCongestion {
    old: String,
    /// Whether this guard widened the list (else it leaves it alone).
    changed: bool,
}

impl AllowedCongestion {
    pub fn add(cc: &str) -> Result<AllowedCongestion> {
        restore_saved_allowed_cc();
        let old = fs::read_to_string(ALLOWED_CC).map_err(io_err(format!("reading {ALLOWED_CC}")))?.trim().to_string();
        let changed = !old.split_whitespace().any(|c| c == cc);
        if changed {
            let _ = fs::create_dir_all("/run/ferry-bench");
            fs::write(ALLOWED_CC_SAVED, format!("{}\n{old}", std::process::id()))
                .map_err(io_err(format!("writing {ALLOWED_CC_SAVED}")))?;
            fs::write(ALLOWED_CC, format!("{old} {cc}")).map_err(io_err(format!("adding {cc} to {ALLOWED_CC}")))?;
            eprintln!("ferry-bench: {ALLOWED_CC}: {old:?} -> {:?} for this run", format!("{old} {cc}"));
        }
        Ok(AllowedCongestion { old, changed })
    }
}

impl Drop for AllowedCongestion {
    fn drop(&mut self) {
        if !self.changed {
            return;
        }
        match fs::write(ALLOWED_CC, &self.old) {
            Ok(()) => {
                let _ = fs::remove_file(ALLOWED_CC_SAVED);
                eprintln!("ferry-bench: {ALLOWED_CC} restored to {:?}", self.old);
            }
            Err(e) => eprintln!("ferry-bench: could not restore {ALLOWED_CC} to {:?}: {e}", self.old),
        }
    }
}

/// A run killed by SIGKILL left the list widened; put it back (not while
/// the run that widened it is alive: two runs may overlap).
fn restore_saved_allowed_cc() {
    let Ok(saved) = fs::read_to_string(ALLOWED_CC_SAVED) else { return };
    let (pid, old) = saved.split_once('\n').unwrap_or(("", saved.as_str()));
    if pid.parse::<u32>().is_ok_and(|p| Path::new(&format!("/proc/{p}")).exists()) {
        return;
    }
    if fs::write(ALLOWED_CC, old.trim()).is_ok() {
        eprintln!("ferry-bench: restored {ALLOWED_CC} to {:?} (left by a killed run)", old.trim());
        let _ = fs::remove_file(ALLOWED_CC_SAVED);
    }
}
