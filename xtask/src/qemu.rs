//! `cargo xtask qemu-run --target T ELF [FILTER...] [--exact] [--list] [--ignored]`:
//! cargo's runner for the embedded targets.
//!
//! probe-rs is embedded-test's usual runner, but it only drives physical probes. This
//! speaks the same protocol to QEMU:
//! * embedded-test puts one symbol per test in the `.embedded_test` section; its *name*
//!   is a JSON object (`name`, `ignored`, `should_panic`, optional `timeout`) and its
//!   value points at a `(fn() -> !, &'static str)`: the entry point and the module path;
//! * the firmware reads its command line over semihosting and, for `run_addr <decimal>`,
//!   jumps to that entry; the test passes with semihosting exit 0, and fails with abort
//!   (exit 134) or any other exit;
//! * one fresh QEMU per test, killed at the test's timeout.
//!
//! The firmware's defmt frames arrive on QEMU's stdout (semihosting) and are decoded with
//! `defmt-decoder` against the same ELF. Output is libtest's, ending in `test result:`.

use crate::install;
use defmt_decoder::{DecodeError, Locations, Table};
use object::{Object, ObjectSection, ObjectSymbol};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How each target boots in QEMU.
pub struct Machine {
    pub target: &'static str,
    pub qemu: &'static str,
    pub args: &'static [&'static str],
}

pub const MACHINES: &[Machine] = &[
    Machine {
        target: "thumbv6m-none-eabi",
        qemu: "qemu-system-arm",
        args: &["-machine", "microbit", "-cpu", "cortex-m0"],
    },
    Machine {
        target: "thumbv7m-none-eabi",
        qemu: "qemu-system-arm",
        args: &["-machine", "lm3s6965evb", "-cpu", "cortex-m3"],
    },
    Machine {
        target: "thumbv7em-none-eabihf",
        qemu: "qemu-system-arm",
        args: &["-machine", "mps2-an386", "-cpu", "cortex-m4"],
    },
    Machine {
        target: "riscv32imac-unknown-none-elf",
        qemu: "qemu-system-riscv32",
        args: &["-machine", "virt", "-bios", "none", "-smp", "2"],
    },
    Machine {
        target: "riscv64gc-unknown-none-elf",
        qemu: "qemu-system-riscv64",
        args: &["-machine", "virt", "-bios", "none", "-smp", "2"],
    },
];

pub fn machine(target: &str) -> Result<&'static Machine, String> {
    MACHINES
        .iter()
        .find(|m| m.target == target)
        .ok_or_else(|| format!("no QEMU machine known for target {target}"))
}

/// One test found in the ELF.
struct Test {
    /// `module::name`, without the crate name.
    name: String,
    entry: u64,
    ignored: bool,
    should_panic: bool,
    timeout: Duration,
}

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

fn read_tests(elf: &[u8]) -> Result<Vec<Test>, String> {
    let file = object::File::parse(elf).map_err(|e| format!("not an ELF file: {e}"))?;
    let section = file.section_by_name(".embedded_test").ok_or(
        "no .embedded_test section: not an embedded-test binary (is embedded-test.x linked?)",
    )?;
    let data = section.uncompressed_data().map_err(|e| e.to_string())?;
    let word = if file.is_64() { 8 } else { 4 };
    let read_word = |bytes: &[u8]| -> u64 {
        let mut b = [0u8; 8];
        b[..word].copy_from_slice(&bytes[..word]);
        u64::from_le_bytes(b)
    };
    let mut version = None;
    let mut tests = Vec::new();
    for sym in file.symbols() {
        if sym.section_index() != Some(section.index()) {
            continue;
        }
        let name = sym.name().map_err(|e| e.to_string())?;
        let off = (sym.address() - section.address()) as usize;
        if name == "EMBEDDED_TEST_VERSION" {
            version = Some(read_word(&data[off..]));
            continue;
        }
        if !name.starts_with('{') {
            continue;
        }
        let meta: serde_json::Value = serde_json::from_str(name)
            .map_err(|e| format!("test symbol is not JSON ({e}): {name}"))?;
        let entry = read_word(&data[off..]);
        let path_ptr = read_word(&data[off + word..]);
        let path_len = read_word(&data[off + 2 * word..]) as usize;
        let module = read_at(&file, path_ptr, path_len).unwrap_or_default();
        let module = module
            .split_once("::")
            .map(|(_, rest)| rest.to_string())
            .unwrap_or(module);
        let short = meta["name"].as_str().ok_or("test without a name")?;
        tests.push(Test {
            name: if module.is_empty() {
                short.to_string()
            } else {
                format!("{module}::{short}")
            },
            entry,
            ignored: meta["ignored"].as_bool().unwrap_or(false),
            should_panic: meta["should_panic"].as_bool().unwrap_or(false),
            timeout: meta["timeout"]
                .as_u64()
                .map(Duration::from_secs)
                .unwrap_or(DEFAULT_TIMEOUT),
        });
    }
    match version {
        Some(1) => {}
        Some(v) => {
            return Err(format!(
                "embedded-test protocol version {v}; this runner speaks version 1"
            ))
        }
        None => return Err("no EMBEDDED_TEST_VERSION symbol".into()),
    }
    tests.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(tests)
}

fn has_test_section(elf: &[u8]) -> bool {
    object::File::parse(elf)
        .map(|f| f.section_by_name(".embedded_test").is_some())
        .unwrap_or(false)
}

/// A plain firmware (not an embedded-test binary, e.g. `cargo run --bin fd_demo`): runs
/// it once, prints its decoded defmt log, and returns its exit status.
fn run_program(
    m: &Machine,
    elf_path: &str,
    elf: &[u8],
    table: Option<&Table>,
) -> Result<(), String> {
    let qemu = install::qemu_binary(m.qemu)?;
    let timeout = Duration::from_secs(300);
    let (verdict, log, stderr) = run_one(&qemu, m, elf_path, timeout, &[])?;
    for l in decode_log(table, locations(table, elf).as_ref(), &log) {
        println!("{l}");
    }
    for l in stderr.lines().filter(|l| !l.trim().is_empty()) {
        println!("qemu: {l}");
    }
    match verdict {
        Verdict::Exit(0) => Ok(()),
        Verdict::Exit(code) => Err(format!("the firmware exited with {code}")),
        Verdict::Timeout => Err(format!(
            "the firmware did not finish within {} s",
            timeout.as_secs()
        )),
    }
}

/// Reads `len` bytes at virtual address `addr` from whichever loaded section holds it.
fn read_at(file: &object::File, addr: u64, len: usize) -> Option<String> {
    for s in file.sections() {
        if addr >= s.address() && addr + len as u64 <= s.address() + s.size() {
            let data = s.data().ok()?;
            let off = (addr - s.address()) as usize;
            return String::from_utf8(data.get(off..off + len)?.to_vec()).ok();
        }
    }
    None
}

/// The source locations of the ELF's defmt frames (parsed once per ELF: DWARF).
fn locations(table: Option<&Table>, elf: &[u8]) -> Option<Locations> {
    table.and_then(|t| t.get_locations(elf).ok())
}

/// Decodes defmt frames into lines, with the source location when known.
fn decode_log(table: Option<&Table>, locations: Option<&Locations>, bytes: &[u8]) -> Vec<String> {
    let Some(table) = table else {
        return if bytes.is_empty() {
            vec![]
        } else {
            vec![String::from_utf8_lossy(bytes).into_owned()]
        };
    };
    let mut out = Vec::new();
    let mut dec = table.new_stream_decoder();
    dec.received(bytes);
    loop {
        match dec.decode() {
            Ok(frame) => {
                let loc = locations
                    .as_ref()
                    .and_then(|l| l.get(&frame.index()))
                    .map(|l| format!("  ({}:{})", l.file.display(), l.line))
                    .unwrap_or_default();
                // Multi-line messages (a panic's location, then its message) stay indented.
                let text = frame.display(false).to_string().replace('\n', "\n        ");
                out.push(format!("{text}{loc}"));
            }
            Err(DecodeError::UnexpectedEof) => break,
            Err(DecodeError::Malformed) => {
                out.push("<malformed defmt frame; later output skipped>".into());
                break;
            }
        }
    }
    out
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
    let mut semihosting = String::from("enable=on,target=native");
    for a in args {
        semihosting.push_str(",arg=");
        semihosting.push_str(a);
    }
    let mut child = Command::new(qemu)
        .args(m.args)
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

pub fn run(args: &[String]) -> Result<(), String> {
    let mut target = None;
    let mut elf_path = None;
    let mut filters = Vec::new();
    let (mut exact, mut list, mut ignored_only, mut include_ignored) = (false, false, false, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--target" => target = it.next().cloned(),
            "--exact" => exact = true,
            "--list" => list = true,
            "--ignored" => ignored_only = true,
            "--include-ignored" => include_ignored = true,
            "--nocapture" | "--show-output" | "--quiet" | "-q" => {}
            "--test-threads" | "--format" | "--color" => {
                it.next();
            }
            s if s.starts_with("--") => eprintln!("qemu-run: ignoring unsupported option {s}"),
            s if elf_path.is_none() => elf_path = Some(s.to_string()),
            s => filters.push(s.to_string()),
        }
    }
    let target = target.ok_or("qemu-run needs --target")?;
    let elf_path = elf_path.ok_or("qemu-run needs the ELF to run")?;
    let m = machine(&target)?;
    let elf = std::fs::read(&elf_path).map_err(|e| format!("{elf_path}: {e}"))?;
    let table = Table::parse(&elf).map_err(|e| format!("defmt table: {e}"))?;
    if !has_test_section(&elf) {
        return run_program(m, &elf_path, &elf, table.as_ref());
    }
    let tests = read_tests(&elf)?;

    let selected: Vec<&Test> = tests
        .iter()
        .filter(|t| {
            filters.is_empty()
                || filters.iter().any(|f| {
                    if exact {
                        t.name == *f
                    } else {
                        t.name.contains(f.as_str())
                    }
                })
        })
        .collect();
    let filtered_out = tests.len() - selected.len();
    if list {
        for t in &selected {
            println!("{}: test", t.name);
        }
        return Ok(());
    }
    let qemu = install::qemu_binary(m.qemu)?;
    let locs = locations(table.as_ref(), &elf);
    let bin = elf_path.rsplit('/').next().unwrap_or(&elf_path);
    println!("\nrunning {} tests ({target}, {bin})", selected.len());
    let start = Instant::now();
    let (mut passed, mut failed, mut ignored) = (0, 0, 0);
    let mut failures = Vec::new();
    for t in selected {
        let skip = if ignored_only {
            !t.ignored
        } else {
            t.ignored && !include_ignored
        };
        if skip {
            println!("test {} ... ignored", t.name);
            ignored += 1;
            continue;
        }
        let t0 = Instant::now();
        let entry = t.entry.to_string();
        let (verdict, log, stderr) =
            run_one(&qemu, m, &elf_path, t.timeout, &["run_addr", &entry])?;
        let lines = decode_log(table.as_ref(), locs.as_ref(), &log);
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
