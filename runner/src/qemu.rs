//! Finding QEMU, and installing it where the system has none.

use crate::install::{is_root, loud, quiet_ok};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The environment variable naming a folder that holds the `qemu-system-*` binaries.
pub const QEMU_DIR_VAR: &str = "QEMU_SYSTEM_DIR";

/// An absolute folder from the environment variable `var` (relative or empty values are
/// ignored, as the XDG base directory specification says).
fn env_dir(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// Where `install-qemu` unpacks QEMU by default: `$XDG_DATA_HOME/qemu-embedded-runner`
/// (or `~/.local/share/...`). None without either: never a shared folder such as `/tmp`,
/// where anyone could plant a `qemu-system-arm` for the runner to start.
fn default_dir() -> Option<PathBuf> {
    env_dir("XDG_DATA_HOME")
        .or_else(|| env_dir("HOME").map(|h| h.join(".local/share")))
        .map(|d| d.join("qemu-embedded-runner").join("qemu"))
}

/// Where `install-qemu` records the folder it used, so that later runs find it:
/// `$XDG_CONFIG_HOME/qemu-embedded-runner/qemu-dir` (or `~/.config/...`), one line.
fn remembered_file() -> Option<PathBuf> {
    env_dir("XDG_CONFIG_HOME")
        .or_else(|| env_dir("HOME").map(|h| h.join(".config")))
        .map(|c| c.join("qemu-embedded-runner").join("qemu-dir"))
}

/// The folder of binaries `install-qemu` last recorded, if any.
fn remembered_dir() -> Option<PathBuf> {
    let text = std::fs::read_to_string(remembered_file()?).ok()?;
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| PathBuf::from(line))
}

/// Records `bin` (a folder of `qemu-system-*`) for later runs; a failure to record is
/// reported, not fatal (the user can still set the variable).
fn remember(bin: &Path) {
    let Some(file) = remembered_file() else {
        return;
    };
    let written = file
        .parent()
        .map(std::fs::create_dir_all)
        .unwrap_or(Ok(()))
        .and_then(|()| std::fs::write(&file, format!("{}\n", bin.display())));
    match written {
        Ok(()) => println!("install: recorded {} in {}", bin.display(), file.display()),
        Err(e) => eprintln!(
            "install: could not record the folder in {} ({e}); set {QEMU_DIR_VAR}={} instead",
            file.display(),
            bin.display()
        ),
    }
}

fn runs(program: &Path) -> bool {
    Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The path of `name` (`qemu-system-arm`, ...): in `$QEMU_SYSTEM_DIR`, on `PATH`, in the
/// folder `install-qemu` last recorded, or in its default folder.
///
/// # Errors
/// A message that says where it looked and how to get QEMU.
pub fn find_qemu(name: &str) -> Result<String, String> {
    if let Some(dir) = std::env::var_os(QEMU_DIR_VAR) {
        let p = PathBuf::from(&dir).join(name);
        if runs(&p) {
            return Ok(p.display().to_string());
        }
        return Err(format!(
            "{name} not found in {QEMU_DIR_VAR}={} (or it does not run)",
            PathBuf::from(dir).display()
        ));
    }
    if runs(Path::new(name)) {
        return Ok(name.to_string());
    }
    let mut looked = vec!["PATH".to_string()];
    for dir in remembered_dir()
        .into_iter()
        .chain(default_dir().map(|d| d.join("usr/bin")))
    {
        let p = dir.join(name);
        if runs(&p) {
            return Ok(p.display().to_string());
        }
        looked.push(dir.display().to_string());
    }
    Err(format!(
        "{name} not found (looked in {}): install QEMU (Debian/Ubuntu: qemu-system-arm and \
         qemu-system-misc), or set {QEMU_DIR_VAR} to the folder holding it, or run \
         `qemu-embedded-runner install-qemu [--dir DIR]` (it records the folder for later runs)",
        looked.join(", ")
    ))
}

/// A fresh private folder (mode 0700, a name nobody can guess) for `apt-get download`;
/// removed when dropped. Run as root, apt downloads as its unprivileged `_apt` user, so
/// the folder is given to that user (still private: root reads it regardless); without
/// one apt downloads as root, with a warning.
fn download_dir() -> Result<tempfile::TempDir, String> {
    let mut b = tempfile::Builder::new();
    b.prefix("qemu-runner-debs-");
    // tempfile's default is 0777 less the umask.
    #[cfg(unix)]
    b.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
    let dir = b
        .tempdir()
        .map_err(|e| format!("a temporary folder for the downloads: {e}"))?;
    #[cfg(unix)]
    if is_root() {
        // SAFETY: getpwnam(3) with a NUL-terminated name; the record is read at once
        // (this runs before any other thread could call it).
        let apt = unsafe {
            let pw = libc::getpwnam(c"_apt".as_ptr());
            (!pw.is_null()).then(|| (*pw).pw_uid)
        };
        if let Some(uid) = apt {
            let _ = std::os::unix::fs::lchown(dir.path(), Some(uid), None);
        }
    }
    Ok(dir)
}

/// Whether apt's failed dry run (its output) is about conflicting packages, which
/// unpacking into a folder of our own avoids, rather than, say, an unknown package.
fn is_conflict(apt_output: &str) -> bool {
    [
        "unmet dependencies",
        "broken packages",
        "Breaks:",
        "Conflicts:",
        "need to be removed",
        "remove is disabled",
    ]
    .iter()
    .any(|m| apt_output.contains(m))
}

const EMULATORS: &[&str] = &[
    "qemu-system-arm",
    "qemu-system-aarch64",
    "qemu-system-riscv32",
    "qemu-system-riscv64",
];
const PACKAGES: &[&str] = &["qemu-system-arm", "qemu-system-misc", "qemu-system-data"];

/// Makes `qemu-system-arm`, `-aarch64`, `-riscv32` and `-riscv64` available and returns
/// the folder that holds them (or `qemu-system-arm`'s path on `PATH`). A folder it
/// unpacked into is recorded, so that later runs find it without [`QEMU_DIR_VAR`].
///
/// On a Debian-like system a plain `apt-get install` is used when it would succeed
/// cleanly. When it would break or remove installed packages (seen: a backported
/// `qemu-utils` 10.x that Breaks the 7.2 `qemu-system-common`), the packages are
/// downloaded into a fresh private temporary folder and unpacked into `dir` instead
/// (default: `$XDG_DATA_HOME/qemu-embedded-runner/qemu`; made absolute, also when
/// recorded), never touching the system's packages, and only their runtime libraries are
/// installed (`--no-upgrade`).
///
/// # Errors
/// Not a Debian-like system, apt's dry run failed for another reason than conflicting
/// packages (its message), or apt/dpkg failed.
pub fn install_qemu(dir: Option<&Path>) -> Result<PathBuf, String> {
    // Absolute, so that the folder recorded is found from any other directory.
    let dest = dir.map(Path::to_path_buf).or_else(default_dir).ok_or(
        "install-qemu: neither HOME nor XDG_DATA_HOME is set (to an absolute folder), so \
         there is no private default folder: give --dir DIR (a folder only you can write)",
    )?;
    let dest = std::path::absolute(&dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    let local_bin = dest.join("usr/bin");
    if EMULATORS.iter().all(|q| runs(&local_bin.join(q))) {
        remember(&local_bin);
        return Ok(local_bin);
    }
    if EMULATORS.iter().all(|q| runs(Path::new(q))) {
        return Ok(PathBuf::from("qemu-system-arm"));
    }
    if !quiet_ok("apt-get", &["--version"]) {
        return Err(
            "QEMU is missing and this is not a Debian-like system: install \
                    qemu-system-arm and qemu-system-misc (QEMU >= 7.2) with your package \
                    manager"
                .into(),
        );
    }
    let apt = crate::install::apt_get;
    let _ = apt(&["update", "-qq"]);
    let dry_run = [
        "-s",
        "install",
        "-y",
        "--no-remove",
        "qemu-system-arm",
        "qemu-system-misc",
    ];
    let dry = Command::new("apt-get")
        .args(dry_run)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("apt-get: {e}"))?;
    if dry.status.success() {
        apt(&[
            "install",
            "-y",
            "--no-install-recommends",
            "qemu-system-arm",
            "qemu-system-misc",
        ])?;
        return Ok(PathBuf::from("qemu-system-arm"));
    }
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&dry.stdout),
        String::from_utf8_lossy(&dry.stderr)
    );
    if !is_conflict(&said) {
        let why: Vec<&str> = said
            .lines()
            .filter(|l| l.starts_with("E:") || l.starts_with("W:"))
            .collect();
        return Err(format!(
            "`apt-get {}` failed ({}): {}",
            dry_run.join(" "),
            dry.status,
            if why.is_empty() {
                said.trim().to_string()
            } else {
                why.join("; ")
            }
        ));
    }
    println!(
        "install: the system's QEMU packages conflict with installed ones; unpacking QEMU \
         into {}",
        dest.display()
    );
    let dl_dir = download_dir()?;
    let dl = dl_dir.path();
    let st = Command::new("apt-get")
        .arg("download")
        .args(PACKAGES)
        .current_dir(dl)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("apt-get: {e}"))?;
    if !st.success() {
        return Err("apt-get download of the QEMU packages failed".into());
    }
    std::fs::create_dir_all(&dest).map_err(|e| e.to_string())?;
    let mut libs: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(dl).map_err(|e| e.to_string())? {
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
    drop(dl_dir);
    let mut args: Vec<&str> = vec!["install", "-y", "--no-upgrade", "--no-install-recommends"];
    args.extend(libs.iter().map(String::as_str));
    apt(&args)?;
    if EMULATORS.iter().all(|q| runs(&local_bin.join(q))) {
        remember(&local_bin);
        Ok(local_bin)
    } else {
        Err(format!(
            "QEMU was unpacked into {} but does not run",
            dest.display()
        ))
    }
}
