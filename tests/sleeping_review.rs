//! Regressions of the sleeping waits and the debug keys, each a failure the code once
//! had, kept as a test: a wake hook that reads its domain re-entering itself, a wake lost
//! between the last poll and the sleep, a callback refused its own key, a barrier
//! spinning while a callback runs elsewhere, a barrier asleep on a callback that ends
//! and wakes nobody.
//!
//! Commands:
//! * `cargo test --test sleeping_review --features debug-callbacks`
//! * `RUSTFLAGS="--cfg rcuref_mutants" cargo test --test sleeping_review --features
//!   debug-callbacks` (adds the lost wake, at an exact point)
//! * the same with `--cfg rcuref_asymmetric_fence` and feature `membarrier` (the lost
//!   wake in the mode that claims no wake-up is ever missed)

#[cfg(rcuref_asymmetric_fence)]
rcuref::set_heavy_fence!(rcuref::rcu::heavy::Membarrier);

use rcuref::rcu::{sleeping, Rcu};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The tests share process-wide hooks (the pause hook, std_wake's condvar).
static SERIAL: Mutex<()> = Mutex::new(());

fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

// ---- 1. a wake hook that reads its own domain recurses without bound ----------------

/// One dedicated slot (0) for the reader thread; the writer registers.
static D1: Rcu<4> = Rcu::with_dedicated(1);
static ASLEEP1: AtomicBool = AtomicBool::new(false);
static MAX_DEPTH: AtomicU32 = AtomicU32::new(0);
static HOOK_CALLS: AtomicU32 = AtomicU32::new(0);
thread_local!(static DEPTH: Cell<u32> = const { Cell::new(0) });

/// A plausible kernel wake hook: read the (RCU-protected) record of the sleeping
/// writer under a read section of the same domain, then notify it. Capped at 64 levels
/// so the test reports instead of overflowing the stack.
fn wake_reading_the_domain() {
    HOOK_CALLS.fetch_add(1, SeqCst);
    let d = DEPTH.with(|c| {
        c.set(c.get() + 1);
        c.get()
    });
    MAX_DEPTH.fetch_max(d, SeqCst);
    if d < 64 {
        // SAFETY: slot 0 is used only by the reader thread, which is where this hook
        // runs (from its unlock).
        let me = unsafe { D1.context_reader(0) };
        me.section(|_| { /* load the waiter's task pointer, notify it */ });
    }
    DEPTH.with(|c| c.set(c.get() - 1));
}

/// Attack: a wake hook that itself locks a reader of the same domain (the hook runs
/// "from the reader's context", and an interrupt handler's reader is a ContextReader).
/// Its outermost unlock finds the writer still announced and calls the hook again,
/// which reads again, ...: unbounded recursion (a stack overflow; in a kernel without
/// guard pages, memory corruption) for as long as one wait sleeps.
#[test]
fn a_wake_hook_that_reads_its_domain_runs_once() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    D1.set_wake_hook(Some(wake_reading_the_domain));
    let inside = leak(AtomicBool::new(false));
    let reader = std::thread::spawn(move || {
        // SAFETY: slot 0 is used by this thread only.
        let me = unsafe { D1.context_reader(0) };
        let g = me.lock();
        inside.store(true, SeqCst);
        while !ASLEEP1.load(SeqCst) {
            std::thread::yield_now();
        }
        drop(g); // outermost unlock with a wait asleep: calls the hook
    });
    while !inside.load(SeqCst) {
        std::thread::yield_now();
    }
    let mut w = D1.reader().unwrap();
    w.synchronize(sleeping(0, || {
        ASLEEP1.store(true, SeqCst);
        std::thread::sleep(Duration::from_millis(50)); // the sleep's own bound
    }))
    .unwrap();
    reader.join().unwrap();
    D1.set_wake_hook(None);
    let depth = MAX_DEPTH.load(SeqCst);
    assert!(
        depth <= 1,
        "the wake hook re-entered itself {depth} levels deep ({} calls for one unlock; \
         capped at 64 by the test, unbounded in the library)",
        HOOK_CALLS.load(SeqCst)
    );
}

// ---- 2. std_sleeping loses a wake that lands between its last poll and its sleep ----

#[cfg(rcuref_mutants)]
mod lost_wake {
    use super::*;
    use rcuref::mutants::{set_pause_hook, Point};
    use rcuref::rcu::{std_sleeping, SLEEP_BOUND, SPIN_ATTEMPTS};

    thread_local!(static IS_WAITER: Cell<bool> = const { Cell::new(false) });
    /// Set by the waiter's hook right before `std_sleeping` goes to sleep (the attempt
    /// after its `SPIN_ATTEMPTS` polls): the next scan on the waiter thread is the one inside
    /// `Waiting::sleep`'s final poll.
    static ARMED: AtomicBool = AtomicBool::new(false);
    static LEAVE: AtomicBool = AtomicBool::new(false);
    static LEFT: AtomicBool = AtomicBool::new(false);

    /// A preemption of the waiter between its final scan (which saw the reader inside)
    /// and the sleep: meanwhile the reader leaves and its unlock runs the wake hook
    /// (std_wake) to completion.
    fn pause(at: Point) {
        if at == Point::GpAfterScan && IS_WAITER.with(Cell::get) && ARMED.swap(false, SeqCst) {
            LEAVE.store(true, SeqCst);
            while !LEFT.load(SeqCst) {
                std::thread::yield_now();
            }
        }
    }

    /// One round: how long the writer took to return after the reader's unlock (wake
    /// hook included) had finished.
    fn round(control: bool) -> Duration {
        let rcu: &'static Rcu<4> = leak(Rcu::new());
        ARMED.store(false, SeqCst);
        LEAVE.store(false, SeqCst);
        LEFT.store(false, SeqCst);
        let inside = leak(AtomicBool::new(false));
        let reader = std::thread::spawn(move || {
            let r = rcu.reader().unwrap();
            let g = r.lock();
            inside.store(true, SeqCst);
            while !LEAVE.load(SeqCst) {
                std::thread::yield_now();
            }
            if control {
                std::thread::sleep(Duration::from_micros(300)); // the writer is asleep now
            }
            drop(g); // sees the announcement, calls std_wake (installed by std_sleeping)
            let t = Instant::now();
            LEFT.store(true, SeqCst);
            t
        });
        while !inside.load(SeqCst) {
            std::thread::yield_now();
        }
        let writer = std::thread::spawn(move || {
            IS_WAITER.with(|c| c.set(true));
            let mut w = rcu.reader().unwrap();
            let mut inner = std_sleeping::<4>();
            w.synchronize(move |wt| {
                if wt.attempts() == SPIN_ATTEMPTS + 1 && !control {
                    ARMED.store(true, SeqCst); // this attempt sleeps
                }
                if wt.attempts() == SPIN_ATTEMPTS + 6 && control {
                    LEAVE.store(true, SeqCst); // a few sleeps in: let the reader go
                }
                inner(wt)
            })
            .unwrap();
            Instant::now()
        });
        let unlocked = reader.join().unwrap();
        let returned = writer.join().unwrap();
        returned.saturating_duration_since(unlocked)
    }

    /// Attack: the wake comes after `Waiting::sleep`'s poll and before `std_sleeping`'s
    /// closure samples its generation counter (it samples it inside `sleep`, after the
    /// poll, instead of before the announcement). The wake is lost and the writer
    /// sleeps out SLEEP_BOUND although the reader left and woke it. The window is the
    /// waiter's own (any preemption of the writer there), not "a few instructions" of
    /// the reader's unlock, and the asymmetric mode's heavy fence (before the poll)
    /// does not close it: "none is missed" is false there too.
    #[test]
    fn std_sleeping_keeps_a_wake_between_its_poll_and_its_sleep() {
        let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        set_pause_hook(Some(pause));
        let lat: Vec<Duration> = (0..5).map(|_| round(false)).collect();
        set_pause_hook(None);
        let best = *lat.iter().min().unwrap();
        assert!(
            best < SLEEP_BOUND / 2,
            "woken by the unlock, yet the writer slept out its bound every time: \
             {lat:?} (SLEEP_BOUND {SLEEP_BOUND:?}, asymmetric mode: {})",
            cfg!(rcuref_asymmetric_fence)
        );
    }

    /// Control (passes): the same rounds with the reader leaving while the writer is
    /// inside its sleep: the wake is not lost and the writer returns well within the
    /// bound, so the failure above is the lost wake, not the harness.
    #[test]
    fn control_a_wake_during_the_sleep_is_not_lost() {
        let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let lat: Vec<Duration> = (0..5).map(|_| round(true)).collect();
        let best = *lat.iter().min().unwrap();
        assert!(best < SLEEP_BOUND / 2, "{lat:?}");
        println!("control: {lat:?}");
    }
}

// ---- 3. call_keyed refuses a callback that queues its own key again -----------------

/// Attack: Linux's DEBUG_OBJECTS_RCU_HEAD unqueues a head before invoking its
/// callback (`debug_rcu_head_unqueue` in `rcu_do_batch`), so a callback that re-posts
/// its own head (a periodic RCU-deferred task, rcutorture's reposting callbacks) is
/// legal. Here the place stays RUNNING with the key while the callback runs, so the
/// re-post is refused with Error::Busy and a false Warning::QueuedTwice.
#[cfg(feature = "debug-callbacks")]
#[test]
fn a_callback_may_queue_its_own_key_again() {
    use rcuref::rcu::CallQueue;
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rcu: Rcu<2> = Rcu::new();
    let q: CallQueue<'_, usize, 4, 2> = CallQueue::new(&rcu);
    const KEY: usize = 0x1000;
    q.call_keyed(KEY, KEY).unwrap();
    let mut w = rcu.reader().unwrap();
    w.synchronize(rcuref::rcu::spin).unwrap();
    let mut repost = None;
    let ran = q.run(1, |k| {
        // The callback is out of the queue and running: re-post it.
        repost = Some(q.call_keyed(k, k).map_err(|r| r.error));
    });
    assert_eq!(ran.ran, 1);
    assert_eq!(
        repost,
        Some(Ok(())),
        "a callback re-posting its own key from inside its run was refused"
    );
}

// ---- 5. a sleeping hook never sleeps in CallQueue::barrier's second phase -----------

/// A domain (with `wake` as its wake hook) and a queue holding one callback, which a
/// runner thread has begun to run and which takes 100 ms: returned once it is running.
fn a_callback_running_elsewhere(
    wake: Option<fn()>,
) -> (
    &'static Rcu<4>,
    &'static rcuref::rcu::CallQueue<'static, usize, 4, 4>,
    std::thread::JoinHandle<rcuref::rcu::Ran>,
) {
    let rcu: &'static Rcu<4> = leak(Rcu::new());
    rcu.set_wake_hook(wake);
    let q = leak(rcuref::rcu::CallQueue::new(rcu));
    q.call(7).unwrap();
    let started = leak(AtomicBool::new(false));
    let runner = std::thread::spawn(move || {
        let mut w = rcu.reader().unwrap();
        w.synchronize(rcuref::rcu::spin).unwrap();
        q.run(1, |_| {
            started.store(true, SeqCst);
            std::thread::sleep(Duration::from_millis(100)); // a long callback
        })
    });
    while !started.load(SeqCst) {
        std::thread::yield_now();
    }
    (rcu, q, runner)
}

static SLEPT5: AtomicU32 = AtomicU32::new(0);
static HOOKED5: AtomicU32 = AtomicU32::new(0);

/// Attack: `barrier` waits for a callback that another context is running, calling its
/// hook with a `Waiting` for a grace period that has already ended, so `Waiting::sleep`
/// (and every hook built on it: `sleeping`, `std_sleeping`) polls "done" and returns
/// without sleeping: the barrier busy-spins for as long as the callback runs, the very
/// case (more tasks than cores, a priority scheduler) sleeping waits were added for.
#[test]
fn a_barrier_sleeps_while_a_callback_runs_elsewhere() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (rcu, q, runner) = a_callback_running_elsewhere(None);
    let mut me = rcu.reader().unwrap();
    let mut hook = sleeping(0, || {
        SLEPT5.fetch_add(1, SeqCst);
        std::thread::sleep(Duration::from_millis(1));
    });
    let t = Instant::now();
    q.barrier(
        &mut me,
        |w| {
            HOOKED5.fetch_add(1, SeqCst);
            hook(w)
        },
        |_| {},
    )
    .unwrap();
    let took = t.elapsed();
    assert_eq!(runner.join().unwrap().ran, 1);
    let (slept, hooked) = (SLEPT5.load(SeqCst), HOOKED5.load(SeqCst));
    assert!(
        slept > 0,
        "the barrier waited {took:?} for a running callback with a sleeping hook, \
         called it {hooked} times and slept {slept} times (busy spin)"
    );
}

// ---- 5b. the callback's end wakes a barrier asleep on it ----------------------------

static WAKES5B: Mutex<u32> = Mutex::new(0);
static CV5B: std::sync::Condvar = std::sync::Condvar::new();
fn wake5b() {
    *WAKES5B.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    CV5B.notify_all();
}

/// Attack: a barrier asleep on a callback that another context runs, with a sleep whose
/// bound is long (5 s, as a real sleep's timeout may be), must be woken when the
/// callback returns (`FreeOnDrop` wakes the domain's sleepers, as an unlock would), not
/// sleep out its bound. The sleep is the blocking waits' shape: a generation read
/// before the announcement, so a wake between the announcement and the sleep counts.
#[test]
fn a_barrier_asleep_on_a_running_callback_is_woken_when_it_returns() {
    use std::ops::ControlFlow;
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (rcu, q, runner) = a_callback_running_elsewhere(Some(wake5b));
    let mut me = rcu.reader().unwrap();
    let slept = Cell::new(0u32);
    let t = Instant::now();
    q.barrier(
        &mut me,
        |w| {
            let seen = *WAKES5B.lock().unwrap_or_else(|e| e.into_inner());
            w.sleep(|| {
                slept.set(slept.get() + 1);
                let g = WAKES5B.lock().unwrap_or_else(|e| e.into_inner());
                let _ = CV5B
                    .wait_timeout_while(g, Duration::from_secs(5), |n| *n == seen)
                    .unwrap_or_else(|e| e.into_inner());
            });
            ControlFlow::Continue(())
        },
        |_| {},
    )
    .unwrap();
    let took = t.elapsed();
    assert_eq!(runner.join().unwrap().ran, 1);
    assert!(
        slept.get() > 0,
        "the barrier never slept: the test proves nothing"
    );
    assert!(
        took < Duration::from_millis(2500),
        "the barrier slept {took:?} (its bound is 5 s) for a 100 ms callback: the \
         callback's end woke nobody"
    );
}

// ---- 6. while one wait sleeps, every reader's unlock takes a process-wide mutex -----

/// The cost claim: while a writer sleeps, an outermost unlock calls the wake hook only
/// for a section the wait may be waiting for (one that began before the wait's flip),
/// and only once per announcement (the waking unlock takes it back): not every unlock of
/// every reader, as the first version did (a global mutex and a futex wake per section,
/// 23x the section's cost; a FreeRTOS writer woken 92,724 times in a run). Counted, not
/// timed. Returns (wakes before the old reader left, sleeps by then).
fn wakes_while_a_new_reader_runs() -> (u32, u32) {
    static WAKES: AtomicU32 = AtomicU32::new(0);
    static SLEEPS: AtomicU32 = AtomicU32::new(0);
    fn count_wake() {
        WAKES.fetch_add(1, SeqCst);
    }
    WAKES.store(0, SeqCst);
    SLEEPS.store(0, SeqCst);
    let rcu: &'static Rcu<4> = leak(Rcu::new());
    rcu.set_wake_hook(Some(count_wake));
    let me = rcu.reader().unwrap();
    // An old reader holds the grace period; a writer sleeps (1 ms bounds) meanwhile.
    let (inside, leave) = (leak(AtomicBool::new(false)), leak(AtomicBool::new(false)));
    let old = std::thread::spawn(move || {
        let r = rcu.reader().unwrap();
        let _g = r.lock();
        inside.store(true, SeqCst);
        while !leave.load(SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    while !inside.load(SeqCst) {
        std::thread::yield_now();
    }
    let writer = std::thread::spawn(move || {
        let mut w = rcu.reader().unwrap();
        w.synchronize(sleeping(0, || {
            SLEEPS.fetch_add(1, SeqCst);
            std::thread::sleep(Duration::from_millis(1));
        }))
        .unwrap();
    });
    while SLEEPS.load(SeqCst) == 0 {
        std::thread::yield_now();
    }
    // This reader's sections begin after the wait's flip: they hold nothing up.
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(60) {
        for _ in 0..100 {
            me.section(|_| {});
        }
    }
    let seen = (WAKES.load(SeqCst), SLEEPS.load(SeqCst));
    leave.store(true, SeqCst);
    old.join().unwrap();
    writer.join().unwrap();
    println!(
        "{} wakes for {} sleeps while a new reader ran",
        seen.0, seen.1
    );
    seen
}

#[test]
fn only_a_reader_the_wait_waits_for_wakes_it() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (wakes, sleeps) = wakes_while_a_new_reader_runs();
    assert!(
        sleeps >= 5,
        "the writer hardly slept ({sleeps} times): inconclusive"
    );
    assert_eq!(
        wakes, 0,
        "{wakes} wakes for {sleeps} sleeps from a reader nobody waits for"
    );
}

/// The control: with every unlock waking (the first version), the same run wakes the
/// writer about once per sleep.
#[cfg(rcuref_mutants)]
#[test]
fn negative_control_every_unlock_wakes() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    rcuref::mutants::select(rcuref::mutants::Mutant::WakeOnEveryUnlock);
    let (wakes, sleeps) = wakes_while_a_new_reader_runs();
    rcuref::mutants::select(rcuref::mutants::Mutant::None);
    assert!(
        sleeps >= 5 && wakes * 2 >= sleeps,
        "{wakes} wakes for {sleeps} sleeps: the control did not wake the writer"
    );
}

// ---- 3b. call_keyed: a stale key in a place being filled by an unrelated call ------

/// Attack: a place keeps the key of the callback it last held after that callback ran;
/// another context's `call` (key 0) that claims the place leaves it FILLING with that
/// stale key until its `key.store`. A `call_keyed` of the recycled key (the object was
/// freed and its address reused: the normal life of a key) meeting that window is
/// refused with Busy and a false QueuedTwice, although no queued callback holds it. The
/// docs admit only the opposite error (two same-key calls at once both getting through).
#[cfg(feature = "debug-callbacks")]
#[test]
fn a_freed_key_is_never_seen_queued() {
    use rcuref::rcu::CallQueue;
    use rcuref::Error;
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const K: usize = 0x4000;
    let rcu: &'static Rcu<4> = leak(Rcu::new());
    let q: &'static CallQueue<'static, usize, 2, 4> = leak(CallQueue::new(rcu));
    let stop = leak(AtomicBool::new(false));
    let k_done = leak(AtomicBool::new(true)); // K not queued, its place freed
    let drain = move || {
        let mut saw_k = false;
        q.run(usize::MAX, |v| saw_k |= v == K);
        if saw_k {
            k_done.store(true, SeqCst); // run returned: K's place is FREE again
        }
    };
    let a = std::thread::spawn(move || {
        while !stop.load(SeqCst) {
            let _ = q.call(0xA); // key 0: an unrelated callback
            drain();
        }
    });
    let (mut false_busy, mut queued) = (0u32, 0u32);
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(2) && false_busy == 0 {
        if !k_done.load(SeqCst) {
            drain();
            continue;
        }
        k_done.store(false, SeqCst);
        match q.call_keyed(K, K) {
            Ok(()) => queued += 1,
            Err(r) if r.error == Error::Busy => {
                false_busy += 1; // K was in no queued callback
                k_done.store(true, SeqCst);
            }
            Err(_) => k_done.store(true, SeqCst), // Full: try again
        }
    }
    stop.store(true, SeqCst);
    a.join().unwrap();
    assert_eq!(
        false_busy, 0,
        "call_keyed refused a key no queued callback held ({queued} keyed calls went through first)"
    );
}
