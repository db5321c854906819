//! rcuref in an RTIC 2 application (Cortex-M3, QEMU `lm3s6965evb`).
//!
//! A configuration is published through an [`RcuValue`] in a `static`; it is read
//! without locks at three priority levels, each through its own [`ContextReader`] (a
//! `static`, on a slot the domain dedicates to that level):
//!
//! | context | priority | does |
//! |---|---|---|
//! | `SysTick` | 3 | reads; pends the two tasks below |
//! | `GPIOA` | 2 | reads |
//! | `UART0` (writer) | 1 | publishes the next version, never blocking (`try_replace`) |
//! | `idle` | 0 | reads with long sections, which higher priorities preempt |
//!
//! Every read checks that the configuration it sees is whole (its checksum matches) and
//! does not change under it. A writer at priority 1 must never wait for a grace period:
//! the idle reader it would wait for cannot run until the writer returns. So it polls:
//! `try_replace` publishes into a buffer whose grace period has ended, or reports
//! `Error::Full` and the writer tries again on its next activation.
//!
//! Run: `cargo run -p rcuref-example-rtic --release --target thumbv7m-none-eabi` (through
//! the workspace's QEMU runner). It prints a summary and exits 0, or 1 on a violation.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use cortex_m as _;
use defmt_semihosting as _;
use rcuref::rcu::{ContextReader, Rcu, RcuValue};
use rcuref::Error;

/// One slot per reading priority (SysTick, GPIOA, idle), dedicated.
pub static RCU: Rcu<3> = Rcu::with_dedicated(3);
// SAFETY: each context reader is used by exactly one priority level (its RTIC task or
// idle) and, by RTIC's rules, a task never runs concurrently with itself; tasks of
// higher priority that preempt it use their own slot.
static AT_TICK: ContextReader<'static, 3> = unsafe { RCU.context_reader(0) };
// SAFETY: as above: only the GPIOA task (priority 2) uses slot 1.
static AT_GPIOA: ContextReader<'static, 3> = unsafe { RCU.context_reader(1) };
// SAFETY: as above: only idle (priority 0) uses slot 2.
static AT_IDLE: ContextReader<'static, 3> = unsafe { RCU.context_reader(2) };

/// A configuration: some data and a checksum over it.
pub struct Config {
    version: u32,
    data: [u32; 8],
    check: u32,
}

impl Config {
    const fn new(version: u32) -> Self {
        let mut data = [0u32; 8];
        let mut i = 0;
        while i < 8 {
            data[i] = version.wrapping_mul(2_654_435_761).rotate_left(i as u32);
            i += 1;
        }
        Config {
            version,
            data,
            check: checksum(version, &data),
        }
    }

    fn whole(&self) -> bool {
        self.check == checksum(self.version, &self.data)
    }
}

const fn checksum(version: u32, data: &[u32; 8]) -> u32 {
    let mut c = version ^ 0x5EED;
    let mut i = 0;
    while i < 8 {
        c = c.rotate_left(5) ^ data[i];
        i += 1;
    }
    c
}

/// Three buffers: two replacements can wait for their grace periods at once.
static CONFIG: RcuValue<'static, Config, 3, 3> = RcuValue::new(&RCU, Config::new(0));

static READS: AtomicU32 = AtomicU32::new(0);
static VIOLATIONS: AtomicU32 = AtomicU32::new(0);
static PUBLISHED: AtomicU32 = AtomicU32::new(0);
static FULL: AtomicU32 = AtomicU32::new(0);
static TICKS: AtomicU32 = AtomicU32::new(0);

/// One read section through `reader`: the configuration must be whole, and the same
/// one at the end of the section as at its start. `work` lengthens the section.
fn read_config(reader: &ContextReader<'static, 3>, work: u32) {
    reader.section(|g| {
        let c = CONFIG.load(g);
        let (version, first) = (c.version, c.data[0]);
        let mut ok = c.whole();
        for _ in 0..work {
            cortex_m::asm::nop();
        }
        ok &= c.whole() && c.version == version && c.data[0] == first;
        if !ok {
            VIOLATIONS.fetch_add(1, Relaxed);
        }
    });
    READS.fetch_add(1, Relaxed);
}

#[rtic::app(device = lm3s6965, peripherals = true)]
mod app {
    use super::*;
    use lm3s6965::Interrupt;

    #[shared]
    struct Shared {}

    #[local]
    struct Local {
        next: u32,
    }

    #[init]
    fn init(cx: init::Context) -> (Shared, Local) {
        let mut syst = cx.core.SYST;
        syst.set_clock_source(cortex_m::peripheral::syst::SystClkSource::Core);
        syst.set_reload(11_999); // ~1 kHz in QEMU's 12 MHz model
        syst.clear_current();
        syst.enable_interrupt();
        syst.enable_counter();
        defmt::info!("rcuref RTIC example: readers at priorities 3, 2 and 0, writer at 1");
        (Shared {}, Local { next: 1 })
    }

    #[task(binds = SysTick, priority = 3)]
    fn tick(_: tick::Context) {
        read_config(&AT_TICK, 4);
        TICKS.fetch_add(1, Relaxed);
        rtic::pend(Interrupt::GPIOA);
        rtic::pend(Interrupt::UART0);
    }

    #[task(binds = GPIOA, priority = 2)]
    fn gpioa(_: gpioa::Context) {
        read_config(&AT_GPIOA, 16);
    }

    /// The writer: one step per activation, never waiting.
    #[task(binds = UART0, priority = 1, local = [next])]
    fn writer(cx: writer::Context) {
        let v = *cx.local.next;
        match CONFIG.try_replace(Config::new(v)) {
            Ok(()) => {
                *cx.local.next += 1;
                PUBLISHED.fetch_add(1, Relaxed);
            }
            Err(r) if r.error == Error::Full => {
                FULL.fetch_add(1, Relaxed); // a reader still holds the old buffers
            }
            Err(r) => {
                defmt::error!("unexpected: {}", r.error);
                VIOLATIONS.fetch_add(1, Relaxed);
            }
        }
    }

    #[idle]
    fn idle(_: idle::Context) -> ! {
        loop {
            read_config(&AT_IDLE, 400); // long sections: the others preempt them
            if PUBLISHED.load(Relaxed) >= 2_000 {
                break;
            }
        }
        let v = VIOLATIONS.load(Relaxed);
        defmt::info!(
            "{=u32} versions published ({=u32} times all buffers were still held), {=u32} reads, {=u32} ticks, {=u32} violations",
            PUBLISHED.load(Relaxed),
            FULL.load(Relaxed),
            READS.load(Relaxed),
            TICKS.load(Relaxed),
            v
        );
        semihosting::process::exit(if v == 0 { 0 } else { 1 })
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    defmt::error!("{}", defmt::Display2Format(info));
    semihosting::process::abort()
}
