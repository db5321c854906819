//! Deferred reclamation with bounded memory: `call_rcu` without a heap.

use super::call::Ran;
use super::domain::Rcu;
use super::readers::{may_wait, wait_through, WaitContext};
use super::wait::Waiting;
use crate::error::{Error, Refused};
use core::future::Future;
use core::mem::ManuallyDrop;
use core::ops::ControlFlow;

/// A fixed-capacity FIFO of retired values of one domain, each released (handed to a
/// `reclaim` function) once a grace period of that domain has passed since it was
/// deferred.
///
/// Memory is bounded by `M`: when the queue is full, [`defer`](Self::defer) gives the
/// value back, and [`defer_or_wait`](Self::defer_or_wait) waits for a grace period
/// instead of growing. `&mut self` methods: one owner drives it; share it behind a
/// mutex (or a critical-section `Mutex`) if several contexts defer.
///
/// The queue is bound to its domain when it is created, so values can only ever be
/// released after grace periods of the domain whose readers may see them.
///
/// **A value is never dropped before its grace period**, on any path:
///
/// * A `reclaim` that panics has already been handed its value and the queue has moved
///   past it; the rest stay queued.
/// * A panic while a value is being deferred ([`defer_or_wait`](Self::defer_or_wait) or
///   [`defer_async`](Self::defer_async) running a `reclaim` of older values or a `wait`
///   hook) leaks that value; so does dropping `defer_async`'s future before it is done.
/// * Dropping the queue (or unwinding past it) drops the values whose grace period has
///   already ended and **leaks the others** (they are forgotten, never dropped). Call
///   [`barrier`](Self::barrier) first to release everything.
pub struct DeferQueue<'d, T, const M: usize, const N: usize> {
    // INVARIANT: `items[(head + k) % M]` is `Some` exactly for `k < len`, and targets are
    // in the order they were taken from `rcu`, so the front is always the oldest.
    rcu: &'d Rcu<N>,
    items: [Option<(u32, T)>; M],
    head: usize,
    len: usize,
}

impl<'d, T, const M: usize, const N: usize> DeferQueue<'d, T, M, N> {
    /// An empty queue for values that readers of `rcu` may see; usable in a `static`.
    pub const fn new(rcu: &'d Rcu<N>) -> Self {
        DeferQueue {
            rcu,
            items: [const { None }; M],
            head: 0,
            len: 0,
        }
    }

    /// Values waiting for their grace period.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether [`defer`](Self::defer) would hand the value back.
    pub fn is_full(&self) -> bool {
        self.len == M
    }

    /// The fixed capacity `M`.
    pub const fn capacity(&self) -> usize {
        M
    }

    /// The domain whose grace periods this queue waits for.
    pub fn domain(&self) -> &'d Rcu<N> {
        self.rcu
    }

    /// The index after `i`, round the ring.
    fn next(i: usize) -> usize {
        if i + 1 >= M {
            0
        } else {
            i + 1
        }
    }

    /// Retires `value` (already unpublished by the caller): it is handed to `reclaim`
    /// by a later [`collect`](Self::collect) or [`barrier`](Self::barrier) once a grace
    /// period has passed. Never blocks.
    ///
    /// # Errors
    /// [`Refused`] with [`Error::Full`] and the value unchanged when the queue is full
    /// (back-pressure). Try [`collect`](Self::collect) first, or use
    /// [`defer_or_wait`](Self::defer_or_wait).
    pub fn defer(&mut self, value: T) -> Result<(), Refused<T>> {
        if self.len >= M {
            return Err(Refused::new(Error::Full, value));
        }
        let cookie = self.rcu.start_poll();
        let at = (self.head + self.len) % M; // M > len >= 0: no division by zero
                                             // INVARIANT: slot `len` past head was None (len < M); targets are taken in order.
        self.items[at] = Some((cookie.into_raw(), value));
        self.len += 1;
        Ok(())
    }

    /// Hands every value whose grace period has ended to `reclaim`, oldest first. Never
    /// blocks (it may advance the grace-period machine). Returns how many it released.
    pub fn collect(&mut self, reclaim: impl FnMut(T)) -> usize {
        let rcu = self.rcu;
        self.release_while(|target| rcu.cookie_from_raw(target).poll(), reclaim)
    }

    /// Hands at most `budget` values whose grace period has ended to `reclaim`, oldest
    /// first, and leaves the rest for a later call, so a tick handler or an interrupt
    /// bounds its work (Linux limits the callbacks one softirq invokes the same way).
    /// Never blocks. Returns how many it released and how many are still queued
    /// (due or not).
    pub fn collect_at_most(&mut self, budget: usize, reclaim: impl FnMut(T)) -> Ran {
        let rcu = self.rcu;
        let mut room = budget;
        let ran = self.release_while(
            |target| {
                let go = room > 0 && rcu.cookie_from_raw(target).poll();
                room = room.saturating_sub(usize::from(go));
                go
            },
            reclaim,
        );
        Ran {
            ran,
            left: self.len,
        }
    }

    /// Hands values to `reclaim`, oldest first, while `due` says the front one's cookie
    /// target is done.
    fn release_while(
        &mut self,
        mut due: impl FnMut(u32) -> bool,
        mut reclaim: impl FnMut(T),
    ) -> usize {
        let mut n = 0;
        // By the invariant the front place is empty exactly when the queue is.
        while let Some(&(target, _)) = self.items[..].get(self.head).and_then(Option::as_ref) {
            if !due(target) {
                break;
            }
            let Some((_, v)) = self.items[self.head].take() else {
                break;
            };
            // INVARIANT: the front moved past the taken item before user code runs, so a
            // panicking `reclaim` leaves the queue consistent.
            self.head = Self::next(self.head);
            self.len -= 1;
            n += 1;
            reclaim(v);
        }
        n
    }

    /// The cookie whose grace period frees a place: the oldest value's; with no places
    /// at all (`M == 0`), a grace period that starts now, which covers the value being
    /// deferred (its caller unpublished it before the call).
    fn cookie_for_room(&self) -> u32 {
        match self.items[..].get(self.head).and_then(Option::as_ref) {
            Some(&(target, _)) => target,
            None => self.rcu.start_poll().into_raw(),
        }
    }

    /// Defers `value`; if the queue is full, first waits (through `ctx`, a `&mut Reader`
    /// or a `ContextReader` of the queue's domain, asking `hook` between attempts) until
    /// the oldest value can be released. A queue of capacity 0 waits for a grace period
    /// and releases `value` at once.
    ///
    /// If `reclaim` or `hook` panics, `value` is leaked: it is never dropped before its
    /// grace period.
    ///
    /// # Errors
    /// [`Refused`] with the value back, without waiting: [`Error::OtherDomain`] if `ctx`
    /// belongs to another domain than the queue's; [`Error::InReadSection`] if the queue
    /// is full and waiting from there would deadlock (see
    /// [`Reader::synchronize`](super::Reader::synchronize)); [`Error::GaveUp`] when
    /// `hook` gives up (the value was not deferred).
    pub fn defer_or_wait(
        &mut self,
        ctx: impl WaitContext<N>,
        value: T,
        hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
        mut reclaim: impl FnMut(T),
    ) -> Result<(), Refused<T>> {
        if let Err(e) = may_wait(&ctx, self.rcu) {
            if e == Error::OtherDomain {
                return Err(Refused::new(e, value));
            }
        }
        // User code runs from here on (a `reclaim` of older values, the wait hook), and
        // `value` has no grace period yet: a panic must leak it, never drop it.
        let value = Unpublished::new(value);
        if self.is_full() && self.collect(&mut reclaim) == 0 {
            let cookie = self.rcu.cookie_from_raw(self.cookie_for_room());
            if let Err(e) = wait_through(&ctx, cookie, hook) {
                return Err(Refused::new(e, value.into_inner()));
            }
            self.collect(&mut reclaim);
        }
        self.defer_after_room(value, reclaim);
        Ok(())
    }

    /// Defers `value`; if the queue is full, first awaits the oldest value's grace period
    /// and releases it (the async form of [`defer_or_wait`](Self::defer_or_wait); see
    /// [`GpCookie::wait`](super::GpCookie::wait) for how it waits). A queue of capacity 0
    /// awaits a grace period and releases `value` at once. Never from a task that holds a
    /// guard of the same domain.
    ///
    /// `value` is taken at the call: if the future is dropped before it completes, or
    /// `reclaim` panics, `value` is leaked, never dropped before its grace period.
    pub fn defer_async<'q, R: FnMut(T) + 'q>(
        &'q mut self,
        value: T,
        reclaim: R,
    ) -> impl Future<Output = ()> + use<'q, 'd, T, R, M, N>
    where
        T: 'q,
    {
        self.defer_async_with(value, None::<&'static super::Wakers<0>>, reclaim)
    }

    /// [`defer_async`](Self::defer_async), woken through `wakers` by the unlock of the
    /// reader it waits for instead of re-polling, where that is reliable (see
    /// [`GpCookie::wait_woken`](super::GpCookie::wait_woken) and
    /// [`Wakers`](super::Wakers); the domain's wake hook must call `wakers.wake()`).
    pub fn defer_async_woken<'q, R: FnMut(T) + 'q, const K: usize>(
        &'q mut self,
        value: T,
        wakers: &'static super::Wakers<K>,
        reclaim: R,
    ) -> impl Future<Output = ()> + use<'q, 'd, T, R, M, N, K>
    where
        T: 'q,
    {
        self.defer_async_with(value, Some(wakers), reclaim)
    }

    /// The body of both: `wakers`, if any, wakes the grace period's future.
    fn defer_async_with<'q, R: FnMut(T) + 'q, const K: usize>(
        &'q mut self,
        value: T,
        wakers: Option<&'static super::Wakers<K>>,
        mut reclaim: R,
    ) -> impl Future<Output = ()> + use<'q, 'd, T, R, M, N, K>
    where
        T: 'q,
    {
        // Taken into the guard now, before the future exists: an `async fn` would hold the
        // plain value in its state, and dropping the future unpolled would drop it.
        let value = Unpublished::new(value);
        async move {
            if self.is_full() && self.collect(&mut reclaim) == 0 {
                let wait = self.rcu.cookie_from_raw(self.cookie_for_room()).wait();
                match wakers {
                    Some(w) => wait.woken_by(w).await,
                    None => wait.await,
                }
                self.collect(&mut reclaim);
            }
            self.defer_after_room(value, reclaim);
        }
    }

    /// Defers `value` once a grace period has made room (or the queue had room), and
    /// hands it to `reclaim` at once when there is still none: only with `M == 0`, where
    /// the grace period just waited for started after the caller unpublished it.
    fn defer_after_room(&mut self, value: Unpublished<T>, mut reclaim: impl FnMut(T)) {
        if let Err(r) = self.defer(value.into_inner()) {
            reclaim(r.value);
        }
    }

    /// Waits (through `ctx`, asking `hook` between attempts) for the grace period of
    /// the newest value and releases every pending value (`rcu_barrier`). Returns how
    /// many it released.
    ///
    /// # Errors
    /// Without releasing anything: [`Error::OtherDomain`] if `ctx` belongs to another
    /// domain; [`Error::InReadSection`] if the newest value's grace period has not ended
    /// and waiting from there would deadlock (see
    /// [`Reader::synchronize`](super::Reader::synchronize); with nothing to wait for it
    /// goes ahead, even from inside a section); [`Error::GaveUp`] when `hook` gives up
    /// (what is done by then stays queued for the next `collect`).
    pub fn barrier(
        &mut self,
        ctx: impl WaitContext<N>,
        hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
        reclaim: impl FnMut(T),
    ) -> Result<usize, Error> {
        if let Err(Error::OtherDomain) = may_wait(&ctx, self.rcu) {
            return Err(Error::OtherDomain);
        }
        if self.is_empty() {
            return Ok(0);
        }
        let newest = (self.head + self.len - 1) % M; // len >= 1, so M >= 1
        if let Some(&(target, _)) = self.items[..].get(newest).and_then(Option::as_ref) {
            wait_through(&ctx, self.rcu.cookie_from_raw(target), hook)?;
        }
        // Every value was deferred no later than the newest, so its grace period has
        // ended too: release them all, without asking their cookies (a value left
        // queued for a whole lap of the counter has a cookie that reads "not done"
        // again for a few steps, which would stop `collect` short).
        divert!(BarrierTrustsOldCookies => Ok(self.collect(reclaim)));
        Ok(self.release_while(|_| true, reclaim))
    }
}

impl<T, const M: usize, const N: usize> Drop for DeferQueue<'_, T, M, N> {
    /// Drops the values whose grace period has already ended (without advancing grace
    /// periods) and leaks the others: a value is never dropped before its grace period.
    fn drop(&mut self) {
        // (The old queue had no `Drop`: the drop glue dropped them all.)
        divert!(QueueDropsPending => ());
        // First forget every value still waiting, so that nothing a panicking `T::drop`
        // leaves to the drop glue below can be one of them; then drop the rest.
        let mut i = self.head;
        for _ in 0..self.len {
            if let Some(&(target, _)) = self.items[i].as_ref() {
                if !self.rcu.cookie_from_raw(target).is_done() {
                    core::mem::forget(self.items[i].take());
                }
            }
            i = Self::next(i);
        }
        // `items` now holds only values whose grace period has ended: its drop glue
        // drops them, oldest or not (the order of drops is not part of the contract).
    }
}

/// A value being deferred: unpublished by the caller, without a grace period yet. If it
/// is dropped (a panic in user code unwinding past it, a future dropped before it
/// completes), the value is leaked, not dropped.
struct Unpublished<T>(ManuallyDrop<T>);

impl<T> Unpublished<T> {
    fn new(value: T) -> Self {
        Unpublished(ManuallyDrop::new(value))
    }

    fn into_inner(self) -> T {
        let mut me = ManuallyDrop::new(self);
        // SAFETY: `me` is never used or dropped again, so the value is taken exactly once.
        unsafe { ManuallyDrop::take(&mut me.0) }
    }
}

impl<T> Drop for Unpublished<T> {
    /// Nothing: a value still unpublished when this is dropped (a panic unwinding past
    /// it) must not be dropped before its grace period, so it is leaked.
    fn drop(&mut self) {
        divert!(DeferDropsOnPanic => super::broken::drop_unpublished(&mut self.0));
    }
}

impl<T, const M: usize, const N: usize> core::fmt::Debug for DeferQueue<'_, T, M, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeferQueue")
            .field("len", &self.len)
            .field("capacity", &M)
            .finish()
    }
}
