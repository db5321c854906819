//! The domain: its reader slots and grace-period words, and its whole API in one `impl`
//! (the read side is in `readers`, the grace-period steps in `gp`).

use super::encoding::{mask, phase, CLAIMED, COMPLETED};
use super::gp::GpCookie;
use super::ops;
use super::readers::{At, ContextReader, Guard, PerCpu, ReadToken, Reader};
use crate::error::Error;
use crate::pad::Line;
use crate::sync::AtomicU32;
use crate::sync::Ordering::{Acquire, Relaxed, Release, SeqCst};
use core::marker::PhantomData;

/// An RCU domain with `N` reader slots (threads, harts, interrupt priority levels).
///
/// Usable in a `static` (`Rcu::new` is `const`). See the [module docs](crate::rcu) for
/// the algorithm and its guarantees.
pub struct Rcu<const N: usize> {
    // INVARIANTS:
    // * `slots[i]` is 0 while free; it is claimed by the one compare-exchange from 0 to
    //   CLAIMED that succeeds (a `Reader`), and from then on written only by that reader:
    //   CLAIMED when offline, else CLAIMED | phase << 1 | nesting * ONE_LEVEL. The first
    //   `dedicated` slots are CLAIMED from the start and never freed (`ContextReader`s).
    // * `gp` moves only forwards, one step per successful compare-exchange in
    //   `gp::advance` (wrapping at `mask()`); an odd value means a wait is in progress. A
    //   wait step succeeds only from the value its scan was taken at.
    // * `stepping[h]` counts the contexts inside `advance` whose snapshot of `gp` lies in
    //   half `h` of the range; `gp` never enters half `h` while it is non-zero, so no
    //   snapshot survives a whole lap (the lap guard).
    // * `sleepers` holds the announcements of waits that may sleep (`Waiting::sleep`):
    //   bit `sleep_bit(p)` set by a wait whose holders are sections of phase `p`
    //   (or by any that cannot tell, both bits), until an unlock or a step takes the
    //   word back to 0 to call the wake hook (once for every wait asleep: the hook wakes
    //   them all, and each announces again before it sleeps again). An unlock looks at
    //   its own section's bit only; a sleeper announces the bit of the wait the counter
    //   stands at **after** its announcement, or both (`Rcu::announce_sleep`): any later
    //   wait is reached by a step that ends that one, which wakes the sleepers. `wake`
    //   is null or a `fn()` the binary installed
    //   (`set_wake_hook`). Nothing about safety depends on either: they only decide how
    //   soon a sleeping wait runs again.
    // * `phase`: bit 0 is the phase outermost locks record. Wait steps set it to
    //   `phase(g)` when it differs, so it changes twice per grace period. Nothing about
    //   safety depends on bit 0 (module docs, "The phase word"), only how soon waits
    //   finish, so a late store from a stopped driver is harmless. Where the fence is
    //   chosen at run time (`rcuref_auto`), bit 1 (`encoding::PHASE_HEAVY`) is set only
    //   by a step, or a reader's registration (`mark_heavy_if_decided`), that read the
    //   mode decided Heavy, which is final, so a word with it
    //   says what the mode says whenever its store lands; readers that see it skip the
    //   full fence, so that claim **is** a safety invariant. Every other bit is 0.
    // * `fences` (asymmetric-fence builds): the heavy-fence marks, whose invariants
    //   `heavy::FenceMarks` states: `returned` names no wait, or a wait of the counter's
    //   current lap of its half whose heavy fence has returned (forgotten before every
    //   step into a half); `begun` is a hint with no bearing on safety.
    // Layout: `phase` and `sleepers` (read by every outermost lock and unlock, written
    // twice per grace period and when a wait starts or stops sleeping),
    // `gp` (written four times per grace period, read only by drivers), `stepping`
    // (written by every poll) and each slot (written by its reader) on cache lines of
    // their own where padding is on (`crate::pad`).
    pub(super) phase: Line<ReadMostly>,
    pub(super) gp: Line<AtomicU32>,
    pub(super) stepping: Line<[AtomicU32; 2]>,
    #[cfg(rcuref_fences)]
    pub(super) fences: Line<super::heavy::FenceMarks>,
    /// A process-unique number for the debug section table (see `section_key`).
    #[cfg(all(rcuref_section_table, debug_assertions))]
    serial: super::sections::Serial,
    pub(super) slots: [Line<AtomicU32>; N],
    /// How many of the first slots are dedicated to `ContextReader`s.
    pub(super) dedicated: usize,
    /// Whether a cookie has ever been handed out ([`Rcu::start_poll`] and what is built
    /// on it): a blocking wait's cookie may then take no shortcut (`waiters_cookie`).
    /// INVARIANT: false → true once, never back; set before the first cookie is
    /// returned. Read-mostly, off the hot lines (written once in a domain's life).
    #[cfg(not(rcuref_fences))]
    pub(super) cookies_taken: crate::sync::AtomicBool,
}

/// What every outermost lock and unlock reads and little else writes: the phase word,
/// and whether a wait sleeps (one cache line where padding is on).
pub(super) struct ReadMostly {
    pub(super) phase: AtomicU32,
    /// Non-zero while a wait may be asleep and nobody has called the wake hook for it
    /// yet (`Waiting::sleep`): `sleep_bit(p)` for a wait that sections of phase `p`
    /// hold, both bits for one that could not tell.
    pub(super) sleepers: AtomicU32,
    /// Null, or the `fn()` that wakes this domain's sleeping waits (`set_wake_hook`).
    pub(super) wake: crate::sync::AtomicPtr<()>,
}

/// The announcement bit of a sleeping wait that sections of phase `p` hold: bit 0 for
/// phase 0, bit 2 for phase 1 (`1 << 2p`), so that an unlock finds its section's bit
/// from its slot word, whose bit 1 is the phase, with one `and` (`sleep_bit_of_slot`).
#[inline(always)]
pub(super) const fn sleep_bit(p: u32) -> u32 {
    1 << ((p & 1) << 1)
}

/// `sleep_bit(phase_of(v))` for slot word `v`, in two instructions on x86 (`and`,
/// `bt`) where shifting the phase bit down first took four.
#[inline(always)]
const fn sleep_bit_of_slot(v: u32) -> u32 {
    1 << (v & 2)
}

// The slot word's phase is its bit 1 (`encoding::entered`), which `sleep_bit_of_slot`
// relies on.
const _: () = {
    use super::encoding::{entered, phase_of};
    assert!(phase_of(entered(0)) == 0 && phase_of(entered(1)) == 1);
    assert!(sleep_bit_of_slot(entered(0)) == sleep_bit(0));
    assert!(sleep_bit_of_slot(entered(1)) == sleep_bit(1));
};

/// The announcement of a sleeping wait that cannot tell which sections hold it.
pub(super) const ANY_PHASE: u32 = sleep_bit(0) | sleep_bit(1);

/// The announcement bit of a wait for the counter at `g`: the phase of the sections that
/// hold the wait at `g` (odd), or the next wait (`g` even, between a wait's end and
/// the next flip), which is the same phase: `phase(g | 1) ^ 1`.
#[inline(always)]
pub(super) fn sleep_bit_at(g: u32) -> u32 {
    sleep_bit(super::encoding::phase(g | 1) ^ 1)
}

impl<const N: usize> Rcu<N> {
    /// The reader of dedicated slot `slot`, for one context: usable in a `static`.
    ///
    /// # Safety
    /// * every `ContextReader` of that slot (there may be copies, and several calls) is
    ///   used from one context only: one flow of control (one CPU's idle loop, one
    ///   kernel thread, one interrupt priority level), **plus** the interrupt or trap
    ///   handlers that preempt that context on the same core. Handlers nest strictly: a
    ///   handler runs to completion before the code it interrupted resumes, which is
    ///   what makes the slot's load-then-store exact. Two threads that a scheduler
    ///   switches between, even on one CPU, do not nest strictly (one can be preempted
    ///   between its load and its store while the other changes the slot and keeps
    ///   running): give each its own slot, or make the switch impossible inside a
    ///   section (a per-CPU reader used with preemption disabled, as the kernel does);
    /// * a handler that uses it leaves every section it entered before it returns (it
    ///   holds no guard across its return).
    ///
    /// Leaking a guard of a `ContextReader` (`mem::forget`) is safe but never ends: its
    /// level stays on the slot, the slot stays online, and every later grace period of
    /// the domain stalls (and every wait through this context is refused with
    /// [`Error::InReadSection`]). A `Reader`'s drop ends a leaked section; a dedicated
    /// slot has no owner whose drop could.
    ///
    /// Two contexts that could run at the same time on different cores, or a context
    /// that migrates between cores in the middle of a section, break the slot's
    /// single-writer protocol: memory safety of the domain's readers then fails.
    ///
    /// # Panics
    /// If `slot` is not one of the domain's dedicated slots (below the count given to
    /// [`with_dedicated`](Self::with_dedicated)): at compile time in a `static`.
    pub const unsafe fn context_reader(&self, slot: usize) -> ContextReader<'_, N> {
        assert!(
            slot < self.dedicated,
            "a ContextReader needs a dedicated slot (Rcu::with_dedicated)"
        );
        // INVARIANT: the caller promised the contract above.
        ContextReader {
            at: At::new(self, slot),
        }
    }

    /// The readers of dedicated slots `0..K`, one per CPU (or per interrupt priority
    /// level), as an array: `readers[i]` is slot `i`'s. Usable in a `static`.
    ///
    /// # Safety
    /// Each element is a [`context_reader`](Self::context_reader) of its slot, with that
    /// function's contract: element `i` is used only from context `i` and the interrupt
    /// handlers that preempt it on its core.
    ///
    /// # Panics
    /// If `K` is more than the dedicated slots: at compile time in a `static`.
    pub const unsafe fn context_readers<const K: usize>(&self) -> [ContextReader<'_, N>; K] {
        assert!(
            K <= self.dedicated,
            "more per-CPU readers than dedicated slots (Rcu::with_dedicated)"
        );
        let mut out = [ContextReader {
            at: At::new(self, 0),
        }; K];
        let mut i = 0;
        while i < K {
            // INVARIANT: i < K <= dedicated; the caller promised the contract.
            out[i] = ContextReader {
                at: At::new(self, i),
            };
            i += 1;
        }
        out
    }

    /// The per-CPU readers of dedicated slots `0..K` with a hook that names the calling
    /// CPU, so that a kernel gets its core's reader with [`PerCpu::current`] and no
    /// indexing of its own. Usable in a `static`.
    ///
    /// # Safety
    /// As [`context_readers`](Self::context_readers), with `current_cpu` naming the
    /// context: it returns the index of the CPU it runs on (the same for the whole time
    /// a section of that CPU's reader is open: no migration inside a section), and each
    /// CPU's reader is used only by that CPU's code and its interrupt handlers. An index
    /// of `K` or more is answered with `None`, never with another CPU's reader.
    ///
    /// # Panics
    /// If `K` is more than the dedicated slots: at compile time in a `static`.
    pub const unsafe fn per_cpu<const K: usize>(
        &self,
        current_cpu: fn() -> usize,
    ) -> PerCpu<'_, N, K> {
        PerCpu {
            // SAFETY: the caller promised `context_readers`' contract.
            readers: unsafe { self.context_readers() },
            current_cpu,
        }
    }
    /// Claims a reader slot for the calling context (a thread, a hart, an interrupt
    /// priority level). The slot is freed when the [`Reader`] is dropped.
    ///
    /// # Errors
    /// [`Error::NoFreeSlot`] when all `N` slots are claimed.
    pub fn reader(&self) -> Result<Reader<'_, N>, Error> {
        self.mark_heavy_if_decided();
        for (i, s) in self.slots.iter().enumerate() {
            if ops::claim(&s.0) {
                // INVARIANT: i < N (an index of `slots`); our exchange claimed slot i, so
                // we are its only writer from now on; it is offline (CLAIMED).
                // (`word` from the iterator, not `slots[i]`: no bounds check, so no
                // panic path is compiled into a claim.)
                return Ok(Reader {
                    at: At {
                        rcu: self,
                        slot: i,
                        word: &s.0,
                    },
                    _not_send: PhantomData,
                });
            }
        }
        Err(Error::NoFreeSlot)
    }

    /// Feature `auto-fence`: marks the phase word heavy (`encoding::PHASE_HEAVY`) if the
    /// mode is already decided heavy, so that the readers of a domain take the compiler
    /// fence inline (`sync::reader_fence_after_phase`) before its first flip since the
    /// decision. Only flips marked the word: in a process whose writers had not yet
    /// run a grace period every outermost lock took the out-of-line path, 2.5 ns a
    /// section in `read_loop 1` against 1.36-1.48 ns marked (2-core EPYC VM). Safe for the
    /// reason a flip's mark is: the mode never changes once decided, so the bit is as
    /// true now as whenever it lands; a flip's later plain store that drops it only
    /// sends readers back to the out-of-line path, which reads the mode.
    #[inline]
    fn mark_heavy_if_decided(&self) {
        #[cfg(rcuref_auto)]
        {
            use super::encoding::PHASE_HEAVY;
            let word = &self.phase.0.phase;
            if word.load(Relaxed) & PHASE_HEAVY == 0 && super::heavy::readers_skip_fence() {
                word.fetch_or(PHASE_HEAVY, Relaxed);
            }
        }
    }

    /// Runs `f` in a read section on a slot claimed for the call: for interrupt
    /// handlers and other short-lived contexts that hold no [`Reader`].
    ///
    /// # Errors
    /// [`Error::NoFreeSlot`] when all `N` slots are claimed; `f` does not run.
    pub fn with_reader<R>(&self, f: impl FnOnce(&Guard<'_, '_, N>) -> R) -> Result<R, Error> {
        let reader = self.reader()?;
        let guard = reader.lock();
        Ok(f(&guard))
    }

    /// Feature `strict-grace-periods`: after an outermost unlock, drive the grace period
    /// as far as the readers allow, so a reclaimer that frees too early (without waiting
    /// for its grace period) meets its readers' reads soon instead of once in a while.
    /// One poll: never blocks (in the asymmetric mode it may issue a heavy fence from
    /// the unlocking context, so that mode's interrupt handlers should not use it).
    #[cfg(feature = "strict-grace-periods")]
    #[inline(never)]
    pub(super) fn drive_strictly(&self) {
        let _ = self.unmarked_cookie().poll();
    }

    /// Begins a read section that another context may end (Linux's `srcu_down_read`):
    /// a DMA completion interrupt ending what a thread began, an async task that moves
    /// between executors. The section holds a slot of its own (claimed as
    /// [`reader`](Self::reader) does) until [`ReadToken::up_read`] or the token's
    /// drop, which may run anywhere; grace periods wait for it like any reader. Tokens
    /// never nest: each is a section of its own.
    ///
    /// A blocking wait by the context that holds a token waits for that token's section
    /// too, for ever: end the token first. (The debug check of feature `std` does not
    /// see tokens: they may end on another thread.)
    ///
    /// # Errors
    /// [`Error::NoFreeSlot`] when all `N` slots are claimed (nothing begun).
    pub fn down_read(&self) -> Result<ReadToken<'_, N>, Error> {
        let reader = self.reader()?;
        let at = reader.at;
        core::mem::forget(reader); // INVARIANT: the slot moves to the token
                                   // Not `At::enter`: the debug section table belongs to the calling thread, and
                                   // this section may end on another one.
        ops::lock_outer(at.word(), &self.phase.0.phase);
        Ok(ReadToken {
            at,
            _not_sync: PhantomData,
        })
    }

    /// How many unfinished cookies with distinct targets a domain can have at once (3):
    /// a table of cookies this long, keeping the newest of each target, covers every
    /// grace period in flight (Linux's `NUM_ACTIVE_RCU_POLL_OLDSTATE`, which is 2 there).
    /// Without heavy fences the targets are the even counter values one to five steps
    /// ahead: three while a wait is in progress, two otherwise. Where heavy fences may
    /// run (the default build on Linux, `auto-fence`, the asymmetric-fence cfg) they
    /// are the multiples of 4 up to seven steps ahead: two (`tests/polled.rs` counts them
    /// on every value of a small counter).
    pub const ACTIVE_COOKIES: usize = super::encoding::ACTIVE_COOKIES;

    /// Takes a cookie that is done once every read section running now has ended
    /// (Linux's `start_poll_synchronize_rcu`). Never blocks. Call it after unpublishing
    /// what you will reclaim.
    ///
    /// It starts nothing: grace periods here are driven by whoever polls or waits, so
    /// this is [`get_state`](Self::get_state) under the name Linux callers look for.
    pub fn start_poll(&self) -> GpCookie<'_, N> {
        let cookie = self.unmarked_cookie();
        // Before the cookie is returned: a `synchronize` that happens after this call
        // must count a whole grace period, so that this cookie is done when it returns
        // (`waiters_cookie`). One load of a word written once in the domain's life.
        #[cfg(not(rcuref_fences))]
        if !self.cookies_taken.load(Relaxed) {
            divert!(CookiesLeftUnmarked => cookie);
            self.cookies_taken.store(true, Relaxed);
        }
        cookie
    }

    /// The cookie of a blocking wait that drives it at once (every `synchronize`).
    ///
    /// Where heavy fences may run, [`start_poll`](Self::start_poll)'s. Without them, in
    /// a domain that has never handed out a cookie, a scan of the slots after it may
    /// bring its target one flip and one wait closer (`gp::waiter_target`; module docs,
    /// "A blocking wait's own scan"). Once any cookie has been handed out, the whole
    /// grace period: a caller that took a cookie and then synchronizes expects that
    /// cookie done when `synchronize` returns (Linux promises as much), and a cookie's
    /// target counts whole grace periods. `start_poll` marks the domain before it
    /// returns, so a `synchronize` that happens after it reads the mark (coherence of
    /// one word that only ever goes from false to true).
    pub(super) fn waiters_cookie(&self) -> GpCookie<'_, N> {
        let g = super::ops::cookie_snapshot(&self.gp.0);
        #[cfg(not(rcuref_fences))]
        let target = if self.cookies_taken.load(Relaxed) {
            super::gp::cookie_target(g)
        } else {
            super::gp::waiter_target(self, g)
        };
        #[cfg(rcuref_fences)]
        let target = super::gp::cookie_target(g);
        GpCookie { rcu: self, target }
    }

    /// A cookie as [`start_poll`](Self::start_poll) takes it, without marking the
    /// domain (`cookies_taken`): for a poll that drops its cookie at once.
    #[inline]
    pub(super) fn unmarked_cookie(&self) -> GpCookie<'_, N> {
        GpCookie {
            rcu: self,
            target: super::gp::cookie_target(super::ops::cookie_snapshot(&self.gp.0)),
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

    /// Installs (or, with `None`, removes) the function that wakes this domain's
    /// sleeping waits: a reader's outermost unlock that finds a wait asleep
    /// ([`Waiting::sleep`](super::Waiting::sleep)) calls it, from the reader's context
    /// (an interrupt handler's too: make it safe there, short, never blocking). It
    /// should wake every sleeping wait of the domain (they re-check and sleep again if
    /// their grace period is not over): `rcu::std_wake` with feature `std`, an RTOS's
    /// notify-from-ISR, a `sev`.
    pub fn set_wake_hook(&self, wake: Option<fn()>) {
        let p = wake.map_or(core::ptr::null_mut(), |f| f as *mut ());
        self.phase.0.wake.store(p, Release);
    }

    /// Whether a wake hook is installed (a future woken through `Wakers` relies on one).
    pub(super) fn has_wake_hook(&self) -> bool {
        !self.phase.0.wake.load(Acquire).is_null()
    }

    /// Whether the wake hook is `rcu::std_wake` (feature `std`), which `std_sleeping`
    /// installs on a domain with none: it wakes blocking sleeps, never a `Wakers` set,
    /// so a future must not sleep on it (the review's `tests/std_wake_hook.rs`).
    pub(super) fn wake_hook_is_std_wake(&self) -> bool {
        #[cfg(all(feature = "std", not(loom)))]
        return self.phase.0.wake.load(Relaxed) == super::std_wake as fn() as *mut ();
        #[cfg(not(all(feature = "std", not(loom))))]
        return false;
    }

    /// Installs `wake` as the wake hook if the domain has none (`std_sleeping`).
    #[cfg(all(feature = "std", not(loom)))]
    pub(super) fn wake_hook_or(&self, wake: fn()) {
        let _ = self.phase.0.wake.compare_exchange(
            core::ptr::null_mut(),
            wake as *mut (),
            Release,
            Relaxed,
        );
    }

    /// A reader left its outermost section, whose slot word was `v`: wake the sleeping
    /// waits, if any, and if this section may be one they wait for. One relaxed load of
    /// a read-mostly word, a test of the bit of the section's phase, and a branch not
    /// taken when no wait sleeps on a section of that phase: while a wait sleeps on a
    /// reader descheduled inside its section, the running readers' sections began
    /// after its flip, and their unlocks stay off the wake path (`gp urcu 4` spent 8.5%
    /// of its samples in `wake_for` when any announcement sent them there).
    #[inline(always)]
    pub(super) fn wake_sleepers(&self, v: u32) {
        divert!(WakeOnEveryUnlock => self.wake_all_sleepers());
        if self.phase.0.sleepers.load(Relaxed) & sleep_bit_of_slot(v) != 0 {
            self.wake_for(v);
        }
    }

    /// A wait sleeps: a section whose phase is not the one the current wait waits for
    /// (it began after that wait's flip) holds no wait up, so it sends no wake (with
    /// more readers than cores, every unlock of a running reader woke the writer to find
    /// the descheduled one still inside: a FreeRTOS writer slept 92,724 times in a run
    /// and its readers made 40% of their sections).
    ///
    /// The test is the scan's own (`gp::old_phase_online`), against the counter, not
    /// against the phase word: a driver stopped before its store of the phase word, or
    /// landing a late store of an earlier wait's phase, made a section that held the
    /// wait look new, and its unlock skipped the one wake the sleeper had
    /// (`tests/loom_wake.rs`, `a_late_phase_store_...`; the review's
    /// `tests/lost_wake.rs`). The announcement and the counter are loaded `SeqCst`, as the
    /// sleeper's announcement (a swap) and every step (an exchange) are: a step that
    /// came before the announcement in their total order is seen here, and one after it
    /// sees the announcement and wakes the sleepers itself (`gp::wake_after_wait`). So
    /// this reads the counter at the sleeper's wait or later, and a later wait means a
    /// step past the sleeper's, which woke it.
    #[cold]
    #[inline(never)]
    fn wake_for(&self, v: u32) {
        divert!(UnlockNeverWakes => ());
        divert!(OldWakeProtocol => super::broken::wake_by_phase_word(self, v));
        // Both `SeqCst` (a cold path): after the announcement in the total order, so the
        // counter read is at or past every step ordered before the announcement, the
        // sleeper's waits included. (A word without the section's bit now was taken
        // back to 0 by a wake since the one that brought us here: the sleepers it
        // woke announce again before they sleep.)
        if self.phase.0.sleepers.load(SeqCst) & sleep_bit_of_slot(v) == 0 {
            return;
        }
        let g = self.gp.0.load(SeqCst);
        if g & 1 == 1 && super::encoding::phase_of(v) != super::encoding::phase(g) ^ 1 {
            return;
        }
        self.call_wake_hook();
    }

    /// Any context: wake the sleeping waits, if any (a barrier's wait for a callback
    /// another context ran).
    #[inline(always)]
    pub(super) fn wake_all_sleepers(&self) {
        if self.phase.0.sleepers.load(Relaxed) != 0 {
            self.call_wake_hook();
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn call_wake_hook(&self) {
        // Take the announcement back first: only one unlock calls the hook for it
        // (the others, and the unlocks of sections the hook itself runs, find 0: a
        // hook that reads the domain does not re-enter itself,
        // `a_wake_hook_that_reads_its_domain_runs_once`).
        if self.phase.0.sleepers.swap(0, Acquire) == 0 {
            return;
        }
        let p = self.phase.0.wake.load(Acquire);
        if !p.is_null() {
            // SAFETY: `wake` only ever holds null or a pointer made from a `fn()` in
            // `set_wake_hook`; function and data pointers have the same size and
            // representation on every target this crate supports (as in `log.rs`).
            let f: fn() = unsafe { core::mem::transmute::<*mut (), fn()>(p) };
            f();
        }
    }

    /// Announces a wait that may sleep (`Waiting::sleep`): the next outermost unlock of
    /// a section that may hold it calls the wake hook. `for_a_grace_period`: the wait
    /// is for the counter (it polls a cookie), so its holders are the sections of the
    /// phase of the wait the counter stands at (`sleep_bit_at`); otherwise (a wait for
    /// something else: a callback, a place in a queue) every unlock may matter, and
    /// both bits are announced.
    ///
    /// The counter is read before the announcement to choose the bit and again after
    /// it: if it has moved to a wait of the other phase meanwhile (another driver ended
    /// the wait and flipped, before this announcement, so that step woke nobody), the
    /// other bit is announced too. From the second read on, every wait but the one it
    /// read starts after a step that ends that one, and such a step sees the
    /// announcement and wakes the sleepers (`gp::wake_after_wait`).
    pub(super) fn announce_sleep(&self, for_a_grace_period: bool) {
        use crate::sync::Ordering::SeqCst;
        let bits = if for_a_grace_period {
            sleep_bit_at(self.gp.0.load(Relaxed))
        } else {
            ANY_PHASE
        };
        pause_point!(SleepBeforeAnnounce);
        self.phase.0.sleepers.fetch_or(bits, SeqCst);
        // Before whatever the sleeper looks at next (the counter, the fence marks):
        // pairs with a wait step's `SeqCst` load of `sleepers` after its exchange and
        // with the fence a returning heavy fence runs before its load (store buffering).
        crate::sync::fence(SeqCst);
        if bits != ANY_PHASE {
            self.announce_the_counters_bit(bits);
        }
    }

    /// The second half of `announce_sleep`: after announcing `bits`, announce the bit of
    /// the wait the counter stands at now, if that is another.
    #[inline(always)]
    fn announce_the_counters_bit(&self, bits: u32) {
        use crate::sync::Ordering::SeqCst;
        divert!(SleepBitNotRechecked => ());
        let now = sleep_bit_at(self.gp.0.load(SeqCst));
        if now != bits {
            self.phase.0.sleepers.fetch_or(now, SeqCst);
            crate::sync::fence(SeqCst);
        }
    }

    const_fn! {
        /// A domain with all `N` slots free, usable in a `static`.
        pub const fn new() -> Self {
            Self::with_dedicated(0)
        }
    }

    const_fn! {
        /// A domain whose first `dedicated` slots are reserved for [`ContextReader`]s (one
        /// per CPU, or per interrupt priority level that reads; see
        /// [`context_reader`](Self::context_reader) and
        /// [`context_readers`](Self::context_readers));
        /// [`reader`](Self::reader) and [`with_reader`](Self::with_reader) use the rest. A
        /// `dedicated` above `N` fails at compile time in a `static`.
        ///
        /// [`ContextReader`]: super::ContextReader
        pub const fn with_dedicated(dedicated: usize) -> Self {
            assert!(dedicated <= N, "more dedicated slots than slots");
            let mut rcu = Self::new_at(0);
            let mut i = 0;
            while i < dedicated {
                // INVARIANT: a dedicated slot is claimed from the start and never freed,
                // so `reader` cannot take it.
                rcu.slots[i] = Line(AtomicU32::new(CLAIMED));
                i += 1;
            }
            rcu.dedicated = dedicated;
            rcu
        }
    }

    const_fn! {
        /// A domain whose grace-period counter starts at `gp` (tests of the wrap-around;
        /// in test builds that shrink the counter, `gp` must fit its width).
        #[doc(hidden)]
        pub const fn new_at(gp: u32) -> Self {
            let g = gp & !1;
            Rcu {
                phase: Line(ReadMostly {
                    phase: AtomicU32::new(phase(g)),
                    sleepers: AtomicU32::new(0),
                    wake: crate::sync::AtomicPtr::new(core::ptr::null_mut()),
                }),
                gp: Line(AtomicU32::new(g)),
                stepping: Line([AtomicU32::new(0), AtomicU32::new(0)]),
                #[cfg(rcuref_fences)]
                fences: Line(super::heavy::FenceMarks::new()),
                #[cfg(all(rcuref_section_table, debug_assertions))]
                serial: super::sections::Serial::new(),
                slots: array_of!(Line(AtomicU32::new(0)); N),
                dedicated: 0,
                #[cfg(not(rcuref_fences))]
                cookies_taken: crate::sync::AtomicBool::new(false),
            }
        }
    }

    /// The raw grace-period counter (tests and diagnostics).
    #[doc(hidden)]
    pub fn gp_counter(&self) -> u32 {
        self.gp.0.load(Relaxed)
    }

    /// How many reader slots are claimed right now, dedicated ones included
    /// (diagnostics).
    pub fn reader_count(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.0.load(Relaxed) & CLAIMED != 0)
            .count()
    }

    /// The number of reader slots, `N`.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// How many of the first slots are dedicated to `ContextReader`s
    /// ([`with_dedicated`](Self::with_dedicated)).
    pub const fn dedicated(&self) -> usize {
        self.dedicated
    }

    /// The address of slot `i`'s word, which names the slot to
    /// `mutants::set_interrupt` (test builds only).
    #[cfg(rcuref_hooks)]
    #[doc(hidden)]
    pub fn slot_addr(&self, i: usize) -> usize {
        &self.slots[i].0 as *const AtomicU32 as usize
    }

    /// The phase word as an outermost lock loads it, the heavy bit included where the
    /// fence is chosen at run time (test builds only: what a flip stored).
    #[cfg(rcuref_hooks)]
    #[doc(hidden)]
    pub fn phase_word(&self) -> u32 {
        self.phase.0.phase.load(Relaxed)
    }

    /// The domain's identity for the debug section table: its address and a number
    /// unique in the process (so a domain at the address of a freed one, whose leaked
    /// sections a thread may still count, is a different domain). Both only in builds
    /// that track sections.
    #[inline(always)]
    pub(super) fn section_key(&self) -> (usize, u32) {
        #[cfg(all(rcuref_section_table, debug_assertions))]
        let id = self.serial.get();
        #[cfg(not(all(rcuref_section_table, debug_assertions)))]
        let id = 0;
        (self as *const Self as usize, id)
    }
}

#[cfg(not(loom))]
impl<const N: usize> Default for Rcu<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> core::fmt::Debug for Rcu<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Rcu")
            .field("slots", &N)
            .field("dedicated", &self.dedicated)
            .field("readers", &self.reader_count())
            .field("gp", &self.gp_counter())
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl<const N: usize> defmt::Format for Rcu<N> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "Rcu {{ slots: {=usize}, readers: {=usize}, gp: {=u32} }}",
            N,
            self.reader_count(),
            self.gp_counter()
        )
    }
}
#[cfg(all(test, not(loom)))]
mod layout_tests {
    use super::*;

    fn line_of<T>(p: &T) -> usize {
        p as *const T as usize / core::mem::align_of::<Line<u8>>()
    }

    /// Where padding is on, every reader slot, the phase word that readers read, the
    /// counter and the registration counters that every poll writes each have a cache
    /// line of their own.
    #[test]
    fn hot_words_sit_on_their_own_lines() {
        let rcu: Rcu<4> = Rcu::new();
        let mut lines: std::vec::Vec<usize> = rcu.slots.iter().map(|s| line_of(&s.0)).collect();
        lines.push(line_of(&rcu.phase.0.phase));
        assert_eq!(line_of(&rcu.phase.0.phase), line_of(&rcu.phase.0.sleepers));
        lines.push(line_of(&rcu.gp.0));
        lines.push(line_of(&rcu.stepping.0));
        lines.sort_unstable();
        lines.dedup();
        if crate::CACHE_PADDED {
            assert!(core::mem::align_of::<Line<u8>>() >= 64);
            assert_eq!(lines.len(), 7, "two hot words share a cache line");
        } else {
            assert_eq!(
                core::mem::size_of::<Line<AtomicU32>>(),
                4,
                "padding without asking"
            );
            assert_eq!(
                core::mem::size_of::<Line<ReadMostly>>(),
                8 + core::mem::size_of::<usize>(),
                "padding without asking"
            );
        }
    }
}

#[cfg(all(test, not(loom), rcuref_auto))]
mod mark_tests {
    use super::*;
    use crate::rcu::heavy::{fence_mode, FenceMode};

    /// A reader that registers once the mode is decided finds the phase word marked
    /// heavy exactly when the mode is heavy (`Rcu::mark_heavy_if_decided`): in the
    /// default build on Linux (membarrier: heavy) and with feature `auto-fence` alone
    /// (no fence installed: full, where a mark would let readers skip their fence).
    #[test]
    fn a_reader_finds_the_phase_word_marked_as_the_mode_says() {
        let rcu: Rcu<2> = Rcu::new();
        let heavy = fence_mode() == FenceMode::Heavy;
        let _r = rcu.reader().unwrap();
        let marked = rcu.phase.0.phase.load(Relaxed) & super::super::encoding::PHASE_HEAVY != 0;
        assert_eq!(marked, heavy, "mode {:?}", fence_mode());
    }
}
