//! loom models of the typesafe-by-RCU pool (tests 3, 4, 5, 17): the re-check race, the
//! re-initialisation race, and two allocators racing for one slot; each with the broken
//! variant it must catch. Run with
//! `RUSTFLAGS="--cfg loom" cargo test --release --test loom_pool -- --test-threads=1`.
#![cfg(loom)]

#[path = "common/loom.rs"]
mod common;
use common::{model, must_catch};

use loom::sync::Arc;
use loom::thread;
use rcuref::mutants::Mutant;
use rcuref::pool::{Pool, PoolCell};
use rcuref::rcu::Rcu;

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

/// Lookup vs free and reuse: location L0 holds an object with key 0. The writer takes it out and frees it,
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

/// Free-list ABA, for the claim flags that replaced the tagged free list: two
/// contexts allocate and free at once; a slot must never be handed to both (their
/// values would collide, which loom sees as a concurrent write).
fn claim_race() {
    model(3, || {
        let w = world2();
        let t = thread::spawn(move || {
            let x = w.alloc(10).ok();
            if let Some(x) = &x {
                assert_eq!(**x, 10, "a slot was handed out twice");
            }
        });
        let a = w.alloc(1).ok();
        drop(a);
        let b = w.alloc(2).ok();
        if let Some(b) = &b {
            assert_eq!(**b, 2, "a slot in use was handed out again");
        }
        drop(b);
        t.join().unwrap();
        assert_eq!(w.in_use(), 0);
    });
}

fn world2() -> &'static Pool<u32, 2> {
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
fn a_slot_is_never_claimed_twice() {
    claim_race();
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
fn catches_a_claim_that_checks_then_writes() {
    must_catch(Mutant::CheckThenClaim, claim_race);
}
