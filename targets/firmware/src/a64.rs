//! Four Cortex-A53 cores on QEMU `virt`, at EL1 with the MMU off, no firmware.
//!
//! Boot: QEMU enters `_start` on core 0 (the others are powered off). Every core sets
//! its own stack (64 KiB each, by its `MPIDR_EL1` affinity), enables FP/SIMD and
//! installs the vector table; core 0 clears `.bss`, brings up the GICv2 distributor and
//! its CPU interface, powers the other cores on through PSCI `CPU_ON` (over `hvc`: QEMU
//! implements PSCI itself when it boots a kernel at EL1), waits until they are up and
//! enters embedded-test's `main`. The other cores bring up their CPU interface and
//! serve [`cores::run_on_all`] jobs forever.
//!
//! Interrupts: IRQs go through one vector to [`irq`], which reads the GIC's acknowledge
//! register and dispatches: the EL1 physical timer (PPI 30) to [`tick`], software
//! generated interrupt 1 to the asymmetric-fence mode's heavy fence (`cores::heavy`), 3
//! to a sleeping grace-period wait's wake (`cores::wake`).
//! A synchronous exception (a bug) is reported over defmt and ends the run.
//!
//! The critical section is rcuref's `cores::Aarch64` (IRQs masked on this core plus a
//! spinlock across cores). Exclusive accesses with the MMU off work in QEMU; on real
//! hardware they need the MMU and caches on (Normal memory).

use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use portable_atomic::{AtomicPtr, AtomicU32, AtomicUsize};

critical_section::set_impl!(rcuref::cores::Aarch64);

core::arch::global_asm!(
    r#"
    .section .text.boot, "ax"
    .global _start
_start:
    mrs     x0, mpidr_el1
    and     x0, x0, #0xff
    ldr     x1, =__stacks_end
    lsl     x2, x0, #16
    sub     x1, x1, x2
    mov     sp, x1
    mov     x3, #(3 << 20)
    msr     cpacr_el1, x3
    isb
    ldr     x3, =__vectors
    msr     vbar_el1, x3
    isb
    cbnz    x0, 2f
    ldr     x1, =__bss_start
    ldr     x2, =__bss_end
1:  cmp     x1, x2
    b.hs    3f
    str     xzr, [x1], #8
    b       1b
3:  bl      rcuref_fw_boot_core0
    b       .
2:  bl      rcuref_fw_boot_secondary
    b       .
    .ltorg

    .section .text.vectors, "ax"
    .balign 2048
    .global __vectors
__vectors:
    .balign 128
    b       rcuref_fw_unexpected_entry      // current EL, SP0: synchronous
    .balign 128
    b       rcuref_fw_unexpected_entry      // IRQ
    .balign 128
    b       rcuref_fw_unexpected_entry      // FIQ
    .balign 128
    b       rcuref_fw_unexpected_entry      // SError
    .balign 128
    b       rcuref_fw_sync_entry            // current EL, SPx: synchronous
    .balign 128
    b       rcuref_fw_irq_entry             // IRQ
    .balign 128
    b       rcuref_fw_unexpected_entry      // FIQ
    .balign 128
    b       rcuref_fw_unexpected_entry      // SError
    .balign 128
    b       rcuref_fw_unexpected_entry      // lower EL (never used)
    .balign 128
    b       rcuref_fw_unexpected_entry
    .balign 128
    b       rcuref_fw_unexpected_entry
    .balign 128
    b       rcuref_fw_unexpected_entry
    .balign 128
    b       rcuref_fw_unexpected_entry
    .balign 128
    b       rcuref_fw_unexpected_entry
    .balign 128
    b       rcuref_fw_unexpected_entry
    .balign 128
    b       rcuref_fw_unexpected_entry

    // Every caller-saved register, integer and FP/SIMD, at its place in the frame: the
    // interrupted code expects them back (IRQs stay masked until `eret`, so there is no
    // nesting to save for). One list for the save (`stp`, `str`) and the restore (`ldp`,
    // `ldr`).
    .macro rcuref_fw_caller_saved pair, one
    \pair   x0, x1, [sp, #0]
    \pair   x2, x3, [sp, #16]
    \pair   x4, x5, [sp, #32]
    \pair   x6, x7, [sp, #48]
    \pair   x8, x9, [sp, #64]
    \pair   x10, x11, [sp, #80]
    \pair   x12, x13, [sp, #96]
    \pair   x14, x15, [sp, #112]
    \pair   x16, x17, [sp, #128]
    \pair   x18, x29, [sp, #144]
    \one    x30, [sp, #160]
    \pair   q0, q1, [sp, #176]
    \pair   q2, q3, [sp, #208]
    \pair   q4, q5, [sp, #240]
    \pair   q6, q7, [sp, #272]
    \pair   q16, q17, [sp, #304]
    \pair   q18, q19, [sp, #336]
    \pair   q20, q21, [sp, #368]
    \pair   q22, q23, [sp, #400]
    \pair   q24, q25, [sp, #432]
    \pair   q26, q27, [sp, #464]
    \pair   q28, q29, [sp, #496]
    \pair   q30, q31, [sp, #528]
    .endm

    .section .text.irq, "ax"
rcuref_fw_irq_entry:
    sub     sp, sp, #688
    rcuref_fw_caller_saved stp, str
    add     x2, sp, #560                    // (x2 is saved: a base past stp's reach)
    mrs     x0, fpcr
    mrs     x1, fpsr
    stp     x0, x1, [x2, #0]
    mrs     x0, elr_el1
    mrs     x1, spsr_el1
    stp     x0, x1, [x2, #16]
    bl      rcuref_fw_irq
    add     x2, sp, #560
    ldp     x0, x1, [x2, #16]
    msr     elr_el1, x0
    msr     spsr_el1, x1
    ldp     x0, x1, [x2, #0]
    msr     fpcr, x0
    msr     fpsr, x1
    rcuref_fw_caller_saved ldp, ldr
    add     sp, sp, #688
    eret

rcuref_fw_sync_entry:
    mrs     x0, esr_el1
    mrs     x1, elr_el1
    mrs     x2, far_el1
    bl      rcuref_fw_sync_exception
    b       .

rcuref_fw_unexpected_entry:
    bl      rcuref_fw_unexpected_exception
    b       .
"#
);

extern "C" {
    /// embedded-test's entry point (or a plain firmware's `main`).
    fn main() -> !;
}

/// Cores that have checked in (core 0 included).
static ONLINE: AtomicUsize = AtomicUsize::new(0);

/// Core 0, after `.bss` is clear.
#[no_mangle]
extern "C" fn rcuref_fw_boot_core0() -> ! {
    gic::init_distributor();
    gic::init_cpu();
    ONLINE.fetch_add(1, AcqRel);
    extern "C" {
        fn _start();
    }
    for core in 1..cores::COUNT {
        let r = psci_cpu_on(core as u64, _start as *const () as usize as u64);
        assert!(r == 0, "PSCI CPU_ON of core {} failed: {}", core, r);
    }
    while ONLINE.load(Acquire) < cores::COUNT {
        core::hint::spin_loop();
    }
    // SAFETY: `main` is embedded-test's entry point (`-> !`), meant to be called once, on
    // the boot core, after RAM initialisation: exactly this call.
    unsafe { main() }
}

/// Every other core, once PSCI has started it at `_start`.
#[no_mangle]
extern "C" fn rcuref_fw_boot_secondary(core: usize) -> ! {
    gic::init_cpu();
    ONLINE.fetch_add(1, AcqRel);
    cores::serve(core)
}

/// PSCI `CPU_ON` (SMC calling convention, 64-bit, over `hvc`): starts core `mpidr` at
/// `entry`. Returns PSCI's status (0: success).
fn psci_cpu_on(mpidr: u64, entry: u64) -> i64 {
    let r: i64;
    // SAFETY: a PSCI call to QEMU's PSCI implementation (EL1, `hvc` conduit); it starts
    // the core at `entry` (our `_start`, which sets up everything the core needs) and
    // clobbers at most x0-x17, all declared.
    unsafe {
        core::arch::asm!(
            "hvc #0",
            inout("x0") 0xC400_0003u64 => r,
            inout("x1") mpidr => _,
            inout("x2") entry => _,
            inout("x3") 0u64 => _,
            out("x4") _, out("x5") _, out("x6") _, out("x7") _,
            out("x8") _, out("x9") _, out("x10") _, out("x11") _,
            out("x12") _, out("x13") _, out("x14") _, out("x15") _,
            out("x16") _, out("x17") _,
            options(nostack)
        )
    };
    r
}

/// A synchronous exception: a bug (a fault, an undefined instruction). Reports it and
/// ends the run as a failure.
#[no_mangle]
extern "C" fn rcuref_fw_sync_exception(esr: u64, elr: u64, far: u64) -> ! {
    defmt::error!(
        "synchronous exception on core {=usize}: ESR {=u64:#x} ELR {=u64:#x} FAR {=u64:#x}",
        cores::current(),
        esr,
        elr,
        far
    );
    semihosting::process::abort()
}

#[no_mangle]
extern "C" fn rcuref_fw_unexpected_exception() -> ! {
    defmt::error!("unexpected exception on core {=usize}", cores::current());
    semihosting::process::abort()
}

/// The IRQ dispatcher, from the vector.
#[no_mangle]
extern "C" fn rcuref_fw_irq() {
    let iar = gic::acknowledge();
    let id = iar & 0x3FF;
    match id {
        tick::PPI => tick::on_interrupt(),
        cores::heavy::SGI => cores::heavy::on_request(),
        cores::wake::SGI => cores::wake::on_wake(),
        1020..=1023 => return, // spurious: nothing to end
        _ => {}
    }
    gic::end(iar);
}

/// QEMU `virt`'s GICv2: distributor and CPU interface.
mod gic {
    const GICD: usize = 0x0800_0000;
    const GICC: usize = 0x0801_0000;

    fn write(addr: usize, v: u32) {
        // SAFETY: an aligned GICv2 register of QEMU `virt`'s memory map (device memory,
        // always mapped with the MMU off); writing it configures only the GIC.
        unsafe { core::ptr::write_volatile(addr as *mut u32, v) }
    }

    fn read(addr: usize) -> u32 {
        // SAFETY: as in `write`; reading GICC_IAR acknowledges the interrupt, which is
        // what its one caller wants.
        unsafe { core::ptr::read_volatile(addr as *const u32) }
    }

    /// Enables the distributor (once, core 0).
    pub(super) fn init_distributor() {
        write(GICD, 1);
    }

    /// This core's CPU interface: every priority passes, SGIs and the timer's PPI
    /// enabled (those enables are banked per core), IRQs unmasked.
    pub(super) fn init_cpu() {
        write(GICC + 0x04, 0xF0); // GICC_PMR
        write(GICC, 1); // GICC_CTLR
        write(GICD + 0x100, 0xFFFF | 1 << super::tick::PPI); // GICD_ISENABLER0
                                                             // SAFETY: unmasking IRQs on this core; the vector is installed.
        unsafe { core::arch::asm!("msr daifclr, #2", options(nostack)) };
    }

    pub(super) fn acknowledge() -> u32 {
        read(GICC + 0x0C)
    }

    pub(super) fn end(iar: u32) {
        write(GICC + 0x10, iar);
    }

    /// Raises software generated interrupt `id` on the cores in `targets` (a bit per
    /// core).
    pub(super) fn sgi(targets: u32, id: u32) {
        // DSB: the stores before the request are visible before the interrupt is.
        // SAFETY: a barrier.
        unsafe { core::arch::asm!("dsb ish", options(nostack)) };
        write(GICD + 0xF00, (targets & 0xFF) << 16 | id);
    }
}

/// The cores, and jobs on all of them.
pub mod cores {
    use super::*;

    /// Cores the firmware runs on (`-smp 4`).
    pub const COUNT: usize = 4;

    /// The current core (its `MPIDR_EL1` affinity 0).
    pub fn current() -> usize {
        let mpidr: u64;
        // SAFETY: reading MPIDR_EL1 at EL1 has no side effects.
        unsafe { core::arch::asm!("mrs {}, mpidr_el1", out(reg) mpidr, options(nomem, nostack)) };
        (mpidr & 0xFF) as usize
    }

    /// The job: a `fn(usize)` as a pointer, a generation count, the cores done with it.
    static JOB: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());
    static GENERATION: AtomicU32 = AtomicU32::new(0);
    static DONE: AtomicUsize = AtomicUsize::new(0);

    /// Runs `f(core)` on every core at once (`f(0)` on this one, the boot core); returns
    /// when all are done. Everything they wrote is visible afterwards.
    pub fn run_on_all(f: fn(usize)) {
        assert_eq!(current(), 0, "jobs are started from the boot core");
        DONE.store(0, Relaxed);
        JOB.store(f as *mut (), Relaxed);
        GENERATION.fetch_add(1, Release);
        // Wake the others from `wfi` (`serve`); `sgi`'s `dsb` makes the new generation
        // visible before the interrupt is.
        super::gic::sgi(((1 << COUNT) - 1) & !1, JOB_SGI);
        f(0);
        while DONE.load(Acquire) < COUNT - 1 {
            core::hint::spin_loop();
        }
    }

    /// The SGI that tells the other cores a job is waiting (its handler does nothing:
    /// it only ends their `wfi`).
    pub const JOB_SGI: u32 = 2;

    /// Looks with IRQs masked (`look`) and sleeps in `wfi` when it finds nothing
    /// (`None`); returns what it found, with the IRQ mask as it was. An interrupt
    /// raised after the look stays pending, which ends the `wfi` at once (a pending
    /// IRQ wakes the core, masked or not), and is taken once IRQs are unmasked: the
    /// wake that `look` missed is not lost. Called with IRQs unmasked (both callers
    /// are), the interrupt is taken on return; called with them masked, it stays
    /// pending for the caller's unmask, and a later call returns at once.
    fn wfi_unless<T>(look: impl FnOnce() -> Option<T>) -> Option<T> {
        let daif: u64;
        // SAFETY: reading this core's interrupt masks, then masking IRQs; the masks are
        // restored below on every path (a panic in `look` cannot unwind past this
        // frame: the firmware's panic handler never returns).
        unsafe {
            core::arch::asm!("mrs {}, daif", "msr daifset, #2", out(reg) daif, options(nostack))
        };
        let found = look();
        if found.is_none() {
            // SAFETY: `wfi` waits for an interrupt (pending ones end it at once).
            unsafe { core::arch::asm!("wfi", options(nostack)) };
        }
        // SAFETY: restoring the masks read above; where that unmasks IRQs, what is
        // pending is taken, with the vector installed before any core sleeps here.
        unsafe { core::arch::asm!("msr daif, {}", in(reg) daif, options(nostack)) };
        found
    }

    /// A secondary core's loop: runs each new job once, asleep in `wfi` between jobs.
    ///
    /// Asleep, not spinning: QEMU runs each core as a host thread, and on a 2-core host
    /// two idle cores that spin take half the time the two cores of a 2-core job need
    /// (the store-buffering test, whose rounds need both of its cores running at once,
    /// ran past its 120 s in CI that way). The look at the generation and the `wfi`
    /// are `wfi_unless`'s, so a job's SGI raised after the look is not lost.
    /// Heavy-fence requests (SGI 1) wake the core alike.
    pub(super) fn serve(core: usize) -> ! {
        // No job before every core is online (core 0 waits for that before `main`), so
        // the generation of none: a core that read `GENERATION` here, after checking in,
        // could read the first job's and take it as seen (and `run_on_all` would wait
        // for it for ever).
        let mut seen = 0;
        loop {
            let Some(g) = wfi_unless(|| {
                let g = GENERATION.load(Acquire);
                (g != seen).then_some(g)
            }) else {
                continue;
            };
            seen = g;
            let p = JOB.load(Relaxed);
            // SAFETY: `JOB` only holds a `fn(usize)` stored by `run_on_all` before the
            // generation this core acquired.
            let f: fn(usize) = unsafe { core::mem::transmute::<*mut (), fn(usize)>(p) };
            f(core);
            DONE.fetch_add(1, Release);
        }
    }

    /// A sleep and its wake for a grace-period wait on bare metal (issue 27): the
    /// waiting core sleeps in `wfi` and a reader's unlock on another core wakes it with
    /// software generated interrupt 3, through the domain's wake hook. The sleep's two
    /// duties (`rcuref::rcu::Waiting::sleep`): a wake sent after the wait began and
    /// before the `wfi` is remembered by the generation, read before the announcement
    /// and looked at by `wfi_unless`, so the SGI of a wake that lands after the look
    /// ends the `wfi` at once;
    /// the bound is any other interrupt of the sleeping core (the timer's tick, which
    /// the caller must keep running: in the full-fence mode an unlock can miss the
    /// announcement).
    pub mod wake {
        use super::*;
        use core::sync::atomic::Ordering::SeqCst;

        /// The SGI a wake raises.
        pub const SGI: u32 = 3;

        /// Moved on by every wake.
        static GENERATION: AtomicU32 = AtomicU32::new(0);
        /// The cores that may be asleep (a bit per core).
        static SLEEPERS: AtomicU32 = AtomicU32::new(0);
        /// Wake SGIs taken, per core.
        static TAKEN: [AtomicU32; COUNT] = [const { AtomicU32::new(0) }; COUNT];

        /// The generation to pass to [`sleep`]: read it before the wait's announcement
        /// (`Waiting::sleep`), so that a wake sent after that is seen.
        pub fn generation() -> u32 {
            GENERATION.load(Acquire)
        }

        /// Sleeps in `wfi` unless a wake has come since `seen` was read; returns on a
        /// wake or on any other interrupt of this core (the bound), with the IRQ mask
        /// as it was (call it with IRQs unmasked: `wfi_unless`).
        pub fn sleep(seen: u32) {
            let me = 1 << current();
            // `SeqCst` here and in `wake`: either this load sees the wake's generation
            // or the wake's load of `SLEEPERS` sees this core (store buffering).
            SLEEPERS.fetch_or(me, SeqCst);
            let _ = super::wfi_unless(|| (GENERATION.load(SeqCst) != seen).then_some(()));
            // Awake: later wakes need not interrupt this core until it sleeps again
            // (the next sleep announces itself before its look). A wake that read the
            // bit before this clears it still raises its SGI: taken while awake.
            SLEEPERS.fetch_and(!me, Relaxed);
        }

        /// The domain's wake hook: moves the generation on and raises the SGI on every
        /// core that may be asleep. Safe in an interrupt handler (no lock, no wait).
        pub fn wake() {
            GENERATION.fetch_add(1, SeqCst);
            let targets = SLEEPERS.load(SeqCst) & !(1 << current());
            if targets != 0 {
                super::super::gic::sgi(targets, SGI);
            }
        }

        /// The handler of the wake SGI: counts it (nothing else to do: taking it has
        /// ended the `wfi`).
        pub(crate) fn on_wake() {
            TAKEN[current()].fetch_add(1, Relaxed);
        }

        /// Wake SGIs core `core` has taken so far.
        pub fn taken(core: usize) -> u32 {
            TAKEN[core].load(Relaxed)
        }
    }

    /// The heavy fence of the asymmetric-fence mode: software generated interrupt 1 to
    /// every other core, each of which executes `dmb ish` and publishes the request's
    /// ticket as served; the caller waits for all of them (the ticket protocol of
    /// `crate::ipi`, which the RISC-V harts' CLINT IPI shares). Requests are served from
    /// the start on every core, by the SGI's handler and by a core's own wait loop, so
    /// cores fencing at once serve each other while they wait, interrupts masked or not.
    pub mod heavy {
        use super::*;
        use crate::ipi::Tickets;
        pub use crate::ipi::{checks, observe_serves, serve_while_waiting, stuck};

        /// The SGI that asks for a fence.
        pub const SGI: u32 = 1;

        static TICKETS: Tickets<COUNT> = Tickets::new(dmb);

        fn dmb() {
            // SAFETY: a barrier.
            unsafe { core::arch::asm!("dmb ish", options(nostack)) };
        }

        pub(crate) fn on_request() {
            TICKETS.serve(current());
        }

        /// The heavy fence.
        pub struct SgiFence;

        // SAFETY: returns only after every other core has executed `dmb ish` in
        // `Tickets::serve` (from `on_request` or from its own wait loop) after reading a
        // ticket at least as new as ours (so after this call
        // began), and executes one itself before and after: the contract of
        // `HeavyFence` (`Tickets::request`). The SGI is raised after a `dsb ish`, so the
        // ticket is visible to the handler that the interrupt starts.
        unsafe impl rcuref::rcu::heavy::HeavyFence for SgiFence {
            fn heavy_fence() {
                TICKETS.request(current(), |targets| super::gic::sgi(targets, SGI));
            }
        }

        #[cfg(rcuref_asymmetric_fence)]
        rcuref::set_heavy_fence!(SgiFence);
    }
}

/// The EL1 physical timer as a source of preemption for interrupt-context tests, with
/// the same interface as the Cortex-M SysTick one: [`start`], the test's loop, [`stop`].
pub mod tick {
    use super::*;

    /// The EL1 physical timer's interrupt (PPI 14 = INTID 30).
    pub const PPI: u32 = 30;

    static HANDLER: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());
    static TICKS: AtomicU32 = AtomicU32::new(0);
    static INTERVAL: AtomicU32 = AtomicU32::new(0);

    fn frequency() -> u64 {
        let f: u64;
        // SAFETY: reading CNTFRQ_EL0 has no side effects.
        unsafe { core::arch::asm!("mrs {}, cntfrq_el0", out(reg) f, options(nomem, nostack)) };
        f
    }

    fn arm(interval: u32) {
        // SAFETY: programming this core's EL1 physical timer (EL1 may): fires `interval`
        // counts from now, interrupt unmasked.
        unsafe {
            core::arch::asm!(
                "msr cntp_tval_el0, {}",
                "mov {tmp}, #1",
                "msr cntp_ctl_el0, {tmp}",
                "isb",
                in(reg) interval as u64,
                tmp = out(reg) _,
                options(nostack)
            )
        };
    }

    /// Starts the timer on this core, calling `handler` from its interrupt every
    /// `reload + 1` cycles of a 12 MHz clock (the Cortex-M tests' SysTick period).
    pub fn start(reload: u32, handler: fn()) {
        HANDLER.store(handler as *mut (), Release);
        TICKS.store(0, Relaxed);
        let interval = ((reload as u64 + 1) * frequency() / 12_000_000).max(64) as u32;
        INTERVAL.store(interval, Relaxed);
        arm(interval);
    }

    /// Stops the timer and returns how many times the handler ran.
    pub fn stop() -> u32 {
        // SAFETY: disabling this core's EL1 physical timer.
        unsafe { core::arch::asm!("msr cntp_ctl_el0, xzr", "isb", options(nostack)) };
        HANDLER.store(core::ptr::null_mut(), Release);
        TICKS.load(Relaxed)
    }

    /// How many ticks have run since `start`.
    pub fn ticks() -> u32 {
        TICKS.load(Relaxed)
    }

    pub(crate) fn on_interrupt() {
        let p = HANDLER.load(Acquire);
        if p.is_null() {
            // SAFETY: as in `stop`.
            unsafe { core::arch::asm!("msr cntp_ctl_el0, xzr", options(nostack)) };
            return;
        }
        TICKS.fetch_add(1, Relaxed);
        // SAFETY: `HANDLER` only holds null or a `fn()` stored by `start`.
        let f: fn() = unsafe { core::mem::transmute::<*mut (), fn()>(p) };
        f();
        arm(INTERVAL.load(Relaxed));
    }
}
