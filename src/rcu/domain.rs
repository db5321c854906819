//! The domain, its reader slots, guards and the grace-period state machine.

use crate::sync::{AtomicBool, AtomicU32, Ordering};
use core::marker::PhantomData;

/// Errors the RCU API reports instead of panicking or blocking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum RcuError {
    /// Every reader slot of the domain is taken.
    NoFreeSlot,
    /// A blocking wait was asked for from inside a read section of the same reader: it
    /// would wait for itself forever.
    InReadSection,
}

impl core::fmt::Display for RcuError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            RcuError::NoFreeSlot => "every RCU reader slot is taken",
            RcuError::InReadSection => "a grace period cannot be waited for inside a read section",
        })
    }
}

/// A point in the grace-period sequence: done once every read section that was running
/// when it was taken has ended. Taken with [`Rcu::start_poll`], checked with
/// [`Rcu::poll`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GpCookie(u32);

impl GpCookie {
    /// The cookie as a number, to keep it in an atomic (e.g. in an interrupt handler's
    /// state). Only [`GpCookie::from_raw`] of this value means anything.
    pub const fn into_raw(self) -> u32 {
        self.0
    }

    /// A cookie back from [`into_raw`](Self::into_raw). A number that did not come from
    /// a cookie of the same domain makes [`Rcu::poll`] answer about an arbitrary point;
    /// nothing unsafe follows, only a wrong answer for the caller.
    pub const fn from_raw(raw: u32) -> Self {
        GpCookie(raw)
    }
}

/// Steps of `gp` per grace period: flip, wait, flip, wait.
const STEPS_PER_GP: u32 = 4;

/// The phase readers record at step `g` of the counter.
#[inline(always)]
const fn phase(g: u32) -> u32 {
    (g.wrapping_add(1) >> 1) & 1
}

/// `a` is at or after `b` in wrapping order.
#[inline(always)]
const fn reached(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

const ONE_LEVEL: u32 = 2;
/// A nesting count this high (2^31 leaked guards) sticks: neither lock nor unlock moves
/// it, so the section never ends instead of wrapping to "offline" under live references.
const STICKY: u32 = 0xFFFF_FFF0;

/// An RCU domain with `N` reader slots (threads, harts, interrupt priority levels).
///
/// # Invariants
/// * `slots[i]` is written only by the holder of `claims[i]` (a [`Reader`]): 0 when
///   offline, else `nesting << 1 | phase` with nesting >= 1.
/// * `gp` is modified only by the holder of `writer` (the try-lock in [`Rcu::poll`]), one
///   step at a time; an odd value means a wait is in progress.
pub struct Rcu<const N: usize> {
    gp: AtomicU32,
    writer: AtomicBool,
    claims: [AtomicBool; N],
    slots: [AtomicU32; N],
}

impl<const N: usize> Rcu<N> {
    /// A domain with all `N` slots free, usable in a `static`.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self::new_at(0)
    }

    /// A domain whose grace-period counter starts at `gp` (for testing wrap-around).
    #[cfg(not(loom))]
    pub const fn new_at(gp: u32) -> Self {
        Rcu {
            gp: AtomicU32::new(gp & !1),
            writer: AtomicBool::new(false),
            claims: [const { AtomicBool::new(false) }; N],
            slots: [const { AtomicU32::new(0) }; N],
        }
    }

    /// A domain (loom build: not `const`).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self::new_at(0)
    }

    /// A domain starting at `gp` (loom build: not `const`).
    #[cfg(loom)]
    pub fn new_at(gp: u32) -> Self {
        Rcu {
            gp: AtomicU32::new(gp & !1),
            writer: AtomicBool::new(false),
            claims: core::array::from_fn(|_| AtomicBool::new(false)),
            slots: core::array::from_fn(|_| AtomicU32::new(0)),
        }
    }

    /// Claims a reader slot for the calling context (a thread, a hart, an interrupt
    /// priority level). The slot is freed when the [`Reader`] is dropped.
    pub fn register(&self) -> Result<Reader<'_, N>, RcuError> {
        for (i, c) in self.claims.iter().enumerate() {
            if !c.load(Ordering::Relaxed)
                && c.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                // INVARIANT: i < N (an index of `claims`); we hold claims[i], so we are
                // slot i's only writer; it is 0 (a Reader leaves its slot at 0 when dropped).
                return Ok(Reader {
                    rcu: self,
                    slot: i,
                    _not_send: PhantomData,
                });
            }
        }
        Err(RcuError::NoFreeSlot)
    }

    /// Runs `f` in a read section on a slot claimed for the call: for interrupt
    /// handlers and other short-lived contexts that hold no [`Reader`].
    pub fn read<R>(&self, f: impl FnOnce(&Guard<'_, '_, N>) -> R) -> Result<R, RcuError> {
        let reader = self.register()?;
        let guard = reader.lock();
        Ok(f(&guard))
    }

    /// Takes a cookie that [`poll`](Self::poll) reports done once every read section
    /// running now has ended. Never blocks. Call it after unpublishing what you will
    /// reclaim.
    pub fn start_poll(&self) -> GpCookie {
        crate::sync::fence(Ordering::SeqCst);
        let g = self.gp.load(Ordering::SeqCst);
        // A wait already in progress (odd g) started before us and does not count.
        // (The one-flip variant counts a grace period as one flip and one wait.)
        let steps = if mutant!(SingleFlip) {
            STEPS_PER_GP / 2
        } else {
            STEPS_PER_GP
        };
        GpCookie(g.wrapping_add(steps + (g & 1)))
    }

    /// Whether the grace period of `cookie` has ended. Never blocks: if it has not, it
    /// advances the grace-period machine as far as the readers allow (unless another
    /// context is advancing it right now) and answers again.
    pub fn poll(&self, cookie: GpCookie) -> bool {
        if self.is_done(cookie) {
            return true;
        }
        if self.writer.swap(true, Ordering::Acquire) {
            return self.is_done(cookie); // someone else is advancing it
        }
        self.advance(cookie.0);
        self.writer.store(false, Ordering::Release);
        self.is_done(cookie)
    }

    /// Whether `cookie` is done, without advancing anything.
    pub fn is_done(&self, cookie: GpCookie) -> bool {
        reached(self.gp.load(Ordering::Acquire), cookie.0)
    }

    /// The raw grace-period counter (diagnostics and tests).
    pub fn gp_counter(&self) -> u32 {
        self.gp.load(Ordering::Relaxed)
    }

    /// How many reader slots are claimed right now (diagnostics).
    pub fn readers(&self) -> usize {
        self.claims
            .iter()
            .filter(|c| c.load(Ordering::Relaxed))
            .count()
    }

    /// Advances `gp` towards `target`. Caller holds `writer`.
    fn advance(&self, target: u32) {
        loop {
            let g = self.gp.load(Ordering::Relaxed);
            if reached(g, target) {
                return;
            }
            if mutant!(BustedGracePeriod) {
                self.gp.store(target, Ordering::Release);
                return;
            }
            // One scan of the slots, after a full fence, answers both questions below.
            crate::sync::fence(Ordering::SeqCst);
            let old = phase(g) ^ 1; // the phase before the flip (meaningful when waiting)
            let (mut online, mut old_online) = (false, false);
            for s in &self.slots {
                let v = s.load(Ordering::Acquire);
                if v != 0 {
                    online = true;
                    old_online |= v & 1 == old;
                }
            }
            // Fast path: no reader online at all. After our full fence, a reader whose
            // slot we saw as 0 cannot hold anything unpublished before the fence (its
            // own fence orders its loads after the unpublish), so every grace period
            // up to `target` is complete. A reader that loaded `gp` earlier and comes
            // online later with a stale phase is caught by the two flips of the next
            // grace period that finds someone online. One store instead of four steps.
            if !online && !mutant!(NoIdleFastPath) {
                // Keep the phase parity a target step would have (`target` is even).
                self.gp.store(target, Ordering::Release);
                return;
            }
            if g & 1 == 1 {
                // Waiting: done when no slot is online with the phase before the flip.
                if old_online {
                    return;
                }
                crate::sync::fence(Ordering::SeqCst);
                self.gp.store(g.wrapping_add(1), Ordering::Release);
            } else {
                // Flip: readers that lock from now on record the new phase.
                crate::sync::fence(Ordering::SeqCst);
                self.gp.store(g.wrapping_add(1), Ordering::SeqCst);
                crate::sync::fence(Ordering::SeqCst);
            }
        }
    }
}

#[cfg(not(loom))]
impl<const N: usize> Default for Rcu<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// A registered reader: owns one slot of its domain. Not `Send`/`Sync`: one context
/// (thread, hart, interrupt level) uses it, which is what lets the read side use plain
/// loads and stores.
///
/// # Invariants
/// `slot < N`, and `self` holds `rcu.claims[slot]`, so it is the only writer of
/// `rcu.slots[slot]`.
pub struct Reader<'d, const N: usize> {
    rcu: &'d Rcu<N>,
    slot: usize,
    _not_send: PhantomData<*mut ()>,
}

impl<'d, const N: usize> Reader<'d, N> {
    /// This reader's slot, without a bounds check on the read-side fast path.
    #[inline(always)]
    fn my_slot(&self) -> &'d AtomicU32 {
        // SAFETY: by the type invariant `self.slot < N`, the length of `slots`.
        unsafe { self.rcu.slots.get_unchecked(self.slot) }
    }

    /// Enters a read section (or nests in the current one). The section ends when the
    /// outermost guard is dropped.
    #[inline]
    pub fn lock(&self) -> Guard<'_, 'd, N> {
        let slot = self.my_slot();
        // By the type invariant nobody else writes the slot: load + store is exact.
        let v = slot.load(Ordering::Relaxed);
        if v == 0 {
            let p = phase(self.rcu.gp.load(Ordering::Relaxed));
            slot.store(ONE_LEVEL | p, Ordering::Relaxed);
            if !mutant!(NoReaderFence) {
                crate::sync::reader_fence();
            }
        } else {
            if v < STICKY {
                slot.store(v + ONE_LEVEL, Ordering::Relaxed);
            }
        }
        Guard {
            reader: self,
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
        self.rcu.slots[self.slot].load(Ordering::Relaxed) != 0
    }

    /// The domain this reader belongs to.
    pub fn domain(&self) -> &'d Rcu<N> {
        self.rcu
    }

    /// Waits until every read section that was running when it was called has ended,
    /// calling `wait` between attempts (spin, yield, `wfi`, an RTOS sleep).
    ///
    /// # Errors
    /// [`RcuError::InReadSection`] if this reader is inside a read section (possible only
    /// after leaking a guard); debug builds panic instead, to make the bug loud.
    pub fn synchronize(&mut self, mut wait: impl FnMut()) -> Result<(), RcuError> {
        if self.in_read_section() {
            debug_assert!(
                false,
                "rcuref: synchronize() inside a read section would wait for itself forever"
            );
            return Err(RcuError::InReadSection);
        }
        let cookie = self.rcu.start_poll();
        while !self.rcu.poll(cookie) {
            wait();
        }
        Ok(())
    }
}

impl<const N: usize> Drop for Reader<'_, N> {
    fn drop(&mut self) {
        // Guards borrow the reader, so none is alive here unless one was leaked; a
        // leaked section is left open (the slot stays claimed) rather than silently
        // ended, because its references may still be in use.
        if !self.in_read_section() {
            self.rcu.claims[self.slot].store(false, Ordering::Release);
        }
    }
}

impl<const N: usize> core::fmt::Debug for Reader<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Reader")
            .field("slot", &self.slot)
            .field("in_read_section", &self.in_read_section())
            .finish()
    }
}

/// Evidence of a read section: references read under it live no longer than it.
/// Not `Send`: a section belongs to the context that entered it.
pub struct Guard<'r, 'd, const N: usize> {
    reader: &'r Reader<'d, N>,
    _not_send: PhantomData<*mut ()>,
}

impl<'d, const N: usize> Guard<'_, 'd, N> {
    /// The domain this section belongs to.
    pub fn domain(&self) -> &'d Rcu<N> {
        self.reader.rcu
    }
}

impl<const N: usize> Drop for Guard<'_, '_, N> {
    #[inline]
    fn drop(&mut self) {
        let slot = self.reader.my_slot();
        let v = slot.load(Ordering::Relaxed);
        if v < 2 * ONE_LEVEL || mutant!(NestingIgnored) {
            // Outermost: the section's loads happen before a writer's Acquire sees 0.
            crate::sync::reader_release_store(slot, 0);
        } else if v < STICKY {
            slot.store(v - ONE_LEVEL, Ordering::Relaxed);
        }
    }
}
