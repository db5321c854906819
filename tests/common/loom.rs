//! Helpers shared by the loom models (`tests/loom_*.rs`).

use rcuref::mutants::{select, Mutant};

/// Explores `f` under loom with the given preemption bound.
pub(crate) fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(bound);
    b.max_branches = 20_000;
    b.check(f);
}

/// Runs `harness` with the broken variant `m` selected and requires it to fail, for a
/// reason other than a broken test setup (an `unwrap` of an error): the panic message
/// is printed, so the log shows what the model saw.
pub(crate) fn must_catch(m: Mutant, harness: fn()) {
    select(m);
    let result = std::panic::catch_unwind(harness);
    select(Mutant::None);
    let payload = match result {
        Ok(()) => panic!("the model did not catch the broken variant {m:?}"),
        Err(p) => p,
    };
    let msg = panic_message(&*payload);
    println!("caught {m:?}: {msg}");
    assert!(
        !msg.contains("unwrap()"),
        "the model failed on its own setup, not on {m:?}: {msg}"
    );
}

/// The message a panic carried (`panic!` with a format: `String`; with a literal:
/// `&str`), for a harness that checks *why* a model failed.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)")
}
