//! rcuref in a four-core AArch64 mini-kernel (QEMU `virt`, `-cpu cortex-a53 -smp 4`,
//! EL1, MMU off, no firmware).
//!
//! * **Bring-up**: QEMU enters core 0 at `_start`; it clears `.bss`, enables the GICv2
//!   distributor and starts cores 1-3 with PSCI `CPU_ON` (over `hvc`: QEMU implements
//!   PSCI itself when it boots a kernel at EL1). Each core takes its own stack by its
//!   `MPIDR_EL1` affinity.
//! * **Per-CPU readers**: a `static` [`PerCpu`] made by [`Rcu::per_cpu`] with the
//!   binary's `core_id` (from `MPIDR_EL1`); each core reads through `CPUS.current()`, and
//!   so does **its timer interrupt** (the EL1 physical timer, every 0.5 ms), which nests
//!   on the core's slot whenever it interrupts the core inside a section.
//! * **A writer on core 0** publishes a routing table through an [`RcuValue`], waiting
//!   through core 0's own reader (no slot of its own: four slots for four cores) for a
//!   free buffer, with a [`StallDetector`] on the generic timer's counter: when a grace
//!   period takes longer than 5 ms, it reports which slots hold it up.
//! * **The writer sleeps** while a grace period is held up (after 100 attempts): in
//!   `wfi`, until the unlock of a section that holds its wait calls the domain's wake
//!   hook, which raises software generated interrupt 1 on core 0
//!   ([`Rcu::set_wake_hook`], [`Waiting::sleep`](rcuref::rcu::Waiting::sleep)). A wake
//!   that lands between the wait's announcement and the `wfi` is remembered by a
//!   generation read before the announcement and looked at with IRQs masked (its SGI
//!   then stays pending and ends the `wfi` at once); core 0 checks that at boot (a wake
//!   sent before the sleep must end it with no interrupt). The sleep's bound is core
//!   0's own timer tick: in this build (the full fence: no heavy fence registered) an
//!   unlock can miss the announcement in a window of a few instructions.
//! * **Core 3**, now and then, stays in a section for 20 ms: at least three stall reports
//!   must name its slot (slot 3), and none may name slot 0: the writer waits through it,
//!   and core 0's timer interrupt, which nests a section on it while the writer waits,
//!   has left that section before the writer's hook runs again (a handler runs to
//!   completion first). Cores 1 and 2 may be named too: with more vCPUs than host cores,
//!   the host can stop a vCPU inside a short section for longer than the threshold, and
//!   then that slot does hold the grace period up (counted and printed as
//!   "descheduled"). A report may name nobody: the reader can leave between the failed
//!   attempt and the look.
//! * The critical section (defmt's logger needs one) is rcuref's
//!   [`cores::Aarch64`](rcuref::cores::Aarch64): IRQ/FIQ masked plus a spinlock keyed by
//!   `MPIDR_EL1`, registered here by the binary. On real hardware, enable the MMU and
//!   caches before relying on it: exclusives need Normal memory there.
//!
//! Every read checks that the table is whole and does not change under it. The run
//! prints a summary and exits 0, or 1 on a violation (or a stall report naming the wrong
//! slot, a sleep that misses a wake sent before it, or a writer never woken by a
//! reader's SGI).
//!
//! Run: `cargo run -p rcuref-example-aarch64-kernel --release --target aarch64-unknown-none`
//! (the runner boots it with `qemu-system-aarch64 -machine virt -cpu cortex-a53 -smp 4`).
#![no_std]
#![no_main]

use core::ops::ControlFlow;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::*};
use defmt_semihosting as _;
use rcuref::rcu::{PerCpu, Rcu, RcuValue, StallDetector};

critical_section::set_impl!(rcuref::cores::Aarch64);

const CORES: usize = 4;

// ---- the domain: one dedicated slot per core (the writer waits through core 0's) -----

static RCU: Rcu<CORES> = Rcu::with_dedicated(CORES);
/// The reader of each core; `CPUS.current()` is the calling core's.
// SAFETY: `core_id` names the core it runs on (MPIDR_EL1's affinity 0, 0-3 here), the
// kernel never migrates code between cores, and slot `c` is used only by core `c`'s
// thread and by core `c`'s own interrupt handler, which leaves every section it enters
// before it returns.
static CPUS: PerCpu<'static, CORES, CORES> = unsafe { RCU.per_cpu(core_id) };

/// A routing table: a generation, entries, and a checksum over both.
struct Routes {
    gen: u32,
    next_hop: [u32; 16],
    check: u32,
}

impl Routes {
    const fn new(gen: u32) -> Self {
        let mut next_hop = [0u32; 16];
        let mut i = 0;
        while i < 16 {
            next_hop[i] = gen.wrapping_mul(40_503).wrapping_add(i as u32 * 7919);
            i += 1;
        }
        Routes {
            gen,
            next_hop,
            check: sum(gen, &next_hop),
        }
    }
    fn whole(&self) -> bool {
        self.check == sum(self.gen, &self.next_hop)
    }
}

const fn sum(gen: u32, hops: &[u32; 16]) -> u32 {
    let mut c = gen ^ 0xC0FFEE;
    let mut i = 0;
    while i < 16 {
        c = c.rotate_left(3) ^ hops[i];
        i += 1;
    }
    c
}

static ROUTES: RcuValue<'static, Routes, 2, CORES> = RcuValue::new(&RCU, Routes::new(0));

// ---- the core, the generic timer, the GIC --------------------------------------------

fn core_id() -> usize {
    let mpidr: u64;
    // SAFETY: reading MPIDR_EL1 at EL1 has no side effects.
    unsafe { core::arch::asm!("mrs {}, mpidr_el1", out(reg) mpidr, options(nomem, nostack)) };
    (mpidr & 0xFF) as usize
}

/// The generic timer's count (`CNTPCT_EL0`).
fn now() -> u64 {
    let t: u64;
    // SAFETY: reading the physical count (after an `isb`, so it is not read early).
    unsafe { core::arch::asm!("isb", "mrs {}, cntpct_el0", out(reg) t, options(nostack)) };
    t
}

/// Counts per millisecond (`CNTFRQ_EL0` / 1000: 62,500 on QEMU `virt`).
fn per_ms() -> u64 {
    let f: u64;
    // SAFETY: reading the counter's frequency has no side effects.
    unsafe { core::arch::asm!("mrs {}, cntfrq_el0", out(reg) f, options(nomem, nostack)) };
    f / 1000
}

/// Fires this core's EL1 physical timer `after` counts from now.
fn arm_timer(after: u64) {
    // SAFETY: programming this core's own EL1 physical timer (enabled, unmasked).
    unsafe {
        core::arch::asm!(
            "msr cntp_tval_el0, {}",
            "mov {t}, #1",
            "msr cntp_ctl_el0, {t}",
            "isb",
            in(reg) after,
            t = out(reg) _,
            options(nostack)
        )
    };
}

const GICD: usize = 0x0800_0000;
const GICC: usize = 0x0801_0000;
/// The EL1 physical timer's interrupt (PPI 14).
const TIMER_INTID: u32 = 30;
/// The software generated interrupt a reader's wake raises on the sleeping writer's core.
const WAKE_SGI: u32 = 1;

fn mmio_write(addr: usize, v: u32) {
    // SAFETY: an aligned GICv2 register of QEMU `virt` (device memory with the MMU off).
    unsafe { core::ptr::write_volatile(addr as *mut u32, v) }
}

fn mmio_read(addr: usize) -> u32 {
    // SAFETY: as in `mmio_write`; reading GICC_IAR acknowledges an interrupt, which its
    // one caller wants.
    unsafe { core::ptr::read_volatile(addr as *const u32) }
}

/// This core's GIC CPU interface and its timer interrupt (both banked per core), then
/// IRQs unmasked.
fn gic_init_this_core() {
    mmio_write(GICC + 0x04, 0xF0); // GICC_PMR: every priority passes
    mmio_write(GICC, 1); // GICC_CTLR
    mmio_write(GICD + 0x100, 1 << TIMER_INTID | 1 << WAKE_SGI); // GICD_ISENABLER0 (this core's bank)
                                                                // SAFETY: the vector table is installed (`_start`); unmasking IRQs on this core.
    unsafe { core::arch::asm!("msr daifclr, #2", options(nostack)) };
}

// ---- the writer's sleep and its wake ------------------------------------------------

/// Moved on by every wake; the writer reads it before a wait's announcement.
static WAKE_GENERATION: AtomicU32 = AtomicU32::new(0);
/// Whether the writer (core 0) may be asleep in `wfi`.
static WRITER_ASLEEP: AtomicBool = AtomicBool::new(false);
/// Sleeps of the writer, and the wake SGIs core 0 took.
static SLEEPS: AtomicU32 = AtomicU32::new(0);
static WAKE_SGIS: AtomicU32 = AtomicU32::new(0);

/// The domain's wake hook: the outermost unlock of a section that holds a sleeping wait
/// calls it, on any core, in a thread or in an interrupt handler (no lock, no wait).
fn wake_writer() {
    // `SeqCst` here and in `sleep_until_woken`: either the sleeper's look sees the new
    // generation or this load sees the sleeper (store buffering, both sides ordered).
    WAKE_GENERATION.fetch_add(1, SeqCst);
    if WRITER_ASLEEP.load(SeqCst) {
        // DSB: the generation is visible before the interrupt is.
        // SAFETY: a barrier.
        unsafe { core::arch::asm!("dsb ish", options(nostack)) };
        mmio_write(GICD + 0xF00, 1 << 16 | WAKE_SGI); // GICD_SGIR: to CPU interface 0
    }
}

/// The writer's sleep (`Waiting::sleep`'s closure): `wfi` unless a wake has come since
/// `seen` was read (before the announcement). IRQs are masked from the look to the
/// `wfi`: an SGI raised after the look stays pending, ends the `wfi` at once, and is
/// taken when they are unmasked. Any other interrupt of core 0 (its tick) also ends it:
/// the bound. Returns with the IRQ mask as it was; call it with IRQs unmasked (with
/// them masked, the interrupt that ends the `wfi` stays pending until the caller
/// unmasks them).
fn sleep_until_woken(seen: u32) {
    WRITER_ASLEEP.store(true, SeqCst);
    let daif: u64;
    // SAFETY: reading this core's interrupt masks, then masking IRQs; restored below.
    unsafe { core::arch::asm!("mrs {}, daif", "msr daifset, #2", out(reg) daif, options(nostack)) };
    if WAKE_GENERATION.load(SeqCst) == seen {
        // SAFETY: `wfi` waits for an interrupt (a pending one ends it at once).
        unsafe { core::arch::asm!("wfi", options(nostack)) };
    }
    // SAFETY: restoring the masks read above; where that unmasks IRQs, what is pending
    // is taken, with the vector installed (`_start`).
    unsafe { core::arch::asm!("msr daif, {}", in(reg) daif, options(nostack)) };
    // Awake. A wake that read the flag before this store still raises its SGI, which
    // core 0 then takes awake (counted with the others).
    WRITER_ASLEEP.store(false, Relaxed);
}

/// The sleep's first duty, checked at boot: a wake sent after the generation was read
/// and before the sleep began ends the sleep at once, with no interrupt (the flag is
/// not set yet, so the wake raises no SGI: only the generation tells the sleep). Five
/// tries, one must take no interrupt (the tick can land in a try by chance; a sleep
/// that misses the wake waits for the tick in every try).
fn sleep_keeps_an_early_wake() -> bool {
    let interrupts = || IRQ_READS[0].load(Relaxed) + WAKE_SGIS.load(Relaxed);
    (0..5).any(|_| {
        let seen = WAKE_GENERATION.load(SeqCst);
        wake_writer();
        let before = interrupts();
        sleep_until_woken(seen);
        interrupts() == before
    })
}

// ---- readers ---------------------------------------------------------------------------

static READS: [AtomicU32; CORES] = [const { AtomicU32::new(0) }; CORES];
static IRQ_READS: [AtomicU32; CORES] = [const { AtomicU32::new(0) }; CORES];
static NESTED_IRQS: AtomicU32 = AtomicU32::new(0);
static VIOLATIONS: AtomicU32 = AtomicU32::new(0);
static STALLS: AtomicU32 = AtomicU32::new(0);
/// Reports naming slot 0, the writer's own (a bug: see the module docs).
static WRONG_HOLDOUT: AtomicU32 = AtomicU32::new(0);
/// Reports naming slot 3 (the long holder), and slots 1-2 (stopped by the host).
static NAMED_LONG: AtomicU32 = AtomicU32::new(0);
static DESCHEDULED: AtomicU32 = AtomicU32::new(0);
/// Stall reports whose holdout had already left when the slots were looked at (the
/// report's list is a fresh snapshot taken after the attempt that failed).
static CLEARED: AtomicU32 = AtomicU32::new(0);
static ONLINE: AtomicU32 = AtomicU32::new(0);
static DONE: AtomicBool = AtomicBool::new(false);

/// The calling core's reader.
fn my_reader() -> rcuref::rcu::ContextReader<'static, CORES> {
    CPUS.current().expect("core_id names a core below CORES")
}

/// One section on the calling core's reader, lasting about `counts` of the generic
/// timer.
fn read(counts: u64) {
    my_reader().section(|g| {
        let r = ROUTES.load(g);
        let (gen, first) = (r.gen, r.next_hop[0]);
        let mut ok = r.whole();
        let until = now() + counts;
        while now() < until {
            core::hint::spin_loop();
        }
        ok &= r.whole() && r.gen == gen && r.next_hop[0] == first;
        if !ok {
            VIOLATIONS.fetch_add(1, Relaxed);
        }
    });
}

/// The IRQ handler (from the vector, IRQs masked): the timer reads on this core's slot.
#[no_mangle]
extern "C" fn kernel_irq() {
    let iar = mmio_read(GICC + 0x0C);
    if iar & 0x3FF == TIMER_INTID {
        let c = core_id();
        if my_reader().in_read_section() {
            NESTED_IRQS.fetch_add(1, Relaxed); // nesting on the interrupted thread's slot
        }
        read(0);
        IRQ_READS[c].fetch_add(1, Relaxed);
        arm_timer(per_ms() / 2);
    } else if iar & 0x3FF == WAKE_SGI {
        // Taking it has ended the writer's `wfi`, or (a wake that read the flag just
        // before the writer cleared it) arrives while the writer is awake.
        WAKE_SGIS.fetch_add(1, Relaxed);
    }
    if iar & 0x3FF < 1020 {
        mmio_write(GICC + 0x10, iar); // end of interrupt
    }
}

/// Cores 1-3: read continuously; on core 3 every 2,000th section lasts 20 ms.
#[no_mangle]
extern "C" fn kernel_secondary(c: usize) -> ! {
    gic_init_this_core();
    arm_timer(per_ms() / 2);
    ONLINE.fetch_add(1, Release);
    let mut n = 0u32;
    while !DONE.load(Acquire) {
        n += 1;
        let long = c == 3 && n.is_multiple_of(2_000);
        read(if long { 20 * per_ms() } else { 600 });
        READS[c].fetch_add(1, Relaxed);
    }
    loop {
        // SAFETY: waiting for an interrupt has no other effect.
        unsafe { core::arch::asm!("wfi", options(nomem, nostack)) };
    }
}

/// Core 0: brings the others up, then writes. Publishes generations, waiting (with a
/// stall detector) for a buffer when both are still held, until every kind of event has
/// been seen enough.
#[no_mangle]
extern "C" fn kernel_main() -> ! {
    defmt::info!(
        "rcuref AArch64 mini-kernel: four cores, per-CPU and interrupt readers, a stall detector"
    );
    mmio_write(GICD, 1); // GICD_CTLR: the distributor on
    gic_init_this_core();
    extern "C" {
        fn _start();
    }
    for c in 1..CORES as u64 {
        let status = psci_cpu_on(c, _start as *const () as usize as u64);
        if status != 0 {
            defmt::error!("PSCI CPU_ON of core {=u64} failed: {=i64}", c, status);
            semihosting::process::exit(1);
        }
    }
    while ONLINE.load(Acquire) < CORES as u32 - 1 {
        core::hint::spin_loop();
    }
    defmt::info!("cores 1-3 are up (PSCI CPU_ON)");
    arm_timer(per_ms() / 2);

    let ms = per_ms();
    let writer = my_reader(); // core 0's: the writer needs no slot of its own
    let mut stall = StallDetector::new(now, 5 * ms, |waited, holdouts| {
        STALLS.fetch_add(1, Relaxed);
        let mut named = 0;
        for h in holdouts {
            named += 1;
            match h.slot {
                3 => NAMED_LONG.fetch_add(1, Relaxed),
                1 | 2 => DESCHEDULED.fetch_add(1, Relaxed),
                _ => WRONG_HOLDOUT.fetch_add(1, Relaxed),
            };
            defmt::info!(
                    "stall: waited {=u64} us; slot {=usize} holds the grace period up (nesting {=u32}, phase {=u32})",
                    waited * 1000 / ms,
                    h.slot,
                    h.nesting,
                    h.phase
                );
        }
        if named == 0 {
            CLEARED.fetch_add(1, Relaxed);
        }
    });
    if !sleep_keeps_an_early_wake() {
        defmt::error!("the sleep waited for an interrupt although its wake had come before it");
        semihosting::process::exit(1);
    }
    RCU.set_wake_hook(Some(wake_writer));
    let deadline = now() + 30_000 * ms;
    let enough = |published: u32| {
        published >= 1_000
            && NAMED_LONG.load(Relaxed) >= 3
            && WAKE_SGIS.load(Relaxed) >= 3
            && IRQ_READS.iter().all(|r| r.load(Relaxed) >= 20)
            && NESTED_IRQS.load(Relaxed) >= 1
    };
    let (mut published, mut gen) = (0u32, 0u32);
    while !enough(published) && now() < deadline {
        gen += 1;
        let mut value = Routes::new(gen);
        loop {
            let hook = |w: &rcuref::rcu::Waiting<'_, '_, CORES>| {
                stall.observe(w)?;
                if w.attempts() > 100 {
                    let seen = WAKE_GENERATION.load(SeqCst);
                    w.sleep(|| {
                        SLEEPS.fetch_add(1, Relaxed);
                        sleep_until_woken(seen)
                    });
                }
                ControlFlow::Continue(())
            };
            match ROUTES.replace(writer, value, hook) {
                Ok(()) => break,
                Err(r) => value = r.value, // Busy cannot happen (one writer): retry
            }
        }
        published += 1;
        read(0); // core 0 reads too, between publications
        READS[0].fetch_add(1, Relaxed);
    }
    let all_seen = enough(published);
    DONE.store(true, Release);
    let (v, wrong) = (VIOLATIONS.load(Relaxed), WRONG_HOLDOUT.load(Relaxed));
    let r = |a: &[AtomicU32; CORES], i: usize| a[i].load(Relaxed);
    defmt::info!(
        "{=u32} generations published; reads per core {=u32} {=u32} {=u32} {=u32}; interrupt reads {=u32} {=u32} {=u32} {=u32} ({=u32} nested in an interrupted section)",
        published,
        r(&READS, 0),
        r(&READS, 1),
        r(&READS, 2),
        r(&READS, 3),
        r(&IRQ_READS, 0),
        r(&IRQ_READS, 1),
        r(&IRQ_READS, 2),
        r(&IRQ_READS, 3),
        NESTED_IRQS.load(Relaxed)
    );
    defmt::info!(
        "the writer slept {=u32} times in wfi and took {=u32} wake SGIs from readers' unlocks (the other sleeps ended at its tick, or found their wake already come; an SGI can also land just after a sleep)",
        SLEEPS.load(Relaxed),
        WAKE_SGIS.load(Relaxed)
    );
    defmt::info!(
        "{=u32} stalls reported: {=u32} naming slot 3 (the long holder), {=u32} a descheduled vCPU's, {=u32} cleared before the slots were read, {=u32} a slot that never holds one; {=u32} violations",
        STALLS.load(Relaxed),
        NAMED_LONG.load(Relaxed),
        DESCHEDULED.load(Relaxed),
        CLEARED.load(Relaxed),
        wrong,
        v
    );
    if !all_seen {
        defmt::error!("not everything happened within 30 s of the generic timer");
        if WAKE_SGIS.load(Relaxed) < 3 {
            defmt::error!("the sleeping writer was not woken by three readers' unlocks");
        }
    }
    semihosting::process::exit(if v == 0 && wrong == 0 && all_seen {
        0
    } else {
        1
    })
}

/// PSCI `CPU_ON` (function 0xC400_0003, SMC calling convention over `hvc`): starts core
/// `mpidr` at `entry`; PSCI's status (0: success).
fn psci_cpu_on(mpidr: u64, entry: u64) -> i64 {
    let r: i64;
    // SAFETY: a PSCI call to QEMU's own implementation; it starts the core at `entry`
    // (`_start`, which sets up everything that core needs) and clobbers at most x0-x17.
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

// ---- boot and vectors ----------------------------------------------------------------

core::arch::global_asm!(
    r#"
    .section .text.boot, "ax"
    .global _start
_start:
    mrs     x0, mpidr_el1
    and     x0, x0, #0xff           // core number
    ldr     x1, =__stacks_end       // 64 KiB of stack each, from the top down
    sub     x1, x1, x0, lsl #16
    mov     sp, x1
    mov     x2, #(3 << 20)          // FP/SIMD on (the hard-float ABI uses it)
    msr     cpacr_el1, x2
    ldr     x2, =vectors
    msr     vbar_el1, x2
    isb
    cbnz    x0, 2f
    ldr     x1, =__bss_start        // core 0: clear .bss, then the kernel
    ldr     x2, =__bss_end
1:  cmp     x1, x2
    b.hs    3f
    str     xzr, [x1], #8
    b       1b
3:  bl      kernel_main
2:  bl      kernel_secondary        // x0: the core number
    .ltorg

    .section .text.vectors, "ax"
    .balign 2048
vectors:
    .rept 5                         // SP0 (4) and SPx synchronous: unexpected
    .balign 128
    b       unexpected
    .endr
    .balign 128
    b       irq                     // SPx IRQ
    .rept 10
    .balign 128
    b       unexpected
    .endr

unexpected:
    bl      kernel_unexpected

irq:                                // the caller-saved registers, integer and FP
    sub     sp, sp, #576
    stp     x0, x1, [sp, #0]
    stp     x2, x3, [sp, #16]
    stp     x4, x5, [sp, #32]
    stp     x6, x7, [sp, #48]
    stp     x8, x9, [sp, #64]
    stp     x10, x11, [sp, #80]
    stp     x12, x13, [sp, #96]
    stp     x14, x15, [sp, #112]
    stp     x16, x17, [sp, #128]
    stp     x18, x29, [sp, #144]
    str     x30, [sp, #160]
    stp     q0, q1, [sp, #192]
    stp     q2, q3, [sp, #224]
    stp     q4, q5, [sp, #256]
    stp     q6, q7, [sp, #288]
    stp     q16, q17, [sp, #320]
    stp     q18, q19, [sp, #352]
    stp     q20, q21, [sp, #384]
    stp     q22, q23, [sp, #416]
    stp     q24, q25, [sp, #448]
    stp     q26, q27, [sp, #480]
    stp     q28, q29, [sp, #512]
    stp     q30, q31, [sp, #544]
    mrs     x0, fpcr
    mrs     x1, fpsr
    stp     x0, x1, [sp, #176]
    bl      kernel_irq
    ldp     x0, x1, [sp, #176]
    msr     fpcr, x0
    msr     fpsr, x1
    ldp     q0, q1, [sp, #192]
    ldp     q2, q3, [sp, #224]
    ldp     q4, q5, [sp, #256]
    ldp     q6, q7, [sp, #288]
    ldp     q16, q17, [sp, #320]
    ldp     q18, q19, [sp, #352]
    ldp     q20, q21, [sp, #384]
    ldp     q22, q23, [sp, #416]
    ldp     q24, q25, [sp, #448]
    ldp     q26, q27, [sp, #480]
    ldp     q28, q29, [sp, #512]
    ldp     q30, q31, [sp, #544]
    ldp     x0, x1, [sp, #0]
    ldp     x2, x3, [sp, #16]
    ldp     x4, x5, [sp, #32]
    ldp     x6, x7, [sp, #48]
    ldp     x8, x9, [sp, #64]
    ldp     x10, x11, [sp, #80]
    ldp     x12, x13, [sp, #96]
    ldp     x14, x15, [sp, #112]
    ldp     x16, x17, [sp, #128]
    ldp     x18, x29, [sp, #144]
    ldr     x30, [sp, #160]
    add     sp, sp, #576
    eret
"#
);

/// Any exception other than an IRQ: a bug. Reports it and fails the run.
#[no_mangle]
extern "C" fn kernel_unexpected() -> ! {
    let esr: u64;
    // SAFETY: reading the syndrome register has no side effects.
    unsafe { core::arch::asm!("mrs {}, esr_el1", out(reg) esr, options(nomem, nostack)) };
    defmt::error!(
        "unexpected exception on core {=usize}: ESR {=u64:#x}",
        core_id(),
        esr
    );
    semihosting::process::abort()
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    defmt::error!("{}", defmt::Display2Format(info));
    semihosting::process::abort()
}
