//! `cargo xtask header` writes `ffi/include/rcuref.h` with cbindgen; `cargo xtask ffi`
//! (a step of `cargo xtask test`) checks the C API:
//!
//! 1. the committed header is what cbindgen makes of `ffi/src` now;
//! 2. the static library builds for the host and every target of the matrix;
//! 3. on the host, gcc builds the C suite against it and runs it: `api.c` (every
//!    function, every error code), `ceiling.c` (nesting to a slot's ceiling), `torture.c` and `pool_torture.c` plain and under
//!    ThreadSanitizer, their broken variants (which must be caught),
//!    `ctx_close_signal.c` (a timer's signal closes the context its code is locking) and
//!    its control against an archive built with `--cfg rcuref_mutants` whose lock skips
//!    its owner re-check (which must be caught), and docs/c-api.md's
//!    example under
//!    AddressSanitizer; `debug_objects.c` (a callback's `arg` queued twice is refused)
//!    against a host archive built with the feature `debug-objects`, and against the
//!    plain one, where the double queue must go through (its negative control);
//!    `heavy_install.c` (`rcuref_heavy_install`, `rcuref_fence_mode`) against archives
//!    with the features `auto-fence` and `membarrier` and against the plain one, and
//!    `torture.c` with membarrier installed from C (the heavy mode); the
//!    header also compiles as C++, alone and beside the standard
//!    headers, and the example with -Werror for each embedded core (not with
//!    `--host-only`);
//! 4. a C firmware runs in QEMU through the runner, built with arm-none-eabi-gcc for a
//!    Cortex-M4 and with riscv64-unknown-elf-gcc for a two-hart RV64 (`ffi/tests/
//!    firmware*`), and its broken variant must be caught (skipped with `--host-only`).
//! 5. the FreeRTOS example (`examples/freertos/`, the vendored kernel) runs in QEMU on
//!    mps2-an385 (Cortex-M3) and mps2-an386 (Cortex-M4F), and its broken variant must be
//!    caught (skipped with `--host-only`).
//!
//! It also checks that the example in docs/c-api.md is `ffi/tests/c/example.c` as is.

use crate::steps::workspace_root;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The header cbindgen makes of `ffi/` now.
fn generate() -> Result<String, String> {
    let dir = workspace_root().join("ffi");
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml"))
        .map_err(|e| format!("ffi/cbindgen.toml: {e}"))?;
    let bindings = cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
        .map_err(|e| format!("cbindgen: {e}"))?;
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).map_err(|e| e.to_string())
}

fn header_path() -> PathBuf {
    workspace_root().join("ffi/include/rcuref.h")
}

/// `cargo xtask header`: writes the header.
pub fn header() -> Result<(), String> {
    let h = generate()?;
    std::fs::write(header_path(), h).map_err(|e| e.to_string())?;
    println!("header: wrote ffi/include/rcuref.h");
    Ok(())
}

struct Tally {
    passed: u32,
    failed: Vec<String>,
}

impl Tally {
    fn check(&mut self, name: &str, r: Result<(), String>) {
        match r {
            Ok(()) => {
                println!("  ok: {name}");
                self.passed += 1;
            }
            Err(e) => {
                println!("  FAILED: {name}: {e}");
                self.failed.push(name.to_string());
            }
        }
    }
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{cmd:?} failed ({}):\n{text}", out.status))
    }
}

pub(crate) fn build_lib(target: Option<&str>) -> Result<(), String> {
    let mut c = Command::new("cargo");
    // Always the workspace's `target/`, where the checks below look for the archive,
    // whatever `CARGO_TARGET_DIR` the caller has set (with one set, 9 checks failed
    // to find it).
    c.current_dir(workspace_root())
        .env("CARGO_TARGET_DIR", workspace_root().join("target"))
        .args(["build", "-q", "-p", "rcuref-ffi", "--profile", "ffi"]);
    if let Some(t) = target {
        c.args(["--target", t]);
    }
    run(&mut c).map(|_| ())
}

/// Fails if the archive's `rcuref_ffi` objects (the C API and the library code
/// instantiated for it) name a `core::panicking` function: a bounds check or an assert
/// that a caller might reach would link core's panic formatting into every C binary
/// (5.7 KB on Cortex-M before they were taken out) and abort where C expects a code.
fn no_panic_path(archive: &Path) -> Result<(), String> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(archive).map_err(|e| format!("{}: {e}", archive.display()))?;
    let ar = object::read::archive::ArchiveFile::parse(&*data).map_err(|e| e.to_string())?;
    let mut found = Vec::new();
    let mut members = 0;
    for m in ar.members() {
        let m = m.map_err(|e| e.to_string())?;
        let name = String::from_utf8_lossy(m.name()).into_owned();
        if !name.starts_with("rcuref_ffi") || !name.ends_with(".o") {
            continue;
        }
        members += 1;
        let obj = object::File::parse(m.data(&*data).map_err(|e| e.to_string())?)
            .map_err(|e| format!("{name}: {e}"))?;
        for sym in obj.symbols().filter(|s| s.is_undefined()) {
            let n = sym.name().unwrap_or("");
            if n.contains("panicking") || n.contains("panic_fmt") {
                found.push(n.to_owned());
            }
        }
    }
    found.sort();
    found.dedup();
    match (members, found.is_empty()) {
        (0, _) => Err("no rcuref_ffi object in the archive".into()),
        (_, true) => Ok(()),
        _ => Err(format!("panic paths: {}", found.join(", "))),
    }
}

/// The target directory of the host archive with the feature `debug-objects`: its own,
/// so the plain archive in `target/ffi/` that the other checks link stays plain.
const DEBUG_OBJECTS_TARGET: &str = "target/ffi-debug-objects";
/// The same for the archives with the features `auto-fence` and `membarrier`.
const AUTO_FENCE_TARGET: &str = "target/ffi-auto-fence";
const MEMBARRIER_TARGET: &str = "target/ffi-membarrier";
/// The auto-fence archive of the mutants build (`--cfg rcuref_mutants`).
const MUTANTS_AUTO_TARGET: &str = "target/ffi-mutants-auto";

/// The host archive with the feature `debug-objects`, in `DEBUG_OBJECTS_TARGET/ffi/`.
fn build_debug_objects_lib(root: &Path) -> Result<(), String> {
    build_featured_lib(root, "debug-objects", DEBUG_OBJECTS_TARGET, None)
}

/// The archive with `feature`, in `target_dir/ffi/` for the host (`target` `None`) or
/// `target_dir/<target>/ffi/`.
fn build_featured_lib(
    root: &Path,
    feature: &str,
    target_dir: &str,
    target: Option<&str>,
) -> Result<(), String> {
    build_lib_with(root, feature, target_dir, target, None)
}

/// [`build_featured_lib`] with `RUSTFLAGS` set to `rustflags`, if any.
fn build_lib_with(
    root: &Path,
    feature: &str,
    target_dir: &str,
    target: Option<&str>,
    rustflags: Option<&str>,
) -> Result<(), String> {
    let mut c = Command::new("cargo");
    c.current_dir(root).args([
        "build",
        "-q",
        "-p",
        "rcuref-ffi",
        "--profile",
        "ffi",
        "--features",
        feature,
        "--target-dir",
        target_dir,
    ]);
    if let Some(t) = target {
        c.args(["--target", t]);
    }
    if let Some(f) = rustflags {
        c.env("RUSTFLAGS", f);
    }
    run(&mut c).map(|_| ())
}

/// The host archive with the feature `auto-fence` built with `--cfg rcuref_mutants`
/// (`heavy_install.c`'s race and its control), in `MUTANTS_AUTO_TARGET/ffi`.
fn build_mutants_auto_fence_lib(root: &Path) -> Result<(), String> {
    build_lib_with(
        root,
        "auto-fence",
        MUTANTS_AUTO_TARGET,
        None,
        Some("--cfg rcuref_mutants"),
    )
}

/// gcc `source` against the archive in `lib_dir` into `out` with `flags`, then runs it
/// with `args`.
fn cc_and_run(
    root: &Path,
    lib_dir: &Path,
    source: &str,
    out: &Path,
    flags: &[&str],
    args: &[&str],
) -> Result<(), String> {
    cc_with(root, lib_dir, &[source], out, flags).and_then(|_| exec(out, args))
}

/// Runs `bin`, which must exit with `status` (a negative control's way of saying that
/// it saw what it looks for, not that it failed to build or crashed).
fn exec_expecting(bin: &Path, status: i32) -> Result<(), String> {
    exec_expecting_args(bin, &[], status)
}

/// [`exec_expecting`] with `args`.
fn exec_expecting_args(bin: &Path, args: &[&str], status: i32) -> Result<(), String> {
    let out = Command::new(bin)
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    print!("{}", indent(&text));
    match out.status.code() {
        Some(s) if s == status => Ok(()),
        _ => Err(format!(
            "{} exited with {}, not {status}",
            bin.display(),
            out.status
        )),
    }
}

/// The host archive built with `--cfg rcuref_mutants` (`ffi/src/mutants.rs`'s switches,
/// for the negative controls), in its own target directory: `target/ffi-mutants/ffi`.
fn build_mutants_lib(root: &Path) -> Result<(), String> {
    run(Command::new("cargo")
        .current_dir(root)
        .env("RUSTFLAGS", "--cfg rcuref_mutants")
        .env("CARGO_TARGET_DIR", root.join("target/ffi-mutants"))
        .args(["build", "-q", "-p", "rcuref-ffi", "--profile", "ffi"]))
    .map(|_| ())
}

/// gcc `sources` with the header and the host archive into `out`, with `extra` flags.
fn cc(root: &Path, sources: &[&str], out: &Path, extra: &[&str]) -> Result<(), String> {
    cc_with(root, &root.join("target/ffi"), sources, out, extra)
}

/// As [`cc`], with the archive (and its `rcuref_config.h`) in `lib_dir`.
fn cc_with(
    root: &Path,
    lib_dir: &Path,
    sources: &[&str],
    out: &Path,
    extra: &[&str],
) -> Result<(), String> {
    let c_dir = root.join("ffi/tests/c");
    let mut c = Command::new("gcc");
    c.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g"])
        .args(extra)
        .arg("-I")
        .arg(root.join("ffi/include"))
        .arg("-I")
        .arg(&c_dir)
        // rcuref_config.h, written beside the archive by ffi/build.rs.
        .arg("-I")
        .arg(lib_dir);
    for s in sources {
        c.arg(c_dir.join(s));
    }
    c.arg(lib_dir.join("librcuref_ffi.a"))
        .args(["-lpthread", "-o"])
        .arg(out);
    run(&mut c).map(|_| ())
}

/// Runs `bin` with `args`; its output is printed.
fn exec(bin: &Path, args: &[&str]) -> Result<(), String> {
    let out = run(Command::new(bin).args(args))?;
    print!("{}", indent(&out));
    Ok(())
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("      {l}\n")).collect()
}

/// The example block of docs/c-api.md, between its markers.
fn page_example(root: &Path) -> Result<String, String> {
    let page = std::fs::read_to_string(root.join("docs/c-api.md")).map_err(|e| e.to_string())?;
    let start = page
        .find("<!-- example.c begins -->\n```c\n")
        .ok_or("docs/c-api.md: no example.c block")?;
    let body = &page[start..];
    let body = &body[body.find("```c\n").unwrap() + 5..];
    let end = body
        .find("```\n<!-- example.c ends -->")
        .ok_or("docs/c-api.md: the example.c block does not end")?;
    Ok(body[..end].to_string())
}

/// A C firmware target: the Rust target, the C compiler, its flags, the start-up dir.
struct Firmware {
    target: &'static str,
    cc: &'static str,
    flags: &'static [&'static str],
    startup: &'static str,
}

const FIRMWARE: [Firmware; 2] = [
    Firmware {
        target: "thumbv7em-none-eabihf",
        cc: "arm-none-eabi-gcc",
        flags: &[
            "-mcpu=cortex-m4",
            "-mthumb",
            "-mfloat-abi=hard",
            "-mfpu=fpv4-sp-d16",
        ],
        startup: "ffi/tests/firmware",
    },
    Firmware {
        target: "riscv64gc-unknown-none-elf",
        cc: "riscv64-unknown-elf-gcc",
        flags: &[
            "-march=rv64gc",
            "-mabi=lp64d",
            "-mcmodel=medany",
            "-DSECOND_HART",
            "-Wl,--no-warn-rwx-segments",
        ],
        startup: "ffi/tests/firmware-riscv",
    },
];

/// The embedded C compilers and flags of the matrix's cores, for compiling the C page's
/// example (a `-Werror` build: `int32_t` is `long` on arm-none-eabi, so a hook type
/// spelled with it rejects the page's `int` hook there).
const EMBEDDED_CC: [(&str, &[&str]); 6] = [
    ("arm-none-eabi-gcc", &["-mcpu=cortex-m0", "-mthumb"]),
    ("arm-none-eabi-gcc", &["-mcpu=cortex-m3", "-mthumb"]),
    (
        "arm-none-eabi-gcc",
        &[
            "-mcpu=cortex-m4",
            "-mthumb",
            "-mfloat-abi=hard",
            "-mfpu=fpv4-sp-d16",
        ],
    ),
    (
        "arm-none-eabi-gcc",
        &[
            "-mcpu=cortex-m33",
            "-mthumb",
            "-mfloat-abi=hard",
            "-mfpu=fpv5-sp-d16",
        ],
    ),
    (
        "riscv64-unknown-elf-gcc",
        &["--specs=picolibc.specs", "-march=rv32imac", "-mabi=ilp32"],
    ),
    (
        "riscv64-unknown-elf-gcc",
        &[
            "--specs=picolibc.specs",
            "-march=rv64gc",
            "-mabi=lp64d",
            "-mcmodel=medany",
        ],
    ),
];

/// The C firmware (`ffi/tests/firmware/firmware.c` with `fw`'s start-up), with
/// `defines`.
fn firmware(root: &Path, fw: &Firmware, out: &Path, defines: &[&str]) -> Result<(), String> {
    let dir = root.join(fw.startup);
    let mut c = Command::new(fw.cc);
    c.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-g"])
        .args(fw.flags)
        .args(["-ffreestanding", "-nostdlib", "-nostartfiles"])
        .args(defines)
        .arg("-I")
        .arg(root.join("ffi/include"))
        .arg("-T")
        .arg(dir.join("link.ld"))
        .arg(dir.join("startup.c"))
        .arg(root.join("ffi/tests/firmware/firmware.c"))
        .arg(root.join(format!("target/{}/ffi/librcuref_ffi.a", fw.target)))
        .args([
            "-lgcc",
            "-Wl,--gc-sections",
            "-Wl,--no-warn-execstack",
            "-o",
        ])
        .arg(out);
    run(&mut c).map(|_| ())
}

/// Runs a C firmware through the runner in QEMU (on `machine`, else the target's); its
/// exit status decides.
fn in_qemu(target: &str, machine: Option<&str>, elf: &Path) -> Result<(), String> {
    let mut args: Vec<String> = vec!["--target".into(), target.into()];
    if let Some(m) = machine {
        args.extend(["--machine".into(), m.into()]);
    }
    args.extend([
        "--program-timeout".into(),
        "120".into(),
        elf.display().to_string(),
    ]);
    crate::qemu::run(&args)
}

/// The FreeRTOS example (`examples/freertos/`) on one core: the archive's target, the
/// QEMU machine (the runner's for thumbv7m-none-eabi is lm3s6965evb, which has no CMSDK
/// timers), the kernel's port and the core's flags.
struct Rtos {
    target: &'static str,
    machine: &'static str,
    port: &'static str,
    flags: &'static [&'static str],
}

const FREERTOS: [Rtos; 2] = [
    Rtos {
        target: "thumbv7m-none-eabi",
        machine: "mps2-an385",
        port: "ARM_CM3",
        flags: &["-mcpu=cortex-m3", "-mthumb"],
    },
    Rtos {
        target: "thumbv7em-none-eabihf",
        machine: "mps2-an386",
        port: "ARM_CM4F",
        flags: &[
            "-mcpu=cortex-m4",
            "-mthumb",
            "-mfloat-abi=hard",
            "-mfpu=fpv4-sp-d16",
        ],
    },
];

/// The FreeRTOS example for `rtos`, with `defines`: the vendored kernel's files as they
/// are (with its warnings, not -Werror), the application's with -Werror; linked with
/// --gc-sections, without which the archive's 64-bit counts would ask for a critical
/// section the application does not need (docs/c-api.md).
fn freertos(root: &Path, rtos: &Rtos, out: &Path, defines: &[&str]) -> Result<(), String> {
    let ex = root.join("examples/freertos");
    let kernel = ex.join("vendor/FreeRTOS-Kernel");
    let port = kernel.join("portable/GCC").join(rtos.port);
    let objs = out.with_extension("objs");
    std::fs::create_dir_all(&objs).map_err(|e| e.to_string())?;
    let sources = [
        (kernel.join("tasks.c"), false),
        (kernel.join("list.c"), false),
        (kernel.join("queue.c"), false),
        (port.join("port.c"), false),
        (kernel.join("portable/MemMang/heap_4.c"), false),
        (ex.join("startup.c"), true),
        (ex.join("main.c"), true),
    ];
    let mut link = Command::new("arm-none-eabi-gcc");
    link.args(rtos.flags)
        .args(["-nostdlib", "-nostartfiles", "-T"])
        .arg(ex.join("link.ld"));
    for (src, own) in &sources {
        let obj = objs.join(src.file_stem().unwrap()).with_extension("o");
        let mut c = Command::new("arm-none-eabi-gcc");
        c.args([
            "-std=c11",
            "-O2",
            "-g",
            "-ffunction-sections",
            "-fdata-sections",
        ])
        .args(rtos.flags)
        .args(if *own {
            &["-Wall", "-Wextra", "-Werror"][..]
        } else {
            &["-Wall"][..]
        })
        .args(defines)
        .arg("-I")
        .arg(&ex)
        .arg("-I")
        .arg(kernel.join("include"))
        .arg("-I")
        .arg(&port)
        .arg("-I")
        .arg(root.join("ffi/include"))
        // rcuref_config.h, beside the archive.
        .arg("-I")
        .arg(root.join(format!("target/{}/ffi", rtos.target)))
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(&obj);
        run(&mut c)?;
        link.arg(obj);
    }
    link.arg(root.join(format!("target/{}/ffi/librcuref_ffi.a", rtos.target)))
        .args([
            "-lgcc",
            "-Wl,--gc-sections",
            "-Wl,--no-warn-execstack",
            "-Wl,--no-warn-rwx-segments",
            "-o",
        ])
        .arg(out);
    run(&mut link).map(|_| ())
}

/// `cargo xtask ffi [--host-only]`.
pub fn check(targets: &[&str], host_only: bool) -> Result<(), String> {
    crate::install::c_tools(!host_only)?;
    crate::install::targets(targets)?;
    if !host_only {
        crate::install::qemu()?;
    }
    let root = workspace_root();
    let mut t = Tally {
        passed: 0,
        failed: Vec::new(),
    };
    t.check(
        "header: ffi/include/rcuref.h is what cbindgen makes of ffi/src",
        {
            generate().and_then(|h| {
                let have = std::fs::read_to_string(header_path()).unwrap_or_default();
                if have == h {
                    Ok(())
                } else {
                    Err("differs: run `cargo xtask header` and review the diff".into())
                }
            })
        },
    );
    t.check(
        "docs/c-api.md shows ffi/tests/c/example.c as it is",
        page_example(&root).and_then(|e| {
            let file = std::fs::read_to_string(root.join("ffi/tests/c/example.c"))
                .map_err(|e| e.to_string())?;
            if e == file {
                Ok(())
            } else {
                Err("the page's copy differs from the file".into())
            }
        }),
    );
    t.check("static library: host", build_lib(None));
    for target in targets {
        t.check(
            &format!("static library: {target}"),
            build_lib(Some(target)),
        );
        if !target.contains("linux") {
            t.check(
                &format!("static library: {target}: no panic path in rcuref_ffi's code"),
                no_panic_path(&root.join(format!("target/{target}/ffi/librcuref_ffi.a"))),
            );
        }
    }
    let bin = root.join("target/ffi-tests");
    std::fs::create_dir_all(&bin).map_err(|e| e.to_string())?;
    t.check(
        "api.c: every function and error code",
        cc(&root, &["api.c"], &bin.join("api"), &["-O2"]).and_then(|_| exec(&bin.join("api"), &[])),
    );
    t.check(
        "ceiling.c: a section nested to its slot's ceiling is refused, not stuck (2^30 locks)",
        cc(&root, &["ceiling.c"], &bin.join("ceiling"), &["-O2"])
            .and_then(|_| exec(&bin.join("ceiling"), &[])),
    );
    t.check(
        "sleep.c: a writer asleep through rcuref_set_sleep is woken by the reader's unlock",
        cc(
            &root,
            &["sleep.c"],
            &bin.join("sleep"),
            &["-O2", "-pthread"],
        )
        .and_then(|_| exec(&bin.join("sleep"), &[])),
    );
    t.check(
        "sleep.c, control: no wake sent, the writer sleeps out its bound (the test tells \
         a wake from a poll)",
        exec(&bin.join("sleep"), &["nowake"]),
    );
    t.check(
        "torture.c: readers, references, synchronize and call_rcu (2 s)",
        cc(&root, &["torture.c"], &bin.join("torture"), &["-O2"])
            .and_then(|_| exec(&bin.join("torture"), &["2000"])),
    );
    t.check(
        "torture.c, negative control: retired without a grace period, must be caught",
        exec(&bin.join("torture"), &["2000", "broken"]),
    );
    t.check(
        "pool_torture.c: lookups with re-check while objects are reused at once (2 s)",
        cc(
            &root,
            &["pool_torture.c"],
            &bin.join("pool_torture"),
            &["-O2"],
        )
        .and_then(|_| exec(&bin.join("pool_torture"), &["2000"])),
    );
    t.check(
        "pool_torture.c, negative control: lookups without the re-check, must be caught",
        exec(&bin.join("pool_torture"), &["2000", "no-recheck"]),
    );
    t.check(
        "ctx_close_signal.c: a timer's signal closes the context its code is locking, \
         every lock it closes refused (3 s)",
        cc(
            &root,
            &["ctx_close_signal.c"],
            &bin.join("ctx_close_signal"),
            &["-O2"],
        )
        .and_then(|_| exec(&bin.join("ctx_close_signal"), &["3000"])),
    );
    t.check(
        "ctx_close_signal.c, negative control: the mutants archive's lock without its \
         owner re-check, must be caught (and pass with it)",
        build_mutants_lib(&root)
            .and_then(|_| {
                cc_with(
                    &root,
                    &root.join("target/ffi-mutants/ffi"),
                    &["ctx_close_signal.c"],
                    &bin.join("ctx_close_signal-mutants"),
                    &["-O2", "-DMUTANTS"],
                )
            })
            .and_then(|_| exec(&bin.join("ctx_close_signal-mutants"), &["2000"]))
            .and_then(|_| {
                exec(
                    &bin.join("ctx_close_signal-mutants"),
                    &["3000", "skip-recheck"],
                )
            }),
    );
    t.check(
        "pool_torture.c under ThreadSanitizer (1 s)",
        cc(
            &root,
            &["pool_torture.c"],
            &bin.join("pool_torture-tsan"),
            &["-O1", "-fsanitize=thread"],
        )
        .and_then(|_| exec(&bin.join("pool_torture-tsan"), &["1000"])),
    );
    t.check(
        "torture.c under ThreadSanitizer (1 s)",
        cc(
            &root,
            &["torture.c"],
            &bin.join("torture-tsan"),
            &["-O1", "-fsanitize=thread"],
        )
        .and_then(|_| exec(&bin.join("torture-tsan"), &["1000"])),
    );
    t.check(
        "docs/c-api.md's example under AddressSanitizer",
        cc(
            &root,
            &["example_test.c"],
            &bin.join("example"),
            &["-O1", "-fsanitize=address", "-fno-omit-frame-pointer"],
        )
        .and_then(|_| exec(&bin.join("example"), &[])),
    );
    let debug_lib = root.join(DEBUG_OBJECTS_TARGET).join("ffi");
    t.check(
        "debug_objects.c: with feature debug-objects, an arg queued twice is refused",
        build_debug_objects_lib(&root)
            .and_then(|_| {
                cc_with(
                    &root,
                    &debug_lib,
                    &["debug_objects.c"],
                    &bin.join("debug_objects"),
                    &["-O2"],
                )
            })
            .and_then(|_| exec(&bin.join("debug_objects"), &[])),
    );
    t.check(
        "debug_objects.c, negative control: the plain archive queues it twice, must be caught",
        cc(
            &root,
            &["debug_objects.c"],
            &bin.join("debug_objects-plain"),
            &["-O2"],
        )
        .and_then(|_| exec_expecting(&bin.join("debug_objects-plain"), 3)),
    );
    let auto_lib = root.join(AUTO_FENCE_TARGET).join("ffi");
    let heavy_auto = bin.join("heavy_install-auto");
    let c_flags: &[&str] = &["-O2", "-pthread"];
    t.check(
        "heavy_install.c: with feature auto-fence, a fence installed at boot makes the \
         mode heavy and grace periods call it; a second install and a null one refused",
        build_featured_lib(&root, "auto-fence", AUTO_FENCE_TARGET, None).and_then(|_| {
            cc_and_run(
                &root,
                &auto_lib,
                "heavy_install.c",
                &heavy_auto,
                c_flags,
                &["install"],
            )
        }),
    );
    t.check(
        "heavy_install.c: with feature auto-fence, a mode decided full first (by \
         rcuref_fence_mode, by a grace period) refuses the install",
        exec(&heavy_auto, &["decided"]).and_then(|_| exec(&heavy_auto, &["gp-first"])),
    );
    let race_bin = bin.join("heavy_install-race");
    t.check(
        "heavy_install.c race: a second install between the first's claim and its \
         install is refused only once the first's fence is in; the mode heavy",
        build_mutants_auto_fence_lib(&root).and_then(|_| {
            cc_and_run(
                &root,
                &root.join(MUTANTS_AUTO_TARGET).join("ffi"),
                "heavy_install.c",
                &race_bin,
                &["-O2", "-pthread", "-DMUTANTS"],
                &["race"],
            )
        }),
    );
    t.check(
        "heavy_install.c race, control: the first version's install (refused before \
         anything is installed, the mode then decided full) must be caught",
        exec_expecting_args(&race_bin, &["race-old"], 3),
    );
    let torture_heavy = bin.join("torture-heavy");
    t.check(
        "torture.c in the heavy mode: membarrier installed from C, readers with a \
         compiler barrier (2 s)",
        cc_and_run(
            &root,
            &auto_lib,
            "torture.c",
            &torture_heavy,
            &["-O2", "-DHEAVY_INSTALL"],
            &["2000"],
        ),
    );
    t.check(
        "torture.c in the heavy mode, negative control: retired without a grace period, \
         must be caught",
        exec(&torture_heavy, &["1000", "broken"]),
    );
    t.check(
        "heavy_install.c: with feature membarrier the mode is found heavy at run time \
         and an install is refused",
        build_featured_lib(&root, "membarrier", MEMBARRIER_TARGET, None).and_then(|_| {
            cc_and_run(
                &root,
                &root.join(MEMBARRIER_TARGET).join("ffi"),
                "heavy_install.c",
                &bin.join("heavy_install-membarrier"),
                c_flags,
                &["found"],
            )
        }),
    );
    t.check(
        "heavy_install.c against the plain archive: the install answers ENOTSUP, the mode \
         stays full",
        cc(
            &root,
            &["heavy_install.c"],
            &bin.join("heavy_install-plain"),
            c_flags,
        )
        .and_then(|_| exec(&bin.join("heavy_install-plain"), &["plain"])),
    );
    t.check(
        "the archive with feature auto-fence builds for thumbv7em-none-eabihf (firmware \
         installs its IPI fence)",
        build_featured_lib(
            &root,
            "auto-fence",
            AUTO_FENCE_TARGET,
            Some("thumbv7em-none-eabihf"),
        ),
    );
    for fw in FIRMWARE
        .iter()
        .filter(|f| !host_only && targets.contains(&f.target))
    {
        let (elf, broken) = (
            bin.join(format!("firmware-{}.elf", fw.target)),
            bin.join(format!("firmware-{}-broken.elf", fw.target)),
        );
        t.check(
            &format!(
                "C firmware in QEMU ({}): a thread reader, an interrupt reader, call_rcu \
                 from the interrupt{}",
                fw.target,
                if fw.flags.contains(&"-DSECOND_HART") {
                    ", a reader on the second hart"
                } else {
                    ""
                }
            ),
            firmware(&root, fw, &elf, &[]).and_then(|_| in_qemu(fw.target, None, &elf)),
        );
        t.check(
            &format!(
                "C firmware ({}), negative control: the interrupt frees without a grace \
                 period, must be caught",
                fw.target
            ),
            firmware(&root, fw, &broken, &["-DBROKEN"])
                .and_then(|_| in_qemu(fw.target, None, &broken)),
        );
    }
    for rtos in FREERTOS
        .iter()
        .filter(|r| !host_only && targets.contains(&r.target))
    {
        let (elf, broken) = (
            bin.join(format!("freertos-{}.elf", rtos.target)),
            bin.join(format!("freertos-{}-broken.elf", rtos.target)),
        );
        t.check(
            &format!(
                "FreeRTOS example in QEMU ({}, {}): four reader tasks, a writer, three \
                 interrupt handlers nesting on the interrupted task's context, call_rcu \
                 and synchronize",
                rtos.machine, rtos.target
            ),
            freertos(&root, rtos, &elf, &[])
                .and_then(|_| in_qemu(rtos.target, Some(rtos.machine), &elf)),
        );
        t.check(
            &format!(
                "FreeRTOS example ({}), negative control: the writer frees without a grace \
                 period, must be caught",
                rtos.machine
            ),
            freertos(&root, rtos, &broken, &["-DBROKEN"])
                .and_then(|_| in_qemu(rtos.target, Some(rtos.machine), &broken)),
        );
        let no_wake = bin.join(format!("freertos-{}-no-wake.elf", rtos.target));
        t.check(
            &format!(
                "FreeRTOS example ({}), control: no wake sent, so no sleep of the writer \
                 ends by one (the run above counts its wakes)",
                rtos.machine
            ),
            freertos(&root, rtos, &no_wake, &["-DNO_WAKE"])
                .and_then(|_| in_qemu(rtos.target, Some(rtos.machine), &no_wake)),
        );
    }
    if !host_only {
        for (cc, flags) in EMBEDDED_CC {
            t.check(
                &format!(
                    "docs/c-api.md's example compiles with -Werror: {cc} {}",
                    flags.join(" ")
                ),
                run(Command::new(cc)
                    .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-c"])
                    .args(flags.iter())
                    .arg("-I")
                    .arg(root.join("ffi/include"))
                    .arg(root.join("ffi/tests/c/example.c"))
                    .arg("-o")
                    .arg(bin.join("example-embedded.o")))
                .map(|_| ()),
            );
        }
    }
    // As C++, alone and with the standard headers before and after it (a declaration
    // of the C library's own functions in the header clashes with them).
    for (name, prelude, postlude) in [
        ("alone", "", ""),
        (
            "after the standard headers",
            "#include <cstdlib>\n#include <cstdint>\n",
            "",
        ),
        (
            "before the standard headers",
            "",
            "#include <cstdlib>\n#include <cstdint>\n",
        ),
    ] {
        t.check(&format!("the header compiles as C++ ({name})"), {
            let src = bin.join("header.cpp");
            std::fs::write(
                &src,
                format!(
                    "{prelude}#include \"rcuref.h\"\n{postlude}\
                     int main() {{ return RCUREF_OK; }}\n"
                ),
            )
            .map_err(|e| e.to_string())
            .and_then(|_| {
                run(Command::new("g++")
                    .args(["-std=c++17", "-Wall", "-Werror", "-fsyntax-only", "-I"])
                    .arg(root.join("ffi/include"))
                    .arg(&src))
                .map(|_| ())
            })
        });
    }
    println!(
        "test result: {}. {} passed; {} failed",
        if t.failed.is_empty() { "ok" } else { "FAILED" },
        t.passed,
        t.failed.len()
    );
    if t.failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "ffi: {} check(s) failed: {}",
            t.failed.len(),
            t.failed.join("; ")
        ))
    }
}
