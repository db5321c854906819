//! Epoch-based RCU for `no_std`: a static domain, nesting read guards, blocking and polled
//! grace periods, bounded deferred reclamation, and [`RcuCell`].
//!
//! # The algorithm
//!
//! A domain [`Rcu<N>`] has `N` reader slots, one grace-period counter `gp` and a phase
//! word that readers copy. A
//! [`Reader`] owns one slot; only its owner writes a slot, so the read side needs no
//! read-modify-write at all:
//!
//! ```text
//! slot = 0                              free (no reader has claimed it)
//! slot = CLAIMED                        claimed, offline (not in a read section)
//! slot = CLAIMED | phase << 1 | n << 2  online, nesting n >= 1, since the outermost
//!                                       lock, which saw `phase`
//!
//! lock (outermost):  slot = CLAIMED | phase << 1 | 1 << 2   (relaxed load of the phase
//!                    fence(SeqCst)                           word, Release store; the one
//!                                                            full fence on multi-core)
//! lock (nested):     slot += 1 << 2             (Release store; a ContextReader's fences too)
//! unlock (nested):   slot -= 1 << 2             (Release store)
//! unlock (outer):    slot = CLAIMED             (Release store)
//! ```
//!
//! `gp` advances one step at a time and a grace period is four steps:
//! **flip** (the phase readers copy changes), **wait** until no slot is online with
//! the old phase, **flip** back, **wait** again. `phase(gp) = ((gp + 1) / 2) % 2`, so the
//! counter alone says where the machine is: odd = a wait is in progress. Readers do not
//! read `gp` (see "The phase word" below). A cookie
//! ([`Rcu::start_poll`]) is the counter value at which the next full grace period ends
//! (where heavy fences may run, the next full grace period that starts at a multiple of
//! 4: [`heavy`], "One fence per grace period"; without them, a blocking wait's cookie
//! may end one flip and one wait sooner: "A blocking wait's own scan" below).
//!
//! # Why two flips
//!
//! A reader loads the phase and then stores its slot; it can be delayed between the two.
//!
//! | reader                         | writer                                              |
//! |--------------------------------|-----------------------------------------------------|
//! | loads the phase: 0             |                                                     |
//! | (delayed)                      | unpublish A; flip to 1; no slot online → done; free A |
//! | stores slot = online, phase 0  |                                                     |
//! | fence; loads the pointer: B    | unpublish B; flip to 0; the reader's phase **is** 0: |
//! |                                | it looks new → done; **free B**                      |
//! | reads B: use after free        |                                                     |
//!
//! With one flip per grace period the second one skips the stale reader. With two, the
//! reader's stale phase is old for one of the two waits, so it is waited for. liburcu
//! shipped the one-flip bug once; `tests/loom_rcu.rs` keeps a one-flip variant
//! (`Mutant::SingleFlip`) and requires the model to catch it.
//!
//! # A blocking wait's own scan
//!
//! The second flip is there for one reader only: the stale one above, which loaded the
//! phase before a flip and announced it after that flip's wait had scanned. A caller
//! that is about to drive its own grace period can look for it instead. In a build
//! without heavy fences, every `synchronize` takes its cookie ([`Rcu::start_poll`]'s
//! unpublish-fence-load), then scans the slots once more for a reader online with the
//! phase that the next wait does *not* wait for. If none is there, one flip and one
//! wait suffice: a reader already announced with the other phase is that wait's, and
//! a reader whose announcement this scan missed has its fence after the cookie's, so
//! its loads see the unpublish (`rcu-lock-vs-wait`'s pairing, with the cookie's fence
//! in the wait's place). If one is there, the cookie takes the whole grace period as
//! before. The counter and the phase word are not touched, so drivers, the lap guard
//! and every other cookie are as described here; this is liburcu's and Linux's one
//! switch a grace period, with the wait for stale readers made by the caller, for its
//! own cookie, instead of by a writer holding a mutex.
//!
//! The shortcut is taken only in a domain that has never handed out a cookie. A
//! cookie's target counts whole grace periods, and a caller that took one
//! ([`Rcu::start_poll`], [`Rcu::get_state`], and the types that keep one: `RcuCell`'s
//! retired values, [`RcuValue`], [`DeferQueue`], the callback queue) and then
//! synchronizes expects it done when `synchronize` returns, as Linux promises: one
//! flip and one wait leave it pending. So `start_poll` marks the domain, once, before
//! it returns its first cookie, and a `synchronize` that reads the mark takes the whole
//! grace period (a `synchronize` that happens after the `start_poll` reads it: one word
//! that only goes from false to true). Where heavy fences may run the scan would need
//! one, and cookies stay aligned to first waits instead (`heavy`, "One fence per grace
//! period"). Litmus `rcu-waiters-cookie`, with twins that drop the scan or its fence;
//! `Mutant::WaitersCookieTrustsNoScan` (one flip without the scan) must be caught by
//! the loom models, `Mutant::CookiesLeftUnmarked` by the tests of Linux's promise.
//!
//! # The phase word
//!
//! Readers copy the phase from a word of its own, not from `gp`: `gp` changes four times
//! per grace period, and each change would cost every reading core a cache miss on its
//! next outermost lock. Wait steps set the phase word to `phase(gp)` when it differs, so
//! it changes twice per grace period and never otherwise; padding (`crate::pad`) keeps
//! it off the lines that drivers write.
//!
//! **Safety does not depend on the phase a reader records.** (The word's other bit, where
//! the fence is chosen at run time, is another matter: "Memory ordering" below.) A grace
//! period contains two consecutive waits, one for each phase value (a blocking wait that
//! takes one flip puts its own scan in the place of the other wait: "A blocking wait's
//! own scan", whose scan does not read the phase word either). Whatever phase a
//! reader's slot shows, one of the two waits is for that phase and completes only after a
//! scan that did not see the slot online with it; as only the reader writes its slot and
//! the phase is fixed for a whole section, that scan came after the section ended (or, by
//! the fence pairing below, the reader never saw the unpublished pointer). The phase only
//! decides *which* wait holds a reader, and so how soon the waits can finish: a wait for
//! phase `x` cannot complete while new sections keep recording `x`, which is why the word
//! follows `gp`. A driver stopped between its check and its store can leave a stale value
//! behind; the next wait step repairs it. `Mutant::FrozenPhase` (the word never changes)
//! must pass every loom model, which checks this argument on the models.
//!
//! # Any number of drivers, none of them in charge
//!
//! Grace periods are driven by whoever polls: a thread in [`Reader::synchronize`], an
//! interrupt handler polling a [`GpCookie`], a [`DeferQueue`] collecting, all at once.
//! There is no lock. Each step is one compare-exchange of `gp` **from the value the step
//! was decided on**: a flip from an even value (always valid), a wait's completion from
//! the odd value whose scan found no reader with the old phase. A context stopped at any
//! point (preempted by higher-priority work for as long as that runs) therefore holds
//! nobody up, and when it resumes its exchange fails unless the counter is still where
//! its scan was taken: it can never complete a step on stale facts.
//!
//! | driver A (stopped)                | everyone else                               |
//! |-----------------------------------|---------------------------------------------|
//! | loads gp = 1, scans: nobody old   |                                             |
//! | (stopped)                         | steps 1 → 2 → 3 → 4 … cookies complete      |
//! | cmpxchg(1 → 2) **fails**: gp moved | a reader comes online                       |
//! | reloads and goes on from there    |                                             |
//!
//! An earlier design let a scan that found *nobody* online store the cookie's target
//! outright (an "idle fast path"). With two drivers that completed other contexts'
//! grace periods: the scan ran, a reader came online and read a pointer, a writer
//! unpublished it and took a cookie at the same counter value, and the store completed
//! that cookie under the reader. `Mutant::StaleFastPath` keeps it, and the two-driver
//! loom model and a preemption test must catch it. Its saving (one store instead of
//! four exchanges when no reader is online) was not worth a shortcut on someone else's
//! behalf.
//!
//! **The lap guard.** A 32-bit counter comes back to the same value after 2³² steps, so
//! a driver stopped between its scan and its exchange for exactly one lap would find
//! its exchange succeed on a stale scan (ABA). Every driver therefore registers, for the
//! time it spends in a step, in the half of the counter's range its snapshot lies in,
//! and `gp` never enters a half in which a driver is still registered. A snapshot thus
//! never survives a lap: the exchange of a stopped driver fails however long it is
//! stopped. The price: a context stopped inside a step for 2³¹ steps (2²⁹ grace
//! periods) pauses grace periods until it resumes, instead of corrupting them
//! (`tests/preemption.rs` runs exactly this with the counter cut to 6 bits).
//!
//! # Memory ordering
//!
//! Each claim below names the litmus test that checks it (`litmus/README.md`): herd7
//! runs it in C11 and on each instruction set as the library compiles for it (AArch64
//! with and without LSE/RCpc, RISC-V 32 and 64, Armv7-M), and each test has weakened
//! twins that herd7 must find broken. Every memory operation named here is one inline
//! function of `rcu/ops.rs`.
//!
//! * Reader `lock`: store slot, then `fence(SeqCst)`, then the section's loads. A wait
//!   step: `fence(SeqCst)`, then load the slots. Either the scan sees the reader, or the
//!   reader's loads see what was unpublished before the wait (store buffering with both
//!   fences; `rcu-lock-vs-wait`).
//! * A cookie: unpublish, `fence(SeqCst)`, load `gp`. The cookie's load reads a value
//!   before the flip that another driver's wait step read, so the cookie's fence
//!   precedes that wait's fence in the single order of SC fences; then either the
//!   reader's fence comes after the cookie's and the reader sees the unpublish, or it
//!   comes before the wait's and the scan sees the reader online (`rcu-cookie-vs-flip`).
//! * **Nested locks of a [`ContextReader`] fence too**: an interrupt handler may nest
//!   between the outermost lock's store and its fence (a trap is not a fence), and its
//!   own fence keeps its loads after the announcement (`Mutant::NestedWithoutFence`;
//!   `rcu-irq-in-lock-after-store`, and `-after-phase`, `-after-fence` for the other
//!   gaps). A [`Reader`]'s nested locks do not: its context ran the outermost fence
//!   first.
//! * Reader `unlock`: a `Release` store, paired with the scan's `Acquire` load of the
//!   slot (`rcu-unlock-vs-reclaim`), and the step's `SeqCst` exchange with the cookie's
//!   `Acquire` check when another context reclaims (`rcu-unlock-vs-reclaim-by-cookie`):
//!   the section's loads happen before whatever the cookie's holder does next.
//! * **Every** store to a slot is `Release`, not only the unlock: a scan may read the
//!   value of the *next* section (the reader re-entered at once, or a handler claimed
//!   the slot again through [`Rcu::with_reader`]), and under C++20's release
//!   sequences, which Rust follows, a relaxed store there would leave the previous
//!   section's reads unordered before the reclaim (a data race; `rcu-release-sequence`,
//!   and `rcu-irq-claim` / `rcu-irq-release` for `Rcu::with_reader`'s claim and
//!   release). On x86 a release store is a plain `mov`; on Arm and RISC-V it adds a
//!   barrier before it.
//! * The phase word is relaxed everywhere: whatever phase a section records, one of a
//!   grace period's two waits is for it (`rcu-phase-word`). Where the fence is chosen
//!   at run time, its heavy bit is set only by a step that read the final Heavy mode,
//!   so a reader that sees it late or early is right to skip the full fence
//!   (`auto-phase-word-heavy-bit-decided-{full,heavy}`).
//! * The lap guard: registration and the counter's re-read, against a step's check of
//!   the registrations and its exchange, are all `SeqCst` (on AArch64 `LDAR`, never
//!   `LDAPR`): either the step sees the registration or the registering driver sees the
//!   counter gone (`rcu-lap-guard`).
//! * Publishing a pointer ([`RcuCell::replace`], [`RcuValue`]): an `AcqRel` swap;
//!   readers load it with `Acquire`, so the pointee's initialisation is visible
//!   (`rcucell-publish`, `rcuvalue-publish`).
//!
//! # Cost
//!
//! Outermost lock: a load of the phase word, a release store, and one full fence (`mfence`/`lock
//! or` on x86, `dmb` on Arm, `fence rw,rw` on RISC-V); a `Reader`'s nested lock and every
//! unlock: a load and a release store; a `ContextReader`'s nested lock also the fence. On a single core the binary may set `--cfg rcuref_unsafe_assume_single_core`
//! (the name says what it asserts), which turns the fence into a compiler fence: an
//! interrupt handler runs on the same core, after everything the code it interrupted
//! has executed. A grace period with no reader in the way: four compare-exchanges, two
//! scans of the `N` slots, and the registration of each polling call (two
//! read-modify-writes of a counter that readers never touch); a `synchronize` that
//! takes the shortcut of "A blocking wait's own scan", two compare-exchanges and two
//! scans. See docs/testing.md for the measured instruction sequences.
//!
//! # Writers, interrupts and waiting
//!
//! * **Writers from any context.** Every blocking helper ([`Reader::synchronize`],
//!   [`ContextReader::synchronize`], [`Retired::reclaim`], [`RcuValue::replace`],
//!   [`DeferQueue::defer_or_wait`], [`DeferQueue::barrier`]) waits through a
//!   [`WaitContext`]: a `&mut Reader` or a [`ContextReader`] of the same domain. A
//!   per-CPU kernel's writer waits through its own CPU's reader and needs no slot of its
//!   own. The helper checks, in one place, that the context belongs to the domain
//!   ([`Error::OtherDomain`](crate::Error::OtherDomain)) and is not inside a read section
//!   of it ([`Error::InReadSection`](crate::Error::InReadSection): the wait would wait for
//!   itself). A `Reader` is passed as `&mut`, so no guard of it can be alive; a leaked
//!   guard (`mem::forget`) is found at run time, and so is an open section of a
//!   `ContextReader`. In debug builds with feature `std`, so is a section of *another*
//!   reader of the same domain on the calling thread; without `std` that case cannot be
//!   seen and would deadlock: never wait inside a read section.
//! * **One kind of wait hook.** Every blocking helper asks a hook between attempts: a
//!   closure that sees the [`Waiting`] state (attempts so far, the holdouts) and returns
//!   `ControlFlow::Continue(())` to go on or `ControlFlow::Break(())` to give up
//!   ([`Error::GaveUp`](crate::Error::GaveUp); nothing is left half done). Ready-made:
//!   [`spin`], [`forever`]`(f)` (yield, `wfi`, an RTOS sleep between attempts), and a
//!   [`Deadline`] or a [`StallDetector`] on a clock you supply (`deadline.hook()`,
//!   `stall.hook()`; both: `|w| { stall.observe(w)?; deadline.check() }`). The waits
//!   take an `FnMut` bound, not a hook trait, so that `|_| ...` and `|w| ...` need no
//!   annotations: rustc infers a closure's higher-ranked signature only from an `Fn`
//!   bound (`src/rcu/wait.rs` says more).
//! * **Per-CPU readers.** [`Rcu::per_cpu`] makes every dedicated slot's
//!   [`ContextReader`] at once, in a `static`, with a hook that names the calling CPU:
//!   `CPUS.current()` is its reader, with no indexing of your own
//!   ([`Rcu::context_readers`] gives the bare array).
//! * **Never block in an interrupt handler**: a handler that waited for a reader it had
//!   preempted would wait forever on a single core. Handlers use cookies
//!   ([`Rcu::start_poll`], [`GpCookie::poll`]), [`Retired::try_reclaim`],
//!   [`RcuValue::try_replace`] or a [`DeferQueue`]'s `defer` and `collect`, which never
//!   block. A `poll` makes at most eight attempts, whatever cookie it is given.
//! * A single-core *thread* writer waiting for a reader that an interrupt preempted is
//!   fine (the handler finishes first). Waiting for a reader in a lower-priority RTOS
//!   thread needs a wait hook that lets that thread run: a **sleeping wait**
//!   ([`sleeping`]`(spins, sleep)`, [`Waiting::sleep`]) with the domain's wake hook
//!   ([`Rcu::set_wake_hook`]): the writer sleeps (an RTOS notify-take with a tick's
//!   timeout, a `wfe`) and the last reader's outermost unlock wakes it (notify-give
//!   from ISR, `sev`). A yield never lets a lower-priority thread run. Feature `std`:
//!   `std_sleeping` and `std_wake` (more threads than cores: a writer that polls
//!   burns the slice its reader needs). On bare metal with several cores the waiting
//!   core can sleep in `wfi`, woken by an IPI the unlock's hook raises: the AArch64,
//!   RISC-V and dual Cortex-M33 examples have the pair to copy (`examples/firmware/`,
//!   `sleep_until_woken` and `wake_writer`: a generation read before the announcement
//!   and checked with interrupts masked, `wfi`, a GIC SGI, the CLINT's `msip` or the
//!   SSE-200's MHU; the core's timer as the bound), and the AArch64 test firmware's
//!   (`targets/firmware/src/a64.rs`, `cores::wake`) is tested in QEMU with controls
//!   whose hook raises nothing and whose sleep ignores the generation. (QEMU runs
//!   `wfe` as a yield, so a `wfe`/`sev` pair cannot be told from polling there.) What the read side pays: one relaxed load of a
//!   read-mostly word, a test of its section's phase bit and a branch not taken in
//!   each outermost unlock.
//! * **Async.** [`GpCookie::wait`] is a future that completes when the grace period
//!   has ended; it needs no executor features, no allocation, no timer. It re-polls:
//!   each poll drives the grace period as far as the readers allow (a bounded number of
//!   steps) and, if it has not ended, wakes its own task again, yielding to whatever
//!   else is ready. Fine for executors that run other tasks in between (Embassy's,
//!   RTIC's); a task waiting this way keeps its executor busy, so give it a low priority
//!   on battery-powered parts, or sleep between waits yourself (a timer, an event).
//!   [`Retired::reclaim_async`] and [`DeferQueue::defer_async`] build on it. To have
//!   the reader's unlock wake the task instead, declare a [`Wakers`] set in a `static`,
//!   make its `wake` (part of) the domain's wake hook, and await
//!   [`GpCookie::wait_woken`] (`defer_async_woken`, `reclaim_async_woken`): a pending
//!   future registers its waker, announces itself as a sleeping wait does
//!   ([`Waiting::sleep`]) and is not polled again until an unlock of the section it
//!   waits for wakes it. It does so only where no wake can be lost (the heavy mode,
//!   static or decided at run time; one core) and only readers hold the grace period; in the full-fence mode on
//!   more than one core, with a full set or no wake hook, it re-polls as `wait` does
//!   ([`Wakers`] gives the rules). **Never
//!   await a grace period while holding a guard of the same domain**, in the same task
//!   or in a task the executor cannot run until this one completes: the wait would wait
//!   for itself. A guard held across an `.await` keeps its section open while the task
//!   sleeps (legal, and sound); [`GpCookie::holdouts`] names its slot, so a stall report
//!   points at it.
//! * Interrupt-context readers: a handler takes a slot for its section with
//!   [`Rcu::with_reader`] (one slot per interrupt priority that reads, plus
//!   threads/harts), or uses its level's or its CPU's [`ContextReader`].
//! * Dropping a [`Reader`] ends a section whose guard was leaked: the borrow checker
//!   has already ended every reference read under it.
//!
//! # Linux's calls, and where they differ
//!
//! | Linux | here | difference |
//! |---|---|---|
//! | `rcu_read_lock`/`unlock` | [`Reader::lock`], [`ContextReader::lock`], [`ContextReader::raw_lock`]/[`raw_unlock`](ContextReader::raw_unlock) | a slot per context instead of per CPU |
//! | `srcu_down_read`/`srcu_up_read` | [`Rcu::down_read`], [`ReadToken::up_read`] (`Send`) | a slot per token, never nested |
//! | `synchronize_rcu` | [`Reader::synchronize`], [`ContextReader::synchronize`] | waits through a context, with a hook |
//! | `start_poll_synchronize_rcu` | [`Rcu::start_poll`] | starts nothing: pollers drive grace periods |
//! | `get_state_synchronize_rcu` | [`Rcu::get_state`] | the same cookie as `start_poll` |
//! | `poll_state_synchronize_rcu` | [`GpCookie::poll`] (drives), [`GpCookie::is_done`] (only looks) | |
//! | `cond_synchronize_rcu` | [`Reader::cond_synchronize`], [`ContextReader::cond_synchronize`] | |
//! | `get_completed_synchronize_rcu` | [`Rcu::completed`] | raw form `u32::MAX` |
//! | `same_state_synchronize_rcu` | `==` on [`GpCookie`] | also compares the domain |
//! | `NUM_ACTIVE_RCU_POLL_OLDSTATE` | [`Rcu::ACTIVE_COOKIES`] (3) | Linux: 2 |
//! | the `_full` forms | the same calls | the asymmetric mode's heavy fences are part of every grace period a cookie names: nothing more to cover |
//! | `call_rcu`, `rcu_barrier` | [`CallQueue::call`], [`CallQueue::barrier`]; [`DeferQueue`] for one owner | bounded, no heap; [`CallQueue::run`] and [`DeferQueue::collect_at_most`] take a budget |
//! | `DEBUG_OBJECTS_RCU_HEAD` | [`CallQueue::call_keyed`] (feature `debug-callbacks`) | a key, not the `rcu_head` |
//! | `CONFIG_RCU_STRICT_GRACE_PERIOD` | feature `strict-grace-periods` | every outermost unlock polls |
//!
//! # Bounded memory
//!
//! Nothing allocates. [`DeferQueue<T, M, N>`] holds at most `M` retired values; when it
//! is full, [`DeferQueue::defer`] hands the value back (back-pressure) and
//! [`DeferQueue::defer_or_wait`] waits for a grace period instead of growing. Dropping
//! a queue with values still waiting leaks them rather than drop them early: call
//! [`DeferQueue::barrier`] first.
//!
//! # Wrap-around
//!
//! `gp` is a `u32` compared with wrapping arithmetic. A cookie is at most five steps
//! ahead of `gp` when it is taken (seven where heavy fences may run: a cookie's target
//! is then the end of the first grace period that begins after it, [`heavy`], "One fence
//! per grace period") and `gp` never moves backwards, so a cookie counts as done unless
//! its target is one to five (seven) steps ahead: an old cookie stays done for 2³² − 5
//! (2³² − 7) steps after its grace period, and one kept for a whole lap longer than that
//! reports "not yet" for at most five (seven) more steps (never "done" early).
//!
//! The other words compared with a counter value: a [`DeferQueue`]'s stored cookies err
//! the same way (and [`DeferQueue::barrier`] releases what it waited for without asking
//! them again); the C API's `call_rcu` numbers are a wrapping sequence of their own
//! (fewer than 2³¹ callbacks in flight); a driver's snapshot is kept from a lap by the
//! lap guard. The asymmetric mode's heavy-fence mark is the one that would err the
//! unsafe way (a mark a lap old reads "this wait is fenced"), so it is forgotten
//! whenever the counter enters a half ([`heavy`], "The marks").
//!
//! # Safety guarantees
//!
//! What safe code can rely on, on every target:
//!
//! * A value retired from an [`RcuCell`] comes back (`&mut T`) only after every read
//!   section that could have loaded it has ended; a reference loaded under a guard
//!   cannot outlive the guard, the cell, or the storage (compile-fail tests in
//!   `tests/ui/`). A cell cannot be made to publish a shorter-lived value (it is
//!   invariant in its lifetime).
//! * A [`DeferQueue`] never drops or releases a value before a grace period of the
//!   domain it was created for has passed since it was deferred: not when a callback
//!   panics, not when the queue is dropped with values pending (those still waiting
//!   are leaked), not when `defer_async`'s future is dropped. Cookies and retired values
//!   answer only about their own domain.
//! * Interrupt handlers may nest on a [`ContextReader`] at any instruction of the
//!   interrupted context's lock, unlock or section, and may use [`Rcu::with_reader`] at any
//!   point, with the same guarantee.
//! * This holds with any number of contexts driving grace periods at once and any of
//!   them stopped anywhere for any time (modelled in loom with two drivers, tested with
//!   threads stopped at arbitrary and at exact points), and across counter wrap-around
//!   (the lap guard: deterministic, not probabilistic).
//! * A callback that panics inside the machine (the heavy fence, a wait hook, a
//!   `reclaim`, `T::drop`) leaves nothing registered and nothing half moved: grace
//!   periods go on ending.
//! * Liveness: no context's stop can hold up another's grace periods, except a context
//!   stopped inside a polling step for 2³¹ counter steps, which pauses them (the lap
//!   guard) until it resumes. A reader that never leaves its section stalls every grace
//!   period: that is what RCU means.
//!
//! **What is proven, under which model.** The orderings above are checked by herd7 in
//! C11 (RC11, with C++11 and with C++20 release sequences) and on the compiled
//! instructions of AArch64 (baseline and LSE/RCpc), RISC-V 32/64 and Armv7-M, each tied
//! to the object code by `cargo xtask litmus`. The grace-period machine (two drivers,
//! nesting, polling, wrap-around, interrupts at every gap of the read side) is checked
//! by loom, whose C11 model has no load buffering and treats `SeqCst` accesses as
//! `AcqRel`, and by host and QEMU tortures, which run on x86's ordering. What rests on
//! an assumption: that a trap or an interrupt entry is not a fence but does keep the
//! interrupted context's program order (the litmus tests put a handler's instructions
//! in that order); that a `ContextReader`'s contract holds (one context per slot, its
//! handlers on its core); that the heavy fence keeps its contract in the
//! asymmetric-fence mode.
//!
//! What rests on the binary's choices: `--cfg rcuref_unsafe_assume_single_core` is
//! correct only if every reader and writer of the domain runs on one core; on thumbv6m
//! the slot-claiming compare-exchange (in [`Rcu::reader`]) comes from
//! portable-atomic's critical-section or single-core mode, which the binary picks.

// One role per file, with no import circle: `encoding` (the words) <- `ops` (their
// memory operations) <- `domain` (the struct) <- `gp` (steps, cookies) <- `wait` (the
// waiting loop, hooks, futures) <- `readers` (readers, guards, wait contexts) <- the
// writers' helpers (`cell`, `value`, `defer`); `sections` is the debug section table.
// The broken variants' tables and twins (test builds only), kept with the other
// variants in `mutants/` but compiled as a child of this module, so that a twin reaches
// what the real function it replaces reaches.
#[cfg(rcuref_variants)]
#[path = "../mutants/rcu.rs"]
mod broken;
mod call;
pub(crate) mod cell;
mod defer;
mod domain;
pub(crate) mod encoding;
mod gp;
pub mod heavy;
pub(crate) mod ops;
mod readers;
mod sections;
pub(crate) mod value;
mod wait;
mod wakers;

pub use call::{CallQueue, Ran};
pub use cell::{RcuCell, Retired};
pub use defer::DeferQueue;
pub use domain::Rcu;
pub use gp::{GpCookie, Holdout, Holdouts};
pub use readers::{
    ContextReader, Guard, PerCpu, ReadToken, Reader, WaitContext, DETECTS_WAIT_IN_OTHER_SECTION,
};
pub use value::RcuValue;
pub use wait::{forever, sleeping, spin, Deadline, GracePeriod, StallDetector, Waiting};
#[cfg(all(feature = "std", not(loom)))]
pub use wait::{std_sleeping, std_sleeping_for, std_wake, SLEEP_BOUND, SPIN_ATTEMPTS};
pub use wakers::Wakers;
