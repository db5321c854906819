//! Readers and guards: the read side, and the contexts that writers wait through.

use super::domain::Rcu;
use super::encoding::{online, CLAIMED, ONE_LEVEL, STICKY};
use super::gp::GpCookie;
use super::ops;
use super::sections;
use super::wait::Waiting;
use crate::error::Error;
use crate::sync::AtomicU32;
use crate::sync::Ordering::Relaxed;
use core::marker::PhantomData;
use core::ops::ControlFlow;

/// A read section begun by [`Rcu::down_read`] that any context may end: `Send`, not
/// `Clone`, ended once by [`up_read`](Self::up_read) or by its drop (Linux's
/// `srcu_up_read`).
///
/// Reads under it go through [`lock`](Self::lock) (a nested section of the token's
/// slot, by whichever context holds the token now), whose guard bounds the references
/// as every guard does. A raw pointer loaded under the token stays valid, by the RCU
/// contract, until the token ends, on whatever context then holds it: using it there is
/// the caller's `unsafe` code.
#[must_use = "dropping the token ends its section at once"]
pub struct ReadToken<'d, const N: usize> {
    // INVARIANT: `Rcu::down_read` claimed `at.slot` for this token alone and entered a
    // section on it; the token's holder is the slot's only writer until its drop ends
    // the section and frees the slot. (Moving the token to another context moves that
    // role, with the happens-before of the move.)
    pub(super) at: At<'d, N>,
    /// `Send` (the section moves with it) but not `Sync`: two contexts locking through
    /// one `&ReadToken` at once would both write the slot.
    pub(super) _not_sync: PhantomData<core::cell::Cell<()>>,
}

impl<'d, const N: usize> ReadToken<'d, N> {
    /// Ends the section (and frees its slot).
    pub fn up_read(self) {}

    /// A nested section on the token's slot, for reading: only from the context that
    /// holds the token (the guard borrows it).
    #[inline]
    pub fn lock(&self) -> Guard<'_, 'd, N> {
        self.at.enter(false);
        Guard {
            at: &self.at,
            _not_send: PhantomData,
        }
    }

    /// The domain whose grace periods wait for this section.
    pub fn domain(&self) -> &'d Rcu<N> {
        self.at.rcu
    }

    /// The slot this section holds (diagnostics).
    pub fn slot(&self) -> usize {
        self.at.slot
    }
}

impl<const N: usize> Drop for ReadToken<'_, N> {
    fn drop(&mut self) {
        // Ends the section and frees the slot in one Release store: what the holders
        // read under it happens before a scan that sees the slot free.
        let v = ops::own_slot(self.at.word());
        ops::release(self.at.word());
        self.at.rcu.wake_sleepers(v);
        #[cfg(feature = "strict-grace-periods")]
        self.at.rcu.drive_strictly();
    }
}

impl<const N: usize> core::fmt::Debug for ReadToken<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ReadToken")
            .field("slot", &self.at.slot)
            .finish()
    }
}

/// A registered reader: owns one slot of its domain. Not `Send`/`Sync`: one context
/// (thread, hart, interrupt level) uses it, which is what lets the read side use plain
/// loads and stores.
///
/// Its nested locks have no fence: the context that nests has executed the outermost
/// lock's fence before, in program order. So a `Reader` must not be used from an
/// interrupt or signal handler that can preempt its own context (it is neither `Send`
/// nor `Sync`, so safe code cannot put it where one could reach it): handlers use a
/// [`ContextReader`] or [`Rcu::with_reader`].
pub struct Reader<'d, const N: usize> {
    // INVARIANT: `at.slot < N`, and `self` claimed that slot, so it is its only writer.
    pub(super) at: At<'d, N>,
    pub(super) _not_send: PhantomData<*mut ()>,
}

impl<'d, const N: usize> Reader<'d, N> {
    /// Enters a read section (or nests in the current one). The section ends when the
    /// outermost guard is dropped.
    #[inline]
    pub fn lock(&self) -> Guard<'_, 'd, N> {
        self.at.enter(false);
        Guard {
            at: &self.at,
            _not_send: PhantomData,
        }
    }

    /// Runs `f` inside a read section.
    #[inline]
    pub fn section<R>(&self, f: impl FnOnce(&Guard<'_, 'd, N>) -> R) -> R {
        f(&self.lock())
    }

    /// Whether this reader is inside a read section.
    pub fn in_read_section(&self) -> bool {
        self.at.in_read_section()
    }

    /// The domain this reader belongs to.
    pub fn domain(&self) -> &'d Rcu<N> {
        self.at.rcu
    }

    /// The index of this reader's slot in its domain (diagnostics).
    pub fn slot(&self) -> usize {
        self.at.slot
    }

    /// Waits until every read section that was running when it was called has ended,
    /// asking `hook` between attempts whether to go on: [`spin`](super::spin),
    /// [`forever`](super::forever)`(yield_now)`, a [`Deadline`](super::Deadline), a
    /// [`StallDetector`](super::StallDetector), or any closure that sees the
    /// [`Waiting`] state and returns `ControlFlow::Continue(())` to go on or
    /// `ControlFlow::Break(())` to give up.
    ///
    /// # Errors
    /// [`Error::InReadSection`], without waiting, if this reader is inside a read
    /// section (possible only after leaking a guard with `mem::forget`) or, in debug
    /// builds with feature `std`, if another reader of this domain on the calling thread
    /// is. Waiting there would deadlock. Without `std` a section of another reader of
    /// the same context cannot be detected: do not wait inside one.
    /// [`Error::GaveUp`] when `hook` gives up: nothing is left half done (a grace period
    /// that was under way goes on with the next poll of any context).
    pub fn synchronize(
        &mut self,
        hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        self.at.synchronize(hook)
    }

    /// Waits for `cookie`'s grace period only if it has not ended yet (Linux's
    /// `cond_synchronize_rcu`): a cookie that is done after one poll returns at once,
    /// even from inside a section; otherwise as [`synchronize`](Self::synchronize).
    ///
    /// # Errors
    /// [`Error::OtherDomain`] for a cookie of another domain; otherwise those of
    /// [`synchronize`](Self::synchronize), only when there is something to wait for.
    pub fn cond_synchronize(
        &mut self,
        cookie: GpCookie<'_, N>,
        hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        self.at.wait_for(cookie, hook)
    }
}

impl<const N: usize> Drop for Reader<'_, N> {
    fn drop(&mut self) {
        let slot = self.at.word();
        let v = ops::own_slot(slot);
        interrupt_point!(DropAfterLoad, slot);
        if online(v) {
            // A guard was leaked (`mem::forget`). Guards borrow the reader, so none is
            // alive now, and every reference read under the leaked one was bounded by a
            // borrow of the reader that has ended: ending the section is sound, and
            // leaving it open would stall every later grace period of the domain.
            sections::left(self.at.rcu.section_key());
        }
        // Ends any (leaked) section and frees the slot in one Release store.
        ops::release(slot);
        if online(v) {
            self.at.rcu.wake_sleepers(v);
        }
    }
}

impl<const N: usize> core::fmt::Debug for Reader<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Reader")
            .field("slot", &self.at.slot)
            .field("in_read_section", &self.in_read_section())
            .finish()
    }
}

/// A reader for one CPU (hart, core) or one interrupt priority level, on a slot the
/// domain reserved for it ([`Rcu::with_dedicated`]): `const`-constructible, `Copy`,
/// `Send` and `Sync`, so it can live in a `static` and be used from the trap or
/// interrupt handlers of its context without claiming a slot per section.
///
/// Interrupt handlers of the same core may nest sections on it while the code they
/// interrupted is in one, at any point: a handler enters and leaves its sections before
/// it returns, so the slot is as the interrupted code left it when it resumes (its
/// load-then-store of the slot cannot lose the handler's update). The handler's section
/// lies inside the interrupted one, or is a section of its own if none was open.
///
/// A nested lock therefore runs a full fence after its store, like the outermost one: a
/// handler may have interrupted the outermost lock between its store and its fence (a
/// trap is not a fence), and its loads must not be performed before the announcement is
/// visible to another core's scan. This costs a nested lock a fence on multi-core
/// builds (none with `--cfg rcuref_unsafe_assume_single_core` or in the asymmetric-fence
/// mode); checked by the loom models in `tests/loom_interrupts.rs` with a handler at
/// every gap of the read side, and by the litmus suite (`litmus/`).
///
/// Obtained only through the `unsafe` [`Rcu::context_reader`], whose contract is what
/// makes this sound.
#[derive(Clone, Copy)]
pub struct ContextReader<'d, const N: usize> {
    // INVARIANT: `at.slot` is one of the domain's dedicated slots, and the creator
    // promised `Rcu::context_reader`'s contract: it is only used from one context and
    // the interrupt handlers that preempt that context on its core.
    pub(super) at: At<'d, N>,
}

// SAFETY: by the creator's promise (`Rcu::context_reader`) the slot is only written from
// one context and the handlers that preempt it on the same core, whatever thread holds
// the value; sharing or moving the value between threads does not change who uses it.
unsafe impl<const N: usize> Send for ContextReader<'_, N> {}
// SAFETY: as above.
unsafe impl<const N: usize> Sync for ContextReader<'_, N> {}

impl<'d, const N: usize> ContextReader<'d, N> {
    /// Enters a read section (or nests in the current one of this context, an
    /// interrupted one included). The section ends when the outermost guard is dropped.
    #[inline]
    pub fn lock(&self) -> Guard<'_, 'd, N> {
        self.at.enter(true);
        Guard {
            at: &self.at,
            _not_send: PhantomData,
        }
    }

    /// Runs `f` inside a read section.
    #[inline]
    pub fn section<R>(&self, f: impl FnOnce(&Guard<'_, 'd, N>) -> R) -> R {
        f(&self.lock())
    }

    /// Enters a read section (or nests one level deeper) without a guard, for callers
    /// that cannot hold one across the section: a C API, a section that a kernel opens
    /// in one function and closes in another. The same memory operations as
    /// [`lock`](Self::lock); end it with [`raw_unlock`](Self::raw_unlock). A section
    /// entered here and never left is like a leaked guard: every later grace period
    /// waits for it.
    ///
    /// # Errors
    /// [`Error::TooDeep`] if the section is already nested as deep as the slot can
    /// count (about 2^30 levels); nothing changes, so balanced `raw_unlock`s still end
    /// the section. (A [`Guard`] at that depth sticks instead: its section never ends,
    /// rather than wrap to "offline" under 2^30 leaked guards.)
    #[inline]
    pub fn raw_lock(&self) -> Result<(), Error> {
        if self.at.at_ceiling() {
            return Err(Error::TooDeep);
        }
        self.at.enter(true);
        Ok(())
    }

    /// Leaves one level of a section entered with [`raw_lock`](Self::raw_lock).
    ///
    /// # Safety
    /// Nothing read inside the level being left may be used after this call, and the
    /// level must be one this code entered with `raw_lock`: leaving a level that a live
    /// [`Guard`] of this context stands for would end that guard's section under it
    /// (an interrupt handler that leaves more levels than it entered does that to the
    /// code it interrupted).
    ///
    /// # Errors
    /// [`Error::NotInSection`] if the context is in no section (an unlock without a
    /// lock); nothing changes.
    #[inline]
    pub unsafe fn raw_unlock(&self) -> Result<(), Error> {
        if !self.at.in_read_section() {
            return Err(Error::NotInSection);
        }
        self.at.leave();
        Ok(())
    }

    /// Whether this context is inside a read section.
    pub fn in_read_section(&self) -> bool {
        self.at.in_read_section()
    }

    /// The domain.
    pub fn domain(&self) -> &'d Rcu<N> {
        self.at.rcu
    }

    /// The slot index.
    pub fn slot(&self) -> usize {
        self.at.slot
    }

    /// Waits for a grace period, asking `hook` between attempts (see
    /// [`Reader::synchronize`]). Only from the context itself, never from one of its
    /// interrupt handlers (which must never block), nor while the context is inside a
    /// section on another slot of the same domain.
    ///
    /// # Errors
    /// [`Error::InReadSection`] if this context is inside a section (the wait would
    /// wait for itself); [`Error::GaveUp`] when `hook` gives up.
    pub fn synchronize(
        &self,
        hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        self.at.synchronize(hook)
    }

    /// Waits for `cookie`'s grace period only if it has not ended yet (Linux's
    /// `cond_synchronize_rcu`; see [`Reader::cond_synchronize`]). From the context
    /// itself only, as [`synchronize`](Self::synchronize).
    ///
    /// # Errors
    /// As [`Reader::cond_synchronize`].
    pub fn cond_synchronize(
        &self,
        cookie: GpCookie<'_, N>,
        hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        self.at.wait_for(cookie, hook)
    }
}

impl<const N: usize> core::fmt::Debug for ContextReader<'_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ContextReader")
            .field("slot", &self.at.slot)
            .field("in_read_section", &self.in_read_section())
            .finish()
    }
}

/// Evidence of a read section: references read under it live no longer than it.
/// Not `Send`: a section belongs to the context that entered it.
pub struct Guard<'r, 'd, const N: usize> {
    at: &'r At<'d, N>,
    _not_send: PhantomData<*mut ()>,
}

impl<'d, const N: usize> Guard<'_, 'd, N> {
    /// The domain this section belongs to.
    pub fn domain(&self) -> &'d Rcu<N> {
        self.at.rcu
    }
}

impl<const N: usize> Drop for Guard<'_, '_, N> {
    #[inline]
    fn drop(&mut self) {
        self.at.leave();
    }
}

impl<const N: usize> core::fmt::Debug for Guard<'_, '_, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Guard")
            .field("slot", &self.at.slot)
            .finish()
    }
}

/// A reader slot and its domain: what `Reader`, `ContextReader` and `Guard` act on.
#[derive(Clone, Copy)]
pub struct At<'d, const N: usize> {
    // INVARIANT: `slot < N`, and whoever holds this `At` is, by its owner's invariant,
    // the only writer of that slot (a `Reader` claimed it; a `ContextReader`'s creator
    // promised it).
    // `word` is `&rcu.slots[slot]`, kept so that the read side reaches its slot in one
    // load (no index arithmetic in lock and unlock).
    pub(super) rcu: &'d Rcu<N>,
    pub(super) slot: usize,
    pub(super) word: &'d AtomicU32,
}

impl<'d, const N: usize> At<'d, N> {
    /// Slot `slot` of `rcu` (panics if it is not one: callers pass an index below `N`).
    #[inline]
    pub(super) const fn new(rcu: &'d Rcu<N>, slot: usize) -> Self {
        At {
            rcu,
            slot,
            word: &rcu.slots[slot].0,
        }
    }

    /// The slot word.
    #[inline(always)]
    pub(super) fn word(&self) -> &'d AtomicU32 {
        self.word
    }

    /// Enters a read section or nests in the current one. `in_context`: a
    /// `ContextReader`, on whose slot interrupt handlers nest, so a nested lock may have
    /// interrupted the outermost one between its store and its fence, and fences too.
    #[inline(always)]
    fn enter(&self, in_context: bool) {
        let slot = self.word();
        // By the type invariant nobody else writes the slot (an interrupt handler that
        // nests on it restores it before the code it interrupted resumes): load + store
        // is exact.
        let v = ops::own_slot(slot);
        interrupt_point!(LockAfterLoad, slot);
        if !online(v) {
            ops::lock_outer(slot, &self.rcu.phase.0.phase);
            sections::entered(self.rcu.section_key());
        } else if v < STICKY {
            if in_context {
                ops::lock_nested_in_context(slot, v);
            } else {
                ops::lock_nested(slot, v);
            }
        }
    }

    /// Leaves one level of the section.
    #[inline(always)]
    fn leave(&self) {
        #[inline(always)]
        fn nesting_ignored() -> bool {
            divert!(NestingIgnored => true);
            false
        }
        divert!(UnlockWakesBeforeStore => super::broken::leave_waking_first(self));
        let slot = self.word();
        let v = ops::own_slot(slot);
        interrupt_point!(UnlockAfterLoad, slot);
        if v < 2 * ONE_LEVEL || nesting_ignored() {
            // Outermost: the section's loads happen before a writer's Acquire sees it.
            ops::unlock(slot, CLAIMED);
            sections::left(self.rcu.section_key());
            self.rcu.wake_sleepers(v);
            #[cfg(feature = "strict-grace-periods")]
            self.rcu.drive_strictly();
        } else if v < STICKY {
            ops::unlock(slot, v - ONE_LEVEL);
        }
    }

    fn in_read_section(&self) -> bool {
        online(self.word().load(Relaxed))
    }

    /// Whether one more level would reach the sticky count, where neither lock nor
    /// unlock moves the slot any more.
    fn at_ceiling(&self) -> bool {
        self.word().load(Relaxed) >= STICKY - ONE_LEVEL
    }

    /// `Ok` if a blocking wait for a grace period of `domain` may run from here: the
    /// same domain, and not from inside a read section of it (which would wait for
    /// itself). The one place these checks live.
    fn may_wait(&self, domain: &Rcu<N>) -> Result<(), Error> {
        if !core::ptr::eq(domain, self.rcu) {
            return Err(Error::OtherDomain);
        }
        if self.in_read_section() || sections::any(self.rcu.section_key()) {
            return Err(Error::InReadSection);
        }
        Ok(())
    }

    fn synchronize(
        &self,
        hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        self.may_wait(self.rcu)?;
        super::gp::until_done(self.rcu.waiters_cookie(), hook)
    }

    /// Waits through this slot until `cookie` is done. A cookie of another domain is
    /// refused; one that is done after a poll needs no wait and is answered at once,
    /// even from inside a section; otherwise the context is checked (`may_wait`) before
    /// the first wait.
    fn wait_for(
        &self,
        cookie: GpCookie<'_, N>,
        hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        if !core::ptr::eq(cookie.rcu, self.rcu) {
            return Err(Error::OtherDomain);
        }
        if cookie.poll() {
            return Ok(()); // nothing to wait for: no deadlock possible
        }
        self.may_wait(cookie.rcu)?;
        super::gp::until_done(cookie, hook)
    }
}

/// One [`ContextReader`] per CPU and a hook that names the calling CPU (from
/// [`Rcu::per_cpu`]): `CPUS.current()` is the calling core's reader.
#[derive(Clone, Copy)]
pub struct PerCpu<'d, const N: usize, const K: usize> {
    // INVARIANT: `readers[i]` is dedicated slot `i`, and by the creator's promise
    // `current_cpu` names the CPU whose context runs it.
    pub(super) readers: [ContextReader<'d, N>; K],
    pub(super) current_cpu: fn() -> usize,
}

impl<'d, const N: usize, const K: usize> PerCpu<'d, N, K> {
    /// The calling CPU's reader; `None` if the hook named a CPU of `K` or more.
    #[inline]
    pub fn current(&self) -> Option<ContextReader<'d, N>> {
        self.readers.get((self.current_cpu)()).copied()
    }

    /// Every CPU's reader, CPU `i`'s at index `i` (each only for its own CPU).
    pub fn all(&self) -> &[ContextReader<'d, N>; K] {
        &self.readers
    }
}

impl<const N: usize, const K: usize> core::fmt::Debug for PerCpu<'_, N, K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PerCpu")
            .field("cpus", &K)
            .finish_non_exhaustive()
    }
}

/// A reader context that writers' blocking helpers wait through: `&mut Reader`, a
/// [`ContextReader`] (or a reference to one), so a per-CPU or per-interrupt-level writer
/// needs no slot of its own. Sealed: implemented only here.
///
/// The helper checks, in one place, that the context belongs to the domain it waits
/// for (else [`Error::OtherDomain`]) and that it is not inside a read section of it
/// (else [`Error::InReadSection`]: the wait would wait for itself; a helper whose grace
/// period has already ended needs no wait and goes ahead). A `Reader` is passed
/// as `&mut`, so no guard of it can be alive (checked at compile time); a
/// `ContextReader` is `Copy`, and its open section is found at run time.
pub trait WaitContext<const N: usize>: sealed::Sealed<N> {}

mod sealed {
    pub trait Sealed<const N: usize> {
        /// The slot and domain waited through.
        fn at(&self) -> super::At<'_, N>;
    }
}

impl<const N: usize> sealed::Sealed<N> for &mut Reader<'_, N> {
    fn at(&self) -> At<'_, N> {
        self.at
    }
}
impl<const N: usize> WaitContext<N> for &mut Reader<'_, N> {}

impl<const N: usize> sealed::Sealed<N> for ContextReader<'_, N> {
    fn at(&self) -> At<'_, N> {
        self.at
    }
}
impl<const N: usize> WaitContext<N> for ContextReader<'_, N> {}

impl<const N: usize> sealed::Sealed<N> for &ContextReader<'_, N> {
    fn at(&self) -> At<'_, N> {
        self.at
    }
}
impl<const N: usize> WaitContext<N> for &ContextReader<'_, N> {}

/// `Ok` if `ctx` may block waiting for a grace period of `domain` (see [`WaitContext`]).
pub(crate) fn may_wait<const N: usize>(
    ctx: &impl WaitContext<N>,
    domain: &Rcu<N>,
) -> Result<(), Error> {
    sealed::Sealed::at(ctx).may_wait(domain)
}

/// Waits through `ctx` until `cookie` is done, asking `hook` between attempts. A cookie
/// of another domain is refused; one that is done after a poll needs no wait and is
/// answered at once, even from inside a section; otherwise the context is checked
/// ([`may_wait`]) before the first wait.
pub(crate) fn wait_through<const N: usize>(
    ctx: &impl WaitContext<N>,
    cookie: GpCookie<'_, N>,
    hook: impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()>,
) -> Result<(), Error> {
    sealed::Sealed::at(ctx).wait_for(cookie, hook)
}

/// Whether this build reports a blocking wait inside a read section of *another* reader
/// of the same domain on the calling thread as [`Error::InReadSection`] (debug
/// builds with feature `std`). Without it such a wait deadlocks; a wait inside the
/// waiting reader's own section is reported in every build.
pub const DETECTS_WAIT_IN_OTHER_SECTION: bool = cfg!(all(rcuref_section_table, debug_assertions));

#[cfg(all(test, not(loom)))]
mod ceiling_tests {
    use super::*;
    use crate::rcu::encoding::entered;

    /// A section entered without a guard stops one level short of the sticky count:
    /// `raw_lock` there is refused with `Error::TooDeep` and changes nothing, so as many
    /// `raw_unlock`s as successful `raw_lock`s end the section (a stuck slot would stall
    /// every grace period of the domain for good).
    #[test]
    fn raw_lock_at_the_ceiling_is_refused_and_raw_unlocks_still_balance() {
        let rcu: Rcu<1> = Rcu::with_dedicated(1);
        // SAFETY: (test) this context is the slot's only user.
        let me = unsafe { rcu.context_reader(0) };
        me.raw_lock().unwrap();
        // As if entered (STICKY - 2 * ONE_LEVEL) / ONE_LEVEL times: one level short of
        // the last one `raw_lock` allows.
        let depth = (STICKY - 2 * ONE_LEVEL) / ONE_LEVEL;
        let v = entered(0) - ONE_LEVEL + depth * ONE_LEVEL;
        rcu.slots[0].0.store(v, Relaxed);
        me.raw_lock().unwrap();
        let top = rcu.slots[0].0.load(Relaxed);
        assert_eq!(me.raw_lock(), Err(Error::TooDeep));
        assert_eq!(me.raw_lock(), Err(Error::TooDeep));
        assert_eq!(
            rcu.slots[0].0.load(Relaxed),
            top,
            "a refused raw_lock changed the slot"
        );
        // Each raw_unlock takes one level off, from the top as from anywhere (2^30 of them
        // would be slow here; the arithmetic is the same at every depth).
        // SAFETY: (test) nothing is read; each level left was entered here.
        unsafe { me.raw_unlock() }.unwrap();
        assert_eq!(rcu.slots[0].0.load(Relaxed), top - ONE_LEVEL);
        rcu.slots[0].0.store(entered(0) + ONE_LEVEL, Relaxed); // two levels left
        for _ in 0..2 {
            assert!(me.in_read_section());
            // SAFETY: (test) as above.
            unsafe { me.raw_unlock() }.unwrap();
        }
        assert!(
            !me.in_read_section(),
            "the section outlived its raw_unlocks"
        );
        // SAFETY: (test) as above.
        assert_eq!(unsafe { me.raw_unlock() }, Err(Error::NotInSection));
    }
}
