//! RCU read side: an rcuref read section (lock + unlock) against crossbeam-epoch's
//! `pin()` and the read locks of std, parking_lot and spin `RwLock`s.
//!
//! * `read_side`: one thread, nothing else running;
//! * `read_side_contended`: `T` threads at once (`RCUREF_BENCH_THREADS`), each with its
//!   own reader on **one** shared domain / collector / lock: what a single-thread number
//!   hides (false sharing, a line every reader writes);
//! * `read_side_with_writer`: `T` readers while one more thread runs grace periods (or
//!   deferred frees, or write locks) back to back; only counts with a core left for the
//!   writer.
//!
//! Built with `--cfg rcuref_asymmetric_fence` (as `cargo xtask bench` does in a second
//! build), only the rcuref entries run, labelled "asymmetric": readers with a compiler
//! fence, grace periods with `membarrier`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rcuref::rcu::Rcu;
use rcuref_bench::{thread_counts, WriterWindow, READERS_RUNNING};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[cfg(rcuref_asymmetric_fence)]
rcuref::set_heavy_fence!(rcuref::rcu::heavy::Membarrier);

/// Enough slots for 32 readers and a writer.
static RCU: Rcu<40> = Rcu::new();

const ASYM: bool = cfg!(rcuref_asymmetric_fence);

fn ours(what: &str) -> String {
    if ASYM {
        format!("rcuref {what} (asymmetric fences)")
    } else {
        format!("rcuref {what}")
    }
}

/// Runs `body` `iters` times on each of `threads` threads at once, each with its own
/// state from `init` (made before the common start), and returns the mean over the
/// threads of the time each took: per-thread time per iteration, as criterion reports.
///
/// Generic, not `dyn`: the body must inline into the loop as it does in the one-thread
/// benches, or an indirect call per iteration would be measured too.
fn on_threads<S, I: Fn() -> S + Sync, B: Fn(&S) + Sync>(
    threads: usize,
    iters: u64,
    init: I,
    body: B,
) -> Duration {
    let start = Barrier::new(threads);
    let total: Duration = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let state = init();
                    start.wait();
                    READERS_RUNNING.fetch_add(1, Ordering::SeqCst);
                    let t0 = Instant::now();
                    for _ in 0..iters {
                        body(&state);
                    }
                    let t = t0.elapsed();
                    READERS_RUNNING.fetch_sub(1, Ordering::SeqCst);
                    t
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    total / threads as u32
}

/// Runs `write` in a loop on another thread while `f` runs, and appends the writer's
/// rate to `target/rcuref-bench/writer_rates.tsv` (`label`, threads, operations per
/// second) for the report: a reader cost means little without the writer's pace. The
/// rate counts only operations done while all `threads` readers were in their timed
/// loops (`WriterWindow`): between criterion's samples no reader runs, and a writer's
/// operations there (cheap, with nobody to wait for) would inflate it.
///
/// `make` runs on the writer's thread and returns the operation (so it can own what is
/// not `Send`, such as a `Reader`, registered once).
fn with_writer<W: FnMut()>(
    label: &str,
    threads: usize,
    make: impl FnOnce() -> W + Send,
    f: impl FnOnce(),
) {
    let stop = AtomicBool::new(false);
    let rate = std::thread::scope(|s| {
        let w = s.spawn(|| {
            let mut write = make();
            let mut window = WriterWindow::new(threads);
            while !stop.load(Ordering::Relaxed) {
                window.op(&mut write);
            }
            window.rate()
        });
        f();
        stop.store(true, Ordering::Relaxed);
        w.join().unwrap()
    });
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/rcuref-bench");
    let _ = std::fs::create_dir_all(&dir);
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("writer_rates.tsv"))
    {
        use std::io::Write as _;
        let _ = writeln!(f, "{label}\t{threads}\t{rate:.0}");
    }
}

use rcuref_bench::cores;

fn read_side(c: &mut Criterion) {
    let mut g = c.benchmark_group("read_side");
    let reader = RCU.reader().unwrap();
    g.bench_function(ours("lock+unlock"), |b| {
        b.iter(|| {
            let _guard = reader.lock();
            rcuref_bench::in_section();
        })
    });
    drop(reader);
    if !ASYM {
        g.bench_function("crossbeam-epoch pin", |b| {
            b.iter(|| {
                let _guard = crossbeam_epoch::pin();
                rcuref_bench::in_section();
            })
        });
        let l = std::sync::RwLock::new(0u64);
        g.bench_function("std RwLock read", |b| {
            b.iter(|| black_box(*l.read().unwrap()))
        });
        let l = parking_lot::RwLock::new(0u64);
        g.bench_function("parking_lot RwLock read", |b| {
            b.iter(|| black_box(*l.read()))
        });
        let l = spin::RwLock::new(0u64);
        g.bench_function("spin RwLock read", |b| b.iter(|| black_box(*l.read())));
    }
    g.finish();
}

fn read_side_contended(c: &mut Criterion) {
    let mut g = c.benchmark_group("read_side_contended");
    g.sample_size(30).measurement_time(Duration::from_secs(3));
    for t in thread_counts() {
        g.bench_function(BenchmarkId::new(ours("lock+unlock"), t), |b| {
            b.iter_custom(|iters| {
                on_threads(
                    t,
                    iters,
                    || RCU.reader().unwrap(),
                    |r| {
                        let _guard = r.lock();
                        rcuref_bench::in_section();
                    },
                )
            })
        });
        if ASYM {
            continue;
        }
        g.bench_function(BenchmarkId::new("crossbeam-epoch pin", t), |b| {
            b.iter_custom(|iters| {
                on_threads(
                    t,
                    iters,
                    || (),
                    |()| {
                        let _guard = crossbeam_epoch::pin();
                        rcuref_bench::in_section();
                    },
                )
            })
        });
        let l = parking_lot::RwLock::new(0u64);
        g.bench_function(BenchmarkId::new("parking_lot RwLock read", t), |b| {
            b.iter_custom(|iters| {
                on_threads(
                    t,
                    iters,
                    || (),
                    |()| {
                        black_box(*l.read());
                    },
                )
            })
        });
    }
    g.finish();
}

fn read_side_with_writer(c: &mut Criterion) {
    let mut g = c.benchmark_group("read_side_with_writer");
    g.sample_size(30).measurement_time(Duration::from_secs(3));
    // One core per reader and one for the writer: more would measure time-slicing.
    let counts: Vec<usize> = thread_counts()
        .into_iter()
        .filter(|&t| t == 1 || t < cores())
        .collect();
    for &t in &counts {
        with_writer(
            &ours("lock+unlock"),
            t,
            || {
                let mut w = RCU.reader().unwrap();
                move || {
                    w.synchronize(rcuref::rcu::forever(std::hint::spin_loop))
                        .unwrap();
                }
            },
            || {
                g.bench_function(BenchmarkId::new(ours("lock+unlock"), t), |b| {
                    b.iter_custom(|iters| {
                        on_threads(
                            t,
                            iters,
                            || RCU.reader().unwrap(),
                            |r| {
                                let _guard = r.lock();
                                rcuref_bench::in_section();
                            },
                        )
                    })
                });
            },
        );
        if ASYM {
            continue;
        }
        with_writer(
            "crossbeam-epoch pin",
            t,
            || {
                || {
                    let guard = crossbeam_epoch::pin();
                    guard.defer(|| ());
                    guard.flush();
                }
            },
            || {
                g.bench_function(BenchmarkId::new("crossbeam-epoch pin", t), |b| {
                    b.iter_custom(|iters| {
                        on_threads(
                            t,
                            iters,
                            || (),
                            |()| {
                                let _guard = crossbeam_epoch::pin();
                                rcuref_bench::in_section();
                            },
                        )
                    })
                });
            },
        );
        let l = Arc::new(parking_lot::RwLock::new(0u64));
        let lw = l.clone();
        with_writer(
            "parking_lot RwLock read",
            t,
            move || move || *lw.write() += 1,
            || {
                g.bench_function(BenchmarkId::new("parking_lot RwLock read", t), |b| {
                    b.iter_custom(|iters| {
                        on_threads(
                            t,
                            iters,
                            || (),
                            |()| {
                                black_box(*l.read());
                            },
                        )
                    })
                });
            },
        );
    }
    g.finish();
}

criterion_group!(
    benches,
    read_side,
    read_side_contended,
    read_side_with_writer
);
criterion_main!(benches);
