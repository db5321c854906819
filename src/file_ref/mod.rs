//! Zoned reference counts: Linux's `file_ref_t`, 32- and 64-bit.
//!
//! A conventional "get unless zero" is a compare-exchange loop: every failed attempt
//! re-reads and retries, so N contending CPUs do O(N²) work. A zoned count takes a
//! reference with **one unconditional atomic add** and decides from the *result*
//! whether it succeeded. That works because the counter stores *references − 1* and the
//! upper half of its range is split into zones that an add can run into but not out of
//! in any realistic time:
//!
//! ```text
//!  raw value (32-bit shown; 64-bit has the same top bits)
//!  0x0000_0000  ONEREF     one reference held                        ┐
//!      ...                 n references: raw = n - 1                 │ valid zone
//!  0x7FFF_FFFF  MAXREF     last valid count                          ┘ (non-negative)
//!  0x8000_0000  ┐
//!  0xA000_0000  │ SATURATED  the object leaks: counts here are never freed
//!  0xBFFF_FFFF  ┘
//!  0xC000_0000  RELEASED   ┐
//!  0xE000_0000  DEAD       │ dead zone: the object is being or has been destroyed
//!  0xFFFF_FFFE             ┘
//!  0xFFFF_FFFF  NOREF      the last reference was just dropped (transient)
//! ```
//!
//! * [`get`](FileRef32::get): `add 1`; success iff the result is non-negative (signed),
//!   or in the saturation zone (a saturated object is leaked, so using it is safe).
//!   A get on NOREF lands on ONEREF and *succeeds*: it revives the object before the
//!   dropping put has marked it dead (see the race tables below).
//! * [`inc`](FileRef32::inc): `add 1` for a holder; it cannot fail.
//! * [`put`](FileRef32::put): `sub 1`; a non-negative result means other references
//!   remain. Otherwise the slow path acts on **the value the decrement returned** (a
//!   re-read would race, see "Plugged slow-path race"):
//!   NOREF → one compare-exchange NOREF → DEAD, and only its winner destroys;
//!   dead zone → an imbalanced put: warn, store DEAD; saturation zone → store SATURATED.
//!
//! # Races defended against
//!
//! **Mark-dead race** (why NOREF → DEAD is a compare-exchange, not a store):
//!
//! | T1 (last put)                       | T2 (get)                   | count  |
//! |-------------------------------------|----------------------------|--------|
//! | `sub 1` → NOREF                     |                            | NOREF  |
//! |                                     | `add 1` → ONEREF, succeeds | ONEREF |
//! | `cmpxchg(NOREF → DEAD)` **fails**   |                            | ONEREF |
//! | returns false: T2 owns the object   | ... later put frees it     |        |
//!
//! With a plain store T1 would mark the object dead while T2 holds it.
//!
//! **Plugged slow-path race** (why the slow path uses the decremented value): if T1
//! re-read the counter after its `sub` and T2 did get + put in between, T1 could read
//! NOREF from T2's put and both would race for the single NOREF → DEAD transition with
//! different views; worse, T1 could read T2's DEAD and misreport an imbalanced put.
//!
//! **Deconstruction race** (the rule for callers): T1's `sub` reaches NOREF and T1
//! stalls; T2 gets (revive), puts, wins NOREF → DEAD and frees the memory; T1 resumes
//! and its compare-exchange writes into freed memory.
//!
//! | T1 (put)        | T2                                   |
//! |-----------------|--------------------------------------|
//! | `sub` → NOREF   |                                      |
//! |  (stalled)      | get → ONEREF; put → NOREF; cmpxchg → DEAD |
//! |                 | frees the memory                     |
//! | cmpxchg on freed memory |                              |
//!
//! The kernel closes this by running `put` with preemption disabled, inside an RCU
//! read-side section, and freeing after a grace period. This module knows nothing of
//! RCU, so **the rule is the caller's**: the memory holding a `FileRef` must not be
//! freed or reused for another type while any `put` on it may still be running. Either
//! put inside an RCU read section and free after a grace period (what `rcuref`'s RCU
//! and pool do), or keep the memory type-stable (a static pool slot is never freed; a
//! late compare-exchange there only ever meets another incarnation's NOREF, which means
//! "no references", so exactly one caller still destroys). `tests/loom_file_ref.rs`
//! models both the rule and its violation.
//!
//! # Beyond mainline: zones are sticky for every add
//!
//! Mainline's get has no slow path: a failed get leaves its `+1` behind, because a
//! reset could hit an object that was freed and reused meanwhile. On 32 bits 2²⁹ failed
//! gets walk DEAD up to NOREF and the next one "succeeds" on a dead object. Mainline's
//! `inc` is a plain add too, so 2³² increments (safe code can `mem::forget` clones of a
//! handle) walk a live count through the saturation and dead zones back to ONEREF, and
//! one put then destroys an object that other holders still use.
//!
//! Here every add that leaves the valid zone (`get` and `inc`; the cold path only, the
//! fast path is still one add and a sign test) pulls the count back with a
//! compare-exchange loop that only ever maps a dead-zone value other than NOREF to DEAD,
//! or a saturated value to SATURATED. Every value it replaces means the same thing as the
//! value it writes, so it is safe whichever incarnation of a reused object it meets, and
//! it never touches NOREF or the valid zone. Each context adds at most once before it
//! repairs, so with K contexts between their add and their repair a count stays within K
//! of SATURATED or DEAD: **a saturated count stays saturated and a dead one stays dead,
//! however many adds come** (puts on a saturated count store SATURATED back, as
//! mainline's do). Reaching the next zone would need 2²⁹ − 1 contexts stopped inside an
//! add at once (on 32 bits; 2⁶¹ − 1 on 64).
//!
//! A count made with [`from_raw`](FileRef32::from_raw) starts at the middle of its zone
//! whatever edge value it is given (a valid value is kept as it is), so the bound above
//! holds from the first operation (a count kept at the edge it was given would die on
//! one get from `RELEASED - 1`, or come back to life on one put from `MAXREF + 1`).
//!
//! # Memory ordering
//!
//! Each claim names the litmus test that herd7 checks it with, in C11 and on the
//! compiled instructions of every instruction set we ship (`litmus/README.md`).
//!
//! * `get`: `SeqCst` add. It must order the caller's *later* loads (re-checking the slot
//!   it found the object in, reading fields) after the increment (`pool-identity-recheck`),
//!   and it reads-from the release sequence of the initialising [`init`](FileRef32::init)
//!   (`Release` store; `pool-init-then-publish`).
//! * `put`: `SeqCst` sub — its release half publishes this holder's accesses to the
//!   object before the count drops; the winner of NOREF → DEAD (`Release` compare-exchange)
//!   then issues an `Acquire` fence, which synchronises with every earlier put's release
//!   through the counter's release sequence, so the destroyer sees all holders' accesses
//!   (`fileref-last-put`).
//! * `put_close`: `AcqRel` compare-exchange ONEREF → DEAD, for the same two reasons
//!   (`fileref-put-close`).
//! * `inc`: `Relaxed`; the caller already holds a reference, so nothing new is published.
//!   The repairs of the cold paths are relaxed compare-exchanges: read-modify-writes, so
//!   they keep the release sequence of `init` intact
//!   (`fileref-repair-keeps-release-sequence`; as a plain store, C++20 release sequences
//!   would end there). A put that re-saturates stores SATURATED with `Release`, for the
//!   same reason.
//! * `init`: `Release` store, the last write when (re)initialising an object: a get that
//!   succeeds on the new count sees the initialised fields (`pool-init-then-publish`).
//! * The deconstruction race under the caller's rule (a put inside a read section, the
//!   memory freed after a grace period): the late exchange never meets the free
//!   (`fileref-deconstruction-under-rcu`; outside a section it does: its twin).
//!
//! # Safety guarantees
//!
//! * Exactly one caller gets `true` from `put`/`put_close` per incarnation (between
//!   `init`s), under every interleaving (loom models of rcuref's critical-state table).
//! * No sequence of `get`, `inc`, `put` and `put_close` calls, however long and however
//!   interleaved, moves a saturated count out of saturation or a dead count back to
//!   life (sticky zones, above); a count can only be destroyed by the put that takes
//!   it from one reference to none. Reaching the next zone would need 2²⁹ contexts
//!   stopped inside an add at the same time.
//! * What is *not* guaranteed by the type: that the memory survives a racing `put`
//!   (the deconstruction race): that is the caller's rule, above. `rcuref`'s pool keeps
//!   it by construction.
//!
//! # Choosing a width
//!
//! [`FileRef`] is the native width. [`FileRef32`] saturates after 2³¹ references and is
//! native everywhere. [`FileRef64`] is native on 64-bit targets; on targets without
//! 64-bit atomics it needs feature `critical-section` and is then backed by a `u64`
//! accessed inside `critical_section::with` (interrupts masked for a handful of
//! instructions; safe from interrupt handlers; on multi-core it relies on the binary's
//! critical-section implementation excluding other cores). portable-atomic's global-lock
//! `fallback` is deliberately not used: an interrupt handler that touches a 64-bit
//! counter whose lock the interrupted code holds deadlocks.

#[macro_use]
pub(crate) mod zoned;

use crate::sync::AtomicU32;
#[cfg(rcuref_atomic64)]
use crate::sync::AtomicU64;

zoned_ref! {
    /// A zoned reference count in 32 bits (see the [module docs](self) for the zones).
    ///
    /// Native on every target (on thumbv6m via portable-atomic's critical-section or
    /// single-core mode, chosen by the binary).
    FileRef32, AtomicU32, u32
}

#[cfg(rcuref_atomic64)]
zoned_ref! {
    #[cfg_attr(docsrs, doc(cfg(any(target_has_atomic = "64", feature = "critical-section"))))]
    /// A zoned reference count in 64 bits (see the [module docs](self) for the zones).
    ///
    /// Native where the target has 64-bit atomics; elsewhere it exists with feature
    /// `critical-section` and is a critical-section-guarded `u64`.
    FileRef64, AtomicU64, u64
}

/// The native-width zoned reference count: [`FileRef64`] on 64-bit targets,
/// [`FileRef32`] elsewhere.
#[cfg(target_pointer_width = "64")]
pub type FileRef = FileRef64;
/// The native-width zoned reference count: [`FileRef64`] on 64-bit targets,
/// [`FileRef32`] elsewhere.
#[cfg(not(target_pointer_width = "64"))]
pub type FileRef = FileRef32;
