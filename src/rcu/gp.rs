//! Grace periods: the steps that advance the counter, the lap guard, and cookies.

use super::domain::Rcu;
use super::encoding::{
    half, online, phase, phase_of, plus, reached, COMPLETED, MAX_TRIES, ONE_LEVEL, STEPS_PER_GP,
};
use super::ops;
use super::wait::Waiting;
use crate::error::Error;
use crate::pad::Line;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed};
use core::ops::ControlFlow;

/// Advances `gp` towards `target` as far as the readers allow, at most `MAX_TRIES`
/// attempts, in the rhythm of the module docs: flip, wait for the phase before the flip,
/// flip, wait. Any number of contexts may run this at once: each step is a
/// compare-exchange from the value it was decided on, so a context stopped anywhere in
/// here holds nobody up and can never complete a step on stale facts.
///
/// `patient`: the caller is a blocking wait that will come back, so at a wait whose
/// heavy fence another driver is issuing it ends this call instead of issuing one more
/// (asymmetric-fence mode only; `heavy::in_wait_step`).
pub(super) fn advance<const N: usize>(rcu: &Rcu<N>, target: u32, patient: bool) {
    divert!(BustedGracePeriod => super::broken::busted_grace_period(rcu, target));
    divert!(StaleFastPath => super::broken::advance_idle_fast_path(rcu, target, patient));
    divert!(WriterLock => super::broken::advance_writer_lock(rcu, target, patient));
    let (mut driver, mut g) = Driver::new(rcu);
    for _ in 0..MAX_TRIES {
        if reached(g, target) {
            break;
        }
        // Even `g`: the next step is a flip. Odd: a wait, which steps only once the
        // readers of the phase before its flip have left. (One step call site, so the
        // step's code is inlined once.)
        let flip = g & 1 == 0;
        if !flip && !driver.wait_for_phase(g, patient) {
            break;
        }
        match driver.step(g) {
            Some(now) => g = now,
            None => break,
        }
    }
    driver.finish();
}

/// A context driving the counter: registered for the lap guard in one half of the
/// counter's range, for one call of [`advance`].
///
/// Left by [`finish`](Self::finish) when the call ends, or by `Drop` when a panic leaves
/// it (a heavy fence that panics, say): a driver that died inside a step must not pin its
/// half, or the counter could never enter it again and no grace period would end after
/// one more half-lap (`panic_injection`'s tests).
pub(super) struct Driver<'d, const N: usize> {
    // INVARIANT: this context is counted once in `rcu.stepping[half]`, and `half` is the
    // half of the snapshot it steps from.
    pub(super) rcu: &'d Rcu<N>,
    pub(super) half: usize,
}

impl<'d, const N: usize> Driver<'d, N> {
    /// Registers in the half the counter is in; returns the driver and a snapshot of the
    /// counter taken after it (in that half).
    pub(super) fn new(rcu: &'d Rcu<N>) -> (Self, u32) {
        let (half, g) = enter(rcu);
        (Driver { rcu, half }, g)
    }

    /// A wait (`g` odd): whether it may step, that is, no reader that entered before the
    /// flip is still inside (`false` also when another driver's heavy fence for this wait
    /// is under way). A flip (`g` even) needs no such check: readers that enter after it
    /// are told apart from those already inside by the phase they record.
    pub(super) fn wait_for_phase(&mut self, g: u32, patient: bool) -> bool {
        record_phase(self.rcu, g);
        // Every reader that could hold something unpublished before this wait's flip is
        // either seen by this scan or sees the unpublish (the fence pairing in the
        // module docs).
        ops::wait_fence();
        // Asymmetric mode: readers have only a compiler fence; make their cores execute
        // the barrier now, unless a driver's fence for this wait has already returned
        // (`heavy`'s module docs). A heavy fence that panics leaves this call through
        // the driver's drop, which leaves its half.
        if !super::heavy::in_wait_step(self.rcu, g, patient) {
            return false; // another driver's heavy fence for this wait is under way
        }
        pause_point!(GpBeforeScan(g));
        let held = old_phase_online(self.rcu, g);
        pause_point!(GpAfterScan);
        if held {
            self.held_by_a_reader();
        }
        !held
    }

    /// One step of the counter from `g`, if the lap guard allows it: the counter's value
    /// after it (this step's, or another driver's that moved it first: progress too).
    pub(super) fn step(&mut self, g: u32) -> Option<u32> {
        let next = plus(g, 1);
        if !self.lap_guard_allows(next) {
            return None;
        }
        // A step into the other half, where nobody is registered now, first forgets any
        // mark from that half's last lap (asymmetric-fence mode).
        super::heavy::before_step(self.rcu, g, next);
        let now = match ops::step(&self.rcu.gp.0, g, next) {
            Ok(_) => {
                // A wait step ends the wait that sleepers may sleep on: wake them here,
                // since the unlock that let it end may have skipped its wake (it read
                // the counter already past that wait: `Rcu::wake_for`).
                if g & 1 == 1 {
                    wake_after_wait(self.rcu);
                }
                next
            }
            Err(now) => now,
        };
        Some(self.follow(now))
    }

    /// The lap guard: the counter may step to `next` unless that enters the other half
    /// while a stopped context still holds a snapshot there, which it could otherwise
    /// meet again a lap later (ABA).
    #[inline(always)]
    fn lap_guard_allows(&self, next: u32) -> bool {
        divert!(NoLapGuard => true);
        half(next) == self.half || ops::registered(stepping_in(self.rcu, half(next))) == 0
    }

    /// The counter is at `g` after a step: if that left the registered half, leave it,
    /// register in the half the counter is in now, and return a fresh snapshot (in the
    /// half registered in); otherwise `g`.
    fn follow(&mut self, g: u32) -> u32 {
        divert!(StaleHalfRegistration => g);
        divert!(StaleSnapshotAfterRegister => super::broken::follow_stale(self, g));
        if half(g) == self.half {
            return g;
        }
        ops::leave_half(stepping_in(self.rcu, self.half));
        let (half, fresh) = enter(self.rcu);
        self.half = half;
        fresh
    }

    /// A reader from before the flip holds the wait: the call ends here, and the
    /// registration with it (`finish`). Nothing to do but in a broken variant.
    #[inline(always)]
    fn held_by_a_reader(&self) {
        divert!(RegistrationLeakedWhenBlocked => super::broken::leak_registration(self));
    }

    /// Leaves the half: the end of a call.
    pub(super) fn finish(self) {
        let me = core::mem::ManuallyDrop::new(self);
        ops::leave_half(stepping_in(me.rcu, me.half));
    }
}

impl<const N: usize> Drop for Driver<'_, N> {
    /// Only reached when a panic unwinds out of a step (`finish` ends every call that
    /// returns).
    fn drop(&mut self) {
        divert!(RegistrationKeptOnPanic => ());
        ops::leave_half(stepping_in(self.rcu, self.half));
    }
}

/// Registers the caller as a driver in the half of the range `gp` is in, and returns
/// that half and a snapshot of `gp` taken after the registration.
pub(super) fn enter<const N: usize>(rcu: &Rcu<N>) -> (usize, u32) {
    divert!(RegisterWithoutRecheck => super::broken::enter_without_recheck(rcu));
    let mut g = ops::counter_snapshot(&rcu.gp.0);
    loop {
        let h = half(g);
        pause_point!(GpEnterBeforeRegister);
        let now = ops::register_in_half(stepping_in(rcu, h), &rcu.gp.0);
        if half(now) == h {
            return (h, now);
        }
        // `g` was from an earlier visit of that half: register again.
        ops::leave_half(stepping_in(rcu, h));
        g = now;
    }
}

/// The registration count of half `h` (0 or 1; masked, so no bounds check and no panic
/// path is compiled in).
#[inline(always)]
pub(super) fn stepping_in<const N: usize>(rcu: &Rcu<N>, h: usize) -> &AtomicU32 {
    &rcu.stepping.0[h & 1]
}

/// A step ended a wait: wake the sleepers (see the call in `Driver::step`). The load
/// is `SeqCst`: with the step's `SeqCst` exchange before it, against the sleeper's
/// announcement (a `SeqCst` swap and a full fence) before its load of the counter, one
/// of the two sees the other (litmus `wake-after-a-step`, twin `+relaxed-load`). On
/// x86 that is a plain load after the locked exchange: no fence per wait.
#[inline]
fn wake_after_wait<const N: usize>(rcu: &Rcu<N>) {
    divert!(OldWakeProtocol | StepWakesNobody => ());
    if rcu.phase.0.sleepers.load(crate::sync::Ordering::SeqCst) != 0 {
        rcu.call_wake_hook();
    }
}

/// Tells readers entering from now on to record the phase of the wait at `g`. Written
/// only when it changes (twice per grace period), so readers' copies of the line stay
/// valid otherwise; a store that lands late (its driver was stopped) only makes some
/// wait last longer (module docs, "The phase word"). Its heavy bit, where the fence is
/// chosen at run time, is as true late as early: it is set only from a mode read
/// Heavy, and Heavy is final.
#[inline(always)]
pub(super) fn record_phase<const N: usize>(rcu: &Rcu<N>, g: u32) {
    divert!(FrozenPhase => ());
    #[cfg(rcuref_auto)]
    divert!(PhaseSaysHeavy => ops::set_phase(
        &rcu.phase.0.phase,
        phase(g) | super::encoding::PHASE_HEAVY
    ));
    // With feature `auto-fence`, the word also says whether the mode is heavy, read
    // without deciding it: the first flip of an undecided process stores the plain
    // phase, its wait decides, the next flip adds the bit (`encoding::PHASE_HEAVY`).
    #[cfg(rcuref_auto)]
    let heavy = if super::heavy::readers_skip_fence() {
        super::encoding::PHASE_HEAVY
    } else {
        0
    };
    #[cfg(not(rcuref_auto))]
    let heavy = 0;
    ops::set_phase(&rcu.phase.0.phase, phase(g) | heavy);
}

/// One scan of the slots: whether a reader is online with the phase before the flip
/// that led to the wait at `g`.
fn old_phase_online<const N: usize>(rcu: &Rcu<N>, g: u32) -> bool {
    phase_online(rcu, phase(g) ^ 1)
}

/// One scan of the slots: whether a reader is online with phase `p`.
fn phase_online<const N: usize>(rcu: &Rcu<N>, p: u32) -> bool {
    rcu.slots.iter().any(|s| {
        let v = ops::scan_slot(&s.0);
        online(v) && phase_of(v) == p
    })
}

/// The target of the cookie a blocking wait takes when the counter read `g` and then
/// drives at once (`Rcu::waiters_cookie`), in a build without heavy fences: one flip
/// and one wait from the next flip when a scan after the cookie's fence finds no reader
/// online with the phase that wait does not wait for, `cookie_target(g)` otherwise.
///
/// Why that is enough (module docs, "Why two flips", "A blocking wait's own scan"): the
/// first wait after `g` (at `w`, odd) waits for readers online with `phase(w) ^ 1`. A
/// reader online with `phase(w)` is one the second flip exists for; this scan, made
/// after the caller's unpublish and the cookie's full fence, either sees its slot
/// online (then the cookie falls back to the whole grace period) or, by the fence
/// pairing of `rcu-lock-vs-wait`, the reader's loads after its fence see the unpublish
/// (litmus `rcu-waiters-cookie`, twins without the scan and without the fence). The
/// scan reads the slots only: the counter and the phase word are untouched, so other
/// drivers and other cookies see nothing of it. Linux and liburcu make the same
/// argument with their one switch a grace period, under a mutex; here the caller scans
/// for itself, so no driver needs to be in charge.
#[cfg(not(rcuref_fences))]
#[inline]
pub(super) fn waiter_target<const N: usize>(rcu: &Rcu<N>, g: u32) -> u32 {
    divert!(WaitersCookieTrustsNoScan => plus(g, 2 + (g & 1)));
    // The first wait that starts after `g`: the next one, or, while one is in progress
    // (its scan may predate the unpublish), the one after it.
    let w = plus(g, 1 + (g & 1));
    if phase_online(rcu, phase(w)) {
        cookie_target(g)
    } else {
        plus(w, 1)
    }
}

/// The target of a cookie taken when the counter read `g`: a whole grace period (two
/// flips and two waits) from the next flip. A wait already in progress (odd `g`) started
/// before the caller's unpublish, so it does not count.
///
/// Where heavy fences may run (`rcuref_fences`), the target is the end of the first
/// grace period that *begins* after `g`: the next multiple of 4 beyond `g`, plus 4
/// (4, 7, 6 or 5 steps for `g % 4` = 0, 1, 2, 3). So the first wait a cookie counts is
/// always a first wait (`g % 4 == 1`), the only waits that issue a heavy fence (`heavy`'s
/// module docs, "One fence per grace period"): one `membarrier` per grace period, where
/// liburcu's memb issues two. The price: a cookie taken in the middle of a grace period
/// waits for one more wait than it would otherwise (at most 7 steps instead of 5).
#[inline(always)]
pub(super) fn cookie_target(g: u32) -> u32 {
    divert!(SingleFlip => plus(g, STEPS_PER_GP / 2 + (g & 1)));
    divert!(CookieCountsWaitInProgress => plus(g, STEPS_PER_GP));
    #[cfg(rcuref_fences)]
    {
        divert!(UnalignedCookies => plus(g, STEPS_PER_GP + (g & 1)));
        plus(g, STEPS_PER_GP + (g.wrapping_neg() & 3))
    }
    #[cfg(not(rcuref_fences))]
    plus(g, STEPS_PER_GP + (g & 1))
}

// The blocking wait: the loop every `synchronize`, `cond_synchronize` and barrier runs,
// polling the cookie (each poll `advance`s as far as the readers allow) and backing off.

/// Polls `cookie` until it is done, asking `hook` between attempts whether to go on, with
/// a growing spin between attempts (`backoff`). The caller has checked that it may wait.
pub(crate) fn until_done<const N: usize>(
    cookie: GpCookie<'_, N>,
    mut hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
) -> Result<(), Error> {
    let mut attempts = 0u32;
    while !cookie.poll_as(attempts < PATIENCE) {
        attempts = attempts.saturating_add(1);
        let w = Waiting::new(&cookie, attempts);
        if hook(&w).is_break() {
            return Err(Error::GaveUp);
        }
        backoff(attempts);
    }
    Ok(())
}

/// Spin-loop hints after failed attempt number `attempts` of a blocking wait: 1, 2, 4 …
/// up to `MAX_BACKOFF`. Each attempt scans every reader slot, and a scan takes each
/// reader's cache line away from its core (the reader's next store must fetch it back),
/// so a waiting writer that scanned back to back would slow the very sections it waits
/// for (docs/design.md, "blocking waits back off"; docs/bench/REPORT.md, "under a
/// writer").
#[inline]
fn backoff(attempts: u32) {
    #[cfg(not(loom))]
    for _ in 0..(1u32 << attempts.min(BACKOFF_SHIFT)).min(MAX_BACKOFF) {
        core::hint::spin_loop();
    }
    #[cfg(loom)]
    let _ = attempts;
}

/// The most spin-loop hints between two attempts of a blocking wait (a few hundred
/// nanoseconds to a few microseconds, depending on the core).
#[cfg(not(loom))]
const MAX_BACKOFF: u32 = 64;
/// Attempts for which a blocking wait leaves a wait's heavy fence to the driver already
/// issuing it (asymmetric-fence mode, `heavy::in_wait_step`); after that it fences for
/// itself, so a driver stopped inside its fence holds the others up only this long.
///
/// Counted in attempts, so the time it buys is the hook's: with a spinning hook the
/// back-off between 64 attempts (about 3,800 spin-loop hints) outlasts a `membarrier`
/// of tens of microseconds, which is all sharing needs; with a hook that yields or
/// sleeps each attempt is a time slice or the sleep's bound, and that many of them is
/// what a driver preempted inside its fence costs the waits beside it. It was 1024
/// until a poller frozen inside `membarrier` held a yielding writer for seconds on two
/// loaded cores (`tests/preemption.rs`, now run in the fence chosen at run time); the
/// price of impatience is one more heavy fence.
pub(super) const PATIENCE: u32 = 64;
/// `2^BACKOFF_SHIFT >= MAX_BACKOFF`: where the doubling stops.
#[cfg(not(loom))]
const BACKOFF_SHIFT: u32 = 6;

/// A point in a domain's grace-period sequence: done once every read section that was
/// running when it was taken ([`Rcu::start_poll`]) has ended.
///
/// A cookie knows its domain, so it can only ever answer about the grace periods it was
/// taken for.
#[derive(Clone, Copy)]
pub struct GpCookie<'d, const N: usize> {
    pub(super) rcu: &'d Rcu<N>,
    pub(super) target: u32,
}

impl<'d, const N: usize> GpCookie<'d, N> {
    /// Whether the grace period has ended, without advancing anything.
    pub fn is_done(&self) -> bool {
        // Acquire: pairs with the step that completed the grace period, which acquired
        // every reader's exit, so those sections happen before what the caller does next.
        let g = ops::counter_acquire(&self.rcu.gp.0);
        self.target == COMPLETED || reached(g, self.target)
    }

    /// Whether the grace period has ended. Never blocks: if it has not, it advances the
    /// grace-period machine as far as the readers allow (a bounded number of steps) and
    /// answers again. Any number of contexts may poll at once.
    pub fn poll(&self) -> bool {
        self.poll_as(false)
    }

    /// `poll`, for a blocking wait when `patient` (see `Rcu::advance`).
    pub(crate) fn poll_as(&self, patient: bool) -> bool {
        if self.is_done() {
            return true;
        }
        advance(self.rcu, self.target, patient);
        self.is_done()
    }

    /// After a poll that left this grace period pending, and after a sleeping wait's
    /// announcement (`Waiting::sleep`): whether only readers hold it, so that the unlock
    /// of one of them is sure to call the wake hook. That needs the counter at a wait
    /// (odd), a reader slot online with the phase that wait waits for, the phase word
    /// at that wait's value (an unlock whose section's phase matches the word skips
    /// its wake, `Rcu::wake_for`), and no driver registered: a driver inside `advance`
    /// may still store a late phase word, or hold the lap guard, and its return wakes
    /// nobody. A driver that registers after this check and ends the wait (a reader's
    /// unlock racing it) wakes the sleepers with that step (`wake_after_wait`), and an
    /// unlock judges its section by the counter's wait, not the phase word
    /// (`Rcu::wake_for`; `tests/lost_wake.rs`, where this check alone did not suffice).
    pub(super) fn only_readers_hold(&self) -> bool {
        let rcu = self.rcu;
        if ops::registered(stepping_in(rcu, 0)) != 0 || ops::registered(stepping_in(rcu, 1)) != 0 {
            return false;
        }
        let g = rcu.gp.0.load(Acquire);
        g & 1 == 1
            && super::encoding::phase_in_word(rcu.phase.0.phase.load(Relaxed)) == phase(g)
            && self.holdouts().next().is_some()
    }

    /// The domain this cookie belongs to.
    pub fn domain(&self) -> &'d Rcu<N> {
        self.rcu
    }

    /// The reader slots holding this grace period up right now: online with the phase
    /// that the current (or, between waits, the next) wait waits for. Empty once done.
    /// For stall reports: the slot identifies the context (its `Reader::slot`, or the
    /// dedicated slot of a `ContextReader`). A snapshot, slot by slot.
    pub fn holdouts(&self) -> Holdouts<'d> {
        let g = self.rcu.gp.0.load(Acquire);
        let done = self.target == COMPLETED || reached(g, self.target);
        Holdouts {
            slots: &self.rcu.slots,
            next: if done { N } else { 0 },
            waits_for: phase(g | 1) ^ 1,
        }
    }

    /// The cookie as a number, to keep it in an atomic; [`Rcu::cookie_from_raw`] of the
    /// same domain turns it back. Move it to another core with `Release`/`Acquire` (see
    /// there why).
    pub fn into_raw(self) -> u32 {
        self.target
    }
}

#[cfg(feature = "defmt")]
impl<const N: usize> defmt::Format for GpCookie<'_, N> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "GpCookie {{ target: {=u32}, done: {=bool} }}",
            self.target,
            self.is_done()
        )
    }
}

/// Two cookies are equal when they are of the same domain and name the same grace
/// period (Linux's `same_state_synchronize_rcu`): two cookies taken by
/// [`Rcu::start_poll`] with no step of the counter between them (and, where heavy fences
/// may run, any two taken in the same stretch from a grace period's first wait to the
/// next one's start, which share a target: `cookie_target`), or two completed cookies.
/// A blocking wait's own cookie ([`Waiting::cookie`]) may name a grace period one flip
/// and one wait sooner, and then differs from `start_poll`'s taken at the same moment.
impl<const N: usize> PartialEq for GpCookie<'_, N> {
    fn eq(&self, other: &Self) -> bool {
        core::ptr::eq(self.rcu, other.rcu) && self.target == other.target
    }
}

impl<const N: usize> Eq for GpCookie<'_, N> {}

impl<const N: usize> core::fmt::Debug for GpCookie<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GpCookie")
            .field("target", &self.target)
            .field("done", &self.is_done())
            .finish()
    }
}

/// A reader slot holding a grace period up (see [`GpCookie::holdouts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Holdout {
    /// The slot: a `Reader`'s [`slot`](super::Reader::slot), or a dedicated slot.
    pub slot: usize,
    /// How deeply nested its section is (1: not nested).
    pub nesting: u32,
    /// The phase its section started in.
    pub phase: u32,
}

/// The slots holding a grace period up, as an iterator (see [`GpCookie::holdouts`]).
///
/// Not generic in the domain's size, so a stall report's closure needs no annotations.
pub struct Holdouts<'d> {
    slots: &'d [Line<AtomicU32>],
    next: usize,
    waits_for: u32,
}

impl Iterator for Holdouts<'_> {
    type Item = Holdout;
    fn next(&mut self) -> Option<Holdout> {
        while let Some(s) = self.slots.get(self.next) {
            let slot = self.next;
            self.next += 1;
            let v = s.0.load(Relaxed);
            if online(v) && phase_of(v) == self.waits_for {
                return Some(Holdout {
                    slot,
                    nesting: v / ONE_LEVEL,
                    phase: phase_of(v),
                });
            }
        }
        None
    }
}

impl core::fmt::Debug for Holdouts<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let rest = Holdouts { ..*self };
        f.debug_list().entries(rest).finish()
    }
}

impl Clone for Holdouts<'_> {
    fn clone(&self) -> Self {
        Holdouts { ..*self }
    }
}

/// A blocking wait's own scan (`waiter_target`), in the build without heavy fences.
#[cfg(all(test, not(loom), not(rcuref_fences)))]
mod waiters_cookie_tests {
    use super::super::encoding::{entered, CLAIMED};
    use super::*;
    use crate::sync::Ordering::Relaxed;

    /// A hook that gives up after a few attempts (the test's stuck reader never leaves).
    fn a_few(w: &Waiting<'_, '_, 4>) -> ControlFlow<()> {
        if w.attempts() < 8 {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    }

    /// No cookie handed out, no stale reader: each `synchronize` is one flip and one
    /// wait, from an even counter and from a wait in progress (odd).
    #[test]
    fn a_synchronize_without_a_stale_reader_takes_one_flip_and_one_wait() {
        let rcu: Rcu<4> = Rcu::new();
        let mut me = rcu.reader().unwrap();
        me.synchronize(crate::rcu::spin).unwrap();
        assert_eq!(rcu.gp_counter(), 2);
        me.synchronize(crate::rcu::spin).unwrap();
        assert_eq!(rcu.gp_counter(), 4);
        // A wait in progress: its scan may predate the caller's unpublish, so the
        // cookie counts the wait after it (5 → 6, flip, wait: 8), not 5 → 6.
        rcu.gp.0.store(5, Relaxed);
        me.synchronize(crate::rcu::spin).unwrap();
        assert_eq!(rcu.gp_counter(), 8);
        assert!(!rcu.cookies_taken.load(Relaxed));
    }

    /// A reader online with the phase the next wait does not wait for (as a reader
    /// that loaded the phase before the last flip and announced it after that flip's
    /// wait leaves it): the scan sees it and the cookie takes the whole grace period,
    /// whose second wait it holds. One flip and one wait would have returned `Ok` at 2
    /// with the reader still inside (`Mutant::WaitersCookieTrustsNoScan`).
    #[test]
    fn a_stale_reader_seen_by_the_scan_costs_the_whole_grace_period() {
        // (From an odd counter the phase the next wait does not wait for is the one the
        // wait in progress waits for: such a reader holds that wait either way.)
        for (start, stale_at) in [(0u32, 3u32), (2, 5)] {
            let rcu: Rcu<4> = Rcu::new_at(start);
            let mut me = rcu.reader().unwrap();
            let other = rcu.reader().unwrap();
            let slot = &rcu.slots[other.slot()].0;
            // The phase of the first wait after the cookie's counter value (which that
            // wait does not wait for).
            let w = plus(start, 1 + (start & 1));
            slot.store(entered(phase(w)), Relaxed);
            assert_eq!(me.synchronize(a_few), Err(Error::GaveUp));
            assert_eq!(
                rcu.gp_counter(),
                stale_at,
                "from {start}: the stale reader must hold the grace period's second wait"
            );
            slot.store(CLAIMED, Relaxed);
            me.synchronize(crate::rcu::spin).unwrap();
        }
    }

    /// Once a cookie has been handed out, `synchronize` takes whole grace periods, so
    /// that cookie is done when it returns (`Mutant::CookiesLeftUnmarked` leaves it
    /// pending). An internal cookie that is polled and dropped does not mark the domain.
    #[test]
    fn a_cookie_handed_out_is_done_when_a_later_synchronize_returns() {
        let rcu: Rcu<4> = Rcu::new();
        let mut me = rcu.reader().unwrap();
        assert!(rcu.unmarked_cookie().poll());
        assert!(!rcu.cookies_taken.load(Relaxed));
        rcu.gp.0.store(0, Relaxed);
        let cookie = rcu.start_poll();
        assert!(rcu.cookies_taken.load(Relaxed));
        me.synchronize(crate::rcu::spin).unwrap();
        assert_eq!(rcu.gp_counter(), 4);
        assert!(cookie.is_done());
    }
}
