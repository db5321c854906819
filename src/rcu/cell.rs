//! A published pointer: readers load it under a guard, a writer replaces it and gets the
//! old value back after a grace period.

use super::domain::Rcu;
use super::gp::GpCookie;
use super::readers::{wait_through, Guard, WaitContext};
use super::wait::Waiting;
use crate::error::{Error, Refused};
use crate::sync::{AtomicPtr, Ordering};
use core::marker::PhantomData;
use core::ops::ControlFlow;
use core::ptr::NonNull;

/// Makes a type invariant in `'a`: a `&RcuCell<'long, ..>` must not become a
/// `&RcuCell<'short, ..>`, or it would accept (and publish) a shorter-lived value.
type Invariant<'a> = PhantomData<fn(&'a ()) -> &'a ()>;

/// A pointer to a `T` that readers load under a [`Guard`] and writers replace.
///
/// The storage belongs to the caller (statics, a pool, a buffer pair): the cell takes
/// `&'a mut T`, so nothing else can touch a published value, and gives it back as
/// `&'a mut T` only after a grace period ([`Retired`]). Safe code cannot keep a
/// reference past its guard: [`load`](Self::load) ties it to the guard's lifetime.
///
/// The cell is invariant in `'a`: it cannot be made to accept a value that lives
/// shorter than the storage it was created with (`tests/ui/cell_is_invariant.rs`).
pub struct RcuCell<'a, T, const N: usize> {
    // INVARIANT: `ptr` always points to a value that was given to the cell as
    // `&'a mut T` and not yet handed back; every reference handed out by `load` lives no
    // longer than a read section of `rcu` and than the borrow of the cell.
    pub(super) rcu: &'a Rcu<N>,
    pub(super) ptr: AtomicPtr<T>,
    _owns: PhantomData<&'a mut T>,
    _invariant: Invariant<'a>,
}

// SAFETY: the cell hands out `&T` to readers on any context (needs `T: Sync`) and moves
// `&mut T` between writer contexts (needs `T: Send`); it holds no other state.
unsafe impl<T: Send + Sync, const N: usize> Sync for RcuCell<'_, T, N> {}
// SAFETY: as above; moving the cell moves the `&'a mut T` it owns.
unsafe impl<T: Send + Sync, const N: usize> Send for RcuCell<'_, T, N> {}

impl<'a, T, const N: usize> RcuCell<'a, T, N> {
    const_fn! {
        /// A cell publishing `initial`, protected by the read sections of `rcu`; usable in
        /// a `static` (with `&'static mut` storage; [`RcuValue`](super::RcuValue) owns its
        /// buffers instead).
        pub const fn new(rcu: &'a Rcu<N>, initial: &'a mut T) -> Self {
            RcuCell {
                rcu,
                ptr: AtomicPtr::new(initial),
                _owns: PhantomData,
                _invariant: PhantomData,
            }
        }
    }

    /// The current value, valid for the guard's section.
    ///
    /// # Panics
    /// If `guard` belongs to another domain than the cell's: such a guard does not keep
    /// the value alive, and there is no sound value to return. This is a programming
    /// error, like a `RefCell` borrow conflict; [`try_load`](Self::try_load) reports it
    /// instead.
    #[inline]
    pub fn load<'g>(&'g self, guard: &'g Guard<'_, '_, N>) -> &'g T {
        match self.try_load(guard) {
            Ok(v) => v,
            Err(_) => panic!("rcuref: RcuCell::load with a guard of another RCU domain"),
        }
    }

    /// The current value, valid for the guard's section.
    ///
    /// # Errors
    /// [`Error::OtherDomain`] if `guard` belongs to another domain than the cell's.
    #[inline]
    pub fn try_load<'g>(&'g self, guard: &'g Guard<'_, '_, N>) -> Result<&'g T, Error> {
        if !core::ptr::eq(guard.domain(), self.rcu) {
            return Err(Error::OtherDomain);
        }
        let p = load_published(&self.ptr);
        // SAFETY: by the type invariant `p` points to a live `T` that only readers
        // access while published; the guard's section (same domain, checked above)
        // delays any hand-back of `p` until after the section. The returned lifetime is
        // bounded by both the guard borrow (the section) and the cell borrow (so by 'a,
        // the storage's own borrow: the reference cannot outlive the storage;
        // tests/ui/cell_ref_outlives_cell.rs).
        Ok(unsafe { &*p })
    }

    /// Publishes `new` and retires the previous value; the old value comes back as
    /// `&'a mut T` from the [`Retired`] once a grace period has passed.
    pub fn replace(&self, new: &'a mut T) -> Retired<'a, T, N> {
        divert!(CookieBeforeUnpublish => super::broken::replace_cookie_first(self, new));
        let old = publish(&self.ptr, new);
        let cookie = self.rcu.start_poll();
        // INVARIANT: `old` is unpublished (the swap took it out) and `cookie` was taken
        // after the swap.
        Retired::new(old, cookie)
    }

    /// The domain whose read sections protect this cell.
    pub fn domain(&self) -> &'a Rcu<N> {
        self.rcu
    }
}

/// A reader's load of the published pointer: `Acquire`, pairing with the publishing
/// swap's release, so the pointee's initialisation is visible (litmus:
/// `rcucell-publish`).
#[inline(always)]
pub(crate) fn load_published<T>(ptr: &AtomicPtr<T>) -> *mut T {
    ptr.load(Ordering::Acquire)
}

/// A writer's publish: an `AcqRel` swap (release: the new value's initialisation before
/// it; acquire: the old value's last accesses by earlier writers before its reclaim).
#[inline(always)]
pub(crate) fn publish<T>(ptr: &AtomicPtr<T>, new: *mut T) -> *mut T {
    ptr.swap(new, Ordering::AcqRel)
}

impl<T, const N: usize> core::fmt::Debug for RcuCell<'_, T, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The value is not shown: reading it needs a read section.
        f.debug_struct("RcuCell").finish_non_exhaustive()
    }
}

/// A value taken out of an [`RcuCell`] that readers may still be looking at.
///
/// Dropping it without reclaiming leaks the `&'a mut T` (the storage is not touched).
#[must_use = "a retired value is returned only after a grace period: call reclaim or try_reclaim"]
pub struct Retired<'a, T, const N: usize> {
    // INVARIANT: `old` came from the cell's `&'a mut T` and is no longer published;
    // readers that can still see it are all in sections that `cookie` waits for.
    old: NonNull<T>,
    cookie: GpCookie<'a, N>,
    _owns: PhantomData<&'a mut T>,
    _invariant: Invariant<'a>,
}

// SAFETY: a `Retired` is an `&'a mut T` waiting for its grace period: it may move to
// another context (and be reclaimed there) when `&mut T` may, i.e. `T: Send`.
unsafe impl<T: Send, const N: usize> Send for Retired<'_, T, N> {}
// SAFETY: `&Retired` gives no access to the value at all.
unsafe impl<T, const N: usize> Sync for Retired<'_, T, N> {}

impl<'a, T, const N: usize> Retired<'a, T, N> {
    /// The value `old` (what a swap took out of the cell, so never null: the cell only
    /// ever holds references given to it), to come back after `cookie`'s grace period.
    /// The caller keeps the invariant: `old` is unpublished and `cookie` was taken after.
    pub(super) fn new(old: *mut T, cookie: GpCookie<'a, N>) -> Self {
        // SAFETY: `old` came out of the cell's pointer, which only ever holds references
        // given to the cell, so it is not null.
        let old = unsafe { NonNull::new_unchecked(old) };
        Retired {
            old,
            cookie,
            _owns: PhantomData,
            _invariant: PhantomData,
        }
    }

    /// The value back, if its grace period has ended; otherwise `self`. Never blocks.
    ///
    /// # Errors
    /// `self` while readers that may see the value are still inside their sections.
    pub fn try_reclaim(self) -> Result<&'a mut T, Self> {
        if self.cookie.poll() {
            // SAFETY: by the type invariant the value is unpublished, and the grace
            // period has ended, so no read section can still hold a reference to it:
            // this is now the only reference.
            Ok(unsafe { &mut *self.old.as_ptr() })
        } else {
            Err(self)
        }
    }

    /// Waits for the grace period through `ctx` (a `&mut Reader` or a
    /// `ContextReader` of the cell's domain), asking `hook` between attempts (see
    /// [`Reader::synchronize`](super::Reader::synchronize)), and returns the value.
    ///
    /// # Errors
    /// [`Refused`] with `self` back: without waiting, [`Error::OtherDomain`] if `ctx`
    /// belongs to another domain than the cell's and [`Error::InReadSection`] if the
    /// grace period has not ended and waiting from there would deadlock (it goes ahead
    /// from inside a section when no wait is needed); [`Error::GaveUp`] when `hook`
    /// gives up.
    pub fn reclaim(
        self,
        ctx: impl WaitContext<N>,
        hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
    ) -> Result<&'a mut T, Refused<Self>> {
        if let Err(e) = wait_through(&ctx, self.cookie, hook) {
            return Err(Refused::new(e, self));
        }
        // Done: the wait above returned only once the cookie's grace period had ended.
        self.try_reclaim()
            .map_err(|back| Refused::new(Error::InReadSection, back))
    }

    /// The grace period this value waits for.
    pub fn cookie(&self) -> GpCookie<'a, N> {
        self.cookie
    }

    /// The value back, asynchronously: completes once the grace period has ended (see
    /// [`GpCookie::wait`]). Never from a task that holds a guard of the same domain.
    pub async fn reclaim_async(self) -> &'a mut T {
        self.cookie.wait().await;
        // SAFETY: by the type invariant the value is unpublished, and the grace period
        // has ended (the await returned only then), so no read section can still hold a
        // reference to it: this is now the only reference.
        unsafe { &mut *self.old.as_ptr() }
    }

    /// [`reclaim_async`](Self::reclaim_async), woken through `wakers` by the unlock of
    /// the reader it waits for instead of re-polling, where that is reliable (see
    /// [`GpCookie::wait_woken`]).
    pub async fn reclaim_async_woken<const K: usize>(
        self,
        wakers: &'static super::Wakers<K>,
    ) -> &'a mut T {
        self.cookie.wait_woken(wakers).await;
        // SAFETY: by the type invariant the value is unpublished, and the grace period
        // has ended (the await returned only then), so no read section can still hold a
        // reference to it: this is now the only reference.
        unsafe { &mut *self.old.as_ptr() }
    }
}

impl<T, const N: usize> core::fmt::Debug for Retired<'_, T, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Retired")
            .field("cookie", &self.cookie)
            .finish_non_exhaustive()
    }
}
