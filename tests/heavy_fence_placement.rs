//! Where the asymmetric-fence mode's heavy fence sits, with two grace-period drivers.
//! Built and run by `cargo xtask test` in the asymmetric-fence build:
//! `RUSTFLAGS="--cfg rcuref_asymmetric_fence --cfg rcuref_mutants" cargo test --release
//! --test heavy_fence_placement -- --test-threads=1`.
//!
//! The correctness argument (`src/rcu/heavy.rs`, module docs) needs, before every
//! scan of a wait, a heavy fence begun after the counter reached that wait, by the
//! context that scans. One driver cannot tell that from a fence issued by whoever
//! flipped the counter to the wait: a second driver can scan a wait it did not flip.
//! Here one driver is held inside its heavy fence while another drives grace periods,
//! and every scan checks that its own context fenced at that wait. (The store-buffering
//! torture in `tests/asymmetric.rs` shows what a missing fence does to readers.)
#![cfg(all(rcuref_asymmetric_fence, rcuref_mutants))]

use rcuref::mutants::{select, set_pause_hook, Mutant, Point};
use rcuref::Rcu;
use std::cell::Cell;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering::SeqCst};
use std::time::{Duration, Instant};

static RCU: Rcu<4> = Rcu::new();

std::thread_local! {
    /// The counter when this thread's latest heavy fence began; taken by its next scan.
    static FENCED_AT: Cell<Option<u32>> = const { Cell::new(None) };
    /// Whether this thread's next heavy fence holds until `RELEASE`.
    static HOLD: Cell<bool> = const { Cell::new(false) };
}
static HELD: AtomicBool = AtomicBool::new(false);
static RELEASE: AtomicBool = AtomicBool::new(false);
/// Scans not preceded by a heavy fence of their own context begun at a wait.
static UNFENCED: AtomicU32 = AtomicU32::new(0);

/// A heavy fence that records when it began and can be held open.
struct Recording;

// SAFETY: not a heavy fence for real readers (it fences only the calling thread): no
// reader section runs in this test binary, so nothing relies on the contract; the
// library's calls to it are what is under test.
unsafe impl rcuref::rcu::HeavyFence for Recording {
    fn heavy_fence() {
        fence(SeqCst);
        let g = RCU.gp_counter();
        if HOLD.with(|h| h.replace(false)) {
            HELD.store(true, SeqCst);
            while !RELEASE.load(SeqCst) {
                std::thread::yield_now();
            }
        }
        FENCED_AT.with(|f| f.set(Some(g)));
    }
}

rcuref::set_heavy_fence!(Recording);

fn before_scan(p: Point) {
    if p == Point::GpBeforeScan {
        // Odd: the fence began while a wait was current, so after the flip to it, and
        // at this scan's wait: here no driver moves the counter while another is
        // between reading it and beginning its fence (A is held, or done, or not yet
        // started while B runs).
        let fenced = FENCED_AT.with(Cell::take).is_some_and(|g| g & 1 == 1);
        if !fenced {
            UNFENCED.fetch_add(1, SeqCst);
        }
    }
}

/// Puts the process-wide state back however a test ends.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        RELEASE.store(true, SeqCst);
        set_pause_hook(None);
        select(Mutant::None);
    }
}

/// Driver A starts a grace period and is held inside its first heavy fence; driver B
/// (this thread) then drives a whole grace period, scanning waits A flipped to; then A
/// goes on. Returns the scans that had no fence of their own at their wait.
fn two_drivers() -> u32 {
    UNFENCED.store(0, SeqCst);
    HELD.store(false, SeqCst);
    RELEASE.store(false, SeqCst);
    set_pause_hook(Some(before_scan));
    let a = std::thread::spawn(|| {
        HOLD.with(|h| h.set(true));
        let _ = RCU.start_poll().poll();
    });
    // (With the fence skipped, A never holds: it just finishes.)
    let t0 = Instant::now();
    while !HELD.load(SeqCst) && !a.is_finished() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "driver A never got going"
        );
        std::thread::yield_now();
    }
    let b = RCU.start_poll();
    for _ in 0..10 {
        if b.poll() {
            break;
        }
    }
    assert!(
        b.is_done(),
        "no reader, and still B's grace period did not end"
    );
    RELEASE.store(true, SeqCst);
    a.join().unwrap();
    set_pause_hook(None);
    UNFENCED.load(SeqCst)
}

#[test]
fn every_scan_follows_a_heavy_fence_of_its_own_at_that_wait() {
    let _restore = Restore;
    assert_eq!(two_drivers(), 0);
}

/// The control: with the heavy fence skipped, the scans are unfenced.
#[test]
fn negative_control_a_skipped_heavy_fence_is_caught() {
    let _restore = Restore;
    select(Mutant::SkipHeavyFence);
    let unfenced = two_drivers();
    select(Mutant::None);
    assert!(unfenced > 0, "a skipped heavy fence went unnoticed");
}
