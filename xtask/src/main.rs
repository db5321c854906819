//! `cargo xtask <command>`: the project's scripts, as code. This file only dispatches;
//! `USAGE` below lists every command and its options.
//!
//! * `test` — every test there is, as per-area step lists (`suite/`), installing what is
//!   missing first; ends with a one-screen summary (`--dry-run` lists the steps).
//! * `demo`, `bench` (`bench.rs`, `icount.rs`), `size`, `mutants` (`mutants.rs`).
//! * `litmus` — the weak-memory suite, the `rcuref-litmus` crate (`tools/litmus/`).
//! * `header`, `ffi` — the C API's header and checks (`ffi.rs`).
//! * `qemu-run` — cargo's runner for the embedded targets (`qemu.rs`).

mod bench;
mod ffi;
mod icount;
mod install;
mod mutants;
mod qemu;
mod size;
mod steps;
mod suite;

use steps::Expect;
use suite::{env_refs, example_env, runner_var, FIRMWARE_EXAMPLES};

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <command>
  test [--quick] [--host-only] [--target T]... [--dry-run]
           run every test: host (unit, integration, doc, loom models, negative controls,
           interrupt and panic injection, the herd7 litmus suite, Miri) and the on-target
           suites in QEMU on seven targets, debug and release, installing what is missing
           first (rustup targets and components, nightly + Miri, QEMU, herdtools7)
           --quick      skip Miri and the release builds of the targets
           --host-only  skip QEMU
           --target T   only this embedded target (repeatable)
           --dry-run    list the steps (minimum tests, environment, command) and
                        install or run nothing
  demo     run the main demo
  bench [--quick] [--icount | --c-read | --urcu]
           run the benchmarks, write docs/bench/REPORT.md and SVG charts
           (RCUREF_BENCH_THREADS=1,2,4,8,16 sets the contended thread counts);
           --icount: only the instruction counts per embedded target (QEMU, a
           counting plugin), replacing that section of the report
           --c-read: only the read section from C (rcuref's C API, the Rust
           Reader, liburcu memb), replacing that section of the report
           --urcu: only the test_urcu-shaped rows (readers that outnumber the
           cores, one writer: rcuref sleeping and yielding, liburcu memb)
  mutants [--asym] [CARGO-MUTANTS FILTERS]
           mutation testing of src/ with cargo-mutants (installed if missing): host
           tests, then loom on the survivors; every survivor must be listed with a
           reason in mutants-equivalent.md (about two hours on 2 cores; filters such as
           `-f src/pool/free_map.rs` narrow it, and leave out the asymmetric-fence
           pass unless --asym is given)
  litmus [--bless] [--control]
           the weak-memory suite (litmus/README.md): reads each fast path's
           instructions out of the object code of every instruction set, checks them
           against the committed litmus tests, runs herd7 on every test (Never) and
           weakened twin (Sometimes); --bless rewrites litmus/tests and litmus/code;
           --control compiles a broken variant and requires the check to fail
  header   regenerate ffi/include/rcuref.h (the C API's header) with cbindgen
  ffi [--host-only]
           the C API: header current, static library for the host and every target,
           the C suite with gcc (plain, ThreadSanitizer, AddressSanitizer), a C
           firmware with arm-none-eabi-gcc in QEMU (not with --host-only)
  size [--save]
           code size of the hot paths per embedded target (release), compared with
           docs/size-baseline.tsv (--save rewrites it)
  qemu-run --target T ELF [FILTER] [--exact] [--list]
           cargo's runner for the embedded targets (see .cargo/config.toml)";

/// The embedded targets, in the order they are tested.
pub const TARGETS: &[&str] = &[
    "thumbv6m-none-eabi",
    "thumbv7m-none-eabi",
    "thumbv7em-none-eabihf",
    "thumbv8m.main-none-eabihf",
    "riscv32imac-unknown-none-elf",
    "riscv64gc-unknown-none-elf",
    "aarch64-unknown-none",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => suite::test(&args[1..]),
        Some("demo") => demo(),
        Some("qemu-run") => qemu::run(&args[1..]),
        Some("size") => size::run(&args[1..]),
        Some("bench") => bench::bench(&args[1..]),
        Some("mutants") => mutants::run(&args[1..]),
        Some("litmus") => rcuref_litmus::run(
            &args[1..],
            rcuref_litmus::Tools {
                install_herd: install::herd,
                herd7: install::herd7,
                install_targets: install::targets,
                llvm_objdump: install::llvm_objdump,
            },
        ),
        Some("header") => ffi::header(),
        Some("ffi") => ffi::check(TARGETS, args.iter().any(|a| a == "--host-only")),
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

fn demo() -> Result<(), String> {
    // (target, features, runner, what runs where)
    let fw: [(&str, Option<&str>, Option<&str>, &str); 4] = [
        (
            "thumbv7em-none-eabihf",
            None,
            None,
            "reader in the SysTick handler",
        ),
        ("riscv64gc-unknown-none-elf", None, None, "two harts"),
        ("aarch64-unknown-none", None, None, "four Cortex-A53 cores"),
        (
            "thumbv8m.main-none-eabihf",
            Some("dual-core"),
            Some("cargo xtask qemu-run --target thumbv8m.main-none-eabihf --machine mps2-an521"),
            "both Cortex-M33 cores of mps2-an521",
        ),
    ];
    let fw_targets: Vec<&str> = fw.iter().map(|f| f.0).collect();
    install::targets(&fw_targets)?;
    install::qemu()?;
    let mut run = steps::Run::new("demo");
    run.cargo_shown(
        "host: fd table (fget/fput on a typesafe-by-RCU pool, threads)",
        Expect::NoTests,
        &[
            "run",
            "--release",
            "--features",
            "pool-stats",
            "--example",
            "fd_table",
        ],
        &[],
    );
    for (t, features, runner, what) in fw {
        let mut args = vec![
            "run",
            "-q",
            "-p",
            "rcuref-firmware",
            "--bin",
            "fd_demo",
            "--release",
            "--target",
            t,
        ];
        if let Some(f) = features {
            args.extend(["--features", f]);
        }
        let rvar = runner_var(t);
        let env: Vec<(&str, &str)> = runner.map(|r| (rvar.as_str(), r)).into_iter().collect();
        run.cargo_shown(
            &format!("{t}: fd table firmware in QEMU ({what})"),
            Expect::NoTests,
            &args,
            &env,
        );
    }
    for (pkg, t) in FIRMWARE_EXAMPLES {
        install::targets(&[t])?;
        let env = example_env(pkg, t);
        run.cargo_shown(
            &format!("{t}: firmware example {pkg}"),
            Expect::NoTests,
            &["run", "-q", "-p", pkg, "--release", "--target", t],
            &env_refs(&env),
        );
    }
    run.cargo_shown(
        "host: path lookups without locks vs RwLock (kernfs/proc pattern)",
        Expect::NoTests,
        &["run", "--release", "--example", "lookup"],
        &[],
    );
    run.cargo_shown(
        "host: FileRef under contention",
        Expect::NoTests,
        &["run", "--release", "--example", "contention"],
        &[],
    );
    run.finish()
}
