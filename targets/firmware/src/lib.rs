//! Support code for rcuref's on-target tests and demo firmware in QEMU.
//!
//! * a defmt logger over semihosting (QEMU prints it on the host's stdout, and
//!   `cargo xtask qemu-run` decodes it);
//! * Cortex-M: SysTick control for interrupt-context tests ([`tick`]);
//! * RISC-V: a second hart that runs jobs ([`hart`]), and a critical section that is
//!   sound with two harts.
#![no_std]

#[cfg(target_arch = "arm")]
use cortex_m_rt as _;
use defmt_semihosting as _;
#[cfg(any(target_arch = "riscv32", target_arch = "riscv64"))]
use riscv_rt as _;

#[cfg(target_arch = "arm")]
pub mod tick;

#[cfg(any(target_arch = "riscv32", target_arch = "riscv64"))]
pub mod hart;

/// Logs the panic with its message (as `defmt::error!`) and aborts over semihosting,
/// which the runner reports as a failed test (or a passed `#[should_panic]` one).
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    defmt::error!("{}", defmt::Display2Format(info));
    semihosting::process::abort()
}

/// A plain read-modify-write counter: `load` then `store`, deliberately not atomic as a
/// whole. Negative controls use it to prove that the contexts really race: concurrent
/// increments must lose updates.
pub struct RacyCounter(portable_atomic::AtomicU32);

impl RacyCounter {
    /// A counter at zero.
    pub const fn new() -> Self {
        RacyCounter(portable_atomic::AtomicU32::new(0))
    }
    /// Adds one with a separate load and store, so that a concurrent increment between
    /// them is lost. Each access is atomic (no undefined behaviour); the pair is not.
    #[inline(never)]
    pub fn bump(&self) {
        use core::sync::atomic::Ordering::Relaxed;
        let v = self.0.load(Relaxed);
        // Widen the window between load and store a little.
        for _ in 0..4 {
            core::hint::spin_loop();
        }
        self.0.store(v.wrapping_add(1), Relaxed);
    }
    /// The current value.
    pub fn get(&self) -> u32 {
        self.0.load(core::sync::atomic::Ordering::Relaxed)
    }
}

impl Default for RacyCounter {
    fn default() -> Self {
        Self::new()
    }
}
