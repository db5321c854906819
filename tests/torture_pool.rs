//! The pool's generation-invariant torture on std threads, and its negative controls:
//! a zeroing allocator and a lookup without re-check must both be caught, each by its own
//! symptom.
//!
//! The controls turn process-wide knobs (the selected variant, the injected read delay):
//! every harness here runs under an [`Exclusive`], so they never run beside another
//! harness, with cargo's parallel test threads too. A world counts its own warnings
//! (`World::enter`).

#[path = "cases/pool.rs"]
mod cases;

#[path = "common/exclusive.rs"]
mod exclusive;

use exclusive::{exclusive, Exclusive};
use std::sync::atomic::Ordering::Relaxed;
use std::thread;

fn rounds() -> u32 {
    if cfg!(miri) {
        200
    } else {
        300_000
    }
}

/// Two readers and the writer on `w`. A panic in any of them ends the run (the others
/// stop) and comes out of here.
fn run(_x: &Exclusive, w: &cases::World, rounds: u32) {
    thread::scope(|s| {
        s.spawn(|| w.reader_loop());
        s.spawn(|| w.reader_loop());
        w.writer(rounds, rounds / 2);
    });
    let g = |a: &portable_atomic::AtomicU32| a.load(Relaxed);
    let s = w.stats;
    println!(
        "lookups {} hits {} wrong_key {} torn {} dead {} twice {} imbalanced {} allocs {} drops {} exhausted {}",
        g(&s.lookups),
        g(&s.hits),
        g(&s.wrong_key),
        g(&s.torn),
        g(&s.dead_object),
        g(&s.destroyed_twice),
        g(&s.imbalanced_puts),
        g(&s.allocs),
        g(&s.drops),
        g(&s.exhausted),
    );
}

#[test]
fn generation_invariant_torture() {
    let x = exclusive();
    let w = pool_world!();
    run(&x, &w, rounds());
    w.finish_and_check();
}

/// Under `--cfg rcuref_mutants`, the same torture with pauses injected between a
/// lookup's load and its get (liburcu's DEBUG_YIELD): the real pool must still pass, and
/// each broken variant must fail with its own symptom.
#[cfg(rcuref_mutants)]
mod negative_controls {
    use super::*;
    use rcuref::mutants::Mutant;

    const DELAY: u32 = 400;

    /// Runs the torture on `w` with `m` selected and the delays injected. `Err` if the
    /// run itself panicked (a stall, a leak); the books are left to read either way.
    fn run_with(x: &Exclusive, m: Mutant, w: &cases::World) -> std::thread::Result<()> {
        x.set_read_delay(DELAY);
        x.select(m);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(x, w, rounds() / 3)));
        x.select(Mutant::None);
        x.set_read_delay(0);
        for c in w.cells.iter() {
            drop(c.take());
        }
        r
    }

    /// The counters only `m` can move, in a run where nothing else is selected.
    fn own_symptom(m: Mutant, s: &cases::Stats) -> u32 {
        match m {
            // The re-check is what keeps an object of another location out: without it
            // a lookup returns whatever reused the slot.
            Mutant::NoRecheck => s.wrong_key.load(Relaxed),
            // A reader's get lands on the count while the allocator has it zeroed (live)
            // and the allocator's own publish then overwrites it: the count is off by
            // one, so a put finds no reference, an object dies while named, is destroyed
            // twice, or is read under construction. A wrong key alone is not this one.
            Mutant::ZeroingAlloc => {
                s.imbalanced_puts.load(Relaxed)
                    + s.destroyed_twice.load(Relaxed)
                    + s.dead_object.load(Relaxed)
                    + s.torn.load(Relaxed)
            }
            other => panic!("no symptom known for {other:?}"),
        }
    }

    /// A race window on real threads is hit by chance: a broken variant gets up to
    /// twelve independent runs (twelve separate pools) and must show its own symptom in
    /// one. (`ZeroingAlloc` shows it in about two runs of five on two cores; five runs
    /// missed it about one time in fifteen.)
    fn caught(m: Mutant) -> bool {
        let worlds = [
            pool_world!(),
            pool_world!(),
            pool_world!(),
            pool_world!(),
            pool_world!(),
            pool_world!(),
            pool_world!(),
            pool_world!(),
            pool_world!(),
            pool_world!(),
            pool_world!(),
            pool_world!(),
        ];
        let x = exclusive();
        worlds.iter().enumerate().any(|(i, w)| {
            let r = run_with(&x, m, w);
            let n = own_symptom(m, w.stats);
            println!(
                "{m:?}, run {i}: {} its own symptom {n} times",
                if r.is_ok() {
                    "ran to the end,"
                } else {
                    "panicked,"
                }
            );
            n > 0
        })
    }

    /// A control whose run panics (a stall, a leak) must not leave its variant or its
    /// delays to the next harness: the old controls reset them only on the way out of a
    /// run that returned.
    #[test]
    fn a_panicking_control_leaves_the_real_code_selected() {
        let r = std::panic::catch_unwind(|| {
            let x = exclusive();
            x.select(Mutant::NoRecheck);
            x.set_read_delay(DELAY);
            panic!("(expected) a control's run panicked");
        });
        assert!(r.is_err());
        let _x = exclusive();
        assert!(
            rcuref::mutants::active(Mutant::None),
            "a panicked control left its variant selected"
        );
    }

    #[test]
    fn real_pool_passes_with_injected_delays() {
        let x = exclusive();
        let w = pool_world!();
        let r = run_with(&x, Mutant::None, &w);
        assert!(
            r.is_ok(),
            "the real pool's run panicked under injected delays"
        );
        w.finish_and_check();
    }

    #[test]
    fn catches_zeroing_allocation() {
        assert!(
            caught(Mutant::ZeroingAlloc),
            "the torture did not see ZeroingAlloc's symptom in twelve runs"
        );
    }

    #[test]
    fn catches_lookup_without_recheck() {
        assert!(
            caught(Mutant::NoRecheck),
            "the torture did not see NoRecheck's symptom (a wrong key) in twelve runs"
        );
    }
}
