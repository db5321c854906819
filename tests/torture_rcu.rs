//! rcutorture-style reader-age torture on std threads (test 10), and its negative
//! control: with grace periods that end at once, readers must be caught seeing old or
//! reused objects. The same body (tests/cases/rcu.rs) runs on two RISC-V harts and in a
//! Cortex-M interrupt handler.

#[path = "cases/rcu.rs"]
mod cases;

use cases::Torture;
use std::thread;

fn rounds() -> u32 {
    if cfg!(miri) {
        30
    } else {
        20_000
    }
}

/// Two readers and a writer; returns the torture state for checking.
fn run(t: &'static Torture, rounds: u32) {
    thread::scope(|s| {
        s.spawn(|| t.reader_loop());
        s.spawn(|| t.reader_loop());
        t.writer(rounds, rounds / 10, std::thread::yield_now);
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
    run(&T, rounds());
    T.check();
}

#[cfg(rcuref_mutants)]
mod negative_controls {
    use super::*;
    use rcuref::mutants::{select, Mutant};

    #[test]
    fn catches_busted_grace_periods() {
        static T: Torture = Torture::new();
        select(Mutant::BustedGracePeriod);
        run(&T, rounds());
        select(Mutant::None);
        let caught = std::panic::catch_unwind(|| T.check()).is_err();
        assert!(
            caught,
            "the torture did not catch grace periods that end at once: {:?}",
            T.ages()
        );
    }
}
