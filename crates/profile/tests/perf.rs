//! perf summaries: a committed `perf report` text (from `ferry demo` on
//! loopback, recorded system-wide) and, where perf works, a real profile
//! of a busy loop in this process.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferry_profile::{
    parse_report, perf_available, record_for, ModuleGroup, PerfConfig, PerfRecording, PerfTarget, ProfileError,
};

const FIXTURE: &str = include_str!("fixtures/perf-report.txt");

#[test]
fn parses_the_committed_report() {
    let s = parse_report(FIXTURE, &["ferry".to_string()], 20).unwrap();
    assert_eq!(s.event, "cpu-clock");
    assert!(s.samples > 1000, "{} samples", s.samples);
    assert_eq!(s.symbols.len(), 20);
    // Shares add up to the whole (perf rounds each row to 0.01%).
    let total: f64 = s.dsos.iter().map(|d| d.percent).sum();
    assert!((total - 100.0).abs() < 1.0, "DSO shares sum to {total}");
    let groups: f64 = s.groups.iter().map(|g| g.percent).sum();
    assert!((groups - total).abs() < 1e-6);
    let samples: u64 = s.groups.iter().map(|g| g.samples).sum();
    assert_eq!(samples, s.samples);
    // Sorted, heaviest first.
    assert!(s.dsos.windows(2).all(|w| w[0].percent >= w[1].percent));
    assert!(s.groups.windows(2).all(|w| w[0].percent >= w[1].percent));
    // The kernel dominates a loopback transfer, and the paper's modules are there.
    assert_eq!(s.dsos[0].dso, "[kernel.kallsyms]");
    assert!(s.kernel_percent > 50.0, "kernel {}%", s.kernel_percent);
    let group = |g: ModuleGroup| s.groups.iter().find(|x| x.group == g).map(|x| x.percent).unwrap_or(0.0);
    for g in [ModuleGroup::TcpIp, ModuleGroup::MemoryCopy, ModuleGroup::Ferry, ModuleGroup::SchedulerIdle] {
        assert!(group(g) > 0.5, "{g:?} has {}%: {:#?}", group(g), s.groups);
    }
    // Every group's examples are its own symbols.
    for g in &s.groups {
        assert!(!g.examples.is_empty() && g.examples.len() <= 3);
        assert_eq!(g.name, g.group.label());
    }
}

#[test]
fn missing_perf_is_a_clear_error() {
    let mut c = PerfConfig::system_wide();
    c.perf_binary = PathBuf::from("/nonexistent/perf");
    let e = PerfRecording::start(&c).unwrap_err();
    assert!(matches!(e, ProfileError::PerfMissing), "{e:?}");
    assert!(e.to_string().contains("linux-perf"), "{e}");
}

#[inline(never)]
fn busy_spin_for_perf_test(stop: &AtomicBool) -> u64 {
    let mut x = 1u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(2862933555777941757).wrapping_add(3037000493));
        }
    }
    x
}

#[test]
fn profiles_a_busy_loop_when_perf_works() {
    // Cannot run without perf: fail saying so, never pass silently.
    if let Err(e) = perf_available(&PathBuf::from("perf")) {
        panic!(
            "cannot run here: perf does not run ({e}); install linux-perf and allow it (root, or \
             kernel.perf_event_paranoid <= 2)"
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let spinner = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || busy_spin_for_perf_test(&stop))
    };
    let mut config = PerfConfig::new(PerfTarget::Pid(std::process::id()));
    config.call_graph = false;
    // On a loaded machine perf can take most of a short recording to
    // attach, and the spinner may wait for a core: a recording without
    // samples ("no samples recorded?") is taken again for longer, up to
    // three times; what is asserted below holds for the one kept.
    let mut summary = Err(ProfileError::PerfParse("not recorded".into()));
    for millis in [1500, 4000, 8000] {
        summary = record_for(&config, Duration::from_millis(millis));
        match &summary {
            Ok(s) if s.samples >= 50 => break,
            Ok(s) => eprintln!("{} samples in {millis} ms; recording again for longer", s.samples),
            Err(ProfileError::PerfParse(e)) => eprintln!("{e} after {millis} ms; recording again for longer"),
            Err(_) => break,
        }
    }
    stop.store(true, Ordering::Relaxed);
    spinner.join().unwrap();
    let s = summary.unwrap();
    assert!(s.samples >= 50, "only {} samples", s.samples);
    assert_eq!(s.target, format!("pid {}", std::process::id()));
    assert!(s.duration_s >= 1.0);
    let own = s.groups.iter().find(|g| g.group == ModuleGroup::Ferry).map(|g| g.percent).unwrap_or(0.0);
    assert!(own >= 50.0, "the test binary's own code has {own}% of the samples: {:#?}", s.groups);
    // In a debug build the loop's iterator and hint calls are separate
    // symbols, so the function itself has only part of the samples.
    let spin = s.symbols.iter().find(|x| x.symbol.contains("busy_spin_for_perf_test"));
    assert!(spin.is_some_and(|x| x.percent >= 5.0 && !x.kernel), "busy loop not found among {:#?}", s.symbols);
}
