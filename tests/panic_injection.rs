//! Panic injection: every user callback the library calls
//! (a reclaim closure, `T::drop` on reclaim, a wait hook, a stall report, a warning
//! hook, the heavy fence in the asymmetric-fence build) is made to panic once, at a
//! chosen call; then the structure is driven through several laps of a 4-bit
//! grace-period counter (a lap is four grace periods). Grace periods must keep ending,
//! and a probe value must never be dropped before its own cookie (taken when it was
//! unpublished) is done.
//!
//! Built with `--cfg rcuref_mutants` (the 3-bit counter, the broken variants); `cargo
//! xtask test` runs it in the negative-controls step, and again in the asymmetric-fence
//! build, where the heavy fence panics too. Each way a panic once broke the library has
//! a broken variant here that must be caught: a panicking heavy fence that leaves its
//! driver registered (`RegistrationKeptOnPanic`), a queue dropped with pending values
//! (`QueueDropsPending`), a value dropped when a callback panics while it is being
//! deferred (`DeferDropsOnPanic`).
#![cfg(all(rcuref_mutants, not(miri)))]

use rcuref::mutants::{select, set_gp_bits, Mutant};
use rcuref::rcu::{DeferQueue, Rcu};
use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::Mutex;

/// One test at a time: the counter width and the broken variant are per process.
static SERIAL: Mutex<()> = Mutex::new(());

/// Probe values dropped, and those dropped before their own cookie was done.
static DROPS: AtomicU32 = AtomicU32::new(0);
static EARLY: AtomicU32 = AtomicU32::new(0);

/// A test's setup: a 4-bit counter, no variant, quiet panics; restored however it ends.
struct Setup(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

impl Setup {
    fn new(m: Mutant) -> Self {
        let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        set_gp_bits(4);
        select(m);
        DROPS.store(0, SeqCst);
        EARLY.store(0, SeqCst);
        if std::env::var_os("RCUREF_SHOW_PANICS").is_none() {
            std::panic::set_hook(Box::new(|_| {})); // injected panics are expected
        }
        Setup(g)
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::panic::take_hook();
        }
        select(Mutant::None);
        set_gp_bits(32);
    }
}

/// A value that knows its grace period: its cookie is taken when it is made (the
/// caller has just unpublished it), and its drop records whether that was too early.
struct Probe<'d> {
    rcu: &'d Rcu<4>,
    target: u32,
}

impl<'d> Probe<'d> {
    fn unpublished(rcu: &'d Rcu<4>) -> Self {
        Probe {
            rcu,
            target: rcu.start_poll().into_raw(),
        }
    }
}

impl Drop for Probe<'_> {
    fn drop(&mut self) {
        DROPS.fetch_add(1, SeqCst);
        if !self.rcu.cookie_from_raw(self.target).is_done() {
            EARLY.fetch_add(1, SeqCst);
        }
    }
}

/// A reclaim closure that panics at its `n`-th call (counting from 1).
fn reclaim_panicking_at<'d>(n: u32) -> impl FnMut(Probe<'d>) {
    let mut calls = 0;
    move |p| {
        calls += 1;
        drop(p);
        if calls == n {
            panic!("injected: reclaim");
        }
    }
}

/// A cookie is only an answer within a lap of the counter (2^4 - 5 steps, under three
/// grace periods here; 2^4 - 7 where heavy fences may run): probes are dropped within `grace_periods(1)` of their cookie.
/// Drives `n` grace periods through a registered reader; each must end within a bounded
/// number of attempts.
fn grace_periods(rcu: &Rcu<4>, n: u32) {
    let mut me = rcu.reader().expect("a free slot for the driver");
    for gp in 0..n {
        let r = me.synchronize(|w| {
            if w.attempts() > 10_000 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(r, Ok(()), "grace period {gp} of {n} never ended");
    }
}

/// Drives `n` whole laps of the (4-bit) counter: grace periods must keep ending.
fn laps(rcu: &Rcu<4>, n: u32) {
    grace_periods(rcu, 4 * n);
}

/// A thread inside a read section of `rcu` until `release` is set.
fn hold_reader<'s, 'd: 's>(
    s: &'s std::thread::Scope<'s, '_>,
    rcu: &'d Rcu<4>,
    inside: &'s AtomicBool,
    release: &'s AtomicBool,
) -> std::thread::ScopedJoinHandle<'s, ()> {
    let h = s.spawn(move || {
        let r = rcu.reader().unwrap();
        r.section(|_| {
            inside.store(true, SeqCst);
            while !release.load(SeqCst) {
                std::thread::yield_now();
            }
        });
    });
    while !inside.load(SeqCst) {
        std::thread::yield_now();
    }
    h
}

// ---- the deferred queue ------------------------------------------------------------

#[test]
fn a_reclaim_that_panics_in_collect_leaves_the_rest_queued() {
    let _s = Setup::new(Mutant::None);
    let rcu: Rcu<4> = Rcu::new();
    for n in 1..=4 {
        let mut q: DeferQueue<Probe<'_>, 4, 4> = DeferQueue::new(&rcu);
        for _ in 0..4 {
            assert!(q.defer(Probe::unpublished(&rcu)).is_ok());
        }
        grace_periods(&rcu, 1);
        let r = catch_unwind(AssertUnwindSafe(|| q.collect(reclaim_panicking_at(n))));
        assert!(r.is_err(), "the injected panic did not happen");
        assert_eq!(q.len(), 4 - n as usize, "the queue lost track at call {n}");
        assert_eq!(q.collect(drop), 4 - n as usize);
        laps(&rcu, 2);
    }
    assert_eq!(DROPS.load(SeqCst), 16);
    assert_eq!(
        EARLY.load(SeqCst),
        0,
        "a value was dropped before its grace period"
    );
}

/// `defer_or_wait` on a full queue whose values are done: its first `collect` panics.
fn panic_in_the_first_collect() {
    let rcu: Rcu<4> = Rcu::new();
    let mut q: DeferQueue<Probe<'_>, 2, 4> = DeferQueue::new(&rcu);
    let mut me = rcu.reader().unwrap();
    for _ in 0..2 {
        assert!(q.defer(Probe::unpublished(&rcu)).is_ok());
    }
    grace_periods(&rcu, 1);
    let p = Probe::unpublished(&rcu);
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _ = q.defer_or_wait(&mut me, p, rcuref::rcu::spin, reclaim_panicking_at(1));
    }));
    assert!(r.is_err(), "the injected panic did not happen");
    laps(&rcu, 2);
}

/// `defer_or_wait` on a full queue whose values are not done: it waits for the oldest,
/// then its second `collect` panics. The value being deferred took its cookie after
/// the queued ones, so it is still not done when the panic comes.
fn panic_in_the_second_collect() {
    let rcu: Rcu<4> = Rcu::new();
    let mut q: DeferQueue<Probe<'_>, 2, 4> = DeferQueue::new(&rcu);
    let mut me = rcu.reader().unwrap();
    for _ in 0..2 {
        assert!(q.defer(Probe::unpublished(&rcu)).is_ok());
    }
    let g = rcu.gp_counter();
    assert!(rcu.cookie_from_raw(g.wrapping_add(2)).poll()); // half a grace period on
    let p = Probe::unpublished(&rcu);
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _ = q.defer_or_wait(&mut me, p, rcuref::rcu::spin, reclaim_panicking_at(1));
    }));
    assert!(r.is_err(), "the injected panic did not happen");
    laps(&rcu, 2);
}

/// `defer_or_wait` waits (a reader holds the oldest value's grace period) and its wait
/// hook panics.
fn panic_in_the_wait_hook() {
    let rcu: Rcu<4> = Rcu::new();
    let mut q: DeferQueue<Probe<'_>, 1, 4> = DeferQueue::new(&rcu);
    let (inside, release) = (AtomicBool::new(false), AtomicBool::new(false));
    std::thread::scope(|s| {
        let held = hold_reader(s, &rcu, &inside, &release);
        assert!(q.defer(Probe::unpublished(&rcu)).is_ok());
        let p = Probe::unpublished(&rcu);
        let mut me = rcu.reader().unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            let _ = q.defer_or_wait(&mut me, p, |_| panic!("injected: wait hook"), drop);
        }));
        assert!(r.is_err(), "the injected panic did not happen");
        release.store(true, SeqCst);
        held.join().unwrap();
    });
    laps(&rcu, 2);
}

fn all_defer_or_wait_panics() {
    panic_in_the_first_collect();
    panic_in_the_second_collect();
    panic_in_the_wait_hook();
}

#[test]
fn a_panic_while_deferring_never_drops_the_value_early() {
    let _s = Setup::new(Mutant::None);
    all_defer_or_wait_panics();
    assert_eq!(
        EARLY.load(SeqCst),
        0,
        "a value was dropped before its grace period"
    );
}

#[test]
fn negative_control_a_deferred_value_held_as_a_plain_local_is_caught() {
    let _s = Setup::new(Mutant::DeferDropsOnPanic);
    panic_in_the_first_collect();
    let first = EARLY.swap(0, SeqCst);
    panic_in_the_second_collect();
    let second = EARLY.swap(0, SeqCst);
    panic_in_the_wait_hook();
    let hook = EARLY.swap(0, SeqCst);
    assert!(
        first > 0 && second > 0 && hook > 0,
        "not every early drop was seen: first collect {first}, second {second}, hook {hook}"
    );
}

/// Polls a future once with a waker that does nothing.
fn poll_once<F: std::future::Future>(f: std::pin::Pin<&mut F>) -> std::task::Poll<F::Output> {
    struct Nothing;
    impl std::task::Wake for Nothing {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Nothing));
    f.poll(&mut std::task::Context::from_waker(&waker))
}

/// `defer_async`: a future dropped before it is polled, one dropped while it waits,
/// and a `reclaim` that panics in its first `collect`.
fn defer_async_abandoned_and_panicking() {
    let rcu: Rcu<4> = Rcu::new();
    let mut q: DeferQueue<Probe<'_>, 1, 4> = DeferQueue::new(&rcu);
    // Dropped unpolled.
    drop(q.defer_async(Probe::unpublished(&rcu), drop));
    // Dropped while waiting: a reader holds the oldest value's grace period.
    let (inside, release) = (AtomicBool::new(false), AtomicBool::new(false));
    std::thread::scope(|s| {
        let held = hold_reader(s, &rcu, &inside, &release);
        assert!(q.defer(Probe::unpublished(&rcu)).is_ok());
        let mut f = Box::pin(q.defer_async(Probe::unpublished(&rcu), drop));
        assert!(poll_once(f.as_mut()).is_pending());
        drop(f);
        release.store(true, SeqCst);
        held.join().unwrap();
    });
    // A full queue whose value is done: the first collect's reclaim panics.
    grace_periods(&rcu, 1);
    let p = Probe::unpublished(&rcu);
    let r = catch_unwind(AssertUnwindSafe(|| {
        let mut f = Box::pin(q.defer_async(p, reclaim_panicking_at(1)));
        let _ = poll_once(f.as_mut());
    }));
    assert!(r.is_err(), "the injected panic did not happen");
    laps(&rcu, 2);
}

#[test]
fn an_abandoned_or_panicking_defer_async_never_drops_the_value_early() {
    let _s = Setup::new(Mutant::None);
    defer_async_abandoned_and_panicking();
    assert_eq!(
        EARLY.load(SeqCst),
        0,
        "a value was dropped before its grace period"
    );
}

#[test]
fn negative_control_defer_async_holding_a_plain_value_is_caught() {
    let _s = Setup::new(Mutant::DeferDropsOnPanic);
    defer_async_abandoned_and_panicking();
    assert!(
        EARLY.load(SeqCst) >= 3,
        "only {} early drops seen",
        EARLY.load(SeqCst)
    );
}

/// A queue dropped (or unwound past) with values pending: those whose grace period has
/// ended are dropped, the others leaked.
fn drop_a_queue_with_pending_values() -> (u32, u32) {
    let rcu: Rcu<4> = Rcu::new();
    let mut q: DeferQueue<Probe<'_>, 4, 4> = DeferQueue::new(&rcu);
    assert!(q.defer(Probe::unpublished(&rcu)).is_ok());
    assert!(q.defer(Probe::unpublished(&rcu)).is_ok());
    grace_periods(&rcu, 1); // those two are done now
    assert!(q.defer(Probe::unpublished(&rcu)).is_ok());
    assert!(q.defer(Probe::unpublished(&rcu)).is_ok());
    let r = catch_unwind(AssertUnwindSafe(move || {
        let _q = q;
        panic!("injected: unwinding past the queue");
    }));
    assert!(r.is_err());
    laps(&rcu, 2);
    (DROPS.load(SeqCst), EARLY.load(SeqCst))
}

#[test]
fn dropping_a_queue_never_drops_a_pending_value_early() {
    let _s = Setup::new(Mutant::None);
    assert_eq!(
        drop_a_queue_with_pending_values(),
        (2, 0),
        "(dropped, dropped early)"
    );
}

#[test]
fn negative_control_a_queue_dropping_its_pending_values_is_caught() {
    let _s = Setup::new(Mutant::QueueDropsPending);
    let (_, early) = drop_a_queue_with_pending_values();
    assert_eq!(early, 2, "the pending values' early drops were not seen");
}

#[test]
fn a_reclaim_that_panics_in_barrier_leaves_the_rest_queued() {
    let _s = Setup::new(Mutant::None);
    let rcu: Rcu<4> = Rcu::new();
    let mut q: DeferQueue<Probe<'_>, 3, 4> = DeferQueue::new(&rcu);
    let mut me = rcu.reader().unwrap();
    for _ in 0..3 {
        assert!(q.defer(Probe::unpublished(&rcu)).is_ok());
    }
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _ = q.barrier(&mut me, rcuref::rcu::spin, reclaim_panicking_at(2));
    }));
    assert!(r.is_err(), "the injected panic did not happen");
    assert_eq!(q.len(), 1);
    assert_eq!(q.barrier(&mut me, rcuref::rcu::spin, drop), Ok(1));
    drop(me);
    laps(&rcu, 2);
    assert_eq!((DROPS.load(SeqCst), EARLY.load(SeqCst)), (3, 0));
}

// ---- wait hooks and stall reports --------------------------------------------------

#[test]
fn a_wait_hook_or_stall_report_that_panics_leaves_grace_periods_running() {
    let _s = Setup::new(Mutant::None);
    let rcu: Rcu<4> = Rcu::new();
    let (inside, release) = (AtomicBool::new(false), AtomicBool::new(false));
    std::thread::scope(|s| {
        let held = hold_reader(s, &rcu, &inside, &release);
        let mut me = rcu.reader().unwrap();
        for at in 1..=3u32 {
            let r = catch_unwind(AssertUnwindSafe(|| {
                let _ = me.synchronize(|w| {
                    if w.attempts() == at {
                        panic!("injected: wait hook");
                    }
                    ControlFlow::Continue(())
                });
            }));
            assert!(r.is_err());
        }
        let mut stall = rcuref::rcu::StallDetector::new(
            || 1_000u64,
            0,
            |_, _| panic!("injected: stall report"),
        );
        let r = catch_unwind(AssertUnwindSafe(|| {
            let _ = me.synchronize(stall.hook());
        }));
        assert!(r.is_err());
        release.store(true, SeqCst);
        held.join().unwrap();
    });
    laps(&rcu, 3);
}

// ---- RcuValue, the pool, FileRef's warning hook -------------------------------------

/// A value whose drop panics when `PANIC_DROP` is set (once).
static PANIC_DROP: AtomicBool = AtomicBool::new(false);
struct PanicsOnDrop(#[allow(dead_code)] u32);
impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if PANIC_DROP.swap(false, SeqCst) {
            panic!("injected: T::drop");
        }
    }
}

#[test]
fn a_value_whose_drop_panics_leaves_rcu_value_usable() {
    let _s = Setup::new(Mutant::None);
    let rcu: Rcu<4> = Rcu::new();
    let v: rcuref::rcu::RcuValue<'_, PanicsOnDrop, 2, 4> =
        rcuref::rcu::RcuValue::new(&rcu, PanicsOnDrop(0));
    let mut me = rcu.reader().unwrap();
    assert!(v.try_replace(PanicsOnDrop(1)).is_ok());
    PANIC_DROP.store(true, SeqCst);
    let r = catch_unwind(AssertUnwindSafe(|| {
        let _ = v.replace(&mut me, PanicsOnDrop(2), rcuref::rcu::spin);
    }));
    assert!(r.is_err(), "the injected panic did not happen");
    for i in 3..20 {
        assert!(
            v.replace(&mut me, PanicsOnDrop(i), rcuref::rcu::spin)
                .is_ok(),
            "replace {i} failed"
        );
        me.section(|g| assert_eq!(v.load(g).0, i));
    }
    drop(me);
    laps(&rcu, 2);
}

#[test]
fn a_value_whose_drop_panics_still_frees_its_pool_slot() {
    let _s = Setup::new(Mutant::None);
    let pool: rcuref::pool::Pool<PanicsOnDrop, 2> = rcuref::pool::Pool::new();
    for round in 0..8 {
        let h = pool.alloc(PanicsOnDrop(round)).expect("a free slot");
        PANIC_DROP.store(round % 2 == 0, SeqCst);
        let _ = catch_unwind(AssertUnwindSafe(move || drop(h)));
        assert_eq!(pool.in_use(), 0, "round {round}: the slot was lost");
    }
}

#[test]
fn a_warning_hook_that_panics_leaves_the_count_in_its_zone() {
    let _s = Setup::new(Mutant::None);
    rcuref::set_warning_hook(Some(|_| panic!("injected: warning hook")));
    let r = rcuref::file_ref::FileRef32::new(1);
    assert!(r.put());
    assert!(
        catch_unwind(|| r.put()).is_err(),
        "an imbalanced put must warn"
    );
    assert!(r.is_dead() && !r.get());
    let s = rcuref::file_ref::FileRef32::new(u32::MAX);
    assert!(
        catch_unwind(|| s.put()).is_err(),
        "a saturated put must warn"
    );
    assert_eq!(s.raw(), rcuref::file_ref::FileRef32::SATURATED);
    rcuref::set_warning_hook(None);
    assert!(s.get() && !r.get());
}

// ---- a panic inside a grace-period step, in every build ------------------------------

/// Where the pause hook panics next (the test builds' pause points are callbacks inside
/// a step, like the heavy fence of the asymmetric build): 0 = nowhere.
static PANIC_AT_SCAN: AtomicU32 = AtomicU32::new(0);

fn panicking_pause(p: rcuref::mutants::Point) {
    if let rcuref::mutants::Point::GpBeforeScan(_) = p {
        let n = PANIC_AT_SCAN.load(SeqCst);
        if n != 0 {
            PANIC_AT_SCAN.store(n - 1, SeqCst);
            if n == 1 {
                panic!("injected: a callback inside a step");
            }
        }
    }
}

/// A callback inside a step panics at a grace period's first or second wait, four
/// times per domain; grace periods must keep ending for laps after each.
fn panicking_step() {
    rcuref::mutants::set_pause_hook(Some(panicking_pause));
    let result = catch_unwind(|| {
        for k in 1..=2 {
            let rcu: Rcu<4> = Rcu::new();
            for round in 0..4 {
                PANIC_AT_SCAN.store(k, SeqCst);
                let r = catch_unwind(AssertUnwindSafe(|| {
                    let _ = rcu.start_poll().poll();
                }));
                assert!(
                    r.is_err(),
                    "k = {k}, round {round}: the injected panic did not happen"
                );
                PANIC_AT_SCAN.store(0, SeqCst);
                laps(&rcu, 2);
            }
        }
    });
    rcuref::mutants::set_pause_hook(None);
    PANIC_AT_SCAN.store(0, SeqCst);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

#[test]
fn a_panic_inside_a_step_leaves_grace_periods_running() {
    let _s = Setup::new(Mutant::None);
    panicking_step();
}

#[test]
fn negative_control_a_step_that_leaves_its_registration_on_a_panic_is_caught() {
    let _s = Setup::new(Mutant::RegistrationKeptOnPanic);
    let r = catch_unwind(panicking_step);
    let msg = r.expect_err("grace periods kept ending with the registration kept");
    let msg = msg
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| msg.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(
        msg.contains("never ended"),
        "failed for another reason: {msg}"
    );
}

// ---- the heavy fence (asymmetric-fence build) ---------------------------------------

/// A heavy fence that panics once when asked to. It fences only the calling thread,
/// which is all a single-threaded test needs: no other thread reads here.
#[cfg(rcuref_asymmetric_fence)]
mod heavy {
    use super::*;

    pub(super) static PANIC_NEXT: AtomicU32 = AtomicU32::new(0);
    pub(super) struct PanicsOnce;

    // SAFETY: (test) no reader section of this test binary runs on another thread while
    // grace periods are driven, so a fence of the calling thread meets the contract.
    unsafe impl rcuref::rcu::heavy::HeavyFence for PanicsOnce {
        fn heavy_fence() {
            std::sync::atomic::fence(SeqCst);
            let n = PANIC_NEXT.load(SeqCst);
            if n != 0 {
                PANIC_NEXT.store(n - 1, SeqCst);
                if n == 1 {
                    panic!("injected: heavy fence");
                }
            }
        }
    }
    rcuref::set_heavy_fence!(PanicsOnce);
}

/// The lap guard across a panic: a heavy fence that panics at a grace period's first
/// wait (the only one that issues it), then several laps: with the registration left
/// behind, no grace period ends once the counter reaches the end of the other half.
#[cfg(rcuref_asymmetric_fence)]
fn panicking_heavy_fence() {
    // A poll of a fresh cookie with no reader in the way runs one grace period: two
    // waits, one heavy fence.
    let rcu: Rcu<4> = Rcu::new();
    // A registered reader (offline): an empty domain needs no heavy fence at all.
    let _reader = rcu.reader().unwrap();
    for lap_start in 0..4 {
        heavy::PANIC_NEXT.store(1, SeqCst);
        let r = catch_unwind(AssertUnwindSafe(|| {
            let _ = rcu.start_poll().poll();
        }));
        // Not left armed for the next test, whatever happened.
        let armed = heavy::PANIC_NEXT.swap(0, SeqCst);
        assert!(
            r.is_err() && armed == 0,
            "lap {lap_start}: the injected panic did not happen"
        );
        laps(&rcu, 2);
    }
}

#[cfg(rcuref_asymmetric_fence)]
#[test]
fn a_panicking_heavy_fence_leaves_grace_periods_running() {
    let _s = Setup::new(Mutant::None);
    panicking_heavy_fence();
}

#[cfg(rcuref_asymmetric_fence)]
#[test]
fn negative_control_a_registration_kept_after_a_panic_is_caught() {
    let _s = Setup::new(Mutant::RegistrationKeptOnPanic);
    let r = catch_unwind(panicking_heavy_fence);
    let msg = r.expect_err("grace periods kept ending with the registration kept");
    let msg = msg
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| msg.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(
        msg.contains("never ended"),
        "failed for another reason: {msg}"
    );
}

// ---- a value queued for a whole lap ---------------------------------------------------

/// Runs `DeferQueue::barrier` on a queue whose oldest value has waited a whole lap of the
/// (4-bit) counter: its cookie then reads "not done" again for a few steps, while a
/// reader that entered after the newest value's grace period holds the counter back.
/// Returns how many values the barrier released (2 expected).
fn barrier_after_a_lap() -> usize {
    static RCU: Rcu<4> = Rcu::new();
    let mut q: DeferQueue<'_, u32, 4, 4> = DeferQueue::new(&RCU);
    let step_to = |g: u32| {
        while RCU.gp_counter() != g {
            let c = RCU.start_poll();
            while !c.poll() {}
        }
    };
    step_to(0);
    q.defer(1).unwrap(); // the oldest: target 4
    step_to(8);
    q.defer(2).unwrap(); // the newest: target 12
    step_to(12);
    step_to(0); // a lap after the oldest was deferred: it reads 4 steps ahead
    let (inside, release) = (AtomicBool::new(false), AtomicBool::new(false));
    let mut me = RCU.reader().unwrap();
    let released = std::thread::scope(|s| {
        let h = hold_reader(s, &RCU, &inside, &release);
        let n = q.barrier(&mut me, rcuref::rcu::spin, drop).unwrap();
        release.store(true, SeqCst);
        h.join().unwrap();
        n
    });
    // Whatever is left goes now (the reader is gone).
    q.barrier(&mut me, rcuref::rcu::spin, drop).unwrap();
    released
}

/// A barrier must not trust a cookie aged by a lap of the counter: the C API's
/// `rcu_barrier` and `DeferQueue::barrier` once did, and one such value stopped it short.
#[test]
fn barrier_releases_a_value_queued_for_a_whole_lap() {
    let _s = Setup::new(Mutant::None);
    assert_eq!(barrier_after_a_lap(), 2);
}

/// The control: the barrier that asks every cookie (`collect`) returns with the aged
/// value still queued.
#[test]
fn negative_control_a_barrier_that_trusts_old_cookies_is_caught() {
    let _s = Setup::new(Mutant::BarrierTrustsOldCookies);
    assert_eq!(barrier_after_a_lap(), 0);
}
