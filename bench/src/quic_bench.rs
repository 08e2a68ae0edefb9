//! Scenario `quic` (issue 19): Ferry's encrypted and clear data-channel
//! transports side by side — `quic`, FTPS (`PROT P` over TCP), TCP in
//! clear and `udt` in clear — on loopback, memory to memory, with 1 and 4
//! streams (throughput, CPU seconds per GB at both ends), and across
//! emulated long paths (one-way 30 and 80 ms, 0, 1 and 5 % random loss,
//! untuned hosts with CUBIC, as a site's defaults are) with
//! `globus-url-copy -p 4` beside them. Replaces `scripts/quic-*.sh`.
//!
//! Every Ferry row runs against a `ferry serve` of its own; the encrypted
//! rows' server has a certificate from a throw-away CA made for the run
//! (`openssl`), which the client trusts with `--ca`, and is spoken to as
//! `ftps://` (the harness does so for any Ferry server given
//! `--tls-cert`).

use crate::net::WanPath;
use crate::record::{Comparison, Layout, PlotKind, Role, VariantInfo};
use crate::scenarios::{gb, Action, DataSpec, Dirs, Group, Mode, OwnServer, Plan, Scenario, Stage, Variant};
use crate::servers::ServerKind;
use crate::tools::{ClientKind, Dest};
use ferry_wan::Rate;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const MIB: u64 = 1 << 20;

/// The long paths' rate: what this class of shared 2-core machine forwards
/// in user space while both ends run (docs/udt.md); the 1 Gbit/s
/// needs a faster forwarder or real hardware.
pub const WAN_RATE_BITS: u64 = 150_000_000;

/// Where the throw-away PKI lives (the servers run as root and read it):
/// one directory, reused while its certificate is less than a day old
/// (it is valid for two), so building the scenario (`--list`, tests)
/// leaves no trail of directories.
fn pki_dir() -> PathBuf {
    std::env::temp_dir().join("ferry-bench-quic-pki")
}

/// A CA and a server certificate for 127.0.0.1 and ferry-wan's server
/// address (10.77.0.2), made once per invocation. `None` (with the
/// reason) when openssl fails: the encrypted rows then fail with it.
fn pki() -> Result<PathBuf, String> {
    let d = pki_dir();
    let fresh = std::fs::metadata(d.join("server.pem"))
        .and_then(|m| m.modified())
        .is_ok_and(|t| t.elapsed().is_ok_and(|age| age < Duration::from_secs(86_400)));
    if fresh {
        return Ok(d);
    }
    std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    let run = |args: &[&str]| -> Result<(), String> {
        let out = Command::new("openssl").args(args).current_dir(&d).output().map_err(|e| format!("openssl: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("openssl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)))
        }
    };
    std::fs::write(d.join("ext.cnf"), "subjectAltName=IP:127.0.0.1,IP:10.77.0.2\nextendedKeyUsage=serverAuth\n")
        .map_err(|e| e.to_string())?;
    run(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=ferry-bench CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=keyCertSign",
    ])?;
    run(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=ferry-bench server",
    ])?;
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ])?;
    Ok(d)
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// The transports of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    Quic,
    /// `quic` with `ferry cp --path-rate` at the link's rate (long paths
    /// only): the client announces it (`OPTS TPRT Rate=N;`) and the
    /// server's sender starts there instead of ramping up cold — the A/B
    /// of session 5's start-up. (Session 4's row with quinn's datagram
    /// sizes, `FERRY_QUIC_MTU=default`, went with that switch;
    /// `bench/results/quic-s4-quiet/` holds its A/B.)
    QuicPathRate,
    Ftps,
    Tcp,
    Udt,
    /// `udt` under `PROT P`: AES-256-GCM records keyed from the control
    /// channel's TLS exporter (docs/udt.md, "Encryption after PROT P").
    UdtSealed,
}

impl Row {
    pub const ALL: [Row; 6] = [Row::Quic, Row::QuicPathRate, Row::Ftps, Row::Tcp, Row::Udt, Row::UdtSealed];

    pub fn id(self) -> &'static str {
        match self {
            Row::Quic => "quic",
            Row::QuicPathRate => "quic-path-rate",
            Row::Ftps => "ftps",
            Row::Tcp => "tcp",
            Row::Udt => "udt",
            Row::UdtSealed => "udt-prot-p",
        }
    }

    fn label(self, streams: u32) -> String {
        match self {
            Row::Quic => format!("ferry quic -p {streams}"),
            Row::QuicPathRate => format!("ferry quic -p {streams} --path-rate (the link's)"),
            Row::Ftps => format!("ferry FTPS (PROT P) -p {streams}"),
            Row::Tcp => format!("ferry TCP clear -p {streams}"),
            Row::Udt => format!("ferry udt clear -p {streams}"),
            Row::UdtSealed => format!("ferry udt PROT P (AES-GCM) -p {streams}"),
        }
    }

    pub fn encrypted(self) -> bool {
        matches!(self, Row::Quic | Row::QuicPathRate | Row::Ftps | Row::UdtSealed)
    }

    /// `ferry serve` and `ferry cp` flags (`QuicPathRate`: without the
    /// rate, which [`variant`] adds).
    pub fn flags(self, streams: u32, pki: &Path) -> (Vec<String>, Vec<String>) {
        let tls = format!("--tls-cert {0}/server.pem --tls-key {0}/server.key", pki.display());
        let ca = format!("--ca {}/ca.pem", pki.display());
        let cp = format!("--mode extended -p {streams}");
        let (serve, cp) = match self {
            Row::Quic | Row::QuicPathRate => (tls, format!("{cp} {ca} --transport quic")),
            Row::Ftps => (tls, format!("{cp} {ca} --transport tcp")),
            Row::Tcp => (String::new(), format!("{cp} --transport tcp")),
            Row::Udt => (String::new(), format!("{cp} --transport udt")),
            Row::UdtSealed => (tls, format!("{cp} {ca} --transport udt")),
        };
        (words(&serve), words(&cp))
    }
}

/// `path_rate`: the link's rate in bytes/s (long paths), for `QuicPathRate`.
fn variant(row: Row, streams: u32, pki: &Path, source: &Path, bytes: u64, path_rate: Option<u64>) -> Variant {
    let (serve_flags, mut flags) = row.flags(streams, pki);
    if let (Row::QuicPathRate, Some(r)) = (row, path_rate) {
        flags.extend(["--path-rate".to_string(), r.to_string()]);
    }
    let env = vec![];
    let o = OwnServer { serve_flags, env, flags, source: source.into(), dest: Dest::DevNull, bytes, old: false };
    Variant {
        info: VariantInfo {
            id: format!("{}-{streams}", row.id()),
            label: row.label(streams),
            role: Role::Ferry,
            series: format!("ferry {}", row.id()),
            not_applicable: None,
        },
        action: Action::OwnFerryServer(Box::new(o)),
        cold: false,
        sync_after: false,
    }
}

fn globus(source: &Path, bytes: u64) -> Variant {
    Variant {
        info: VariantInfo {
            id: "guc-4".into(),
            label: "globus-url-copy -p 4 (clear)".into(),
            role: Role::Globus,
            series: "globus-url-copy -p 4".into(),
            not_applicable: None,
        },
        action: Action::Transfer {
            client: ClientKind::GlobusUrlCopy,
            server: ServerKind::Globus,
            flags: words("-p 4"),
            source: source.into(),
            dest: Dest::DevNull,
            bytes,
            files: 1,
            setup_source: None,
        },
        cold: false,
        sync_after: false,
    }
}

/// A row run by the `--ferry-old` build at both ends (same flags): the
/// new-against-old A/B in the same run (`quic`: session 6, the pacer below
/// quinn; `udt`: session 9, the loopback `-p 4` rows).
fn old_row(row: Row, streams: u32, pki: &Path, source: &Path, bytes: u64) -> Variant {
    let mut v = variant(row, streams, pki, source, bytes, None);
    v.info.id = format!("{}-old-{streams}", row.id());
    v.info.label = format!("{}, old build (--ferry-old)", row.label(streams));
    v.info.series = format!("ferry {} (old build)", row.id());
    if let Action::OwnFerryServer(o) = &mut v.action {
        o.old = true;
    }
    v
}

/// One group per stream count: every transport, QUIC compared with FTPS
/// (the ratio), and on long paths (`path_rate`: the link's rate,
/// bytes/s) with Globus and QUIC started at the link's rate too; `old`:
/// with the `quic` and `udt` rows of the `--ferry-old` build.
fn groups(
    prefix: &str,
    label: &str,
    pki: &Path,
    source: &Path,
    bytes: u64,
    path_rate: Option<u64>,
    old: bool,
) -> Vec<Group> {
    let with_globus = path_rate.is_some();
    [1u32, 4]
        .into_iter()
        .map(|p| {
            let mut variants: Vec<Variant> = Row::ALL
                .iter()
                .filter(|r| **r != Row::QuicPathRate || path_rate.is_some())
                .map(|r| variant(*r, p, pki, source, bytes, path_rate))
                .collect();
            let mut comparisons = vec![
                Comparison::rate(&format!("quic-{p}"), &format!("ftps-{p}")),
                Comparison::rate(&format!("udt-prot-p-{p}"), &format!("ftps-{p}")),
            ];
            if path_rate.is_some() {
                comparisons.push(Comparison::rate(&format!("quic-path-rate-{p}"), &format!("ftps-{p}")));
                comparisons.push(Comparison::rate(&format!("quic-path-rate-{p}"), &format!("quic-{p}")));
            }
            if old {
                variants.insert(1, old_row(Row::Quic, p, pki, source, bytes));
                comparisons.push(Comparison::rate(&format!("quic-{p}"), &format!("quic-old-{p}")));
                comparisons.push(Comparison::rate(&format!("quic-old-{p}"), &format!("ftps-{p}")));
                // the udt row's twin right after it (same row order for both)
                let at =
                    variants.iter().position(|v| v.info.id == format!("udt-{p}")).map_or(variants.len(), |i| i + 1);
                variants.insert(at, old_row(Row::Udt, p, pki, source, bytes));
                comparisons.push(Comparison::rate(&format!("udt-{p}"), &format!("udt-old-{p}")));
            }
            if with_globus && p == 4 {
                variants.push(globus(source, bytes));
                comparisons.push(Comparison::rate("quic-4", "guc-4"));
                comparisons.push(Comparison::rate("ftps-4", "guc-4"));
            }
            Group {
                id: format!("{prefix}-p{p}"),
                label: format!("{label}, {p} stream(s)"),
                x: None,
                variants,
                comparisons,
            }
        })
        .collect()
}

/// Sizes: loopback bytes, long-path bytes.
pub fn sizes(mode: Mode) -> (u64, u64) {
    match mode {
        Mode::Quick => (64 * MIB, 16 * MIB),
        Mode::Full => (1024 * MIB, 128 * MIB),
    }
}

/// The long paths: one-way delay and loss.
pub fn paths() -> Vec<(u64, f64)> {
    let mut v = Vec::new();
    for ms in [30, 80] {
        for loss in [0.0, 0.01, 0.05] {
            v.push((ms, loss));
        }
    }
    v
}

pub fn quic(plan: &Plan, dirs: &Dirs) -> Scenario {
    quic_with(plan, dirs, true)
}

/// `wan`: with the long-path stages (the smoke test leaves them out).
pub fn quic_with(plan: &Plan, dirs: &Dirs, wan: bool) -> Scenario {
    let (lo_bytes, wan_bytes) = sizes(plan.mode);
    let lo_src = dirs.shm_data().join(format!("quic-{}.bin", gb(lo_bytes).replace(' ', "")));
    let wan_src = dirs.shm_data().join(format!("quic-wan-{}.bin", gb(wan_bytes).replace(' ', "")));
    let pki = match pki() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("ferry-bench: quic: no test PKI ({e}); the encrypted rows will fail");
            pki_dir()
        }
    };
    let mut stages = vec![Stage {
        wan: None,
        ferry_root: dirs.shm_data(),
        groups: groups("lo", "loopback, tmpfs to /dev/null", &pki, &lo_src, lo_bytes, None, plan.with_old),
    }];
    let mut data = vec![DataSpec::File { path: lo_src.clone(), size: lo_bytes }];
    if wan {
        for (ms, loss) in paths() {
            let path = WanPath {
                rate: Rate::from_bits_per_second(WAN_RATE_BITS),
                loss,
                tuned: false,
                congestion: Some("cubic".into()),
                ..WanPath::gbit(Duration::from_millis(ms))
            };
            let pct = (loss * 100.0).round() as u32;
            stages.push(Stage {
                wan: Some(path),
                ferry_root: dirs.shm_data(),
                groups: groups(
                    &format!("{ms}ms-{pct}"),
                    &format!("{ms} ms, {pct} % loss"),
                    &pki,
                    &wan_src,
                    wan_bytes,
                    Some(WAN_RATE_BITS / 8),
                    plan.with_old,
                ),
            });
        }
        data.push(DataSpec::File { path: wan_src, size: wan_bytes });
    }
    Scenario {
        name: "quic",
        number: "13",
        title: "QUIC data channels against FTPS, TCP and UDT (issue 19)".into(),
        description: format!(
            "Ferry's data-channel transports, one `ferry serve` per row: `quic` (TLS 1.3, the `ferry` \
             rate-based controller), FTPS (`ftps://`, `PROT P` over TCP), TCP in clear, `udt` in clear \
             and `udt` under `PROT P` (AES-256-GCM records keyed from the control channel's TLS exporter), MODE E with 1 and 4 streams, and on the long paths `quic` again with \
             `ferry cp --path-rate` at the link's rate (the client announces it with `OPTS TPRT Rate=N;` and the \
             server's QUIC sender starts there instead of ramping up cold). The encrypted rows' server certificate comes \
             from a CA made for the run; the client trusts it with `--ca`. Loopback: one {} file from tmpfs to \
             `/dev/null` (throughput and CPU seconds per GB at both ends; the issue's target is QUIC's CPU per \
             GB ≤ 1.5 × FTPS's). Long paths (with `wan`): one {} file across ferry-wan at {} Mbit/s — what a \
             shared 2-core machine forwards in user space while both ends run, not the issue's 1 Gbit/s — \
             one-way 30 and 80 ms, 0, 1 and 5 % random loss each way, untuned hosts (the namespaces' default \
             TCP buffers) whose TCP congestion control is CUBIC (`cubic` is added to the root namespace's \
             `net.ipv4.tcp_allowed_congestion_control` only while the namespaces are set, then the old list \
             is restored), with `globus-url-copy -p 4` against `globus-gridftp-server` (clear) beside them. The \
             issue's long-path target: at 80 ms and 1 % loss, QUIC ≥ 0.8 × the link and ≥ 2 × FTPS.",
            gb(lo_bytes),
            gb(wan_bytes),
            WAN_RATE_BITS / 1_000_000,
        ),
        layout: Layout::Throughput,
        plot: PlotKind::Bars,
        reps: if wan { plan.reps_wan } else { plan.reps_local },
        data,
        stages,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Meta, Recorder};
    use crate::runner::{Runner, Settings};

    /// The scenario end to end on loopback with 4 MiB per row (10 rows, one
    /// repetition): every transport moves the bytes. Needs the `ferry`
    /// binary beside this test's (`cargo build -p ferry` first); skipped,
    /// saying so, without it.
    #[test]
    fn smoke_loopback_every_transport_moves_the_bytes() {
        let exe = std::env::current_exe().unwrap();
        let ferry = exe.parent().and_then(Path::parent).map(|d| d.join("ferry")).unwrap();
        if !ferry.exists() {
            eprintln!("skipped: {} not built", ferry.display());
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dirs = Dirs { shm: tmp.path().join("shm"), disk: tmp.path().join("disk") };
        for d in [dirs.shm_data(), dirs.shm_out(), dirs.disk_data(), dirs.out(), dirs.disk.join("logs")] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut plan = Plan::new(Mode::Quick);
        plan.reps_local = 1;
        let mut sc = quic_with(&plan, &dirs, false);
        let src = dirs.shm_data().join("quic-smoke.bin");
        sc.data = vec![DataSpec::File { path: src.clone(), size: 4 * MIB }];
        for g in &mut sc.stages[0].groups {
            for v in &mut g.variants {
                if let Action::OwnFerryServer(o) = &mut v.action {
                    o.source = src.clone();
                    o.bytes = 4 * MIB;
                }
            }
        }
        let runs = tmp.path().join("runs.jsonl");
        let meta = Meta { started: String::new(), command: "smoke".into(), mode: "quick".into(), machine: vec![] };
        let mut recorder = Recorder::open(&runs, &["quic"], meta).unwrap();
        let settings = Settings {
            ferry_bin: ferry,
            ferry_old: None,
            dirs: dirs.clone(),
            keep_data: false,
            command: "smoke".into(),
            mode: Mode::Quick,
        };
        Runner { settings: &settings, recorder: &mut recorder }.run(&sc).unwrap();
        drop(recorder);
        let text = std::fs::read_to_string(&runs).unwrap();
        let rows: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["kind"] == "run" && v["phase"] != "setup")
            .collect();
        for id in
            ["quic-1", "ftps-1", "tcp-1", "udt-1", "udt-prot-p-1", "quic-4", "ftps-4", "tcp-4", "udt-4", "udt-prot-p-4"]
        {
            let r = rows.iter().find(|r| r["variant"] == id).unwrap_or_else(|| panic!("no record of {id}: {text}"));
            assert_eq!(r["outcome"], "ok", "{id}: {r}");
            assert_eq!(r["bytes"], 4 * MIB, "{id}");
        }
        let quic = rows.iter().find(|r| r["variant"] == "quic-1").unwrap();
        assert!(quic["command"].as_str().unwrap().contains("ftps://"), "{quic}");
    }

    #[test]
    fn every_row_asks_for_its_transport_and_only_encrypted_rows_get_tls() {
        let pki = Path::new("/p");
        for r in Row::ALL {
            let (serve, cp) = r.flags(4, pki);
            assert_eq!(serve.contains(&"--tls-cert".to_string()), r.encrypted(), "{r:?}");
            assert_eq!(cp.contains(&"--ca".to_string()), r.encrypted(), "{r:?}");
            let t = cp.iter().position(|f| f == "--transport").unwrap();
            let want = match r {
                Row::Ftps => "tcp",
                Row::QuicPathRate => "quic",
                Row::UdtSealed => "udt",
                _ => r.id(),
            };
            assert_eq!(cp[t + 1], want);
            assert!(cp.windows(2).any(|w| w[0] == "-p" && w[1] == "4"));
        }
    }

    #[test]
    fn six_long_paths_at_150_mbit() {
        assert_eq!(paths().len(), 6);
        assert!(paths().contains(&(80, 0.01)));
        assert!(sizes(Mode::Quick).0 < sizes(Mode::Full).0);
    }
}
