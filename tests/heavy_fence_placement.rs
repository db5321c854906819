//! Where the asymmetric-fence mode's heavy fence sits, with two grace-period drivers.
//! Built and run by `cargo xtask test` in the asymmetric-fence build:
//! `RUSTFLAGS="--cfg rcuref_asymmetric_fence --cfg rcuref_mutants" cargo test --release
//! --test heavy_fence_placement -- --test-threads=1`.
//!
//! The correctness argument (`src/rcu/heavy.rs`, module docs) needs, before every
//! scan of a wait, a heavy fence begun after the counter reached that wait and returned
//! before the scan: its own context's, or another driver's that it learnt of through
//! the domain's `fenced` word ("One fence per wait"). One driver cannot tell that from a
//! fence issued by whoever flipped the counter to the wait: a second driver can scan a
//! wait it did not flip. Here one driver is held inside its heavy fence while another
//! drives grace periods, or held after a scan while another moves the counter onto a
//! new wait, and every scan checks that some heavy fence begun once the counter had
//! reached that wait has returned. Marking the wait fenced before the fence runs
//! (`Mutant::FencedBeforeHeavyFence`) fails it, and so does skipping the fence.
//!
//! The fence count: one heavy fence per wait, so two per grace period, however often a
//! blocking wait rescans and however many drivers poll (`HeavyFenceEveryScan`, the old
//! design, fails that test).
//! (The store-buffering torture in `tests/asymmetric.rs` shows what a missing fence
//! does to readers.)
#![cfg(all(rcuref_asymmetric_fence, rcuref_mutants))]

use rcuref::mutants::{select, set_pause_hook, Mutant, Point};
use rcuref::rcu::Rcu;
use std::cell::Cell;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static RCU: Rcu<4> = Rcu::new();

/// Where a driver is held until `RELEASE`.
#[derive(Clone, Copy, PartialEq)]
enum Hold {
    InItsFirstFence,
    AfterItsFirstScan,
}

/// The counter at the start of every heavy fence that has returned (any thread's).
static RETURNED: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// Heavy fences begun.
static FENCES: AtomicU32 = AtomicU32::new(0);

std::thread_local! {
    /// Where this thread is to be held (once).
    static HOLD: Cell<Option<Hold>> = const { Cell::new(None) };
}
/// Each heavy fence takes 20 µs (as membarrier's IPIs do), so that concurrent drivers
/// overlap inside it.
static SLOW: AtomicBool = AtomicBool::new(false);
static HELD: AtomicBool = AtomicBool::new(false);
static RELEASE: AtomicBool = AtomicBool::new(false);
/// Scans not preceded by a heavy fence of their own context begun at their wait.
static UNFENCED: AtomicU32 = AtomicU32::new(0);

/// Holds the calling thread if it is to be held at `here`.
fn hold_if(here: Hold) {
    if HOLD.with(|h| h.get()) == Some(here) {
        HOLD.with(|h| h.set(None));
        HELD.store(true, SeqCst);
        while !RELEASE.load(SeqCst) {
            std::thread::yield_now();
        }
    }
}

/// A heavy fence that records when it began and can be held open.
struct Recording;

// SAFETY: not a heavy fence for real readers (it fences only the calling thread): no
// reader section runs in this test binary, so nothing relies on the contract; the
// library's calls to it are what is under test.
unsafe impl rcuref::rcu::heavy::HeavyFence for Recording {
    fn heavy_fence() {
        fence(SeqCst);
        FENCES.fetch_add(1, SeqCst);
        let g = RCU.gp_counter();
        hold_if(Hold::InItsFirstFence);
        if SLOW.load(SeqCst) {
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_micros(20) {
                std::hint::spin_loop();
            }
        }
        RETURNED.lock().unwrap().push(g);
    }
}

rcuref::set_heavy_fence!(Recording);

fn hook(p: Point) {
    match p {
        Point::GpBeforeScan(wait) => {
            // Some fence began once the counter had reached the wait (so after the flip
            // to it) and has returned: the counter never goes back, and a wrapping
            // distance below 2^31 is "at or after" on the full-width counter used here.
            let fenced = RETURNED
                .lock()
                .unwrap()
                .iter()
                .any(|&at| at.wrapping_sub(wait) < 1 << 31);
            if !fenced {
                UNFENCED.fetch_add(1, SeqCst);
            }
        }
        Point::GpAfterScan => hold_if(Hold::AfterItsFirstScan),
        _ => {}
    }
}

/// Puts the process-wide state back however a test ends.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        RELEASE.store(true, SeqCst);
        SLOW.store(false, SeqCst);
        set_pause_hook(None);
        select(Mutant::None);
    }
}

/// Starts driver A (a grace period from where the counter is), held at `hold`, and
/// waits until it is held or done. Returns it, and whether it is held.
fn start_held(hold: Hold) -> (std::thread::JoinHandle<()>, bool) {
    HELD.store(false, SeqCst);
    RELEASE.store(false, SeqCst);
    let a = std::thread::spawn(move || {
        HOLD.with(|h| h.set(Some(hold)));
        let _ = RCU.start_poll().poll();
    });
    let t0 = Instant::now();
    while !HELD.load(SeqCst) && !a.is_finished() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "driver A never got going"
        );
        std::thread::yield_now();
    }
    (a, HELD.load(SeqCst))
}

/// Polls `cookie` until it is done (no reader runs here, so it must end soon).
fn finish(cookie: rcuref::rcu::GpCookie<'_, 4>) {
    for _ in 0..10 {
        if cookie.poll() {
            return;
        }
    }
    panic!("no reader, and still the grace period did not end");
}

/// Two scenarios; returns (scans with no fence of their own at their wait, whether
/// driver A was held in each).
///
/// 1. A is held inside its first heavy fence (at the wait it flipped to); driver B (this
///    thread) drives a grace period through waits it did not flip; then A goes on.
/// 2. A is held after its first scan; this thread carries the counter onto the next
///    wait without scanning it; A's exchange then fails and tells it the new wait,
///    which A must fence for itself before scanning.
fn two_drivers() -> (u32, [bool; 2]) {
    UNFENCED.store(0, SeqCst);
    RETURNED.lock().unwrap().clear();
    // A registered reader (offline): a domain with every slot free needs no heavy
    // fence at all ("An empty domain"), which is tested on its own below.
    let _reader = RCU.register().unwrap();
    set_pause_hook(Some(hook));

    let (a, held_in_fence) = start_held(Hold::InItsFirstFence);
    finish(RCU.start_poll());
    RELEASE.store(true, SeqCst);
    a.join().unwrap();

    let (a, held_after_scan) = start_held(Hold::AfterItsFirstScan);
    let g = RCU.gp_counter();
    if held_after_scan {
        assert_eq!(g & 1, 1, "A is held after scanning a wait");
        // Past this wait and the flip after it, onto the next wait, not scanning it.
        let _ = RCU.cookie_from_raw(g.wrapping_add(2)).poll();
        assert_eq!(RCU.gp_counter(), g.wrapping_add(2));
    }
    RELEASE.store(true, SeqCst);
    a.join().unwrap();
    finish(RCU.start_poll());

    set_pause_hook(None);
    (UNFENCED.load(SeqCst), [held_in_fence, held_after_scan])
}

#[test]
fn every_scan_follows_a_returned_heavy_fence_begun_at_its_wait() {
    let _restore = Restore;
    let (unfenced, held) = two_drivers();
    assert_eq!(held, [true, true], "driver A was not held: one driver only");
    assert_eq!(unfenced, 0);
}

/// The control: with the heavy fence skipped, the scans are unfenced.
#[test]
fn negative_control_a_skipped_heavy_fence_is_caught() {
    let _restore = Restore;
    select(Mutant::SkipHeavyFence);
    let (unfenced, _) = two_drivers();
    select(Mutant::None);
    assert!(unfenced > 0, "a skipped heavy fence went unnoticed");
}

/// The wait is marked fenced before its fence has run: driver B, at the wait A is held
/// fencing, scans on A's unfinished fence.
#[test]
fn negative_control_a_wait_marked_fenced_too_early_is_caught() {
    let _restore = Restore;
    select(Mutant::FencedBeforeHeavyFence);
    let (unfenced, held) = two_drivers();
    select(Mutant::None);
    assert!(held[0], "driver A was not held in its fence");
    assert!(unfenced > 0, "a scan on an unfinished fence went unnoticed");
}

/// Heavy fences for `grace_periods` grace periods, each held up by a reader for
/// `rescans` polls of each of two drivers (this thread and one more) before it leaves.
fn fences_per_grace_period(grace_periods: u32, rescans: u32) -> f64 {
    let reader = RCU.register().unwrap();
    let before = FENCES.load(SeqCst);
    for _ in 0..grace_periods {
        let guard = reader.lock();
        let cookie = RCU.start_poll();
        std::thread::scope(|s| {
            let other = s.spawn(|| {
                for _ in 0..rescans {
                    assert!(!cookie.poll(), "a grace period ended under a reader");
                }
            });
            for _ in 0..rescans {
                assert!(!cookie.poll(), "a grace period ended under a reader");
            }
            other.join().unwrap();
        });
        drop(guard);
        finish(cookie);
    }
    f64::from(FENCES.load(SeqCst) - before) / f64::from(grace_periods)
}

/// One heavy fence per wait: two per grace period, with two drivers polling a wait a
/// reader holds 50 times each.
#[test]
fn one_heavy_fence_serves_every_scan_of_a_wait() {
    let _restore = Restore;
    let per_gp = fences_per_grace_period(20, 50);
    // Two drivers can both find a wait unfenced and fence it (neither waits for the
    // other's fence): at most one extra per wait, never one per scan.
    assert!(
        (2.0..=4.0).contains(&per_gp),
        "{per_gp} heavy fences per grace period (one per wait expected)"
    );
}

/// The control: a heavy fence at every scan (the old design) is seen.
#[test]
fn negative_control_a_fence_per_scan_is_counted() {
    let _restore = Restore;
    select(Mutant::HeavyFenceEveryScan);
    let per_gp = fences_per_grace_period(5, 50);
    select(Mutant::None);
    assert!(per_gp > 50.0, "only {per_gp} heavy fences per grace period");
}

/// Heavy fences per grace period with two threads in `synchronize` at once, each fence
/// taking 20 µs: a blocking wait that meets the other's fence under way waits for it.
fn fences_per_grace_period_two_waiters() -> f64 {
    SLOW.store(true, SeqCst);
    let (f0, g0) = (FENCES.load(SeqCst), RCU.gp_counter());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut w = RCU.register().unwrap();
                for _ in 0..300 {
                    w.synchronize(rcuref::rcu::spin).unwrap();
                }
            });
        }
    });
    SLOW.store(false, SeqCst);
    let gps = f64::from(RCU.gp_counter().wrapping_sub(g0)) / 4.0;
    f64::from(FENCES.load(SeqCst) - f0) / gps
}

/// Two blocking waiters share each wait's fence: about two per grace period (2.0-2.05
/// measured here; a few more where both look before either has begun). Waiters that
/// fence for themselves measured 2.65-3.9.
#[test]
fn concurrent_waits_share_a_fence_under_way() {
    let _restore = Restore;
    let per_gp = fences_per_grace_period_two_waiters();
    assert!(per_gp < 2.3, "{per_gp} heavy fences per grace period");
}

/// The control: waiters that fence for themselves issue nearly one each per wait.
#[test]
fn negative_control_impatient_waiters_are_counted() {
    let _restore = Restore;
    select(Mutant::ImpatientWaiters);
    let per_gp = fences_per_grace_period_two_waiters();
    select(Mutant::None);
    assert!(per_gp > 2.3, "only {per_gp} heavy fences per grace period");
}

/// A lone blocking wait with no reader ends at its first attempt: it never holds back
/// for a heavy fence that no other driver is issuing (a wait that did would crawl
/// through `PATIENCE` attempts of back-off before fencing for itself).
#[test]
fn a_lone_waiter_never_waits_for_a_fence_nobody_issues() {
    let _restore = Restore;
    let mut w = RCU.register().unwrap();
    for _ in 0..50 {
        let mut attempts = 0;
        w.synchronize(|x| {
            attempts = x.attempts();
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
        assert!(
            attempts < 4,
            "{attempts} attempts for a grace period with no reader"
        );
    }
}

/// Heavy fences for `grace_periods` grace periods driven by `poll` from a context with
/// no slot, on a domain whose slots are all free unless `with_reader`.
fn fences_in_a_domain(with_reader: bool, grace_periods: u32) -> u32 {
    static EMPTY: Rcu<4> = Rcu::new();
    // `Recording` reads `RCU`'s counter; here only the count matters.
    let reader = with_reader.then(|| EMPTY.register().unwrap());
    let before = FENCES.load(SeqCst);
    for _ in 0..grace_periods {
        let c = EMPTY.start_poll();
        let mut polls = 0;
        while !c.poll() {
            polls += 1;
            assert!(polls < 10, "no reader, and the grace period did not end");
        }
    }
    drop(reader);
    FENCES.load(SeqCst) - before
}

/// liburcu skips `membarrier` when no thread is registered: a domain with every slot
/// free issues no heavy fence, and one with a registered (offline) reader two per grace
/// period. (What the claim's fence is for, a reader claiming just after a step skipped
/// its fence, is the litmus test `asym-empty-domain-skips-the-fence`: on x86 the
/// claim's compare-exchange is a barrier by itself.)
#[test]
fn an_empty_domain_needs_no_heavy_fence() {
    let _restore = Restore;
    assert_eq!(fences_in_a_domain(false, 20), 0);
    assert_eq!(fences_in_a_domain(true, 20), 40);
}

/// The control: a wait step that fences an empty domain is counted.
#[test]
fn negative_control_fencing_an_empty_domain_is_counted() {
    let _restore = Restore;
    select(Mutant::FenceEmptyDomain);
    let n = fences_in_a_domain(false, 20);
    select(Mutant::None);
    assert_eq!(n, 40);
}
