//! The seeds' convoy: reader threads resolving `dir/file` paths while a writer creates,
//! renames and removes entries, three ways:
//!
//! * **RCU-walk**: inside a read section, through the published names tables: no lock,
//!   no reference, no shared write (`LOOKUP_RCU`);
//! * **ref-walk**: inside a read section, a counted reference on the entry at every level
//!   (what the kernel falls back to);
//! * **RwLock**: the whole tree behind one `std::sync::RwLock` (kernfs's rwsem).
//!
//! For every reader-thread count in `RCUREF_BENCH_THREADS` that leaves a core for the
//! writer (readers + writer never outnumber the cores: on two cores, one reader; an
//! oversubscribed run measures the scheduler, and starves one side), with the writer **busy**
//! (changes back to back) and **paced** (one change, then a 50 µs sleep: a read-mostly
//! tree). Reports reader throughput (all readers together) and latency percentiles, and
//! writes them to `target/rcuref-bench/convoy.json` for `cargo xtask bench`'s report.
//!
//! Each configuration runs three times; the report takes the run with the median
//! reader throughput.
//!
//! Latency: every 16th lookup is timed with `Instant` (~20 ns of its own), so the
//! percentiles include that overhead on every side equally.

use rcuref::rcu::Rcu;
use rcuref_bench::thread_counts;
use rcuref_bench::tree::{
    churn, dir_name, file_name, ino, LockedTree, RcuTree, DIRS, FILES_PER_DIR, SLOTS,
};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static RCU: Rcu<SLOTS> = Rcu::new();

struct Stats {
    lookups_per_s: f64,
    p50_ns: u64,
    p99_ns: u64,
    writer_ops_per_s: f64,
}

/// `measure` three times; the run with the median reader throughput (a shared machine
/// moves single runs by up to 2x).
fn measure3<L: Fn(&str, &str) -> Option<u32>>(
    threads: usize,
    paced: bool,
    dur: Duration,
    per_thread: &(dyn Fn() -> L + Sync),
    write: &(dyn Fn(u32) + Sync),
) -> Stats {
    let mut runs: Vec<Stats> = (0..3)
        .map(|_| measure(threads, paced, dur, per_thread, write))
        .collect();
    runs.sort_by(|a, b| a.lookups_per_s.total_cmp(&b.lookups_per_s));
    runs.swap_remove(1)
}

/// `threads` readers run `lookup` (made per thread by `per_thread`) for `dur` while one
/// writer runs `write`, back to back or paced.
fn measure<L: Fn(&str, &str) -> Option<u32>>(
    threads: usize,
    paced: bool,
    dur: Duration,
    per_thread: &(dyn Fn() -> L + Sync),
    write: &(dyn Fn(u32) + Sync),
) -> Stats {
    let stop = AtomicBool::new(false);
    let (samples, lookups, writes) = std::thread::scope(|s| {
        let w = s.spawn(|| {
            let mut step = 0u32;
            while !stop.load(Ordering::Relaxed) {
                write(step);
                step += 1;
                if paced {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            u64::from(step)
        });
        let readers: Vec<_> = (0..threads)
            .map(|t| {
                let stop = &stop;
                s.spawn(move || {
                    let lookup = per_thread();
                    let mut samples = Vec::with_capacity(1 << 18);
                    let (mut n, mut buf, mut i) = (0u64, [0u8; 8], t * 13);
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..16 {
                            let (d, f) = (i % DIRS, (i / DIRS) % FILES_PER_DIR);
                            let name = file_name(f, i % 3 == 0, &mut buf);
                            let t0 = (i % 16 == 0).then(Instant::now);
                            if let Some(got) = lookup(dir_name(d), name) {
                                assert_eq!(got, ino(d, f), "a lookup resolved to another file");
                            }
                            if let Some(t0) = t0 {
                                samples.push(t0.elapsed().as_nanos() as u64);
                            }
                            i = i.wrapping_add(7);
                            n += 1;
                        }
                    }
                    (samples, n)
                })
            })
            .collect();
        std::thread::sleep(dur);
        stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        let mut lookups = 0;
        for r in readers {
            let (s, n) = r.join().unwrap();
            all.extend(s);
            lookups += n;
        }
        (all, lookups, w.join().unwrap())
    });
    let mut samples = samples;
    samples.sort_unstable();
    let pct = |p: f64| {
        samples
            .get(((samples.len().max(1) - 1) as f64 * p) as usize)
            .copied()
    };
    Stats {
        lookups_per_s: lookups as f64 / dur.as_secs_f64(),
        p50_ns: pct(0.50).unwrap_or(0),
        p99_ns: pct(0.99).unwrap_or(0),
        writer_ops_per_s: writes as f64 / dur.as_secs_f64(),
    }
}

fn rcu_write(tree: &RcuTree, step: u32) {
    let mut buf = [0u8; 8];
    churn(
        step,
        |d, f, r| tree.create(d, f, file_name(f, r, &mut buf), ino(d, f)),
        |d, f| tree.remove(d, f),
    )
}

fn locked_write(tree: &LockedTree, step: u32) {
    let mut buf = [0u8; 8];
    churn(
        step,
        |d, f, r| tree.create(d, f, file_name(f, r, &mut buf), ino(d, f)),
        |d, f| tree.remove(d, f),
    )
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // cargo bench -- --list: nothing criterion-like to list
    }
    let dur = Duration::from_millis(
        std::env::var("RCUREF_CONVOY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000),
    );
    let rcu_tree: RcuTree = rcuref_bench::rcu_tree!(&RCU);
    let locked = LockedTree::new();
    for d in 0..DIRS {
        rcu_tree.mkdir(d, dir_name(d), d as u32);
        locked.mkdir(d, dir_name(d), d as u32);
    }

    let mut json = String::from("[\n");
    println!("convoy: reader threads x {{RCU-walk, ref-walk, RwLock}}, one writer busy or paced, {dur:?} each, median of 3 runs");
    for paced in [false, true] {
        for t in thread_counts()
            .into_iter()
            .filter(|&t| t < rcuref_bench::cores().max(2))
        {
            let rcu_walk = measure3(
                t,
                paced,
                dur,
                &|| {
                    let reader = RCU.reader().expect("a reader slot per thread");
                    let tree = &rcu_tree;
                    move |d: &str, f: &str| tree.lookup(d, f, &reader.lock())
                },
                &|s| rcu_write(&rcu_tree, s),
            );
            let ref_walk = measure3(
                t,
                paced,
                dur,
                &|| {
                    let reader = RCU.reader().expect("a reader slot per thread");
                    let tree = &rcu_tree;
                    move |d: &str, f: &str| tree.lookup_ref_walk(d, f, &reader.lock())
                },
                &|s| rcu_write(&rcu_tree, s),
            );
            let rwlock = measure3(
                t,
                paced,
                dur,
                &|| {
                    let tree = &locked;
                    move |d: &str, f: &str| tree.lookup(d, f)
                },
                &|s| locked_write(&locked, s),
            );
            let writer = if paced { "paced" } else { "busy" };
            for (name, s) in [
                ("RCU-walk", &rcu_walk),
                ("ref-walk", &ref_walk),
                ("RwLock", &rwlock),
            ] {
                println!(
                    "  {writer:<5} writer, {t:>2} readers  {name:<8} {:>7.2} M lookups/s  p50 {:>5} ns  p99 {:>6} ns  writer {:>6.3} M ops/s",
                    s.lookups_per_s / 1e6,
                    s.p50_ns,
                    s.p99_ns,
                    s.writer_ops_per_s / 1e6
                );
                let _ = writeln!(
                    json,
                    "  {{\"writer\": \"{writer}\", \"threads\": {t}, \"walk\": \"{name}\", \"lookups_per_s\": {:.0}, \"p50_ns\": {}, \"p99_ns\": {}, \"writer_ops_per_s\": {:.0}}},",
                    s.lookups_per_s, s.p50_ns, s.p99_ns, s.writer_ops_per_s
                );
            }
        }
    }
    let json = json.trim_end().trim_end_matches(',').to_string() + "\n]\n";
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/rcuref-bench");
    std::fs::create_dir_all(&dir).expect("create target/rcuref-bench");
    std::fs::write(dir.join("convoy.json"), json).expect("write convoy.json");
}
