//! The weak-memory suite's steps (`cargo xtask litmus`).

use crate::steps::{self, Expect, Run};

/// herd7 over every committed test and twin, the tests tied to the object code.
pub fn suite(run: &mut Run) {
    run.cargo(
        "litmus: herd7 on C11 and on each fast path as compiled for AArch64 (with and \
         without LSE/RCpc), RISC-V 32/64 and Armv7-M: tests Never, weakened twins Sometimes, \
         the tests tied to the object code",
        Expect::Tests(litmus_files()),
        &["xtask", "litmus"],
        &[],
    );
}

/// The code-tie check's control: it must fail on a broken variant.
pub fn control(run: &mut Run) {
    run.cargo(
        "litmus: the code-tie check fails on a broken variant compiled for AArch64 and RISC-V",
        Expect::Tests(2),
        &["xtask", "litmus", "--control"],
        &[],
    );
}

/// The committed litmus tests (`litmus/tests/*/*.litmus`): `cargo xtask litmus` gives
/// each a herd7 verdict at least once (the RC11 model runs the C11 files again, and the
/// source, code and generation checks count too), so a green run passes at least this
/// many. Counted when the step runs, since the suite is generated (`--bless`).
fn litmus_files() -> u64 {
    let dir = steps::workspace_root().join("litmus/tests");
    let Ok(configs) = std::fs::read_dir(dir) else {
        return 0; // no suite: `Expect::Tests(0)` is red
    };
    configs
        .flatten()
        .filter_map(|c| std::fs::read_dir(c.path()).ok())
        .flat_map(|files| files.flatten())
        .filter(|f| f.path().extension().is_some_and(|e| e == "litmus"))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_litmus_suite_is_counted() {
        assert!(litmus_files() > 100, "litmus/tests/*/*.litmus not found");
    }
}
