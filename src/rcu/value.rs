//! A published value that owns its buffers: a `static`-friendly [`RcuCell`](super::RcuCell).

use super::domain::Rcu;
use super::readers::{may_wait, wait_through, Guard, WaitContext};
use super::wait::Waiting;
use crate::error::{Error, Refused};
use crate::sync::{AtomicBool, AtomicU32, Ordering};
use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::ops::ControlFlow;

/// The state of one buffer, kept by the writer (under `writing`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Buf {
    /// No value.
    Empty,
    /// The published value.
    Current,
    /// A replaced value, dropped and reused once the grace period with this target ends.
    Retired(u32),
}

/// A value that readers load under a [`Guard`] and writers replace, holding `K` buffers of
/// its own, so it can be a `static` with no storage juggling: `RcuValue::new` is `const`.
///
/// A replacement goes into a buffer that is empty or whose previous value's grace period
/// has ended (that value is dropped first); the replaced value is retired to wait for
/// its own grace period. With `K` buffers, `K - 1` replacements can be in flight before
/// a writer has to wait. [`RcuCell`](super::RcuCell) stays for storage the caller owns.
///
/// Writers exclude each other with a try-lock: a second writer at the same time gets
/// [`Error::Busy`] (it never waits, so this is usable from interrupt handlers).
pub struct RcuValue<'d, T, const K: usize, const N: usize> {
    // INVARIANTS:
    // * `bufs[current]` holds the published value; readers read only it, and only under a
    //   guard of `rcu`.
    // * `state` and every buffer other than the current one are touched only by the
    //   holder of `writing`; a buffer is `Retired(t)` until `t`'s grace period has ended,
    //   so no reader can still see it when it is dropped and rewritten.
    pub(super) rcu: &'d Rcu<N>,
    pub(super) current: AtomicU32,
    writing: AtomicBool,
    state: UnsafeCell<[Buf; K]>,
    bufs: [UnsafeCell<MaybeUninit<T>>; K],
}

// SAFETY: readers on any context get `&T` (needs `T: Sync`); writers on any context move
// `T` in and drop old ones (needs `T: Send`); the writer state is guarded by `writing`.
unsafe impl<T: Send + Sync, const K: usize, const N: usize> Sync for RcuValue<'_, T, K, N> {}
// SAFETY: moving the value moves the `T`s it owns.
unsafe impl<T: Send, const K: usize, const N: usize> Send for RcuValue<'_, T, K, N> {}

/// Releases the writer lock when dropped (also on a panic in `T::drop`).
struct Unlock<'a>(&'a AtomicBool);

impl Drop for Unlock<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl<'d, T, const K: usize, const N: usize> RcuValue<'d, T, K, N> {
    const_fn! {
        /// A value publishing `initial`, protected by the read sections of `rcu`; usable
        /// in a `static`. `K` must be at least 2.
        pub const fn new(rcu: &'d Rcu<N>, initial: T) -> Self {
            assert!(
                K >= 2,
                "an RcuValue needs at least two buffers to replace its value"
            );
            let mut bufs = [const { UnsafeCell::new(MaybeUninit::uninit()) }; K];
            bufs[0] = UnsafeCell::new(MaybeUninit::new(initial));
            let mut state = [Buf::Empty; K];
            state[0] = Buf::Current;
            RcuValue {
                rcu,
                current: AtomicU32::new(0),
                writing: AtomicBool::new(false),
                state: UnsafeCell::new(state),
                bufs,
            }
        }
    }

    /// The current value, valid for the guard's section.
    ///
    /// # Panics
    /// If `guard` belongs to another domain (see [`try_load`](Self::try_load)).
    #[inline]
    pub fn load<'g>(&'g self, guard: &'g Guard<'_, '_, N>) -> &'g T {
        match self.try_load(guard) {
            Ok(v) => v,
            Err(_) => panic!("rcuref: RcuValue::load with a guard of another RCU domain"),
        }
    }

    /// The current value, valid for the guard's section.
    ///
    /// # Errors
    /// [`Error::OtherDomain`] if `guard` belongs to another domain.
    #[inline]
    pub fn try_load<'g>(&'g self, guard: &'g Guard<'_, '_, N>) -> Result<&'g T, Error> {
        if !core::ptr::eq(guard.domain(), self.rcu) {
            return Err(Error::OtherDomain);
        }
        let i = load_current(&self.current) as usize;
        // SAFETY: by the type invariant `bufs[i]` holds the published value, which is not
        // dropped or rewritten before a grace period that this section (same domain,
        // checked above) holds up; the reference lives no longer than the section.
        Ok(unsafe { (*self.bufs[i].get()).assume_init_ref() })
    }

    /// Publishes `value` without waiting: into an empty buffer, or one whose old value's
    /// grace period has ended (that value is dropped first). The replaced value is
    /// retired.
    ///
    /// # Errors
    /// [`Refused`] with the value back: [`Error::Busy`] if another writer is replacing
    /// at this moment; [`Error::Full`] if every other buffer still waits for its grace
    /// period (poll again later, or use [`replace`](Self::replace)).
    pub fn try_replace(&self, value: T) -> Result<(), Refused<T>> {
        let Some(_unlock) = self.lock_writer() else {
            return Err(Refused::new(Error::Busy, value));
        };
        match self.free_buffer() {
            Some(i) => {
                self.publish(i, value);
                Ok(())
            }
            None => Err(Refused::new(Error::Full, value)),
        }
    }

    /// Publishes `value`, waiting (through `ctx`, a `&mut Reader` or a `ContextReader`
    /// of the value's domain, asking `hook` between attempts) for the oldest retired
    /// value's grace period if no buffer is free.
    ///
    /// # Errors
    /// [`Refused`] with the value back: [`Error::Busy`] if another writer is replacing;
    /// [`Error::OtherDomain`] if `ctx` belongs to another domain;
    /// [`Error::InReadSection`] if a buffer had to be waited for and waiting from there
    /// would deadlock (see [`Reader::synchronize`](super::Reader::synchronize));
    /// [`Error::GaveUp`] when `hook` gives up.
    pub fn replace(
        &self,
        ctx: impl WaitContext<N>,
        value: T,
        hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
    ) -> Result<(), Refused<T>> {
        if let Err(e) = may_wait(&ctx, self.rcu) {
            if e == Error::OtherDomain {
                return Err(Refused::new(e, value));
            }
        }
        let Some(_unlock) = self.lock_writer() else {
            return Err(Refused::new(Error::Busy, value));
        };
        if let Some(i) = self.free_buffer() {
            self.publish(i, value);
            return Ok(());
        }
        let oldest = self.oldest_retired();
        if let Err(e) = wait_through(&ctx, self.rcu.cookie_from_raw(oldest), hook) {
            return Err(Refused::new(e, value));
        }
        match self.free_buffer() {
            Some(i) => {
                self.publish(i, value);
                Ok(())
            }
            None => Err(Refused::new(Error::Full, value)), // unreachable: we waited for one
        }
    }

    /// The domain whose read sections protect this value.
    pub fn domain(&self) -> &'d Rcu<N> {
        self.rcu
    }

    fn lock_writer(&self) -> Option<Unlock<'_>> {
        if self.writing.swap(true, Ordering::Acquire) {
            None
        } else {
            Some(Unlock(&self.writing))
        }
    }

    /// The writer's state. Only with `writing` held.
    #[allow(clippy::mut_from_ref)]
    fn state(&self) -> &mut [Buf; K] {
        // SAFETY: by the type invariant only the holder of `writing` touches `state`,
        // and every caller holds it (and takes no second reference at a time).
        unsafe { &mut *self.state.get() }
    }

    /// A buffer to write into, emptied: an empty one, or a retired one whose grace period
    /// has ended (its value dropped). Only with `writing` held.
    fn free_buffer(&self) -> Option<usize> {
        for i in 0..K {
            let st = self.state()[i];
            match st {
                Buf::Empty => return Some(i),
                Buf::Retired(t) if self.rcu.cookie_from_raw(t).poll() => {
                    // INVARIANT: mark it empty before the drop, so a panicking drop
                    // leaves the buffer empty (the value counts as dropped).
                    self.state()[i] = Buf::Empty;
                    // SAFETY: retired and its grace period ended: no reader can still
                    // see it; it holds an initialised value that nobody else touches.
                    unsafe { (*self.bufs[i].get()).assume_init_drop() };
                    return Some(i);
                }
                _ => {}
            }
        }
        None
    }

    /// The target of the retired buffer retired first. Only with `writing` held, and only
    /// when no buffer is free (so, with `K >= 2`, at least one is retired).
    fn oldest_retired(&self) -> u32 {
        let cur = self.rcu.gp_counter();
        self.state()
            .iter()
            .filter_map(|b| match *b {
                Buf::Retired(t) => Some(t),
                _ => None,
            })
            .min_by_key(|t| t.wrapping_sub(cur))
            .unwrap_or(cur)
    }

    /// Writes `value` into empty buffer `i`, publishes it, retires the old one. Only with
    /// `writing` held.
    fn publish(&self, i: usize, value: T) {
        // SAFETY: buffer `i` is empty and not current, and we hold `writing`: nobody else
        // reads or writes it.
        unsafe { (*self.bufs[i].get()).write(value) };
        self.swap_in(i);
    }

    /// Publishes buffer `i` and retires the old one. Only with `writing` held.
    fn swap_in(&self, i: usize) {
        divert!(CookieBeforeUnpublish => super::broken::swap_in_cookie_first(self, i));
        let old = publish_index(&self.current, i as u32) as usize;
        // After the unpublish (the swap).
        let cookie = self.rcu.start_poll();
        self.retire(i, old, cookie.into_raw());
    }

    /// Buffer `i` is current now, `old` retired until the cookie `raw`. Only with
    /// `writing` held.
    pub(super) fn retire(&self, i: usize, old: usize, raw: u32) {
        let st = self.state();
        st[i] = Buf::Current;
        // INVARIANT: retired until a grace period that starts after its unpublish.
        st[old] = Buf::Retired(raw);
    }
}

/// A reader's load of the published buffer's index: `Acquire`, pairing with
/// `publish_index` (litmus: `rcuvalue-publish`).
#[inline(always)]
pub(crate) fn load_current(current: &AtomicU32) -> u32 {
    current.load(Ordering::Acquire)
}

/// A writer's publish of a written buffer: an `AcqRel` swap of the index.
#[inline(always)]
pub(crate) fn publish_index(current: &AtomicU32, i: u32) -> u32 {
    current.swap(i, Ordering::AcqRel)
}

impl<T, const K: usize, const N: usize> Drop for RcuValue<'_, T, K, N> {
    fn drop(&mut self) {
        // `&mut self`: no reader holds a reference (loads borrow the value), no writer runs.
        for (i, b) in self.state.get_mut().iter().enumerate() {
            if *b != Buf::Empty {
                // SAFETY: a non-empty buffer holds an initialised value; we are its only
                // user now.
                unsafe { self.bufs[i].get_mut().assume_init_drop() };
            }
        }
    }
}

impl<T, const K: usize, const N: usize> core::fmt::Debug for RcuValue<'_, T, K, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RcuValue")
            .field("buffers", &K)
            .field("current", &self.current.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}
