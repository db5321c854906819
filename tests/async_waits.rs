//! Async grace periods on a minimal executor of our own: futures that
//! need no executor features, a guard held across an `.await`, and async reclamation.

use rcuref::rcu::{DeferQueue, Rcu, RcuCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// Counts wake-ups.
struct Counter(AtomicUsize);
impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

type Task<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// Polls every task in turn until all are done (a single-threaded executor, like
/// Embassy's thread executor); returns how many rounds it took. Panics after `limit`.
fn run_all(mut tasks: Vec<Task<'_>>, limit: usize) -> usize {
    let wakes = Arc::new(Counter(AtomicUsize::new(0)));
    let waker = Waker::from(wakes.clone());
    let mut cx = Context::from_waker(&waker);
    for round in 1..=limit {
        tasks.retain_mut(|t| t.as_mut().poll(&mut cx).is_pending());
        if tasks.is_empty() {
            return round;
        }
    }
    panic!("tasks still pending after {limit} rounds");
}

/// Yields once to the executor.
struct YieldNow(bool);
impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// A guard held across `.await` compiles (a single-threaded executor does not need
/// `Send` futures) and keeps its section open while the task sleeps: a task awaiting a
/// grace period stays pending meanwhile, the holdouts name the sleeping task's slot,
/// and the wait completes once that task drops the guard.
#[test]
fn a_guard_across_await_holds_the_grace_period_and_is_named() {
    static RCU: Rcu<3> = Rcu::new();
    let reader = RCU.reader().unwrap();
    let slot = reader.slot();
    let guard = reader.lock();
    let cookie = RCU.start_poll();
    let observed = std::cell::RefCell::new(Vec::new());
    let sleeper = async {
        let g = guard; // held across the awaits below
        for _ in 0..5 {
            YieldNow(false).await;
        }
        drop(g);
    };
    let waiter = async {
        assert!(!cookie.is_done());
        observed
            .borrow_mut()
            .extend(cookie.holdouts().map(|h| h.slot));
        cookie.wait().await;
        assert!(cookie.is_done());
    };
    let rounds = run_all(vec![Box::pin(sleeper), Box::pin(waiter)], 1000);
    assert!(
        rounds >= 5,
        "the wait ended while the sleeping task held its guard"
    );
    assert_eq!(
        *observed.borrow(),
        [slot],
        "the holdout was not the sleeping task"
    );
}

/// `Retired::reclaim_async` and `DeferQueue::defer_async` complete once their grace
/// periods have ended, driven by nothing but their own polls.
#[test]
fn async_reclamation() {
    static RCU: Rcu<2> = Rcu::new();
    let (mut a, mut b) = (1u32, 2u32);
    let cell = RcuCell::new(&RCU, &mut a);
    let reader = RCU.reader().unwrap();
    let guard = reader.lock();
    let retired = cell.replace(&mut b);
    let mut q: DeferQueue<u32, 1, 2> = DeferQueue::new(&RCU);
    q.defer(10).unwrap();
    let released = std::cell::RefCell::new(Vec::new());
    let reclaimer = async {
        let old = retired.reclaim_async().await;
        *old += 100;
        assert_eq!(*old, 101);
    };
    let deferrer = async {
        q.defer_async(11, |v| released.borrow_mut().push(v)).await; // full: waits for 10
    };
    let reader_task = async {
        for _ in 0..3 {
            YieldNow(false).await;
        }
        drop(guard);
    };
    run_all(
        vec![
            Box::pin(reclaimer),
            Box::pin(deferrer),
            Box::pin(reader_task),
        ],
        1000,
    );
    assert_eq!(*released.borrow(), [10]);
    assert_eq!(q.len(), 1);
}

/// `defer_async` on a queue with room completes at once, whatever readers are doing: it
/// waits only when the queue is full and nothing in it can be released.
#[test]
fn defer_async_with_room_does_not_wait() {
    static RCU: Rcu<2> = Rcu::new();
    let reader = RCU.reader().unwrap();
    let _guard = reader.lock(); // no grace period can end while this lives
    let mut q: DeferQueue<u32, 2, 2> = DeferQueue::new(&RCU);
    let released = std::cell::RefCell::new(Vec::new());
    let deferrer = async {
        q.defer_async(1, |v| released.borrow_mut().push(v)).await;
    };
    assert_eq!(
        run_all(vec![Box::pin(deferrer)], 1),
        1,
        "ready on its first poll"
    );
    assert!(
        released.borrow().is_empty(),
        "released before its grace period"
    );
    assert_eq!(q.len(), 1);
}
