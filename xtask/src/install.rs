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

/// Host tools: clippy for lints, and a nightly with Miri when `miri` is asked for.
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
