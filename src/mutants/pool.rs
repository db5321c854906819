//! The pool's broken variants: the twins of the functions that a whole-function variant
//! replaces (`divert!` in `pool/`). Compiled as `pool::broken`, a child of `pool`, in
//! test builds only, so a twin reaches what the real function reaches.

use super::free_map::FreeMap;
use super::node::{Node, CLAIMED, FREE};
use super::{Handle, Pool};
use crate::sync::Ordering::{Acquire, Relaxed};
use core::marker::PhantomData;

/// `Mutant::CheckThenClaim`, for the free map: a slot claimed with a load and a separate
/// store instead of one read-modify-write, so two allocators can both claim it.
pub(crate) fn claim_by_store<const N: usize>(map: &FreeMap<N>) -> Option<usize> {
    let hint = map.hint.load(Relaxed) as usize;
    let mut i = if hint < N { hint } else { 0 };
    for _ in 0..N {
        if !map.taken[i].load(Relaxed) {
            pause_point!(AllocAfterProbe);
            map.taken[i].store(true, Relaxed);
            crate::sync::fence(Acquire);
            return Some(i);
        }
        i = if i + 1 >= N { 0 } else { i + 1 };
    }
    None
}

/// `Mutant::ZeroingAlloc`: the slot cleared first (its count becomes 0 = ONEREF, live),
/// then the value constructed (Jann Horn's finding on the file_ref v2 series). The
/// pause stands for the constructor's work.
pub(crate) fn alloc_zeroing<T, const N: usize>(
    pool: &Pool<T, N>,
    i: usize,
    value: T,
) -> Handle<'_, T, N> {
    let slot = &pool.slots[i];
    slot.refs.init(1);
    for _ in 0..64 {
        core::hint::spin_loop();
    }
    // SAFETY: the caller claimed slot `i`, so by the pool's invariant the value is
    // uninitialised and nobody else writes it (the variant's readers may read it: that
    // is the bug the tests catch).
    slot.value.with_mut(|p| unsafe { (*p).write(value) });
    slot.refs.init(1);
    #[cfg(feature = "pool-stats")]
    pool.stats.allocated();
    Handle {
        pool,
        index: i as u32,
        _not_send_unless: PhantomData,
    }
}

/// `Mutant::CheckThenClaim` (a load and a separate store) and `Mutant::ZeroingAlloc` (the
/// count made live at the claim, before the fields are written), for a `Node`.
pub(crate) fn claim_node(node: &Node) -> bool {
    if node.state.load(Relaxed) != FREE {
        return false;
    }
    if mutant!(CheckThenClaim) {
        node.state.store(CLAIMED, Relaxed);
        crate::sync::fence(Acquire);
        return true;
    }
    let won = node
        .state
        .compare_exchange(FREE, CLAIMED, Acquire, Relaxed)
        .is_ok();
    if won {
        node.count.init(1);
    }
    won
}
