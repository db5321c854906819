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
        #[cfg(any(loom, rcuref_mutants))]
        let on = $crate::mutants::active($crate::mutants::Mutant::$m);
        #[cfg(all(rcuref_static_mutant, not(any(loom, rcuref_mutants))))]
        let on = {
            const ON: bool = $crate::mutants::is_static($crate::mutants::Mutant::$m);
            ON
        };
        #[cfg(not(any(loom, rcuref_mutants, rcuref_static_mutant)))]
        let on = false;
        on
    }};
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

/// An interrupt point of the read side (`mutants::Gap`): in test builds an armed
/// handler runs here, on the context that reached it, as an interrupt taken between
/// the two neighbouring instructions would; nothing in other builds.
#[allow(unused_macros)]
macro_rules! interrupt_point {
    ($gap:ident, $slot:expr) => {
        #[cfg(any(loom, rcuref_mutants))]
        $crate::mutants::interrupt($crate::mutants::Gap::$gap, $slot);
    };
}

/// The crate's items, compiled only where the target's atomic read-modify-writes have a
/// source (see the `compile_error!` below).
macro_rules! when_atomics_are_chosen {
    ($($item:item)*) => {$(
        #[cfg(any(
            target_has_atomic = "32",
            feature = "critical-section",
            portable_atomic_unsafe_assume_single_core,
            portable_atomic_unsafe_assume_privileged
        ))]
        $item
    )*};
}

// One clear error instead of a page of missing `compare_exchange` methods.
#[cfg(not(any(
    target_has_atomic = "32",
    feature = "critical-section",
    portable_atomic_unsafe_assume_single_core,
    portable_atomic_unsafe_assume_privileged
)))]
compile_error!(
    "rcuref: this target has no compare-and-swap (thumbv6m-none-eabi, for one), so the \
     binary must choose how atomic read-modify-writes work. Either enable rcuref's \
     feature `critical-section` and link a critical-section implementation (cortex-m's \
     feature `critical-section-single-core` on a single-core part), or build with \
     `--cfg portable_atomic_unsafe_assume_single_core` (single core, privileged mode). \
     (portable-atomic's `unsafe-assume-single-core` *feature* is invisible to rcuref: \
     use the cfg form.)"
);

// The modules, each under the same condition as the items in `when_atomics_are_chosen!`
// (written out, not inside the macro, so that tools that follow `mod` declarations, such
// as cargo-mutants and rust-analyzer, see them).
#[cfg(any(
    target_has_atomic = "32",
    feature = "critical-section",
    portable_atomic_unsafe_assume_single_core,
    portable_atomic_unsafe_assume_privileged
))]
mod sync;

// Test builds only (loom, mutation testing, static variants for the litmus suite).
#[cfg(any(loom, rcuref_mutants, rcuref_static_mutant))]
#[doc(hidden)]
pub mod mutants;

// The litmus suite's code-tie check (`cargo xtask litmus`): one exported function per
// fast path, compiled only with `--cfg rcuref_code_probe`.
#[cfg(rcuref_code_probe)]
#[doc(hidden)]
pub mod code_probe;

#[cfg(any(
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
#[cfg(any(
    target_has_atomic = "32",
    feature = "critical-section",
    portable_atomic_unsafe_assume_single_core,
    portable_atomic_unsafe_assume_privileged
))]
mod error;
#[cfg(any(
    target_has_atomic = "32",
    feature = "critical-section",
    portable_atomic_unsafe_assume_single_core,
    portable_atomic_unsafe_assume_privileged
))]
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
#[cfg(any(
    target_has_atomic = "32",
    feature = "critical-section",
    portable_atomic_unsafe_assume_single_core,
    portable_atomic_unsafe_assume_privileged
))]
mod log;
#[cfg(any(
    target_has_atomic = "32",
    feature = "critical-section",
    portable_atomic_unsafe_assume_single_core,
    portable_atomic_unsafe_assume_privileged
))]
mod pad;
#[cfg(any(
    target_has_atomic = "32",
    feature = "critical-section",
    portable_atomic_unsafe_assume_single_core,
    portable_atomic_unsafe_assume_privileged
))]
pub mod pool;
#[cfg(any(
    target_has_atomic = "32",
    feature = "critical-section",
    portable_atomic_unsafe_assume_single_core,
    portable_atomic_unsafe_assume_privileged
))]
pub mod rcu;

when_atomics_are_chosen! {
    #[cfg(any(target_has_atomic = "64", feature = "critical-section"))]
    #[cfg_attr(docsrs, doc(cfg(any(target_has_atomic = "64", feature = "critical-section"))))]
    pub use file_ref::FileRef64;
    pub use file_ref::{FileRef, FileRef32};
    pub use log::{set_warning_hook, warning_count, Warning};
    pub use pad::CACHE_PADDED;
    pub use error::{Error, Refused};
    pub use pool::{Handle, Pool, PoolCell};
    pub use rcu::{
        ContextReader, DeferQueue, GpCookie, Guard, Rcu, RcuCell, RcuValue, Reader, Retired,
    };
}
