//! loom models of the RCU (tests 11, 13, 14, 18): a reader never sees reclaimed data,
//! with nested sections, and with grace periods driven by polling from another thread.
//! Each runs once against a broken variant that it must catch. Run with
//! `RUSTFLAGS="--cfg loom" cargo test --release --test loom_rcu -- --test-threads=1`.
#![cfg(loom)]

#[path = "common/loom.rs"]
mod common;
use common::{model, must_catch};

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use rcuref::mutants::{select, Mutant};
use rcuref::Rcu;

const LIVE: u32 = 1;
const FREED: u32 = 0xDEAD;

/// Two buffers a "pointer" (an index) can name; loom watches their payloads.
struct World {
    rcu: Rcu<2>,
    current: AtomicUsize,
    bufs: [UnsafeCell<u32>; 3],
}

impl World {
    fn new() -> Arc<Self> {
        Arc::new(World {
            rcu: Rcu::new(),
            current: AtomicUsize::new(0),
            bufs: [
                UnsafeCell::new(LIVE),
                UnsafeCell::new(LIVE),
                UnsafeCell::new(LIVE),
            ],
        })
    }
    /// A reader's use of whatever is published.
    fn read_current(&self) {
        let i = self.current.load(Ordering::Acquire);
        // SAFETY: (test) loom checks this read against the reclaimer's write.
        let v = self.bufs[i].with(|p| unsafe { *p });
        assert_eq!(v, LIVE, "read reclaimed data");
    }
    /// Publish `next`, wait for a grace period (blocking, through a registered reader),
    /// reclaim the old buffer.
    fn replace_and_reclaim(&self, next: usize, w: &mut rcuref::Reader<'_, 2>) {
        let old = self.current.swap(next, Ordering::AcqRel);
        w.synchronize(thread::yield_now).unwrap();
        // SAFETY: (test) loom checks that no reader access is concurrent with this.
        self.bufs[old].with_mut(|p| unsafe { *p = FREED });
    }
}

/// A reader's one section vs a writer that replaces twice (so a stale phase meets the
/// second grace period: the one-flip bug's shape).
fn reader_vs_two_updates() {
    model(3, || {
        let w = World::new();
        let r = w.clone();
        let t = thread::spawn(move || {
            let reader = r.rcu.register().unwrap();
            reader.read(|_| r.read_current());
        });
        let mut me = w.rcu.register().unwrap();
        w.replace_and_reclaim(1, &mut me);
        w.replace_and_reclaim(2, &mut me);
        t.join().unwrap();
    });
}

/// Nested sections: the reference is used after the inner guard is gone.
fn nested_reader_vs_update() {
    model(3, || {
        let w = World::new();
        let r = w.clone();
        let t = thread::spawn(move || {
            let reader = r.rcu.register().unwrap();
            let outer = reader.lock();
            drop(reader.lock());
            r.read_current();
            drop(outer);
        });
        let mut me = w.rcu.register().unwrap();
        w.replace_and_reclaim(1, &mut me);
        t.join().unwrap();
    });
}

/// Polled grace periods: the writer never blocks; a third thread drives `poll`.
fn polled_grace_period() {
    model(2, || {
        let w = World::new();
        let (r, p) = (w.clone(), w.clone());
        let reader = thread::spawn(move || {
            let reader = r.rcu.register().unwrap();
            reader.read(|_| r.read_current());
        });
        let old = w.current.swap(1, Ordering::AcqRel);
        let cookie = w.rcu.start_poll();
        let poller = thread::spawn(move || {
            while !p.rcu.poll(cookie) {
                thread::yield_now();
            }
        });
        // The writer itself never blocks on the grace period; it learns of its end from
        // the poller (here: by joining it).
        poller.join().unwrap();
        assert!(w.rcu.is_done(cookie));
        // SAFETY: (test) as above.
        w.bufs[old].with_mut(|p| unsafe { *p = FREED });
        reader.join().unwrap();
    });
}

#[test]
fn reader_never_sees_reclaimed_data() {
    reader_vs_two_updates();
}

#[test]
fn nested_sections_hold_the_grace_period() {
    nested_reader_vs_update();
}

#[test]
fn polled_grace_periods_are_safe() {
    polled_grace_period();
}

#[test]
fn catches_single_phase_flip() {
    must_catch(Mutant::SingleFlip, reader_vs_two_updates);
}

#[test]
fn catches_nesting_ignored() {
    must_catch(Mutant::NestingIgnored, nested_reader_vs_update);
}

#[test]
fn catches_missing_reader_fence() {
    must_catch(Mutant::NoReaderFence, reader_vs_two_updates);
}

#[test]
fn catches_busted_grace_periods() {
    must_catch(Mutant::BustedGracePeriod, polled_grace_period);
}

/// The same model with the idle fast path turned off, so the four-step machine is
/// checked on its own too (with it on, loom's idle-reader schedules take the fast path).
#[test]
fn slow_path_alone_is_safe() {
    select(Mutant::NoIdleFastPath);
    let ok = std::panic::catch_unwind(reader_vs_two_updates).is_ok();
    select(Mutant::None);
    assert!(ok, "the four-step grace period failed the model");
}
