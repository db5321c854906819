//! RCU on the target: the host's bodies (tests/cases/rcu.rs), and the reader-age torture
//! with real concurrency: readers in a timer interrupt's handler preempting the writer
//! (Cortex-M's SysTick, AArch64's EL1 timer), readers on every other core (RISC-V harts,
//! AArch64 cores, mps2-an521's second M33), and interrupt-level readers nesting on a
//! core's slot while another core writes.
#![no_std]
#![no_main]

#[path = "../../../tests/cases/rcu.rs"]
mod cases;

use rcuref_firmware as _;

rcuref_firmware::tick_handler!();

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
    fn grace_periods_end_under_back_to_back_readers() {
        cases::grace_periods_end_under_back_to_back_readers();
    }

    #[test]
    fn cookies_compare_by_domain_and_point() {
        cases::cookies_compare_by_domain_and_point();
    }

    #[test]
    fn epoch_wraps() {
        cases::epoch_wraps();
    }
    #[cfg(feature = "strict-grace-periods")]
    #[test]
    fn debug_aid_strict_grace_periods() {
        cases::debug_aid_strict_grace_periods();
    }

    #[cfg(feature = "debug-callbacks")]
    #[test]
    fn debug_aid_a_key_queued_twice_is_refused() {
        cases::debug_aid_a_key_queued_twice_is_refused();
    }

    #[test]
    fn linux_polled_contract() {
        cases::linux_polled_contract();
    }

    #[test]
    fn reclamation_takes_a_budget() {
        cases::reclamation_takes_a_budget();
    }

    #[test]
    fn a_read_token_holds_grace_periods() {
        cases::a_read_token_holds_grace_periods();
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
    fn dropping_a_queue_never_drops_a_waiting_value() {
        cases::dropping_a_queue_never_drops_a_waiting_value();
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
    fn split_raw_lock_and_raw_unlock_hold_grace_periods() {
        cases::split_raw_lock_and_raw_unlock_hold_grace_periods();
    }

    #[test]
    fn a_per_cpu_writer_needs_no_slot_of_its_own() {
        cases::a_per_cpu_writer_needs_no_slot_of_its_own();
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

    // ---- the timer interrupt's handler as reader, and as writer ----------------------

    #[cfg(rcuref_fw_tick)]
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

        /// One CPU's dedicated reader slot, used by the thread **and** by the SysTick
        /// handler, which nests on it whenever it interrupts the thread's section (the
        /// per-CPU pattern of `ContextReader`); the handler also drives the writer.
        pub static NEST: Torture = Torture::with_dedicated(1);
        // SAFETY: (test) slot 0 is dedicated; only this CPU's thread and its SysTick
        // handler use it, and the handler leaves its section before the thread resumes.
        static CPU: rcuref::rcu::ContextReader<'static, 4> = unsafe { NEST.rcu.context_reader(0) };
        /// Handler runs that found the thread inside a section on the same slot.
        pub static NESTED: AtomicU32 = AtomicU32::new(0);

        fn nest_then_write_in_handler() {
            if CPU.in_read_section() {
                NESTED.fetch_add(1, Relaxed);
            }
            NEST.read_once_in(&CPU, 8);
            NEST.writer_step_polled();
        }

        /// The thread reads on the CPU's slot with long sections; the handler nests a
        /// section of its own on that slot, leaves it, then publishes, retires and polls
        /// grace periods. If leaving the nested section ended the thread's (nesting
        /// broken), a grace period would end under the thread's reference.
        pub fn context_reader_nesting(rounds: u32) -> &'static Torture {
            context_reader_nesting_holding(rounds, || cases::spin(400))
        }

        /// `context_reader_nesting` with each thread section holding its object while
        /// `hold` runs.
        pub fn context_reader_nesting_holding(rounds: u32, hold: impl Fn()) -> &'static Torture {
            tick::start(1_199, nest_then_write_in_handler);
            while NEST.published.load(Relaxed) < rounds {
                NEST.read_once_in_holding(&CPU, &hold);
            }
            let ticks = tick::stop();
            defmt::info!(
                "{=u32} interrupts, {=u32} of them nested on the thread's slot, {=u32} publications",
                ticks,
                NESTED.load(Relaxed),
                NEST.published.load(Relaxed)
            );
            &NEST
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

    /// Read sections in an interrupt handler that preempts the writer
    /// mid-publish and mid-grace-period see no object older than one grace period.
    #[cfg(rcuref_fw_tick)]
    #[test]
    fn irq_readers_torture() {
        let t = irq::readers_in_handler(20_000);
        report(t);
        t.check();
    }

    /// A writer in an interrupt handler (polled grace periods, never blocking) against
    /// a thread reader it keeps preempting inside its sections.
    #[cfg(rcuref_fw_tick)]
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

    /// A handler nesting on the slot of the context it interrupted (`ContextReader`):
    /// leaving its section must leave the interrupted one open, so no grace period the
    /// handler drives ends under the thread's reference.
    #[cfg(rcuref_fw_tick)]
    #[test]
    fn irq_nests_on_the_interrupted_contexts_slot() {
        let t = irq::context_reader_nesting(2_000);
        report(t);
        assert!(
            irq::NESTED.load(core::sync::atomic::Ordering::Relaxed) > 100,
            "too few handler sections nested on the thread's slot to prove anything"
        );
        assert!(
            t.ages()[1] > 0,
            "no retirement landed inside a reader's section: the test proves nothing"
        );
        t.check();
    }

    /// Its negative control: with nesting ignored, the handler's unlock ends the
    /// thread's section, and the torture must see an object retired two grace periods
    /// ago (or reused) under the thread: the exact failure, not just any panic.
    #[cfg(all(rcuref_mutants, rcuref_fw_tick))]
    #[test]
    fn negative_control_nesting_on_a_context_slot_is_checked() {
        use core::sync::atomic::Ordering::Relaxed;
        rcuref::mutants::select(rcuref::mutants::Mutant::NestingIgnored);
        // Each thread section spans four ticks, whatever the speed of the host running
        // the emulator. The handler alternates publishing and polling (with the slot
        // left looking empty, each poll ends its grace period), so the first
        // publication inside the section retires the thread's object and the poll
        // after it ages that object to two. A section of 400 spins spanned two ticks
        // only by chance: on AArch64 it is a sixth of a tick, and CI once saw no read
        // at age two.
        let t = irq::context_reader_nesting_holding(500, || {
            use rcuref_firmware::tick;
            let start = tick::ticks();
            while tick::ticks().wrapping_sub(start) < 4 {
                core::hint::spin_loop();
            }
        });
        rcuref::mutants::select(rcuref::mutants::Mutant::None);
        report(t);
        let a = t.ages();
        assert!(
            a[2] + a[3] > 0 || t.reused_under_reader.load(Relaxed) > 0,
            "the torture did not catch a handler's unlock ending the interrupted section"
        );
    }

    // ---- every core: readers on all but the writer's, interrupt readers nesting -------

    #[cfg(rcuref_fw_cores)]
    mod smp {
        use super::*;
        use rcuref_firmware::cores::run_on_all;

        pub static T: Torture = Torture::new();

        /// Fewer in the asymmetric-fence mode, where every wait interrupts every other
        /// core (slow with more vCPUs than host cores).
        #[cfg(rcuref_fw_tick)]
        const GRACE_PERIODS: u32 = if cfg!(rcuref_asymmetric_fence) {
            500
        } else {
            2_000
        };

        /// The writer's rounds and the reads it waits for (set before a run).
        static ROUNDS: portable_atomic::AtomicU32 = portable_atomic::AtomicU32::new(0);
        static MIN_READS: portable_atomic::AtomicU32 = portable_atomic::AtomicU32::new(0);

        fn job(core: usize) {
            use core::sync::atomic::Ordering::Relaxed;
            if core == 0 {
                T.writer(
                    ROUNDS.load(Relaxed),
                    MIN_READS.load(Relaxed),
                    core::hint::spin_loop,
                );
            } else {
                T.reader_loop();
            }
        }

        /// The reader-age torture: the writer on core 0, readers on every other core
        /// (three on AArch64: with the writer's, all four slots in use).
        pub fn run() -> &'static Torture {
            run_with(
                if cfg!(rcuref_asymmetric_fence) {
                    1_000
                } else {
                    5_000
                },
                2_000,
            )
        }

        /// The torture with `rounds` grace periods at least, and on until the readers
        /// have done `min_reads` sections.
        pub fn run_with(rounds: u32, min_reads: u32) -> &'static Torture {
            use core::sync::atomic::Ordering::Relaxed;
            ROUNDS.store(rounds, Relaxed);
            MIN_READS.store(min_reads, Relaxed);
            run_on_all(job);
            &T
        }

        /// Core 0's dedicated slot, used by its thread and by its timer handler, which
        /// nests on it; the writer on core 1; readers on any further cores.
        #[cfg(rcuref_fw_tick)]
        pub static NEST: Torture = Torture::with_dedicated(1);
        // SAFETY: (test) slot 0 is dedicated; only core 0's thread and its timer handler
        // use it, and the handler leaves its section before the thread resumes.
        #[cfg(rcuref_fw_tick)]
        static CPU0: rcuref::rcu::ContextReader<'static, 4> = unsafe { NEST.rcu.context_reader(0) };
        #[cfg(rcuref_fw_tick)]
        pub static NESTED: portable_atomic::AtomicU32 = portable_atomic::AtomicU32::new(0);

        #[cfg(rcuref_fw_tick)]
        fn nest_in_handler() {
            if CPU0.in_read_section() {
                NESTED.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
            }
            NEST.read_once_in(&CPU0, 8);
        }

        #[cfg(rcuref_fw_tick)]
        fn nesting_job(core: usize) {
            use core::sync::atomic::Ordering::Relaxed;
            match core {
                0 => {
                    rcuref_firmware::tick::start(1_199, nest_in_handler);
                    // Long sections: a section the handler's unlock ended early (the
                    // control) must still be open when two grace periods have passed.
                    // Counted by core 0's own sections too: a host that stops this
                    // vCPU lets the writer run all its grace periods meanwhile.
                    let mut sections = 0u32;
                    while sections < 2_000
                        || NESTED.load(Relaxed) < 200
                        || NEST.grace_periods.load(Relaxed) < GRACE_PERIODS
                    {
                        NEST.read_once_in(&CPU0, 4_000);
                        sections += 1;
                    }
                    rcuref_firmware::tick::stop();
                    NEST.stop.store(true, Relaxed);
                }
                1 => NEST.writer(u32::MAX, 0, core::hint::spin_loop),
                _ => NEST.reader_loop(),
            }
        }

        /// Interrupt-level readers nesting on the slot of the context they interrupted
        /// (core 0: thread and timer handler on one `ContextReader`) while core 1
        /// publishes and waits for grace periods: a grace period must never end under
        /// the thread's section, nor under the handler's nested one.
        #[cfg(rcuref_fw_tick)]
        pub fn nesting_while_another_core_writes() -> &'static Torture {
            run_on_all(nesting_job);
            defmt::info!(
                "{=u32} handler sections nested on core 0's slot",
                NESTED.load(core::sync::atomic::Ordering::Relaxed)
            );
            &NEST
        }
    }

    /// A writer that sleeps in `wfi` and is woken by the reader's unlock on another
    /// core (issue 27: the firmware's sleep, `rcuref_firmware::cores::wake`): core 0
    /// waits for a grace period that core 1's section holds, sleeps, and the section's
    /// unlock raises the wake SGI through the domain's wake hook. The timer ticks every
    /// 10 ms on core 0 as the sleep's bound.
    #[cfg(all(target_arch = "aarch64", rcuref_fw_tick))]
    mod wfi_wake {
        use core::ops::ControlFlow;
        use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
        use portable_atomic::AtomicU32;
        use rcuref::rcu::Rcu;
        use rcuref_firmware::cores::{run_on_all, wake};

        static RCU: Rcu<4> = Rcu::new();
        pub const ROUNDS: u32 = 20;
        /// The round whose section core 1 is inside, whose wait core 0 sleeps in, and
        /// the last round core 0 finished.
        static INSIDE: AtomicU32 = AtomicU32::new(0);
        static ASLEEP: AtomicU32 = AtomicU32::new(0);
        static DONE: AtomicU32 = AtomicU32::new(0);
        /// How often the writer slept, and the timer's ticks meanwhile.
        pub static SLEEPS: AtomicU32 = AtomicU32::new(0);
        pub static TICKS: AtomicU32 = AtomicU32::new(0);

        fn writer() {
            let mut me = RCU.reader().unwrap();
            rcuref_firmware::tick::start(119_999, || {});
            for round in 1..=ROUNDS {
                while INSIDE.load(Acquire) < round {
                    core::hint::spin_loop();
                }
                me.synchronize(|w| {
                    let seen = wake::generation();
                    w.sleep(|| {
                        ASLEEP.store(round, Release);
                        SLEEPS.fetch_add(1, Relaxed);
                        wake::sleep(seen);
                    });
                    ControlFlow::Continue(())
                })
                .unwrap();
                DONE.store(round, Release);
            }
            TICKS.store(rcuref_firmware::tick::stop(), Relaxed);
        }

        fn reader() {
            let r = RCU.reader().unwrap();
            for round in 1..=ROUNDS {
                let g = r.lock();
                INSIDE.store(round, Release);
                // Until the writer sleeps on this section, and a little longer (a wake
                // before its `wfi` is remembered by the generation).
                while ASLEEP.load(Acquire) < round {
                    core::hint::spin_loop();
                }
                for _ in 0..2_000 {
                    core::hint::spin_loop();
                }
                drop(g);
                while DONE.load(Acquire) < round {
                    core::hint::spin_loop();
                }
            }
        }

        fn job(core: usize) {
            match core {
                0 => writer(),
                1 => reader(),
                _ => {}
            }
        }

        /// The rounds with `hook` as the domain's wake hook: the wake SGIs core 0 took.
        pub fn run(hook: fn()) -> u32 {
            RCU.set_wake_hook(Some(hook));
            run_on_all(job);
            let taken = wake::taken(0);
            defmt::info!(
                "{=u32} rounds: the writer slept {=u32} times, took {=u32} wake SGIs, {=u32} ticks",
                ROUNDS,
                SLEEPS.load(Relaxed),
                taken,
                TICKS.load(Relaxed)
            );
            taken
        }

        /// The control's hook: sends nothing (a wake hook that forgot its interrupt).
        pub fn no_sgi() {}
    }

    /// The sleep's first duty (`Waiting::sleep`): a wake sent after the generation was
    /// read and before the sleep begins ends the sleep at once, with no interrupt (the
    /// wake sends no SGI: no core has announced itself yet). Returns the fewest timer
    /// ticks that `sleep` took in five tries (a tick can land in a try by chance; a
    /// sleep that misses the wake takes one in every try, as nothing else wakes it).
    #[cfg(all(target_arch = "aarch64", rcuref_fw_tick))]
    fn ticks_through_a_sleep_woken_before_it_began(sleep: fn(u32)) -> u32 {
        use rcuref_firmware::{cores::wake, tick};
        tick::start(119_999, || {});
        let mut fewest = u32::MAX;
        for _ in 0..5 {
            let seen = wake::generation();
            wake::wake();
            let before = tick::ticks();
            sleep(seen);
            fewest = fewest.min(tick::ticks() - before);
        }
        tick::stop();
        fewest
    }

    #[cfg(all(target_arch = "aarch64", rcuref_fw_tick))]
    #[test]
    fn a_wake_before_the_sleep_ends_it_at_once() {
        let ticks =
            ticks_through_a_sleep_woken_before_it_began(rcuref_firmware::cores::wake::sleep);
        assert_eq!(ticks, 0, "every sleep waited for the timer");
    }

    /// The control: a sleep that goes to `wfi` without looking at the generation (the
    /// bug the first duty forbids) waits for the timer's tick in every try.
    #[cfg(all(target_arch = "aarch64", rcuref_fw_tick))]
    #[test]
    fn control_a_sleep_that_ignores_the_generation_waits_for_the_tick() {
        fn bare_wfi(_seen: u32) {
            // SAFETY: `wfi` waits for an interrupt; IRQs are unmasked (the test runs
            // in thread mode with the timer's interrupt enabled), so it returns.
            unsafe { core::arch::asm!("wfi", options(nostack)) };
        }
        let ticks = ticks_through_a_sleep_woken_before_it_began(bare_wfi);
        assert!(ticks >= 1, "a bare wfi returned without an interrupt");
    }

    /// The firmware's sleep: every round's sleep is ended by the wake SGI of the reader's
    /// unlock, not by the timer's bound (the control below tells the two apart).
    #[cfg(all(target_arch = "aarch64", rcuref_fw_tick))]
    #[test]
    fn a_writer_asleep_in_wfi_is_woken_by_the_readers_unlock() {
        let taken = wfi_wake::run(rcuref_firmware::cores::wake::wake);
        assert!(
            wfi_wake::SLEEPS.load(core::sync::atomic::Ordering::Relaxed) >= wfi_wake::ROUNDS,
            "the writer did not sleep in every round: the test proves nothing"
        );
        assert!(
            taken >= wfi_wake::ROUNDS,
            "{} wake SGIs for {} rounds",
            taken,
            wfi_wake::ROUNDS
        );
    }

    /// The control: a wake hook that raises no SGI. The writer sleeps out its bound (a
    /// tick) in every round, and takes no wake SGI: the assertion above would fail.
    #[cfg(all(target_arch = "aarch64", rcuref_fw_tick))]
    #[test]
    fn control_a_wake_hook_without_its_sgi_leaves_the_writer_to_its_bound() {
        let taken = wfi_wake::run(wfi_wake::no_sgi);
        assert_eq!(taken, 0, "a wake SGI without a wake");
        assert!(
            wfi_wake::TICKS.load(core::sync::atomic::Ordering::Relaxed) >= wfi_wake::ROUNDS,
            "the rounds ended before a tick each: something else woke the writer"
        );
    }

    /// The reader-age torture (`tests/torture_rcu.rs`) on hardware threads: across every
    /// core.
    #[cfg(rcuref_fw_cores)]
    #[test]
    fn all_cores_torture() {
        let t = smp::run();
        report(t);
        t.check();
    }

    /// A timer handler nesting on the interrupted context's slot while another core
    /// writes: leaving the nested section leaves the thread's open, on a multi-core part
    /// where the writer's scans really run during it.
    #[cfg(all(rcuref_fw_cores, rcuref_fw_tick))]
    #[test]
    fn irq_readers_nest_while_another_core_writes() {
        let t = smp::nesting_while_another_core_writes();
        report(t);
        assert!(
            smp::NESTED.load(core::sync::atomic::Ordering::Relaxed) > 100,
            "too few handler sections nested on the thread's slot to prove anything"
        );
        assert!(
            t.ages()[1] > 0,
            "no retirement landed inside a reader's section: the test proves nothing"
        );
        t.check();
    }

    /// Its negative control: with nesting ignored, the handler's unlock ends the
    /// thread's section and the other core's grace periods end under it.
    #[cfg(all(rcuref_mutants, rcuref_fw_cores, rcuref_fw_tick))]
    #[test]
    fn negative_control_nesting_while_another_core_writes_is_checked() {
        use core::sync::atomic::Ordering::Relaxed;
        rcuref::mutants::select(rcuref::mutants::Mutant::NestingIgnored);
        let t = smp::nesting_while_another_core_writes();
        rcuref::mutants::select(rcuref::mutants::Mutant::None);
        report(t);
        let a = t.ages();
        assert!(
            a[2] + a[3] > 0 || t.reused_under_reader.load(Relaxed) > 0,
            "the torture did not catch a handler's unlock ending the interrupted section"
        );
    }

    /// The asymmetric-fence mode's heavy fence, checked where it must happen: for the
    /// first wait step of every grace period (counter values `% 4 == 1`, the only waits
    /// that issue it: `src/rcu/heavy.rs`, "One fence per grace period"), the other hart
    /// must have run the fence handler while the counter stood at that wait (after the
    /// flip that started it) and, in mutant builds, which have a hook just before each
    /// scan, before the scan that decides it. (What a skipped fence does to readers is shown by the host's
    /// store-buffering torture, `tests/asymmetric.rs`; under QEMU's TCG the writer's path
    /// from unpublish to scan outlasts the reader's store-buffer drain, so a torture here
    /// does not reach it: docs/testing.md.)
    #[cfg(all(
        rcuref_asymmetric_fence,
        any(
            target_arch = "riscv32",
            target_arch = "riscv64",
            target_arch = "aarch64"
        )
    ))]
    mod heavy_fence {
        use core::sync::atomic::Ordering::Relaxed;
        use portable_atomic::AtomicU32;
        use rcuref::rcu::Rcu;
        use rcuref_firmware::cores::{self, heavy::observe_serves, COUNT};

        const GRACE_PERIODS: u32 = 8;
        /// Counter steps the writer makes: four per grace period.
        const STEPS: usize = 4 * GRACE_PERIODS as usize;

        static D: Rcu<4> = Rcu::new();
        static START: AtomicU32 = AtomicU32::new(0);
        /// Numbers the events of every core in one order (the order of this counter's
        /// read-modify-writes, which follows happens-before).
        static EVENT: AtomicU32 = AtomicU32::new(0);
        /// Per core, by counter value (offset from `START`): the event number of the
        /// first fence served on that core; and of the first scan (0: none).
        static SERVED: [[AtomicU32; STEPS + 1]; COUNT] =
            [const { [const { AtomicU32::new(0) }; STEPS + 1] }; COUNT];
        #[cfg(rcuref_mutants)]
        static SCANNED: [AtomicU32; STEPS + 1] = [const { AtomicU32::new(0) }; STEPS + 1];

        /// Records an event at counter value `g`.
        fn record(at: &[AtomicU32; STEPS + 1], g: u32) {
            let i = g.wrapping_sub(START.load(Relaxed)) as usize;
            if let Some(first) = at.get(i) {
                let n = EVENT.fetch_add(1, Relaxed) + 1;
                let _ = first.compare_exchange(0, n, Relaxed, Relaxed);
            }
        }

        /// The grace periods run on core 0: the other cores' fences count.
        fn on_serve(core: usize) {
            if core != 0 {
                record(&SERVED[core], D.gp_counter());
            }
        }

        #[cfg(rcuref_mutants)]
        fn on_scan(p: rcuref::mutants::Point) {
            if let rcuref::mutants::Point::GpBeforeScan(wait) = p {
                record(&SCANNED, wait);
            }
        }

        /// Whether the wait at offset `i` was fenced on `core` before its scan.
        fn fenced(core: usize, i: usize) -> bool {
            let served = SERVED[core][i].load(Relaxed);
            #[cfg(rcuref_mutants)]
            let before_scan = {
                let scanned = SCANNED[i].load(Relaxed);
                scanned != 0 && served < scanned
            };
            #[cfg(not(rcuref_mutants))]
            let before_scan = true;
            served != 0 && before_scan
        }

        /// Runs `GRACE_PERIODS` grace periods on core 0 (the others idle, serving
        /// requests) and returns how many (first wait, other core) pairs were not fenced
        /// on that core before the wait's scan.
        pub fn unfenced_waits() -> usize {
            assert_eq!(cores::current(), 0, "the tests run on core 0");
            for n in SERVED.iter().flatten() {
                n.store(0, Relaxed);
            }
            #[cfg(rcuref_mutants)]
            for n in &SCANNED {
                n.store(0, Relaxed);
            }
            assert_eq!(D.gp_counter() & 3, 0, "at the start of a grace period");
            START.store(D.gp_counter(), Relaxed);
            observe_serves(Some(on_serve));
            #[cfg(rcuref_mutants)]
            rcuref::mutants::set_pause_hook(Some(on_scan));
            let mut w = D.reader().unwrap();
            for _ in 0..GRACE_PERIODS {
                w.synchronize(rcuref::rcu::forever(core::hint::spin_loop))
                    .unwrap();
            }
            #[cfg(rcuref_mutants)]
            rcuref::mutants::set_pause_hook(None);
            observe_serves(None);
            let steps = D.gp_counter().wrapping_sub(START.load(Relaxed)) as usize;
            assert_eq!(
                steps, STEPS,
                "one writer, no reader: four steps per grace period"
            );
            let unfenced = (1..STEPS)
                .step_by(4)
                .flat_map(|i| (1..COUNT).map(move |c| (c, i)))
                .filter(|&(c, i)| !fenced(c, i))
                .count();
            defmt::info!(
                "{=usize} first waits x {=usize} other cores, {=usize} not fenced there before their scan",
                STEPS / 4,
                COUNT - 1,
                unfenced
            );
            unfenced
        }
    }

    #[cfg(all(
        rcuref_asymmetric_fence,
        any(
            target_arch = "riscv32",
            target_arch = "riscv64",
            target_arch = "aarch64"
        )
    ))]
    #[test]
    fn every_first_wait_fences_every_other_core() {
        assert_eq!(heavy_fence::unfenced_waits(), 0);
    }

    /// Heavy fences called with the fence's interrupt masked on every core at once (as
    /// from interrupt handlers that poll a grace period): each waiting core serves the
    /// requests pending on it from its wait loop (`ipi.rs`), or the cores wait for each
    /// other for ever (`rcuref::rcu::heavy::HeavyFence`'s contract, "Who calls it").
    #[cfg(rcuref_fw_ipi_fence)]
    mod masked_fences {
        use rcuref::rcu::heavy::HeavyFence;
        use rcuref_firmware::cores::{heavy, run_on_all};

        #[cfg(target_arch = "aarch64")]
        type Fence = heavy::SgiFence;
        #[cfg(not(target_arch = "aarch64"))]
        type Fence = heavy::ClintIpi;

        const ROUNDS: u32 = 100;

        /// `Fence::heavy_fence()` with this core's interrupts masked.
        fn masked_fence() {
            #[cfg(target_arch = "aarch64")]
            {
                // SAFETY: masking IRQs on this core around the call; unmasked after it.
                unsafe { core::arch::asm!("msr daifset, #2", options(nostack)) };
                Fence::heavy_fence();
                // SAFETY: unmasking IRQs on this core; the vector is installed.
                unsafe { core::arch::asm!("msr daifclr, #2", options(nostack)) };
            }
            #[cfg(not(target_arch = "aarch64"))]
            {
                riscv::interrupt::disable();
                Fence::heavy_fence();
                // SAFETY: interrupts were on in the job (the harts run with them on to
                // serve requests); the handlers are installed.
                unsafe { riscv::interrupt::enable() };
            }
        }

        /// `heavy::stuck()` before the run (the control's job stops at the first wait
        /// stuck on any core: one proves the point).
        static BEFORE: portable_atomic::AtomicU32 = portable_atomic::AtomicU32::new(0);

        fn job(_core: usize) {
            use core::sync::atomic::Ordering::Relaxed;
            for _ in 0..ROUNDS {
                masked_fence();
                if heavy::stuck() != BEFORE.load(Relaxed) {
                    break;
                }
            }
        }

        /// Every core fences `ROUNDS` times with its interrupt masked; `serve` says
        /// whether waiting cores serve from their loops. Returns the waits that spun
        /// past the control's bound (counted only without serving).
        pub fn stuck_waits(serve: bool) -> u32 {
            heavy::serve_while_waiting(serve);
            let before = heavy::stuck();
            BEFORE.store(before, core::sync::atomic::Ordering::Relaxed);
            run_on_all(job);
            heavy::serve_while_waiting(true);
            let stuck = heavy::stuck() - before;
            defmt::info!(
                "up to {=u32} masked fences per core, serving from the wait loop: {=bool}; {=u32} waits stuck",
                ROUNDS,
                serve,
                stuck
            );
            stuck
        }
    }

    /// Two or four cores fencing at once with the fence's interrupt masked all finish:
    /// a waiting core serves the others (without that they would wait for ever, and the
    /// test would hit the runner's timeout).
    #[cfg(rcuref_fw_ipi_fence)]
    #[test]
    fn masked_heavy_fences_on_every_core_at_once_finish() {
        assert_eq!(masked_fences::stuck_waits(true), 0);
    }

    /// A serve that the serve of a newer ticket interrupts between its load and its
    /// publication (the handler interrupting a wait loop's serve) leaves the newer ticket
    /// published, at every start (across the counter's wrap too). A plain store there, or
    /// a comparison that does not wrap, takes the ticket back (1).
    #[cfg(rcuref_fw_ipi_fence)]
    #[test]
    fn a_serve_interrupted_by_a_newer_one_leaves_the_newer_published() {
        use rcuref_firmware::cores::heavy::checks;
        for start in [0, 1_000, u32::MAX - 1, u32::MAX] {
            assert_eq!(checks::interrupted_serve(start), 2, "from {}", start);
        }
    }

    /// A request whose ticket wraps past `u32::MAX` waits for its serve (core 1 serves
    /// late on purpose); a wait that compares tickets without wrapping returns at once.
    #[cfg(rcuref_fw_ipi_fence)]
    #[test]
    fn a_request_across_the_ticket_wrap_waits_for_its_serve() {
        use core::sync::atomic::Ordering::Relaxed;
        use portable_atomic::AtomicBool;
        use rcuref_firmware::cores::{heavy::checks, run_on_all};
        static WAITED: AtomicBool = AtomicBool::new(false);
        checks::prepare_the_wrap();
        run_on_all(|core| match core {
            0 => WAITED.store(checks::request_across_the_wrap(), Relaxed),
            1 => checks::serve_late(),
            _ => {}
        });
        assert!(
            WAITED.load(Relaxed),
            "the request returned before its serve"
        );
    }

    /// The control: waiting cores that serve nothing but their interrupt (the protocol
    /// before) wait for each other until the control's bound breaks the tie.
    #[cfg(rcuref_fw_ipi_fence)]
    #[test]
    fn control_masked_heavy_fences_without_serving_wait_for_each_other() {
        assert!(
            masked_fences::stuck_waits(false) > 0,
            "no masked fences overlapped: the test above proves nothing"
        );
    }

    /// Its negative control: with the heavy fence skipped, every first wait goes
    /// unfenced.
    #[cfg(all(
        rcuref_mutants,
        rcuref_asymmetric_fence,
        any(
            target_arch = "riscv32",
            target_arch = "riscv64",
            target_arch = "aarch64"
        )
    ))]
    #[test]
    fn negative_control_a_skipped_heavy_fence_is_caught() {
        rcuref::mutants::select(rcuref::mutants::Mutant::SkipHeavyFence);
        let unfenced = heavy_fence::unfenced_waits();
        rcuref::mutants::select(rcuref::mutants::Mutant::None);
        assert!(unfenced > 0, "a skipped heavy fence went unnoticed");
    }

    /// The torture's negative control on the target (built with `--cfg rcuref_mutants`
    /// by `cargo xtask test`): with grace periods that end at once, it must fail.
    #[cfg(rcuref_mutants)]
    #[test]
    #[should_panic]
    fn negative_control_torture_catches_busted_rcu() {
        rcuref::mutants::select(rcuref::mutants::Mutant::BustedGracePeriod);
        #[cfg(not(rcuref_fw_cores))]
        let t = irq::writer_in_handler(2_000);
        // With grace periods that end at once the writer outruns the readers on the
        // other vCPUs (which may not even be scheduled yet): many rounds and many reads,
        // so that sections really overlap retirements.
        #[cfg(rcuref_fw_cores)]
        let t = smp::run_with(20_000, 200_000);
        report(t);
        t.check();
    }
}
