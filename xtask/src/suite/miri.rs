//! Miri: the plain tests, several seeds over the tortures, a 32-bit host.

use crate::steps::{Expect, Run};

/// Miri's three steps (nightly).
pub fn all(run: &mut Run) {
    run.cargo(
        "host: Miri",
        Expect::Tests(MIRI_TESTS),
        &[
            "+nightly",
            "miri",
            "test",
            "--test",
            "file_ref",
            "--test",
            "torture_file_ref",
            "--test",
            "warnings",
            "--test",
            "rcu",
            "--test",
            "torture_rcu",
            "--test",
            "pool",
            "--test",
            "torture_pool",
        ],
        &[("MIRIFLAGS", "-Zmiri-strict-provenance")],
    );
    // Miri's weak-memory emulation picks schedules and store-buffer outcomes from
    // its seed: several seeds over the concurrent tortures. One process a seed, one
    // after the other: `-Zmiri-many-seeds` runs the seeds at once on one stdout, and
    // their interleaved libtest lines ("test result: okok. 4 passed ...") left the
    // step's count of passed tests to chance (4 of the 6 in a ci-local run).
    for seed in 0..MIRI_SEEDS {
        let flags = format!("-Zmiri-strict-provenance -Zmiri-seed={seed}");
        run.cargo(
            &format!(
                "host: Miri, seed {seed} of {MIRI_SEEDS} (schedules and weak-memory \
                 outcomes) over the tortures"
            ),
            Expect::Tests(MIRI_TORTURES),
            &[
                "+nightly",
                "miri",
                "test",
                "--test",
                "torture_file_ref",
                "--test",
                "torture_rcu",
                "--test",
                "torture_pool",
            ],
            &[("MIRIFLAGS", &flags)],
        );
    }
    // A 32-bit host: FileRef's native width and the pool's counts are 32-bit there.
    run.cargo(
        "host: Miri on i686 (32-bit counts: FileRef, its torture, the pool)",
        Expect::Tests(MIRI_I686_TESTS),
        &[
            "+nightly",
            "miri",
            "test",
            "--target",
            "i686-unknown-linux-gnu",
            "--test",
            "file_ref",
            "--test",
            "torture_file_ref",
            "--test",
            "pool",
        ],
        &[("MIRIFLAGS", "-Zmiri-strict-provenance")],
    );
}

/// Miri over file_ref 11, torture_file_ref 4, warnings 2, rcu 40, torture_rcu 1, pool 7,
/// torture_pool 1 (a debug build without mutants; the 2^32 pool test is ignored there).
const MIRI_TESTS: u64 = 66;
/// torture_file_ref 4, torture_rcu 1, torture_pool 1 (no mutants: no controls), each seed.
const MIRI_TORTURES: u64 = 6;
/// The seeds the tortures run under Miri, one process each.
const MIRI_SEEDS: u32 = 4;
/// file_ref 11, torture_file_ref 4 and pool 7 (the 2^32 test ignored) on i686.
const MIRI_I686_TESTS: u64 = 22;
