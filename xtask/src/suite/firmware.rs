//! The on-target steps: each target's firmware suites in QEMU (debug and release),
//! their negative controls, the debug aids, the asymmetric-fence mode, the pipeline's own
//! controls, and the firmware examples.

use crate::steps::{Expect, Run};

/// The firmware examples users can copy (`examples/firmware/`): package and target.
/// Each prints a summary and exits non-zero on a violation.
pub(crate) const FIRMWARE_EXAMPLES: &[(&str, &str)] = &[
    ("rcuref-example-rtic", "thumbv7m-none-eabi"),
    ("rcuref-example-embassy", "thumbv7m-none-eabi"),
    ("rcuref-example-riscv-kernel", "riscv64gc-unknown-none-elf"),
    (
        "rcuref-example-riscv-kernel",
        "riscv32imac-unknown-none-elf",
    ),
    ("rcuref-example-aarch64-kernel", "aarch64-unknown-none"),
    ("rcuref-example-m33-dual-core", "thumbv8m.main-none-eabihf"),
];

/// The runner an example needs beyond the target's (cargo's config cannot give one for
/// a dotted triple, rust-lang/cargo#15901): the dual-core M33 runs on mps2-an521.
pub(crate) fn example_env(pkg: &str, target: &str) -> Vec<(String, String)> {
    match pkg {
        "rcuref-example-m33-dual-core" => vec![(
            runner_var(target),
            format!("cargo xtask qemu-run --target {target} --machine mps2-an521"),
        )],
        _ => Vec::new(),
    }
}

/// `(name, value)` pairs as cargo steps take them.
pub(crate) fn env_refs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// How one target's firmware is tested: the machine (in the step's name), the cargo
/// features that select it, and the runner command when cargo's own config cannot give
/// it (a triple with a dot: rust-lang/cargo#15901).
struct FirmwareRun {
    machine: &'static str,
    features: Option<&'static str>,
    runner: Option<&'static str>,
}

/// The machines a target's firmware is tested on (one unless the target has several).
fn firmware_runs(target: &str) -> Vec<FirmwareRun> {
    match target {
        "thumbv8m.main-none-eabihf" => vec![
            FirmwareRun {
                machine: "mps2-an505",
                features: None,
                runner: Some("cargo xtask qemu-run --target thumbv8m.main-none-eabihf"),
            },
            FirmwareRun {
                machine: "mps2-an521, both cores",
                features: Some("dual-core"),
                runner: Some(
                    "cargo xtask qemu-run --target thumbv8m.main-none-eabihf --machine mps2-an521",
                ),
            },
        ],
        _ => vec![FirmwareRun {
            machine: "",
            features: None,
            runner: None,
        }],
    }
}

/// The environment variable that sets cargo's runner for `target`.
pub(crate) fn runner_var(target: &str) -> String {
    format!(
        "CARGO_TARGET_{}_RUNNER",
        target.to_uppercase().replace(['-', '.'], "_")
    )
}

/// Each target's firmware suites, on each of its machines, debug (and release unless
/// `quick`).
pub fn suites(run: &mut Run, targets: &[&str], quick: bool) {
    for t in targets {
        let profiles: &[&str] = if quick {
            &["debug"]
        } else {
            &["debug", "release"]
        };
        for fw in firmware_runs(t) {
            for p in profiles {
                let mut a = vec!["test", "-p", "rcuref-firmware", "--target", t];
                if *p == "release" {
                    a.push("--release");
                }
                if let Some(f) = fw.features {
                    a.extend(["--features", f]);
                }
                let (rvar, fvar) = (runner_var(t), rustflags_var(t));
                let mut env: Vec<(&str, &str)> = Vec::new();
                let flags = target_rustflags(t);
                if !flags.is_empty() {
                    env.push((fvar.as_str(), flags));
                }
                if let Some(r) = fw.runner {
                    env.push((rvar.as_str(), r));
                }
                let name = if fw.machine.is_empty() {
                    format!("{t} ({p})")
                } else {
                    format!("{t} ({}, {p})", fw.machine)
                };
                let min = firmware_tests(t, fw.features.is_some(), *p == "release");
                run.cargo(&name, Expect::Tests(min), &a, &env);
            }
        }
    }
}

/// The torture's negative control on the targets: the library built with its broken
/// variants; the tests select them (grace periods that end at once, nesting ignored, the
/// pool's broken lookups) and must catch each. On a single-core and on each multi-core
/// Arm part, and on RISC-V.
pub fn negative_controls(run: &mut Run, targets: &[&str]) {
    for t in targets.iter().filter(|t| {
        [
            "thumbv7em-none-eabihf",
            "thumbv8m.main-none-eabihf",
            "riscv64gc-unknown-none-elf",
            "aarch64-unknown-none",
        ]
        .contains(t)
    }) {
        // On thumbv8m the dual-core machine (the single-core one is thumbv7em's case).
        let fw = firmware_runs(t).pop().expect("one run at least");
        let (var, rvar) = (rustflags_var(t), runner_var(t));
        let flags = format!("{} --cfg rcuref_mutants", target_rustflags(t));
        let mut a = vec!["test", "-p", "rcuref-firmware", "--target", t];
        if let Some(f) = fw.features {
            a.extend(["--features", f]);
        }
        a.extend(["--test", "rcu", "--test", "pool", "--", "negative_control"]);
        // A control's run that hangs (no output, then the 120 s timeout) is run once
        // more: seen on aarch64's four-core QEMU about once in three full runs, never when
        // rerun (the cause is not found; DEVELOPMENT.md, "Known flakes"). A miss is never
        // retried: the runner retries only a timeout, and says so in the log.
        let retrying = format!(
            "{} --retry-timeouts 1",
            fw.runner
                .map(str::to_owned)
                .unwrap_or_else(|| format!("cargo xtask qemu-run --target {t}"))
        );
        let env = vec![
            (var.as_str(), flags.trim()),
            ("CARGO_TARGET_DIR", "target/fw-mutants"),
            (rvar.as_str(), retrying.as_str()),
        ];
        run.cargo(
            &format!("{t} (negative controls: broken RCU and pool must be caught)"),
            Expect::Tests(firmware_negative_controls(t)),
            &a,
            &env,
        );
    }
}

/// The debug aids on a target (features strict-grace-periods and debug-callbacks of the
/// firmware crate, forwarding rcuref's): their two bodies of the rcu suite.
pub fn debug_aids(run: &mut Run, targets: &[&str]) {
    for t in targets
        .iter()
        .filter(|t| ["thumbv7em-none-eabihf", "riscv32imac-unknown-none-elf"].contains(t))
    {
        let (var, flags) = (rustflags_var(t), target_rustflags(t));
        let mut env = vec![("CARGO_TARGET_DIR", "target/fw-debug-aids")];
        if !flags.is_empty() {
            env.push((var.as_str(), flags));
        }
        run.cargo(
            &format!("{t} (debug aids: strict grace periods, a callback queued twice)"),
            Expect::Tests(2),
            &[
                "test",
                "-p",
                "rcuref-firmware",
                "--target",
                t,
                "--features",
                "strict-grace-periods,debug-callbacks",
                "--test",
                "rcu",
                "--",
                "debug_aid",
            ],
            &env,
        );
    }
}

/// The asymmetric-fence mode on several cores, its heavy fence an IPI (the CLINT
/// on RISC-V, a GIC SGI on AArch64; targets/firmware/src/hart.rs, a64.rs): the
/// RCU suite, the all-core torture and its busted-grace-period control, and the
/// check that every grace period's first wait fences every other core, with its
/// skipped-heavy-fence
/// control. (What a skipped fence does to readers is shown by the host's
/// store-buffering torture only: docs/testing.md.) On AArch64 without the timer
/// tortures: there every wait interrupts three other vCPUs, which on a two-core
/// host takes minutes for them; the nesting they test is the same code in both
/// modes and runs in [`suites`].
pub fn asymmetric(run: &mut Run, targets: &[&str]) {
    for t in targets
        .iter()
        .filter(|t| t.starts_with("riscv") || t.starts_with("aarch64"))
    {
        let var = rustflags_var(t);
        let flags = format!(
            "{} --cfg rcuref_asymmetric_fence --cfg rcuref_mutants",
            target_rustflags(t)
        );
        let mut a = vec![
            "test",
            "-p",
            "rcuref-firmware",
            "--target",
            t,
            "--release",
            "--test",
            "rcu",
        ];
        if t.starts_with("aarch64") {
            a.extend(["--", "--skip", "irq_", "--skip", "negative_control_nesting"]);
        }
        run.cargo(
            &format!("{t} (asymmetric-fence mode, IPI heavy fence: RCU suite and torture)"),
            Expect::Tests(firmware_asymmetric_tests(t)),
            &a,
            &[
                (var.as_str(), flags.trim()),
                ("CARGO_TARGET_DIR", "target/fw-asym"),
            ],
        );
    }
}

/// The pipeline's own control: a deliberately failing on-target test turns the run red.
pub fn failing_test(run: &mut Run, targets: &[&str]) {
    let t = targets[0];
    run.expect_failure(
        &format!("{t}: a deliberately failing on-target test turns the run red"),
        &[
            "test",
            "-p",
            "rcuref-firmware",
            "--target",
            t,
            "--features",
            "failing-test",
            "--test",
            "file_ref",
            "--",
            "deliberately_failing",
        ],
        "deliberate failure: a put with a reference left returned false",
    );
}

/// The firmware examples users can copy, each a program that judges its own run.
pub fn examples(run: &mut Run, targets: &[&str]) {
    for (pkg, t) in FIRMWARE_EXAMPLES
        .iter()
        .filter(|(_, t)| targets.contains(t))
    {
        let env = example_env(pkg, t);
        run.cargo(
            &format!("{t} (firmware example {pkg})"),
            Expect::NoTests, // a program: it exits non-zero on a violation
            &["run", "-q", "-p", pkg, "--release", "--target", t],
            &env_refs(&env),
        );
    }
}

/// A build for a target without compare-and-swap, none chosen: one clear error.
pub fn no_compare_and_swap(run: &mut Run, targets: &[&str]) {
    if targets.contains(&"thumbv6m-none-eabi") {
        run.expect_failure_with(
            "thumbv6m-none-eabi: no compare-and-swap chosen is one clear build error",
            &["build", "-p", "rcuref", "--target", "thumbv6m-none-eabi"],
            "rcuref: this target has no compare-and-swap",
            None,
        );
    }
}

/// What a target's firmware has: a timer interrupt (`rcuref_fw_tick`), several cores
/// (`rcuref_fw_cores`), as targets/firmware/build.rs decides.
fn firmware_cfg(target: &str, dual_core: bool) -> (bool, bool) {
    let tick = target.starts_with("thumb") || target.starts_with("aarch64");
    let cores = target.starts_with("riscv")
        || target.starts_with("aarch64")
        || (dual_core && target.starts_with("thumbv8m"));
    (tick, cores)
}

/// The on-target suites (targets/firmware/tests/), by what they need:
/// file_ref 8; races: 1 with a tick, 3 with cores (+1 in release); rcu: 20, +3 with a
/// tick, +1 with cores, +1 with both, +8 on AArch64 (the `wfi` sleep's: a wake before
/// the sleep, a writer woken by an unlock, and their controls; the IPI fence's: heavy
/// fences with their interrupt masked on every core and its control, an interrupted
/// serve, a request across the ticket wrap); pool: 3, +2 with a tick, +1 with cores.
fn firmware_tests(target: &str, dual_core: bool, release: bool) -> u64 {
    let (tick, cores) = firmware_cfg(target, dual_core);
    let n = |c: bool, k: u64| if c { k } else { 0 };
    let file_ref = 8;
    let races = n(tick, 1) + n(cores, 3) + n(cores && release, 1);
    let rcu =
        20 + n(tick, 3) + n(cores, 1) + n(tick && cores, 1) + n(target.starts_with("aarch64"), 8);
    let pool = 3 + n(tick, 2) + n(cores, 1);
    file_ref + races + rcu + pool
}

/// `negative_control*` of the rcu and pool suites in a `--cfg rcuref_mutants` build, on
/// the machine the step uses (thumbv8m: both cores of mps2-an521): rcu's busted grace
/// periods, +1 nesting control with a tick, +1 with a tick and cores; pool's baseline and
/// no-recheck, +1 zeroing with cores.
fn firmware_negative_controls(target: &str) -> u64 {
    let (tick, cores) = firmware_cfg(target, true);
    let n = |c: bool, k: u64| if c { k } else { 0 };
    (1 + n(tick, 1) + n(tick && cores, 1)) + (2 + n(cores, 1))
}

/// The rcu suite in the asymmetric-fence mutant build on RISC-V and AArch64: 20, the
/// all-core torture, the busted-RCU control, the heavy fence's check and its control,
/// the IPI fence's four (masked fences on every core and its control, an interrupted
/// serve, a request across the ticket wrap), and on AArch64 the `wfi` sleep's four
/// (AArch64 skips its timer's other tests, `irq_*` and the nesting controls; RISC-V has
/// no tick, so none of them is built there).
fn firmware_asymmetric_tests(target: &str) -> u64 {
    20 + 1 + 1 + 2 + 4 + if target.starts_with("aarch64") { 4 } else { 0 }
}

/// The rustflags the firmware of a target is tested with: `.cargo/config.toml`'s for that
/// target (repeated, since a step's own setting replaces them), and on thumbv7em the
/// single-core fences (`rcuref_unsafe_assume_single_core`: mps2-an386 has one core), so
/// that both fence variants are tested.
fn target_rustflags(target: &str) -> &'static str {
    match target {
        "riscv64gc-unknown-none-elf" => "-C code-model=large",
        "thumbv7em-none-eabihf" => "--cfg rcuref_unsafe_assume_single_core",
        _ => "",
    }
}

/// The environment variable that sets `target`'s rustflags. Like the runner's: cargo
/// reads `CARGO_TARGET_<TRIPLE>_*` with every `-` and `.` of the triple as `_`; with the
/// dot left in, thumbv8m.main's steps were built without their flags (its negative
/// controls, behind `cfg(rcuref_mutants)`, did not exist, and it ran none).
fn rustflags_var(target: &str) -> String {
    format!(
        "CARGO_TARGET_{}_RUSTFLAGS",
        target.to_uppercase().replace(['-', '.'], "_")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TARGETS;

    /// Issue #24's thumbv8m step: its rustflags variable kept the triple's dot, so cargo
    /// never read it and the negative controls were compiled out ("0 passed").
    #[test]
    fn a_dotted_triple_gets_its_rustflags() {
        let t = "thumbv8m.main-none-eabihf";
        assert_eq!(
            rustflags_var(t),
            "CARGO_TARGET_THUMBV8M_MAIN_NONE_EABIHF_RUSTFLAGS"
        );
        assert_eq!(
            rustflags_var(t).trim_end_matches("RUSTFLAGS"),
            runner_var(t).trim_end_matches("RUNNER"),
            "the runner and the rustflags of one target are named alike"
        );
        for t in TARGETS {
            assert!(!rustflags_var(t).contains(['.', '-']), "{t}");
        }
    }

    #[test]
    fn every_firmware_step_expects_tests() {
        for t in TARGETS {
            for fw in firmware_runs(t) {
                for release in [false, true] {
                    assert!(
                        firmware_tests(t, fw.features.is_some(), release) >= 30,
                        "{t}"
                    );
                }
            }
            assert!(firmware_negative_controls(t) >= 4, "{t}");
        }
        // Both cores of mps2-an521: the rcu suite alone is the 22 the run
        // filtered out (25 since the three bodies of Linux's polled contract, budgets
        // and tokens), and the three controls of each suite must run.
        assert_eq!(
            firmware_tests("thumbv8m.main-none-eabihf", true, false),
            8 + 4 + 25 + 6
        );
        assert_eq!(firmware_negative_controls("thumbv8m.main-none-eabihf"), 6);
        assert_eq!(firmware_negative_controls("thumbv7em-none-eabihf"), 4);
        assert_eq!(firmware_negative_controls("riscv64gc-unknown-none-elf"), 4);
    }
}
