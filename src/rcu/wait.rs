//! Waiting: the hooks of the loop every blocking helper runs (`gp::until_done`), and the
//! futures (the `rcu` module docs, "Writers, interrupts and waiting", say how to use
//! them).
//!
//! A hook is any `FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>`, and every ready-made
//! hook is one: [`spin`], [`forever`]`(f)`, [`sleeping`]`(spins, f)`, `std_sleeping()`,
//! [`Deadline::hook`] and [`StallDetector::hook`] are passed as they are, with no
//! closure to write. The waits take that `FnMut` bound, not a `WaitHook` trait that
//! closures and the ready-made types would implement: rustc infers a closure's
//! higher-ranked signature (`for<'c, 'd> FnMut(&Waiting<'c, 'd, N>)`) only from an `Fn`
//! bound on the parameter, not through a blanket impl of another trait, so under
//! `impl WaitHook<N>` every unannotated `|_| ...` and `|w| ...` hook fails to compile
//! ("implementation of `FnOnce` is not general enough"), and stable Rust cannot make
//! `Deadline` itself an `FnMut`. Hooks that combine (`|w| { stall.observe(w)?;
//! deadline.check() }`) stay closures over [`StallDetector::observe`] and
//! [`Deadline::check`].

use super::gp::{GpCookie, Holdouts};
use super::wakers::{Registration, Wakers};
use core::future::Future;
use core::ops::ControlFlow;
use core::pin::Pin;
use core::task::{Context, Poll};

/// The future of [`GpCookie::wait`] and [`GpCookie::wait_woken`]: ready once the grace
/// period has ended.
///
/// Built by `wait`, it re-polls: when pending it wakes its own task, needing nothing
/// from the executor or the domain. Built by `wait_woken` (or turned with
/// [`woken_by`](Self::woken_by)), it sleeps until the reader's unlock wakes it through a
/// [`Wakers`] set, where no wake can be lost, and re-polls elsewhere (the rules are on
/// [`Wakers`]).
#[must_use = "futures do nothing unless awaited"]
pub struct GracePeriod<'d, const N: usize> {
    cookie: GpCookie<'d, N>,
    /// The waker set and the cell this future owns in it, if it is woken by unlocks.
    woken: Option<Registration>,
}

impl<'d, const N: usize> GracePeriod<'d, N> {
    pub(crate) fn new(cookie: GpCookie<'d, N>) -> Self {
        GracePeriod {
            cookie,
            woken: None,
        }
    }

    /// This wait, woken through `wakers` by the reader's unlock instead of re-polling,
    /// where that is reliable (see [`Wakers`]). The domain's wake hook must call
    /// `wakers.wake()`.
    pub fn woken_by<const K: usize>(mut self, wakers: &'static Wakers<K>) -> Self {
        self.woken = Some(Registration::new(wakers.cells()));
        self
    }

    /// Pending: ask the executor to poll again (after the tasks that are ready, one of
    /// which may be the reader we wait for).
    fn poll_again(cx: &mut Context<'_>) -> Poll<()> {
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Pending with a waker set: sleep until an unlock wakes the task, where no wake can
    /// be lost and a reader holds the grace period; otherwise poll again.
    fn sleep_woken(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(reg) = self.woken.as_mut() else {
            return Self::poll_again(cx);
        };
        let rcu = self.cookie.rcu;
        if !super::heavy::wakes_are_reliable()
            || !rcu.has_wake_hook()
            || rcu.wake_hook_is_std_wake()
        {
            return Self::poll_again(cx);
        }
        let Some(cell) = reg.cell() else {
            return Self::full_set(cx); // every cell taken: never lose a waiter
        };
        if !cell.register(cx.waker()) {
            return Self::poll_again(cx); // a wake came in meanwhile
        }
        // The blocking waits' protocol: announce, heavy fence, poll once more.
        let mut asleep = false;
        Waiting::new(&self.cookie, 1).sleep(|| asleep = true);
        if !asleep {
            reg.release();
            return Poll::Ready(());
        }
        if !self.cookie.only_readers_hold() {
            return Self::poll_again(cx);
        }
        Poll::Pending
    }

    /// Pending with a full waker set: re-poll, as `wait` does.
    fn full_set(cx: &mut Context<'_>) -> Poll<()> {
        divert!(WakersFullSetSleeps => Poll::Pending);
        Self::poll_again(cx)
    }
}

impl<'d, const N: usize> GpCookie<'d, N> {
    /// A future that completes once the grace period has ended (see the module docs of
    /// [`rcu`](super): it re-polls, needing nothing from the executor).
    pub fn wait(self) -> GracePeriod<'d, N> {
        GracePeriod::new(self)
    }

    /// A future that completes once the grace period has ended, woken by the unlock of
    /// the reader it waits for through `wakers` (which the domain's wake hook must
    /// wake, [`Rcu::set_wake_hook`](super::Rcu::set_wake_hook)) instead of re-polling,
    /// where that is reliable; elsewhere, or with every cell of `wakers` taken, it
    /// re-polls as [`wait`](Self::wait) does ([`Wakers`] gives the rules).
    ///
    /// ```
    /// use rcuref::rcu::{Rcu, Wakers};
    /// static RCU: Rcu<2> = Rcu::new();
    /// static WAKERS: Wakers<2> = Wakers::new();
    /// fn wake() {
    ///     WAKERS.wake()
    /// }
    /// # struct Noop;
    /// # impl std::task::Wake for Noop { fn wake(self: std::sync::Arc<Self>) {} }
    /// # fn block_on(f: impl core::future::Future<Output = ()>) {
    /// #     let mut f = core::pin::pin!(f);
    /// #     let waker = std::task::Waker::from(std::sync::Arc::new(Noop));
    /// #     let mut cx = core::task::Context::from_waker(&waker);
    /// #     while f.as_mut().poll(&mut cx).is_pending() {}
    /// # }
    /// RCU.set_wake_hook(Some(wake));
    /// block_on(async { RCU.start_poll().wait_woken(&WAKERS).await });
    /// ```
    pub fn wait_woken<const K: usize>(self, wakers: &'static Wakers<K>) -> GracePeriod<'d, N> {
        GracePeriod::new(self).woken_by(wakers)
    }
}

impl<const N: usize> Future for GracePeriod<'_, N> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.cookie.poll() {
            if let Some(reg) = this.woken.as_mut() {
                reg.release();
            }
            Poll::Ready(())
        } else {
            this.sleep_woken(cx)
        }
    }
}

impl<const N: usize> core::fmt::Debug for GracePeriod<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GracePeriod")
            .field("cookie", &self.cookie)
            .finish()
    }
}

/// A wait hook that reports a stall once: when a wait has lasted `threshold` ticks of
/// your clock, it calls `report` with how long it has waited and the slots holding the
/// grace period up (Linux's RCU CPU stall warning, in miniature). Use it as a hook:
/// `reader.synchronize(stall.hook())`, or with a deadline:
/// `|w| { stall.observe(w)?; deadline.check() }`.
pub struct StallDetector<C, R> {
    clock: C,
    threshold: u64,
    report: R,
    started: Option<u64>,
    reported: bool,
}

impl<C: FnMut() -> u64, R: FnMut(u64, Holdouts<'_>)> StallDetector<C, R> {
    /// A detector on `clock` (any monotonic tick count: a cycle counter, `mtime`, a
    /// millisecond tick), reporting waits of `threshold` ticks or more to `report`
    /// (`|waited, holdouts| ...`: no annotations needed).
    pub fn new(clock: C, threshold: u64, report: R) -> Self {
        StallDetector {
            clock,
            threshold,
            report,
            started: None,
            reported: false,
        }
    }

    /// Looks at a wait (call it from the hook on every attempt); reports at most once
    /// per wait, and starts over when a new wait begins (`attempts() == 1`). Always
    /// says go on.
    pub fn observe<const N: usize>(&mut self, w: &Waiting<'_, '_, N>) -> ControlFlow<()> {
        let now = (self.clock)();
        if w.attempts() <= 1 || self.started.is_none() {
            self.started = Some(now);
            self.reported = false;
        }
        let waited = now.wrapping_sub(self.started.unwrap_or(now));
        if !self.reported && waited >= self.threshold {
            self.reported = true;
            (self.report)(waited, w.holdouts());
        }
        ControlFlow::Continue(())
    }

    /// This detector as a wait hook (it [`observe`](Self::observe)s every attempt):
    /// `reader.synchronize(stall.hook())`. It borrows the detector, which goes on
    /// across waits.
    pub fn hook<const N: usize>(
        &mut self,
    ) -> impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()> + '_ {
        move |w| self.observe(w)
    }
}

impl<C, R> core::fmt::Debug for StallDetector<C, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StallDetector")
            .field("threshold", &self.threshold)
            .field("reported", &self.reported)
            .finish_non_exhaustive()
    }
}

/// A wait hook that gives up after `limit` ticks of your clock (from its first call):
/// `reader.synchronize(deadline.hook())` returns `Err(Error::GaveUp)` then.
pub struct Deadline<C> {
    clock: C,
    limit: u64,
    started: Option<u64>,
}

impl<C: FnMut() -> u64> Deadline<C> {
    /// A deadline `limit` ticks after the first [`check`](Self::check).
    pub fn new(clock: C, limit: u64) -> Self {
        Deadline {
            clock,
            limit,
            started: None,
        }
    }

    /// `Break` once the deadline has passed.
    pub fn check(&mut self) -> ControlFlow<()> {
        let now = (self.clock)();
        let start = *self.started.get_or_insert(now);
        if now.wrapping_sub(start) >= self.limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    /// This deadline as a wait hook (it [`check`](Self::check)s on every attempt):
    /// `reader.synchronize(deadline.hook())`. It borrows the deadline, which keeps
    /// counting from its first check across waits.
    pub fn hook<const N: usize>(
        &mut self,
    ) -> impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()> + '_ {
        move |_| self.check()
    }
}

impl<C> core::fmt::Debug for Deadline<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Deadline")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

/// The state of a blocking wait, shown to its hook between attempts (see
/// [`Reader::synchronize`](super::Reader::synchronize)).
pub struct Waiting<'c, 'd, const N: usize> {
    cookie: &'c GpCookie<'d, N>,
    attempts: u32,
    /// What the wait waits for when it is not the cookie's grace period (a barrier
    /// waiting for callbacks that other contexts are running): whether it is over.
    until: Option<&'c dyn Fn() -> bool>,
}

impl<'c, 'd, const N: usize> Waiting<'c, 'd, N> {
    /// The state shown to a hook after `attempts` failed attempts of a wait for
    /// `cookie` (or, in a barrier, for what ran after it).
    pub(crate) fn new(cookie: &'c GpCookie<'d, N>, attempts: u32) -> Self {
        Waiting {
            cookie,
            attempts,
            until: None,
        }
    }

    /// The state shown to a hook of a wait, after the cookie's grace period, for
    /// something else: `done` says whether that is over (a sleep re-checks it).
    pub(crate) fn until(
        cookie: &'c GpCookie<'d, N>,
        attempts: u32,
        done: &'c dyn Fn() -> bool,
    ) -> Self {
        Waiting {
            cookie,
            attempts,
            until: Some(done),
        }
    }

    /// The grace period being waited for. A `synchronize` that takes one flip and one
    /// wait (module docs, "A blocking wait's own scan") shows its own cookie here, which
    /// may name a grace period that ends sooner than [`Rcu::start_poll`]'s at the same
    /// moment would; like any cookie it is done once every section that was running
    /// when the wait began has ended. Kept by the hook, it does not mark the domain
    /// (only `start_poll` does), and needs none: a later `synchronize` targets no
    /// earlier grace period.
    ///
    /// [`Rcu::start_poll`]: super::Rcu::start_poll
    pub fn cookie(&self) -> GpCookie<'d, N> {
        *self.cookie
    }

    /// How many times the grace period has been polled without ending (1 the first time
    /// the hook runs).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The reader slots holding the grace period up right now (see
    /// [`GpCookie::holdouts`]).
    pub fn holdouts(&self) -> Holdouts<'d> {
        self.cookie.holdouts()
    }

    /// Sleeps through `sleep` unless the grace period ends first: announces this wait
    /// in the domain, polls once more, and calls `sleep` only if the grace period still
    /// has not ended. The outermost unlock of the next section that holds the wait
    /// (one that began before its flip), or the step of another driver that ends the
    /// wait, calls the domain's wake hook
    /// ([`Rcu::set_wake_hook`](super::Rcu::set_wake_hook)), which should make `sleep`
    /// return; the wait then polls again. Sections that began after the flip send no
    /// wake and pay nothing for the sleeper: the announcement names the phase the
    /// wait's sections recorded, and an unlock looks only at its own phase's. In the heavy mode, a wait that finds another
    /// driver's heavy fence for its wait under way sleeps until that fence returns (its
    /// driver calls the wake hook) rather than issue one of its own. For a writer that shares its core with the
    /// readers it waits for (more tasks than cores, a priority scheduler): it gives them
    /// the core instead of polling.
    ///
    /// Two duties of `sleep`:
    /// * **It must return at once for a wake that came after this call began**, even
    ///   one that came before `sleep` started (the unlock may run between the poll and
    ///   the sleep): wait on something that remembers, an RTOS task notification or
    ///   semaphore, a `wfe` (the event register), a generation number read before this
    ///   call (`std_sleeping` does that), not a bare condition variable.
    /// * **It must also return after a bound of its own** (a timeout: a tick, a
    ///   millisecond): in the full-fence mode a reader's unlock can miss the announcement
    ///   in a window of a few instructions (nothing orders the unlock's store before its
    ///   load of the announcement; a fence there would cost every unlock), and the wait
    ///   then sleeps out that bound. In the heavy mode (`--cfg rcuref_asymmetric_fence`,
    ///   or feature `auto-fence` decided heavy) the announcement is followed by a heavy
    ///   fence and that window is closed (litmus `asym-wake-after-unlock-*`, loom
    ///   `tests/loom_wake.rs`); on one core (`--cfg rcuref_unsafe_assume_single_core`)
    ///   it cannot open either. An unlock judges whether its section holds the wait by
    ///   the counter (as the scan does), and a step that ends a wait wakes the sleepers
    ///   itself, so another driver's late store of the phase word, or its flip between
    ///   the unlock's store and its check, costs no wake (loom
    ///   `a_late_phase_store_costs_no_wake`, `tests/lost_wake.rs`). Keep a bound in
    ///   every mode all the same: it is what a wake hook that fails, or a mode that
    ///   can lose a wake, falls back on.
    ///
    /// The loom models in `tests/loom_wake.rs` run this and the unlock's wake: loom finds
    /// the full-fence mode's missed wake-up; with the unlock ordered before the announcement
    /// or after the sleep began, and with the heavy fence modelled (the reader's core
    /// taking it before the unlock's store, between the store and the load, or after),
    /// none is missed, and a bounded sleep ends the wait in every case. With a second
    /// driver beside them loom finds the late phase store's missed wake-up, heavy fence
    /// or not (an ignored test: it takes minutes).
    pub fn sleep(&self, sleep: impl FnOnce()) {
        divert!(SleepWithoutRepoll => super::broken::sleep_without_repoll(self, sleep));
        let rcu = self.cookie.rcu;
        rcu.announce_sleep(self.until.is_none());
        // Another driver's heavy fence for this wait under way: sleep until it returns
        // (it wakes the sleepers), rather than issue a fence of our own.
        #[cfg(rcuref_fences)]
        let sleep = match self.until {
            None => {
                let mut sleep = Some(sleep);
                let patient = self.attempts < super::gp::PATIENCE;
                if super::heavy::sleep_for_fence(rcu, patient, || {
                    if let Some(f) = sleep.take() {
                        f()
                    }
                }) {
                    return;
                }
                match sleep {
                    Some(f) => f,
                    None => return,
                }
            }
            Some(_) => sleep,
        };
        // The announcement before the poll's scan, against a reader's unlock store
        // before its load of the announcement (store buffering): the heavy fence makes
        // the reader's core order the two, so either the scan sees the unlock or the
        // unlock sees the announcement.
        super::heavy::after_announce();
        if self.until.is_some_and(|done| done()) {
            return;
        }
        if self.until.is_none() && self.cookie.poll() {
            return;
        }
        sleep();
    }
}

/// A wait hook that never gives up: it spins for `spins` attempts, then sleeps through
/// `sleep` between attempts ([`Waiting::sleep`]: only while the grace period has not
/// ended, woken by the last reader's unlock through the domain's wake hook). `sleep`
/// blocks until woken or until a bound of its own (an RTOS's notify-take with a tick's
/// timeout, a `wfe`, a futex wait with a timeout). Install the wake on the domain with
/// [`Rcu::set_wake_hook`](super::Rcu::set_wake_hook); feature `std` has both ready
/// (`rcu::std_sleeping`, `rcu::std_wake`).
pub fn sleeping<const N: usize>(
    spins: u32,
    mut sleep: impl FnMut(),
) -> impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()> {
    move |w| {
        if w.attempts() > spins {
            w.sleep(&mut sleep);
        }
        ControlFlow::Continue(())
    }
}

/// The wait hook that never gives up and does nothing between attempts but the short
/// spin every wait makes: `reader.synchronize(rcu::spin)`. For a writer that owns its
/// core (a kernel's writer on an otherwise idle CPU); elsewhere use [`forever`].
pub fn spin<const N: usize>(_: &Waiting<'_, '_, N>) -> ControlFlow<()> {
    ControlFlow::Continue(())
}

/// A wait hook that calls `between` between attempts and never gives up:
/// `reader.synchronize(rcu::forever(std::thread::yield_now))`, or a `wfi`, an RTOS
/// sleep. (A hook that may give up: [`Deadline::hook`], or a closure of your own.)
pub fn forever<const N: usize>(
    mut between: impl FnMut(),
) -> impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()> {
    move |_| {
        between();
        ControlFlow::Continue(())
    }
}

/// Sleeps and wakes for hosted programs (feature `std`): one generation number and one
/// condition variable for the process; every domain's wake moves the number on and
/// notifies every sleeper (they re-check their own grace periods).
#[cfg(all(feature = "std", not(loom)))]
mod std_sleep {
    use super::{ControlFlow, Waiting};
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    static WAKES: AtomicU64 = AtomicU64::new(0);
    static LOCK: Mutex<()> = Mutex::new(());
    static WOKEN: Condvar = Condvar::new();

    /// How long a [`std_sleeping`] wait sleeps at most (the bound on a missed or late
    /// wake-up); [`std_sleeping_for`] takes another.
    pub const SLEEP_BOUND: Duration = Duration::from_millis(1);
    /// Attempts a [`std_sleeping`] wait polls before it sleeps: with the blocking
    /// wait's back-off between them (1, 2, 4 … 64 spin-loop hints), a few microseconds
    /// (about 6 µs on the report's AMD EPYC), the order of liburcu's spin before its
    /// futex. It was 64 (about 95 µs there): on a machine whose threads outnumber its
    /// cores the writer burnt its share of the core polling, was preempted, and came
    /// back milliseconds after the reader's unlock (docs/bench/REPORT.md, "a reader
    /// preempted inside its section").
    pub const SPIN_ATTEMPTS: u32 = 8;

    /// The domain wake hook that [`std_sleeping`] installs: wakes every sleeping wait of
    /// the process. Never blocks, so a reader in a signal handler may end its section.
    /// It notifies under the sleepers' lock when it can take it at once (then a sleeper
    /// is either before its check, and sees the generation moved, or asleep), and
    /// without it otherwise: a sleeper between its check and its wait can then miss the
    /// notification, and wakes up to its bound late ([`SLEEP_BOUND`] for
    /// [`std_sleeping`]). It skipped the notification when the lock was taken, and a
    /// sleeper beside another one that held the lock lost its wake-up for its whole
    /// bound (1-33 wake-ups in 1,000 beside a sleeper that takes the lock over and over:
    /// `tests/sleeping.rs`, `a_wake_is_not_lost_while_another_sleeper_holds_the_lock`).
    pub fn std_wake() {
        WAKES.fetch_add(1, SeqCst);
        let _held = LOCK.try_lock();
        WOKEN.notify_all();
    }

    /// A wait hook that polls a few times, then sleeps on a condition variable until a
    /// reader's unlock wakes it, or [`SLEEP_BOUND`] passes: [`std_sleeping_for`] with
    /// that bound. It installs [`std_wake`] as the domain's wake hook the first time it
    /// sleeps, if the domain has none. The generation it sleeps on is read before the
    /// wait announces itself, so a wake that comes between its last poll and its sleep is
    /// not lost (`std_sleeping_keeps_a_wake_between_its_poll_and_its_sleep`).
    pub fn std_sleeping<const N: usize>() -> impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()> {
        std_sleeping_for(SLEEP_BOUND)
    }

    /// [`std_sleeping`] with another bound on each sleep: what a missed or late wake-up
    /// costs at most, and how often a wait held by a reader that does not run polls
    /// again. The bound is a timer armed for each sleep and cancelled when the wake
    /// comes first, and that can cost: docs/bench/ANALYSIS.md measured, on a 2-core
    /// virtual machine, a reader preempted in its section and the writer back 30-34 µs
    /// after the unlock with 1 ms, 24-26 µs with 3 ms or more; but with 4 or 10 ms, 8
    /// readers on 2 cores let the writer make fewer grace periods (0.8x with the static
    /// full fence, less with the fence chosen at run time) and 2 readers about 0.9x with
    /// 10 ms.
    ///
    /// A wake-up can be missed (a window of a few instructions in [`std_wake`], one in
    /// the full-fence mode's unlock: [`Waiting::sleep`]), and a wake hook other than
    /// `std_wake` on the domain wakes nothing here unless it calls `std_wake`: then the
    /// wait sleeps out its bound. So a bound is the most such a wake-up costs, and
    /// `Duration::MAX` (or any bound past the timer's range, which sleeps with no timer)
    /// can wait for ever. `Duration::ZERO` never sleeps and never announces itself: the
    /// wait polls, as with [`spin`](super::spin).
    pub fn std_sleeping_for<const N: usize>(
        bound: Duration,
    ) -> impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()> {
        move |w| {
            if w.attempts() > SPIN_ATTEMPTS && !bound.is_zero() {
                if w.attempts() == SPIN_ATTEMPTS + 1 {
                    w.cookie().domain().wake_hook_or(std_wake);
                }
                let seen = WAKES.load(SeqCst);
                w.sleep(|| {
                    let held = LOCK.lock().unwrap_or_else(|e| e.into_inner());
                    let _ = WOKEN.wait_timeout_while(held, bound, |_| WAKES.load(SeqCst) == seen);
                });
            }
            ControlFlow::Continue(())
        }
    }
}
#[cfg(all(feature = "std", not(loom)))]
pub use std_sleep::{std_sleeping, std_sleeping_for, std_wake, SLEEP_BOUND, SPIN_ATTEMPTS};
