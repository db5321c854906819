//! Picks the memory map for the target and adds the linker scripts:
//! cortex-m-rt / riscv-rt (`link.x`), defmt (`defmt.x`), embedded-test (`embedded-test.x`).
use std::{env, fs, path::PathBuf};

fn main() {
    println!("cargo:rustc-cfg=rcuref_fw");
    let target = env::var("TARGET").unwrap();
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let (map, riscv) = if target.starts_with("thumbv6m") {
        ("memory/cortex-m0.x", false)
    } else if target.starts_with("thumb") {
        ("memory/cortex-m.x", false)
    } else if target.starts_with("riscv") {
        ("memory/riscv-virt.x", true)
    } else {
        // Host builds (e.g. `cargo check --workspace`): nothing to link.
        return;
    };
    fs::copy(map, out.join("memory.x")).unwrap();
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed={map}");
    println!("cargo:rerun-if-changed=build.rs");
    if riscv {
        // riscv-rt's link.x does not include memory.x itself.
        println!("cargo:rustc-link-arg=-Tmemory.x");
    }
    println!("cargo:rustc-link-arg=-Tlink.x");
    println!("cargo:rustc-link-arg=-Tdefmt.x");
    println!("cargo:rustc-link-arg-tests=-Tembedded-test.x");
}
