//! The one error shape of the crate.
//!
//! * Every fallible operation reports an [`Error`].
//! * An operation that was handed something to keep (a value to store, a retired value
//!   to wait for) and could not go ahead gives it back: its error is a [`Refused<T>`],
//!   the `Error` and the value.
//! * Polling methods (`try_reclaim`, `GpCookie::poll`) are not errors when the answer is
//!   "not yet": `try_reclaim` returns `Err(self)`, the way `Arc::try_unwrap` does, and
//!   `poll` returns `false`.
//!
//! Nothing in the library panics on a condition its caller can cause, with one
//! documented exception kept for ergonomics: `RcuCell::load` with a guard of another
//! domain (there is no sound value to return; `RcuCell::try_load` reports it instead).

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// Every reader slot of the domain is taken.
    NoFreeSlot,
    /// A blocking wait was asked for from inside a read section: it would wait for
    /// itself forever. Reported when the waiting reader's own section is open (a leaked
    /// guard) and, in debug builds with feature `std`, when another reader of the same
    /// domain on the calling thread is inside a section.
    InReadSection,
    /// A reader, cookie or guard of one domain was used with another domain.
    OtherDomain,
    /// No room: every slot of the pool, or every place of the queue, is in use.
    Full,
    /// A wait was given up by its wait hook before the grace period ended.
    GaveUp,
    /// Another context is doing the same update right now (writers of an `RcuValue`
    /// exclude each other without waiting).
    Busy,
    /// A section was left that was never entered: an unlock without a lock
    /// ([`ContextReader::raw_unlock`](crate::rcu::ContextReader::raw_unlock)).
    NotInSection,
    /// A section nested as deep as its slot can count (about 2^30 levels): nothing
    /// entered ([`ContextReader::raw_lock`](crate::rcu::ContextReader::raw_lock)).
    TooDeep,
    /// A setting that is fixed once decided was asked to change afterwards: a heavy
    /// fence installed after the read side's fence mode was decided without one
    /// ([`rcu::heavy::install`](crate::rcu::heavy), feature `auto-fence`).
    Decided,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Error::NoFreeSlot => "every RCU reader slot is taken",
            Error::InReadSection => "a grace period cannot be waited for inside a read section",
            Error::OtherDomain => "an object of another RCU domain was used",
            Error::Full => "no room left",
            Error::GaveUp => "the wait was given up before the grace period ended",
            Error::Busy => "another context is updating it right now",
            Error::NotInSection => "an unlock without a lock: the context is in no read section",
            Error::TooDeep => "the read section is nested as deep as its slot can count",
            Error::Decided => "too late: that was decided already and cannot change",
        })
    }
}

impl core::error::Error for Error {}

/// An operation that could not go ahead, and the value it was given, handed back.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Refused<T> {
    /// Why.
    pub error: Error,
    /// What the caller handed over, unchanged.
    pub value: T,
}

impl<T> Refused<T> {
    pub(crate) const fn new(error: Error, value: T) -> Self {
        Refused { error, value }
    }

    /// The value handed back.
    pub fn into_value(self) -> T {
        self.value
    }
}

impl<T> core::fmt::Debug for Refused<T> {
    // The value is not shown: it need not be `Debug`, and it is the caller's own.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Refused")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<T> core::fmt::Display for Refused<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(&self.error, f)
    }
}

impl<T> core::error::Error for Refused<T> {}

#[cfg(feature = "defmt")]
impl<T> defmt::Format for Refused<T> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "Refused({})", self.error)
    }
}
