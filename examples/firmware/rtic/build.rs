//! Links cortex-m-rt (with lm3s6965's memory map and vectors) and defmt.
fn main() {
    println!("cargo:rustc-link-arg=-Tlink.x");
    println!("cargo:rustc-link-arg=-Tdefmt.x");
}
