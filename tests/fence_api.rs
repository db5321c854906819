//! Regression test from the hostile review of issue 27 (fixed since); what went wrong: the run-time fence API (`rcu::heavy::install`, `fence_mode`) exists only
//! under `cfg(rcuref_auto)`, which build.rs turns off when the binary passes `--cfg
//! rcuref_asymmetric_fence` (or under loom), although feature `auto-fence` is on.
//! Features are additive and the cfg is the final binary's choice, so a library that
//! enables `auto-fence` (or `membarrier`) and calls `install` at boot stops compiling
//! as soon as the binary that uses it picks the static mode.
//!
//! `RUSTFLAGS="--cfg rcuref_asymmetric_fence" cargo test --features membarrier
//! --test fence_api` fails to compile: "cannot find function `fence_mode` in module
//! `rcuref::rcu::heavy`".
#![cfg(rcuref_auto_fence)]

#[cfg(rcuref_asymmetric_fence)]
rcuref::set_heavy_fence!(rcuref::rcu::heavy::Membarrier);

/// What a board-support crate with feature `auto-fence` would do at boot.
fn boot() -> rcuref::rcu::heavy::FenceMode {
    rcuref::rcu::heavy::fence_mode()
}

#[test]
fn the_run_time_fence_api_exists_wherever_the_feature_is_on() {
    let _ = boot();
}
