//! The machine description that goes with every result: results are only
//! comparable with the hardware, kernel, TCP settings and tool versions
//! they were measured with. Every item is best effort; a missing tool
//! shows as "unknown" rather than failing the run.

use std::fs;
use std::path::Path;
use std::process::Command;

fn read(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// Collapses runs of whitespace (tabs in sysctl values, column padding).
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn package_version(pkg: &str) -> String {
    output("dpkg-query", &["-W", "-f=${Version}", pkg]).unwrap_or_else(|| "not installed".into())
}

/// (item, value) rows.
pub fn describe(ferry_bin: &Path, dirs: &[(&str, &Path)], repo: &Path) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut add = |k: &str, v: String| rows.push((k.to_string(), v));

    let os = read("/etc/os-release")
        .and_then(|t| t.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string())))
        .unwrap_or_else(|| "unknown".into());
    let debian = read("/etc/debian_version").map(|v| format!(" ({v})")).unwrap_or_default();
    add("OS", os + &debian);
    add(
        "kernel",
        format!(
            "{} {}",
            read("/proc/sys/kernel/osrelease").unwrap_or_default(),
            read("/proc/sys/kernel/version").unwrap_or_default()
        ),
    );
    let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string()))
        .unwrap_or_else(|| "unknown".into());
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    add("CPU", format!("{cpus} × {model}"));
    let mem = read("/proc/meminfo")
        .and_then(|m| m.lines().find_map(|l| l.strip_prefix("MemTotal:").map(|v| v.trim().to_string())))
        .and_then(|v| v.split_whitespace().next().and_then(|kb| kb.parse::<f64>().ok()))
        .map(|kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0))
        .unwrap_or_else(|| "unknown".into());
    add("memory", mem);
    for (label, dir) in dirs {
        let d = dir.to_string_lossy();
        let fs_info =
            output("findmnt", &["-no", "SOURCE,FSTYPE,SIZE", "--target", &d]).unwrap_or_else(|| "unknown".into());
        add(&format!("{label} ({d})"), fs_info);
    }
    if let Some(blk) = output("lsblk", &["-dno", "NAME,SIZE,ROTA,MODEL"]) {
        add("block devices (name size rotational model)", blk.lines().map(squeeze).collect::<Vec<_>>().join("; "));
    }
    add("TCP congestion control", read("/proc/sys/net/ipv4/tcp_congestion_control").unwrap_or_default());
    add(
        "TCP buffers (root namespace)",
        format!(
            "tcp_rmem {}, tcp_wmem {}, core rmem_max {}, wmem_max {}",
            squeeze(&read("/proc/sys/net/ipv4/tcp_rmem").unwrap_or_default()),
            squeeze(&read("/proc/sys/net/ipv4/tcp_wmem").unwrap_or_default()),
            read("/proc/sys/net/core/rmem_max").unwrap_or_default(),
            read("/proc/sys/net/core/wmem_max").unwrap_or_default()
        ),
    );
    let ferry_version = Command::new(ferry_bin)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let repo_s = repo.to_string_lossy();
    let commit = output("git", &["-C", &repo_s, "rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = output("git", &["-C", &repo_s, "status", "--porcelain", "--untracked-files=no"]).is_some();
    add("Ferry", format!("{ferry_version}, commit {commit}{}", if dirty { " with uncommitted changes" } else { "" }));
    for pkg in [
        "globus-gridftp-server-progs",
        "globus-gass-copy-progs",
        "libglobus-ftp-client2",
        "libglobus-xio-udt-driver",
        "iperf3",
        "fio",
    ] {
        add(pkg, package_version(pkg));
    }
    add("rustc", output("rustc", &["--version"]).unwrap_or_else(|| "unknown".into()));
    rows
}
