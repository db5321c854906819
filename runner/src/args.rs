//! The command line: the runner's options and libtest's, parsed into [`Options`].

#[cfg(doc)]
use crate::find_qemu;
use crate::machine::{emulator_for, memory_map, Machine, ALTERNATIVES, KNOWN};
use std::time::Duration;

/// What one run was asked to do (the command line, parsed).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// The machine to boot.
    pub machine: Machine,
    /// The firmware.
    pub elf: String,
    /// Test name filters (substrings, or exact names with `exact`).
    pub filters: Vec<String>,
    /// Tests to leave out (`--skip`: substrings, or exact names with `exact`).
    pub skip: Vec<String>,
    /// Filters match whole names.
    pub exact: bool,
    /// List the tests instead of running them.
    pub list: bool,
    /// Run only ignored tests.
    pub ignored_only: bool,
    /// Run ignored tests too.
    pub include_ignored: bool,
    /// libtest's terse format (`--format terse`, `-q`): a listing without its summary
    /// line (runs are printed in the pretty format).
    pub terse: bool,
    /// Timeout of a test that does not set its own (embedded-test's `timeout`).
    pub test_timeout: Duration,
    /// Timeout of a plain program.
    pub program_timeout: Duration,
    /// How many times a test that timed out is run again (`--retry-timeouts`; 0: never).
    /// Only a timeout is retried, never a failure, and each retry is reported.
    pub retry_timeouts: u32,
    /// An explicit QEMU binary (else [`find_qemu`]).
    pub qemu_path: Option<String>,
    /// A plain program's expected output: a file its decoded stdout must equal.
    pub expect: Option<String>,
}

/// The usage text of the binary.
pub const USAGE: &str = "usage: qemu-embedded-runner [OPTIONS] ELF [FILTER...] [LIBTEST OPTIONS]
       qemu-embedded-runner install-qemu [--dir DIR]
       qemu-embedded-runner --machines | --memory-map (--target T | --machine M)

Runs an embedded-test suite (one fresh QEMU per test) or a plain firmware in QEMU, decodes
its defmt log, prints libtest-style results. Use it as cargo's runner:
  [target.thumbv7em-none-eabihf]
  runner = \"qemu-embedded-runner --target thumbv7em-none-eabihf\"

options (`--opt value` or `--opt=value`):
  --target T        the target triple; selects a known QEMU machine (see --machines)
                    and the emulator (qemu-system-arm, -aarch64, -riscv32, -riscv64)
  --machine M       QEMU -machine (overrides the target's; needed for unknown targets)
  --cpu C           QEMU -cpu
  --smp N           cores/harts
  --qemu-arg ARG    one more QEMU argument (repeatable)
  --qemu PATH       the qemu-system binary to use
  --timeout SECS    timeout of tests without their own (default 60)
  --program-timeout SECS
                    timeout of a plain firmware (default 300)
  --retry-timeouts N
                    run a test that timed out again, up to N times (default 0); a
                    failure is never retried, and every retry is reported
  --expect FILE     a plain firmware's output must equal FILE (a diff is shown if not)
  --machines        list the known targets and machines
  --memory-map      print the memory map (memory.x) to link against for the machine
  -h, --help        this text

libtest's options, as libtest reads them:
  FILTER...         run the tests whose names contain a FILTER
  --exact           FILTERs (and --skip) match whole names
  --skip F          leave out the tests whose names contain F (repeatable)
  --list            list the tests (`name: test`, then `N tests, 0 benchmarks`)
  --ignored         run (or list) only the ignored tests
  --include-ignored
                    run the ignored tests too
  --format pretty|terse, -q, --quiet
                    terse: a listing without its summary line (runs print pretty);
                    json and junit are refused
  --nocapture, --show-output, --report-time, --ensure-time, --shuffle,
  --test-threads N, --color C, -Z OPT (or -ZOPT)
                    accepted and without effect: output is always shown, tests run
                    one at a time in name order, without colours

The program's output goes to stdout, QEMU's own messages to stderr (as `qemu: ...`).
QEMU is taken from --qemu, else from the folder in $QEMU_SYSTEM_DIR, else from PATH,
else from where `install-qemu` last put it (remembered; default folder
~/.local/share/qemu-embedded-runner/qemu).";

/// The options that take a value.
const WITH_VALUE: &[&str] = &[
    "--target",
    "--machine",
    "--cpu",
    "--smp",
    "--qemu-arg",
    "--qemu",
    "--timeout",
    "--program-timeout",
    "--retry-timeouts",
    "--expect",
    "--skip",
    "--test-threads",
    "--format",
    "--color",
    "-Z",
];

/// Splits `--opt=value` into `--opt value` (for the options that take one; a lone `=`
/// form of a flag is left as it is, to be reported).
fn split_equals(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut after_double_dash = false;
    for a in args {
        if !after_double_dash {
            if a == "--" {
                after_double_dash = true;
                continue;
            }
            if let Some((opt, value)) = a.split_once('=') {
                if WITH_VALUE.contains(&opt) {
                    out.push(opt.to_string());
                    out.push(value.to_string());
                    continue;
                }
            }
        }
        out.push(a.clone());
    }
    out
}

/// Parses the command line (`args` without the program name). `Ok(None)` when there is
/// nothing to run (`--machines`, `--memory-map`, `--help`: already printed).
///
/// # Errors
/// A message for the user: an unknown option or option value, a missing ELF or machine.
pub fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let args = split_equals(args);
    let mut target = None;
    let (mut machine, mut cpu, mut smp, mut qemu_path) = (None, None, None, None);
    let mut extra = Vec::new();
    let mut elf = None;
    let (mut filters, mut skip) = (Vec::new(), Vec::new());
    let (mut exact, mut list, mut ignored_only, mut include_ignored) = (false, false, false, false);
    let (mut print_map, mut expect, mut terse) = (false, None, false);
    let mut test_timeout = Duration::from_secs(60);
    let mut program_timeout = Duration::from_secs(300);
    let mut retry_timeouts = 0u32;
    let mut it = args.iter();
    let secs = |v: Option<&String>, what: &str| -> Result<Duration, String> {
        v.and_then(|s| s.parse().ok())
            .map(Duration::from_secs)
            .ok_or_else(|| format!("{what} needs a number of seconds"))
    };
    let value = |v: Option<&String>, what: &str| -> Result<String, String> {
        v.cloned().ok_or_else(|| format!("{what} needs a value"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--target" => target = Some(value(it.next(), "--target")?),
            "--machine" => machine = Some(value(it.next(), "--machine")?),
            "--cpu" => cpu = Some(value(it.next(), "--cpu")?),
            "--smp" => {
                smp = Some(
                    it.next()
                        .and_then(|s| s.parse().ok())
                        .filter(|&n: &u32| n > 0)
                        .ok_or("--smp needs a number of cores (1 or more)")?,
                )
            }
            "--qemu-arg" => extra.push(value(it.next(), "--qemu-arg")?),
            "--qemu" => qemu_path = Some(value(it.next(), "--qemu")?),
            "--timeout" => test_timeout = secs(it.next(), "--timeout")?,
            "--program-timeout" => program_timeout = secs(it.next(), "--program-timeout")?,
            "--retry-timeouts" => {
                retry_timeouts = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or("--retry-timeouts needs a number of retries")?
            }
            "--expect" => expect = Some(value(it.next(), "--expect")?),
            "--machines" => {
                for k in KNOWN {
                    outln!(
                        "{:<30} {} -machine {}{}{}",
                        k.target,
                        k.qemu,
                        k.machine,
                        k.cpu.map(|c| format!(" -cpu {c}")).unwrap_or_default(),
                        k.smp.map(|n| format!(" -smp {n}")).unwrap_or_default()
                    );
                }
                for (prefix, m) in ALTERNATIVES {
                    outln!("{:<30} also --machine {m}", format!("{prefix}*"));
                }
                return Ok(None);
            }
            "--memory-map" => print_map = true,
            "-h" | "--help" => {
                outln!("{USAGE}");
                return Ok(None);
            }
            "--exact" => exact = true,
            "--list" => list = true,
            "--ignored" => ignored_only = true,
            "--include-ignored" => include_ignored = true,
            "--skip" => skip.push(value(it.next(), "--skip")?),
            "--format" => match value(it.next(), "--format")?.as_str() {
                "pretty" => terse = false,
                "terse" => terse = true,
                f @ ("json" | "junit") => {
                    return Err(format!(
                        "--format {f} is not supported: the runner prints libtest's pretty \
                         format (and terse listings, with --format terse)"
                    ))
                }
                f => return Err(format!("--format {f}: use pretty or terse")),
            },
            "--quiet" | "-q" => terse = true,
            // libtest options cargo may pass that have no meaning here: output is always
            // shown, tests run one at a time, in order, without colours.
            "--nocapture" | "--show-output" | "--report-time" | "--shuffle" | "--ensure-time" => {}
            "--test-threads" | "--color" | "-Z" => {
                value(it.next(), a)?;
            }
            s if s.starts_with("-Z") => {}
            s if s.starts_with('-') => {
                return Err(format!("unknown option {s}\n{USAGE}"));
            }
            s if elf.is_none() => elf = Some(s.to_string()),
            s => filters.push(s.to_string()),
        }
    }
    let mut m = match (&target, &machine) {
        (Some(t), None) => Machine::for_target(t).ok_or_else(|| {
            format!(
                "no QEMU machine known for target {t}: give --machine (and --cpu), e.g. \
                 `--machine mps2-an505 --cpu cortex-m33`; `--machines` lists the known ones"
            )
        })?,
        (t, Some(name)) => {
            let base = t.as_deref().and_then(Machine::for_target);
            match base {
                // The target's own machine, named: keep its CPU and core count.
                Some(b) if b.machine == *name => b,
                _ => Machine {
                    qemu: t
                        .as_deref()
                        .map(emulator_for)
                        .ok_or("--machine needs --target too (to pick the emulator)")?
                        .into(),
                    machine: name.clone(),
                    cpu: None,
                    smp: None,
                    extra: Vec::new(),
                },
            }
        }
        (None, None) => return Err(format!("give --target (or --machine)\n{USAGE}")),
    };
    if cpu.is_some() {
        m.cpu = cpu;
    }
    if smp.is_some() {
        m.smp = smp;
    }
    m.extra = extra;
    if print_map {
        let map = memory_map(&m.qemu, &m.machine).ok_or_else(|| {
            format!(
                "no memory map known for {} -machine {} (known: the machines `--machines` lists)",
                m.qemu, m.machine
            )
        })?;
        outln!("{map}");
        return Ok(None);
    }
    if ignored_only && include_ignored {
        return Err("the options --include-ignored and --ignored are mutually exclusive".into());
    }
    let elf = elf.ok_or_else(|| format!("no ELF to run\n{USAGE}"))?;
    Ok(Some(Options {
        machine: m,
        elf,
        filters,
        skip,
        exact,
        list,
        ignored_only,
        include_ignored,
        terse,
        test_timeout,
        program_timeout,
        retry_timeouts,
        qemu_path,
        expect,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn parsed(s: &str) -> Options {
        parse(&args(s)).expect("parses").expect("something to run")
    }

    fn refused(s: &str) -> String {
        parse(&args(s)).expect_err("refused")
    }

    #[test]
    fn retry_timeouts_is_off_unless_asked_and_takes_a_count() {
        assert_eq!(
            parsed("--target aarch64-unknown-none a.elf").retry_timeouts,
            0
        );
        assert_eq!(
            parsed("--target aarch64-unknown-none --retry-timeouts 2 a.elf").retry_timeouts,
            2
        );
        assert_eq!(
            parsed("--target aarch64-unknown-none --retry-timeouts=1 a.elf").retry_timeouts,
            1
        );
        assert!(
            refused("--target aarch64-unknown-none --retry-timeouts x a.elf")
                .contains("--retry-timeouts")
        );
    }

    #[test]
    fn a_target_picks_its_machine() {
        let o = parsed("--target aarch64-unknown-none k.elf");
        assert_eq!(
            o.machine,
            Machine::for_target("aarch64-unknown-none").unwrap()
        );
        assert_eq!(o.elf, "k.elf");
        assert!(o.filters.is_empty() && !o.exact && !o.list && !o.terse);
        assert_eq!(o.test_timeout, Duration::from_secs(60));
        assert_eq!(o.program_timeout, Duration::from_secs(300));
    }

    #[test]
    fn options_with_equals_read_as_two_words() {
        let o = parsed("--target=thumbv7m-none-eabi --smp=2 --timeout=5 fw");
        assert_eq!(o.machine.machine, "lm3s6965evb");
        assert_eq!(o.machine.smp, Some(2));
        assert_eq!(o.test_timeout, Duration::from_secs(5));
    }

    #[test]
    fn another_machine_takes_the_targets_emulator_and_no_cpu() {
        let o = parsed("--target thumbv8m.main-none-eabihf --machine mps2-an521 fw");
        assert_eq!(o.machine.qemu, "qemu-system-arm");
        assert_eq!(o.machine.machine, "mps2-an521");
        assert_eq!((o.machine.cpu.as_deref(), o.machine.smp), (None, None));
        // The target's own machine, named, keeps its CPU and core count.
        let o = parsed("--target aarch64-unknown-none --machine virt fw");
        assert_eq!(
            o.machine,
            Machine::for_target("aarch64-unknown-none").unwrap()
        );
        let o = parsed("--target aarch64-unknown-none --cpu cortex-a57 --smp 2 fw");
        assert_eq!(
            (o.machine.cpu.as_deref(), o.machine.smp),
            (Some("cortex-a57"), Some(2))
        );
    }

    #[test]
    fn filters_and_libtest_options() {
        let o = parsed(
            "--target thumbv7m-none-eabi fw rcu pool --exact --skip slow --skip=big \
             --include-ignored --list --format terse --test-threads 1 --nocapture -Zunstable-options",
        );
        assert_eq!(o.filters, ["rcu", "pool"]);
        assert_eq!(o.skip, ["slow", "big"]);
        assert!(o.exact && o.list && o.include_ignored && !o.ignored_only && o.terse);
        assert!(parsed("--target thumbv7m-none-eabi fw -q").terse);
        assert!(parsed("--target thumbv7m-none-eabi fw --ignored").ignored_only);
        let o = parsed("--target thumbv7m-none-eabi --qemu-arg -d --qemu-arg int fw");
        assert_eq!(o.machine.extra, ["-d", "int"]);
    }

    /// cargo passes libtest's arguments after the ELF; a `--` among them is dropped, and
    /// past it `--opt=value` is left whole (and so refused, like any unknown option).
    #[test]
    fn a_double_dash_is_dropped_and_ends_the_splitting() {
        let o = parsed("--target thumbv7m-none-eabi fw -- rcu");
        assert_eq!(o.filters, ["rcu"]);
        assert!(refused("--target thumbv7m-none-eabi fw -- --skip=x")
            .starts_with("unknown option --skip=x"));
    }

    #[test]
    fn mistakes_are_refused_with_what_to_do() {
        assert!(refused("--target x86_64-unknown-linux-gnu fw").contains("give --machine"));
        assert!(refused("--machine virt fw").contains("needs --target"));
        assert!(refused("fw").contains("give --target"));
        assert!(refused("--target thumbv7m-none-eabi").contains("no ELF"));
        assert!(refused("--target thumbv7m-none-eabi --smp 0 fw").contains("1 or more"));
        assert!(refused("--target thumbv7m-none-eabi --timeout soon fw").contains("seconds"));
        assert!(
            refused("--target thumbv7m-none-eabi --bogus fw").contains("unknown option --bogus")
        );
        assert!(refused("--target thumbv7m-none-eabi --format json fw").contains("not supported"));
        assert!(
            refused("--target thumbv7m-none-eabi --ignored --include-ignored fw")
                .contains("mutually exclusive")
        );
        assert!(refused("--target").contains("--target needs a value"));
    }
}
