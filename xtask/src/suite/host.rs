//! The host's steps: the plain `cargo test`, loom's models, the release-only tests and
//! feature-gated aids, the negative controls, the injection tests and the
//! asymmetric-fence mode.

use crate::steps::{Expect, Run};

/// The library's unit, integration and doc tests (and xtask's, the runner's, the probe's).
pub fn tests(run: &mut Run) {
    run.cargo(
        "host: unit, integration and doc tests",
        Expect::Tests(HOST_TESTS),
        &["test"],
        &[],
    );
}

/// The library's tests in the static full fence (`--no-default-features`), the read side
/// of every target that does not choose its fence at run time: on Linux the default
/// build chooses it (feature `membarrier`), so the plain step above runs that mode.
pub fn static_full(run: &mut Run) {
    run.cargo(
        "host: unit and integration tests with the static full fence (no default features)",
        Expect::Tests(STATIC_FULL_TESTS),
        &[
            "test",
            "-p",
            "rcuref",
            "--no-default-features",
            "--lib",
            "--tests",
        ],
        &[],
    );
}

/// The loom models.
pub fn loom(run: &mut Run) {
    // Still serial by this flag, not by construction: the models select broken
    // variants for the whole process (tests/common/loom.rs's must_catch) beside models
    // of the real code, and do not hold an `Exclusive` (tests/common/exclusive.rs) yet.
    run.cargo(
        "host: loom models",
        Expect::Tests(LOOM_TESTS),
        &[
            "test",
            "--release",
            "--no-default-features",
            "--test",
            "loom_file_ref",
            "--test",
            "loom_rcu",
            "--test",
            "loom_pool",
            "--test",
            "loom_interrupts",
            "--test",
            "loom_call",
            "--test",
            "loom_wake",
            "--",
            "--test-threads=1",
        ],
        &[
            ("RUSTFLAGS", "--cfg loom"),
            ("CARGO_TARGET_DIR", "target/loom"),
        ],
    );
}

/// The release-only tests and the feature-gated aids.
pub fn release_only(run: &mut Run) {
    run.cargo(
        "host: release-only tests and the feature-gated aids (2^32 forgotten clones; pool \
         statistics; strict grace periods; callbacks queued twice)",
        Expect::Tests(RELEASE_POOL_TESTS),
        &[
            "test",
            "--release",
            "--features",
            "pool-stats,debug-callbacks,strict-grace-periods",
            "--test",
            "pool",
            "--test",
            "polled",
            "--test",
            "call_queue",
            "--test",
            "sleeping_review",
        ],
        &[],
    );
}

/// The negative controls: broken variants the tortures must catch.
pub fn negative_controls(run: &mut Run) {
    run.cargo(
        "host: negative controls (broken variants must be caught)",
        Expect::Tests(HOST_NEGATIVE_CONTROLS),
        // On cargo's parallel test threads: each harness of these binaries holds the
        // binary's one `Exclusive` (tests/common/exclusive.rs) while it runs.
        // The static full fence (as every target without `auto-fence` builds it): the
        // controls of the read side's full fence need readers that run it.
        &[
            "test",
            "--release",
            "--no-default-features",
            "--test",
            "torture_file_ref",
            "--test",
            "torture_rcu",
            "--test",
            "torture_pool",
            "--",
            "negative_controls",
        ],
        &[
            ("RUSTFLAGS", "--cfg rcuref_mutants"),
            ("CARGO_TARGET_DIR", "target/mutants"),
        ],
    );
}

/// Preemption, interrupt and panic injection.
pub fn injection(run: &mut Run) {
    run.cargo(
        "host: preemption, interrupt and panic injection (threads stopped anywhere and at \
         exact points; a handler at every gap of the read side; every callback panicking)",
        Expect::Tests(INJECTION_TESTS),
        // Still serial by this flag, not by construction: these select broken variants,
        // install pause hooks, interrupt points and warning hooks and freeze threads
        // with one signal, all for the whole process, without an `Exclusive` yet.
        &[
            "test",
            "--release",
            "--no-default-features",
            "--test",
            "preemption",
            "--test",
            "interrupts",
            "--test",
            "panic_injection",
            "--test",
            "call_queue",
            "--test",
            "polled",
            "--test",
            "sleeping_review",
            "--test",
            "async_wake",
            "--",
            "--test-threads=1",
        ],
        &[
            ("RUSTFLAGS", "--cfg rcuref_mutants"),
            ("CARGO_TARGET_DIR", "target/mutants"),
        ],
    );
}

/// The asymmetric-fence mode (membarrier: Linux only).
#[cfg(target_os = "linux")]
pub fn asymmetric(run: &mut Run) {
    run.cargo(
        "host: asymmetric-fence mode (membarrier), its store-buffering torture, the heavy \
         fence's placement with two drivers, a panicking heavy fence, and the controls",
        Expect::Tests(ASYMMETRIC_TESTS),
        // Still serial by this flag, as the injection step (the same process-wide
        // variants and hooks), and the heavy-fence counts are the process's.
        &[
            "test",
            "--release",
            "--features",
            "membarrier",
            "--test",
            "asymmetric",
            "--test",
            "heavy_fence_placement",
            "--test",
            "panic_injection",
            "--test",
            "lost_wake",
            "--test",
            "fence_api",
            "--test",
            "async_wake",
            "--",
            "--test-threads=1",
        ],
        &[
            (
                "RUSTFLAGS",
                "--cfg rcuref_asymmetric_fence --cfg rcuref_mutants",
            ),
            ("CARGO_TARGET_DIR", "target/asym"),
        ],
    );
}

/// The read side's fence chosen at run time (feature `auto-fence`): without a platform
/// fence (`Full`, or `Heavy` once one is installed at boot), and, on Linux, with
/// `membarrier` found at run time: the asymmetric suite again in that mode, with the
/// control that switches the mode under a reader.
pub fn auto_fence(run: &mut Run) {
    run.cargo(
        "host: the fence chosen at run time (auto-fence): full without a platform fence, \
         heavy once one is installed, never changed once decided, two installs and a \
         decision at once and their control",
        Expect::Tests(AUTO_FENCE_TESTS),
        &[
            "test",
            "--release",
            "--no-default-features",
            "--features",
            "auto-fence",
            "--test",
            "auto_fence",
        ],
        // The mutants cfg for the race's pause points and its control (as the
        // membarrier step, which shares the target folder).
        &[
            ("RUSTFLAGS", "--cfg rcuref_mutants"),
            ("CARGO_TARGET_DIR", "target/auto"),
        ],
    );
    #[cfg(target_os = "linux")]
    run.cargo(
        "host: the fence chosen at run time with membarrier (heavy): the asymmetric suite \
         and its controls in that mode, a mode switched under a reader caught; polled \
         cookies and the preemption tests with that mode's aligned cookies",
        Expect::Tests(AUTO_MEMBARRIER_TESTS),
        &[
            "test",
            "--release",
            "--features",
            "membarrier",
            "--test",
            "asymmetric",
            "--test",
            "auto_fence",
            "--test",
            "async_wake",
            "--test",
            "lost_wake",
            "--test",
            "std_wake_hook",
            "--test",
            "waker_panic",
            "--test",
            "fence_api",
            "--test",
            "polled",
            "--test",
            "preemption",
            "--",
            "--test-threads=1",
        ],
        &[
            ("RUSTFLAGS", "--cfg rcuref_mutants"),
            ("CARGO_TARGET_DIR", "target/auto"),
        ],
    );
}

/// The fences of a single-core build (`--cfg rcuref_unsafe_assume_single_core`, as
/// firmware on one core builds it) on the host: the races of a sleeping future's wake
/// with another driver, which on one core is a higher-priority task preempting the
/// reader, and the control of a step that wakes nobody.
pub fn single_core(run: &mut Run) {
    run.cargo(
        "host: one core's fences (rcuref_unsafe_assume_single_core): a sleeping future's \
         wake raced by another driver's steps, and a step that wakes nobody caught",
        Expect::Tests(SINGLE_CORE_TESTS),
        &[
            "test",
            "--release",
            "--no-default-features",
            "--test",
            "lost_wake",
            "--",
            "--test-threads=1",
        ],
        &[
            (
                "RUSTFLAGS",
                "--cfg rcuref_unsafe_assume_single_core --cfg rcuref_mutants",
            ),
            ("CARGO_TARGET_DIR", "target/single"),
        ],
    );
}

/// `cargo test` over the default members (the library's unit tests, every integration
/// test of the default build, where on Linux the fence is chosen at run time and
/// membarrier found, with the suites of that mode; the doctests; xtask, the runner, the
/// probe): 230 listed by `cargo test -- --list`, less the 2^32 pool test, ignored in
/// debug builds.
const HOST_TESTS: u64 = 229;
/// The library's unit and integration tests with `--no-default-features` (the static
/// full fence): 119 listed, less the 2^32 pool test.
const STATIC_FULL_TESTS: u64 = 118;
/// loom_file_ref 14, loom_rcu 36, loom_pool 11, loom_interrupts 4, loom_call 9,
/// loom_wake 11 (5 models of the real code, 6 that must find a lost wake: 5 broken
/// variants and the default mode's documented one; its 3 ignored tests take minutes and
/// are run by hand).
const LOOM_TESTS: u64 = 85;
/// tests/pool.rs in release: all 8 (the 2^32 one is ignored in debug builds only);
/// polled 10 (its 8 plain tests, the strict-mode and the queued-twice tests); call_queue's
/// 9 plain tests, under strict grace periods; sleeping_review 5 (its release and
/// debug-callbacks tests).
const RELEASE_POOL_TESTS: u64 = 32;
/// `negative_controls` of torture_file_ref 3, torture_rcu 1, torture_pool 4 (the real
/// pool under injected delays, two broken variants, and a control that panics).
const HOST_NEGATIVE_CONTROLS: u64 = 8;
/// preemption 14, interrupts 4, panic_injection 16 (its two heavy-fence panics are the
/// asymmetric build's), call_queue 13 (its 9 plain tests and 4 with broken variants),
/// polled 10 (8 plain, the old cookie on a 4-bit counter, the token's control),
/// sleeping_review 7 (4 plain, a wake between the last poll and the sleep, its control,
/// the every-unlock-wakes control), async_wake 5 (re-polling: its controls need the
/// asymmetric build).
const INJECTION_TESTS: u64 = 69;
/// asymmetric 11, heavy_fence_placement 27, panic_injection 18, async_wake 9 (5 woken
/// by unlocks, 4 controls), lost_wake 6, fence_api 1.
const ASYMMETRIC_TESTS: u64 = 72;
/// auto_fence without membarrier: its 3 scenarios of the mode, the RCU cases, the
/// store-buffering torture, and two installs racing a decision with its control.
const AUTO_FENCE_TESTS: u64 = 8;
/// asymmetric 13 (its 11, the refused late install, the mode-switch control),
/// auto_fence 5 (an install at boot, readers alone, membarrier found, the RCU cases,
/// the store-buffering torture)
/// and async_wake 9 (woken by unlocks in
/// the mode found at run time, and its controls), lost_wake 6 (three races of an unlock
/// with another driver's steps, a flip before a sleeper's announcement at every counter
/// value of two laps, two controls), std_wake_hook 1, waker_panic 1, fence_api 1;
/// polled 10 and preemption 8 (its lap-guard scenarios need a 3-bit counter, which this
/// build's 7-step cookies rule out: they run in the static step).
#[cfg(target_os = "linux")]
const AUTO_MEMBARRIER_TESTS: u64 = 54;
/// lost_wake on one core: its six tests and the control of the step's own wake, which
/// only this build can catch (in the heavy modes a heavy fence wakes the sleepers too).
const SINGLE_CORE_TESTS: u64 = 7;
