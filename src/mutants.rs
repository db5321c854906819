//! Deliberately broken variants, for proving that the tests can fail.
//!
//! Compiled only with `--cfg loom` or `--cfg rcuref_mutants`. A test selects one
//! variant for the whole process, runs a harness, and expects it to fail; normal builds
//! contain none of this (the `mutant!` checks fold to `false`).

use core::sync::atomic::{AtomicU8, Ordering};

/// A broken variant of one of the primitives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mutant {
    /// No mutant: the real code.
    None = 0,
    /// `get` uses a relaxed add (Linus's rejected "relaxed get for files").
    GetRelaxed,
    /// A failed `get` leaves its increment behind (mainline's behaviour: dead-zone drift).
    NoDriftRepair,
    /// `put` decrements and marks dead without release/acquire ordering.
    PutRelaxed,
    /// `put`'s slow path re-reads the counter instead of using the decremented value.
    PutRereads,
    /// `put` marks NOREF dead with a plain store instead of a compare-exchange.
    PutStoresDead,
    /// `put_close` stores DEAD after reading ONEREF instead of compare-exchanging.
    PutCloseStores,
    /// RCU: a grace period flips the reader phase once instead of twice.
    SingleFlip,
    /// RCU: dropping any guard ends the read section (nesting ignored).
    NestingIgnored,
    /// RCU: no full fence after a reader announces itself.
    NoReaderFence,
    /// RCU: grace periods complete at once without waiting for readers ("busted" RCU).
    BustedGracePeriod,
}

static ACTIVE: AtomicU8 = AtomicU8::new(Mutant::None as u8);

/// Selects the broken variant for the whole process (`Mutant::None` restores the real code).
pub fn select(m: Mutant) {
    ACTIVE.store(m as u8, Ordering::SeqCst);
}

/// Whether `m` is the selected variant.
#[inline]
pub fn active(m: Mutant) -> bool {
    ACTIVE.load(Ordering::Relaxed) == m as u8
}
