//! Shared pieces of the benchmarks: the alternatives users would pick, written the way
//! they are usually written, and the thread-count parameter.

use std::sync::atomic::{AtomicU64, Ordering};

/// Thread counts for the contended and scaling benchmarks: `RCUREF_BENCH_THREADS`
/// (comma-separated, e.g. `1,2,4,8,16`), default the powers of two below the machine's
/// core count and the core count itself (`1,2` on two cores, `1,2,4,8,16` on sixteen),
/// so the same command makes the scaling table on a bigger machine.
pub fn thread_counts() -> Vec<usize> {
    std::env::var("RCUREF_BENCH_THREADS")
        .ok()
        .map(|v| {
            v.split(',')
                .filter_map(|t| t.trim().parse().ok())
                .filter(|&t| t > 0)
                .collect()
        })
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| up_to_cores(cores()))
}

/// 1, 2, 4, ... below `cores`, then `cores`.
pub fn up_to_cores(cores: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..usize::BITS)
        .map(|i| 1usize << i)
        .take_while(|&t| t < cores)
        .collect();
    v.push(cores.max(1));
    v
}

/// The machine's cores (1 if unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How many reader threads of a measurement are inside their timed loop right now; a
/// writer counts its operations only while all of them are (`WriterWindow`), so its rate
/// is the rate under that reader load, not under idle gaps between samples.
pub static READERS_RUNNING: AtomicU64 = AtomicU64::new(0);

/// A writer's count of operations done while all `readers` were running, and the time
/// that took.
pub struct WriterWindow {
    readers: u64,
    ops: u64,
    busy: std::time::Duration,
}

impl WriterWindow {
    pub fn new(readers: usize) -> Self {
        WriterWindow {
            readers: readers as u64,
            ops: 0,
            busy: std::time::Duration::ZERO,
        }
    }

    /// Runs one writer operation; counts it (and its time) if every reader was running
    /// both before and after it.
    pub fn op(&mut self, write: impl FnOnce()) {
        let before = READERS_RUNNING.load(Ordering::SeqCst) == self.readers;
        let t0 = std::time::Instant::now();
        write();
        let t = t0.elapsed();
        if before && READERS_RUNNING.load(Ordering::SeqCst) == self.readers {
            self.ops += 1;
            self.busy += t;
        }
    }

    /// Operations per second while the readers ran (0 if they never all did).
    pub fn rate(&self) -> f64 {
        if self.busy.is_zero() {
            0.0
        } else {
            self.ops as f64 / self.busy.as_secs_f64()
        }
    }
}

/// The classic "get unless zero": a compare-exchange loop (what `Weak::upgrade` and
/// the kernel's `atomic_long_inc_not_zero` do). Counts references directly.
pub struct CasRef(AtomicU64);

impl CasRef {
    pub const fn new(refs: u64) -> Self {
        CasRef(AtomicU64::new(refs))
    }
    #[inline]
    pub fn get(&self) -> bool {
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            if cur == 0 {
                return false;
            }
            match self
                .0
                .compare_exchange_weak(cur, cur + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }
    #[inline]
    pub fn put(&self) -> bool {
        self.0.fetch_sub(1, Ordering::Release) == 1
    }
}

#[path = "../../examples/lookup/tree.rs"]
pub mod tree;

/// The body of every measured read section (rcuref, crossbeam-epoch, liburcu): a
/// compiler barrier and nothing else, as liburcu's harness has an empty `asm` with a
/// memory clobber. (An earlier `black_box(&guard)` forced our guard through the stack
/// and back, a store and a dependent load per section that the C side did not pay.)
#[inline(always)]
pub fn in_section() {
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
}
