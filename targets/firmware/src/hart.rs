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
use portable_atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize};

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
        // SAFETY: `main` is embedded-test's entry point (`-> !`), meant to be called once,
        // on the boot hart, after RAM initialisation: exactly this call.
        unsafe { main() }
    }
    while RAM_READY.load(Ordering::Acquire) != READY {
        core::hint::spin_loop();
    }
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

/// A two-party barrier for rounds of a race: both harts call [`Rendezvous::wait`] with
/// the same sequence of calls.
pub struct Rendezvous(AtomicU32);

impl Rendezvous {
    /// A barrier nobody has arrived at.
    pub const fn new() -> Self {
        Rendezvous(AtomicU32::new(0))
    }
    /// Waits until the other hart has arrived as often as this one.
    pub fn wait(&self) {
        let gen = self.0.fetch_add(1, Ordering::AcqRel) / 2;
        while self.0.load(Ordering::Acquire) < 2 * (gen + 1) {
            core::hint::spin_loop();
        }
    }
}

impl Default for Rendezvous {
    fn default() -> Self {
        Self::new()
    }
}

// ---- critical section for two harts ---------------------------------------------------

// The library's multi-hart critical section (feature `riscv-harts`): machine interrupts
// off on this hart plus a spinlock across harts, re-entrant per hart. Registered here,
// by the binary, as a library must not choose one for its users.
critical_section::set_impl!(rcuref::harts::Harts);
