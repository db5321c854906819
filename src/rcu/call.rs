//! A bounded callback queue that any number of contexts share: `call_rcu` without a
//! heap, a lock or a wait, for interrupt handlers as much as threads.
//!
//! [`DeferQueue`](super::DeferQueue) has one owner (`&mut self`). A [`CallQueue`] is
//! shared (`&self`): each of its `M` places is a small state machine, and a context
//! moves a place on with one atomic operation:
//!
//! ```text
//! FREE --claim (compare-exchange, Acquire)--> FILLING --ready (store, Release)--> READY
//! READY --take (compare-exchange, Acquire)--> RUNNING --free (store, Release)--> FREE
//! RUNNING --not due yet (store, Release)--> READY
//! ```
//!
//! Only the context that moved a place out of FREE or READY touches its value until it
//! moves the place on, so the value needs no ordering beyond the state's release and
//! acquire (litmus: `call-ready-publishes-value`, `call-free-then-claim`; the READY
//! store is also preceded by `start_poll`'s full fence, which alone would order the
//! value, so the litmus twin that relaxes it drops that fence too). A place is
//! freed only after its callback returned (or unwound), so a barrier that sees every
//! place of its callbacks FREE knows they have all run.
//!
//! # The barrier, and counters that go round
//!
//! Each call also takes a number from the queue's `queued` counter (a read-modify-write
//! with `Release`, after the claim). [`CallQueue::barrier`] reads the counter
//! (`Acquire`) before it starts its grace period: every callback numbered below what it
//! read was queued (and its value unpublished) before that grace period began, so once
//! the grace period has ended all of them are due, whatever their cookies say. It does
//! not ask their cookies: a cookie left queued for a whole lap of the grace-period
//! counter reads "not done" again for a few steps, and a barrier that trusted it
//! returned with the callback still queued (`Mutant::CallBarrierTrustsCookies` brings
//! it back, `tests/call_queue.rs` catches it on a 4-bit counter). A place being filled
//! or run elsewhere still counts for the barrier (its number may be older than the one
//! the place shows: the barrier waits for it, it never skips it; litmus
//! `call-barrier-sees-the-claim`).
//!
//! # Interrupts and preemption
//!
//! No operation waits for another context, so an interrupt handler may call, run or
//! count at any point of the code it interrupts: a place that the interrupted context
//! holds (FILLING or RUNNING) is skipped, and a [`run`](CallQueue::run) counts it as
//! left. Only [`barrier`](CallQueue::barrier) waits, and only for contexts that hold
//! places of its callbacks: never call it from an interrupt handler, or from a callback.

use super::domain::Rcu;
use super::readers::{may_wait, wait_through, WaitContext};
use super::wait::Waiting;
use crate::error::{Error, Refused};
use crate::sync::{
    AtomicU32,
    Ordering::{Acquire, Relaxed, Release},
    UnsafeCell,
};
use core::mem::MaybeUninit;
use core::ops::ControlFlow;

pub(super) const FREE: u32 = 0;
const FILLING: u32 = 1;
pub(super) const READY: u32 = 2;
const RUNNING: u32 = 3;

/// One place of the queue.
pub(super) struct Place<C> {
    // INVARIANTS:
    // * `value` is initialised exactly while `state` is READY or RUNNING (and, from the
    //   write after the claim until the READY store, while FILLING).
    // * Only the context whose compare-exchange moved `state` out of FREE (to FILLING)
    //   or READY (to RUNNING) accesses `value`, `cookie` and (writes) `seq`, until its
    //   store moves `state` on.
    pub(super) state: AtomicU32,
    /// The grace period after which the callback is due (a raw cookie of the queue's
    /// domain).
    cookie: AtomicU32,
    /// The queue's `queued` count when the callback was queued. Read by barriers of
    /// other contexts while the place is held elsewhere, so it is an atomic.
    seq: AtomicU32,
    pub(super) value: UnsafeCell<MaybeUninit<C>>,
    /// The key the callback was queued with (`call_keyed`; 0: none), read by other
    /// callers while the place is held.
    #[cfg(feature = "debug-callbacks")]
    key: crate::sync::AtomicUsize,
}

impl<C> Place<C> {
    const_fn! {
        const fn new() -> Self {
            Place {
                state: AtomicU32::new(FREE),
                cookie: AtomicU32::new(0),
                seq: AtomicU32::new(0),
                value: UnsafeCell::new(MaybeUninit::uninit()),
                #[cfg(feature = "debug-callbacks")]
                key: crate::sync::AtomicUsize::new(0),
            }
        }
    }
}

/// What one [`CallQueue::run`] did: how many callbacks it ran, and how many places it
/// left holding a callback (not due yet, past the budget, or held by another context
/// that is queueing or running one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Ran {
    /// Callbacks run by this call.
    pub ran: usize,
    /// Places still holding a callback that this call did not run.
    pub left: usize,
}

/// A fixed-capacity queue of callbacks of one domain, shared by any number of contexts
/// (interrupt handlers included): each callback is handed, exactly once, to the `run`
/// function of whichever context runs the queue after a grace period of the domain has
/// passed since it was queued (Linux's `call_rcu`, in `M` places and no heap).
///
/// `C` is what a callback is: a value to reclaim, a function pointer and its argument
/// (the C API's `rcuref_call_rcu` queues `(fn, arg)`), an enum of the jobs your system
/// defers. The queue never looks inside it.
///
/// **A callback is never run before its grace period**, on any path:
///
/// * A `run` function that panics has been handed its callback and the place is freed;
///   the rest stay queued.
/// * Dropping the queue drops the callbacks whose grace period has already ended (as
///   values: they are not run) and **leaks the others** (never dropped). Call
///   [`barrier`](Self::barrier) first to run everything.
pub struct CallQueue<'d, C, const M: usize, const N: usize> {
    // INVARIANT: the callbacks of `places` were queued with cookies of `rcu`.
    rcu: &'d Rcu<N>,
    places: [Place<C>; M],
    /// Where the next claim starts looking (a hint).
    next: AtomicU32,
    /// Callbacks queued so far (wrapping): each place's `seq` is taken from it.
    queued: AtomicU32,
    /// Where the next run starts looking (a hint, for fairness under a budget).
    run_from: AtomicU32,
}

// SAFETY: a callback is moved in by the context that queues it and moved out by the
// one that runs it (or drops the queue), never shared: `C: Send` is all that needs.
// The queue's own state is atomic, and the places' invariant gives each value one
// accessor at a time.
unsafe impl<C: Send, const M: usize, const N: usize> Sync for CallQueue<'_, C, M, N> {}
// SAFETY: as above; moving the queue moves its callbacks.
unsafe impl<C: Send, const M: usize, const N: usize> Send for CallQueue<'_, C, M, N> {}

/// Whether number `seq` was taken before a barrier read `limit`, given that the
/// queue's count is `now` (read after `limit`): the numbers taken since are exactly
/// `limit..now` (wrapping), so any other number is older. Holds while fewer than 2^32
/// callbacks are queued during one barrier, however old `seq` is (a number compared
/// by its sign alone turns "new" after 2^31 later calls).
fn before(seq: u32, limit: u32, now: u32) -> bool {
    seq.wrapping_sub(limit) >= now.wrapping_sub(limit)
}

/// Moves a place from `from` to `to` with one compare-exchange (`Acquire`: pairs with
/// the `Release` store that put it in `from`, so the previous holder's accesses to the
/// value happen before ours). Whether it did.
#[inline(always)]
fn take_place(state: &AtomicU32, from: u32, to: u32) -> bool {
    state.load(Relaxed) == from && state.compare_exchange(from, to, Acquire, Relaxed).is_ok()
}

/// Hands a place on (`Release`: our accesses to its value happen before the next
/// holder's), after which we no longer touch it.
#[inline(always)]
pub(super) fn hand_on(state: &AtomicU32, to: u32) {
    crate::sync::plain_store!(state, to, Release);
}

/// A barrier that waited for a grace period begun after callback number `seq` was
/// queued runs it whatever its cookie says: the cookie of a callback left queued for a
/// whole lap of the counter reads "not done" again.
#[inline(always)]
fn forced_by_barrier(seq: u32, limit: u32, now: u32) -> bool {
    divert!(CallBarrierTrustsCookies => false);
    before(seq, limit, now)
}

/// What frees a running callback's place: a guard that frees it once the callback has
/// returned or panicked (so a barrier that sees it free sees the callback's effects).
#[inline(always)]
fn free_after_run<'a, const N: usize>(
    state: &'a AtomicU32,
    rcu: &'a Rcu<N>,
) -> Option<FreeOnDrop<'a, N>> {
    divert!(CallFreeBeforeRun => super::broken::free_before_run(state));
    Some(FreeOnDrop(state, rcu))
}

/// The orderings of the queue's passes, as one table.
#[derive(Clone, Copy)]
pub(super) struct Orders {
    /// A pass's load of each place's state: `Acquire`, so a place seen FREE was freed
    /// after its callback returned (`Release`), and a barrier that finds its callbacks'
    /// places free returns after their effects (the loom model caught a relaxed load).
    pub(super) scan: crate::sync::Ordering,
    /// A barrier's load of the count: `Acquire` (the count's read-modify-writes are all
    /// `Release`, one release sequence), so a number it treats as new was taken by a call
    /// that happens before the pass, with that call's claim of its place (which acquired
    /// the free after the place's previous callback returned).
    pub(super) count: crate::sync::Ordering,
}

/// The table the queue runs with.
pub(super) const ORDERS: Orders = Orders {
    scan: Acquire,
    count: Acquire,
};

/// [`ORDERS`] (in test builds, as the selected broken variant changes it).
#[inline(always)]
fn orders() -> Orders {
    variant_table!(Orders, ORDERS, super::broken::call_orders)
}

/// Frees a RUNNING place when dropped: after the callback returned, or while a panic
/// in it unwinds (the callback counts as run; the place is not lost). A barrier that
/// sleeps waiting for it is woken as an unlock would wake it.
pub(super) struct FreeOnDrop<'a, const N: usize>(&'a AtomicU32, &'a Rcu<N>);

impl<const N: usize> Drop for FreeOnDrop<'_, N> {
    fn drop(&mut self) {
        hand_on(self.0, FREE);
        self.1.wake_all_sleepers();
    }
}

impl<'d, C, const M: usize, const N: usize> CallQueue<'d, C, M, N> {
    const FITS: () = assert!(
        M <= u32::MAX as usize,
        "a call queue holds fewer than 2^32 places"
    );

    const_fn! {
        /// An empty queue for callbacks that free what readers of `rcu` may see; usable
        /// in a `static`.
        pub const fn new(rcu: &'d Rcu<N>) -> Self {
            let () = Self::FITS;
            CallQueue {
                rcu,
                places: array_of!(Place::new(); M),
                next: AtomicU32::new(0),
                queued: AtomicU32::new(0),
                run_from: AtomicU32::new(0),
            }
        }
    }

    /// The domain whose grace periods this queue waits for.
    pub fn domain(&self) -> &'d Rcu<N> {
        self.rcu
    }

    /// The fixed capacity `M`.
    pub const fn capacity(&self) -> usize {
        M
    }

    /// Places holding a callback now (queued, being queued or being run): a snapshot,
    /// place by place.
    pub fn pending(&self) -> usize {
        self.places
            .iter()
            .filter(|p| p.state.load(Relaxed) != FREE)
            .count()
    }

    /// Queues `callback` to be handed to a `run` function after a grace period
    /// (`call_rcu`). Call it after unpublishing what the callback frees. Never blocks
    /// and never allocates: safe from any number of contexts at once, interrupt
    /// handlers included.
    ///
    /// # Errors
    /// [`Refused`] with [`Error::Full`] and the callback when every place was seen
    /// holding one: run the queue, or wait for a grace period and free directly.
    pub fn call(&self, callback: C) -> Result<(), Refused<C>> {
        self.queue(0, callback)
    }

    /// [`call`](Self::call), naming the callback with `key` (the address of the object
    /// it frees, say; not 0) so that a debug build catches it queued twice (Linux's
    /// `DEBUG_OBJECTS_RCU_HEAD`). With feature `debug-callbacks` a key that a queued
    /// callback already holds is refused with [`Error::Busy`] and
    /// [`Warning::QueuedTwice`](crate::Warning::QueuedTwice), the queue unchanged;
    /// without it, this is `call` (no cost). A debug aid, not a guarantee: two contexts
    /// that queue the same key at the same instant may both get through.
    ///
    /// # Errors
    /// As [`call`](Self::call), and [`Error::Busy`] (feature `debug-callbacks`).
    pub fn call_keyed(&self, key: usize, callback: C) -> Result<(), Refused<C>> {
        #[cfg(feature = "debug-callbacks")]
        if key != 0
            && self
                .places
                .iter()
                .any(|p| p.state.load(Acquire) != FREE && p.key.load(Relaxed) == key)
        {
            crate::log::warn(crate::log::Warning::QueuedTwice);
            return Err(Refused::new(Error::Busy, callback));
        }
        self.queue(key, callback)
    }

    /// Queues `callback` (with `key`, kept only in `debug-callbacks` builds).
    fn queue(&self, key: usize, callback: C) -> Result<(), Refused<C>> {
        #[cfg(not(feature = "debug-callbacks"))]
        let _ = key;
        if M == 0 {
            return Err(Refused::new(Error::Full, callback));
        }
        let start = self.next.load(Relaxed) as usize % M;
        for k in 0..M {
            let at = (start + k) % M;
            let p = &self.places[at];
            if !take_place(&p.state, FREE, FILLING) {
                continue;
            }
            self.next.store(((at + 1) % M) as u32, Relaxed);
            #[cfg(feature = "debug-callbacks")]
            p.key.store(key, Relaxed);
            self.fill(p, callback);
            return Ok(());
        }
        Err(Refused::new(Error::Full, callback))
    }

    /// Fills place `p`, which the caller has taken FREE → FILLING, with `callback`, and
    /// hands it on READY.
    #[inline(always)]
    pub(super) fn fill(&self, p: &Place<C>, callback: C) {
        divert!(CallReadyBeforeFilled => super::broken::fill_ready_first(self, p, callback));
        // SAFETY: our claim moved the place out of FREE, so by the invariant the value is
        // uninitialised and nobody else touches it until our READY store.
        p.value.with_mut(|v| unsafe { (*v).write(callback) });
        self.number(p);
        // INVARIANT: the value is initialised; a runner that sees READY sees it and the
        // cookie (a cookie travels with release/acquire to another core).
        hand_on(&p.state, READY);
    }

    /// Gives the filled place `p` its cookie and its number.
    #[inline(always)]
    pub(super) fn number(&self, p: &Place<C>) {
        // The cookie after the caller's unpublish (program order; `start_poll` fences),
        // so its grace period covers every section that might see it.
        p.cookie.store(self.rcu.start_poll().into_raw(), Relaxed);
        // Release (a read-modify-write, after the claim): a barrier that reads a count
        // past this one sees the claim, and the caller's unpublish, happen before its own
        // grace period starts; and one that reads this number (Acquire) sees what this
        // place's previous callback did (our claim acquired its free).
        p.seq.store(self.queued.fetch_add(1, Release), Relaxed);
    }

    /// Hands at most `budget` callbacks whose grace period has ended to `run`, in the
    /// calling context, so a tick handler or an interrupt bounds its work. Never blocks
    /// (it may advance the grace period once, as [`GpCookie::poll`](super::GpCookie::poll)
    /// does). Any number of contexts may run the queue at once; each callback is handed
    /// to exactly one of them. Returns what it ran and what it left (see [`Ran`]).
    ///
    /// If `run` panics, the callback it was handed counts as run and its place is
    /// freed; the unwinding ends this call, the rest stay queued.
    pub fn run(&self, budget: usize, mut run: impl FnMut(C)) -> Ran {
        self.pass(None, budget, &mut run)
    }

    /// One pass over the places: runs what is due (at most `budget`), and with
    /// `ended_before = Some(limit)` also every callback numbered before `limit`
    /// whatever its cookie says (the caller waited for a grace period that began after
    /// they were queued); then `left` counts only places that may hold one of those.
    fn pass(&self, ended_before: Option<u32>, budget: usize, run: &mut impl FnMut(C)) -> Ran {
        let mut r = Ran::default();
        // One poll that may advance the grace period per call; after that only looks.
        let mut polled = false;
        // The count now, after the barrier's `limit`: the numbers taken in between are
        // `limit..now`. Acquire (the count's read-modify-writes are all Release, one
        // release sequence): a number this pass treats as new is below `now`, so the
        // call that took it happens before this pass, and with it that call's claim of
        // its place, which acquired the free after the place's previous callback
        // returned. So a barrier that finds a later callback's number in the place of
        // one it waits for sees that earlier callback's effects (with the number alone,
        // read relaxed, it need not; `Mutant::CallRelaxedNumber` reads both relaxed, and
        // loom's `catches_relaxed_numbers` catches it).
        let o = orders();
        let now = match ended_before {
            Some(_) => self.queued.load(o.count),
            None => 0,
        };
        let number = |p: &Place<C>| p.seq.load(Relaxed);
        let waited_for =
            |p: &Place<C>| ended_before.is_none_or(|limit| before(number(p), limit, now));
        // Where the last budgeted run stopped: a place past it is looked at first, so a
        // due callback is not starved by a stream through the places before it.
        let start = self.run_from.load(Relaxed) as usize;
        let mut last_run = None;
        for k in 0..M {
            let at = (start + k) % M;
            let p = &self.places[at];
            // Acquire: a place seen FREE was freed after its callback returned (Release),
            // so a barrier that finds its callbacks' places free returns after their
            // effects, not merely after their places (the loom model caught a relaxed
            // load here).
            match p.state.load(o.scan) {
                READY if r.ran < budget => {}
                FREE => continue,
                // Past the budget, or held by a context queueing or running it.
                _ => {
                    r.left += usize::from(waited_for(p));
                    continue;
                }
            }
            if !take_place(&p.state, READY, RUNNING) {
                r.left += usize::from(waited_for(p));
                continue;
            }
            let forced = ended_before.is_some_and(|limit| forced_by_barrier(number(p), limit, now));
            let cookie = self.rcu.cookie_from_raw(p.cookie.load(Relaxed));
            let due = forced
                || if polled {
                    cookie.is_done()
                } else {
                    let done = cookie.poll();
                    polled = !done;
                    done
                };
            if !due {
                // INVARIANT: untouched; back to READY for a later run.
                hand_on(&p.state, READY);
                r.left += usize::from(waited_for(p));
                continue;
            }
            // SAFETY: our take moved the place out of READY, so by the invariant the
            // value is initialised and ours alone; it is read once, and the place is
            // freed (the value then counts as uninitialised) without reading it again.
            let callback = p.value.with(|v| unsafe { (*v).assume_init_read() });
            // The key leaves the queue with the callback, before it runs: a callback may
            // queue its own key again, and a free place never shows an old key (without
            // it, both were refused as queued twice:
            // `a_callback_may_queue_its_own_key_again`, `a_freed_key_is_never_seen_queued`).
            #[cfg(feature = "debug-callbacks")]
            p.key.store(0, Relaxed);
            let _free = free_after_run(&p.state, self.rcu);
            last_run = Some(at);
            run(callback);
            r.ran += 1;
        }
        if let Some(at) = last_run {
            if r.ran >= budget {
                self.run_from.store(((at + 1) % M) as u32, Relaxed);
            }
        }
        r
    }

    /// Waits (through `ctx`, asking `hook` between attempts) until every callback
    /// queued before this call has run (`rcu_barrier`), running them itself in the
    /// calling context; callbacks queued after it began may run in it too if their
    /// grace period has ended. Returns how many it ran. With nothing queued before it,
    /// it returns at once, even from inside a section.
    ///
    /// Not from an interrupt handler, and not from a callback (it may wait for the
    /// callback that called it): the library cannot see either.
    ///
    /// # Errors
    /// [`Error::OtherDomain`] if `ctx` belongs to another domain, and
    /// [`Error::InReadSection`] if there is something to wait for and waiting from
    /// there would deadlock (see [`Reader::synchronize`](super::Reader::synchronize)),
    /// both without running anything; [`Error::GaveUp`] when `hook` gives up (during
    /// the grace period nothing has been run; after it, while another context is still
    /// queueing or running one of the callbacks waited for, some may have been; each
    /// still runs exactly once, in whichever context gets to it).
    pub fn barrier(
        &self,
        ctx: impl WaitContext<N>,
        mut hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
        mut run: impl FnMut(C),
    ) -> Result<usize, Error> {
        if let Err(Error::OtherDomain) = may_wait(&ctx, self.rcu) {
            return Err(Error::OtherDomain);
        }
        // The callbacks to wait for: those numbered before `limit` (a call that
        // returned before this one took its number first; Acquire pairs with its
        // Release, so its claim is seen below).
        let limit = self.queued.load(Acquire);
        if self.pass(Some(limit), 0, &mut run).left == 0 {
            return Ok(0); // every one of them has run
        }
        // A grace period that begins after each of them was queued: once it has ended
        // they are all due.
        let gp = self.rcu.start_poll();
        wait_through(&ctx, gp, &mut hook)?;
        let mut ran = 0;
        let mut attempts = 0u32;
        loop {
            let r = self.pass(Some(limit), usize::MAX, &mut run);
            ran += r.ran;
            // Left: those of them that another context is running or still queueing.
            if r.left == 0 {
                return Ok(ran);
            }
            attempts = attempts.saturating_add(1);
            // What is left is other contexts' runs: a sleeping hook sleeps until one
            // frees its place (which wakes it), not on the grace period, which is over.
            let over = || self.pass(Some(limit), 0, &mut |_| {}).left == 0;
            if hook(&Waiting::until(&gp, attempts, &over)).is_break() {
                return Err(Error::GaveUp);
            }
            core::hint::spin_loop();
        }
    }
}

impl<C, const M: usize, const N: usize> Drop for CallQueue<'_, C, M, N> {
    /// Drops the callbacks whose grace period has already ended (without advancing
    /// grace periods) and leaks the others: a callback is never dropped before its
    /// grace period.
    fn drop(&mut self) {
        for p in &self.places {
            // `&mut self`: no other context holds a place (a panic while filling is
            // impossible: nothing between the claim and READY can panic; a callback
            // that unwound freed its place).
            if p.state.load(Relaxed) == READY
                && self.rcu.cookie_from_raw(p.cookie.load(Relaxed)).is_done()
            {
                // SAFETY: READY: initialised (the invariant), and ours (`&mut self`);
                // dropped once, and the place is never used again.
                p.value.with_mut(|v| unsafe { (*v).assume_init_drop() });
            }
        }
    }
}

impl<C, const M: usize, const N: usize> core::fmt::Debug for CallQueue<'_, C, M, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CallQueue")
            .field("pending", &self.pending())
            .field("capacity", &M)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::before;

    /// The window of numbers a barrier treats as new is exactly those taken since it
    /// read its limit, however old a number it meets (finding 2: a number 2^31 calls
    /// old read as new, and the barrier skipped its callback).
    #[test]
    fn numbers_older_than_the_limit_are_old_however_old() {
        let limit = 1000u32;
        for now in [limit, limit + 1, limit + 5] {
            assert!(
                !(limit..now).any(|s| before(s, limit, now)),
                "a new number read as old"
            );
            for age in [1u32, 2, 1 << 20, 1 << 31, (1 << 31) + 1, u32::MAX - 10] {
                let seq = limit.wrapping_sub(age);
                assert!(before(seq, limit, now), "{age} calls old read as new");
            }
        }
        // Across the wrap of the counter itself.
        let limit = u32::MAX - 1;
        let now = limit.wrapping_add(4);
        assert!(!before(u32::MAX, limit, now) && !before(1, limit, now));
        assert!(before(limit - 1, limit, now) && before(now, limit, now));
    }
}
