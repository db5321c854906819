//! The shared callback queue (`rcu::CallQueue`): its contract on the host, a threaded
//! torture with a reader that checks what callbacks free, and (in `--cfg rcuref_mutants`
//! builds) the counter-lap barrier and the broken variants the torture must catch.
//! The loom models are `tests/loom_call.rs`.

#[allow(dead_code)]
mod common {
    pub mod exclusive;
}
use common::exclusive::{exclusive, Exclusive};
use rcuref::rcu::{forever, spin, CallQueue, Ran, Rcu};
use rcuref::Error;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::*};

fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

#[test]
fn a_callback_runs_once_after_its_grace_period() {
    let _x = exclusive();
    let rcu: &Rcu<4> = leak(Rcu::new());
    let q: &CallQueue<u32, 4, 4> = leak(CallQueue::new(rcu));
    let r = rcu.reader().unwrap();
    let g = r.lock();
    q.call(5).unwrap();
    assert_eq!(q.pending(), 1);
    let mut got = vec![];
    // The reader's section began before the call: not due.
    assert_eq!(q.run(usize::MAX, |v| got.push(v)), Ran { ran: 0, left: 1 });
    drop(g);
    assert_eq!(q.run(usize::MAX, |v| got.push(v)), Ran { ran: 1, left: 0 });
    assert_eq!(q.run(usize::MAX, |v| got.push(v)), Ran { ran: 0, left: 0 });
    assert_eq!(got, [5]);
    assert_eq!(q.pending(), 0);
}

#[test]
fn a_budget_bounds_the_work_of_one_run() {
    let _x = exclusive();
    let rcu: &Rcu<2> = leak(Rcu::new());
    let q: &CallQueue<u32, 8, 2> = leak(CallQueue::new(rcu));
    for i in 0..5 {
        q.call(i).unwrap();
    }
    let mut got = vec![];
    assert_eq!(q.run(2, |v| got.push(v)), Ran { ran: 2, left: 3 });
    assert_eq!(q.run(0, |v| got.push(v)), Ran { ran: 0, left: 3 });
    assert_eq!(q.run(2, |v| got.push(v)), Ran { ran: 2, left: 1 });
    assert_eq!(q.run(2, |v| got.push(v)), Ran { ran: 1, left: 0 });
    got.sort();
    assert_eq!(got, [0, 1, 2, 3, 4]);
}

/// Budgeted runs must not starve a place: runs with a budget of one always began at place
/// 0, so a stream of callbacks through it starved a due callback in place 1 (for 2^31
/// calls, until a barrier's sign test took it for new). Runs now go round the places.
#[test]
fn a_budgeted_run_does_not_starve_a_place() {
    let _x = exclusive();
    let rcu: &Rcu<2> = leak(Rcu::new());
    let q: &CallQueue<u32, 2, 2> = leak(CallQueue::new(rcu));
    q.call(0).unwrap(); // place 0
    q.call(1).unwrap(); // place 1: the one that starved
    let mut ran_one = false;
    for round in 0..4 {
        q.run(1, |v| ran_one |= v == 1);
        q.call(10 + round).unwrap(); // the stream, into whichever place is free
        if ran_one {
            break;
        }
    }
    assert!(ran_one, "a due callback waited behind a stream of others");
}

#[test]
fn a_full_queue_gives_the_callback_back() {
    let _x = exclusive();
    let rcu: &Rcu<2> = leak(Rcu::new());
    let q: &CallQueue<u32, 2, 2> = leak(CallQueue::new(rcu));
    q.call(1).unwrap();
    q.call(2).unwrap();
    let e = q.call(3).unwrap_err();
    assert_eq!((e.error, e.value), (Error::Full, 3));
    let none: &CallQueue<u32, 0, 2> = leak(CallQueue::new(rcu));
    assert_eq!(none.call(4).unwrap_err().error, Error::Full);
    assert_eq!(none.run(usize::MAX, |_| unreachable!()), Ran::default());
    assert_eq!(q.capacity(), 2);
}

#[test]
fn a_panicking_callback_frees_its_place_and_leaves_the_rest_queued() {
    let _x = exclusive();
    let rcu: &Rcu<2> = leak(Rcu::new());
    let q: &CallQueue<u32, 4, 2> = leak(CallQueue::new(rcu));
    q.call(1).unwrap();
    q.call(2).unwrap();
    let seen = AtomicUsize::new(0);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        q.run(usize::MAX, |v| {
            seen.fetch_add(1, Relaxed);
            if v == 1 {
                panic!("callback 1 fails");
            }
        })
    }));
    assert!(r.is_err());
    assert_eq!(seen.load(Relaxed), 1, "the panic ended the run");
    assert_eq!(
        q.pending(),
        1,
        "the panicked callback's place was not freed"
    );
    assert_eq!(q.run(usize::MAX, |v| assert_eq!(v, 2)).ran, 1);
}

#[test]
fn a_barrier_runs_everything_queued_before_it() {
    let _x = exclusive();
    let rcu: &Rcu<4> = leak(Rcu::with_dedicated(1));
    let q: &CallQueue<u32, 8, 4> = leak(CallQueue::new(rcu));
    let mut w = rcu.reader().unwrap();
    // Nothing queued: at once, even from inside a section (a leaked guard).
    let g = w.lock();
    let none = q.barrier(unsafe_context(rcu), spin, |_| unreachable!());
    assert_eq!(none, Ok(0));
    drop(g);
    for i in 0..6 {
        q.call(i).unwrap();
    }
    let mut got = vec![];
    assert_eq!(q.barrier(&mut w, spin, |v| got.push(v)), Ok(6));
    got.sort();
    assert_eq!(got, [0, 1, 2, 3, 4, 5]);
    assert_eq!(q.pending(), 0);
}

/// The context reader of `rcu`'s dedicated slot 0 (`Rcu::with_dedicated(1)`).
fn unsafe_context<const N: usize>(rcu: &Rcu<N>) -> rcuref::rcu::ContextReader<'_, N> {
    // SAFETY: (test) each test uses the slot from its own thread only.
    unsafe { rcu.context_reader(0) }
}

#[test]
fn a_barrier_refuses_what_would_wait_for_itself() {
    let _x = exclusive();
    let rcu: &Rcu<4> = leak(Rcu::with_dedicated(1));
    let other: &Rcu<4> = leak(Rcu::new());
    let q: &CallQueue<u32, 4, 4> = leak(CallQueue::new(rcu));
    q.call(1).unwrap();
    let mut w = rcu.reader().unwrap();
    let mut o = other.reader().unwrap();
    assert_eq!(q.barrier(&mut o, spin, |_| {}), Err(Error::OtherDomain));
    let c = unsafe_context(rcu);
    c.raw_lock().unwrap();
    assert_eq!(q.barrier(c, spin, |_| {}), Err(Error::InReadSection));
    assert_eq!(q.pending(), 1, "a refused barrier ran something");
    // SAFETY: (test) nothing was read in the section.
    unsafe { c.raw_unlock().unwrap() };
    // A reader of the domain in a section on another thread: the hook gives up.
    let (inside, leave) = (leak(AtomicBool::new(false)), leak(AtomicBool::new(false)));
    let t = std::thread::spawn(move || {
        let r = rcu.reader().unwrap();
        let _g = r.lock();
        inside.store(true, SeqCst);
        while !leave.load(SeqCst) {
            std::thread::yield_now();
        }
    });
    while !inside.load(SeqCst) {
        std::thread::yield_now();
    }
    let mut calls = 0;
    let r = q.barrier(
        &mut w,
        |_| {
            calls += 1;
            if calls > 10 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        },
        |_| {},
    );
    assert_eq!(r, Err(Error::GaveUp));
    assert_eq!(
        q.pending(),
        1,
        "a barrier that gave up during its grace period ran it"
    );
    leave.store(true, SeqCst);
    t.join().unwrap();
    assert_eq!(q.barrier(&mut w, spin, |_| {}), Ok(1));
}

#[test]
fn dropping_the_queue_drops_only_what_is_due() {
    let _x = exclusive();
    struct Counted(&'static AtomicUsize);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Relaxed);
        }
    }
    let dropped: &AtomicUsize = leak(AtomicUsize::new(0));
    let rcu: &Rcu<2> = leak(Rcu::new());
    let r = rcu.reader().unwrap();
    {
        let q: CallQueue<Counted, 4, 2> = CallQueue::new(rcu);
        q.call(Counted(dropped)).ok().unwrap();
        let c = rcu.start_poll();
        while !c.poll() {}
        let g = r.lock();
        q.call(Counted(dropped)).ok().unwrap(); // not due while `g` lives
        drop(q);
        drop(g);
    }
    assert_eq!(
        dropped.load(Relaxed),
        1,
        "dropped a callback before its grace period"
    );
}

/// Threads queue, run and barrier at once while a reader checks every buffer it reads
/// inside its sections: a callback frees (poisons) the buffer it is handed. Returns
/// how many reads of freed buffers the reader saw.
fn torture(_x: &Exclusive, rounds: u32) -> u32 {
    const BUFS: usize = 64;
    struct World {
        rcu: Rcu<8>,
        current: AtomicUsize,
        bufs: [AtomicU32; BUFS],
        stop: AtomicBool,
        bad: AtomicU32,
        /// Readers that have begun their loop: the writer starts after both, so that
        /// the rounds overlap their sections even on a loaded machine (a control that
        /// ran its 5,000 rounds before the readers were scheduled caught nothing).
        started: AtomicU32,
    }
    let w: &'static World = leak(World {
        rcu: Rcu::new(),
        current: AtomicUsize::new(0),
        // 1: live (current, or waiting for its callback); 0: freed.
        bufs: [const { AtomicU32::new(0) }; BUFS],
        stop: AtomicBool::new(false),
        bad: AtomicU32::new(0),
        started: AtomicU32::new(0),
    });
    let q: &'static CallQueue<usize, 16, 8> = leak(CallQueue::new(&w.rcu));
    w.bufs[0].store(1, Relaxed);
    let free = |i: usize| w.bufs[i].store(0, Relaxed);
    let readers: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(move || {
                let r = w.rcu.reader().unwrap();
                w.started.fetch_add(1, Relaxed);
                while !w.stop.load(Relaxed) {
                    r.section(|_| {
                        let i = w.current.load(Acquire);
                        for _ in 0..50 {
                            if w.bufs[i].load(Relaxed) == 0 {
                                w.bad.fetch_add(1, Relaxed);
                            }
                            std::hint::spin_loop();
                        }
                    });
                }
            })
        })
        .collect();
    let runner = std::thread::spawn(move || {
        while !w.stop.load(Relaxed) {
            q.run(4, free);
        }
    });
    // The writer: a free buffer (its last callback has run) becomes current; the old
    // one is handed to a callback.
    let mut me = w.rcu.reader().unwrap();
    while w.started.load(Relaxed) < 2 {
        // (A reader that died before it began would leave this waiting for ever.)
        assert!(
            !readers.iter().any(|r| r.is_finished()),
            "a reader thread ended before its first section"
        );
        std::thread::yield_now();
    }
    for round in 0..rounds {
        let next = (round as usize + 1) % BUFS;
        if w.bufs[next].load(Relaxed) == 1 && w.current.load(Relaxed) != next {
            // Still waiting for its callback: wait for everything.
            q.barrier(&mut me, forever(std::thread::yield_now), free)
                .unwrap();
        }
        w.bufs[next].store(1, Relaxed);
        let old = w.current.swap(next, AcqRel);
        let mut cb = old;
        loop {
            match q.call(cb) {
                Ok(()) => break,
                Err(r) => {
                    cb = r.value;
                    q.run(usize::MAX, free);
                }
            }
        }
        if round % 97 == 0 {
            q.barrier(&mut me, forever(std::thread::yield_now), free)
                .unwrap();
        }
    }
    q.barrier(&mut me, forever(std::thread::yield_now), free)
        .unwrap();
    w.stop.store(true, Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    runner.join().unwrap();
    assert_eq!(q.pending(), 0, "the final barrier left callbacks queued");
    w.bad.load(Relaxed)
}

#[test]
fn torture_no_callback_frees_under_a_reader() {
    let x = exclusive();
    assert_eq!(torture(&x, 5_000), 0, "a reader saw a freed buffer");
}

#[cfg(rcuref_mutants)]
mod controls {
    use super::*;
    use rcuref::mutants::{set_gp_bits, Mutant};

    /// Busted grace periods: the torture must see readers of freed buffers (in one of
    /// five runs).
    #[test]
    fn negative_control_busted_grace_periods_are_caught() {
        let x = exclusive();
        x.select(Mutant::BustedGracePeriod);
        let caught = (0..5).any(|_| torture(&x, 5_000) > 0);
        assert!(caught, "the torture did not catch busted grace periods");
    }

    /// A barrier must not trust cookies (`Mutant::CallBarrierTrustsCookies`): a callback
    /// whose cookie aged a whole lap of a 4-bit counter reads "not done" again. With a
    /// reader that enters its section after the barrier's grace period (from the callback
    /// run before it), a barrier that asks cookies waits for it for ever; ours numbers its
    /// callbacks.
    fn aged_cookie(x: &Exclusive) -> Result<usize, Error> {
        let _ = x;
        set_gp_bits(4);
        let rcu: &'static Rcu<4> = leak(Rcu::with_dedicated(1));
        let q: &'static CallQueue<u32, 2, 4> = leak(CallQueue::new(rcu));
        let late = unsafe_context(rcu);
        q.call(0).unwrap(); // place 0
        let c = rcu.start_poll();
        while !c.poll() {}
        late.raw_lock().unwrap(); // keeps the next callback from being due
        let aged = rcu.start_poll().into_raw();
        q.call(1).unwrap(); // place 1: the one that ages
                            // Place 0 free again, and runs keep starting at place 0 (no budget hit).
        assert_eq!(
            q.run(usize::MAX, |v| assert_eq!(v, 0)),
            Ran { ran: 1, left: 1 }
        );
        // SAFETY: (test) nothing was read in the section.
        unsafe { late.raw_unlock().unwrap() };
        // Whole grace periods (from an even counter, 4 steps each: that run's poll of
        // the callback's cookie left a wait in progress, and the first one ends it)
        // until the barrier's own grace period will leave the counter one to five steps
        // behind the cookie's target on its next lap: the cookie then reads "not done".
        let mut steps = 0;
        loop {
            let c = rcu.start_poll();
            while !c.poll() {}
            let after_barrier = rcu.gp_counter().wrapping_add(4);
            if (1..=5).contains(&(aged.wrapping_sub(after_barrier) & 15)) {
                break;
            }
            steps += 1;
            assert!(steps < 64, "the cookie never aged");
        }
        q.call(2).unwrap(); // place 0, before the aged one in a pass
        let mut w = rcu.reader().unwrap();
        let mut attempts = 0;
        let r = q.barrier(
            &mut w,
            |_| {
                attempts += 1;
                if attempts > 1000 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
            |v| {
                if v == 2 {
                    late.raw_lock().unwrap(); // a section after the barrier's grace period
                }
            },
        );
        // SAFETY: (test) nothing was read in the section.
        unsafe { late.raw_unlock().unwrap() };
        set_gp_bits(32);
        r
    }

    #[test]
    fn a_barrier_runs_a_callback_whose_cookie_aged_a_whole_lap() {
        let x = exclusive();
        assert_eq!(aged_cookie(&x), Ok(2));
    }

    #[test]
    fn negative_control_barrier_that_trusts_cookies_is_caught() {
        let x = exclusive();
        x.select(Mutant::CallBarrierTrustsCookies);
        assert_eq!(aged_cookie(&x), Err(Error::GaveUp));
    }

    #[test]
    fn negative_control_place_freed_before_its_callback_is_caught() {
        // A barrier must return only after the callbacks queued before it have run:
        // one thread runs a callback that takes its time, the other barriers.
        let x = exclusive();
        let check = || {
            let rcu: &'static Rcu<4> = leak(Rcu::new());
            let q: &'static CallQueue<u32, 2, 4> = leak(CallQueue::new(rcu));
            let done: &'static AtomicBool = leak(AtomicBool::new(false));
            q.call(1).unwrap();
            let started: &'static AtomicBool = leak(AtomicBool::new(false));
            let t = std::thread::spawn(move || {
                q.run(usize::MAX, |_| {
                    started.store(true, SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    done.store(true, SeqCst);
                });
            });
            while !started.load(SeqCst) {
                std::hint::spin_loop();
            }
            let mut w = rcu.reader().unwrap();
            q.barrier(&mut w, spin, |_| done.store(true, SeqCst))
                .unwrap();
            let ok = done.load(SeqCst);
            t.join().unwrap();
            ok
        };
        assert!(check(), "the real barrier returned early");
        x.select(Mutant::CallFreeBeforeRun);
        assert!(!check(), "the control did not return early");
    }
}
