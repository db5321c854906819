//! Preemption injection: a context stopped between any two of its
//! instructions, for as long as other work runs, as an RTOS does to a low-priority
//! task. Two kinds:
//!
//! * **arbitrary points** (a signal freezes a thread wherever it is): tortures of the
//!   grace-period drivers and of pool allocation, run in every `cargo test` on Linux;
//!   under `--cfg rcuref_mutants` each also runs against the broken variant it must catch.
//! * **exact points** (mutant builds only: the library's pause hooks): the stop lands
//!   precisely in the window each bug needs (the old free list's ABA, the grace-period
//!   try-lock's priority inversion, the lap guard's races), so each scenario is
//!   deterministic; each runs against the real code (must pass) and its broken variant
//!   (must fail).
#![cfg(all(target_os = "linux", not(miri)))]

#[path = "common/freeze.rs"]
mod freeze;
#[path = "cases/rcu.rs"]
mod rcu_cases;

use freeze::{me, Freezer};
use rcuref::pool::Pool;
#[cfg(rcuref_mutants)]
use rcuref::rcu::Rcu;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// How many freezes a signal torture applies: 300, or `RCUREF_FREEZES` (mutation
/// testing runs these tortures once per mutant and turns them down).
fn freezes() -> u32 {
    std::env::var("RCUREF_FREEZES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

/// A cheap pseudo-random sequence (no dependency): xorshift.
fn next_rand(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// The reader-age torture (blocking writer, two readers) plus a third context that
/// does nothing but drive grace periods with `poll`, frozen at arbitrary points over and
/// over. Returns the torture, for its checks; panics if the writer stalls for a second
/// while the poller is frozen (a frozen driver must hold nobody up).
fn rcu_torture_with_frozen_poller(
    t: &'static rcu_cases::Torture,
    freezes: u32,
) -> &'static rcu_cases::Torture {
    static POLLER: AtomicU64 = AtomicU64::new(0);
    static STOP: AtomicBool = AtomicBool::new(false);
    static MAY_EXIT: AtomicBool = AtomicBool::new(false);
    let freezer = Freezer::new();
    STOP.store(false, SeqCst);
    MAY_EXIT.store(false, SeqCst);
    POLLER.store(0, SeqCst);
    // On the way out (a failed check included), after whatever was frozen has been
    // thawed: stop the writer, and only then let the poller end (a signal must never go
    // to a thread that has ended).
    struct Finish(&'static rcu_cases::Torture);
    impl Drop for Finish {
        fn drop(&mut self) {
            self.0.stop.store(true, SeqCst);
            MAY_EXIT.store(true, SeqCst);
        }
    }
    std::thread::scope(|s| {
        s.spawn(|| t.reader_loop());
        s.spawn(|| t.reader_loop());
        s.spawn(|| {
            POLLER.store(me() as u64, SeqCst);
            while !STOP.load(SeqCst) {
                let _ = t.rcu.start_poll().poll();
            }
            while !MAY_EXIT.load(SeqCst) {
                std::thread::yield_now();
            }
        });
        let writer = s.spawn(|| {
            t.writer(u32::MAX, 0, std::thread::yield_now);
            STOP.store(true, SeqCst);
        });
        let _finish = Finish(t);
        while POLLER.load(SeqCst) == 0 {
            std::thread::yield_now();
        }
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..freezes {
            std::thread::sleep(Duration::from_micros(next_rand(&mut rng) % 300));
            let frozen = freezer.freeze(POLLER.load(SeqCst) as libc::pthread_t);
            let before = t.grace_periods.load(SeqCst);
            let t0 = Instant::now();
            let hold = Duration::from_micros(200 + next_rand(&mut rng) % 800);
            while t0.elapsed() < hold {
                std::hint::spin_loop();
            }
            // While the poller is frozen the writer's own polls must still complete grace
            // periods (unless it has finished).
            let t1 = Instant::now();
            while t.grace_periods.load(SeqCst) == before && !writer.is_finished() {
                assert!(
                    t1.elapsed() < Duration::from_secs(2),
                    "no grace period completed for 2 s while the poller was frozen"
                );
                std::thread::yield_now();
            }
            drop(frozen);
        }
    });
    t
}

#[test]
fn rcu_torture_with_a_poller_frozen_anywhere() {
    static T: rcu_cases::Torture = rcu_cases::Torture::new();
    let before = Freezer::count();
    rcu_torture_with_frozen_poller(&T, freezes()).check();
    let done = Freezer::count() - before;
    println!(
        "{done} freezes of the poller, {} grace periods",
        T.grace_periods.load(SeqCst)
    );
    assert!(
        done >= u64::from(freezes()),
        "too few freezes to prove anything"
    );
}

/// Pool allocation with contexts frozen anywhere: `THREADS` threads allocate values
/// that name their owner and a serial number, hold each for a moment, and check that it
/// still holds what they wrote; a slot handed to two owners shows up as a value that
/// changed under its holder, or as slots left in use at the end. Returns the number of
/// such violations. (In the broken variant two owners really do write one slot: a data
/// race, confined to that negative control.)
fn pool_churn_with_frozen_allocators(freezes: u32) -> u32 {
    const THREADS: usize = 3;
    let pool: &'static Pool<AtomicU64, 4> = Box::leak(Box::new(Pool::new()));
    static VIOLATIONS: AtomicU32 = AtomicU32::new(0);
    static DONE: AtomicU32 = AtomicU32::new(0);
    static MAY_EXIT: AtomicBool = AtomicBool::new(false);
    static STOP: AtomicBool = AtomicBool::new(false);
    VIOLATIONS.store(0, SeqCst);
    DONE.store(0, SeqCst);
    MAY_EXIT.store(false, SeqCst);
    STOP.store(false, SeqCst);
    let ids: Vec<AtomicU64> = (0..THREADS).map(|_| AtomicU64::new(0)).collect();
    let freezer = Freezer::new();
    std::thread::scope(|s| {
        for (k, id) in ids.iter().enumerate() {
            s.spawn(move || {
                id.store(me() as u64, SeqCst);
                let mut n = 0u32;
                while !STOP.load(SeqCst) {
                    n = n.wrapping_add(1);
                    let mine = ((k as u64) << 32) | u64::from(n);
                    let Ok(h) = pool.alloc(AtomicU64::new(mine)) else {
                        continue;
                    };
                    for _ in 0..(n % 16) {
                        std::hint::spin_loop();
                    }
                    if h.load(SeqCst) != mine {
                        VIOLATIONS.fetch_add(1, SeqCst);
                    }
                    drop(h);
                }
                DONE.fetch_add(1, SeqCst);
                // Never end while main may still signal this thread.
                while !MAY_EXIT.load(SeqCst) {
                    std::thread::yield_now();
                }
            });
        }
        while ids.iter().any(|i| i.load(SeqCst) == 0) {
            std::thread::yield_now();
        }
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..freezes {
            std::thread::sleep(Duration::from_micros(next_rand(&mut rng) % 200));
            let victim = &ids[(next_rand(&mut rng) % THREADS as u64) as usize];
            let frozen = freezer.freeze(victim.load(SeqCst) as libc::pthread_t);
            std::thread::sleep(Duration::from_micros(100 + next_rand(&mut rng) % 400));
            drop(frozen);
        }
        STOP.store(true, SeqCst);
        while DONE.load(SeqCst) < THREADS as u32 {
            std::thread::yield_now();
        }
        MAY_EXIT.store(true, SeqCst);
    });
    VIOLATIONS.load(SeqCst) + u32::from(pool.in_use() != 0)
}

#[test]
fn pool_allocation_with_allocators_frozen_anywhere() {
    let before = Freezer::count();
    assert_eq!(
        pool_churn_with_frozen_allocators(freezes()),
        0,
        "a slot was owned twice"
    );
    let done = Freezer::count() - before;
    println!("{done} freezes of allocators");
    assert!(
        done >= u64::from(freezes()),
        "too few freezes to prove anything"
    );
}

#[cfg(rcuref_mutants)]
mod negative_controls {
    use super::*;
    use rcuref::mutants::{select, Mutant};

    /// Runs `scenario` with `m` selected; true if it failed (panicked).
    fn fails_with(m: Mutant, scenario: impl FnOnce() + std::panic::UnwindSafe) -> bool {
        select(m);
        let failed = std::panic::catch_unwind(scenario).is_err();
        select(Mutant::None);
        failed
    }

    /// The old try-lock: a poller frozen while holding it stops the writer's grace
    /// periods, which the torture reports as a stall.
    #[test]
    fn catches_the_writer_try_lock_with_a_frozen_poller() {
        static TS: [rcu_cases::Torture; 5] = [const { rcu_cases::Torture::new() }; 5];
        let caught = TS.iter().enumerate().any(|(i, t)| {
            println!("run {}", i + 1);
            fails_with(Mutant::WriterLock, || {
                rcu_torture_with_frozen_poller(t, freezes()).check();
            })
        });
        assert!(
            caught,
            "a frozen poller holding the try-lock was not caught in five runs"
        );
    }

    /// A claim that checks, then writes: with allocators frozen anywhere, a slot ends up
    /// with two owners.
    #[test]
    fn catches_check_then_claim_with_frozen_allocators() {
        let caught = (0..5).any(|i| {
            println!("run {}", i + 1);
            select(Mutant::CheckThenClaim);
            let v = pool_churn_with_frozen_allocators(freezes());
            select(Mutant::None);
            v > 0
        });
        assert!(caught, "a non-atomic claim was not caught in five runs");
    }
}

/// Exact stops: each scenario returns whether it saw the violation its bug causes.
///
/// The lap-guard scenarios cut the counter to 3 bits (halves 0..=3 and 4..=7), which a
/// build where heavy fences may run refuses (its cookies reach 7 steps ahead:
/// `mutants::MIN_GP_BITS` is 4 there), so they are compiled only without
/// `rcuref_fences`: `cargo xtask test` runs this file with `--no-default-features`.
/// The lap guard is the same code in every build; `tests/heavy_fence_placement.rs` runs
/// it on a 4-bit counter in the asymmetric-fence build.
#[cfg(rcuref_mutants)]
mod exact_points {
    use super::freeze::{
        prepare_stop, release_all, resume, resume_n, stop_at, stop_n_at, stopped_n, wait_stopped,
        wait_stopped_n,
    };
    use super::*;
    use rcuref::mutants::{select, set_gp_bits, Mutant, Point};
    use std::thread::JoinHandle;

    fn leaked_rcu() -> &'static Rcu<4> {
        Box::leak(Box::new(Rcu::new()))
    }

    /// Puts the process-wide test state back however a scenario ends (a failed
    /// assertion included), so that later tests in this binary run the real code on the
    /// full counter: no variant selected, 32 bits, stopped threads let go, no hook.
    struct Restore;

    impl Drop for Restore {
        fn drop(&mut self) {
            select(Mutant::None);
            set_gp_bits(32);
            release_all();
        }
    }

    /// Aborts the process if it is still alive after `limit`: a scenario that hangs (a
    /// broken variant that stops all progress, say) fails at once instead of holding up
    /// the whole run.
    struct Watchdog(std::sync::Arc<AtomicBool>);

    impl Watchdog {
        fn new(what: &'static str, limit: Duration) -> Self {
            let done = std::sync::Arc::new(AtomicBool::new(false));
            let seen = done.clone();
            std::thread::spawn(move || {
                let t0 = Instant::now();
                while !seen.load(SeqCst) {
                    if t0.elapsed() > limit {
                        eprintln!("{what}: no result after {limit:?}: it hangs");
                        std::process::abort();
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            });
            Watchdog(done)
        }
    }

    impl Drop for Watchdog {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }

    /// Runs `scenario` with the real code (must be clean) and with `m` (must violate).
    fn real_passes_and_catches(m: Mutant, scenario: fn() -> bool) {
        let _restore = Restore;
        let _watchdog = Watchdog::new("an exact-point scenario", Duration::from_secs(60));
        assert!(!scenario(), "the real code failed the scenario");
        select(m);
        let caught = scenario();
        select(Mutant::None);
        assert!(caught, "the scenario did not catch {m:?}");
    }

    /// Item 1: a poller stops right after its scan found nobody online; a reader comes
    /// online; a writer takes a cookie at the same counter value. Whatever the poller
    /// does when it resumes must not complete that cookie while the reader is inside.
    fn stopped_poller_vs_later_cookie() -> bool {
        let rcu = leaked_rcu();
        prepare_stop();
        let poller = std::thread::spawn(move || {
            stop_at(Point::GpAfterScan);
            let _ = rcu.start_poll().poll();
        });
        assert!(
            wait_stopped(Duration::from_secs(10)),
            "the poller never reached its scan"
        );
        let reader = rcu.reader().unwrap();
        let guard = reader.lock();
        let cookie = rcu.start_poll();
        resume();
        poller.join().unwrap();
        let violated = (0..100).any(|_| cookie.poll());
        drop(guard);
        assert!(cookie.poll(), "not done after the reader left");
        violated
    }

    #[test]
    fn a_stopped_poller_completes_no_later_grace_period() {
        real_passes_and_catches(Mutant::StaleFastPath, stopped_poller_vs_later_cookie);
    }

    /// Item 6: a poller stops in the middle of a step (holding the old try-lock, in the
    /// broken variant); a writer's `synchronize` must still finish, with no reader
    /// online. Returns true if the writer made no progress for 500 ms.
    fn stopped_poller_vs_synchronize() -> bool {
        let rcu = leaked_rcu();
        prepare_stop();
        let poller = std::thread::spawn(move || {
            stop_at(Point::GpAfterScan);
            let _ = rcu.start_poll().poll();
        });
        assert!(wait_stopped(Duration::from_secs(10)));
        let mut writer = rcu.reader().unwrap();
        let t0 = Instant::now();
        let mut stalled = false;
        writer
            .synchronize(rcuref::rcu::forever(|| {
                if !stalled && t0.elapsed() > Duration::from_millis(500) {
                    stalled = true;
                    resume(); // let the poller go, so the run can end
                }
                std::thread::yield_now();
            }))
            .unwrap();
        resume();
        poller.join().unwrap();
        stalled
    }

    #[test]
    fn a_stopped_poller_holds_up_no_grace_period() {
        real_passes_and_catches(Mutant::WriterLock, stopped_poller_vs_synchronize);
    }

    /// The counter's ABA: a driver stops between its scan (at a wait, nobody online) and
    /// its exchange while the others drive the counter exactly one lap round (here 64
    /// steps: the width cut to 6 bits) to the same value, with a reader now inside from
    /// before the flip. The stale exchange would complete that wait; a cookie taken just
    /// before the flip would then be done while the reader is still inside.
    fn driver_stopped_for_a_lap() -> bool {
        set_gp_bits(6);
        let rcu = leaked_rcu();
        let (driver, at) = stop_a_driver_after_its_scan(rcu); // flips 0 -> 1, scans at 1
        assert_eq!(at, 1);
        // One lap, as far as the others can go: back to 0 (one step before the stopped
        // driver's snapshot). With the lap guard they stop at 63, the last step before
        // the half the stopped driver registered in.
        for _ in 0..1000 {
            let g = rcu.gp_counter();
            if g == 0 {
                break;
            }
            // Whole grace periods, then exactly up to 0 (a raw target within reach).
            let cookie = if 64 - g <= 5 {
                rcu.cookie_from_raw(0)
            } else {
                rcu.start_poll()
            };
            let _ = cookie.poll();
        }
        let at = rcu.gp_counter();
        assert!(at == 0 || at == 63, "the counter stopped at {at}");
        stale_wait_completes_a_cookie(rcu, driver, 0)
    }

    #[test]
    fn a_driver_stopped_for_a_lap_completes_no_stale_wait() {
        real_passes_and_catches(Mutant::NoLapGuard, driver_stopped_for_a_lap);
    }

    /// The end of the lap-guard scenarios below: a reader from before the flip to the
    /// stopped driver's wait (its phase is old for that wait wherever the counter
    /// stopped), a cookie taken under it, then the stopped driver (stop number `stop`)
    /// let go. Returns whether the cookie was done while the reader was still inside.
    fn stale_wait_completes_a_cookie(
        rcu: &'static Rcu<4>,
        driver: JoinHandle<()>,
        stop: usize,
    ) -> bool {
        let reader = rcu.reader().unwrap();
        let guard = reader.lock();
        let cookie = rcu.start_poll();
        for _ in 0..10 {
            let _ = cookie.poll(); // flips to the wait (if it can) and waits for the reader
        }
        resume_n(stop);
        driver.join().unwrap();
        let violated = (0..100).any(|_| cookie.poll());
        drop(guard);
        assert!(cookie.poll(), "not done after the reader left");
        violated
    }

    /// Starts a driver that flips to the next wait, scans it, and stops there (stop 0),
    /// holding a snapshot of that wait. Returns the counter value it stopped at.
    fn stop_a_driver_after_its_scan(rcu: &'static Rcu<4>) -> (JoinHandle<()>, u32) {
        prepare_stop();
        let driver = std::thread::spawn(move || {
            stop_at(Point::GpAfterScan);
            let _ = rcu.start_poll().poll();
        });
        assert!(wait_stopped(Duration::from_secs(10)));
        (driver, rcu.gp_counter())
    }

    #[cfg(not(rcuref_fences))] // a 3-bit counter: see the module docs
    /// The lap guard's registration must follow the counter within one call. A stopped
    /// driver holds a snapshot of the wait at 1, in the low half; another driver, in one
    /// call, carries the counter from the last step of the low half through the whole
    /// high half (the width cut to 3 bits: halves 0..=3 and 4..=7, and a target 5 steps
    /// ahead reaches that far). It must stop before re-entering the low half, where the
    /// stopped snapshot could otherwise come round again (ABA, as above). A driver that
    /// kept its registration in the half it started in (the broken variant) sees the
    /// low half as its own and crosses.
    fn one_call_across_the_high_half() -> bool {
        set_gp_bits(3);
        let rcu = leaked_rcu();
        let (driver, at) = stop_a_driver_after_its_scan(rcu);
        assert_eq!(at, 1);
        let _ = rcu.cookie_from_raw(3).poll(); // within the low half: 1 -> 3
        assert_eq!(rcu.gp_counter(), 3);
        // One call from 3 towards 0: 3 -> 4 enters the high half, 7 -> 0 would leave it.
        let _ = rcu.cookie_from_raw(0).poll();
        let at = rcu.gp_counter();
        assert!(at == 0 || at == 7, "the counter stopped at {at}");
        stale_wait_completes_a_cookie(rcu, driver, 0)
    }

    #[cfg(not(rcuref_fences))] // a 3-bit counter: see the module docs
    #[test]
    fn one_call_across_a_whole_half_keeps_the_lap_guard() {
        real_passes_and_catches(Mutant::StaleHalfRegistration, one_call_across_the_high_half);
    }

    #[cfg(not(rcuref_fences))] // a 3-bit counter: see the module docs
    /// The same, mirrored: the stopped snapshot (the wait at 5) in the high half, and
    /// one call from the last step of the high half through the whole low half.
    fn one_call_across_the_low_half() -> bool {
        set_gp_bits(3);
        let rcu = leaked_rcu();
        let _ = rcu.cookie_from_raw(4).poll();
        assert_eq!(rcu.gp_counter(), 4);
        let (driver, at) = stop_a_driver_after_its_scan(rcu);
        assert_eq!(at, 5);
        let _ = rcu.cookie_from_raw(7).poll(); // within the high half: 5 -> 7
        assert_eq!(rcu.gp_counter(), 7);
        // One call from 7 towards 4: 7 -> 0 enters the low half, 3 -> 4 would leave it.
        let _ = rcu.cookie_from_raw(4).poll();
        let at = rcu.gp_counter();
        assert!(at == 3 || at == 4, "the counter stopped at {at}");
        stale_wait_completes_a_cookie(rcu, driver, 0)
    }

    #[cfg(not(rcuref_fences))] // a 3-bit counter: see the module docs
    #[test]
    fn one_call_across_the_other_half_keeps_the_lap_guard() {
        real_passes_and_catches(Mutant::StaleHalfRegistration, one_call_across_the_low_half);
    }

    #[cfg(not(rcuref_fences))] // a 3-bit counter: see the module docs
    /// A second driver A, with a target reaching 0, stops at `point` while the counter
    /// is at 3 (stop 1); meanwhile another driver carries the counter to 7, into the
    /// high half. When A goes on it must end up registered there before it steps on
    /// towards 0, or it re-enters the low half, where the driver stopped at 1 (stop 0)
    /// holds its snapshot.
    fn a_second_driver_stopped_at(point: Point) -> bool {
        set_gp_bits(3);
        let rcu = leaked_rcu();
        let (stopped, at) = stop_a_driver_after_its_scan(rcu);
        assert_eq!(at, 1);
        let _ = rcu.cookie_from_raw(3).poll(); // 1 -> 3
        assert_eq!(rcu.gp_counter(), 3);
        let a = std::thread::spawn(move || {
            stop_n_at(1, point);
            let _ = rcu.cookie_from_raw(0).poll();
        });
        assert!(wait_stopped_n(1, Duration::from_secs(10)));
        assert_eq!(rcu.gp_counter(), 3);
        let _ = rcu.cookie_from_raw(7).poll(); // another driver: 3 -> 7
        assert_eq!(rcu.gp_counter(), 7);
        resume_n(1);
        a.join().unwrap();
        let at = rcu.gp_counter();
        assert!(at == 0 || at == 7, "the counter stopped at {at}");
        stale_wait_completes_a_cookie(rcu, stopped, 0)
    }

    #[cfg(not(rcuref_fences))] // a 3-bit counter: see the module docs
    /// The crossing made by another driver: A stops after its scan of the wait at 3;
    /// when it resumes, its exchange fails and tells it the counter is at 7.
    fn a_crossing_made_by_another_driver() -> bool {
        a_second_driver_stopped_at(Point::GpAfterScan)
    }

    #[cfg(not(rcuref_fences))] // a 3-bit counter: see the module docs
    #[test]
    fn a_crossing_made_by_another_driver_keeps_the_lap_guard() {
        real_passes_and_catches(
            Mutant::StaleHalfRegistration,
            a_crossing_made_by_another_driver,
        );
    }

    #[cfg(not(rcuref_fences))] // a 3-bit counter: see the module docs
    /// The registration's own race: A reads the counter at 3 and stops before
    /// registering; it then registers in the low half, which the counter has left, and
    /// must see that and register again in the high half.
    fn a_registration_in_a_half_already_left() -> bool {
        a_second_driver_stopped_at(Point::GpEnterBeforeRegister)
    }

    #[cfg(not(rcuref_fences))] // a 3-bit counter: see the module docs
    #[test]
    fn a_registration_in_a_half_already_left_is_redone() {
        real_passes_and_catches(
            Mutant::RegisterWithoutRecheck,
            a_registration_in_a_half_already_left,
        );
    }

    #[cfg(not(rcuref_fences))] // a 3-bit counter: see the module docs
    /// After registering again, a driver must step from `enter`'s fresh snapshot, not
    /// from the value that told it the counter had moved: the counter may have moved on
    /// again meanwhile (here, while the driver is stopped inside `enter`, from 5 round
    /// to 0). Stepping from the old value it would scan a wait the counter has left,
    /// stop there (stop 2), and, once the counter comes back to that wait a lap later
    /// with a reader inside, complete it on that stale scan.
    fn a_snapshot_taken_before_registering() -> bool {
        set_gp_bits(3);
        let rcu = leaked_rcu();
        prepare_stop();
        let _ = rcu.cookie_from_raw(1).poll();
        assert_eq!(rcu.gp_counter(), 1);
        let d = std::thread::spawn(move || {
            stop_n_at(0, Point::GpAfterScan); // its scan of the wait at 1
            stop_n_at(1, Point::GpEnterBeforeRegister); // registering again, at 5
            stop_n_at(2, Point::GpAfterScan); // a scan of "5" (only if stale)
            let _ = rcu.cookie_from_raw(6).poll();
        });
        assert!(wait_stopped_n(0, Duration::from_secs(10)));
        let _ = rcu.cookie_from_raw(5).poll(); // 1 -> 5: into the high half
        assert_eq!(rcu.gp_counter(), 5);
        resume_n(0); // its exchange fails (5): it leaves the low half, enters again
        assert!(wait_stopped_n(1, Duration::from_secs(10)));
        let _ = rcu.cookie_from_raw(0).poll(); // 5 -> 0, nobody registered in the low half
        assert_eq!(rcu.gp_counter(), 0);
        resume_n(1);
        // With the fresh snapshot (0) its target (6) reads as passed and it ends; with
        // the old one it scans "5" and stops.
        let t0 = Instant::now();
        while !stopped_n(2) && !d.is_finished() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the driver never got on"
            );
            std::thread::yield_now();
        }
        let _ = rcu.cookie_from_raw(4).poll(); // 0 -> 4
        assert_eq!(rcu.gp_counter(), 4);
        // A reader old for the wait at 5; the stale driver is stop 2.
        stale_wait_completes_a_cookie(rcu, d, 2)
    }

    #[cfg(not(rcuref_fences))] // a 3-bit counter: see the module docs
    #[test]
    fn a_driver_steps_from_its_snapshot_after_registering() {
        real_passes_and_catches(
            Mutant::StaleSnapshotAfterRegister,
            a_snapshot_taken_before_registering,
        );
    }

    #[cfg(not(rcuref_fences))] // a 3-bit counter: see the module docs
    /// A wait held by a reader ends the call: the driver must leave its half on that
    /// path too, or the counter can never again enter the other half. Over many laps
    /// of a 3-bit counter, with polls blocked by a reader in between, every grace
    /// period must still end. Returns whether one did not.
    fn blocked_polls_over_many_laps() -> bool {
        set_gp_bits(3);
        let rcu = leaked_rcu();
        let reader = rcu.reader().unwrap();
        for _ in 0..20 {
            let guard = reader.lock();
            let blocked = rcu.start_poll();
            for _ in 0..3 {
                let _ = blocked.poll(); // held by the reader
            }
            drop(guard);
            if !(0..10).any(|_| blocked.poll()) {
                return true;
            }
        }
        false
    }

    #[cfg(not(rcuref_fences))] // a 3-bit counter: see the module docs
    #[test]
    fn a_blocked_wait_leaves_no_registration_behind() {
        real_passes_and_catches(
            Mutant::RegistrationLeakedWhenBlocked,
            blocked_polls_over_many_laps,
        );
    }

    /// Free-list ABA (which broke the old tagged free list), on the claim flags: an
    /// allocator stops after seeing slot 0 free and before claiming it, while another
    /// context allocates and frees that slot 65536 times (one full tag period of the old
    /// 16-bit tag) and then keeps it. The stopped allocator must not get the same slot.
    fn allocator_stopped_mid_claim() -> bool {
        let pool: &'static Pool<AtomicU64, 4> = Box::leak(Box::new(Pool::new()));
        prepare_stop();
        let stopped = std::thread::spawn(move || {
            stop_at(Point::AllocAfterProbe);
            pool.alloc(AtomicU64::new(0xA)).ok()
        });
        assert!(wait_stopped(Duration::from_secs(10)));
        for _ in 0..65_536 {
            drop(pool.alloc(AtomicU64::new(1)).ok().unwrap());
        }
        let b = pool.alloc(AtomicU64::new(0xB)).ok().unwrap();
        resume();
        let a = stopped
            .join()
            .unwrap()
            .expect("a free slot was left for it");
        let violated = a.slot() == b.slot() || b.load(SeqCst) != 0xB;
        if violated {
            // The broken variant gave both the same slot: forget one handle so that the
            // slot is not destroyed twice.
            std::mem::forget(a);
        }
        violated
    }

    #[test]
    fn an_allocator_stopped_mid_claim_never_takes_a_live_slot() {
        real_passes_and_catches(Mutant::CheckThenClaim, allocator_stopped_mid_claim);
    }
}
