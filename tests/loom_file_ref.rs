//! loom models of FileRef's races. Run with
//! `RUSTFLAGS="--cfg loom" cargo test --release --test loom_file_ref -- --test-threads=1`
//! (`cargo xtask test` does). Every model runs once against the real code, where it must
//! pass, and once against a deliberately broken variant (`rcuref::mutants`),
//! where it must fail. `--test-threads=1` because the variant is chosen per process.
#![cfg(loom)]

#[path = "common/loom.rs"]
mod common;
use common::{model, must_catch};

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use rcuref::file_ref::FileRef32;
use rcuref::mutants::Mutant;

/// An object whose payload loom watches: holders read it with `with`, the destroyer
/// writes it with `with_mut`. loom fails the model if a destroy is not ordered after
/// every holder's read (a use-after-free or missing release/acquire), and the
/// `destroys` counter catches double or missing destroys.
struct Obj {
    r: FileRef32,
    payload: UnsafeCell<u32>,
    destroys: AtomicUsize,
}

const LIVE: u32 = 7;
const FREED: u32 = 0xDEAD;

impl Obj {
    fn new(refs: u32) -> Self {
        Obj {
            r: FileRef32::new(refs),
            payload: UnsafeCell::new(LIVE),
            destroys: AtomicUsize::new(0),
        }
    }
    /// What a holder does with its reference.
    fn use_it(&self) {
        // SAFETY: (test) loom checks this read against the destroyer's write.
        let v = self.payload.with(|p| unsafe { *p });
        assert_eq!(v, LIVE, "used a destroyed object");
    }
    fn destroy(&self) {
        // SAFETY: (test) loom checks this write is ordered after every read.
        self.payload.with_mut(|p| unsafe { *p = FREED });
        self.destroys.fetch_add(1, Ordering::Relaxed);
    }
    fn put(&self, close: bool) {
        let last = if close {
            self.r.put_close()
        } else {
            self.r.put()
        };
        if last {
            self.destroy();
        }
    }
}

// ---- 1. last put vs get, over the states of rcuref's critical-state table ----------

/// T1 drops the only reference while T2 tries to get: covers "put reaches NOREF, get
/// revives it, put's cmpxchg fails" and "put marks DEAD, get fails", and every mix.
fn last_put_vs_get(close: bool) {
    model(3, move || {
        let o = Arc::new(Obj::new(1));
        let o2 = o.clone();
        let t = thread::spawn(move || {
            if o2.r.get() {
                o2.use_it();
                o2.put(false);
            }
        });
        o.use_it();
        o.put(close);
        t.join().unwrap();
        assert_eq!(
            o.destroys.load(Ordering::Relaxed),
            1,
            "destroyed {} times",
            o.destroys.load(Ordering::Relaxed)
        );
    });
}

/// Two holders drop their references concurrently while a third thread gets.
fn two_puts_vs_get() {
    model(3, || {
        let o = Arc::new(Obj::new(2));
        let (a, b) = (o.clone(), o.clone());
        let t1 = thread::spawn(move || {
            a.use_it();
            a.put(false);
        });
        let t2 = thread::spawn(move || {
            if b.r.get() {
                b.use_it();
                b.put(true);
            }
        });
        o.use_it();
        o.put(false);
        t1.join().unwrap();
        t2.join().unwrap();
        assert_eq!(o.destroys.load(Ordering::Relaxed), 1);
    });
}

fn last_put_vs_get_put() {
    last_put_vs_get(false)
}
fn last_put_close_vs_get() {
    last_put_vs_get(true)
}

#[test]
fn put_vs_get_destroys_once() {
    last_put_vs_get_put();
}

#[test]
fn put_close_vs_get_destroys_once() {
    last_put_close_vs_get();
}

#[test]
fn two_puts_vs_get_destroys_once() {
    two_puts_vs_get();
}

#[test]
fn catches_put_storing_dead() {
    must_catch(Mutant::PutStoresDead, last_put_vs_get_put);
}

#[test]
fn catches_put_rereading_in_slow_path() {
    must_catch(Mutant::PutRereads, two_puts_vs_get);
}

#[test]
fn catches_put_without_release_acquire() {
    must_catch(Mutant::PutRelaxed, two_puts_vs_get);
}

#[test]
fn catches_put_close_storing_dead() {
    must_catch(Mutant::PutCloseStores, last_put_close_vs_get);
}

// ---- 1b. a failing get's repair vs reuse of the counter -------------------------------

/// Typesafe reuse: a get on a dead object fails and starts pulling its drift back, while
/// the counter is re-initialised for a new object whose only holder then drops it. The
/// repair must never take the new object's NOREF → DEAD step for itself (the put would
/// then not be last, and the new object would never be destroyed), and the get either
/// fails or gets the new object; either way it is destroyed exactly once.
fn failed_get_repair_vs_reuse() {
    model(3, || {
        let o = Arc::new(Obj::new(0)); // dead
        let o2 = o.clone();
        let t = thread::spawn(move || {
            if o2.r.get() {
                o2.use_it();
                o2.put(false);
            }
        });
        o.r.init(1); // reused for a new object
        o.use_it();
        o.put(false);
        t.join().unwrap();
        assert_eq!(
            o.destroys.load(Ordering::Relaxed),
            1,
            "the new object was destroyed {} times",
            o.destroys.load(Ordering::Relaxed)
        );
    });
}

#[test]
fn a_failed_gets_repair_never_takes_a_reused_objects_last_put() {
    failed_get_repair_vs_reuse();
}

// ---- 2. the deconstruction race -----------------------------------------------------

/// The memory holding the count is reclaimed (modelled as an exclusive `with_mut` of the
/// cell that holds it) once a put returned true *and* a grace period has passed: both
/// threads have left the read sections they entered before touching the count. T1's put
/// may stall anywhere; T2 gets, puts, and may win the destroy; either thread may reclaim.
fn deconstruction(put_outside_section: bool) {
    model(3, move || {
        struct Mem {
            r: FileRef32,
        }
        let mem = Arc::new(UnsafeCell::new(Mem {
            r: FileRef32::new(1),
        }));
        // Both threads start inside a read section (entered before the model begins).
        let sections = Arc::new([AtomicBool::new(true), AtomicBool::new(true)]);
        let reclaims = Arc::new(AtomicUsize::new(0));

        let reclaim = {
            let (mem, sections, reclaims) = (mem.clone(), sections.clone(), reclaims.clone());
            move || {
                // Grace period: wait until every pre-existing read section has ended.
                for s in sections.iter() {
                    while s.load(Ordering::Acquire) {
                        thread::yield_now();
                    }
                }
                // SAFETY: (test) loom checks that no access to the memory is concurrent.
                mem.with_mut(|_| ());
                reclaims.fetch_add(1, Ordering::Relaxed);
            }
        };

        let t1 = {
            let (mem, sections, reclaim) = (mem.clone(), sections.clone(), reclaim.clone());
            thread::spawn(move || {
                if put_outside_section {
                    sections[0].store(false, Ordering::Release);
                }
                // SAFETY: (test) loom checks this access against the reclaim.
                let last = mem.with(|m| unsafe { (*m).r.put() });
                sections[0].store(false, Ordering::Release);
                if last {
                    reclaim();
                }
            })
        };
        // SAFETY: (test) as above.
        let last = mem.with(|m| unsafe { (*m).r.get() && (*m).r.put() });
        sections[1].store(false, Ordering::Release);
        if last {
            reclaim();
        }
        t1.join().unwrap();
        assert_eq!(reclaims.load(Ordering::Relaxed), 1);
    });
}

#[test]
fn deconstruction_race_is_safe_inside_a_read_section() {
    deconstruction(false);
}

#[test]
fn deconstruction_race_is_caught_outside_a_read_section() {
    // The negative control is the rule's violation: a put outside its read section.
    assert!(std::panic::catch_unwind(|| deconstruction(true)).is_err());
}

// ---- 3. publish ordering: init (release) vs get --------------------------------------

/// A writer initialises a dead object's payload and publishes it with `init(1)`; a
/// reader whose `get` succeeds must see the initialised payload.
fn publish() {
    model(3, || {
        let o = Arc::new(Obj {
            r: FileRef32::from_raw(FileRef32::DEAD),
            payload: UnsafeCell::new(FREED),
            destroys: AtomicUsize::new(0),
        });
        let w = o.clone();
        let t = thread::spawn(move || {
            // SAFETY: (test) the object is dead, no reader can hold it.
            w.payload.with_mut(|p| unsafe { *p = LIVE });
            w.r.init(1);
        });
        if o.r.get() {
            o.use_it();
            o.put(false);
        }
        t.join().unwrap();
    });
}

#[test]
fn init_publishes_fields_to_get() {
    publish();
}

#[test]
fn catches_relaxed_get() {
    must_catch(Mutant::GetRelaxed, publish);
}

/// Zone edges of `from_raw`, racing: two gets on a count made with
/// `from_raw(NOREF - 1)` (a dead value, `is_dead()` says so). With `from_raw` keeping the
/// edge, the first get lands on NOREF and, before its repair, the second lands on ONEREF
/// and succeeds: a dead count revived. `from_raw` stores it as DEAD, so neither can.
fn racing_gets_on_a_dead_edge(make: fn(u32) -> FileRef32) {
    model(3, move || {
        let r = Arc::new(make(FileRef32::NOREF - 1));
        assert!(r.is_dead());
        let r2 = r.clone();
        let t = thread::spawn(move || r2.get());
        let mine = r.get();
        let theirs = t.join().unwrap();
        assert!(!mine && !theirs, "a get revived a dead count");
        assert!(r.is_dead(), "the count left the dead zone");
    });
}

#[test]
fn racing_gets_never_revive_a_dead_edge() {
    racing_gets_on_a_dead_edge(FileRef32::from_raw);
}

#[test]
fn catches_racing_gets_reviving_a_verbatim_dead_edge() {
    let caught =
        std::panic::catch_unwind(|| racing_gets_on_a_dead_edge(FileRef32::from_raw_verbatim));
    let msg = caught.expect_err("the model did not catch gets reviving a verbatim NOREF - 1");
    let msg = msg
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| msg.downcast_ref::<&str>().copied())
        .unwrap_or("");
    assert!(msg.contains("revived"), "caught for another reason: {msg}");
}
