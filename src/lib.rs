#![doc = include_str!("../README.md")]
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "std")]
extern crate std;

/// `true` when the named broken variant is selected (test builds with `--cfg loom` or
/// `--cfg rcuref_mutants` only); a constant `false` that folds away everywhere else.
#[allow(unused_macros)] // unused only when the compile_error! below fires
macro_rules! mutant {
    ($m:ident) => {{
        #[cfg(any(loom, rcuref_mutants))]
        let on = $crate::mutants::active($crate::mutants::Mutant::$m);
        #[cfg(not(any(loom, rcuref_mutants)))]
        let on = false;
        on
    }};
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

// Test builds only (loom, mutation testing), which run on hosts with atomics.
#[cfg(any(loom, rcuref_mutants))]
#[doc(hidden)]
pub mod mutants;

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
