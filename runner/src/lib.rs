//! A cargo runner for no_std firmware in QEMU: [embedded-test] suites and plain programs.
//!
//! probe-rs, embedded-test's usual runner, only drives physical probes. This speaks the
//! same protocol to QEMU:
//! * embedded-test puts one symbol per test in the `.embedded_test` section; its *name*
//!   is a JSON object (`name`, `ignored`, `should_panic`, optional `timeout`) and its
//!   value points at a `(fn() -> !, &'static str)`: the entry point and the module path;
//! * the firmware reads its command line over semihosting and, for `run_addr <decimal>`,
//!   jumps to that entry; the test passes with semihosting exit 0, and fails with abort
//!   (exit 134) or any other exit;
//! * one fresh QEMU per test, killed at the test's timeout.
//!
//! The firmware's defmt frames arrive on QEMU's stdout (semihosting) and are decoded with
//! `defmt-decoder` against the same ELF. Output is libtest's, ending in `test result:`,
//! so `cargo test` reports it like any other test binary. An ELF without an
//! `.embedded_test` section is a plain program: it boots once, its log is printed and its
//! semihosting exit code is the result (for `cargo run`).
//!
//! The binary (`qemu-embedded-runner`) is this crate's front end; [`cli`] is the same
//! thing as a function, for build tools that embed it.
//!
//! [embedded-test]: https://crates.io/crates/embedded-test

mod elf;
mod qemu;

pub use qemu::{find_qemu, install_qemu, QEMU_DIR_VAR};

use defmt_decoder::Table;
use std::time::{Duration, Instant};

/// How a target boots in QEMU: the system emulator and its machine arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// The `qemu-system-*` binary.
    pub qemu: String,
    /// `-machine` value.
    pub machine: String,
    /// `-cpu` value, if the machine needs one.
    pub cpu: Option<String>,
    /// `-smp` value (cores or harts), if more than one.
    pub smp: Option<u32>,
    /// Further arguments, as given.
    pub extra: Vec<String>,
}

/// A target triple the runner can boot without being told how: one row of [`KNOWN`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Known {
    /// The target triple.
    pub target: &'static str,
    /// The `qemu-system-*` binary.
    pub qemu: &'static str,
    /// `-machine` value.
    pub machine: &'static str,
    /// `-cpu` value, if the machine needs one.
    pub cpu: Option<&'static str>,
    /// `-smp` value, if more than one core or hart.
    pub smp: Option<u32>,
}

impl Known {
    const fn new(
        target: &'static str,
        qemu: &'static str,
        machine: &'static str,
        cpu: Option<&'static str>,
        smp: Option<u32>,
    ) -> Self {
        Known {
            target,
            qemu,
            machine,
            cpu,
            smp,
        }
    }
}

/// The machines this runner knows, by target triple (what `--target` selects unless
/// `--machine` overrides it). Memory maps to link against: Cortex-M: FLASH at 0 (256K
/// fits every machine here), RAM at 0x2000_0000 (16K on the micro:bit, 64K elsewhere);
/// RISC-V `virt`: RAM at 0x8000_0000, `-bios none`.
#[rustfmt::skip]
pub const KNOWN: &[Known] = &[
    Known::new("thumbv6m-none-eabi", "qemu-system-arm", "microbit", Some("cortex-m0"), None),
    Known::new("thumbv7m-none-eabi", "qemu-system-arm", "lm3s6965evb", Some("cortex-m3"), None),
    Known::new("thumbv7em-none-eabi", "qemu-system-arm", "mps2-an386", Some("cortex-m4"), None),
    Known::new("thumbv7em-none-eabihf", "qemu-system-arm", "mps2-an386", Some("cortex-m4"), None),
    Known::new("thumbv8m.main-none-eabi", "qemu-system-arm", "mps2-an505", Some("cortex-m33"), None),
    Known::new("thumbv8m.main-none-eabihf", "qemu-system-arm", "mps2-an505", Some("cortex-m33"), None),
    Known::new("riscv32imac-unknown-none-elf", "qemu-system-riscv32", "virt", None, Some(2)),
    Known::new("riscv32imc-unknown-none-elf", "qemu-system-riscv32", "virt", None, None),
    Known::new("riscv32i-unknown-none-elf", "qemu-system-riscv32", "virt", None, None),
    Known::new("riscv64gc-unknown-none-elf", "qemu-system-riscv64", "virt", None, Some(2)),
    Known::new("riscv64imac-unknown-none-elf", "qemu-system-riscv64", "virt", None, Some(2)),
];

impl Machine {
    /// The known machine for `target`, if any.
    pub fn for_target(target: &str) -> Option<Machine> {
        KNOWN.iter().find(|k| k.target == target).map(|k| Machine {
            qemu: k.qemu.into(),
            machine: k.machine.into(),
            cpu: k.cpu.map(Into::into),
            smp: k.smp,
            extra: Vec::new(),
        })
    }

    /// The arguments before the image: `-machine`, `-cpu`, `-smp`, `-bios none` on
    /// RISC-V `virt`, and the extra ones.
    fn args(&self) -> Vec<String> {
        let mut a = vec!["-machine".to_string(), self.machine.clone()];
        if let Some(cpu) = &self.cpu {
            a.extend(["-cpu".to_string(), cpu.clone()]);
        }
        if self.qemu.contains("riscv") && !self.extra.iter().any(|e| e == "-bios") {
            a.extend(["-bios".to_string(), "none".to_string()]);
        }
        if let Some(n) = self.smp {
            a.extend(["-smp".to_string(), n.to_string()]);
        }
        a.extend(self.extra.iter().cloned());
        a
    }
}

/// What one run was asked to do (the command line, parsed).
#[derive(Clone, Debug)]
pub struct Options {
    /// The machine to boot.
    pub machine: Machine,
    /// The firmware.
    pub elf: String,
    /// Test name filters (substrings, or exact names with `exact`).
    pub filters: Vec<String>,
    /// Filters match whole names.
    pub exact: bool,
    /// List the tests instead of running them.
    pub list: bool,
    /// Run only ignored tests.
    pub ignored_only: bool,
    /// Run ignored tests too.
    pub include_ignored: bool,
    /// Timeout of a test that does not set its own (embedded-test's `timeout`).
    pub test_timeout: Duration,
    /// Timeout of a plain program.
    pub program_timeout: Duration,
    /// An explicit QEMU binary (else [`find_qemu`]).
    pub qemu_path: Option<String>,
}

/// The usage text of the binary.
pub const USAGE: &str = "usage: qemu-embedded-runner [OPTIONS] ELF [FILTER...] [--exact] [--list] [--ignored] [--include-ignored]
       qemu-embedded-runner install-qemu [--dir DIR]

Runs an embedded-test suite (one fresh QEMU per test) or a plain firmware in QEMU, decodes
its defmt log, prints libtest-style results. Use it as cargo's runner:
  [target.thumbv7em-none-eabihf]
  runner = \"qemu-embedded-runner --target thumbv7em-none-eabihf\"

options:
  --target T        the target triple; selects a known QEMU machine (see --machines)
  --machine M       QEMU -machine (overrides the target's; needed for unknown targets)
  --cpu C           QEMU -cpu
  --smp N           cores/harts
  --qemu-arg ARG    one more QEMU argument (repeatable)
  --qemu PATH       the qemu-system binary to use
  --timeout SECS    timeout of tests without their own (default 60)
  --program-timeout SECS
                    timeout of a plain firmware (default 300)
  --machines        list the known targets and machines

QEMU is taken from --qemu, else from the folder in $QEMU_SYSTEM_DIR, else from PATH,
else from where `install-qemu` put it.";

/// Parses the command line (`args` without the program name). `Ok(None)` when there is
/// nothing to run (`--machines`, `--help`: already printed).
///
/// # Errors
/// A message for the user: an unknown option value, a missing ELF or machine.
pub fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let mut target = None;
    let (mut machine, mut cpu, mut smp, mut qemu_path) = (None, None, None, None);
    let mut extra = Vec::new();
    let mut elf = None;
    let mut filters = Vec::new();
    let (mut exact, mut list, mut ignored_only, mut include_ignored) = (false, false, false, false);
    let mut test_timeout = Duration::from_secs(60);
    let mut program_timeout = Duration::from_secs(300);
    let mut it = args.iter();
    let secs = |v: Option<&String>, what: &str| -> Result<Duration, String> {
        v.and_then(|s| s.parse().ok())
            .map(Duration::from_secs)
            .ok_or_else(|| format!("{what} needs a number of seconds"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--target" => target = it.next().cloned(),
            "--machine" => machine = it.next().cloned(),
            "--cpu" => cpu = it.next().cloned(),
            "--smp" => {
                smp = Some(
                    it.next()
                        .and_then(|s| s.parse().ok())
                        .ok_or("--smp needs a number")?,
                )
            }
            "--qemu-arg" => extra.push(it.next().ok_or("--qemu-arg needs a value")?.clone()),
            "--qemu" => qemu_path = it.next().cloned(),
            "--timeout" => test_timeout = secs(it.next(), "--timeout")?,
            "--program-timeout" => program_timeout = secs(it.next(), "--program-timeout")?,
            "--machines" => {
                for k in KNOWN {
                    println!(
                        "{:<30} {} -machine {}{}{}",
                        k.target,
                        k.qemu,
                        k.machine,
                        k.cpu.map(|c| format!(" -cpu {c}")).unwrap_or_default(),
                        k.smp.map(|n| format!(" -smp {n}")).unwrap_or_default()
                    );
                }
                return Ok(None);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "--exact" => exact = true,
            "--list" => list = true,
            "--ignored" => ignored_only = true,
            "--include-ignored" => include_ignored = true,
            // libtest options cargo may pass that have no meaning here.
            "--nocapture" | "--show-output" | "--quiet" | "-q" => {}
            "--test-threads" | "--format" | "--color" => {
                it.next();
            }
            s if s.starts_with("--") => {
                eprintln!("qemu-embedded-runner: ignoring unsupported option {s}")
            }
            s if elf.is_none() => elf = Some(s.to_string()),
            s => filters.push(s.to_string()),
        }
    }
    let elf = elf.ok_or_else(|| format!("no ELF to run\n{USAGE}"))?;
    let mut m = match (&target, &machine) {
        (Some(t), None) => Machine::for_target(t).ok_or_else(|| {
            format!(
                "no QEMU machine known for target {t}: give --machine (and --cpu), e.g. \
                 `--machine mps2-an505 --cpu cortex-m33`; `--machines` lists the known ones"
            )
        })?,
        (t, Some(name)) => {
            let base = t.as_deref().and_then(Machine::for_target);
            let qemu = base.as_ref().map(|b| b.qemu.clone()).or_else(|| {
                t.as_deref().map(|t| {
                    if t.starts_with("riscv64") {
                        "qemu-system-riscv64".into()
                    } else if t.starts_with("riscv32") {
                        "qemu-system-riscv32".into()
                    } else {
                        "qemu-system-arm".into()
                    }
                })
            });
            Machine {
                qemu: qemu.ok_or("--machine needs --target too (to pick the emulator)")?,
                machine: name.clone(),
                cpu: None,
                smp: None,
                extra: Vec::new(),
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
    Ok(Some(Options {
        machine: m,
        elf,
        filters,
        exact,
        list,
        ignored_only,
        include_ignored,
        test_timeout,
        program_timeout,
        qemu_path,
    }))
}

/// The whole runner: `install-qemu`, or parse and [`run`].
///
/// # Errors
/// A message for the user (failed tests included: the process should exit non-zero).
pub fn cli(args: &[String]) -> Result<(), String> {
    if args.first().map(String::as_str) == Some("install-qemu") {
        let mut dir = None;
        let mut it = args[1..].iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--dir" => dir = it.next().map(std::path::PathBuf::from),
                other => return Err(format!("install-qemu: unknown option {other}")),
            }
        }
        let bin = install_qemu(dir.as_deref())?;
        println!("QEMU is ready: {}", bin.display());
        return Ok(());
    }
    match parse(args)? {
        Some(o) => run(&o),
        None => Ok(()),
    }
}

/// Runs the firmware of `o`: its tests, or the program once.
///
/// # Errors
/// A message: QEMU missing, an unreadable ELF, failed tests, a failed program.
pub fn run(o: &Options) -> Result<(), String> {
    let elf = std::fs::read(&o.elf).map_err(|e| format!("{}: {e}", o.elf))?;
    let table = Table::parse(&elf).map_err(|e| format!("defmt table: {e}"))?;
    let qemu = match &o.qemu_path {
        Some(p) => p.clone(),
        None => find_qemu(&o.machine.qemu)?,
    };
    let locs = elf::locations(table.as_ref(), &elf);
    if !elf::has_test_section(&elf) {
        let (verdict, log, stderr) = run_one(&qemu, &o.machine, &o.elf, o.program_timeout, &[])?;
        for l in elf::decode_log(table.as_ref(), locs.as_ref(), &log) {
            println!("{l}");
        }
        for l in stderr.lines().filter(|l| !l.trim().is_empty()) {
            println!("qemu: {l}");
        }
        return match verdict {
            Verdict::Exit(0) => Ok(()),
            Verdict::Exit(code) => Err(format!("the firmware exited with {code}")),
            Verdict::Timeout => Err(format!(
                "the firmware did not finish within {} s",
                o.program_timeout.as_secs()
            )),
        };
    }
    let tests = elf::read_tests(&elf, o.test_timeout)?;
    let selected: Vec<&elf::Test> = tests
        .iter()
        .filter(|t| {
            o.filters.is_empty()
                || o.filters.iter().any(|f| {
                    if o.exact {
                        t.name == *f
                    } else {
                        t.name.contains(f.as_str())
                    }
                })
        })
        .collect();
    let filtered_out = tests.len() - selected.len();
    if o.list {
        for t in &selected {
            println!("{}: test", t.name);
        }
        return Ok(());
    }
    let bin = o.elf.rsplit('/').next().unwrap_or(&o.elf);
    println!(
        "\nrunning {} tests ({}, {bin})",
        selected.len(),
        o.machine.machine
    );
    let start = Instant::now();
    let (mut passed, mut failed, mut ignored) = (0, 0, 0);
    let mut failures = Vec::new();
    for t in selected {
        let skip = if o.ignored_only {
            !t.ignored
        } else {
            t.ignored && !o.include_ignored
        };
        if skip {
            println!("test {} ... ignored", t.name);
            ignored += 1;
            continue;
        }
        let t0 = Instant::now();
        let entry = t.entry.to_string();
        let (verdict, log, stderr) =
            run_one(&qemu, &o.machine, &o.elf, t.timeout, &["run_addr", &entry])?;
        let lines = elf::decode_log(table.as_ref(), locs.as_ref(), &log);
        let (ok, why) = match verdict {
            Verdict::Exit(0) if !t.should_panic => (true, String::new()),
            Verdict::Exit(0) => (false, "expected a panic, but the test passed".into()),
            Verdict::Exit(code) if t.should_panic => {
                (true, format!("panicked as expected (exit {code})"))
            }
            Verdict::Exit(code) => (false, format!("exit code {code}")),
            Verdict::Timeout => (false, format!("timed out after {} s", t.timeout.as_secs())),
        };
        println!(
            "test {} ... {} ({:.2} s)",
            t.name,
            if ok { "ok" } else { "FAILED" },
            t0.elapsed().as_secs_f64()
        );
        if ok {
            passed += 1;
            for l in &lines {
                println!("    {l}");
            }
        } else {
            failed += 1;
            failures.push((t.name.clone(), why, lines, stderr));
        }
    }
    if !failures.is_empty() {
        println!("\nfailures:");
        for (name, why, lines, stderr) in &failures {
            println!("\n---- {name} ({why}) ----");
            for l in lines {
                println!("    {l}");
            }
            for l in stderr.lines().filter(|l| !l.trim().is_empty()) {
                println!("    qemu: {l}");
            }
        }
        println!();
    }
    println!(
        "test result: {}. {passed} passed; {failed} failed; {ignored} ignored; 0 measured; {filtered_out} filtered out; finished in {:.2}s\n",
        if failed == 0 { "ok" } else { "FAILED" },
        start.elapsed().as_secs_f64()
    );
    if failed == 0 {
        Ok(())
    } else {
        Err(format!("{failed} on-target test(s) failed"))
    }
}

enum Verdict {
    Exit(i32),
    Timeout,
}

/// Boots `elf_path` in a fresh QEMU with `args` as its semihosting command line; kills
/// it after `timeout`.
fn run_one(
    qemu: &str,
    m: &Machine,
    elf_path: &str,
    timeout: Duration,
    args: &[&str],
) -> Result<(Verdict, Vec<u8>, String), String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut semihosting = String::from("enable=on,target=native");
    for a in args {
        semihosting.push_str(",arg=");
        semihosting.push_str(a);
    }
    let mut child = Command::new(qemu)
        .args(m.args())
        .args([
            "-nographic",
            "-monitor",
            "none",
            "-serial",
            "none",
            "-semihosting-config",
            &semihosting,
            "-kernel",
            elf_path,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {qemu}: {e}"))?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let verdict = loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            break Verdict::Exit(st.code().unwrap_or(-1));
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break Verdict::Timeout;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Ok((
        verdict,
        reader.join().unwrap_or_default(),
        err_reader.join().unwrap_or_default(),
    ))
}
