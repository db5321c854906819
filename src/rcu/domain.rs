//! The domain, its reader slots, guards and the grace-period state machine.

use super::ops::{self, online, phase_of, CLAIMED, ONE_LEVEL, STICKY};
use crate::pad::Line;
#[cfg(any(loom, rcuref_mutants))]
use crate::sync::AtomicBool;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed, Release};
use core::marker::PhantomData;
use core::ops::ControlFlow;

use crate::error::Error;

// ---- the grace-period counter --------------------------------------------------------

/// Steps of `gp` per grace period: flip, wait, flip, wait.
const STEPS_PER_GP: u32 = 4;
/// A cookie is at most this many steps ahead of `gp` (a wait in progress adds one), and
/// `gp` never moves backwards, so a target further ahead than this is in the past.
const MAX_AHEAD: u32 = STEPS_PER_GP + 1;
/// Attempts one `poll` makes at most: a whole grace period from any point, with room for
/// compare-exchanges lost to other drivers (each of which is progress too). This is what
/// keeps `poll` from ever looping for long, whatever cookie it is given.
const MAX_TRIES: u32 = 2 * STEPS_PER_GP;

/// The counter's width as a mask: all 32 bits, except in test builds that shrink it to
/// make laps short (`mutants::set_gp_bits`).
#[inline(always)]
fn mask() -> u32 {
    #[cfg(any(loom, rcuref_mutants))]
    let m = crate::mutants::gp_mask();
    #[cfg(not(any(loom, rcuref_mutants)))]
    let m = u32::MAX;
    m
}

/// `g` advanced by `k` steps, wrapping at the counter's width.
#[inline(always)]
fn plus(g: u32, k: u32) -> u32 {
    g.wrapping_add(k) & mask()
}

/// The phase readers record at step `g` of the counter: 0, 1, 1, 0 for steps 0..4.
#[inline(always)]
const fn phase(g: u32) -> u32 {
    (g.wrapping_add(1) >> 1) & 1
}

/// Whether the counter at `g` has reached `target`: the target is not 1 to `MAX_AHEAD`
/// steps ahead. (A target further ahead can only be from a past lap, or not a cookie.)
#[inline(always)]
fn reached(g: u32, target: u32) -> bool {
    let ahead = target.wrapping_sub(g) & mask();
    ahead == 0 || ahead > MAX_AHEAD
}

/// Which half of the counter's range `g` lies in (see the lap guard in `advance`).
#[inline(always)]
fn half(g: u32) -> usize {
    usize::from(g & mask() > mask() >> 1)
}

/// An RCU domain with `N` reader slots (threads, harts, interrupt priority levels).
///
/// Usable in a `static` (`Rcu::new` is `const`). See the [module docs](crate::rcu) for
/// the algorithm and its guarantees.
pub struct Rcu<const N: usize> {
    // INVARIANTS:
    // * `slots[i]` is 0 while free; it is claimed by the one compare-exchange from 0 to
    //   CLAIMED that succeeds (a `Reader`), and from then on written only by that reader:
    //   CLAIMED when offline, else CLAIMED | phase << 1 | nesting * ONE_LEVEL.
    // * `gp` moves only forwards, one step per successful compare-exchange in `advance`
    //   (wrapping at `mask()`); an odd value means a wait is in progress. A wait step
    //   succeeds only from the value its scan was taken at.
    // * `stepping[h]` counts the contexts inside `advance` whose snapshot of `gp` lies in
    //   half `h` of the range; `gp` never enters half `h` while it is non-zero, so no
    //   snapshot survives a whole lap (the lap guard).
    // * `phase` is 0 or 1: the phase outermost locks record. Wait steps set it to
    //   `phase(g)` when it differs, so it changes twice per grace period. Nothing about
    //   safety depends on its value (module docs, "The phase word"), only how soon waits
    //   finish, so a late store from a stopped driver is harmless.
    // Layout: `phase` (read by every outermost lock, written twice per grace period),
    // `gp` (written four times per grace period, read only by drivers), `stepping`
    // (written by every poll) and each slot (written by its reader) on cache lines of
    // their own where padding is on (`crate::pad`).
    phase: Line<AtomicU32>,
    gp: Line<AtomicU32>,
    stepping: Line<[AtomicU32; 2]>,
    /// The try-lock of the old design, kept only as a broken variant (`WriterLock`).
    #[cfg(any(loom, rcuref_mutants))]
    writer: AtomicBool,
    /// A process-unique number for the per-thread section tracking (see `section_key`).
    #[cfg(all(feature = "std", debug_assertions, not(loom)))]
    serial: open_sections::Serial,
    slots: [Line<AtomicU32>; N],
}

impl<const N: usize> Rcu<N> {
    /// A domain with all `N` slots free, usable in a `static`.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self::new_at(0)
    }

    const_fn! {
        /// A domain whose first `dedicated` slots are reserved for [`ContextReader`]s (one
        /// per CPU, or per interrupt priority level that reads);
        /// [`register`](Self::register) and [`read`](Self::read) use the rest. A
        /// `dedicated` above `N` fails at compile time in a `static`.
        pub const fn with_dedicated(dedicated: usize) -> Self {
            assert!(dedicated <= N, "more dedicated slots than slots");
            let mut rcu = Self::new();
            let mut i = 0;
            while i < dedicated {
                // INVARIANT: a dedicated slot is claimed from the start and never freed,
                // so `register` cannot take it.
                rcu.slots[i] = Line(AtomicU32::new(CLAIMED));
                i += 1;
            }
            rcu
        }
    }

    /// The reader of dedicated slot `slot`, for one context: usable in a `static`.
    ///
    /// # Safety
    /// * `slot` is below the `dedicated` count this domain was created with
    ///   ([`with_dedicated`](Self::with_dedicated));
    /// * every `ContextReader` of that slot (there may be copies, and several calls) is
    ///   used from one context only: one flow of control (one CPU's idle loop, one
    ///   kernel thread, one interrupt priority level), **plus** the interrupt or trap
    ///   handlers that preempt that context on the same core. Handlers nest strictly: a
    ///   handler runs to completion before the code it interrupted resumes, which is
    ///   what makes the slot's load-then-store exact. Two threads that a scheduler
    ///   switches between, even on one CPU, do not nest strictly (one can be preempted
    ///   between its load and its store while the other changes the slot and keeps
    ///   running): give each its own slot, or make the switch impossible inside a
    ///   section (a per-CPU reader used with preemption disabled, as the kernel does);
    /// * a handler that uses it leaves every section it entered before it returns (it
    ///   holds no guard across its return; leaking one with `mem::forget` is allowed:
    ///   that level is then lost, which is harmless).
    ///
    /// Two contexts that could run at the same time on different cores, or a context
    /// that migrates between cores in the middle of a section, break the slot's
    /// single-writer protocol: memory safety of the domain's readers then fails.
    pub const unsafe fn context_reader(&self, slot: usize) -> ContextReader<'_, N> {
        assert!(slot < N, "no such slot");
        // INVARIANT: the caller promised the contract above.
        ContextReader {
            at: At { rcu: self, slot },
        }
    }

    /// A domain whose grace-period counter starts at `gp` (tests of the wrap-around).
    #[cfg(not(loom))]
    #[doc(hidden)]
    pub const fn new_at(gp: u32) -> Self {
        Rcu {
            phase: Line(AtomicU32::new(phase(gp & !1))),
            gp: Line(AtomicU32::new(gp & !1)),
            stepping: Line([const { AtomicU32::new(0) }; 2]),
            #[cfg(rcuref_mutants)]
            writer: AtomicBool::new(false),
            #[cfg(all(feature = "std", debug_assertions))]
            serial: open_sections::Serial::new(),
            slots: [const { Line(AtomicU32::new(0)) }; N],
        }
    }

    /// A domain (loom build: not `const`).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self::new_at(0)
    }

    /// A domain starting at `gp` (loom build: not `const`).
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn new_at(gp: u32) -> Self {
        Rcu {
            phase: Line(AtomicU32::new(phase(gp & !1 & mask()))),
            gp: Line(AtomicU32::new(gp & !1 & mask())),
            stepping: Line(core::array::from_fn(|_| AtomicU32::new(0))),
            writer: AtomicBool::new(false),
            slots: core::array::from_fn(|_| Line(AtomicU32::new(0))),
        }
    }

    /// Claims a reader slot for the calling context (a thread, a hart, an interrupt
    /// priority level). The slot is freed when the [`Reader`] is dropped.
    ///
    /// # Errors
    /// [`Error::NoFreeSlot`] when all `N` slots are claimed.
    pub fn register(&self) -> Result<Reader<'_, N>, Error> {
        for (i, s) in self.slots.iter().enumerate() {
            if ops::claim(&s.0) {
                // INVARIANT: i < N (an index of `slots`); our exchange claimed slot i, so
                // we are its only writer from now on; it is offline (CLAIMED).
                return Ok(Reader {
                    at: At { rcu: self, slot: i },
                    _not_send: PhantomData,
                });
            }
        }
        Err(Error::NoFreeSlot)
    }

    /// Runs `f` in a read section on a slot claimed for the call: for interrupt
    /// handlers and other short-lived contexts that hold no [`Reader`].
    ///
    /// # Errors
    /// [`Error::NoFreeSlot`] when all `N` slots are claimed; `f` does not run.
    pub fn read<R>(&self, f: impl FnOnce(&Guard<'_, '_, N>) -> R) -> Result<R, Error> {
        let reader = self.register()?;
        let guard = reader.lock();
        Ok(f(&guard))
    }

    /// Takes a cookie that is done once every read section running now has ended.
    /// Never blocks. Call it after unpublishing what you will reclaim.
    pub fn start_poll(&self) -> GpCookie<'_, N> {
        let g = ops::cookie_snapshot(&self.gp.0);
        // A wait already in progress (odd g) started before us and does not count.
        // (The one-flip variant counts a grace period as one flip and one wait.)
        let steps = if mutant!(SingleFlip) {
            STEPS_PER_GP / 2
        } else {
            STEPS_PER_GP
        };
        let in_progress = if mutant!(CookieCountsWaitInProgress) {
            0
        } else {
            g & 1
        };
        GpCookie {
            rcu: self,
            target: plus(g, steps + in_progress),
        }
    }

    /// A cookie back from [`GpCookie::into_raw`], to keep one in an atomic (an
    /// interrupt handler's state, say).
    ///
    /// **The number must reach this context with happens-before** from the context that
    /// took the cookie: the same context (or an interrupt handler of the same core), a
    /// `Release` store and an `Acquire` load of the atomic that carries it, a lock. A
    /// number read with a relaxed load on another core can meet an older view of the
    /// counter than the one the cookie was taken at, and such a cookie may be answered
    /// done before its grace period has ended (`tests/loom_rcu.rs`,
    /// `a_cookie_moved_without_happens_before_can_be_answered_early`, found by review).
    ///
    /// A number that did not come from a cookie of this domain answers about an
    /// arbitrary point of this domain's grace-period sequence: nothing unsafe follows
    /// inside this crate, and [`GpCookie::poll`] stays bounded, but the answer means
    /// nothing to the caller.
    pub fn cookie_from_raw(&self, raw: u32) -> GpCookie<'_, N> {
        GpCookie {
            rcu: self,
            target: raw & mask(),
        }
    }

    /// The address of slot `i`'s word, which names the slot to
    /// `mutants::set_interrupt` (test builds only).
    #[cfg(any(loom, rcuref_mutants))]
    #[doc(hidden)]
    pub fn slot_addr(&self, i: usize) -> usize {
        &self.slots[i].0 as *const AtomicU32 as usize
    }

    /// The raw grace-period counter (tests and diagnostics).
    #[doc(hidden)]
    pub fn gp_counter(&self) -> u32 {
        self.gp.0.load(Relaxed)
    }

    /// How many reader slots are claimed right now (diagnostics).
    pub fn readers(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.0.load(Relaxed) & CLAIMED != 0)
            .count()
    }

    /// The domain's identity for the per-thread section tracking: its address and a
    /// number unique in the process (so a domain at the address of a freed one, whose
    /// leaked sections a thread may still count, is a different domain). Both only in
    /// builds that track sections.
    #[inline(always)]
    fn section_key(&self) -> (usize, u32) {
        #[cfg(all(feature = "std", debug_assertions, not(loom)))]
        let id = self.serial.get();
        #[cfg(not(all(feature = "std", debug_assertions, not(loom))))]
        let id = 0;
        (self as *const Self as usize, id)
    }

    /// The number of reader slots, `N`.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Registers the caller as a driver in the half of the range `gp` is in, and returns
    /// that half and a snapshot of `gp` taken after the registration.
    fn enter(&self) -> (usize, u32) {
        let mut g = ops::counter_snapshot(&self.gp.0);
        loop {
            let h = half(g);
            #[cfg(all(rcuref_mutants, not(loom)))]
            crate::mutants::pause(crate::mutants::Point::GpEnterBeforeRegister);
            let now = ops::register_in_half(&self.stepping.0[h], &self.gp.0);
            if half(now) == h {
                return (h, now);
            }
            #[cfg(any(loom, rcuref_mutants))]
            if mutant!(RegisterWithoutRecheck) {
                return (h, now); // registered in a half the counter may have left
            }
            // `g` was from an earlier visit of that half: register again.
            ops::leave_half(&self.stepping.0[h]);
            g = now;
        }
    }

    /// One scan of the slots: (anyone online, anyone online with the phase before the
    /// flip that led to the wait at `g`).
    fn scan(&self, g: u32) -> (bool, bool) {
        let old = phase(g) ^ 1;
        let (mut any, mut old_online) = (false, false);
        for s in &self.slots {
            let v = ops::scan_slot(&s.0);
            if online(v) {
                any = true;
                old_online |= phase_of(v) == old;
            }
        }
        (any, old_online)
    }

    /// Advances `gp` towards `target` as far as the readers allow, at most `MAX_TRIES`
    /// attempts. Any number of contexts may run this at once: each step is a
    /// compare-exchange from the value the step was decided on, so a context stopped
    /// anywhere in here holds nobody up and can never complete a step on stale facts.
    pub(crate) fn advance(&self, target: u32) {
        #[cfg(any(loom, rcuref_mutants))]
        if mutant!(WriterLock) && self.writer.swap(true, Acquire) {
            return; // the old design: someone else is advancing it
        }
        let (mut reg, mut g) = Registration::new(self);
        for _ in 0..MAX_TRIES {
            if reached(g, target) {
                break;
            }
            if mutant!(BustedGracePeriod) {
                self.gp.0.store(target, Release);
                break;
            }
            let next = plus(g, 1);
            if g & 1 == 1 {
                // Readers entering from now on record the new phase. Written only when it
                // changes (twice per grace period), so readers' copies of the line stay
                // valid otherwise; a store that lands late (its driver was stopped) only
                // makes some wait last longer (module docs, "The phase word").
                ops::set_phase(&self.phase.0, phase(g));
            }
            if g & 1 == 1 || mutant!(StaleFastPath) {
                // A wait: every reader that could hold something unpublished before this
                // wait's flip is either seen by this scan or sees the unpublish (the fence
                // pairing in the module docs).
                ops::wait_fence();
                // Asymmetric mode: readers have only a compiler fence; make their cores
                // execute the barrier now (`heavy`'s module docs). A heavy fence that
                // panics leaves this call through `reg`'s drop, which leaves its half.
                #[cfg(all(rcuref_asymmetric_fence, not(loom)))]
                super::heavy::heavy_fence();
                #[cfg(all(rcuref_mutants, not(loom)))]
                crate::mutants::pause(crate::mutants::Point::GpBeforeScan(g));
                let (online, old_online) = self.scan(g);
                #[cfg(all(rcuref_mutants, not(loom)))]
                crate::mutants::pause(crate::mutants::Point::GpAfterScan);
                if mutant!(StaleFastPath) && !online {
                    // The old idle fast path: a store decided on a scan that may be stale
                    // by now, completing cookies taken after the scan.
                    self.gp.0.store(target, Release);
                    break;
                }
                if g & 1 == 1 && old_online {
                    #[cfg(any(loom, rcuref_mutants))]
                    if mutant!(RegistrationLeakedWhenBlocked) {
                        ops::register_in_half(&self.stepping.0[reg.half], &self.gp.0);
                    }
                    break; // a reader from before the flip is still inside
                }
            }
            // The lap guard: never enter a half in which a stopped context still holds a
            // snapshot, which it could otherwise meet again a lap later (ABA).
            if half(next) != reg.half
                && !mutant!(NoLapGuard)
                && ops::registered(&self.stepping.0[half(next)]) != 0
            {
                break;
            }
            g = match ops::step(&self.gp.0, g, next) {
                Ok(_) => next,
                Err(now) => now, // another driver moved it: progress too
            };
            if half(g) != reg.half {
                #[cfg(any(loom, rcuref_mutants))]
                if mutant!(StaleHalfRegistration) {
                    continue; // keeps the registration in the half it has left
                }
                #[cfg(any(loom, rcuref_mutants))]
                let stale = g;
                g = reg.follow();
                #[cfg(any(loom, rcuref_mutants))]
                if mutant!(StaleSnapshotAfterRegister) {
                    g = stale; // registered where `enter` read, stepping from before
                }
            }
        }
        reg.finish();
        #[cfg(any(loom, rcuref_mutants))]
        if mutant!(WriterLock) {
            self.writer.store(false, Release);
        }
    }
}

/// A driver's registration for the lap guard, in one half of the counter's range.
///
/// Left by [`finish`](Self::finish) when a call of `advance` ends, or by `Drop` when a
/// panic leaves it (a heavy fence that panics, say): a driver that died inside a step
/// must not pin its half, or the counter could never enter it again and no grace period
/// would end after one more half-lap (the second review's finding 2).
struct Registration<'d, const N: usize> {
    // INVARIANT: this context is counted once in `rcu.stepping[half]`, and `half` is the
    // half of the snapshot it steps from.
    rcu: &'d Rcu<N>,
    half: usize,
}

impl<'d, const N: usize> Registration<'d, N> {
    /// Registers in the half the counter is in; returns the registration and a snapshot
    /// of the counter taken after it (in that half).
    fn new(rcu: &'d Rcu<N>) -> (Self, u32) {
        let (half, g) = rcu.enter();
        (Registration { rcu, half }, g)
    }

    /// The counter moved to the other half: leave this one, register there, and return a
    /// fresh snapshot (in the half registered in).
    fn follow(&mut self) -> u32 {
        ops::leave_half(&self.rcu.stepping.0[self.half]);
        let (half, g) = self.rcu.enter();
        self.half = half;
        g
    }

    /// Leaves the half: the end of a call.
    fn finish(self) {
        let me = core::mem::ManuallyDrop::new(self);
        ops::leave_half(&me.rcu.stepping.0[me.half]);
    }
}

impl<const N: usize> Drop for Registration<'_, N> {
    /// Only reached when a panic unwinds out of a step (`finish` ends every call that
    /// returns).
    fn drop(&mut self) {
        if mutant!(RegistrationKeptOnPanic) {
            return;
        }
        ops::leave_half(&self.rcu.stepping.0[self.half]);
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
            .field("readers", &self.readers())
            .field("gp", &self.gp_counter())
            .finish()
    }
}

/// A point in a domain's grace-period sequence: done once every read section that was
/// running when it was taken ([`Rcu::start_poll`]) has ended.
///
/// A cookie knows its domain, so it can only ever answer about the grace periods it was
/// taken for.
#[derive(Clone, Copy)]
pub struct GpCookie<'d, const N: usize> {
    rcu: &'d Rcu<N>,
    target: u32,
}

impl<'d, const N: usize> GpCookie<'d, N> {
    /// Whether the grace period has ended, without advancing anything.
    pub fn is_done(&self) -> bool {
        // Acquire: pairs with the step that completed the grace period, which acquired
        // every reader's exit, so those sections happen before what the caller does next.
        reached(ops::counter_acquire(&self.rcu.gp.0), self.target)
    }

    /// Whether the grace period has ended. Never blocks: if it has not, it advances the
    /// grace-period machine as far as the readers allow (a bounded number of steps) and
    /// answers again. Any number of contexts may poll at once.
    pub fn poll(&self) -> bool {
        if self.is_done() {
            return true;
        }
        self.rcu.advance(self.target);
        self.is_done()
    }

    /// The domain this cookie belongs to.
    pub fn domain(&self) -> &'d Rcu<N> {
        self.rcu
    }

    /// The reader slots holding this grace period up right now: online with the phase
    /// that the current (or, between waits, the next) wait waits for. Empty once done.
    /// For stall reports: the slot identifies the context (its `Reader::slot`, or the
    /// dedicated slot of a `ContextReader`). A snapshot, slot by slot.
    pub fn holdouts(&self) -> Holdouts<'d, N> {
        let g = self.rcu.gp.0.load(Acquire);
        Holdouts {
            rcu: self.rcu,
            next: if reached(g, self.target) { N } else { 0 },
            waits_for: phase(g | 1) ^ 1,
        }
    }

    /// A future that completes once the grace period has ended (see
    /// [`rcu::wait`](super::wait): it re-polls, needing nothing from the executor).
    pub fn wait(self) -> super::wait::GracePeriod<'d, N> {
        super::wait::GracePeriod::new(self)
    }

    /// The cookie as a number, to keep it in an atomic; [`Rcu::cookie_from_raw`] of the
    /// same domain turns it back. Move it to another core with `Release`/`Acquire` (see
    /// there why).
    pub fn into_raw(self) -> u32 {
        self.target
    }
}

#[cfg(feature = "defmt")]
impl<const N: usize> defmt::Format for GpCookie<'_, N> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "GpCookie {{ target: {=u32}, done: {=bool} }}",
            self.target,
            self.is_done()
        )
    }
}

#[cfg(feature = "defmt")]
impl<const N: usize> defmt::Format for Rcu<N> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Rcu {{ slots: {=usize}, readers: {=usize}, gp: {=u32} }}",
            N,
            self.readers(),
            self.gp_counter()
        )
    }
}

#[cfg(feature = "defmt")]
impl<const N: usize> defmt::Format for Reader<'_, N> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Reader {{ slot: {=usize}, in_read_section: {=bool} }}",
            self.at.slot,
            self.in_read_section()
        )
    }
}

impl<const N: usize> PartialEq for GpCookie<'_, N> {
    fn eq(&self, other: &Self) -> bool {
        core::ptr::eq(self.rcu, other.rcu) && self.target == other.target
    }
}

impl<const N: usize> Eq for GpCookie<'_, N> {}

impl<const N: usize> core::fmt::Debug for GpCookie<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GpCookie")
            .field("target", &self.target)
            .field("done", &self.is_done())
            .finish()
    }
}

/// A reader slot and its domain: what `Reader`, `ContextReader` and `Guard` act on.
#[derive(Clone, Copy)]
struct At<'d, const N: usize> {
    // INVARIANT: `slot < N`, and whoever holds this `At` is, by its owner's invariant,
    // the only writer of that slot (a `Reader` claimed it; a `ContextReader`'s creator
    // promised it).
    rcu: &'d Rcu<N>,
    slot: usize,
}

impl<'d, const N: usize> At<'d, N> {
    /// The slot word, without a bounds check on the read-side fast path.
    #[inline(always)]
    fn word(&self) -> &'d AtomicU32 {
        // SAFETY: by the type invariant `self.slot < N`, the length of `slots`.
        unsafe { &self.rcu.slots.get_unchecked(self.slot).0 }
    }

    /// Enters a read section or nests in the current one. `in_context`: a
    /// `ContextReader`, on whose slot interrupt handlers nest, so a nested lock may have
    /// interrupted the outermost one between its store and its fence, and fences too.
    #[inline(always)]
    fn enter(&self, in_context: bool) {
        let slot = self.word();
        // By the type invariant nobody else writes the slot (an interrupt handler that
        // nests on it restores it before the code it interrupted resumes): load + store
        // is exact.
        let v = ops::own_slot(slot);
        interrupt_point!(LockAfterLoad, slot);
        if !online(v) {
            ops::lock_outer(slot, &self.rcu.phase.0);
            open_sections::entered(self.rcu.section_key());
        } else if v < STICKY {
            if in_context {
                ops::lock_nested_in_context(slot, v);
            } else {
                ops::lock_nested(slot, v);
            }
        }
    }

    /// Leaves one level of the section.
    #[inline(always)]
    fn leave(&self) {
        let slot = self.word();
        let v = ops::own_slot(slot);
        interrupt_point!(UnlockAfterLoad, slot);
        if v < 2 * ONE_LEVEL || mutant!(NestingIgnored) {
            // Outermost: the section's loads happen before a writer's Acquire sees it.
            ops::unlock(slot, CLAIMED);
            open_sections::left(self.rcu.section_key());
        } else if v < STICKY {
            ops::unlock(slot, v - ONE_LEVEL);
        }
    }

    fn in_read_section(&self) -> bool {
        online(self.word().load(Relaxed))
    }

    /// `Err(InReadSection)` if a blocking wait from here would wait for itself.
    fn check_can_wait(&self) -> Result<(), Error> {
        if self.in_read_section() || open_sections::any(self.rcu.section_key()) {
            return Err(Error::InReadSection);
        }
        Ok(())
    }

    /// Waits for `cookie` (of this domain), asking `hook` between polls whether to go on.
    fn wait_for(
        &self,
        cookie: GpCookie<'_, N>,
        mut hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        if !core::ptr::eq(cookie.rcu, self.rcu) {
            return Err(Error::OtherDomain);
        }
        let mut attempts = 0u32;
        while !cookie.poll() {
            attempts = attempts.saturating_add(1);
            let w = Waiting {
                cookie: &cookie,
                attempts,
            };
            if hook(&w).is_break() {
                return Err(Error::GaveUp);
            }
            backoff(attempts);
        }
        Ok(())
    }

    fn synchronize_with(
        &self,
        hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        self.check_can_wait()?;
        let cookie = self.rcu.start_poll();
        self.wait_for(cookie, hook)
    }
}

/// The state of a blocking wait, shown to its hook between attempts (see
/// [`Reader::synchronize_with`]).
pub struct Waiting<'c, 'd, const N: usize> {
    cookie: &'c GpCookie<'d, N>,
    attempts: u32,
}

impl<'d, const N: usize> Waiting<'_, 'd, N> {
    /// The grace period being waited for.
    pub fn cookie(&self) -> GpCookie<'d, N> {
        *self.cookie
    }

    /// How many times the grace period has been polled without ending (1 the first time
    /// the hook runs).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The reader slots holding the grace period up right now (see
    /// [`GpCookie::holdouts`]).
    pub fn holdouts(&self) -> Holdouts<'d, N> {
        self.cookie.holdouts()
    }
}

/// Spin-loop hints after failed attempt number `attempts` of a blocking wait: 1, 2, 4 …
/// up to `MAX_BACKOFF`. Each attempt scans every reader slot, and a scan takes each
/// reader's cache line away from its core (the reader's next store must fetch it back),
/// so a waiting writer that scanned back to back would slow the very sections it waits
/// for. Measured in DEVELOPMENT.md ("Read side under a busy writer").
#[inline]
fn backoff(attempts: u32) {
    #[cfg(not(loom))]
    for _ in 0..(1u32 << attempts.min(BACKOFF_SHIFT)).min(MAX_BACKOFF) {
        core::hint::spin_loop();
    }
    #[cfg(loom)]
    let _ = attempts;
}

/// The most spin-loop hints between two attempts of a blocking wait (a few hundred
/// nanoseconds to a few microseconds, depending on the core).
#[cfg(not(loom))]
const MAX_BACKOFF: u32 = 64;
/// `2^BACKOFF_SHIFT >= MAX_BACKOFF`: where the doubling stops.
#[cfg(not(loom))]
const BACKOFF_SHIFT: u32 = 6;

/// Turns a plain wait hook (`FnMut()`) into one that never gives up.
pub(crate) fn forever<const N: usize>(
    mut wait: impl FnMut(),
) -> impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()> {
    move |_| {
        wait();
        ControlFlow::Continue(())
    }
}

/// A reader slot holding a grace period up (see [`GpCookie::holdouts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Holdout {
    /// The slot: a `Reader`'s [`slot`](Reader::slot), or a dedicated slot.
    pub slot: usize,
    /// How deeply nested its section is (1: not nested).
    pub nesting: u32,
    /// The phase its section started in.
    pub phase: u32,
}

/// The slots holding a grace period up, as an iterator (see [`GpCookie::holdouts`]).
pub struct Holdouts<'d, const N: usize> {
    rcu: &'d Rcu<N>,
    next: usize,
    waits_for: u32,
}

impl<const N: usize> Iterator for Holdouts<'_, N> {
    type Item = Holdout;
    fn next(&mut self) -> Option<Holdout> {
        while self.next < N {
            let slot = self.next;
            self.next += 1;
            let v = self.rcu.slots[slot].0.load(Relaxed);
            if online(v) && phase_of(v) == self.waits_for {
                return Some(Holdout {
                    slot,
                    nesting: v / ONE_LEVEL,
                    phase: phase_of(v),
                });
            }
        }
        None
    }
}

impl<const N: usize> core::fmt::Debug for Holdouts<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let rest = Holdouts { ..*self };
        f.debug_list().entries(rest).finish()
    }
}

impl<const N: usize> Clone for Holdouts<'_, N> {
    fn clone(&self) -> Self {
        Holdouts { ..*self }
    }
}

/// A registered reader: owns one slot of its domain. Not `Send`/`Sync`: one context
/// (thread, hart, interrupt level) uses it, which is what lets the read side use plain
/// loads and stores.
///
/// Its nested locks have no fence: the context that nests has executed the outermost
/// lock's fence before, in program order. So a `Reader` must not be used from an
/// interrupt or signal handler that can preempt its own context (it is neither `Send`
/// nor `Sync`, so safe code cannot put it where one could reach it): handlers use a
/// [`ContextReader`] or [`Rcu::read`].
pub struct Reader<'d, const N: usize> {
    // INVARIANT: `at.slot < N`, and `self` claimed that slot, so it is its only writer.
    at: At<'d, N>,
    _not_send: PhantomData<*mut ()>,
}

impl<'d, const N: usize> Reader<'d, N> {
    /// Enters a read section (or nests in the current one). The section ends when the
    /// outermost guard is dropped.
    #[inline]
    pub fn lock(&self) -> Guard<'_, 'd, N> {
        self.at.enter(false);
        Guard {
            at: &self.at,
            _not_send: PhantomData,
        }
    }

    /// Runs `f` inside a read section.
    #[inline]
    pub fn read<R>(&self, f: impl FnOnce(&Guard<'_, 'd, N>) -> R) -> R {
        f(&self.lock())
    }

    /// Whether this reader is inside a read section.
    pub fn in_read_section(&self) -> bool {
        self.at.in_read_section()
    }

    /// The domain this reader belongs to.
    pub fn domain(&self) -> &'d Rcu<N> {
        self.at.rcu
    }

    /// The index of this reader's slot in its domain (diagnostics).
    pub fn slot(&self) -> usize {
        self.at.slot
    }

    /// Waits until every read section that was running when it was called has ended,
    /// calling `wait` between attempts (spin, yield, `wfi`, an RTOS sleep).
    ///
    /// # Errors
    /// [`Error::InReadSection`], without waiting, if this reader is inside a read
    /// section (possible only after leaking a guard with `mem::forget`) or, in debug
    /// builds with feature `std`, if another reader of this domain on the calling thread
    /// is. Waiting there would deadlock. Without `std` a section of another reader of
    /// the same context cannot be detected: do not wait inside one.
    pub fn synchronize(&mut self, wait: impl FnMut()) -> Result<(), Error> {
        self.at.synchronize_with(forever(wait))
    }

    /// [`synchronize`](Self::synchronize) with a hook that sees the wait
    /// ([`Waiting`]: attempts, the holdouts) and may give it up: a deadline, a stall
    /// report, an RTOS sleep.
    ///
    /// # Errors
    /// As `synchronize`, and [`Error::GaveUp`] when `hook` returns
    /// `ControlFlow::Break`: nothing is left half done (a grace period that was under
    /// way goes on with the next poll of any context).
    pub fn synchronize_with(
        &mut self,
        hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        self.at.synchronize_with(hook)
    }

    /// `Err(InReadSection)` if a blocking wait from here would wait for itself.
    pub(crate) fn check_can_wait(&self) -> Result<(), Error> {
        self.at.check_can_wait()
    }

    /// Waits for `cookie` (of this reader's domain), asking `hook` between polls; the
    /// caller has checked that it may wait.
    pub(crate) fn wait_for(
        &mut self,
        cookie: GpCookie<'_, N>,
        hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        self.at.wait_for(cookie, hook)
    }
}

impl<const N: usize> Drop for Reader<'_, N> {
    fn drop(&mut self) {
        let slot = self.at.word();
        let v = ops::own_slot(slot);
        interrupt_point!(DropAfterLoad, slot);
        if online(v) {
            // A guard was leaked (`mem::forget`). Guards borrow the reader, so none is
            // alive now, and every reference read under the leaked one was bounded by a
            // borrow of the reader that has ended: ending the section is sound, and
            // leaving it open would stall every later grace period of the domain.
            open_sections::left(self.at.rcu.section_key());
        }
        // Ends any (leaked) section and frees the slot in one Release store.
        ops::release(slot);
    }
}

impl<const N: usize> core::fmt::Debug for Reader<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Reader")
            .field("slot", &self.at.slot)
            .field("in_read_section", &self.in_read_section())
            .finish()
    }
}

/// A reader for one CPU (hart, core) or one interrupt priority level, on a slot the
/// domain reserved for it ([`Rcu::with_dedicated`]): `const`-constructible, `Copy`,
/// `Send` and `Sync`, so it can live in a `static` and be used from the trap or
/// interrupt handlers of its context without claiming a slot per section.
///
/// Interrupt handlers of the same core may nest sections on it while the code they
/// interrupted is in one, at any point: a handler enters and leaves its sections before
/// it returns, so the slot is as the interrupted code left it when it resumes (its
/// load-then-store of the slot cannot lose the handler's update). The handler's section
/// lies inside the interrupted one, or is a section of its own if none was open.
///
/// A nested lock therefore runs a full fence after its store, like the outermost one: a
/// handler may have interrupted the outermost lock between its store and its fence (a
/// trap is not a fence), and its loads must not be performed before the announcement is
/// visible to another core's scan. This costs a nested lock a fence on multi-core
/// builds (none with `--cfg rcuref_unsafe_assume_single_core` or in the asymmetric-fence
/// mode); checked by the loom models in `tests/loom_interrupts.rs` with a handler at
/// every gap of the read side, and by the litmus suite (`litmus/`).
///
/// Obtained only through the `unsafe` [`Rcu::context_reader`], whose contract is what
/// makes this sound.
#[derive(Clone, Copy)]
pub struct ContextReader<'d, const N: usize> {
    // INVARIANT: `at.slot` is one of the domain's dedicated slots, and the creator
    // promised `Rcu::context_reader`'s contract: it is only used from one context and
    // the interrupt handlers that preempt that context on its core.
    at: At<'d, N>,
}

// SAFETY: by the creator's promise (`Rcu::context_reader`) the slot is only written from
// one context and the handlers that preempt it on the same core, whatever thread holds
// the value; sharing or moving the value between threads does not change who uses it.
unsafe impl<const N: usize> Send for ContextReader<'_, N> {}
// SAFETY: as above.
unsafe impl<const N: usize> Sync for ContextReader<'_, N> {}

impl<'d, const N: usize> ContextReader<'d, N> {
    /// Enters a read section (or nests in the current one of this context, an
    /// interrupted one included). The section ends when the outermost guard is dropped.
    #[inline]
    pub fn lock(&self) -> Guard<'_, 'd, N> {
        self.at.enter(true);
        Guard {
            at: &self.at,
            _not_send: PhantomData,
        }
    }

    /// Runs `f` inside a read section.
    #[inline]
    pub fn read<R>(&self, f: impl FnOnce(&Guard<'_, 'd, N>) -> R) -> R {
        f(&self.lock())
    }

    /// Whether this context is inside a read section.
    pub fn in_read_section(&self) -> bool {
        self.at.in_read_section()
    }

    /// The domain.
    pub fn domain(&self) -> &'d Rcu<N> {
        self.at.rcu
    }

    /// The slot index.
    pub fn slot(&self) -> usize {
        self.at.slot
    }

    /// Waits for a grace period (see [`Reader::synchronize_with`]). Only from the
    /// context itself, never from one of its interrupt handlers while it may be inside
    /// a section on another slot of the same domain.
    ///
    /// # Errors
    /// [`Error::InReadSection`] if this context is inside a section (the wait would
    /// wait for itself); [`Error::GaveUp`] when `hook` returns `ControlFlow::Break`.
    pub fn synchronize_with(
        &self,
        hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        self.at.synchronize_with(hook)
    }
}

impl<const N: usize> core::fmt::Debug for ContextReader<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ContextReader")
            .field("slot", &self.at.slot)
            .field("in_read_section", &self.in_read_section())
            .finish()
    }
}

/// Evidence of a read section: references read under it live no longer than it.
/// Not `Send`: a section belongs to the context that entered it.
pub struct Guard<'r, 'd, const N: usize> {
    at: &'r At<'d, N>,
    _not_send: PhantomData<*mut ()>,
}

impl<'d, const N: usize> Guard<'_, 'd, N> {
    /// The domain this section belongs to.
    pub fn domain(&self) -> &'d Rcu<N> {
        self.at.rcu
    }
}

impl<const N: usize> Drop for Guard<'_, '_, N> {
    #[inline]
    fn drop(&mut self) {
        self.at.leave();
    }
}

impl<const N: usize> core::fmt::Debug for Guard<'_, '_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Guard")
            .field("slot", &self.at.slot)
            .finish()
    }
}

/// Whether this build reports a blocking wait inside a read section of *another* reader
/// of the same domain on the calling thread as [`Error::InReadSection`] (debug
/// builds with feature `std`). Without it such a wait deadlocks; a wait inside the
/// waiting reader's own section is reported in every build.
pub const DETECTS_WAIT_IN_OTHER_SECTION: bool =
    cfg!(all(feature = "std", debug_assertions, not(loom)));

/// Debug builds with feature `std`: how many read sections the current thread has open
/// in each domain, so a blocking wait from inside one (of any reader of that domain) is
/// an error instead of a deadlock. Keyed by the domain's address and process-unique
/// number; up to `DOMAINS` domains per thread are tracked at once (a thread inside
/// sections of more domains than that goes undetected in the extra ones). A diagnostic,
/// not part of any safety argument: it is not reentrant against a signal handler that
/// reads on the same thread, and an outermost guard that such a handler leaks leaves
/// the thread's count raised, so later waits on that thread are refused with
/// `InReadSection` (a refusal, never a missed section of the slot itself).
#[cfg(all(feature = "std", debug_assertions, not(loom)))]
mod open_sections {
    use core::cell::Cell;
    use portable_atomic::{AtomicU32, Ordering::Relaxed};

    const DOMAINS: usize = 4;

    /// A domain's process-unique number, given out on first use.
    pub(super) struct Serial(AtomicU32);

    impl Serial {
        pub(super) const fn new() -> Self {
            Serial(AtomicU32::new(0))
        }

        pub(super) fn get(&self) -> u32 {
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

    pub(super) fn entered(domain: Key) {
        OPEN.with(|t| {
            if let Some(e) = t.iter().find(|e| e.get().0 == domain && e.get().1 != 0) {
                e.set((domain, e.get().1.saturating_add(1)));
            } else if let Some(e) = t.iter().find(|e| e.get().1 == 0) {
                e.set((domain, 1));
            }
        });
    }

    pub(super) fn left(domain: Key) {
        OPEN.with(|t| {
            if let Some(e) = t.iter().find(|e| e.get().0 == domain && e.get().1 != 0) {
                e.set((domain, e.get().1 - 1));
            }
        });
    }

    pub(super) fn any(domain: Key) -> bool {
        OPEN.with(|t| t.iter().any(|e| e.get().0 == domain && e.get().1 != 0))
    }
}

/// Elsewhere: nothing to track (see the `std` version above).
#[cfg(not(all(feature = "std", debug_assertions, not(loom))))]
mod open_sections {
    #[inline(always)]
    pub(super) fn entered(_: (usize, u32)) {}
    #[inline(always)]
    pub(super) fn left(_: (usize, u32)) {}
    #[inline(always)]
    pub(super) fn any(_: (usize, u32)) -> bool {
        false
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
        lines.push(line_of(&rcu.phase.0));
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
        }
    }
}
