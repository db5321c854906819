//! Lock-free path lookups while a writer creates, renames and removes entries: the
//! kernfs/proc seeds' pattern. The same workload runs with RCU-walk (no shared write on
//! the read path; every 8th lookup opens the file for use past its section), with
//! ref-walk (a reference per level), and on an `RwLock` tree, one after the other.
//!
//! Every lookup result is checked: a found `dir/file` must resolve to that file's inode
//! (renames keep the inode), never to another file's.
//!
//! Run: `cargo run --release --example lookup`. The numbers it prints are a
//! demonstration; `cargo xtask bench` measures the same convoy properly.

mod tree;

use rcuref::rcu::Rcu;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};
use tree::{churn, dir_name, file_name, ino, DIRS, FILES_PER_DIR, SLOTS};

static RCU: Rcu<SLOTS> = Rcu::new();

struct Result {
    lookups: u64,
    found: u64,
    wrong: u64,
    writes: u64,
}

/// One writer, `readers` readers, for `dur`; `lookup` must return the inode or None.
fn run(
    readers: usize,
    dur: Duration,
    lookup: &(dyn Fn(&str, &str) -> Option<u32> + Sync),
    write: &(dyn Fn(u32) + Sync),
) -> Result {
    let stop = AtomicBool::new(false);
    let (lookups, found, wrong, writes) = (
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
    );
    thread::scope(|s| {
        for r in 0..readers {
            let (stop, lookups, found, wrong) = (&stop, &lookups, &found, &wrong);
            s.spawn(move || {
                let (mut n, mut hit, mut bad) = (0u64, 0u64, 0u64);
                let mut i = r;
                let mut buf = [0u8; 8];
                while !stop.load(Ordering::Relaxed) {
                    let (d, f) = (i % DIRS, (i / DIRS) % FILES_PER_DIR);
                    let name = file_name(f, i % 3 == 0, &mut buf);
                    if let Some(got) = lookup(dir_name(d), name) {
                        hit += 1;
                        if got != ino(d, f) {
                            bad += 1;
                        }
                    }
                    n += 1;
                    i = i.wrapping_add(7);
                }
                lookups.fetch_add(n, Ordering::Relaxed);
                found.fetch_add(hit, Ordering::Relaxed);
                wrong.fetch_add(bad, Ordering::Relaxed);
            });
        }
        let start = Instant::now();
        let mut step = 0;
        while start.elapsed() < dur {
            write(step);
            step += 1;
        }
        writes.store(u64::from(step), Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
    });
    Result {
        lookups: lookups.into_inner(),
        found: found.into_inner(),
        wrong: wrong.into_inner(),
        writes: writes.into_inner(),
    }
}

fn main() {
    let dur = Duration::from_millis(400);
    let readers = 1;

    let rcu_tree = rcu_tree!(&RCU);
    for d in 0..DIRS {
        rcu_tree.mkdir(d, dir_name(d), d as u32);
    }
    let rcu_write = |step: u32| {
        let mut buf = [0u8; 8];
        churn(
            step,
            |d, f, renamed| rcu_tree.create(d, f, file_name(f, renamed, &mut buf), ino(d, f)),
            |d, f| rcu_tree.remove(d, f),
        )
    };
    // RCU-walk, and for file slot 0 (an eighth of the lookups) an `open` that keeps the
    // file past the section.
    let walk_lookup = |dir: &str, file: &str| {
        if file.starts_with("f0") {
            let h = RCU
                .with_reader(|g| rcu_tree.open(dir, file, g))
                .expect("a reader slot");
            return h.map(|h| h.ino); // used after the section: the reference keeps it
        }
        RCU.with_reader(|g| rcu_tree.lookup(dir, file, g))
            .expect("a reader slot")
    };
    let a = run(readers, dur, &walk_lookup, &rcu_write);
    let ref_lookup = |dir: &str, file: &str| {
        RCU.with_reader(|g| rcu_tree.lookup_ref_walk(dir, file, g))
            .expect("a reader slot")
    };
    let b = run(readers, dur, &ref_lookup, &rcu_write);

    let locked = tree::LockedTree::new();
    for d in 0..DIRS {
        locked.mkdir(d, dir_name(d), d as u32);
    }
    let lock_lookup = |dir: &str, file: &str| locked.lookup(dir, file);
    let lock_write = |step: u32| {
        let mut buf = [0u8; 8];
        churn(
            step,
            |d, f, renamed| locked.create(d, f, file_name(f, renamed, &mut buf), ino(d, f)),
            |d, f| locked.remove(d, f),
        )
    };
    let c = run(readers, dur, &lock_lookup, &lock_write);

    println!("lookup: {readers} reader thread(s) resolving dir/file while 1 writer creates, renames, removes ({dur:?} each)");
    for (name, r) in [("RCU-walk", &a), ("ref-walk", &b), ("RwLock", &c)] {
        println!(
            "  {name:<9} {:>10} lookups ({:>5.1} M/s), {:>9} found, {} wrong, writer did {} ops",
            r.lookups,
            r.lookups as f64 / dur.as_secs_f64() / 1e6,
            r.found,
            r.wrong,
            r.writes
        );
    }
    assert_eq!(
        a.wrong + b.wrong + c.wrong,
        0,
        "a lookup resolved to another file's inode"
    );
    assert!(
        a.found > 0 && b.found > 0,
        "the lookups found nothing: the demo proves nothing"
    );
    for d in 0..DIRS {
        for f in 0..FILES_PER_DIR {
            rcu_tree.remove(d, f);
        }
    }
    assert_eq!(rcu_tree.in_use(), DIRS, "only the directories remain");
    println!("  (a demonstration on this machine; `cargo xtask bench` measures the convoy)");
}
