//! A critical section for multi-hart RISC-V in machine mode (feature `riscv-harts`).
//!
//! `FileRef64` on riscv32 (no 64-bit atomics) and every read-modify-write on targets
//! without compare-and-swap need a critical section that excludes **every** context that
//! could touch the same counter: on a multi-hart part that means the other harts, not
//! only this hart's interrupts. [`Harts`] masks machine interrupts on this hart and then
//! takes a spinlock that the other harts respect; it nests on the owning hart.
//!
//! rcuref does not register it (a library must not choose a critical section for its
//! users): the binary does, once:
//!
//! ```ignore
//! critical_section::set_impl!(rcuref::harts::Harts);
//! ```
//!
//! Requirements: machine mode (it reads `mhartid` and writes `mstatus`), harts that share
//! memory coherently, and atomic instructions (the `A` extension: the spinlock is a
//! compare-and-swap). The feature selects critical-section's `restore-state-u8`.

use core::sync::atomic::{AtomicUsize, Ordering};

/// The hart critical section: machine interrupts off on this hart, then a spinlock
/// across harts (re-entrant on the owning hart).
pub struct Harts;

/// 0 = free, otherwise hart id + 1 of the owner.
static OWNER: AtomicUsize = AtomicUsize::new(0);

const MIE_WAS_ON: u8 = 1;
const NESTED: u8 = 2;

/// Clears `mstatus.MIE` and returns whether it was set.
#[inline(always)]
fn disable_interrupts() -> bool {
    let old: usize;
    // SAFETY: `csrrci` on mstatus in machine mode (this module's documented requirement)
    // only clears the interrupt-enable bit. It is *not* marked `nomem`: the asm must also
    // be a compiler barrier, or the critical section's memory accesses could be moved
    // before interrupts are masked.
    unsafe { core::arch::asm!("csrrci {0}, mstatus, 8", out(reg) old, options(nostack)) };
    old & 8 != 0
}

/// This hart's id.
#[inline(always)]
fn hart_id() -> usize {
    let id: usize;
    // SAFETY: reading `mhartid` in machine mode has no side effects.
    unsafe { core::arch::asm!("csrr {0}, mhartid", out(reg) id, options(nomem, nostack)) };
    id
}

// SAFETY: `acquire` masks machine interrupts on this hart and then takes a spinlock that
// the other harts also take, so no other context runs a critical section until
// `release`; a nested acquire on the owning hart is recognised (the owner is this hart's
// id) and released only by the outer one, and interrupts are restored only as they were.
unsafe impl critical_section::Impl for Harts {
    unsafe fn acquire() -> critical_section::RawRestoreState {
        let mie = disable_interrupts();
        let me = hart_id() + 1;
        let mut state = if mie { MIE_WAS_ON } else { 0 };
        if OWNER.load(Ordering::Relaxed) == me {
            state |= NESTED;
        } else {
            while OWNER
                .compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                core::hint::spin_loop();
            }
        }
        state
    }

    unsafe fn release(state: critical_section::RawRestoreState) {
        if state & NESTED == 0 {
            OWNER.store(0, Ordering::Release);
        }
        if state & MIE_WAS_ON != 0 {
            // SAFETY: interrupts were enabled when the matching `acquire` ran; setting
            // mstatus.MIE in machine mode touches no memory, but the asm is not `nomem`:
            // as a compiler barrier it keeps the critical section's accesses before the
            // point where an interrupt handler on this hart could enter one of its own
            // (it would be taken for a nested acquire).
            unsafe { core::arch::asm!("csrsi mstatus, 8", options(nostack)) };
        }
    }
}
