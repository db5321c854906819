//! QEMU `virt` (RAM at 0x8000_0000, `-bios none`), two harts, and the linker scripts.
fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(
        out.join("memory.x"),
        "MEMORY { RAM : ORIGIN = 0x80000000, LENGTH = 16M }
REGION_ALIAS(\"REGION_TEXT\", RAM);
REGION_ALIAS(\"REGION_RODATA\", RAM);
REGION_ALIAS(\"REGION_DATA\", RAM);
REGION_ALIAS(\"REGION_BSS\", RAM);
REGION_ALIAS(\"REGION_HEAP\", RAM);
REGION_ALIAS(\"REGION_STACK\", RAM);
_max_hart_id = 1;
_hart_stack_size = 64K;
",
    )
    .unwrap();
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=build.rs");
    // riscv-rt's link.x does not include memory.x itself.
    println!("cargo:rustc-link-arg=-Tmemory.x");
    println!("cargo:rustc-link-arg=-Tlink.x");
    println!("cargo:rustc-link-arg=-Tdefmt.x");
}
