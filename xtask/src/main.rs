//! `cargo xtask <command>`: the project's scripts, as code.
//!
//! * `test`  — every test there is (host, loom, negative controls, Miri, QEMU targets),
//!   installing what is missing first; ends with a one-screen summary.
//! * `demo`  — the main demo.
//! * `qemu-run` — cargo's runner for the embedded targets (see `qemu.rs`).
//! * `size`  — code size of the hot paths per embedded target.

mod install;
mod steps;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <test [--quick] | demo>
  test     run every test (host unit/integration/doc, loom models, negative controls,
           Miri), installing missing toolchain components first
           --quick   skip Miri (the slowest step)
  demo     run the main demo";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        Some("demo") => demo(),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(format!("unknown or missing command\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn test(args: &[String]) -> Result<(), String> {
    let mut quick = false;
    for a in args {
        match a.as_str() {
            "--quick" => quick = true,
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    install::host_tools(!quick)?;
    let mut run = steps::Run::new("test");
    run.cargo(
        "host: unit, integration and doc tests",
        &["test", "--workspace"],
        &[],
    );
    run.cargo(
        "host: loom models",
        &[
            "test",
            "--release",
            "--test",
            "loom_file_ref",
            "--",
            "--test-threads=1",
        ],
        &[
            ("RUSTFLAGS", "--cfg loom"),
            ("CARGO_TARGET_DIR", "target/loom"),
        ],
    );
    run.cargo(
        "host: negative controls (broken variants must be caught)",
        &[
            "test",
            "--release",
            "--test",
            "torture_file_ref",
            "--",
            "negative_controls",
            "--test-threads=1",
        ],
        &[
            ("RUSTFLAGS", "--cfg rcuref_mutants"),
            ("CARGO_TARGET_DIR", "target/mutants"),
        ],
    );
    if !quick {
        run.cargo(
            "host: Miri",
            &[
                "+nightly",
                "miri",
                "test",
                "--test",
                "file_ref",
                "--test",
                "torture_file_ref",
                "--test",
                "warnings",
            ],
            &[("MIRIFLAGS", "-Zmiri-strict-provenance")],
        );
    }
    run.finish()
}

fn demo() -> Result<(), String> {
    let mut run = steps::Run::new("demo");
    run.cargo_shown(
        "host: FileRef under contention",
        &["run", "--release", "--example", "contention"],
        &[],
    );
    run.finish()
}
