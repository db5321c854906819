//! Pool alloc+free: rcuref's typesafe pool against heapless's lock-free box pool and a
//! mutex-protected free list (single thread: the cost of the operation itself).

use criterion::{criterion_group, criterion_main, Criterion};
use heapless::pool::boxed::BoxBlock;
use rcuref::pool::Pool;
use std::hint::black_box;
use std::sync::Mutex;

const SLOTS: usize = 64;
static POOL: Pool<u64, SLOTS> = Pool::new();

heapless::box_pool!(HP: u64);

/// The mutex version: slot storage plus a locked stack of free indices.
struct MutexPool {
    free: Mutex<Vec<usize>>,
    slots: Vec<std::cell::UnsafeCell<u64>>,
}
// SAFETY: (bench) a slot is written only by the holder of its index, which the mutex
// hands to one caller at a time.
unsafe impl Sync for MutexPool {}

impl MutexPool {
    fn new() -> Self {
        MutexPool {
            free: Mutex::new((0..SLOTS).collect()),
            slots: (0..SLOTS).map(|_| 0.into()).collect(),
        }
    }
    fn alloc(&self, v: u64) -> Option<usize> {
        let i = self.free.lock().unwrap().pop()?;
        // SAFETY: (bench) index i was just handed to us alone.
        unsafe { *self.slots[i].get() = v };
        Some(i)
    }
    fn free(&self, i: usize) {
        self.free.lock().unwrap().push(i);
    }
}

fn alloc_free(c: &mut Criterion) {
    for _ in 0..SLOTS {
        let block: &'static mut BoxBlock<u64> = Box::leak(Box::new(BoxBlock::new()));
        HP.manage(block);
    }
    let mp = MutexPool::new();
    let mut g = c.benchmark_group("pool_alloc_free");
    g.bench_function("rcuref Pool alloc+free", |b| {
        b.iter(|| drop(black_box(POOL.alloc(black_box(7)).ok())))
    });
    g.bench_function("heapless box_pool alloc+free", |b| {
        b.iter(|| drop(black_box(HP.alloc(black_box(7)).ok())))
    });
    g.bench_function("Mutex<Vec> free list alloc+free", |b| {
        b.iter(|| {
            if let Some(i) = mp.alloc(black_box(7)) {
                mp.free(black_box(i));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, alloc_free);
criterion_main!(benches);
