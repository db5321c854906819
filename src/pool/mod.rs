//! A typesafe-by-RCU object pool: the kernel's `SLAB_TYPESAFE_BY_RCU`, without a heap.
//!
//! A [`Pool<T, N>`] is `N` slots of `T` in a `static`. Each slot carries a [`FileRef32`],
//! the object's reference count. A freed slot is reused **at once** for another `T`:
//! only the *type* of a slot's memory is stable for a reader, not the object's identity.
//! That is what makes lookups cheap and allocation immediate, and it is why a lookup
//! must re-check what it found.
//!
//! # The rules, and who enforces them
//!
//! * **The count is never zeroed.** A free slot's count rests at DEAD, where every
//!   `get` fails. Allocation writes the new value first and publishes the count last
//!   with `init(1)` (a `Release` store). A zeroing allocator would set the count to 0,
//!   which is ONEREF, a *live* count: a racing reader's `get` would succeed on a slot
//!   under construction, `init` would then overwrite that reference, and the reader's
//!   later put would destroy the new owner's object (Jann Horn's finding on the file_ref
//!   v2 series; `Mutant::ZeroingAlloc` reproduces it and the tests catch it).
//! * **Get, then re-check** ([`PoolCell::get`], the kernel's `__get_file_rcu`): load
//!   which slot a published location names, take a reference with the fully ordered
//!   `get`, then load the location again. If it no longer names that slot, the object
//!   may be a different one that reused the slot: put the reference and retry.
//!   `Mutant::NoRecheck` skips the re-check and the tests catch it.
//! * **Fields only through a reference.** A [`Handle`] is a counted reference; `&T` is
//!   reachable only through one. Readers that lost the race never touch the value.
//! * **Lookups inside a read section.** [`PoolCell::get`] takes an RCU [`Guard`]. With a
//!   static pool the memory itself never goes away, so the section is what the kernel's
//!   API requires rather than what memory safety here needs; it also keeps the put of a
//!   failed re-check inside a section, which is the rule FileRef's deconstruction race
//!   asks for.
//!
//! # Races, step by step
//!
//! | reader (lookup of location L)          | writer                                   |
//! |----------------------------------------|------------------------------------------|
//! | loads L: slot 3                        |                                          |
//! |                                        | takes L's object (slot 3), drops it: DEAD, slot 3 freed |
//! | `get` on slot 3 fails (DEAD): retry    |                                          |
//! |                                        | allocates slot 3 for another object: value written, `init(1)` |
//! | (or) `get` on slot 3 succeeds: new object | publishes it at location M            |
//! | re-check: L no longer names slot 3     |                                          |
//! | put (maybe the last: then it destroys) and retry |                                |
//!
//! # Memory ordering
//!
//! (Each claim names its litmus test: `litmus/README.md`.)
//!
//! * Allocation's `init(1)` (`Release`) after writing the value pairs with a reader's
//!   `get` (`SeqCst` add, which acquires): a reader whose get succeeded sees the value
//!   (`pool-init-then-publish`).
//! * The re-check load comes after the `get` in program order, and the get's ordering
//!   keeps it there: it cannot be satisfied before the reference was taken
//!   (`pool-identity-recheck`; with a relaxed get it can, Linus's objection).
//! * The last put's acquire (FileRef's NOREF → DEAD) orders every holder's use of the
//!   value before its destruction (`fileref-last-put`); the slot's claim flag (`Release`
//!   when freed, `Acquire` swap when claimed) orders the destruction before the next
//!   allocation's writes (`pool-free-then-claim`), and a claim is one read-modify-write
//!   (`pool-claim-is-exclusive`).
//!
//! # Allocation
//!
//! Each slot has a claim flag; [`Pool::alloc`] claims a slot with one atomic swap of its
//! flag and keeps it only if the swap returned "free". No decision rests on a value read
//! earlier, so there is no ABA to defend against (the tagged Treiber stack this replaced
//! handed out a live slot twice when a pop was preempted for one tag period). The
//! search starts at the most recently freed slot: one load and one swap when a slot was
//! freed recently, at most `N` loads when the pool is nearly full. Under concurrent
//! frees a search can miss a slot freed behind it, so [`Error::Full`] means "every slot was
//! seen in use during the call", not "all were in use at one instant".
//!
//! # Counts that saturate
//!
//! A count pushed past 2³¹ references (safe code can `mem::forget` clones of a
//! [`Handle`]) saturates and stays saturated ([`FileRef32`]'s zones are sticky): the
//! object is leaked, never destroyed, and its slot is never reused. Lookups keep
//! finding it and handles keep working. The pool uses the 32-bit count on every target:
//! with sticky saturation 2³¹ live references are only a leak threshold, never a
//! safety one, and a 64-bit count would cost 4 to 8 bytes per slot for a limit no
//! program reaches without leaking 2³¹ handles (32 GiB of them on a 64-bit host).
//!
//! # Safety guarantees
//!
//! On every target, whatever the interleaving, preemption, or number of contexts:
//!
//! * A slot is never owned by two objects: claims are single swaps (tested with
//!   allocators stopped mid-claim while others churn the same slot, `tests/preemption.rs`,
//!   and in loom).
//! * A [`Handle`] keeps its object alive; the value is dropped exactly once, by the last
//!   put, and never while a handle exists, however the count is pushed (sticky
//!   saturation; the 2³² forgotten clones attack is a test).
//! * A lookup ([`PoolCell::get`]) returns only an object its location named at the
//!   moment of the re-check, and never one under construction.
//! * A handle or location cannot outlive its pool, nor a reference through a handle the
//!   handle (compile-fail tests).
//! * A `T::drop` that panics still frees the slot (the value counts as dropped).
//!
//! Lookups are lock-free, not wait-free: a location replaced over and over can make a
//! lookup retry for as long as that goes on.

// The broken variants' twins (test builds only), kept with the other variants in
// `mutants/` but compiled as a child of this module, so a twin reaches what the real
// function it replaces reaches.
#[cfg(rcuref_variants)]
#[path = "../mutants/pool.rs"]
mod broken;
pub(crate) mod free_map;
pub mod node;

use crate::error::{Error, Refused};
use crate::file_ref::FileRef32;
use crate::rcu::Guard;
use crate::sync::{AtomicU32, Ordering, UnsafeCell};
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use free_map::FreeMap;

/// One slot: the count and the (possibly uninitialised) value.
struct Slot<T> {
    refs: FileRef32,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// `N` slots of `T` with typesafe-by-RCU reuse (see the [module docs](self)).
pub struct Pool<T, const N: usize> {
    // INVARIANTS:
    // * A slot not claimed in `free` has its count in the dead zone and no initialised
    //   value; nothing but failing `get`s touches it.
    // * A claimed slot holds an initialised `T` while its count is live or saturated
    //   (a saturated object is leaked: never destroyed); the caller whose put moved the
    //   count to DEAD drops the value and releases the slot, exactly once.
    slots: [Slot<T>; N],
    free: FreeMap<N>,
    /// Occupancy statistics (feature `pool-stats`): two more read-modify-writes per
    /// allocation and free, which is why they are not on by default.
    #[cfg(feature = "pool-stats")]
    stats: Stats,
}

/// Slots in use and the most ever in use at once (feature `pool-stats`).
#[cfg(feature = "pool-stats")]
struct Stats {
    in_use: AtomicU32,
    high_water: AtomicU32,
}

#[cfg(feature = "pool-stats")]
impl Stats {
    const_fn! {
        const fn new() -> Self {
            Stats {
                in_use: AtomicU32::new(0),
                high_water: AtomicU32::new(0),
            }
        }
    }

    fn allocated(&self) {
        let now = self.in_use.fetch_add(1, Ordering::Relaxed) + 1;
        // A plain load first: the read-modify-write is needed only on a new record.
        if now > self.high_water.load(Ordering::Relaxed) {
            self.high_water.fetch_max(now, Ordering::Relaxed);
        }
    }

    fn freed(&self) {
        self.in_use.fetch_sub(1, Ordering::Relaxed);
    }
}

// SAFETY: the pool hands `&T` to any context through handles (needs `T: Sync`) and
// drops `T` on whichever context puts the last reference (needs `T: Send`); all of its
// own state is atomic.
unsafe impl<T: Send + Sync, const N: usize> Sync for Pool<T, N> {}
// SAFETY: as above; moving the pool moves its values.
unsafe impl<T: Send + Sync, const N: usize> Send for Pool<T, N> {}

impl<T, const N: usize> Pool<T, N> {
    const_fn! {
        /// An empty pool, usable in a `static`.
        pub const fn new() -> Self {
            Pool {
                slots: array_of!(
                    Slot {
                        refs: FileRef32::from_raw(FileRef32::DEAD),
                        value: UnsafeCell::new(MaybeUninit::uninit()),
                    };
                    N
                ),
                free: FreeMap::new(),
                #[cfg(feature = "pool-stats")]
                stats: Stats::new(),
            }
        }
    }

    /// Stores `value` in a free slot and returns the only reference to it. O(1).
    ///
    /// # Errors
    /// [`Refused`] with [`Error::Full`] and the value when every slot was seen in use
    /// (see "Allocation" in the module docs).
    pub fn alloc(&self, value: T) -> Result<Handle<'_, T, N>, Refused<T>> {
        let Some(i) = self.free.claim() else {
            return Err(Refused::new(Error::Full, value));
        };
        let slot = &self.slots[i];
        divert!(ZeroingAlloc => Ok(broken::alloc_zeroing(self, i, value)));
        // SAFETY: we claimed the slot, so by the type invariant the value is
        // uninitialised and nobody else accesses it: racing readers' gets fail on the
        // dead count and never reach the value.
        slot.value.with_mut(|p| unsafe { (*p).write(value) });
        // INVARIANT: the value is initialised; publish the count last (Release).
        slot.refs.init(1);
        #[cfg(feature = "pool-stats")]
        self.stats.allocated();
        Ok(Handle {
            pool: self,
            index: i as u32,
            _not_send_unless: PhantomData,
        })
    }

    /// Slots in use now: a count of the claimed slots, O(N) (diagnostics; exact when no
    /// allocation or free runs at the same time).
    pub fn in_use(&self) -> usize {
        self.free.claimed()
    }

    /// The most slots ever in use at once (feature `pool-stats`).
    #[cfg(feature = "pool-stats")]
    #[cfg_attr(docsrs, doc(cfg(feature = "pool-stats")))]
    pub fn high_water(&self) -> usize {
        self.stats.high_water.load(Ordering::Relaxed) as usize
    }

    /// The number of slots, `N`.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// Tries to take a reference to whatever object slot `index` holds now.
    fn try_get(&self, index: usize) -> Option<Handle<'_, T, N>> {
        // INVARIANT: a successful get on a live count gives us one of its references.
        // (`then`, not `then_some`: a Handle built eagerly on a failed get would put a
        // reference that was never taken when it is dropped.)
        self.slots[index].refs.get().then(|| Handle {
            pool: self,
            index: index as u32,
            _not_send_unless: PhantomData,
        })
    }

    /// Drops the last reference's value and frees the slot.
    fn destroy(&self, index: usize) {
        /// Frees the slot when dropped: after the value's drop, or while unwinding from
        /// a panic in it (the value then counts as dropped; the slot is not lost).
        struct FreeOnDrop<'a, T, const N: usize>(&'a Pool<T, N>, usize);
        impl<T, const N: usize> Drop for FreeOnDrop<'_, T, N> {
            fn drop(&mut self) {
                #[cfg(feature = "pool-stats")]
                self.0.stats.freed();
                self.0.free.release(self.1);
            }
        }
        let _free = FreeOnDrop(self, index);
        // SAFETY: our put moved the count to DEAD, so by the type invariant we are the one
        // caller that drops this value, no handle remains, and later gets fail.
        self.slots[index]
            .value
            .with_mut(|p| unsafe { (*p).assume_init_drop() });
    }
}

#[cfg(not(loom))]
impl<T, const N: usize> Default for Pool<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

/// A counted reference to a pooled object. Cloning takes another reference; dropping
/// the last one drops the value and frees the slot for immediate reuse.
///
pub struct Handle<'p, T, const N: usize> {
    // INVARIANT: `index < N`, and this handle owns one reference counted in that slot's
    // `refs`.
    pool: &'p Pool<T, N>,
    index: u32,
    _not_send_unless: PhantomData<&'p T>,
}

impl<T, const N: usize> Handle<'_, T, N> {
    /// The slot this object lives in (stable for the handle's life; another object may
    /// use it afterwards).
    pub fn slot(&self) -> usize {
        self.index as usize
    }

    /// References held on this object right now (diagnostics).
    pub fn ref_count(&self) -> u32 {
        self.pool.slots[self.index as usize].refs.count()
    }

    /// Whether two handles name the same object.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        core::ptr::eq(a.pool, b.pool) && a.index == b.index
    }
}

impl<T, const N: usize> core::ops::Deref for Handle<'_, T, N> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: by the type invariant we hold a reference, so the count is live and the
        // value initialised, and it stays so until our drop.
        self.pool.slots[self.index as usize]
            .value
            .with(|p| unsafe { (*p).assume_init_ref() })
    }
}

impl<T, const N: usize> Clone for Handle<'_, T, N> {
    fn clone(&self) -> Self {
        // INVARIANT: we hold a reference, so `inc` is valid and the clone owns the new one.
        self.pool.slots[self.index as usize].refs.inc();
        Handle {
            pool: self.pool,
            index: self.index,
            _not_send_unless: PhantomData,
        }
    }
}

impl<T, const N: usize> Drop for Handle<'_, T, N> {
    fn drop(&mut self) {
        if self.pool.slots[self.index as usize].refs.put() {
            self.pool.destroy(self.index as usize);
        }
    }
}

impl<T, const N: usize> core::fmt::Debug for Pool<T, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Values are not shown: reading one needs a reference to it.
        f.debug_struct("Pool")
            .field("capacity", &N)
            .field("in_use", &self.in_use())
            .finish_non_exhaustive()
    }
}

impl<T, const N: usize> core::fmt::Debug for PoolCell<'_, T, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let cur = self.cur.load(Ordering::Relaxed);
        f.debug_struct("PoolCell")
            .field("slot", &cur.checked_sub(1))
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl<T: defmt::Format, const N: usize> defmt::Format for Handle<'_, T, N> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "Handle {{ slot: {}, value: {} }}", self.index, **self)
    }
}

impl<T: core::fmt::Debug, const N: usize> core::fmt::Debug for Handle<'_, T, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Handle")
            .field("slot", &self.index)
            .field("value", &**self)
            .finish()
    }
}

/// A published location that names one pooled object (or none) and owns a reference to
/// it: an fd-table entry, a hash bucket, a tree link. Readers look it up with
/// [`get`](Self::get) inside a read section; writers [`replace`](Self::replace) it.
///
pub struct PoolCell<'p, T, const N: usize> {
    // INVARIANT: `cur` is 0 or `index + 1` of a slot in which this cell owns one
    // reference.
    pool: &'p Pool<T, N>,
    cur: AtomicU32,
}

impl<'p, T, const N: usize> PoolCell<'p, T, N> {
    const_fn! {
        /// An empty location of `pool`, usable in a `static`.
        pub const fn new(pool: &'p Pool<T, N>) -> Self {
            PoolCell {
                pool,
                cur: AtomicU32::new(0),
            }
        }
    }

    /// Publishes `new` (its reference moves into the cell) and returns the previous
    /// object's reference, if any.
    ///
    /// # Panics
    /// If `new` is a handle of another pool than the cell's (a programming error).
    pub fn replace(&self, new: Option<Handle<'p, T, N>>) -> Option<Handle<'p, T, N>> {
        let raw = match new {
            Some(h) => {
                assert!(
                    core::ptr::eq(h.pool, self.pool),
                    "rcuref: PoolCell::replace with a handle of another pool"
                );
                let raw = h.index + 1;
                core::mem::forget(h); // INVARIANT: the cell now owns this reference
                raw
            }
            None => 0,
        };
        let old = swap_location(&self.cur, raw);
        // INVARIANT: the swap took the old reference out of the cell; it is ours now.
        (old != 0).then(|| Handle {
            pool: self.pool,
            index: old - 1,
            _not_send_unless: PhantomData,
        })
    }

    /// Whether the location names no object right now (a relaxed snapshot: for the
    /// writer side, whose updates are serialised, it is exact).
    pub fn is_empty(&self) -> bool {
        self.cur.load(Ordering::Relaxed) == 0
    }

    /// Empties the location, returning its reference.
    pub fn take(&self) -> Option<Handle<'p, T, N>> {
        self.replace(None)
    }

    /// Looks the location up: a counted reference to the object it names, or `None`.
    /// Get-then-recheck: a reference taken on a slot that the location no longer names
    /// is put back and the lookup retried, so the result is always an object the
    /// location named at the moment of the re-check.
    pub fn get<const R: usize>(&self, _section: &Guard<'_, '_, R>) -> Option<Handle<'p, T, N>> {
        loop {
            let v = load_location(&self.cur);
            if v == 0 {
                return None;
            }
            read_delay_point!();
            let Some(h) = self.pool.try_get((v - 1) as usize) else {
                // Dead: the object was taken out and freed after our load; the location
                // has changed (or is changing), so look again.
                core::hint::spin_loop();
                continue;
            };
            if still_names(&self.cur, v) {
                return Some(h);
            }
            drop(h); // a different object now owns the slot: give it back, retry
        }
    }
}

/// A lookup's load of a location (the first, and the re-check after the get): `Acquire`,
/// pairing with `swap_location`. The re-check comes after the get (`SeqCst`) in program
/// order and the get keeps it there (litmus: `pool-identity-recheck`).
#[inline(always)]
pub(crate) fn load_location(cur: &AtomicU32) -> u32 {
    cur.load(Ordering::Acquire)
}

/// The re-check of a lookup: whether the location still names `v`, after the get (whose
/// full ordering keeps this load after it).
#[inline(always)]
fn still_names(cur: &AtomicU32, v: u32) -> bool {
    divert!(NoRecheck => true);
    load_location(cur) == v
}

/// A writer's replacement of a location: an `AcqRel` swap.
#[inline(always)]
pub(crate) fn swap_location(cur: &AtomicU32, raw: u32) -> u32 {
    cur.swap(raw, Ordering::AcqRel)
}

impl<T, const N: usize> Drop for PoolCell<'_, T, N> {
    fn drop(&mut self) {
        drop(self.take());
    }
}
