//! QEMU `virt` (AArch64): the whole link script is ours (no runtime crate), plus defmt's.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    println!("cargo:rustc-link-search={dir}");
    println!("cargo:rerun-if-changed=kernel.x");
    println!("cargo:rustc-link-arg=-Tkernel.x");
    println!("cargo:rustc-link-arg=-Tdefmt.x");
}
