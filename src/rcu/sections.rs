//! The debug section table: in debug builds with feature `std`, how many read sections
//! each thread has open in each domain, so that a blocking wait from inside one is an
//! error instead of a deadlock. Nothing in other builds.

/// Debug builds with feature `std`: how many read sections the current thread has open
/// in each domain, so a blocking wait from inside one (of any reader of that domain) is
/// an error instead of a deadlock. Keyed by the domain's address and process-unique
/// number; up to `DOMAINS` domains per thread are tracked at once (a thread inside
/// sections of more domains than that goes undetected in the extra ones). A diagnostic,
/// not part of any safety argument: it is not reentrant against a signal handler that
/// reads on the same thread, and an outermost guard that such a handler leaks leaves
/// the thread's count raised, so later waits on that thread are refused with
/// `InReadSection` (a refusal, never a missed section of the slot itself).
#[cfg(all(rcuref_section_table, debug_assertions))]
mod open_sections {
    use core::cell::Cell;
    use portable_atomic::{AtomicU32, Ordering::Relaxed};

    const DOMAINS: usize = 4;

    /// A domain's process-unique number, given out on first use.
    pub(crate) struct Serial(AtomicU32);

    impl Serial {
        pub(crate) const fn new() -> Self {
            Serial(AtomicU32::new(0))
        }

        pub(crate) fn get(&self) -> u32 {
            static NEXT: AtomicU32 = AtomicU32::new(1);
            let v = self.0.load(Relaxed);
            if v != 0 {
                return v;
            }
            let mine = NEXT.fetch_add(1, Relaxed);
            match self.0.compare_exchange(0, mine, Relaxed, Relaxed) {
                Ok(_) => mine,
                Err(theirs) => theirs,
            }
        }
    }

    type Key = (usize, u32);

    std::thread_local! {
        static OPEN: [Cell<(Key, u32)>; DOMAINS] =
            const { [const { Cell::new(((0, 0), 0)) }; DOMAINS] };
    }

    pub(crate) fn entered(domain: Key) {
        OPEN.with(|t| {
            if let Some(e) = t.iter().find(|e| e.get().0 == domain && e.get().1 != 0) {
                e.set((domain, e.get().1.saturating_add(1)));
            } else if let Some(e) = t.iter().find(|e| e.get().1 == 0) {
                e.set((domain, 1));
            }
        });
    }

    pub(crate) fn left(domain: Key) {
        OPEN.with(|t| {
            if let Some(e) = t.iter().find(|e| e.get().0 == domain && e.get().1 != 0) {
                e.set((domain, e.get().1 - 1));
            }
        });
    }

    pub(crate) fn any(domain: Key) -> bool {
        OPEN.with(|t| t.iter().any(|e| e.get().0 == domain && e.get().1 != 0))
    }
}

/// Elsewhere: nothing to track (see the `std` version above).
#[cfg(not(all(rcuref_section_table, debug_assertions)))]
mod open_sections {
    #[inline(always)]
    pub(crate) fn entered(_: (usize, u32)) {}
    #[inline(always)]
    pub(crate) fn left(_: (usize, u32)) {}
    #[inline(always)]
    pub(crate) fn any(_: (usize, u32)) -> bool {
        false
    }
}

#[cfg(all(rcuref_section_table, debug_assertions))]
pub(crate) use open_sections::Serial;
pub(crate) use open_sections::{any, entered, left};
