//! Keeping what different cores write on different cache lines.
//!
//! A reader's slot is written by its own core at every outermost lock and unlock; the
//! phase word is read by every outermost lock and written twice per grace period; the
//! grace-period counter and the drivers' registration counters are written by every
//! poll. Sharing a cache line between any
//! two of these makes each write invalidate the others' copies (false sharing: two
//! threads each locking their own slot of one domain ran 3-7x slower than on two
//! domains). [`Line`] aligns (and so pads) a value to a cache line.
//!
//! Padding costs RAM: a line per reader slot plus three (phase, counter, registrations)
//! per domain, instead of 4 bytes each, and the count of dedicated slots rounds the
//! whole up to one more line: an `Rcu<8>` is 52 bytes unpadded on a 32-bit target, 768
//! with 64-byte lines, 1536 with 128-byte lines. It
//! is on by default where cores share memory through caches and RAM is plentiful
//! (64-bit targets: x86_64, aarch64, riscv64, …) and off on 16- and 32-bit targets,
//! mostly single-core microcontrollers, where it would only waste RAM. The binary
//! decides otherwise with a cfg (not a feature, so no dependency can change its RAM
//! behind its back):
//!
//! * `--cfg rcuref_cache_padding` pads anyway (a multi-hart riscv32, an SMP Cortex-A);
//! * `--cfg rcuref_no_cache_padding` never pads (a single-core 64-bit part).
//!
//! Line sizes assumed: 128 bytes on x86_64, aarch64 and powerpc64 (pairs of 64-byte
//! lines are prefetched together on x86_64; Apple and some Neoverse parts have 128-byte
//! lines), 64 bytes elsewhere.

/// `T` alone on its cache line(s), when padding is on; `T` itself otherwise. (`build.rs`
/// decides, from the cfgs above, and names the line size as `rcuref_pad`.)
#[cfg_attr(rcuref_pad = "128", repr(align(128)))]
#[cfg_attr(rcuref_pad = "64", repr(align(64)))]
pub(crate) struct Line<T>(pub(crate) T);

/// Whether this build pads reader slots and the grace-period state to cache lines
/// (see the crate's README, "Features and cfgs").
pub const CACHE_PADDED: bool = cfg!(any(rcuref_pad = "64", rcuref_pad = "128"));
