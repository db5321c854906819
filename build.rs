//! Names each target condition the library's code depends on, once, as a cfg of its own,
//! so that `src/` says `#[cfg(rcuref_atomics)]` instead of repeating the condition.
//!
//! * `rcuref_atomics`: the target's atomic read-modify-writes have a source: native
//!   compare-and-swap, or the binary's choice on a target without it (feature
//!   `critical-section`, or portable-atomic's `unsafe-assume-*` cfgs). Without it the
//!   library is one `compile_error!` (src/lib.rs).
//! * `rcuref_atomic64`: a 64-bit atomic exists, so `FileRef64` does: native, or a
//!   critical-section-guarded `u64` with feature `critical-section` (src/sync.rs picks
//!   which).
//! * `rcuref_pad = "128"` / `"64"`: reader slots and the grace-period words sit on cache
//!   lines of that size (src/pad.rs): on by default on 64-bit targets, and where the
//!   binary asks with `--cfg rcuref_cache_padding`; never with `--cfg
//!   rcuref_no_cache_padding`.
//!
//! * `rcuref_heavy`: the asymmetric-fence mode's heavy fence is compiled in
//!   (`--cfg rcuref_asymmetric_fence`, and not under loom, which cannot model it).
//! * `rcuref_membarrier`: `rcu::heavy::Membarrier` exists (feature `membarrier`, on by
//!   default, on a Linux target; the feature does nothing elsewhere).
//! * `rcuref_auto_fence`: the run-time choice's API exists (feature `auto-fence`, or
//!   `rcuref_membarrier`): `rcu::heavy::install`, `fence_mode`, ...
//! * `rcuref_auto`: the read side's fence is chosen at run time (`rcuref_auto_fence`):
//!   a compiler fence once a heavy fence is known to exist, the full fence until then or
//!   without one (`rcu::heavy`, "Chosen at run time"). Not with `--cfg
//!   rcuref_asymmetric_fence` (the static choice wins) nor under loom.
//! * `rcuref_fences`: either of the two, so the heavy-fence machinery (the domain's
//!   marks, the wait step's fence, the claim's fence) is compiled in.
//! * `rcuref_hooks`: the run-time test hooks exist: variant selection, pause and
//!   interrupt points (`--cfg loom` or `--cfg rcuref_mutants`).
//! * `rcuref_variants`: broken variants can be compiled in, at run time (`rcuref_hooks`)
//!   or as one constant (`--cfg rcuref_static_mutant`).
//! * `rcuref_section_table`: the debug table of open sections per thread can exist
//!   (feature `std`, not loom); the source adds `debug_assertions`, which rustc decides
//!   (`-C debug-assertions` in RUSTFLAGS), not cargo's profile that a build script sees.
//!
//! Cargo gives a build script the target's cfgs, those passed in RUSTFLAGS included, as
//! `CARGO_CFG_*` variables, and the crate's features as `CARGO_FEATURE_*`.

use std::env;

fn has_cfg(name: &str) -> bool {
    env::var_os(format!("CARGO_CFG_{}", name.to_uppercase())).is_some()
}

fn cfg_values(name: &str) -> Vec<String> {
    env::var(format!("CARGO_CFG_{}", name.to_uppercase()))
        .unwrap_or_default()
        .split(',')
        .map(str::to_owned)
        .collect()
}

fn feature(name: &str) -> bool {
    env::var_os(format!(
        "CARGO_FEATURE_{}",
        name.to_uppercase().replace('-', "_")
    ))
    .is_some()
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(rcuref_atomics)");
    println!("cargo::rustc-check-cfg=cfg(rcuref_atomic64)");
    println!("cargo::rustc-check-cfg=cfg(rcuref_pad, values(\"64\", \"128\"))");
    println!("cargo::rustc-check-cfg=cfg(rcuref_heavy)");
    println!("cargo::rustc-check-cfg=cfg(rcuref_auto)");
    println!("cargo::rustc-check-cfg=cfg(rcuref_auto_fence)");
    println!("cargo::rustc-check-cfg=cfg(rcuref_membarrier)");
    println!("cargo::rustc-check-cfg=cfg(rcuref_fences)");
    println!("cargo::rustc-check-cfg=cfg(rcuref_hooks)");
    println!("cargo::rustc-check-cfg=cfg(rcuref_variants)");
    println!("cargo::rustc-check-cfg=cfg(rcuref_section_table)");
    println!("cargo::rerun-if-changed=build.rs");

    let loom = has_cfg("loom");
    let hooks = loom || has_cfg("rcuref_mutants");
    let heavy = has_cfg("rcuref_asymmetric_fence") && !loom;
    let linux = env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let membarrier = feature("membarrier") && linux;
    let auto_fence = feature("auto-fence") || membarrier;
    let auto = auto_fence && !has_cfg("rcuref_asymmetric_fence") && !loom;
    if membarrier {
        println!("cargo::rustc-cfg=rcuref_membarrier");
    }
    if auto_fence {
        println!("cargo::rustc-cfg=rcuref_auto_fence");
    }
    if heavy {
        println!("cargo::rustc-cfg=rcuref_heavy");
    }
    if auto {
        println!("cargo::rustc-cfg=rcuref_auto");
    }
    if heavy || auto {
        println!("cargo::rustc-cfg=rcuref_fences");
    }
    if hooks {
        println!("cargo::rustc-cfg=rcuref_hooks");
    }
    if hooks || has_cfg("rcuref_static_mutant") {
        println!("cargo::rustc-cfg=rcuref_variants");
    }
    if feature("std") && !loom {
        println!("cargo::rustc-cfg=rcuref_section_table");
    }

    let has_atomic = cfg_values("target_has_atomic");
    let cs = feature("critical-section");
    if has_atomic.iter().any(|w| w == "32")
        || cs
        || has_cfg("portable_atomic_unsafe_assume_single_core")
        || has_cfg("portable_atomic_unsafe_assume_privileged")
    {
        println!("cargo::rustc-cfg=rcuref_atomics");
    }
    if has_atomic.iter().any(|w| w == "64") || cs {
        println!("cargo::rustc-cfg=rcuref_atomic64");
    }

    let wide = env::var("CARGO_CFG_TARGET_POINTER_WIDTH").as_deref() == Ok("64");
    let pad = has_cfg("rcuref_cache_padding") || (wide && !has_cfg("rcuref_no_cache_padding"));
    if pad {
        let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
        let line = match arch.as_str() {
            // Pairs of 64-byte lines are prefetched together on x86_64; Apple and some
            // Neoverse parts have 128-byte lines.
            "x86_64" | "aarch64" | "powerpc64" => "128",
            _ => "64",
        };
        println!("cargo::rustc-cfg=rcuref_pad=\"{line}\"");
    }
}
