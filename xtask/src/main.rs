//! `cargo xtask <command>`: the project's scripts, as code.
//!
//! * `test`  — every test there is (host, loom, negative controls, Miri, QEMU targets),
//!   installing what is missing first; ends with a one-screen summary.
//! * `demo`  — the main demo.
//! * `qemu-run` — cargo's runner for the embedded targets (see `qemu.rs`).
//! * `size`  — code size of the hot paths per embedded target.
//! * `mutants` — mutation testing of the library (see `mutants.rs`).

mod bench;
mod ffi;
mod icount;
mod install;
mod litmus;
mod mutants;
mod qemu;
mod size;
mod steps;

use steps::Expect;

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

/// The firmware examples users can copy (`examples/firmware/`): package and target.
/// Each prints a summary and exits non-zero on a violation.
pub const FIRMWARE_EXAMPLES: &[(&str, &str)] = &[
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
fn example_env(pkg: &str, target: &str) -> Vec<(String, String)> {
    match pkg {
        "rcuref-example-m33-dual-core" => vec![(
            runner_var(target),
            format!("cargo xtask qemu-run --target {target} --machine mps2-an521"),
        )],
        _ => Vec::new(),
    }
}

/// `(name, value)` pairs as cargo steps take them.
fn env_refs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

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
fn runner_var(target: &str) -> String {
    format!(
        "CARGO_TARGET_{}_RUNNER",
        target.to_uppercase().replace(['-', '.'], "_")
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        Some("demo") => demo(),
        Some("qemu-run") => qemu::run(&args[1..]),
        Some("size") => size::run(&args[1..]),
        Some("bench") => bench::bench(&args[1..]),
        Some("mutants") => mutants::run(&args[1..]),
        Some("litmus") => litmus::run(&args[1..]),
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

fn test(args: &[String]) -> Result<(), String> {
    let (mut quick, mut host_only, mut dry) = (false, false, false);
    let mut only: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--host-only" => host_only = true,
            "--dry-run" => dry = true,
            "--target" => only.push(it.next().ok_or("--target needs a value")?.clone()),
            other => return Err(format!("unknown option {other}\n{USAGE}")),
        }
    }
    for t in &only {
        if !TARGETS.contains(&t.as_str()) {
            return Err(format!("unknown target {t}; known: {}", TARGETS.join(", ")));
        }
    }
    let targets: Vec<&str> = TARGETS
        .iter()
        .copied()
        .filter(|t| only.is_empty() || only.iter().any(|o| o == t))
        .collect();
    let msrv = install::msrv()?;
    if !dry {
        install::host_tools(!quick)?;
        if !host_only {
            install::targets(&targets)?;
            install::qemu()?;
        }
        install::msrv_toolchain(&msrv, "thumbv7em-none-eabihf")?;
    }
    let mut run = if dry {
        steps::Run::dry_run("test")
    } else {
        steps::Run::new("test")
    };
    run.cargo(
        "host: unit, integration and doc tests",
        Expect::Tests(HOST_TESTS),
        &["test"],
        &[],
    );
    run.cargo(
        "lint: rustfmt --check",
        Expect::NoTests,
        &["fmt", "--all", "--check"],
        &[],
    );
    run.cargo(
        "lint: clippy, warnings denied (library, tests, xtask, runner, benches)",
        Expect::NoTests,
        &[
            "clippy",
            "-p",
            "rcuref",
            "-p",
            "xtask",
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
    publishing_checks(&mut run, &msrv, !quick);
    // Still serial by this flag, not by construction: the models select broken
    // variants for the whole process (tests/common/loom.rs's must_catch) beside models
    // of the real code, and do not hold an `Exclusive` (tests/common/exclusive.rs) yet.
    run.cargo(
        "host: loom models",
        Expect::Tests(LOOM_TESTS),
        &[
            "test",
            "--release",
            "--test",
            "loom_file_ref",
            "--test",
            "loom_rcu",
            "--test",
            "loom_pool",
            "--test",
            "loom_interrupts",
            "--test",
            "loom_call",
            "--",
            "--test-threads=1",
        ],
        &[
            ("RUSTFLAGS", "--cfg loom"),
            ("CARGO_TARGET_DIR", "target/loom"),
        ],
    );
    run.cargo(
        "host: release-only tests and the feature-gated aids (2^32 forgotten clones; pool \
         statistics; strict grace periods; callbacks queued twice)",
        Expect::Tests(RELEASE_POOL_TESTS),
        &[
            "test",
            "--release",
            "--features",
            "pool-stats,debug-callbacks,strict-grace-periods",
            "--test",
            "pool",
            "--test",
            "polled",
            "--test",
            "call_queue",
            "--test",
            "sleeping_review",
        ],
        &[],
    );
    run.cargo(
        "host: negative controls (broken variants must be caught)",
        Expect::Tests(HOST_NEGATIVE_CONTROLS),
        // On cargo's parallel test threads: each harness of these binaries holds the
        // binary's one `Exclusive` (tests/common/exclusive.rs) while it runs.
        &[
            "test",
            "--release",
            "--test",
            "torture_file_ref",
            "--test",
            "torture_rcu",
            "--test",
            "torture_pool",
            "--",
            "negative_controls",
        ],
        &[
            ("RUSTFLAGS", "--cfg rcuref_mutants"),
            ("CARGO_TARGET_DIR", "target/mutants"),
        ],
    );
    run.cargo(
        "host: preemption, interrupt and panic injection (threads stopped anywhere and at \
         exact points; a handler at every gap of the read side; every callback panicking)",
        Expect::Tests(INJECTION_TESTS),
        // Still serial by this flag, not by construction: these select broken variants,
        // install pause hooks, interrupt points and warning hooks and freeze threads
        // with one signal, all for the whole process, without an `Exclusive` yet.
        &[
            "test",
            "--release",
            "--test",
            "preemption",
            "--test",
            "interrupts",
            "--test",
            "panic_injection",
            "--test",
            "call_queue",
            "--test",
            "polled",
            "--test",
            "sleeping_review",
            "--",
            "--test-threads=1",
        ],
        &[
            ("RUSTFLAGS", "--cfg rcuref_mutants"),
            ("CARGO_TARGET_DIR", "target/mutants"),
        ],
    );
    #[cfg(target_os = "linux")]
    run.cargo(
        "host: asymmetric-fence mode (membarrier), its store-buffering torture, the heavy \
         fence's placement with two drivers, a panicking heavy fence, and the controls",
        Expect::Tests(ASYMMETRIC_TESTS),
        // Still serial by this flag, as the injection step (the same process-wide
        // variants and hooks), and the heavy-fence counts are the process's.
        &[
            "test",
            "--release",
            "--features",
            "membarrier",
            "--test",
            "asymmetric",
            "--test",
            "heavy_fence_placement",
            "--test",
            "panic_injection",
            "--",
            "--test-threads=1",
        ],
        &[
            (
                "RUSTFLAGS",
                "--cfg rcuref_asymmetric_fence --cfg rcuref_mutants",
            ),
            ("CARGO_TARGET_DIR", "target/asym"),
        ],
    );
    run.cargo(
        "litmus: herd7 on C11 and on each fast path as compiled for AArch64 (with and \
         without LSE/RCpc), RISC-V 32/64 and Armv7-M: tests Never, weakened twins Sometimes, \
         the tests tied to the object code",
        Expect::Tests(litmus_files()),
        &["xtask", "litmus"],
        &[],
    );
    run.cargo(
        "ffi: the C API: header current, static library for the host and every target, \
         the C suite (api, torture plain / TSan / its broken control, an interrupt's close \
         of a locking context and its broken control, the C page's example under ASan, \
         debug-objects and its control), a C firmware in QEMU and its broken control, the \
         FreeRTOS example on mps2-an385/an386 and its broken control",
        Expect::Tests(if host_only {
            FFI_CHECKS_HOST
        } else {
            FFI_CHECKS_HOST + FFI_CHECKS_QEMU
        }),
        if host_only {
            &["xtask", "ffi", "--host-only"][..]
        } else {
            &["xtask", "ffi"][..]
        },
        &[],
    );
    run.cargo(
        "litmus: the code-tie check fails on a broken variant compiled for AArch64 and RISC-V",
        Expect::Tests(2),
        &["xtask", "litmus", "--control"],
        &[],
    );
    if !quick {
        run.cargo(
            "host: Miri",
            Expect::Tests(MIRI_TESTS),
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
                "--test",
                "rcu",
                "--test",
                "torture_rcu",
                "--test",
                "pool",
                "--test",
                "torture_pool",
            ],
            &[("MIRIFLAGS", "-Zmiri-strict-provenance")],
        );
        // Miri's weak-memory emulation picks schedules and store-buffer outcomes from
        // its seed: several seeds over the concurrent tortures.
        run.cargo(
            "host: Miri, 4 seeds of schedules and weak-memory outcomes over the tortures",
            Expect::Tests(MIRI_TORTURES),
            &[
                "+nightly",
                "miri",
                "test",
                "--test",
                "torture_file_ref",
                "--test",
                "torture_rcu",
                "--test",
                "torture_pool",
            ],
            &[(
                "MIRIFLAGS",
                "-Zmiri-strict-provenance -Zmiri-many-seeds=0..4",
            )],
        );
        // A 32-bit host: FileRef's native width and the pool's counts are 32-bit there.
        run.cargo(
            "host: Miri on i686 (32-bit counts: FileRef, its torture, the pool)",
            Expect::Tests(MIRI_I686_TESTS),
            &[
                "+nightly",
                "miri",
                "test",
                "--target",
                "i686-unknown-linux-gnu",
                "--test",
                "file_ref",
                "--test",
                "torture_file_ref",
                "--test",
                "pool",
            ],
            &[("MIRIFLAGS", "-Zmiri-strict-provenance")],
        );
    }
    if !host_only {
        for t in &targets {
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
        // The torture's negative control on the targets: the library built with its
        // broken variants; the tests select them (grace periods that end at once,
        // nesting ignored, the pool's broken lookups) and must catch each. On a
        // single-core and on each multi-core Arm part, and on RISC-V.
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
            let mut env = vec![
                (var.as_str(), flags.trim()),
                ("CARGO_TARGET_DIR", "target/fw-mutants"),
            ];
            if let Some(r) = fw.runner {
                env.push((rvar.as_str(), r));
            }
            run.cargo(
                &format!("{t} (negative controls: broken RCU and pool must be caught)"),
                Expect::Tests(firmware_negative_controls(t)),
                &a,
                &env,
            );
        }
        // The debug aids on a target (features strict-grace-periods and debug-callbacks of
        // the firmware crate, forwarding rcuref's): their two bodies of the rcu suite.
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
        // The asymmetric-fence mode on several cores, its heavy fence an IPI (the CLINT
        // on RISC-V, a GIC SGI on AArch64; targets/firmware/src/hart.rs, a64.rs): the
        // RCU suite, the all-core torture and its busted-grace-period control, and the
        // check that every wait fences every other core, with its skipped-heavy-fence
        // control. (What a skipped fence does to readers is shown by the host's
        // store-buffering torture only: docs/testing.md.) On AArch64 without the timer
        // tortures: there every wait interrupts three other vCPUs, which on a two-core
        // host takes minutes for them; the nesting they test is the same code in both
        // modes and runs in the steps above.
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
                Expect::Tests(FIRMWARE_ASYMMETRIC_TESTS),
                &a,
                &[
                    (var.as_str(), flags.trim()),
                    ("CARGO_TARGET_DIR", "target/fw-asym"),
                ],
            );
        }
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
        if targets.contains(&"thumbv7m-none-eabi") {
            runner_for_other_crates(&mut run, &targets);
        }
        if targets.contains(&"thumbv6m-none-eabi") {
            run.expect_failure_with(
                "thumbv6m-none-eabi: no compare-and-swap chosen is one clear build error",
                &["build", "-p", "rcuref", "--target", "thumbv6m-none-eabi"],
                "rcuref: this target has no compare-and-swap",
                None,
            );
        }
        run.per_target(&targets);
    }
    run.finish()
}

/// What a release needs: the packaged files, `cargo publish --dry-run`, the docs with
/// docs.rs's settings (nightly, `--cfg docsrs`, broken links are errors; with `nightly`)
/// and on two embedded targets, and the MSRV on the host and one embedded target.
fn publishing_checks(run: &mut steps::Run, msrv: &str, nightly: bool) {
    for pkg in ["rcuref", "qemu-embedded-runner"] {
        run.command(
            &format!("package: {pkg}'s files are only what a user needs"),
            Expect::NoTests,
            "sh",
            &[
                "-c",
                &format!(
                    "out=$(cargo package --list --allow-dirty -p {pkg}) || exit 1; echo \"$out\"; \
                     echo \"$out\" | grep -vE '^(src/.*\\.rs|build\\.rs|README\\.md|CHANGELOG\\.md|LICENSE-(MIT|APACHE)|Cargo\\.(toml|toml\\.orig|lock)|\\.cargo_vcs_info\\.json)$' \
                     && {{ echo 'unexpected files in the package (above)'; exit 1; }}; exit 0"
                ),
            ],
            &[],
            false,
            true,
        );
        run.cargo(
            &format!("package: cargo publish --dry-run -p {pkg}"),
            Expect::NoTests,
            &[
                "publish",
                "--dry-run",
                "--allow-dirty",
                "-p",
                pkg,
                "--target-dir",
                "target/package",
            ],
            &[],
        );
    }
    let features = "critical-section,defmt,std,pool-stats,membarrier";
    if nightly {
        run.cargo(
            "docs: docs.rs settings (nightly, --cfg docsrs, all features; broken links fail)",
            Expect::NoTests,
            &[
                "+nightly",
                "doc",
                "--no-deps",
                "-p",
                "rcuref",
                "--features",
                features,
            ],
            &[
                ("RUSTDOCFLAGS", "--cfg docsrs -D warnings"),
                ("CARGO_TARGET_DIR", "target/docsrs"),
            ],
        );
    }
    for (t, f) in [
        ("thumbv7em-none-eabihf", "critical-section,defmt,pool-stats"),
        (
            "riscv32imac-unknown-none-elf",
            "critical-section,defmt,pool-stats,riscv-harts",
        ),
    ] {
        run.cargo(
            &format!("docs: {t} (broken links fail)"),
            Expect::NoTests,
            &[
                "doc",
                "--no-deps",
                "-p",
                "rcuref",
                "--target",
                t,
                "--features",
                f,
            ],
            &[("RUSTDOCFLAGS", "-D warnings")],
        );
    }
    let tc = format!("+{msrv}");
    run.cargo(
        &format!("MSRV {msrv}: the library on the host"),
        Expect::NoTests,
        &[&tc, "check", "-p", "rcuref", "--features", features],
        &[("CARGO_TARGET_DIR", "target/msrv")],
    );
    run.cargo(
        &format!("MSRV {msrv}: the library on thumbv7em"),
        Expect::NoTests,
        &[
            &tc,
            "check",
            "-p",
            "rcuref",
            "--target",
            "thumbv7em-none-eabihf",
            "--features",
            "critical-section,defmt",
        ],
        &[("CARGO_TARGET_DIR", "target/msrv")],
    );
}

/// The QEMU runner as a product: installed with `cargo install --path runner` (as a user
/// would), then used by a crate that is not this one (`runner/fixture`, its own
/// workspace) as its cargo runner, for an embedded-test suite and a plain firmware.
fn runner_for_other_crates(run: &mut steps::Run, targets: &[&str]) {
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

// ---- how many tests each step must pass at least ------------------------------------
//
// A step below its minimum is red (`steps::Expect`): a filter that matches nothing on
// one target, or a cfg that never reached the build, prints "0 passed" and exits 0.
// Each minimum is what the step runs today, counted from the `#[test]`s its binaries
// compile in that configuration (and, where built here, their `--list`). Raise it when
// tests are added; lower it only with the commit that removes tests.

/// `cargo test` over the default members (the library's unit tests, every integration
/// test of a plain build, the doctests; xtask, the runner, the probe): 157 listed by
/// `cargo test -- --list`, less the 2^32 pool test, ignored in debug builds.
const HOST_TESTS: u64 = 156;
/// loom_file_ref 14, loom_rcu 34, loom_pool 11, loom_interrupts 4, loom_call 9.
const LOOM_TESTS: u64 = 72;
/// tests/pool.rs in release: all 8 (the 2^32 one is ignored in debug builds only);
/// polled 8 (its 6 plain tests, the strict-mode and the queued-twice tests); call_queue's
/// 9 plain tests, under strict grace periods; sleeping_review 5 (its release and
/// debug-callbacks tests).
const RELEASE_POOL_TESTS: u64 = 30;
/// `negative_controls` of torture_file_ref 3, torture_rcu 1, torture_pool 4 (the real
/// pool under injected delays, two broken variants, and a control that panics).
const HOST_NEGATIVE_CONTROLS: u64 = 8;
/// preemption 14, interrupts 4, panic_injection 16 (its two heavy-fence panics are the
/// asymmetric build's), call_queue 13 (its 9 plain tests and 4 with broken variants),
/// polled 8 (6 plain, the old cookie on a 4-bit counter, the token's control),
/// sleeping_review 6 (3 plain, a wake between the last poll and the sleep, its control,
/// the every-unlock-wakes control).
const INJECTION_TESTS: u64 = 61;
/// asymmetric 10, heavy_fence_placement 20, panic_injection 18.
const ASYMMETRIC_TESTS: u64 = 48;
/// `cargo xtask ffi --host-only`'s checks: header, the C page's copy, the host library,
/// (3), a static library per embedded target (7), api.c,
/// ceiling.c, sleep.c and its control (2), the two C tortures and their two controls,
/// ctx_close_signal.c and its control (2), two under TSan, the example under ASan (11),
/// debug_objects.c on the debug-objects archive and its control on the plain one (2),
/// the header as C++ alone and on either side of the standard headers (3).
const FFI_CHECKS_HOST: u64 = 28;
/// With QEMU: the C firmware and its broken control on each of its two targets (4), the
/// FreeRTOS example, its broken control and its no-wake control on mps2-an385 and
/// mps2-an386 (6), and the C page's example built with each of the six embedded C
/// compilers' flags (6).
const FFI_CHECKS_QEMU: u64 = 16;
/// Miri over file_ref 11, torture_file_ref 4, warnings 2, rcu 40, torture_rcu 1, pool 7,
/// torture_pool 1 (a debug build without mutants; the 2^32 pool test is ignored there).
const MIRI_TESTS: u64 = 66;
/// torture_file_ref 4, torture_rcu 1, torture_pool 1 (no mutants: no controls).
const MIRI_TORTURES: u64 = 6;
/// file_ref 11, torture_file_ref 4 and pool 7 (the 2^32 test ignored) on i686.
const MIRI_I686_TESTS: u64 = 22;
/// runner/fixture's suite: `adds` and `panics_as_expected` (its third is `#[ignore]`).
const RUNNER_FIXTURE_TESTS: u64 = 2;

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
/// tick, +1 with cores, +1 with both; pool: 3, +2 with a tick, +1 with cores.
fn firmware_tests(target: &str, dual_core: bool, release: bool) -> u64 {
    let (tick, cores) = firmware_cfg(target, dual_core);
    let n = |c: bool, k: u64| if c { k } else { 0 };
    let file_ref = 8;
    let races = n(tick, 1) + n(cores, 3) + n(cores && release, 1);
    let rcu = 20 + n(tick, 3) + n(cores, 1) + n(tick && cores, 1);
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
/// all-core torture, the busted-RCU control, the heavy fence's check and its control
/// (AArch64 skips its timer's tests, `irq_*` and the nesting controls; RISC-V has no
/// tick, so none of them is built there).
const FIRMWARE_ASYMMETRIC_TESTS: u64 = 20 + 1 + 1 + 2;

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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_litmus_suite_is_counted() {
        assert!(litmus_files() > 100, "litmus/tests/*/*.litmus not found");
    }
}
