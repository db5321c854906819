//! RCU read side: an rcuref read section (lock + unlock) against crossbeam-epoch's
//! `pin()`, and read locks of std, parking_lot and spin `RwLock`s; alone, and with a
//! writer thread churning (grace periods / deferred frees / write locks).

use criterion::{criterion_group, criterion_main, Criterion};
use rcuref::Rcu;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

static RCU: Rcu<4> = Rcu::new();

/// Runs `write` in a loop on another thread while `f` benchmarks.
fn with_writer<W: FnMut() + Send + 'static>(churn: bool, mut write: W, f: impl FnOnce()) {
    if !churn {
        return f();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let h = std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            write();
        }
    });
    f();
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
}

fn read_side(c: &mut Criterion) {
    for churn in [false, true] {
        let name = if churn {
            "read_side_with_writer"
        } else {
            "read_side"
        };
        let mut g = c.benchmark_group(name);

        with_writer(
            churn,
            || {
                let mut w = RCU.register().unwrap();
                w.synchronize(std::hint::spin_loop).unwrap();
            },
            || {
                let reader = RCU.register().unwrap();
                g.bench_function("rcuref lock+unlock", |b| {
                    b.iter(|| {
                        let guard = reader.lock();
                        black_box(&guard);
                    })
                });
            },
        );

        with_writer(
            churn,
            || {
                let guard = crossbeam_epoch::pin();
                guard.defer(|| ());
                guard.flush();
            },
            || {
                g.bench_function("crossbeam-epoch pin", |b| {
                    b.iter(|| {
                        let guard = crossbeam_epoch::pin();
                        black_box(&guard);
                    })
                });
            },
        );

        let l = Arc::new(std::sync::RwLock::new(0u64));
        let lw = l.clone();
        with_writer(
            churn,
            move || *lw.write().unwrap() += 1,
            || {
                g.bench_function("std RwLock read", |b| {
                    b.iter(|| black_box(*l.read().unwrap()))
                });
            },
        );

        let l = Arc::new(parking_lot::RwLock::new(0u64));
        let lw = l.clone();
        with_writer(
            churn,
            move || *lw.write() += 1,
            || {
                g.bench_function("parking_lot RwLock read", |b| {
                    b.iter(|| black_box(*l.read()))
                });
            },
        );

        let l = Arc::new(spin::RwLock::new(0u64));
        let lw = l.clone();
        with_writer(
            churn,
            move || *lw.write() += 1,
            || {
                g.bench_function("spin RwLock read", |b| b.iter(|| black_box(*l.read())));
            },
        );
        g.finish();
    }
}

criterion_group!(benches, read_side);
criterion_main!(benches);
