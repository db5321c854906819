//! loom models of interrupt handlers that nest on the read side: a
//! handler runs a whole read section at every gap between the memory operations of
//! `lock`, `unlock`, `Rcu::reader` (so `Rcu::with_reader`) and a `Reader`'s drop, on the
//! interrupted context, while a writer unpublishes, waits for a grace period by polling
//! and frees. loom models threads, not interrupts: the library's interrupt points
//! (`mutants::Gap`) call the handler right there, in the interrupted context's program
//! order, which is what a trap does (a trap is not a fence).
//!
//! Two readers are modelled: a `ContextReader` whose handler nests on the same slot (the
//! documented pattern: handlers of a CPU nest on its reader), and `Rcu::with_reader`, whose
//! handler claims a slot of its own. Every gap of each is modelled and must pass; a
//! handler's missing fence (`Mutant::NestedWithoutFence`: a nested lock without a
//! fence, interrupting between the outermost lock's store and its fence) must be caught,
//! and so must a handler whose unlock ends the section it interrupted
//! (`Mutant::NestingIgnored`). Run with
//! `RUSTFLAGS="--cfg loom" cargo test --release --test loom_interrupts -- --test-threads=1`.
#![cfg(loom)]

#[path = "common/loom.rs"]
mod common;
use common::{model, must_catch};

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use rcuref::mutants::{interrupt_pending, set_interrupt, Gap, Mutant};
use rcuref::rcu::{ContextReader, Rcu};

const LIVE: u32 = 1;
const FREED: u32 = 0xDEAD;

/// Two buffers a "pointer" (an index) names; loom watches their payloads. Slot 0 is the
/// context reader's (dedicated); `Rcu::with_reader` claims the others.
struct World {
    rcu: Rcu<4>,
    current: AtomicUsize,
    bufs: [UnsafeCell<u32>; 2],
}

impl World {
    fn new() -> Arc<Self> {
        Arc::new(World {
            rcu: Rcu::with_dedicated(1),
            current: AtomicUsize::new(0),
            bufs: [UnsafeCell::new(LIVE), UnsafeCell::new(LIVE)],
        })
    }

    fn context(&self) -> ContextReader<'_, 4> {
        // SAFETY: (test) slot 0 is dedicated, and only the reader thread and the handler
        // that interrupts it (on that thread) use it.
        unsafe { self.rcu.context_reader(0) }
    }

    /// A reader's use of whatever is published.
    fn read_current(&self) {
        let i = self.current.load(Ordering::Acquire);
        // SAFETY: (test) loom checks this read against the reclaimer's write.
        let v = self.bufs[i].with(|p| unsafe { *p });
        assert_eq!(v, LIVE, "read reclaimed data");
    }
}

/// Which reader the interrupted context uses, and so which one its handler uses.
#[derive(Clone, Copy, Debug)]
enum Reader {
    /// A `ContextReader`: nested sections of its own, and a handler that nests on its
    /// slot.
    Context,
    /// `Rcu::with_reader`, which claims a slot; its handler claims one too.
    Claimed,
}

/// The handler of a `ContextReader`: a section nested on the interrupted context's slot.
fn context_handler(world: usize) {
    // SAFETY: (test) `world` is the address of the model's `World`, alive until the
    // reader thread (the only one this handler runs on) has been joined.
    let w = unsafe { &*(world as *const World) };
    let c = w.context();
    c.section(|_| w.read_current());
}

/// The handler of a context without a reader of its own: `Rcu::with_reader`.
fn claiming_handler(world: usize) {
    // SAFETY: as in `context_handler`.
    let w = unsafe { &*(world as *const World) };
    w.rcu
        .with_reader(|_| w.read_current())
        .expect("a free slot for the handler");
}

/// The gaps a reader of each kind passes.
fn gaps(reader: Reader) -> &'static [Gap] {
    match reader {
        Reader::Context => &[
            Gap::LockAfterLoad,
            Gap::LockAfterPhase,
            Gap::LockAfterStore,
            Gap::LockAfterFence,
            Gap::NestedAfterStore,
            Gap::NestedAfterFence,
            Gap::UnlockAfterLoad,
            Gap::UnlockAfterStore,
        ],
        Reader::Claimed => &[
            Gap::ClaimAfterLoad,
            Gap::ClaimAfterExchange,
            Gap::LockAfterLoad,
            Gap::LockAfterPhase,
            Gap::LockAfterStore,
            Gap::LockAfterFence,
            Gap::UnlockAfterLoad,
            Gap::UnlockAfterStore,
            Gap::DropAfterLoad,
            Gap::DropAfterStore,
        ],
    }
}

/// One reader interrupted at `gap` by a handler that runs a whole section, against a
/// writer that unpublishes, polls its cookie to the end and frees.
fn interrupted_at(reader: Reader, gap: Gap) {
    model(2, move || {
        let w = World::new();
        let (slot, handler): (usize, fn(usize)) = match reader {
            Reader::Context => (w.rcu.slot_addr(0), context_handler),
            Reader::Claimed => (w.rcu.slot_addr(1), claiming_handler),
        };
        set_interrupt(Some((gap, slot)), handler, Arc::as_ptr(&w) as usize);
        let r = w.clone();
        let t = thread::spawn(move || match reader {
            Reader::Context => {
                let c = r.context();
                c.section(|_| {
                    c.section(|_| r.read_current());
                    // After any nested section, a handler's included: still inside.
                    r.read_current();
                });
            }
            Reader::Claimed => r.rcu.with_reader(|_| r.read_current()).unwrap(),
        });
        let old = w.current.swap(1, Ordering::AcqRel);
        let cookie = w.rcu.start_poll();
        while !cookie.poll() {
            thread::yield_now();
        }
        // SAFETY: (test) loom checks this write against every reader's read.
        w.bufs[old].with_mut(|p| unsafe { *p = FREED });
        t.join().unwrap();
        assert!(!interrupt_pending(), "the interrupt at {gap:?} never fired");
        assert_eq!(
            w.rcu.reader_count(),
            1,
            "a slot was left claimed (only the dedicated one may be)"
        );
        assert!(!w.context().in_read_section(), "a section was left open");
        set_interrupt(None, context_handler, 0);
    });
}

fn every_gap(reader: Reader) {
    for &gap in gaps(reader) {
        println!("{reader:?} reader interrupted at {gap:?}");
        interrupted_at(reader, gap);
    }
}

#[test]
fn a_handler_nesting_on_a_context_reader_at_every_gap_is_protected() {
    every_gap(Reader::Context);
}

#[test]
fn a_handler_interrupting_rcu_read_at_every_gap_is_protected() {
    every_gap(Reader::Claimed);
}

fn nested_between_store_and_fence() {
    interrupted_at(Reader::Context, Gap::LockAfterStore);
}

/// A nested lock needs its own fence: without it, a handler that nests
/// between the outermost lock's store and its fence reads what the writer frees.
#[test]
fn catches_a_nested_lock_without_its_fence() {
    must_catch(Mutant::NestedWithoutFence, nested_between_store_and_fence);
}

fn nested_inside_the_section() {
    interrupted_at(Reader::Context, Gap::LockAfterFence);
}

/// A handler whose unlock ends the section it interrupted leaves the interrupted code
/// reading unprotected.
#[test]
fn catches_a_handler_unlock_that_ends_the_interrupted_section() {
    must_catch(Mutant::NestingIgnored, nested_inside_the_section);
}
