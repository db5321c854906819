//! Deliberately broken variants, for proving that the tests can fail, and the hooks
//! tests use to stop, interrupt or reshape the library at chosen points.
//!
//! * `--cfg loom` or `--cfg rcuref_mutants`: a test selects one variant for the whole
//!   process at run time ([`select`]), runs a harness, and expects it to fail; pause
//!   points ([`set_pause_hook`]) and interrupt points ([`set_interrupt`]) are live.
//! * `--cfg rcuref_static_mutant` with `RCUREF_STATIC_MUTANT=<Variant>` in the build's
//!   environment: that one variant is compiled in as a constant, so the object code is
//!   the broken code and nothing else (the litmus suite's code-tie check compiles one
//!   for AArch64 and RISC-V and must see its instructions change). Only variants whose
//!   code is not behind a cfg of the run-time builds exist there.
//!
//! Normal builds contain none of this: the `mutant!` checks fold to `false`.

// The broken tables and twins, by area (each module is the real code's counterpart).
pub(crate) mod file_ref;

#[cfg(rcuref_hooks)]
use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// Defines `Mutant` and its names, so a variant can be chosen by name at build time.
macro_rules! mutants {
    ($(#[$m:meta])* pub enum Mutant { $($(#[$vm:meta])* $v:ident,)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub enum Mutant { $($(#[$vm])* $v,)* }

        impl Mutant {
            /// Every variant, `None` first.
            pub const ALL: &'static [Mutant] = &[$(Mutant::$v,)*];

            /// The variant's name, as written in the source.
            pub const fn name(self) -> &'static str {
                match self { $(Mutant::$v => stringify!($v),)* }
            }

            /// The variant called `name`, if there is one.
            pub const fn from_name(name: &str) -> Option<Mutant> {
                let mut i = 0;
                while i < Self::ALL.len() {
                    if same(Self::ALL[i].name(), name) {
                        return Some(Self::ALL[i]);
                    }
                    i += 1;
                }
                None
            }
        }
    };
}

/// `a == b`, in a `const fn`.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The variant compiled in by `--cfg rcuref_static_mutant` (named by the build's
/// `RCUREF_STATIC_MUTANT`; an unknown name fails the build).
#[cfg(rcuref_static_mutant)]
pub const STATIC: Mutant = match Mutant::from_name(env!("RCUREF_STATIC_MUTANT")) {
    Some(m) => m,
    None => panic!("RCUREF_STATIC_MUTANT names no variant of rcuref::mutants::Mutant"),
};

/// Whether `m` is the variant compiled in (static builds).
#[cfg(rcuref_static_mutant)]
pub const fn is_static(m: Mutant) -> bool {
    STATIC as u8 == m as u8
}

mutants! {
    /// A broken variant of one of the primitives.
    pub enum Mutant {
    /// No mutant: the real code.
    None,
    /// `get` uses a relaxed add (Linus's rejected "relaxed get for files").
    GetRelaxed,
    /// A failed `get` leaves its increment behind (mainline's behaviour: dead-zone drift).
    NoDriftRepair,
    /// `inc` is a plain add (mainline's): saturation is not sticky, so increments walk a
    /// count through the zones and back to a small live value.
    IncNotSticky,
    /// `put` decrements and marks dead without release/acquire ordering.
    PutRelaxed,
    /// `put`'s slow path re-reads the counter instead of using the decremented value.
    PutRereads,
    /// `put` marks NOREF dead with a plain store instead of a compare-exchange.
    PutStoresDead,
    /// `put_close` stores DEAD after reading ONEREF instead of compare-exchanging.
    PutCloseStores,
    /// RCU: a grace period flips the reader phase once instead of twice.
    SingleFlip,
    /// RCU: dropping any guard ends the read section (nesting ignored).
    NestingIgnored,
    /// RCU: no full fence after a reader announces itself.
    NoReaderFence,
    /// RCU: the outermost lock stores the slot with `Relaxed`, which ends the release
    /// sequence of the previous section's unlock: a scan that reads the new value no
    /// longer orders the previous section's reads before reclamation.
    RelaxedLockStore,
    /// RCU: grace periods complete at once without waiting for readers ("busted" RCU).
    BustedGracePeriod,
    /// RCU: the old idle fast path: a scan that finds no reader online stores the target
    /// outright, completing the grace periods of cookies taken after the scan (two
    /// drivers: one scans, a reader comes online, another takes a cookie).
    StaleFastPath,
    /// RCU: a cookie taken while a wait is in progress (odd counter) counts that wait
    /// as one of its own, although its scan may have run before the caller unpublished
    /// anything: the cookie then covers one flip and one wait, like `SingleFlip`.
    CookieCountsWaitInProgress,
    /// RCU, without heavy fences: a blocking wait's cookie covers one flip and one wait
    /// without the scan that entitles it to (`gp::waiter_target`): a reader that loaded
    /// the phase before the last flip and announced it after that wait's scan is waited
    /// for by nobody, as with `SingleFlip`.
    WaitersCookieTrustsNoScan,
    /// RCU, without heavy fences: `start_poll` hands out its first cookie without
    /// marking the domain, so a `synchronize` after it takes one flip and one wait and
    /// returns with that cookie not done (safe, but not what Linux promises).
    CookiesLeftUnmarked,
    /// RCU, asymmetric mode: grace periods skip the heavy fence, so readers (which have
    /// only a compiler fence) may announce themselves too late.
    SkipHeavyFence,
    /// RCU, where heavy fences run: a cookie's target is a whole grace period from the
    /// next flip, as without heavy fences, while only the first wait of each grace
    /// period (counter `% 4 == 1`) issues one: a cookie taken in the middle of a grace
    /// period counts that grace period's second, unfenced wait as its first, and a
    /// reader whose announcement is still in its store buffer slips past both waits.
    UnalignedCookies,
    /// RCU, feature `auto-fence`: the read side's mode changes whenever `heavy::install`
    /// is called (to heavy, or back to full if it was heavy), with readers inside their
    /// sections: a reader that entered with a compiler fence meets a wait that read
    /// "full" and skipped its heavy fence.
    ModeSwitchesLive,
    /// Run-time fence choice: an install that finds another context's fence set answers
    /// `Busy` at once, while that context's install may not have set the mode yet and a
    /// grace period may decide it full (`tests/auto_fence.rs`): "a fence is installed"
    /// with none in effect (the C API's race of two installs and a decision).
    BusyBeforeTheMode,
    /// Run-time fence choice: a flip marks the phase word heavy (`encoding::PHASE_HEAVY`)
    /// whatever the mode, so an outermost lock takes the compiler fence against waits of
    /// the full mode, which issue no heavy fence (`tests/auto_fence.rs`).
    PhaseSaysHeavy,
    /// RCU, heavy mode: a driver whose heavy fence returns wakes nobody, so a blocking
    /// wait that sleeps until another driver's fence for its wait returns sleeps out
    /// its own bound instead (`tests/heavy_fence_placement.rs`).
    FenceReturnWakesNobody,
    /// Sleeping waits, the old protocol: an unlock decides whether to wake by the phase
    /// word (which a second driver's flip, or a late store, may have set to the
    /// section's own phase) and a step that ends a wait wakes nobody: a future whose
    /// last reader's unlock races another driver's flip sleeps for ever
    /// (`tests/lost_wake.rs`).
    OldWakeProtocol,
    /// Sleeping waits: a step that ends a wait wakes nobody (`gp::wake_after_wait`
    /// skipped), the unlock's protocol kept. An unlock whose wake check runs after
    /// another driver has ended the wait (and so reads the counter past it) rightly
    /// sends no wake, and nobody else does: the sleeper's only wake is lost
    /// (`tests/lost_wake.rs`).
    StepWakesNobody,
    /// RCU, asymmetric mode, **not a bug**: every scan issues a heavy fence of its own
    /// (the old design), none shared through `returned`. Only slower: the fence-count test
    /// must see it.
    HeavyFenceEveryScan,
    /// RCU, asymmetric mode, **not a bug**: a blocking wait that finds another driver's
    /// heavy fence for its wait under way issues one of its own instead of waiting for
    /// it. Only slower: the fence-count test with two blocking waiters must see it.
    ImpatientWaiters,
    /// `DeferQueue::barrier` releases only what `collect` finds done: a value left queued
    /// for a whole lap of the counter has a cookie that reads "not done" again, and the
    /// barrier returns with it still queued.
    BarrierTrustsOldCookies,
    /// `CallQueue`: a callback's place is made READY before the callback is written
    /// into it, so a runner that takes it reads what is not there yet.
    CallReadyBeforeFilled,
    /// `CallQueue`: a place is freed before its callback runs, so a barrier that sees
    /// it free returns while the callback is still running in another context.
    CallFreeBeforeRun,
    /// `CallQueue::barrier` runs only the callbacks whose cookies say done: one left
    /// queued for a whole lap of the counter reads "not done" again, and the barrier
    /// waits for it for ever (the C API's `rcuref_rcu_barrier` did, before it numbered
    /// its callbacks).
    CallBarrierTrustsCookies,
    /// `CallQueue`: a pass reads the places' states with `Relaxed`, so a barrier that
    /// sees a callback's place freed may return before the callback's effects are
    /// visible to it (found by the loom model when the code had it).
    CallRelaxedScan,
    /// `CallQueue`: a barrier's pass reads the queue's count (like the places' numbers)
    /// with `Relaxed`, so a barrier that reads the number of a later callback in a
    /// place its callback left need not see that callback's effects (loom:
    /// `catches_relaxed_numbers`).
    CallRelaxedNumber,
    /// Sleeping waits, **not a bug**: every outermost unlock with a wait asleep wakes it,
    /// even one whose section began after the wait's flip (the first version). Only
    /// slower: the writer wakes for nothing; `tests/sleeping.rs` counts the wakes.
    WakeOnEveryUnlock,
    /// `Wakers`: a wake takes nobody's waker out and wakes nothing, so a future that
    /// sleeps on the set is never woken by the reader's unlock (async waits hang).
    WakersNeverWake,
    /// `Wakers`: a future gives its cell up without taking its waker out, so a later
    /// wake wakes the task of a future that was dropped (a stale waker).
    WakersKeptOnRelease,
    /// `GracePeriod` woken through `Wakers`: with every cell taken, the extra future
    /// returns `Pending` without waking itself, and is never polled again (a lost
    /// waiter instead of the fall-back to re-polling).
    WakersFullSetSleeps,
    /// Sleeping waits: `Waiting::sleep` announces itself and sleeps without polling
    /// again, so a reader that left before the announcement was visible to it (and so
    /// sent no wake) leaves the wait asleep (loom: `catches_a_sleep_without_its_repoll`).
    SleepWithoutRepoll,
    /// Sleeping waits: the announcement keeps the phase bit chosen from the counter
    /// before it, though another driver ended that wait and flipped to one of the other
    /// phase meanwhile: the unlocks of that wait's sections skip the wake path, and the
    /// step that made the flip came before the announcement and woke nobody
    /// (`tests/lost_wake.rs`, `a_flip_before_the_announcement_costs_no_wake`).
    SleepBitNotRechecked,
    /// Sleeping waits: an outermost unlock looks for a sleeping wait (and wakes it)
    /// before its store ends the section, so the woken wait can poll, still find the
    /// section, and sleep again with no wake left to come (loom:
    /// `catches_an_unlock_that_wakes_before_its_store`).
    UnlockWakesBeforeStore,
    /// Sleeping waits: no unlock ever calls the wake hook (loom:
    /// `catches_an_unlock_that_never_wakes`).
    UnlockNeverWakes,
    /// Sleeping waits, asymmetric mode: no heavy fence between the announcement and the
    /// last poll, so an unlock's store and its load of the announcement can pass each
    /// other (store buffering) and the wake is lost (loom, with the heavy fence modelled
    /// cooperatively: `catches_an_asymmetric_sleep_without_its_heavy_fence`).
    SleepWithoutHeavyFence,
    /// RCU, asymmetric mode, **not a bug**: a wait step issues its heavy fence even when
    /// every slot is free. Only slower: the fence-count test must see it.
    FenceEmptyDomain,
    /// RCU, asymmetric mode: a slot claim without its full fence, so a reader that
    /// claims after a wait step skipped its heavy fence (every slot free) may read what
    /// was unpublished (shown by the litmus twin; on x86 the claim's locked
    /// compare-exchange is a barrier by itself).
    ClaimWithoutFence,
    /// RCU, asymmetric mode: the wait is marked fenced before the heavy fence runs, so a
    /// second driver at that wait scans while the first one's fence is still under way.
    FencedBeforeHeavyFence,
    /// RCU, asymmetric mode: the counter enters a half of its range without forgetting
    /// the heavy-fence mark, so a mark left from the last lap (after a lap of waits that
    /// found the domain empty and wrote none, or a late store by a driver stopped inside
    /// its fence) names a wait the counter has come back to, and that wait skips its
    /// fence under a reader.
    MarkKeptAcrossLaps,
    /// RCU, asymmetric mode, **not a bug**: a driver that crossed into a half resets the
    /// mark even when the counter has already left its snapshot (its exchange will
    /// fail), wiping a mark of the new lap: a wait fenced twice. Only slower: the fence
    /// count must see it.
    LateReset,
    /// RCU, asymmetric mode: a driver leaves its heavy fence (returning or panicking)
    /// with `begun` still naming its wait, so a blocking waiter takes it for a fence
    /// under way and holds back for `PATIENCE` attempts for a fence nobody issues
    /// (a panicked heavy fence, or a late mark over a newer one).
    BegunLeftBehind,
    /// RCU, **not a bug**: wait steps never update the phase word, so every reader
    /// records the phase the domain started with. The models must still pass: safety
    /// does not depend on the phase readers record, only how soon waits finish (the
    /// `rcu` module docs, "The phase word").
    FrozenPhase,
    /// RCU: no lap guard: a context stopped between its scan and its compare-exchange for
    /// exactly one lap of the counter completes a wait on a stale scan (ABA).
    NoLapGuard,
    /// RCU: a driver whose own step (or another's) carries the counter into the other
    /// half keeps its registration in the half it left, so the lap guard protects the
    /// wrong half for the rest of that call: it can carry the counter back into a half in
    /// which a stopped context still holds a snapshot (found by mutation testing:
    /// `half(g) != h` -> `==` in `advance` survived).
    StaleHalfRegistration,
    /// RCU: a driver registers for the lap guard in the half of the counter value it
    /// read, without reading the counter again: if the counter left that half in
    /// between, it holds a snapshot in a half it is not registered in.
    RegisterWithoutRecheck,
    /// RCU: after registering again in the half the counter moved to, a driver keeps
    /// stepping from the counter value it had before (the one that told it the counter
    /// had moved) instead of `enter`'s fresh snapshot, which the counter may have left.
    StaleSnapshotAfterRegister,
    /// RCU: a driver whose wait is held by a reader ends its call still registered in
    /// its half: the counter can never again leave the other half (grace periods stop).
    RegistrationLeakedWhenBlocked,
    /// RCU: the old try-lock around grace-period steps: a context stopped while holding
    /// it stops every grace period of the domain (priority inversion).
    WriterLock,
    /// Pool: allocation clears the slot, count included, before constructing the value
    /// (Jann Horn's finding on the file_ref v2 series).
    ZeroingAlloc,
    /// Pool: a lookup returns the object it got a reference to without re-checking
    /// that the location still names it.
    NoRecheck,
    /// Pool: allocation claims a free slot with a load and a separate store instead of
    /// one read-modify-write, so two allocators can both claim it.
    CheckThenClaim,

    /// RCU: `RcuCell::replace` and `RcuValue`'s publish take the cookie before the swap
    /// that unpublishes the old value: a grace period that began before the unpublish
    /// (another driver's) can end while a reader that loaded the old value is inside.
    CookieBeforeUnpublish,
    /// RCU: a `ContextReader`'s nested lock has no fence of its own: a handler that
    /// interrupts the outermost lock between its slot store and its fence runs its whole
    /// section before the announcement is ordered before its loads (memory unsafety on
    /// multi-core RISC-V, and on AArch64 with LDAPR).
    NestedWithoutFence,
    /// RCU: a driver whose step is left by a panic (a heavy fence that panics) stays
    /// registered for the lap guard: once the counter reaches the end of the other half,
    /// no grace period ends again.
    RegistrationKeptOnPanic,
    /// RCU: dropping a `DeferQueue` drops the values still waiting for their grace
    /// period (as a queue without a `Drop` of its own would).
    QueueDropsPending,
    /// RCU: `defer_or_wait` and `defer_async` hold the value being deferred as a plain
    /// local while user code runs (a `reclaim` of older values), so a panic there drops
    /// it before its grace period.
    DeferDropsOnPanic,
    }
}

/// The run-time parts: selection, pause and interrupt points, test knobs.
#[cfg(rcuref_hooks)]
mod hooks {
    use super::*;

    static ACTIVE: AtomicU8 = AtomicU8::new(Mutant::None as u8);

    /// Selects the broken variant for the whole process (`Mutant::None` restores the real code).
    pub fn select(m: Mutant) {
        ACTIVE.store(m as u8, Ordering::SeqCst);
    }

    /// Whether `m` is the selected variant.
    #[inline]
    pub fn active(m: Mutant) -> bool {
        ACTIVE.load(Ordering::Relaxed) == m as u8
    }

    /// The selected variant (`Mutant::None` for the real code).
    #[inline]
    pub fn selected() -> Mutant {
        // `ALL` lists the variants in declaration order, `None` first, and `select`
        // stores only a variant's discriminant: the index is in range.
        Mutant::ALL[ACTIVE.load(Ordering::Relaxed) as usize]
    }

    /// The narrowest grace-period counter [`set_gp_bits`] accepts in this build.
    pub const MIN_GP_BITS: u32 = crate::rcu::encoding::MIN_GP_BITS;

    /// The phase word's heavy bit (`Rcu::phase_word`), for tests of what a flip stores.
    #[cfg(rcuref_auto)]
    pub const PHASE_HEAVY: u32 = crate::rcu::encoding::PHASE_HEAVY;

    static READ_DELAY: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);
    static READ_TICK: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

    /// Injects a pause of up to `max_spins` (varying call to call) into lookup paths between
    /// reading a location and taking a reference, like liburcu's `DEBUG_YIELD`: it widens
    /// race windows so that torture runs on real threads reach them. 0 turns it off.
    pub fn set_read_delay(max_spins: u32) {
        READ_DELAY.store(max_spins, Ordering::SeqCst);
    }

    /// The injected pause (a no-op unless `set_read_delay` was called).
    #[inline]
    pub(crate) fn read_delay() {
        let max = READ_DELAY.load(Ordering::Relaxed);
        if max != 0 {
            let n = READ_TICK
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_mul(2_654_435_761)
                % max;
            for _ in 0..n {
                core::hint::spin_loop();
            }
        }
    }

    static GP_MASK: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(u32::MAX);

    /// Shrinks the RCU grace-period counter to `bits` bits (at least [`MIN_GP_BITS`]: 3,
    /// or 4 where heavy fences may run and a cookie can be 7 steps ahead), so that tests
    /// can go round a whole lap of it quickly; 32 restores the real width. Select it
    /// before creating the domain, and only with no grace period in flight.
    pub fn set_gp_bits(bits: u32) {
        assert!(
            (MIN_GP_BITS..=32).contains(&bits),
            "a counter of {bits} bits: this build needs {MIN_GP_BITS} to 32"
        );
        let m = if bits == 32 {
            u32::MAX
        } else {
            (1 << bits) - 1
        };
        GP_MASK.store(m, Ordering::SeqCst);
    }

    /// The grace-period counter's mask (all ones unless `set_gp_bits` shrank it).
    #[inline]
    pub(crate) fn gp_mask() -> u32 {
        GP_MASK.load(Ordering::Relaxed)
    }

    /// A point in the library where a test can stop the calling context (`set_pause_hook`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum Point {
        /// RCU: a driver has read the counter to choose the half it registers in for the
        /// lap guard, and has not registered yet.
        GpEnterBeforeRegister,
        /// RCU: a wait step is about to scan the slots (its fences, the heavy one included,
        /// are done); the value is the wait's counter value (the stepping context's
        /// snapshot, which the counter may have passed by now).
        GpBeforeScan(u32),
        /// RCU: a grace-period step has scanned the slots and not yet tried its exchange.
        GpAfterScan,
        /// RCU: a sleeping wait has chosen the phase bit of its announcement from the
        /// counter and not yet announced it (`Rcu::announce_sleep`).
        SleepBeforeAnnounce,
        /// Pool: an allocation has seen a slot free and not yet claimed it.
        AllocAfterProbe,
        /// Run-time fence choice (`auto-fence`): `heavy::install` has set its fence and
        /// not yet the mode.
        InstallAfterFence,
        /// Run-time fence choice: a decision of the mode has looked for a fence and not
        /// yet tried to record its choice.
        DecideAfterLook,
    }

    /// Holds null or a `fn(Point)` cast to a pointer.
    static PAUSE_HOOK: core::sync::atomic::AtomicPtr<()> =
        core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

    /// Installs (or removes) a function the library calls at each [`Point`], from the
    /// context that reached it: a test uses it to stop one thread exactly there (the hook
    /// decides which thread, and for how long).
    pub fn set_pause_hook(hook: Option<fn(Point)>) {
        let p = hook.map_or(core::ptr::null_mut(), |f| f as *mut ());
        PAUSE_HOOK.store(p, Ordering::SeqCst);
    }

    /// Calls the pause hook, if any (compiled only in mutant builds, not under loom).
    #[cfg(not(loom))]
    #[inline]
    pub(crate) fn pause(at: Point) {
        let p = PAUSE_HOOK.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: `PAUSE_HOOK` only ever holds null or a pointer made from a `fn(Point)`
            // in `set_pause_hook`; function and data pointers have the same representation
            // on every target this crate supports.
            let f: fn(Point) = unsafe { core::mem::transmute::<*mut (), fn(Point)>(p) };
            f(at);
        }
    }

    /// Holds null or the `fn()` a loom model gives as the heavy fence of a sleeping wait.
    #[cfg(loom)]
    static MODEL_HEAVY_FENCE: core::sync::atomic::AtomicPtr<()> =
        core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

    /// loom only: installs (or, with `None`, removes) the function a sleeping wait calls
    /// as its heavy fence, between its announcement and its last poll
    /// (`rcu::heavy::after_announce`). loom cannot model a heavy fence; a model gives
    /// one of its own (`tests/loom_wake.rs`: a request each reader thread answers with a
    /// full fence at an interrupt point, or by having finished). A plain atomic: it
    /// configures a model and is not part of it (install it at the start of each
    /// execution, remove it at the end).
    #[cfg(loom)]
    pub fn set_model_heavy_fence(fence: Option<fn()>) {
        let p = fence.map_or(core::ptr::null_mut(), |f| f as *mut ());
        MODEL_HEAVY_FENCE.store(p, Ordering::SeqCst);
    }

    /// Calls the model's heavy fence, if one is installed.
    #[cfg(loom)]
    #[inline]
    pub(crate) fn model_heavy_fence() {
        let p = MODEL_HEAVY_FENCE.load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: `MODEL_HEAVY_FENCE` only ever holds null or a pointer made from a
            // `fn()` in `set_model_heavy_fence`; function and data pointers have the same
            // representation on every target this crate supports.
            let f: fn() = unsafe { core::mem::transmute::<*mut (), fn()>(p) };
            f();
        }
    }

    /// A gap between two memory operations of the read side, where an interrupt handler
    /// (or, on a hosted system, a signal handler) can run: [`set_interrupt`] makes one
    /// happen there.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[repr(u8)]
    #[non_exhaustive]
    pub enum Gap {
        /// Lock: the slot word has been read, nothing written yet.
        LockAfterLoad = 1,
        /// Outermost lock: the phase word has been read, the slot not yet stored.
        LockAfterPhase,
        /// Outermost lock: the slot announces the section; its fence has not run (the gap
        /// where a nesting handler needs a fence of its own: `Mutant::NestedWithoutFence`).
        LockAfterStore,
        /// Outermost lock: done (store and fence); the section's own loads come next.
        LockAfterFence,
        /// Nested lock: the slot's deeper nesting is stored; a context reader's fence has
        /// not run.
        NestedAfterStore,
        /// Nested lock: done.
        NestedAfterFence,
        /// Unlock: the slot word has been read, not yet written.
        UnlockAfterLoad,
        /// Unlock: the slot word is written (the section, or one level of it, has ended).
        UnlockAfterStore,
        /// `Rcu::reader` (and so `Rcu::with_reader`): a slot has been seen free, not yet claimed.
        ClaimAfterLoad,
        /// `Rcu::reader`: the slot is claimed; no section has begun on it.
        ClaimAfterExchange,
        /// A `Reader`'s drop: its slot word has been read, not yet freed.
        DropAfterLoad,
        /// A `Reader`'s drop: its slot is free again.
        DropAfterStore,
    }

    impl Gap {
        /// Every gap, in the order the read side passes them.
        pub const ALL: [Gap; 12] = [
            Gap::LockAfterLoad,
            Gap::LockAfterPhase,
            Gap::LockAfterStore,
            Gap::LockAfterFence,
            Gap::NestedAfterStore,
            Gap::NestedAfterFence,
            Gap::UnlockAfterLoad,
            Gap::UnlockAfterStore,
            Gap::ClaimAfterLoad,
            Gap::ClaimAfterExchange,
            Gap::DropAfterLoad,
            Gap::DropAfterStore,
        ];
    }

    /// The armed interrupt: its gap (0: none), the slot word it is for, the handler and
    /// the handler's argument. Plain atomics, not loom's: they configure a model, they are
    /// not part of it (a model arms its interrupt again at the start of each execution).
    static IRQ_GAP: AtomicU8 = AtomicU8::new(0);
    static IRQ_SLOT: AtomicUsize = AtomicUsize::new(0);
    static IRQ_HANDLER: core::sync::atomic::AtomicPtr<()> =
        core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());
    static IRQ_ARG: AtomicUsize = AtomicUsize::new(0);

    /// Arms one interrupt: the next time the context that owns the slot word at address
    /// `slot` (see `Rcu::slot_addr`) reaches `gap`, the library calls `handler(arg)` there,
    /// once, on that context, as an interrupt taken between those two instructions would
    /// run. `None` disarms.
    pub fn set_interrupt(at: Option<(Gap, usize)>, handler: fn(usize), arg: usize) {
        IRQ_GAP.store(0, Ordering::SeqCst);
        if let Some((gap, slot)) = at {
            IRQ_SLOT.store(slot, Ordering::SeqCst);
            IRQ_HANDLER.store(handler as *mut (), Ordering::SeqCst);
            IRQ_ARG.store(arg, Ordering::SeqCst);
            IRQ_GAP.store(gap as u8, Ordering::SeqCst);
        }
    }

    /// Whether the armed interrupt has not fired yet.
    pub fn interrupt_pending() -> bool {
        IRQ_GAP.load(Ordering::SeqCst) != 0
    }

    /// An interrupt point: runs the armed handler if it is armed for `gap` on `slot`.
    ///
    /// Relaxed loads and a relaxed store only: no barrier of its own at the gap (a
    /// compare-exchange here was a full barrier, which hid exactly the reorderings an
    /// interrupt point exists to expose). One-shot without a read-modify-write is exact
    /// because only the slot's owner context reaches the slot's gaps, and the arming
    /// happens before that context starts.
    #[inline]
    pub(crate) fn interrupt(gap: Gap, slot: &crate::sync::AtomicU32) {
        if IRQ_GAP.load(Ordering::Relaxed) != gap as u8
            || IRQ_SLOT.load(Ordering::Relaxed) != slot as *const _ as usize
        {
            return;
        }
        IRQ_GAP.store(0, Ordering::Relaxed);
        let p = IRQ_HANDLER.load(Ordering::Relaxed);
        // SAFETY: `IRQ_HANDLER` is only ever set from a `fn(usize)` in `set_interrupt`, and
        // `IRQ_GAP` is non-zero only after it was; function and data pointers have the same
        // representation on every target this crate supports.
        let f: fn(usize) = unsafe { core::mem::transmute::<*mut (), fn(usize)>(p) };
        f(IRQ_ARG.load(Ordering::Relaxed));
    }
}
#[cfg(rcuref_hooks)]
pub use hooks::*;
