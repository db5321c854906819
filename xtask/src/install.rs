//! Installs what a fresh machine lacks: rustup targets and components, a nightly with
//! Miri, and (for the embedded targets) QEMU. Each check is cheap when already present.

use std::process::{Command, Stdio};

fn quiet_ok(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn loud(program: &str, args: &[&str]) -> Result<(), String> {
    println!("install: {program} {}", args.join(" "));
    let st = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("{program}: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("`{program} {}` failed ({st})", args.join(" ")))
    }
}

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

/// The rustup targets of the on-target tests.
pub fn targets(targets: &[&str]) -> Result<(), String> {
    let out = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| format!("rustup: {e}"))?;
    let have = String::from_utf8_lossy(&out.stdout).to_string();
    let missing: Vec<&str> = targets
        .iter()
        .copied()
        .filter(|t| !have.lines().any(|l| l.trim() == *t))
        .collect();
    if !missing.is_empty() {
        let mut args = vec!["target", "add"];
        args.extend(missing);
        loud("rustup", &args)?;
    }
    Ok(())
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
    if !quiet_ok(
        "sh",
        &[
            "-c",
            "ls /usr/lib/*/liburcu-memb.so /usr/lib/liburcu-memb.so 2>/dev/null | grep -q .",
        ],
    ) {
        missing.push("liburcu-dev");
    }
    if missing.is_empty() {
        return Ok(());
    }
    if !quiet_ok("apt-get", &["--version"]) {
        return Err(format!(
            "the benchmarks need {} (no apt-get here: install them with your package manager)",
            missing.join(" and ")
        ));
    }
    let sudo = !quiet_ok("sh", &["-c", "[ \"$(id -u)\" = 0 ]"]);
    let mut args: Vec<&str> = Vec::new();
    let prog = if sudo {
        args.push("apt-get");
        "sudo"
    } else {
        "apt-get"
    };
    let mut update = args.clone();
    update.extend(["update", "-q"]);
    loud(prog, &update)?;
    args.extend(["install", "-y", "-q"]);
    args.extend(&missing);
    loud(prog, &args)
}
