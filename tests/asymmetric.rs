//! The asymmetric-fence mode (`--cfg rcuref_asymmetric_fence`, feature `membarrier`):
//! readers with only a compiler fence, grace periods that run `membarrier`. Built and
//! run by `cargo xtask test` in a build of its own:
//! `RUSTFLAGS="--cfg rcuref_asymmetric_fence --cfg rcuref_mutants" cargo test --release
//! --features membarrier --test asymmetric -- --test-threads=1`.
//!
//! * the RCU test bodies and the reader-age torture, unchanged, in this mode;
//! * a store-buffering torture aimed at the one thing the heavy fence is for: a reader
//!   whose announce is still in its core's store buffer while it reads, against a
//!   writer that unpublishes, waits for a grace period and frees; with the heavy fence
//!   skipped (the broken variant) a reader must be caught reading freed data.
#![cfg(all(rcuref_asymmetric_fence, target_os = "linux"))]

#[path = "cases/rcu.rs"]
mod cases;

rcuref::set_heavy_fence!(rcuref::rcu::heavy::Membarrier);

use rcuref::rcu::Rcu;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::*};

#[test]
fn nested_sections() {
    cases::nested_sections();
}

#[test]
fn stalled_reader() {
    cases::stalled_reader();
}

#[test]
fn epoch_wraps() {
    cases::epoch_wraps();
}

#[test]
fn defer_queue_is_bounded() {
    cases::defer_queue_is_bounded();
}

#[test]
fn cell_publish_and_reclaim() {
    cases::cell_publish_and_reclaim();
}

#[test]
fn reader_age_torture() {
    static T: cases::Torture = cases::Torture::new();
    std::thread::scope(|s| {
        s.spawn(|| T.reader_loop());
        s.spawn(|| T.reader_loop());
        T.writer(5_000, 500, std::thread::yield_now);
    });
    T.check();
}

const LIVE: u32 = 1;
const FREED: u32 = 2;

/// Cache lines both threads write, so that each write by one thread must fetch the line
/// from the other's cache.
#[repr(align(128))]
struct Line(AtomicU32);

/// Lines the reader writes just before it announces itself: enough to keep its announce
/// queued in the store buffer (each needs the line back from the writer's cache) for
/// longer than the writer takes from publishing to scanning.
const LINES: usize = 32;

/// One run of the store-buffering torture: a reader enters sections back to back, reads
/// which buffer is published and, a moment later, checks it is not freed; a writer swaps
/// the two buffers, waits for the grace period by polling, frees the old one, and makes
/// it live again before it publishes it next. Before each section the reader raises a
/// flag and writes lines the writer has just taken back, so its announce queues behind
/// them in the store buffer while its loads go ahead; the writer starts each round when
/// it sees the flag, so that its publish and scan fall inside that window (the window
/// the heavy fence closes). Returns how many reads saw a freed buffer inside a section.
fn store_buffering_torture(rounds: u32) -> u32 {
    let rcu: Rcu<2> = Rcu::new();
    let bufs = [AtomicU32::new(LIVE), AtomicU32::new(FREED)];
    let current = AtomicUsize::new(0);
    let ready = AtomicU32::new(0);
    let done = AtomicBool::new(false);
    let bad = AtomicU32::new(0);
    let contended: [Line; LINES] = std::array::from_fn(|_| Line(AtomicU32::new(0)));
    std::thread::scope(|s| {
        s.spawn(|| {
            let reader = rcu.register().unwrap();
            let mut n = 0u32;
            while !done.load(Relaxed) {
                n = n.wrapping_add(1);
                ready.store(n, Relaxed);
                for l in &contended {
                    l.0.store(n, Relaxed);
                }
                let g = reader.lock();
                let i = current.load(Acquire);
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
                if bufs[i].load(Acquire) != LIVE {
                    bad.fetch_add(1, Relaxed);
                }
                drop(g);
            }
        });
        let mut seen = 0;
        for r in 0..rounds {
            // Wait for the reader to start an iteration (bounded: it may have stopped
            // short of one at the very end).
            for _ in 0..1_000_000 {
                let now = ready.load(Relaxed);
                if now != seen {
                    seen = now;
                    break;
                }
                std::hint::spin_loop();
            }
            let old = current.load(Relaxed);
            let new = 1 - old;
            bufs[new].store(LIVE, Release);
            current.store(new, Release); // publish new, unpublish old
            let cookie = rcu.start_poll();
            while !cookie.poll() {
                std::hint::spin_loop();
            }
            bufs[old].store(FREED, Release);
            for l in &contended {
                l.0.store(r, Relaxed);
            }
        }
        done.store(true, Relaxed);
    });
    bad.load(Relaxed)
}

#[test]
fn no_reader_sees_freed_data_with_the_heavy_fence() {
    assert_eq!(store_buffering_torture(200_000), 0);
}

#[cfg(rcuref_mutants)]
mod negative_controls {
    use super::*;
    use rcuref::mutants::{select, Mutant};

    /// Without the heavy fence, nothing orders a reader's announce before its loads: the
    /// torture must catch a reader reading a freed buffer, in one of five runs.
    #[test]
    fn catches_a_skipped_heavy_fence() {
        let caught = (0..5).any(|i| {
            select(Mutant::SkipHeavyFence);
            let bad = store_buffering_torture(2_000_000);
            select(Mutant::None);
            println!("run {}: {bad} reads of freed data", i + 1);
            bad > 0
        });
        assert!(
            caught,
            "a grace period without the heavy fence was not caught"
        );
    }
}
