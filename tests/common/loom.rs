//! Helpers shared by the loom models (`tests/loom_*.rs`).

use rcuref::mutants::{select, Mutant};

/// Explores `f` under loom with the given preemption bound.
pub(crate) fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(bound);
    b.max_branches = 20_000;
    b.check(f);
}

/// Runs `harness` with the broken variant `m` selected and requires it to fail.
pub(crate) fn must_catch(m: Mutant, harness: fn()) {
    select(m);
    let caught = std::panic::catch_unwind(harness).is_err();
    select(Mutant::None);
    assert!(caught, "the model did not catch the broken variant {m:?}");
}
