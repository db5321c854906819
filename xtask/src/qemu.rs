//! `cargo xtask qemu-run --target T ELF [FILTER...] [--exact] [--list] [--ignored]`:
//! cargo's runner for the embedded targets of this workspace. It is the
//! `qemu-embedded-runner` crate (`runner/`), with QEMU looked up in this checkout's
//! `.tools/qemu` first when `cargo xtask test` unpacked it there.

use crate::install;

pub fn run(args: &[String]) -> Result<(), String> {
    if std::env::var_os(qemu_embedded_runner::QEMU_DIR_VAR).is_none() {
        let local = install::qemu_dir().join("usr/bin");
        if local.join("qemu-system-arm").exists() {
            std::env::set_var(qemu_embedded_runner::QEMU_DIR_VAR, local);
        }
    }
    qemu_embedded_runner::cli(args)
}
