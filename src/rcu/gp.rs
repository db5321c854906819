//! Grace periods: the steps that advance the counter, the lap guard, and cookies.

use super::domain::Rcu;
use super::encoding::{
    half, mask, online, phase, phase_of, plus, reached, COMPLETED, MAX_TRIES, ONE_LEVEL,
    STEPS_PER_GP,
};
use super::ops;
use super::wait::Waiting;
use crate::error::Error;
use crate::pad::Line;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed};
use core::ops::ControlFlow;

impl<const N: usize> Rcu<N> {
    /// How many unfinished cookies with distinct targets a domain can have at once (3):
    /// a table of cookies this long, keeping the newest of each target, covers every
    /// grace period in flight (Linux's `NUM_ACTIVE_RCU_POLL_OLDSTATE`, which is 2 there).
    /// The targets are the even counter values one to five steps ahead: three while a
    /// wait is in progress, two otherwise (`tests/polled.rs` counts them on every value
    /// of a small counter).
    pub const ACTIVE_COOKIES: usize = super::encoding::ACTIVE_COOKIES;

    /// Takes a cookie that is done once every read section running now has ended
    /// (Linux's `start_poll_synchronize_rcu`). Never blocks. Call it after unpublishing
    /// what you will reclaim.
    ///
    /// It starts nothing: grace periods here are driven by whoever polls or waits, so
    /// this is [`get_state`](Self::get_state) under the name Linux callers look for.
    pub fn start_poll(&self) -> GpCookie<'_, N> {
        GpCookie {
            rcu: self,
            target: cookie_target(ops::cookie_snapshot(&self.gp.0)),
        }
    }

    /// Takes a cookie for the grace period that covers every section running now,
    /// without starting one (Linux's `get_state_synchronize_rcu`): the same cookie as
    /// [`start_poll`](Self::start_poll), which starts nothing either.
    pub fn get_state(&self) -> GpCookie<'_, N> {
        self.start_poll()
    }

    /// A cookie that is always done (Linux's `get_completed_synchronize_rcu`): for the
    /// "nothing to wait for" entries of a table of cookies. Its raw form
    /// ([`GpCookie::into_raw`]) is `u32::MAX`, which no [`start_poll`](Self::start_poll)
    /// returns (real targets are even), and it stays done however far the counter goes.
    pub fn completed(&self) -> GpCookie<'_, N> {
        GpCookie {
            rcu: self,
            target: COMPLETED,
        }
    }

    /// A cookie back from [`GpCookie::into_raw`], to keep one in an atomic (an
    /// interrupt handler's state, say).
    ///
    /// **The number must reach this context with happens-before** from the context that
    /// took the cookie: the same context (or an interrupt handler of the same core), a
    /// `Release` store and an `Acquire` load of the atomic that carries it, a lock. A
    /// number read with a relaxed load on another core can meet an older view of the
    /// counter than the one the cookie was taken at, and such a cookie may be answered
    /// done before its grace period has ended (`tests/loom_rcu.rs`,
    /// `a_cookie_moved_without_happens_before_can_be_answered_early`).
    ///
    /// A number that did not come from a cookie of this domain answers about an
    /// arbitrary point of this domain's grace-period sequence: nothing unsafe follows
    /// inside this crate, and [`GpCookie::poll`] stays bounded, but the answer means
    /// nothing to the caller.
    pub fn cookie_from_raw(&self, raw: u32) -> GpCookie<'_, N> {
        GpCookie {
            rcu: self,
            target: if raw == COMPLETED { raw } else { raw & mask() },
        }
    }

    /// Advances `gp` towards `target` as far as the readers allow, at most `MAX_TRIES`
    /// attempts, in the rhythm of the module docs: flip, wait for the phase before the
    /// flip, flip, wait. Any number of contexts may run this at once: each step is a
    /// compare-exchange from the value it was decided on, so a context stopped anywhere
    /// in here holds nobody up and can never complete a step on stale facts.
    ///
    /// `patient`: the caller is a blocking wait that will come back, so at a wait whose
    /// heavy fence another driver is issuing it ends this call instead of issuing one
    /// more (asymmetric-fence mode only; `heavy::in_wait_step`).
    pub(crate) fn advance(&self, target: u32, patient: bool) {
        divert!(BustedGracePeriod => super::broken::busted_grace_period(self, target));
        divert!(StaleFastPath => super::broken::advance_idle_fast_path(self, target, patient));
        divert!(WriterLock => super::broken::advance_writer_lock(self, target, patient));
        let (mut reg, mut g) = Registration::new(self);
        for _ in 0..MAX_TRIES {
            if reached(g, target) {
                break;
            }
            let moved = if g & 1 == 0 {
                self.flip(&mut reg, g)
            } else {
                self.wait_for_phase(&mut reg, g, patient)
            };
            match moved {
                Some(now) => g = now,
                None => break,
            }
        }
        reg.finish();
    }

    /// A flip (`g` even): readers that enter from now on are told apart from those
    /// already inside by the phase they record. The counter's value after it (this
    /// step's or another driver's), or `None` when the lap guard holds it back.
    pub(crate) fn flip(&self, reg: &mut Registration<'_, N>, g: u32) -> Option<u32> {
        self.step(reg, g)
    }

    /// A wait (`g` odd): steps once no reader that entered before the flip is still
    /// inside; `None` when one is (or another driver's heavy fence for this wait is
    /// under way, or the lap guard holds the step back).
    pub(crate) fn wait_for_phase(
        &self,
        reg: &mut Registration<'_, N>,
        g: u32,
        patient: bool,
    ) -> Option<u32> {
        self.record_phase(g);
        // Every reader that could hold something unpublished before this wait's flip is
        // either seen by this scan or sees the unpublish (the fence pairing in the
        // module docs).
        ops::wait_fence();
        // Asymmetric mode: readers have only a compiler fence; make their cores execute
        // the barrier now, unless a driver's fence for this wait has already returned
        // (`heavy`'s module docs). A heavy fence that panics leaves this call through
        // `reg`'s drop, which leaves its half.
        if !super::heavy::in_wait_step(self, g, patient) {
            return None; // another driver's heavy fence for this wait is under way
        }
        pause_point!(GpBeforeScan(g));
        let held = self.old_phase_online(g);
        pause_point!(GpAfterScan);
        if held {
            reg.held_by_a_reader();
            return None;
        }
        self.step(reg, g)
    }

    /// Tells readers entering from now on to record the phase of the wait at `g`.
    /// Written only when it changes (twice per grace period), so readers' copies of the
    /// line stay valid otherwise; a store that lands late (its driver was stopped) only
    /// makes some wait last longer (module docs, "The phase word").
    #[inline(always)]
    pub(crate) fn record_phase(&self, g: u32) {
        divert!(FrozenPhase => ());
        ops::set_phase(&self.phase.0.phase, phase(g));
    }

    /// One scan of the slots: whether a reader is online with the phase before the flip
    /// that led to the wait at `g`.
    pub(crate) fn old_phase_online(&self, g: u32) -> bool {
        let old = phase(g) ^ 1;
        self.slots.iter().any(|s| {
            let v = ops::scan_slot(&s.0);
            online(v) && phase_of(v) == old
        })
    }

    /// One step of the counter from `g`, if the lap guard allows it: the counter's value
    /// after it (this step's, or another driver's that moved it first: progress too).
    pub(crate) fn step(&self, reg: &mut Registration<'_, N>, g: u32) -> Option<u32> {
        let next = plus(g, 1);
        if !self.lap_guard_allows(reg, next) {
            return None;
        }
        // A step into the other half, where nobody is registered now, first forgets any
        // mark from that half's last lap (asymmetric-fence mode).
        super::heavy::before_step(self, g, next);
        let now = match ops::step(&self.gp.0, g, next) {
            Ok(_) => next,
            Err(now) => now,
        };
        Some(reg.follow(now))
    }

    /// The registration count of half `h` (0 or 1; masked, so no bounds check and no
    /// panic path is compiled in).
    #[inline(always)]
    pub(crate) fn stepping_in(&self, h: usize) -> &AtomicU32 {
        &self.stepping.0[h & 1]
    }

    /// Registers the caller as a driver in the half of the range `gp` is in, and returns
    /// that half and a snapshot of `gp` taken after the registration.
    pub(crate) fn enter(&self) -> (usize, u32) {
        divert!(RegisterWithoutRecheck => super::broken::enter_without_recheck(self));
        let mut g = ops::counter_snapshot(&self.gp.0);
        loop {
            let h = half(g);
            pause_point!(GpEnterBeforeRegister);
            let now = ops::register_in_half(self.stepping_in(h), &self.gp.0);
            if half(now) == h {
                return (h, now);
            }
            // `g` was from an earlier visit of that half: register again.
            ops::leave_half(self.stepping_in(h));
            g = now;
        }
    }

    /// The lap guard: the counter may step to `next` unless that enters the other half
    /// while a stopped context still holds a snapshot there, which it could otherwise
    /// meet again a lap later (ABA).
    #[inline(always)]
    fn lap_guard_allows(&self, reg: &Registration<'_, N>, next: u32) -> bool {
        divert!(NoLapGuard => true);
        half(next) == reg.half || ops::registered(self.stepping_in(half(next))) == 0
    }
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
const PATIENCE: u32 = 1024;
/// `2^BACKOFF_SHIFT >= MAX_BACKOFF`: where the doubling stops.
#[cfg(not(loom))]
const BACKOFF_SHIFT: u32 = 6;

/// The target of a cookie taken when the counter read `g`: a whole grace period (two
/// flips and two waits) from the next flip. A wait already in progress (odd `g`) started
/// before the caller's unpublish, so it does not count.
#[inline(always)]
fn cookie_target(g: u32) -> u32 {
    divert!(SingleFlip => plus(g, STEPS_PER_GP / 2 + (g & 1)));
    divert!(CookieCountsWaitInProgress => plus(g, STEPS_PER_GP));
    plus(g, STEPS_PER_GP + (g & 1))
}

/// A driver's registration for the lap guard, in one half of the counter's range.
///
/// Left by [`finish`](Self::finish) when a call of `advance` ends, or by `Drop` when a
/// panic leaves it (a heavy fence that panics, say): a driver that died inside a step
/// must not pin its half, or the counter could never enter it again and no grace period
/// would end after one more half-lap.
pub(crate) struct Registration<'d, const N: usize> {
    // INVARIANT: this context is counted once in `rcu.stepping[half]`, and `half` is the
    // half of the snapshot it steps from.
    pub(super) rcu: &'d Rcu<N>,
    pub(super) half: usize,
}

impl<'d, const N: usize> Registration<'d, N> {
    /// Registers in the half the counter is in; returns the registration and a snapshot
    /// of the counter taken after it (in that half).
    pub(crate) fn new(rcu: &'d Rcu<N>) -> (Self, u32) {
        let (half, g) = rcu.enter();
        (Registration { rcu, half }, g)
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
        ops::leave_half(self.rcu.stepping_in(self.half));
        let (half, fresh) = self.rcu.enter();
        self.half = half;
        fresh
    }

    /// A reader from before the flip holds the wait: the call ends here, and its
    /// registration with it (`finish`). Nothing to do but in a broken variant.
    #[inline(always)]
    fn held_by_a_reader(&self) {
        divert!(RegistrationLeakedWhenBlocked => super::broken::leak_registration(self));
    }

    /// Leaves the half: the end of a call.
    pub(crate) fn finish(self) {
        let me = core::mem::ManuallyDrop::new(self);
        ops::leave_half(me.rcu.stepping_in(me.half));
    }
}

impl<const N: usize> Drop for Registration<'_, N> {
    /// Only reached when a panic unwinds out of a step (`finish` ends every call that
    /// returns).
    fn drop(&mut self) {
        divert!(RegistrationKeptOnPanic => ());
        ops::leave_half(self.rcu.stepping_in(self.half));
    }
}

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
        self.rcu.advance(self.target, patient);
        self.is_done()
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
/// period (Linux's `same_state_synchronize_rcu`): two cookies taken with no step of the
/// counter between them, or two completed cookies.
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
