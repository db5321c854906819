//! Installs what a fresh machine lacks: rustup targets and components, a nightly with
//! Miri, and (for the embedded targets) QEMU. Each check is cheap when already present.
//! The helpers (a quiet check, a loud install, apt-get, rustup targets) and QEMU's
//! installer are the runner crate's (`qemu_embedded_runner::install`), shared with its
//! `install-qemu`.

pub use qemu_embedded_runner::install::rustup_targets as targets;
use qemu_embedded_runner::install::{apt_install, loud, quiet_ok};
use std::process::{Command, Stdio};

/// Host tools: a nightly with Miri, when `miri` is asked for.
pub fn host_tools(miri: bool) -> Result<(), String> {
    // The lint steps (a minimal rustup profile has neither).
    if !quiet_ok("cargo", &["fmt", "--version"]) || !quiet_ok("cargo", &["clippy", "--version"]) {
        loud("rustup", &["component", "add", "rustfmt", "clippy"])?;
    }
    if miri && !quiet_ok("cargo", &["+nightly", "miri", "--version"]) {
        loud(
            "rustup",
            &[
                "toolchain",
                "install",
                "nightly",
                "--profile",
                "minimal",
                "--component",
                "miri,rust-src",
            ],
        )?;
        loud(
            "rustup",
            &["+nightly", "component", "add", "miri", "rust-src"],
        )?;
        loud("cargo", &["+nightly", "miri", "setup"])?;
    }
    Ok(())
}

/// The MSRV declared in the library's Cargo.toml (`rust-version`).
pub fn msrv() -> Result<String, String> {
    let manifest = std::fs::read_to_string(crate::steps::workspace_root().join("Cargo.toml"))
        .map_err(|e| format!("Cargo.toml: {e}"))?;
    manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("rust-version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .map(str::to_string)
        .ok_or_else(|| "no rust-version in Cargo.toml".into())
}

/// The MSRV toolchain (minimal profile) with one embedded target, for the MSRV check.
pub fn msrv_toolchain(version: &str, target: &str) -> Result<(), String> {
    if quiet_ok("rustup", &["run", version, "rustc", "--version"])
        && Command::new("rustup")
            .args([
                "+".to_string() + version,
                "target".into(),
                "list".into(),
                "--installed".into(),
            ])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .any(|l| l.trim() == target)
            })
            .unwrap_or(false)
    {
        return Ok(());
    }
    loud(
        "rustup",
        &[
            "toolchain",
            "install",
            version,
            "--profile",
            "minimal",
            "--target",
            target,
        ],
    )
}

/// The folder where QEMU is unpacked when the system has none (git-ignored).
pub fn qemu_dir() -> std::path::PathBuf {
    crate::steps::workspace_root().join(".tools").join("qemu")
}

/// Makes qemu-system-arm/riscv32/riscv64 available: the runner crate's installer
/// (`qemu_embedded_runner::install_qemu`), unpacking into this checkout's `.tools/qemu`
/// when the system's packages cannot be installed cleanly.
pub fn qemu() -> Result<(), String> {
    qemu_embedded_runner::install_qemu(Some(&qemu_dir())).map(|_| ())
}

/// Debian packages the benchmarks need: valgrind (instruction counts) and liburcu-dev
/// (the liburcu memb harness). Installed with apt-get where a check finds them missing;
/// elsewhere the error says what to install.
pub fn bench_tools() -> Result<(), String> {
    let mut missing = Vec::new();
    if !quiet_ok("valgrind", &["--version"]) {
        missing.push("valgrind");
    }
    if !has_liburcu() {
        missing.push("liburcu-dev");
    }
    apt_install(&missing, "the benchmarks")
}

/// Whether liburcu-dev's memb flavour is there to link against.
fn has_liburcu() -> bool {
    quiet_ok(
        "sh",
        &[
            "-c",
            "ls /usr/lib/*/liburcu-memb.so /usr/lib/liburcu-memb.so 2>/dev/null | grep -q .",
        ],
    )
}

/// liburcu-dev alone (`cargo xtask bench --c-read`), with apt-get where it is missing.
pub fn liburcu_dev() -> Result<(), String> {
    if has_liburcu() {
        return Ok(());
    }
    apt_install(&["liburcu-dev"], "the C read-section benchmark")
}

/// picolibc's specs for riscv64-unknown-elf-gcc (Debian's `picolibc-riscv64-unknown-elf`).
pub const PICOLIBC_RISCV_SPECS: &str = "/usr/lib/picolibc/riscv64-unknown-elf/picolibc.specs";
/// Where arm-none-eabi-gcc finds newlib's <string.h> (Debian's `libnewlib-arm-none-eabi`).
pub const NEWLIB_ARM_STRING_H: &str = "/usr/lib/arm-none-eabi/include/string.h";

/// The C API's tests (`cargo xtask ffi`): gcc and g++ (Debian's gcc brings the
/// ThreadSanitizer and AddressSanitizer runtimes), and with `firmware` Debian's
/// arm-none-eabi-gcc, newlib's headers for it (the FreeRTOS example's kernel includes
/// <string.h>), riscv64-unknown-elf-gcc and picolibc for it (about 90 MB to download).
pub fn c_tools(firmware: bool) -> Result<(), String> {
    let mut tools = vec![("gcc", "gcc"), ("g++", "g++")];
    if firmware {
        tools.push(("arm-none-eabi-gcc", "gcc-arm-none-eabi"));
        tools.push(("riscv64-unknown-elf-gcc", "gcc-riscv64-unknown-elf"));
    }
    let mut missing: Vec<&str> = tools
        .into_iter()
        .filter(|(cmd, _)| !quiet_ok(cmd, &["--version"]))
        .map(|(_, pkg)| pkg)
        .collect();
    // The RISC-V compiler has no C library of its own: the C page's example includes
    // <stdlib.h> (built with picolibc's specs).
    if firmware && !std::path::Path::new(PICOLIBC_RISCV_SPECS).exists() {
        missing.push("picolibc-riscv64-unknown-elf");
    }
    if firmware && !std::path::Path::new(NEWLIB_ARM_STRING_H).exists() {
        missing.push("libnewlib-arm-none-eabi");
    }
    apt_install(&missing, "the C API's tests")
}

/// Where herdtools7 is unpacked (git-ignored).
pub fn herd_dir() -> std::path::PathBuf {
    crate::steps::workspace_root().join(".tools").join("herd")
}

/// A command that runs herd7 with its models: `HERD7` (a herd7 on this machine, with its
/// own models) when set, else the herdtools7 unpacked in `.tools/herd`, run through the
/// glibc it came with (Debian's herdtools7 is built for a newer glibc than bookworm's).
pub fn herd7() -> Result<Command, String> {
    if let Some(h) = std::env::var_os("HERD7") {
        return Ok(Command::new(h));
    }
    let root = herd_dir();
    let lib = root.join("usr/lib/x86_64-linux-gnu");
    let mut c = Command::new(lib.join("ld-linux-x86-64.so.2"));
    c.arg("--library-path")
        .arg(&lib)
        .arg(root.join("usr/bin/herd7"))
        .arg("-set-libdir")
        .arg(root.join("usr/share/herdtools7/herd"));
    Ok(c)
}

/// herdtools7 for the litmus suite, from Debian's `forky` suite (bookworm has none),
/// fetched with a private apt configuration (the system's sources and lists are not
/// touched) and unpacked into `.tools/herd` with the glibc and libgmp it needs. About
/// 40 MB, seconds. `HERD7` names a herd7 of your own instead.
pub fn herd() -> Result<(), String> {
    let ok = |mut c: Command| {
        c.arg("-version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if ok(herd7()?) {
        return Ok(());
    }
    if std::env::var_os("HERD7").is_some() {
        return Err("HERD7 is set but does not run `-version`".into());
    }
    if std::env::consts::ARCH != "x86_64" || !quiet_ok("apt-get", &["--version"]) {
        return Err(
            "the litmus suite needs herd7 (herdtools7 7.58 or later): this machine cannot \
             fetch Debian's x86_64 package, so install herdtools7 (opam install herdtools7) \
             and set HERD7 to its herd7"
                .into(),
        );
    }
    let tmp = std::env::temp_dir().join(format!("rcuref-herd-{}", std::process::id()));
    let parts = tmp.join("sources");
    for d in [
        parts.clone(),
        tmp.join("lists/partial"),
        tmp.join("cache/archives/partial"),
    ] {
        std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    // The machine's own Debian mirror and keyring, suite `forky`.
    let sources =
        std::fs::read_to_string("/etc/apt/sources.list.d/debian.sources").unwrap_or_default();
    let uri = sources
        .lines()
        .filter_map(|l| l.trim().strip_prefix("URIs:"))
        .map(str::trim)
        .find(|u| !u.contains("security"))
        .unwrap_or("http://deb.debian.org/debian")
        .to_string();
    std::fs::write(
        parts.join("forky.sources"),
        format!(
            "Types: deb\nURIs: {uri}\nSuites: forky\nComponents: main\n\
             Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        ),
    )
    .map_err(|e| e.to_string())?;
    // apt drops privileges to `_apt` for downloads: let it write there.
    let _ = Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(&tmp)
        .status();
    let o = |k: &str, v: &std::path::Path| format!("-o{k}={}", v.display());
    let opts = [
        o("Dir::Etc::sourcelist", std::path::Path::new("/dev/null")),
        o("Dir::Etc::sourceparts", &parts),
        o("Dir::State::Lists", &tmp.join("lists")),
        o("Dir::Cache", &tmp.join("cache")),
    ];
    let apt = |args: &[&str]| -> Result<(), String> {
        let mut all: Vec<&str> = opts.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        println!(
            "install: apt-get {} (private sources: Debian forky)",
            args.join(" ")
        );
        let st = Command::new("apt-get")
            .args(&all)
            .current_dir(&tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("apt-get: {e}"))?;
        if st.success() {
            Ok(())
        } else {
            Err(format!("apt-get {} failed ({st})", args.join(" ")))
        }
    };
    apt(&["-q", "update"])?;
    apt(&["-q", "download", "herdtools7", "libc6", "libgmp10"])?;
    let root = herd_dir();
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).map_err(|e| e.to_string())?;
    for entry in std::fs::read_dir(&tmp).map_err(|e| e.to_string())? {
        let p = entry.map_err(|e| e.to_string())?.path();
        if p.extension().is_some_and(|e| e == "deb") {
            let st = Command::new("dpkg")
                .arg("-x")
                .arg(&p)
                .arg(&root)
                .status()
                .map_err(|e| format!("dpkg: {e}"))?;
            if !st.success() {
                return Err(format!("dpkg -x {} failed", p.display()));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    // Keep herd7, its models and the libraries; the rest of herdtools7 is not used.
    for entry in std::fs::read_dir(root.join("usr/bin")).map_err(|e| e.to_string())? {
        let p = entry.map_err(|e| e.to_string())?.path();
        if p.file_name().is_some_and(|n| n != "herd7") {
            let _ = std::fs::remove_file(p);
        }
    }
    let _ = std::fs::remove_dir_all(root.join("usr/share/herdtools7/litmus"));
    let _ = std::fs::remove_dir_all(root.join("usr/share/doc"));
    if ok(herd7()?) {
        Ok(())
    } else {
        Err(format!(
            "herd7 unpacked into {} does not run",
            root.display()
        ))
    }
}

/// `llvm-objdump` of the toolchain (rustup component `llvm-tools`), installed if missing.
pub fn llvm_objdump() -> Result<std::path::PathBuf, String> {
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("rustc: {e}"))?;
    let host = Command::new("rustc")
        .args(["--print", "host-tuple"])
        .output()
        .map_err(|e| format!("rustc: {e}"))?;
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    let host = String::from_utf8_lossy(&host.stdout).trim().to_string();
    let tool = std::path::Path::new(&sysroot)
        .join("lib/rustlib")
        .join(host)
        .join("bin/llvm-objdump");
    if !tool.exists() {
        loud("rustup", &["component", "add", "llvm-tools"])?;
    }
    if tool.exists() {
        Ok(tool)
    } else {
        Err(format!("no llvm-objdump at {}", tool.display()))
    }
}

/// cargo-mutants `version`, if cargo has no `mutants` (about two minutes here).
pub fn cargo_mutants(version: &str) -> Result<(), String> {
    if quiet_ok("cargo", &["mutants", "--version"]) {
        return Ok(());
    }
    loud(
        "cargo",
        &["install", "cargo-mutants", "--locked", "--version", version],
    )
}
