//! Asymmetric fences (liburcu's memb flavour): readers pay only a compiler fence, and
//! whoever drives a grace period makes every core execute a full barrier instead.
//!
//! Opt in with `--cfg rcuref_asymmetric_fence` (the binary's choice, like a
//! critical-section implementation) and provide the heavy fence with
//! [`set_heavy_fence!`](crate::set_heavy_fence). On Linux, feature `membarrier` gives a
//! ready one: `Membarrier`.
//!
//! # The contract
//!
//! A heavy fence must not return until every core (hart, CPU) that runs, or may later
//! run, a reader of an `rcuref` domain has executed a full memory barrier (or passed
//! through something that implies one, such as a context switch) **after** the call
//! began; the calling core itself must execute one before and after. Then, for every
//! reader, the heavy fence splits its execution at a point where a full barrier ran:
//! what the reader did before it is visible to the caller when the call returns, and
//! what it does after it sees everything the caller had made visible before the call.
//!
//! Typical implementations: `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` on Linux
//! (an IPI to every CPU running a thread of the process); in a kernel, an IPI broadcast
//! whose handler executes `fence rw,rw` / `dmb ish` / `mfence` and acknowledges, the
//! caller waiting for every acknowledgement.
//!
//! # Why it is enough
//!
//! Without the mode a reader announces itself (slot store), runs a full fence, then
//! reads; a wait step runs a full fence, then scans the slots: one of the two sees the
//! other (the store-buffering argument of the module docs). In this mode the reader's
//! fence is only a compiler fence, so its store may still sit in its core's store
//! buffer while it reads. A wait step (the first of each grace period: below) therefore
//! runs the heavy fence between its own full fence and its scan: the barrier it forces on the reader's core either comes
//! after the reader's announce (which is then visible to the scan) or before the
//! reader's loads (which then see the unpublish, which was visible before the heavy
//! fence began). Unlocks and every slot store stay `Release` and scans `Acquire`, so
//! the ordering of a finished section before reclamation is unchanged.
//!
//! # One fence per grace period
//!
//! The argument above needs a heavy fence that began after the caller's unpublish and
//! returned before the scan; it needs one only at the **first** wait a cookie counts,
//! not at both. Take a reader whose section's loads do not see the unpublish. They come
//! before the barrier that the fence preceding the first wait's completing scan forced
//! on its core, so its announcement (earlier in its program) does too, and is visible
//! to that scan; the scan's step, and every step after it, is a `SeqCst`
//! compare-exchange that the next driver reads, so the announcement is visible to the
//! second wait's scan as well, heavy fence or not. The reader recorded one phase, and
//! one of the two waits waits for that phase: that wait ends only on a scan that read
//! the slot past the announcement (the unlock, or a later section's store: all
//! `Release`, read with `Acquire`), so the section's loads happen before the reclaim.
//! A reader whose loads do see the unpublish needs no waiting at all.
//!
//! So a grace period's second wait needs a heavy fence only for a cookie that counts
//! it as its first: one taken in the middle of a grace period. Where heavy fences may
//! run, cookies are therefore aligned to grace periods: a cookie's target is the end
//! of the first grace period that begins after it (a multiple of 4; `gp::cookie_target`),
//! every grace period's first wait is at a counter value `g % 4 == 1`, and only those
//! waits issue heavy fences. A grace period costs **one** heavy fence where liburcu's
//! memb issues two `membarrier`s (its second orders its readers' unlocks before the
//! free, which are plain stores there and `Release` stores here). The price is latency
//! for a cookie taken mid-grace-period: up to 7 steps instead of 5, one more wait. The
//! claim is the litmus tests `asym-second-wait-unfenced-in-section` and
//! `-after-loads` (a reader that recorded the first wait's new phase while its load
//! still read the old pointer is caught by the unfenced second wait), with the twins
//! `+no-heavy-fence` and `+unaligned-cookie` (`Mutant::UnalignedCookies`: a cookie that
//! counts the unfenced wait first is not safe); `tests/heavy_fence_placement.rs`
//! checks that every cookie's target makes its first wait a grace period's first wait
//! after the cookie, and that every scan of a first wait follows a fence begun at it, and
//! the store-buffering torture of `tests/asymmetric.rs` takes cookies at every point of
//! a grace period and must catch `UnalignedCookies`.
//!
//! # One fence per first wait, whoever drives it
//!
//! The argument above needs, before a scan of the first wait at counter value `g`, a
//! heavy fence that **began** once the counter had reached `g` (so after every
//! unpublish that a cookie counting this wait covers) and has **returned**. Whose it is
//! does not matter. A driver records `g` in the domain's `returned` mark (`Release`)
//! after its heavy fence for `g` returns; a driver that reads `returned == g`
//! (`Acquire`) scans without a fence of its own: each reader's forced barrier happens
//! before that return, the return before the store, the store before this scan. So a
//! grace period costs one heavy fence however many drivers take part and however often
//! a blocking wait rescans while a reader holds it. A driver that finds the mark not
//! yet at `g` while another's fence for `g` is under way (the `begun` hint) issues its
//! own if it is `poll` (which never blocks); a blocking wait instead ends that attempt
//! without scanning and comes back after its back-off, for up to `PATIENCE` attempts,
//! after which it fences for itself (so a driver stopped inside its fence delays the
//! others by a bounded time, never for ever). Two concurrent `synchronize` calls then
//! cost one heavy fence per grace period, not two (`docs/bench/REPORT.md`, grace-period
//! throughput). A blocking wait
//! whose hook sleeps ([`Waiting::sleep`](super::Waiting::sleep)) while another driver's
//! fence for its wait is under way sleeps until that fence returns, instead of
//! spinning beside it: the returning driver (returning or unwinding) runs a full fence
//! and wakes the domain's sleepers, and the sleeper runs one between its announcement
//! and its look at the marks, so one of the two sees the other (store buffering with a
//! fence on each side); `a_waiter_sleeps_until_the_fence_under_way_returns` in
//! `tests/heavy_fence_placement.rs`, with the control `Mutant::FenceReturnWakesNobody`.
//!
//! # The marks
//!
//! The counter is 32 bits and wraps, so a mark that holds a counter value can come to
//! name a wait again a lap later. What holds, and what checks each part:
//!
//! 1. **`returned == g` at a wait `g` means a heavy fence begun at `g` in this lap has
//!    returned.** A driver stores `g` only after its own fence for `g` returns, and only
//!    while registered (lap guard) in `g`'s half with a snapshot of this lap; a store
//!    may land late (its driver stopped after the fence), but the counter cannot come
//!    back into that half until the driver has left it. Before every step into a half,
//!    after the lap guard has found nobody registered there, the stepping driver sets the
//!    mark to "no wait" (`before_step`): every mark of that half's last lap,
//!    late ones included, is older in the mark's modification order, and every driver
//!    that meets a wait of the new lap reads the counter after that step, so it reads
//!    the reset or a mark of this lap. A wait that skips its fence because the domain is
//!    empty writes no mark, so without the reset a lap of such waits (readers that
//!    register per section leave the domain empty between sections) would bring the
//!    counter back to the last fenced wait with its mark still standing, and that wait
//!    would scan a reader whose announce is still in its store buffer with no fence
//!    (a use after free). Checked by the litmus test `asym-mark-a-lap-later` (a
//!    stale mark and a late store against the reset, with the twin
//!    `+no-reset`, `Mutant::MarkKeptAcrossLaps`), by fence counts on a 3-bit counter in
//!    `tests/heavy_fence_placement.rs` (`a_mark_from_the_last_lap_is_not_trusted`,
//!    `a_late_mark_is_not_trusted_a_lap_later`) and by the store-buffering torture of
//!    `tests/asymmetric.rs` on a 3-bit counter with readers that register per section.
//!    A driver that resets late (its step will fail: the counter has left its snapshot)
//!    could wipe a mark of the new lap; it checks the counter first
//!    (`a_late_stepper_does_not_wipe_the_new_laps_mark`, `Mutant::LateReset`), which
//!    narrows that to a window costing at most one extra fence.
//! 2. **`begun == g` is only a hint**: a driver stores its wait before its fence and,
//!    returning or panicking, clears it if it still names that wait (`UnderWay`). A
//!    blocking waiter that reads `begun == g` holds back (at most `PATIENCE` attempts)
//!    only while some driver is inside, or about to enter, its fence for `g`: a panicked
//!    fence, or a driver that stored a late `returned` over a newer mark, leaves no hint
//!    behind (`a_lone_waiter_after_a_panicked_fence_does_not_wait`,
//!    `a_late_mark_leaves_no_waiter_holding_back`, both with `Mutant::BegunLeftBehind`).
//!    Whatever `begun` holds, a waiter fences for itself after `PATIENCE` attempts, so
//!    a wrong hint costs time, never safety.
//! 3. **A mark written before the fence has returned is never trusted**: the store of
//!    `g` follows the fence in program order (`Release`); litmus
//!    `asym-shared-fence-*+fenced-before-ack` and `Mutant::FencedBeforeHeavyFence`.
//!
//! # An empty domain
//!
//! liburcu's `synchronize_rcu` issues no `membarrier` when no thread is registered.
//! The same holds here when every slot of the domain is free (no `Reader`, no dedicated
//! slot; a wait through a `Reader` always has its own): a wait step, after its full
//! fence, reads every slot, and if all are free it scans without a heavy fence. A
//! reader can only enter a section after claiming a slot, and in this mode a
//! successful claim runs a full fence: either the step's reads see the claim (and it
//! fences as usual), or they were ordered before it, and the reader's loads after its
//! fence see everything unpublished before the step's fence (the store-buffering
//! argument again, with the claim in place of the announcement; litmus:
//! `asym-empty-domain-skips-the-fence`, and its twin without the claim's fence). On
//! x86 the claim's compare-exchange is a full barrier by itself, so only the litmus
//! twin can show what the fence is for; `tests/heavy_fence_placement.rs` counts the
//! fences (none for a domain with no slot claimed, one per grace period with one).
//!
//! # How it is checked
//!
//! loom cannot model a barrier that one thread forces on another, so the loom models
//! cover the full-fence mode only. This mode has a host torture of its own
//! (`tests/asymmetric.rs`, `membarrier`): a reader whose announce is held in its store
//! buffer behind writes to lines the writer owns, against a writer that unpublishes,
//! waits and frees. It must see no freed data, and with the heavy fence skipped
//! (`Mutant::SkipHeavyFence`) it must, which it does within one run here. The RCU
//! test bodies also run unchanged in this mode. Where the fence sits is checked with
//! two drivers (`tests/heavy_fence_placement.rs`): every scan of a first wait must
//! follow a heavy fence begun once the counter had reached that wait, including a scan
//! of a wait the driver learnt of from a failed exchange, and every cookie's target
//! must make its first wait a first wait after the cookie (so that wait's fence begins
//! after the cookie); a fence issued only by whoever flipped the
//! counter, or before the flip, or after the scan, fails it (each tried by hand), and so
//! do unaligned cookies (`Mutant::UnalignedCookies`).
//!
//! On two-hart RISC-V in QEMU (rv32 and rv64) the test firmware's heavy fence is an IPI
//! through the CLINT, as a kernel would write it (`targets/firmware/src/hart.rs`), and
//! the RCU suite, the two-hart torture and its broken-grace-period control run in this
//! mode. There a test checks the fence where it must happen: at the first wait of every
//! grace period the other hart runs the fence handler while the counter stands at that
//! wait (with the fence skipped, none does: its control). What a skipped fence does to
//! readers is not reached there: a store-buffering torture of the host's shape read no
//! freed data in 100,000 rounds without the fence, although QEMU does show store
//! buffering in a bare litmus test (0.5-2% of rounds in release builds, none in debug
//! builds; checked by the races suite): under TCG the writer's path from unpublishing
//! to scanning outlasts the reader's store-buffer drain.
//!
//! Cost: a read section loses its only barrier (x86: no locked instruction at all);
//! every grace period pays one heavy fence (`membarrier` takes microseconds), and a
//! cookie taken in the middle of a grace period waits for the next one (up to 7 steps
//! of the counter instead of 5). Worth it where reads vastly outnumber grace periods.
//!
//! # Chosen at run time (feature `auto-fence`)
//!
//! The cfg is a static choice: the binary promises a heavy fence. Where whether one
//! exists is only known when the program runs (a Linux kernel with or without
//! `membarrier`; firmware that sets up its IPI at boot), feature `auto-fence` lets the
//! process decide once, as liburcu's memb flavour does at start-up. On a Linux target
//! the default feature `membarrier` does the same with membarrier as the fence to find,
//! so a default hosted build is in this mode; firmware's default build is the static
//! full fence (nothing to find), and `default-features = false` makes it that on Linux
//! too: the choice for a process under a seccomp filter that kills it on a system call
//! the filter does not list, since the first grace period calls `membarrier` (a filter
//! that answers `EPERM` or `ENOSYS` is fine: the mode is then decided full). This
//! works as follows:
//!
//! * a reader reads one read-mostly word (on a line of its own where padding is on):
//!   [`FenceMode::Heavy`] gets the compiler fence, anything else (not decided yet, or
//!   [`FenceMode::Full`]) the full fence, which is right against a grace period of
//!   either kind. A reader never decides. An outermost lock first looks at the phase
//!   word it loads anyway: a flip that finds the mode already `Heavy` stores the phase
//!   with a second bit (`encoding::PHASE_HEAVY`), and a lock that reads it takes the
//!   compiler fence without loading the mode (a word with the bit can only come from a
//!   driver that read the final `Heavy`, however late its store lands; litmus
//!   `auto-phase-word-heavy-bit-*`, control `Mutant::PhaseSaysHeavy`). Measured with
//!   `gp urcu-paced 1` (benches/, one reader, 4 runs each, 2-core Xeon VM), as reads
//!   against the static heavy build's: 0.78x with the mode's load and branch, 0.83x
//!   with the bit (writer at 10 grace periods/s); 0.74x and 0.84x with the writer at
//!   30,000/s. The marked path must fall through: as an early return it was laid out
//!   as a taken branch, and on a 2-core EPYC VM the same loop made 0.6x the static heavy
//!   build's reads; with the unmarked path out of line (`sync::reader_fence_unmarked`)
//!   about the same (`docs/bench/ANALYSIS.md`).
//! * a grace period's wait step acts only on the final mode: if nothing has decided
//!   yet, it decides (`fence_mode`): `Heavy` if a fence was `install`ed, or, with
//!   feature `membarrier` (default) on Linux, if the kernel registers the process for
//!   `MEMBARRIER_CMD_PRIVATE_EXPEDITED`; `Full` otherwise. In `Heavy` it runs
//!   everything described above; in `Full`, no heavy fence at all.
//! * **the mode never changes once decided** (`install` then fails with
//!   [`Error::Decided`](crate::Error::Decided), a second fence with
//!   [`Error::Busy`](crate::Error::Busy)). That is the whole safety argument: only the
//!   pairing "reader with a compiler fence, wait without a heavy fence" is wrong, a
//!   reader uses the compiler fence only after reading the final `Heavy`, and every
//!   wait that could scan it acts on that same final value. Readers that entered
//!   before the decision used the full fence. A mode that could switch with a reader
//!   inside is the broken variant `Mutant::ModeSwitchesLive`; the store-buffering
//!   torture of `tests/asymmetric.rs`, run in this build, catches it.
//!
//! Readers never decide, so until the first grace period they pay the full fence: a
//! program that starts reading long before it first waits calls `fence_mode` at
//! start-up (memb decides in a constructor). Firmware installs its fence at boot, once
//! the IPI works and before its first grace period (readers may already run):
//! `rcu::heavy::install::<MyIpiFence>()`. Cost over
//! the static choices: a predictable branch per outermost lock (and the mode's load
//! until a flip has marked the phase word); the
//! domain keeps the heavy-fence marks in both modes. With `--cfg
//! rcuref_asymmetric_fence` the feature does nothing (the static choice wins).

/// A heavy fence: see the module docs for the contract.
///
/// # Safety
/// Implementing this promises the contract of the [module docs](self): when
/// `heavy_fence` returns, every core that runs or may run a reader has executed a full
/// memory barrier since the call began, and the calling core one before and after.
/// `rcuref` relies on it for memory safety under `--cfg rcuref_asymmetric_fence`.
///
/// # Who calls it
/// Whichever context drives a wait: a blocking wait, a
/// [`GpCookie::poll`](super::GpCookie::poll) (which issues its own fence rather than
/// wait for another driver's, so also from an interrupt handler), a `DeferQueue`'s
/// collection, the C API's `rcuref_poll`. So calls
/// run on several cores at once, and a handler's call may interrupt one in progress on
/// its own core: an implementation must be reentrant (no lock held across the call, no
/// single "request in flight" word). An IPI fence that waits for acknowledgements
/// needs the other cores able to take its interrupt while they wait themselves: two
/// cores that both call it from handlers that mask that interrupt wait for each other
/// for ever. Either serve a request pending on the calling core while waiting (with
/// the served ticket only ever moving forward: the repository's test firmware does,
/// `targets/firmware/src/ipi.rs`, tested with every core fencing with the interrupt
/// masked and a control that deadlocks, a serve interrupted by a newer one, and a
/// ticket that wraps), give the fence's interrupt a priority above
/// every handler that polls, or poll grace periods only from thread context in this
/// mode.
pub unsafe trait HeavyFence {
    /// Makes every core execute a full memory barrier (see the trait's safety contract).
    fn heavy_fence();
}

/// Names the [`HeavyFence`] implementation `rcuref` uses under
/// `--cfg rcuref_asymmetric_fence`. Invoke it once in the binary, e.g.
/// `rcuref::set_heavy_fence!(rcuref::rcu::heavy::Membarrier);`. Without it, a binary built with
/// the cfg fails to link, naming `_rcuref_heavy_fence_v1`.
///
/// The link-time symbol is the same kind of hook as `critical-section`'s: in edition 2021
/// any crate can define a `#[no_mangle]` function of that name without writing `unsafe`
/// (edition 2024 requires `#[unsafe(no_mangle)]`). Defining it by hand, bypassing the
/// unsafe [`HeavyFence`] contract, is the binary's promise all the same.
#[macro_export]
macro_rules! set_heavy_fence {
    ($t:ty) => {
        #[no_mangle]
        fn _rcuref_heavy_fence_v1() {
            <$t as $crate::rcu::heavy::HeavyFence>::heavy_fence()
        }
    };
}

#[cfg(rcuref_heavy)]
extern "Rust" {
    fn _rcuref_heavy_fence_v1();
}

/// The heavy fence: the binary's (`--cfg rcuref_asymmetric_fence`), or the one chosen at
/// run time (feature `auto-fence`; only called once [`on`] has said the mode is heavy).
#[cfg(rcuref_fences)]
#[inline]
pub(crate) fn heavy_fence() {
    divert!(SkipHeavyFence => ());
    #[cfg(rcuref_heavy)]
    // SAFETY: the symbol is defined by `set_heavy_fence!`, which forwards to a
    // `HeavyFence` implementation; calling it has no precondition.
    unsafe {
        _rcuref_heavy_fence_v1()
    }
    #[cfg(rcuref_auto)]
    auto::heavy_fence();
}

/// Whether grace periods must issue heavy fences: always under `--cfg
/// rcuref_asymmetric_fence`; with feature `auto-fence`, once the mode is decided heavy
/// (deciding it now if nobody has: writers act only on the final choice); never
/// otherwise.
#[cfg(rcuref_fences)]
#[inline(always)]
pub(crate) fn on() -> bool {
    #[cfg(rcuref_heavy)]
    return true;
    #[cfg(rcuref_auto)]
    return auto::decided() == FenceMode::Heavy;
}

#[cfg(rcuref_auto)]
pub(crate) use auto::readers_skip_fence;

/// How the read side orders its sections in a build that chooses at run time (feature
/// `auto-fence`; see the module docs, "Chosen at run time").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FenceMode {
    /// Readers issue a full fence after announcing a section; grace periods issue no
    /// heavy fence (the static full fence's costs).
    Full,
    /// Readers issue only a compiler fence; the first wait of every grace period issues a heavy
    /// fence (the asymmetric mode's costs).
    Heavy,
}

#[cfg(all(rcuref_auto, rcuref_variants))]
pub(crate) use auto::force;
#[cfg(rcuref_auto)]
pub use auto::{fence_mode, install, is_installed};

/// The read side's mode: with feature `auto-fence` where a static choice overrides it
/// (`--cfg rcuref_asymmetric_fence`: always [`FenceMode::Heavy`]; loom: always
/// [`FenceMode::Full`]), so that a crate that calls it at boot builds in every mode.
#[cfg(all(rcuref_auto_fence, not(rcuref_auto)))]
pub fn fence_mode() -> FenceMode {
    if cfg!(rcuref_heavy) {
        FenceMode::Heavy
    } else {
        FenceMode::Full
    }
}

/// [`install`](self#chosen-at-run-time-feature-auto-fence) where a static choice
/// overrides the run-time one: nothing to install. `Err(Error::Busy)` under `--cfg
/// rcuref_asymmetric_fence` (the binary's `set_heavy_fence!` fence is the one used),
/// `Err(Error::Decided)` under loom (always `Full`).
///
/// # Errors
/// Always, as above.
#[cfg(all(rcuref_auto_fence, not(rcuref_auto)))]
pub fn install<F: HeavyFence>() -> Result<(), crate::Error> {
    Err(if cfg!(rcuref_heavy) {
        crate::Error::Busy
    } else {
        crate::Error::Decided
    })
}

#[cfg(rcuref_auto)]
mod auto {
    //! The run-time choice. INVARIANTS:
    //! * `mode` is `UNDECIDED` until its one successful compare-exchange to `FULL` or
    //!   `HEAVY`, and never changes after it: every context that acts on the mode acts
    //!   on that one final value (writers decide before they act, readers treat
    //!   "undecided" as `FULL`, which is safe against either).
    //! * `fence` is null or a function made from a [`HeavyFence`](super::HeavyFence)
    //!   implementation's `heavy_fence`, set once; `mode` is `HEAVY` only if `fence` was
    //!   set before (in `fence`'s modification order, and `Release`/`Acquire` make it
    //!   visible to whoever reads `HEAVY` with `Acquire`).
    use super::FenceMode;
    use crate::error::Error;
    use crate::pad::Line;
    use crate::sync::Ordering::{AcqRel, Acquire, Relaxed, Release};
    use crate::sync::{AtomicPtr, AtomicU32};

    const UNDECIDED: u32 = 0;
    const FULL: u32 = 1;
    const HEAVY: u32 = 2;

    struct Choice {
        mode: AtomicU32,
        fence: AtomicPtr<()>,
    }

    /// On a line of its own where padding is on: every outermost lock reads `mode`.
    static CHOICE: Line<Choice> = Line(Choice {
        mode: AtomicU32::new(UNDECIDED),
        fence: AtomicPtr::new(core::ptr::null_mut()),
    });

    /// Whether a reader may end its lock with a compiler fence instead of a full one:
    /// once the mode has been decided heavy. A reader never decides: an undecided mode
    /// gets the full fence, which is safe against a grace period of either mode.
    #[inline(always)]
    pub(crate) fn readers_skip_fence() -> bool {
        // Relaxed: the reader only needs the value. `HEAVY` is final, so every grace
        // period acts on it too; anything else gets the full fence.
        CHOICE.0.mode.load(Relaxed) == HEAVY
    }

    /// The final mode, deciding it if nobody has.
    #[inline]
    pub(super) fn decided() -> FenceMode {
        match CHOICE.0.mode.load(Acquire) {
            HEAVY => FenceMode::Heavy,
            FULL => FenceMode::Full,
            _ => decide(),
        }
    }

    #[cold]
    #[inline(never)]
    fn decide() -> FenceMode {
        let m = if !CHOICE.0.fence.load(Acquire).is_null() || detect() {
            HEAVY
        } else {
            FULL
        };
        pause_point!(DecideAfterLook);
        // The first decision wins; a loser acts on the winner's.
        let m = match CHOICE
            .0
            .mode
            .compare_exchange(UNDECIDED, m, AcqRel, Acquire)
        {
            Ok(_) => m,
            Err(won) => won,
        };
        if m == HEAVY {
            FenceMode::Heavy
        } else {
            FenceMode::Full
        }
    }

    /// Finds a heavy fence of the platform, if there is one, and offers it as the
    /// fence (first come: an installed one stays). Idempotent; never blocks.
    fn detect() -> bool {
        #[cfg(all(rcuref_membarrier, not(miri)))]
        if super::membarrier::register() {
            let f = <super::Membarrier as super::HeavyFence>::heavy_fence as fn();
            let _ = CHOICE.0.fence.compare_exchange(
                core::ptr::null_mut(),
                f as *mut (),
                Release,
                Relaxed,
            );
            return true;
        }
        false
    }

    pub(super) fn heavy_fence() {
        let p = CHOICE.0.fence.load(Acquire);
        // `on()` said heavy, so a fence was set before the mode (invariant): non-null.
        if !p.is_null() {
            // SAFETY: `fence` only ever holds null or a pointer made from a `fn()` (a
            // `HeavyFence::heavy_fence`) in `install` or `detect`; function and data
            // pointers have the same size and representation on every target this
            // crate supports (as in `log.rs`).
            let f: fn() = unsafe { core::mem::transmute::<*mut (), fn()>(p) };
            f();
        }
    }

    /// Installs `F` as the heavy fence and makes the read side's mode
    /// [`Heavy`](FenceMode::Heavy), if the mode is not decided yet: call it at boot,
    /// once the fence works (its IPI is set up), before the first grace period. Readers
    /// that entered their sections before it ran used the full fence, which stays
    /// correct.
    ///
    /// # Errors
    /// [`Error::Busy`] if a heavy fence was already installed (or found: membarrier) and
    /// the mode is heavy: that fence is the one grace periods call.
    /// [`Error::Decided`] if the mode was decided without one (a grace period asked
    /// first), or was decided full while another context's install, stopped between
    /// setting its fence and the mode, had not finished: the mode never changes once
    /// decided, because a reader inside a section with a compiler fence, or a wait that
    /// skipped its heavy fence, could otherwise meet the other mode
    /// (`Mutant::ModeSwitchesLive`). After `Decided` the fence, if set, is never called.
    pub fn install<F: super::HeavyFence>() -> Result<(), Error> {
        divert!(ModeSwitchesLive => crate::rcu::broken::install_live(F::heavy_fence));
        let f = F::heavy_fence as fn();
        if CHOICE.0.mode.load(Acquire) == FULL {
            return Err(Error::Decided);
        }
        CHOICE
            .0
            .fence
            .compare_exchange(core::ptr::null_mut(), f as *mut (), Release, Relaxed)
            .map_err(|_| {
                divert!(BusyBeforeTheMode => Error::Busy);
                // Another context's fence is set; its install may not have set the mode
                // yet, and a grace period may be deciding it now. `Busy` only once the
                // mode is heavy (deciding it, which a set fence makes heavy unless full
                // has already won): "installed" must mean "in effect".
                match decided() {
                    FenceMode::Heavy => Error::Busy,
                    FenceMode::Full => Error::Decided,
                }
            })?;
        pause_point!(InstallAfterFence);
        match CHOICE
            .0
            .mode
            .compare_exchange(UNDECIDED, HEAVY, AcqRel, Acquire)
        {
            Ok(_) | Err(HEAVY) => Ok(()),
            Err(_) => Err(Error::Decided),
        }
    }

    /// Whether `F` is the heavy fence in effect: installed (by [`install`], or found:
    /// with feature `membarrier`, `Membarrier`) and the mode decided heavy, so that grace
    /// periods call it. Decides nothing. For a caller whose `install::<F>()` was refused
    /// as [`Error::Busy`] while another context installed the same `F` (the C API's
    /// `rcuref_heavy_install`, which two contexts may call at once).
    pub fn is_installed<F: super::HeavyFence>() -> bool {
        CHOICE.0.mode.load(Acquire) == HEAVY
            && CHOICE.0.fence.load(Acquire) == F::heavy_fence as fn() as *mut ()
    }

    /// The read side's mode, deciding it now if nothing has (a program that wants the
    /// first grace period not to pay membarrier's registration calls it at start-up).
    /// With feature `membarrier` on Linux: `Heavy` when the kernel offers
    /// `MEMBARRIER_CMD_PRIVATE_EXPEDITED`, else `Full`; elsewhere `Heavy` only if a
    /// fence was [`install`]ed first.
    pub fn fence_mode() -> FenceMode {
        decided()
    }

    /// `Mutant::ModeSwitchesLive`'s access (src/mutants/rcu.rs): set the mode to `m`
    /// whatever it was.
    #[cfg(rcuref_variants)]
    pub(crate) fn force(m: FenceMode, fence: Option<fn()>) {
        if let Some(f) = fence {
            CHOICE.0.fence.store(f as *mut (), Release);
        }
        let v = if m == FenceMode::Heavy { HEAVY } else { FULL };
        CHOICE.0.mode.store(v, Release);
    }
}

/// What a heavy-fence mark holds when it names no wait: an even value (waits are odd),
/// so it never equals the wait a driver compares it with.
#[cfg(rcuref_fences)]
pub(super) const NO_WAIT: u32 = 0;

/// A domain's record of heavy fences (asymmetric-fence builds).
///
/// INVARIANTS (module docs, "The marks"):
/// * `returned` is [`NO_WAIT`] or a wait `w` **of the counter's current lap of `w`'s
///   half** for which some driver's heavy fence, begun once the counter had reached `w`,
///   has returned. It is written only by a driver registered (lap guard) in `w`'s half,
///   and set back to `NO_WAIT` before every step that carries the counter into a half
///   (`before_step`), after the lap guard found nobody registered there.
/// * `begun` is `NO_WAIT` or a wait whose heavy fence some driver has begun and, as far
///   as that driver knows, not yet left: a driver clears it (if it still names its wait)
///   when its fence returns or panics. A hint for blocking waiters; nothing about safety
///   depends on it.
#[cfg(rcuref_fences)]
pub(crate) struct FenceMarks {
    pub(super) begun: crate::sync::AtomicU32,
    pub(super) returned: crate::sync::AtomicU32,
}

#[cfg(rcuref_fences)]
impl FenceMarks {
    /// No fence yet.
    pub(crate) const fn new() -> Self {
        FenceMarks {
            begun: crate::sync::AtomicU32::new(NO_WAIT),
            returned: crate::sync::AtomicU32::new(NO_WAIT),
        }
    }
}

/// A driver's heavy fence for wait `g` of `rcu`, under way: leaving it, by returning or
/// by a panic, clears `begun` if it still names `g`, so that no waiter holds back for a
/// fence that is no longer running, then wakes the waits that sleep until it returns
/// ([`sleep_for_fence`]).
#[cfg(rcuref_fences)]
pub(super) struct UnderWay<'a, const N: usize> {
    pub(super) rcu: &'a super::Rcu<N>,
    pub(super) g: u32,
}

#[cfg(rcuref_fences)]
impl<const N: usize> Drop for UnderWay<'_, N> {
    fn drop(&mut self) {
        use crate::sync::Ordering::{Relaxed, SeqCst};
        divert!(BegunLeftBehind => ());
        // Only if still ours to clear: a driver that began this wait's fence (or a later
        // wait's) since then keeps its hint.
        let _ = self
            .rcu
            .fences
            .0
            .begun
            .compare_exchange(self.g, NO_WAIT, Relaxed, Relaxed);
        divert!(FenceReturnWakesNobody => ());
        // The mark (stored before this drop when the fence returned) and the cleared hint
        // before the load of the announcement, against a sleeper's announcement before
        // its look at them (`sleep_for_fence`): store buffering with a full fence on
        // each side, so either it sees the fence over or this sees it announced. One
        // fence per heavy fence (which costs microseconds).
        crate::sync::fence(SeqCst);
        self.rcu.wake_all_sleepers();
    }
}

/// A blocking wait about to sleep (`Waiting::sleep`, announced): if another driver's
/// heavy fence for the wait the counter stands at is under way, sleeps through `sleep`
/// until that fence returns (its driver wakes the domain's sleepers, [`UnderWay`]) and
/// returns `true`; the wait then scans without a fence of its own. `false` (nothing
/// done) otherwise, or for a wait that is no longer `patient` (it fences for itself).
/// The heavy mode only: in the others no fence is ever under way.
#[cfg(rcuref_fences)]
pub(super) fn sleep_for_fence<const N: usize>(
    rcu: &super::Rcu<N>,
    patient: bool,
    sleep: impl FnOnce(),
) -> bool {
    use crate::sync::Ordering::Relaxed;
    if !patient || !on() {
        return false;
    }
    // The announcement (made by the caller, with a full fence after it:
    // `announce_sleep`) before the look at the marks: pairs with the fence in
    // `UnderWay::drop`.
    let g = rcu.gp.0.load(Relaxed);
    let marks = &rcu.fences.0;
    let under_way =
        g & 1 == 1 && marks.begun.load(Relaxed) == g && marks.returned.load(Relaxed) != g;
    if under_way {
        sleep();
    }
    under_way
}

/// A step of the counter from `g` to `next` that its lap guard has allowed, about to be
/// tried: if it carries the counter into the other half of its range (where the lap
/// guard has just found no driver registered), forget the last heavy-fence mark, which
/// may name a wait of that half from its last lap. Nothing otherwise, and nothing
/// outside the asymmetric-fence mode.
///
/// Relaxed is enough. A later driver that meets a wait of the new lap read the counter
/// at or after this step's `SeqCst` exchange (or a later step's: they continue its
/// release sequence), which is sequenced after this store, so this store happens before
/// its load of the mark, which cannot read anything older. And every store of a mark of
/// that half from the last lap was made by a driver registered in the half, before it
/// left (`SeqCst`), which the lap guard's `SeqCst` load that read the count at zero
/// acquired: those stores happen before this one and come before it in the mark's
/// modification order (litmus: `asym-mark-a-lap-later`).
///
/// Not when the counter has already left `g`: this driver's exchange will fail, and
/// whoever made the step did its own reset, while this one, late, could only wipe a
/// mark of the new lap and cost its wait a second heavy fence (a driver stopped after
/// its scan: `Mutant::LateReset`). The check leaves a window (a driver stopped between it
/// and the store), which costs at most that one extra fence, never safety: a reset is
/// always allowed.
#[inline(always)]
#[allow(unused_variables)]
pub(crate) fn before_step<const N: usize>(rcu: &super::Rcu<N>, g: u32, next: u32) {
    #[cfg(rcuref_fences)]
    {
        use crate::sync::Ordering::Relaxed;
        divert!(MarkKeptAcrossLaps => ());
        divert!(LateReset => super::broken::late_reset(rcu, g, next));
        // Relaxed: a value other than `g` is newer (coherence with the snapshot `g`), so
        // the exchange from `g` fails; `g` itself lets the reset go ahead, as before.
        if super::encoding::half(next) != super::encoding::half(g) && rcu.gp.0.load(Relaxed) == g {
            rcu.fences.0.returned.store(NO_WAIT, Relaxed);
        }
    }
}

/// The heavy fence of wait step `g` of `rcu`, between the step's full fence and its
/// scan (asymmetric-fence mode; nothing otherwise): one per grace period, at its first
/// wait (`g % 4 == 1`), whoever drives it; a second wait issues none.
/// Returns whether the caller may scan now; `false` only for a `patient` caller (a
/// blocking wait) that found another driver's fence for this wait under way, and
/// should come back once it has returned rather than issue one more.
///
/// A driver whose `Acquire` load finds `returned == g` skips the fence: another
/// driver's (or its own earlier) heavy fence began once the counter had reached this
/// wait, in this lap, and has returned, and its `Release` store makes that return
/// happen before this scan, so every reader's barrier it forced happens before the scan
/// too (module docs, "One fence per first wait, whoever drives it"). A scan repeated while a reader holds the
/// wait, or a second driver at the same wait, costs no further heavy fence.
#[inline(always)]
#[allow(unused_variables)]
pub(crate) fn in_wait_step<const N: usize>(rcu: &super::Rcu<N>, g: u32, patient: bool) -> bool {
    #[cfg(rcuref_fences)]
    {
        use crate::sync::Ordering::{Acquire, Relaxed, Release};
        if !on() {
            return true; // readers run the full fence (`auto-fence` decided `Full`)
        }
        divert!(HeavyFenceEveryScan | FenceEmptyDomain | ImpatientWaiters | FencedBeforeHeavyFence
            => super::broken::in_wait_step(rcu, g, patient));
        // A grace period's second wait is no cookie's first (`gp::cookie_target`): every
        // cookie it serves had its first wait fenced, which is all a cookie needs
        // (module docs, "One fence per grace period").
        if !super::encoding::is_first_wait(g) {
            return true;
        }
        let marks = &rcu.fences.0;
        if marks.returned.load(Acquire) == g {
            return true;
        }
        // No reader can be affected: every slot is free (no `Reader`, no dedicated
        // slot). A reader that claims one later runs a full fence after its claim
        // (`ops::claim`), so its loads see what was unpublished before this step's full
        // fence (module docs, "An empty domain"). Not marked: the next scan looks again.
        if rcu.slots.iter().all(|s| super::ops::scan_slot(&s.0) == 0) {
            return true;
        }
        if patient && marks.begun.load(Relaxed) == g {
            return false; // another driver is fencing this wait: no scan, no step
        }
        marks.begun.store(g, Relaxed);
        let _under_way = UnderWay { rcu, g };
        heavy_fence();
        marks.returned.store(g, Release);
    }
    true
}

/// Whether a sleeping wait may count on a reader's unlock to wake it: no unlock misses
/// a wait's announcement (`Waiting::sleep`). True in the asymmetric mode (the
/// announcement is followed by a heavy fence, which orders every reader's unlock store
/// before its load of the announcement, or makes the wait's next poll see the unlock:
/// litmus `asym-wake-after-unlock-*`) and on one core (`--cfg
/// rcuref_unsafe_assume_single_core`: an unlock in a handler or another task is ordered
/// by the core's program order). False in the full-fence mode on more than one core:
/// nothing orders an unlock's store before its load of the announcement, so a wake can
/// be missed, which a blocking sleep sleeps out (its bound) and a future cannot (no
/// timeout): futures woken through `Wakers` re-poll there instead.
///
/// With feature `auto-fence`, true once the mode is decided heavy (a future is a
/// writer: it decides if nobody has). The one place that decides it.
#[inline(always)]
pub(crate) fn wakes_are_reliable() -> bool {
    if cfg!(any(
        rcuref_heavy,
        all(not(loom), rcuref_unsafe_assume_single_core)
    )) {
        return true;
    }
    #[cfg(rcuref_auto)]
    return on();
    #[cfg(not(rcuref_auto))]
    return false;
}

/// The heavy fence of a sleeping wait, between its announcement and its last poll
/// (`Waiting::sleep`; where heavy fences are on, nothing otherwise): a reader's unlock
/// between its store and its load of the announcement is made to order the two, so
/// either the poll sees the unlock or the unlock sees the announcement (litmus
/// `asym-wake-after-unlock-*`). loom cannot model a heavy fence, so under loom this
/// calls the model's cooperative one, if the model installed it
/// (`mutants::set_model_heavy_fence`, `tests/loom_wake.rs`).
#[inline(always)]
pub(crate) fn after_announce() {
    divert!(SleepWithoutHeavyFence => ());
    #[cfg(rcuref_fences)]
    if on() {
        heavy_fence();
    }
    #[cfg(loom)]
    crate::mutants::model_heavy_fence();
}

/// Linux's `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: an IPI to every CPU running a
/// thread of this process, each of which executes a full barrier (feature
/// `membarrier`, Linux 4.14 or later). The process registers itself on first use.
///
/// # Panics
/// If the kernel offers neither the expedited command nor the global one
/// (`MEMBARRIER_CMD_GLOBAL`, slower, used as a fallback): the contract cannot be met, so
/// this build of the binary cannot run there.
#[cfg(rcuref_membarrier)]
#[cfg_attr(docsrs, doc(cfg(all(feature = "membarrier", target_os = "linux"))))]
pub struct Membarrier;

#[cfg(rcuref_membarrier)]
mod membarrier {
    /// Registers the process for the expedited command (idempotent): whether the kernel
    /// offers it. What `auto-fence` asks before it picks the heavy mode.
    #[cfg(rcuref_auto)]
    pub(super) fn register() -> bool {
        membarrier(CMD_REGISTER_PRIVATE_EXPEDITED)
    }

    use portable_atomic::{AtomicU8, Ordering::Relaxed};

    const CMD_GLOBAL: libc::c_long = 1;
    const CMD_PRIVATE_EXPEDITED: libc::c_long = 8;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 16;

    /// 0: not tried yet; 1: expedited (registered); 2: global fallback.
    static MODE: AtomicU8 = AtomicU8::new(0);

    fn membarrier(cmd: libc::c_long) -> bool {
        // SAFETY: membarrier takes a command and flags (0), reads and writes no memory
        // of ours; an unsupported command just returns -1.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_long) == 0 }
    }

    // SAFETY: MEMBARRIER_CMD_PRIVATE_EXPEDITED returns only after every CPU running a
    // thread of this process has executed a full barrier (threads not running execute
    // one when they are scheduled in), and the system call itself is a full barrier on
    // the calling CPU; MEMBARRIER_CMD_GLOBAL waits for every CPU to pass through a
    // context switch or idle (an RCU grace period of the kernel), which implies one.
    unsafe impl super::HeavyFence for super::Membarrier {
        fn heavy_fence() {
            let mode = match MODE.load(Relaxed) {
                0 => {
                    let m = if membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) {
                        1
                    } else {
                        2
                    };
                    MODE.store(m, Relaxed);
                    m
                }
                m => m,
            };
            let ok = if mode == 1 {
                membarrier(CMD_PRIVATE_EXPEDITED)
            } else {
                membarrier(CMD_GLOBAL)
            };
            assert!(
                ok,
                "rcuref: membarrier is not available: this binary was built with \
                 --cfg rcuref_asymmetric_fence and cannot run on this kernel"
            );
        }
    }
}
