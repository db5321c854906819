//! Both Cortex-M33 cores of QEMU's `mps2-an521` (Arm's SSE-200), Secure, feature
//! `dual-core`.
//!
//! Core 0 boots through cortex-m-rt as usual. Core 1 waits in reset until core 0
//! writes its vector table's address to `INITSVTOR1` and clears its `CPUWAIT` bit; its
//! table (below, in assembly) gives it a stack of its own and [`rcuref_fw_cpu1_reset`],
//! which enables the FPU and serves [`cores::run_on_all`] jobs forever. Core 1 is started
//! on the first job, after RAM initialisation.
//!
//! The critical section is rcuref's `cores::CortexM` (PRIMASK plus a spinlock across
//! cores), keyed by SSE-200's CPU_IDENTITY register; cortex-m's single-core one would
//! not stop the other core.

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use portable_atomic::{AtomicBool, AtomicPtr, AtomicU32};

/// SSE-200's per-core CPU_IDENTITY register: 0 on core 0, 1 on core 1.
const CPUID: usize = 0x4001_F000;
/// SSE-200's Secure system control: core 1's initial vector table and the cores' wait
/// bits.
const INITSVTOR1: usize = 0x5002_1114;
const CPUWAIT: usize = 0x5002_1118;

/// The SSE-200's core id, for rcuref's multi-core critical section.
pub struct Sse200;

// SAFETY: CPU_IDENTITY reads 0 on core 0 and 1 on core 1, always the same on a core.
unsafe impl rcuref::cores::CoreId for Sse200 {
    fn core_id() -> u32 {
        // SAFETY: an aligned, always-readable register of the SSE-200's memory map.
        unsafe { core::ptr::read_volatile(CPUID as *const u32) }
    }
}

critical_section::set_impl!(rcuref::cores::CortexM<Sse200>);

core::arch::global_asm!(
    r#"
    .section .bss.rcuref_fw_cpu1_stack, "aw", %nobits
    .balign 8
rcuref_fw_cpu1_stack:
    .space 65536

    .section .rodata.rcuref_fw_cpu1_vectors, "a"
    .balign 512
    .global rcuref_fw_cpu1_vectors
rcuref_fw_cpu1_vectors:
    .word rcuref_fw_cpu1_stack + 65536
    .word rcuref_fw_cpu1_reset
    .rept 14
    .word rcuref_fw_cpu1_fault
    .endr
"#
);

extern "C" {
    static rcuref_fw_cpu1_vectors: u32;
}

/// Core 1's reset handler.
#[no_mangle]
extern "C" fn rcuref_fw_cpu1_reset() -> ! {
    // The hard-float ABI: enable the FPU (CP10 and CP11, full access) as cortex-m-rt does
    // on core 0.
    // SAFETY: CPACR is this core's System Control Space register; enabling the FPU
    // changes nothing else.
    unsafe {
        let cpacr = 0xE000_ED88 as *mut u32;
        cpacr.write_volatile(cpacr.read_volatile() | 0xF << 20);
        core::arch::asm!("dsb", "isb");
    }
    cores::serve()
}

/// Any exception on core 1 other than reset: a bug. Ends the run.
#[no_mangle]
extern "C" fn rcuref_fw_cpu1_fault() -> ! {
    defmt::error!("an exception on core 1");
    semihosting::process::abort()
}

/// The cores, and jobs on both.
pub mod cores {
    use super::*;

    /// Cores the firmware runs on.
    pub const COUNT: usize = 2;

    /// The current core.
    pub fn current() -> usize {
        <Sse200 as rcuref::cores::CoreId>::core_id() as usize
    }

    static STARTED: AtomicBool = AtomicBool::new(false);
    static JOB: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());
    static GENERATION: AtomicU32 = AtomicU32::new(0);
    static DONE: AtomicU32 = AtomicU32::new(0);

    /// Starts core 1 (once).
    fn start_core1() {
        if STARTED.swap(true, Relaxed) {
            return;
        }
        // SAFETY: the SSE-200's Secure system control registers (we run Secure);
        // writing core 1's vector table address and then clearing its wait bit starts it
        // at `rcuref_fw_cpu1_reset` with its own stack.
        unsafe {
            let table = core::ptr::addr_of!(rcuref_fw_cpu1_vectors) as u32;
            (INITSVTOR1 as *mut u32).write_volatile(table);
            let wait = (CPUWAIT as *mut u32).read_volatile();
            core::arch::asm!("dsb");
            (CPUWAIT as *mut u32).write_volatile(wait & !2);
        }
    }

    /// Runs `f(core)` on both cores at once (`f(0)` here, on core 0); returns when both
    /// are done. Everything core 1 wrote is visible afterwards.
    pub fn run_on_all(f: fn(usize)) {
        assert_eq!(current(), 0, "jobs are started from core 0");
        DONE.store(0, Relaxed);
        JOB.store(f as *mut (), Relaxed);
        GENERATION.fetch_add(1, Release);
        start_core1();
        f(0);
        while DONE.load(Acquire) < 1 {
            core::hint::spin_loop();
        }
    }

    /// `run_on_all` by its two-core name.
    pub fn run_on_both(f: fn(usize)) {
        run_on_all(f)
    }

    /// Core 1's loop: runs each new job once.
    pub(super) fn serve() -> ! {
        // Core 1 starts with the first job already posted.
        let mut seen = 0;
        loop {
            let g = GENERATION.load(Acquire);
            if g == seen {
                core::hint::spin_loop();
                continue;
            }
            seen = g;
            let p = JOB.load(Relaxed);
            // SAFETY: `JOB` only holds a `fn(usize)` stored by `run_on_all` before the
            // generation this core acquired.
            let f: fn(usize) = unsafe { core::mem::transmute::<*mut (), fn(usize)>(p) };
            f(1);
            DONE.fetch_add(1, Release);
        }
    }
}
