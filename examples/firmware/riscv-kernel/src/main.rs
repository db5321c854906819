//! rcuref in a two-hart RISC-V mini-kernel (QEMU `virt`, machine mode, riscv64 or rv32).
//!
//! * **Per-hart readers**: a `static` [`PerCpu`] made by [`Rcu::per_cpu`] with `mhartid`;
//!   each hart reads through `HARTS.current()`, and so does **its machine-timer trap
//!   handler**, which nests on the hart's slot whenever it interrupts the hart inside a
//!   section.
//! * **A writer on hart 0** publishes a routing table through an [`RcuValue`], waiting
//!   through hart 0's own reader (no slot of its own) for buffers with
//!   [`RcuValue::replace`] and a [`StallDetector`] on the CLINT's `mtime`: when a grace
//!   period takes longer than 2 ms, it reports which slots hold it up.
//! * **The writer sleeps** while a grace period is held up (after 100 attempts): in
//!   `wfi`, until the unlock of a section that holds its wait calls the domain's wake
//!   hook, which raises hart 0's machine software interrupt through the CLINT's `msip`
//!   ([`Rcu::set_wake_hook`], [`Waiting::sleep`](rcuref::rcu::Waiting::sleep)). A wake
//!   that lands between the wait's announcement and the `wfi` is remembered by a
//!   generation read before the announcement and looked at with interrupts off
//!   (`mstatus.MIE`): the pending interrupt then ends the `wfi` at once (`wfi` ends on
//!   any pending interrupt enabled in `mie`, whatever `mstatus.MIE` says); hart 0
//!   checks that at boot (a wake sent before the sleep must end it with no interrupt).
//!   The sleep's bound is hart 0's own timer trap: in this build (the full fence: no
//!   heavy fence registered) an unlock can miss the announcement in a window of a few
//!   instructions.
//! * **Hart 1**, now and then, stays in a section for 5 ms: the stall reports must name
//!   its slot (slot 1), and nothing else. Not slot 0 either, though the writer waits
//!   through it and hart 0's timer trap nests sections on it while the writer waits: a
//!   trap handler runs to completion before the writer's hook runs again. A report may
//!   name nobody: its list is a fresh snapshot, and the reader can leave between the
//!   failed attempt and the look (counted as "cleared"; at least three reports must name
//!   slot 1).
//! * The critical section (defmt's logger needs one) is rcuref's two-hart
//!   [`harts::Harts`](rcuref::harts::Harts), registered here by the binary.
//!
//! Every read checks that the table is whole and does not change under it. The run prints
//! a summary and exits 0, or 1 on a violation (or a stall report naming the wrong slot,
//! a sleep that misses a wake sent before it, or a writer never woken by a reader's
//! interrupt).
//!
//! Run: `cargo run -p rcuref-example-riscv-kernel --release --target riscv64gc-unknown-none-elf`
//! (or `riscv32imac-unknown-none-elf`: `mtime` and `mtimecmp` are then accessed in halves).
#![no_std]
#![no_main]

use core::ops::ControlFlow;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::*};
use defmt_semihosting as _;
use rcuref::rcu::{ContextReader, PerCpu, Rcu, RcuValue, StallDetector, Waiting};
use riscv::interrupt::Interrupt;

critical_section::set_impl!(rcuref::harts::Harts);

// ---- the domain: one dedicated slot per hart (the writer waits through hart 0's) ----

static RCU: Rcu<2> = Rcu::with_dedicated(2);
/// The reader of each hart; `HARTS.current()` is the calling hart's.
// SAFETY: `hart_id` names the hart it runs on (`mhartid`: 0 or 1 here), and slot `h` is
// used only by hart `h`'s thread and by hart `h`'s own trap handler, which leaves every
// section it enters before it returns.
static HARTS: PerCpu<'static, 2, 2> = unsafe { RCU.per_cpu(hart_id) };

/// The calling hart's reader.
fn my_reader() -> ContextReader<'static, 2> {
    HARTS.current().expect("mhartid is 0 or 1")
}

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

static ROUTES: RcuValue<'static, Routes, 2, 2> = RcuValue::new(&RCU, Routes::new(0));

// ---- the CLINT of QEMU `virt` ----------------------------------------------------------

const MSIP: usize = 0x0200_0000;
const MTIME: usize = 0x0200_BFF8;
const MTIMECMP: usize = 0x0200_4000;
const TICKS_PER_MS: u64 = 10_000; // mtime runs at 10 MHz on `virt`

#[cfg(target_pointer_width = "64")]
fn mtime() -> u64 {
    // SAFETY: the CLINT's mtime register, a naturally aligned, always-readable MMIO word.
    unsafe { core::ptr::read_volatile(MTIME as *const u64) }
}

/// rv32: the 64-bit counter in two halves, re-read until the high half is stable (the low
/// half may carry into it between the two loads).
#[cfg(target_pointer_width = "32")]
fn mtime() -> u64 {
    loop {
        // SAFETY: the two halves of the CLINT's mtime register, always-readable MMIO words.
        let (hi, lo, hi2) = unsafe {
            (
                core::ptr::read_volatile((MTIME + 4) as *const u32),
                core::ptr::read_volatile(MTIME as *const u32),
                core::ptr::read_volatile((MTIME + 4) as *const u32),
            )
        };
        if hi == hi2 {
            return u64::from(hi) << 32 | u64::from(lo);
        }
    }
}

#[cfg(target_pointer_width = "64")]
fn arm_timer(hart: usize, after: u64) {
    // SAFETY: this hart's own mtimecmp register; writing it only reprograms its timer.
    unsafe { core::ptr::write_volatile((MTIMECMP + 8 * hart) as *mut u64, mtime() + after) };
}

/// rv32: low half to all ones first, so that no value between the two writes of the new
/// deadline can lie in the past and fire early.
#[cfg(target_pointer_width = "32")]
fn arm_timer(hart: usize, after: u64) {
    let at = mtime() + after;
    let reg = MTIMECMP + 8 * hart;
    // SAFETY: this hart's own mtimecmp register (two halves); writing it only
    // reprograms its timer.
    unsafe {
        core::ptr::write_volatile(reg as *mut u32, u32::MAX);
        core::ptr::write_volatile((reg + 4) as *mut u32, (at >> 32) as u32);
        core::ptr::write_volatile(reg as *mut u32, at as u32);
    }
}

fn hart_id() -> usize {
    riscv::register::mhartid::read()
}

/// Raises (1) or clears (0) hart `hart`'s machine software interrupt.
fn msip(hart: usize, v: u32) {
    // SAFETY: hart `hart`'s MSIP word of the CLINT (`hart` < 2): an aligned,
    // always-writable MMIO register; writing it only raises or clears that interrupt.
    unsafe { core::ptr::write_volatile((MSIP + 4 * hart) as *mut u32, v) }
}

// ---- the writer's sleep and its wake -------------------------------------------------

/// Moved on by every wake; the writer reads it before a wait's announcement.
static WAKE_GENERATION: AtomicU32 = AtomicU32::new(0);
/// Whether the writer (hart 0) may be asleep in `wfi`.
static WRITER_ASLEEP: AtomicBool = AtomicBool::new(false);
/// Sleeps of the writer, and the wake interrupts hart 0 took.
static SLEEPS: AtomicU32 = AtomicU32::new(0);
static WAKE_IPIS: AtomicU32 = AtomicU32::new(0);

/// The domain's wake hook: the outermost unlock of a section that holds a sleeping wait
/// calls it, on either hart, in a thread or in a trap handler (no lock, no wait).
fn wake_writer() {
    // `SeqCst` here and in `sleep_until_woken`: either the sleeper's look sees the new
    // generation or this load sees the sleeper (store buffering, both sides ordered).
    WAKE_GENERATION.fetch_add(1, SeqCst);
    if WRITER_ASLEEP.load(SeqCst) {
        // The generation is visible before the interrupt is (memory before MMIO).
        // SAFETY: a fence instruction: no memory access, no register state.
        unsafe { core::arch::asm!("fence rw, o") };
        msip(0, 1);
    }
}

/// The wake's interrupt on hart 0: clears it and counts it (taking it has ended the
/// writer's `wfi`, or, for a wake that read the flag just before the writer cleared
/// it, it arrives while the writer is awake).
#[riscv_rt::core_interrupt(Interrupt::MachineSoft)]
fn machine_soft() {
    msip(hart_id(), 0);
    WAKE_IPIS.fetch_add(1, Relaxed);
}

/// The writer's sleep (`Waiting::sleep`'s closure): `wfi` unless a wake has come since
/// `seen` was read (before the announcement). Interrupts are off from the look to the
/// `wfi`: one raised after the look stays pending, ends the `wfi` at once, and is taken
/// when they are on again. Any other interrupt of hart 0 (its timer) also ends it: the
/// bound. Returns with `mstatus.MIE` as it was; call it with interrupts on (with them
/// off, the interrupt that ends the `wfi` stays pending until the caller turns them
/// on).
fn sleep_until_woken(seen: u32) {
    WRITER_ASLEEP.store(true, SeqCst);
    let was_on = riscv::register::mstatus::read().mie();
    riscv::interrupt::disable();
    if WAKE_GENERATION.load(SeqCst) == seen {
        riscv::asm::wfi();
    }
    if was_on {
        // SAFETY: interrupts were on when this was called (so turning them on again
        // breaks no caller's critical section); the handlers are installed (riscv-rt's
        // trap vector).
        unsafe { riscv::interrupt::enable() };
    }
    // Awake. A wake that read the flag before this store still raises the interrupt,
    // which hart 0 then takes awake (counted with the others).
    WRITER_ASLEEP.store(false, Relaxed);
}

/// The sleep's first duty, checked at boot: a wake sent after the generation was read
/// and before the sleep began ends the sleep at once, with no interrupt (the flag is
/// not set yet, so the wake raises none: only the generation tells the sleep). Five
/// tries, one must take no interrupt (the timer can land in a try by chance; a sleep
/// that misses the wake waits for the timer in every try).
fn sleep_keeps_an_early_wake() -> bool {
    let interrupts = || TRAP_READS[0].load(Relaxed) + WAKE_IPIS.load(Relaxed);
    (0..5).any(|_| {
        let seen = WAKE_GENERATION.load(SeqCst);
        wake_writer();
        let before = interrupts();
        sleep_until_woken(seen);
        interrupts() == before
    })
}

// ---- readers -------------------------------------------------------------------------

static READS: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];
static TRAP_READS: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];
static NESTED_TRAPS: AtomicU32 = AtomicU32::new(0);
static VIOLATIONS: AtomicU32 = AtomicU32::new(0);
static STALLS: AtomicU32 = AtomicU32::new(0);
static WRONG_HOLDOUT: AtomicU32 = AtomicU32::new(0);
/// Reports naming slot 1, the long holder.
static NAMED_LONG: AtomicU32 = AtomicU32::new(0);
/// Stall reports whose holdout had already left when the slots were looked at: the
/// report's list is a fresh snapshot, taken after the attempt that failed, and the
/// reader can finish in between (more often when the host deschedules hart 0's thread).
static CLEARED: AtomicU32 = AtomicU32::new(0);
static DONE: AtomicBool = AtomicBool::new(false);

/// One section on the calling hart's reader, lasting about `ticks` of mtime.
fn read(ticks: u64) {
    my_reader().section(|g| {
        let r = ROUTES.load(g);
        let (gen, first) = (r.gen, r.next_hop[0]);
        let mut ok = r.whole();
        let until = mtime() + ticks;
        while mtime() < until {
            core::hint::spin_loop();
        }
        ok &= r.whole() && r.gen == gen && r.next_hop[0] == first;
        if !ok {
            VIOLATIONS.fetch_add(1, Relaxed);
        }
    });
}

#[riscv_rt::core_interrupt(Interrupt::MachineTimer)]
fn machine_timer() {
    let hart = hart_id();
    if my_reader().in_read_section() {
        NESTED_TRAPS.fetch_add(1, Relaxed); // nesting on the interrupted thread's slot
    }
    read(0);
    TRAP_READS[hart].fetch_add(1, Relaxed);
    arm_timer(hart, TICKS_PER_MS / 2);
}

fn start_timer(hart: usize) {
    arm_timer(hart, TICKS_PER_MS / 2);
    // SAFETY: enabling this hart's machine-timer interrupt and machine interrupts: the
    // handler above is installed (riscv-rt's trap vector) and touches only atomics, the
    // CLINT and this hart's reader.
    unsafe {
        riscv::register::mie::set_mtimer();
        riscv::interrupt::enable();
    }
}

/// Hart 1: reads continuously; every 200th section lasts 5 ms (a stall to report).
fn reader_hart() -> ! {
    start_timer(1);
    let mut n = 0u32;
    while !DONE.load(Acquire) {
        n += 1;
        let long = n.is_multiple_of(200);
        read(if long { 5 * TICKS_PER_MS } else { 20 });
        READS[1].fetch_add(1, Relaxed);
    }
    loop {
        riscv::asm::wfi();
    }
}

/// Hart 0: the writer. Publishes generations, waiting (with a stall detector) for a
/// buffer when both are still held, until every kind of event has been seen enough.
fn writer_hart() -> ! {
    start_timer(0);
    core::hint::black_box(__riscv_rt_machine_soft as extern "C" fn()); // keep the handler
                                                                       // SAFETY: enabling this hart's machine software interrupt: its handler above is
                                                                       // installed and touches only an atomic and this hart's MSIP word.
    unsafe { riscv::register::mie::set_msoft() };
    if !sleep_keeps_an_early_wake() {
        defmt::error!("the sleep waited for an interrupt although its wake had come before it");
        semihosting::process::exit(1);
    }
    RCU.set_wake_hook(Some(wake_writer));
    let writer = my_reader(); // hart 0's: the writer needs no slot of its own
    let mut stall = StallDetector::new(mtime, 2 * TICKS_PER_MS, |waited, holdouts| {
        STALLS.fetch_add(1, Relaxed);
        let mut named = 0;
        for h in holdouts {
            named += 1;
            if h.slot == 1 {
                NAMED_LONG.fetch_add(1, Relaxed);
            } else {
                WRONG_HOLDOUT.fetch_add(1, Relaxed);
            }
            defmt::info!(
                "stall: waited {=u64} us; slot {=usize} holds the grace period up (nesting {=u32}, phase {=u32})",
                waited / 10,
                h.slot,
                h.nesting,
                h.phase
            );
        }
        if named == 0 {
            CLEARED.fetch_add(1, Relaxed);
        }
    });
    let mut published = 0u32;
    let deadline = mtime() + 20_000 * TICKS_PER_MS;
    // Until enough of everything has happened (or 20 s of mtime, a failure).
    let enough = |published: u32| {
        published >= 3_000
            && NAMED_LONG.load(Relaxed) >= 3
            && TRAP_READS[0].load(Relaxed) >= 20
            && TRAP_READS[1].load(Relaxed) >= 20
            && NESTED_TRAPS.load(Relaxed) >= 1
            && WAKE_IPIS.load(Relaxed) >= 3
    };
    let mut gen = 0u32;
    while !enough(published) && mtime() < deadline {
        gen += 1;
        let mut value = Routes::new(gen);
        loop {
            let hook = |w: &Waiting<'_, '_, 2>| {
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
                Err(r) => value = r.value, // Busy cannot happen (one writer); retry
            }
        }
        published += 1;
        read(0); // hart 0 reads too, between publications
        READS[0].fetch_add(1, Relaxed);
        let pause = mtime() + 50; // 5 us between generations
        while mtime() < pause {
            core::hint::spin_loop();
        }
    }
    let all_seen = enough(published);
    DONE.store(true, Release);
    let v = VIOLATIONS.load(Relaxed);
    let wrong = WRONG_HOLDOUT.load(Relaxed);
    defmt::info!(
        "{=u32} generations published; reads: hart 0 {=u32}, hart 1 {=u32}; trap reads: hart 0 {=u32}, hart 1 {=u32} ({=u32} nested in an interrupted section); {=u32} stalls reported ({=u32} naming slot 1, {=u32} cleared before the slots were read), {=u32} naming the wrong slot; {=u32} violations",
        published,
        READS[0].load(Relaxed),
        READS[1].load(Relaxed),
        TRAP_READS[0].load(Relaxed),
        TRAP_READS[1].load(Relaxed),
        NESTED_TRAPS.load(Relaxed),
        STALLS.load(Relaxed),
        NAMED_LONG.load(Relaxed),
        CLEARED.load(Relaxed),
        wrong,
        v
    );
    defmt::info!(
        "the writer slept {=u32} times in wfi and took {=u32} wake interrupts from readers' unlocks (the other sleeps ended at its timer, or found their wake already come; an interrupt can also land just after a sleep)",
        SLEEPS.load(Relaxed),
        WAKE_IPIS.load(Relaxed)
    );
    if !all_seen {
        defmt::error!("not everything happened within 20 s of mtime");
        if WAKE_IPIS.load(Relaxed) < 3 {
            defmt::error!("the sleeping writer was not woken by three readers' unlocks");
        }
    }
    let ok = v == 0 && wrong == 0 && all_seen;
    semihosting::process::exit(if ok { 0 } else { 1 })
}

// ---- boot: hart 0 initialises RAM, then both harts enter their roles -------------------

core::arch::global_asm!(
    r#".section .init.mp_hook, "ax"
    .global _mp_hook
_mp_hook:
    seqz a0, a0
    ret
"#
);

/// Set by hart 0 once RAM is initialised; a value neither zeroed RAM nor `.bss`
/// initialisation can produce.
static RAM_READY: AtomicUsize = AtomicUsize::new(0);
const READY: usize = 0x5AFE_B007;

#[export_name = "hal_main"]
extern "C" fn hal_main(hartid: usize) -> ! {
    if hartid == 0 {
        RAM_READY.store(READY, Release);
        defmt::info!(
            "rcuref RISC-V mini-kernel: two harts, per-hart and trap readers, a stall detector"
        );
        writer_hart()
    }
    while RAM_READY.load(Acquire) != READY {
        core::hint::spin_loop();
    }
    reader_hart()
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    defmt::error!("{}", defmt::Display2Format(info));
    semihosting::process::abort()
}
