//! RCU on the target: the host's bodies (tests/cases/rcu.rs), and the reader-age torture
//! with real concurrency: readers in the SysTick handler preempting the writer
//! (Cortex-M), or on the other hart (RISC-V).
#![no_std]
#![no_main]

#[path = "../../../tests/cases/rcu.rs"]
mod cases;

use rcuref_firmware as _;

#[cfg(target_arch = "arm")]
rcuref_firmware::systick_handler!();

#[embedded_test::tests(default_timeout = 120)]
mod tests {
    use super::cases;
    use super::cases::Torture;

    #[test]
    fn nested_sections() {
        cases::nested_sections();
    }

    #[test]
    fn stalled_reader() {
        cases::stalled_reader();
    }

    #[test]
    fn epoch_wraps() {
        cases::epoch_wraps();
    }

    #[test]
    fn slots_run_out() {
        cases::slots_run_out();
    }

    #[test]
    fn defer_queue_is_bounded() {
        cases::defer_queue_is_bounded();
    }

    #[test]
    fn cell_publish_and_reclaim() {
        cases::cell_publish_and_reclaim();
    }

    #[test]
    fn context_readers_nest_and_report() {
        cases::context_readers_nest_and_report();
    }

    #[test]
    fn rcu_value_reuses_buffers_after_grace_periods() {
        cases::rcu_value_reuses_buffers_after_grace_periods();
    }

    #[test]
    fn layout_matches_the_padding_choice() {
        cases::layout_matches_the_padding_choice();
    }

    #[test]
    fn dropping_a_reader_ends_a_leaked_section() {
        cases::dropping_a_reader_ends_a_leaked_section();
    }

    #[test]
    fn poll_is_bounded_for_any_cookie() {
        cases::poll_is_bounded_for_any_cookie();
    }

    #[test]
    fn synchronize_in_read_section_is_an_error() {
        assert_eq!(
            cases::synchronize_in_read_section(),
            Err(rcuref::Error::InReadSection)
        );
    }

    fn report(t: &Torture) {
        let a = t.ages();
        defmt::info!(
            "reads by age [0, 1, 2, 3+]: [{=u32}, {=u32}, {=u32}, {=u32}]; {=u32} grace periods; free list exhausted {=u32} times",
            a[0],
            a[1],
            a[2],
            a[3],
            t.grace_periods.load(core::sync::atomic::Ordering::Relaxed),
            t.exhausted.load(core::sync::atomic::Ordering::Relaxed)
        );
    }

    // ---- Cortex-M: the SysTick handler as reader, and as writer ---------------------

    #[cfg(target_arch = "arm")]
    mod irq {
        use super::*;
        use core::sync::atomic::Ordering::Relaxed;
        use portable_atomic::AtomicU32;
        use rcuref_firmware::tick;

        pub static READERS: Torture = Torture::new();
        /// Interrupts that landed while the writer was inside `synchronize` (a flag the
        /// writer sets: with readers only in the handler, no reader is ever online while
        /// the thread writer runs, so the counter alone would not show it).
        pub static MID_GP: AtomicU32 = AtomicU32::new(0);

        fn read_in_handler() {
            if READERS.in_synchronize.load(Relaxed) {
                MID_GP.fetch_add(1, Relaxed);
            }
            READERS.read_once(8);
        }

        /// Readers in the handler, preempting a thread writer mid-publish and
        /// mid-grace-period. (On one core a handler's section cannot span a writer step,
        /// so this shows handler sections are safe; it cannot catch a broken grace
        /// period — `writer_in_handler` can.)
        pub fn readers_in_handler(rounds: u32) -> &'static Torture {
            tick::start(1_199, read_in_handler);
            // A thread writer may spin: the handler's sections always finish first.
            READERS.writer(rounds, 200, core::hint::spin_loop);
            let ticks = tick::stop();
            defmt::info!(
                "{=u32} interrupts, {=u32} of them mid-grace-period",
                ticks,
                MID_GP.load(Relaxed)
            );
            assert!(ticks > 100, "too few interrupts to prove anything");
            assert!(
                MID_GP.load(Relaxed) > 0,
                "no interrupt landed mid-grace-period"
            );
            &READERS
        }

        pub static WRITER: Torture = Torture::new();

        fn write_in_handler() {
            WRITER.writer_step_polled();
        }

        /// The writer in the handler, which must never block on the thread reader it
        /// preempted: it publishes, retires and polls grace periods; the thread reads
        /// with long sections that the handler keeps interrupting.
        pub fn writer_in_handler(rounds: u32) -> &'static Torture {
            tick::start(1_199, write_in_handler);
            WRITER.reader_until_published(rounds, 400);
            let ticks = tick::stop();
            defmt::info!(
                "{=u32} interrupts, {=u32} publications",
                ticks,
                WRITER.published.load(Relaxed)
            );
            &WRITER
        }
    }

    /// Test 15: read sections in an interrupt handler that preempts the writer
    /// mid-publish and mid-grace-period see no object older than one grace period.
    #[cfg(target_arch = "arm")]
    #[test]
    fn irq_readers_torture() {
        let t = irq::readers_in_handler(20_000);
        report(t);
        t.check();
    }

    /// A writer in an interrupt handler (polled grace periods, never blocking) against
    /// a thread reader it keeps preempting inside its sections.
    #[cfg(target_arch = "arm")]
    #[test]
    fn irq_writer_torture() {
        let t = irq::writer_in_handler(2_000);
        report(t);
        let ages = t.ages();
        assert!(
            ages[1] > 0,
            "no retirement landed inside a reader's section: the test proves nothing"
        );
        t.check();
    }

    // ---- RISC-V: the reader on the other hart -------------------------------------------

    #[cfg(any(target_arch = "riscv32", target_arch = "riscv64"))]
    mod harts {
        use super::*;
        use rcuref_firmware::hart::run_on_both;

        pub static T: Torture = Torture::new();

        fn job(hart: usize) {
            if hart == 0 {
                T.writer(5_000, 2_000, core::hint::spin_loop);
            } else {
                T.reader_loop();
            }
        }

        pub fn run() -> &'static Torture {
            run_on_both(job);
            &T
        }
    }

    /// Test 10 on hardware threads: the reader-age torture across two harts.
    #[cfg(any(target_arch = "riscv32", target_arch = "riscv64"))]
    #[test]
    fn two_harts_torture() {
        let t = harts::run();
        report(t);
        t.check();
    }

    /// The torture's negative control on the target (built with `--cfg rcuref_mutants`
    /// by `cargo xtask test`): with grace periods that end at once, it must fail.
    #[cfg(rcuref_mutants)]
    #[test]
    #[should_panic]
    fn negative_control_torture_catches_busted_rcu() {
        rcuref::mutants::select(rcuref::mutants::Mutant::BustedGracePeriod);
        #[cfg(target_arch = "arm")]
        let t = irq::writer_in_handler(2_000);
        #[cfg(not(target_arch = "arm"))]
        let t = harts::run();
        report(t);
        t.check();
    }
}
