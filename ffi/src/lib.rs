//! The C API of rcuref: zoned reference counts, RCU domains with split lock and unlock,
//! and a bounded `call_rcu` that interrupt handlers may use. The header is
//! `include/rcuref.h`, generated from this file by cbindgen (`cargo xtask header`;
//! `cargo xtask test` fails when the committed header differs from a fresh one); the
//! guide is `docs/c-api.md`.
//!
//! # What every function promises
//!
//! * Every `int32_t` result is a code (`RCUREF_OK`, or a negative `RCUREF_E*`), except
//!   `rcuref_call_rcu_run`'s and `rcuref_call_rcu_run_some`'s count of callbacks run
//!   (never negative unless a code), never a
//!   yes or no; a yes or no is a `bool`, returned (false for a bad pointer) or written
//!   through a `bool *` (false on any error), so no error reads as "yes".
//! * A cookie names its domain; any other domain refuses it.
//! * No panic crosses the boundary: every condition a caller can cause is a return code
//!   (`RCUREF_E*`, negative), never undefined behaviour where a check is possible. A
//!   null pointer, a domain that is not one of this library's, a slot out of range and
//!   an unlock without a lock are all checked, in every build.
//! * What cannot be checked is the caller's promise, as it is in C: a pointer to a count
//!   or a published-pointer location points to one that lives and is used only through
//!   these functions (or plain reads of its value for diagnostics); a slot is used only
//!   by one context (a CPU, a thread, an interrupt priority level) and the interrupt
//!   handlers that preempt it on its core; nothing read in a section is used after its
//!   unlock; a wait is never called from an interrupt handler.
//! * The library never allocates, never blocks except in the functions that wait for a
//!   grace period (which call the caller's hook between attempts), and never takes a
//!   lock: `call_rcu` and `call_rcu_run` are safe in interrupt handlers.
//!
//! # Configuration
//!
//! Build-time, by environment variables read by `build.rs`: `RCUREF_FFI_DOMAINS`
//! domains (default 2), `RCUREF_FFI_SLOTS` reader slots each (default 8),
//! `RCUREF_FFI_TOKENS` more slots each for the sections of `rcuref_down_read` (default
//! 4), `RCUREF_FFI_CALLBACKS` places in each domain's `call_rcu` queue (default 64);
//! and the cargo features `debug-objects` (a callback's `arg` queued twice is refused),
//! `auto-fence` (readers drop their full fence once a heavy fence is installed:
//! `rcuref_heavy_install`) and `membarrier` (`auto-fence`, with Linux's membarrier found
//! at run time).
//! The header does not change with them: domains are opaque and
//! `rcuref_rcu_slots`/`rcuref_call_rcu_capacity` report the numbers at run time.

#![cfg_attr(not(test), no_std)]
#![allow(non_camel_case_types)]
#![deny(missing_docs)]

use core::ffi::c_void;
use core::ops::ControlFlow;
use portable_atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering, Ordering::Relaxed};
use rcuref::file_ref::{FileRef32, FileRef64};
use rcuref::rcu::{ContextReader, Rcu, Waiting};
use rcuref::Error;

#[macro_use]
mod config {
    include!(concat!(env!("OUT_DIR"), "/config.rs"));
}
mod call_rcu;
mod down_read;
mod fence;
#[cfg(rcuref_mutants)]
mod mutants;
#[cfg(all(feature = "panic-handler", not(test)))]
mod panic;
mod pool;
mod sleep;

pub(crate) use config::SLOTS;
use config::TOKENS;

/// A domain's slots: `SLOTS` dedicated to contexts (`rcuref_ctx_open`), then `TOKENS`
/// that `rcuref_down_read` claims (the library's `Rcu::down_read` takes a free slot,
/// and a dedicated slot is never free).
pub(crate) const DOMAIN_SLOTS: usize = SLOTS + TOKENS;

/// One of the library's domains.
pub(crate) type Domain = Rcu<DOMAIN_SLOTS>;

// ---- return codes ----------------------------------------------------------------

/// Success.
pub const RCUREF_OK: i32 = 0;
/// A bad argument: a null or misaligned pointer where an object was needed, owner 0, a
/// cookie without the cookie tag, an uninitialised pool, a bad pool layout, an object
/// in the wrong state for the call.
pub const RCUREF_EINVAL: i32 = -1;
/// The domain is not one of this library's (`rcuref_rcu_domain`).
pub const RCUREF_EDOMAIN: i32 = -2;
/// The reader slot is out of range (`rcuref_rcu_slots`).
pub const RCUREF_ERANGE: i32 = -3;
/// An unlock without a lock: the slot is in no read section. Nothing changed.
pub const RCUREF_ENOTLOCKED: i32 = -4;
/// A wait for a grace period while the waiting context's owner is inside a read section
/// of the domain (on this slot or another): it would wait for itself. Nothing waited.
/// Also a close of a context inside a section or running callbacks (nothing closed).
pub const RCUREF_EINSECTION: i32 = -5;
/// No room: every place of the `call_rcu` queue holds a callback (nothing queued), or
/// every token slot of the domain holds a section (`rcuref_down_read`: nothing begun).
pub const RCUREF_EFULL: i32 = -6;
/// The wait hook gave up before the grace period ended.
pub const RCUREF_EGAVEUP: i32 = -7;
/// A read section nested as deep as its slot can count (about 2^30 levels): nothing
/// entered, so balanced unlocks still end the section.
pub const RCUREF_ETOODEEP: i32 = -8;
/// In use: the pool, or an object of the array (initialising it would free an object
/// someone still holds), or a slot another owner has opened; or a heavy fence already
/// installed (`rcuref_heavy_install`). Nothing changed.
pub const RCUREF_EBUSY: i32 = -9;
/// The context's owner is not the slot's: a context that its slot's owner did not open
/// (or closed since). Nothing changed.
pub const RCUREF_ENOTOWNER: i32 = -10;
/// A barrier from inside a callback its owner is running: it would wait for itself.
/// Nothing waited.
pub const RCUREF_EINCALLBACK: i32 = -11;
/// Only with the feature `debug-objects` (Linux's `DEBUG_OBJECTS_RCU_HEAD`): a
/// `rcuref_call_rcu` whose `arg` a queued callback of the domain already has. Nothing
/// queued (queueing it twice would free it twice).
pub const RCUREF_EQUEUED: i32 = -12;

/// Writes a yes/no answer to `*out` and returns `RCUREF_OK`; for an error, writes
/// false (where `out` is not null) and returns the error. So a caller that forgets the
/// return code reads "no", the answer that makes it do nothing.
///
/// # Safety
/// `out` is null or writable.
unsafe fn answer(out: *mut bool, r: Result<bool, i32>) -> i32 {
    if out.is_null() {
        return r.err().unwrap_or(RCUREF_EINVAL);
    }
    // SAFETY: `out` is writable (the caller's promise).
    unsafe { out.write(r.unwrap_or(false)) };
    r.err().unwrap_or(RCUREF_OK)
}

fn code(e: Error) -> i32 {
    match e {
        Error::InReadSection => RCUREF_EINSECTION,
        Error::OtherDomain => RCUREF_EDOMAIN,
        Error::Full => RCUREF_EFULL,
        Error::GaveUp => RCUREF_EGAVEUP,
        Error::NotInSection => RCUREF_ENOTLOCKED,
        Error::TooDeep => RCUREF_ETOODEEP,
        Error::NoFreeSlot => RCUREF_EFULL,
        Error::Busy => RCUREF_EQUEUED,
        _ => RCUREF_EINVAL,
    }
}

/// The value of `$r`, a `Result<_, i32>`, or a return of its code from the calling
/// function: the prologue of every function that looks up its context, domain or pool
/// (and checks its pointers, [`valid`]) before it acts, so that an error changes nothing.
macro_rules! or_return {
    ($r:expr) => {
        match $r {
            Ok(v) => v,
            Err(code) => return code,
        }
    };
}
pub(crate) use or_return;

/// `RCUREF_EINVAL` for a pointer that cannot point to a `T`: null or misaligned (every
/// pointer argument is checked so before anything is done).
pub(crate) fn valid<T>(p: *const T) -> Result<(), i32> {
    if p.is_null() || !p.is_aligned() {
        Err(RCUREF_EINVAL)
    } else {
        Ok(())
    }
}

// ---- file references -------------------------------------------------------------

/// A 32-bit zoned reference count (Linux's `file_ref_t`). Storage only: initialise it
/// with `rcuref_fileref32_init` (a zeroed one holds **one** reference, not none) and use
/// it only through these functions.
#[repr(C)]
pub struct rcuref_fileref32 {
    raw: u32,
}

/// A 64-bit zoned reference count. On targets without 64-bit atomics (Cortex-M,
/// RV32) each operation runs in a critical section that the binary provides
/// (docs/c-api.md).
#[repr(C)]
pub struct rcuref_fileref64 {
    raw: u64,
}

// The C types are the Rust counts' storage: same size and alignment (both counts are
// `repr(transparent)` over their atomic; `uint64_t` is 8-aligned on every target of
// the matrix, as the 64-bit atomic is; a target where it is not fails to build here).
const _: () = {
    assert!(size_of::<rcuref_fileref32>() == size_of::<FileRef32>());
    assert!(align_of::<rcuref_fileref32>() == align_of::<FileRef32>());
    assert!(size_of::<rcuref_fileref64>() == size_of::<FileRef64>());
    assert!(align_of::<rcuref_fileref64>() == align_of::<FileRef64>());
    assert!(align_of::<rcuref_fileref64>() == 8);
};

/// The count behind `r`, or `None` for null.
///
/// # Safety
/// `r` is null or points to a live count used only through this API.
unsafe fn fr32<'a>(r: *const rcuref_fileref32) -> Option<&'a FileRef32> {
    if !r.is_aligned() {
        return None; // reported as RCUREF_EINVAL, like null
    }
    // SAFETY: aligned (checked), same size and alignment as the count (asserted
    // above), `FileRef32` is `repr(transparent)` over an `AtomicU32`, and the caller
    // promised a live count accessed only atomically (through this API).
    unsafe { r.cast::<FileRef32>().as_ref() }
}

/// As [`fr32`], 64-bit.
///
/// # Safety
/// As [`fr32`].
unsafe fn fr64<'a>(r: *const rcuref_fileref64) -> Option<&'a FileRef64> {
    if !r.is_aligned() {
        return None;
    }
    // SAFETY: as in `fr32` (aligned, same size and alignment, asserted above).
    unsafe { r.cast::<FileRef64>().as_ref() }
}

/// Sets the count to `refs` references (0: dead, every get fails; more than the maximum:
/// saturated, never freed) with a release store. Call it last when (re)using an object,
/// after every other field is written. Returns `RCUREF_OK` or `RCUREF_EINVAL` (null, or
/// a pointer not aligned for a count: every count function checks both; those that
/// answer yes or no answer no for them).
///
/// # Safety
/// `r` is null or points to a count that only this API touches.
#[no_mangle]
pub unsafe extern "C" fn rcuref_fileref32_init(r: *mut rcuref_fileref32, refs: u32) -> i32 {
    // SAFETY: the caller's promise (`fr32`).
    match unsafe { fr32(r) } {
        Some(c) => {
            c.init(refs);
            RCUREF_OK
        }
        None => RCUREF_EINVAL,
    }
}

/// Tries to take a reference (one fully ordered add, no loop). Returns true if the
/// caller now holds one (the count was live or saturated), false if the count is dead
/// (the object must not be used) and for a null or misaligned pointer (nothing taken).
///
/// # Safety
/// As for `rcuref_fileref32_init`.
#[no_mangle]
pub unsafe extern "C" fn rcuref_fileref32_get(r: *const rcuref_fileref32) -> bool {
    // SAFETY: the caller's promise (`fr32`).
    unsafe { fr32(r) }.is_some_and(|c| c.get())
}

/// Takes another reference when the caller already holds one (a relaxed add). Returns
/// `RCUREF_OK` or `RCUREF_EINVAL`.
///
/// # Safety
/// As for `rcuref_fileref32_init`, and the caller holds a reference.
#[no_mangle]
pub unsafe extern "C" fn rcuref_fileref32_inc(r: *const rcuref_fileref32) -> i32 {
    // SAFETY: the caller's promise (`fr32`).
    match unsafe { fr32(r) } {
        Some(c) => {
            c.inc();
            RCUREF_OK
        }
        None => RCUREF_EINVAL,
    }
}

/// Drops a reference. Returns true if it was the last one (the caller now destroys the
/// object; every later get fails), false if not and for a null or misaligned pointer
/// (nothing dropped). A put on a dead count is ignored (and reported as a warning where
/// the library logs).
///
/// # Safety
/// As for `rcuref_fileref32_init`, and the caller holds the reference it drops.
#[no_mangle]
pub unsafe extern "C" fn rcuref_fileref32_put(r: *const rcuref_fileref32) -> bool {
    // SAFETY: the caller's promise (`fr32`).
    unsafe { fr32(r) }.is_some_and(|c| c.put())
}

/// Drops a reference that is the last one in the common case (closing a file): one
/// compare-exchange to dead, else a plain put. Returns as `rcuref_fileref32_put`.
///
/// # Safety
/// As for `rcuref_fileref32_put`.
#[no_mangle]
pub unsafe extern "C" fn rcuref_fileref32_put_close(r: *const rcuref_fileref32) -> bool {
    // SAFETY: the caller's promise (`fr32`).
    unsafe { fr32(r) }.is_some_and(|c| c.put_close())
}

/// The number of references held (a relaxed load, stale as soon as it is read: for
/// diagnostics). 0 for a dead count or null.
///
/// # Safety
/// As for `rcuref_fileref32_init`.
#[no_mangle]
pub unsafe extern "C" fn rcuref_fileref32_read(r: *const rcuref_fileref32) -> u32 {
    // SAFETY: the caller's promise (`fr32`).
    match unsafe { fr32(r) } {
        Some(c) => c.count(),
        None => 0,
    }
}

/// As `rcuref_fileref32_init`, for a 64-bit count.
///
/// # Safety
/// As for `rcuref_fileref32_init`.
#[no_mangle]
pub unsafe extern "C" fn rcuref_fileref64_init(r: *mut rcuref_fileref64, refs: u64) -> i32 {
    // SAFETY: the caller's promise (`fr64`).
    match unsafe { fr64(r) } {
        Some(c) => {
            c.init(refs);
            RCUREF_OK
        }
        None => RCUREF_EINVAL,
    }
}

/// As `rcuref_fileref32_get`, for a 64-bit count.
///
/// # Safety
/// As for `rcuref_fileref32_get`.
#[no_mangle]
pub unsafe extern "C" fn rcuref_fileref64_get(r: *const rcuref_fileref64) -> bool {
    // SAFETY: the caller's promise (`fr64`).
    unsafe { fr64(r) }.is_some_and(|c| c.get())
}

/// As `rcuref_fileref32_inc`, for a 64-bit count.
///
/// # Safety
/// As for `rcuref_fileref32_inc`.
#[no_mangle]
pub unsafe extern "C" fn rcuref_fileref64_inc(r: *const rcuref_fileref64) -> i32 {
    // SAFETY: the caller's promise (`fr64`).
    match unsafe { fr64(r) } {
        Some(c) => {
            c.inc();
            RCUREF_OK
        }
        None => RCUREF_EINVAL,
    }
}

/// As `rcuref_fileref32_put`, for a 64-bit count.
///
/// # Safety
/// As for `rcuref_fileref32_put`.
#[no_mangle]
pub unsafe extern "C" fn rcuref_fileref64_put(r: *const rcuref_fileref64) -> bool {
    // SAFETY: the caller's promise (`fr64`).
    unsafe { fr64(r) }.is_some_and(|c| c.put())
}

/// As `rcuref_fileref32_put_close`, for a 64-bit count.
///
/// # Safety
/// As for `rcuref_fileref32_put_close`.
#[no_mangle]
pub unsafe extern "C" fn rcuref_fileref64_put_close(r: *const rcuref_fileref64) -> bool {
    // SAFETY: the caller's promise (`fr64`).
    unsafe { fr64(r) }.is_some_and(|c| c.put_close())
}

/// As `rcuref_fileref32_read`, for a 64-bit count.
///
/// # Safety
/// As for `rcuref_fileref32_read`.
#[no_mangle]
pub unsafe extern "C" fn rcuref_fileref64_read(r: *const rcuref_fileref64) -> u64 {
    // SAFETY: the caller's promise (`fr64`).
    match unsafe { fr64(r) } {
        Some(c) => c.count(),
        None => 0,
    }
}

// ---- RCU -------------------------------------------------------------------------

/// An RCU domain (opaque): one of the library's, from `rcuref_rcu_domain`.
pub struct rcuref_rcu {
    _opaque: [u8; 0],
}

/// The domains: the first `SLOTS` slots dedicated, so each is a context's (CPU, thread,
/// interrupt level) and C code names it by number; the `TOKENS` after them free, for
/// `rcuref_down_read`.
pub(crate) static RCU: [Domain; config::DOMAINS] =
    [const { Rcu::with_dedicated(SLOTS) }; config::DOMAINS];

/// `d` as one of `RCU`, with its index.
fn domain(d: *const rcuref_rcu) -> Result<(usize, &'static Domain), i32> {
    if d.is_null() {
        return Err(RCUREF_EINVAL);
    }
    RCU.iter()
        .enumerate()
        .find(|(_, r)| core::ptr::eq(*r as *const Domain, d.cast()))
        .ok_or(RCUREF_EDOMAIN)
}

/// Domain `index`'s row of a per-domain table. `RCUREF_EDOMAIN` for an index that is
/// not a domain's, which `domain` never returns (every table has a row per domain): the
/// lookup cannot panic, whatever `RCUREF_FFI_DOMAINS` lets the compiler prove.
pub(crate) fn row<T>(
    table: &'static [T; config::DOMAINS],
    index: usize,
) -> Result<&'static T, i32> {
    table.get(index).ok_or(RCUREF_EDOMAIN)
}

/// A reader context: a slot of a domain, opened by one owner (`rcuref_ctx_open`). Every
/// read-side and waiting call takes one, and refuses one whose owner is not the slot's
/// (`RCUREF_ENOTOWNER`), so code cannot end another context's section by naming its
/// slot. Its fields are private: copy it whole.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rcuref_ctx {
    domain: *const rcuref_rcu,
    slot: u32,
    owner: usize,
}

/// The owner word of a slot being closed (`rcuref_ctx_close`): no context's owner, so
/// every call through the slot is refused until the close has decided.
const CLOSING: usize = usize::MAX;

/// Each slot's owner (0: none; `CLOSING` while a close decides), by domain.
static OWNERS: [[AtomicUsize; SLOTS]; config::DOMAINS] =
    [const { [const { AtomicUsize::new(0) }; SLOTS] }; config::DOMAINS];

/// How many `rcuref_call_rcu_run` calls through each slot are running callbacks now.
static RUNNING_CALLBACKS: [[AtomicU32; SLOTS]; config::DOMAINS] =
    [const { [const { AtomicU32::new(0) }; SLOTS] }; config::DOMAINS];

/// Domain `i`'s slots' readers.
const fn readers_of(i: usize) -> [ContextReader<'static, DOMAIN_SLOTS>; SLOTS] {
    // SAFETY: the `SLOTS` slots are dedicated (`RCU`; more would fail the build here),
    // and the C caller promised (the module docs) that a slot is used only by its
    // owner's context and the interrupt handlers that preempt it: `context_readers`'
    // contract. The owner check (`context`) refuses a context its slot's owner did not
    // open; the one use of another slot's reader is `in_read_section`
    // (`Ctx::owner_in_section`), a relaxed load of its word, which enters or leaves
    // nothing.
    unsafe { RCU[i].context_readers::<SLOTS>() }
}

/// Each slot's reader, by domain (made when the library is built, so no call checks a
/// slot number again).
static READERS: [[ContextReader<'static, DOMAIN_SLOTS>; SLOTS]; config::DOMAINS] =
    per_domain!(readers_of);

/// A domain's context slots (its first `SLOTS`): its rows of `OWNERS`,
/// `RUNNING_CALLBACKS` and `READERS`.
#[derive(Clone, Copy)]
struct Slots {
    owners: &'static [AtomicUsize; SLOTS],
    running: &'static [AtomicU32; SLOTS],
    readers: &'static [ContextReader<'static, DOMAIN_SLOTS>; SLOTS],
}

/// One context slot of a domain: its entries in [`Slots`].
#[derive(Clone, Copy)]
pub(crate) struct Slot {
    owner: &'static AtomicUsize,
    pub(crate) running: &'static AtomicU32,
    reader: ContextReader<'static, DOMAIN_SLOTS>,
}

impl Slots {
    /// Domain `index`'s slots (as [`row`]).
    fn of(index: usize) -> Result<Slots, i32> {
        Ok(Slots {
            owners: row(&OWNERS, index)?,
            running: row(&RUNNING_CALLBACKS, index)?,
            readers: row(&READERS, index)?,
        })
    }

    /// Slot `i`, if it is one (`RCUREF_ERANGE` otherwise).
    fn slot(self, i: usize) -> Result<Slot, i32> {
        match (self.owners.get(i), self.running.get(i), self.readers.get(i)) {
            (Some(owner), Some(running), Some(&reader)) => Ok(Slot {
                owner,
                running,
                reader,
            }),
            _ => Err(RCUREF_ERANGE),
        }
    }

    /// Every slot, in order.
    fn iter(self) -> impl Iterator<Item = Slot> {
        let entries = self.owners.iter().zip(self.running).zip(self.readers);
        entries.map(|((owner, running), &reader)| Slot {
            owner,
            running,
            reader,
        })
    }
}

/// A checked context: its domain (and the domain's index), its slot, its owner.
#[derive(Clone, Copy)]
pub(crate) struct Ctx {
    pub(crate) index: usize,
    pub(crate) rcu: &'static Domain,
    slots: Slots,
    pub(crate) slot: Slot,
    pub(crate) owner: usize,
}

impl Ctx {
    /// Slot `slot` of `d`, for `owner` (not checked): `RCUREF_EINVAL` (a null domain),
    /// `RCUREF_EDOMAIN` or `RCUREF_ERANGE`.
    fn at(d: *const rcuref_rcu, slot: u32, owner: usize) -> Result<Ctx, i32> {
        let (index, rcu) = domain(d)?;
        let slots = Slots::of(index)?;
        Ok(Ctx {
            index,
            rcu,
            slots,
            slot: slots.slot(slot as usize)?,
            owner,
        })
    }

    /// The slot's reader.
    pub(crate) fn reader(&self) -> ContextReader<'static, DOMAIN_SLOTS> {
        self.slot.reader
    }

    /// The slots of this domain that this context's owner has open.
    fn owners_slots(&self) -> impl Iterator<Item = Slot> + '_ {
        self.slots
            .iter()
            .filter(|s| s.owner.load(Relaxed) == self.owner)
    }

    /// Whether any slot of this domain that the owner has open is inside a section.
    pub(crate) fn owner_in_section(&self) -> bool {
        // Only each slot's word is read (`in_read_section`, a relaxed load): nothing
        // enters or leaves a section through these readers.
        self.owners_slots().any(|s| s.reader.in_read_section())
    }

    /// Whether a slot of this domain that the owner has open is running callbacks.
    pub(crate) fn owner_in_callbacks(&self) -> bool {
        self.owners_slots().any(|s| s.running.load(Relaxed) > 0)
    }
}

/// The context behind `c`: `RCUREF_EINVAL` (null, misaligned, or no owner),
/// `RCUREF_EDOMAIN`, `RCUREF_ERANGE`, or `RCUREF_ENOTOWNER`.
///
/// # Safety
/// `c` is null or points to a readable `rcuref_ctx`.
pub(crate) unsafe fn context(c: *const rcuref_ctx) -> Result<Ctx, i32> {
    valid(c)?;
    // SAFETY: the caller's promise: a readable context (aligned: checked).
    let c = unsafe { c.read() };
    let ctx = Ctx::at(c.domain, c.slot, c.owner)?;
    if c.owner == 0 || c.owner == CLOSING {
        return Err(RCUREF_EINVAL);
    }
    if ctx.slot.owner.load(Relaxed) != c.owner {
        return Err(RCUREF_ENOTOWNER);
    }
    Ok(ctx)
}

/// Opens slot `slot` of `d` for `owner` (any non-zero number that names the context: a
/// task handle, a CPU number plus one, an interrupt level plus one) and writes its
/// context to `*out`. Returns `RCUREF_OK` (also when `owner` already has it open),
/// `RCUREF_EBUSY` (another owner has it open), `RCUREF_EINVAL` (a null `out`, owner
/// 0), `RCUREF_EDOMAIN` or `RCUREF_ERANGE`. Never blocks.
///
/// # Safety
/// `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rcuref_ctx_open(
    d: *const rcuref_rcu,
    slot: u32,
    owner: usize,
    out: *mut rcuref_ctx,
) -> i32 {
    let c = or_return!(Ctx::at(d, slot, owner));
    if owner == 0 || owner == CLOSING || valid(out).is_err() {
        return RCUREF_EINVAL;
    }
    match c.slot.owner.compare_exchange(0, owner, Relaxed, Relaxed) {
        Ok(_) => {}
        Err(now) if now == owner => {}
        Err(_) => return RCUREF_EBUSY,
    }
    // SAFETY: `out` is writable (the caller's promise) and aligned (checked).
    unsafe {
        out.write(rcuref_ctx {
            domain: d,
            slot,
            owner,
        })
    };
    RCUREF_OK
}

/// Closes a context: its slot has no owner again (another may open it). Returns
/// `RCUREF_OK`, `RCUREF_EINSECTION` (the slot is inside a section, or running
/// callbacks: nothing changed), or an error of `context` (`RCUREF_ENOTOWNER` for one
/// already closed).
///
/// # Safety
/// `ctx` is null or readable.
#[no_mangle]
pub unsafe extern "C" fn rcuref_ctx_close(ctx: *const rcuref_ctx) -> i32 {
    // SAFETY: the caller's promise.
    let c = or_return!(unsafe { context(ctx) });
    // First take the slot from its owner, so that a lock that an interrupt handler
    // running this close interrupted (between its owner check and its enter) finds the
    // owner gone when it looks again after entering, and backs out; then decide.
    let word = c.slot.owner;
    if word
        .compare_exchange(c.owner, CLOSING, Relaxed, Relaxed)
        .is_err()
    {
        return RCUREF_ENOTOWNER;
    }
    if c.reader().in_read_section() || c.slot.running.load(Relaxed) > 0 {
        word.store(c.owner, Relaxed);
        return RCUREF_EINSECTION;
    }
    word.store(0, Relaxed);
    RCUREF_OK
}

/// The context the current-context function names (`rcuref_set_current_context`).
static CURRENT: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

/// A function that returns the calling context's context (a kernel's current CPU or
/// task), for `rcuref_rcu_read_lock` and friends; null where it has none.
pub type rcuref_current_context = Option<unsafe extern "C" fn() -> *const rcuref_ctx>;

/// Registers the function that names the calling context's context (null: none), so
/// that code can call `rcuref_rcu_read_lock()` and `rcuref_rcu_read_unlock()` without
/// naming one, as Linux's `rcu_read_lock()`. The function must be callable from every
/// context that calls those, interrupt handlers included (a per-CPU or per-task
/// pointer), and return a context only that context uses.
#[no_mangle]
pub extern "C" fn rcuref_set_current_context(f: rcuref_current_context) {
    CURRENT.store(
        f.map_or(core::ptr::null_mut(), |f| f as *mut c_void),
        Ordering::Release,
    );
}

/// The current context, through the registered function.
fn current() -> *const rcuref_ctx {
    let f = CURRENT.load(Ordering::Acquire);
    if f.is_null() {
        return core::ptr::null();
    }
    // SAFETY: `f` was stored from a `rcuref_current_context` function (never null
    // here), which takes nothing and returns a context pointer.
    unsafe {
        let f: unsafe extern "C" fn() -> *const rcuref_ctx = core::mem::transmute(f);
        f()
    }
}

/// `rcuref_read_lock` of the current context (`rcuref_set_current_context`):
/// `RCUREF_EINVAL` when no function is registered or it names none.
#[no_mangle]
pub extern "C" fn rcuref_rcu_read_lock() -> i32 {
    // SAFETY: the registered function returns null or a context (its contract).
    unsafe { rcuref_read_lock(current()) }
}

/// `rcuref_read_unlock` of the current context.
///
/// # Safety
/// As `rcuref_read_unlock`'s.
#[no_mangle]
pub unsafe extern "C" fn rcuref_rcu_read_unlock() -> i32 {
    // SAFETY: the caller's promise, and the registered function's contract.
    unsafe { rcuref_read_unlock(current()) }
}

/// Domain `index` (below `RCUREF_FFI_DOMAINS`, 2 by default), or null.
#[no_mangle]
pub extern "C" fn rcuref_rcu_domain(index: u32) -> *const rcuref_rcu {
    RCU.get(index as usize)
        .map_or(core::ptr::null(), |r| (r as *const Domain).cast())
}

/// How many reader slots each domain has (`RCUREF_FFI_SLOTS`), 0 for a null or
/// foreign domain.
#[no_mangle]
pub extern "C" fn rcuref_rcu_slots(d: *const rcuref_rcu) -> u32 {
    domain(d).map_or(0, |_| SLOTS as u32)
}

/// Enters a read section on the context's slot (or nests one level deeper; interrupt
/// handlers of the slot's context may nest on it at any point). Returns `RCUREF_OK`,
/// an error of the context (`RCUREF_EINVAL`, `RCUREF_EDOMAIN`, `RCUREF_ERANGE`,
/// `RCUREF_ENOTOWNER`) or `RCUREF_ETOODEEP` (nested about 2^30 levels deep already);
/// nothing is entered on an error.
///
/// # Safety
/// `ctx` is null or readable.
#[no_mangle]
pub unsafe extern "C" fn rcuref_read_lock(ctx: *const rcuref_ctx) -> i32 {
    // SAFETY: the caller's promise.
    let c = or_return!(unsafe { context(ctx) });
    let r = c.reader();
    if let Err(e) = r.raw_lock() {
        return code(e);
    }
    // An interrupt handler may have closed the context between the owner check and
    // the `raw_lock` (`rcuref_ctx_close`, which takes the owner away first): then leave
    // the level just entered, which nothing has read under. The `raw_lock`'s fence
    // keeps this load after it.
    #[cfg(rcuref_mutants)]
    if mutants::SKIP_OWNER_RECHECK.load(Relaxed) {
        return RCUREF_OK;
    }
    if c.slot.owner.load(Relaxed) != c.owner {
        // SAFETY: the level left is the one entered just above, nothing read in it.
        let _ = unsafe { r.raw_unlock() };
        return RCUREF_ENOTOWNER;
    }
    RCUREF_OK
}

/// Leaves one level of the read section on the context's slot. Returns `RCUREF_OK`,
/// `RCUREF_ENOTLOCKED` (no section: nothing changed) or an error of the context.
///
/// # Safety
/// `ctx` is null or readable; nothing read inside the level being left is used after
/// this call, and the level is one this code (not the code an interrupt handler
/// interrupted) entered.
#[no_mangle]
pub unsafe extern "C" fn rcuref_read_unlock(ctx: *const rcuref_ctx) -> i32 {
    // SAFETY: the caller's promise.
    let c = or_return!(unsafe { context(ctx) });
    // SAFETY: the caller's promise is `ContextReader::raw_unlock`'s.
    match unsafe { c.reader().raw_unlock() } {
        Ok(()) => RCUREF_OK,
        Err(e) => code(e),
    }
}

/// Writes to `*inside` whether the context's slot is inside a read section. Returns
/// `RCUREF_OK`, `RCUREF_EINVAL` (also for a null `inside`) or an error of the context
/// (`*inside`, if not null, false).
///
/// # Safety
/// `ctx` is null or readable; `inside` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rcuref_in_read_section(ctx: *const rcuref_ctx, inside: *mut bool) -> i32 {
    // SAFETY: the caller's promise.
    let r = unsafe { context(ctx) }.map(|c| c.reader().in_read_section());
    // SAFETY: the caller's promise.
    unsafe { answer(inside, r) }
}

/// Reads a published pointer inside a read section (`rcu_dereference`): an acquire
/// load, so what the publisher wrote before publishing is visible. Null for a null or
/// misaligned location.
///
/// # Safety
/// `p` is null or points to a pointer-sized, pointer-aligned location that is written
/// only with `rcuref_assign_pointer`/`rcuref_exchange_pointer` while readers may read it.
#[no_mangle]
pub unsafe extern "C" fn rcuref_dereference(p: *const *mut c_void) -> *mut c_void {
    if valid(p).is_err() {
        return core::ptr::null_mut();
    }
    // SAFETY: the caller's promise: a live, aligned location accessed atomically.
    unsafe { AtomicPtr::from_ptr(p.cast_mut()) }.load(Ordering::Acquire)
}

/// Publishes `v` at `p` (`rcu_assign_pointer`): a release store, so readers that see
/// `v` see what was written before. Returns `RCUREF_OK` or `RCUREF_EINVAL` (a null or
/// misaligned location).
///
/// # Safety
/// As for dereference.
#[no_mangle]
pub unsafe extern "C" fn rcuref_assign_pointer(p: *mut *mut c_void, v: *mut c_void) -> i32 {
    or_return!(valid(p));
    // SAFETY: the caller's promise.
    unsafe { AtomicPtr::from_ptr(p) }.store(v, Ordering::Release);
    RCUREF_OK
}

/// Publishes `v` at `p` and returns what was there (`rcu_replace_pointer`), with
/// acquire and release ordering: the old object, now unpublished, to be freed after a
/// grace period. Null (and nothing stored) for a null or misaligned location.
///
/// # Safety
/// As for dereference.
#[no_mangle]
pub unsafe extern "C" fn rcuref_exchange_pointer(
    p: *mut *mut c_void,
    v: *mut c_void,
) -> *mut c_void {
    if valid(p).is_err() {
        return core::ptr::null_mut();
    }
    // SAFETY: the caller's promise.
    unsafe { AtomicPtr::from_ptr(p) }.swap(v, Ordering::AcqRel)
}

/// A wait hook, called between attempts of a wait for a grace period with the caller's
/// `ctx` and the attempts so far: return 0 to go on waiting (after yielding, sleeping,
/// checking a deadline...), anything else to give up (`RCUREF_EGAVEUP`). A null hook
/// spins until the grace period ends.
pub type rcuref_wait_hook =
    Option<unsafe extern "C" fn(ctx: *mut c_void, attempts: u32) -> core::ffi::c_int>;

/// The hook as the Rust wait loop wants it.
///
/// # Safety
/// `hook` is null or a function that may be called with `ctx` from the waiting context
/// (the promise of every waiting function's caller).
unsafe fn hook_fn<const N: usize>(
    hook: rcuref_wait_hook,
    ctx: *mut c_void,
) -> impl FnMut(&Waiting<'_, '_, N>) -> ControlFlow<()> {
    move |w| match hook {
        // SAFETY: the promise of `hook_fn`'s caller.
        Some(h) if unsafe { h(ctx, w.attempts()) } != 0 => ControlFlow::Break(()),
        _ => {
            sleep::between_attempts(w);
            ControlFlow::Continue(())
        }
    }
}

/// Waits until every read section of the context's domain that was running when it
/// was called has ended (`synchronize_rcu`), from that context, calling `hook` with
/// `hook_ctx` between attempts. Never from an interrupt handler. Returns `RCUREF_OK`,
/// `RCUREF_EINSECTION` (a slot of the domain that the context's owner has open is
/// inside a section: it would wait for itself), `RCUREF_EGAVEUP`, or an error of the
/// context.
///
/// # Safety
/// `ctx` is null or readable; `hook` is null or a function that may be called with
/// `hook_ctx` from this context.
#[no_mangle]
pub unsafe extern "C" fn rcuref_synchronize(
    ctx: *const rcuref_ctx,
    hook: rcuref_wait_hook,
    hook_ctx: *mut c_void,
) -> i32 {
    // SAFETY: the caller's promise.
    let c = or_return!(unsafe { context(ctx) });
    if c.owner_in_section() {
        return RCUREF_EINSECTION;
    }
    // SAFETY: this function's caller promised `hook_fn`'s condition.
    match c.reader().synchronize(unsafe { hook_fn(hook, hook_ctx) }) {
        Ok(()) => RCUREF_OK,
        Err(e) => code(e),
    }
}

/// A point in one domain's grace-period sequence (`rcuref_start_poll`,
/// `rcuref_get_state`, `rcuref_get_completed`), which only that domain answers: another
/// domain refuses it with `RCUREF_EDOMAIN`, and a value without the cookie tag (a
/// zeroed one, say) with `RCUREF_EINVAL`; a forged state cannot be told from an old
/// one. Copy it as a whole; its fields are private.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rcuref_cookie {
    state: u32,
    domain: u32,
}

/// A cookie's `domain` word: `COOKIE_TAG` in the high half, the domain's index in the
/// low half.
const COOKIE_TAG: u32 = 0x7263_0000;

/// The cookie's grace-period state, if it is one of domain `index`'s.
fn cookie_of(c: rcuref_cookie, index: usize) -> Result<u32, i32> {
    if c.domain & 0xFFFF_0000 != COOKIE_TAG {
        Err(RCUREF_EINVAL)
    } else if (c.domain & 0xFFFF) as usize != index {
        Err(RCUREF_EDOMAIN)
    } else {
        Ok(c.state)
    }
}

const _: () = assert!(
    config::DOMAINS <= 0xFFFF,
    "a cookie names its domain in 16 bits"
);

/// How many cookies with distinct grace periods that are not done yet one domain can
/// have at once (Linux's `NUM_ACTIVE_RCU_POLL_OLDSTATE`, which is 2 there): a table of
/// this many cookies, keeping the newest of each state (`rcuref_same_state`) and
/// `rcuref_get_completed` in its unused entries, covers every grace period in flight.
/// The library's `Rcu::ACTIVE_COOKIES` (checked when the library is built). A property
/// of the algorithm, not of the build's configuration, so it is here rather than in
/// `rcuref_config.h`: C code that sizes a table with it needs no generated header.
pub const RCUREF_ACTIVE_COOKIES: u32 = 3;

const _: () = assert!(RCUREF_ACTIVE_COOKIES as usize == Domain::ACTIVE_COOKIES);

/// Writes to `*out` the cookie of `d` that `f` takes.
///
/// # Safety
/// `out` is null or points to a writable `rcuref_cookie`.
unsafe fn write_cookie(
    d: *const rcuref_rcu,
    out: *mut rcuref_cookie,
    f: impl FnOnce(&'static Domain) -> u32,
) -> i32 {
    let (index, rcu) = or_return!(domain(d));
    or_return!(valid(out));
    let c = rcuref_cookie {
        state: f(rcu),
        domain: COOKIE_TAG | index as u32,
    };
    // SAFETY: the caller's promise: a writable cookie (aligned: checked).
    unsafe { out.write(c) };
    RCUREF_OK
}

/// Starts a grace period without waiting (`start_poll_synchronize_rcu`): writes a
/// cookie to `*cookie` that `rcuref_poll` of the same domain answers done once every
/// section running now has ended. Call it after unpublishing. Never blocks; safe in
/// interrupt handlers. Returns `RCUREF_OK`, `RCUREF_EINVAL` or `RCUREF_EDOMAIN`.
///
/// It starts nothing, unlike Linux's: grace periods are driven by whoever polls or
/// waits, so this is `rcuref_get_state` under the name Linux callers look for.
///
/// A cookie moved to another core must travel with release/acquire ordering (a lock,
/// an atomic with those orderings), or it may be answered done too early.
///
/// # Safety
/// `cookie` is null or points to a writable `rcuref_cookie`.
#[no_mangle]
pub unsafe extern "C" fn rcuref_start_poll(
    d: *const rcuref_rcu,
    cookie: *mut rcuref_cookie,
) -> i32 {
    // SAFETY: the caller's promise.
    unsafe { write_cookie(d, cookie, |rcu| rcu.start_poll().into_raw()) }
}

/// Writes to `*out` a cookie for the grace period that covers every section running
/// now, without starting one (Linux's `get_state_synchronize_rcu`): the same cookie as
/// `rcuref_start_poll`, which starts nothing either. Never blocks; safe in interrupt
/// handlers. Returns as `rcuref_start_poll`.
///
/// # Safety
/// `out` is null or points to a writable `rcuref_cookie`.
#[no_mangle]
pub unsafe extern "C" fn rcuref_get_state(d: *const rcuref_rcu, out: *mut rcuref_cookie) -> i32 {
    // SAFETY: the caller's promise.
    unsafe { write_cookie(d, out, |rcu| rcu.get_state().into_raw()) }
}

/// Writes to `*out` a cookie of `d` that is always done (Linux's
/// `get_completed_synchronize_rcu`), for the "nothing to wait for" entries of a table
/// of cookies: `rcuref_poll` answers it done at once, however far the grace periods
/// go, and `rcuref_cond_synchronize` returns at once. It is still `d`'s: another domain
/// refuses it (`RCUREF_EDOMAIN`), as any cookie. Never blocks; safe in interrupt
/// handlers. Returns as `rcuref_start_poll`.
///
/// # Safety
/// `out` is null or points to a writable `rcuref_cookie`.
#[no_mangle]
pub unsafe extern "C" fn rcuref_get_completed(
    d: *const rcuref_rcu,
    out: *mut rcuref_cookie,
) -> i32 {
    // SAFETY: the caller's promise.
    unsafe { write_cookie(d, out, |rcu| rcu.completed().into_raw()) }
}

/// Whether two cookies name the same grace period of the same domain (Linux's
/// `same_state_synchronize_rcu`, which has no domain to compare): two cookies taken
/// with no step of the grace period between them (in an archive where heavy fences may
/// run, also two taken a few steps apart that wait for the same grace period), or two
/// completed cookies
/// (`rcuref_get_completed`) of one domain. False when either is not a cookie (no
/// cookie tag: a zeroed one, say). Never blocks; safe in interrupt handlers.
#[no_mangle]
pub extern "C" fn rcuref_same_state(a: rcuref_cookie, b: rcuref_cookie) -> bool {
    let real = a.domain & 0xFFFF_0000 == COOKIE_TAG && (a.domain & 0xFFFF) < config::DOMAINS as u32;
    real && a.domain == b.domain && a.state == b.state
}

/// Whether the cookie's grace period has ended (`poll_state_synchronize_rcu`, and it
/// advances the grace period as far as readers allow): writes the answer to `*done`.
/// Returns `RCUREF_OK`, `RCUREF_EINVAL` (a null domain or `done`, or not a cookie) or
/// `RCUREF_EDOMAIN` (another domain's, or a foreign domain), with `*done` (if not null)
/// false. Never blocks; safe in interrupt handlers.
///
/// # Safety
/// `done` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rcuref_poll(
    d: *const rcuref_rcu,
    cookie: rcuref_cookie,
    done: *mut bool,
) -> i32 {
    let r = domain(d).and_then(|(index, rcu)| {
        cookie_of(cookie, index).map(|state| rcu.cookie_from_raw(state).poll())
    });
    // SAFETY: the caller's promise.
    unsafe { answer(done, r) }
}

/// Waits for the cookie's grace period only if it has not ended yet (Linux's
/// `cond_synchronize_rcu`), from the context `ctx` names, calling `hook` with
/// `hook_ctx` between attempts: a cookie that is done after one poll (a completed one,
/// an old one) returns `RCUREF_OK` at once, even from inside a section or an interrupt
/// handler; otherwise it is `rcuref_synchronize` for that cookie (never from an
/// interrupt handler). Returns `RCUREF_OK`, `RCUREF_EINVAL` (not a cookie),
/// `RCUREF_EDOMAIN` (another domain's cookie), and, only when there is something to
/// wait for, `RCUREF_EINSECTION` and `RCUREF_EGAVEUP` as `rcuref_synchronize`; or an
/// error of the context.
///
/// # Safety
/// As `rcuref_synchronize`'s.
#[no_mangle]
pub unsafe extern "C" fn rcuref_cond_synchronize(
    ctx: *const rcuref_ctx,
    cookie: rcuref_cookie,
    hook: rcuref_wait_hook,
    hook_ctx: *mut c_void,
) -> i32 {
    // SAFETY: the caller's promise.
    let c = or_return!(unsafe { context(ctx) });
    let cookie = match cookie_of(cookie, c.index) {
        Ok(state) => c.rcu.cookie_from_raw(state),
        Err(e) => return e,
    };
    // The owner's other slots are C's to check (the library sees only this one), and
    // only when the cookie leaves something to wait for.
    if c.owner_in_section() && !cookie.poll() {
        return RCUREF_EINSECTION;
    }
    // SAFETY: this function's caller promised `hook_fn`'s condition.
    let hook = unsafe { hook_fn(hook, hook_ctx) };
    match c.reader().cond_synchronize(cookie, hook) {
        Ok(()) => RCUREF_OK,
        Err(e) => code(e),
    }
}

pub use call_rcu::{
    rcuref_call_rcu, rcuref_call_rcu_capacity, rcuref_call_rcu_pending, rcuref_call_rcu_run,
    rcuref_call_rcu_run_some, rcuref_callback, rcuref_rcu_barrier,
};
pub use down_read::{rcuref_down_read, rcuref_read_token, rcuref_up_read};
pub use fence::{
    rcuref_fence_mode, rcuref_heavy_fence_fn, rcuref_heavy_install, RCUREF_EDECIDED,
    RCUREF_ENOTSUP, RCUREF_FENCE_FULL, RCUREF_FENCE_HEAVY,
};
pub use pool::{
    rcuref_pool, rcuref_pool_alloc, rcuref_pool_destroy, rcuref_pool_get, rcuref_pool_init,
    rcuref_pool_lookup, rcuref_pool_node, rcuref_pool_publish, rcuref_pool_put,
};
pub use sleep::{rcuref_set_sleep, rcuref_sleep_fn, rcuref_wake_fn};
