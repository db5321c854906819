//! The lints: rustfmt and clippy, warnings denied.

use crate::steps::{Expect, Run};

/// rustfmt's check and clippy over the library, its tests, xtask, the runner and the benches.
pub fn all(run: &mut Run) {
    run.cargo(
        "lint: rustfmt --check",
        Expect::NoTests,
        &["fmt", "--all", "--check"],
        &[],
    );
    run.cargo(
        "lint: clippy, warnings denied (library, tests, xtask, litmus, runner, benches)",
        Expect::NoTests,
        &[
            "clippy",
            "-p",
            "rcuref",
            "-p",
            "xtask",
            "-p",
            "rcuref-litmus",
            "-p",
            "qemu-embedded-runner",
            "-p",
            "rcuref-bench",
            "--all-targets",
            "--features",
            "rcuref/std,rcuref/pool-stats",
            "--",
            "-D",
            "warnings",
        ],
        &[("CARGO_TARGET_DIR", "target/clippy")],
    );
    run.cargo(
        "lint: clippy on the library and its tests with the static full fence (no \
         default features; the step above has the default, the fence chosen at run time), \
         warnings denied",
        Expect::NoTests,
        &[
            "clippy",
            "-p",
            "rcuref",
            "--all-targets",
            "--no-default-features",
            "--features",
            "std",
            "--",
            "-D",
            "warnings",
        ],
        &[("CARGO_TARGET_DIR", "target/clippy")],
    );
}
