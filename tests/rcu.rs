//! Host tests for the RCU: the shared bodies (also run on every QEMU target).

#[path = "cases/rcu.rs"]
mod cases;

#[test]
fn nested_sections() {
    cases::nested_sections();
}

#[test]
fn stalled_reader() {
    cases::stalled_reader();
}

#[test]
fn epoch_wraps() {
    cases::epoch_wraps();
}

#[test]
fn slots_run_out() {
    cases::slots_run_out();
}

#[test]
fn defer_queue_is_bounded() {
    cases::defer_queue_is_bounded();
}

#[test]
fn cell_publish_and_reclaim() {
    cases::cell_publish_and_reclaim();
}

/// Test 16: a clear panic in debug builds...
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "inside a read section")]
fn synchronize_in_read_section_panics_in_debug() {
    let _ = cases::synchronize_in_read_section();
}

/// ...and a documented error in release builds, never a hang.
#[cfg(not(debug_assertions))]
#[test]
fn synchronize_in_read_section_is_an_error_in_release() {
    assert_eq!(
        cases::synchronize_in_read_section(),
        Err(rcuref::RcuError::InReadSection)
    );
}

#[test]
fn guards_and_readers_are_not_send() {
    // Compile-time promises, pinned with a trick that fails to compile if they change:
    // a blanket impl for all T and a specific one for Send types make the call ambiguous
    // when T: Send.
    trait AmbiguousIfSend<A> {
        fn some_item() {}
    }
    impl<T: ?Sized> AmbiguousIfSend<()> for T {}
    #[allow(dead_code)]
    struct Invalid;
    impl<T: ?Sized + Send> AmbiguousIfSend<Invalid> for T {}
    <rcuref::Reader<'static, 2> as AmbiguousIfSend<_>>::some_item();
    <rcuref::Guard<'static, 'static, 2> as AmbiguousIfSend<_>>::some_item();
}
