#![doc = include_str!("../README.md")]
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod sync;

pub mod file_ref;
mod log;

#[cfg(any(target_has_atomic = "64", feature = "critical-section"))]
pub use file_ref::FileRef64;
pub use file_ref::{FileRef, FileRef32};
pub use log::{set_warning_hook, warning_count, Warning};
