//! Issue 18's benchmark: thousands of small files, downloads and uploads,
//! on loopback and across `ferry-wan` at 1 Gbit/s, Ferry beside Globus,
//! lftp and rclone (`ferry-small-files`, bench/README.md).
//!
//! What a row reports is **files per second** and the split between
//! connection time and data time, as the FTP-ADTS paper did. The split is
//! the `small` scenario's (scenario 6): every row also runs, once per
//! case, with the same flags on a tree of one 1-byte file; that run's wall
//! time is the command's fixed cost ("set-up s": process start,
//! connection, login, negotiation, one listing, one data channel), and
//! "data s" is the row's wall time minus it.
//!
//! Rows that would take hours (Globus `-r` pays about seven round trips a
//! file: 20,000 files at 80 ms) run on a time limit: the client is killed
//! when it runs out and the row reports files per second over the files
//! that arrived complete (the destination is counted: a file counts when
//! it has its full size under its final name; Ferry's and lftp's partial
//! names do not match, Globus writes in place, so for it the file being
//! written may be counted one early).
//!
//! Everything is one process run at a time, no repetitions by default:
//! the ratios that matter (Ferry ÷ the best Globus row) come from rows of
//! the same case run back to back, and the load average is recorded
//! beside every figure.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ferry_wan::Side;
use serde::{Deserialize, Serialize};

use crate::data::{self, Tree, KIB};
use crate::error::{interrupt, BenchError, Result};
use crate::net::{format_delay, Net, WanPath};
use crate::plot::{self, Series};
use crate::proc::{command_line, Spawned};
use crate::record::Role;
use crate::servers::Server;
use crate::stats::Summary;

/// rclone's `obscure` of "anonymous" (its FTP backend wants the password
/// obscured; anonymous servers accept any).
const RCLONE_PASS: &str = "CCmEnZgTMFb7DjQGraVFSemm9sc1Cz1u1A";

/// A tree of the benchmark: a name, and its files' sizes.
#[derive(Debug, Clone)]
pub struct TreeSpec {
    pub name: String,
    pub sizes: Vec<u64>,
}

impl TreeSpec {
    pub fn bytes(&self) -> u64 {
        self.sizes.iter().sum()
    }
}

/// The issue's three trees: 2,000 × 256 KiB, 20,000 × 4 KiB, and a mixed
/// tree whose sizes follow Zipf's law by rank with a mean of about 1 MB
/// (`mixed_files` files; the largest is then mean × n / H(n)).
pub fn issue_trees(scale: usize, mixed_files: usize) -> Vec<TreeSpec> {
    let scale = scale.max(1);
    vec![
        TreeSpec { name: format!("{}x256KiB", 2000 / scale), sizes: vec![256 * KIB; 2000 / scale] },
        TreeSpec { name: format!("{}x4KiB", 20_000 / scale), sizes: vec![4 * KIB; 20_000 / scale] },
        TreeSpec {
            name: format!("mixed{}", mixed_files / scale),
            sizes: data::zipf_sizes(mixed_files / scale, 1.0, 1_000_000),
        },
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Direction {
    Download,
    Upload,
}

impl Direction {
    fn name(self) -> &'static str {
        match self {
            Direction::Download => "download",
            Direction::Upload => "upload",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Ferry,
    /// `ferry cp` against a `ferry serve --no-batch`: the pipelined path
    /// (one command per file) beside the batch (docs/batch.md).
    FerryPipelined,
    Globus,
    Lftp,
    Rclone,
    /// `ferry cp -r` of a directory holding one file of the tree's bytes:
    /// what the path gives the same bytes without any per-file cost (the
    /// issue's target where the link caps: a tree at ≥ 0.9× of it). Its
    /// files/s is the tree's file count over its time.
    OneFile,
    /// The `ferry` row's command with the old build (`--ferry-old`) as both
    /// client and server, run right after the `ferry` row of a case (right
    /// before it in every other case), so that new ÷ old comes from one
    /// invocation.
    FerryOld,
}

/// The twin of the `ferry` row for `--ferry-old`.
pub fn ferry_old_row() -> Row {
    row("ferry-old", "ferry cp -r (automatic), old build", Tool::FerryOld, "-r")
}

/// One row: a tool with its flags.
#[derive(Debug, Clone)]
pub struct Row {
    pub id: String,
    pub label: String,
    pub tool: Tool,
    pub flags: Vec<String>,
}

fn row(id: &str, label: &str, tool: Tool, flags: &str) -> Row {
    Row { id: id.into(), label: label.into(), tool, flags: flags.split_whitespace().map(String::from).collect() }
}

/// The issue's rows. `ferry_fixed` is the "fixed settings" row's flags.
pub fn issue_rows(ferry_fixed: &str) -> Vec<Row> {
    vec![
        row("ferry", "ferry cp -r (automatic)", Tool::Ferry, "-r"),
        row("ferry-fixed", &format!("ferry cp -r {ferry_fixed}"), Tool::Ferry, &format!("-r {ferry_fixed}")),
        row("ferry-pipelined", "ferry cp -r (serve --no-batch: pipelined)", Tool::FerryPipelined, "-r"),
        row("one-file", "same bytes as one file (ferry cp)", Tool::OneFile, "-r"),
        row("guc-r", "globus-url-copy -r", Tool::Globus, "-r -cd"),
        row("guc-pp", "globus-url-copy -r -pp", Tool::Globus, "-r -cd -pp"),
        row("guc-pp-cc4", "globus-url-copy -r -pp -cc 4", Tool::Globus, "-r -cd -pp -cc 4"),
        row("guc-pp-cc8", "globus-url-copy -r -pp -cc 8", Tool::Globus, "-r -cd -pp -cc 8"),
        row("guc-fast-p4-pp", "globus-url-copy -r -fast -p 4 -pp", Tool::Globus, "-r -cd -fast -p 4 -pp"),
        row("lftp", "lftp mirror --parallel=8 (ferry serve)", Tool::Lftp, "--parallel=8"),
        row("rclone", "rclone copy --transfers 8 (ferry serve)", Tool::Rclone, "--transfers 8"),
    ]
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Setup {
    pub ferry: PathBuf,
    /// An older `ferry` build: when set, a `ferry-old` row (this binary as
    /// server and client, the `ferry` row's flags) goes beside every `ferry` row.
    pub ferry_old: Option<PathBuf>,
    /// Sources, destinations and logs (on disk).
    pub work: PathBuf,
    /// Where runs.jsonl, README.md and the plots go.
    pub out: PathBuf,
    /// One-way delays; `None` is loopback.
    pub delays: Vec<Option<Duration>>,
    pub trees: Vec<TreeSpec>,
    pub directions: Vec<Direction>,
    pub rows: Vec<Row>,
    /// A run is killed after this and reports what it finished.
    pub time_limit: Duration,
    /// The exact command, for the page.
    pub command: String,
}

/// One measured run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sample {
    /// "loopback" or "N ms".
    pub path: String,
    pub delay_ms: Option<f64>,
    /// Median TCP connect RTT across the path, ms.
    pub rtt_ms: Option<f64>,
    pub tree: String,
    pub direction: Direction,
    pub row: String,
    pub label: String,
    pub files: u64,
    pub files_done: u64,
    pub bytes_done: u64,
    /// Wall clock of the client process (or the time limit).
    pub wall_s: f64,
    /// Wall clock of the same command on a one-file tree.
    pub setup_s: Option<f64>,
    pub timed_out: bool,
    pub error: Option<String>,
    /// /proc/loadavg's 1-minute figure just before the run.
    pub load_before: f64,
    pub load_after: f64,
    pub command: String,
}

impl Sample {
    /// " ERROR <tail of the error>" for a row's log line, or nothing.
    fn error_suffix(&self) -> String {
        self.error.as_ref().map(|e| format!(" ERROR {}", crate::proc::tail(e, 200))).unwrap_or_default()
    }

    pub fn files_per_s(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.files_done as f64 / self.wall_s
        } else {
            0.0
        }
    }
}

fn load1() -> f64 {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

fn io_err(what: &str, p: &Path) -> impl FnOnce(std::io::Error) -> BenchError {
    let what = format!("{what} {}", p.display());
    move |e| BenchError::io(what, e)
}

/// A directory everyone may write (the Globus server runs as nobody).
fn open_dir(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(io_err("creating", dir))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).map_err(io_err("chmod", dir))
}

/// Calls `f` with the path and metadata (not following links) of every
/// entry under `dir` that is not a directory, descending into every
/// directory; hidden names (a leading `.`), directories included, are
/// left out when `skip_hidden`. Unreadable entries are skipped: what the
/// callers count or clean up is what they can see.
fn walk_files(dir: &Path, skip_hidden: bool, mut f: impl FnMut(&Path, &fs::Metadata)) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            if skip_hidden && e.file_name().as_encoded_bytes().starts_with(b".") {
                continue;
            }
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                f(&e.path(), &m);
            }
        }
    }
}

/// Files under `dir` (recursively, hidden names left out) whose name and
/// size are those of a file of `tree`: what arrived complete.
pub fn count_done(dir: &Path, tree: &TreeSpec) -> (u64, u64) {
    let (mut files, mut bytes) = (0, 0);
    walk_files(dir, true, |p, m| {
        let idx = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix('f'))
            .and_then(|r| r.strip_suffix(".dat"))
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| n.checked_sub(1));
        if idx.and_then(|i| tree.sizes.get(i)) == Some(&m.len()) {
            files += 1;
            bytes += m.len();
        }
    });
    (files, bytes)
}

struct Servers {
    ferry: Server,
    /// The old build's server, for the `ferry-old` row.
    ferry_old: Option<Server>,
    /// `--no-batch`, for the pipelined row.
    ferry_pipelined: Option<Server>,
    globus: Option<Server>,
}

/// The command of `row` moving `src` to `dst` (each a local path or a path
/// under the server's root, by direction).
fn command(
    setup: &Setup,
    net: &Net,
    servers: &Servers,
    row: &Row,
    dir: Direction,
    remote: &Path,
    local: &Path,
) -> Result<Command> {
    let local_s = local.display().to_string();
    let cmd = match row.tool {
        Tool::Ferry | Tool::FerryPipelined | Tool::OneFile | Tool::FerryOld => {
            let server = match row.tool {
                Tool::FerryPipelined => servers
                    .ferry_pipelined
                    .as_ref()
                    .ok_or_else(|| BenchError::Precondition("the --no-batch server is not running".into()))?,
                Tool::FerryOld => servers
                    .ferry_old
                    .as_ref()
                    .ok_or_else(|| BenchError::Precondition("the --ferry-old server is not running".into()))?,
                _ => &servers.ferry,
            };
            let url = server.url(&slash(remote))?;
            let client = match (row.tool, &setup.ferry_old) {
                (Tool::FerryOld, Some(old)) => old,
                _ => &setup.ferry,
            };
            let mut c = net.command(Side::Client, &client.to_string_lossy());
            c.args(["cp", "--json", "--no-resume", "-q"]).args(&row.flags);
            match dir {
                Direction::Download => c.arg(url).arg(slash(local)),
                Direction::Upload => c.arg(slash(local)).arg(url),
            };
            c
        }
        Tool::Globus => {
            let g = servers
                .globus
                .as_ref()
                .ok_or_else(|| BenchError::Precondition("the Globus server is not running".into()))?;
            let url = g.url(&slash(remote))?;
            let file = format!("file://{}/", local_s);
            let mut c = net.command(Side::Client, "globus-url-copy");
            c.args(&row.flags);
            match dir {
                Direction::Download => c.arg(url).arg(file),
                Direction::Upload => c.arg(file).arg(url),
            };
            c
        }
        Tool::Lftp => {
            let s = &servers.ferry;
            let rel = remote.strip_prefix(&s.root).unwrap_or(remote).display().to_string();
            let mirror = match dir {
                Direction::Download => format!("mirror {} /{rel}/ {local_s}/", row.flags.join(" ")),
                Direction::Upload => format!("mirror -R {} {local_s}/ /{rel}/", row.flags.join(" ")),
            };
            let script = format!(
                "set ftp:ssl-allow no; set net:max-retries 2; set net:reconnect-interval-base 1; \
                 open -u anonymous,ferry -p {} {}; {mirror}",
                s.port, s.ip
            );
            let mut c = net.command(Side::Client, "lftp");
            c.arg("-c").arg(script);
            c
        }
        Tool::Rclone => {
            let s = &servers.ferry;
            let rel = remote.strip_prefix(&s.root).unwrap_or(remote).display().to_string();
            let mut c = net.command(Side::Client, "rclone");
            c.args(["copy", "--config", "/dev/null", "--ftp-host"]).arg(s.ip.to_string());
            c.args(["--ftp-port", &s.port.to_string(), "--ftp-user", "anonymous", "--ftp-pass", RCLONE_PASS]);
            c.args(&row.flags);
            let remote_spec = format!(":ftp:{rel}");
            match dir {
                Direction::Download => c.arg(remote_spec).arg(&local_s),
                Direction::Upload => c.arg(&local_s).arg(remote_spec),
            };
            c
        }
    };
    Ok(cmd)
}

/// Where the one-file version of the tree in `src_dir` lives.
fn as_one_dir(src_dir: &Path) -> PathBuf {
    let name = src_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    src_dir.with_file_name(format!("{name}-as-one"))
}

/// Retires a row's destination without freeing its inodes: every file is
/// truncated to nothing (its blocks go back at once) and the directory is
/// moved into `trash`, which is removed only at the end of the run
/// ([`empty_trash`]).
///
/// Why not delete it: on this machine's ext4 (no journal) a create skips
/// every free inode of its block group that was freed in the last
/// `dirty_expire_centisecs` (30 s; `recently_deleted` in
/// `fs/ext4/ialloc.c`), reading each one's inode to learn that. A row that
/// deleted 5,000 files made the next row's 5,000 creates scan them: 4.3 s
/// of the creating process's system time for 5,000 × 4 KiB (0.4 s into
/// a directory with no recent deletes nearby), whatever the tool. Each row
/// then measured the row before it: the download rows at 1 ms one way
/// swung from ~1,000 to ~4,400 files/s with the same binary
/// (docs/trees.md, session 7).
///
/// A killed client's server may still be closing files in it: truncation
/// and the rename work on open files too.
fn clear(p: &Path, trash: &Path) -> Result<()> {
    if fs::symlink_metadata(p).is_err() {
        return Ok(());
    }
    truncate_files(p);
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let aside = trash.join(format!("{name}.{}.{n}", std::process::id()));
    fs::rename(p, &aside).map_err(io_err("moving aside", p))
}

/// Truncates every regular file under `dir` (errors ignored: what stays
/// is only disk space until the trash is emptied).
fn truncate_files(dir: &Path) {
    walk_files(dir, false, |p, m| {
        if m.is_file() {
            if let Ok(f) = fs::OpenOptions::new().write(true).open(p) {
                let _ = f.set_len(0);
            }
        }
    });
}

/// How long a freed inode counts as recently deleted for ext4 without a
/// journal: `RECENTCY_MIN` in `fs/ext4/ialloc.c` (60 s since Linux 5.7;
/// 300 s more while the inode's table block is still dirty, which
/// [`empty_trash`]'s `syncfs` rules out), plus a margin. Measured here
/// (docs/trees.md, session 17): creates next to 5,000 deleted files cost
/// 630–970 µs each 20–61 s after the delete and 25–40 µs from 81 s on. The
/// writeback expiry this used to read (30 s) was too short: a run started
/// right after another still paid for the other's deletes.
fn recently_deleted_window() -> Duration {
    Duration::from_secs(65)
}

/// Where the time of the last emptied trash on `work`'s file system is
/// noted: one stamp per file system (its `st_dev`) under `/var/tmp`, not
/// per work directory. ext4's recently-deleted window is a property of the
/// file system's inode groups, so a run in another work directory on the
/// same file system pays for this run's deletes too; with a stamp per work
/// directory the lead's second invocation (another `--work`) started inside
/// the first one's window and every row read 3–6× slow (docs/trees.md,
/// "Session 17: the quiet run", full2).
fn deletes_stamp(work: &Path) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let dev = fs::metadata(work).map(|m| m.dev()).unwrap_or(0);
    PathBuf::from(format!("/var/tmp/ferry-small-files.deletes.{dev:x}"))
}

/// Reads every file under `src` once, untimed, so that the timed command
/// finds its source in the page cache whatever ran before it. Every row
/// gets this, and its set-up run too. Without it, the one-file row was
/// the only one reading a file nothing had warmed: the tree itself is read
/// by the untimed warm-up rows, its one-file twin only by the one-file row,
/// and another benchmark's `drop_caches` (the UDT and disk benches run one
/// before each of their rows) or an invocation reusing an earlier run's
/// data left it on the device. The one-file upload then ran at the disk's
/// read speed, 417 MB/s against ~1.2–1.9 GB/s (docs/trees.md, "Session 18:
/// uploads").
fn warm_source(src: &Path) {
    use std::io::Read;
    let mut buf = vec![0u8; 1 << 20];
    let mut read = |p: &Path| {
        if let Ok(mut f) = fs::File::open(p) {
            while matches!(f.read(&mut buf), Ok(n) if n > 0) {}
        }
    };
    if fs::symlink_metadata(src).is_ok_and(|m| m.is_file()) {
        read(src);
        return;
    }
    walk_files(src, false, |p, m| {
        if m.is_file() {
            read(p);
        }
    });
}

/// Removes the retired destinations and notes when (`stamp`), so the
/// next run can wait until those inodes no longer count as recently
/// deleted before its first row.
fn empty_trash(trash: &Path, stamp: &Path) -> Result<()> {
    let had = fs::read_dir(trash).map(|mut d| d.next().is_some()).unwrap_or(false);
    data::remove_path(trash)?;
    if had {
        // The freed inodes' table blocks written back: ext4 counts a
        // deleted inode recent for 300 s more while its block is dirty.
        if let Some(parent) = trash.parent() {
            flush_work(parent);
        }
        fs::write(stamp, b"").map_err(io_err("writing", stamp))?;
    }
    Ok(())
}

/// Waits until the last emptied trash is outside ext4's window (see
/// [`clear`]), so a run started right after another is not measured
/// against the other's deletes.
fn wait_after_trash(stamp: &Path) {
    let Ok(age) = fs::metadata(stamp).and_then(|m| m.modified()).map(|t| t.elapsed().unwrap_or_default()) else {
        return;
    };
    let window = recently_deleted_window();
    if age < window {
        let wait = window - age;
        eprintln!("small-files: waiting {:.0} s: the last run's deletes still slow down creates", wait.as_secs_f64());
        std::thread::sleep(wait);
    }
}

fn slash(p: &Path) -> PathBuf {
    PathBuf::from(format!("{}/", p.display().to_string().trim_end_matches('/')))
}

/// Writes the work directory's file system back (`syncfs`), untimed,
/// before a timed command. Ferry's client ends a download with one
/// `syncfs` of the destination's file system and Ferry's server ends a
/// `BSTO SYNC` batch with one: each flushes whatever is dirty there, not
/// only its own files. Without this, the one-file set-up run paid for the
/// row before it (its 20,000 files written, then truncated by [`clear`])
/// and for other processes' writes to the same file system: 0.01–0.76 s of
/// "set-up" for a download that takes 5–26 ms by hand (docs/trees.md,
/// session 10).
fn flush_work(work: &Path) {
    if let Err(e) = fs::File::open(work).and_then(|d| crate::sys::syncfs(&d)) {
        eprintln!("small-files: syncfs of {}: {e}", work.display());
    }
}

/// The rows of one case: every `ferry` row with its old-build twin right
/// after it, or right before it when `old_first`.
fn case_rows(rows: &[Row], with_old: bool, old_first: bool) -> Vec<Row> {
    let mut out = Vec::new();
    for r in rows {
        let twin = r.id == "ferry" && with_old;
        if twin && old_first {
            out.push(ferry_old_row());
        }
        out.push(r.clone());
        if twin && !old_first {
            out.push(ferry_old_row());
        }
    }
    out
}

/// Dirty and under-writeback page cache, bytes (`/proc/meminfo`).
fn dirty_bytes() -> u64 {
    let Ok(m) = fs::read_to_string("/proc/meminfo") else { return 0 };
    m.lines()
        .filter(|l| l.starts_with("Dirty:") || l.starts_with("Writeback:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum::<u64>()
        * 1024
}

/// Before the first rows of a direction: the work directory's file
/// system written back, the machine's dirty pages below 64 MB (at most
/// 30 s) and 3 s more for ext4's journal to check its transactions
/// out. The page cache is not dropped: no row runs cold.
fn settle(work: &Path) {
    flush_work(work);
    let t = Instant::now();
    while dirty_bytes() > 64 << 20 && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(3));
}

/// Runs one command within `limit`; returns (wall, timed out, error).
fn run_limited(cmd: Command, what: &str, logs: &Path, limit: Duration) -> (f64, bool, Option<String>) {
    let t = Instant::now();
    let spawned = match Spawned::start(cmd, what, logs) {
        Ok(s) => s,
        Err(e) => return (0.0, false, Some(e.to_string())),
    };
    let (out, err) = (spawned.stdout_path().to_path_buf(), spawned.stderr_path().to_path_buf());
    let r = spawned.wait(limit);
    Spawned::remove_logs(&out, &err);
    match r {
        Ok(f) => {
            let wall = f.wall.as_secs_f64();
            if f.status.success() {
                (wall, false, None)
            } else {
                // stderr says why; a JSON summary on stdout does not.
                let why = crate::proc::tail(&f.stderr, 300);
                (wall, false, Some(format!("{what} failed ({}): {why}", f.status)))
            }
        }
        Err(BenchError::Timeout { .. }) => (t.elapsed().as_secs_f64().min(limit.as_secs_f64()), true, None),
        Err(e) => (t.elapsed().as_secs_f64(), false, Some(e.to_string())),
    }
}

/// Runs the whole plan, appending every sample to `out/runs.jsonl` and
/// rewriting the page and the plots after every case.
pub fn run(setup: &Setup) -> Result<Vec<Sample>> {
    let data_dir = setup.work.join("data");
    let up_dir = setup.work.join("up");
    let down_dir = setup.work.join("down");
    let logs = setup.work.join("logs");
    let trash = setup.work.join("trash");
    open_dir(&setup.work)?;
    let trash_stamp = deletes_stamp(&setup.work);
    // Left by an interrupted run.
    empty_trash(&trash, &trash_stamp)?;
    for d in [&data_dir, &up_dir, &down_dir, &logs, &setup.out, &trash] {
        open_dir(d)?;
    }
    // Whatever an earlier run left in the destinations is retired too.
    for d in [&up_dir, &down_dir] {
        for e in fs::read_dir(d).map_err(io_err("listing", d))?.flatten() {
            clear(&e.path(), &trash)?;
        }
    }
    // Everything above the work directory must be searchable by nobody.
    let mut trees: Vec<(TreeSpec, PathBuf)> = Vec::new();
    for (i, t) in setup.trees.iter().enumerate() {
        let tree = Tree { dir: data_dir.join(&t.name), sizes: t.sizes.clone() };
        eprintln!("small-files: making {} ({} files, {:.1} MB)", t.name, t.sizes.len(), t.bytes() as f64 / 1e6);
        tree.ensure(0x5eed + i as u64)?;
        if setup.rows.iter().any(|r| r.tool == Tool::OneFile) {
            Tree { dir: as_one_dir(&tree.dir), sizes: vec![t.bytes()] }.ensure(0x0e + i as u64)?;
        }
        trees.push((t.clone(), tree.dir));
    }
    let one = TreeSpec { name: "one".into(), sizes: vec![1] };
    let one_dir = data_dir.join("one");
    Tree { dir: one_dir.clone(), sizes: vec![1] }.ensure(1)?;

    let runs = setup.out.join("runs.jsonl");
    // Earlier invocations' records stay on the page (a run of some cases adds to them).
    let mut samples: Vec<Sample> = if runs.exists() { read_runs(&runs)? } else { Vec::new() };
    let needs_globus = setup.rows.iter().any(|r| r.tool == Tool::Globus);
    wait_after_trash(&trash_stamp);
    for delay in &setup.delays {
        interrupt::check()?;
        let net = match delay {
            None => Net::Loopback,
            Some(d) => Net::wan(WanPath::gbit(*d))?,
        };
        let rtt_ms = net.connect_rtt_ms()?;
        let path = delay.map_or("loopback".to_string(), format_delay);
        eprintln!("small-files: {path} ({})", net.describe());
        let ferry = Server::start_ferry_with(
            &net,
            &setup.ferry,
            &setup.work,
            &logs,
            &["--anonymous".into(), "write".into()],
            &[],
        )?;
        let globus = if needs_globus { Some(Server::start_globus(&net, &logs)?) } else { None };
        let ferry_pipelined = if setup.rows.iter().any(|r| r.tool == Tool::FerryPipelined) {
            let flags = ["--anonymous".to_string(), "write".into(), "--no-batch".into()];
            match Server::start_ferry_with(&net, &setup.ferry, &setup.work, &logs, &flags, &[]) {
                Ok(s) => Some(s),
                Err(e) => {
                    // A build older than the batch mode has no --no-batch.
                    eprintln!("small-files: no pipelined row on this path: {e}");
                    None
                }
            }
        } else {
            None
        };
        let ferry_old = match &setup.ferry_old {
            Some(old) => Some(Server::start_ferry_with(
                &net,
                old,
                &setup.work,
                &logs,
                &["--anonymous".into(), "write".into()],
                &[],
            )?),
            None => None,
        };
        let servers = Servers { ferry, ferry_old, ferry_pipelined, globus };
        let mut last_dir: Option<Direction> = None;
        for (t, (tree, src_dir)) in trees.iter().enumerate() {
            for (d, &dir) in setup.directions.iter().enumerate() {
                // The `ferry` row and its old twin swap places every other
                // case, so that neither build is always the one that goes first.
                let rows = case_rows(&setup.rows, setup.ferry_old.is_some(), (t + d) % 2 == 1);
                let run_row = |r: &Row| {
                    one_row(
                        setup,
                        &net,
                        &servers,
                        r,
                        dir,
                        tree,
                        src_dir,
                        (&one, &one_dir),
                        &up_dir,
                        &down_dir,
                        &trash,
                        &logs,
                        &path,
                        *delay,
                        rtt_ms,
                    )
                };
                if last_dir != Some(dir) {
                    // The first rows of an invocation, and the first upload
                    // rows after the download rows, read slow (docs/trees.md,
                    // session 13): settle the file system, then run Ferry's
                    // rows once untimed on this case's tree.
                    settle(&setup.work);
                    for r in rows.iter().filter(|r| r.id == "ferry" || r.id == "ferry-old") {
                        interrupt::check()?;
                        let s = run_row(r)?;
                        eprintln!(
                            "  {} {} warm-up, untimed: {:<26} {:>6}/{} files {:>7.1} s{}",
                            tree.name,
                            dir.name(),
                            r.label,
                            s.files_done,
                            s.files,
                            s.wall_s,
                            s.error_suffix()
                        );
                    }
                    settle(&setup.work);
                    last_dir = Some(dir);
                }
                let mut case: Vec<Sample> = Vec::new();
                for r in &rows {
                    interrupt::check()?;
                    if r.tool == Tool::FerryPipelined && servers.ferry_pipelined.is_none() {
                        continue;
                    }
                    let s = run_row(r)?;
                    eprintln!(
                        "  {} {} {:<40} {:>6}/{} files {:>7.1} s  {:>8.1} files/s  set-up {:>5.2} s  load {:.2}{}",
                        tree.name,
                        dir.name(),
                        r.label,
                        s.files_done,
                        s.files,
                        s.wall_s,
                        s.files_per_s(),
                        s.setup_s.unwrap_or(f64::NAN),
                        s.load_before,
                        if s.timed_out { " (time limit)" } else { "" }.to_string() + &s.error_suffix()
                    );
                    let mut f = fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&runs)
                        .map_err(io_err("opening", &runs))?;
                    let line = serde_json::to_string(&s).map_err(|e| BenchError::output("json", e.to_string()))?;
                    writeln!(f, "{line}").map_err(io_err("writing", &runs))?;
                    case.push(s);
                }
                samples.extend(case);
                publish(setup, &samples)?;
            }
        }
        drop(servers);
        net.down()?;
    }
    empty_trash(&trash, &trash_stamp)?;
    Ok(samples)
}

#[allow(clippy::too_many_arguments)]
fn one_row(
    setup: &Setup,
    net: &Net,
    servers: &Servers,
    r: &Row,
    dir: Direction,
    tree: &TreeSpec,
    src_dir: &Path,
    one: (&TreeSpec, &Path),
    up_dir: &Path,
    down_dir: &Path,
    trash: &Path,
    logs: &Path,
    path: &str,
    delay: Option<Duration>,
    rtt_ms: Option<f64>,
) -> Result<Sample> {
    // (remote, local, where it lands) for a tree source.
    let places = |src: &Path, tag: &str| -> Result<(PathBuf, PathBuf, PathBuf)> {
        match dir {
            Direction::Download => {
                let dst = down_dir.join(format!("{}-{tag}", r.id));
                clear(&dst, trash)?;
                Ok((src.to_path_buf(), dst.clone(), dst))
            }
            Direction::Upload => {
                let dst = up_dir.join(format!("{}-{tag}", r.id));
                clear(&dst, trash)?;
                // Globus and lftp want the target directory; Ferry and rclone make it.
                open_dir(&dst)?;
                Ok((dst.clone(), src.to_path_buf(), dst))
            }
        }
    };
    // Set-up: the same command on a one-file tree.
    let (remote, local, landed) = places(one.1, "one")?;
    if dir == Direction::Download {
        open_dir(&landed)?;
    }
    let cmd = command(setup, net, servers, r, dir, &remote, &local)?;
    warm_source(one.1);
    flush_work(&setup.work);
    let (setup_wall, setup_to, setup_err) =
        run_limited(cmd, &format!("{} set-up", r.label), logs, Duration::from_secs(60));
    let setup_ok = !setup_to && setup_err.is_none() && count_done(&landed, one.0).0 == 1;
    clear(&landed, trash)?;

    // The one-file row moves the tree's bytes as one file, and counts them
    // as the tree's files (pro rata when it hit the time limit).
    let as_one = TreeSpec { name: format!("{}-as-one", tree.name), sizes: vec![tree.bytes()] };
    let (src_dir, counted) =
        if r.tool == Tool::OneFile { (as_one_dir(src_dir), &as_one) } else { (src_dir.to_path_buf(), tree) };
    let (remote, local, landed) = places(&src_dir, &tree.name)?;
    if dir == Direction::Download {
        open_dir(&landed)?;
    }
    let cmd = command(setup, net, servers, r, dir, &remote, &local)?;
    let line = command_line(&cmd);
    warm_source(&src_dir);
    flush_work(&setup.work);
    let load_before = load1();
    let (wall, timed_out, error) = run_limited(cmd, &r.label, logs, setup.time_limit);
    let load_after = load1();
    let (mut files_done, mut bytes_done) = count_done(&landed, counted);
    let mut error = error;
    if error.is_none() && !timed_out && files_done != counted.sizes.len() as u64 {
        error = Some(format!("{} of {} files arrived complete", files_done, counted.sizes.len()));
    }
    if r.tool == Tool::OneFile {
        if files_done == 0 {
            // Pro rata: what of the one file arrived by the time limit.
            bytes_done = dir_bytes(&landed);
        }
        files_done = (tree.sizes.len() as u128 * bytes_done as u128 / tree.bytes().max(1) as u128) as u64;
    }
    if !setup_ok && error.is_none() {
        error =
            Some(format!("the one-file set-up run failed{}", setup_err.map(|e| format!(": {e}")).unwrap_or_default()));
    }
    clear(&landed, trash)?;
    Ok(Sample {
        path: path.into(),
        delay_ms: delay.map(|d| d.as_secs_f64() * 1e3),
        rtt_ms,
        tree: tree.name.clone(),
        direction: dir,
        row: r.id.clone(),
        label: r.label.clone(),
        files: tree.sizes.len() as u64,
        files_done,
        bytes_done,
        wall_s: wall,
        setup_s: setup_ok.then_some(setup_wall),
        timed_out,
        error,
        load_before,
        load_after,
        command: line,
    })
}

/// Bytes of every file under `dir`, partial names included.
fn dir_bytes(dir: &Path) -> u64 {
    let mut bytes = 0;
    walk_files(dir, false, |_, m| bytes += m.len());
    bytes
}

/// The `ferry` row at `i` of a case divided by its `ferry-old` twin in the
/// same invocation (the row after it, or the one before it when the case
/// ran the old build first; files per second); empty otherwise.
fn new_over_old(case: &[&Sample], i: usize) -> String {
    let s = case[i];
    if s.row == "ferry-old" && s.error.is_none() {
        return "old".into();
    }
    if s.row != "ferry" || s.error.is_some() {
        return String::new();
    }
    // Its twin: after it, or before it when the case ran the old build first.
    let after = case[i + 1..].iter().take_while(|o| o.row != "ferry").find(|o| o.row == "ferry-old");
    let before = || case[..i].iter().rev().take_while(|o| o.row != "ferry").find(|o| o.row == "ferry-old");
    match after.or_else(before) {
        Some(o) if o.error.is_none() && o.files_per_s() > 0.0 => format!("{:.2}×", s.files_per_s() / o.files_per_s()),
        _ => String::new(),
    }
}

fn best_globus<'a>(case: &[&'a Sample]) -> Option<&'a Sample> {
    case.iter()
        .filter(|s| s.row.starts_with("guc") && s.error.is_none())
        .max_by(|a, b| a.files_per_s().total_cmp(&b.files_per_s()))
        .copied()
}

/// What the issue's first clause asks where the link does not cap: the
/// `ferry` row's files per second over the best Globus row's.
const TARGET_VS_GLOBUS: f64 = 2.0;
/// Its second half, where the link caps: over the same bytes as one file.
const TARGET_VS_ONE_FILE: f64 = 0.9;
/// Its second clause: over the better of lftp and rclone.
const TARGET_VS_PEERS: f64 = 1.5;
/// Its third clause: 20,000 × 4 KiB at 80 ms against one file, in time.
const TARGET_4K_80MS_TIMES: f64 = 10.0;

/// The issue's targets, one line per case and path, read off the same run:
/// which clause each `ferry` row meets, so a reader need not divide the
/// tables below by hand. Where the same bytes as one file do not reach
/// 1.5× the better peer, the second clause's miss says so: the path (or the
/// durability both pay) leaves no room for it.
pub fn targets(samples: &[Sample]) -> String {
    let mut md = String::new();
    let mut cases: Vec<(String, Direction, String)> = Vec::new();
    for s in samples {
        let k = (s.tree.clone(), s.direction, s.path.clone());
        if !cases.contains(&k) {
            cases.push(k);
        }
    }
    let ok = |s: &&Sample| s.error.is_none() && s.files_per_s() > 0.0;
    let mut lines = Vec::new();
    for (tree, dir, path) in &cases {
        let case: Vec<&Sample> =
            samples.iter().filter(|s| &s.tree == tree && s.direction == *dir && &s.path == path).collect();
        let Some(ferry) = case.iter().find(|s| s.row == "ferry").copied().filter(ok) else { continue };
        let one = case.iter().find(|s| s.row == "one-file").copied().filter(ok);
        let globus = best_globus(&case).filter(ok);
        let peer = case
            .iter()
            .filter(|s| (s.row == "lftp" || s.row == "rclone") && ok(s))
            .max_by(|a, b| a.files_per_s().total_cmp(&b.files_per_s()))
            .copied();
        let over = |b: Option<&Sample>| b.map(|b| ferry.files_per_s() / b.files_per_s());
        let (vs_globus, vs_one, vs_peer) = (over(globus), over(one), over(peer));
        let first = match (vs_globus, vs_one) {
            (Some(g), _) if g >= TARGET_VS_GLOBUS => format!("met ({TARGET_VS_GLOBUS}× Globus)"),
            (_, Some(o)) if o >= TARGET_VS_ONE_FILE => format!("met ({TARGET_VS_ONE_FILE} of one file)"),
            (None, None) => "–".to_string(),
            _ => "**missed**".to_string(),
        };
        // How far above the peer the path lets anything go: one file's rate.
        let room = match (peer, one) {
            (Some(p), Some(o)) => Some(o.files_per_s() / p.files_per_s()),
            _ => None,
        };
        let second = match (vs_peer, room) {
            (Some(v), _) if v >= TARGET_VS_PEERS => "met".to_string(),
            (Some(_), Some(r)) if r < TARGET_VS_PEERS => format!("**missed** (one file is {r:.2}× the peer)"),
            (Some(_), _) => "**missed**".to_string(),
            (None, _) => "–".to_string(),
        };
        let ratio = |v: Option<f64>| v.map(|v| format!("{v:.2}×")).unwrap_or_else(|| "–".into());
        lines.push(format!(
            "| {tree} | {} | {path} | {:.1} | {} | {} | {} | {first} | {} | {second} |\n",
            dir.name(),
            ferry.files_per_s(),
            globus.map(|g| g.label.trim_start_matches("globus-url-copy ").to_string()).unwrap_or_else(|| "–".into()),
            ratio(vs_globus),
            ratio(vs_one),
            ratio(vs_peer),
        ));
    }
    if lines.is_empty() {
        return md;
    }
    md += "## The issue's targets\n\n";
    md += &format!(
        "Read off this page's runs: the `ferry` row (automatic) over the best Globus row (≥ {TARGET_VS_GLOBUS}× is \
         the first clause) or, where the link caps, over the same bytes as one file (≥ {TARGET_VS_ONE_FILE}×); \
         over the better of lftp and rclone (≥ {TARGET_VS_PEERS}×, the second clause).\n\n"
    );
    md += "| tree | direction | path | Ferry files/s | best Globus row | vs Globus | vs one file | first clause | vs better of lftp, rclone | second clause |\n";
    md += "|---|---|---|---|---|---|---|---|---|---|\n";
    for l in lines {
        md += &l;
    }
    // The third clause: the whole 4 KiB tree at 80 ms, in time, against one file.
    for s in samples
        .iter()
        .filter(|s| s.row == "ferry" && s.tree.ends_with("x4KiB") && s.delay_ms.is_some_and(|d| (d - 80.0).abs() < 0.5))
    {
        let one = samples.iter().find(|o| {
            o.row == "one-file"
                && o.tree == s.tree
                && o.direction == s.direction
                && o.path == s.path
                && o.error.is_none()
        });
        if let (Some(o), None) = (one, &s.error) {
            let times = s.wall_s / o.wall_s.max(1e-9);
            let whole = s.files_done == s.files && !s.timed_out;
            md += &format!(
                "\nThird clause, {} {}: {:.2} s against {:.2} s for one file, {times:.1}× ({}).\n",
                s.tree,
                s.direction.name(),
                s.wall_s,
                o.wall_s,
                if whole && times < TARGET_4K_80MS_TIMES {
                    format!("met: under {TARGET_4K_80MS_TIMES}×")
                } else {
                    "**missed**".to_string()
                },
            );
        }
    }
    md += "\n";
    md
}

/// The page: one table per tree and direction, ratios to the best Globus
/// row of the same case, and a plot of files per second against the path.
pub fn markdown(setup_command: &str, samples: &[Sample]) -> String {
    let mut md = String::new();
    md += "# Thousands of small files (issue 18)\n\n";
    md += "Files per second for trees of small files, downloads and uploads, on loopback and across the emulated \
           1 Gbit/s path (`ferry-wan`, tbf shaper, tuned TCP buffers). Ferry and lftp/rclone run against `ferry \
           serve`, `globus-url-copy` against `globus-gridftp-server` (as nobody, anonymous). Each row is the wall \
           clock of one client process; **set-up s** is the same command on a tree of one 1-byte file (process \
           start, connection, login, negotiation, one listing, one data channel), **data s** the rest, **ms/file** \
           data s over the files. A row that hit the time limit reports files per second over the files that \
           arrived complete. *vs best Globus* divides by the fastest Globus row of the same case, same run; \
           *vs one file* divides a Ferry row by the \"same bytes as one file\" row of the same case (`ferry cp` \
           of one file of the tree's bytes, counted as the tree's files: the issue's target where the link caps \
           is ≥ 0.9× of it). *new ÷ old* divides the `ferry` row by its `ferry-old` twin (`--ferry-old`: \
           the older build as client and server, same flags, same invocation; the twin goes after the `ferry` row \
           in one case and before it in the next). Before the first case of each direction the harness writes \
           the file system back, waits for the dirty pages to drain, and runs the `ferry` and `ferry-old` rows once \
           untimed on that case's tree (the first rows of a run, and the first upload rows after the downloads, \
           read slow otherwise: docs/trees.md, session 13). Destinations are emptied (files truncated) after each row and deleted only at the \
           end of the run: on this machine's ext4 (no journal) a create skips the inodes freed in the last 60 s, \
           so a deleted destination slowed whichever row came next (docs/trees.md, sessions 7 and 17); a run \
           starts 65 s after the last run's deletes were written back. \
           **load** is the 1-minute load average before the run (the machine has 2 cores shared with other \
           work).\n\n";
    md += "Invocations whose runs are on this page:\n\n";
    for c in setup_command.lines().filter(|l| !l.trim().is_empty()) {
        md += &format!("* `{}`\n", c.trim());
    }
    md += "\n";
    md += &targets(samples);
    let mut keys: Vec<(String, Direction)> = Vec::new();
    for s in samples {
        if !keys.contains(&(s.tree.clone(), s.direction)) {
            keys.push((s.tree.clone(), s.direction));
        }
    }
    for (tree, dir) in &keys {
        md += &format!("## {tree}, {}\n\n", dir.name());
        md += &format!("![{tree} {}](files-per-s-{tree}-{}.svg)\n\n", dir.name(), dir.name());
        md += "| path | row | files | s | set-up s | data s | ms/file | files/s | MB/s | vs best Globus | vs one file | new ÷ old | load |\n";
        md += "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
        let mut paths: Vec<String> = Vec::new();
        for s in samples.iter().filter(|s| &s.tree == tree && s.direction == *dir) {
            if !paths.contains(&s.path) {
                paths.push(s.path.clone());
            }
        }
        for p in &paths {
            let case: Vec<&Sample> =
                samples.iter().filter(|s| &s.tree == tree && s.direction == *dir && &s.path == p).collect();
            let best = best_globus(&case);
            let one = case.iter().find(|s| s.row == "one-file" && s.error.is_none()).copied();
            for (i, s) in case.iter().enumerate() {
                let vs_old = new_over_old(&case, i);
                let data_s = s.setup_s.map(|u| (s.wall_s - u).max(0.0));
                let ms_file = data_s.map(|d| if s.files_done > 0 { d * 1e3 / s.files_done as f64 } else { f64::NAN });
                let vs_one = match one {
                    Some(o) if std::ptr::eq(*s, o) => "anchor".to_string(),
                    Some(o) if s.error.is_none() && o.files_per_s() > 0.0 && s.row.starts_with("ferry") => {
                        format!("{:.2}×", s.files_per_s() / o.files_per_s())
                    }
                    _ => String::new(),
                };
                let ratio = match (best, s.error.is_none()) {
                    (Some(b), true) if b.files_per_s() > 0.0 && !s.row.starts_with("guc") && s.row != "one-file" => {
                        format!("{:.2}×", s.files_per_s() / b.files_per_s())
                    }
                    (Some(b), _) if std::ptr::eq(*s, b) => "anchor".into(),
                    _ => String::new(),
                };
                let note = if let Some(e) = &s.error {
                    format!(" — failed: {}", crate::proc::tail(e, 120).replace('|', "/"))
                } else if s.timed_out {
                    " (time limit)".into()
                } else {
                    String::new()
                };
                let rtt = s.rtt_ms.map(|r| format!(" (RTT {r:.1} ms)")).unwrap_or_default();
                md += &format!(
                    "| {}{rtt} | {}{note} | {}/{} | {:.2} | {} | {} | {} | {:.1} | {:.1} | {ratio} | {vs_one} | {vs_old} | {:.2} |\n",
                    s.path,
                    s.label,
                    s.files_done,
                    s.files,
                    s.wall_s,
                    s.setup_s.map(|v| format!("{v:.2}")).unwrap_or_else(|| "–".into()),
                    data_s.map(|v| format!("{v:.2}")).unwrap_or_else(|| "–".into()),
                    ms_file.map(|v| format!("{v:.2}")).unwrap_or_else(|| "–".into()),
                    s.files_per_s(),
                    s.bytes_done as f64 / 1e6 / s.wall_s.max(1e-9),
                    s.load_before,
                );
            }
        }
        md += "\n";
    }
    md += "## Commands\n\n";
    let mut seen = Vec::new();
    for s in samples {
        if !seen.contains(&s.row) {
            seen.push(s.row.clone());
            md += &format!("* {}: `{}`\n", s.label, s.command);
        }
    }
    md
}

fn publish(setup: &Setup, samples: &[Sample]) -> Result<()> {
    let page = setup.out.join("README.md");
    let commands = fs::read_to_string(setup.out.join("command.txt")).unwrap_or_else(|_| setup.command.clone());
    fs::write(&page, page_with_notes(&setup.out, &markdown(&commands, samples))).map_err(io_err("writing", &page))?;
    plots(&setup.out, samples)
}

/// One bar chart per tree and direction: files per second by path, one
/// bar per row.
pub fn plots(out: &Path, samples: &[Sample]) -> Result<()> {
    let mut keys: Vec<(String, Direction)> = Vec::new();
    for s in samples {
        if !keys.contains(&(s.tree.clone(), s.direction)) {
            keys.push((s.tree.clone(), s.direction));
        }
    }
    for (tree, dir) in keys {
        let case: Vec<&Sample> = samples.iter().filter(|s| s.tree == tree && s.direction == dir).collect();
        let mut paths: Vec<String> = Vec::new();
        let mut rows: Vec<(String, String)> = Vec::new();
        for s in &case {
            if !paths.contains(&s.path) {
                paths.push(s.path.clone());
            }
            if !rows.iter().any(|(id, _)| id == &s.row) {
                rows.push((s.row.clone(), s.label.clone()));
            }
        }
        let series: Vec<Series> = rows
            .iter()
            .map(|(id, label)| Series {
                name: label.clone(),
                role: if id == "ferry-old" {
                    Role::FerryOld
                } else if id.starts_with("ferry") {
                    Role::Ferry
                } else if id.starts_with("guc") {
                    Role::Globus
                } else {
                    Role::Cross
                },
                points: case
                    .iter()
                    .filter(|s| &s.row == id && s.error.is_none())
                    .filter_map(|s| {
                        let i = paths.iter().position(|p| p == &s.path)?;
                        Some((i, Summary::of([s.files_per_s()])?))
                    })
                    .collect(),
            })
            .collect();
        let file = out.join(format!("files-per-s-{tree}-{}.svg", dir.name()));
        plot::bars(&file, &format!("{tree}, {}: files per second", dir.name()), "files/s", &paths, &series)?;
    }
    Ok(())
}

/// The page with `OUT/notes.md` (what a person found out about these
/// runs, written by hand) after its first paragraph.
pub fn page_with_notes(out: &Path, page: &str) -> String {
    match fs::read_to_string(out.join("notes.md")) {
        Ok(notes) if !notes.trim().is_empty() => match page.find("Invocations whose runs") {
            Some(i) => format!("{}{}\n\n{}", &page[..i], notes.trim(), &page[i..]),
            None => format!("{page}\n{notes}"),
        },
        _ => page.to_string(),
    }
}

/// Reads a runs.jsonl back (to rebuild the page).
pub fn read_runs(path: &Path) -> Result<Vec<Sample>> {
    let text = fs::read_to_string(path).map_err(io_err("reading", path))?;
    Ok(text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
}

/// The default mixed tree: 1,000 files, Zipf by rank, mean 1 MB.
pub const MIXED_FILES: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_have_the_issue_shapes() {
        let t = issue_trees(1, MIXED_FILES);
        assert_eq!(t[0].sizes.len(), 2000);
        assert_eq!(t[1].bytes(), 20_000 * 4 * KIB);
        let mean = t[2].bytes() as f64 / t[2].sizes.len() as f64;
        assert!((mean - 1e6).abs() < 1e4, "mean {mean}");
    }

    #[test]
    fn the_one_file_row_reads_its_own_tree_and_counts_partials() {
        assert_eq!(as_one_dir(Path::new("/w/data/20000x4KiB")), Path::new("/w/data/20000x4KiB-as-one"));
        assert!(issue_rows("-p 4").iter().any(|r| r.id == "one-file" && r.tool == Tool::OneFile));
        let d = tempfile::tempdir().unwrap();
        fs::create_dir(d.path().join("sub")).unwrap();
        fs::write(d.path().join("sub").join(".f00001.dat.ferry-part"), b"abcde").unwrap();
        fs::write(d.path().join("x"), b"ab").unwrap();
        assert_eq!(dir_bytes(d.path()), 7);
    }

    #[test]
    fn new_over_old_divides_each_ferry_row_by_its_old_twin_after_or_before_it() {
        let mk = |row: &str, files_done: u64| Sample {
            path: "loopback".into(),
            delay_ms: None,
            rtt_ms: None,
            tree: "t".into(),
            direction: Direction::Download,
            row: row.into(),
            label: row.into(),
            files: 100,
            files_done,
            bytes_done: 0,
            wall_s: 1.0,
            setup_s: None,
            timed_out: false,
            error: None,
            load_before: 0.0,
            load_after: 0.0,
            command: String::new(),
        };
        let (new, old, one) = (mk("ferry", 100), mk("ferry-old", 50), mk("one-file", 100));
        let case = vec![&new, &old, &one];
        assert_eq!(new_over_old(&case, 0), "2.00×");
        assert_eq!(new_over_old(&case, 1), "old");
        assert_eq!(new_over_old(&case, 2), "");
        // The old build ran first: its twin is the row before.
        let swapped = vec![&one, &old, &new];
        assert_eq!(new_over_old(&swapped, 2), "2.00×");
        assert_eq!(new_over_old(&swapped, 1), "old");
        let rows = issue_rows("-p 4");
        let ids = |rs: Vec<Row>| rs.iter().take(3).map(|r| r.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(case_rows(&rows, true, false)), ["ferry", "ferry-old", "ferry-fixed"]);
        assert_eq!(ids(case_rows(&rows, true, true)), ["ferry-old", "ferry", "ferry-fixed"]);
        assert_eq!(ids(case_rows(&rows, false, true)), ["ferry", "ferry-fixed", "ferry-pipelined"]);
        // No twin: nothing to divide by.
        assert_eq!(new_over_old(&[&new, &one], 0), "");
        assert_eq!(ferry_old_row().tool, Tool::FerryOld);
    }

    #[test]
    fn the_targets_name_the_clause_each_case_meets() {
        let mk = |path: &str, row: &str, files_done: u64, wall_s: f64| Sample {
            path: path.into(),
            delay_ms: (path == "80 ms").then_some(80.0),
            rtt_ms: None,
            tree: "20000x4KiB".into(),
            direction: Direction::Upload,
            row: row.into(),
            label: row.into(),
            files: 20_000,
            files_done,
            bytes_done: 0,
            wall_s,
            setup_s: None,
            timed_out: files_done < 20_000,
            error: None,
            load_before: 0.0,
            load_after: 0.0,
            command: String::new(),
        };
        let runs = vec![
            // Loopback: 2.5× Globus, 1.2× lftp while lftp is not at the link.
            mk("loopback", "ferry", 20_000, 1.0),
            mk("loopback", "guc-pp-cc8", 20_000, 2.5),
            mk("loopback", "one-file", 20_000, 0.1),
            mk("loopback", "lftp", 20_000, 1.2),
            // 80 ms: 1.5× Globus but 0.95 of one file; one file only 1.1× the peer.
            mk("80 ms", "ferry", 20_000, 10.0),
            mk("80 ms", "guc-pp-cc8", 1_000, 0.75),
            mk("80 ms", "one-file", 20_000, 9.5),
            mk("80 ms", "rclone", 20_000, 10.5),
        ];
        let md = targets(&runs);
        let line = |p: &str| md.lines().find(|l| l.contains(&format!("| {p} |"))).unwrap().to_string();
        let lo = line("loopback");
        assert!(lo.contains("| 2.50× |") && lo.contains("met (2× Globus)"), "{lo}");
        assert!(lo.contains("| 1.20× | **missed** |"), "{lo}");
        let far = line("80 ms");
        assert!(far.contains("| 1.50× |") && far.contains("met (0.9 of one file)"), "{far}");
        assert!(far.contains("**missed** (one file is 1.11× the peer)"), "{far}");
        assert!(md.contains("10.00 s against 9.50 s for one file, 1.1× (met: under 10×)"), "{md}");
        // A case with no ferry row is left out; no runs, no section.
        let without_ferry: Vec<Sample> = runs.iter().filter(|s| s.row != "ferry").cloned().collect();
        assert_eq!(targets(&without_ferry), "");
        assert_eq!(targets(&[]), "");
    }

    #[test]
    fn counting_needs_full_size_and_final_name() {
        let d = tempfile::tempdir().unwrap();
        let t = TreeSpec { name: "t".into(), sizes: vec![3, 5] };
        fs::write(d.path().join("f00001.dat"), b"abc").unwrap();
        fs::write(d.path().join("f00002.dat"), b"ab").unwrap();
        fs::write(d.path().join(".f00002.dat.ferry-part"), b"abcde").unwrap();
        assert_eq!(count_done(d.path(), &t), (1, 3));
    }

    #[test]
    fn a_cleared_destination_keeps_its_inodes_until_the_trash_is_emptied() {
        let d = tempfile::tempdir().unwrap();
        let (dst, trash, stamp) = (d.path().join("down"), d.path().join("trash"), d.path().join("stamp"));
        fs::create_dir_all(dst.join("sub")).unwrap();
        fs::create_dir(&trash).unwrap();
        fs::write(dst.join("a"), b"abc").unwrap();
        fs::write(dst.join("sub").join("b"), b"de").unwrap();
        clear(&dst, &trash).unwrap();
        clear(&dst, &trash).unwrap(); // nothing there: nothing to do
        assert!(!dst.exists());
        let moved: Vec<_> = fs::read_dir(&trash).unwrap().flatten().map(|e| e.path()).collect();
        assert_eq!(moved.len(), 1);
        // Still there (no inode freed), but empty (no space held).
        assert_eq!(fs::metadata(moved[0].join("a")).unwrap().len(), 0);
        assert_eq!(fs::metadata(moved[0].join("sub").join("b")).unwrap().len(), 0);
        empty_trash(&trash, &stamp).unwrap();
        assert!(!trash.exists());
        assert!(stamp.exists(), "the next run waits from here");
        assert!(recently_deleted_window() >= Duration::from_secs(1));
    }
}
