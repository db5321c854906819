//! Which slots of a pool are free: one claim flag per slot.
//!
//! A slot is claimed by a single atomic swap of its own flag from `false` to `true`, and
//! only the swap's returned value decides: two contexts can never both see `false`,
//! because read-modify-writes of one location are totally ordered. No decision is ever
//! made on a value read earlier, so there is nothing for an ABA to fool: a context
//! stopped anywhere inside [`FreeMap::claim`] for any length of time, while others
//! claim and free the same slot any number of times, either wins a slot that is free at
//! the instant of its swap or moves on. This holds on every target, with no tag and no
//! wide compare-exchange (on thumbv6m the swap runs in portable-atomic's critical
//! section, chosen by the binary).
//!
//! (An earlier design, a Treiber stack with a 16- to 24-bit ABA tag, handed out a live
//! slot twice when a pop was stopped for exactly one tag period of other operations.)
//!
//! Finding a free flag: the search starts at the slot freed most recently (`hint`, so a
//! slot that is freed and allocated again stays hot in the cache) and scans on, round
//! the ring. An allocation is one load and one swap when a slot was freed recently, and
//! at most `N` loads when the pool is nearly full. With allocations and frees racing,
//! a search may miss a slot freed behind it: [`FreeMap::claim`] returns `None` only
//! after it has seen every flag taken, which is not proof that all were taken at one
//! instant.

use crate::sync::{
    AtomicBool, AtomicU32,
    Ordering::{Acquire, Relaxed, Release},
};

pub(crate) struct FreeMap<const N: usize> {
    // INVARIANT: `taken[i]` is true exactly while one caller of `claim` owns slot `i`
    // (from its successful swap until its `release`).
    pub(super) taken: [AtomicBool; N],
    pub(super) hint: AtomicU32,
}

impl<const N: usize> FreeMap<N> {
    const FITS: () = assert!(
        N < u32::MAX as usize,
        "a pool holds fewer than 2^32 - 1 slots"
    );

    const_fn! {
        /// Every slot free.
        pub(crate) const fn new() -> Self {
            let () = Self::FITS;
            FreeMap {
                taken: array_of!(AtomicBool::new(false); N),
                hint: AtomicU32::new(0),
            }
        }
    }

    /// Claims a free slot, or `None` when every slot was seen taken.
    pub(crate) fn claim(&self) -> Option<usize> {
        divert!(CheckThenClaim => super::broken::claim_by_store(self));
        let hint = self.hint.load(Relaxed) as usize;
        let mut i = if hint < N { hint } else { 0 };
        for _ in 0..N {
            if !self.taken[i].load(Relaxed) {
                pause_point!(AllocAfterProbe);
                // Acquire: pairs with the Release in `release`, so the previous owner's
                // use (and destruction) of the slot happens before ours.
                if claim_flag(&self.taken[i]) {
                    // INVARIANT: our swap turned the flag from false to true: slot i is ours.
                    return Some(i);
                }
            }
            i = if i + 1 >= N { 0 } else { i + 1 };
        }
        None
    }

    /// How many slots are claimed now (a snapshot, slot by slot).
    pub(crate) fn claimed(&self) -> usize {
        self.taken.iter().filter(|t| t.load(Relaxed)).count()
    }

    /// Gives back slot `i`, which the caller claimed and no longer uses.
    pub(crate) fn release(&self, i: usize) {
        release_flag(&self.taken[i]);
        self.hint.store(i as u32, Relaxed);
    }
}

/// Claims one slot's flag: a swap to `true` with `Acquire` (pairing with
/// `release_flag`, so the previous owner's use and destruction of the slot happen before
/// ours); the slot is ours exactly when the swap read `false` (litmus:
/// `pool-claim-is-exclusive`, `pool-free-then-claim`).
#[inline(always)]
pub(crate) fn claim_flag(flag: &AtomicBool) -> bool {
    !flag.swap(true, Acquire)
}

/// Gives one slot's flag back: a `Release` store of `false`, after the value's
/// destruction (litmus: `pool-free-then-claim`).
#[inline(always)]
pub(crate) fn release_flag(flag: &AtomicBool) {
    // A swap under loom (loom#254: `sync::plain_store!`).
    crate::sync::plain_store!(flag, false, Release);
}
