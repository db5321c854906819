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
//!    AddressSanitizer; the header also compiles as C++, alone and beside the standard
//!    headers, and the example with -Werror for each embedded core (not with
//!    `--host-only`);
//! 4. a C firmware runs in QEMU through the runner, built with arm-none-eabi-gcc for a
//!    Cortex-M4 and with riscv64-unknown-elf-gcc for a two-hart RV64 (`ffi/tests/
//!    firmware*`), and its broken variant must be caught (skipped with `--host-only`).
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
    c.current_dir(workspace_root())
        .args(["build", "-q", "-p", "rcuref-ffi", "--profile", "ffi"]);
    if let Some(t) = target {
        c.args(["--target", t]);
    }
    run(&mut c).map(|_| ())
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

/// As [`cc`], with the archive (and its `rcuref_config.h`) of directory `lib`.
fn cc_with(
    root: &Path,
    lib: &Path,
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
        .arg(lib);
    for s in sources {
        c.arg(c_dir.join(s));
    }
    c.arg(lib.join("librcuref_ffi.a"))
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

/// Runs a C firmware through the runner in QEMU; its exit status decides.
fn in_qemu(target: &str, elf: &Path) -> Result<(), String> {
    crate::qemu::run(&[
        "--target".into(),
        target.into(),
        "--program-timeout".into(),
        "120".into(),
        elf.display().to_string(),
    ])
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
    t.check(
        "the queue's white-box tests (a 4-bit grace-period counter: a callback aged a lap)",
        run(Command::new("cargo")
            .current_dir(&root)
            .env("RUSTFLAGS", "--cfg rcuref_mutants")
            .env("CARGO_TARGET_DIR", root.join("target/ffi-test"))
            .args(["test", "-q", "-p", "rcuref-ffi", "--lib"]))
        .and_then(|out| {
            if out.contains("test result: ok. 1 passed") {
                Ok(())
            } else {
                Err(format!("expected one passing test:\n{out}"))
            }
        }),
    );
    for target in targets {
        t.check(
            &format!("static library: {target}"),
            build_lib(Some(target)),
        );
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
            firmware(&root, fw, &elf, &[]).and_then(|_| in_qemu(fw.target, &elf)),
        );
        t.check(
            &format!(
                "C firmware ({}), negative control: the interrupt frees without a grace \
                 period, must be caught",
                fw.target
            ),
            firmware(&root, fw, &broken, &["-DBROKEN"]).and_then(|_| in_qemu(fw.target, &broken)),
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
