//! fd table on host threads: one writer opens, closes and dups descriptors while reader
//! threads `fget`/`fput` them without locks. Every file a reader gets must be open and
//! intact; at the end every file description is back in the pool.
//!
//! Run: `cargo run --release --example fd_table` (part of `cargo xtask demo`).

mod table;

use rcuref::rcu::Rcu;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

static RCU: Rcu<4> = Rcu::new();

fn main() {
    let t = fd_table!();
    let stop = AtomicBool::new(false);
    let readers = 2;
    let run_for = Duration::from_millis(500);
    let start = Instant::now();
    let mut steps = 0u32;
    thread::scope(|s| {
        for r in 0..readers {
            let (t, stop) = (&t, &stop);
            s.spawn(move || {
                let reader = RCU.reader().expect("a reader slot");
                let mut i = r;
                while !stop.load(Ordering::Relaxed) {
                    reader.section(|g| t.fget_and_check(i % table::FDS, g));
                    i = i.wrapping_add(1);
                }
            });
        }
        let writer = RCU.reader().expect("a writer slot");
        while start.elapsed() < run_for {
            t.churn(steps, |f| writer.section(|g| f(g)));
            steps += 1;
        }
        stop.store(true, Ordering::Relaxed);
    });
    t.close_all();
    let g = |a| t.get(a);
    let s = &t.stats;
    println!("fd_table (host, {readers} reader threads + 1 writer, {run_for:?})");
    println!(
        "  writer ops:        {steps} ({} opens, {} closes, {} dups)",
        g(&s.opens),
        g(&s.closes),
        g(&s.dups)
    );
    println!(
        "  fget+fput:         {} hits, {} misses (empty fd)",
        g(&s.fget_hits),
        g(&s.fget_misses)
    );
    println!("  violations:        {} (must be 0)", g(&s.violations));
    #[cfg(feature = "pool-stats")]
    println!(
        "  pool high water:   {} of {} files",
        t.pool.high_water(),
        table::FILES
    );
    println!("  files still open:  {} (must be 0)", t.pool.in_use());
    assert_eq!(
        g(&s.violations),
        0,
        "a reader got a closed or corrupted file"
    );
    assert_eq!(t.pool.in_use(), 0, "file descriptions leaked");
}
