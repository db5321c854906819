#![doc = include_str!("../README.md")]
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "std")]
extern crate std;

/// `true` when the named broken variant is selected (test builds with `--cfg loom` or
/// `--cfg rcuref_mutants` only); a constant `false` that folds away everywhere else.
macro_rules! mutant {
    ($m:ident) => {{
        #[cfg(any(loom, rcuref_mutants))]
        let on = $crate::mutants::active($crate::mutants::Mutant::$m);
        #[cfg(not(any(loom, rcuref_mutants)))]
        let on = false;
        on
    }};
}

mod sync;

#[cfg(any(loom, rcuref_mutants))]
#[doc(hidden)]
pub mod mutants;

pub mod file_ref;
mod log;
mod pad;
pub mod pool;
pub mod rcu;

#[cfg(any(target_has_atomic = "64", feature = "critical-section"))]
pub use file_ref::FileRef64;
pub use file_ref::{FileRef, FileRef32};
pub use log::{set_warning_hook, warning_count, Warning};
pub use pad::CACHE_PADDED;
pub use pool::{Handle, Pool, PoolCell, PoolFull};
pub use rcu::{DeferQueue, GpCookie, Guard, Rcu, RcuCell, RcuError, Reader, Retired};
