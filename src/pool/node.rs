//! The pool's protocol for objects in memory the caller owns: a [`Node`] that each
//! object embeds (its reference count and its state) and [`lookup`], the get-then-recheck
//! loop. [`Pool`](super::Pool) keeps its objects in its own array; a kernel's objects
//! live in its own tables, in C structures, at addresses it chose. The C API's
//! `rcuref_pool_*` functions are this module over a caller's array.
//!
//! A node's life, each move one atomic operation by the only context that may make it:
//!
//! ```text
//! FREE --claim (compare-exchange, Acquire)--> CLAIMED    fields being written
//! CLAIMED --publish (compare-exchange; the count's init(1), Release)--> LIVE
//! LIVE --last put (the count's NOREF -> DEAD)--> DYING   destroy runs
//! DYING --(store, Release)--> FREE
//! ```
//!
//! The same rules as [`Pool`](super::Pool)'s, and the same orderings: the count rests at
//! DEAD while a node is free, claimed or dying, so every get on it fails (never zeroed:
//! `Mutant::ZeroingAlloc` brings the zeroing bug back); publish is the count's
//! `init(1)` (`Release`) after the fields; the last put's acquire orders every holder's
//! use before `destroy`, and the `Release` store of FREE orders `destroy` before the
//! next claim's writes (litmus: `pool-init-then-publish`, `node-free-then-claim`,
//! `pool-identity-recheck`; a claim is one compare-exchange, `node-claim-is-exclusive`).
//!
//! Each state word carries a tag in its high half, so that memory no node has used
//! (zeroed, or arbitrary) is not mistaken for a node in use: [`Node::marks_in_use`] lets
//! an initialiser refuse memory that some pool still uses (a false match is three
//! values in 2^32 and costs a refused initialisation, never an object handed out
//! twice).

use crate::error::Error;
use crate::file_ref::FileRef32;
use crate::sync::{
    AtomicU32,
    Ordering::{Acquire, Relaxed, Release},
};

const TAG: u32 = 0x706e_0000;
/// Free: a claim may take it.
pub(super) const FREE: u32 = TAG;
/// Claimed; fields being written; publish moves it on.
pub(super) const CLAIMED: u32 = TAG | 1;
/// Published: its count is live (until the last put).
const LIVE: u32 = TAG | 2;
/// The last put is running `destroy`; freed after it.
const DYING: u32 = TAG | 3;

/// What a pooled object in the caller's memory embeds: its reference count and its
/// state (free, claimed, published, being destroyed). `repr(C)`: the C API's
/// `rcuref_pool_node` is this struct.
#[repr(C)]
pub struct Node {
    // INVARIANTS:
    // * `count` is in the dead zone unless `state` is LIVE (a saturated count is leaked
    //   and stays LIVE).
    // * `state` leaves FREE only by a claim's compare-exchange, CLAIMED only by
    //   publish's, and LIVE only by the put that moved the count to DEAD (one context),
    //   so one context at a time owns the object's fields outside LIVE.
    pub(super) count: FileRef32,
    pub(super) state: AtomicU32,
}

impl Node {
    const_fn! {
        /// A free node (its count dead).
        pub const fn new() -> Self {
            Node {
                count: FileRef32::from_raw(FileRef32::DEAD),
                state: AtomicU32::new(FREE),
            }
        }
    }

    /// Claims the node if it is free: one compare-exchange (`Acquire`: the previous
    /// object's destruction happens before the caller writes the new one's fields).
    /// The count stays dead, so lookups fail on it until [`publish`](Self::publish).
    #[inline]
    pub fn claim(&self) -> bool {
        divert!(CheckThenClaim | ZeroingAlloc => super::broken::claim_node(self));
        if self.state.load(Relaxed) != FREE {
            return false;
        }
        self.state
            .compare_exchange(FREE, CLAIMED, Acquire, Relaxed)
            .is_ok()
    }

    /// Publishes a claimed node: its count becomes one reference, the caller's, with a
    /// `Release` store, so a reader whose get succeeds sees the fields written before.
    /// Call it after writing every field and before storing the object where readers
    /// find it. `false`, changing nothing, if the node is not claimed (free, already
    /// published, or being destroyed).
    #[inline]
    pub fn publish(&self) -> bool {
        if self
            .state
            .compare_exchange(CLAIMED, LIVE, Relaxed, Relaxed)
            .is_err()
        {
            return false;
        }
        // INVARIANT: LIVE, and now the count too.
        self.count.init(1);
        true
    }

    /// Tries to take a reference (inside a read section, on an object found through a
    /// published location): `true` if it took one, then re-check that the location
    /// still names this object ([`lookup`] does both).
    #[inline]
    pub fn get(&self) -> bool {
        self.count.get()
    }

    /// Takes another reference for a holder of one (cannot fail).
    #[inline]
    pub fn inc(&self) {
        self.count.inc();
    }

    /// Drops a reference the caller holds. The last one runs `destroy`, then frees the
    /// node for the next claim, and returns `true`. If `destroy` panics, the node is
    /// freed all the same (the object counts as destroyed).
    pub fn put(&self, destroy: impl FnOnce()) -> bool {
        if !self.count.put() {
            return false;
        }
        // The last reference: nobody else is here, and nothing may publish it again
        // while `destroy` runs.
        crate::sync::plain_store!(self.state, DYING, Relaxed);
        /// Frees the node after `destroy` (also while unwinding from it).
        struct FreeOnDrop<'a>(&'a AtomicU32);
        impl Drop for FreeOnDrop<'_> {
            fn drop(&mut self) {
                // Release: the destruction happens before the next claim's writes.
                crate::sync::plain_store!(self.0, FREE, Release);
            }
        }
        let _free = FreeOnDrop(&self.state);
        destroy();
        true
    }

    /// Whether the node is in use: claimed, published or being destroyed.
    pub fn is_in_use(&self) -> bool {
        Self::marks_in_use(self.state.load(Acquire))
    }

    /// References held right now (diagnostics; 0 when not published).
    pub fn ref_count(&self) -> u32 {
        if self.state.load(Relaxed) == LIVE {
            self.count.count()
        } else {
            0
        }
    }

    /// Whether `word`, read from memory where a node's state word may lie, is the state
    /// of a node in use: for an initialiser that must refuse memory some pool still
    /// uses, whatever that pool's layout. A data word that happens to hold one of the
    /// three in-use values (`0x706e0001` to `0x706e0003`) reads as in use too.
    pub const fn marks_in_use(word: u32) -> bool {
        matches!(word, CLAIMED | LIVE | DYING)
    }
}

#[cfg(not(loom))]
impl Default for Node {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for Node {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let state = match self.state.load(Relaxed) {
            FREE => "free",
            CLAIMED => "claimed",
            LIVE => "live",
            DYING => "dying",
            _ => "not a node",
        };
        f.debug_struct("Node").field("state", &state).finish()
    }
}

/// Looks up the object a published location names and takes a reference to it (inside
/// a read section: the kernel's `__get_file_rcu`): `load` reads the location (an
/// `Acquire` load of the pointer the writer stores with `Release`); `node_of` gives the
/// node of an object of the pool (`None`: not one of its objects); `destroy` runs if a
/// reference this lookup took and gives back turns out to be the last. It loads the
/// location, gets a reference, and loads the location again; if it names another object
/// by then, it puts the reference and starts over.
///
/// Returns the object with a reference the caller now holds, or null (the location is
/// empty, or names an object that is being destroyed: absent, as it is about to be).
/// Lock-free, not wait-free: a location replaced over and over can make it retry.
///
/// **A location must hold a reference to the object it names** (take the object out of
/// the location before putting the location's reference, as [`PoolCell`](super::PoolCell)
/// does). The re-check compares addresses: if an object's last reference is put while a
/// location still names it, its node may be freed and reused for another object at the
/// same address, and a lookup of that location returns the new object, which nobody
/// stored there. Code that cannot keep that rule must re-check
/// the object's identity (a key) itself.
///
/// # Errors
/// [`Error::OtherDomain`] if the location holds a pointer that `node_of` refuses;
/// nothing is taken.
pub fn lookup<'n, T>(
    mut load: impl FnMut() -> *mut T,
    mut node_of: impl FnMut(*mut T) -> Option<&'n Node>,
    mut destroy: impl FnMut(*mut T),
) -> Result<*mut T, Error> {
    loop {
        let obj = load();
        if obj.is_null() {
            return Ok(obj);
        }
        let node = node_of(obj).ok_or(Error::OtherDomain)?;
        read_delay_point!();
        if !node.get() {
            if load() == obj {
                // Still named, but dying (its last put came before the unpublish).
                return Ok(core::ptr::null_mut());
            }
            core::hint::spin_loop();
            continue; // the location changed: look again
        }
        if still_names(&mut load, obj) {
            return Ok(obj);
        }
        // Another object reuses the node now: not the one this location names.
        node.put(|| destroy(obj));
    }
}

/// The re-check of a lookup: whether the location still names `obj`, after the get
/// (whose full ordering keeps this load after it).
#[inline(always)]
fn still_names<T>(load: &mut impl FnMut() -> *mut T, obj: *mut T) -> bool {
    divert!(NoRecheck => true);
    load() == obj
}
