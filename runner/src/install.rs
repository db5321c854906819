//! Installing what a fresh machine lacks, for the runner's `install-qemu` and for build
//! tools that embed the runner (this repository's xtask takes its rustup targets and
//! Debian packages from here): cheap checks first, then one loud command per install.

use std::process::{Command, Stdio};

/// Whether `program args` runs and succeeds (its output discarded).
pub fn quiet_ok(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Runs `program args` with its output shown, after an `install: ...` line.
///
/// # Errors
/// The program could not start, or failed.
pub fn loud(program: &str, args: &[&str]) -> Result<(), String> {
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

/// Whether this process runs as root.
pub fn is_root() -> bool {
    #[cfg(unix)]
    // SAFETY: geteuid(2) cannot fail and takes nothing.
    return unsafe { libc::geteuid() } == 0;
    #[cfg(not(unix))]
    false
}

/// `apt-get args`, through `sudo` unless this process is root, loud.
///
/// # Errors
/// As [`loud`].
pub fn apt_get(args: &[&str]) -> Result<(), String> {
    if is_root() {
        loud("apt-get", args)
    } else {
        let mut full = vec!["apt-get"];
        full.extend_from_slice(args);
        loud("sudo", &full)
    }
}

/// Installs the Debian packages `missing` (none: nothing to do), which `who` needs:
/// `apt-get update`, then `apt-get install`.
///
/// # Errors
/// No apt-get here (the message names the packages), or apt-get failed.
pub fn apt_install(missing: &[&str], who: &str) -> Result<(), String> {
    if missing.is_empty() {
        return Ok(());
    }
    if !quiet_ok("apt-get", &["--version"]) {
        return Err(format!(
            "{who} need {} (no apt-get here: install them with your package manager)",
            missing.join(" and ")
        ));
    }
    apt_get(&["update", "-q"])?;
    let mut args = vec!["install", "-y", "-q"];
    args.extend_from_slice(missing);
    apt_get(&args)
}

/// Adds the rustup targets of `targets` that are not installed yet.
///
/// # Errors
/// rustup missing or failing.
pub fn rustup_targets(targets: &[&str]) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_missing_installs_nothing() {
        assert_eq!(apt_install(&[], "nobody"), Ok(()));
    }

    #[test]
    fn a_program_that_is_not_there_is_not_ok() {
        assert!(!quiet_ok("/nonexistent/qemu-embedded-runner-test", &[]));
        let e = loud("/nonexistent/qemu-embedded-runner-test", &["x"]).unwrap_err();
        assert!(
            e.starts_with("/nonexistent/qemu-embedded-runner-test: "),
            "{e}"
        );
    }
}
