//! Refcount benchmarks: FileRef get+put against a compare-exchange `inc_not_zero`, `Arc`
//! clone+drop and a bare `fetch_add`/`fetch_sub` pair; uncontended and with N threads
//! on one counter (N from `RCUREF_BENCH_THREADS`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rcuref::FileRef64;
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
/// wall time, so criterion reports time per pair per thread.
fn hammer(threads: usize, iters: u64, op: Arc<dyn Fn() + Send + Sync>) -> Duration {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let (barrier, op) = (barrier.clone(), op.clone());
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..iters {
                    op();
                }
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for h in hs {
        h.join().unwrap();
    }
    start.elapsed()
}

fn contended(c: &mut Criterion) {
    let mut g = c.benchmark_group("refcount_contended");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    for n in thread_counts() {
        // Each case: its name and one operation on a counter shared by all threads.
        let file_ref = Arc::new(FileRef64::new(1));
        let cas = Arc::new(CasRef::new(1));
        let arc = Arc::new(0u64);
        let cases: [(&str, Arc<dyn Fn() + Send + Sync>); 3] = [
            (
                "FileRef get+put",
                Arc::new(move || {
                    black_box(file_ref.get());
                    black_box(file_ref.put());
                }),
            ),
            (
                "CAS-loop inc_not_zero+dec",
                Arc::new(move || {
                    black_box(cas.get());
                    black_box(cas.put());
                }),
            ),
            (
                "Arc clone+drop",
                Arc::new(move || drop(black_box(arc.clone()))),
            ),
        ];
        for (name, op) in cases {
            g.bench_with_input(BenchmarkId::new(name, n), &n, |b, &n| {
                b.iter_custom(|iters| hammer(n, iters, op.clone()))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, uncontended, contended);
criterion_main!(benches);
