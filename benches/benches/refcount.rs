//! Refcount benchmarks: FileRef get+put against a compare-exchange `inc_not_zero`, `Arc`
//! clone+drop and a bare `fetch_add`/`fetch_sub` pair; uncontended and with N threads
//! on one counter (N from `RCUREF_BENCH_THREADS`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rcuref::file_ref::FileRef64;
use rcuref_bench::{thread_counts, CasRef};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("refcount_1thread");
    let bare = AtomicU64::new(1);
    g.bench_function("fetch_add+fetch_sub (floor)", |b| {
        b.iter(|| {
            black_box(bare.fetch_add(1, Ordering::SeqCst));
            black_box(bare.fetch_sub(1, Ordering::SeqCst));
        })
    });
    let r = FileRef64::new(1);
    g.bench_function("FileRef get+put", |b| {
        b.iter(|| black_box(r.get()) && black_box(r.put()))
    });
    let r = FileRef64::new(1);
    g.bench_function("FileRef get", |b| b.iter(|| black_box(r.get())));
    let r = FileRef64::from_raw(1 << 50);
    g.bench_function("FileRef put", |b| b.iter(|| black_box(r.put())));
    let r = CasRef::new(1);
    g.bench_function("CAS-loop inc_not_zero+dec", |b| {
        b.iter(|| black_box(r.get()) && black_box(r.put()))
    });
    let a = Arc::new(0u64);
    g.bench_function("Arc clone+drop", |b| b.iter(|| drop(black_box(a.clone()))));
    g.finish();
}

/// `threads` threads each do `iters` get+put pairs on one shared counter; returns the
/// wall time, so criterion reports time per pair per thread. Generic, not `dyn`: the
/// operation must inline into the loop as in the one-thread benches.
fn hammer<F: Fn() + Sync>(threads: usize, iters: u64, op: &F) -> Duration {
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..iters {
                    op();
                }
            });
        }
        barrier.wait();
        let start = Instant::now();
        // The scope joins every thread before it returns.
        start
    })
    .elapsed()
}

fn contended(c: &mut Criterion) {
    let mut g = c.benchmark_group("refcount_contended");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    for n in thread_counts() {
        let file_ref = FileRef64::new(1);
        let get_put = || {
            black_box(file_ref.get());
            black_box(file_ref.put());
        };
        g.bench_with_input(BenchmarkId::new("FileRef get+put", n), &n, |b, &n| {
            b.iter_custom(|iters| hammer(n, iters, &get_put))
        });
        let cas = CasRef::new(1);
        let cas_get_put = || {
            black_box(cas.get());
            black_box(cas.put());
        };
        g.bench_with_input(
            BenchmarkId::new("CAS-loop inc_not_zero+dec", n),
            &n,
            |b, &n| b.iter_custom(|iters| hammer(n, iters, &cas_get_put)),
        );
        let arc = Arc::new(0u64);
        let clone_drop = || drop(black_box(arc.clone()));
        g.bench_with_input(BenchmarkId::new("Arc clone+drop", n), &n, |b, &n| {
            b.iter_custom(|iters| hammer(n, iters, &clone_drop))
        });
    }
    g.finish();
}

criterion_group!(benches, uncontended, contended);
criterion_main!(benches);
