//! The read side's fence chosen at run time (feature `auto-fence`; `membarrier` implies
//! it): which mode a process ends up in, that it never changes once decided, and that
//! grace periods are right in each. Built and run by `cargo xtask test` twice: with
//! `--features auto-fence` (no platform fence: `Full` unless one is installed) and with
//! `--features membarrier` (Linux: `Heavy`, found at run time).
//!
//! The mode is the process's, so every scenario runs in a process of its own: the test
//! re-runs this binary with only that scenario selected (`in_own_process`), and the
//! scenario body runs only there. No two scenarios share the mode.
#![cfg(all(feature = "auto-fence", not(rcuref_asymmetric_fence)))]

#[path = "cases/rcu.rs"]
mod cases;
#[path = "cases/store_buffering.rs"]
mod store_buffering;

use rcuref::rcu::heavy::{fence_mode, install, is_installed, FenceMode, HeavyFence};
use rcuref::rcu::Rcu;
use rcuref::Error;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};

const SCENARIO: &str = "RCUREF_AUTO_FENCE_SCENARIO";

/// Runs test `name` of this binary in a process of its own, with the scenario switch
/// set, and fails if it does; returns false when already inside that process (the
/// caller then runs the scenario's body).
fn in_own_process(name: &str) -> bool {
    if std::env::var_os(SCENARIO).is_some() {
        return false;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(SCENARIO, name)
        .output()
        .expect("re-running the test binary");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "scenario {name} failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The child must really have run it (a filter that matched nothing passes too).
    assert!(
        text.contains("1 passed"),
        "scenario {name} ran no test:\n{text}"
    );
    true
}

static FENCES: AtomicU32 = AtomicU32::new(0);

/// A heavy fence for single-threaded scenarios only: with one thread, the calling
/// thread's full fence is every reader's (the contract holds trivially).
struct OneThread;
// SAFETY: used only by scenarios that run readers and writers on one thread, whose own
// full fence is the barrier every reader needs.
unsafe impl HeavyFence for OneThread {
    fn heavy_fence() {
        FENCES.fetch_add(1, SeqCst);
        std::sync::atomic::fence(SeqCst);
    }
}

/// Readers before the decision, the first grace period deciding, and the mode fixed
/// from then on: without a platform fence it is `Full`, and a later install is refused
/// with `Error::Decided` (the mode never changes under a reader).
#[cfg(not(feature = "membarrier"))]
#[test]
fn without_a_fence_the_first_grace_period_decides_full() {
    if in_own_process("without_a_fence_the_first_grace_period_decides_full") {
        return;
    }
    static RCU: Rcu<2> = Rcu::new();
    let mut reader = RCU.reader().unwrap();
    drop(reader.lock()); // undecided: the full fence
    reader.synchronize(rcuref::rcu::spin).unwrap(); // decides
    assert_eq!(fence_mode(), FenceMode::Full);
    assert_eq!(install::<OneThread>(), Err(Error::Decided));
    assert!(!is_installed::<OneThread>());
    assert_eq!(fence_mode(), FenceMode::Full);
    reader.synchronize(rcuref::rcu::spin).unwrap();
    assert_eq!(FENCES.load(SeqCst), 0, "no heavy fence in the full mode");
}

/// A fence installed at boot (before the first grace period, so before membarrier is
/// looked for, in a build that has it) makes the mode `Heavy`: every wait with a reader issues
/// it, a second install is refused with `Error::Busy`, and a reader that entered its
/// section before the install (with the full fence) still holds the grace period.
#[test]
fn a_fence_installed_at_boot_makes_the_mode_heavy() {
    if in_own_process("a_fence_installed_at_boot_makes_the_mode_heavy") {
        return;
    }
    static RCU: Rcu<2> = Rcu::new();
    let mut reader = RCU.reader().unwrap();
    let early = reader.lock(); // before the install: the full fence
    assert!(!is_installed::<OneThread>());
    assert_eq!(install::<OneThread>(), Ok(()));
    assert_eq!(install::<OneThread>(), Err(Error::Busy));
    assert!(
        is_installed::<OneThread>(),
        "the refused second install is the same fence"
    );
    assert_eq!(fence_mode(), FenceMode::Heavy);
    let cookie = RCU.start_poll();
    for _ in 0..100 {
        assert!(!cookie.poll(), "a grace period ended under an early reader");
    }
    drop(early);
    assert!(
        (0..100).any(|_| cookie.poll()),
        "the grace period did not end"
    );
    let before = FENCES.load(SeqCst);
    drop(reader.lock());
    reader.synchronize(rcuref::rcu::spin).unwrap();
    assert_eq!(
        FENCES.load(SeqCst) - before,
        2,
        "one heavy fence per wait of a grace period with a reader registered"
    );
    assert_eq!(fence_mode(), FenceMode::Heavy);
}

/// An install that comes after nothing but readers is still in time: readers never
/// decide.
#[test]
fn readers_alone_do_not_decide() {
    if in_own_process("readers_alone_do_not_decide") {
        return;
    }
    static RCU: Rcu<2> = Rcu::new();
    for _ in 0..1000 {
        RCU.with_reader(|_| ()).unwrap();
    }
    assert_eq!(install::<OneThread>(), Ok(()));
    assert_eq!(fence_mode(), FenceMode::Heavy);
}

/// With feature `membarrier` on Linux the first grace period finds membarrier and the
/// mode is `Heavy`; the platform's fence counts as installed (a second one is refused).
#[cfg(feature = "membarrier")]
#[test]
fn membarrier_is_found_at_run_time() {
    if in_own_process("membarrier_is_found_at_run_time") {
        return;
    }
    static RCU: Rcu<2> = Rcu::new();
    let mut reader = RCU.reader().unwrap();
    drop(reader.lock());
    reader.synchronize(rcuref::rcu::spin).unwrap();
    assert_eq!(
        fence_mode(),
        FenceMode::Heavy,
        "this kernel has membarrier (the asymmetric suite uses it)"
    );
    assert_eq!(install::<OneThread>(), Err(Error::Busy));
    assert!(!is_installed::<OneThread>());
    #[cfg(feature = "membarrier")]
    assert!(
        is_installed::<rcuref::rcu::heavy::Membarrier>(),
        "found, so installed"
    );
}

/// The RCU test bodies, in a process whose mode is decided as the build decides it
/// (`Full` without a platform fence, `Heavy` with membarrier), with readers on other
/// threads.
#[test]
fn the_rcu_cases_in_the_decided_mode() {
    if in_own_process("the_rcu_cases_in_the_decided_mode") {
        return;
    }
    let expect = if cfg!(feature = "membarrier") {
        FenceMode::Heavy
    } else {
        FenceMode::Full
    };
    assert_eq!(fence_mode(), expect);
    cases::nested_sections();
    cases::stalled_reader();
    cases::epoch_wraps();
    cases::defer_queue_is_bounded();
    cases::cell_publish_and_reclaim();
    static T: cases::Torture = cases::Torture::new();
    std::thread::scope(|s| {
        s.spawn(|| T.reader_loop());
        s.spawn(|| T.reader_loop());
        T.writer(5_000, 500, std::thread::yield_now);
    });
    T.check();
}

/// The store-buffering torture (a reader's announce held in its store buffer while it
/// reads) in the decided mode: no reader reads freed data, whether the readers take the
/// full fence (`Full`) or the compiler fence against heavy fences (`Heavy`). In `Full`,
/// a reader that skipped its fence (a mutant of `readers_skip_fence`) is caught here.
#[test]
fn no_reader_sees_freed_data_in_the_decided_mode() {
    if in_own_process("no_reader_sees_freed_data_in_the_decided_mode") {
        return;
    }
    // Decided first, so the readers run in the mode from their first section. (A reader
    // that skipped its fence in `Full` read freed data 208 and 351 times in two runs.)
    let _ = fence_mode();
    assert_eq!(store_buffering::store_buffering_torture(200_000), 0);
}
