//! Several hosts around a router: the set-up of a striped transfer's
//! benchmark, where each data node sits behind its own link.
//!
//! ```text
//!   NAME-h0 --[link 0]--+
//!   NAME-h1 --[link 1]--+-- NAME-r (router, forwards between the links)
//!   NAME-h2 --[link 2]--+
//! ```
//!
//! Every host is a network namespace with one TUN device (`wan0`,
//! `10.78.I.2/24`, default route through it); the router namespace holds
//! the other end of every link (`hI`, `10.78.I.1/24`) and forwards IPv4.
//! Each link has its own [`PathConfig`] (one-way delay, rate, queue, loss),
//! applied in each direction by a forwarder thread between the two TUN
//! devices, as in a two-ended [`Link`](crate::Link). A path from host A to
//! host B so crosses A's link and B's link: its one-way delay is the sum,
//! its rate the smaller. The kernel of the project's machines has no
//! `netem`, hence forwarders, not qdiscs.
//!
//! Everything created is recorded as it is created and removed when the
//! [`Topology`] is dropped; `/run/ferry-wan/NAME.pid` lets `ferry-wan down
//! --name NAME` remove what a killed process left.

use std::fs::{self, File};
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::config::PathConfig;
use crate::forwarder::{DirectionSnapshot, DirectionStats, Forwarder};
use crate::link::TUNED_TCP_MEM;
use crate::netns::{self, LinkRecord, DEVICE};
use crate::sys::Tun;
use crate::WanError;

/// Hosts a topology may have (one `/24` of `10.78.0.0/16` each).
pub const MAX_HOSTS: usize = 32;

/// What to build.
#[derive(Debug, Clone)]
pub struct TopologyConfig {
    /// Prefix of the namespaces (`NAME-r`, `NAME-h0`, ...).
    pub name: String,
    /// One link per host, host `i` behind `hosts[i]`.
    pub hosts: Vec<PathConfig>,
    pub mtu: u32,
    /// Raise the hosts' TCP buffer limits ([`TUNED_TCP_MEM`]).
    pub tuned: bool,
    pub seed: Option<u64>,
}

impl TopologyConfig {
    /// `n` hosts, each behind a copy of `path`; MTU 9000, tuned hosts.
    pub fn uniform(name: impl Into<String>, n: usize, path: PathConfig) -> Self {
        Self { name: name.into(), hosts: vec![path; n], mtu: 9000, tuned: true, seed: None }
    }

    pub fn router_ns(&self) -> String {
        format!("{}-r", self.name)
    }

    pub fn host_ns(&self, i: usize) -> String {
        format!("{}-h{i}", self.name)
    }

    /// Host `i`'s address.
    pub fn host_ip(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 78, i as u8, 2)
    }

    /// The router's address on host `i`'s link.
    pub fn router_ip(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 78, i as u8, 1)
    }

    pub fn validate(&self) -> Result<(), WanError> {
        if self.name.is_empty()
            || self.name.len() > 12
            || !self.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(WanError::InvalidConfig(format!(
                "topology name {:?}: 1-12 letters, digits or '_' (it prefixes namespace names)",
                self.name
            )));
        }
        if self.hosts.is_empty() || self.hosts.len() > MAX_HOSTS {
            return Err(WanError::InvalidConfig(format!("a topology has 1 to {MAX_HOSTS} hosts")));
        }
        if !(576..=65_000).contains(&self.mtu) {
            return Err(WanError::InvalidConfig(format!("MTU {} outside 576-65000", self.mtu)));
        }
        for (i, p) in self.hosts.iter().enumerate() {
            if !(0.0..=1.0).contains(&p.loss) {
                return Err(WanError::InvalidConfig(format!("host {i}: loss {} is not a probability", p.loss)));
            }
        }
        Ok(())
    }

    /// The hosts file of one namespace: every host by name, and the
    /// machine's hostname as an alias of the namespace's own address (the
    /// Globus server resolves it).
    pub fn hosts_file(&self, own: Option<usize>) -> String {
        use std::fmt::Write as _;
        let hostname =
            fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
        let mut s = format!("# Written by ferry-wan for topology {:?}; removed when it goes down.\n", self.name);
        s.push_str("127.0.0.1\tlocalhost\n");
        for i in 0..self.hosts.len() {
            let alias = if own == Some(i) && !hostname.is_empty() && hostname != "localhost" {
                format!(" {hostname}")
            } else {
                String::new()
            };
            let _ = writeln!(s, "{}\t{}{alias}", Self::host_ip(i), self.host_ns(i));
        }
        s
    }
}

/// A running topology; dropping it tears everything down.
#[derive(Debug)]
pub struct Topology {
    config: TopologyConfig,
    namespaces: Vec<String>,
    etc_dirs: Vec<String>,
    state_file: Option<std::path::PathBuf>,
    tuns: Vec<Arc<File>>,
    stop: Arc<AtomicBool>,
    threads: Vec<(String, JoinHandle<std::io::Result<()>>)>,
    /// Per host: (host → router, router → host).
    stats: Vec<(Arc<DirectionStats>, Arc<DirectionStats>)>,
    torn_down: bool,
}

impl Topology {
    pub fn up(config: TopologyConfig) -> Result<Topology, WanError> {
        config.validate()?;
        netns::require_root()?;
        netns::require_program("ip")?;
        let mut all = vec![config.router_ns()];
        all.extend((0..config.hosts.len()).map(|i| config.host_ns(i)));
        for ns in &all {
            if netns::netns_exists(ns) {
                return Err(WanError::NamespaceExists(ns.clone(), config.name.clone()));
            }
            if netns::etc_dir(ns).exists() {
                return Err(WanError::PathExists(netns::etc_dir(ns)));
            }
        }
        let state = netns::state_file(&config.name);
        if state.exists() {
            return Err(WanError::PathExists(state));
        }
        let mut t = Topology {
            config,
            namespaces: Vec::new(),
            etc_dirs: Vec::new(),
            state_file: None,
            tuns: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            stats: Vec::new(),
            torn_down: false,
        };
        t.build(&all)?;
        Ok(t)
    }

    fn build(&mut self, all: &[String]) -> Result<(), WanError> {
        let cfg = self.config.clone();
        // The record first, so a killed process leaves a way to clean up.
        fs::create_dir_all(netns::STATE_DIR).map_err(|e| WanError::io(format!("creating {}", netns::STATE_DIR), e))?;
        let state = netns::state_file(&cfg.name);
        let record = LinkRecord { pid: std::process::id(), namespaces: all.to_vec() };
        fs::write(&state, record.render()).map_err(|e| WanError::io(format!("writing {}", state.display()), e))?;
        self.state_file = Some(state);
        for ns in all {
            netns::ip(["netns", "add", ns.as_str()])?;
            self.namespaces.push(ns.clone());
            netns::ip(["-n", ns.as_str(), "link", "set", "dev", "lo", "up"])?;
        }
        let router = cfg.router_ns();
        netns::run(netns::exec_in(&router, "sysctl").args(["-q", "-w", "net.ipv4.ip_forward=1"]))?;
        let seed = cfg.seed.unwrap_or_else(|| u64::from(std::process::id()));
        for (i, path) in cfg.hosts.iter().enumerate() {
            let host = cfg.host_ns(i);
            let mut ends = Vec::new();
            for (ns, name, addr) in [
                (&host, DEVICE.to_string(), TopologyConfig::host_ip(i)),
                (&router, format!("h{i}"), TopologyConfig::router_ip(i)),
            ] {
                let tun = Tun::create("fwan%d").map_err(|e| WanError::io("creating a TUN device (/dev/net/tun)", e))?;
                let kernel_name = tun.name().to_string();
                let file = Arc::new(tun.into_file());
                self.tuns.push(Arc::clone(&file));
                // The one root-namespace operation: move the device just
                // created (named from our pattern) into its namespace.
                netns::ip(["link", "set", "dev", &kernel_name, "netns", ns.as_str()])?;
                netns::ip(["-n", ns.as_str(), "link", "set", "dev", &kernel_name, "name", &name])?;
                let _ = netns::run(netns::exec_in(ns, "sysctl").args([
                    "-q",
                    "-w",
                    &format!("net.ipv6.conf.{name}.disable_ipv6=1"),
                ]));
                netns::ip(["-n", ns.as_str(), "link", "set", "dev", &name, "mtu", &cfg.mtu.to_string()])?;
                netns::ip(["-n", ns.as_str(), "link", "set", "dev", &name, "txqueuelen", "1000"])?;
                netns::ip(["-n", ns.as_str(), "addr", "add", &format!("{addr}/24"), "dev", &name])?;
                netns::ip(["-n", ns.as_str(), "link", "set", "dev", &name, "up"])?;
                ends.push(file);
            }
            // Everything else is behind the router.
            netns::ip(["-n", host.as_str(), "route", "add", "10.78.0.0/16", "dev", DEVICE])?;
            let mut sysctls = vec!["net.ipv4.tcp_no_metrics_save=1".to_string()];
            if cfg.tuned {
                sysctls.push(format!("net.ipv4.tcp_rmem={TUNED_TCP_MEM}"));
                sysctls.push(format!("net.ipv4.tcp_wmem={TUNED_TCP_MEM}"));
            }
            netns::run(netns::exec_in(&host, "sysctl").arg("-q").arg("-w").args(&sysctls))?;
            let up = Forwarder::new(
                Arc::clone(&ends[0]),
                Arc::clone(&ends[1]),
                path,
                path.rate,
                seed ^ (i as u64) << 8,
                Arc::clone(&self.stop),
            );
            let down = Forwarder::new(
                Arc::clone(&ends[1]),
                Arc::clone(&ends[0]),
                path,
                path.rate,
                seed ^ ((i as u64) << 8) ^ 0x5555,
                Arc::clone(&self.stop),
            );
            self.stats.push((Arc::clone(&up.stats), Arc::clone(&down.stats)));
            for (label, fwd) in [(format!("h{i}->router"), up), (format!("router->h{i}"), down)] {
                let handle = std::thread::Builder::new()
                    .name(format!("wan-{label}"))
                    .spawn(move || fwd.run())
                    .map_err(|e| WanError::io("spawning forwarder thread", e))?;
                self.threads.push((label, handle));
            }
        }
        fs::create_dir_all(netns::NETNS_ETC_DIR)
            .map_err(|e| WanError::io(format!("creating {}", netns::NETNS_ETC_DIR), e))?;
        for (k, ns) in all.iter().enumerate() {
            let dir = netns::etc_dir(ns);
            fs::create_dir(&dir).map_err(|e| WanError::io(format!("creating {}", dir.display()), e))?;
            self.etc_dirs.push(ns.clone());
            let own = k.checked_sub(1);
            let hosts = dir.join("hosts");
            fs::write(&hosts, cfg.hosts_file(own))
                .map_err(|e| WanError::io(format!("writing {}", hosts.display()), e))?;
        }
        Ok(())
    }

    pub fn config(&self) -> &TopologyConfig {
        &self.config
    }

    pub fn hosts(&self) -> usize {
        self.config.hosts.len()
    }

    pub fn host_ns(&self, i: usize) -> String {
        self.config.host_ns(i)
    }

    pub fn host_ip(&self, i: usize) -> Ipv4Addr {
        TopologyConfig::host_ip(i)
    }

    /// `program` run inside host `i`'s namespace.
    pub fn command(&self, i: usize, program: &str) -> Command {
        netns::exec_in(&self.host_ns(i), program)
    }

    /// `program` run inside the router's namespace (it reaches every host,
    /// each through that host's link only).
    pub fn router_command(&self, program: &str) -> Command {
        netns::exec_in(&self.config.router_ns(), program)
    }

    /// Runs `f` on a thread inside host `i`'s namespace.
    pub fn run_in<T, F>(&self, i: usize, f: F) -> Result<T, WanError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let ns = self.host_ns(i);
        let handle = crate::link::spawn_in(&ns, f)?;
        handle.join().map_err(|_| WanError::io(format!("probe thread in {ns}"), std::io::Error::other("panicked")))?
    }

    /// Counters of host `i`'s link: (host → router, router → host).
    pub fn stats(&self, i: usize) -> (DirectionSnapshot, DirectionSnapshot) {
        (self.stats[i].0.snapshot(), self.stats[i].1.snapshot())
    }

    /// Ok while every forwarder runs.
    pub fn check(&self) -> Result<(), WanError> {
        for (label, h) in &self.threads {
            if h.is_finished() {
                return Err(WanError::io(format!("forwarder {label}"), std::io::Error::other("its thread exited")));
            }
        }
        Ok(())
    }

    pub fn down(mut self) -> Result<(), WanError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), WanError> {
        self.torn_down = true;
        self.stop.store(true, Ordering::Relaxed);
        for (_, h) in self.threads.drain(..) {
            let _ = h.join();
        }
        self.tuns.clear();
        let mut leftovers = Vec::new();
        for ns in self.namespaces.drain(..).rev() {
            if netns::netns_exists(&ns) {
                if let Err(e) = netns::ip(["netns", "del", ns.as_str()]) {
                    leftovers.push(e.to_string());
                }
            }
        }
        for ns in self.etc_dirs.drain(..).rev() {
            if let Err(e) = netns::remove_hosts_dir(&ns) {
                leftovers.push(format!("{}: {e}", netns::etc_dir(&ns).display()));
            }
        }
        if let Some(state) = self.state_file.take() {
            if let Err(e) = fs::remove_file(&state) {
                leftovers.push(format!("{}: {e}", state.display()));
            }
        }
        if leftovers.is_empty() {
            Ok(())
        } else {
            Err(WanError::Teardown { name: self.config.name.clone(), leftovers: leftovers.join("; ") })
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        if !self.torn_down {
            if let Err(e) = self.teardown() {
                eprintln!("ferry-wan: {e}");
            }
        }
    }
}

/// Whether `ns` is a namespace name a topology called `name` creates
/// (for `ferry-wan down`, which deletes only those).
pub fn owns_namespace(name: &str, ns: &str) -> bool {
    ns == format!("{name}-r")
        || ns.strip_prefix(&format!("{name}-h")).is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn names_addresses_and_hosts_files() {
        let c = TopologyConfig::uniform("st", 3, PathConfig::delay_only(Duration::from_millis(5)));
        c.validate().unwrap();
        assert_eq!(c.host_ns(2), "st-h2");
        assert_eq!(TopologyConfig::host_ip(2), Ipv4Addr::new(10, 78, 2, 2));
        let h = c.hosts_file(Some(1));
        assert!(h.contains("10.78.0.2\tst-h0\n") && h.contains("10.78.2.2\tst-h2\n"), "{h}");
        assert!(owns_namespace("st", "st-r") && owns_namespace("st", "st-h12"));
        assert!(!owns_namespace("st", "st-hx") && !owns_namespace("st", "other") && !owns_namespace("st", "st-h"));
        assert!(TopologyConfig::uniform("bad name", 1, PathConfig::delay_only(Duration::ZERO)).validate().is_err());
        assert!(TopologyConfig::uniform("x", 0, PathConfig::delay_only(Duration::ZERO)).validate().is_err());
    }

    /// Needs root (namespaces); skipped otherwise.
    #[test]
    fn hosts_reach_each_other_through_both_links() {
        if netns::require_root().is_err() {
            eprintln!("skipped: needs root");
            return;
        }
        let name = format!("tt{}", std::process::id() % 100_000);
        let t =
            Topology::up(TopologyConfig::uniform(&name, 2, PathConfig::delay_only(Duration::from_millis(10)))).unwrap();
        let listener = t.run_in(1, || std::net::TcpListener::bind("10.78.1.2:0").unwrap()).unwrap();
        let to = listener.local_addr().unwrap();
        let rtt = t
            .run_in(0, move || {
                let started = Instant::now();
                let _c = std::net::TcpStream::connect(to).unwrap();
                started.elapsed()
            })
            .unwrap();
        // SYN and SYN-ACK each cross both links: 4 × 10 ms.
        assert!(rtt >= Duration::from_millis(40) && rtt < Duration::from_millis(400), "{rtt:?}");
        t.check().unwrap();
        t.down().unwrap();
        assert!(!netns::netns_exists(&format!("{name}-r")));
    }
}
