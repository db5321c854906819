//! Threads hammer one `FileRef` that an owner drops midway: every get before the death
//! succeeds, every get after it fails, the object is destroyed exactly once, and no
//! warning fires. Run: `cargo run --release --example contention`.

use rcuref::file_ref::FileRef;
use rcuref::{warning_count, Warning};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Instant;

fn main() {
    let threads = thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .max(2);
    let per_thread = 2_000_000u64;
    let r = FileRef::new(1); // the owner's reference
    let destroyed = AtomicBool::new(false);
    let (ok, failed, destroys) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let start = Instant::now();
    thread::scope(|s| {
        for t in 0..threads {
            let (r, destroyed, ok, failed, destroys) = (&r, &destroyed, &ok, &failed, &destroys);
            s.spawn(move || {
                let (mut got, mut missed) = (0, 0);
                for i in 0..per_thread {
                    if t == 0 && i == per_thread / 2 && r.put_close() {
                        // The owner drops its reference halfway through thread 0's run.
                        destroyed.store(true, Ordering::Release);
                        destroys.fetch_add(1, Ordering::Relaxed);
                    }
                    if r.get() {
                        assert!(!destroyed.load(Ordering::Acquire), "got a destroyed object");
                        got += 1;
                        if r.put() {
                            destroyed.store(true, Ordering::Release);
                            destroys.fetch_add(1, Ordering::Relaxed);
                        }
                    } else {
                        missed += 1;
                    }
                }
                ok.fetch_add(got, Ordering::Relaxed);
                failed.fetch_add(missed, Ordering::Relaxed);
            });
        }
    });
    let elapsed = start.elapsed();
    let (ok, failed, destroys) = (ok.into_inner(), failed.into_inner(), destroys.into_inner());
    println!("threads:            {threads}");
    println!("get+put pairs:      {ok}");
    println!("failed gets:        {failed} (after the object died)");
    println!("destroys:           {destroys} (must be 1)");
    println!("final count:        {:?}", r);
    println!(
        "warnings:           {}",
        warning_count(Warning::ImbalancedPut) + warning_count(Warning::Saturated)
    );
    println!(
        "wall time:          {:.2?} (not a benchmark: see `cargo xtask bench`)",
        elapsed
    );
    assert_eq!(destroys, 1);
    assert_eq!(ok + failed, threads as u64 * per_thread);
    assert!(r.is_dead());
}
