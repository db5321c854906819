//! The domain: its reader slots, its grace-period words, and how it is made.

use super::encoding::{phase, CLAIMED};
use crate::pad::Line;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed, Release};

/// An RCU domain with `N` reader slots (threads, harts, interrupt priority levels).
///
/// Usable in a `static` (`Rcu::new` is `const`). See the [module docs](crate::rcu) for
/// the algorithm and its guarantees.
pub struct Rcu<const N: usize> {
    // INVARIANTS:
    // * `slots[i]` is 0 while free; it is claimed by the one compare-exchange from 0 to
    //   CLAIMED that succeeds (a `Reader`), and from then on written only by that reader:
    //   CLAIMED when offline, else CLAIMED | phase << 1 | nesting * ONE_LEVEL. The first
    //   `dedicated` slots are CLAIMED from the start and never freed (`ContextReader`s).
    // * `gp` moves only forwards, one step per successful compare-exchange in
    //   `gp::advance` (wrapping at `mask()`); an odd value means a wait is in progress. A
    //   wait step succeeds only from the value its scan was taken at.
    // * `stepping[h]` counts the contexts inside `advance` whose snapshot of `gp` lies in
    //   half `h` of the range; `gp` never enters half `h` while it is non-zero, so no
    //   snapshot survives a whole lap (the lap guard).
    // * `sleepers` is 1 from a wait's announcement that it may sleep
    //   (`Waiting::sleep`) until an unlock takes it back to 0 to call the wake hook
    //   (once for every wait asleep: the hook wakes them all, and each announces again
    //   before it sleeps again); `wake` is null or a `fn()` the binary installed
    //   (`set_wake_hook`). Nothing about safety depends on either: they only decide how
    //   soon a sleeping wait runs again.
    // * `phase` is 0 or 1: the phase outermost locks record. Wait steps set it to
    //   `phase(g)` when it differs, so it changes twice per grace period. Nothing about
    //   safety depends on its value (module docs, "The phase word"), only how soon waits
    //   finish, so a late store from a stopped driver is harmless.
    // * `fences` (asymmetric-fence builds): the heavy-fence marks, whose invariants
    //   `heavy::FenceMarks` states: `returned` names no wait, or a wait of the counter's
    //   current lap of its half whose heavy fence has returned (forgotten before every
    //   step into a half); `begun` is a hint with no bearing on safety.
    // Layout: `phase` and `sleepers` (read by every outermost lock and unlock, written
    // twice per grace period and when a wait starts or stops sleeping),
    // `gp` (written four times per grace period, read only by drivers), `stepping`
    // (written by every poll) and each slot (written by its reader) on cache lines of
    // their own where padding is on (`crate::pad`).
    pub(super) phase: Line<ReadMostly>,
    pub(super) gp: Line<AtomicU32>,
    pub(super) stepping: Line<[AtomicU32; 2]>,
    #[cfg(rcuref_heavy)]
    pub(super) fences: Line<super::heavy::FenceMarks>,
    /// A process-unique number for the debug section table (see `section_key`).
    #[cfg(rcuref_section_table)]
    serial: super::sections::Serial,
    pub(super) slots: [Line<AtomicU32>; N],
    /// How many of the first slots are dedicated to `ContextReader`s.
    pub(super) dedicated: usize,
}

/// What every outermost lock and unlock reads and little else writes: the phase word,
/// and whether a wait sleeps (one cache line where padding is on).
pub(super) struct ReadMostly {
    pub(super) phase: AtomicU32,
    /// 1 while a wait may be asleep and no unlock has called the wake hook for it yet
    /// (`Waiting::sleep`).
    pub(super) sleepers: AtomicU32,
    /// Null, or the `fn()` that wakes this domain's sleeping waits (`set_wake_hook`).
    pub(super) wake: crate::sync::AtomicPtr<()>,
}

impl<const N: usize> Rcu<N> {
    /// Installs (or, with `None`, removes) the function that wakes this domain's
    /// sleeping waits: a reader's outermost unlock that finds a wait asleep
    /// ([`Waiting::sleep`](super::Waiting::sleep)) calls it, from the reader's context
    /// (an interrupt handler's too: make it safe there, short, never blocking). It
    /// should wake every sleeping wait of the domain (they re-check and sleep again if
    /// their grace period is not over): `rcu::std_wake` with feature `std`, an RTOS's
    /// notify-from-ISR, a `sev`.
    pub fn set_wake_hook(&self, wake: Option<fn()>) {
        let p = wake.map_or(core::ptr::null_mut(), |f| f as *mut ());
        self.phase.0.wake.store(p, Release);
    }

    /// Installs `wake` as the wake hook if the domain has none (`std_sleeping`).
    #[cfg(all(feature = "std", not(loom)))]
    pub(super) fn wake_hook_or(&self, wake: fn()) {
        let _ = self.phase.0.wake.compare_exchange(
            core::ptr::null_mut(),
            wake as *mut (),
            Release,
            Relaxed,
        );
    }

    /// A reader left its outermost section, whose slot word was `v`: wake the sleeping
    /// waits, if any, and if this section may be one they wait for. One relaxed load of
    /// a read-mostly word and a branch not taken when nobody sleeps.
    #[inline(always)]
    pub(super) fn wake_sleepers(&self, v: u32) {
        if self.phase.0.sleepers.load(Relaxed) != 0 {
            self.wake_for(v);
        }
    }

    /// A wait sleeps: a section that began in the phase the readers record now began
    /// after the wait's flip and holds no wait up, so it sends no wake (with more
    /// readers than cores, every unlock of a running reader woke the writer to find the
    /// descheduled one still inside: a FreeRTOS writer slept 92,724 times in a run and
    /// its readers made 40% of their sections). A phase word a stopped driver has not
    /// yet set makes an unlock skip a wake it owed: the sleep's bound covers it.
    #[cold]
    #[inline(never)]
    fn wake_for(&self, v: u32) {
        divert!(WakeOnEveryUnlock => self.call_wake_hook());
        if super::encoding::phase_of(v) == self.phase.0.phase.load(Relaxed) {
            return;
        }
        self.call_wake_hook();
    }

    /// Any context: wake the sleeping waits, if any (a barrier's wait for a callback
    /// another context ran).
    #[inline(always)]
    pub(super) fn wake_all_sleepers(&self) {
        if self.phase.0.sleepers.load(Relaxed) != 0 {
            self.call_wake_hook();
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn call_wake_hook(&self) {
        // Take the announcement back first: only one unlock calls the hook for it
        // (the others, and the unlocks of sections the hook itself runs, find 0: a
        // hook that reads the domain does not re-enter itself,
        // `a_wake_hook_that_reads_its_domain_runs_once`).
        if self.phase.0.sleepers.swap(0, Acquire) == 0 {
            return;
        }
        let p = self.phase.0.wake.load(Acquire);
        if !p.is_null() {
            // SAFETY: `wake` only ever holds null or a pointer made from a `fn()` in
            // `set_wake_hook`; function and data pointers have the same size and
            // representation on every target this crate supports (as in `log.rs`).
            let f: fn() = unsafe { core::mem::transmute::<*mut (), fn()>(p) };
            f();
        }
    }

    /// Announces a wait that may sleep (`Waiting::sleep`): the next outermost unlock
    /// calls the wake hook.
    pub(super) fn announce_sleep(&self) {
        self.phase.0.sleepers.swap(1, crate::sync::Ordering::SeqCst);
    }

    const_fn! {
        /// A domain with all `N` slots free, usable in a `static`.
        pub const fn new() -> Self {
            Self::with_dedicated(0)
        }
    }

    const_fn! {
        /// A domain whose first `dedicated` slots are reserved for [`ContextReader`]s (one
        /// per CPU, or per interrupt priority level that reads; see
        /// [`context_reader`](Self::context_reader) and
        /// [`context_readers`](Self::context_readers));
        /// [`reader`](Self::reader) and [`with_reader`](Self::with_reader) use the rest. A
        /// `dedicated` above `N` fails at compile time in a `static`.
        ///
        /// [`ContextReader`]: super::ContextReader
        pub const fn with_dedicated(dedicated: usize) -> Self {
            assert!(dedicated <= N, "more dedicated slots than slots");
            let mut rcu = Self::new_at(0);
            let mut i = 0;
            while i < dedicated {
                // INVARIANT: a dedicated slot is claimed from the start and never freed,
                // so `reader` cannot take it.
                rcu.slots[i] = Line(AtomicU32::new(CLAIMED));
                i += 1;
            }
            rcu.dedicated = dedicated;
            rcu
        }
    }

    const_fn! {
        /// A domain whose grace-period counter starts at `gp` (tests of the wrap-around;
        /// in test builds that shrink the counter, `gp` must fit its width).
        #[doc(hidden)]
        pub const fn new_at(gp: u32) -> Self {
            let g = gp & !1;
            Rcu {
                phase: Line(ReadMostly {
                    phase: AtomicU32::new(phase(g)),
                    sleepers: AtomicU32::new(0),
                    wake: crate::sync::AtomicPtr::new(core::ptr::null_mut()),
                }),
                gp: Line(AtomicU32::new(g)),
                stepping: Line([AtomicU32::new(0), AtomicU32::new(0)]),
                #[cfg(rcuref_heavy)]
                fences: Line(super::heavy::FenceMarks::new()),
                #[cfg(rcuref_section_table)]
                serial: super::sections::Serial::new(),
                slots: array_of!(Line(AtomicU32::new(0)); N),
                dedicated: 0,
            }
        }
    }

    /// The raw grace-period counter (tests and diagnostics).
    #[doc(hidden)]
    pub fn gp_counter(&self) -> u32 {
        self.gp.0.load(Relaxed)
    }

    /// How many reader slots are claimed right now, dedicated ones included
    /// (diagnostics).
    pub fn reader_count(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.0.load(Relaxed) & CLAIMED != 0)
            .count()
    }

    /// The number of reader slots, `N`.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// How many of the first slots are dedicated to `ContextReader`s
    /// ([`with_dedicated`](Self::with_dedicated)).
    pub const fn dedicated(&self) -> usize {
        self.dedicated
    }

    /// The address of slot `i`'s word, which names the slot to
    /// `mutants::set_interrupt` (test builds only).
    #[cfg(rcuref_hooks)]
    #[doc(hidden)]
    pub fn slot_addr(&self, i: usize) -> usize {
        &self.slots[i].0 as *const AtomicU32 as usize
    }

    /// The domain's identity for the debug section table: its address and a number
    /// unique in the process (so a domain at the address of a freed one, whose leaked
    /// sections a thread may still count, is a different domain). Both only in builds
    /// that track sections.
    #[inline(always)]
    pub(super) fn section_key(&self) -> (usize, u32) {
        #[cfg(rcuref_section_table)]
        let id = self.serial.get();
        #[cfg(not(rcuref_section_table))]
        let id = 0;
        (self as *const Self as usize, id)
    }
}

#[cfg(not(loom))]
impl<const N: usize> Default for Rcu<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> core::fmt::Debug for Rcu<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Rcu")
            .field("slots", &N)
            .field("dedicated", &self.dedicated)
            .field("readers", &self.reader_count())
            .field("gp", &self.gp_counter())
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl<const N: usize> defmt::Format for Rcu<N> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Rcu {{ slots: {=usize}, readers: {=usize}, gp: {=u32} }}",
            N,
            self.reader_count(),
            self.gp_counter()
        )
    }
}
#[cfg(all(test, not(loom)))]
mod layout_tests {
    use super::*;

    fn line_of<T>(p: &T) -> usize {
        p as *const T as usize / core::mem::align_of::<Line<u8>>()
    }

    /// Where padding is on, every reader slot, the phase word that readers read, the
    /// counter and the registration counters that every poll writes each have a cache
    /// line of their own.
    #[test]
    fn hot_words_sit_on_their_own_lines() {
        let rcu: Rcu<4> = Rcu::new();
        let mut lines: std::vec::Vec<usize> = rcu.slots.iter().map(|s| line_of(&s.0)).collect();
        lines.push(line_of(&rcu.phase.0.phase));
        assert_eq!(line_of(&rcu.phase.0.phase), line_of(&rcu.phase.0.sleepers));
        lines.push(line_of(&rcu.gp.0));
        lines.push(line_of(&rcu.stepping.0));
        lines.sort_unstable();
        lines.dedup();
        if crate::CACHE_PADDED {
            assert!(core::mem::align_of::<Line<u8>>() >= 64);
            assert_eq!(lines.len(), 7, "two hot words share a cache line");
        } else {
            assert_eq!(
                core::mem::size_of::<Line<AtomicU32>>(),
                4,
                "padding without asking"
            );
            assert_eq!(
                core::mem::size_of::<Line<ReadMostly>>(),
                8 + core::mem::size_of::<usize>(),
                "padding without asking"
            );
        }
    }
}
