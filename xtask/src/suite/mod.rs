//! `cargo xtask test`: every test there is, as named steps (`steps::Run`), one function
//! per area. `test` is the list: which areas run, in which order, under which options.
//!
//! How many tests each step must pass at least sits beside the step, as a constant or a
//! function: a step below its minimum is red (`steps::Expect`): a filter that matches
//! nothing on one target, or a cfg that never reached the build, prints "0 passed" and
//! exits 0. Each minimum is what the step runs today, counted from the `#[test]`s its
//! binaries compile in that configuration (and, where built here, their `--list`). Raise
//! it when tests are added; lower it only with the commit that removes tests.

mod ffi;
mod firmware;
mod host;
mod lint;
mod litmus;
mod miri;
mod publishing;
mod runner;

pub(crate) use firmware::{env_refs, example_env, runner_var, FIRMWARE_EXAMPLES};

use crate::{install, steps, TARGETS, USAGE};

/// `cargo xtask test`'s options.
struct Options {
    /// `--quick`: no Miri, no release builds of the targets.
    quick: bool,
    /// `--host-only`: no QEMU.
    host_only: bool,
    /// `--dry-run`: list the steps, install and run nothing.
    dry: bool,
    /// The embedded targets (`--target T`, repeatable; all when none is given).
    targets: Vec<&'static str>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
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
        let targets = TARGETS
            .iter()
            .copied()
            .filter(|t| only.is_empty() || only.iter().any(|o| o == t))
            .collect();
        Ok(Options {
            quick,
            host_only,
            dry,
            targets,
        })
    }
}

/// `cargo xtask test [--quick] [--host-only] [--target T]... [--dry-run]`.
pub fn test(args: &[String]) -> Result<(), String> {
    let Options {
        quick,
        host_only,
        dry,
        targets,
    } = Options::parse(args)?;
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
    host::tests(&mut run);
    host::static_full(&mut run);
    lint::all(&mut run);
    publishing::checks(&mut run, &msrv, !quick);
    host::loom(&mut run);
    host::release_only(&mut run);
    host::negative_controls(&mut run);
    host::injection(&mut run);
    #[cfg(target_os = "linux")]
    host::asymmetric(&mut run);
    host::auto_fence(&mut run);
    host::single_core(&mut run);
    litmus::suite(&mut run);
    ffi::suite(&mut run, host_only);
    litmus::control(&mut run);
    if !quick {
        miri::all(&mut run);
    }
    if !host_only {
        firmware::suites(&mut run, &targets, quick);
        firmware::negative_controls(&mut run, &targets);
        firmware::debug_aids(&mut run, &targets);
        firmware::asymmetric(&mut run, &targets);
        firmware::failing_test(&mut run, &targets);
        firmware::examples(&mut run, &targets);
        if targets.contains(&"thumbv7m-none-eabi") {
            runner::for_other_crates(&mut run, &targets);
        }
        firmware::no_compare_and_swap(&mut run, &targets);
        run.per_target(&targets);
    }
    run.finish()
}
