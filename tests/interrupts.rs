//! Interrupt injection on the host: a handler runs a read section
//! at every gap between the memory operations of the read side (`mutants::Gap`), on the
//! interrupted thread, while a writer on another core swaps buffers, waits for grace
//! periods and frees. Built with `--cfg rcuref_mutants` (the library's interrupt points);
//! `cargo xtask test` runs it in the preemption step.
//!
//! Every section checks that what it read stays live until it leaves; a handler also
//! checks after it returns that the section it interrupted still protects what that
//! section reads. The interrupt must fire at its gap in every round; an interrupt point
//! adds no barrier of its own (relaxed loads and a store). The reordering behind the
//! missing fence of a nested lock (`Mutant::NestedWithoutFence`) is store buffering, which
//! x86 allows, but its window is a few nanoseconds against a writer that scans every
//! few hundred: this test does not reach it. The loom models
//! (`tests/loom_interrupts.rs`) and the litmus suite (`litmus/`) catch that one. What
//! this catches on real cores is a handler's section that grace periods do not wait
//! for, or one that ends the section it interrupted (`Mutant::NestingIgnored`, its
//! control).
#![cfg(all(rcuref_mutants, target_os = "linux", not(miri)))]

use rcuref::mutants::{interrupt_pending, select, set_interrupt, Gap, Mutant};
use rcuref::rcu::Rcu;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::*};

const LIVE: u32 = 1;
const FREED: u32 = 2;

/// Slot 0 is the context reader's; `Rcu::with_reader` claims the others.
static RCU: Rcu<4> = Rcu::with_dedicated(1);
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static BUFS: [AtomicU32; 2] = [AtomicU32::new(LIVE), AtomicU32::new(LIVE)];
static VIOLATIONS: AtomicU32 = AtomicU32::new(0);
static STOP: AtomicBool = AtomicBool::new(false);

/// Inside a section: reads what is published and checks it stays live for a while.
fn use_current() {
    let i = CURRENT.load(Acquire);
    for _ in 0..200 {
        if BUFS[i].load(Acquire) != LIVE {
            VIOLATIONS.fetch_add(1, Relaxed);
            return;
        }
        std::hint::spin_loop();
    }
}

fn context_handler(_: usize) {
    // SAFETY: (test) slot 0 is dedicated; only the reader thread and this handler, which
    // runs on it, use it.
    let c = unsafe { RCU.context_reader(0) };
    c.section(|_| use_current());
}

fn claiming_handler(_: usize) {
    RCU.with_reader(|_| use_current())
        .expect("a free slot for the handler");
}

/// The writer: swaps the buffers, waits for a grace period by polling, frees the old
/// one, makes it live again before it can be published next.
fn writer() {
    while !STOP.load(Relaxed) {
        let old = CURRENT.load(Relaxed);
        CURRENT.store(1 - old, Release);
        let cookie = RCU.start_poll();
        while !cookie.poll() {
            std::hint::spin_loop();
        }
        BUFS[old].store(FREED, Release);
        for _ in 0..50 {
            std::hint::spin_loop();
        }
        BUFS[old].store(LIVE, Release);
    }
}

/// `rounds` sections of a context reader (nesting a level of its own) or of
/// `Rcu::with_reader`, each interrupted at `gap`. Returns the violations seen.
fn run(context: bool, gap: Gap, rounds: u32) -> u32 {
    VIOLATIONS.store(0, SeqCst);
    STOP.store(false, SeqCst);
    std::thread::scope(|s| {
        s.spawn(writer);
        let slot = RCU.slot_addr(if context { 0 } else { 1 });
        let handler: fn(usize) = if context {
            context_handler
        } else {
            claiming_handler
        };
        // SAFETY: (test) as in `context_handler`.
        let c = unsafe { RCU.context_reader(0) };
        for round in 0..rounds {
            set_interrupt(Some((gap, slot)), handler, 0);
            if context {
                c.section(|_| {
                    use_current();
                    c.section(|_| use_current());
                    use_current();
                });
            } else {
                RCU.with_reader(|_| use_current()).unwrap();
            }
            assert!(
                !interrupt_pending(),
                "round {round}: the interrupt at {gap:?} never fired"
            );
        }
        STOP.store(true, SeqCst);
    });
    set_interrupt(None, context_handler, 0);
    assert_eq!(RCU.reader_count(), 1, "a slot was left claimed");
    VIOLATIONS.load(SeqCst)
}

const CONTEXT_GAPS: &[Gap] = &[
    Gap::LockAfterLoad,
    Gap::LockAfterPhase,
    Gap::LockAfterStore,
    Gap::LockAfterFence,
    Gap::NestedAfterStore,
    Gap::NestedAfterFence,
    Gap::UnlockAfterLoad,
    Gap::UnlockAfterStore,
];

const CLAIM_GAPS: &[Gap] = &[
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
];

/// Every gap of both reader kinds is modelled (none of `Gap::ALL` is left out).
#[test]
fn every_gap_is_covered() {
    for g in Gap::ALL {
        assert!(
            CONTEXT_GAPS.contains(&g) || CLAIM_GAPS.contains(&g),
            "{g:?} is tested by no reader"
        );
    }
}

#[test]
fn handlers_nesting_on_a_context_reader_at_every_gap_are_protected() {
    for &gap in CONTEXT_GAPS {
        assert_eq!(
            run(true, gap, 2_000),
            0,
            "freed data read with an interrupt at {gap:?}"
        );
    }
}

#[test]
fn handlers_interrupting_rcu_read_at_every_gap_are_protected() {
    for &gap in CLAIM_GAPS {
        assert_eq!(
            run(false, gap, 2_000),
            0,
            "freed data read with an interrupt at {gap:?}"
        );
    }
}

/// A handler whose unlock ends the section it interrupted: the interrupted section reads
/// unprotected afterwards, and the writer frees under it.
#[test]
fn negative_control_a_handler_ending_the_interrupted_section_is_caught() {
    select(Mutant::NestingIgnored);
    let seen = run(true, Gap::LockAfterFence, 20_000);
    select(Mutant::None);
    assert!(
        seen > 0,
        "NestingIgnored was not caught in 20,000 interrupted sections"
    );
    println!("caught NestingIgnored: {seen} freed reads");
}
