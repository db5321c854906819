//! The main demo on the target: the fd table of `examples/fd_table` (the same source),
//! with a writer in thread code opening, closing and dup'ing descriptors while a reader
//! `fget`s and `fput`s them without locks: in the SysTick handler on a single-core
//! Cortex-M, on every other core where there are several (RISC-V harts, AArch64 cores,
//! mps2-an521's second M33). Prints a summary over defmt and exits 0 only if every file a
//! reader got was open and intact and nothing leaked.
#![no_std]
#![no_main]

#[path = "../../../../examples/fd_table/table.rs"]
mod table;

use core::sync::atomic::Ordering::Relaxed;
use portable_atomic::{AtomicBool, AtomicU32};
use rcuref::pool::{Pool, PoolCell};
use rcuref::rcu::Rcu;
use rcuref_firmware as _;
use table::{FdTable, File, FDS, FILES};

static RCU: Rcu<4> = Rcu::new();
static POOL: Pool<File, FILES> = Pool::new();
static FD_CELLS: [PoolCell<'static, File, FILES>; FDS] = [const { PoolCell::new(&POOL) }; FDS];
static T: FdTable = FdTable::new(&POOL, &FD_CELLS);
static DONE: AtomicBool = AtomicBool::new(false);
static READS: AtomicU32 = AtomicU32::new(0);

/// The writer runs at least this many steps, and on until the reader has done
/// `MIN_READS` (so the two really overlap, whatever the build's speed).
const MIN_STEPS: u32 = 100_000;
#[cfg(not(rcuref_fw_cores))]
const MIN_READS: u32 = 20_000;
#[cfg(rcuref_fw_cores)]
const MIN_READS: u32 = 50_000;
static STEPS: AtomicU32 = AtomicU32::new(0);

/// One reader step: fget + check + fput on the next descriptor, in a read section.
fn read_one() {
    let i = READS.fetch_add(1, Relaxed) as usize;
    // A slot is always free: the writer and at most three reader contexts.
    let _ = RCU.with_reader(|g| T.fget_and_check(i % FDS, g));
}

fn write_all() {
    let writer = RCU.reader().expect("a reader slot for the writer");
    let mut step = 0;
    while step < MIN_STEPS || READS.load(Relaxed) < MIN_READS {
        T.churn(step, |f| writer.section(|g| f(g)));
        step += 1;
    }
    STEPS.store(step, Relaxed);
    DONE.store(true, Relaxed);
}

rcuref_firmware::tick_handler!();

#[cfg(not(rcuref_fw_cores))]
fn run() -> &'static str {
    rcuref_firmware::tick::start(1_199, read_one);
    write_all();
    let ticks = rcuref_firmware::tick::stop();
    defmt::info!(
        "{=u32} SysTick interrupts, each one fget+fput from interrupt context",
        ticks
    );
    "Cortex-M: writer in thread code, reader in the SysTick handler"
}

#[cfg(rcuref_fw_cores)]
fn run() -> &'static str {
    fn job(core: usize) {
        if core == 0 {
            write_all();
        } else {
            while !DONE.load(Relaxed) {
                read_one();
            }
        }
    }
    rcuref_firmware::cores::run_on_all(job);
    defmt::info!(
        "{=usize} cores: the writer on core 0, a reader on each other core",
        rcuref_firmware::cores::COUNT
    );
    if cfg!(target_arch = "aarch64") {
        "AArch64: writer on core 0, readers on cores 1-3"
    } else if cfg!(target_arch = "arm") {
        "Cortex-M33 (mps2-an521): writer on core 0, reader on core 1"
    } else {
        "RISC-V: writer on hart 0, reader on hart 1"
    }
}

#[no_mangle]
extern "C" fn main() -> ! {
    defmt::info!(
        "fd_table demo: {=usize} descriptors over a pool of {=usize} files",
        FDS,
        FILES
    );
    let how = run();
    T.close_all();
    let s = &T.stats;
    let g = |a: &AtomicU32| a.load(Relaxed);
    defmt::info!("{=str}", how);
    defmt::info!(
        "writer: {=u32} steps ({=u32} opens, {=u32} closes, {=u32} dups)",
        STEPS.load(Relaxed),
        g(&s.opens),
        g(&s.closes),
        g(&s.dups)
    );
    defmt::info!(
        "reader: {=u32} fget+fput hits, {=u32} misses",
        g(&s.fget_hits),
        g(&s.fget_misses)
    );
    defmt::info!(
        "violations: {=u32}; pool high-water mark: {=usize} of {=usize}; files still open: {=usize}",
        g(&s.violations),
        POOL.high_water(),
        FILES,
        POOL.in_use()
    );
    let ok = g(&s.violations) == 0 && POOL.in_use() == 0 && g(&s.fget_hits) > 0;
    semihosting::process::exit(if ok { 0 } else { 1 })
}
