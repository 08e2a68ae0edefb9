//! Namespace plumbing through iproute2 (`ip`, `tc`, `sysctl` inside `ip netns
//! exec`) and the small files that go with a link: per-namespace hosts files
//! and the record in `/run/ferry-wan` that lets `ferry-wan down` clean up after
//! a process that was killed with SIGKILL.
//!
//! Shelling out to `ip` instead of speaking rtnetlink keeps the set-up
//! readable as the same commands an operator would type, and every command
//! that configures a device names a namespace explicitly (`ip -n NS ...`,
//! `tc -n NS ...`), so nothing here can configure the root namespace by
//! accident. The only root-namespace operation is moving our freshly created
//! TUN device out of it.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::config::LinkConfig;
use crate::WanError;

/// Where `ip netns add` puts its bind mounts.
pub const NETNS_RUN_DIR: &str = "/run/netns";
/// Where `ip netns exec` looks for per-namespace files to bind over `/etc`.
pub const NETNS_ETC_DIR: &str = "/etc/netns";
/// Where live links are recorded.
pub const STATE_DIR: &str = "/run/ferry-wan";
/// The name of each TUN device once it sits in its namespace.
pub const DEVICE: &str = "wan0";

/// Fails with [`WanError::NotRoot`] unless the effective user is root.
pub fn require_root() -> Result<(), WanError> {
    let status = fs::read_to_string("/proc/self/status").map_err(|e| WanError::io("reading /proc/self/status", e))?;
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u32>().ok());
    match euid {
        Some(0) => Ok(()),
        _ => Err(WanError::NotRoot),
    }
}

/// Fails with [`WanError::MissingProgram`] unless `program` is on `PATH`.
pub fn require_program(program: &'static str) -> Result<(), WanError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found =
        std::env::split_paths(&path).chain(["/usr/sbin".into(), "/sbin".into()]).any(|dir| dir.join(program).is_file());
    if found {
        Ok(())
    } else {
        Err(WanError::MissingProgram(program))
    }
}

/// Runs a command to completion, turning a non-zero exit into an error that
/// carries its stderr.
pub fn run(cmd: &mut Command) -> Result<(), WanError> {
    let shown = format!("{cmd:?}").replace('"', "");
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| WanError::io(format!("running {shown}"), e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(WanError::Command {
            command: shown,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Runs `ip ARGS...`.
pub fn ip<I, S>(args: I) -> Result<(), WanError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    run(Command::new("ip").args(args))
}

/// A command that will run inside namespace `ns`.
pub fn exec_in(ns: &str, program: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, program]);
    c
}

/// The bind-mount file of a namespace.
pub fn netns_path(ns: &str) -> PathBuf {
    Path::new(NETNS_RUN_DIR).join(ns)
}

pub fn netns_exists(ns: &str) -> bool {
    netns_path(ns).exists()
}

/// The per-namespace `/etc` overlay directory.
pub fn etc_dir(ns: &str) -> PathBuf {
    Path::new(NETNS_ETC_DIR).join(ns)
}

/// The record of a live link.
pub fn state_file(name: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("{name}.pid"))
}

/// The hosts file for namespace `own_ns`. Programs that reverse-resolve
/// their peers or their own address (the Globus GridFTP server aborts if it
/// cannot) would otherwise wait for a DNS server no namespace can reach.
/// The machine's hostname is an alias of the namespace's own address, so that
/// resolving `gethostname()` also stays local.
pub fn hosts_file(config: &LinkConfig, own_is_client: bool) -> String {
    let hostname = fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    let alias = |mine: bool| {
        if mine && !hostname.is_empty() && hostname != "localhost" {
            format!(" {hostname}")
        } else {
            String::new()
        }
    };
    let mut s = String::new();
    let _ = writeln!(s, "# Written by ferry-wan for link {:?}; removed when the link goes down.", config.name);
    let _ = writeln!(s, "127.0.0.1\tlocalhost");
    let _ = writeln!(s, "::1\tlocalhost ip6-localhost ip6-loopback");
    let _ = writeln!(s, "{}\t{}{}", config.client_addr.addr, config.client_ns(), alias(own_is_client));
    let _ = writeln!(s, "{}\t{}{}", config.server_addr.addr, config.server_ns(), alias(!own_is_client));
    s
}

/// What the state file records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkRecord {
    pub pid: u32,
    pub namespaces: Vec<String>,
}

impl LinkRecord {
    pub fn render(&self) -> String {
        let mut s = format!("pid={}\n", self.pid);
        for ns in &self.namespaces {
            let _ = writeln!(s, "netns={ns}");
        }
        s
    }

    pub fn parse(text: &str) -> Option<LinkRecord> {
        let mut pid = None;
        let mut namespaces = Vec::new();
        for line in text.lines() {
            match line.split_once('=') {
                Some(("pid", v)) => pid = v.trim().parse().ok(),
                Some(("netns", v)) => namespaces.push(v.trim().to_string()),
                _ => {}
            }
        }
        Some(LinkRecord { pid: pid?, namespaces })
    }
}

/// True if a process with this PID exists.
pub fn process_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes a link whose owning process has died: deletes exactly the
/// namespaces its record lists (and their hosts files), then the record.
/// Refuses while the owner is alive unless `force`.
pub fn down(name: &str, force: bool) -> Result<Vec<String>, WanError> {
    require_root()?;
    let path = state_file(name);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(WanError::UnknownLink(name.to_string())),
        Err(e) => return Err(WanError::io(format!("reading {}", path.display()), e)),
    };
    let record = LinkRecord::parse(&text)
        .ok_or_else(|| WanError::InvalidConfig(format!("{} is not a ferry-wan record", path.display())))?;
    if record.pid != std::process::id() && process_alive(record.pid) && !force {
        return Err(WanError::LinkInUse { name: name.to_string(), pid: record.pid });
    }
    let mut removed = Vec::new();
    let mut leftovers = Vec::new();
    for ns in &record.namespaces {
        // Only names of the form this tool creates, so a tampered record
        // cannot make us delete an unrelated namespace.
        if !(ns == &format!("{name}-c") || ns == &format!("{name}-s") || crate::topology::owns_namespace(name, ns)) {
            leftovers.push(format!("{ns} (not a name of this link; left alone)"));
            continue;
        }
        if netns_exists(ns) {
            match ip(["netns", "del", ns]) {
                Ok(()) => removed.push(format!("netns {ns}")),
                Err(e) => leftovers.push(e.to_string()),
            }
        }
        if remove_hosts_dir(ns).is_ok_and(|r| r) {
            removed.push(format!("{}", etc_dir(ns).display()));
        }
    }
    if leftovers.is_empty() {
        let _ = fs::remove_file(&path);
        Ok(removed)
    } else {
        Err(WanError::Teardown { name: name.to_string(), leftovers: leftovers.join("; ") })
    }
}

/// Removes `/etc/netns/NS/hosts` if we wrote it, then the directory if empty.
/// Returns whether anything was removed.
pub fn remove_hosts_dir(ns: &str) -> std::io::Result<bool> {
    let dir = etc_dir(ns);
    let hosts = dir.join("hosts");
    let mut removed = false;
    if let Ok(text) = fs::read_to_string(&hosts) {
        if text.starts_with("# Written by ferry-wan") {
            fs::remove_file(&hosts)?;
            removed = true;
        }
    }
    if dir.exists() {
        // remove_dir refuses a non-empty directory, which is what we want:
        // anything else in there was put there by someone else.
        fs::remove_dir(&dir)?;
        removed = true;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PathConfig;
    use std::time::Duration;

    #[test]
    fn record_round_trip() {
        let r = LinkRecord { pid: 42, namespaces: vec!["x-c".into(), "x-s".into()] };
        assert_eq!(LinkRecord::parse(&r.render()), Some(r));
        assert_eq!(LinkRecord::parse("garbage"), None);
    }

    #[test]
    fn hosts_file_names_both_ends() {
        let c = LinkConfig::new("lnk", PathConfig::delay_only(Duration::ZERO));
        let h = hosts_file(&c, true);
        assert!(h.starts_with("# Written by ferry-wan"));
        assert!(h.contains("10.77.0.1\tlnk-c"));
        assert!(h.contains("10.77.0.2\tlnk-s"));
    }
}
