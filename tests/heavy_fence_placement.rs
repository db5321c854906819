//! Where the asymmetric-fence mode's heavy fence sits, with two grace-period drivers.
//! Built and run by `cargo xtask test` in the asymmetric-fence build:
//! `RUSTFLAGS="--cfg rcuref_asymmetric_fence --cfg rcuref_mutants" cargo test --release
//! --test heavy_fence_placement` (serial by construction: `Restore::take`).
//!
//! The correctness argument (`src/rcu/heavy.rs`, module docs) needs, for every cookie,
//! a heavy fence before the scan of the first wait the cookie counts, begun after the
//! cookie was taken ("One fence per grace period"). Cookies are aligned to grace
//! periods, so that first wait is a grace period's first (counter `% 4 == 1`): every
//! cookie's target is checked for that here (`Mutant::UnalignedCookies` fails it), and
//! every scan of a first wait must follow a heavy fence begun after the counter reached
//! that wait and returned before the scan: its own context's, or another driver's that
//! it learnt of through the domain's `returned` mark ("One fence per first wait,
//! whoever drives it"). One driver cannot tell that from a fence issued by whoever
//! flipped the counter to the wait: a second driver can scan a wait it did not flip.
//! Here one driver is held inside its heavy fence while another drives grace periods,
//! or held after a scan while another moves the counter onto a new first wait, and
//! every scan of a first wait checks that some heavy fence begun once the counter had
//! reached that wait has returned. Marking the wait fenced before the fence runs
//! (`Mutant::FencedBeforeHeavyFence`) fails it, and so does skipping the fence.
//!
//! The fence count: one heavy fence per grace period, however often a blocking wait
//! rescans and however many drivers poll (`HeavyFenceEveryScan`, the old design, fails
//! that test).
//! The marks across laps and panics (`heavy`'s module docs, "The marks"): a mark left
//! from the last lap of a 4-bit counter is not trusted (`Mutant::MarkKeptAcrossLaps`
//! fails it), and neither a panicked heavy fence nor a late mark leaves a blocking
//! waiter holding back for a fence nobody issues (`Mutant::BegunLeftBehind`).
//! A waiter sleeps for another driver's fence only while it is patient and that fence is
//! under way at the counter's wait; otherwise it issues the heavy fence after its
//! announcement before it sleeps (`an_impatient_waiter_fences_before_it_sleeps`,
//! `a_waiter_fences_before_it_sleeps_on_a_wait_nobody_fences`: they kill the mutants
//! of `heavy::sleep_for_fence`'s conditions).
//!
//! (The store-buffering torture in `tests/asymmetric.rs` shows what a missing fence
//! does to readers.)
#![cfg(all(rcuref_asymmetric_fence, rcuref_mutants))]

use rcuref::mutants::{select, set_gp_bits, set_pause_hook, Mutant, Point};
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
    /// After its scan of the wait at this counter value (`lap_hook`).
    AfterItsScanOf(u32),
}

/// The 4-bit domain of the lap tests, if one is under test: the heavy fence logs its
/// counter at the start of each fence in `LAP_LOG`.
static LAP: std::sync::atomic::AtomicPtr<Rcu<4>> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
static LAP_LOG: Mutex<Vec<u32>> = Mutex::new(Vec::new());

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
/// The next heavy fence panics (after it has begun: the driver had marked it begun).
static PANIC_ONCE: AtomicBool = AtomicBool::new(false);
static HELD: AtomicBool = AtomicBool::new(false);
static RELEASE: AtomicBool = AtomicBool::new(false);
/// Scans of a first wait not preceded by a returned heavy fence begun at that wait.
static UNFENCED: AtomicU32 = AtomicU32::new(0);
/// Scans of a second wait (which issue no heavy fence of their own): that the scenarios
/// reach them at all.
static SECOND_WAIT_SCANS: AtomicU32 = AtomicU32::new(0);

/// Whether wait `g` is the first of its grace period (the one that issues the heavy
/// fence, `g % 4 == 1`).
fn is_first_wait(g: u32) -> bool {
    g & 3 == 1
}

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
        if PANIC_ONCE.swap(false, SeqCst) {
            panic!("a heavy fence that panics (on purpose)");
        }
        let g = RCU.gp_counter();
        // SAFETY: (test) `LAP` is null or a leaked domain (`lap_domain`).
        if let Some(lap) = unsafe { LAP.load(SeqCst).as_ref() } {
            LAP_LOG.lock().unwrap().push(lap.gp_counter());
        }
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
        Point::GpBeforeScan(wait) if !is_first_wait(wait) => {
            SECOND_WAIT_SCANS.fetch_add(1, SeqCst);
        }
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

/// Every test of this binary drives the one domain `RCU` and the process-wide mutant
/// selection, pause hook and counter width: each holds this lock for its whole run, so
/// the binary is serial by construction, whatever `--test-threads` says.
static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the binary's lock for a test, and puts the process-wide state back however the
/// test ends.
struct Restore(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

impl Restore {
    fn take() -> Self {
        // A test that failed poisoned the lock; the state it left is put back by its own
        // `Restore`, so the next test may go on.
        Restore(SERIAL.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        RELEASE.store(true, SeqCst);
        SLOW.store(false, SeqCst);
        PANIC_ONCE.store(false, SeqCst);
        LAP.store(std::ptr::null_mut(), SeqCst);
        RCU.set_wake_hook(None);
        set_pause_hook(None);
        select(Mutant::None);
        set_gp_bits(32);
    }
}

/// Starts a driver thread that runs `drive`, to be held at `hold` (until `RELEASE`).
fn spawn_driver(hold: Hold, drive: impl FnOnce() + Send + 'static) -> std::thread::JoinHandle<()> {
    HELD.store(false, SeqCst);
    RELEASE.store(false, SeqCst);
    std::thread::spawn(move || {
        HOLD.with(|h| h.set(Some(hold)));
        drive();
    })
}

/// Waits until `flag` is set: fails with `ended` if `finished` says the thread that is
/// to set it has ended first, with `slow` after 10 s.
fn await_set(flag: &AtomicBool, finished: impl Fn() -> bool, ended: &str, slow: &str) {
    let t0 = Instant::now();
    while !flag.load(SeqCst) {
        assert!(!finished(), "{ended}");
        assert!(t0.elapsed() < Duration::from_secs(10), "{slow}");
        std::thread::yield_now();
    }
}

/// `spawn_driver`, then waits until the driver is held (it must not end first).
fn held_driver(hold: Hold, drive: impl FnOnce() + Send + 'static) -> std::thread::JoinHandle<()> {
    let t = spawn_driver(hold, drive);
    await_set(
        &HELD,
        || t.is_finished(),
        "the driver ended without being held",
        "the driver never got going",
    );
    t
}

/// Starts driver A (a grace period from where the counter is), held at `hold`, and
/// waits until it is held or done. Returns it, and whether it is held.
fn start_held(hold: Hold) -> (std::thread::JoinHandle<()>, bool) {
    let a = spawn_driver(hold, || {
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

/// Carries `RCU`'s counter to the start of a grace period (a multiple of 4), so that a
/// driver's next flip is onto a first wait, the one that issues the heavy fence.
fn align() {
    finish(RCU.start_poll());
    assert_eq!(RCU.gp_counter() & 3, 0);
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

/// Two scenarios; returns (scans of first waits with no returned fence begun at their
/// wait, whether driver A was held in each).
///
/// 1. A is held inside its first heavy fence (at the wait it flipped to); driver B (this
///    thread) drives a grace period through waits it did not flip; then A goes on.
/// 2. A is held after its first scan; this thread carries the counter onto the next
///    grace period's first wait without scanning it; A's exchange then fails and tells
///    it the new wait, which A must fence for itself before scanning.
fn two_drivers() -> (u32, [bool; 2]) {
    UNFENCED.store(0, SeqCst);
    SECOND_WAIT_SCANS.store(0, SeqCst);
    RETURNED.lock().unwrap().clear();
    // A registered reader (offline): a domain with every slot free needs no heavy
    // fence at all ("An empty domain"), which is tested on its own below.
    let _reader = RCU.reader().unwrap();
    set_pause_hook(Some(hook));

    let (a, held_in_fence) = start_held(Hold::InItsFirstFence);
    finish(RCU.start_poll());
    RELEASE.store(true, SeqCst);
    a.join().unwrap();

    let (a, held_after_scan) = start_held(Hold::AfterItsFirstScan);
    let g = RCU.gp_counter();
    if held_after_scan {
        assert!(is_first_wait(g), "A is held after scanning a first wait");
        // Past this grace period, onto the next one's first wait, not scanning it.
        let _ = RCU.cookie_from_raw(g.wrapping_add(4)).poll();
        assert_eq!(RCU.gp_counter(), g.wrapping_add(4));
    }
    RELEASE.store(true, SeqCst);
    a.join().unwrap();
    finish(RCU.start_poll());

    set_pause_hook(None);
    (UNFENCED.load(SeqCst), [held_in_fence, held_after_scan])
}

#[test]
fn every_scan_of_a_first_wait_follows_a_returned_heavy_fence_begun_at_it() {
    let _restore = Restore::take();
    let (unfenced, held) = two_drivers();
    assert_eq!(held, [true, true], "driver A was not held: one driver only");
    assert_eq!(unfenced, 0);
    assert!(
        SECOND_WAIT_SCANS.load(SeqCst) > 0,
        "no second wait was scanned: the scenarios test half a grace period"
    );
}

/// Of cookies taken at every counter value of a stretch (both parities, across the
/// wrap), how many do not count, as their first wait, a grace period's first wait
/// after the one the counter is at: their first wait would be one that issues no heavy
/// fence, or one whose fence may have begun before they were taken. A cookie's waits
/// are the two before its target.
fn cookies_without_a_fenced_first_wait() -> usize {
    let mut bad = 0;
    for g in (0u32..64).chain(0xFFFF_FFE0..=0xFFFF_FFFF) {
        let d: &'static Rcu<4> = Box::leak(Box::new(Rcu::new_at(g & !1)));
        if g & 1 == 1 {
            // Onto the wait: a reader from before the flip holds it.
            let r = d.reader().unwrap();
            let guard = r.lock();
            assert!(!d.cookie_from_raw(g.wrapping_add(1)).poll());
            std::mem::forget(guard);
            std::mem::forget(r);
        }
        assert_eq!(d.gp_counter(), g);
        let target = d.start_poll().into_raw();
        let first = target.wrapping_sub(3);
        let ahead = first.wrapping_sub(g);
        if !is_first_wait(first) || !(1..=4).contains(&ahead) {
            bad += 1;
        }
    }
    bad
}

/// Every cookie's first wait is a fenced first wait that comes after it.
#[test]
fn every_cookie_counts_a_fenced_first_wait_after_it() {
    let _restore = Restore::take();
    assert_eq!(cookies_without_a_fenced_first_wait(), 0);
}

/// The control: a cookie whose target is a whole grace period from the next flip,
/// whatever the flip, counts a second wait as its first when taken mid-grace-period.
#[test]
fn negative_control_unaligned_cookies_are_caught() {
    let _restore = Restore::take();
    select(Mutant::UnalignedCookies);
    let bad = cookies_without_a_fenced_first_wait();
    select(Mutant::None);
    // Taken at `g % 4` = 1 or 2: half of them.
    assert_eq!(bad, 48, "unaligned cookies went unnoticed");
}

/// The control: with the heavy fence skipped, the scans are unfenced.
#[test]
fn negative_control_a_skipped_heavy_fence_is_caught() {
    let _restore = Restore::take();
    select(Mutant::SkipHeavyFence);
    let (unfenced, _) = two_drivers();
    select(Mutant::None);
    assert!(unfenced > 0, "a skipped heavy fence went unnoticed");
}

/// The wait is marked fenced before its fence has run: driver B, at the wait A is held
/// fencing, scans on A's unfinished fence.
#[test]
fn negative_control_a_wait_marked_fenced_too_early_is_caught() {
    let _restore = Restore::take();
    select(Mutant::FencedBeforeHeavyFence);
    let (unfenced, held) = two_drivers();
    select(Mutant::None);
    assert!(held[0], "driver A was not held in its fence");
    assert!(unfenced > 0, "a scan on an unfinished fence went unnoticed");
}

/// Heavy fences for `grace_periods` grace periods, each held up by a reader for
/// `rescans` polls of each of two drivers (this thread and one more) before it leaves.
fn fences_per_grace_period(grace_periods: u32, rescans: u32) -> f64 {
    let reader = RCU.reader().unwrap();
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

/// One heavy fence per grace period, at its first wait, with two drivers polling each
/// wait a reader holds 50 times each.
#[test]
fn one_heavy_fence_serves_every_scan_of_a_grace_period() {
    let _restore = Restore::take();
    let per_gp = fences_per_grace_period(20, 50);
    // Two drivers can both find the first wait unfenced and fence it (neither waits for
    // the other's fence): at most one extra, never one per scan.
    assert!(
        (1.0..=2.0).contains(&per_gp),
        "{per_gp} heavy fences per grace period (one expected)"
    );
}

/// The control: a heavy fence at every scan (the old design) is seen.
#[test]
fn negative_control_a_fence_per_scan_is_counted() {
    let _restore = Restore::take();
    select(Mutant::HeavyFenceEveryScan);
    let per_gp = fences_per_grace_period(5, 50);
    select(Mutant::None);
    assert!(per_gp > 50.0, "only {per_gp} heavy fences per grace period");
}

/// Heavy fences issued while two threads are in `synchronize` at once, each fence
/// taking 20 µs: a blocking wait that meets the other's fence under way waits for it.
/// Returns that and the grace periods the 600 waits took: only waits that ran at the
/// same time share grace periods, so 600 means the two never overlapped (a loaded
/// machine time-slicing them) and the fence count says nothing about sharing.
fn fences_two_waiters() -> (f64, f64) {
    SLOW.store(true, SeqCst);
    let (f0, g0) = (FENCES.load(SeqCst), RCU.gp_counter());
    let start = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut w = RCU.reader().unwrap();
                start.wait();
                for _ in 0..300 {
                    w.synchronize(rcuref::rcu::spin).unwrap();
                }
            });
        }
    });
    SLOW.store(false, SeqCst);
    let gps = f64::from(RCU.gp_counter().wrapping_sub(g0)) / 4.0;
    (f64::from(FENCES.load(SeqCst) - f0), gps)
}

/// `fences_two_waiters` until the two waiters overlap for real (at
/// most 480 grace periods for the 600 waits, so at least 120 shared): up to 10 tries.
/// Panics if they never do: the verdict would mean nothing.
///
/// Returns the heavy fences beyond one per grace period, per grace period that served
/// both waiters (600 waits in `g` grace periods: `600 - g` of them served two). A grace
/// period of one waiter costs one fence whoever issues it, so only the shared ones
/// tell sharing from fencing alone, and this scale does not move with how much the
/// waiters overlapped. With two fences per grace period (before issue 27's one fence
/// per grace period): waiters that share 0.05-0.12 in 6 runs on an idle machine, 0.51
/// in a loaded CI run; waiters that fence for themselves 2.97-3.02. With one, on a
/// 2-core EPYC VM: sharing 0.01-0.04 in 4 runs, fencing for themselves 1.99-2.07.
fn fences_per_shared_grace_period() -> f64 {
    let mut fewest = f64::MAX;
    for _ in 0..10 {
        let (fences, gps) = fences_two_waiters();
        let extra = (fences - gps) / (600.0 - gps);
        println!(
            "{gps} grace periods for 600 waits, {} heavy fences each, \
             {extra} beyond one per shared one",
            fences / gps
        );
        if gps <= 480.0 {
            return extra;
        }
        fewest = fewest.min(gps);
    }
    panic!(
        "the two waiters never ran at the same time ({fewest} grace periods for 600 \
         waits at best): inconclusive"
    );
}

/// Two blocking waiters share the fence of a grace period's first wait: a grace period
/// that serves both costs about one fence, not two or three (a few more where both
/// look before either has begun).
#[test]
fn concurrent_waits_share_a_fence_under_way() {
    let _restore = Restore::take();
    let extra = fences_per_shared_grace_period();
    assert!(
        extra < 1.0,
        "{extra} heavy fences beyond one per grace period the waiters shared"
    );
}

/// The control: waiters that fence for themselves issue nearly one each per first wait,
/// and more where one rescans.
#[test]
fn negative_control_impatient_waiters_are_counted() {
    let _restore = Restore::take();
    select(Mutant::ImpatientWaiters);
    let extra = fences_per_shared_grace_period();
    select(Mutant::None);
    assert!(
        extra > 1.0,
        "only {extra} heavy fences beyond one per grace period the waiters shared"
    );
}

static WOKEN: AtomicBool = AtomicBool::new(false);
static WAKES: AtomicU32 = AtomicU32::new(0);

fn wake_sharer() {
    WAKES.fetch_add(1, SeqCst);
    WOKEN.store(true, SeqCst);
}

/// How a blocking wait that met driver A's heavy fence under way (A held inside it)
/// went: (its sleeps, of which ended by a wake, heavy fences issued while A was held,
/// sleeps ended by a wake after A's fence returned and before the reader left).
/// The wait sleeps through `rcu::sleeping(0, ..)`, each sleep until woken or 2 s.
fn waiter_beside_a_held_fence() -> (u32, u32, u32, u32) {
    // A reader inside a section from before A's flip: it holds the wait after A's fence
    // returns, so A's scan ends no wait and only the fence's return can wake the waiter
    // (a step that ends a wait wakes the sleepers too). The section protects no data
    // (the fence here is only the calling thread's).
    align();
    let registered = RCU.reader().unwrap();
    let guard = registered.lock();
    let g0 = RCU.gp_counter();
    RCU.set_wake_hook(Some(wake_sharer));
    let (a, held) = start_held(Hold::InItsFirstFence);
    assert!(held, "driver A did not stop inside its heavy fence");
    assert_eq!(RCU.gp_counter(), g0 | 1, "A is at its first wait");
    let fences_at_hold = FENCES.load(SeqCst);
    let sleeps = AtomicU32::new(0);
    let woken_sleeps = AtomicU32::new(0);
    let fences_while_held = AtomicU32::new(u32::MAX);
    let woken_by_the_fence = AtomicU32::new(0);
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut r = RCU.reader().unwrap();
            r.synchronize(rcuref::rcu::sleeping(0, || {
                sleeps.fetch_add(1, SeqCst);
                let t0 = Instant::now();
                while !WOKEN.swap(false, SeqCst) {
                    if t0.elapsed() > Duration::from_secs(2) {
                        return;
                    }
                    std::thread::yield_now();
                }
                woken_sleeps.fetch_add(1, SeqCst);
            }))
            .unwrap();
        });
        // Let the waiter meet A's fence and go to sleep (or fence for itself).
        let t0 = Instant::now();
        while sleeps.load(SeqCst) == 0 && FENCES.load(SeqCst) == fences_at_hold {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the waiter never got going"
            );
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(20));
        fences_while_held.store(FENCES.load(SeqCst) - fences_at_hold, SeqCst);
        RELEASE.store(true, SeqCst);
        // A's fence returns, its scan finds the reader: the waiter must be awake now.
        std::thread::sleep(Duration::from_millis(100));
        woken_by_the_fence.store(woken_sleeps.load(SeqCst), SeqCst);
        drop(guard);
        waiter.join().unwrap();
    });
    a.join().unwrap();
    RCU.set_wake_hook(None);
    (
        sleeps.load(SeqCst),
        woken_sleeps.load(SeqCst),
        fences_while_held.load(SeqCst),
        woken_by_the_fence.load(SeqCst),
    )
}

/// A blocking wait whose wait's heavy fence another driver is issuing sleeps until that
/// fence returns, and is woken by its return: no fence of its own meanwhile, and every
/// sleep ended by a wake, none by its 2 s bound (issue 27, item 3).
#[test]
fn a_waiter_sleeps_until_the_fence_under_way_returns() {
    let _restore = Restore::take();
    let (sleeps, woken, fences, by_fence) = waiter_beside_a_held_fence();
    assert!(
        sleeps >= 1,
        "the waiter never slept beside the fence under way"
    );
    assert!(by_fence >= 1, "the fence's return did not wake the waiter");
    assert_eq!(
        fences, 0,
        "the waiter fenced for itself while A's fence ran"
    );
    assert_eq!(
        woken,
        sleeps,
        "{} of {sleeps} sleeps ran out their bound",
        sleeps - woken
    );
}

/// The control: a returning fence that wakes nobody leaves the sleeper asleep until the
/// reader's unlock (or its bound).
#[test]
fn negative_control_a_fence_return_that_wakes_nobody_is_caught() {
    let _restore = Restore::take();
    select(Mutant::FenceReturnWakesNobody);
    let (sleeps, _, _, by_fence) = waiter_beside_a_held_fence();
    select(Mutant::None);
    assert!(
        sleeps >= 1 && by_fence == 0,
        "{by_fence} of {sleeps} sleeps woken while only the fence's return could"
    );
}

/// The control: a waiter that does not hold back issues its own fence beside A's.
#[test]
fn negative_control_a_waiter_fencing_beside_a_fence_under_way_is_caught() {
    let _restore = Restore::take();
    select(Mutant::ImpatientWaiters);
    let (_, _, fences, _) = waiter_beside_a_held_fence();
    select(Mutant::None);
    assert!(fences >= 1, "no fence of its own beside A's");
}

/// `gp::PATIENCE`: the attempts for which a blocking wait leaves a wait's heavy fence to
/// the driver already issuing it. At the attempt with this number the wait's last poll
/// was still patient (it held back), and its hook's `Waiting::sleep` no longer is.
const PATIENCE: u32 = 64;

/// Not yet run (a count no test reaches).
const NOT_RUN: u32 = u32::MAX;

/// Runs a blocking wait (through a reader of its own, on another thread) whose hook, at
/// attempt `at`, first calls `between` (on the waiter's thread), then `Waiting::sleep`
/// with a sleep that returns at once. On this thread, `meanwhile` runs once the hook has
/// reached attempt `at` (`between` may wait for it), and `after` once that sleep call has
/// returned; `after` must let the wait end. Returns the heavy fences issued from the end
/// of `between` to the start of that sleep (`NOT_RUN`: the sleep did not run).
fn fences_before_a_sleep(
    at: u32,
    between: &(dyn Fn() + Sync),
    meanwhile: impl FnOnce(),
    after: impl FnOnce(),
) -> u32 {
    let before_sleep = AtomicU32::new(NOT_RUN);
    let (reached, returned) = (AtomicBool::new(false), AtomicBool::new(false));
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut w = RCU.reader().unwrap();
            w.synchronize(|x| {
                if x.attempts() == at {
                    reached.store(true, SeqCst);
                    between();
                    let mark = FENCES.load(SeqCst);
                    x.sleep(|| before_sleep.store(FENCES.load(SeqCst) - mark, SeqCst));
                    returned.store(true, SeqCst);
                }
                std::ops::ControlFlow::Continue(())
            })
            .unwrap();
        });
        await_set(
            &reached,
            || waiter.is_finished(),
            &format!("the wait ended before attempt {at}"),
            "the waiter never got going",
        );
        meanwhile();
        await_set(
            &returned,
            || waiter.is_finished(),
            "the hook's sleep call never returned",
            "the hook's sleep call hangs",
        );
        after();
        waiter.join().unwrap();
    });
    before_sleep.load(SeqCst)
}

/// A wait that has run out of patience beside driver A's fence under way (A held inside
/// it, a reader holding the wait): what its sleep at attempt `PATIENCE` found (see
/// `fences_before_a_sleep`).
fn an_impatient_sleep_beside_a_held_fence() -> u32 {
    align();
    let registered = RCU.reader().unwrap();
    let guard = registered.lock();
    let (a, held) = start_held(Hold::InItsFirstFence);
    assert!(held, "driver A did not stop inside its heavy fence");
    let n = fences_before_a_sleep(
        PATIENCE,
        &|| (),
        || (),
        || {
            RELEASE.store(true, SeqCst);
            drop(guard);
        },
    );
    a.join().unwrap();
    n
}

/// A wait whose patience has run out no longer sleeps for another driver's fence: before
/// it sleeps it issues the heavy fence that orders its announcement before a racing
/// unlock's check (`after_announce`). Sleeping for A's fence instead, it would skip that
/// fence and could lose the unlock's wake to store buffering. (This kills the mutant
/// `!patient || !on()` -> `&&` in `heavy::sleep_for_fence`.)
#[test]
fn an_impatient_waiter_fences_before_it_sleeps() {
    let _restore = Restore::take();
    let n = an_impatient_sleep_beside_a_held_fence();
    assert_ne!(
        n, NOT_RUN,
        "the sleep did not run (the reader held the wait)"
    );
    assert!(
        n >= 1,
        "the impatient waiter slept with no heavy fence after its announcement"
    );
}

/// A wait that the counter has moved on from, between the waiter's poll and its sleep,
/// onto a new wait that nobody has fenced: what the sleep found (see
/// `fences_before_a_sleep`). The waiter's first poll flips to wait `g`, fences and
/// scans it, and finds a reader; its hook then lets this thread end the section and
/// carry the counter to wait `g + 2` without scanning it (no heavy fence begun there,
/// and the mark names `g`).
fn a_sleep_after_the_counter_moved_on() -> u32 {
    let registered = RCU.reader().unwrap();
    let guard = registered.lock();
    let ended = AtomicBool::new(false);
    let between = || {
        let g = RCU.gp_counter();
        assert_eq!(g & 1, 1, "the waiter's first poll stopped at a wait");
        // (This thread is the one to wait: nothing to watch end first.)
        await_set(&ended, || false, "", "the section never ended");
        // Past wait `g` and the flip after it, onto the next wait, not scanning it.
        let _ = RCU.cookie_from_raw(g.wrapping_add(2)).poll();
        assert_eq!(RCU.gp_counter(), g.wrapping_add(2));
    };
    // The guard stays on this thread (a section belongs to its context).
    fences_before_a_sleep(
        1,
        &between,
        || {
            drop(guard);
            ended.store(true, SeqCst);
        },
        || (),
    )
}

/// A waiter that finds no fence under way at the counter's wait fences before it sleeps,
/// also when that wait is newer than its last poll and carries no mark: no fence under
/// way there is no fence to sleep for. (This kills the mutants of `sleep_for_fence`'s
/// test `g & 1 == 1 && begun == g && returned != g` that turn either `&&` into `||`:
/// each reads the unfenced wait as a fence under way.)
#[test]
fn a_waiter_fences_before_it_sleeps_on_a_wait_nobody_fences() {
    let _restore = Restore::take();
    let n = a_sleep_after_the_counter_moved_on();
    // NOT_RUN: the poll after the fence ended the wait (nobody holds wait `g + 2`).
    assert!(
        n >= 1,
        "the waiter slept with no heavy fence after its announcement"
    );
}

/// A lone blocking wait with no reader ends at its first attempt: it never holds back
/// for a heavy fence that no other driver is issuing (a wait that did would crawl
/// through `PATIENCE` attempts of back-off before fencing for itself).
#[test]
fn a_lone_waiter_never_waits_for_a_fence_nobody_issues() {
    let _restore = Restore::take();
    let mut w = RCU.reader().unwrap();
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
    let reader = with_reader.then(|| EMPTY.reader().unwrap());
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
/// free issues no heavy fence, and one with a registered (offline) reader one per grace
/// period. (What the claim's fence is for, a reader claiming just after a step skipped
/// its fence, is the litmus test `asym-empty-domain-skips-the-fence`: on x86 the
/// claim's compare-exchange is a barrier by itself.)
#[test]
fn an_empty_domain_needs_no_heavy_fence() {
    let _restore = Restore::take();
    assert_eq!(fences_in_a_domain(false, 20), 0);
    assert_eq!(fences_in_a_domain(true, 20), 20);
}

/// The control: a wait step that fences an empty domain is counted.
#[test]
fn negative_control_fencing_an_empty_domain_is_counted() {
    let _restore = Restore::take();
    select(Mutant::FenceEmptyDomain);
    let n = fences_in_a_domain(false, 20);
    select(Mutant::None);
    assert_eq!(n, 20);
}

/// Heavy fences issued by one grace period of `rcu` driven by `poll` through a
/// registered (offline) reader, after a lap of the counter in which every slot was free.
///
/// On a 4-bit counter (a lap is four grace periods, whose first waits 1, 5, 9, 13 are
/// the fenced ones): a grace period with a slot claimed fences wait 1 (mark: 1); with
/// every slot free the counter goes round to 0 with no fence and no mark; a grace period
/// from 0 then meets wait 1 again. A mark kept across the lap says 1 is fenced, and that
/// wait would scan a reader's slot with no fence.
fn fences_after_an_empty_lap() -> u32 {
    set_gp_bits(4);
    let lap: Rcu<4> = Rcu::new(); // after the width is set, as `set_gp_bits` asks
    let poll_to = |raw: u32| finish(lap.cookie_from_raw(raw));
    {
        let _reader = lap.reader().unwrap();
        let before = FENCES.load(SeqCst);
        poll_to(4);
        assert_eq!(FENCES.load(SeqCst) - before, 1, "wait 1 fenced, wait 3 not");
    }
    let before = FENCES.load(SeqCst);
    for t in [8, 12, 0] {
        poll_to(t); // waits 5 to 15, every slot free
    }
    assert_eq!(FENCES.load(SeqCst) - before, 0, "an empty domain fenced");
    assert_eq!(lap.gp_counter(), 0);
    let _reader = lap.reader().unwrap();
    let before = FENCES.load(SeqCst);
    poll_to(4); // waits 1 and 3
    FENCES.load(SeqCst) - before
}

/// The first wait of a grace period with a slot claimed is fenced, also when the
/// counter's last lap left its mark standing.
#[test]
fn a_mark_from_the_last_lap_is_not_trusted() {
    let _restore = Restore::take();
    assert_eq!(fences_after_an_empty_lap(), 1);
}

/// The control: a mark kept across the lap skips the fence at wait 1.
#[test]
fn negative_control_a_mark_kept_across_laps_is_caught() {
    let _restore = Restore::take();
    select(Mutant::MarkKeptAcrossLaps);
    let n = fences_after_an_empty_lap();
    select(Mutant::None);
    assert_eq!(
        n, 0,
        "the stale mark was not trusted: the control shows nothing"
    );
}

/// The attempts of one `synchronize` through `w` (1: it ended at its first attempt).
fn attempts_of_a_wait(w: &mut rcuref::rcu::Reader<'_, 4>) -> u32 {
    let mut attempts = 0;
    w.synchronize(|x| {
        attempts = x.attempts();
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    attempts
}

/// A heavy fence panics at a wait, leaving the counter there; a lone blocking wait
/// then takes the wait up. Returns its attempts.
fn lone_waiter_after_a_panicked_fence() -> u32 {
    let mut w = RCU.reader().unwrap();
    PANIC_ONCE.store(true, SeqCst);
    let r = std::panic::catch_unwind(|| RCU.start_poll().poll());
    assert!(r.is_err(), "the heavy fence did not panic");
    assert_eq!(
        RCU.gp_counter() & 1,
        1,
        "the panic left the counter at its wait"
    );
    attempts_of_a_wait(&mut w)
}

/// A panicked heavy fence leaves no "fence under way" behind: the next blocking wait,
/// alone, fences for itself at once.
#[test]
fn a_lone_waiter_after_a_panicked_fence_does_not_wait() {
    let _restore = Restore::take();
    let attempts = lone_waiter_after_a_panicked_fence();
    assert!(attempts < 4, "{attempts} attempts after a panicked fence");
}

/// The control: `begun` left naming the panicked fence's wait holds the waiter back for
/// `PATIENCE` attempts.
#[test]
fn negative_control_begun_left_by_a_panic_is_caught() {
    let _restore = Restore::take();
    select(Mutant::BegunLeftBehind);
    let attempts = lone_waiter_after_a_panicked_fence();
    select(Mutant::None);
    assert!(
        attempts >= PATIENCE / 2,
        "only {attempts} attempts: the control shows nothing"
    );
}

/// A driver stopped inside its heavy fence stores its mark late, over a newer one; a
/// blocking wait then takes up the newer wait. Returns its attempts.
///
/// Driver A flips the counter onto the first wait `g` of a grace period and is held
/// inside its fence for it. This thread polls past `g` and the second wait `g + 2`,
/// enters a section (recording `g + 2`'s phase), and polls onto the next first wait
/// `g + 4`, which it fences (mark `g + 4`) and which its own section holds. A is let go:
/// its mark for `g` lands over `g + 4`, and it ends (its target, `g + 3`, is behind the
/// counter by then). The section ends; a blocking wait at `g + 4` finds the mark not at
/// its wait.
fn waiter_after_a_late_mark() -> u32 {
    let reader = RCU.reader().unwrap();
    let mut w = RCU.reader().unwrap();
    let start = RCU.gp_counter();
    assert_eq!(start & 3, 0, "no grace period in flight");
    let g = start.wrapping_add(1);
    let a = held_driver(Hold::InItsFirstFence, move || {
        let _ = RCU.cookie_from_raw(g.wrapping_add(3)).poll();
    });
    assert_eq!(RCU.gp_counter(), g, "A is held in its fence for wait g");
    finish(RCU.cookie_from_raw(g.wrapping_add(3)));
    {
        let _section = reader.lock();
        // Not done: the section holds wait g + 4.
        assert!(!RCU.cookie_from_raw(g.wrapping_add(5)).poll());
        assert_eq!(RCU.gp_counter(), g.wrapping_add(4));
        RELEASE.store(true, SeqCst);
        a.join().unwrap();
    }
    drop(reader);
    attempts_of_a_wait(&mut w)
}

/// A late mark over a newer one leaves no "fence under way" behind either: the waiter
/// fences for itself at once.
#[test]
fn a_late_mark_leaves_no_waiter_holding_back() {
    let _restore = Restore::take();
    let attempts = waiter_after_a_late_mark();
    assert!(attempts < 4, "{attempts} attempts after a late mark");
}

/// The control: with `begun` never cleared, the waiter holds back for `PATIENCE`
/// attempts for a fence nobody issues.
#[test]
fn negative_control_begun_left_under_a_late_mark_is_caught() {
    let _restore = Restore::take();
    select(Mutant::BegunLeftBehind);
    let attempts = waiter_after_a_late_mark();
    select(Mutant::None);
    assert!(
        attempts >= PATIENCE / 2,
        "only {attempts} attempts: the control shows nothing"
    );
}

/// A fresh domain on a 4-bit counter whose heavy fences `LAP_LOG` records (leaked: a
/// few bytes per test, in a test binary).
fn lap_domain() -> &'static Rcu<4> {
    set_gp_bits(4);
    let lap: &'static Rcu<4> = Box::leak(Box::new(Rcu::new()));
    LAP_LOG.lock().unwrap().clear();
    LAP.store(lap as *const Rcu<4> as *mut Rcu<4>, SeqCst);
    HELD.store(false, SeqCst);
    RELEASE.store(false, SeqCst);
    lap
}

std::thread_local! {
    /// The wait this thread last scanned (`lap_hook`).
    static LAST_WAIT: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Holds a thread after its scan of the wait it is to be held at.
fn lap_hook(p: Point) {
    match p {
        Point::GpBeforeScan(w) => LAST_WAIT.with(|l| l.set(Some(w))),
        Point::GpAfterScan => {
            if let Some(w) = LAST_WAIT.with(|l| l.get()) {
                hold_if(Hold::AfterItsScanOf(w));
            }
        }
        _ => {}
    }
}

/// A driver stopped inside its fence for wait 1 stores its mark late, a lap later in
/// effect: it pins half 0 (0 to 7 of the 4-bit counter), so the counter stops at 15; let
/// go, its mark 1 lands and it leaves (its target, 7, is behind 15), and the counter
/// enters half 0 again. Returns (where the lap stopped, fences of the new lap's wait 1).
fn late_mark_a_lap_later() -> (u32, usize) {
    let lap = lap_domain();
    let reader = lap.reader().unwrap(); // not empty: wait 1 fences
    let a = held_driver(Hold::InItsFirstFence, move || {
        let _ = lap.cookie_from_raw(7).poll();
    });
    assert_eq!(lap.gp_counter(), 1, "A is held in its fence for wait 1");
    drop(reader); // every slot free from here: no wait needs a fence
    for t in [4, 8, 12, 0] {
        let _ = lap.cookie_from_raw(t).poll();
    }
    let stopped_at = lap.gp_counter();
    RELEASE.store(true, SeqCst);
    a.join().unwrap(); // A's mark 1 lands; it leaves half 0
    finish(lap.cookie_from_raw(0));
    let _reader = lap.reader().unwrap();
    let before = LAP_LOG.lock().unwrap().len();
    finish(lap.cookie_from_raw(2));
    let n = LAP_LOG.lock().unwrap()[before..]
        .iter()
        .filter(|&&g| g == 1)
        .count();
    (stopped_at, n)
}

/// A mark stored late by a driver stopped inside its fence is not trusted when the
/// counter comes back to its wait a lap later.
#[test]
fn a_late_mark_is_not_trusted_a_lap_later() {
    let _restore = Restore::take();
    let (stopped_at, n) = late_mark_a_lap_later();
    assert_eq!(
        stopped_at, 15,
        "the lap guard did not stop the counter at 15"
    );
    assert_eq!(n, 1, "the new lap's wait 1 was not fenced");
}

/// The control: with the mark kept across laps, the late mark is trusted.
#[test]
fn negative_control_a_late_mark_kept_across_laps_is_caught() {
    let _restore = Restore::take();
    select(Mutant::MarkKeptAcrossLaps);
    let (_, n) = late_mark_a_lap_later();
    select(Mutant::None);
    assert_eq!(
        n, 0,
        "the late mark was not trusted: the control shows nothing"
    );
}

/// A driver stopped after its scan of wait 7 (the last of half 0 of the 4-bit counter)
/// goes on once another has fenced wait 9 of the next half (mark 9), held there by a
/// section. Returns the heavy fences begun at wait 9.
///
/// The late driver's step into that half fails (the counter has moved on); its reset
/// of the mark, if it made one, would wipe mark 9 and cost wait 9 a second fence.
fn fences_at_a_wait_after_a_late_stepper() -> usize {
    let lap = lap_domain();
    let reader = lap.reader().unwrap();
    finish(lap.cookie_from_raw(4)); // a target is at most 7 steps ahead
    set_pause_hook(Some(lap_hook));
    let s = held_driver(Hold::AfterItsScanOf(7), move || {
        let _ = lap.cookie_from_raw(8).poll();
    });
    assert_eq!(lap.gp_counter(), 7, "S is held after scanning wait 7");
    {
        let _section = reader.lock(); // wait 7's phase: holds wait 9
        assert!(
            !lap.cookie_from_raw(10).poll(),
            "the section did not hold wait 9"
        );
        assert_eq!(lap.gp_counter(), 9);
        RELEASE.store(true, SeqCst);
        s.join().unwrap();
        assert!(!lap.cookie_from_raw(10).poll()); // a rescan of wait 9
    }
    finish(lap.cookie_from_raw(10));
    LAP_LOG.lock().unwrap().iter().filter(|&&g| g == 9).count()
}

/// One heavy fence for wait 9, although a driver late from wait 7 stepped into its half
/// after it.
#[test]
fn a_late_stepper_does_not_wipe_the_new_laps_mark() {
    let _restore = Restore::take();
    assert_eq!(fences_at_a_wait_after_a_late_stepper(), 1);
}

/// The control: a late stepper that resets anyway costs wait 9 a second fence.
#[test]
fn negative_control_a_late_reset_is_counted() {
    let _restore = Restore::take();
    select(Mutant::LateReset);
    let n = fences_at_a_wait_after_a_late_stepper();
    select(Mutant::None);
    assert_eq!(
        n, 2,
        "the late reset cost nothing: the control shows nothing"
    );
}
