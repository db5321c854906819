#![doc = include_str!("../README.md")]
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "std")]
extern crate std;

/// `true` when the named broken variant is selected: at run time in test builds
/// (`--cfg loom`, `--cfg rcuref_mutants`), as a constant in static-variant builds
/// (`--cfg rcuref_static_mutant`); a constant `false` that folds away everywhere else.
#[allow(unused_macros)] // unused only when the compile_error! below fires
macro_rules! mutant {
    ($m:ident) => {{
        #[cfg(rcuref_hooks)]
        let on = $crate::mutants::active($crate::mutants::Mutant::$m);
        #[cfg(all(rcuref_static_mutant, not(rcuref_hooks)))]
        let on = {
            const ON: bool = $crate::mutants::is_static($crate::mutants::Mutant::$m);
            ON
        };
        #[cfg(not(rcuref_variants))]
        let on = false;
        on
    }};
}

/// The table of orderings and fences that a module reads (`REAL`, named and justified in
/// that module), as the primitives use it: `REAL` itself in normal builds; in test builds
/// the table as the selected broken variant changes it (`$broken(variant)`, a `const fn` in
/// `mutants/`). An ordering variant swaps a table, so the real line has no branch.
#[allow(unused_macros)]
macro_rules! variant_table {
    ($ty:ty, $real:expr, $broken:path) => {{
        #[cfg(rcuref_hooks)]
        let t: $ty = $broken($crate::mutants::selected());
        #[cfg(all(rcuref_static_mutant, not(rcuref_hooks)))]
        let t: $ty = {
            const T: $ty = $broken($crate::mutants::STATIC);
            T
        };
        #[cfg(not(rcuref_variants))]
        let t: $ty = $real;
        t
    }};
}

/// A whole-function broken variant: in test builds, when variant `$m` (or one of
/// `$m | ...`, which share one twin) is selected, the
/// enclosing function returns `$broken` (a call of its broken twin in `mutants/`)
/// instead of running. One line at the top of the function; nothing in other builds.
#[allow(unused_macros)]
macro_rules! divert {
    ($($m:ident)|+ => $broken:expr) => {
        #[cfg(rcuref_variants)]
        if $(mutant!($m))||+ {
            return $broken;
        }
    };
}

/// One definition of a function that is `const` except under loom, whose atomics cannot
/// be made in a const context (crossbeam-epoch's `const_fn!`): the two builds cannot
/// drift apart.
#[allow(unused_macros)]
macro_rules! const_fn {
    ($(#[$attr:meta])* $vis:vis const fn $name:ident $($rest:tt)*) => {
        #[cfg(not(loom))]
        $(#[$attr])* $vis const fn $name $($rest)*
        #[cfg(loom)]
        $(#[$attr])* $vis fn $name $($rest)*
    };
}

/// `[value; len]` for a value that is not `Copy` (an atomic): an inline `const` block
/// where atomics are `const`, `from_fn` under loom (whose atomics are not). For the
/// bodies of `const_fn!` constructors.
#[allow(unused_macros)]
macro_rules! array_of {
    ($value:expr; $len:expr) => {{
        #[cfg(not(loom))]
        let a = [const { $value }; $len];
        #[cfg(loom)]
        let a = core::array::from_fn(|_| $value);
        a
    }};
}

/// An interrupt point of the read side (`mutants::Gap`): in test builds an armed
/// handler runs here, on the context that reached it, as an interrupt taken between
/// the two neighbouring instructions would; nothing in other builds.
#[allow(unused_macros)]
macro_rules! interrupt_point {
    ($gap:ident, $slot:expr) => {
        #[cfg(rcuref_hooks)]
        $crate::mutants::interrupt($crate::mutants::Gap::$gap, $slot);
    };
}

/// A pause point (`mutants::Point`): in `--cfg rcuref_mutants` builds a test can stop
/// the calling context here (`mutants::set_pause_hook`); nothing in other builds.
#[allow(unused_macros)]
macro_rules! pause_point {
    ($($point:tt)+) => {
        #[cfg(all(rcuref_mutants, not(loom)))]
        $crate::mutants::pause($crate::mutants::Point::$($point)+);
    };
}

/// An injected pause on a lookup path (`mutants::set_read_delay`), widening race windows
/// for the tortures in test builds; nothing in other builds.
#[allow(unused_macros)]
macro_rules! read_delay_point {
    () => {
        #[cfg(rcuref_hooks)]
        $crate::mutants::read_delay();
    };
}

// The cfgs build.rs derives must agree with the ones rustc sees: a build that passes
// `--cfg rcuref_asymmetric_fence` (or `rcuref_mutants`) to rustc but not where cargo's
// build script reads it (a non-cargo build copying build.rs's output, say) would
// otherwise get readers with a compiler fence and grace periods without a heavy fence.
#[cfg(any(
    all(rcuref_asymmetric_fence, not(loom), not(rcuref_heavy)),
    all(rcuref_heavy, any(loom, not(rcuref_asymmetric_fence))),
    all(
        rcuref_auto_fence,
        not(loom),
        not(rcuref_asymmetric_fence),
        not(rcuref_auto)
    ),
    all(
        rcuref_auto,
        any(loom, rcuref_asymmetric_fence, not(rcuref_auto_fence))
    ),
    all(feature = "membarrier", target_os = "linux", not(rcuref_membarrier)),
    all(
        rcuref_membarrier,
        not(all(feature = "membarrier", target_os = "linux"))
    ),
    all(any(feature = "auto-fence", rcuref_membarrier), not(rcuref_auto_fence)),
    all(rcuref_auto_fence, not(any(feature = "auto-fence", rcuref_membarrier))),
    all(any(rcuref_heavy, rcuref_auto), not(rcuref_fences)),
    all(rcuref_fences, not(any(rcuref_heavy, rcuref_auto))),
    all(any(loom, rcuref_mutants), not(rcuref_hooks)),
    all(rcuref_hooks, not(any(loom, rcuref_mutants))),
    all(any(rcuref_hooks, rcuref_static_mutant), not(rcuref_variants)),
    all(rcuref_variants, not(any(rcuref_hooks, rcuref_static_mutant))),
))]
compile_error!(
    "rcuref: the cfgs rustc sees and the ones its build script saw disagree: pass \
     `--cfg rcuref_asymmetric_fence` / `--cfg rcuref_mutants` / `--cfg loom` through \
     RUSTFLAGS (or CARGO_TARGET_<TRIPLE>_RUSTFLAGS), where cargo's build script sees \
     them too, or set the derived cfgs as build.rs would (rcuref_heavy, rcuref_auto, \
     rcuref_auto_fence, rcuref_membarrier, rcuref_fences, rcuref_hooks, rcuref_variants)."
);

// One clear error instead of a page of missing `compare_exchange` methods.
#[cfg(not(rcuref_atomics))]
compile_error!(
    "rcuref: this target has no compare-and-swap (thumbv6m-none-eabi, for one), so the \
     binary must choose how atomic read-modify-writes work. Either enable rcuref's \
     feature `critical-section` and link a critical-section implementation (cortex-m's \
     feature `critical-section-single-core` on a single-core part), or build with \
     `--cfg portable_atomic_unsafe_assume_single_core` (single core, privileged mode). \
     (portable-atomic's `unsafe-assume-single-core` *feature* is invisible to rcuref: \
     use the cfg form.)"
);

// The modules, each under `rcuref_atomics` (build.rs: the target's atomic
// read-modify-writes have a source). Written out one by one, not inside a macro, so that
// tools that follow `mod` declarations (cargo-mutants, rust-analyzer) see them.
#[cfg(rcuref_atomics)]
mod sync;

// Test builds only (loom, mutation testing, static variants for the litmus suite).
#[cfg(rcuref_variants)]
#[doc(hidden)]
pub mod mutants;

// The litmus suite's code-tie check (`cargo xtask litmus`): one exported function per
// fast path, compiled only with `--cfg rcuref_code_probe`.
#[cfg(rcuref_code_probe)]
#[doc(hidden)]
pub mod code_probe;

// (Also in the host's unit tests, for the pure parts: the AArch64 key function.)
#[cfg(any(
    test,
    all(feature = "aarch64-cores", target_arch = "aarch64"),
    all(
        feature = "cortex-m-cores",
        target_arch = "arm",
        target_has_atomic = "32"
    )
))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "aarch64-cores", feature = "cortex-m-cores")))
)]
pub mod cores;
#[cfg(rcuref_atomics)]
mod error;
#[cfg(rcuref_atomics)]
pub mod file_ref;
#[cfg(all(
    feature = "riscv-harts",
    any(target_arch = "riscv32", target_arch = "riscv64"),
    target_has_atomic = "ptr"
))]
#[cfg_attr(
    docsrs,
    doc(cfg(all(
        feature = "riscv-harts",
        any(target_arch = "riscv32", target_arch = "riscv64")
    )))
)]
pub mod harts;
#[cfg(rcuref_atomics)]
mod log;
#[cfg(rcuref_atomics)]
mod pad;
#[cfg(rcuref_atomics)]
pub mod pool;
#[cfg(rcuref_atomics)]
pub mod rcu;

// One public path per item: the primitives live in their modules (`rcuref::file_ref`,
// `rcuref::rcu`, `rcuref::pool`); the crate root holds only what all of them share.
#[cfg(rcuref_atomics)]
pub use error::{Error, Refused};
#[cfg(rcuref_atomics)]
pub use log::{set_warning_hook, warning_count, Warning};
#[cfg(rcuref_atomics)]
pub use pad::CACHE_PADDED;
