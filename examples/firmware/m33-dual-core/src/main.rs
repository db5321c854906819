//! rcuref on both Cortex-M33 cores of Arm's SSE-200 (QEMU `mps2-an521`, Secure).
//!
//! * **Bring-up**: core 0 boots through cortex-m-rt; core 1 waits in reset until core 0
//!   writes its vector table's address to `INITSVTOR1` and clears its bit in `CPUWAIT`.
//!   Core 1's table (assembly, below) gives it its own stack, a reset handler and a
//!   SysTick handler.
//! * **Per-core readers**: a [`PerCpu`] made by [`Rcu::per_cpu`] with the SSE-200's
//!   `CPU_IDENTITY` register; each core's thread reads through `CORES.current()`, and so
//!   does **its SysTick handler** (SysTick is banked: each core has its own), which nests
//!   on the core's slot whenever it interrupts the thread inside a section.
//! * **A writer on core 0** publishes a configuration through an [`RcuValue`], waiting
//!   through core 0's own reader (no slot of its own) for a free buffer with a
//!   [`StallDetector`] whose clock is core 0's SysTick count (QEMU's SysTick under load
//!   is no wall clock, but it is monotonic): when a grace period takes longer than 20
//!   ticks it reports which slots hold it up.
//! * **The writer sleeps** while a grace period is held up (after 100 attempts): in
//!   `wfi`, until the unlock of a section that holds its wait calls the domain's wake
//!   hook, which raises core 0's interrupt through the SSE-200's message handling unit
//!   (MHU0, `CPU0INTR_SET`: IRQ 6 on core 0) ([`Rcu::set_wake_hook`],
//!   [`Waiting::sleep`](rcuref::rcu::Waiting::sleep)). A wake that lands between the
//!   wait's announcement and the `wfi` is remembered by a generation read before the
//!   announcement and looked at with PRIMASK set: the pending interrupt then ends the
//!   `wfi` at once (`wfi` ends on a pending interrupt whatever PRIMASK says). The sleep's
//!   bound is core 0's SysTick: in this build (the full fence) an unlock can miss the
//!   announcement in a window of a few instructions. (The AArch64 and RISC-V examples
//!   check at boot that a wake sent before the sleep ends it with no interrupt; here
//!   QEMU's `wfi` can return with none, a bare `wfi` passed that check, so this one
//!   does not make it.)
//! * **Core 1**, now and then, stays in a section for 60 ticks: the stall reports must
//!   name its slot (slot 1) and nothing else (core 0's own SysTick sections, which nest on
//!   slot 0 while the writer waits, end within the tick that is the clock; a report may
//!   name nobody: the reader can leave between the failed attempt and the look; at least
//!   three must name slot 1).
//! * The critical section (defmt's logger needs one) is rcuref's
//!   [`cores::CortexM`](rcuref::cores::CortexM) keyed by `CPU_IDENTITY`: PRIMASK plus a
//!   spinlock. cortex-m's `critical-section-single-core` would be unsound here: it does
//!   not stop the other core.
//!
//! Every read checks that the configuration is whole and does not change under it. The
//! run prints a summary and exits 0, or 1 on a violation (or a stall report naming the
//! wrong slot, or a writer never woken by a reader's interrupt).
//!
//! Run (cargo cannot read a `[target]` table for this dotted triple, rust-lang/cargo#15901,
//! so the runner comes from the environment):
//! `CARGO_TARGET_THUMBV8M_MAIN_NONE_EABIHF_RUNNER="qemu-embedded-runner --target
//! thumbv8m.main-none-eabihf --machine mps2-an521" cargo run -p rcuref-example-m33-dual-core
//! --release --target thumbv8m.main-none-eabihf`
#![no_std]
#![no_main]

use core::ops::ControlFlow;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::*};
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::{entry, exception};
use defmt_semihosting as _;
use rcuref::rcu::{ContextReader, PerCpu, Rcu, RcuValue, StallDetector, Waiting};

// ---- the SSE-200 ------------------------------------------------------------------------

/// Per-core CPU_IDENTITY register: 0 on core 0, 1 on core 1.
const CPU_IDENTITY: usize = 0x4001_F000;
/// Secure system control: core 1's initial vector table, and the cores' wait bits.
const INITSVTOR1: usize = 0x5002_1114;
const CPUWAIT: usize = 0x5002_1118;
/// Message handling unit 0: writing bits to `CPU0INTR_SET` raises its interrupt on core 0
/// (IRQ 6) until they are written to `CPU0INTR_CLR`.
const MHU0_CPU0INTR_SET: usize = 0x5000_3004;
const MHU0_CPU0INTR_CLR: usize = 0x5000_3008;
/// MHU0's interrupt on core 0.
const MHU0_IRQ: i16 = 6;
/// Core 0's NVIC interrupt set-enable register for IRQs 0-31 (banked: each core has its
/// own NVIC).
const NVIC_ISER0: usize = 0xE000_E100;

/// Which core this is, for rcuref's multi-core critical section.
struct Sse200;

// SAFETY: CPU_IDENTITY reads 0 on core 0 and 1 on core 1, always the same on a core.
unsafe impl rcuref::cores::CoreId for Sse200 {
    fn core_id() -> u32 {
        // SAFETY: an aligned, always-readable register of the SSE-200's memory map.
        unsafe { core::ptr::read_volatile(CPU_IDENTITY as *const u32) }
    }
}

critical_section::set_impl!(rcuref::cores::CortexM<Sse200>);

fn core_id() -> usize {
    <Sse200 as rcuref::cores::CoreId>::core_id() as usize
}

// ---- the domain -------------------------------------------------------------------------

static RCU: Rcu<2> = Rcu::with_dedicated(2);
/// Each core's reader; `CORES.current()` is the calling core's.
// SAFETY: `core_id` names the core it runs on (CPU_IDENTITY), and slot `c` is used only
// by core `c`'s thread and by core `c`'s own SysTick handler, which leaves every section
// it enters before it returns.
static CORES: PerCpu<'static, 2, 2> = unsafe { RCU.per_cpu(core_id) };

/// The calling core's reader.
fn my_reader() -> ContextReader<'static, 2> {
    CORES.current().expect("CPU_IDENTITY is 0 or 1")
}

/// A configuration: a generation, some settings, and a checksum over both.
struct Config {
    gen: u32,
    settings: [u32; 8],
    check: u32,
}

impl Config {
    const fn new(gen: u32) -> Self {
        let mut settings = [0u32; 8];
        let mut i = 0;
        while i < 8 {
            settings[i] = gen.wrapping_mul(2_654_435_761).wrapping_add(i as u32);
            i += 1;
        }
        Config {
            gen,
            settings,
            check: checksum(gen, &settings),
        }
    }
    fn whole(&self) -> bool {
        self.check == checksum(self.gen, &self.settings)
    }
}

const fn checksum(gen: u32, s: &[u32; 8]) -> u32 {
    let mut c = gen ^ 0x5EED;
    let mut i = 0;
    while i < 8 {
        c = c.rotate_left(5) ^ s[i];
        i += 1;
    }
    c
}

static CONFIG: RcuValue<'static, Config, 2, 2> = RcuValue::new(&RCU, Config::new(0));

// ---- the writer's sleep and its wake ----------------------------------------------------

/// Moved on by every wake; the writer reads it before a wait's announcement.
static WAKE_GENERATION: AtomicU32 = AtomicU32::new(0);
/// Whether the writer (core 0) may be asleep in `wfi`.
static WRITER_ASLEEP: AtomicBool = AtomicBool::new(false);
/// Sleeps of the writer, and the wake interrupts core 0 took.
static SLEEPS: AtomicU32 = AtomicU32::new(0);
static WAKE_IRQS: AtomicU32 = AtomicU32::new(0);

fn mmio_write(addr: usize, v: u32) {
    // SAFETY: callers pass MHU0's and core 0's NVIC registers of the SSE-200's map
    // (aligned, writable in the Secure state this firmware runs in); writing them raises,
    // clears or enables an interrupt, nothing else.
    unsafe { core::ptr::write_volatile(addr as *mut u32, v) }
}

/// The domain's wake hook: the outermost unlock of a section that holds a sleeping wait
/// calls it, on either core, in a thread or in a SysTick handler (no lock, no wait).
fn wake_writer() {
    // `SeqCst` here and in `sleep_until_woken`: either the sleeper's look sees the new
    // generation or this load sees the sleeper (store buffering, both sides ordered).
    WAKE_GENERATION.fetch_add(1, SeqCst);
    if WRITER_ASLEEP.load(SeqCst) {
        cortex_m::asm::dsb(); // the generation is visible before the interrupt is
        mmio_write(MHU0_CPU0INTR_SET, 1);
    }
}

/// Core 0's device interrupts (cortex-m-rt sends every one here): MHU0's is the wake
/// (taking it has ended the writer's `wfi`, or, for a wake that read the flag just
/// before the writer cleared it, it arrives while the writer is awake).
#[exception]
unsafe fn DefaultHandler(irqn: i16) {
    if irqn == MHU0_IRQ {
        mmio_write(MHU0_CPU0INTR_CLR, 1);
        WAKE_IRQS.fetch_add(1, Relaxed);
    } else {
        defmt::error!(
            "unexpected interrupt {=i16} on core {=usize}",
            irqn,
            core_id()
        );
        semihosting::process::abort()
    }
}

/// The writer's sleep (`Waiting::sleep`'s closure): `wfi` unless a wake has come since
/// `seen` was read (before the announcement). PRIMASK is set from the look to the
/// `wfi`: an interrupt raised after the look stays pending, ends the `wfi` at once, and
/// is taken when PRIMASK is cleared. Any other interrupt of core 0 (its SysTick) also
/// ends it: the bound. Returns with PRIMASK as it was; call it with interrupts enabled
/// (with PRIMASK set, the interrupt that ends the `wfi` stays pending until the caller
/// clears it).
fn sleep_until_woken(seen: u32) {
    WRITER_ASLEEP.store(true, SeqCst);
    let was_enabled = cortex_m::register::primask::read().is_inactive();
    cortex_m::interrupt::disable();
    if WAKE_GENERATION.load(SeqCst) == seen {
        cortex_m::asm::wfi();
    }
    if was_enabled {
        // SAFETY: interrupts were enabled when this was called (so enabling them again
        // breaks no caller's critical section).
        unsafe { cortex_m::interrupt::enable() };
    }
    // Awake. A wake that read the flag before this store still raises the interrupt,
    // which core 0 then takes awake (counted with the others).
    WRITER_ASLEEP.store(false, Relaxed);
}

// ---- readers ----------------------------------------------------------------------------

/// Core 0's SysTick count: the stall detector's clock.
static TICKS: AtomicU32 = AtomicU32::new(0);
static READS: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];
static TICK_READS: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];
static NESTED: AtomicU32 = AtomicU32::new(0);
static VIOLATIONS: AtomicU32 = AtomicU32::new(0);
static STALLS: AtomicU32 = AtomicU32::new(0);
static WRONG_HOLDOUT: AtomicU32 = AtomicU32::new(0);
static CLEARED: AtomicU32 = AtomicU32::new(0);
static CORE1_UP: AtomicBool = AtomicBool::new(false);
static DONE: AtomicBool = AtomicBool::new(false);

fn ticks() -> u64 {
    u64::from(TICKS.load(Relaxed))
}

/// One section on the calling core's reader, held for `hold` of core 0's ticks (0: a
/// quick one).
fn read(hold: u32) {
    my_reader().section(|g| {
        let cfg = CONFIG.load(g);
        let (gen, first) = (cfg.gen, cfg.settings[0]);
        let mut ok = cfg.whole();
        // Until `hold` ticks have passed, not until the count equals a value: a vCPU
        // the host stops for two ticks would miss it and hold the section for a lap.
        let start = TICKS.load(Relaxed);
        while TICKS.load(Relaxed).wrapping_sub(start) < hold {
            core::hint::spin_loop();
        }
        ok &= cfg.whole() && cfg.gen == gen && cfg.settings[0] == first;
        if !ok {
            VIOLATIONS.fetch_add(1, Relaxed);
        }
    });
}

/// Both cores' SysTick: a read on this core's slot (nesting on the thread's section if
/// it interrupted one); on core 0 also the clock.
fn on_tick() {
    let c = core_id();
    if c == 0 {
        TICKS.fetch_add(1, Relaxed);
    }
    if my_reader().in_read_section() {
        NESTED.fetch_add(1, Relaxed);
    }
    read(0);
    TICK_READS[c].fetch_add(1, Relaxed);
}

/// This core's SysTick (banked per core) every 12,000 cycles.
fn start_systick() {
    // SAFETY: only this core's SysTick is touched, and only here.
    let mut syst = unsafe { cortex_m::Peripherals::steal() }.SYST;
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(11_999);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

#[exception]
fn SysTick() {
    on_tick();
}

// ---- core 1 -------------------------------------------------------------------------------

core::arch::global_asm!(
    r#"
    .section .bss.core1_stack, "aw", %nobits
    .balign 8
core1_stack:
    .space 16384

    .section .rodata.core1_vectors, "a"
    .balign 512
    .global core1_vectors
core1_vectors:
    .word core1_stack + 16384       // initial stack pointer
    .word core1_reset               // reset
    .rept 13                        // NMI .. PendSV: unexpected
    .word core1_fault
    .endr
    .word core1_systick             // SysTick
"#
);

extern "C" {
    static core1_vectors: u32;
}

#[no_mangle]
extern "C" fn core1_reset() -> ! {
    // The hard-float ABI: FPU on (CP10, CP11), as cortex-m-rt does on core 0.
    // SAFETY: this core's CPACR; enabling the FPU changes nothing else.
    unsafe {
        let cpacr = 0xE000_ED88 as *mut u32;
        cpacr.write_volatile(cpacr.read_volatile() | 0xF << 20);
        cortex_m::asm::dsb();
        cortex_m::asm::isb();
    }
    start_systick();
    CORE1_UP.store(true, Release);
    let mut n = 0u32;
    while !DONE.load(Acquire) {
        n += 1;
        read(if n.is_multiple_of(200) { 60 } else { 0 });
        READS[1].fetch_add(1, Relaxed);
    }
    loop {
        cortex_m::asm::wfi();
    }
}

#[no_mangle]
extern "C" fn core1_systick() {
    on_tick();
}

#[no_mangle]
extern "C" fn core1_fault() -> ! {
    defmt::error!("an exception on core 1");
    semihosting::process::abort()
}

fn start_core1() {
    // SAFETY: the SSE-200's Secure system control registers (we run Secure): writing
    // core 1's vector table address and clearing its wait bit starts it at `core1_reset`.
    unsafe {
        let table = core::ptr::addr_of!(core1_vectors) as u32;
        (INITSVTOR1 as *mut u32).write_volatile(table);
        cortex_m::asm::dsb();
        let wait = (CPUWAIT as *const u32).read_volatile();
        (CPUWAIT as *mut u32).write_volatile(wait & !2);
    }
}

// ---- core 0: the writer -------------------------------------------------------------------

#[entry]
fn main() -> ! {
    defmt::info!(
        "rcuref on mps2-an521: two Cortex-M33, per-core and SysTick readers, a stall detector"
    );
    start_core1();
    while !CORE1_UP.load(Acquire) {
        core::hint::spin_loop();
    }
    defmt::info!(
        "core 1 is up (INITSVTOR1 + CPUWAIT), CPU_IDENTITY {=usize}",
        core_id()
    );
    start_systick();
    mmio_write(NVIC_ISER0, 1 << MHU0_IRQ);
    RCU.set_wake_hook(Some(wake_writer));

    let writer = my_reader(); // core 0's: the writer needs no slot of its own
    let mut stall = StallDetector::new(ticks, 20, |waited, holdouts| {
        STALLS.fetch_add(1, Relaxed);
        let mut named = 0;
        for h in holdouts {
            named += 1;
            if h.slot != 1 {
                WRONG_HOLDOUT.fetch_add(1, Relaxed);
            }
            defmt::info!(
                    "stall: waited {=u64} ticks; slot {=usize} holds the grace period up (nesting {=u32})",
                    waited,
                    h.slot,
                    h.nesting
                );
        }
        if named == 0 {
            CLEARED.fetch_add(1, Relaxed);
        }
    });
    let enough = |published: u32| {
        published >= 3_000
            && STALLS.load(Relaxed) - CLEARED.load(Relaxed) >= 3
            && TICK_READS.iter().all(|r| r.load(Relaxed) >= 20)
            && NESTED.load(Relaxed) >= 1
            && WAKE_IRQS.load(Relaxed) >= 3
    };
    let (mut published, mut gen) = (0u32, 0u32);
    const DEADLINE: u64 = 200_000; // ticks: the run fails rather than hang
    'publishing: while !enough(published) && ticks() < DEADLINE {
        gen += 1;
        let mut value = Config::new(gen);
        loop {
            match CONFIG.replace(writer, value, |w: &Waiting<'_, '_, 2>| {
                stall.observe(w)?;
                if ticks() >= DEADLINE {
                    return ControlFlow::Break(());
                }
                if w.attempts() > 100 {
                    let seen = WAKE_GENERATION.load(SeqCst);
                    w.sleep(|| {
                        SLEEPS.fetch_add(1, Relaxed);
                        sleep_until_woken(seen)
                    });
                }
                ControlFlow::Continue(())
            }) {
                Ok(()) => break,
                Err(r) if r.error == rcuref::Error::GaveUp => break 'publishing,
                Err(r) => value = r.value, // Busy cannot happen (one writer): retry
            }
        }
        published += 1;
        read(0);
        READS[0].fetch_add(1, Relaxed);
    }
    let all_seen = enough(published);
    DONE.store(true, Release);
    let (v, wrong) = (VIOLATIONS.load(Relaxed), WRONG_HOLDOUT.load(Relaxed));
    defmt::info!(
        "{=u32} generations published; reads: core 0 {=u32}, core 1 {=u32}; SysTick reads: core 0 {=u32}, core 1 {=u32} ({=u32} nested in an interrupted section)",
        published,
        READS[0].load(Relaxed),
        READS[1].load(Relaxed),
        TICK_READS[0].load(Relaxed),
        TICK_READS[1].load(Relaxed),
        NESTED.load(Relaxed)
    );
    defmt::info!(
        "{=u32} stalls reported ({=u32} cleared before the slots were read), {=u32} naming the wrong slot; {=u32} violations",
        STALLS.load(Relaxed),
        CLEARED.load(Relaxed),
        wrong,
        v
    );
    defmt::info!(
        "the writer slept {=u32} times in wfi and took {=u32} wake interrupts from readers' unlocks (the other sleeps ended at its SysTick, or found their wake already come; an interrupt can also land just after a sleep)",
        SLEEPS.load(Relaxed),
        WAKE_IRQS.load(Relaxed)
    );
    if !all_seen {
        defmt::error!("not everything happened within 200,000 ticks");
        if WAKE_IRQS.load(Relaxed) < 3 {
            defmt::error!("the sleeping writer was not woken by three readers' unlocks");
        }
    }
    semihosting::process::exit(if v == 0 && wrong == 0 && all_seen {
        0
    } else {
        1
    })
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    defmt::error!("{}", defmt::Display2Format(info));
    semihosting::process::abort()
}
