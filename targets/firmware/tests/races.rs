//! FileRef under real concurrency on the target: SysTick interrupts preempting thread
//! code on Cortex-M, two harts on RISC-V. Each test also runs a plain load/store counter
//! in the same contexts and requires it to lose updates: the proof that the contexts
//! really race (otherwise exact totals would prove nothing).
#![no_std]
#![no_main]

use rcuref_firmware as _;

#[cfg(target_arch = "arm")]
rcuref_firmware::systick_handler!();

#[embedded_test::tests(default_timeout = 120)]
mod tests {
    use core::sync::atomic::Ordering::Relaxed;
    use portable_atomic::AtomicU32;
    use rcuref::{FileRef32, FileRef64};
    use rcuref_firmware::RacyCounter;

    // ---- Cortex-M: thread code vs the SysTick handler -----------------------------

    #[cfg(target_arch = "arm")]
    mod irq {
        use super::*;
        use rcuref_firmware::tick;

        pub static A32: FileRef32 = FileRef32::new(1);
        pub static A64: FileRef64 = FileRef64::new(1);
        /// References the handler took and kept.
        pub static KEPT: AtomicU32 = AtomicU32::new(0);
        pub static RACY: RacyCounter = RacyCounter::new();
        pub static HANDLER_BUMPS: AtomicU32 = AtomicU32::new(0);

        fn on_tick() {
            // A get/put pair (balanced) and one reference kept, on both widths.
            assert!(A32.get() && A64.get(), "handler get failed on a live count");
            assert!(!A32.put() && !A64.put(), "handler put was the last");
            assert!(A32.get() && A64.get());
            KEPT.fetch_add(1, Relaxed);
            RACY.bump();
            HANDLER_BUMPS.fetch_add(1, Relaxed);
        }

        /// Thread code does get/inc/put/put_close on the counters the handler also uses,
        /// for at least `min_iters` iterations and `min_ticks` interrupts.
        pub fn run(min_iters: u32, min_ticks: u32) {
            tick::start(1_199, on_tick);
            let mut iters = 0u32;
            let mut thread_bumps = 0u32;
            while iters < min_iters || tick::ticks() < min_ticks {
                assert!(A32.get() && A64.get(), "thread get failed on a live count");
                A32.inc();
                A64.inc();
                assert!(!A32.put() && !A64.put());
                // put_close on a count that stays shared must behave as put.
                assert!(!A32.put_close() && !A64.put_close());
                RACY.bump();
                thread_bumps += 1;
                iters += 1;
                assert!(
                    iters < 50_000_000,
                    "SysTick never reached {} ticks",
                    min_ticks
                );
            }
            let ticks = tick::stop();
            let kept = KEPT.load(Relaxed);
            defmt::info!(
                "{=u32} thread iterations (5 ops each on 2 counters), {=u32} interrupts",
                iters,
                ticks
            );
            assert_eq!(kept, ticks, "every tick keeps one reference");
            assert_eq!(A32.read(), 1 + kept, "FileRef32 lost or gained references");
            assert_eq!(
                A64.read(),
                u64::from(1 + kept),
                "FileRef64 lost or gained references"
            );
            let expected = thread_bumps + HANDLER_BUMPS.load(Relaxed);
            let lost = expected - RACY.get();
            defmt::info!(
                "plain load/store counter lost {=u32} of {=u32} updates",
                lost,
                expected
            );
            assert!(
                lost > 0,
                "the handler never preempted a read-modify-write: the test proves nothing"
            );
        }
    }

    /// At least 10^5 operations per width, preempted by SysTick: exact final counts.
    /// The 64-bit counter is critical-section-backed here: this also shows the policy
    /// does not deadlock when a handler interrupts a thread inside it.
    #[cfg(target_arch = "arm")]
    #[test]
    fn irq_preempted_get_put_is_exact() {
        irq::run(20_000, 200);
    }

    // ---- RISC-V: two harts ----------------------------------------------------------

    #[cfg(any(target_arch = "riscv32", target_arch = "riscv64"))]
    mod harts {
        use super::*;
        use rcuref_firmware::hart::{run_on_both, Rendezvous};

        pub const ITERS: u32 = 200_000;
        pub static C32: FileRef32 = FileRef32::new(1);
        pub static C64: FileRef64 = FileRef64::new(1);
        pub static KEPT: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];
        pub static RACY: RacyCounter = RacyCounter::new();

        fn hammer(hart: usize) {
            for i in 0..ITERS {
                assert!(C32.get() && C64.get(), "get failed on a live count");
                if i % 16 == 0 {
                    KEPT[hart].fetch_add(1, Relaxed);
                } else if i % 2 == 0 {
                    assert!(!C32.put() && !C64.put(), "put was the last");
                } else {
                    assert!(
                        !C32.put_close() && !C64.put_close(),
                        "put_close was the last"
                    );
                }
            }
        }

        fn racy(_: usize) {
            for _ in 0..ITERS {
                RACY.bump();
            }
        }

        pub fn balanced() {
            run_on_both(hammer);
            let kept = KEPT[0].load(Relaxed) + KEPT[1].load(Relaxed);
            assert_eq!(kept, 2 * ITERS / 16);
            assert_eq!(C32.read(), 1 + kept);
            assert_eq!(C64.read(), u64::from(1 + kept));
            run_on_both(racy);
            let lost = 2 * ITERS - RACY.get();
            defmt::info!(
                "plain load/store counter lost {=u32} of {=u32} updates",
                lost,
                2 * ITERS
            );
            assert!(lost > 0, "the harts never raced: the test proves nothing");
        }

        pub const ROUNDS: u32 = 20_000;
        pub static O32: FileRef32 = FileRef32::new(1);
        pub static O64: FileRef64 = FileRef64::new(1);
        pub static DESTROYS: AtomicU32 = AtomicU32::new(0);
        pub static REVIVED: AtomicU32 = AtomicU32::new(0);
        pub static DEAD_FLAG: AtomicU32 = AtomicU32::new(0);
        static RV: Rendezvous = Rendezvous::new();

        fn destroy() {
            assert_eq!(DEAD_FLAG.fetch_add(1, Relaxed), 0, "destroyed twice");
            DESTROYS.fetch_add(1, Relaxed);
        }

        /// Hart 0 drops the owner's last reference (put / put_close alternately, on
        /// both widths); hart 1 tries to get and, if it did, puts.
        fn rounds(hart: usize) {
            for round in 0..ROUNDS {
                let r32 = round % 2 == 0; // alternate the width under test
                RV.wait();
                if hart == 0 {
                    let last = match (r32, round % 4 < 2) {
                        (true, true) => O32.put(),
                        (true, false) => O32.put_close(),
                        (false, true) => O64.put(),
                        (false, false) => O64.put_close(),
                    };
                    if last {
                        destroy();
                    }
                } else {
                    let got = if r32 { O32.get() } else { O64.get() };
                    if got {
                        REVIVED.fetch_add(1, Relaxed);
                        assert_eq!(DEAD_FLAG.load(Relaxed), 0, "got a destroyed object");
                        if if r32 { O32.put() } else { O64.put() } {
                            destroy();
                        }
                    }
                }
                RV.wait();
                if hart == 0 {
                    assert_eq!(DEAD_FLAG.load(Relaxed), 1, "nobody destroyed");
                    DEAD_FLAG.store(0, Relaxed);
                    O32.init(1);
                    O64.init(1);
                }
                RV.wait();
            }
        }

        pub fn last_put_vs_get() {
            run_on_both(rounds);
            assert_eq!(DESTROYS.load(Relaxed), ROUNDS);
            defmt::info!(
                "{=u32} rounds, {=u32} gets revived a dying count",
                ROUNDS,
                REVIVED.load(Relaxed)
            );
        }
    }

    /// Both harts hammer one FileRef32 and one FileRef64: exact totals.
    #[cfg(any(target_arch = "riscv32", target_arch = "riscv64"))]
    #[test]
    fn two_harts_get_put_is_exact() {
        harts::balanced();
    }

    /// The two harts show the weak-memory outcome the RCU's fences exist for (store
    /// buffering: each hart stores, then loads the other's location, and both load the
    /// old value), and a full fence between store and load removes it. Without the
    /// first, an on-target test could not catch a missing fence at all; without the
    /// second, the fences would not be doing their job here. Release builds only: in a
    /// debug build the code between the store and the load is long enough that the
    /// store has always drained (0 of 20,000 rounds under QEMU).
    #[cfg(all(
        any(target_arch = "riscv32", target_arch = "riscv64"),
        not(debug_assertions)
    ))]
    #[test]
    fn two_harts_show_store_buffering_and_a_fence_stops_it() {
        use core::sync::atomic::{compiler_fence, Ordering::SeqCst};
        use rcuref_firmware::hart::{run_on_both, Rendezvous};
        static X: AtomicU32 = AtomicU32::new(0);
        static Y: AtomicU32 = AtomicU32::new(0);
        static SEEN: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];
        static BOTH_OLD: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];
        static RV: Rendezvous = Rendezvous::new();
        const N: u32 = 20_000;
        fn job(hart: usize) {
            for round in 0..2 * N {
                let fenced = usize::from(round >= N);
                RV.wait();
                let (mine, other) = if hart == 0 { (&X, &Y) } else { (&Y, &X) };
                mine.store(1, Relaxed);
                if fenced == 1 {
                    portable_atomic::fence(SeqCst);
                } else {
                    compiler_fence(SeqCst);
                }
                SEEN[hart].store(other.load(Relaxed), Relaxed);
                RV.wait();
                if hart == 0 {
                    if SEEN[0].load(Relaxed) == 0 && SEEN[1].load(Relaxed) == 0 {
                        BOTH_OLD[fenced].fetch_add(1, Relaxed);
                    }
                    X.store(0, Relaxed);
                    Y.store(0, Relaxed);
                }
                RV.wait();
            }
        }
        run_on_both(job);
        let (plain, fenced) = (BOTH_OLD[0].load(Relaxed), BOTH_OLD[1].load(Relaxed));
        defmt::info!(
            "store buffering in {=u32} of {=u32} rounds without a fence, {=u32} with one",
            plain,
            N,
            fenced
        );
        assert!(plain > 0, "no store buffering seen: the harts prove little");
        assert_eq!(fenced, 0, "a full fence did not stop store buffering");
    }

    /// Last put on one hart vs get on the other, round after round: exactly one destroy.
    #[cfg(any(target_arch = "riscv32", target_arch = "riscv64"))]
    #[test]
    fn two_harts_last_put_vs_get_destroys_once() {
        harts::last_put_vs_get();
    }
}
