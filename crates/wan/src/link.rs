//! Bringing a link up and tearing it down again.
//!
//! Set-up records every resource the moment it exists, in a `Created` list
//! owned by the [`LinkGuard`]. If any later step fails, or the guard is
//! dropped (also on panic), exactly those resources are removed in reverse
//! order; nothing that existed before is ever touched.

use std::fs::{self, File};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::{LinkConfig, Shaper};
use crate::forwarder::{DirectionSnapshot, DirectionStats, Forwarder};
use crate::netns::{self, LinkRecord, DEVICE};
use crate::sys::{self, Tun};
use crate::WanError;

/// Default TCP buffer limits for a "well-tuned host": 64 MiB covers the
/// bandwidth-delay product of 1 Gbit/s at 160 ms RTT (20 MB) with room for
/// the receive-window overhead, as in the Globus baseline.
pub const TUNED_TCP_MEM: &str = "4096 131072 67108864";

/// One end of the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    Client,
    Server,
}

/// Entry point: `Link::up(config)`.
#[derive(Debug)]
pub struct Link;

impl Link {
    /// Creates both namespaces, the TUN devices and the forwarder threads.
    /// The link stays up until the returned guard is dropped or
    /// [`LinkGuard::down`] is called.
    pub fn up(config: LinkConfig) -> Result<LinkGuard, WanError> {
        config.validate()?;
        netns::require_root()?;
        netns::require_program("ip")?;
        if config.shaper == Shaper::Tbf {
            netns::require_program("tc")?;
        }
        let (cns, sns) = (config.client_ns(), config.server_ns());
        for ns in [&cns, &sns] {
            if netns::netns_exists(ns) {
                return Err(WanError::NamespaceExists(ns.clone(), config.name.clone()));
            }
            let etc = netns::etc_dir(ns);
            if etc.exists() {
                return Err(WanError::PathExists(etc));
            }
        }
        let state = netns::state_file(&config.name);
        if state.exists() {
            return Err(WanError::PathExists(state));
        }

        let mut guard = LinkGuard {
            config,
            created: Created::default(),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            stats: [Arc::new(DirectionStats::default()), Arc::new(DirectionStats::default())],
            started: Instant::now(),
            torn_down: false,
        };
        guard.build()?;
        Ok(guard)
    }
}

/// Resources that exist because of this link, in creation order.
#[derive(Debug, Default)]
struct Created {
    namespaces: Vec<String>,
    etc_dirs: Vec<String>,
    state_file: Option<PathBuf>,
    tuns: Vec<Arc<File>>,
}

/// A running link. Dropping it stops the forwarders and removes the
/// namespaces, hosts files and the state record.
#[derive(Debug)]
pub struct LinkGuard {
    config: LinkConfig,
    created: Created,
    stop: Arc<AtomicBool>,
    threads: Vec<(&'static str, JoinHandle<std::io::Result<()>>)>,
    /// Client → server, server → client.
    stats: [Arc<DirectionStats>; 2],
    started: Instant,
    torn_down: bool,
}

/// Counters of both directions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkStats {
    pub forward: DirectionSnapshot,
    pub back: DirectionSnapshot,
    pub elapsed: Duration,
}

impl LinkGuard {
    fn build(&mut self) -> Result<(), WanError> {
        let cfg = self.config.clone();
        let (cns, sns) = (cfg.client_ns(), cfg.server_ns());

        for ns in [&cns, &sns] {
            netns::ip(["netns", "add", ns.as_str()])?;
            self.created.namespaces.push(ns.clone());
        }

        let mut files = Vec::new();
        for (ns, addr) in [(&cns, cfg.client_addr), (&sns, cfg.server_addr)] {
            let tun = Tun::create("fwan%d").map_err(|e| WanError::io("creating a TUN device (/dev/net/tun)", e))?;
            let kernel_name = tun.name().to_string();
            let file = Arc::new(tun.into_file());
            self.created.tuns.push(Arc::clone(&file));
            // The one operation in the root namespace: move the device we
            // have just created (the kernel chose its name from our pattern,
            // so it cannot be anyone else's) into our namespace.
            netns::ip(["link", "set", "dev", &kernel_name, "netns", ns.as_str()])?;
            configure_device(ns, &kernel_name, &addr.to_string(), &cfg)?;
            files.push(file);
        }

        for ns in [&cns, &sns] {
            let mut sysctls = vec!["net.ipv4.tcp_no_metrics_save=1".to_string()];
            if cfg.tuned {
                sysctls.push(format!("net.ipv4.tcp_rmem={TUNED_TCP_MEM}"));
                sysctls.push(format!("net.ipv4.tcp_wmem={TUNED_TCP_MEM}"));
            }
            let mut c = netns::exec_in(ns, "sysctl");
            c.arg("-q").arg("-w").args(&sysctls);
            netns::run(&mut c)?;
        }

        if cfg.shaper == Shaper::Tbf {
            for (ns, path) in [(&cns, &cfg.forward), (&sns, &cfg.back)] {
                if let Some(rate) = path.rate {
                    let burst = (rate.bytes_in(Duration::from_millis(2))).max(2 * u64::from(cfg.mtu)).max(16 * 1024);
                    let limit = path.queue_bytes().max(burst);
                    netns::run(Command::new("tc").args([
                        "-n",
                        ns,
                        "qdisc",
                        "replace",
                        "dev",
                        DEVICE,
                        "root",
                        "tbf",
                        "rate",
                        &format!("{}bit", rate.bits_per_second()),
                        "burst",
                        &burst.to_string(),
                        "limit",
                        &limit.to_string(),
                    ]))?;
                }
            }
        }

        for (own_is_client, ns) in [(true, &cns), (false, &sns)] {
            let dir = netns::etc_dir(ns);
            fs::create_dir_all(netns::NETNS_ETC_DIR)
                .map_err(|e| WanError::io(format!("creating {}", netns::NETNS_ETC_DIR), e))?;
            // create_dir, not create_dir_all: if the directory appeared since
            // the check in `up`, it is someone else's and this must fail.
            fs::create_dir(&dir).map_err(|e| WanError::io(format!("creating {}", dir.display()), e))?;
            self.created.etc_dirs.push(ns.clone());
            let hosts = dir.join("hosts");
            fs::write(&hosts, netns::hosts_file(&cfg, own_is_client))
                .map_err(|e| WanError::io(format!("writing {}", hosts.display()), e))?;
        }

        let seed = cfg.seed.unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
                ^ u64::from(std::process::id())
        });
        let in_forwarder = cfg.shaper == Shaper::Forwarder;
        let directions = [
            ("client->server", &files[0], &files[1], &cfg.forward, seed),
            ("server->client", &files[1], &files[0], &cfg.back, seed ^ 0x5555),
        ];
        for (i, (label, input, output, path, seed)) in directions.into_iter().enumerate() {
            let rate = if in_forwarder { path.rate } else { None };
            let fwd = Forwarder::new(Arc::clone(input), Arc::clone(output), path, rate, seed, Arc::clone(&self.stop));
            self.stats[i] = Arc::clone(&fwd.stats);
            let handle = std::thread::Builder::new()
                .name(if i == 0 { "wan-c2s" } else { "wan-s2c" }.into())
                .spawn(move || fwd.run())
                .map_err(|e| WanError::io("spawning forwarder thread", e))?;
            self.threads.push((label, handle));
        }

        fs::create_dir_all(netns::STATE_DIR).map_err(|e| WanError::io(format!("creating {}", netns::STATE_DIR), e))?;
        let record = LinkRecord { pid: std::process::id(), namespaces: vec![cns, sns] };
        let state = netns::state_file(&cfg.name);
        fs::write(&state, record.render()).map_err(|e| WanError::io(format!("writing {}", state.display()), e))?;
        self.created.state_file = Some(state);
        self.started = Instant::now();
        Ok(())
    }

    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    pub fn namespace(&self, side: Side) -> String {
        match side {
            Side::Client => self.config.client_ns(),
            Side::Server => self.config.server_ns(),
        }
    }

    pub fn client_ip(&self) -> Ipv4Addr {
        self.config.client_addr.addr
    }

    pub fn server_ip(&self) -> Ipv4Addr {
        self.config.server_addr.addr
    }

    /// A command that runs `program` inside one end's namespace (through
    /// `ip netns exec`, so the per-namespace hosts file is in place).
    pub fn command(&self, side: Side, program: &str) -> Command {
        netns::exec_in(&self.namespace(side), program)
    }

    /// Runs `f` on a helper thread that has entered one end's namespace, so
    /// sockets it opens live there. For in-process probes; programs should
    /// use [`LinkGuard::command`].
    pub fn run_in<T, F>(&self, side: Side, f: F) -> Result<T, WanError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let ns = self.namespace(side);
        let handle = spawn_in(&ns, f)?;
        handle.join().map_err(|_| WanError::io(format!("probe thread in {ns}"), std::io::Error::other("panicked")))?
    }

    /// Counters of both directions so far.
    ///
    /// Reading the TUN devices' drop counters runs `ip` in each namespace,
    /// so this costs two short subprocesses.
    pub fn stats(&self) -> LinkStats {
        let mut forward = self.stats[0].snapshot();
        let mut back = self.stats[1].snapshot();
        if self.created.namespaces.len() == 2 {
            forward.device_drops = device_tx_dropped(&self.config.client_ns());
            back.device_drops = device_tx_dropped(&self.config.server_ns());
        }
        LinkStats { forward, back, elapsed: self.started.elapsed() }
    }

    /// Ok while both forwarders run; the first failure otherwise.
    pub fn check(&self) -> Result<(), WanError> {
        for (label, h) in &self.threads {
            if h.is_finished() {
                return Err(WanError::Forwarder {
                    direction: label,
                    error: std::io::Error::other("its thread exited"),
                });
            }
        }
        Ok(())
    }

    /// Tears the link down. Returns the final counters, or what could not
    /// be removed, or the failure of a forwarder that had stopped early.
    pub fn down(mut self) -> Result<LinkStats, WanError> {
        self.teardown()
    }

    /// Removes everything, then reports: leftovers first (they need a
    /// person's attention), else a forwarder that had failed, else the
    /// final counters.
    fn teardown(&mut self) -> Result<LinkStats, WanError> {
        self.torn_down = true;
        let mut leftovers = Vec::new();
        let mut forwarder_failure = None;
        self.stop.store(true, Ordering::Relaxed);
        for (direction, handle) in self.threads.drain(..) {
            let error = match handle.join() {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => e,
                Err(_) => std::io::Error::other("panicked"),
            };
            forwarder_failure.get_or_insert(WanError::Forwarder { direction, error });
        }
        let stats = self.stats();
        // Closing the last descriptor destroys each (non-persistent) TUN
        // device, wherever it is.
        self.created.tuns.clear();
        for ns in self.created.namespaces.drain(..).rev() {
            // Someone may have deleted it under us (which is also what stops
            // the forwarders); then there is nothing left to remove.
            if netns::netns_exists(&ns) {
                if let Err(e) = netns::ip(["netns", "del", ns.as_str()]) {
                    leftovers.push(e.to_string());
                }
            }
        }
        for ns in self.created.etc_dirs.drain(..).rev() {
            if let Err(e) = netns::remove_hosts_dir(&ns) {
                leftovers.push(format!("{}: {e}", netns::etc_dir(&ns).display()));
            }
        }
        if let Some(state) = self.created.state_file.take() {
            if let Err(e) = fs::remove_file(&state) {
                leftovers.push(format!("{}: {e}", state.display()));
            }
        }
        if !leftovers.is_empty() {
            if let Some(f) = forwarder_failure {
                leftovers.push(format!("(and {f})"));
            }
            return Err(WanError::Teardown { name: self.config.name.clone(), leftovers: leftovers.join("; ") });
        }
        match forwarder_failure {
            Some(f) => Err(f),
            None => Ok(stats),
        }
    }
}

impl Drop for LinkGuard {
    fn drop(&mut self) {
        if !self.torn_down {
            if let Err(e) = self.teardown() {
                // Drop cannot return the error, and silently leaving
                // namespaces behind would break the next run.
                eprintln!("ferry-wan: {e}");
            }
        }
    }
}

/// Spawns `f` on a thread inside namespace `ns`.
pub(crate) fn spawn_in<T, F>(ns: &str, f: F) -> Result<JoinHandle<Result<T, WanError>>, WanError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let path = netns::netns_path(ns);
    let file = File::open(&path).map_err(|e| WanError::io(format!("opening {}", path.display()), e))?;
    let ns = ns.to_string();
    std::thread::Builder::new()
        .name("wan-probe".into())
        .spawn(move || {
            sys::enter_netns(&file).map_err(|e| WanError::io(format!("entering {ns}"), e))?;
            Ok(f())
        })
        .map_err(|e| WanError::io("spawning probe thread", e))
}

/// The `tx dropped` counter of the TUN device in `ns`.
fn device_tx_dropped(ns: &str) -> Option<u64> {
    let out = Command::new("ip").args(["-n", ns, "-s", "-j", "link", "show", "dev", DEVICE]).output().ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v[0]["stats64"]["tx"]["dropped"].as_u64()
}

/// Names, sizes, addresses and raises the device inside its namespace.
fn configure_device(ns: &str, kernel_name: &str, addr: &str, cfg: &LinkConfig) -> Result<(), WanError> {
    let mtu = cfg.mtu.to_string();
    let qlen = cfg.txqueuelen.to_string();
    netns::ip(["-n", ns, "link", "set", "dev", kernel_name, "name", DEVICE])?;
    // Best effort, before the device comes up: without IPv6 the link carries
    // no router solicitations or MLD reports, only the traffic under test.
    // Kernels built without IPv6 have no such sysctl, which is fine.
    let _ =
        netns::run(netns::exec_in(ns, "sysctl").args(["-q", "-w", &format!("net.ipv6.conf.{DEVICE}.disable_ipv6=1")]));
    netns::ip(["-n", ns, "link", "set", "dev", DEVICE, "mtu", &mtu, "txqueuelen", &qlen])?;
    netns::ip(["-n", ns, "addr", "add", addr, "dev", DEVICE])?;
    netns::ip(["-n", ns, "link", "set", "dev", DEVICE, "up"])?;
    netns::ip(["-n", ns, "link", "set", "dev", "lo", "up"])?;
    Ok(())
}
