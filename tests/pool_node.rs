//! `pool::node`: the pool protocol for objects in the caller's memory (the C API's
//! pool), on the host: a node's life, what every move refuses, and `lookup`'s re-check.
//! The races are the loom models at the end of `tests/loom_pool.rs`.

use rcuref::pool::node::{lookup, Node};
use rcuref::Error;
use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, Ordering::*};

struct Obj {
    node: Node,
    key: Cell<u32>,
}

fn obj(key: u32) -> &'static Obj {
    Box::leak(Box::new(Obj {
        node: Node::new(),
        key: Cell::new(key),
    }))
}

#[test]
fn a_node_goes_free_claimed_live_dying_free() {
    let o = obj(1);
    assert!(!o.node.is_in_use() && o.node.ref_count() == 0);
    assert!(!o.node.get(), "a get succeeded on a free node");
    assert!(!o.node.publish(), "a free node was published");
    assert!(o.node.claim());
    assert!(o.node.is_in_use());
    assert!(!o.node.claim(), "a claimed node was claimed again");
    assert!(!o.node.get(), "a get succeeded on a node being built");
    assert!(o.node.publish());
    assert!(!o.node.publish(), "a live node was published again");
    assert_eq!(o.node.ref_count(), 1);
    assert!(o.node.get());
    o.node.inc();
    assert_eq!(o.node.ref_count(), 3);
    let destroyed = Cell::new(0);
    assert!(!o.node.put(|| destroyed.set(destroyed.get() + 1)));
    assert!(!o.node.put(|| destroyed.set(destroyed.get() + 1)));
    assert_eq!(destroyed.get(), 0, "destroyed with references left");
    let mut in_use_during_destroy = false;
    assert!(o.node.put(|| {
        destroyed.set(destroyed.get() + 1);
        in_use_during_destroy = o.node.is_in_use();
        assert!(!o.node.publish(), "published while being destroyed");
        assert!(!o.node.claim(), "claimed while being destroyed");
    }));
    assert_eq!(destroyed.get(), 1);
    assert!(in_use_during_destroy, "a dying node read as not in use");
    assert!(!o.node.is_in_use() && o.node.ref_count() == 0);
    assert!(o.node.claim(), "a freed node could not be claimed again");
}

#[test]
fn a_destroy_that_panics_still_frees_the_node() {
    let o = obj(1);
    assert!(o.node.claim() && o.node.publish());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        o.node.put(|| panic!("destroy fails"));
    }));
    assert!(r.is_err());
    assert!(
        !o.node.is_in_use(),
        "the node stayed in use after a panicked destroy"
    );
    assert!(o.node.claim());
}

#[test]
fn in_use_states_are_tagged() {
    let o = obj(1);
    for w in [0u32, 1, 2, 3, u32::MAX, 0x706e_0000] {
        assert!(!Node::marks_in_use(w), "{w:#x} read as a node in use");
    }
    for w in [0x706e_0001u32, 0x706e_0002, 0x706e_0003] {
        assert!(Node::marks_in_use(w), "{w:#x} not read as a node in use");
    }
    assert_eq!(format!("{:?}", o.node), "Node { state: \"free\" }");
    assert!(o.node.claim());
    assert_eq!(format!("{:?}", o.node), "Node { state: \"claimed\" }");
    assert!(o.node.publish());
    assert_eq!(format!("{:?}", o.node), "Node { state: \"live\" }");
}

/// The lookup of a location: the object it names with a reference, null for an empty
/// location or a dying object, `OtherDomain` for a pointer `node_of` refuses; and the
/// re-check: a location that names another object after the get gives that reference
/// back and looks again.
#[test]
fn lookup_takes_a_reference_and_rechecks() {
    let (a, b) = (obj(1), obj(2));
    for o in [a, b] {
        assert!(o.node.claim() && o.node.publish());
    }
    let pa = a as *const Obj as *mut Obj;
    let pb = b as *const Obj as *mut Obj;
    let loc = AtomicPtr::new(std::ptr::null_mut::<Obj>());
    let node_of = |p: *mut Obj| {
        if p == pa {
            Some(&a.node)
        } else if p == pb {
            Some(&b.node)
        } else {
            None
        }
    };
    let no_destroy = |_: *mut Obj| panic!("a lookup destroyed an object");
    assert_eq!(
        lookup(|| loc.load(Acquire), node_of, no_destroy),
        Ok(std::ptr::null_mut())
    );
    loc.store(pa, Release);
    assert_eq!(lookup(|| loc.load(Acquire), node_of, no_destroy), Ok(pa));
    assert_eq!(a.node.ref_count(), 2, "the lookup's reference");
    assert!(!a.node.put(|| {}));
    // The location changes between the first load and the re-check: the reference on
    // A is given back and the lookup returns B.
    let loads = Cell::new(0);
    let moving = || {
        loads.set(loads.get() + 1);
        if loads.get() == 1 {
            pa
        } else {
            pb
        }
    };
    assert_eq!(lookup(moving, node_of, no_destroy), Ok(pb));
    assert_eq!(a.node.ref_count(), 1, "the re-check kept a reference on A");
    assert_eq!(b.node.ref_count(), 2);
    assert!(!b.node.put(|| {}));
    // A pointer that is no object of this pool.
    let stranger = obj(3) as *const Obj as *mut Obj;
    loc.store(stranger, Release);
    assert_eq!(
        lookup(|| loc.load(Acquire), node_of, no_destroy),
        Err(Error::OtherDomain)
    );
    // A dying object still named: absent.
    loc.store(pa, Release);
    assert!(a.node.put(|| {
        let found = lookup(|| loc.load(Acquire), node_of, no_destroy);
        assert_eq!(found, Ok(std::ptr::null_mut()), "a dying object was found");
    }));
    let _ = b.key.get() + a.key.get();
}

/// A re-check that gives back the last reference runs `destroy` (the object it found
/// was put by its owner meanwhile).
#[test]
fn a_recheck_that_puts_the_last_reference_destroys() {
    let (a, b) = (obj(1), obj(2));
    for o in [a, b] {
        assert!(o.node.claim() && o.node.publish());
    }
    let pa = a as *const Obj as *mut Obj;
    let pb = b as *const Obj as *mut Obj;
    let node_of = |p: *mut Obj| Some(if p == pa { &a.node } else { &b.node });
    let destroyed = Cell::new(std::ptr::null_mut::<Obj>());
    let loads = Cell::new(0);
    let moving = || {
        loads.set(loads.get() + 1);
        match loads.get() {
            1 => pa,
            2 => {
                // The owner puts A's last reference between the get and the re-check.
                assert!(!a.node.put(|| {}));
                pb
            }
            _ => pb,
        }
    };
    assert_eq!(lookup(moving, node_of, |p| destroyed.set(p)), Ok(pb));
    assert_eq!(
        destroyed.get(),
        pa,
        "the lookup's last put did not destroy A"
    );
    assert!(!a.node.is_in_use());
}
