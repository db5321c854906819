//! The seeds' convoy: readers resolving `dir/file` paths while a writer creates,
//! renames and removes entries; RCU + typesafe pool against an `RwLock` (kernfs's
//! rwsem). Reports reader throughput and reader latency percentiles, and writes them to
//! `target/rcuref-bench/convoy.json` for `cargo xtask bench`'s report.
//!
//! Latency: every 16th lookup is timed with `Instant` (~20 ns of its own), so
//! percentiles include that overhead on both sides equally.

use rcuref::Rcu;
use rcuref_bench::tree::{churn, dir_name, file_name, ino, LockedTree, DIRS, FILES_PER_DIR};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static RCU: Rcu<4> = Rcu::new();

struct Stats {
    lookups_per_s: f64,
    p50_ns: u64,
    p99_ns: u64,
    writer_ops_per_s: f64,
}

fn measure(
    dur: Duration,
    lookup: &dyn Fn(&str, &str) -> Option<u32>, // runs on this thread only
    write: &(dyn Fn(u32) + Sync),
) -> Stats {
    let stop = AtomicBool::new(false);
    let (mut samples, mut lookups, mut writes) = (Vec::with_capacity(1 << 20), 0u64, 0u64);
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            let mut step = 0u32;
            while !stop.load(Ordering::Relaxed) {
                write(step);
                step += 1;
            }
            u64::from(step)
        });
        let start = Instant::now();
        let mut buf = [0u8; 8];
        let mut i = 0usize;
        while start.elapsed() < dur {
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
                lookups += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        writes = w.join().unwrap();
    });
    samples.sort_unstable();
    let pct = |p: f64| samples[((samples.len() as f64 - 1.0) * p) as usize];
    Stats {
        lookups_per_s: lookups as f64 / dur.as_secs_f64(),
        p50_ns: pct(0.50),
        p99_ns: pct(0.99),
        writer_ops_per_s: writes as f64 / dur.as_secs_f64(),
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // cargo bench -- --list: nothing criterion-like to list
    }
    let dur = Duration::from_secs(2);

    let rcu_tree = rcuref_bench::rcu_tree!(&RCU);
    for d in 0..DIRS {
        rcu_tree.mkdir(d, dir_name(d), d as u32);
    }
    let reader = RCU.register().unwrap();
    let rcu = measure(
        dur,
        &|dir, file| {
            let g = reader.lock();
            rcu_tree.lookup(dir, file, &g)
        },
        &|step| {
            let mut buf = [0u8; 8];
            churn(
                step,
                |d, f, r| rcu_tree.create(d, f, file_name(f, r, &mut buf), ino(d, f)),
                |d, f| rcu_tree.remove(d, f),
            )
        },
    );

    let locked = LockedTree::new();
    for d in 0..DIRS {
        locked.mkdir(d, dir_name(d), d as u32);
    }
    let rw = measure(dur, &|dir, file| locked.lookup(dir, file), &|step| {
        let mut buf = [0u8; 8];
        churn(
            step,
            |d, f, r| locked.create(d, f, file_name(f, r, &mut buf), ino(d, f)),
            |d, f| locked.remove(d, f),
        )
    });

    println!("convoy: 1 reader thread, 1 writer thread, {dur:?} each");
    for (name, s) in [("rcu", &rcu), ("rwlock", &rw)] {
        println!(
            "  {name:<7} {:>6.2} M lookups/s  p50 {:>5} ns  p99 {:>6} ns  writer {:>6.2} M ops/s",
            s.lookups_per_s / 1e6,
            s.p50_ns,
            s.p99_ns,
            s.writer_ops_per_s / 1e6
        );
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/rcuref-bench");
    std::fs::create_dir_all(&dir).unwrap();
    let json = |s: &Stats| {
        format!(
            "{{\"lookups_per_s\": {:.0}, \"p50_ns\": {}, \"p99_ns\": {}, \"writer_ops_per_s\": {:.0}}}",
            s.lookups_per_s, s.p50_ns, s.p99_ns, s.writer_ops_per_s
        )
    };
    std::fs::write(
        dir.join("convoy.json"),
        format!("{{\"rcu\": {}, \"rwlock\": {}}}\n", json(&rcu), json(&rw)),
    )
    .unwrap();
}
