//! A fixed set of task wakers that a domain's wake hook wakes, so that an awaited grace
//! period is woken by the reader's unlock instead of re-polling (`wait::GracePeriod`).

use crate::sync::AtomicU32;
use crate::sync::Ordering::{AcqRel, Acquire, Release};
use core::cell::UnsafeCell;
use core::task::Waker;

/// A future owns the cell (set by the `fetch_or` that found it clear, cleared by that
/// future's `release`).
pub(super) const CLAIMED: u32 = 1;
/// The owner is storing its waker.
const REGISTERING: u32 = 2;
/// A wake (or the owner's release) is taking the waker out.
const WAKING: u32 = 4;

/// One waker of a [`Wakers`] set: a claim bit and a waker that a wake takes out.
pub(super) struct WakerCell {
    // INVARIANTS:
    // * `state` holds the bits above. CLAIMED is set by the one `fetch_or` that found it
    //   clear (the owning future) and cleared only by that owner's `release`.
    // * The *key* to `waker`: the context whose compare-exchange moved `state` from
    //   exactly CLAIMED to CLAIMED | REGISTERING holds it until it clears REGISTERING;
    //   the context whose `fetch_or(WAKING)` found neither REGISTERING nor WAKING set
    //   holds it until it clears WAKING. Each way in needs both bits clear and sets one,
    //   so at most one context holds the key, and only the key's holder touches `waker`.
    // * A wake that finds REGISTERING set leaves WAKING set for the registering owner,
    //   whose compare-exchange back to CLAIMED then fails: the owner reports the wake
    //   (`register` returns false) and clears both bits. A wake that finds WAKING set
    //   leaves the work to the wake already under way. So no wake is dropped: either it
    //   takes the waker, or a context that will act on it is inside the cell.
    state: AtomicU32,
    waker: UnsafeCell<Option<Waker>>,
}

// SAFETY: `waker` is only touched by the holder of the key (the invariants above), so
// sharing a cell between contexts never gives two of them access at once; `Waker` is
// `Send` and `Sync`.
unsafe impl Sync for WakerCell {}
// SAFETY: as above; moving a cell moves a `Waker`, which is `Send`.
unsafe impl Send for WakerCell {}

impl WakerCell {
    const_fn! {
        const fn new() -> Self {
            WakerCell {
                state: AtomicU32::new(0),
                waker: UnsafeCell::new(None),
            }
        }
    }

    /// Claims the cell for one future: whether it was free.
    fn claim(&self) -> bool {
        self.state.load(Acquire) & CLAIMED == 0
            && self.state.fetch_or(CLAIMED, Acquire) & CLAIMED == 0
    }

    /// The owner stores `w` as the waker to wake. `false`: a wake came in meanwhile (or
    /// one is under way): the caller must wake its task itself, as if woken.
    pub(super) fn register(&self, w: &Waker) -> bool {
        // Cloned before the key is taken: a clone is executor code and may panic, which
        // under the key would leave REGISTERING set and the cell wedged for ever (the
        // review's `tests/waker_panic.rs`).
        let mut new = Some(w.clone());
        if self
            .state
            .compare_exchange(CLAIMED, CLAIMED | REGISTERING, Acquire, Acquire)
            .is_err()
        {
            return false; // a wake is taking the old waker out
        }
        // SAFETY: our compare-exchange from CLAIMED to CLAIMED | REGISTERING gave us the
        // key (invariants); we hold it until REGISTERING is cleared below. Nothing below
        // runs executor code until then (`will_wake` compares two pointers).
        let slot = unsafe { &mut *self.waker.get() };
        let old = match slot {
            Some(now) if now.will_wake(w) => None,
            _ => core::mem::replace(slot, new.take()),
        };
        let kept = self
            .state
            .compare_exchange(CLAIMED | REGISTERING, CLAIMED, AcqRel, Acquire)
            .is_ok();
        if !kept {
            // A wake found REGISTERING and left WAKING for us: the key is still ours.
            self.state.fetch_and(!(REGISTERING | WAKING), AcqRel);
        }
        drop(old); // executor code, outside the key
        drop(new); // the clone, if the same waker was there already
        kept
    }

    /// Takes the waker out and wakes it, if there is one and no other context is
    /// inside the cell (if one is, it acts on this wake: invariants).
    fn wake(&self) {
        divert!(WakersNeverWake => ());
        if let Some(w) = self.take() {
            w.wake();
        }
    }

    /// Takes the waker out under the key, if the key is free.
    fn take(&self) -> Option<Waker> {
        let prev = self.state.fetch_or(WAKING, AcqRel);
        if prev & (REGISTERING | WAKING) != 0 {
            return None;
        }
        // SAFETY: our `fetch_or` set WAKING with neither bit set before: the key is ours
        // until we clear WAKING below.
        let w = unsafe { (*self.waker.get()).take() };
        self.state.fetch_and(!WAKING, Release);
        w
    }

    /// The owner gives the cell up (its future is done or dropped): takes its waker out
    /// so that no later wake wakes a task for it. If a wake holds the key right now, that
    /// wake takes the waker and wakes the task once more: a spurious wake-up, harmless.
    fn release(&self) {
        divert!(WakersKeptOnRelease => super::broken::release_keeping_waker(&self.state));
        let old = self.take();
        self.state.fetch_and(!CLAIMED, Release);
        drop(old);
    }
}

/// A fixed set of task wakers for async grace periods that a reader's unlock wakes
/// (instead of each waiting future waking itself on every poll): declare it in a
/// `static`, make its [`wake`](Self::wake) the domain's wake hook through a plain `fn()`,
/// and await [`GpCookie::wait_woken`](super::GpCookie::wait_woken) (or
/// [`DeferQueue::defer_async_woken`](super::DeferQueue::defer_async_woken),
/// [`Retired::reclaim_async_woken`](super::Retired::reclaim_async_woken)).
///
/// ```
/// use rcuref::rcu::{Rcu, Wakers};
///
/// static RCU: Rcu<4> = Rcu::new();
/// static WAKERS: Wakers<4> = Wakers::new();
/// fn wake() {
///     WAKERS.wake(); // and `rcu::std_wake()` too if blocking waits also sleep
/// }
///
/// async fn writer() {
///     RCU.set_wake_hook(Some(wake));
///     // ... unpublish something ...
///     RCU.start_poll().wait_woken(&WAKERS).await;
///     // ... reclaim it ...
/// }
/// # let _ = writer();
/// ```
///
/// **How a wait sleeps.** A pending future takes one cell of the set for its lifetime
/// (until it completes or is dropped), stores its task's waker there on every poll,
/// announces itself in the domain as a sleeping blocking wait does
/// ([`Waiting::sleep`](super::Waiting::sleep): the announcement, the heavy fence of the
/// asymmetric mode, one more poll), and returns `Pending` without waking itself. The
/// outermost unlock of the section it waits for calls the domain's wake hook, which
/// wakes every waker of the set (each woken future polls, and sleeps again if its grace
/// period has not ended). Cost: three words per cell, and none in the domain.
///
/// **When it re-polls instead** (wakes its own task, as
/// [`GpCookie::wait`](super::GpCookie::wait) does):
/// * where an unlock can miss the announcement: the full-fence mode on more than one core
///   (nothing orders an unlock's store before its load of the announcement, and a
///   future has no timeout to sleep out a missed wake as a blocking sleep does). Only
///   in the heavy mode (`--cfg rcuref_asymmetric_fence`, or feature `auto-fence`
///   decided heavy) or on one core (`--cfg rcuref_unsafe_assume_single_core`) is the
///   wake relied on; the rule is
///   `rcu::heavy::wakes_are_reliable`;
/// * when every cell is taken (a full set never loses a waiter: the extra futures
///   re-poll), or the domain has no wake hook;
/// * when something other than a reader holds the grace period up after the future's
///   poll: another driver in the middle of a step (it may hold the lap guard, or store
///   a late phase word that makes the reader's unlock skip its wake, and its return
///   wakes nobody), or no reader slot at all.
///
/// **Why a set the program declares, not one per domain.** A domain is often a `static`
/// on a microcontroller, and a waker is two words: wakers in `Rcu<N>` would grow every
/// domain, also those that are never awaited, while the domain already has the
/// one-`fn()` wake hook that any number of waiters can share. Sized by the program: as
/// many cells as tasks that await grace periods at once. One set may serve several
/// domains (a wake of one then also wakes the other's waiters: they poll and sleep
/// again).
///
/// **Interrupt handlers.** `wake` takes no lock and no critical section on targets with
/// compare-and-swap (each cell's state is one atomic word: a wake meeting a
/// registration leaves the wake to the registering future, which then re-polls), so it
/// may run from a reader's unlock in a handler; it calls each task's
/// [`Waker::wake`], which must be safe there too (an executor meant for embedded
/// targets has such wakers). On targets without compare-and-swap, the binary's choice
/// of atomics (`src/sync.rs`) applies.
///
/// **A dropped future** takes its waker out of its cell before it gives the cell up: no
/// later wake wakes its task. A wake that is taking that waker out at that very moment
/// still wakes the task once (a spurious wake-up, which every executor tolerates).
pub struct Wakers<const K: usize> {
    // INVARIANT: each cell keeps `WakerCell`'s invariants; a cell is owned by at most one
    // future (its CLAIMED bit), which alone registers in it and releases it.
    cells: [WakerCell; K],
}

impl<const K: usize> Wakers<K> {
    const_fn! {
        /// A set of `K` free cells, usable in a `static`.
        pub const fn new() -> Self {
            Wakers {
                cells: array_of!(WakerCell::new(); K),
            }
        }
    }

    /// Wakes every task registered in the set (and forgets their wakers: each polls and
    /// registers again). For the domain's wake hook: never blocks, safe in an interrupt
    /// handler as far as the tasks' wakers are.
    pub fn wake(&self) {
        for c in &self.cells {
            c.wake();
        }
    }

    /// The number of cells, `K`.
    pub const fn capacity(&self) -> usize {
        K
    }

    /// How many cells futures own right now (diagnostics).
    pub fn in_use(&self) -> usize {
        self.cells
            .iter()
            .filter(|c| c.state.load(Acquire) & CLAIMED != 0)
            .count()
    }

    /// The cells, without the size in the type (what a future keeps).
    pub(super) fn cells(&'static self) -> &'static [WakerCell] {
        &self.cells
    }
}

#[cfg(not(loom))]
impl<const K: usize> Default for Wakers<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const K: usize> core::fmt::Debug for Wakers<K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Wakers")
            .field("capacity", &K)
            .field("in_use", &self.in_use())
            .finish()
    }
}

/// A future's cell in a set: claimed on its first pending poll, given up when it
/// completes or is dropped.
pub(super) struct Registration {
    pub(super) cells: &'static [WakerCell],
    /// The index of the cell it owns (CLAIMED by it), if any.
    pub(super) owned: Option<usize>,
}

impl Registration {
    pub(super) fn new(cells: &'static [WakerCell]) -> Self {
        Registration { cells, owned: None }
    }

    /// The cell this future owns, claiming one if it has none: `None` when the set is
    /// full.
    pub(super) fn cell(&mut self) -> Option<&'static WakerCell> {
        let cells = self.cells;
        if let Some(i) = self.owned {
            return cells.get(i);
        }
        let i = cells.iter().position(|c| c.claim())?;
        self.owned = Some(i);
        cells.get(i)
    }

    /// Gives the owned cell up, if any (taking its waker out first).
    pub(super) fn release(&mut self) {
        if let Some(c) = self.owned.take().and_then(|i| self.cells.get(i)) {
            c.release();
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    fn counting() -> (Waker, Arc<Count>) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (Waker::from(c.clone()), c)
    }

    /// One cell, one context: a registered waker is woken once and forgotten; a
    /// registration during a wake reports it; a release takes the waker out.
    #[test]
    fn a_cell_wakes_once_and_reports_a_wake_during_registration() {
        let cell = WakerCell::new();
        let (w, n) = counting();
        assert!(cell.claim());
        assert!(!cell.claim(), "claimed twice");
        assert!(cell.register(&w));
        cell.wake();
        cell.wake();
        assert_eq!(n.0.load(SeqCst), 1);
        // A wake holding the key: the registration must report it.
        cell.state.fetch_or(WAKING, SeqCst);
        assert!(!cell.register(&w));
        cell.state.fetch_and(!WAKING, SeqCst);
        assert!(cell.register(&w));
        cell.release();
        cell.wake();
        assert_eq!(n.0.load(SeqCst), 1, "a released cell's waker was woken");
        assert_eq!(cell.state.load(SeqCst), 0);
    }

    /// A registering thread against a waking thread (Miri's race detector watches the
    /// waker's cell): every registration either reports a wake or is taken out by a
    /// later wake, so after the last wake the cell holds no waker.
    #[test]
    fn registrations_racing_wakes_leave_nothing_behind() {
        static CELL: WakerCell = WakerCell::new();
        let rounds = if cfg!(miri) { 50 } else { 20_000 };
        assert!(CELL.claim());
        let (w, n) = counting();
        let waker = std::thread::spawn(move || {
            for _ in 0..rounds {
                CELL.wake();
            }
        });
        let mut reported = 0usize;
        for _ in 0..rounds {
            if !CELL.register(&w) {
                reported += 1;
            }
        }
        waker.join().unwrap();
        CELL.wake();
        // SAFETY: no other context uses the cell now (the waking thread has joined).
        let empty = unsafe { (*CELL.waker.get()).is_none() };
        assert!(empty, "a waker left behind");
        assert_eq!(CELL.state.load(SeqCst), CLAIMED);
        assert!(n.0.load(SeqCst) + reported >= 1);
        CELL.release();
    }
}
