//! Compile-fail tests: promises the type system keeps. Each file under
//! `tests/ui/` must fail to compile with the error recorded beside it; after a compiler
//! upgrade changes the wording, refresh with `TRYBUILD=overwrite cargo test --test compile_fail`
//! and check that each error still names the promise.

#[cfg(not(any(miri, loom)))]
#[test]
fn promises_hold() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
