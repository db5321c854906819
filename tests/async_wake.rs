//! Async grace periods woken by the reader's unlock (`Wakers`, `GpCookie::wait_woken`,
//! `DeferQueue::defer_async_woken`): a pending future is not polled again until the
//! unlock wakes it, a full waker set falls back to re-polling, a dropped future leaves
//! no waker behind, and two threads' futures are woken while a third thread's reader
//! comes and goes.
//!
//! Where wakes are reliable (the asymmetric mode; one core) the futures sleep, and the
//! tests check that nothing but the unlock wakes them; in the default mode on more
//! than one core they re-poll, and the tests check that instead (and that they never
//! hang). Each body returns what it found, so the controls can show it fails on a
//! broken variant (asymmetric mode with `--cfg rcuref_mutants`).
//!
//! Commands:
//! * `cargo test --features std --test async_wake` (the default mode: re-polling)
//! * `RUSTFLAGS="--cfg rcuref_asymmetric_fence --cfg rcuref_mutants" cargo test
//!   --release --features std,membarrier --test async_wake` (woken by unlocks, and the
//!   controls `WakersNeverWake`, `WakersFullSetSleeps`, `WakersKeptOnRelease`)
//! * `RUSTFLAGS="--cfg rcuref_mutants" cargo test --release --features membarrier
//!   --test async_wake` (the mode chosen at run time: heavy, so woken by unlocks too)

#[cfg(rcuref_asymmetric_fence)]
rcuref::set_heavy_fence!(rcuref::rcu::heavy::Membarrier);

use rcuref::rcu::{DeferQueue, Rcu, Wakers};
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// Whether this build's futures sleep on their waker set (the library's
/// `heavy::wakes_are_reliable` for the builds this file runs in).
/// With feature `membarrier` and no cfg the mode is chosen at run time (`auto-fence`)
/// and comes out heavy here (membarrier is there: `tests/auto_fence.rs` checks).
const SLEEPS: bool = cfg!(any(rcuref_asymmetric_fence, rcuref_membarrier));

/// The tests select process-wide variants.
static SERIAL: Mutex<()> = Mutex::new(());

/// Counts wake-ups.
struct Counter(AtomicUsize);
impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

fn counting() -> (Waker, Arc<Counter>) {
    let c = Arc::new(Counter(AtomicUsize::new(0)));
    (Waker::from(c.clone()), c)
}

fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(waker))
}

type Found = Result<(), String>;

fn check(ok: bool, what: impl FnOnce() -> String) -> Found {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

// ---- 1. polled again only after the unlock --------------------------------------------

static D1: Rcu<2> = Rcu::new();
static W1: Wakers<2> = Wakers::new();
fn wake1() {
    W1.wake()
}

/// A wait on a grace period a reader holds: pending, and (where it sleeps) not woken by
/// anything for a while; the reader's unlock wakes it exactly once; then it is ready.
fn woken_by_the_unlock() -> Found {
    D1.set_wake_hook(Some(wake1));
    let reader = D1.reader().unwrap();
    let guard = reader.lock();
    let mut f = pin!(D1.start_poll().wait_woken(&W1));
    let (waker, count) = counting();
    check(poll_once(f.as_mut(), &waker).is_pending(), || {
        "ready while a reader held it".into()
    })?;
    if SLEEPS {
        std::thread::sleep(Duration::from_millis(20));
        let n = count.0.load(SeqCst);
        check(n == 0, || format!("woken {n} times before the unlock"))?;
        check(W1.in_use() == 1, || "no cell taken".into())?;
    } else {
        check(count.0.load(SeqCst) >= 1, || {
            "did not ask to be polled again".into()
        })?;
    }
    let before = count.0.load(SeqCst);
    drop(guard);
    let after = count.0.load(SeqCst);
    if SLEEPS {
        check(after == before + 1, || {
            format!("the unlock woke it {} times", after - before)
        })?;
    }
    check(poll_once(f.as_mut(), &waker).is_ready(), || {
        "not ready after the unlock".into()
    })?;
    check(W1.in_use() == 0, || {
        "its cell kept after it completed".into()
    })
}

#[test]
fn a_pending_wait_is_polled_again_only_after_the_unlock() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    woken_by_the_unlock().unwrap();
}

#[cfg(all(rcuref_mutants, any(rcuref_asymmetric_fence, rcuref_membarrier)))]
#[test]
fn negative_control_wakers_never_wake() {
    use rcuref::mutants::{select, Mutant};
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    select(Mutant::WakersNeverWake);
    let found = woken_by_the_unlock();
    select(Mutant::None);
    let e = found.expect_err("a set that never wakes went unnoticed");
    assert!(e.contains("the unlock woke it 0 times"), "{e}");
}

// ---- 2. a full set falls back to re-polling -------------------------------------------

static D2: Rcu<2> = Rcu::new();
static W2: Wakers<1> = Wakers::new();
fn wake2() {
    W2.wake()
}

/// Two waits on a one-cell set: the one that found it full asks to be polled again,
/// and both complete once the reader has left.
fn full_set_falls_back() -> Found {
    D2.set_wake_hook(Some(wake2));
    let reader = D2.reader().unwrap();
    let guard = reader.lock();
    let cookie = D2.start_poll();
    let mut a = pin!(cookie.wait_woken(&W2));
    let mut b = pin!(cookie.wait_woken(&W2));
    let (wa, ca) = counting();
    let (wb, cb) = counting();
    check(poll_once(a.as_mut(), &wa).is_pending(), || {
        "a: ready".into()
    })?;
    check(poll_once(b.as_mut(), &wb).is_pending(), || {
        "b: ready".into()
    })?;
    if SLEEPS {
        check(ca.0.load(SeqCst) == 0, || "a woke itself".into())?;
        check(W2.in_use() == 1, || "the set is not full".into())?;
    }
    check(cb.0.load(SeqCst) >= 1, || {
        "the wait past a full set was left asleep: lost".into()
    })?;
    drop(guard);
    check(ca.0.load(SeqCst) >= 1, || "a was not woken".into())?;
    check(poll_once(a.as_mut(), &wa).is_ready(), || {
        "a: not ready".into()
    })?;
    check(poll_once(b.as_mut(), &wb).is_ready(), || {
        "b: not ready".into()
    })
}

#[test]
fn a_full_set_falls_back_to_re_polling() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    full_set_falls_back().unwrap();
}

#[cfg(all(rcuref_mutants, any(rcuref_asymmetric_fence, rcuref_membarrier)))]
#[test]
fn negative_control_full_set_sleeps() {
    use rcuref::mutants::{select, Mutant};
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    select(Mutant::WakersFullSetSleeps);
    let found = full_set_falls_back();
    select(Mutant::None);
    let e = found.expect_err("a waiter lost to a full set went unnoticed");
    assert!(e.contains("lost"), "{e}");
}

// ---- 3. a dropped future leaves no waker behind ---------------------------------------

static D3: Rcu<2> = Rcu::new();
static W3: Wakers<2> = Wakers::new();
fn wake3() {
    W3.wake()
}

/// A wait dropped while pending gives its cell up, and the unlock that follows wakes
/// nothing for it.
fn dropped_leaves_nothing() -> Found {
    D3.set_wake_hook(Some(wake3));
    let reader = D3.reader().unwrap();
    let guard = reader.lock();
    let (waker, count) = counting();
    {
        let mut f = pin!(D3.start_poll().wait_woken(&W3));
        check(poll_once(f.as_mut(), &waker).is_pending(), || {
            "ready".into()
        })?;
    }
    check(W3.in_use() == 0, || "the dropped wait kept its cell".into())?;
    let before = count.0.load(SeqCst);
    drop(guard);
    W3.wake(); // and any other wake of the set
    let after = count.0.load(SeqCst);
    check(after == before, || {
        format!("a dropped wait's task was woken {} times", after - before)
    })
}

#[test]
fn a_dropped_wait_leaves_no_waker_behind() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    dropped_leaves_nothing().unwrap();
}

#[cfg(all(rcuref_mutants, any(rcuref_asymmetric_fence, rcuref_membarrier)))]
#[test]
fn negative_control_waker_kept_on_release() {
    use rcuref::mutants::{select, Mutant};
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    select(Mutant::WakersKeptOnRelease);
    let found = dropped_leaves_nothing();
    select(Mutant::None);
    let e = found.expect_err("a stale waker went unnoticed");
    assert!(e.contains("dropped wait's task was woken"), "{e}");
}

// ---- 4. two drivers at once, woken from another thread --------------------------------

static D4: Rcu<4> = Rcu::new();
static W4: Wakers<4> = Wakers::new();
fn wake4() {
    W4.wake()
}

/// Wakes a thread parked in `block_on`.
struct Unpark {
    thread: std::thread::Thread,
    woken: AtomicBool,
}
impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.woken.store(true, SeqCst);
        self.thread.unpark();
    }
}

/// How many times `block_on` found its task pending and not woken yet (it slept).
static SLEPT: AtomicUsize = AtomicUsize::new(0);

/// Polls `f` to completion, polling again only when woken; `Err` if nothing woke it
/// for two seconds (a hang).
fn block_on<F: Future>(f: F) -> Result<F::Output, String> {
    let mut f = pin!(f);
    let unpark = Arc::new(Unpark {
        thread: std::thread::current(),
        woken: AtomicBool::new(false),
    });
    let waker = Waker::from(unpark.clone());
    loop {
        unpark.woken.store(false, SeqCst);
        if let Poll::Ready(v) = poll_once(f.as_mut(), &waker) {
            return Ok(v);
        }
        let since = Instant::now();
        if !unpark.woken.load(SeqCst) {
            SLEPT.fetch_add(1, SeqCst);
        }
        while !unpark.woken.load(SeqCst) {
            if since.elapsed() > Duration::from_secs(2) {
                return Err("a wait was never woken".into());
            }
            std::thread::park_timeout(Duration::from_millis(100));
        }
    }
}

/// Two threads await grace periods back to back (plain waits and deferred frees on a
/// full queue) while a third thread's reader enters and leaves sections: every wait
/// completes, woken from the reader's thread while the other driver polls.
fn two_drivers() -> Found {
    D4.set_wake_hook(Some(wake4));
    SLEPT.store(0, SeqCst);
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, started) = (stop.clone(), started.clone());
        std::thread::spawn(move || {
            let r = D4.reader().unwrap();
            started.store(true, SeqCst);
            let mut sections = 0u64;
            while !stop.load(SeqCst) {
                let g = r.lock();
                // Long enough that a driver's poll often finds it inside, and sleeps.
                std::thread::sleep(Duration::from_micros(50));
                drop(g);
                sections += 1;
            }
            sections
        })
    };
    let driver = |deferring: bool| {
        std::thread::spawn(move || -> Found {
            let mut q: DeferQueue<u32, 1, 4> = DeferQueue::new(&D4);
            let released = AtomicUsize::new(0);
            for i in 0..300u32 {
                if deferring {
                    block_on(q.defer_async_woken(i, &W4, |_| {
                        released.fetch_add(1, SeqCst);
                    }))?;
                } else {
                    let c = D4.start_poll();
                    block_on(c.wait_woken(&W4))?;
                    check(c.is_done(), || "ready before its grace period".into())?;
                }
            }
            if deferring {
                let n = released.load(SeqCst);
                check(n == 299, || format!("{n} released of 299"))?;
            }
            Ok(())
        })
    };
    while !started.load(SeqCst) {
        std::thread::yield_now();
    }
    let a = driver(false);
    let b = driver(true);
    let found = a.join().unwrap().and(b.join().unwrap());
    stop.store(true, SeqCst);
    let sections = reader.join().unwrap();
    check(sections > 0, || "the reader never ran".into())?;
    found?;
    let slept = SLEPT.load(SeqCst);
    println!("{sections} sections; the drivers' tasks slept {slept} times");
    check(!SLEEPS || slept > 0, || {
        "no wait ever slept: inconclusive".into()
    })
}

#[test]
fn two_drivers_at_once_are_woken_from_the_readers_thread() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    two_drivers().unwrap();
}

#[cfg(all(rcuref_mutants, any(rcuref_asymmetric_fence, rcuref_membarrier)))]
#[test]
fn negative_control_two_drivers_never_woken() {
    use rcuref::mutants::{select, Mutant};
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    select(Mutant::WakersNeverWake);
    let found = two_drivers();
    select(Mutant::None);
    let e = found.expect_err("waits never woken went unnoticed");
    assert!(e.contains("never woken"), "{e}");
}

// ---- 5. the defer queue's future ------------------------------------------------------

static D5: Rcu<2> = Rcu::new();
static W5: Wakers<1> = Wakers::new();
fn wake5() {
    W5.wake()
}

/// `defer_async_woken` on a full queue whose value a reader still holds: pending
/// without waking itself (where it sleeps), woken by the unlock, then it releases the
/// old value and queues the new one.
#[test]
fn defer_async_woken_is_woken_by_the_unlock() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    D5.set_wake_hook(Some(wake5));
    let reader = D5.reader().unwrap();
    let guard = reader.lock();
    let mut q: DeferQueue<u32, 1, 2> = DeferQueue::new(&D5);
    q.defer(10).unwrap();
    let released = std::cell::RefCell::new(Vec::new());
    {
        let mut f = pin!(q.defer_async_woken(11, &W5, |v| released.borrow_mut().push(v)));
        let (waker, count) = counting();
        assert!(poll_once(f.as_mut(), &waker).is_pending());
        if SLEEPS {
            assert_eq!(count.0.load(SeqCst), 0, "woke itself");
        }
        let before = count.0.load(SeqCst);
        drop(guard);
        if SLEEPS {
            assert_eq!(
                count.0.load(SeqCst),
                before + 1,
                "the unlock did not wake it"
            );
        }
        assert!(poll_once(f.as_mut(), &waker).is_ready());
    }
    assert_eq!(*released.borrow(), [10]);
    assert_eq!(q.len(), 1);
    assert_eq!(W5.in_use(), 0);
}
