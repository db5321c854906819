//! Every memory operation of the read side and of a grace-period step, one function per
//! path (the words' encoding is `encoding`).
//!
//! Each function here is one straight-line path of atomic accesses and fences (a
//! conditional at most skips its tail), always inlined into its callers. They are the
//! units the litmus suite reasons about (`litmus/README.md`): `cargo xtask litmus`
//! compiles each for every instruction set we ship (through `crate::code_probe`), reads
//! its loads, stores, read-modify-writes and barriers out of the object code, and fails
//! when they differ from the instructions of the assembly litmus tests that herd7
//! checked. A comment on each function names the tests that depend on it.
//!
//! Interrupt points (`interrupt_point!`) mark the gaps between the operations where an
//! interrupt handler can nest on the slot; test builds can run a handler in each.

use crate::sync::Ordering::{Acquire, Relaxed, SeqCst};
use crate::sync::{fence, AtomicU32, Fence};

use super::encoding::{entered, CLAIMED, ONE_LEVEL};

/// How a store to a reader slot is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotStore {
    /// [`crate::sync::reader_release_store`]: `Release` (every real store to a slot).
    Release,
    /// A relaxed store (only a broken variant's table names it).
    #[allow(dead_code)]
    Relaxed,
}

impl SlotStore {
    #[inline(always)]
    fn store(self, slot: &AtomicU32, v: u32) {
        match self {
            SlotStore::Release => crate::sync::reader_release_store(slot, v),
            SlotStore::Relaxed => slot.store(v, Relaxed),
        }
    }
}

/// The read side's ordering choices, as one table; each entry says why, and which
/// litmus tests check it.
#[derive(Clone, Copy)]
pub(crate) struct ReadSide {
    /// The outermost lock's store: `Release`, like every store to a slot: a scan that
    /// reads this value (rather than the previous section's unlock) must still
    /// synchronise with everything before it, the previous section's reads included
    /// (litmus: `rcu-release-sequence`).
    pub(crate) lock_store: SlotStore,
    /// After the outermost lock's store: the reader fence, which pairs with the wait
    /// step's fence (litmus: `rcu-lock-vs-wait`).
    pub(crate) after_lock: Fence,
    /// After a `ContextReader`'s nested store: the reader fence ([`lock_nested_in_context`]).
    pub(crate) after_nested_in_context: Fence,
    /// After a won claim: a full fence in the asymmetric mode and wherever it may be
    /// chosen at run time (a wait step that finds every slot free skips its heavy fence;
    /// litmus: `asym-empty-domain-skips-the-fence`), none otherwise. Claims are rare.
    pub(crate) after_claim: Fence,
}

/// The table the read side runs with.
pub(crate) const READ_SIDE: ReadSide = ReadSide {
    lock_store: SlotStore::Release,
    after_lock: Fence::Reader,
    after_nested_in_context: Fence::Reader,
    after_claim: if cfg!(rcuref_fences) {
        Fence::Full
    } else {
        Fence::None
    },
};

/// [`READ_SIDE`] (in test builds, as the selected broken variant changes it).
#[inline(always)]
fn read_side() -> ReadSide {
    variant_table!(ReadSide, READ_SIDE, super::broken::read_side)
}

/// A reader's look at its own slot (only its owner writes it; an interrupt handler that
/// nests on it restores it before the interrupted code resumes, so this load and the
/// store that follows it are exact).
#[inline(always)]
pub(crate) fn own_slot(slot: &AtomicU32) -> u32 {
    slot.load(Relaxed)
}

/// The outermost lock: record the phase, announce the section, then a full fence before
/// the section's loads (litmus: `rcu-lock-vs-wait`, `rcu-phase-word`,
/// `rcu-cookie-vs-flip`, `rcu-irq-in-lock-*`).
///
/// The fence pairs with the wait step's fence (`wait_fence`): either the scan sees this
/// store, or this section's loads see whatever was unpublished before the wait began.
#[inline(always)]
pub(crate) fn lock_outer(slot: &AtomicU32, phase: &AtomicU32) {
    // Any phase (bit 0) is safe here (module docs, "The phase word"); the heavy bit,
    // where there is one, is only ever set once the mode is Heavy for good (the
    // invariant of `Rcu::phase`), which is what lets the fence below trust it.
    let p = phase.load(Relaxed);
    interrupt_point!(LockAfterPhase, slot);
    let o = read_side();
    o.lock_store.store(slot, entered(p));
    interrupt_point!(LockAfterStore, slot);
    o.after_lock.issue_after_phase(p);
    interrupt_point!(LockAfterFence, slot);
}

/// A nested lock of a `Reader`: one level deeper. Its context executed the outermost
/// lock's fence before it, in program order, so its loads are already ordered after the
/// announcement.
#[inline(always)]
pub(crate) fn lock_nested(slot: &AtomicU32, v: u32) {
    crate::sync::reader_release_store(slot, v + ONE_LEVEL);
    interrupt_point!(NestedAfterStore, slot);
    interrupt_point!(NestedAfterFence, slot);
}

/// A nested lock of a `ContextReader`: one level deeper, **then a full fence**. An
/// interrupt handler may nest here having interrupted the outermost lock between its
/// store and its fence (a trap is not a fence): without this fence its loads could be
/// performed before the announcement is visible to another core's scan, which would
/// then miss the slot and free what the handler reads (litmus:
/// `rcu-irq-in-lock-after-store` and its twin without the fence).
#[inline(always)]
pub(crate) fn lock_nested_in_context(slot: &AtomicU32, v: u32) {
    crate::sync::reader_release_store(slot, v + ONE_LEVEL);
    interrupt_point!(NestedAfterStore, slot);
    read_side().after_nested_in_context.issue();
    interrupt_point!(NestedAfterFence, slot);
}

/// An unlock, outermost (`v` is the slot word `CLAIMED`) or one level (`v` is the word
/// one level shallower): a `Release` store, so the section's loads happen before a scan
/// that reads it (litmus: `rcu-unlock-vs-reclaim`, `rcu-unlock-vs-reclaim-by-cookie`).
#[inline(always)]
pub(crate) fn unlock(slot: &AtomicU32, v: u32) {
    crate::sync::reader_release_store(slot, v);
    interrupt_point!(UnlockAfterStore, slot);
}

/// `Rcu::reader`'s claim of a free slot: a relaxed look, then a compare-exchange from
/// 0 to `CLAIMED` with `Acquire`, which pairs with the `Release` store of 0 that freed
/// the slot (litmus: `rcu-irq-claim`).
#[inline(always)]
pub(crate) fn claim(slot: &AtomicU32) -> bool {
    if slot.load(Relaxed) != 0 {
        return false;
    }
    interrupt_point!(ClaimAfterLoad, slot);
    let won = slot.compare_exchange(0, CLAIMED, Acquire, Relaxed).is_ok();
    if won {
        interrupt_point!(ClaimAfterExchange, slot);
        // (Asymmetric mode: the fence that stands in for a skipped heavy fence.)
        read_side().after_claim.issue();
    }
    won
}

/// A `Reader`'s drop: ends any leaked section and frees the slot in one `Release` store
/// (litmus: `rcu-irq-release`).
#[inline(always)]
pub(crate) fn release(slot: &AtomicU32) {
    crate::sync::reader_release_store(slot, 0);
    interrupt_point!(DropAfterStore, slot);
}

/// A cookie: the caller's unpublish, a full fence, then the counter (`SeqCst`). The
/// fence orders the unpublish before the counter's value that decides which waits count
/// (litmus: `rcu-cookie-vs-flip`).
#[inline(always)]
pub(crate) fn cookie_snapshot(gp: &AtomicU32) -> u32 {
    fence(SeqCst);
    gp.load(SeqCst)
}

/// Whether a cookie is done: an `Acquire` load of the counter, which reads the step that
/// completed the grace period, so the readers' sections that step waited for happen
/// before what the caller does next (litmus: `rcu-unlock-vs-reclaim-by-cookie`).
#[inline(always)]
pub(crate) fn counter_acquire(gp: &AtomicU32) -> u32 {
    gp.load(Acquire)
}

/// A driver's first look at the counter (`SeqCst`, like every access of the lap guard).
#[inline(always)]
pub(crate) fn counter_snapshot(gp: &AtomicU32) -> u32 {
    gp.load(SeqCst)
}

/// The lap guard's registration in one half, and the counter read again after it; both
/// `SeqCst`: with the step's `lap_check` and exchange they form a store-buffering pair,
/// so either the registration is seen or this read sees the counter that left the half
/// (litmus: `rcu-lap-guard`; on AArch64 this needs `LDAR`, never `LDAPR`).
#[inline(always)]
pub(crate) fn register_in_half(stepping: &AtomicU32, gp: &AtomicU32) -> u32 {
    stepping.fetch_add(1, SeqCst);
    gp.load(SeqCst)
}

/// Leaves the half registered in.
#[inline(always)]
pub(crate) fn leave_half(stepping: &AtomicU32) {
    stepping.fetch_sub(1, SeqCst);
}

/// Whether any driver is registered in a half (`SeqCst`, before the exchange that would
/// enter it).
#[inline(always)]
pub(crate) fn registered(stepping: &AtomicU32) -> u32 {
    stepping.load(SeqCst)
}

/// One step of the counter: a compare-exchange from the value the step was decided on
/// (`SeqCst`: it orders the scan before it, and the next step's loads after it).
#[inline(always)]
pub(crate) fn step(gp: &AtomicU32, from: u32, to: u32) -> Result<u32, u32> {
    gp.compare_exchange(from, to, SeqCst, SeqCst)
}

/// A flip's update of the phase word: written only when it changes. Relaxed: nothing
/// about safety depends on the phase (module docs, "The phase word"; litmus:
/// `rcu-phase-word`, where readers may record either value), and the heavy bit of
/// `want` says what a final mode says, true whenever it lands
/// (`auto-phase-word-heavy-bit-decided-heavy`).
#[inline(always)]
pub(crate) fn set_phase(phase: &AtomicU32, want: u32) {
    if phase.load(Relaxed) != want {
        phase.store(want, Relaxed);
    }
}

/// The full fence of a wait step, before its scan: the other half of the reader's
/// lock fence (litmus: `rcu-lock-vs-wait`).
#[inline(always)]
pub(crate) fn wait_fence() {
    fence(SeqCst);
}

/// One slot, as a wait step's scan reads it: `Acquire`, pairing with the reader's
/// `Release` stores (litmus: `rcu-unlock-vs-reclaim`, `rcu-release-sequence`).
#[inline(always)]
pub(crate) fn scan_slot(slot: &AtomicU32) -> u32 {
    slot.load(Acquire)
}
