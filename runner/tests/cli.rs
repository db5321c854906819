//! The runner from outside, as a user runs it: the binary with a stand-in for QEMU (a
//! shell script that prints what a real QEMU would and exits as it would), so that
//! errors, output streams and the expected-output mode are tested without QEMU.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh folder under the target dir for one test.
fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A stand-in `qemu-system-*` in `dir`: answers `--version`, otherwise runs `body`.
fn fake_qemu(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'QEMU emulator version 9.9'; exit 0; fi\n{body}\n"),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    p
}

/// An ELF with no defmt table and no tests (a plain program), defining `symbols`.
fn plain_elf(dir: &Path, symbols: &[&str]) -> PathBuf {
    plain_elf_for(dir, object::Architecture::Arm, symbols)
}

/// [`plain_elf`] for `arch`.
fn plain_elf_for(dir: &Path, arch: object::Architecture, symbols: &[&str]) -> PathBuf {
    use object::write::{Object, Symbol, SymbolSection};
    use object::{BinaryFormat, Endianness, SymbolFlags, SymbolKind, SymbolScope};
    let mut o = Object::new(BinaryFormat::Elf, arch, Endianness::Little);
    let data = o.section_id(object::write::StandardSection::Data);
    let off = o.append_section_data(data, &[0u8; 64], 4);
    for s in symbols {
        o.add_symbol(Symbol {
            name: s.as_bytes().to_vec(),
            value: off,
            size: 64,
            kind: SymbolKind::Data,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(data),
            flags: SymbolFlags::None,
        });
    }
    let p = dir.join("fw.elf");
    std::fs::write(&p, o.write().unwrap()).unwrap();
    p
}

/// The runner with `args`, QEMU found only where the test says.
fn runner_cmd(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let empty = dir.join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_qemu-embedded-runner"));
    c.args(args)
        .env_remove("QEMU_SYSTEM_DIR")
        .env("PATH", &empty)
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_DATA_HOME", dir.join("data"));
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// A plain program with a defmt table (rzCOBS): `messages[i]` is an info message with
/// no arguments at index `i + 1`, whose frame is `[i + 1, 0x7e]` then the zero byte.
fn defmt_elf(dir: &Path, messages: &[&str]) -> PathBuf {
    use object::write::{Object, Symbol, SymbolSection};
    use object::{Architecture, BinaryFormat, Endianness, SectionKind};
    use object::{SymbolFlags, SymbolKind, SymbolScope};
    let mut o = Object::new(BinaryFormat::Elf, Architecture::Arm, Endianness::Little);
    let sec = o.add_section(Vec::new(), b".defmt".to_vec(), SectionKind::ReadOnlyData);
    o.append_section_data(sec, &vec![0u8; messages.len() + 1], 1);
    let mut sym = |name: String, value: u64, section| {
        o.add_symbol(Symbol {
            name: name.into_bytes(),
            value,
            size: if section == SymbolSection::Absolute {
                0
            } else {
                1
            },
            kind: SymbolKind::Data,
            scope: SymbolScope::Linkage,
            weak: false,
            section,
            flags: SymbolFlags::None,
        });
    };
    sym("_defmt_version_ = 4".into(), 0, SymbolSection::Absolute);
    sym(
        "_defmt_encoding_ = rzcobs".into(),
        0,
        SymbolSection::Absolute,
    );
    for (i, m) in messages.iter().enumerate() {
        sym(
            format!(
                r#"{{"package":"fw","tag":"defmt_info","data":"{m}","disambiguator":"{i}","crate_name":"fw"}}"#
            ),
            i as u64 + 1,
            SymbolSection::Section(sec),
        );
    }
    let p = dir.join("defmt.elf");
    std::fs::write(&p, o.write().unwrap()).unwrap();
    p
}

/// An embedded-test suite for `arch` with `tests` (name, ignored), without a defmt table:
/// each test's entry is its position (1, 2, ...), so a stand-in QEMU can tell them apart
/// by `run_addr N` in its arguments.
fn suite_elf(dir: &Path, arch: object::Architecture, tests: &[(&str, bool)]) -> PathBuf {
    use object::write::{Object, Symbol, SymbolSection};
    use object::{BinaryFormat, Endianness, SectionKind, SymbolFlags, SymbolKind, SymbolScope};
    let mut o = Object::new(BinaryFormat::Elf, arch, Endianness::Little);
    let word = if o.architecture().address_size().map(|s| s.bytes()) == Some(8) {
        8
    } else {
        4
    };
    let sec = o.add_section(Vec::new(), b".embedded_test".to_vec(), SectionKind::Data);
    let mut add = |name: String, words: &[u64]| {
        let mut bytes = Vec::new();
        for w in words {
            bytes.extend_from_slice(&w.to_le_bytes()[..word]);
        }
        let off = o.append_section_data(sec, &bytes, word as u64);
        o.add_symbol(Symbol {
            name: name.into_bytes(),
            value: off,
            size: bytes.len() as u64,
            kind: SymbolKind::Data,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(sec),
            flags: SymbolFlags::None,
        });
    };
    add("EMBEDDED_TEST_VERSION".into(), &[1]);
    for (i, (name, ignored)) in tests.iter().enumerate() {
        add(
            format!(r#"{{"name":"{name}","ignored":{ignored},"should_panic":false}}"#),
            &[i as u64 + 1, 0, 0],
        );
    }
    let p = dir.join("suite.elf");
    std::fs::write(&p, o.write().unwrap()).unwrap();
    p
}

/// Runs the runner with `args`, QEMU found only where the test says.
fn runner(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    runner_cmd(dir, args, env).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_qemu_that_fails_to_start_is_reported_as_such() {
    let d = scratch("fails-to-start");
    let q = fake_qemu(
        &d,
        "qemu-system-arm",
        "echo \"qemu-system-arm: unable to find CPU model 'cortex-a53'\" >&2; exit 1",
    );
    let elf = plain_elf(&d, &[]);
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("QEMU failed to start: unable to find CPU model 'cortex-a53'"),
        "{err}"
    );
    assert!(!err.contains("the firmware exited with"), "{err}");
}

#[test]
fn a_firmware_that_exits_with_1_is_not_a_qemu_failure() {
    let d = scratch("exits-1");
    let q = fake_qemu(&d, "qemu-system-arm", "printf 'booted\\n'; exit 1");
    let elf = plain_elf(&d, &[]);
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("the firmware exited with 1"), "{err}");
    assert!(!err.contains("QEMU failed to start"), "{err}");
}

#[test]
fn qemu_diagnostics_go_to_stderr_and_the_program_output_to_stdout() {
    let d = scratch("streams");
    let q = fake_qemu(
        &d,
        "qemu-system-arm",
        "echo 'qemu-system-arm: Timer with period zero, disabling' >&2; printf 'hello\\n'; exit 0",
    );
    let elf = plain_elf(&d, &[]);
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "hello\n");
    assert!(text(&o.stderr).contains("qemu: qemu-system-arm: Timer with period zero"));
}

#[test]
fn expected_output_mode_passes_on_equal_output_and_shows_a_diff_otherwise() {
    let d = scratch("expect");
    let q = fake_qemu(&d, "qemu-system-arm", "printf 'one\\ntwo\\nthree'; exit 0");
    let elf = plain_elf(&d, &[]);
    // The stand-in prints raw text (no defmt table), passed on line by line.
    let good = d.join("good.run");
    std::fs::write(&good, "one\ntwo\nthree\n").unwrap();
    let bad = d.join("bad.run");
    std::fs::write(&bad, "one\nTWO\nthree\n").unwrap();
    let args = |f: &Path| {
        vec![
            "--target".to_string(),
            "thumbv7m-none-eabi".into(),
            "--qemu".into(),
            q.display().to_string(),
            format!("--expect={}", f.display()),
            elf.display().to_string(),
        ]
    };
    let to_str = |v: &Vec<String>| {
        v.iter()
            .map(|s| s.as_str())
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let g = to_str(&args(&good));
    let o = runner(&d, &g.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let b = to_str(&args(&bad));
    let o = runner(&d, &b.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("the output differs from"), "{err}");
    assert!(err.contains("- TWO") && err.contains("+ two"), "{err}");
    assert!(err.contains("  one") && err.contains("  three"), "{err}");
}

#[test]
fn a_firmware_that_logs_only_over_rtt_is_told_why_nothing_shows() {
    let d = scratch("rtt");
    let q = fake_qemu(&d, "qemu-system-arm", "exit 0");
    let elf = plain_elf(&d, &["_SEGGER_RTT"]);
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    let err = text(&o.stderr);
    assert!(err.contains("QEMU cannot read RTT"), "{err}");
    // Not for firmware without an RTT block.
    let elf = plain_elf(&d, &[]);
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    assert!(!text(&o.stderr).contains("RTT"));
}

#[test]
fn a_missing_qemu_names_the_variable_and_install_qemu() {
    let d = scratch("missing");
    let elf = plain_elf(&d, &[]);
    let o = runner(
        &d,
        &["--target", "aarch64-unknown-none", elf.to_str().unwrap()],
        &[],
    );
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("qemu-system-aarch64 not found"), "{err}");
    assert!(
        err.contains("QEMU_SYSTEM_DIR") && err.contains("install-qemu"),
        "{err}"
    );
}

#[test]
fn the_folder_install_qemu_recorded_is_found_again() {
    let d = scratch("remembered");
    let bin = d.join("my-qemu/usr/bin");
    std::fs::create_dir_all(&bin).unwrap();
    fake_qemu(
        &bin,
        "qemu-system-aarch64",
        "printf 'from the recorded folder\\n'; exit 0",
    );
    // What `install-qemu --dir` writes once it has unpacked QEMU there.
    let rec = d.join("config/qemu-embedded-runner");
    std::fs::create_dir_all(&rec).unwrap();
    std::fs::write(rec.join("qemu-dir"), format!("{}\n", bin.display())).unwrap();
    let elf = plain_elf(&d, &[]);
    let o = runner(
        &d,
        &["--target", "aarch64-unknown-none", elf.to_str().unwrap()],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("from the recorded folder"));
}

#[test]
fn the_known_aarch64_machine_gets_its_emulator_cpu_cores_and_no_nic() {
    let d = scratch("aarch64-args");
    // The stand-in prints its arguments.
    let q = fake_qemu(&d, "qemu-system-aarch64", "echo \"$@\"; exit 0");
    let elf = plain_elf(&d, &[]);
    let o = runner(
        &d,
        &[
            "--target",
            "aarch64-unknown-none",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    let out = text(&o.stdout);
    assert!(
        out.contains("-machine virt -cpu cortex-a53 -nic none -smp 4"),
        "{out}"
    );
    let o = runner(
        &d,
        &[
            "--target=aarch64-unknown-none",
            "--smp=2",
            "--qemu-arg=-nic",
            "--qemu-arg=user",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    let out = text(&o.stdout);
    assert!(out.contains("-smp 2 -nic user"), "{out}");
    assert!(!out.contains("-nic none"), "{out}");
}

#[test]
fn a_named_machine_keeps_or_drops_the_targets_cpu_and_picks_the_emulator_by_arch() {
    let d = scratch("named-machine");
    let arm = fake_qemu(&d, "qemu-system-arm", "echo \"$@\"; exit 0");
    let elf = plain_elf(&d, &[]);
    let e = elf.to_str().unwrap();
    // Another board of the same target: its own CPU, so no -cpu.
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv8m.main-none-eabihf",
            "--machine",
            "mps2-an521",
            "--qemu",
            arm.to_str().unwrap(),
            e,
        ],
        &[],
    );
    let out = text(&o.stdout);
    assert!(out.contains("-machine mps2-an521 -nographic"), "{out}");
    // The target's own machine, named: its CPU and cores stay.
    let a64 = fake_qemu(&d, "qemu-system-aarch64", "echo \"$@\"; exit 0");
    let o = runner(
        &d,
        &[
            "--target",
            "aarch64-unknown-none",
            "--machine",
            "virt",
            "--qemu",
            a64.to_str().unwrap(),
            e,
        ],
        &[],
    );
    assert!(text(&o.stdout).contains("-machine virt -cpu cortex-a53 -nic none -smp 4"));
    // A triple the runner does not know: the emulator from its architecture.
    let o = runner(
        &d,
        &["--target", "aarch64-vendor-none", "--machine", "virt", e],
        &[],
    );
    assert!(
        text(&o.stderr).contains("qemu-system-aarch64 not found"),
        "{}",
        text(&o.stderr)
    );
    let rv = d.join("rv");
    std::fs::create_dir_all(&rv).unwrap();
    let rv = plain_elf_for(&rv, object::Architecture::Riscv32, &[]);
    let o = runner(
        &d,
        &[
            "--target",
            "riscv32imc-vendor-none",
            "--machine",
            "virt",
            rv.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        text(&o.stderr).contains("qemu-system-riscv32 not found"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn unknown_options_are_errors_not_ignored() {
    let d = scratch("unknown-option");
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu-args",
            "x",
            "fw.elf",
        ],
        &[],
    );
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("unknown option --qemu-args"));
}

#[test]
fn memory_maps_are_printed_for_the_known_machines() {
    let d = scratch("maps");
    let o = runner(
        &d,
        &["--memory-map", "--target", "thumbv8m.main-none-eabihf"],
        &[],
    );
    assert!(o.status.success());
    assert!(text(&o.stdout).contains("ORIGIN = 0x10000000"));
    let o = runner(
        &d,
        &[
            "--memory-map",
            "--target",
            "thumbv8m.main-none-eabihf",
            "--machine",
            "mps2-an521",
        ],
        &[],
    );
    assert!(text(&o.stdout).contains("INITSVTOR1"));
    let o = runner(
        &d,
        &["--memory-map", "--target", "aarch64-unknown-none"],
        &[],
    );
    assert!(text(&o.stdout).contains("ORIGIN = 0x40080000"));
    let o = runner(
        &d,
        &[
            "--memory-map",
            "--target",
            "thumbv7m-none-eabi",
            "--machine",
            "no-such-board",
        ],
        &[],
    );
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("no memory map known"));
}

/// Whether process `pid` is still running (a zombie is not: it only waits to be reaped).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) S ...`: the state follows the last `)`.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Polls `f` every 20 ms until it is true or `secs` have passed; whether it became true.
fn within(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() > end {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The processes of one test (the runner, its stand-in QEMU), killed when the test ends
/// however it ends, so that a failing test leaves nothing running.
struct Procs {
    runner: std::process::Child,
    qemu: Option<i32>,
}

impl Drop for Procs {
    fn drop(&mut self) {
        let _ = self.runner.kill();
        let _ = self.runner.wait();
        if let Some(q) = self.qemu {
            if alive(q) {
                // SAFETY: kill(2) with a pid this test's stand-in QEMU wrote.
                unsafe { libc::kill(q, libc::SIGKILL) };
            }
        }
    }
}

/// A stand-in QEMU that never exits (like a hanging firmware), after printing `first`:
/// it writes its pid to `qemu.pid` in `dir` and becomes `sleep`.
fn hanging_qemu(dir: &Path, first: &str) -> PathBuf {
    let pidfile = dir.join("qemu.pid");
    fake_qemu(
        dir,
        "qemu-system-arm",
        &format!(
            "printf '{first}'; echo $$ > '{}'; exec /bin/sleep 600",
            pidfile.display()
        ),
    )
}

/// Starts the runner on a hanging QEMU (plain program, a long timeout) and waits until
/// QEMU runs.
fn start_hanging(name: &str, first: &str) -> Procs {
    let d = scratch(name);
    let q = hanging_qemu(&d, first);
    let elf = plain_elf(&d, &[]);
    let mut cmd = runner_cmd(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--program-timeout",
            "120",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    // The runner leaves alone the signals it finds ignored (as a shell's background job
    // or `nohup` starts it), and this test may itself have been started so: it sends
    // them, so the runner starts with their default dispositions.
    // SAFETY: between fork and exec only signal(2), which is async-signal-safe, with
    // constant arguments.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    let runner = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut p = Procs { runner, qemu: None };
    let pidfile = d.join("qemu.pid");
    assert!(
        within(10, || {
            p.qemu = std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            p.qemu.is_some()
        }),
        "the stand-in QEMU did not start"
    );
    p
}

/// Sends `sig` to the runner; its QEMU must be gone soon after, and the runner must end
/// as that signal ends a process (a shell shows 128 + signo).
fn qemu_dies_with_the_runner(name: &str, sig: i32) {
    use std::os::unix::process::ExitStatusExt;
    let mut p = start_hanging(name, "booted\\n");
    let qemu = p.qemu.unwrap();
    assert!(alive(qemu));
    // SAFETY: kill(2) on the runner this test started.
    unsafe { libc::kill(p.runner.id() as i32, sig) };
    let mut status = None;
    assert!(
        within(10, || {
            status = p.runner.try_wait().unwrap();
            status.is_some()
        }),
        "the runner did not end on signal {sig}"
    );
    assert!(
        within(5, || !alive(qemu)),
        "QEMU (pid {qemu}) still runs after signal {sig} to the runner"
    );
    assert_eq!(status.unwrap().signal(), Some(sig), "{:?}", status);
}

#[test]
fn qemu_dies_when_the_runner_gets_sigterm() {
    qemu_dies_with_the_runner("sigterm", libc::SIGTERM);
}

#[test]
fn qemu_dies_when_the_runner_gets_sighup() {
    qemu_dies_with_the_runner("sighup", libc::SIGHUP);
}

#[test]
fn qemu_dies_when_the_runner_gets_sigint() {
    qemu_dies_with_the_runner("sigint", libc::SIGINT);
}

#[test]
fn qemu_dies_when_the_runner_gets_sigkill() {
    qemu_dies_with_the_runner("sigkill", libc::SIGKILL);
}

/// The lines of `out` as they come, from a thread.
fn lines_of(out: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out)
            .split(b'\n')
            .map_while(Result::ok)
        {
            if tx.send(text(&l)).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits up to `secs` for a line of `rx` that contains `want`; the lines seen until then.
fn wait_for_line(rx: &std::sync::mpsc::Receiver<String>, want: &str, secs: u64) -> (bool, String) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let mut seen = String::new();
    while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) => {
                seen.push_str(&l);
                seen.push('\n');
                if l.contains(want) {
                    return (true, seen);
                }
            }
            Err(_) => break,
        }
    }
    (false, seen)
}

#[test]
fn a_programs_output_shows_while_qemu_still_runs() {
    let mut p = start_hanging("stream-program", "booted\\n");
    let rx = lines_of(p.runner.stdout.take().unwrap());
    let (seen, out) = wait_for_line(&rx, "booted", 5);
    assert!(seen, "nothing shown while QEMU runs: {out:?}");
    assert!(alive(p.qemu.unwrap()));
}

#[test]
fn an_interrupted_run_shows_what_the_firmware_printed() {
    // The last line has no newline yet (a panic message being written, say).
    let mut p = start_hanging("stream-interrupted", "one\\ntwo");
    let mut out = p.runner.stdout.take().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    // SAFETY: kill(2) on the runner this test started.
    unsafe { libc::kill(p.runner.id() as i32, libc::SIGTERM) };
    let mut s = String::new();
    std::io::Read::read_to_string(&mut out, &mut s).unwrap();
    assert_eq!(s, "one\ntwo\n");
}

#[test]
fn a_hanging_tests_name_and_output_show_before_its_timeout() {
    let d = scratch("stream-test");
    let pidfile = d.join("qemu.pid");
    let q = fake_qemu(
        &d,
        "qemu-system-arm",
        &format!(
            "printf 'step 1\\n'; echo $$ > '{}'; exec /bin/sleep 600",
            pidfile.display()
        ),
    );
    let elf = suite_elf(&d, object::Architecture::Arm, &[("hangs", false)]);
    let runner = runner_cmd(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--timeout",
            "120",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    )
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let mut p = Procs { runner, qemu: None };
    let rx = lines_of(p.runner.stdout.take().unwrap());
    let (seen, out) = wait_for_line(&rx, "step 1", 5);
    p.qemu = std::fs::read_to_string(&pidfile)
        .ok()
        .and_then(|s| s.trim().parse().ok());
    assert!(seen, "nothing shown while the test runs: {out:?}");
    assert!(out.contains("test hangs ... \n    step 1\n"), "{out:?}");
}

#[test]
fn plain_text_between_defmt_frames_is_shown_and_later_frames_still_decode() {
    let d = scratch("resync");
    // Frame 1; an hprintln; frames 2 and 3; a panic-semihosting message at the end.
    let q = fake_qemu(
        &d,
        "qemu-system-arm",
        r"printf '\001\176\000hello from hprintln\n\002\176\000\003\176\000panicked at src/main.rs:5:5:\nboom\n'; exit 0",
    );
    let elf = defmt_elf(&d, &["first", "second", "third"]);
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    assert!(
        lines[0].contains("first") && lines[0].contains("INFO"),
        "{out}"
    );
    assert_eq!(lines[1], "hello from hprintln", "{out}");
    assert!(lines[2].contains("second"), "{out}");
    assert!(lines[3].contains("third"), "{out}");
    assert_eq!(
        lines[4..],
        ["panicked at src/main.rs:5:5:", "boom"],
        "{out}"
    );
}

#[test]
fn bytes_that_are_neither_frames_nor_text_are_skipped_up_to_the_next_frame() {
    let d = scratch("resync-garbage");
    let q = fake_qemu(
        &d,
        "qemu-system-arm",
        r"printf '\001\176\000\377\001\000\002\176\000'; exit 0",
    );
    let elf = defmt_elf(&d, &["first", "second"]);
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].contains("first"), "{out}");
    assert!(lines[1].contains("malformed defmt frame skipped"), "{out}");
    assert!(lines[2].contains("second"), "{out}");
}

#[test]
fn an_elf_of_another_architecture_is_refused_before_qemu_starts() {
    use object::Architecture as A;
    let d = scratch("wrong-arch");
    let started = d.join("qemu-started");
    let body = format!("echo yes > '{}'; exit 0", started.display());
    let cases = [
        (
            A::Arm,
            "riscv32imac-unknown-none-elf",
            "qemu-system-riscv32",
            false,
        ),
        (A::Riscv64, "thumbv7m-none-eabi", "qemu-system-arm", false),
        (
            A::Riscv32,
            "riscv64gc-unknown-none-elf",
            "qemu-system-riscv64",
            false,
        ),
        (
            A::Aarch64,
            "thumbv7em-none-eabihf",
            "qemu-system-arm",
            false,
        ),
        // qemu-system-aarch64 boots 32-bit Arm too; the rest are the right pairs.
        (A::Arm, "aarch64-unknown-none", "qemu-system-aarch64", true),
        (
            A::Riscv32,
            "riscv32imac-unknown-none-elf",
            "qemu-system-riscv32",
            true,
        ),
        (
            A::Riscv64,
            "riscv64gc-unknown-none-elf",
            "qemu-system-riscv64",
            true,
        ),
    ];
    for (arch, target, emulator, runs) in cases {
        let _ = std::fs::remove_file(&started);
        let q = fake_qemu(&d, emulator, &body);
        let elf = plain_elf_for(&d, arch, &[]);
        let o = runner(
            &d,
            &[
                "--target",
                target,
                "--qemu",
                q.to_str().unwrap(),
                elf.to_str().unwrap(),
            ],
            &[],
        );
        let err = text(&o.stderr);
        assert_eq!(o.status.success(), runs, "{arch:?} on {target}: {err}");
        assert_eq!(started.exists(), runs, "{arch:?} on {target}: {err}");
        if !runs {
            assert!(
                err.contains("ELF, but") && err.contains(emulator) && err.contains("--target"),
                "{arch:?} on {target}: {err}"
            );
        }
    }
    let q = fake_qemu(&d, "qemu-system-riscv32", &body);
    let o = runner(
        &d,
        &[
            "--target",
            "riscv32imac-unknown-none-elf",
            "--qemu",
            q.to_str().unwrap(),
            plain_elf_for(&d, A::Arm, &[]).to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        text(&o.stderr).contains("is a 32-bit Arm ELF, but qemu-system-riscv32 runs 32-bit RISC-V"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn a_file_that_is_not_an_elf_is_called_so() {
    let d = scratch("not-elf");
    let q = fake_qemu(&d, "qemu-system-arm", "exit 0");
    let cases: [(&str, &[u8], &str); 4] = [
        (
            "fw.hex",
            b":020000040000FA\r\n:1000000000000120A1000000F10100004F030000A3\r\n",
            "Intel HEX",
        ),
        (
            "fw.bin",
            &[0x00, 0x10, 0x00, 0x20, 0x09, 0x01, 0x00, 0x00],
            "raw binary",
        ),
        ("fw.txt", b"hello\n", "text file"),
        ("empty", b"", "empty"),
    ];
    for (name, bytes, what) in cases {
        let f = d.join(name);
        std::fs::write(&f, bytes).unwrap();
        let o = runner(
            &d,
            &[
                "--target",
                "thumbv7m-none-eabi",
                "--qemu",
                q.to_str().unwrap(),
                f.to_str().unwrap(),
            ],
            &[],
        );
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{name}");
        assert!(
            err.contains("is not an ELF file") && err.contains(what),
            "{name}: {err}"
        );
        assert!(!err.contains("file magic"), "{name}: {err}");
    }
}

#[test]
fn defmt_output_from_an_elf_without_a_defmt_table_is_called_so() {
    let d = scratch("no-table");
    // defmt frames, but the ELF given has no table (stripped, or the wrong file).
    let q = fake_qemu(
        &d,
        "qemu-system-arm",
        r"printf '\001\176\000\002\176\000'; exit 0",
    );
    let elf = plain_elf(&d, &[]);
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    let err = text(&o.stderr);
    assert!(err.contains("has no defmt table"), "{err}");
    // Text from a firmware without defmt is not such a case.
    let q = fake_qemu(
        &d,
        "qemu-system-arm",
        r"printf 'plain\n\033[1mbold\033[0m\n'; exit 0",
    );
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    assert!(!text(&o.stderr).contains("defmt"), "{}", text(&o.stderr));
}

/// A suite of three tests, `b` ignored, and a stand-in QEMU under which all pass.
fn three_tests(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let d = scratch(name);
    let q = fake_qemu(&d, "qemu-system-arm", "exit 0");
    let elf = suite_elf(
        &d,
        object::Architecture::Arm,
        &[("a", false), ("b", true), ("c", false)],
    );
    (d, q, elf)
}

/// The runner's stdout on the three-test suite with `extra` arguments (it must succeed).
fn on_three_tests(d: &Path, q: &Path, elf: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "--target",
        "thumbv7m-none-eabi",
        "--qemu",
        q.to_str().unwrap(),
        elf.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = runner(d, &args, &[]);
    assert!(o.status.success(), "{extra:?}: {}", text(&o.stderr));
    text(&o.stdout)
}

#[test]
fn listings_are_libtests() {
    let (d, q, elf) = three_tests("list");
    let list = |extra: &[&str]| on_three_tests(&d, &q, &elf, extra);
    assert_eq!(
        list(&["--list"]),
        "a: test\nb: test\nc: test\n\n3 tests, 0 benchmarks\n"
    );
    assert_eq!(
        list(&["--list", "--ignored"]),
        "b: test\n\n1 test, 0 benchmarks\n"
    );
    // cargo-nextest's two listings.
    assert_eq!(
        list(&["--list", "--format", "terse"]),
        "a: test\nb: test\nc: test\n"
    );
    assert_eq!(
        list(&["--list", "--format=terse", "--ignored"]),
        "b: test\n"
    );
    assert_eq!(list(&["--list", "-q", "c"]), "c: test\n");
    assert_eq!(list(&["--list", "nothing"]), "0 tests, 0 benchmarks\n");
    assert_eq!(
        list(&["--list", "--skip", "a", "--include-ignored"]),
        "b: test\nc: test\n\n2 tests, 0 benchmarks\n"
    );
}

#[test]
fn ignored_runs_only_the_ignored_tests_and_counts_as_libtest() {
    let (d, q, elf) = three_tests("ignored");
    let out = on_three_tests(&d, &q, &elf, &["--ignored"]);
    assert!(out.contains("\nrunning 1 test ("), "{out}");
    assert!(out.contains("test b ... ok"), "{out}");
    assert!(
        !out.contains("test a ") && !out.contains("test c "),
        "{out}"
    );
    assert!(
        out.contains("test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 2 filtered out;"),
        "{out}"
    );
    let out = on_three_tests(&d, &q, &elf, &[]);
    assert!(out.contains("\nrunning 3 tests ("), "{out}");
    assert!(out.contains("test b ... ignored\n"), "{out}");
    assert!(
        out.contains("test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out;"),
        "{out}"
    );
    let out = on_three_tests(&d, &q, &elf, &["--include-ignored", "--skip=c"]);
    assert!(
        out.contains("test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 1 filtered out;"),
        "{out}"
    );
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            elf.to_str().unwrap(),
            "--ignored",
            "--include-ignored",
        ],
        &[],
    );
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("mutually exclusive"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn json_output_is_refused_not_ignored() {
    let (d, q, elf) = three_tests("json");
    for format in [
        &["--format", "json"][..],
        &["--format=json"],
        &["--format", "junit"],
    ] {
        let mut args = vec![
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
            "-Z",
            "unstable-options",
        ];
        args.extend_from_slice(format);
        let o = runner(&d, &args, &[]);
        assert!(!o.status.success(), "{format:?}");
        let err = text(&o.stderr);
        assert!(err.contains("is not supported"), "{format:?}: {err}");
        assert!(text(&o.stdout).is_empty(), "{format:?}");
    }
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            elf.to_str().unwrap(),
            "--format",
            "fancy",
        ],
        &[],
    );
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("use pretty or terse"));
}

#[test]
fn a_plain_program_lists_no_tests_without_booting() {
    let d = scratch("list-plain");
    let started = d.join("qemu-started");
    let q = fake_qemu(
        &d,
        "qemu-system-arm",
        &format!("echo yes > '{}'; exit 0", started.display()),
    );
    let elf = plain_elf(&d, &[]);
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
            "--list",
        ],
        &[],
    );
    assert!(o.status.success());
    assert_eq!(text(&o.stdout), "0 tests, 0 benchmarks\n");
    assert!(!started.exists());
}

/// A folder of stand-in system tools for `install-qemu`: `apt-get` runs `apt_body`
/// (after answering `--version` and `update`), `sudo` runs its arguments, `chmod` and
/// `stat` are the real ones.
fn fake_apt(dir: &Path, apt_body: &str) -> PathBuf {
    let bin = dir.join("sysbin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, body) in [
        (
            "apt-get",
            format!("case \"$1\" in --version|update) exit 0;; esac\n{apt_body}"),
        ),
        ("sudo", "exec \"$@\"".to_string()),
    ] {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for tool in ["chmod", "stat"] {
        let real = ["/bin", "/usr/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap();
        let _ = std::os::unix::fs::symlink(real, bin.join(tool));
    }
    bin
}

#[test]
fn install_qemu_downloads_into_a_fresh_private_folder() {
    let d = scratch("install-tmp");
    let tmp = d.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let report = d.join("download-dir");
    // The dry run finds a conflict; the download records where it ran, then fails.
    let bin = fake_apt(
        &d,
        &format!(
            "case \"$1\" in\n\
             -s) echo 'The following packages have unmet dependencies:'; \
                 echo ' qemu-system-common : Breaks: qemu-utils (>= 1:8)'; \
                 echo 'E: Unable to correct problems, you have held broken packages.' >&2; exit 100;;\n\
             download) {{ pwd; stat -c %a .; }} > '{}'; exit 1;;\n\
             esac\nexit 1",
            report.display()
        ),
    );
    let mut c = runner_cmd(
        &d,
        &["install-qemu", "--dir", d.join("q").to_str().unwrap()],
        &[],
    );
    c.env("PATH", &bin).env("TMPDIR", &tmp);
    let child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o.stdout).contains("conflict"),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let got = std::fs::read_to_string(&report).expect("apt-get download did not run");
    let mut got = got.lines();
    let (folder, mode) = (PathBuf::from(got.next().unwrap()), got.next().unwrap());
    assert!(folder.starts_with(&tmp), "{}", folder.display());
    assert_eq!(mode, "700", "the download folder is not private");
    assert_ne!(
        folder.file_name().unwrap().to_str().unwrap(),
        format!("qemu-runner-debs-{pid}"),
        "a guessable name"
    );
    assert!(!folder.exists(), "the download folder was left behind");
}

#[test]
fn a_failed_dry_run_is_reported_as_what_it_is() {
    let d = scratch("install-dry-run");
    let downloaded = d.join("downloaded");
    let bin = fake_apt(
        &d,
        &format!(
            "case \"$1\" in\n\
             -s) echo 'E: Unable to locate package qemu-system-arm' >&2; exit 100;;\n\
             download) echo yes > '{}'; exit 1;;\n\
             esac\nexit 1",
            downloaded.display()
        ),
    );
    let mut c = runner_cmd(&d, &["install-qemu"], &[]);
    c.env("PATH", &bin);
    let o = c.output().unwrap();
    assert!(!o.status.success());
    let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
    assert!(
        all.contains("Unable to locate package qemu-system-arm"),
        "{all}"
    );
    assert!(!all.contains("conflict"), "{all}");
    assert!(!downloaded.exists(), "{all}");
}

/// Stand-ins for the four emulators `install-qemu` checks, in `dir/usr/bin`.
fn installed_qemu(dir: &Path) {
    let bin = dir.join("usr/bin");
    std::fs::create_dir_all(&bin).unwrap();
    for q in [
        "qemu-system-arm",
        "qemu-system-aarch64",
        "qemu-system-riscv32",
        "qemu-system-riscv64",
    ] {
        fake_qemu(&bin, q, "exit 0");
    }
}

/// Runs `install-qemu` with `args` from `d` where QEMU is already unpacked in `d/<dir>`:
/// what it recorded.
fn install_qemu_in(d: &Path, dir: &str, args: &[&str]) -> String {
    installed_qemu(&d.join(dir));
    let o = runner_cmd(d, args, &[]).current_dir(d).output().unwrap();
    assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    let recorded = d.join("config/qemu-embedded-runner/qemu-dir");
    std::fs::read_to_string(recorded).unwrap()
}

#[test]
fn install_qemu_records_a_relative_dir_as_absolute() {
    let d = scratch("install-relative");
    let got = install_qemu_in(&d, "rel", &["install-qemu", "--dir", "rel"]);
    assert_eq!(got.trim_end(), d.join("rel/usr/bin").display().to_string());
    // A later run from elsewhere (another workspace member) finds it.
    let elf = plain_elf(&d, &[]);
    let o = runner_cmd(
        &d,
        &["--target", "thumbv7m-none-eabi", elf.to_str().unwrap()],
        &[],
    )
    .current_dir("/")
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn install_qemu_takes_dir_equals_value() {
    let d = scratch("install-equals");
    let got = install_qemu_in(&d, "eq", &["install-qemu", "--dir=eq"]);
    assert_eq!(got.trim_end(), d.join("eq/usr/bin").display().to_string());
}

#[test]
fn install_qemu_refuses_dir_without_a_value() {
    let d = scratch("install-no-value");
    for args in [&["install-qemu", "--dir"][..], &["install-qemu", "--dir="]] {
        let o = runner_cmd(&d, args, &[]).current_dir(&d).output().unwrap();
        assert!(!o.status.success(), "{args:?}");
        let err = text(&o.stderr);
        assert!(err.contains("--dir needs a folder"), "{args:?}: {err}");
        assert!(
            !text(&o.stdout).contains("install:"),
            "{args:?}: went ahead"
        );
    }
    let o = runner_cmd(&d, &["install-qemu", "--directory", "x"], &[])
        .output()
        .unwrap();
    assert!(text(&o.stderr).contains("unknown option --directory"));
}

/// Options by name, each with whether it takes a value.
type OptionList = Vec<(String, bool)>;

/// The options of the README's table (its first column) and of `--help` (the option
/// column of its option lines).
fn documented_options(d: &Path) -> (OptionList, OptionList) {
    let readme = include_str!("../README.md");
    let table = readme
        .split_once("## Options")
        .and_then(|(_, rest)| rest.split_once("Known targets"))
        .map(|(t, _)| t)
        .expect("the README's option table");
    let mut from_readme = Vec::new();
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let first = row[1..].split(" | ").next().unwrap();
        for (i, seg) in first.split('`').enumerate() {
            let mut words = seg.split_whitespace();
            match words.next() {
                Some(w) if i % 2 == 1 && w.starts_with('-') => {
                    from_readme.push((w.to_string(), words.next().is_some()))
                }
                _ => {}
            }
        }
    }
    let help = text(&runner(d, &["--help"], &[]).stdout);
    let options = help.split_once("options (").expect("--help's options").1;
    let mut from_help = Vec::new();
    for line in options.lines().map(str::trim_start) {
        if !line.starts_with('-') {
            continue;
        }
        let column = line.split("  ").next().unwrap();
        for opt in column.trim_end_matches(',').split(", ") {
            let mut words = opt.split_whitespace();
            if let Some(w) = words.next().filter(|w| w.starts_with('-')) {
                from_help.push((w.to_string(), words.next().is_some()));
            }
        }
    }
    from_readme.sort();
    from_help.sort();
    (from_readme, from_help)
}

#[test]
fn the_readme_and_help_list_the_same_options_and_all_are_accepted() {
    let d = scratch("options");
    let (readme, help) = documented_options(&d);
    assert!(readme.len() > 20, "{readme:?}");
    assert_eq!(
        readme, help,
        "the README's options (left) and --help's (right)"
    );
    for (opt, takes_value) in &readme {
        let value = match opt.as_str() {
            "--format" => "pretty",
            "--smp" | "--timeout" | "--program-timeout" | "--retry-timeouts" | "--test-threads" => {
                "2"
            }
            _ => "x",
        };
        let mut args = vec!["--target", "thumbv7m-none-eabi", opt.as_str()];
        if *takes_value {
            args.push(value);
        }
        args.push("no-such.elf");
        let o = runner(&d, &args, &[]);
        let err = text(&o.stderr);
        assert!(!err.contains("unknown option"), "{args:?}: {err}");
        assert!(!err.contains("needs"), "{args:?}: {err}");
        if *takes_value && opt != "--qemu-arg" {
            // The `=` form too.
            let joined = format!("{opt}={value}");
            let o = runner(
                &d,
                &["--target", "thumbv7m-none-eabi", &joined, "no-such.elf"],
                &[],
            );
            let err = text(&o.stderr);
            assert!(!err.contains("unknown option"), "{joined}: {err}");
        }
    }
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "-Zunstable-options",
            "x.elf",
        ],
        &[],
    );
    assert!(
        !text(&o.stderr).contains("unknown option"),
        "{}",
        text(&o.stderr)
    );
}

// ---- issue #29 review: output, signals, process groups, ELF checks ----

/// [`fake_qemu`] whose body finds the system's tools (seq, yes, touch) on PATH.
fn fake_qemu_sys(dir: &Path, name: &str, body: &str) -> PathBuf {
    fake_qemu(dir, name, &format!("PATH=/usr/bin:/bin\n{body}"))
}

/// The runner on `elf` with the stand-in `q`, stdout and stderr piped, plain-program
/// timeout `secs`; stderr's lines come from a thread (so it never blocks).
fn spawn_runner(
    d: &Path,
    q: &Path,
    elf: &Path,
    secs: &str,
) -> (Procs, std::sync::mpsc::Receiver<String>) {
    let mut runner = runner_cmd(
        d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--program-timeout",
            secs,
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let err = lines_of(runner.stderr.take().unwrap());
    (Procs { runner, qemu: None }, err)
}

/// The pid `file` holds, once it does (within 10 s).
fn pid_in(file: &Path) -> i32 {
    let mut pid = None;
    assert!(
        within(10, || {
            pid = std::fs::read_to_string(file)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            pid.is_some()
        }),
        "{} was not written",
        file.display()
    );
    pid.unwrap()
}

/// Waits up to `secs` for the runner to end; its status.
fn ended_within(p: &mut Procs, secs: u64) -> Option<std::process::ExitStatus> {
    let mut status = None;
    within(secs, || {
        status = p.runner.try_wait().unwrap();
        status.is_some()
    });
    status
}

/// All that `rx` gives until it ends (or `secs` pass).
fn all_of(rx: &std::sync::mpsc::Receiver<String>, secs: u64) -> String {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let mut s = String::new();
    while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) => {
                s.push_str(&l);
                s.push('\n');
            }
            Err(_) => break,
        }
    }
    s
}

#[test]
fn a_slow_reader_of_stdout_gets_all_the_output() {
    // The consumer reads nothing for 3 s after QEMU has exited: nothing may be dropped.
    let d = scratch("slow-reader");
    let q = fake_qemu_sys(&d, "qemu-system-arm", "seq 1 200000; exit 0");
    let elf = plain_elf(&d, &[]);
    let (mut p, _err) = spawn_runner(&d, &q, &elf, "60");
    let mut out = p.runner.stdout.take().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    let mut s = String::new();
    std::io::Read::read_to_string(&mut out, &mut s).unwrap();
    let status = ended_within(&mut p, 10).expect("the runner did not end");
    assert_eq!(s.lines().count(), 200000, "lines shown");
    assert_eq!(s.lines().last(), Some("200000"));
    assert!(status.success(), "{status:?}");
}

#[test]
fn long_text_before_a_defmt_frame_is_decoded_in_linear_time() {
    // 200,000 lines of text glued to one frame took minutes when each newline started a
    // new decoding of the rest of the chunk.
    let d = scratch("linear-decode");
    let q = fake_qemu_sys(
        &d,
        "qemu-system-arm",
        r"seq 1 200000; printf '\002\176\000'; exit 0",
    );
    let elf = defmt_elf(&d, &["first", "second"]);
    let (mut p, _err) = spawn_runner(&d, &q, &elf, "60");
    let rx = lines_of(p.runner.stdout.take().unwrap());
    let status = ended_within(&mut p, 15).expect("decoding took more than 15 s");
    let out = all_of(&rx, 5);
    let lines: Vec<&str> = out.lines().collect();
    assert!(status.success(), "{status:?}");
    assert_eq!(
        lines.len(),
        200001,
        "{:?}",
        &lines[lines.len().saturating_sub(3)..]
    );
    assert_eq!(lines[199999], "200000");
    assert!(lines[200000].contains("second"), "{}", lines[200000]);
}

#[test]
fn text_without_a_newline_before_a_frame_is_shown_and_the_frame_decoded() {
    let d = scratch("no-newline-frame");
    let q = fake_qemu_sys(
        &d,
        "qemu-system-arm",
        r"printf '\001\176\000progress: 50%%\002\176\000\003\176\000'; exit 0",
    );
    let elf = defmt_elf(&d, &["first", "second", "third"]);
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].contains("first"), "{out}");
    assert_eq!(lines[1], "progress: 50%", "{out}");
    assert!(lines[2].contains("second"), "{out}");
    assert!(lines[3].contains("third"), "{out}");
}

/// Text the firmware wrote, while it waits with no newline or zero byte after it, must
/// show while QEMU runs.
fn partial_text_shows_while_qemu_runs(name: &str, defmt: bool, printf: &str, want: &str) {
    let d = scratch(name);
    let pidfile = d.join("qemu.pid");
    let q = fake_qemu_sys(
        &d,
        "qemu-system-arm",
        &format!(
            "echo $$ > '{}'; printf '{printf}'; exec /bin/sleep 600",
            pidfile.display()
        ),
    );
    let elf = if defmt {
        defmt_elf(&d, &["first"])
    } else {
        plain_elf(&d, &[])
    };
    let (mut p, _err) = spawn_runner(&d, &q, &elf, "120");
    p.qemu = Some(pid_in(&pidfile));
    let rx = lines_of(p.runner.stdout.take().unwrap());
    let (seen, out) = wait_for_line(&rx, want, 5);
    assert!(seen, "{want:?} not shown while QEMU runs: {out:?}");
    assert!(alive(p.qemu.unwrap()));
}

#[test]
fn text_without_a_zero_byte_after_it_shows_while_qemu_runs() {
    partial_text_shows_while_qemu_runs(
        "partial-defmt",
        true,
        r"\001\176\000waiting for IRQ\n",
        "waiting for IRQ",
    );
}

#[test]
fn a_last_line_without_a_newline_shows_while_qemu_runs() {
    partial_text_shows_while_qemu_runs(
        "partial-plain",
        false,
        r"step 1\nwaiting for IRQ...",
        "waiting for IRQ...",
    );
}

/// A QEMU that writes much more than a pipe holds, to a runner whose stdout nobody reads.
fn blocked_stdout(name: &str, secs: &str) -> (Procs, std::sync::mpsc::Receiver<String>) {
    let d = scratch(name);
    let pidfile = d.join("qemu.pid");
    let q = fake_qemu_sys(
        &d,
        "qemu-system-arm",
        &format!(
            "echo $$ > '{}'; seq 1 200000; exec /bin/sleep 600",
            pidfile.display()
        ),
    );
    let elf = plain_elf(&d, &[]);
    let (mut p, err) = spawn_runner(&d, &q, &elf, secs);
    p.qemu = Some(pid_in(&pidfile));
    // The runner's stdout fills up.
    std::thread::sleep(std::time::Duration::from_millis(500));
    (p, err)
}

#[test]
fn a_signal_is_acted_on_while_the_runners_stdout_is_blocked() {
    use std::os::unix::process::ExitStatusExt;
    let (mut p, err) = blocked_stdout("blocked-signal", "120");
    let qemu = p.qemu.unwrap();
    // SAFETY: kill(2) on the runner this test started.
    unsafe { libc::kill(p.runner.id() as i32, libc::SIGTERM) };
    let status = ended_within(&mut p, 10).expect("the runner ignored SIGTERM");
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    assert!(within(5, || !alive(qemu)), "QEMU still runs");
    assert!(all_of(&err, 2).contains("cut"), "the cut is not told");
}

#[test]
fn a_signal_after_qemu_exited_is_acted_on_while_stdout_is_blocked() {
    // QEMU has written everything and exited; the runner still holds output it cannot
    // write. A signal now must not wait for the timeout.
    use std::os::unix::process::ExitStatusExt;
    let d = scratch("blocked-after-exit");
    let pidfile = d.join("qemu.pid");
    let q = fake_qemu_sys(
        &d,
        "qemu-system-arm",
        &format!("echo $$ > '{}'; seq 1 30000; exit 0", pidfile.display()),
    );
    let (mut p, _err) = spawn_runner(&d, &q, &plain_elf(&d, &[]), "120");
    let qemu = pid_in(&pidfile);
    assert!(within(10, || !alive(qemu)), "QEMU did not exit");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        p.runner.try_wait().unwrap().is_none(),
        "nothing left to write"
    );
    // SAFETY: kill(2) on the runner this test started.
    unsafe { libc::kill(p.runner.id() as i32, libc::SIGTERM) };
    let status = ended_within(&mut p, 10).expect("the runner ignored SIGTERM");
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
}

#[test]
fn the_timeout_is_enforced_while_the_runners_stdout_is_blocked() {
    let (mut p, err) = blocked_stdout("blocked-timeout", "1");
    let qemu = p.qemu.unwrap();
    let status = ended_within(&mut p, 10).expect("the runner ran past its timeout");
    assert!(!status.success(), "{status:?}");
    assert!(within(5, || !alive(qemu)), "QEMU still runs");
    let err = all_of(&err, 2);
    assert!(err.contains("did not finish within 1 s"), "{err}");
}

/// A stand-in QEMU that is a wrapper script: it runs the "real" QEMU (a shell that
/// writes its pid to `inner.pid` and sleeps) without `exec`, and waits for it.
fn wrapper_qemu(d: &Path) -> (PathBuf, PathBuf) {
    let inner = d.join("inner.pid");
    let q = fake_qemu_sys(
        d,
        "qemu-system-arm",
        &format!(
            "echo started; /bin/sh -c 'echo $$ > \"{}\"; exec /bin/sleep 600'; echo after",
            inner.display()
        ),
    );
    (q, inner)
}

#[test]
fn the_real_qemu_behind_a_wrapper_dies_on_a_signal_to_the_runner() {
    let d = scratch("wrapper-signal");
    let (q, inner) = wrapper_qemu(&d);
    let (mut p, _err) = spawn_runner(&d, &q, &plain_elf(&d, &[]), "120");
    let real = pid_in(&inner);
    p.qemu = Some(real);
    // SAFETY: kill(2) on the runner this test started.
    unsafe { libc::kill(p.runner.id() as i32, libc::SIGTERM) };
    assert!(ended_within(&mut p, 10).is_some(), "the runner did not end");
    assert!(
        within(5, || !alive(real)),
        "the real QEMU (pid {real}) still runs"
    );
}

#[test]
fn the_real_qemu_behind_a_wrapper_dies_on_a_sigkill_of_the_runner() {
    let d = scratch("wrapper-sigkill");
    let (q, inner) = wrapper_qemu(&d);
    let (mut p, _err) = spawn_runner(&d, &q, &plain_elf(&d, &[]), "120");
    let real = pid_in(&inner);
    p.qemu = Some(real);
    // SAFETY: kill(2) on the runner this test started.
    unsafe { libc::kill(p.runner.id() as i32, libc::SIGKILL) };
    assert!(ended_within(&mut p, 10).is_some(), "the runner did not end");
    assert!(
        within(5, || !alive(real)),
        "the real QEMU (pid {real}) still runs"
    );
}

#[test]
fn the_real_qemu_behind_a_wrapper_dies_at_the_timeout() {
    let d = scratch("wrapper-timeout");
    let (q, inner) = wrapper_qemu(&d);
    let (mut p, err) = spawn_runner(&d, &q, &plain_elf(&d, &[]), "1");
    let real = pid_in(&inner);
    p.qemu = Some(real);
    let status = ended_within(&mut p, 10).expect("the runner did not end");
    assert!(!status.success());
    assert!(
        within(5, || !alive(real)),
        "the real QEMU (pid {real}) still runs"
    );
    assert!(all_of(&err, 2).contains("did not finish within 1 s"));
}

#[test]
fn a_helper_left_holding_qemus_pipes_does_not_hang_the_runner() {
    let d = scratch("helper-holds-pipes");
    let helper = d.join("helper.pid");
    let q = fake_qemu_sys(
        &d,
        "qemu-system-arm",
        &format!(
            "echo booted; /bin/sleep 600 & echo $! > '{}'; exit 0",
            helper.display()
        ),
    );
    let (mut p, _err) = spawn_runner(&d, &q, &plain_elf(&d, &[]), "120");
    let pid = pid_in(&helper);
    p.qemu = Some(pid);
    let rx = lines_of(p.runner.stdout.take().unwrap());
    let status = ended_within(&mut p, 10).expect("the runner hangs on the helper's pipes");
    assert!(status.success(), "{status:?}");
    assert_eq!(all_of(&rx, 2), "booted\n");
    assert!(within(5, || !alive(pid)), "QEMU's helper still runs");
}

#[test]
fn a_closed_stdout_ends_the_runner_without_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    let d = scratch("closed-stdout");
    let pidfile = d.join("qemu.pid");
    let q = fake_qemu_sys(
        &d,
        "qemu-system-arm",
        &format!(
            "echo $$ > '{}'; seq 1 200000; exec /bin/sleep 600",
            pidfile.display()
        ),
    );
    let (mut p, err) = spawn_runner(&d, &q, &plain_elf(&d, &[]), "120");
    let qemu = pid_in(&pidfile);
    p.qemu = Some(qemu);
    // As `| head -1`: one line read, then the pipe closed.
    let mut out = std::io::BufReader::new(p.runner.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    assert_eq!(first, "1\n");
    drop(out);
    let status = ended_within(&mut p, 10).expect("the runner did not end");
    let err = all_of(&err, 2);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(status.signal(), Some(libc::SIGPIPE), "{status:?}: {err}");
    assert!(within(5, || !alive(qemu)), "QEMU still runs");
}

#[test]
fn output_still_in_qemus_pipe_is_shown_before_dying_of_a_signal() {
    // Tests the drain of 087a0e6 in a way that cannot pass without it: the runner's
    // stdout is not read, so what QEMU wrote last is still in QEMU's pipe (the runner
    // holds at most a few chunks) when the signal comes; it must be shown once stdout
    // is read again.
    use std::os::unix::process::ExitStatusExt;
    let d = scratch("drain-on-signal");
    let written = d.join("written");
    let q = fake_qemu_sys(
        &d,
        "qemu-system-arm",
        &format!(
            "yes line | head -n 20000; echo END-OF-OUTPUT; touch '{}'; exec /bin/sleep 600",
            written.display()
        ),
    );
    let (mut p, _err) = spawn_runner(&d, &q, &plain_elf(&d, &[]), "120");
    assert!(
        within(10, || written.exists()),
        "QEMU did not write its output"
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    // SAFETY: kill(2) on the runner this test started.
    unsafe { libc::kill(p.runner.id() as i32, libc::SIGTERM) };
    let mut s = String::new();
    std::io::Read::read_to_string(&mut p.runner.stdout.take().unwrap(), &mut s).unwrap();
    let status = ended_within(&mut p, 10).expect("the runner did not end");
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    assert_eq!(s.lines().count(), 20001);
    assert_eq!(s.lines().last(), Some("END-OF-OUTPUT"));
}

// 7d5f713 (a signal between `Watch::begin` and the spawn is handled once QEMU exists)
// has no test here: the window is the time `fork`/`exec` of QEMU take, and nothing
// outside the runner can send a signal inside it on purpose (before it, the default
// action ends the runner with no QEMU started; after it, the ordinary path runs, which
// `qemu_dies_when_the_runner_gets_sigterm` covers). A test that sent signals at random
// times would pass or fail by chance.

#[test]
fn a_stripped_defmt_elf_runs_and_is_told_its_table_cannot_be_read() {
    use object::write::Object;
    use object::{Architecture, BinaryFormat, Endianness, SectionKind};
    let d = scratch("stripped-defmt");
    // `.defmt` kept, no symbols at all (what strip and lld --strip-all leave).
    let mut o = Object::new(BinaryFormat::Elf, Architecture::Arm, Endianness::Little);
    let sec = o.add_section(Vec::new(), b".defmt".to_vec(), SectionKind::ReadOnlyData);
    o.append_section_data(sec, &[0u8; 4], 1);
    let elf = d.join("stripped.elf");
    std::fs::write(&elf, o.write().unwrap()).unwrap();
    let started = d.join("started");
    let q = fake_qemu_sys(
        &d,
        "qemu-system-arm",
        &format!(
            r"touch '{}'; printf '\001\176\000'; exit 0",
            started.display()
        ),
    );
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(started.exists(), "QEMU was not started: {err}");
    assert!(
        err.contains("stripped") && err.contains("defmt table cannot be read"),
        "{err}"
    );
}

#[test]
fn a_big_endian_elf_is_refused_before_qemu_starts() {
    use object::write::Object;
    use object::{Architecture, BinaryFormat, Endianness};
    let d = scratch("big-endian");
    let mut o = Object::new(BinaryFormat::Elf, Architecture::Arm, Endianness::Big);
    let data = o.section_id(object::write::StandardSection::Data);
    o.append_section_data(data, &[0u8; 16], 4);
    let elf = d.join("be.elf");
    std::fs::write(&elf, o.write().unwrap()).unwrap();
    let started = d.join("started");
    let q = fake_qemu_sys(
        &d,
        "qemu-system-arm",
        &format!("touch '{}'; exit 0", started.display()),
    );
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    let err = text(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(!started.exists(), "QEMU was started");
    assert!(err.contains("big-endian"), "{err}");
}

#[test]
fn a_damaged_suite_elf_is_an_error_not_a_panic() {
    use object::write::{Object, Symbol, SymbolSection};
    use object::{Architecture, BinaryFormat, Endianness, SectionKind};
    use object::{SymbolFlags, SymbolKind, SymbolScope};
    let d = scratch("damaged-suite");
    let mut o = Object::new(BinaryFormat::Elf, Architecture::Arm, Endianness::Little);
    let sec = o.add_section(Vec::new(), b".embedded_test".to_vec(), SectionKind::Data);
    o.append_section_data(sec, &1u32.to_le_bytes(), 4);
    for (name, value) in [
        ("EMBEDDED_TEST_VERSION".to_string(), 0),
        // A test whose three words lie past the section's end.
        (
            r#"{"name":"x","ignored":false,"should_panic":false}"#.to_string(),
            4,
        ),
    ] {
        o.add_symbol(Symbol {
            name: name.into_bytes(),
            value,
            size: 4,
            kind: SymbolKind::Data,
            scope: SymbolScope::Linkage,
            weak: false,
            section: SymbolSection::Section(sec),
            flags: SymbolFlags::None,
        });
    }
    let elf = d.join("suite.elf");
    std::fs::write(&elf, o.write().unwrap()).unwrap();
    let q = fake_qemu_sys(&d, "qemu-system-arm", "exit 0");
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            elf.to_str().unwrap(),
        ],
        &[],
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("damaged embedded-test table"), "{err}");
}

#[test]
fn without_home_no_shared_folder_is_searched_for_qemu_or_installed_into() {
    let d = scratch("no-home");
    // A qemu-system-arm planted where the old default led without HOME ($TMPDIR).
    let tmp = d.join("tmp");
    let planted = tmp.join("qemu-embedded-runner/qemu/usr/bin");
    std::fs::create_dir_all(&planted).unwrap();
    let ran = d.join("planted-ran");
    fake_qemu_sys(
        &planted,
        "qemu-system-arm",
        &format!("touch '{}'; exit 0", ran.display()),
    );
    let elf = plain_elf(&d, &[]);
    let run = |args: &[&str]| {
        let mut c = runner_cmd(&d, args, &[("TMPDIR", tmp.to_str().unwrap())]);
        c.env_remove("HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CONFIG_HOME");
        c.output().unwrap()
    };
    let o = run(&["--target", "thumbv7m-none-eabi", elf.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(!ran.exists(), "the planted QEMU ran");
    assert!(text(&o.stderr).contains("not found"), "{}", text(&o.stderr));
    let o = run(&["install-qemu"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--dir"), "{}", text(&o.stderr));
    assert!(!ran.exists(), "the planted QEMU ran");
}

#[test]
fn listing_a_suites_tests_needs_no_qemu() {
    let d = scratch("list-without-qemu");
    let elf = suite_elf(&d, object::Architecture::Arm, &[("a", false), ("b", true)]);
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            elf.to_str().unwrap(),
            "--list",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "a: test\nb: test\n\n2 tests, 0 benchmarks\n"
    );
}

#[test]
fn qemu_killed_by_a_signal_is_reported_by_the_signals_name() {
    let d = scratch("qemu-signalled");
    let q = fake_qemu_sys(&d, "qemu-system-arm", "echo crashing; kill -SEGV $$");
    let o = runner(
        &d,
        &[
            "--target",
            "thumbv7m-none-eabi",
            "--qemu",
            q.to_str().unwrap(),
            plain_elf(&d, &[]).to_str().unwrap(),
        ],
        &[],
    );
    let err = text(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("killed by SIGSEGV"), "{err}");
    assert!(!err.contains("-1"), "{err}");
}

/// `--retry-timeouts 1`: a test whose first run hangs past its timeout runs once more,
/// and that run's verdict counts; without the option the same hang fails; a test that
/// fails (not a timeout) is never run again.
#[test]
fn a_timed_out_test_is_retried_only_when_asked_and_a_failure_never() {
    let run = |name: &str, first: &str, retry: bool| {
        let d = scratch(name);
        let runs = d.join("runs");
        let q = fake_qemu(
            &d,
            "qemu-system-arm",
            &format!(
                "echo run >> '{r}'; if [ -e '{m}' ]; then exit 0; fi; : > '{m}'; {first}; exit 0",
                r = runs.display(),
                m = d.join("ran-once").display()
            ),
        );
        let elf = suite_elf(&d, object::Architecture::Arm, &[("flaky", false)]);
        let mut args = vec![
            "--target",
            "thumbv7m-none-eabi",
            "--timeout",
            "1",
            "--qemu",
            q.to_str().unwrap(),
        ];
        if retry {
            args.extend(["--retry-timeouts", "1"]);
        }
        args.push(elf.to_str().unwrap());
        let o = runner(&d, &args, &[]);
        let n = std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .count();
        (o.status.success(), text(&o.stdout) + &text(&o.stderr), n)
    };
    let (ok, out, n) = run("retry-hang", "exec /bin/sleep 600", true);
    assert!(ok && n == 2, "{n} runs: {out}");
    assert!(
        out.contains("timed out after 1 s: running it again"),
        "{out}"
    );
    let (ok, out, n) = run("no-retry-hang", "exec /bin/sleep 600", false);
    assert!(
        !ok && n == 1 && out.contains("timed out after 1 s"),
        "{n} runs: {out}"
    );
    let (ok, out, n) = run("retry-failure", "exit 3", true);
    assert!(!ok && n == 1, "a failure was retried ({n} runs): {out}");
}
