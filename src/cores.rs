//! Critical sections for multi-core Arm parts, for the binary to register: AArch64
//! (feature `aarch64-cores`) and multi-core Cortex-M with compare-and-swap, such as a
//! dual-core Cortex-M33 (feature `cortex-m-cores`). The RISC-V one is [`crate::harts`].
//!
//! `FileRef64` on 32-bit parts and every read-modify-write on targets without
//! compare-and-swap need a critical section that excludes **every** context that could
//! touch the same counter. A single-core implementation (cortex-m's
//! `critical-section-single-core`, masking this core's interrupts) is unsound as soon as
//! a second core runs: it does not stop the other core. These mask interrupts on this
//! core and then take a spinlock that the other cores respect; they nest on the owning
//! core.
//!
//! rcuref does not register one (a library must not choose a critical section for its
//! users): the binary does, once:
//!
//! ```ignore
//! critical_section::set_impl!(rcuref::cores::Aarch64);
//! // or, on a multi-core Cortex-M, with the part's own way to tell the cores apart:
//! critical_section::set_impl!(rcuref::cores::CortexM<MyCoreId>);
//! ```
//!
//! What they assume:
//! * every core shares the spinlock's memory coherently, and its exclusive accesses work
//!   there. **On real AArch64 hardware that means the MMU and the data caches are on**
//!   and the lock is in Normal, cacheable memory: exclusives on Device or non-cacheable
//!   memory are not guaranteed to work (QEMU does not care);
//! * code runs privileged: EL1 or above on AArch64 (it writes `DAIF`), privileged
//!   thread or handler mode on Cortex-M (it writes `PRIMASK`);
//! * on Cortex-M, [`CoreId`] tells the cores apart (the architecture has no core id:
//!   SSE-200's CPU_IDENTITY register, an RP2040's SIO CPUID, ...).
//!
//! Both select critical-section's `restore-state-u8`.

// The host's unit tests compile only the pure parts' tests here.
#![cfg_attr(test, allow(dead_code, unused_imports, unused_macros))]

#[cfg(all(
    feature = "cortex-m-cores",
    target_arch = "arm",
    target_has_atomic = "32"
))]
use core::sync::atomic::AtomicU32;
use core::sync::atomic::Ordering;

/// Bit of the restore state: interrupts (on AArch64: IRQs) were unmasked before the
/// acquire.
const WAS_ENABLED: u8 = 1;
/// Bit of the restore state: the acquire nested in a section this core already owned.
const NESTED: u8 = 2;
/// Bit of the restore state (AArch64): FIQs were unmasked before the acquire. Kept apart
/// from IRQs: a kernel that routes no FIQs leaves them masked, and its IRQs must still
/// come back on.
#[cfg(all(feature = "aarch64-cores", target_arch = "aarch64"))]
const FIQ_WAS_ENABLED: u8 = 4;

/// A spinlock's owner word: free (0), or the owning core's key (never 0).
trait Owner {
    /// A core's key.
    type Key: Copy + PartialEq;
    /// Whether core `me` owns the lock.
    fn owned_by(&self, me: Self::Key) -> bool;
    /// Takes the lock for `me` if it is free (`Acquire`).
    fn try_take(&self, me: Self::Key) -> bool;
    /// Frees the lock (`Release`).
    fn give_back(&self);
}

macro_rules! owner_word {
    ($atomic:ty, $key:ty) => {
        impl Owner for $atomic {
            type Key = $key;
            #[inline(always)]
            fn owned_by(&self, me: $key) -> bool {
                self.load(Ordering::Relaxed) == me
            }
            #[inline(always)]
            fn try_take(&self, me: $key) -> bool {
                self.compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            }
            #[inline(always)]
            fn give_back(&self) {
                self.store(0, Ordering::Release);
            }
        }
    };
}

#[cfg(all(
    feature = "cortex-m-cores",
    target_arch = "arm",
    target_has_atomic = "32"
))]
owner_word!(core::sync::atomic::AtomicU32, u32);
#[cfg(all(feature = "aarch64-cores", target_arch = "aarch64"))]
owner_word!(core::sync::atomic::AtomicU64, u64);

/// Takes the spinlock for core `me` (its key, never 0), or notes that this core
/// already owns it; returns the `NESTED` bit.
#[inline(always)]
fn lock<O: Owner>(owner: &O, me: O::Key) -> u8 {
    if owner.owned_by(me) {
        return NESTED;
    }
    while !owner.try_take(me) {
        core::hint::spin_loop();
    }
    0
}

/// Gives the spinlock back unless the acquire nested.
#[inline(always)]
fn unlock<O: Owner>(owner: &O, state: u8) {
    if state & NESTED == 0 {
        owner.give_back();
    }
}

/// The key an AArch64 core takes the spinlock with: all four affinity fields of its
/// `MPIDR_EL1` (Aff3 in bits 32-39, Aff2.Aff1.Aff0 in bits 0-23; the other bits, U and
/// MT among them, say nothing of which core this is), plus one so that no core's key is
/// the free lock's 0. Two cores always differ in some affinity field, so in the key.
#[cfg(any(test, all(feature = "aarch64-cores", target_arch = "aarch64")))]
#[inline(always)]
const fn affinity_key(mpidr: u64) -> u64 {
    (mpidr & 0xFF_00FF_FFFF) + 1
}

/// The AArch64 critical section: IRQ and FIQ masked on this core (`DAIF`), then a
/// spinlock across cores keyed by the core's affinity (`MPIDR_EL1`), re-entrant on the
/// owning core. EL1 or above; see the module docs for what it assumes.
#[cfg(all(feature = "aarch64-cores", target_arch = "aarch64"))]
#[cfg_attr(
    docsrs,
    doc(cfg(all(feature = "aarch64-cores", target_arch = "aarch64")))
)]
pub struct Aarch64;

#[cfg(all(feature = "aarch64-cores", target_arch = "aarch64"))]
mod aarch64 {
    use super::*;

    use core::sync::atomic::AtomicU64;

    /// 0 = free, else the owner's `affinity_key`.
    static OWNER: AtomicU64 = AtomicU64::new(0);

    /// This core's `affinity_key`.
    #[inline(always)]
    fn me() -> u64 {
        let mpidr: u64;
        // SAFETY: reading MPIDR_EL1 at EL1 or above (the module's requirement) has no
        // side effects.
        unsafe { core::arch::asm!("mrs {}, mpidr_el1", out(reg) mpidr, options(nomem, nostack)) };
        affinity_key(mpidr)
    }

    // SAFETY: `acquire` masks IRQ and FIQ on this core and then takes a spinlock that the
    // other cores also take, so no other context runs a critical section until
    // `release`; a nested acquire on the owning core is recognised (the owner is this
    // core's affinity) and released only by the outer one, and the interrupt mask is
    // restored only as it was, IRQ and FIQ each (a release that unmasked only when both
    // had been unmasked left IRQs off for good in a kernel that keeps FIQs masked: the
    // firmware's `all_cores_critical_sections_exclude_each_other` caught it). The mask
    // writes are not `nomem`: they are also compiler barriers, so the section's accesses
    // stay between them.
    unsafe impl critical_section::Impl for super::Aarch64 {
        unsafe fn acquire() -> critical_section::RawRestoreState {
            let daif: u64;
            // SAFETY: reading DAIF and masking IRQ and FIQ (`daifset #3`) at EL1 or above
            // only changes this core's interrupt mask.
            unsafe {
                core::arch::asm!("mrs {}, daif", "msr daifset, #3", out(reg) daif, options(nostack))
            };
            // DAIF.I is bit 7, DAIF.F bit 6; each is restored as it was.
            let irq = if daif & 0x80 == 0 { WAS_ENABLED } else { 0 };
            let fiq = if daif & 0x40 == 0 { FIQ_WAS_ENABLED } else { 0 };
            irq | fiq | lock(&OWNER, me())
        }

        unsafe fn release(state: critical_section::RawRestoreState) {
            unlock(&OWNER, state);
            if state & WAS_ENABLED != 0 {
                // SAFETY: IRQs were unmasked when the matching `acquire` ran; unmasking
                // them (`daifclr #2`) only changes this core's mask.
                unsafe { core::arch::asm!("msr daifclr, #2", options(nostack)) };
            }
            if state & FIQ_WAS_ENABLED != 0 {
                // SAFETY: as above, for FIQs (`daifclr #1`).
                unsafe { core::arch::asm!("msr daifclr, #1", options(nostack)) };
            }
        }
    }
}

/// Which core a multi-core Cortex-M is running on, for [`CortexM`].
///
/// # Safety
/// `core_id` must return a different value on each core, the same one every time on a
/// given core, and never `u32::MAX`.
#[cfg(all(
    feature = "cortex-m-cores",
    target_arch = "arm",
    target_has_atomic = "32"
))]
#[cfg_attr(docsrs, doc(cfg(feature = "cortex-m-cores")))]
pub unsafe trait CoreId {
    /// This core's id.
    fn core_id() -> u32;
}

/// The multi-core Cortex-M critical section: `PRIMASK` set on this core, then a
/// spinlock across cores keyed by `I::core_id()`, re-entrant on the owning core.
/// Armv7-M and Armv8-M Mainline (it needs compare-and-swap); see the module docs for
/// what it assumes.
#[cfg(all(
    feature = "cortex-m-cores",
    target_arch = "arm",
    target_has_atomic = "32"
))]
#[cfg_attr(docsrs, doc(cfg(feature = "cortex-m-cores")))]
pub struct CortexM<I>(core::marker::PhantomData<I>);

#[cfg(all(
    feature = "cortex-m-cores",
    target_arch = "arm",
    target_has_atomic = "32"
))]
mod cortex_m {
    use super::*;

    /// 0 = free, else the owner's id + 1.
    static OWNER: AtomicU32 = AtomicU32::new(0);

    // SAFETY: `acquire` sets PRIMASK on this core and then takes a spinlock that the
    // other cores also take, so no other context runs a critical section until `release`;
    // a nested acquire on the owning core is recognised (by `CoreId`'s contract, the owner
    // id is this core's) and released only by the outer one, and PRIMASK is cleared only
    // if it was clear. The PRIMASK writes are not `nomem`: they are also compiler barriers.
    unsafe impl<I: CoreId> critical_section::Impl for super::CortexM<I> {
        unsafe fn acquire() -> critical_section::RawRestoreState {
            let primask: u32;
            // SAFETY: reading PRIMASK and setting it (`cpsid i`) in privileged mode only
            // changes this core's interrupt mask.
            unsafe {
                core::arch::asm!("mrs {}, PRIMASK", "cpsid i", out(reg) primask, options(nostack))
            };
            let was = if primask & 1 == 0 { WAS_ENABLED } else { 0 };
            was | lock(&OWNER, I::core_id().wrapping_add(1))
        }

        unsafe fn release(state: critical_section::RawRestoreState) {
            unlock(&OWNER, state);
            if state & WAS_ENABLED != 0 {
                // SAFETY: interrupts were enabled when the matching `acquire` ran;
                // clearing PRIMASK (`cpsie i`) only changes this core's mask.
                unsafe { core::arch::asm!("cpsie i", options(nostack)) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::affinity_key;

    /// Cores that differ only in Aff3 (bits 32-39) get different keys; the bits that are
    /// not affinity (U, MT, RES1 bit 31, the reserved top byte) change nothing, and no
    /// core's key is the free lock's 0.
    #[test]
    fn aarch64_key_covers_all_four_affinity_fields() {
        let core =
            |aff3: u64, aff2: u64, aff1: u64, aff0: u64| aff3 << 32 | aff2 << 16 | aff1 << 8 | aff0;
        assert_ne!(
            affinity_key(core(0, 0, 0, 0)),
            affinity_key(core(1, 0, 0, 0))
        );
        assert_ne!(
            affinity_key(core(0x80, 1, 2, 3)),
            affinity_key(core(0, 1, 2, 3))
        );
        for field in 0..4 {
            let mut keys: [u64; 256] = [0; 256];
            for v in 0..256u64 {
                let f = |i| if i == field { v } else { 0x5A };
                keys[v as usize] = affinity_key(core(f(3), f(2), f(1), f(0)));
            }
            keys.sort_unstable();
            assert!(keys.windows(2).all(|w| w[0] != w[1]), "field {field} lost");
        }
        let not_affinity = 1 << 31 | 1 << 30 | 1 << 24 | 0xFF << 56;
        assert_eq!(
            affinity_key(core(7, 6, 5, 4) | not_affinity),
            affinity_key(core(7, 6, 5, 4))
        );
        // No core's key is the free lock's 0 (whatever one field alone holds).
        for field in 0..4 {
            for v in 0..256u64 {
                let f = |i| if i == field { v } else { 0 };
                assert_ne!(affinity_key(core(f(3), f(2), f(1), f(0))), 0);
            }
        }
        assert_ne!(affinity_key(core(0xFF, 0xFF, 0xFF, 0xFF)), 0);
    }
}
