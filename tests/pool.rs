//! Host tests for the pool: the shared bodies (also run on every QEMU target).

#[path = "cases/pool.rs"]
mod cases;

#[test]
fn alloc_free_reuse() {
    cases::alloc_free_reuse();
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
    <rcuref::Handle<'static, std::cell::Cell<u32>, 4> as AmbiguousIfSync<_>>::some_item();
    <rcuref::Pool<std::cell::Cell<u32>, 4> as AmbiguousIfSync<_>>::some_item();
    // And a handle of a Sync T is Send + Sync.
    fn send_sync<T: Send + Sync>() {}
    send_sync::<rcuref::Handle<'static, u32, 4>>();
    send_sync::<rcuref::PoolCell<'static, u32, 4>>();
}
