//! FileRef test bodies shared by the host tests (`tests/file_ref.rs`) and the on-target
//! firmware. `core` only: no allocation, no std, no formatting beyond `assert!`.
//!
//! Each expected value below is written out from the zone table in the module docs and
//! mainline's behaviour, not computed by the code under test.

#![allow(dead_code, unreachable_pub, unexpected_cfgs)]

use rcuref::file_ref::FileRef32;
#[cfg(any(target_has_atomic = "64", feature = "critical-section", rcuref_fw))]
use rcuref::file_ref::FileRef64;

/// The operations of the zone matrix.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    Get,
    Put,
    PutClose,
    Inc,
}

macro_rules! zone_matrix {
    ($fn_name:ident, $transients:ident, $ty:ident, $int:ty) => {
        /// Every operation at and across every zone boundary of a count at rest: (start
        /// raw, op, returned, raw afterwards), each count made with `from_raw`. `None` for
        /// the return of `inc`, which returns nothing.
        ///
        /// A count at rest is valid, saturated or dead; `from_raw` keeps valid values and
        /// stores any other value as the middle of its zone, so every row that starts at a
        /// zone's edge behaves as that zone says (with `from_raw` keeping edges verbatim,
        /// one get made a saturated count dead, one put made it live, and gets on NOREF - 1
        /// revived a dead one).
        pub fn $fn_name() {
            type R = $ty;
            const ONE: $int = R::ONEREF;
            const MAX: $int = R::MAXREF;
            const SAT: $int = R::SATURATED;
            const REL: $int = R::RELEASED;
            const DEAD: $int = R::DEAD;
            const NOREF: $int = R::NOREF;

            // from_raw: valid values as they are, every other value as its zone's middle.
            let stored: &[($int, $int)] = &[
                (ONE, ONE),
                (MAX, MAX),
                (MAX + 1, SAT),
                (SAT - 1, SAT),
                (SAT, SAT),
                (SAT + 1, SAT),
                (REL - 1, SAT),
                (REL, DEAD),
                (REL + 1, DEAD),
                (DEAD, DEAD),
                (NOREF - 1, DEAD),
                (NOREF, DEAD), // no put in flight will finish releasing it: dead
            ];
            for (row, &(raw, want)) in stored.iter().enumerate() {
                assert!(
                    R::from_raw(raw).raw() == want,
                    "from_raw row {}: stored wrong",
                    row
                );
            }

            let table: &[($int, Op, Option<bool>, $int)] = &[
                // get: succeeds in the valid zone and on a saturated (leaked) count.
                (ONE, Op::Get, Some(true), 1),
                (MAX - 1, Op::Get, Some(true), MAX),
                (MAX, Op::Get, Some(true), SAT), // overflows: pinned at SATURATED
                (MAX + 1, Op::Get, Some(true), SAT),
                (SAT, Op::Get, Some(true), SAT),
                (REL - 1, Op::Get, Some(true), SAT), // saturated, however close to RELEASED
                (REL, Op::Get, Some(false), DEAD),
                (DEAD, Op::Get, Some(false), DEAD),
                (NOREF - 2, Op::Get, Some(false), DEAD),
                (NOREF - 1, Op::Get, Some(false), DEAD), // no add can land on NOREF
                (NOREF, Op::Get, Some(false), DEAD),     // a stored NOREF is dead: no revival
                // put: true only for the last reference.
                (ONE, Op::Put, Some(true), DEAD),
                (1, Op::Put, Some(false), ONE),
                (MAX, Op::Put, Some(false), MAX - 1),
                (MAX + 1, Op::Put, Some(false), SAT), // saturated: stays saturated
                (SAT, Op::Put, Some(false), SAT),
                (REL - 1, Op::Put, Some(false), SAT),
                (REL, Op::Put, Some(false), DEAD),     // imbalanced
                (REL + 1, Op::Put, Some(false), DEAD), // imbalanced
                (DEAD, Op::Put, Some(false), DEAD),    // imbalanced
                (NOREF, Op::Put, Some(false), DEAD),   // imbalanced
                // put_close: the one-shot ONEREF -> DEAD, else exactly put.
                (ONE, Op::PutClose, Some(true), DEAD),
                (1, Op::PutClose, Some(false), ONE),
                (MAX, Op::PutClose, Some(false), MAX - 1),
                (MAX + 1, Op::PutClose, Some(false), SAT),
                (SAT, Op::PutClose, Some(false), SAT),
                (DEAD, Op::PutClose, Some(false), DEAD),
                (NOREF, Op::PutClose, Some(false), DEAD),
                // inc: an add; saturation and death are sticky.
                (ONE, Op::Inc, None, 1),
                (MAX - 1, Op::Inc, None, MAX),
                (MAX, Op::Inc, None, SAT), // overflows: pinned at SATURATED
                (MAX + 1, Op::Inc, None, SAT),
                (SAT, Op::Inc, None, SAT),
                (REL - 2, Op::Inc, None, SAT),
                (REL - 1, Op::Inc, None, SAT), // saturated, however close to RELEASED
                (REL, Op::Inc, None, DEAD),
                (DEAD, Op::Inc, None, DEAD),
                (NOREF - 1, Op::Inc, None, DEAD),
                (NOREF, Op::Inc, None, DEAD), // a stored NOREF is dead: no revival
            ];
            run_rows(R::from_raw, table);

            // read and is_dead at every boundary.
            let reads: &[($int, $int, bool)] = &[
                (ONE, 1, false),
                (MAX, MAX + 1, false),
                (MAX + 1, SAT + 1, false),
                (SAT, SAT + 1, false),
                (REL - 1, SAT + 1, false),
                (REL, 0, true),
                (DEAD, 0, true),
                (NOREF - 1, 0, true),
                (NOREF, 0, true),
            ];
            for &(raw, want_read, want_dead) in reads {
                let r = R::from_raw(raw);
                assert!(r.count() == want_read, "read wrong");
                assert!(r.is_dead() == want_dead, "is_dead wrong");
            }

            // new / init: refs - 1, with 0 -> DEAD and too many -> SATURATED.
            let inits: &[($int, $int)] = &[
                (0, DEAD),
                (1, ONE),
                (2, 1),
                (MAX + 1, MAX),
                (MAX + 2, SAT),
                (<$int>::MAX, SAT),
            ];
            for &(refs, want) in inits {
                assert!(R::new(refs).raw() == want, "new wrong");
                let r = R::from_raw(DEAD);
                r.init(refs);
                assert!(r.raw() == want, "init wrong");
            }

            /// Runs `(start, op, returned, raw afterwards)` rows on counts made by `make`.
            fn run_rows(make: fn($int) -> R, table: &[($int, Op, Option<bool>, $int)]) {
                for (row, &(start, op, want_ret, want_raw)) in table.iter().enumerate() {
                    let r = make(start);
                    let ret = match op {
                        Op::Get => Some(r.get()),
                        Op::Put => Some(r.put()),
                        Op::PutClose => Some(r.put_close()),
                        Op::Inc => {
                            r.inc();
                            None
                        }
                    };
                    assert!(ret == want_ret, "row {}: return value wrong", row);
                    assert!(
                        r.raw() == want_raw,
                        "row {}: raw value afterwards wrong",
                        row
                    );
                }
            }
        }

        /// The values a count passes through only in flight (a put between its decrement
        /// and its exchange holds NOREF; contexts between an add and its repair hold a
        /// value within K of a zone's middle), made exactly with `make` (the host's
        /// `from_raw_verbatim`, test builds only): what one more operation does from
        /// each. Every zone stays sticky from any value within 2^29 - 1 of its middle.
        pub fn $transients(make: fn($int) -> $ty) {
            type R = $ty;
            const ONE: $int = R::ONEREF;
            const MAX: $int = R::MAXREF;
            const SAT: $int = R::SATURATED;
            const DEAD: $int = R::DEAD;
            const NOREF: $int = R::NOREF;
            let table: &[($int, Op, Option<bool>, $int)] = &[
                (MAX + 1, Op::Get, Some(true), SAT),
                (SAT + 1, Op::Get, Some(true), SAT),
                (SAT - 1, Op::Put, Some(false), SAT),
                (DEAD + 1, Op::Get, Some(false), DEAD),
                (DEAD - 1, Op::Inc, None, DEAD),
                (NOREF, Op::Get, Some(true), ONE), // revives a count whose last put is in flight
                (NOREF, Op::Inc, None, ONE),
                (NOREF, Op::Put, Some(false), DEAD), // imbalanced (a second put on the last ref)
            ];
            for (row, &(start, op, want_ret, want_raw)) in table.iter().enumerate() {
                let r = make(start);
                let ret = match op {
                    Op::Get => Some(r.get()),
                    Op::Put => Some(r.put()),
                    Op::PutClose => Some(r.put_close()),
                    Op::Inc => {
                        r.inc();
                        None
                    }
                };
                assert!(ret == want_ret, "transient row {}: return value wrong", row);
                assert!(
                    r.raw() == want_raw,
                    "transient row {}: raw value wrong",
                    row
                );
            }
        }
    };
}

zone_matrix!(zone_matrix_32, transients_32, FileRef32, u32);
#[cfg(any(target_has_atomic = "64", feature = "critical-section", rcuref_fw))]
zone_matrix!(zone_matrix_64, transients_64, FileRef64, u64);

macro_rules! no_resurrection {
    ($fn_name:ident, $ty:ident, $int:ty) => {
        /// Beyond mainline: failed gets on a dead count, started anywhere in the dead
        /// zone (made by `make`: `from_raw`, or on the host exactly, to start just below
        /// the wrap), never bring it back to life (mainline: 2^29 failed gets on 32 bits
        /// do).
        pub fn $fn_name(make: fn($int) -> $ty, failed_gets: u32) {
            type R = $ty;
            for start in [
                R::NOREF - 1,
                R::NOREF - 2,
                R::NOREF - 1000,
                R::RELEASED,
                R::DEAD,
            ] {
                let r = make(start);
                for _ in 0..failed_gets {
                    assert!(!r.get(), "a dead count was resurrected by failed gets");
                    assert!(r.is_dead(), "a dead count left the dead zone");
                }
                assert!(r.raw() == R::DEAD, "failed gets left drift behind");
            }
        }
    };
}

no_resurrection!(no_resurrection_32, FileRef32, u32);
#[cfg(any(target_has_atomic = "64", feature = "critical-section", rcuref_fw))]
no_resurrection!(no_resurrection_64, FileRef64, u64);

macro_rules! saturation_leaks {
    ($fn_name:ident, $ty:ident) => {
        /// A count at MAXREF that keeps getting and putting leaks (saturates) instead of
        /// wrapping to a small live count or to dead: every operation leaves it at
        /// SATURATED, gets keep succeeding (the object is never freed), puts never
        /// report the last reference.
        pub fn $fn_name(rounds: u32) {
            type R = $ty;
            let r = R::from_raw(R::MAXREF);
            assert!(r.get(), "get past MAXREF pins the object and succeeds");
            assert!(r.raw() == R::SATURATED);
            for _ in 0..rounds {
                assert!(
                    r.get(),
                    "a saturated count must keep handing out references"
                );
                assert!(!r.put());
                assert!(!r.put_close());
                r.inc();
                assert!(r.raw() == R::SATURATED, "left SATURATED");
            }
        }
    };
}

saturation_leaks!(saturation_leaks_32, FileRef32);

macro_rules! inc_is_sticky {
    ($fn_name:ident, $ty:ident) => {
        /// The forgotten-clones attack at the counter level: `incs` increments starting
        /// just below MAXREF (as if 2^31 clones had been leaked) must pin the count at
        /// SATURATED, and then no number of puts may report the last reference
        /// (mainline's plain `inc` walks the count through the zones and back to ONEREF).
        pub fn $fn_name(incs: u32) {
            type R = $ty;
            let r = R::from_raw(R::MAXREF - 3);
            for _ in 0..incs {
                r.inc();
                let raw = r.raw();
                assert!(
                    raw <= R::MAXREF || raw == R::SATURATED,
                    "an inc left the count off SATURATED"
                );
            }
            assert!(r.raw() == R::SATURATED, "incs past MAXREF must saturate");
            for _ in 0..incs {
                assert!(
                    !r.put(),
                    "a put on a saturated count reported the last reference"
                );
            }
            assert!(r.raw() == R::SATURATED);
        }
    };
}

inc_is_sticky!(inc_is_sticky_32, FileRef32);
#[cfg(any(target_has_atomic = "64", feature = "critical-section", rcuref_fw))]
inc_is_sticky!(inc_is_sticky_64, FileRef64);
#[cfg(any(target_has_atomic = "64", feature = "critical-section", rcuref_fw))]
saturation_leaks!(saturation_leaks_64, FileRef64);

/// A full lifecycle through `init`, several holders and a last put.
pub fn lifecycle() {
    let r = FileRef32::from_raw(FileRef32::DEAD);
    assert!(!r.get(), "dead before init");
    r.init(1);
    assert!(r.get() && r.get());
    assert!(r.count() == 3);
    r.inc();
    assert!(!r.put() && !r.put() && !r.put());
    assert!(r.count() == 1);
    assert!(r.put_close(), "last reference closes");
    assert!(r.is_dead() && r.count() == 0 && !r.get());
    // Reuse: init brings the same memory back for a new object.
    r.init(2);
    assert!(r.count() == 2 && !r.put() && r.put());
}
