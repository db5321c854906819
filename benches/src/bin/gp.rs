//! `gp <row> <threads>`: grace-period latency and throughput, measured the way
//! `benches/liburcu/memb_gp.c` measures liburcu's memb flavour (same rows, same
//! protocol, same output line), so `cargo xtask bench` can put them side by side.
//!
//! Rows (each prints `gp row=<row> threads=<t> median=<x> p99=<y> unit=<u>`):
//! * `latency`: one `synchronize` with no reader in a section (one more thread is a
//!   registered reader, idle); ns per call, median and p99 over batches of 64 calls;
//! * `latency-reader`: a reader thread enters a section, tells the writer, stays for
//!   `HOLD_NS` and leaves; the writer calls `synchronize` as soon as it is told. The
//!   figure is the time from the reader's unlock to `synchronize`'s return (ns): what
//!   the writer adds on top of the wait it cannot avoid;
//! * `latency-preempted`: as `latency-reader`, but the reader is descheduled inside its
//!   section (it sleeps `PREEMPTED_US` there) while `t` busy threads keep every core
//!   occupied, and the writer waits with a sleeping hook (`std_sleeping`): the time from
//!   the reader's unlock to `synchronize`'s return is the wake-up's latency (ns) when
//!   the threads outnumber the cores (a round whose call began only after the unlock,
//!   the writer itself descheduled, is left out);
//! * `throughput`: `t` threads call `synchronize` back to back for a second (plus one
//!   registered idle reader); completed calls per second, all threads together;
//! * `defer`: `t` threads each retire heap values through a bounded `DeferQueue` (64
//!   places, `defer_or_wait`) for a second; values freed per second, all threads
//!   together, counted when freed (the queue's last values after a `barrier`).
//!
//!   Both wait with the sleeping hook (`std_sleeping`), as memb's `synchronize_rcu`
//!   sleeps: a driver that finds another's heavy fence under way then sleeps until it
//!   returns. With a spinning hook, two drivers of the asymmetric build made a tenth
//!   of memb's calls on a 2-core Xeon VM (each `membarrier` interrupted the other
//!   core, busy spinning), against about memb's rate with the sleeping one.
//!
//! * `read-paced`: one reader thread runs read sections for a second while a writer
//!   thread calls `synchronize` at `PACE` per second (spinning between calls); ns per
//!   section, and the writer's achieved rate (`writer=`): the readers' cost under the
//!   same writer load on every side, where a busy writer's pace differs by 30x between
//!   implementations.
//!
//! * `urcu`, `urcu-yield`: liburcu's `test_urcu` shape: `t` readers in tight read loops
//!   (they may outnumber the cores: that is the point) and one writer calling
//!   `synchronize` back to back for a second, with a sleeping wait (`urcu`:
//!   `std_sleeping`, woken by the last unlock) or a yielding one (`urcu-yield`); the
//!   writer's grace periods per second (`median=`) and reads per second per reader
//!   (`reads=`). `urcu-paced`: the sleeping writer held to `RCUREF_URCU_PACE` grace
//!   periods per second (sleeping off the gap), to compare the readers' rates under the
//!   same writer load as memb's.
//!
//! Threads never outnumber cores in these rows except where the caller asks: the idle
//! reader sleeps on a lock and is not runnable.
//!
//! Built with `--cfg rcuref_asymmetric_fence` (as `cargo xtask bench` does in a second
//! build) the same rows measure the asymmetric-fence mode with `membarrier`.

use rcuref::rcu::{forever, std_sleeping, DeferQueue, Rcu};
use std::hint::spin_loop;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

#[cfg(rcuref_asymmetric_fence)]
rcuref::set_heavy_fence!(rcuref::rcu::heavy::Membarrier);

static RCU: Rcu<64> = Rcu::new();

/// How long the reader of `latency-reader` stays in its section.
const HOLD_NS: u64 = 20_000;
/// Rounds of `latency-reader` and `latency-preempted`, batches of `latency`.
const ROUNDS: usize = 2000;
/// How long the reader of `latency-preempted` sleeps inside its section.
const PREEMPTED_US: u64 = 100;
/// The writer's pace in `read-paced`: grace periods per second (below every
/// implementation's busy rate under a reader, so all of them keep it).
const PACE: f64 = 20_000.0;
/// How long the throughput rows run.
const RUN: Duration = Duration::from_secs(1);

fn spin_until(t: Instant) {
    while Instant::now() < t {
        spin_loop();
    }
}

/// A registered reader on another thread that never enters a section while `f` runs
/// (liburcu's writer then has a registry to scan, as ours has a slot).
fn with_idle_reader<R>(f: impl FnOnce() -> R) -> R {
    let done = Mutex::new(());
    let hold = done.lock().unwrap();
    let ready = Barrier::new(2);
    std::thread::scope(|s| {
        let r = s.spawn(|| {
            let _reader = RCU.reader().unwrap();
            ready.wait();
            drop(done.lock().unwrap()); // sleeps until `f` is done
        });
        ready.wait();
        let out = f();
        drop(hold);
        r.join().unwrap();
        out
    })
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p) as usize]
}

fn latency() -> (f64, f64) {
    with_idle_reader(|| {
        let mut w = RCU.reader().unwrap();
        let mut per_call = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let t0 = Instant::now();
            for _ in 0..64 {
                w.synchronize(forever(spin_loop)).unwrap();
            }
            per_call.push(t0.elapsed().as_nanos() as f64 / 64.0);
        }
        (
            percentile(&mut per_call, 0.5),
            percentile(&mut per_call, 0.99),
        )
    })
}

fn latency_reader() -> (f64, f64) {
    let entered = AtomicU64::new(0); // round number the reader is inside
    let left_at = AtomicU64::new(0); // ns since `base` at its unlock
    let done = AtomicU64::new(0); // rounds the writer has finished
    let base = Instant::now();
    let mut after = Vec::with_capacity(ROUNDS);
    std::thread::scope(|s| {
        s.spawn(|| {
            let r = RCU.reader().unwrap();
            for round in 1..=ROUNDS as u64 {
                while done.load(Acquire) != round - 1 {
                    spin_loop();
                }
                let g = r.lock();
                let t_in = Instant::now();
                entered.store(round, Release);
                spin_until(t_in + Duration::from_nanos(HOLD_NS));
                left_at.store(base.elapsed().as_nanos() as u64, Relaxed);
                drop(g);
            }
        });
        let mut w = RCU.reader().unwrap();
        for round in 1..=ROUNDS as u64 {
            while entered.load(Acquire) != round {
                spin_loop();
            }
            w.synchronize(forever(spin_loop)).unwrap();
            let back = base.elapsed().as_nanos() as u64;
            // The grace period ended, so the reader's unlock (and its store of the
            // time, before it) happened before.
            after.push(back.saturating_sub(left_at.load(Relaxed)) as f64);
            done.store(round, Release);
        }
    });
    (percentile(&mut after, 0.5), percentile(&mut after, 0.99))
}

/// `latency-preempted`: the reader sleeps inside its section while `hogs` threads spin
/// on the cores; the writer waits with `std_sleeping`. (median, p99) of the time from
/// the reader's unlock to `synchronize`'s return, ns.
fn latency_preempted(hogs: usize) -> (f64, f64) {
    let entered = AtomicU64::new(0);
    let left_at = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let base = Instant::now();
    let mut after = Vec::with_capacity(ROUNDS);
    std::thread::scope(|s| {
        for _ in 0..hogs {
            s.spawn(|| {
                while !stop.load(Relaxed) {
                    spin_loop();
                }
            });
        }
        s.spawn(|| {
            let r = RCU.reader().unwrap();
            for round in 1..=ROUNDS as u64 {
                while done.load(Acquire) != round - 1 {
                    spin_loop();
                }
                let g = r.lock();
                entered.store(round, Release);
                // Descheduled inside the section: the busy threads take the core.
                std::thread::sleep(Duration::from_micros(PREEMPTED_US));
                left_at.store(base.elapsed().as_nanos() as u64, Relaxed);
                drop(g);
            }
        });
        let mut w = RCU.reader().unwrap();
        for round in 1..=ROUNDS as u64 {
            while entered.load(Acquire) != round {
                spin_loop();
            }
            let began = base.elapsed().as_nanos() as u64;
            w.synchronize(std_sleeping()).unwrap();
            let back = base.elapsed().as_nanos() as u64;
            let left = left_at.load(Relaxed);
            // A writer descheduled before its call began after the unlock: that round
            // timed the scheduler, not a wake; it is left out (on every side).
            if began < left {
                after.push((back - left) as f64);
            }
            done.store(round, Release);
        }
        stop.store(true, Relaxed);
    });
    eprintln!(
        "latency-preempted: {} of {ROUNDS} rounds waited",
        after.len()
    );
    if after.is_empty() {
        after.push(f64::NAN);
    }
    (percentile(&mut after, 0.5), percentile(&mut after, 0.99))
}

/// Runs `body` on `threads` threads for `RUN` after a common start (with an idle
/// registered reader); returns the operations all of them counted, per second.
fn on_threads(threads: usize, body: impl Fn(&AtomicBool) -> u64 + Sync) -> f64 {
    with_idle_reader(|| {
        let stop = AtomicBool::new(false);
        let start = Barrier::new(threads + 1);
        let (n, secs) = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        body(&stop)
                    })
                })
                .collect();
            start.wait();
            let t0 = Instant::now();
            std::thread::sleep(RUN);
            stop.store(true, Relaxed);
            let n: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
            (n, t0.elapsed().as_secs_f64())
        });
        n as f64 / secs
    })
}

fn throughput(threads: usize) -> f64 {
    on_threads(threads, |stop| {
        let mut w = RCU.reader().unwrap();
        let mut n = 0;
        while !stop.load(Relaxed) {
            w.synchronize(rcuref::rcu::std_sleeping()).unwrap();
            n += 1;
        }
        n
    })
}

fn defer(threads: usize) -> f64 {
    on_threads(threads, |stop| {
        let mut w = RCU.reader().unwrap();
        let mut q: DeferQueue<'_, Box<u64>, 64, 64> = DeferQueue::new(&RCU);
        let mut freed = 0u64;
        let mut i = 0u64;
        while !stop.load(Relaxed) {
            i += 1;
            q.defer_or_wait(&mut w, Box::new(i), std_sleeping(), |b: Box<u64>| {
                drop(b);
                freed += 1;
            })
            .unwrap();
        }
        q.barrier(&mut w, std_sleeping(), |b: Box<u64>| {
            drop(b);
            freed += 1;
        })
        .unwrap();
        freed
    })
}

/// liburcu's `test_urcu` shape: `readers` threads in tight read loops (they may
/// outnumber the cores) and one writer calling `synchronize` back to back for `RUN`.
/// Returns (the writer's grace periods per second, reads per second per reader). The
/// writer's hook: `sleep` (`rcu::std_sleeping`, woken by the last unlock) or `yield`
/// (`forever(yield_now)`, the polling wait this crate had before).
fn urcu(readers: usize, hook: &str, pace: Option<f64>) -> (f64, f64) {
    let stop = AtomicBool::new(false);
    let ready = Barrier::new(readers + 1);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..readers)
            .map(|_| {
                s.spawn(|| {
                    let r = RCU.reader().unwrap();
                    ready.wait();
                    let mut n = 0u64;
                    while !stop.load(Relaxed) {
                        for _ in 0..64 {
                            let _g = r.lock();
                            rcuref_bench::in_section();
                        }
                        n += 64;
                    }
                    n
                })
            })
            .collect();
        let mut w = RCU.reader().unwrap();
        ready.wait();
        let t0 = Instant::now();
        let mut gps = 0u64;
        while t0.elapsed() < RUN {
            if let Some(rate) = pace {
                // Not ahead of `rate`: sleep off most of the gap (never runnable while
                // the readers could run), spin the rest.
                let next = t0 + Duration::from_secs_f64(gps as f64 / rate);
                let now = Instant::now();
                if next > now + Duration::from_micros(100) {
                    std::thread::sleep(next - now - Duration::from_micros(50));
                }
                spin_until(next);
            }
            match hook {
                "sleep" => w.synchronize(rcuref::rcu::std_sleeping()),
                _ => w.synchronize(forever(std::thread::yield_now)),
            }
            .unwrap();
            gps += 1;
        }
        let secs = t0.elapsed().as_secs_f64();
        stop.store(true, Relaxed);
        let reads: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        (gps as f64 / secs, reads as f64 / secs / readers as f64)
    })
}

/// (ns per read section, the writer's grace periods per second).
fn read_paced() -> (f64, f64) {
    let stop = AtomicBool::new(false);
    let ready = Barrier::new(2);
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut w = RCU.reader().unwrap();
            ready.wait();
            let t0 = Instant::now();
            let mut n = 0u64;
            while !stop.load(Relaxed) {
                n += 1;
                spin_until(t0 + Duration::from_secs_f64(n as f64 / PACE));
                w.synchronize(forever(spin_loop)).unwrap();
            }
            n as f64 / t0.elapsed().as_secs_f64()
        });
        let r = RCU.reader().unwrap();
        ready.wait();
        let t0 = Instant::now();
        let mut sections = 0u64;
        while t0.elapsed() < RUN {
            for _ in 0..1024 {
                let _g = r.lock();
                rcuref_bench::in_section();
            }
            sections += 1024;
        }
        let ns = t0.elapsed().as_nanos() as f64 / sections as f64;
        stop.store(true, Relaxed);
        (ns, writer.join().unwrap())
    })
}

/// With the fence chosen at run time (feature `membarrier` without the cfg), decide it
/// before the readers start, as a program would at start-up: readers never decide, and
/// until a grace period does they take the full fence.
fn decide_the_fence() {
    #[cfg(all(feature = "membarrier", not(rcuref_asymmetric_fence)))]
    eprintln!("fence mode: {:?}", rcuref::rcu::heavy::fence_mode());
}

fn main() {
    decide_the_fence();
    let args: Vec<String> = std::env::args().collect();
    let (row, threads) = match args.as_slice() {
        [_, row, t] => (row.as_str(), t.parse::<usize>().expect("threads")),
        _ => {
            eprintln!("usage: gp <latency|latency-reader|latency-preempted|read-paced|throughput|defer|urcu|urcu-yield|urcu-paced> <threads>");
            std::process::exit(2);
        }
    };
    let (median, p99, unit) = match row {
        "latency" => {
            let (m, p) = latency();
            (m, p, "ns")
        }
        "latency-reader" => {
            let (m, p) = latency_reader();
            (m, p, "ns")
        }
        "latency-preempted" => {
            let (m, p) = latency_preempted(threads);
            (m, p, "ns")
        }
        "read-paced" => {
            let (ns, rate) = read_paced();
            println!("gp row={row} threads=1 median={ns:.2} p99=0.0 unit=ns writer={rate:.0}");
            return;
        }
        "urcu" | "urcu-yield" | "urcu-paced" => {
            let hook = if row == "urcu-yield" {
                "yield"
            } else {
                "sleep"
            };
            let pace = (row == "urcu-paced").then(|| {
                std::env::var("RCUREF_URCU_PACE")
                    .ok()
                    .and_then(|v| v.parse::<f64>().ok())
                    .filter(|&r| r > 0.0)
                    .expect("urcu-paced: RCUREF_URCU_PACE=<grace periods per second>")
            });
            let (gps, reads) = urcu(threads, hook, pace);
            println!(
                "gp row={row} threads={threads} median={gps:.1} p99=0.0 unit=per_s reads={reads:.0}"
            );
            return;
        }
        "throughput" => (throughput(threads), 0.0, "per_s"),
        "defer" => (defer(threads), 0.0, "per_s"),
        other => {
            eprintln!("unknown row {other}");
            std::process::exit(2);
        }
    };
    println!("gp row={row} threads={threads} median={median:.1} p99={p99:.1} unit={unit}");
}
