//! Epoch-based RCU for `no_std`: a static domain, nesting read guards, blocking and polled
//! grace periods, bounded deferred reclamation, and [`RcuCell`].
//!
//! # The algorithm
//!
//! A domain [`Rcu<N>`] has `N` reader slots and one grace-period counter `gp`. A
//! [`Reader`] owns one slot; only its owner writes a slot, so the read side needs no
//! read-modify-write at all:
//!
//! ```text
//! slot = 0                    offline (not in a read section)
//! slot = nesting << 1 | phase online since the outermost lock, which saw `phase`
//!
//! lock (outermost):  slot = 1 << 1 | phase(gp)     (relaxed loads/stores)
//!                    fence(SeqCst)                  <- the one fence on multi-core
//! lock (nested):     slot += 2
//! unlock (nested):   slot -= 2
//! unlock (outer):    slot = 0                       (Release)
//! ```
//!
//! `gp` advances one step at a time and a grace period is four steps:
//! **flip** (the phase readers copy changes), **wait** until no slot is online with
//! the old phase, **flip** back, **wait** again. `phase(gp) = ((gp + 1) / 2) % 2`, so the
//! counter alone says where the machine is: odd = a wait is in progress.
//!
//! # Why two flips
//!
//! A reader loads `gp` and then stores its slot; it can be delayed between the two.
//!
//! | reader                         | writer                                              |
//! |--------------------------------|-----------------------------------------------------|
//! | loads gp: phase 0              |                                                     |
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
//! # The idle fast path
//!
//! If, after the writer's full fence, **no slot is online at all**, the grace period (and
//! any pending ones) completes with a single store of the target. A reader the scan saw
//! offline cannot hold anything unpublished before the fence (the same fence pairing as
//! below); a reader that had loaded `gp` earlier and comes online afterwards with a stale
//! phase is caught by the two flips of the next grace period that finds someone online. On
//! a single core whose readers run in interrupt handlers, every grace period the thread
//! writer waits for takes this path. `tests/loom_rcu.rs` checks the model with and without
//! it (`slow_path_alone_is_safe`).
//!
//! # Memory ordering
//!
//! * Reader `lock`: store slot, then `fence(SeqCst)`, then the section's loads. Writer:
//!   unpublish, `fence(SeqCst)`, flip, `fence(SeqCst)`, load the slots. Between the two
//!   SC fences, either the writer's scan sees the reader online, or the reader's loads see
//!   the unpublish.
//! * Reader `unlock`: `Release` store of 0, paired with the writer's `Acquire` load of
//!   the slot: the section's loads happen before whatever the writer does after the grace
//!   period (reclaiming).
//! * Publishing a pointer ([`RcuCell::replace`]): `AcqRel` swap; readers load it with
//!   `Acquire`, so the pointee's initialisation is visible.
//! * [`Rcu::start_poll`]: `fence(SeqCst)` then load `gp`, so the cookie only counts
//!   flips ordered after the caller's unpublish.
//!
//! # Cost
//!
//! Outermost lock: a load of `gp`, a store, and one full fence (`mfence`/`lock or` on
//! x86, `dmb` on Arm, `fence rw,rw` on RISC-V); nested lock and unlock: a load and a
//! store. On a single core the binary may set `--cfg rcuref_unsafe_assume_single_core`
//! (the name says what it asserts), which turns the fence into a compiler fence: an
//! interrupt handler runs on the same core, after everything the code it interrupted
//! has executed. See DEVELOPMENT.md for the measured instruction sequences.
//!
//! # Writers, interrupts and waiting
//!
//! * Blocking: [`Reader::synchronize`] drives the grace period and calls your wait hook
//!   between attempts (spin, yield, `wfi`, an RTOS sleep). It takes `&mut self`, so it
//!   cannot be called while a guard of the same reader is alive; a leaked guard
//!   (`mem::forget`) is detected: a panic in debug builds, [`RcuError::InReadSection`]
//!   in release.
//! * Never block in an interrupt handler: a handler that waited for a reader it had
//!   preempted would wait forever on a single core. Handlers use the polled API
//!   ([`Rcu::start_poll`] / [`Rcu::poll`]) or [`DeferQueue`], which never block.
//! * A single-core *thread* writer waiting for a reader that an interrupt preempted is
//!   fine (the handler finishes first). Waiting for a reader in a lower-priority RTOS
//!   thread needs a wait hook that lets that thread run (sleep or yield, not spin).
//! * Interrupt-context readers: a handler takes a slot for its section with
//!   [`Rcu::read`] (one slot per interrupt priority that reads, plus threads/harts).
//!
//! # Bounded memory
//!
//! Nothing allocates. [`DeferQueue<T, M>`] holds at most `M` retired values; when it is
//! full, [`DeferQueue::defer`] hands the value back (back-pressure) and
//! [`DeferQueue::defer_or_wait`] waits for a grace period instead of growing.
//!
//! # Wrap-around
//!
//! `gp` is a `u32` compared with wrapping arithmetic (`(gp - cookie) as i32 >= 0`), so
//! it may wrap freely; a cookie is at most 5 steps ahead of `gp` when taken. A cookie
//! not polled for 2³¹ steps (2²⁹ grace periods) would look unfinished again: poll
//! deferred work more often than that. [`Rcu::new_at`] starts the counter anywhere, for
//! tests across the wrap.

mod cell;
mod defer;
mod domain;

pub use cell::{RcuCell, Retired};
pub use defer::DeferQueue;
pub use domain::{GpCookie, Guard, Rcu, RcuError, Reader};
