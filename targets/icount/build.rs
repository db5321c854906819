//! The memory maps and link scripts of the on-target firmware (`targets/firmware/memory/`),
//! one core per target: cortex-m-rt / riscv-rt's `link.x`, or the AArch64 script.
use std::{env, fs, path::PathBuf};

fn main() {
    let target = env::var("TARGET").unwrap();
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed=build.rs");
    let (map, script) = if target.starts_with("thumbv6m") {
        ("cortex-m0.x", "link.x")
    } else if target.starts_with("thumbv8m") {
        ("mps2-sse200.x", "link.x")
    } else if target.starts_with("thumb") {
        ("cortex-m.x", "link.x")
    } else if target.starts_with("riscv") {
        ("riscv-virt.x", "link.x")
    } else if target.starts_with("aarch64") {
        ("aarch64-virt.x", "aarch64-virt.x")
    } else {
        return; // a host build (`cargo check --workspace`): nothing to link
    };
    let map = format!("../firmware/memory/{map}");
    let name = if script == "link.x" {
        "memory.x"
    } else {
        script
    };
    fs::copy(&map, out.join(name)).unwrap();
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed={map}");
    if target.starts_with("riscv") {
        println!("cargo:rustc-link-arg=-Tmemory.x");
    }
    println!("cargo:rustc-link-arg=-T{script}");
}
