//! loom models of the shared callback queue (`rcu::CallQueue`, the protocol behind the
//! C API's `call_rcu`): a callback queued on one thread and run on another (the value's
//! publication), a barrier racing a runner that holds a place, and a reader against a
//! callback that frees what it read; each with the broken variant it must catch. Run
//! with `RUSTFLAGS="--cfg loom" cargo test --release --test loom_call -- --test-threads=1`.
#![cfg(loom)]

#[path = "common/loom.rs"]
mod common;
use common::{model, must_catch};

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use rcuref::mutants::Mutant;
use rcuref::rcu::{forever, CallQueue, Rcu};

type Queue = CallQueue<'static, u32, 2, 2>;

/// A domain and a queue of it that live for the model's run (leaked: loom's atomics
/// cannot be `static`).
fn world() -> (&'static Rcu<2>, &'static Queue) {
    let rcu: &'static Rcu<2> = Box::leak(Box::new(Rcu::new()));
    (rcu, Box::leak(Box::new(CallQueue::new(rcu))))
}

/// A callback queued on one thread while another runs the queue: a runner that takes
/// it reads the value the caller wrote (loom checks the place's cell against the
/// caller's write), and it runs exactly once, with that value.
fn queued_here_run_there() {
    model(3, || {
        let (_, q) = world();
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let runner = thread::spawn(move || {
            q.run(usize::MAX, |v| {
                assert_eq!(v, 7, "a runner read a callback before it was written");
                r.fetch_add(1, Ordering::Relaxed);
            });
        });
        q.call(7).unwrap();
        runner.join().unwrap();
        // No reader: the rest is due at once.
        q.run(usize::MAX, |v| {
            assert_eq!(v, 7);
            ran.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(
            ran.load(Ordering::Relaxed),
            1,
            "a callback ran twice, or never"
        );
        assert_eq!(q.pending(), 0);
    });
}

/// A barrier while another context is running a callback queued before it: the barrier
/// returns only once that callback has returned.
fn barrier_waits_for_a_callback_running_elsewhere() {
    model(2, || {
        let (rcu, q) = world();
        q.call(1).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let runner = thread::spawn(move || {
            q.run(usize::MAX, |_| d.store(true, Ordering::SeqCst));
        });
        let mut me = rcu.reader().unwrap();
        let n = q
            .barrier(&mut me, forever(thread::yield_now), |_| {
                done.store(true, Ordering::SeqCst)
            })
            .unwrap();
        assert!(
            done.load(Ordering::SeqCst),
            "the barrier returned before a callback queued before it had run ({n} run, {} pending)",
            q.pending()
        );
        runner.join().unwrap();
    });
}

/// A reader inside its section reads a buffer that a writer unpublishes and hands to a
/// callback that frees it; another context runs the queue. The free must never meet
/// the read (loom checks the buffer's cell).
fn callback_after_the_readers() {
    model(2, || {
        let (rcu, q) = world();
        struct Shared {
            current: AtomicUsize,
            bufs: [UnsafeCell<u32>; 2],
        }
        let s: &'static Shared = Box::leak(Box::new(Shared {
            current: AtomicUsize::new(0),
            bufs: [UnsafeCell::new(1), UnsafeCell::new(1)],
        }));
        let reader = thread::spawn(move || {
            let r = rcu.reader().unwrap();
            r.section(|_| {
                let i = s.current.load(Ordering::Acquire);
                // SAFETY: (test) loom checks this read against the callback's write.
                let v = s.bufs[i].with(|p| unsafe { *p });
                assert_eq!(v, 1, "read a freed buffer");
            });
        });
        let free = |i: u32| {
            // SAFETY: (test) loom checks this write against the reader's read.
            s.bufs[i as usize].with_mut(|p| unsafe { *p = 0 });
        };
        let old = s.current.swap(1, Ordering::AcqRel);
        q.call(old as u32).unwrap();
        let runner = thread::spawn(move || {
            q.run(usize::MAX, free);
        });
        q.run(usize::MAX, free);
        runner.join().unwrap();
        reader.join().unwrap();
    });
}

/// A barrier that meets a later callback's number: callback X (number 0) is queued before a
/// barrier; another context runs X (which writes `effect`), frees its place and queues Y,
/// which takes the same place and number 1. A barrier that reads Y's number in X's place
/// ("not one of mine") returns: it must still see X's write (the number is stored with
/// Release and read with Acquire; relaxed, reading `effect` after the barrier races with
/// X's write).
fn barrier_meets_the_next_callbacks_number() {
    model(3, || {
        let rcu: &'static Rcu<2> = Box::leak(Box::new(Rcu::new()));
        let q: &'static CallQueue<'static, u32, 1, 2> = Box::leak(Box::new(CallQueue::new(rcu)));
        let effect: &'static UnsafeCell<u32> = Box::leak(Box::new(UnsafeCell::new(0)));
        let write = move |v: u32| {
            if v == 1 {
                // SAFETY: (test) loom checks this write against the read below.
                effect.with_mut(|p| unsafe { *p = 1 });
            }
        };
        q.call(1).unwrap(); // X: place 0, number 0
        let other = thread::spawn(move || {
            q.run(usize::MAX, write);
            let _ = q.call(2); // Y: place 0 again (M = 1), number 1
        });
        let mut me = rcu.reader().unwrap();
        q.barrier(&mut me, forever(thread::yield_now), write)
            .unwrap();
        // SAFETY: (test) loom checks this read against X's write.
        let seen = effect.with(|p| unsafe { *p });
        assert_eq!(seen, 1, "the barrier returned before X ran");
        other.join().unwrap();
    });
}

#[test]
fn a_barrier_that_meets_a_later_number_sees_the_earlier_callback() {
    barrier_meets_the_next_callbacks_number();
}

#[test]
fn catches_relaxed_numbers() {
    must_catch(
        Mutant::CallRelaxedNumber,
        barrier_meets_the_next_callbacks_number,
    );
}

#[test]
fn a_callback_is_published_to_its_runner_and_runs_once() {
    queued_here_run_there();
}

#[test]
fn a_barrier_waits_for_callbacks_running_elsewhere() {
    barrier_waits_for_a_callback_running_elsewhere();
}

#[test]
fn a_callback_runs_after_every_reader_that_could_see_it() {
    callback_after_the_readers();
}

#[test]
fn catches_a_place_made_ready_before_it_is_filled() {
    must_catch(Mutant::CallReadyBeforeFilled, queued_here_run_there);
}

#[test]
fn catches_a_barrier_that_reads_the_places_relaxed() {
    must_catch(
        Mutant::CallRelaxedScan,
        barrier_waits_for_a_callback_running_elsewhere,
    );
}

#[test]
fn catches_a_place_freed_before_its_callback_ran() {
    must_catch(
        Mutant::CallFreeBeforeRun,
        barrier_waits_for_a_callback_running_elsewhere,
    );
}

#[test]
fn catches_busted_grace_periods() {
    must_catch(Mutant::BustedGracePeriod, callback_after_the_readers);
}
