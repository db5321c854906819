//! Two harts on QEMU `virt`.
//!
//! Boot: riscv-rt calls `_mp_hook` on every hart; ours returns true on hart 0 only, so
//! hart 0 initialises RAM and the others skip it. riscv-rt then calls `hal_main(hartid)`
//! on every hart. Hart 0 marks RAM ready and enters embedded-test's `main`; other harts
//! wait for that mark and then serve [`run_on_both`] jobs forever.
//!
//! The critical section is rcuref's `harts::Harts` (sound on two harts: machine
//! interrupts off on this hart plus a spinlock across harts, re-entrant per hart).

use core::sync::atomic::Ordering;
use portable_atomic::{AtomicBool, AtomicPtr, AtomicUsize};

core::arch::global_asm!(
    r#".section .init.mp_hook, "ax"
    .global _mp_hook
_mp_hook:
    seqz a0, a0
    ret
"#
);

/// Written by hart 0 once RAM is initialised. The other harts poll it before RAM is
/// initialised, so they wait for a magic value that neither QEMU's zeroed RAM nor hart 0's
/// zeroing of `.bss` can produce.
static RAM_READY: AtomicUsize = AtomicUsize::new(0);
const READY: usize = 0x5AFE_B007;

/// The job for the second hart: a `fn(usize)` as a pointer, or null.
static JOB: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());
static JOB_DONE: AtomicBool = AtomicBool::new(false);

extern "C" {
    fn main() -> !;
}

/// riscv-rt's entry after RAM initialisation, on every hart.
#[export_name = "hal_main"]
extern "C" fn hal_main(hartid: usize) -> ! {
    if hartid == 0 {
        RAM_READY.store(READY, Ordering::Release);
        #[cfg(rcuref_asymmetric_fence)]
        heavy::accept_requests();
        // SAFETY: `main` is embedded-test's entry point (`-> !`), meant to be called once,
        // on the boot hart, after RAM initialisation: exactly this call.
        unsafe { main() }
    }
    while RAM_READY.load(Ordering::Acquire) != READY {
        core::hint::spin_loop();
    }
    #[cfg(rcuref_asymmetric_fence)]
    heavy::accept_requests();
    loop {
        let p = JOB.load(Ordering::Acquire);
        if p.is_null() {
            core::hint::spin_loop();
            continue;
        }
        // SAFETY: `JOB` only holds null or a `fn(usize)` stored by `run_on_both`.
        let f: fn(usize) = unsafe { core::mem::transmute::<*mut (), fn(usize)>(p) };
        f(hartid);
        JOB.store(core::ptr::null_mut(), Ordering::Relaxed);
        JOB_DONE.store(true, Ordering::Release);
    }
}

/// Harts the firmware runs on (`-smp 2`).
pub const COUNT: usize = 2;

/// The current hart.
pub fn current() -> usize {
    riscv::register::mhartid::read()
}

/// Runs `f(hart)` on both harts at once; returns when both are done (the name the other
/// targets' `cores` modules share).
pub fn run_on_all(f: fn(usize)) {
    run_on_both(f)
}

/// Runs `f(0)` on hart 0 and `f(1)` on hart 1 at the same time; returns when both are
/// done. Everything `f(1)` wrote is visible afterwards.
pub fn run_on_both(f: fn(usize)) {
    JOB_DONE.store(false, Ordering::Relaxed);
    JOB.store(f as *mut (), Ordering::Release);
    f(0);
    while !JOB_DONE.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
}

pub use crate::Rendezvous;

// ---- critical section for two harts ---------------------------------------------------

// The library's multi-hart critical section (feature `riscv-harts`): machine interrupts
// off on this hart plus a spinlock across harts, re-entrant per hart. Registered here,
// by the binary, as a library must not choose one for its users.
critical_section::set_impl!(rcuref::harts::Harts);

// ---- the heavy fence of the asymmetric-fence mode: an IPI to the other hart -----------

/// `rcuref`'s heavy fence for this firmware (`--cfg rcuref_asymmetric_fence`): the
/// ticket protocol of `crate::ipi` over the CLINT, whose machine software interrupt
/// each hart's handler clears before it reads its ticket.
#[cfg(rcuref_asymmetric_fence)]
pub mod heavy {
    use crate::ipi::Tickets;
    pub use crate::ipi::{checks, observe_serves, serve_while_waiting, stuck};

    /// QEMU `virt`'s CLINT: each hart's machine-software-interrupt pending word.
    const MSIP: usize = 0x0200_0000;
    /// The harts the firmware runs on (`-smp 2`).
    const HARTS: usize = super::COUNT;

    static TICKETS: Tickets<HARTS> = Tickets::new(fence_io);

    fn msip(hart: usize, v: u32) {
        // SAFETY: hart `hart`'s MSIP word of the CLINT (`hart < HARTS`): an aligned,
        // always-writable MMIO register; writing it only raises or clears that hart's
        // software interrupt.
        unsafe { core::ptr::write_volatile((MSIP + 4 * hart) as *mut u32, v) }
    }

    /// A fence that also orders the MMIO accesses (the CLINT) against memory.
    fn fence_io() {
        // SAFETY: a fence instruction: no memory access, no register state.
        unsafe { core::arch::asm!("fence iorw, iorw") }
    }

    /// Enables this hart's machine software interrupt (and machine interrupts).
    pub(crate) fn accept_requests() {
        // The handler is referenced from here so that the linker keeps it (riscv-rt only
        // names a weak default for `MachineSoft`).
        core::hint::black_box(__riscv_rt_machine_soft as extern "C" fn());
        // SAFETY: the handler (`machine_soft` below) is installed through riscv-rt's
        // trap vector and touches only its own atomics and this hart's MSIP word.
        unsafe {
            riscv::register::mie::set_msoft();
            riscv::interrupt::enable();
        }
    }

    #[riscv_rt::core_interrupt(riscv::interrupt::Interrupt::MachineSoft)]
    fn machine_soft() {
        let me = riscv::register::mhartid::read();
        msip(me, 0);
        fence_io();
        TICKETS.serve(me);
    }

    /// The heavy fence (`crate::ipi`).
    pub struct ClintIpi;

    // SAFETY: returns only after every other hart has executed `fence iorw, iorw` in
    // `Tickets::serve` (from `machine_soft` or from its own wait loop) after reading a
    // ticket at least as new as ours (so after this call
    // began), and executes one itself before and after: the contract of `HeavyFence`
    // (`Tickets::request`; each interrupt is raised after a fence, so the ticket is
    // visible to the handler it starts).
    unsafe impl rcuref::rcu::heavy::HeavyFence for ClintIpi {
        fn heavy_fence() {
            let me = riscv::register::mhartid::read();
            TICKETS.request(me, |targets| {
                for h in (0..HARTS).filter(|h| targets & 1 << h != 0) {
                    fence_io();
                    msip(h, 1);
                }
            });
        }
    }

    rcuref::set_heavy_fence!(ClintIpi);
}
