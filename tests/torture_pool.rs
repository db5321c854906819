//! The pool's generation-invariant torture on std threads, and its negative controls:
//! a zeroing allocator and a lookup without re-check must both be caught.

#[path = "cases/pool.rs"]
mod cases;

use std::thread;

fn rounds() -> u32 {
    if cfg!(miri) {
        200
    } else {
        300_000
    }
}

fn run(w: &cases::World, rounds: u32) {
    thread::scope(|s| {
        s.spawn(|| w.reader_loop());
        s.spawn(|| w.reader_loop());
        w.writer(rounds, rounds / 2);
    });
    let g = |a: &portable_atomic::AtomicU32| a.load(std::sync::atomic::Ordering::Relaxed);
    let s = w.stats;
    println!(
        "lookups {} hits {} wrong_key {} torn {} dead {} twice {} allocs {} drops {} exhausted {}",
        g(&s.lookups),
        g(&s.hits),
        g(&s.wrong_key),
        g(&s.torn),
        g(&s.dead_object),
        g(&s.destroyed_twice),
        g(&s.allocs),
        g(&s.drops),
        g(&s.exhausted),
    );
}

#[test]
fn generation_invariant_torture() {
    let w = pool_world!();
    run(&w, rounds());
    w.finish_and_check();
}

/// Under `--cfg rcuref_mutants`, the same torture with pauses injected between a
/// lookup's load and its get (liburcu's DEBUG_YIELD): the real pool must still pass, and
/// each broken variant must fail.
#[cfg(rcuref_mutants)]
mod negative_controls {
    use super::*;
    use rcuref::mutants::{select, set_read_delay, Mutant};

    const DELAY: u32 = 400;

    /// Runs the torture on `w` with `m` selected; true if the books came out clean.
    fn clean_with(m: Mutant, w: &cases::World) -> bool {
        set_read_delay(DELAY);
        select(m);
        run(w, rounds() / 3);
        select(Mutant::None);
        set_read_delay(0);
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.finish_and_check())).is_ok()
    }

    /// A race window on real threads is hit by chance: a broken variant gets up to five
    /// independent runs (five separate pools) and must be caught in one of them.
    fn caught(m: Mutant) -> bool {
        let worlds = [
            pool_world!(),
            pool_world!(),
            pool_world!(),
            pool_world!(),
            pool_world!(),
        ];
        worlds.iter().any(|w| !clean_with(m, w))
    }

    #[test]
    fn real_pool_passes_with_injected_delays() {
        assert!(
            clean_with(Mutant::None, &pool_world!()),
            "the real pool failed under injected delays"
        );
    }

    #[test]
    fn catches_zeroing_allocation() {
        assert!(
            caught(Mutant::ZeroingAlloc),
            "the torture did not catch ZeroingAlloc in five runs"
        );
    }

    #[test]
    fn catches_lookup_without_recheck() {
        assert!(
            caught(Mutant::NoRecheck),
            "the torture did not catch NoRecheck in five runs"
        );
    }
}
