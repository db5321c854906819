//! Support code for rcuref's on-target tests and demo firmware in QEMU.
//!
//! * a defmt logger over semihosting (QEMU prints it on the host's stdout, and
//!   `cargo xtask qemu-run` decodes it);
//! * a timer interrupt for interrupt-context tests ([`tick`]: SysTick on Cortex-M, the
//!   EL1 physical timer on AArch64), where the build sets `cfg(rcuref_fw_tick)`;
//! * jobs on every core ([`cores`]: two RISC-V harts, four AArch64 cores, the two
//!   Cortex-M33s of mps2-an521), where the build sets `cfg(rcuref_fw_cores)`, with a
//!   critical section that is sound on all of them.
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
/// The cores (harts) and jobs on all of them.
#[cfg(any(target_arch = "riscv32", target_arch = "riscv64"))]
pub use hart as cores;

#[cfg(target_arch = "aarch64")]
mod a64;

/// The heavy fence's IPI ticket protocol, shared by the harts and the AArch64 cores.
#[cfg(any(
    target_arch = "aarch64",
    all(
        rcuref_asymmetric_fence,
        any(target_arch = "riscv32", target_arch = "riscv64")
    )
))]
mod ipi;
#[cfg(target_arch = "aarch64")]
pub use a64::{cores, tick};

#[cfg(all(target_arch = "arm", rcuref_fw_cores))]
mod m33;
#[cfg(all(target_arch = "arm", rcuref_fw_cores))]
pub use m33::cores;

/// One Cortex-M core with compare-and-swap: rcuref's multi-core critical section with a
/// single core id (so it is tested on every Cortex-M target that has it).
#[cfg(all(target_arch = "arm", not(rcuref_fw_cores), target_has_atomic = "32"))]
mod single_core {
    pub struct OneCore;
    // SAFETY: one core: its id is always 0.
    unsafe impl rcuref::cores::CoreId for OneCore {
        fn core_id() -> u32 {
            0
        }
    }
    critical_section::set_impl!(rcuref::cores::CortexM<OneCore>);
}

/// Cortex-M0 (no compare-and-swap): PRIMASK alone, sound on its one core.
#[cfg(all(target_arch = "arm", not(target_has_atomic = "32")))]
mod single_core {
    pub struct Primask;
    // SAFETY: one core: masking its interrupts excludes every other context.
    unsafe impl critical_section::Impl for Primask {
        unsafe fn acquire() -> critical_section::RawRestoreState {
            let primask: u32;
            // SAFETY: reading PRIMASK and setting it (`cpsid i`), privileged; not
            // `nomem`, so the asm is a compiler barrier.
            unsafe { core::arch::asm!("mrs {}, PRIMASK", "cpsid i", out(reg) primask) };
            u8::from(primask & 1 == 0)
        }
        unsafe fn release(was_enabled: critical_section::RawRestoreState) {
            if was_enabled != 0 {
                // SAFETY: interrupts were enabled at the matching acquire.
                unsafe { core::arch::asm!("cpsie i") };
            }
        }
    }
    critical_section::set_impl!(Primask);
}

/// Defines the binary's timer interrupt handler, forwarding to [`tick`] (Cortex-M: the
/// `SysTick` exception; AArch64: nothing to define, the firmware's IRQ vector does it).
#[macro_export]
macro_rules! tick_handler {
    () => {
        #[cfg(target_arch = "arm")]
        $crate::systick_handler!();
    };
}

/// Logs the panic with its message (as `defmt::error!`) and aborts over semihosting,
/// which the runner reports as a failed test (or a passed `#[should_panic]` one).
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    defmt::error!("{}", defmt::Display2Format(info));
    semihosting::process::abort()
}

/// A barrier for rounds of a race between cores: each of `parties` cores calls
/// [`Rendezvous::wait`] with the same sequence of calls.
#[cfg(rcuref_fw_cores)]
pub struct Rendezvous {
    arrived: portable_atomic::AtomicU32,
    parties: u32,
}

#[cfg(rcuref_fw_cores)]
impl Rendezvous {
    /// A barrier for every core ([`cores::COUNT`]), nobody arrived yet.
    pub const fn new() -> Self {
        Self::with_parties(cores::COUNT as u32)
    }
    /// A barrier for `parties` cores.
    pub const fn with_parties(parties: u32) -> Self {
        Rendezvous {
            arrived: portable_atomic::AtomicU32::new(0),
            parties,
        }
    }
    /// Waits until every party has arrived as often as this one.
    pub fn wait(&self) {
        use core::sync::atomic::Ordering::{AcqRel, Acquire};
        let round = self.arrived.fetch_add(1, AcqRel) / self.parties;
        while self.arrived.load(Acquire) < self.parties * (round + 1) {
            core::hint::spin_loop();
        }
    }
}

#[cfg(rcuref_fw_cores)]
impl Default for Rendezvous {
    fn default() -> Self {
        Self::new()
    }
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
        // Widen the window between load and store a little, with a loop whose trip
        // count the compiler cannot see: QEMU takes interrupts only between translated
        // blocks, and with several vCPUs (MTTCG) it does not end a block at `yield`, so
        // an unrolled window would never be interrupted (seen on mps2-an521, release).
        for _ in 0..core::hint::black_box(4u32) {
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
