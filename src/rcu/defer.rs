//! Deferred reclamation with bounded memory: `call_rcu` without a heap.

use super::domain::{GpCookie, Rcu, RcuError, Reader};

/// A fixed-capacity FIFO of retired values, each released (handed to a `reclaim`
/// function) once a grace period has passed since it was deferred.
///
/// Memory is bounded by `M`: when the queue is full, [`defer`](Self::defer) gives the
/// value back, and [`defer_or_wait`](Self::defer_or_wait) waits for a grace period
/// instead of growing. `&mut self` methods: one owner drives it; share it behind a
/// mutex (or a critical-section `Mutex`) if several contexts defer.
///
/// # Invariants
/// `items[(head + k) % M]` is `Some` exactly for `k < len`, and cookies are in the order
/// they were taken, so the front is always the oldest.
pub struct DeferQueue<T, const M: usize> {
    items: [Option<(GpCookie, T)>; M],
    head: usize,
    len: usize,
}

impl<T, const M: usize> DeferQueue<T, M> {
    /// An empty queue, usable in a `static`.
    pub const fn new() -> Self {
        DeferQueue {
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

    /// The fixed capacity `M`.
    pub const fn capacity(&self) -> usize {
        M
    }

    /// Retires `value` (already unpublished by the caller): it is handed to `reclaim`
    /// by a later [`collect`](Self::collect) or [`barrier`](Self::barrier) once a grace
    /// period has passed. Never blocks.
    ///
    /// # Errors
    /// The queue is full: the value comes back unchanged (back-pressure). Try
    /// [`collect`](Self::collect) first, or use [`defer_or_wait`](Self::defer_or_wait).
    pub fn defer<const N: usize>(&mut self, rcu: &Rcu<N>, value: T) -> Result<(), T> {
        if self.len == M {
            return Err(value);
        }
        let cookie = rcu.start_poll();
        let at = (self.head + self.len) % M;
        // INVARIANT: slot `len` past head was None (len < M); cookies are taken in order.
        self.items[at] = Some((cookie, value));
        self.len += 1;
        Ok(())
    }

    /// Hands every value whose grace period has ended to `reclaim`, oldest first. Never
    /// blocks (it may advance the grace-period machine). Returns how many it released.
    pub fn collect<const N: usize>(&mut self, rcu: &Rcu<N>, mut reclaim: impl FnMut(T)) -> usize {
        let mut n = 0;
        while self.len > 0 {
            let Some((cookie, _)) = &self.items[self.head] else {
                break;
            };
            if !rcu.poll(*cookie) {
                break;
            }
            if let Some((_, v)) = self.items[self.head].take() {
                reclaim(v);
            }
            self.head = (self.head + 1) % M;
            self.len -= 1;
            n += 1;
        }
        n
    }

    /// Defers `value`; if the queue is full, first waits (through `reader`, calling
    /// `wait` between attempts) until the oldest value can be released. A queue of
    /// capacity 0 waits for a grace period and releases `value` at once.
    ///
    /// # Errors
    /// [`RcuError::InReadSection`] if `reader` is inside a read section and the queue is
    /// full; the value is handed back with it.
    pub fn defer_or_wait<const N: usize>(
        &mut self,
        reader: &mut Reader<'_, N>,
        value: T,
        mut wait: impl FnMut(),
        mut reclaim: impl FnMut(T),
    ) -> Result<(), (RcuError, T)> {
        let rcu = reader.domain();
        if self.len == M && self.collect(rcu, &mut reclaim) == 0 {
            if let Err(e) = reader.synchronize(&mut wait) {
                return Err((e, value));
            }
            self.collect(rcu, &mut reclaim);
        }
        if let Err(v) = self.defer(rcu, value) {
            // Still no room (only with `M == 0`): a full grace period has passed since
            // the caller unpublished `v` (the synchronize above), so it is released now.
            reclaim(v);
        }
        Ok(())
    }

    /// Waits for a grace period and releases every pending value (`rcu_barrier`).
    ///
    /// # Errors
    /// [`RcuError::InReadSection`] if `reader` is inside a read section; nothing is
    /// released then.
    pub fn barrier<const N: usize>(
        &mut self,
        reader: &mut Reader<'_, N>,
        wait: impl FnMut(),
        mut reclaim: impl FnMut(T),
    ) -> Result<usize, RcuError> {
        if self.is_empty() {
            return Ok(0);
        }
        reader.synchronize(wait)?;
        Ok(self.collect(reader.domain(), &mut reclaim))
    }
}

impl<T, const M: usize> Default for DeferQueue<T, M> {
    fn default() -> Self {
        Self::new()
    }
}
