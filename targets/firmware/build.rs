//! Picks the memory map for the target and adds the linker scripts:
//! cortex-m-rt / riscv-rt (`link.x`), defmt (`defmt.x`), embedded-test (`embedded-test.x`).
use std::{env, fs, path::PathBuf};

fn main() {
    println!("cargo:rustc-cfg=rcuref_fw");
    let target = env::var("TARGET").unwrap();
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    println!("cargo:rustc-check-cfg=cfg(rcuref_fw_tick, rcuref_fw_cores, rcuref_fw_ipi_fence)");
    println!("cargo:rerun-if-changed=build.rs");
    let dual = env::var_os("CARGO_FEATURE_DUAL_CORE").is_some();
    // The runtime's link script and its memory map, or (AArch64, no runtime crate) a
    // whole script of our own.
    let (map, script) = if target.starts_with("thumbv6m") {
        ("memory/cortex-m0.x", "link.x")
    } else if target.starts_with("thumbv8m") {
        ("memory/mps2-sse200.x", "link.x")
    } else if target.starts_with("thumb") {
        ("memory/cortex-m.x", "link.x")
    } else if target.starts_with("riscv") {
        ("memory/riscv-virt.x", "link.x")
    } else if target.starts_with("aarch64") {
        ("memory/aarch64-virt.x", "aarch64-virt.x")
    } else {
        // Host builds (e.g. `cargo check --workspace`): nothing to link.
        return;
    };
    // What the tests may use: a timer interrupt (Cortex-M SysTick, the AArch64 timer),
    // and jobs on several cores (RISC-V harts, AArch64 cores, a dual-core M33).
    if target.starts_with("thumb") || target.starts_with("aarch64") {
        println!("cargo:rustc-cfg=rcuref_fw_tick");
    }
    if target.starts_with("riscv")
        || target.starts_with("aarch64")
        || (dual && target.starts_with("thumbv8m"))
    {
        println!("cargo:rustc-cfg=rcuref_fw_cores");
    }
    // An IPI heavy fence to call (`crate::ipi`): AArch64's in every build, RISC-V's in
    // the asymmetric-fence build (cargo passes the RUSTFLAGS cfg to build scripts).
    if target.starts_with("aarch64")
        || (target.starts_with("riscv")
            && env::var_os("CARGO_CFG_RCUREF_ASYMMETRIC_FENCE").is_some())
    {
        println!("cargo:rustc-cfg=rcuref_fw_ipi_fence");
    }
    let name = if script == "link.x" {
        "memory.x"
    } else {
        script
    };
    fs::copy(map, out.join(name)).unwrap();
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed={map}");
    if target.starts_with("riscv") {
        // riscv-rt's link.x does not include memory.x itself.
        println!("cargo:rustc-link-arg=-Tmemory.x");
    }
    println!("cargo:rustc-link-arg=-T{script}");
    println!("cargo:rustc-link-arg=-Tdefmt.x");
    println!("cargo:rustc-link-arg-tests=-Tembedded-test.x");
}
