//! `read_loop <threads> <iterations>`: the Rust `Reader` section (`reader.lock()` and
//! the guard's drop) timed as `benches/liburcu/ffi_read.c` times the C ones, for
//! `cargo xtask bench-c`: each thread registers its own reader on one domain, times
//! `iterations` sections in a tight loop after a common start; 7 rounds; prints the
//! median over threads and rounds of one thread's time per section:
//! `read_loop mode=reader threads=<T> ns_per_section=<x>`.

use rcuref::rcu::Rcu;
use std::sync::Barrier;
use std::time::Instant;

static RCU: Rcu<40> = Rcu::new();
const ROUNDS: usize = 7;

/// With the fence chosen at run time (feature `membarrier` without the cfg), decide it
/// before the readers start, as a program would at start-up: readers never decide, and
/// until a grace period does they take the full fence.
fn decide_the_fence() {
    #[cfg(all(feature = "membarrier", not(rcuref_asymmetric_fence)))]
    eprintln!("fence mode: {:?}", rcuref::rcu::heavy::fence_mode());
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (threads, iters): (usize, u64) = match args.as_slice() {
        [_, t, n] => (t.parse().expect("threads"), n.parse().expect("iterations")),
        _ => {
            eprintln!("usage: read_loop <threads> <iterations>");
            std::process::exit(2);
        }
    };
    assert!((1..=32).contains(&threads), "threads must be 1..32");
    decide_the_fence();
    let mut all = Vec::new();
    for _ in 0..ROUNDS {
        let start = Barrier::new(threads);
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let reader = RCU.reader().unwrap();
                        start.wait();
                        let t0 = Instant::now();
                        for _ in 0..iters {
                            let _guard = reader.lock();
                            rcuref_bench::in_section();
                        }
                        t0.elapsed().as_nanos() as f64 / iters as f64
                    })
                })
                .collect();
            all.extend(hs.into_iter().map(|h| h.join().unwrap()));
        });
    }
    all.sort_by(f64::total_cmp);
    println!(
        "read_loop mode=reader threads={threads} ns_per_section={:.3}",
        all[all.len() / 2]
    );
}
