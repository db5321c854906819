//! The zoned counter, written once and stamped out per width by `zoned_ref!`.

macro_rules! zoned_ref {
    ($(#[$doc:meta])* $name:ident, $atomic:ident, $int:ty, $sint:ty) => {
        $(#[$doc])*
        ///
        /// # Invariants
        /// `cnt` holds *references − 1* while in the valid zone (`0..=MAXREF`); values in
        /// `MAXREF+1..RELEASED` mean saturated (never freed), `RELEASED..NOREF` dead, and
        /// `NOREF` that the last reference was just dropped and a put is deciding who
        /// destroys. Only `put`/`put_close` move a count from the valid zone into the dead
        /// zone, and only the caller that moved it to `DEAD` from `NOREF`/`ONEREF` gets
        /// `true`.
        #[repr(transparent)]
        pub struct $name {
            cnt: $atomic,
        }

        impl $name {
            /// One reference held.
            pub const ONEREF: $int = 0;
            /// The last valid raw value: `MAXREF + 1` references held.
            pub const MAXREF: $int = <$int>::MAX >> 1;
            /// The middle of the saturation zone (`MAXREF + 1 .. RELEASED`).
            pub const SATURATED: $int = 0xA << (<$int>::BITS - 4);
            /// The start of the dead zone.
            pub const RELEASED: $int = 0xC << (<$int>::BITS - 4);
            /// The middle of the dead zone, where a destroyed count rests.
            pub const DEAD: $int = 0xE << (<$int>::BITS - 4);
            /// The last reference was just dropped (transient, before NOREF → DEAD).
            pub const NOREF: $int = <$int>::MAX;

            /// The raw value that `refs` references are stored as: `refs - 1`; `0` refs
            /// is stored as `DEAD` and anything above `MAXREF + 1` as `SATURATED`.
            const fn raw_for(refs: $int) -> $int {
                if refs == 0 {
                    Self::DEAD
                } else if refs - 1 > Self::MAXREF {
                    Self::SATURATED
                } else {
                    refs - 1
                }
            }

            /// A count with `refs` references held.
            ///
            /// `new(0)` is a dead count (every `get` fails) and `refs` above
            /// `MAXREF + 1` gives a saturated one.
            #[cfg(not(loom))]
            #[must_use]
            pub const fn new(refs: $int) -> Self {
                Self::from_raw(Self::raw_for(refs))
            }

            /// A count with `refs` references held (loom build: not `const`).
            #[cfg(loom)]
            #[must_use]
            pub fn new(refs: $int) -> Self {
                Self::from_raw(Self::raw_for(refs))
            }

            /// A count holding exactly `raw` (for tests, diagnostics, and restoring a
            /// value read with [`raw`](Self::raw)).
            #[cfg(not(loom))]
            #[must_use]
            pub const fn from_raw(raw: $int) -> Self {
                Self { cnt: $atomic::new(raw) }
            }

            /// A count holding exactly `raw` (loom build: not `const`).
            #[cfg(loom)]
            #[must_use]
            pub fn from_raw(raw: $int) -> Self {
                Self { cnt: $atomic::new(raw) }
            }

            /// The raw counter value (relaxed load): for tests and diagnostics only, it
            /// may be stale by the time it is looked at.
            #[inline]
            pub fn raw(&self) -> $int {
                self.cnt.load($crate::sync::Ordering::Relaxed)
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
                // loom (0.7) lets a plain store slip between the read and the write of a
                // concurrent read-modify-write (tokio-rs/loom#254), a history no C++
                // execution or CPU can produce; it made the pool models report a put
                // against a count `init` had just replaced. Under loom, `init` is a swap:
                // the same write, which loom then keeps atomic with respect to RMWs.
                #[cfg(loom)]
                let _ = self.cnt.swap(Self::raw_for(refs), $crate::sync::Ordering::Release);
                #[cfg(not(loom))]
                self.cnt.store(Self::raw_for(refs), $crate::sync::Ordering::Release);
            }

            /// Tries to take a reference: one fully ordered add, no loop.
            ///
            /// Returns `false` if the count is dead or saturated (the object must not be
            /// used), `true` if the caller now holds a reference that it must `put`.
            /// A get on a count whose last put is still in flight (NOREF) succeeds and
            /// keeps the object alive.
            #[must_use = "a successful get takes a reference that must be put; a failed one means the object is dead"]
            #[inline]
            pub fn get(&self) -> bool {
                let order = if mutant!(GetRelaxed) {
                    $crate::sync::Ordering::Relaxed
                } else {
                    $crate::sync::Ordering::SeqCst
                };
                let new = self.cnt.fetch_add(1, order).wrapping_add(1);
                if new as $sint >= 0 {
                    return true;
                }
                self.get_failed(new);
                false
            }

            /// Cold path of a failed get: keep the count from drifting out of its zone.
            #[cold]
            #[inline(never)]
            fn get_failed(&self, new: $int) {
                if mutant!(NoDriftRepair) {
                    return;
                }
                let (lo, hi, rest) = if new >= Self::RELEASED {
                    (Self::RELEASED, Self::NOREF, Self::DEAD)
                } else {
                    $crate::log::warn($crate::log::Warning::Saturated);
                    (Self::MAXREF + 1, Self::RELEASED, Self::SATURATED)
                };
                // Every value in `lo..hi` means the same as `rest` (dead, or saturated),
                // whichever incarnation of a reused object it belongs to, so replacing
                // one with the other is always safe. NOREF (`hi` of the dead zone) and
                // the valid zone are never touched.
                let mut cur = new;
                if new == Self::NOREF {
                    // Only an add that started at NOREF - 1 produces NOREF here (a get on
                    // a live NOREF lands on ONEREF and succeeds), so this NOREF is dead
                    // drift, not a put in flight: move it back before a second get could
                    // land on ONEREF. A single attempt: if the value moved on, the loop
                    // below handles whatever it became.
                    match self.cnt.compare_exchange(
                        Self::NOREF,
                        Self::DEAD,
                        $crate::sync::Ordering::Relaxed,
                        $crate::sync::Ordering::Relaxed,
                    ) {
                        Ok(_) => return,
                        Err(now) => cur = now,
                    }
                }
                while (lo..hi).contains(&cur) && cur != rest {
                    match self.cnt.compare_exchange(
                        cur,
                        rest,
                        $crate::sync::Ordering::Relaxed,
                        $crate::sync::Ordering::Relaxed,
                    ) {
                        Ok(_) => return,
                        Err(now) => cur = now,
                    }
                }
            }

            /// Takes another reference when the caller already holds one (relaxed add).
            ///
            /// On a released or saturated count this is a caller bug: it is counted as
            /// a [`Warning`](crate::Warning) and otherwise has the effect of an add.
            #[inline]
            pub fn inc(&self) {
                let prior = self.cnt.fetch_add(1, $crate::sync::Ordering::Relaxed);
                if prior as $sint < 0 {
                    $crate::log::warn(if prior >= Self::RELEASED {
                        $crate::log::Warning::IncOnReleased
                    } else {
                        $crate::log::Warning::Saturated
                    });
                }
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
                let order = if mutant!(PutRelaxed) {
                    $crate::sync::Ordering::Relaxed
                } else {
                    $crate::sync::Ordering::SeqCst
                };
                let new = self.cnt.fetch_sub(1, order).wrapping_sub(1);
                if new as $sint >= 0 {
                    return false;
                }
                self.put_slow(new)
            }

            /// Slow path of `put`, working on the value the decrement returned.
            #[cold]
            #[inline(never)]
            fn put_slow(&self, new: $int) -> bool {
                let new = if mutant!(PutRereads) { self.raw() } else { new };
                if new == Self::NOREF {
                    if mutant!(PutStoresDead) {
                        self.cnt.store(Self::DEAD, $crate::sync::Ordering::Release);
                        return true;
                    }
                    let success = if mutant!(PutRelaxed) {
                        $crate::sync::Ordering::Relaxed
                    } else {
                        $crate::sync::Ordering::Release
                    };
                    if self
                        .cnt
                        .compare_exchange(Self::NOREF, Self::DEAD, success, $crate::sync::Ordering::Relaxed)
                        .is_ok()
                    {
                        if !mutant!(PutRelaxed) {
                            $crate::sync::fence($crate::sync::Ordering::Acquire);
                        }
                        return true;
                    }
                    return false;
                }
                if new >= Self::RELEASED {
                    $crate::log::warn($crate::log::Warning::ImbalancedPut);
                    self.cnt.store(Self::DEAD, $crate::sync::Ordering::Relaxed);
                    return false;
                }
                $crate::log::warn($crate::log::Warning::Saturated);
                self.cnt.store(Self::SATURATED, $crate::sync::Ordering::Relaxed);
                false
            }

            /// [`put`](Self::put) for the common case of dropping the only reference
            /// (closing a file): one compare-exchange ONEREF → DEAD when the count reads
            /// ONEREF, else a normal `put`. Same result as `put` in every interleaving.
            #[must_use = "true means the caller dropped the last reference and must destroy the object"]
            #[inline]
            pub fn put_close(&self) -> bool {
                if self.raw() == Self::ONEREF {
                    if mutant!(PutCloseStores) {
                        self.cnt.store(Self::DEAD, $crate::sync::Ordering::Release);
                        return true;
                    }
                    if self
                        .cnt
                        .compare_exchange(
                            Self::ONEREF,
                            Self::DEAD,
                            $crate::sync::Ordering::AcqRel,
                            $crate::sync::Ordering::Relaxed,
                        )
                        .is_ok()
                    {
                        return true;
                    }
                }
                self.put()
            }

            /// The number of references held: 0 once released (dead zone, including a
            /// transient NOREF). A saturated count reports its raw value + 1.
            #[inline]
            pub fn read(&self) -> $int {
                let raw = self.raw();
                if raw >= Self::RELEASED {
                    0
                } else {
                    raw + 1
                }
            }

            /// `true` once the count is in the dead zone (`RELEASED <= raw < NOREF`).
            /// NOREF is not dead yet: a get can still revive it.
            #[inline]
            pub fn is_dead(&self) -> bool {
                let raw = self.raw();
                (Self::RELEASED..Self::NOREF).contains(&raw)
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                let raw = self.raw();
                let state = if raw <= Self::MAXREF {
                    "live"
                } else if raw < Self::RELEASED {
                    "saturated"
                } else if raw < Self::NOREF {
                    "dead"
                } else {
                    "noref"
                };
                f.debug_struct(stringify!($name))
                    .field("raw", &raw)
                    .field("state", &state)
                    .finish()
            }
        }
    };
}
