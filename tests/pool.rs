//! Host tests for the pool: the shared bodies (also run on every QEMU target).

#[path = "cases/pool.rs"]
mod cases;

#[test]
fn alloc_free_reuse() {
    cases::alloc_free_reuse();
}

#[test]
fn the_last_freed_slot_is_reused_first() {
    cases::the_last_freed_slot_is_reused_first();
}

#[test]
fn cell_lookup() {
    cases::cell_lookup();
}

#[test]
fn handles_share_only_what_t_allows() {
    // Compile-time promises, pinned with a trick that stops compiling if they change:
    // with a blanket impl and one for `Sync` types, naming the item is ambiguous exactly
    // when the type is `Sync`.
    trait AmbiguousIfSync<A> {
        fn some_item() {}
    }
    impl<T: ?Sized> AmbiguousIfSync<()> for T {}
    #[allow(dead_code)]
    struct Invalid;
    impl<T: ?Sized + Sync> AmbiguousIfSync<Invalid> for T {}
    // A handle of a !Sync T (Cell) must not be Sync: two threads could mutate it.
    <rcuref::pool::Handle<'static, std::cell::Cell<u32>, 4> as AmbiguousIfSync<_>>::some_item();
    <rcuref::pool::Pool<std::cell::Cell<u32>, 4> as AmbiguousIfSync<_>>::some_item();
    // And a handle of a Sync T is Send + Sync.
    fn send_sync<T: Send + Sync>() {}
    send_sync::<rcuref::pool::Handle<'static, u32, 4>>();
    send_sync::<rcuref::pool::PoolCell<'static, u32, 4>>();
}

/// A wrapped count, through the public API: `mem::forget` of 2^32 - 1
/// clones of a handle (safe code) used to walk the count through the saturation and
/// dead zones round to NOREF; one more clone made it "one reference", so dropping one
/// of two live handles destroyed the object and the slot was handed out again. Saturation is sticky now: the object is pinned
/// (leaked) and stays readable and findable. About a minute in release; debug builds and
/// Miri skip it (`cargo xtask test` runs it in release).
#[test]
#[cfg_attr(
    any(debug_assertions, miri),
    ignore = "2^32 increments: run in release (cargo xtask test does)"
)]
fn forgotten_clones_cannot_wrap_the_count() {
    use rcuref::pool::{Pool, PoolCell};
    use rcuref::rcu::Rcu;
    static RCU: Rcu<2> = Rcu::new();
    static POOL: Pool<u32, 2> = Pool::new();
    static CELL: PoolCell<'static, u32, 2> = PoolCell::new(&POOL);
    let h = POOL.alloc(7).ok().unwrap();
    let t0 = std::time::Instant::now();
    for _ in 0..u32::MAX {
        std::mem::forget(h.clone());
    }
    eprintln!("2^32 - 1 forgotten clones in {:?}", t0.elapsed());
    let second = h.clone();
    drop(h);
    assert_eq!(*second, 7, "the object was destroyed under a live handle");
    let other = POOL.alloc(9).ok().unwrap();
    assert_ne!(
        other.slot(),
        second.slot(),
        "a live slot was handed out again"
    );
    // A lookup of the saturated (pinned) object finds it instead of spinning.
    CELL.replace(Some(second));
    let reader = RCU.reader().unwrap();
    let found = reader
        .section(|g| CELL.get(g))
        .expect("the location names the object");
    assert_eq!(*found, 7);
    drop(found);
    drop(CELL.take());
    assert_eq!(
        POOL.in_use(),
        2,
        "a saturated object is leaked, never freed"
    );
}

/// Item 9: a value whose `drop` panics still frees its slot; the pool stays usable and
/// its books balanced.
#[test]
fn a_panicking_drop_still_frees_the_slot() {
    use rcuref::pool::Pool;
    struct Bomb(bool);
    impl Drop for Bomb {
        fn drop(&mut self) {
            if self.0 {
                panic!("drop fails");
            }
        }
    }
    static POOL: Pool<Bomb, 1> = Pool::new();
    let h = POOL.alloc(Bomb(true)).ok().unwrap();
    assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(h))).is_err());
    assert_eq!(POOL.in_use(), 0, "the slot was lost");
    let again = POOL.alloc(Bomb(false));
    assert!(again.is_ok(), "the only slot is free again");
}

/// Handles of two pools are never the same object, even in the same slot; `Debug` shows
/// the slot and the value.
#[test]
fn handles_of_two_pools_differ_and_print() {
    use rcuref::pool::{Handle, Pool};
    static A: Pool<u32, 2> = Pool::new();
    static B: Pool<u32, 2> = Pool::new();
    let (a, b) = (A.alloc(1).ok().unwrap(), B.alloc(1).ok().unwrap());
    assert_eq!(a.slot(), b.slot());
    assert!(!Handle::ptr_eq(&a, &b), "handles of two pools named equal");
    assert!(Handle::ptr_eq(&a, &a.clone()));
    assert_eq!(format!("{a:?}"), "Handle { slot: 0, value: 1 }");
}

/// A location owns a reference: dropping the location drops it (and with it the object,
/// if that was the last).
#[test]
fn dropping_a_location_releases_its_reference() {
    use rcuref::pool::{Pool, PoolCell};
    let pool: Pool<u32, 2> = Pool::new();
    {
        let cell = PoolCell::new(&pool);
        cell.replace(Some(pool.alloc(1).ok().unwrap()));
        assert_eq!(pool.in_use(), 1);
    }
    assert_eq!(pool.in_use(), 0, "a dropped location kept its object");
}
