//! The QEMU runner as a product, used by another crate.

use crate::install;
use crate::steps::{self, Expect, Run};

/// The QEMU runner as a product: installed with `cargo install --path runner` (as a user
/// would), then used by a crate that is not this one (`runner/fixture`, its own
/// workspace) as its cargo runner, for an embedded-test suite and a plain firmware.
pub fn for_other_crates(run: &mut Run, targets: &[&str]) {
    let root = steps::workspace_root();
    let install_root = root.join("target/runner-install");
    let install_root_s = install_root.display().to_string();
    let installed = run.cargo(
        "runner: cargo install --path runner",
        Expect::NoTests,
        &[
            "install",
            "--locked",
            "--path",
            "runner",
            "--root",
            &install_root_s,
            "--target-dir",
            "target/runner-install-build",
        ],
        &[],
    );
    if !installed {
        return;
    }
    let path = format!(
        "{}:{}",
        install_root.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let qemu_dir = install::qemu_dir().join("usr/bin");
    let qemu_dir_s = qemu_dir.display().to_string();
    let mut env = vec![
        ("PATH", path.as_str()),
        ("CARGO_TARGET_DIR", "../../target/runner-fixture"),
    ];
    if qemu_dir.join("qemu-system-arm").exists() {
        env.push((qemu_embedded_runner::QEMU_DIR_VAR, qemu_dir_s.as_str()));
    }
    run.in_dir("runner/fixture");
    run.cargo(
        "runner: another crate's embedded-test suite through the installed runner",
        Expect::Tests(RUNNER_FIXTURE_TESTS),
        &["test", "--locked"],
        &env,
    );
    run.cargo(
        "runner: another crate's plain firmware through the installed runner",
        Expect::NoTests,
        &["run", "--locked", "--bin", "hello"],
        &env,
    );
    run.in_dir("");
    // Kernels built elsewhere, given to the installed runner as a user would: the 4-core
    // aarch64 one with only --target and --smp, the dual-core M33 one with --machine
    // (the ELFs of the firmware examples above).
    let runner_bin = install_root.join("bin/qemu-embedded-runner");
    let runner_bin = runner_bin.display().to_string();
    let foreign: [(&str, &str, &[&str]); 2] = [
        (
            "aarch64-unknown-none",
            "rcuref-example-aarch64-kernel",
            &["--smp", "4"],
        ),
        (
            "thumbv8m.main-none-eabihf",
            "rcuref-example-m33-dual-core",
            &["--machine", "mps2-an521"],
        ),
    ];
    for (t, pkg, extra) in foreign.iter().filter(|(t, _, _)| targets.contains(t)) {
        let elf = root.join("target").join(t).join("release").join(pkg);
        let elf = elf.display().to_string();
        let mut args = vec!["--target", t];
        args.extend_from_slice(extra);
        args.push(&elf);
        run.command(
            &format!(
                "runner: a foreign {pkg} through the installed runner ({})",
                extra.join(" ")
            ),
            Expect::NoTests, // a kernel: its exit status is its verdict
            &runner_bin,
            &args,
            &env,
            false,
            true,
        );
    }
}

/// runner/fixture's suite: `adds` and `panics_as_expected` (its third is `#[ignore]`).
const RUNNER_FIXTURE_TESTS: u64 = 2;
