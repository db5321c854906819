//! The read side's fence chosen at run time (feature `auto-fence`; `membarrier` implies
//! it): which mode a process ends up in, that it never changes once decided, and that
//! grace periods are right in each. Built and run by `cargo xtask test` twice: with
//! `--features auto-fence` (no platform fence: `Full` unless one is installed) and with
//! `--features membarrier` (Linux: `Heavy`, found at run time).
//!
//! The mode is the process's, so every scenario runs in a process of its own: the test
//! re-runs this binary with only that scenario selected (`in_own_process`), and the
//! scenario body runs only there. No two scenarios share the mode.
#![cfg(all(rcuref_auto_fence, not(rcuref_asymmetric_fence)))]

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
#[cfg(not(rcuref_membarrier))]
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
    assert_no_heavy_bit(&RCU);
}

/// The phase word's heavy bit: set by a flip that found the mode decided heavy, and
/// readers that see it take only a compiler fence.
#[cfg(rcuref_mutants)]
use rcuref::mutants::PHASE_HEAVY;

/// After a grace period decided the mode `Full`: no flip marked the phase word heavy (a
/// reader that saw the mark would skip the fence the full mode needs; the store-buffering
/// control `Mutant::PhaseSaysHeavy` shows what that costs).
#[cfg(not(rcuref_membarrier))]
fn assert_no_heavy_bit<const N: usize>(_rcu: &Rcu<N>) {
    #[cfg(rcuref_mutants)]
    assert_eq!(
        _rcu.phase_word() & PHASE_HEAVY,
        0,
        "a flip marked the phase word heavy in the full mode"
    );
}

/// After a whole grace period in the mode decided `Heavy`: its flips marked the phase
/// word, so outermost locks skip the load of the mode (with the mark missing, every lock
/// still loads it: as safe, and as slow as before the mark).
fn assert_heavy_bit<const N: usize>(_rcu: &Rcu<N>) {
    #[cfg(rcuref_mutants)]
    assert_ne!(
        _rcu.phase_word() & PHASE_HEAVY,
        0,
        "the flips of the heavy mode left the phase word unmarked"
    );
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
        1,
        "one heavy fence per grace period with a reader registered (at its first wait)"
    );
    assert_eq!(fence_mode(), FenceMode::Heavy);
    assert_heavy_bit(&RCU);
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
#[cfg(rcuref_membarrier)]
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
    #[cfg(rcuref_membarrier)]
    assert!(
        is_installed::<rcuref::rcu::heavy::Membarrier>(),
        "found, so installed"
    );
    // The first grace period decided; the next one's flips see Heavy.
    reader.synchronize(rcuref::rcu::spin).unwrap();
    assert_heavy_bit(&RCU);
}

/// The RCU test bodies, in a process whose mode is decided as the build decides it
/// (`Full` without a platform fence, `Heavy` with membarrier), with readers on other
/// threads.
#[test]
fn the_rcu_cases_in_the_decided_mode() {
    if in_own_process("the_rcu_cases_in_the_decided_mode") {
        return;
    }
    let expect = if cfg!(rcuref_membarrier) {
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

/// Two installs and a decision at once, each stopped where the race needs it (the C
/// API's race: two contexts call `rcuref_heavy_install` while a grace period decides):
/// `C` decides, having looked and found no fence, and is held before it records "full";
/// `B` installs its fence and is held before it sets the mode; then this thread (`A`)
/// installs another. Returns what `A`, `C` and `B` got, in that order, once `C` and then
/// `B` have gone on.
#[cfg(all(rcuref_mutants, not(rcuref_membarrier)))]
mod two_installs_and_a_decision {
    use super::*;
    use rcuref::mutants::{set_pause_hook, Point};
    use std::sync::atomic::AtomicBool;

    /// A held thread's point and the flag that lets it go on.
    type Hold = Option<(Point, &'static AtomicBool)>;
    std::thread_local! {
        /// Where this thread is to be held (once), and until what.
        static HOLD: std::cell::Cell<Hold> = const { std::cell::Cell::new(None) };
    }
    static HELD: AtomicBool = AtomicBool::new(false);

    fn hook(p: Point) {
        if let Some((at, release)) = HOLD.with(|h| h.get()) {
            if at == p {
                HOLD.with(|h| h.set(None));
                HELD.store(true, SeqCst);
                while !release.load(SeqCst) {
                    std::thread::yield_now();
                }
            }
        }
    }

    /// Starts `f` on a thread of its own that is to be held at `at`, and waits until it
    /// is. Returns the thread and the flag that lets it go on.
    fn held_at<T: Send + 'static>(
        at: Point,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> (std::thread::JoinHandle<T>, &'static AtomicBool) {
        HELD.store(false, SeqCst);
        let release: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let t = std::thread::spawn(move || {
            HOLD.with(|h| h.set(Some((at, release))));
            let r = f();
            assert!(release.load(SeqCst), "ran on without being held at {at:?}");
            r
        });
        let t0 = std::time::Instant::now();
        while !HELD.load(SeqCst) {
            assert!(!t.is_finished(), "the thread was never held at {at:?}");
            assert!(t0.elapsed().as_secs() < 10, "the thread never got going");
            std::thread::yield_now();
        }
        (t, release)
    }

    /// B's fence, for one-thread use as `OneThread`'s (counted apart).
    pub(super) struct Second;
    pub(super) static SECOND_FENCES: AtomicU32 = AtomicU32::new(0);
    // SAFETY: as `OneThread`: readers and writers of the scenario that uses it run on one
    // thread, whose own full fence is the barrier every reader needs.
    unsafe impl HeavyFence for Second {
        fn heavy_fence() {
            SECOND_FENCES.fetch_add(1, SeqCst);
            std::sync::atomic::fence(SeqCst);
        }
    }

    pub(super) fn race() -> (Result<(), Error>, FenceMode, Result<(), Error>) {
        set_pause_hook(Some(hook));
        let (c, c_go) = held_at(Point::DecideAfterLook, fence_mode);
        let (b, b_go) = held_at(Point::InstallAfterFence, install::<Second>);
        let a = install::<OneThread>();
        c_go.store(true, SeqCst);
        let c = c.join().unwrap();
        b_go.store(true, SeqCst);
        let b = b.join().unwrap();
        set_pause_hook(None);
        (a, c, b)
    }
}

/// Of two installs at once, the one refused as `Busy` is refused because the other's
/// fence is in effect: the mode is heavy, even with a decision that had looked before
/// either fence was set, and grace periods call the installed fence.
#[cfg(all(rcuref_mutants, not(rcuref_membarrier)))]
#[test]
fn an_install_refused_as_busy_leaves_the_other_fence_in_effect() {
    if in_own_process("an_install_refused_as_busy_leaves_the_other_fence_in_effect") {
        return;
    }
    use two_installs_and_a_decision::{race, Second, SECOND_FENCES};
    let (a, c, b) = race();
    assert_eq!(a, Err(Error::Busy), "A found B's fence set");
    assert_eq!(c, FenceMode::Heavy, "the held decision acted on A's");
    assert_eq!(b, Ok(()), "B's install went on into a heavy mode");
    assert_eq!(fence_mode(), FenceMode::Heavy);
    assert!(is_installed::<Second>() && !is_installed::<OneThread>());
    static RCU: Rcu<2> = Rcu::new();
    let mut reader = RCU.reader().unwrap();
    drop(reader.lock());
    reader.synchronize(rcuref::rcu::spin).unwrap();
    assert_eq!(
        SECOND_FENCES.load(SeqCst),
        1,
        "B's fence, once per grace period"
    );
    assert_eq!(FENCES.load(SeqCst), 0, "A's fence was never installed");
}

/// The control: an install that answers `Busy` as soon as it finds a fence set (the
/// first C install's code) lets the held decision record "full": A was told a fence is
/// installed, and none is in effect.
#[cfg(all(rcuref_mutants, not(rcuref_membarrier)))]
#[test]
fn negative_control_busy_before_the_mode_is_caught() {
    if in_own_process("negative_control_busy_before_the_mode_is_caught") {
        return;
    }
    use rcuref::mutants::{select, Mutant};
    use two_installs_and_a_decision::{race, Second};
    select(Mutant::BusyBeforeTheMode);
    let (a, c, b) = race();
    select(Mutant::None);
    assert_eq!(a, Err(Error::Busy));
    assert_eq!(
        (c, b, fence_mode()),
        (FenceMode::Full, Err(Error::Decided), FenceMode::Full),
        "the variant's race did not end full: the control shows nothing"
    );
    assert!(
        !is_installed::<Second>(),
        "a fence in effect in the full mode"
    );
}

/// The control of the phase word's heavy bit: a flip that marks the word heavy in the
/// full mode (`Mutant::PhaseSaysHeavy`) has readers take the compiler fence against waits
/// that issue no heavy fence, and the store-buffering torture must catch one reading
/// freed data. (The real flip adds the bit only once the mode is heavy; the torture of
/// `no_reader_sees_freed_data_in_the_decided_mode` runs that one.)
#[cfg(all(rcuref_mutants, not(rcuref_membarrier)))]
#[test]
fn negative_control_a_phase_word_marked_heavy_in_the_full_mode_is_caught() {
    if in_own_process("negative_control_a_phase_word_marked_heavy_in_the_full_mode_is_caught") {
        return;
    }
    use rcuref::mutants::{select, Mutant};
    assert_eq!(fence_mode(), FenceMode::Full);
    // In the full mode a reader without its fence read freed data hundreds of times a
    // run here; five runs leave a miss to a variant the torture cannot see.
    let caught = (0..5).any(|i| {
        select(Mutant::PhaseSaysHeavy);
        let bad = store_buffering::store_buffering_torture(200_000);
        select(Mutant::None);
        println!("run {i}: {bad} reads of freed data");
        bad > 0
    });
    assert!(
        caught,
        "readers trusted a phase word marked heavy in the full mode, unseen"
    );
}
