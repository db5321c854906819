//! rcuref in an Embassy application (Cortex-M3, QEMU `lm3s6965evb`): async grace periods.
//!
//! * A writer task on the thread executor publishes new versions of a configuration
//!   through an [`RcuCell`] over two static buffers, and gets the old buffer back with
//!   [`Retired::reclaim_async`](rcuref::rcu::Retired::reclaim_async): it awaits the grace
//!   period instead of blocking the executor. It also hands each retired version number
//!   to a [`DeferQueue`] with [`DeferQueue::defer_async`], which awaits room when full.
//! * A reader task on an interrupt executor (SSI0, woken from SysTick through a
//!   `Signal`) reads once per tick, preempting the thread executor at any point.
//! * A reader task on the thread executor reads, and now and then keeps its guard across
//!   an `.await`: the section stays open while the task sleeps (legal), the writer's
//!   grace period waits for it, and [`GpCookie::holdouts`](rcuref::rcu::GpCookie::holdouts)
//!   names it.
//!
//! Each reader runs on its own [`ContextReader`] (one per executor: tasks of one
//! executor interleave only at `.await`s, and their sections just nest on the slot).
//! Every read checks that the configuration is whole and does not change under it.
//!
//! Run: `cargo run -p rcuref-example-embassy --release --target thumbv7m-none-eabi`. It
//! prints a summary and exits 0, or 1 on a violation.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::{entry, exception};
use defmt_semihosting as _;
use embassy_executor::{Executor, InterruptExecutor};
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::signal::Signal;
use lm3s6965::{interrupt, Interrupt};
use rcuref::rcu::{ContextReader, DeferQueue, Rcu, RcuCell};

/// One dedicated slot per executor.
static RCU: Rcu<2> = Rcu::with_dedicated(2);
// SAFETY: slot 0 is used only by tasks of the interrupt executor (one priority level,
// whose tasks interleave only at awaits); slot 1 only by tasks of the thread executor.
static AT_IRQ: ContextReader<'static, 2> = unsafe { RCU.context_reader(0) };
// SAFETY: as above.
static AT_THREAD: ContextReader<'static, 2> = unsafe { RCU.context_reader(1) };

/// A configuration: a version, some data and a checksum over both.
struct Config {
    version: u32,
    data: [u32; 8],
    check: u32,
}

impl Config {
    fn fill(&mut self, version: u32) {
        self.version = version;
        for (i, d) in self.data.iter_mut().enumerate() {
            *d = version.wrapping_mul(2_654_435_761).rotate_left(i as u32);
        }
        self.check = checksum(version, &self.data);
    }
    fn whole(&self) -> bool {
        self.check == checksum(self.version, &self.data)
    }
}

fn checksum(version: u32, data: &[u32; 8]) -> u32 {
    data.iter()
        .fold(version ^ 0x5EED, |c, d| c.rotate_left(5) ^ d)
}

static TICK: Signal<CriticalSectionRawMutex, ()> = Signal::new();
static EXECUTOR_IRQ: InterruptExecutor = InterruptExecutor::new();

static READS: AtomicU32 = AtomicU32::new(0);
static IRQ_READS: AtomicU32 = AtomicU32::new(0);
static HELD_ACROSS_AWAIT: AtomicU32 = AtomicU32::new(0);
static NAMED: AtomicU32 = AtomicU32::new(0);
static VIOLATIONS: AtomicU32 = AtomicU32::new(0);
static PUBLISHED: AtomicU32 = AtomicU32::new(0);
static RELEASED: AtomicU32 = AtomicU32::new(0);

const VERSIONS: u32 = 300;

fn check(c: &Config) -> bool {
    c.whole()
}

#[embassy_executor::task]
async fn writer(cell: &'static RcuCell<'static, Config, 2>, mut spare: &'static mut Config) {
    let mut log: DeferQueue<'static, u32, 4, 2> = DeferQueue::new(&RCU);
    for version in 1..=VERSIONS {
        spare.fill(version);
        let retired = cell.replace(spare);
        PUBLISHED.fetch_add(1, Relaxed);
        // Tell the readers' slots apart from ours: who holds this grace period up?
        if retired.cookie().holdouts().any(|h| h.slot == 1) {
            NAMED.fetch_add(1, Relaxed);
        }
        spare = retired.reclaim_async().await; // no blocking: other tasks run meanwhile
        log.defer_async(version, |_| {
            RELEASED.fetch_add(1, Relaxed);
        })
        .await;
        embassy_futures::yield_now().await; // one version per turn of the executor
    }
}

/// Reads in the interrupt executor, once per SysTick.
#[embassy_executor::task]
async fn irq_reader(cell: &'static RcuCell<'static, Config, 2>) {
    loop {
        TICK.wait().await;
        read_once(&AT_IRQ, cell, 8);
        IRQ_READS.fetch_add(1, Relaxed);
    }
}

/// Reads in the thread executor; every 8th read keeps its guard across an `.await`.
#[embassy_executor::task]
async fn thread_reader(cell: &'static RcuCell<'static, Config, 2>) {
    let mut n = 0u32;
    // Until every version is out, and both readers have read plenty (the interrupt one
    // runs once per millisecond tick).
    while PUBLISHED.load(Relaxed) < VERSIONS
        || IRQ_READS.load(Relaxed) < 200
        || HELD_ACROSS_AWAIT.load(Relaxed) < 50
    {
        n += 1;
        if n.is_multiple_of(8) {
            let g = AT_THREAD.lock();
            let c = cell.load(&g);
            let (v, ok) = (c.version, check(c));
            embassy_futures::yield_now().await; // the section stays open while we sleep
            if !(ok && check(c) && c.version == v) {
                VIOLATIONS.fetch_add(1, Relaxed);
            }
            drop(g);
            HELD_ACROSS_AWAIT.fetch_add(1, Relaxed);
            READS.fetch_add(1, Relaxed);
        } else {
            read_once(&AT_THREAD, cell, 64);
        }
        embassy_futures::yield_now().await;
    }
    let v = VIOLATIONS.load(Relaxed);
    defmt::info!(
        "{=u32} versions published, {=u32} released after their grace periods, {=u32} reads ({=u32} in the interrupt executor, {=u32} with a guard across .await; the writer named that reader {=u32} times), {=u32} violations",
        PUBLISHED.load(Relaxed),
        RELEASED.load(Relaxed),
        READS.load(Relaxed),
        IRQ_READS.load(Relaxed),
        HELD_ACROSS_AWAIT.load(Relaxed),
        NAMED.load(Relaxed),
        v
    );
    semihosting::process::exit(if v == 0 { 0 } else { 1 })
}

fn read_once(reader: &ContextReader<'static, 2>, cell: &RcuCell<'static, Config, 2>, work: u32) {
    reader.section(|g| {
        let c = cell.load(g);
        let (v, mut ok) = (c.version, check(c));
        for _ in 0..work {
            cortex_m::asm::nop();
        }
        ok &= check(c) && c.version == v;
        if !ok {
            VIOLATIONS.fetch_add(1, Relaxed);
        }
    });
    READS.fetch_add(1, Relaxed);
}

#[interrupt]
fn SSI0() {
    // SAFETY: called from the SSI0 interrupt handler only, as `on_interrupt` requires.
    unsafe { EXECUTOR_IRQ.on_interrupt() }
}

#[exception]
fn SysTick() {
    TICK.signal(());
}

#[entry]
fn main() -> ! {
    defmt::info!("rcuref Embassy example: async grace periods, readers in two executors");
    let buffers = cortex_m::singleton!(: [Config; 2] = [
        Config { version: 0, data: [0; 8], check: 0 },
        Config { version: 0, data: [0; 8], check: 0 },
    ])
    .expect("called once");
    let [first, spare] = buffers;
    first.fill(0);
    let cell: &'static RcuCell<'static, Config, 2> =
        cortex_m::singleton!(: RcuCell<'static, Config, 2> = RcuCell::new(&RCU, first))
            .expect("called once");

    let mut core = cortex_m::Peripherals::take().expect("taken once");
    core.SYST.set_clock_source(SystClkSource::Core);
    core.SYST.set_reload(11_999); // ~1 kHz in QEMU's model
    core.SYST.clear_current();
    core.SYST.enable_interrupt();
    core.SYST.enable_counter();

    // SAFETY: SSI0 is unused by anything else; its priority is set before it is enabled.
    unsafe { core.NVIC.set_priority(Interrupt::SSI0, 2 << 5) };
    let irq = EXECUTOR_IRQ.start(Interrupt::SSI0);
    irq.spawn(irq_reader(cell).expect("one instance"));

    let executor = cortex_m::singleton!(: Executor = Executor::new()).expect("called once");
    executor.run(|spawner| {
        spawner.spawn(writer(cell, spare).expect("one instance"));
        spawner.spawn(thread_reader(cell).expect("one instance"));
    })
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    defmt::error!("{}", defmt::Display2Format(info));
    semihosting::process::abort()
}
