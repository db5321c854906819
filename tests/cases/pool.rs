//! Pool test bodies shared by the host tests (`tests/pool.rs`, `tests/torture_pool.rs`)
//! and the on-target firmware. `core` only.

#![allow(dead_code, unreachable_pub, unexpected_cfgs)]

use core::sync::atomic::Ordering::Relaxed;
use portable_atomic::{AtomicBool, AtomicU32};
use rcuref::pool::{Pool, PoolCell};
use rcuref::rcu::Rcu;
use rcuref::{Error, Refused, Warning};

/// Counts drops, to check that every value is dropped exactly once.
pub struct Counted<'a>(pub u32, pub &'a AtomicU32);
impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.1.fetch_add(1, Relaxed);
    }
}

/// Allocation until full gives the value back; freeing makes the slot reusable at once;
/// clones share one object; the value is dropped exactly once, by the last handle.
pub fn alloc_free_reuse() {
    static DROPS: AtomicU32 = AtomicU32::new(0);
    static POOL: Pool<Counted<'static>, 3> = Pool::new();
    let a = POOL.alloc(Counted(1, &DROPS)).ok().unwrap();
    let b = POOL.alloc(Counted(2, &DROPS)).ok().unwrap();
    let c = POOL.alloc(Counted(3, &DROPS)).ok().unwrap();
    assert_eq!(POOL.in_use(), 3);
    match POOL.alloc(Counted(4, &DROPS)) {
        Err(Refused {
            error: Error::Full,
            value,
        }) => {
            assert_eq!(value.0, 4, "the value must come back")
        }
        Err(other) => panic!("wrong error {:?}", other.error),
        Ok(_) => panic!("allocated past capacity"),
    }
    assert_eq!(DROPS.load(Relaxed), 1, "only the refused value was dropped");
    let b2 = b.clone();
    assert_eq!(b.ref_count(), 2);
    let freed_slot = b.slot();
    drop(b);
    assert_eq!(DROPS.load(Relaxed), 1, "dropped while a clone lives");
    drop(b2);
    assert_eq!(
        DROPS.load(Relaxed),
        2,
        "the last handle must drop the value"
    );
    let d = POOL.alloc(Counted(5, &DROPS)).ok().unwrap();
    assert_eq!(d.slot(), freed_slot, "a freed slot is reused at once");
    assert_eq!(d.0, 5);
    assert_eq!(POOL.capacity(), 3);
    #[cfg(any(feature = "pool-stats", rcuref_fw))]
    assert_eq!(POOL.high_water(), 3);
    drop((a, c, d));
    assert_eq!(DROPS.load(Relaxed), 5);
    assert_eq!(POOL.in_use(), 0);
}

/// The most recently freed slot is the one allocated next (it is warm in the cache),
/// even when a lower slot is free too.
pub fn the_last_freed_slot_is_reused_first() {
    static POOL: Pool<u32, 4> = Pool::new();
    let a = POOL.alloc(1).ok().unwrap();
    let b = POOL.alloc(2).ok().unwrap();
    let c = POOL.alloc(3).ok().unwrap();
    let c_slot = c.slot();
    drop(a);
    drop(c);
    let d = POOL.alloc(4).ok().unwrap();
    assert_eq!(d.slot(), c_slot, "the last freed slot was not reused first");
    drop((b, d));
}

/// A location owns a reference; lookups inside a section get the object it names.
pub fn cell_lookup() {
    static RCU: Rcu<2> = Rcu::new();
    static POOL: Pool<u32, 4> = Pool::new();
    static CELL: PoolCell<'static, u32, 4> = PoolCell::new(&POOL);
    let reader = RCU.reader().unwrap();
    assert!(reader.section(|g| CELL.get(g)).is_none());
    assert!(CELL.is_empty());
    let h = POOL.alloc(42).ok().unwrap();
    assert!(CELL.replace(Some(h)).is_none());
    assert!(!CELL.is_empty());
    let got = reader.section(|g| CELL.get(g)).unwrap();
    assert_eq!(*got, 42);
    assert_eq!(got.ref_count(), 2, "the cell's reference and ours");
    let old = CELL.replace(Some(POOL.alloc(7).ok().unwrap())).unwrap();
    assert!(rcuref::pool::Handle::ptr_eq(&old, &got));
    let other = POOL.alloc(8).ok().unwrap();
    assert!(
        !rcuref::pool::Handle::ptr_eq(&old, &other),
        "two objects named equal"
    );
    drop(other);
    drop(old);
    assert_eq!(*got, 42, "our reference keeps the replaced object alive");
    drop(got);
    assert_eq!(POOL.in_use(), 1);
    assert_eq!(reader.section(|g| CELL.get(g).map(|h| *h)), Some(7));
    drop(CELL.take());
    assert_eq!(POOL.in_use(), 0);
}

// ---- the generation-invariant torture (refscale's typesafe modes) --------------------
//
// Location k only ever holds objects whose `key` is k. Every allocation gets a fresh
// `a` and `b = a * a`. A reader looks location k up inside a read section and checks, on
// the object it got a reference to: key == k (else the re-check is broken), b == a * a
// (else it read an object under construction), and that the object is alive (else it
// holds a reference to a destroyed one). Drops count objects destroyed twice.

pub const LOCATIONS: usize = 4;
pub const SLOTS: usize = 12;
const ALIVE: u32 = 0xA11C_E000;
const GONE: u32 = 0x0DEA_D000;

pub struct Obj {
    key: u32,
    a: AtomicU32,
    b: AtomicU32,
    state: AtomicU32,
    stats: &'static Stats,
}

impl Obj {
    fn new(key: u32, a: u32, stats: &'static Stats) -> Self {
        Obj {
            key,
            a: AtomicU32::new(a),
            b: AtomicU32::new(a.wrapping_mul(a)),
            state: AtomicU32::new(ALIVE),
            stats,
        }
    }
}

impl Drop for Obj {
    fn drop(&mut self) {
        if self.state.swap(GONE, Relaxed) != ALIVE {
            self.stats.destroyed_twice.fetch_add(1, Relaxed);
        }
        self.stats.drops.fetch_add(1, Relaxed);
    }
}

pub struct Stats {
    pub lookups: AtomicU32,
    pub hits: AtomicU32,
    pub wrong_key: AtomicU32,
    pub torn: AtomicU32,
    pub dead_object: AtomicU32,
    pub destroyed_twice: AtomicU32,
    pub allocs: AtomicU32,
    pub drops: AtomicU32,
    pub exhausted: AtomicU32,
    /// Consecutive failed allocations (stall detection: a leak keeps the pool full).
    pub exhausted_run: AtomicU32,
    /// `Warning::ImbalancedPut`s raised by this world's contexts (see [`World::enter`]):
    /// a put that found no reference to drop, which a correct pool never does (a slot
    /// was handed out twice).
    pub imbalanced_puts: AtomicU32,
    /// Ends the run: set by the writer when it is done, and by any context of the world
    /// that panics, so that no other context waits for it for ever.
    pub done: AtomicBool,
}

impl Stats {
    pub const fn new() -> Self {
        Stats {
            lookups: AtomicU32::new(0),
            hits: AtomicU32::new(0),
            wrong_key: AtomicU32::new(0),
            torn: AtomicU32::new(0),
            dead_object: AtomicU32::new(0),
            destroyed_twice: AtomicU32::new(0),
            allocs: AtomicU32::new(0),
            drops: AtomicU32::new(0),
            exhausted: AtomicU32::new(0),
            exhausted_run: AtomicU32::new(0),
            imbalanced_puts: AtomicU32::new(0),
            done: AtomicBool::new(false),
        }
    }
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

/// The statics one torture run uses.
pub struct World {
    pub rcu: &'static Rcu<4>,
    pub pool: &'static Pool<Obj, SLOTS>,
    pub cells: &'static [PoolCell<'static, Obj, SLOTS>; LOCATIONS],
    pub stats: &'static Stats,
}

/// Declares the statics of a torture world and evaluates to a `World`.
#[macro_export]
macro_rules! pool_world {
    () => {{
        static RCU: rcuref::rcu::Rcu<4> = rcuref::rcu::Rcu::new();
        static POOL: rcuref::pool::Pool<$crate::cases::Obj, { $crate::cases::SLOTS }> =
            rcuref::pool::Pool::new();
        static CELLS: [rcuref::pool::PoolCell<
            'static,
            $crate::cases::Obj,
            { $crate::cases::SLOTS },
        >; $crate::cases::LOCATIONS] = [
            rcuref::pool::PoolCell::new(&POOL),
            rcuref::pool::PoolCell::new(&POOL),
            rcuref::pool::PoolCell::new(&POOL),
            rcuref::pool::PoolCell::new(&POOL),
        ];
        static STATS: $crate::cases::Stats = $crate::cases::Stats::new();
        $crate::cases::World {
            rcu: &RCU,
            pool: &POOL,
            cells: &CELLS,
            stats: &STATS,
        }
    }};
}

// ---- warnings, counted per world ------------------------------------------------------
//
// The library counts warnings for the whole program. A world counts the ones its own
// contexts raise: the warning hook adds each to the world of the context that raised it
// (a thread's on the host, where several worlds can live in one process; on the target
// each test is its own program and runs one world at a time, so it is the world last
// entered, also for an interrupt handler working for it).

#[cfg(not(target_os = "none"))]
std::thread_local! {
    static ENTERED: core::cell::Cell<Option<&'static Stats>> = const { core::cell::Cell::new(None) };
}

#[cfg(target_os = "none")]
static ENTERED: portable_atomic::AtomicPtr<Stats> =
    portable_atomic::AtomicPtr::new(core::ptr::null_mut());

fn entered() -> Option<&'static Stats> {
    #[cfg(not(target_os = "none"))]
    return ENTERED.with(|e| e.get());
    #[cfg(target_os = "none")]
    {
        let p = ENTERED.load(Relaxed);
        // SAFETY: `ENTERED` only ever holds null or a pointer made from a
        // `&'static Stats` in `World::enter`.
        unsafe { p.as_ref() }
    }
}

fn count_warning(w: Warning) {
    if w == Warning::ImbalancedPut {
        if let Some(stats) = entered() {
            stats.imbalanced_puts.fetch_add(1, Relaxed);
        }
    }
}

/// Ends the run when dropped (at the end of a writer or a reader, and when it panics):
/// sets `done`, and the writer's also empties the locations, since a reader spinning in a
/// lookup on a location that names a destroyed object (possible only in a broken pool)
/// would otherwise wait for a writer that has finished. On a correct pool this is what
/// `finish_and_check` does anyway.
struct EndsRun<'a> {
    world: &'a World,
    empties: bool,
}

impl Drop for EndsRun<'_> {
    fn drop(&mut self) {
        self.world.stats.done.store(true, Relaxed);
        if self.empties {
            for c in self.world.cells.iter() {
                drop(c.take());
            }
        }
    }
}

impl World {
    /// Makes the calling context's warnings this world's (`Stats::imbalanced_puts`). The
    /// writer and the readers call it; a context that only looks up (an interrupt
    /// handler) counts for the world its thread entered.
    pub fn enter(&self) {
        rcuref::set_warning_hook(Some(count_warning));
        #[cfg(not(target_os = "none"))]
        ENTERED.with(|e| e.set(Some(self.stats)));
        #[cfg(target_os = "none")]
        ENTERED.store(self.stats as *const Stats as *mut Stats, Relaxed);
    }

    /// At least `rounds` replacements, round-robin over the locations, and on until the
    /// readers have done `min_lookups`. Ends the run (`done`) when it returns or panics;
    /// stops early when the books are already wrong (`finish_and_check` says why) or a
    /// reader has ended the run by panicking.
    pub fn writer(&self, rounds: u32, min_lookups: u32) {
        self.enter();
        let _ends = EndsRun {
            world: self,
            empties: true,
        };
        let mut round = 0u32;
        let (mut seen, mut still) = (0u32, 0u32);
        loop {
            let lookups = self.stats.lookups.load(Relaxed);
            if round >= rounds && lookups >= min_lookups {
                break;
            }
            // A put on a count that holds no reference never happens on a correct pool:
            // it means a slot was handed out twice (seen with `ZeroingAlloc` on four
            // cores, whose other symptoms can take minutes to show).
            if self.stats.imbalanced_puts.load(Relaxed) != 0 || self.stats.done.load(Relaxed) {
                break;
            }
            // Stall detection (rcutorture's): readers always make progress on a correct
            // pool; one that has not finished a lookup in 20M rounds is stuck (e.g. on
            // a location that names a destroyed object in a corrupted pool).
            if lookups == seen {
                still += 1;
                assert!(
                    still < 20_000_000,
                    "a reader stalled: no lookup finished in 20M writer rounds"
                );
            } else {
                (seen, still) = (lookups, 0);
            }
            round = round.wrapping_add(1);
            self.write_round(round);
        }
    }

    /// One replacement: a fresh object for location `round % LOCATIONS`; the replaced
    /// object is dropped at once (its slot is reused by the next allocation). Callable
    /// from an interrupt handler.
    pub fn write_round(&self, round: u32) {
        let k = round % LOCATIONS as u32;
        match self.pool.alloc(Obj::new(k, round, self.stats)) {
            Ok(h) => {
                self.stats.allocs.fetch_add(1, Relaxed);
                self.stats.exhausted_run.store(0, Relaxed);
                drop(self.cells[k as usize].replace(Some(h)));
            }
            Err(Refused { value: v, .. }) => {
                self.stats.exhausted.fetch_add(1, Relaxed);
                core::mem::forget(v); // never constructed in the pool: no drop to count
                                      // Readers hold a few handles at most, briefly: a pool that stays full
                                      // has leaked its slots, and a reader may be stuck on a dead object.
                let run = self.stats.exhausted_run.fetch_add(1, Relaxed) + 1;
                assert!(
                    run < 200_000,
                    "the pool stayed full for 200000 allocations: slots leaked"
                );
            }
        }
    }

    /// Looks up until `rounds` lookups are done (for a thread preempted by a writer).
    pub fn reader_for(&self, lookups: u32) {
        self.enter();
        for i in 0..lookups as usize {
            self.lookup(i % LOCATIONS);
        }
    }

    /// One lookup of location `k` with every check.
    pub fn lookup(&self, k: usize) {
        let r = self.rcu.with_reader(|guard| {
            self.stats.lookups.fetch_add(1, Relaxed);
            let Some(h) = self.cells[k].get(guard) else {
                return;
            };
            self.stats.hits.fetch_add(1, Relaxed);
            if h.key != k as u32 {
                self.stats.wrong_key.fetch_add(1, Relaxed);
            }
            let (a, b) = (h.a.load(Relaxed), h.b.load(Relaxed));
            if b != a.wrapping_mul(a) {
                self.stats.torn.fetch_add(1, Relaxed);
            }
            if h.state.load(Relaxed) != ALIVE {
                self.stats.dead_object.fetch_add(1, Relaxed);
            }
        });
        r.unwrap();
    }

    /// Looks up until the writer is done (or another context ended the run by panicking);
    /// a panic here ends the run too.
    pub fn reader_loop(&self) {
        self.enter();
        let _ends = EndsRun {
            world: self,
            empties: false,
        };
        let mut i = 0usize;
        while !self.stats.done.load(Relaxed) {
            self.lookup(i % LOCATIONS);
            i = i.wrapping_add(1);
        }
    }

    /// Empties every location (after the run) and checks the books.
    pub fn finish_and_check(&self) {
        for c in self.cells.iter() {
            drop(c.take());
        }
        let s = self.stats;
        let get = |a: &AtomicU32| a.load(Relaxed);
        assert!(
            get(&s.hits) > 0,
            "no lookup found an object: the torture proves nothing"
        );
        assert!(
            get(&s.wrong_key) == 0,
            "a lookup returned an object its location never held (no re-check, or a slot owned twice)"
        );
        assert!(
            get(&s.torn) == 0,
            "a lookup saw an object under construction (b != a*a)"
        );
        assert!(
            get(&s.dead_object) == 0,
            "a lookup holds a reference to a destroyed object"
        );
        assert!(
            get(&s.destroyed_twice) == 0,
            "an object was destroyed twice"
        );
        assert!(
            get(&s.imbalanced_puts) == 0,
            "a put found no reference to drop: a slot was handed out twice"
        );
        assert!(
            get(&s.allocs) == get(&s.drops),
            "allocations and drops differ: leaked or double-freed"
        );
        assert!(
            self.pool.in_use() == 0,
            "slots still in use after everything was dropped"
        );
    }
}
