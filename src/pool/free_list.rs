//! The pool's free list: a Treiber stack of slot indices with an ABA tag.
//!
//! `head` packs `index + 1` (0 = empty) in the low `index_bits(N)` bits and a tag in the
//! rest; every successful push or pop adds one to the tag. A pop reads `head` and the
//! top's `next`, then compare-exchanges `head` to `next`: if other contexts popped and
//! pushed the same top meanwhile (ABA), the tag differs and the exchange fails.
//!
//! With a T-bit tag, ABA needs exactly a multiple of 2^T successful operations between
//! one context's read of `head` and its exchange; T is 24 for pools of up to 255 slots,
//! 16 up to 65535. `Mutant::TinyTag` cuts it to 2 bits to show the tests notice ABA.
//!
//! On thumbv6m (no CAS), each compare-exchange runs in a critical section through
//! portable-atomic: the algorithm is unchanged, and still needs its tag (a pop's read
//! and its exchange are separate critical sections).

use crate::sync::{AtomicU32, Ordering};

/// Bits needed to hold `index + 1` for every index below `n`.
pub(crate) const fn index_bits(n: usize) -> u32 {
    usize::BITS - n.leading_zeros()
}

/// # Invariants
/// Every index below `N` is either on the stack (reachable from `head` through `next`)
/// exactly once, or owned by exactly one caller of `pop` that has not pushed it back.
pub(crate) struct FreeList<const N: usize> {
    head: AtomicU32,
    next: [AtomicU32; N],
}

impl<const N: usize> FreeList<N> {
    const INDEX_BITS: u32 = {
        assert!(N >= 1 && N < (1 << 16), "a pool holds 1 to 65535 slots");
        index_bits(N)
    };
    const INDEX_MASK: u32 = (1 << Self::INDEX_BITS) - 1;

    /// All of `0..N` free, 0 on top.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        let mut next = [const { AtomicU32::new(0) }; N];
        let mut i = 0;
        while i < N {
            // Links are stored as index + 1 (0 ends the list): slot i links to slot i + 1.
            next[i] = AtomicU32::new(if i + 1 < N { (i + 2) as u32 } else { 0 });
            i += 1;
        }
        FreeList {
            head: AtomicU32::new(1),
            next,
        }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        FreeList {
            head: AtomicU32::new(1),
            next: core::array::from_fn(|i| {
                AtomicU32::new(if i + 1 < N { (i + 2) as u32 } else { 0 })
            }),
        }
    }

    #[inline]
    fn tag_step() -> u32 {
        1 << Self::INDEX_BITS
    }

    #[inline]
    fn bump(old: u32, new_top: u32) -> u32 {
        let mut tag = (old & !Self::INDEX_MASK).wrapping_add(Self::tag_step());
        if mutant!(TinyTag) {
            tag &= 3 << Self::INDEX_BITS;
        }
        tag | new_top
    }

    /// Takes a free index, or `None` when every slot is in use.
    pub(crate) fn pop(&self) -> Option<usize> {
        let mut old = self.head.load(Ordering::Acquire);
        loop {
            let top = old & Self::INDEX_MASK;
            if top == 0 {
                return None;
            }
            let next = self.next[(top - 1) as usize].load(Ordering::Relaxed);
            match self.head.compare_exchange_weak(
                old,
                Self::bump(old, next),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                // INVARIANT: the exchange from `old` (same top, same tag) removed `top`
                // from the stack; it is now ours alone.
                Ok(_) => return Some((top - 1) as usize),
                Err(now) => old = now,
            }
        }
    }

    /// Gives back `index`, which the caller got from `pop`.
    pub(crate) fn push(&self, index: usize) {
        let me = index as u32 + 1;
        let mut old = self.head.load(Ordering::Relaxed);
        loop {
            self.next[index].store(old & Self::INDEX_MASK, Ordering::Relaxed);
            match self.head.compare_exchange_weak(
                old,
                Self::bump(old, me),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => old = now,
            }
        }
    }
}
