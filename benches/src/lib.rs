//! Shared pieces of the benchmarks: the alternatives users would pick, written the way
//! they are usually written, and the thread-count parameter.

use std::sync::atomic::{AtomicU64, Ordering};

/// Thread counts for the contended and scaling benchmarks: `RCUREF_BENCH_THREADS`
/// (comma-separated, e.g. `1,2,4,8,16` on a many-core machine), default `1,2`.
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
        .unwrap_or_else(|| vec![1, 2])
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
