//! Deferred reclamation with bounded memory: `call_rcu` without a heap.

use super::domain::{forever, Rcu, Reader};
use crate::error::{Error, Refused};
use core::mem::ManuallyDrop;

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
/// **Panics in callbacks.** A `reclaim` that panics has already been handed its value
/// and the queue has moved past it; the rest stay queued. A `wait` hook that panics in
/// [`defer_or_wait`](Self::defer_or_wait) leaks the value being deferred (it is never
/// dropped before its grace period).
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
    pub fn collect(&mut self, mut reclaim: impl FnMut(T)) -> usize {
        let mut n = 0;
        // By the invariant the front place is empty exactly when the queue is.
        while let Some(&(target, _)) = self.items[..].get(self.head).and_then(Option::as_ref) {
            if !self.rcu.cookie_from_raw(target).poll() {
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

    /// Defers `value`; if the queue is full, first waits (through `reader`, calling
    /// `wait` between attempts) until the oldest value can be released. A queue of
    /// capacity 0 waits for a grace period and releases `value` at once.
    ///
    /// # Errors
    /// [`Refused`] with the value back, without waiting: [`Error::OtherDomain`] if
    /// `reader` belongs to another domain than the queue's; [`Error::InReadSection`] if
    /// the queue is full and waiting from here would deadlock (see
    /// [`Reader::synchronize`]).
    pub fn defer_or_wait(
        &mut self,
        reader: &mut Reader<'_, N>,
        value: T,
        wait: impl FnMut(),
        mut reclaim: impl FnMut(T),
    ) -> Result<(), Refused<T>> {
        if !core::ptr::eq(reader.domain(), self.rcu) {
            return Err(Refused::new(Error::OtherDomain, value));
        }
        if self.is_full() && self.collect(&mut reclaim) == 0 {
            if let Err(e) = reader.check_can_wait() {
                return Err(Refused::new(e, value));
            }
            // The oldest entry's grace period frees a place; with no places at all, a
            // grace period that starts now covers `value` itself. If `wait` panics, the
            // value is leaked rather than dropped before its grace period.
            let cookie = match self.items[..].get(self.head).and_then(Option::as_ref) {
                Some(&(target, _)) => self.rcu.cookie_from_raw(target),
                None => self.rcu.start_poll(),
            };
            let value = ManuallyDrop::new(value);
            // Cannot fail: same domain (checked above), allowed to wait (checked above).
            let _ = reader.wait_for(cookie, forever(wait));
            let value = ManuallyDrop::into_inner(value);
            self.collect(&mut reclaim);
            if let Err(r) = self.defer(value) {
                // Still no room (only with `M == 0`): the grace period we waited for
                // started after the caller unpublished the value, so it is released now.
                reclaim(r.value);
            }
            return Ok(());
        }
        if let Err(r) = self.defer(value) {
            reclaim(r.value); // unreachable: not full, or just collected one
        }
        Ok(())
    }

    /// Defers `value`; if the queue is full, first awaits the oldest value's grace period
    /// and releases it (the async form of [`defer_or_wait`](Self::defer_or_wait); see
    /// [`GpCookie::wait`](super::GpCookie::wait) for how it waits). A queue of capacity 0
    /// awaits a grace period and releases `value` at once. Never from a task that holds a
    /// guard of the same domain.
    pub async fn defer_async(&mut self, value: T, mut reclaim: impl FnMut(T)) {
        if self.is_full() && self.collect(&mut reclaim) == 0 {
            let cookie = match self.items[..].get(self.head).and_then(Option::as_ref) {
                Some(&(target, _)) => self.rcu.cookie_from_raw(target),
                None => self.rcu.start_poll(),
            };
            // If the task is dropped while waiting, the value is leaked rather than
            // dropped before its grace period.
            let value = ManuallyDrop::new(value);
            cookie.wait().await;
            let value = ManuallyDrop::into_inner(value);
            self.collect(&mut reclaim);
            if let Err(r) = self.defer(value) {
                reclaim(r.value); // M == 0: the grace period we awaited covers it
            }
            return;
        }
        if let Err(r) = self.defer(value) {
            reclaim(r.value); // unreachable: not full, or just collected one
        }
    }

    /// Waits for the grace period of the newest value and releases every pending value
    /// (`rcu_barrier`). Returns how many it released.
    ///
    /// # Errors
    /// Without waiting or releasing anything: [`Error::OtherDomain`] if `reader`
    /// belongs to another domain; [`Error::InReadSection`] if waiting from here would
    /// deadlock (see [`Reader::synchronize`]).
    pub fn barrier(
        &mut self,
        reader: &mut Reader<'_, N>,
        wait: impl FnMut(),
        reclaim: impl FnMut(T),
    ) -> Result<usize, Error> {
        if !core::ptr::eq(reader.domain(), self.rcu) {
            return Err(Error::OtherDomain);
        }
        if self.is_empty() {
            return Ok(0);
        }
        reader.check_can_wait()?;
        let newest = (self.head + self.len - 1) % M; // len >= 1, so M >= 1
        if let Some(&(target, _)) = self.items[..].get(newest).and_then(Option::as_ref) {
            reader.wait_for(self.rcu.cookie_from_raw(target), forever(wait))?;
        }
        Ok(self.collect(reclaim))
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
