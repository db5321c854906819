//! The zoned counter's logic, written once as plain generic functions over a private
//! [`Word`] trait, so that tools see it (mutation testing, "go to definition"); the
//! `zoned_ref!` macro only stamps out the public types, their constants and `const`
//! constructors, which must stay concrete to be `const`.

use crate::log::{warn, Warning};
use crate::sync::Fence;
use crate::sync::Ordering::{self, AcqRel, Relaxed, Release, SeqCst};

/// A counter width: the integer, its atomic, and the zone constants.
pub(crate) trait Word: Copy + Eq + Ord {
    type Atomic;
    const ONEREF: Self;
    const MAXREF: Self;
    const SATURATED: Self;
    const RELEASED: Self;
    const DEAD: Self;
    const NOREF: Self;

    /// The sign bit is set (the count is outside the valid zone).
    fn negative(self) -> bool;
    fn plus_one(self) -> Self;
    fn load(a: &Self::Atomic, o: Ordering) -> Self;
    fn store(a: &Self::Atomic, v: Self, o: Ordering);
    /// Adds one; returns the new value.
    fn add_one(a: &Self::Atomic, o: Ordering) -> Self;
    /// Subtracts one; returns the new value.
    fn sub_one(a: &Self::Atomic, o: Ordering) -> Self;
    fn cas(
        a: &Self::Atomic,
        cur: Self,
        new: Self,
        ok: Ordering,
        err: Ordering,
    ) -> Result<Self, Self>;
}

macro_rules! word {
    ($int:ty, $sint:ty, $atomic:ty) => {
        impl Word for $int {
            type Atomic = $atomic;
            const ONEREF: $int = 0;
            const MAXREF: $int = <$int>::MAX >> 1;
            const SATURATED: $int = 0xA << (<$int>::BITS - 4);
            const RELEASED: $int = 0xC << (<$int>::BITS - 4);
            const DEAD: $int = 0xE << (<$int>::BITS - 4);
            const NOREF: $int = <$int>::MAX;

            #[inline(always)]
            fn negative(self) -> bool {
                (self as $sint) < 0
            }
            #[inline(always)]
            fn plus_one(self) -> Self {
                self.wrapping_add(1)
            }
            #[inline(always)]
            fn load(a: &$atomic, o: Ordering) -> Self {
                a.load(o)
            }
            #[inline(always)]
            fn store(a: &$atomic, v: Self, o: Ordering) {
                // A swap under loom (loom#254: `sync::plain_store!`).
                crate::sync::plain_store!(a, v, o);
            }
            #[inline(always)]
            fn add_one(a: &$atomic, o: Ordering) -> Self {
                a.fetch_add(1, o).wrapping_add(1)
            }
            #[inline(always)]
            fn sub_one(a: &$atomic, o: Ordering) -> Self {
                a.fetch_sub(1, o).wrapping_sub(1)
            }
            #[inline(always)]
            fn cas(
                a: &$atomic,
                cur: Self,
                new: Self,
                ok: Ordering,
                err: Ordering,
            ) -> Result<Self, Self> {
                a.compare_exchange(cur, new, ok, err)
            }
        }
    };
}

word!(u32, i32, crate::sync::AtomicU32);
#[cfg(rcuref_atomic64)]
word!(u64, i64, crate::sync::AtomicU64);

/// The raw value that `refs` references are stored as, for either width (computed in
/// `u64`, which holds every 32-bit value too): `refs - 1`; 0 refs is DEAD and anything
/// above `MAXREF + 1` is SATURATED. A `const fn`, so `new` can be `const`.
pub(crate) const fn raw_for(refs: u64, maxref: u64, saturated: u64, dead: u64) -> u64 {
    if refs == 0 {
        dead
    } else if refs - 1 > maxref {
        saturated
    } else {
        refs - 1
    }
}

/// What `from_raw` stores for `raw` (computed in `u64` for either width): a value of the
/// valid zone as it is, any value of the saturation zone as SATURATED, any value of the
/// dead zone (NOREF included) as DEAD. Every zone's edge is then at least 2^29 adds (on
/// 32 bits) away, so one add, or one put, can never carry the count into the next zone
/// (`negative_control_verbatim_from_raw_breaks_the_zones` shows what edges kept verbatim
/// do). NOREF means "a put is finishing": a count made from
/// it has no put that will finish, so it is dead.
pub(crate) const fn normalized(
    raw: u64,
    maxref: u64,
    released: u64,
    saturated: u64,
    dead: u64,
) -> u64 {
    if raw <= maxref {
        raw
    } else if raw < released {
        saturated
    } else {
        dead
    }
}

/// `init`: the count published last, with `Release` (litmus: `pool-init-then-publish`).
#[inline]
pub(crate) fn init<W: Word>(cnt: &W::Atomic, raw: W) {
    W::store(cnt, raw, Release);
}

/// The orderings of the count's read-modify-writes that order accesses to the object,
/// as one table (the others are `Relaxed` where they stand, each with its reason).
#[derive(Clone, Copy)]
pub(crate) struct Orders {
    /// `get`'s add: fully ordered, so a get orders the caller's later accesses after it
    /// and a failed one cannot pass a concurrent `put`'s decision (litmus:
    /// `fileref-get-after-publish`, `fileref-last-put`).
    pub(crate) get: Ordering,
    /// `put`'s subtract: fully ordered, so every holder's accesses come before its put
    /// and the last put's destroyer sees them through the release sequence.
    pub(crate) put: Ordering,
    /// The last put's NOREF → DEAD exchange on success ([`mark_dead`]).
    pub(crate) mark_dead: Ordering,
    /// The fence after a won [`mark_dead`]: `Acquire`, synchronising with every earlier
    /// put's release (litmus: `fileref-last-put`).
    pub(crate) after_mark_dead: Fence,
}

/// The table the counter runs with.
pub(crate) const ORDERS: Orders = Orders {
    get: SeqCst,
    put: SeqCst,
    mark_dead: Release,
    after_mark_dead: Fence::Acquire,
};

/// [`ORDERS`] (in test builds, as the selected broken variant changes it).
#[inline(always)]
fn orders() -> Orders {
    variant_table!(Orders, ORDERS, crate::mutants::file_ref::orders)
}

/// `get`: one fully ordered add; the cold path decides from its result.
#[inline]
pub(crate) fn get<W: Word>(cnt: &W::Atomic) -> bool {
    let new = W::add_one(cnt, orders().get);
    if !new.negative() {
        return true;
    }
    get_slow(cnt, new)
}

/// A get whose add left the valid zone: a saturated count still hands out references
/// (the object is leaked, so it is never destroyed); a dead one does not.
#[cold]
#[inline(never)]
fn get_slow<W: Word>(cnt: &W::Atomic, new: W) -> bool {
    divert!(NoDriftRepair => false);
    let saturated = new < W::RELEASED;
    pull_back(cnt, new);
    if saturated {
        warn(Warning::Saturated);
    }
    saturated
}

/// `inc`: a relaxed add for a caller that already holds a reference; the cold path keeps
/// saturation sticky.
#[inline]
pub(crate) fn inc<W: Word>(cnt: &W::Atomic) {
    let new = W::add_one(cnt, Relaxed);
    if new.negative() {
        inc_slow(cnt, new);
    }
}

#[cold]
#[inline(never)]
fn inc_slow<W: Word>(cnt: &W::Atomic, new: W) {
    // An inc that lands on NOREF started from NOREF - 1: drift of a released count.
    divert!(IncNotSticky => crate::mutants::file_ref::inc_slow_not_sticky::<W>(new));
    let released = new >= W::RELEASED;
    pull_back(cnt, new);
    warn(inc_warning::<W>(released));
}

/// What an `inc` that left the valid zone reports.
#[inline(always)]
pub(crate) fn inc_warning<W: Word>(released: bool) -> Warning {
    if released {
        Warning::IncOnReleased
    } else {
        Warning::Saturated
    }
}

/// Keeps a count that an add moved out of the valid zone from drifting out of its zone:
/// a saturated value goes back to SATURATED, a dead one to DEAD.
///
/// Every value in the saturation zone means the same as SATURATED and every dead value
/// other than NOREF means the same as DEAD, whichever incarnation of a reused object it
/// belongs to, so replacing one with the other is always safe; NOREF (a put in flight)
/// and the valid zone are never touched. Each context adds at most once before it gets
/// here, so with K contexts between their add and this repair a count stays within
/// K of SATURATED or DEAD: it never walks into the next zone, however many adds come.
#[inline(never)]
fn pull_back<W: Word>(cnt: &W::Atomic, new: W) {
    let (lo, hi, rest) = if new >= W::RELEASED {
        (W::RELEASED, W::NOREF, W::DEAD)
    } else {
        (W::MAXREF.plus_one(), W::RELEASED, W::SATURATED)
    };
    let mut cur = new;
    if new == W::NOREF {
        // Only an add that started at NOREF - 1 produces NOREF here (an add on a live
        // NOREF lands on ONEREF and succeeds), so this NOREF is dead drift, not a put in
        // flight: move it back before a second add could land on ONEREF. One attempt:
        // if the value moved on, the loop below handles whatever it became.
        match repair::<W>(cnt, W::NOREF, W::DEAD) {
            Ok(_) => return,
            Err(now) => cur = now,
        }
    }
    while cur >= lo && cur < hi && cur != rest {
        match repair::<W>(cnt, cur, rest) {
            Ok(_) => return,
            Err(now) => cur = now,
        }
    }
}

/// One repair: a relaxed compare-exchange from a value of a zone to the value in its
/// middle. A read-modify-write, so it keeps the release sequence of the `init` (or
/// saturating put) that began the count's history: a later get that reads the repaired
/// value still synchronises with it (litmus: `fileref-repair-keeps-release-sequence`).
#[inline(always)]
pub(crate) fn repair<W: Word>(cnt: &W::Atomic, from: W, to: W) -> Result<W, W> {
    W::cas(cnt, from, to, Relaxed, Relaxed)
}

/// `put`: one fully ordered subtract; the slow path works on the value it returned.
#[inline]
pub(crate) fn put<W: Word>(cnt: &W::Atomic) -> bool {
    let new = W::sub_one(cnt, orders().put);
    if !new.negative() {
        return false;
    }
    put_slow(cnt, new)
}

/// Slow path of `put`, working on the value the decrement returned (a re-read would
/// race: "Plugged slow-path race" in the module docs).
#[cold]
#[inline(never)]
pub(crate) fn put_slow<W: Word>(cnt: &W::Atomic, new: W) -> bool {
    divert!(PutRereads => crate::mutants::file_ref::put_slow_rereads::<W>(cnt));
    divert!(PutStoresDead => crate::mutants::file_ref::put_slow_stores_dead::<W>(cnt, new));
    if new == W::NOREF {
        return mark_dead::<W>(cnt);
    }
    if new >= W::RELEASED {
        W::store(cnt, W::DEAD, Relaxed);
        warn(Warning::ImbalancedPut);
        return false;
    }
    // Saturated: leak.
    resaturate::<W>(cnt);
    warn(Warning::Saturated);
    false
}

/// A put on a saturated count puts SATURATED back with a `Release` store, so that a
/// later get that reads this value still synchronises with everything this holder saw,
/// the object's initialisation included (litmus: `fileref-resaturate-keeps-release-sequence`;
/// relaxed, C++20's release sequences would end here).
#[inline(always)]
pub(crate) fn resaturate<W: Word>(cnt: &W::Atomic) {
    W::store(cnt, W::SATURATED, Release);
}

/// The last put's mark: NOREF → DEAD with a `Release` compare-exchange, and on success
/// an `Acquire` fence, which synchronises with every earlier put's release through the
/// count's release sequence: the destroyer sees every holder's accesses (litmus:
/// `fileref-last-put`). Only the caller whose exchange succeeds may destroy.
#[inline(always)]
pub(crate) fn mark_dead<W: Word>(cnt: &W::Atomic) -> bool {
    let o = orders();
    if W::cas(cnt, W::NOREF, W::DEAD, o.mark_dead, Relaxed).is_ok() {
        o.after_mark_dead.issue();
        return true;
    }
    false
}

/// `put_close`: one compare-exchange ONEREF → DEAD when the count reads ONEREF, else
/// `put`.
#[inline]
pub(crate) fn put_close<W: Word>(cnt: &W::Atomic) -> bool {
    close_only_reference::<W>(cnt) || put::<W>(cnt)
}

/// `put_close`'s fast path: if the count reads ONEREF, one `AcqRel` compare-exchange
/// ONEREF → DEAD (acquire: the destroyer sees the other holders' accesses, whose puts
/// brought the count to ONEREF; litmus: `fileref-put-close`).
#[inline(always)]
pub(crate) fn close_only_reference<W: Word>(cnt: &W::Atomic) -> bool {
    if W::load(cnt, Relaxed) != W::ONEREF {
        return false;
    }
    divert!(PutCloseStores => crate::mutants::file_ref::close_by_store::<W>(cnt));
    W::cas(cnt, W::ONEREF, W::DEAD, AcqRel, Relaxed).is_ok()
}

/// The references a raw value stands for: 0 in the dead zone (NOREF included).
#[inline]
pub(crate) fn refs_of<W: Word>(raw: W) -> W {
    if raw >= W::RELEASED {
        W::ONEREF
    } else {
        raw.plus_one()
    }
}

/// In the dead zone, not counting NOREF (a get can still revive it).
#[inline]
pub(crate) fn is_dead<W: Word>(raw: W) -> bool {
    raw >= W::RELEASED && raw < W::NOREF
}

/// The state name `Debug` shows.
pub(crate) fn state_name<W: Word>(raw: W) -> &'static str {
    if raw <= W::MAXREF {
        "live"
    } else if raw < W::RELEASED {
        "saturated"
    } else if raw < W::NOREF {
        "dead"
    } else {
        "noref"
    }
}

/// Stamps out one public width: the type, its constants, `const` constructors, and
/// methods that call the generic functions above.
macro_rules! zoned_ref {
    ($(#[$doc:meta])* $name:ident, $atomic:ident, $int:ty) => {
        $(#[$doc])*
        #[repr(transparent)]
        pub struct $name {
            // INVARIANT (see the module docs): references - 1 in the valid zone; only
            // put/put_close move a count into the dead zone, and only the caller that
            // moved it to DEAD from NOREF/ONEREF gets `true`.
            cnt: $atomic,
        }

        impl $name {
            /// One reference held.
            pub const ONEREF: $int = <$int as zoned::Word>::ONEREF;
            /// The last valid raw value: `MAXREF + 1` references held.
            pub const MAXREF: $int = <$int as zoned::Word>::MAXREF;
            /// The middle of the saturation zone (`MAXREF + 1 .. RELEASED`).
            pub const SATURATED: $int = <$int as zoned::Word>::SATURATED;
            /// The start of the dead zone.
            pub const RELEASED: $int = <$int as zoned::Word>::RELEASED;
            /// The middle of the dead zone, where a destroyed count rests.
            pub const DEAD: $int = <$int as zoned::Word>::DEAD;
            /// The last reference was just dropped (transient, before NOREF → DEAD).
            pub const NOREF: $int = <$int as zoned::Word>::NOREF;

            /// The raw value for `refs` references (see `zoned::raw_for`).
            const fn raw_for(refs: $int) -> $int {
                zoned::raw_for(
                    refs as u64,
                    Self::MAXREF as u64,
                    Self::SATURATED as u64,
                    Self::DEAD as u64,
                ) as $int
            }

            const_fn! {
            /// A count with `refs` references held.
            ///
            /// `new(0)` is a dead count (every `get` fails) and `refs` above
            /// `MAXREF + 1` gives a saturated one.
            #[must_use]
            pub const fn new(refs: $int) -> Self {
                Self::from_raw(Self::raw_for(refs))
            }
            }

            const_fn! {
            /// A count in the state `raw` stands for (for tests, diagnostics, and
            /// restoring a value read with [`raw`](Self::raw)).
            ///
            /// A value of the valid zone (`..= MAXREF`) is kept as it is. Any other value
            /// is stored as the middle of its zone: one in the saturation zone as
            /// `SATURATED`, one in the dead zone as `DEAD`, `NOREF` included (a count
            /// made from NOREF has no put in flight that would finish releasing it, so
            /// it is dead). So every count behaves as its zone says: one add from
            /// `RELEASED - 1` cannot make a saturated count dead, one put from
            /// `MAXREF + 1` cannot make it live, gets on `NOREF - 1` cannot revive it.
            /// `from_raw(x).raw() == x` holds for the valid zone and the two middles.
            #[must_use]
            pub const fn from_raw(raw: $int) -> Self {
                Self { cnt: $atomic::new(Self::normalized(raw)) }
            }
            }

            /// A count holding exactly `raw`, zone edges included: `from_raw` without its
            /// normalisation, kept for the negative controls that must catch one get or
            /// put carrying such a count into the next zone.
            #[cfg(rcuref_hooks)]
            #[doc(hidden)]
            #[must_use]
            pub fn from_raw_verbatim(raw: $int) -> Self {
                Self { cnt: $atomic::new(raw) }
            }

            /// What `from_raw` stores for `raw` (see `zoned::normalized`).
            const fn normalized(raw: $int) -> $int {
                zoned::normalized(
                    raw as u64,
                    Self::MAXREF as u64,
                    Self::RELEASED as u64,
                    Self::SATURATED as u64,
                    Self::DEAD as u64,
                ) as $int
            }

            /// The raw counter value (relaxed load): for tests and diagnostics only, it
            /// may be stale by the time it is looked at.
            #[inline]
            pub fn raw(&self) -> $int {
                <$int as zoned::Word>::load(&self.cnt, $crate::sync::Ordering::Relaxed)
            }

            /// Re-initialises a count to `refs` references with a `Release` store.
            ///
            /// Call it **last** when reusing an object's memory, after every other
            /// field is written: a reader whose `get` then succeeds sees those fields.
            /// Never zero or `memset` a count instead (0 is `ONEREF`, a live count; a
            /// racing get would succeed on a freed object). Same input rules as
            /// [`new`](Self::new).
            #[inline]
            pub fn init(&self, refs: $int) {
                zoned::init::<$int>(&self.cnt, Self::raw_for(refs));
            }

            /// Tries to take a reference: one fully ordered add, no loop.
            ///
            /// Returns `true` if the caller now holds a reference that it must `put`:
            /// the count was live, or saturated (a saturated object is leaked, never
            /// destroyed, so it stays safe to use; the count stays saturated). Returns
            /// `false` if the count is dead: the object must not be used. A get on a
            /// count whose last put is still in flight (NOREF) succeeds and keeps the
            /// object alive.
            #[must_use = "a successful get takes a reference that must be put; a failed one means the object is dead"]
            #[inline]
            pub fn get(&self) -> bool {
                zoned::get::<$int>(&self.cnt)
            }

            /// Takes another reference when the caller already holds one (relaxed add).
            ///
            /// Saturation is sticky: an `inc` past `MAXREF` pins the count at
            /// `SATURATED` (the object is leaked, never freed), however many more come,
            /// so a count can never wrap back to a small live value. On a released
            /// count this is a caller bug: it is counted as a
            /// [`Warning`](crate::Warning) and the count stays dead.
            #[inline]
            pub fn inc(&self) {
                zoned::inc::<$int>(&self.cnt)
            }

            /// Drops a reference. Returns `true` iff this dropped the last one and the
            /// count is now `DEAD`: the caller must then destroy the object, exactly
            /// once.
            ///
            /// Returns `false` if references remain, if a concurrent get revived the
            /// count, if the count is saturated (leaked), or on an imbalanced put
            /// (counted as [`Warning::ImbalancedPut`](crate::Warning), count set to DEAD).
            ///
            /// The memory must stay valid until this returns: see the *deconstruction
            /// race* in the [module docs](self).
            #[must_use = "true means the caller dropped the last reference and must destroy the object"]
            #[inline]
            pub fn put(&self) -> bool {
                zoned::put::<$int>(&self.cnt)
            }

            /// [`put`](Self::put) for the common case of dropping the only reference
            /// (closing a file): one compare-exchange ONEREF → DEAD when the count reads
            /// ONEREF, else a normal `put`. Same result as `put` in every interleaving.
            #[must_use = "true means the caller dropped the last reference and must destroy the object"]
            #[inline]
            pub fn put_close(&self) -> bool {
                zoned::put_close::<$int>(&self.cnt)
            }

            /// The number of references held: 0 once released (dead zone, including a
            /// transient NOREF). A saturated count reports its raw value + 1.
            #[inline]
            pub fn count(&self) -> $int {
                zoned::refs_of(self.raw())
            }

            /// `true` once the count is in the dead zone (`RELEASED <= raw < NOREF`).
            /// NOREF is not dead yet: a get can still revive it.
            #[inline]
            pub fn is_dead(&self) -> bool {
                zoned::is_dead(self.raw())
            }
        }

        #[cfg(feature = "defmt")]
        impl defmt::Format for $name {
            fn format(&self, f: defmt::Formatter<'_>) {
                let raw = self.raw();
                defmt::write!(
                    f,
                    "{} {{ raw: {=u64:#x}, state: {=str} }}",
                    stringify!($name),
                    raw as u64,
                    zoned::state_name(raw)
                )
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                let raw = self.raw();
                f.debug_struct(stringify!($name))
                    .field("raw", &raw)
                    .field("state", &zoned::state_name(raw))
                    .finish()
            }
        }
    };
}
