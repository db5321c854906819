//! The typesafe-by-RCU pool on the target: the host's bodies (tests/cases/pool.rs) and
//! the generation-invariant torture with real concurrency: in both directions across a
//! timer interrupt's handler (Cortex-M's SysTick, AArch64's EL1 timer), and with lookups
//! on every core but the writer's (RISC-V harts, AArch64 cores, mps2-an521).
#![no_std]
#![no_main]

#[path = "../../../tests/cases/pool.rs"]
mod cases;

use rcuref_firmware as _;

rcuref_firmware::tick_handler!();

#[embedded_test::tests(default_timeout = 120)]
mod tests {
    use super::cases;
    use core::sync::atomic::Ordering::Relaxed;

    #[test]
    fn alloc_free_reuse() {
        cases::alloc_free_reuse();
    }

    #[test]
    fn the_last_freed_slot_is_reused_first() {
        cases::the_last_freed_slot_is_reused_first();
    }

    #[test]
    fn cell_lookup() {
        cases::cell_lookup();
    }

    fn report(w: &cases::World) {
        let s = w.stats;
        let g = |a: &portable_atomic::AtomicU32| a.load(Relaxed);
        defmt::info!(
            "lookups {=u32}, hits {=u32}, wrong key {=u32}, torn {=u32}, dead {=u32}, destroyed twice {=u32}, allocs {=u32}, pool exhausted {=u32}, high water {=usize}",
            g(&s.lookups),
            g(&s.hits),
            g(&s.wrong_key),
            g(&s.torn),
            g(&s.dead_object),
            g(&s.destroyed_twice),
            g(&s.allocs),
            g(&s.exhausted),
            w.pool.high_water()
        );
    }

    #[cfg(rcuref_fw_tick)]
    mod irq {
        use super::*;
        use portable_atomic::AtomicU32;
        use rcuref_firmware::tick;

        // Lookups in the handler while thread code replaces and frees.
        static mut LOOKUP_WORLD: Option<cases::World> = None;
        static NEXT: AtomicU32 = AtomicU32::new(0);

        fn world(slot: *const Option<cases::World>) -> &'static cases::World {
            // SAFETY: (test) written once before SysTick starts, only read afterwards.
            unsafe { (*slot).as_ref().unwrap() }
        }

        fn lookup_in_handler() {
            let w = world(core::ptr::addr_of!(LOOKUP_WORLD));
            w.lookup(NEXT.fetch_add(1, Relaxed) as usize % cases::LOCATIONS);
        }

        pub fn lookups_in_handler(rounds: u32) -> &'static cases::World {
            // SAFETY: (test) SysTick is not running yet: nothing reads it concurrently.
            unsafe { *core::ptr::addr_of_mut!(LOOKUP_WORLD) = Some(crate::pool_world!()) };
            let w = world(core::ptr::addr_of!(LOOKUP_WORLD));
            tick::start(1_199, lookup_in_handler);
            w.writer(rounds, 500);
            tick::stop();
            w
        }

        // The writer in the handler while thread code looks up.
        static mut WRITE_WORLD: Option<cases::World> = None;
        static ROUND: AtomicU32 = AtomicU32::new(0);

        static SEEN_LOOKUPS: AtomicU32 = AtomicU32::new(0);
        static STALLED_TICKS: AtomicU32 = AtomicU32::new(0);

        fn write_in_handler() {
            let w = world(core::ptr::addr_of!(WRITE_WORLD));
            w.write_round(ROUND.fetch_add(1, Relaxed) + 1);
            // Stall detection (as rcutorture's): a reader that makes no progress for
            // 20k ticks is stuck, which only a broken pool can cause (e.g. a location
            // naming a destroyed object while every slot has leaked).
            let now = w.stats.lookups.load(Relaxed);
            if SEEN_LOOKUPS.swap(now, Relaxed) == now {
                let stalled = STALLED_TICKS.fetch_add(1, Relaxed) + 1;
                assert!(
                    stalled < 20_000,
                    "the reader stalled: a lookup has not finished in 20000 interrupts"
                );
            } else {
                STALLED_TICKS.store(0, Relaxed);
            }
        }

        pub fn writer_in_handler(lookups: u32) -> &'static cases::World {
            // SAFETY: (test) as above.
            unsafe { *core::ptr::addr_of_mut!(WRITE_WORLD) = Some(crate::pool_world!()) };
            let w = world(core::ptr::addr_of!(WRITE_WORLD));
            w.write_round(0); // something to find from the start
            tick::start(1_199, write_in_handler);
            w.reader_for(lookups);
            // And on until the handler has written enough rounds (a fast core can do
            // all the lookups within a few ticks).
            while w.stats.allocs.load(Relaxed) <= 1_000 {
                w.reader_for(1_000);
            }
            tick::stop();
            w
        }
    }

    /// Lookups in an interrupt handler that preempts the allocator and the frees.
    #[cfg(rcuref_fw_tick)]
    #[test]
    fn irq_lookups_torture() {
        let w = irq::lookups_in_handler(50_000);
        report(w);
        w.finish_and_check();
    }

    /// Allocation, replacement and frees in an interrupt handler that preempts lookups.
    #[cfg(rcuref_fw_tick)]
    #[test]
    fn irq_writer_torture() {
        let w = irq::writer_in_handler(100_000);
        report(w);
        assert!(
            w.stats.allocs.load(Relaxed) > 100,
            "too few interrupts to prove anything"
        );
        w.finish_and_check();
    }

    #[cfg(rcuref_fw_cores)]
    mod smp {
        use super::*;
        use rcuref_firmware::cores::run_on_all;

        static mut WORLD: Option<cases::World> = None;

        fn world() -> &'static cases::World {
            // SAFETY: (test) written once before the harts start, only read afterwards.
            unsafe { (*core::ptr::addr_of!(WORLD)).as_ref().unwrap() }
        }

        fn job(core: usize) {
            if core == 0 {
                world().writer(50_000, 50_000);
            } else {
                world().reader_loop();
            }
        }

        pub fn run() -> &'static cases::World {
            // SAFETY: (test) the other cores have no job yet: nothing reads it concurrently.
            unsafe { *core::ptr::addr_of_mut!(WORLD) = Some(crate::pool_world!()) };
            run_on_all(job);
            world()
        }
    }

    /// The generation-invariant torture: the writer on core 0, lookups on every other.
    #[cfg(rcuref_fw_cores)]
    #[test]
    fn all_cores_torture() {
        let w = smp::run();
        report(w);
        w.finish_and_check();
    }

    /// The negative controls (built with `--cfg rcuref_mutants` by `cargo xtask test`),
    /// with pauses injected between a lookup's load and its get.
    #[cfg(rcuref_mutants)]
    fn control(m: rcuref::mutants::Mutant) {
        rcuref::mutants::set_read_delay(400);
        rcuref::mutants::select(m);
        #[cfg(not(rcuref_fw_cores))]
        let w = irq::writer_in_handler(30_000);
        #[cfg(rcuref_fw_cores)]
        let w = smp::run();
        report(w);
        w.finish_and_check();
    }

    /// Multi-core only: on one core the zeroing window (count live, value not yet
    /// written) lies inside one run of the handler when the handler allocates, and
    /// covers a slot no location names yet when thread code allocates, so no reader can
    /// reach it there; the bug is an SMP race.
    #[cfg(all(rcuref_mutants, rcuref_fw_cores))]
    #[test]
    #[should_panic]
    fn negative_control_zeroing_allocation() {
        control(rcuref::mutants::Mutant::ZeroingAlloc);
    }

    #[cfg(rcuref_mutants)]
    #[test]
    #[should_panic]
    fn negative_control_lookup_without_recheck() {
        control(rcuref::mutants::Mutant::NoRecheck);
    }

    /// The same injected delays with the real pool: must pass (the controls' harness is
    /// not what fails them).
    #[cfg(rcuref_mutants)]
    #[test]
    fn negative_control_baseline_real_pool_passes() {
        control(rcuref::mutants::Mutant::None);
    }
}
