//! Waiting for grace periods without blocking: futures, and hooks that watch a wait.
//!
//! * [`GpCookie::wait`] is a future that completes when the grace period has ended; it
//!   needs no executor features, no allocation, no timer. It re-polls: each poll drives
//!   the grace period as far as the readers allow (a bounded number of steps) and, if it
//!   has not ended, wakes its own task again, yielding to whatever else is ready. Fine
//!   for executors that run other tasks in between (Embassy's, RTIC's); a task waiting
//!   this way keeps its executor busy, so give it a low priority on battery-powered
//!   parts, or sleep between waits yourself (a timer, an event).
//! * [`Retired::reclaim_async`](crate::Retired::reclaim_async) and
//!   [`DeferQueue::defer_async`](crate::DeferQueue::defer_async) build on it.
//! * [`StallDetector`] and [`Deadline`] are wait hooks for
//!   [`Reader::synchronize_with`](crate::Reader::synchronize_with) and friends: a stall
//!   report with a threshold, and a wait that gives up, both on a clock you supply.
//!
//! **Never await a grace period while holding a guard of the same domain**, in the
//! same task or in a task the executor cannot run until this one completes: the wait
//! would wait for itself. A guard held across an `.await` keeps its section open while
//! the task sleeps (legal, and sound); [`GpCookie::holdouts`] names its slot, so a stall
//! report points at it.

use super::domain::{GpCookie, Waiting};
use core::future::Future;
use core::ops::ControlFlow;
use core::pin::Pin;
use core::task::{Context, Poll};

/// The future of [`GpCookie::wait`]: ready once the grace period has ended.
#[must_use = "futures do nothing unless awaited"]
pub struct GracePeriod<'d, const N: usize> {
    cookie: GpCookie<'d, N>,
}

impl<'d, const N: usize> GracePeriod<'d, N> {
    pub(crate) fn new(cookie: GpCookie<'d, N>) -> Self {
        GracePeriod { cookie }
    }
}

impl<const N: usize> Future for GracePeriod<'_, N> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.cookie.poll() {
            Poll::Ready(())
        } else {
            // Nobody else will wake us: ask to be polled again (after the tasks that are
            // ready, one of which may be the reader we wait for).
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

impl<const N: usize> core::fmt::Debug for GracePeriod<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GracePeriod")
            .field("cookie", &self.cookie)
            .finish()
    }
}

/// A wait hook that reports a stall once: when a wait has lasted `threshold` ticks of
/// your clock, it calls `report` with how long it has waited and the slots holding the
/// grace period up (Linux's RCU CPU stall warning, in miniature). Use it from a hook:
/// `reader.synchronize_with(|w| { stall.observe(w); ControlFlow::Continue(()) })`.
pub struct StallDetector<C, R> {
    clock: C,
    threshold: u64,
    report: R,
    started: Option<u64>,
    reported: bool,
}

impl<C: FnMut() -> u64, R> StallDetector<C, R> {
    /// A detector on `clock` (any monotonic tick count: a cycle counter, `mtime`, a
    /// millisecond tick), reporting waits of `threshold` ticks or more.
    pub fn new(clock: C, threshold: u64, report: R) -> Self {
        StallDetector {
            clock,
            threshold,
            report,
            started: None,
            reported: false,
        }
    }

    /// Looks at a wait (call it from the hook on every attempt); reports at most once
    /// per wait, and starts over when a new wait begins (`attempts() == 1`).
    pub fn observe<const N: usize>(&mut self, w: &Waiting<'_, '_, N>)
    where
        R: FnMut(u64, super::Holdouts<'_, N>),
    {
        let now = (self.clock)();
        if w.attempts() <= 1 || self.started.is_none() {
            self.started = Some(now);
            self.reported = false;
        }
        let waited = now.wrapping_sub(self.started.unwrap_or(now));
        if !self.reported && waited >= self.threshold {
            self.reported = true;
            (self.report)(waited, w.holdouts());
        }
    }
}

impl<C, R> core::fmt::Debug for StallDetector<C, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StallDetector")
            .field("threshold", &self.threshold)
            .field("reported", &self.reported)
            .finish_non_exhaustive()
    }
}

/// A wait hook that gives up after `limit` ticks of your clock (from its first call):
/// `reader.synchronize_with(|_| deadline.check())` returns `Err(Error::GaveUp)` then.
pub struct Deadline<C> {
    clock: C,
    limit: u64,
    started: Option<u64>,
}

impl<C: FnMut() -> u64> Deadline<C> {
    /// A deadline `limit` ticks after the first [`check`](Self::check).
    pub fn new(clock: C, limit: u64) -> Self {
        Deadline {
            clock,
            limit,
            started: None,
        }
    }

    /// `Break` once the deadline has passed.
    pub fn check(&mut self) -> ControlFlow<()> {
        let now = (self.clock)();
        let start = *self.started.get_or_insert(now);
        if now.wrapping_sub(start) >= self.limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

impl<C> core::fmt::Debug for Deadline<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Deadline")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}
