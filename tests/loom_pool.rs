//! loom models of the typesafe-by-RCU pool (tests 3, 4, 5, 17): the re-check race, the
//! re-initialisation race, and two allocators racing for one slot; each with the broken
//! variant it must catch; the same races for the pool node of caller-owned objects
//! (`pool::node`, the C API's pool). Run with
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
            let reader = w.rcu.reader().unwrap();
            reader.section(|g| {
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
            let reader = w.rcu.reader().unwrap();
            reader.section(|g| {
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

// ---- the pool node (`rcuref::pool::node`), objects in the caller's memory ----------

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicPtr, Ordering};
use rcuref::pool::node::{self, Node};

/// A caller's object: the node it embeds and a field.
struct Item {
    node: Node,
    key: UnsafeCell<u32>,
}

/// Claims `item`, writes its key and publishes it.
fn build(item: &Item, key: u32) -> bool {
    if !item.node.claim() {
        return false;
    }
    // SAFETY: (test) the claim gave us the fields; loom checks it.
    item.key.with_mut(|p| unsafe { *p = key });
    assert!(item.node.publish());
    true
}

/// One object reused at once: location L0 names it with key 0; the writer empties L0,
/// puts its reference (the last: the node is freed), claims the same object again for
/// key 1 and publishes it at L1. A lookup of L0 must never return the key-1 object, and
/// no get may succeed while the key is being written.
fn node_reuse_race() {
    model(3, || {
        let item: &'static Item = Box::leak(Box::new(Item {
            node: Node::new(),
            key: UnsafeCell::new(0),
        }));
        let l0: &'static AtomicPtr<Item> =
            Box::leak(Box::new(AtomicPtr::new(std::ptr::null_mut())));
        let l1: &'static AtomicPtr<Item> =
            Box::leak(Box::new(AtomicPtr::new(std::ptr::null_mut())));
        let ptr = item as *const Item as *mut Item;
        assert!(build(item, 0));
        l0.store(ptr, Ordering::Release);
        let rcu: &'static Rcu<2> = Box::leak(Box::new(Rcu::new()));
        let reader = thread::spawn(move || {
            let r = rcu.reader().unwrap();
            r.section(|_| {
                let found = node::lookup(
                    || l0.load(Ordering::Acquire),
                    |p| (p == ptr).then_some(&item.node),
                    |_| {},
                )
                .unwrap();
                if !found.is_null() {
                    // SAFETY: (test) we hold a reference; loom checks the read.
                    let k = item.key.with(|p| unsafe { *p });
                    assert_eq!(k, 0, "a lookup of L0 returned L1's object");
                    item.node.put(|| {});
                }
            });
        });
        let old = l0.swap(std::ptr::null_mut(), Ordering::AcqRel);
        assert_eq!(old, ptr);
        item.node.put(|| {});
        let imbalanced = rcuref::warning_count(rcuref::Warning::ImbalancedPut);
        let built = build(item, 1);
        if built {
            l1.store(ptr, Ordering::Release);
        }
        reader.join().unwrap();
        // A get that succeeded on the object being built leaves its put behind: the
        // published object must still hold exactly the writer's reference.
        if built {
            assert_eq!(
                item.node.ref_count(),
                1,
                "a reference to the new object was lost"
            );
        }
        assert_eq!(
            rcuref::warning_count(rcuref::Warning::ImbalancedPut),
            imbalanced,
            "a put was imbalanced"
        );
    });
}

/// Two contexts claim one free node and write its fields: only one may win.
fn node_claim_race() {
    model(3, || {
        let item: &'static Item = Box::leak(Box::new(Item {
            node: Node::new(),
            key: UnsafeCell::new(0),
        }));
        let t = thread::spawn(move || {
            item.node.claim() && {
                // SAFETY: (test) loom checks this write against the other claimer's.
                item.key.with_mut(|p| unsafe { *p = 1 });
                true
            }
        });
        let mine = item.node.claim() && {
            // SAFETY: (test) as above.
            item.key.with_mut(|p| unsafe { *p = 2 });
            true
        };
        let theirs = t.join().unwrap();
        assert!(!(mine && theirs), "a node was claimed twice");
        assert!(mine || theirs, "a free node was claimed by nobody");
    });
}

#[test]
fn node_lookup_rechecks_identity_and_never_sees_a_build() {
    node_reuse_race();
}

#[test]
fn a_node_is_never_claimed_twice() {
    node_claim_race();
}

#[test]
fn catches_a_node_lookup_without_recheck() {
    must_catch(Mutant::NoRecheck, node_reuse_race);
}

#[test]
fn catches_a_node_count_made_live_at_the_claim() {
    must_catch(Mutant::ZeroingAlloc, node_reuse_race);
}

#[test]
fn catches_a_node_claim_that_checks_then_writes() {
    must_catch(Mutant::CheckThenClaim, node_claim_race);
}
