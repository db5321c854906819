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

/// The folder where QEMU is unpacked when the system has none (git-ignored).
fn tools_dir() -> std::path::PathBuf {
    crate::steps::workspace_root().join(".tools")
}

/// The path of a QEMU binary: on PATH, or in the project's `.tools/qemu`.
pub fn qemu_binary(name: &str) -> Result<String, String> {
    let local = tools_dir().join("qemu/usr/bin").join(name);
    if local.exists() {
        return Ok(local.display().to_string());
    }
    if quiet_ok(name, &["--version"]) {
        return Ok(name.to_string());
    }
    Err(format!(
        "{name} not found: run `cargo xtask test`, which installs it"
    ))
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

const QEMU_PACKAGES: &[&str] = &["qemu-system-arm", "qemu-system-misc", "qemu-system-data"];

/// Makes qemu-system-arm/riscv32/riscv64 available.
///
/// On a clean Debian machine a plain `apt-get install` works. On this project's image a
/// backported `qemu-utils` 10.x declares Breaks on the 7.2 `qemu-system-common`, so the
/// plain install would fail or remove packages: then we download the .debs, unpack them
/// into `.tools/qemu` (never touching the system's packages) and install only their
/// runtime libraries. `apt-get -s` decides which route applies.
pub fn qemu() -> Result<(), String> {
    if [
        "qemu-system-arm",
        "qemu-system-riscv32",
        "qemu-system-riscv64",
    ]
    .iter()
    .all(|q| qemu_binary(q).is_ok())
    {
        return Ok(());
    }
    if !quiet_ok("apt-get", &["--version"]) {
        return Err("QEMU is missing and this is not a Debian-like system: install qemu-system-arm and qemu-system-misc (QEMU >= 7.2)".into());
    }
    let sudo: &[&str] = if is_root() { &[] } else { &["sudo"] };
    let apt = |args: &[&str]| -> Result<(), String> {
        let mut full: Vec<&str> = sudo.to_vec();
        full.push("apt-get");
        full.extend_from_slice(args);
        loud(full[0], &full[1..])
    };
    let _ = apt(&["update", "-qq"]);
    let mut sim = vec![
        "apt-get",
        "-s",
        "install",
        "-y",
        "--no-remove",
        "qemu-system-arm",
        "qemu-system-misc",
    ];
    let clean = Command::new(sim.remove(0))
        .args(&sim)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if clean {
        return apt(&[
            "install",
            "-y",
            "--no-install-recommends",
            "qemu-system-arm",
            "qemu-system-misc",
        ]);
    }
    println!("install: the system's QEMU packages conflict with installed ones; unpacking QEMU into .tools/qemu");
    let dl = std::env::temp_dir().join(format!("rcuref-qemu-debs-{}", std::process::id()));
    std::fs::create_dir_all(&dl).map_err(|e| e.to_string())?;
    // apt-get download runs as the unprivileged _apt user: the folder must be writable by it.
    let _ = Command::new("chmod").arg("777").arg(&dl).status();
    let st = Command::new("apt-get")
        .arg("download")
        .args(QEMU_PACKAGES)
        .current_dir(&dl)
        .status()
        .map_err(|e| e.to_string())?;
    if !st.success() {
        return Err("apt-get download of the QEMU packages failed".into());
    }
    let dest = tools_dir().join("qemu");
    std::fs::create_dir_all(&dest).map_err(|e| e.to_string())?;
    let mut libs: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(&dl).map_err(|e| e.to_string())? {
        let deb = entry.map_err(|e| e.to_string())?.path();
        if deb.extension().and_then(|e| e.to_str()) != Some("deb") {
            continue;
        }
        loud(
            "dpkg",
            &[
                "-x",
                &deb.display().to_string(),
                &dest.display().to_string(),
            ],
        )?;
        let depends = Command::new("dpkg-deb")
            .args(["-f", &deb.display().to_string(), "Depends"])
            .output()
            .map_err(|e| e.to_string())?;
        for dep in String::from_utf8_lossy(&depends.stdout).split(',') {
            let name = dep.split_whitespace().next().unwrap_or("").trim();
            if !name.is_empty() && !name.starts_with("qemu-") && !libs.iter().any(|l| l == name) {
                libs.push(name.to_string());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dl);
    let mut args: Vec<&str> = vec!["install", "-y", "--no-upgrade", "--no-install-recommends"];
    args.extend(libs.iter().map(String::as_str));
    apt(&args)?;
    qemu_binary("qemu-system-riscv64").map(|_| ())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}
