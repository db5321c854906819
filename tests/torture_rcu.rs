//! rcutorture-style reader-age torture on std threads, and its negative
//! control: with grace periods that end at once, readers must be caught seeing old or
//! reused objects. The same body (tests/cases/rcu.rs) runs on two RISC-V harts and in a
//! Cortex-M interrupt handler.
//!
//! The control selects a broken variant for the whole process: every harness here runs
//! under an [`Exclusive`], so none runs beside it, with cargo's parallel test threads too.

#[path = "cases/rcu.rs"]
mod cases;

#[path = "common/exclusive.rs"]
mod exclusive;

use cases::Torture;
use exclusive::{exclusive, Exclusive};
use std::thread;

fn rounds() -> u32 {
    if cfg!(miri) {
        30
    } else {
        20_000
    }
}

/// Two readers and a writer, at least `rounds` grace periods and `min_reads` reads. A
/// panic in any of them ends the run (the others stop) and comes out of here.
fn run(_x: &Exclusive, t: &'static Torture, rounds: u32, min_reads: u32) {
    thread::scope(|s| {
        s.spawn(|| t.reader_loop());
        s.spawn(|| t.reader_loop());
        t.writer(rounds, min_reads, std::thread::yield_now);
    });
    println!(
        "ages {:?}, grace periods {}, free-list exhaustion {}",
        t.ages(),
        t.grace_periods.load(std::sync::atomic::Ordering::Relaxed),
        t.exhausted.load(std::sync::atomic::Ordering::Relaxed)
    );
}

#[test]
fn reader_age_torture() {
    static T: Torture = Torture::new();
    let x = exclusive();
    run(&x, &T, rounds(), rounds() / 10);
    T.check();
}

#[cfg(rcuref_mutants)]
mod negative_controls {
    use super::*;
    use rcuref::mutants::Mutant;
    use std::sync::atomic::Ordering::Relaxed;

    /// With grace periods that end at once the writer is fast: the run must be long
    /// enough to span many scheduler quanta (a reader preempted mid-section while the
    /// writer runs is what exposes it on a loaded machine), and it gets five independent
    /// runs (five separate tortures) to be caught in. Caught means its own symptom: a
    /// reader saw an object two or more grace periods old, or reused under it (not a
    /// panic of the harness).
    #[test]
    fn catches_busted_grace_periods() {
        static TS: [Torture; 5] = [const { Torture::new() }; 5];
        let x = exclusive();
        x.select(Mutant::BustedGracePeriod);
        let caught = TS.iter().any(|t| {
            run(&x, t, 2_000_000, 200_000);
            let [_, _, two, older] = t.ages();
            two + older + t.reused_under_reader.load(Relaxed) > 0
        });
        x.select(Mutant::None);
        assert!(
            caught,
            "the torture did not catch grace periods that end at once in five runs"
        );
    }
}
