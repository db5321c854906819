//! loom models of the RCU (tests 11, 13, 14, 18, 21): a reader never sees reclaimed
//! data, with nested sections, with grace periods driven by polling from another thread,
//! and every model again with two drivers at once (any two of synchronize, poll and a
//! deferred queue's collect). Each runs against a broken variant that it must catch. Run with
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
use rcuref::rcu::Rcu;

const LIVE: u32 = 1;
const FREED: u32 = 0xDEAD;

/// Two buffers a "pointer" (an index) can name; loom watches their payloads.
struct World {
    rcu: Rcu<4>,
    current: AtomicUsize,
    bufs: [UnsafeCell<u32>; 3],
}

impl World {
    fn new() -> Arc<Self> {
        Self::at(0)
    }
    /// A world whose grace-period counter starts at `gp`.
    fn at(gp: u32) -> Arc<Self> {
        Arc::new(World {
            rcu: Rcu::new_at(gp),
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
    fn replace_and_reclaim(&self, next: usize, w: &mut rcuref::rcu::Reader<'_, 4>) {
        let old = self.current.swap(next, Ordering::AcqRel);
        w.synchronize(rcuref::rcu::forever(thread::yield_now))
            .unwrap();
        // SAFETY: (test) loom checks that no reader access is concurrent with this.
        self.bufs[old].with_mut(|p| unsafe { *p = FREED });
    }
}

/// A second driver for any model: a context that takes a cookie
/// and polls it once, stepping the same grace periods as the model's writer.
fn second_driver(w: &Arc<World>) -> thread::JoinHandle<()> {
    let d = w.clone();
    thread::spawn(move || {
        let _ = d.rcu.start_poll().poll();
    })
}

/// A reader's one section vs a writer that replaces twice (so a stale phase meets the
/// second grace period: the one-flip bug's shape); with `two_drivers`, another context
/// polls at the same time.
fn reader_vs_two_updates_with(two_drivers: bool) {
    model(if two_drivers { 2 } else { 3 }, move || {
        let w = World::new();
        let r = w.clone();
        let t = thread::spawn(move || {
            let reader = r.rcu.reader().unwrap();
            reader.section(|_| r.read_current());
        });
        let d = two_drivers.then(|| second_driver(&w));
        let mut me = w.rcu.reader().unwrap();
        w.replace_and_reclaim(1, &mut me);
        w.replace_and_reclaim(2, &mut me);
        t.join().unwrap();
        if let Some(d) = d {
            d.join().unwrap();
        }
    });
}

fn reader_vs_two_updates() {
    reader_vs_two_updates_with(false);
}

fn reader_vs_two_updates_two_drivers() {
    reader_vs_two_updates_with(true);
}

/// Nested sections: the reference is used after the inner guard is gone; with
/// `two_drivers`, another context polls at the same time.
fn nested_reader_vs_update_with(two_drivers: bool) {
    model(if two_drivers { 2 } else { 3 }, move || {
        let w = World::new();
        let r = w.clone();
        let t = thread::spawn(move || {
            let reader = r.rcu.reader().unwrap();
            let outer = reader.lock();
            drop(reader.lock());
            r.read_current();
            drop(outer);
        });
        let d = two_drivers.then(|| second_driver(&w));
        let mut me = w.rcu.reader().unwrap();
        w.replace_and_reclaim(1, &mut me);
        t.join().unwrap();
        if let Some(d) = d {
            d.join().unwrap();
        }
    });
}

fn nested_reader_vs_update() {
    nested_reader_vs_update_with(false);
}

fn nested_reader_vs_update_two_drivers() {
    nested_reader_vs_update_with(true);
}

/// Deferred reclamation with two drivers: the writer defers what it unpublishes into a
/// `DeferQueue` and collects until it is empty, while a blocking writer replaces and
/// synchronizes, and a reader reads.
fn deferred_queue_and_synchronize() {
    model(2, || {
        let w = World::new();
        let (r, b) = (w.clone(), w.clone());
        let reader = thread::spawn(move || {
            let reader = r.rcu.reader().unwrap();
            reader.section(|_| r.read_current());
        });
        let blocking = thread::spawn(move || {
            let mut me = b.rcu.reader().unwrap();
            b.replace_and_reclaim(1, &mut me);
        });
        let mut q: rcuref::rcu::DeferQueue<usize, 1, 4> = rcuref::rcu::DeferQueue::new(&w.rcu);
        let old = w.current.swap(2, Ordering::AcqRel);
        q.defer(old).unwrap();
        while !q.is_empty() {
            q.collect(|old| {
                // SAFETY: (test) loom checks this write against the reader's read.
                w.bufs[old].with_mut(|p| unsafe { *p = FREED });
            });
            thread::yield_now();
        }
        blocking.join().unwrap();
        reader.join().unwrap();
    });
}

/// Polled grace periods: the writer never blocks; a third thread drives `poll` (and,
/// with `two_drivers`, the writer polls too instead of only checking).
fn polled_grace_period_with(two_drivers: bool) {
    model(2, move || {
        let w = World::new();
        let (r, p) = (w.clone(), w.clone());
        let reader = thread::spawn(move || {
            let reader = r.rcu.reader().unwrap();
            reader.section(|_| r.read_current());
        });
        let old = w.current.swap(1, Ordering::AcqRel);
        let raw = w.rcu.start_poll().into_raw();
        let poller = thread::spawn(move || {
            let cookie = p.rcu.cookie_from_raw(raw);
            while !cookie.poll() {
                thread::yield_now();
            }
        });
        // The writer itself never blocks on the grace period; it learns of its end from
        // the poller (here: by joining it), or polls alongside it.
        if two_drivers {
            let _ = w.rcu.cookie_from_raw(raw).poll();
        }
        poller.join().unwrap();
        assert!(w.rcu.cookie_from_raw(raw).is_done());
        // SAFETY: (test) as above.
        w.bufs[old].with_mut(|p| unsafe { *p = FREED });
        reader.join().unwrap();
    });
}

fn polled_grace_period() {
    polled_grace_period_with(false);
}

fn polled_grace_period_two_drivers() {
    polled_grace_period_with(true);
}

/// Two drivers: a poller runs one grace period for
/// its own cookie while a writer unpublishes the buffer a reader is reading, takes a
/// cookie and reclaims if that cookie is done. No step one driver takes may complete
/// the other's grace period early (the old idle fast path did: its scan saw the
/// reader offline, the reader came online, the writer took a cookie at the same
/// counter value, and the poller's store completed it).
fn poller_and_writer_drive_at_once() {
    model(2, || {
        let w = World::new();
        let (r, p) = (w.clone(), w.clone());
        let poller = thread::spawn(move || {
            let _ = p.rcu.start_poll().poll();
        });
        let reader = thread::spawn(move || {
            let reader = r.rcu.reader().unwrap();
            reader.section(|_| r.read_current());
        });
        let old = w.current.swap(1, Ordering::AcqRel);
        let cookie = w.rcu.start_poll();
        if cookie.poll() {
            // SAFETY: (test) loom checks this write against the reader's read.
            w.bufs[old].with_mut(|p| unsafe { *p = FREED });
        }
        poller.join().unwrap();
        reader.join().unwrap();
    });
}

/// A cookie taken while another driver's wait is in progress. The poller's wait at an
/// odd counter scans while the reader is between loading the phase word and announcing
/// itself, and completes its step only later; meanwhile the reader comes online with the
/// phase from before that wait's flip and reads the buffer, and the writer unpublishes it
/// and takes a cookie at the same odd counter. That wait's scan predates the unpublish,
/// so it must not count for the cookie: the cookie needs two more waits, one of which
/// treats the reader's phase as old. (Found by mutation testing: `+ (g & 1)` in
/// `start_poll` turned into `- (g & 1)` survived every other model.)
fn cookie_taken_during_a_wait() {
    model(3, || {
        let w = World::new();
        let (r, p) = (w.clone(), w.clone());
        let reader = thread::spawn(move || {
            let reader = r.rcu.reader().unwrap();
            reader.section(|_| r.read_current());
        });
        let poller = thread::spawn(move || {
            let _ = p.rcu.start_poll().poll();
        });
        let old = w.current.swap(1, Ordering::AcqRel);
        let cookie = w.rcu.start_poll();
        while !cookie.poll() {
            thread::yield_now();
        }
        // SAFETY: (test) loom checks this write against the reader's read.
        w.bufs[old].with_mut(|p| unsafe { *p = FREED });
        poller.join().unwrap();
        reader.join().unwrap();
    });
}

/// Two writers of one pointer, one blocking (`synchronize` through its reader) and one
/// polling, each reclaiming what it swapped out, and a reader: grace periods driven by
/// two contexts at once, in every interleaving loom allows.
fn blocking_and_polling_writers() {
    model(2, || {
        let w = World::new();
        let (r, b) = (w.clone(), w.clone());
        let reader = thread::spawn(move || {
            let reader = r.rcu.reader().unwrap();
            reader.section(|_| r.read_current());
        });
        let blocking = thread::spawn(move || {
            let mut me = b.rcu.reader().unwrap();
            b.replace_and_reclaim(1, &mut me);
        });
        let old = w.current.swap(2, Ordering::AcqRel);
        let cookie = w.rcu.start_poll();
        while !cookie.poll() {
            thread::yield_now();
        }
        // SAFETY: (test) loom checks this write against the reader's read.
        w.bufs[old].with_mut(|p| unsafe { *p = FREED });
        blocking.join().unwrap();
        reader.join().unwrap();
    });
}

/// A reader leaves its section and at once enters another (or, as a handler would,
/// gives its slot up and reads through `Rcu::with_reader`, which claims one again), while a
/// writer unpublishes what the first section read and reclaims after a cookie. A scan
/// that reads the second section's slot value must still order the first section's
/// read before the reclaim. (With a relaxed store on entry, nothing did:
/// `Mutant::RelaxedLockStore`.)
fn reader_reenters_with(via_rcu_read: bool) {
    model(3, move || {
        let w = World::new();
        let r = w.clone();
        let t = thread::spawn(move || {
            let reader = r.rcu.reader().unwrap();
            reader.section(|_| r.read_current());
            if via_rcu_read {
                drop(reader);
                r.rcu.with_reader(|_| ()).unwrap();
            } else {
                drop(reader.lock());
            }
        });
        let _ = w.rcu.cookie_from_raw(2).poll(); // a grace period under way: phases differ
        let old = w.current.swap(1, Ordering::AcqRel);
        let cookie = w.rcu.start_poll();
        if cookie.poll() {
            // SAFETY: (test) loom checks this write against the reader's read.
            w.bufs[old].with_mut(|p| unsafe { *p = FREED });
        }
        t.join().unwrap();
    });
}

fn reader_reenters_its_section() {
    reader_reenters_with(false);
}

fn reader_reenters_through_rcu_read() {
    reader_reenters_with(true);
}

#[test]
fn a_reader_entering_a_new_section_keeps_the_old_one_ordered() {
    reader_reenters_its_section();
}

#[test]
fn a_handler_reclaiming_a_slot_keeps_the_old_section_ordered() {
    reader_reenters_through_rcu_read();
}

#[test]
fn catches_a_relaxed_store_on_entry() {
    must_catch(Mutant::RelaxedLockStore, reader_reenters_its_section);
}

#[test]
fn catches_a_relaxed_store_on_entry_through_rcu_read() {
    must_catch(Mutant::RelaxedLockStore, reader_reenters_through_rcu_read);
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
fn reader_never_sees_reclaimed_data_with_two_drivers() {
    reader_vs_two_updates_two_drivers();
}

#[test]
fn nested_sections_hold_the_grace_period_with_two_drivers() {
    nested_reader_vs_update_two_drivers();
}

#[test]
fn polled_grace_periods_are_safe_with_two_drivers() {
    polled_grace_period_two_drivers();
}

#[test]
fn deferred_queue_and_synchronize_are_safe() {
    deferred_queue_and_synchronize();
}

#[test]
fn two_drivers_never_shortcut_each_other() {
    poller_and_writer_drive_at_once();
}

#[test]
fn blocking_and_polling_writers_are_safe() {
    blocking_and_polling_writers();
}

/// The same two-writer model with the counter cut to 4 bits and started just below the
/// middle of its range, so that grace periods cross into the other half (the lap
/// guard's checks) and wrap inside the model.
#[test]
fn two_drivers_across_the_lap_guard() {
    rcuref::mutants::set_gp_bits(4);
    let ok = std::panic::catch_unwind(|| {
        model(2, || {
            let w = World::at(6);
            // The model is about the half boundary at 8: it must start just before it.
            assert_eq!(w.rcu.gp_counter(), 6, "setup: the counter must start at 6");
            let (r, b) = (w.clone(), w.clone());
            let reader = thread::spawn(move || {
                let reader = r.rcu.reader().unwrap();
                reader.section(|_| r.read_current());
            });
            let blocking = thread::spawn(move || {
                let mut me = b.rcu.reader().unwrap();
                b.replace_and_reclaim(1, &mut me);
            });
            let mut me = w.rcu.reader().unwrap();
            w.replace_and_reclaim(2, &mut me);
            blocking.join().unwrap();
            reader.join().unwrap();
            assert!(w.rcu.gp_counter() <= 15);
        })
    })
    .is_ok();
    rcuref::mutants::set_gp_bits(32);
    assert!(
        ok,
        "the model failed with grace periods across the lap guard"
    );
}

#[test]
fn catches_single_phase_flip() {
    must_catch(Mutant::SingleFlip, reader_vs_two_updates);
}

/// A blocking wait's cookie that takes one flip and one wait without its scan
/// (`gp::waiter_target`): the model's stale reader (phase loaded before the first
/// update's flip, announced after its wait) is waited for by nobody in the second.
#[test]
fn catches_a_waiters_cookie_without_its_scan() {
    must_catch(Mutant::WaitersCookieTrustsNoScan, reader_vs_two_updates);
}

#[test]
fn catches_a_waiters_cookie_without_its_scan_with_two_drivers() {
    must_catch(
        Mutant::WaitersCookieTrustsNoScan,
        reader_vs_two_updates_two_drivers,
    );
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

#[test]
fn catches_busted_grace_periods_with_two_drivers() {
    must_catch(Mutant::BustedGracePeriod, blocking_and_polling_writers);
}

#[test]
fn catches_single_phase_flip_with_two_drivers() {
    must_catch(Mutant::SingleFlip, reader_vs_two_updates_two_drivers);
}

#[test]
fn catches_nesting_ignored_with_two_drivers() {
    must_catch(Mutant::NestingIgnored, nested_reader_vs_update_two_drivers);
}

#[test]
fn catches_missing_reader_fence_with_two_drivers() {
    must_catch(Mutant::NoReaderFence, reader_vs_two_updates_two_drivers);
}

#[test]
fn catches_busted_polled_grace_periods_with_two_drivers() {
    must_catch(Mutant::BustedGracePeriod, polled_grace_period_two_drivers);
}

#[test]
fn catches_busted_grace_periods_in_the_deferred_queue() {
    must_catch(Mutant::BustedGracePeriod, deferred_queue_and_synchronize);
}

#[test]
fn a_cookie_taken_during_a_wait_waits_for_two_more() {
    cookie_taken_during_a_wait();
}

#[test]
fn catches_a_cookie_that_counts_the_wait_in_progress() {
    must_catch(
        Mutant::CookieCountsWaitInProgress,
        cookie_taken_during_a_wait,
    );
}

/// The old idle fast path, which completed another driver's grace period early, as a
/// broken variant: the two-driver model must catch it.
#[test]
fn catches_the_stale_idle_fast_path() {
    must_catch(Mutant::StaleFastPath, poller_and_writer_drive_at_once);
}

/// Not a broken variant: the phase word never changes, so readers record a phase that
/// has nothing to do with the grace period in progress. Safety must not depend on it
/// (the `rcu` module docs, "The phase word"); only how soon waits finish does.
#[test]
fn safety_does_not_depend_on_the_phase_readers_record() {
    fn all() {
        reader_vs_two_updates();
        nested_reader_vs_update();
        reader_vs_two_updates_two_drivers();
        polled_grace_period_two_drivers();
    }
    select(Mutant::FrozenPhase);
    let result = std::panic::catch_unwind(all);
    select(Mutant::None);
    assert!(result.is_ok(), "a model failed with a frozen phase word");
}

/// A payload loom watches, as an `RcuCell` or `RcuValue` holds it: readers read it under a
/// guard, the reclaimer (or its drop) writes it once its grace period has ended.
struct Payload(UnsafeCell<u32>);
// SAFETY: (test) loom's cell checks every access; the payload is shared exactly as the
// RCU types share a `T: Sync`.
unsafe impl Sync for Payload {}
// SAFETY: as above.
unsafe impl Send for Payload {}

impl Payload {
    fn read(&self) {
        // SAFETY: (test) loom checks this read against the reclaimer's write.
        let v = self.0.with(|p| unsafe { *p });
        assert_eq!(v, LIVE, "read reclaimed data");
    }
    fn free(&self) {
        // SAFETY: (test) loom checks this write against every reader's read.
        self.0.with_mut(|p| unsafe { *p = FREED });
    }
}

/// A `Payload` whose drop frees it (an `RcuValue` drops a retired value when its buffer
/// is reused).
struct Dropped(Payload);
impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.free();
    }
}

/// `RcuCell::replace`, then the retired value polled back and freed, while a reader loads
/// under a guard and a second context drives grace periods: the cookie must be taken
/// after the unpublish, or another driver's grace period that began before it ends under
/// the reader.
fn cell_replace_and_reclaim() {
    model(2, || {
        let rcu: &'static Rcu<4> = Box::leak(Box::new(Rcu::new()));
        let first: &'static mut Payload = Box::leak(Box::new(Payload(UnsafeCell::new(LIVE))));
        let second: &'static mut Payload = Box::leak(Box::new(Payload(UnsafeCell::new(LIVE))));
        let cell: &'static rcuref::rcu::RcuCell<'static, Payload, 4> =
            Box::leak(Box::new(rcuref::rcu::RcuCell::new(rcu, first)));
        let reader = thread::spawn(move || {
            let r = rcu.reader().unwrap();
            r.section(|g| cell.load(g).read());
        });
        let driver = thread::spawn(move || {
            let _ = rcu.start_poll().poll();
        });
        let mut retired = cell.replace(second);
        let old = loop {
            match retired.try_reclaim() {
                Ok(v) => break v,
                Err(r) => {
                    retired = r;
                    thread::yield_now();
                }
            }
        };
        old.free();
        reader.join().unwrap();
        driver.join().unwrap();
    });
}

/// `RcuValue`: two replacements into two buffers, the second reusing (and dropping) the
/// first one's old value once its grace period has ended, while a reader loads and a
/// second context drives grace periods.
fn value_replace_twice() {
    model(2, || {
        let rcu: &'static Rcu<4> = Box::leak(Box::new(Rcu::new()));
        let value: &'static rcuref::rcu::RcuValue<'static, Dropped, 2, 4> = Box::leak(Box::new(
            rcuref::rcu::RcuValue::new(rcu, Dropped(Payload(UnsafeCell::new(LIVE)))),
        ));
        let reader = thread::spawn(move || {
            let r = rcu.reader().unwrap();
            r.section(|g| value.load(g).0.read());
        });
        let driver = thread::spawn(move || {
            let _ = rcu.start_poll().poll();
        });
        assert!(value
            .try_replace(Dropped(Payload(UnsafeCell::new(LIVE))))
            .is_ok());
        // The second replacement drops the first value once its grace period ends.
        let mut next = Dropped(Payload(UnsafeCell::new(LIVE)));
        loop {
            match value.try_replace(next) {
                Ok(()) => break,
                Err(r) => {
                    next = r.value;
                    thread::yield_now();
                }
            }
        }
        reader.join().unwrap();
        driver.join().unwrap();
        // The value is leaked, never dropped: its remaining buffers need no checking.
    });
}

#[test]
fn rcu_cell_reclaims_after_its_grace_period_with_two_drivers() {
    cell_replace_and_reclaim();
}

#[test]
fn rcu_value_drops_after_its_grace_period_with_two_drivers() {
    value_replace_twice();
}

#[test]
fn catches_a_cookie_taken_before_the_unpublish_in_rcu_cell() {
    must_catch(Mutant::CookieBeforeUnpublish, cell_replace_and_reclaim);
}

#[test]
fn catches_a_cookie_taken_before_the_unpublish_in_rcu_value() {
    must_catch(Mutant::CookieBeforeUnpublish, value_replace_twice);
}

/// A cookie moved to another context as a number (`into_raw`, `cookie_from_raw`) through
/// an atomic mailbox: a reclaimer started before the cookie was taken frees what the
/// writer retired once the cookie says done, while a reader that loaded it is inside.
fn cookie_through_a_mailbox(store: Ordering, load: Ordering) {
    use loom::sync::atomic::AtomicU32;
    const EMPTY: u32 = u32::MAX;
    model(2, move || {
        let w = World::new();
        let mailbox = Arc::new(AtomicU32::new(EMPTY));
        let (h, m) = (w.clone(), mailbox.clone());
        let reclaimer = thread::spawn(move || {
            let raw = m.load(load);
            if raw != EMPTY && h.rcu.cookie_from_raw(raw).poll() {
                // SAFETY: (test) loom checks this write against the reader's read.
                h.bufs[0].with_mut(|p| unsafe { *p = FREED });
            }
        });
        assert!(w.rcu.start_poll().poll()); // one grace period: the counter moves on
        let r = w.clone();
        let reader = thread::spawn(move || {
            let me = r.rcu.reader().unwrap();
            me.section(|_| r.read_current());
        });
        let old = w.current.swap(1, Ordering::AcqRel);
        assert_eq!(old, 0);
        mailbox.store(w.rcu.start_poll().into_raw(), store);
        reader.join().unwrap();
        reclaimer.join().unwrap();
    });
}

/// The documented way: the number moves with Release/Acquire.
#[test]
fn a_cookie_moved_with_release_and_acquire_is_answered_in_time() {
    cookie_through_a_mailbox(Ordering::Release, Ordering::Acquire);
}

/// Why the docs require it: moved with relaxed accesses, the other
/// context can read a counter older than the cookie's and be told done at once.
#[test]
fn a_cookie_moved_without_happens_before_can_be_answered_early() {
    let r =
        std::panic::catch_unwind(|| cookie_through_a_mailbox(Ordering::Relaxed, Ordering::Relaxed));
    assert!(
        r.is_err(),
        "a relaxed mailbox was never answered early: the docs' warning is stale"
    );
}
