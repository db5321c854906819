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
