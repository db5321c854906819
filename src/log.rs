//! Warnings: counted, reported once per kind, observable.
//!
//! The kernel prints `WARN_ONCE` for saturation, an imbalanced put and an `inc` on a
//! released count. We count every occurrence, log the first of each kind with
//! `defmt::warn!` (feature `defmt`; silent otherwise), and call an optional hook that a
//! test or an embedding kernel installs with [`set_warning_hook`].
//!
//! These statics deliberately use portable-atomic directly, not `crate::sync`: they are
//! diagnostics, not part of any synchronisation protocol, and keeping them out of loom
//! keeps the models small.

use portable_atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// Something a caller did that the counter survived but that is almost certainly a bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Warning {
    /// The count reached the saturation zone; the object is leaked rather than freed.
    Saturated,
    /// A `put` on a count that was already released (more puts than references).
    ImbalancedPut,
    /// An `inc` on a released count (an `inc` requires a reference already held).
    IncOnReleased,
    /// A callback queued with a key that is already queued (`CallQueue::call_keyed`,
    /// feature `debug-callbacks`): refused, the queue unchanged.
    QueuedTwice,
}

const KINDS: usize = 4;

impl Warning {
    const fn index(self) -> usize {
        match self {
            Warning::Saturated => 0,
            Warning::ImbalancedPut => 1,
            Warning::IncOnReleased => 2,
            Warning::QueuedTwice => 3,
        }
    }
}

static COUNTS: [AtomicUsize; KINDS] = [const { AtomicUsize::new(0) }; KINDS];
static LOGGED: [AtomicBool; KINDS] = [const { AtomicBool::new(false) }; KINDS];
/// Holds either null or a `fn(Warning)` cast to a pointer (see [`set_warning_hook`]).
static HOOK: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

/// How many times `kind` has occurred since the program started (all counters together).
pub fn warning_count(kind: Warning) -> usize {
    COUNTS[kind.index()].load(Ordering::Relaxed)
}

/// Installs (or, with `None`, removes) a function called on *every* warning, from the
/// context that caused it — possibly an interrupt handler, so keep it short and
/// non-blocking. Replaces any earlier hook.
pub fn set_warning_hook(hook: Option<fn(Warning)>) {
    let p = match hook {
        Some(f) => f as *mut (),
        None => core::ptr::null_mut(),
    };
    HOOK.store(p, Ordering::Release);
}

#[cold]
pub(crate) fn warn(kind: Warning) {
    COUNTS[kind.index()].fetch_add(1, Ordering::Relaxed);
    if !LOGGED[kind.index()].swap(true, Ordering::Relaxed) {
        #[cfg(feature = "defmt")]
        defmt::warn!("rcuref: {} (reported once)", kind);
    }
    let p = HOOK.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: `HOOK` only ever holds null or a pointer made from a `fn(Warning)` in
        // `set_warning_hook`; function pointers and data pointers have the same size and
        // representation on every target this crate supports.
        let f: fn(Warning) = unsafe { core::mem::transmute::<*mut (), fn(Warning)>(p) };
        f(kind);
    }
}
