//! The system sampler against known loads: a spinning thread, an fsync'd
//! file write, a loopback TCP transfer. Assertions are lower bounds on
//! what the load itself must have caused (the machine is shared, so other
//! work can only add), never timings.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ferry_profile::{HostProfile, Sampler, SamplerConfig, StreamRegistry};

const MIB: u64 = 1 << 20;

/// The loads would disturb each other's measurements (and the machine is
/// shared already), so these tests take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sum of rate × interval over the samples: the counter's increase during sampling.
fn integral(h: &HostProfile, f: impl Fn(&ferry_profile::SystemSample) -> f64) -> f64 {
    h.samples.iter().map(|s| f(s) * s.dt).sum()
}

/// The calling thread's time on a CPU so far, ns (the first field of
/// `/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    s.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn a_busy_loop_shows_as_user_cpu_on_its_core() {
    let _serial = serial();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let core = cores - 1;
    let sampler =
        Sampler::start(SamplerConfig::every(Duration::from_millis(200)).with_process(std::process::id())).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let spinner = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut set = nix::sched::CpuSet::new();
            set.set(core).unwrap();
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).unwrap();
            let (started, cpu_before) = (Instant::now(), thread_cpu_ns());
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            std::hint::black_box(x);
            // The share of a core the spinner really got: on a loaded
            // machine far less than all of it.
            (thread_cpu_ns() - cpu_before) as f64 / started.elapsed().as_nanos() as f64 * 100.0
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let got = spinner.join().unwrap();
    let h = sampler.stop().unwrap();
    assert!(h.samples.len() >= 5, "{} samples", h.samples.len());
    assert_eq!(h.host.cores as usize, cores);
    let on_core: Vec<f64> = h
        .samples
        .iter()
        .filter_map(|s| s.cores.iter().find(|c| c.core as usize == core).map(|c| c.share.user + c.share.nice))
        .collect();
    let peak = on_core.iter().cloned().fold(0.0, f64::max);
    // Alone the spinner makes this 100%. On a shared machine it gets what
    // the scheduler gives it, which it measured itself (`got`): the
    // sampler must see at least most of that, whatever the load.
    assert!(got >= 5.0, "the spinner ran for only {got:.1}% of a core: nothing to judge");
    assert!(peak >= 0.8 * got, "user CPU on cpu{core} peaked at {peak:.1}%, the spinner ran {got:.1}%: {on_core:?}");
    let own_user = h.samples.iter().filter_map(|s| s.process.map(|p| p.user_percent)).fold(0.0, f64::max);
    assert!(own_user >= 0.8 * got, "the process's own user CPU peaked at {own_user:.1}%, the spinner ran {got:.1}%");
    assert!(h.samples.iter().all(|s| (s.cpu.busy() + s.cpu.idle + s.cpu.iowait - 100.0).abs() < 0.5));
    assert_eq!(h.process.as_ref().map(|p| p.pid), Some(std::process::id()));
    assert!(h.overhead.ticks >= 5 && h.overhead.mean_us > 0.0);
}

/// The whole disk (not the partition) that holds `dir`, as /proc/diskstats names it.
fn disk_of(dir: &Path) -> Option<String> {
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff), (dev & 0xff) | ((dev >> 12) & !0xff));
    if major == 0 {
        return None; // tmpfs, overlayfs and friends: no block device.
    }
    let sys = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let whole = if sys.join("partition").exists() { sys.parent()?.to_path_buf() } else { sys };
    whole.file_name().map(|n| n.to_string_lossy().into_owned())
}

fn scratch_dir() -> PathBuf {
    std::env::var_os("FERRY_PROFILE_TEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")))
}

#[test]
fn an_fsynced_write_shows_as_disk_writes() {
    let _serial = serial();
    let base = scratch_dir();
    // Cannot run without a block device: fail saying so, never pass silently.
    let Some(disk) = disk_of(&base) else {
        panic!(
            "cannot run here: {} is on a file system without a block device; set FERRY_PROFILE_TEST_DIR to a \
             directory on a disk",
            base.display()
        );
    };
    let dir = tempfile::tempdir_in(&base).unwrap();
    let size = 32 * MIB;
    let sampler = Sampler::start(SamplerConfig::every(Duration::from_millis(200))).unwrap();
    {
        let mut f = std::fs::File::create(dir.path().join("dd.bin")).unwrap();
        // Not zeros: a thin-provisioned or compressing disk could skip them.
        let block: Vec<u8> = (0..MIB).map(|i| ((i * 2_654_435_761) >> 13) as u8).collect();
        for _ in 0..size / MIB {
            f.write_all(&block).unwrap();
        }
        f.sync_all().unwrap();
    }
    let h = sampler.stop().unwrap();
    let written = integral(&h, |s| s.disks.iter().filter(|d| d.name == disk).map(|d| d.write_bytes_per_s).sum());
    let writes = integral(&h, |s| s.disks.iter().filter(|d| d.name == disk).map(|d| d.writes_per_s).sum());
    let devices: Vec<_> =
        h.samples.last().map(|s| s.disks.iter().map(|d| d.name.clone()).collect()).unwrap_or_default();
    assert!(
        written >= size as f64,
        "{disk} wrote {:.1} MiB while {} MiB were fsync'd (devices sampled: {devices:?})",
        written / MIB as f64,
        size / MIB
    );
    assert!(writes >= 1.0);
    let total = integral(&h, |s| s.disk_total.write_bytes_per_s);
    assert!(total >= size as f64, "the physical-disk total missed the write: {:.1} MiB", total / MIB as f64);
    // RAM disks are memory; loop devices are files of another disk, listed
    // but stacked (kept out of the totals, which count the backing disk).
    assert!(h
        .samples
        .iter()
        .all(|s| s.disks.iter().all(|d| !d.name.starts_with("ram") && (!d.name.starts_with("loop") || d.stacked))));
}

#[test]
fn a_loopback_transfer_shows_packets_on_lo() {
    let _serial = serial();
    let size = 100 * MIB;
    let registry = StreamRegistry::new();
    let sampler =
        Sampler::start(SamplerConfig::every(Duration::from_millis(200)).with_streams(registry.clone())).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let sender_registry = registry.clone();
    let sender = std::thread::spawn(move || {
        let sock = TcpStream::connect(addr).unwrap();
        let mut sock = sender_registry.track(sock, "sender").unwrap();
        let block = vec![0x5au8; MIB as usize];
        for _ in 0..size / MIB {
            sock.write_all(&block).unwrap();
        }
        // Wait until the receiver has everything (it closes after reading
        // our FIN), so the last reading below has every byte acknowledged.
        sock.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(sock.read(&mut [0u8; 1]).unwrap(), 0);
        // Dropping the tracked socket deregisters it (taking a last
        // TCP_INFO reading) and then closes it.
    });
    let (sock, _) = listener.accept().unwrap();
    let mut sock = registry.track(sock, "receiver").unwrap();
    let mut buf = vec![0u8; MIB as usize];
    let mut got = 0u64;
    let started = Instant::now();
    loop {
        let n = sock.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got += n as u64;
        assert!(started.elapsed() < Duration::from_secs(60), "transfer stalled");
    }
    drop(sock);
    sender.join().unwrap();
    assert_eq!(got, size);
    let h = sampler.stop().unwrap();

    let lo_bytes = integral(&h, |s| s.nets.iter().filter(|n| n.name == "lo").map(|n| n.rx_bytes_per_s).sum());
    let lo_packets = integral(&h, |s| s.nets.iter().filter(|n| n.name == "lo").map(|n| n.rx_packets_per_s).sum());
    assert!(
        lo_bytes >= size as f64,
        "lo received {:.1} MiB during a {} MiB transfer",
        lo_bytes / MIB as f64,
        size / MIB
    );
    // lo's MTU is 64 KiB, so at least size / 64 KiB packets.
    assert!(lo_packets >= (size / (64 * 1024)) as f64, "only {lo_packets:.0} packets on lo");
    let segs = integral(&h, |s| s.tcp.out_segs_per_s);
    assert!(segs >= (size / (64 * 1024)) as f64, "only {segs:.0} TCP segments sent");

    // Both sockets were sampled, and the last reading of the sender (taken
    // when it was deregistered) has every byte acknowledged.
    assert_eq!(h.streams.len(), 2, "{:?}", h.streams.iter().map(|s| &s.label).collect::<Vec<_>>());
    let s = h.streams.iter().find(|s| s.label == "sender").unwrap();
    let last = s.samples.last().unwrap();
    assert!(last.info.bytes_acked >= size, "sender's bytes_acked {}", last.info.bytes_acked);
    assert!(s.closed_t.is_some());
    assert_eq!(s.peer.as_deref(), Some(addr.to_string().as_str()));
    let r = h.streams.iter().find(|s| s.label == "receiver").unwrap();
    assert!(r.samples.last().unwrap().info.bytes_received >= size);
    assert!(registry.is_empty());
}

#[test]
fn a_sampler_can_be_dropped_and_a_registry_reused() {
    let _serial = serial();
    let registry = StreamRegistry::new();
    let a = Sampler::start(SamplerConfig::every(Duration::from_millis(50)).with_streams(registry.clone())).unwrap();
    let busy = Sampler::start(SamplerConfig::every(Duration::from_millis(50)).with_streams(registry.clone()));
    assert!(matches!(busy, Err(ferry_profile::ProfileError::RegistryBusy)));
    drop(a);
    let b = Sampler::start(SamplerConfig::every(Duration::from_millis(50)).with_streams(registry)).unwrap();
    std::thread::sleep(Duration::from_millis(120));
    let h = b.stop().unwrap();
    assert!(h.samples.len() >= 2, "{} samples", h.samples.len());
    assert!(h.samples.iter().all(|s| s.dt > 0.0 && s.t > 0.0));
}
