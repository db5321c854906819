//! loom models of the typesafe-by-RCU pool (tests 3, 4, 5, 17): the re-check race, the
//! re-initialisation race, and free-list ABA; each with the broken variant it must
//! catch. Run with
//! `RUSTFLAGS="--cfg loom" cargo test --release --test loom_pool -- --test-threads=1`.
#![cfg(loom)]

#[path = "common/loom.rs"]
mod common;
use common::{model, must_catch};

use loom::sync::Arc;
use loom::thread;
use rcuref::mutants::Mutant;
use rcuref::{Pool, PoolCell, Rcu};

/// An object that knows which location it belongs to.
struct Obj {
    key: u32,
}

struct World {
    rcu: Rcu<2>,
    pool: Pool<Obj, 2>,
}

/// Leaks a world so cells can borrow its pool for 'static inside the model.
fn world() -> &'static World {
    Box::leak(Box::new(World {
        rcu: Rcu::new(),
        pool: Pool::new(),
    }))
}

/// Test 4: location L0 holds an object with key 0. The writer takes it out and frees it,
/// then allocates an object with key 1 (the free list is LIFO: the same slot) and
/// publishes it at L1. A lookup of L0 must never return the key-1 object.
fn recheck_race() {
    model(2, || {
        let w = world();
        let l0 = Arc::new(PoolCell::new(&w.pool));
        let l1 = Arc::new(PoolCell::new(&w.pool));
        l0.replace(Some(w.pool.alloc(Obj { key: 0 }).ok().unwrap()));
        let (r0, _r1) = (l0.clone(), l1.clone());
        let reader = thread::spawn(move || {
            let reader = w.rcu.register().unwrap();
            reader.read(|g| {
                if let Some(h) = r0.get(g) {
                    assert_eq!(h.key, 0, "a lookup of L0 returned L1's object");
                }
            });
        });
        drop(l0.take());
        l1.replace(Some(w.pool.alloc(Obj { key: 1 }).ok().unwrap()));
        reader.join().unwrap();
        drop(l1.take());
    });
}

/// Tests 3 and 5: a reader's get races with the slot being freed and re-initialised for
/// a new object. loom watches the value's memory: a reader whose get succeeded must see
/// the new value fully written (publish ordering), and no get may succeed while it is
/// being written (a zeroed count would let it).
fn reinit_race() {
    model(3, || {
        let imbalanced = rcuref::warning_count(rcuref::Warning::ImbalancedPut);
        let w = world();
        let l0 = Arc::new(PoolCell::new(&w.pool));
        l0.replace(Some(w.pool.alloc(Obj { key: 0 }).ok().unwrap()));
        let r0 = l0.clone();
        let reader = thread::spawn(move || {
            let reader = w.rcu.register().unwrap();
            reader.read(|g| {
                if let Some(h) = r0.get(g) {
                    let _ = h.key; // reads the value: checked against the allocator's write
                }
            });
        });
        let old = l0.take();
        drop(old); // frees the slot
        let new = w.pool.alloc(Obj { key: 7 }).ok().unwrap(); // reuses it at once
        assert_eq!(new.key, 7);
        drop(new);
        reader.join().unwrap();
        // A reference overwritten by a re-initialisation shows up as a put too many.
        assert_eq!(
            rcuref::warning_count(rcuref::Warning::ImbalancedPut),
            imbalanced,
            "a put was imbalanced"
        );
        assert_eq!(w.pool.in_use(), 0);
    });
}

/// Test 17: one context's alloc (pop) interleaved with another's pop, pop, pop, push.
/// With the 2-bit tag the four operations wrap it, the first pop's exchange succeeds on a
/// stale `next`, and a slot in use is handed out again: the two owners' values collide.
fn aba() {
    model(2, || {
        let w = world4();
        let t = thread::spawn(move || {
            let x = w.alloc(10).ok();
            let y = w.alloc(11).ok();
            if let (Some(x), Some(y)) = (&x, &y) {
                assert_eq!((**x, **y), (10, 11), "a slot was handed out twice");
            }
        });
        let a = w.alloc(1).ok();
        let b = w.alloc(2).ok();
        let c = w.alloc(3).ok();
        drop(a);
        if let Some(b) = &b {
            assert_eq!(**b, 2, "a slot in use was handed out again");
        }
        drop((b, c));
        t.join().unwrap();
    });
}

fn world4() -> &'static Pool<u32, 5> {
    Box::leak(Box::new(Pool::new()))
}

#[test]
fn lookup_rechecks_identity() {
    recheck_race();
}

#[test]
fn reinit_publishes_before_get_can_succeed() {
    reinit_race();
}

#[test]
fn free_list_is_aba_safe() {
    aba();
}

#[test]
fn catches_lookup_without_recheck() {
    must_catch(Mutant::NoRecheck, recheck_race);
}

#[test]
fn catches_zeroing_allocation() {
    must_catch(Mutant::ZeroingAlloc, reinit_race);
}

#[test]
fn catches_aba_with_a_tiny_tag() {
    must_catch(Mutant::TinyTag, aba);
}
