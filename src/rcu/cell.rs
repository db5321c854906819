//! A published pointer: readers load it under a guard, a writer replaces it and gets the
//! old value back after a grace period.

use super::domain::{GpCookie, Guard, Rcu, RcuError, Reader};
use crate::sync::{AtomicPtr, Ordering};
use core::marker::PhantomData;
use core::ptr::NonNull;

/// A pointer to a `T` that readers load under a [`Guard`] and writers replace.
///
/// The storage belongs to the caller (statics, a pool, a buffer pair): the cell takes
/// `&'a mut T`, so nothing else can touch a published value, and gives it back as
/// `&'a mut T` only after a grace period ([`Retired`]). Safe code cannot keep a
/// reference past its guard: [`load`](Self::load) ties it to the guard's lifetime.
///
/// # Invariants
/// `ptr` always points to a value that was given to the cell as `&'a mut T` and not yet
/// handed back; every reference handed out by `load` lives no longer than a read
/// section of `rcu`.
pub struct RcuCell<'a, T, const N: usize> {
    rcu: &'a Rcu<N>,
    ptr: AtomicPtr<T>,
    _owns: PhantomData<&'a mut T>,
}

// SAFETY: the cell hands out `&T` to readers on any context (needs `T: Sync`) and moves
// `&mut T` between writer contexts (needs `T: Send`); it holds no other state.
unsafe impl<T: Send + Sync, const N: usize> Sync for RcuCell<'_, T, N> {}
// SAFETY: as above; moving the cell moves the `&'a mut T` it owns.
unsafe impl<T: Send + Sync, const N: usize> Send for RcuCell<'_, T, N> {}

impl<'a, T, const N: usize> RcuCell<'a, T, N> {
    /// A cell publishing `initial`, protected by the read sections of `rcu`.
    pub fn new(rcu: &'a Rcu<N>, initial: &'a mut T) -> Self {
        RcuCell {
            rcu,
            ptr: AtomicPtr::new(initial),
            _owns: PhantomData,
        }
    }

    /// The current value, valid for the guard's section.
    ///
    /// # Panics
    /// If `guard` belongs to another domain than the cell's: such a guard does not keep
    /// the value alive, and returning a reference would be unsound. This is a
    /// programming error with no sound fallback, like a `RefCell` borrow conflict.
    #[inline]
    pub fn load<'g>(&'g self, guard: &'g Guard<'_, '_, N>) -> &'g T {
        assert!(
            core::ptr::eq(guard.domain(), self.rcu),
            "rcuref: RcuCell::load with a guard of another RCU domain"
        );
        let p = self.ptr.load(Ordering::Acquire);
        // SAFETY: by the type invariant `p` points to a live `T` that only readers
        // access while published; the guard's section (same domain, checked above)
        // delays any hand-back of `p` until after the section. The returned lifetime is
        // bounded by both the guard borrow (the section) and the cell borrow (so by 'a,
        // the storage's own borrow: the reference cannot outlive the storage;
        // tests/ui/cell_ref_outlives_cell.rs).
        unsafe { &*p }
    }

    /// Publishes `new` and retires the previous value; the old value comes back as
    /// `&'a mut T` from the [`Retired`] once a grace period has passed.
    pub fn replace(&self, new: &'a mut T) -> Retired<'a, T, N> {
        let old = self.ptr.swap(new, Ordering::AcqRel);
        let cookie = self.rcu.start_poll();
        // SAFETY: `ptr` is never null: it only ever holds references given to the cell.
        let old = unsafe { NonNull::new_unchecked(old) };
        Retired {
            rcu: self.rcu,
            old,
            cookie,
            _owns: PhantomData,
        }
    }
}

/// A value taken out of an [`RcuCell`] that readers may still be looking at.
///
/// # Invariants
/// `old` came from the cell's `&'a mut T` and is no longer published; readers that can
/// still see it are all in sections that `cookie`'s grace period waits for.
#[must_use = "a retired value is returned only after a grace period: call reclaim or try_reclaim"]
pub struct Retired<'a, T, const N: usize> {
    rcu: &'a Rcu<N>,
    old: NonNull<T>,
    cookie: GpCookie,
    _owns: PhantomData<&'a mut T>,
}

impl<'a, T, const N: usize> Retired<'a, T, N> {
    /// The value back, if its grace period has ended; otherwise `self`. Never blocks.
    pub fn try_reclaim(self) -> Result<&'a mut T, Self> {
        if self.rcu.poll(self.cookie) {
            // SAFETY: by the type invariant the value is unpublished, and the grace
            // period has ended, so no read section can still hold a reference to it:
            // this is now the only reference.
            Ok(unsafe { &mut *self.old.as_ptr() })
        } else {
            Err(self)
        }
    }

    /// Waits (through `reader`, calling `wait` between attempts) for the grace period
    /// and returns the value.
    ///
    /// # Errors
    /// [`RcuError::InReadSection`] (with `self` back) if `reader` is in a read section.
    ///
    /// # Panics
    /// If `reader` belongs to another domain than the cell's.
    pub fn reclaim(
        self,
        reader: &mut Reader<'_, N>,
        mut wait: impl FnMut(),
    ) -> Result<&'a mut T, (RcuError, Self)> {
        assert!(
            core::ptr::eq(reader.domain(), self.rcu),
            "rcuref: Retired::reclaim with a reader of another RCU domain"
        );
        if reader.in_read_section() {
            debug_assert!(
                false,
                "rcuref: reclaim() inside a read section would wait for itself forever"
            );
            return Err((RcuError::InReadSection, self));
        }
        let mut me = self;
        loop {
            match me.try_reclaim() {
                Ok(v) => return Ok(v),
                Err(back) => me = back,
            }
            wait();
        }
    }
}
