//! Read sections that another context ends (Linux's `srcu_down_read`/`srcu_up_read`):
//! each is the library's `rcu::ReadToken` (`Rcu::down_read`), on one of the
//! `RCUREF_FFI_TOKENS` slots that follow a domain's context slots. What is C's own here:
//! C cannot hold the Rust token, so it is kept in a place of its domain while C holds a
//! small tagged struct naming the place, and each place counts its uses so that an
//! `rcuref_up_read` of a token already ended (or of a stale copy of one) is refused
//! instead of ending a section someone else began.

use crate::config::{DOMAINS, TOKENS};
use crate::{code, domain, or_return, rcuref_rcu, row, valid, DOMAIN_SLOTS, RCUREF_EINVAL};
use crate::{RCUREF_EDOMAIN, RCUREF_ENOTLOCKED};
use crate::{RCUREF_OK, SLOTS};
use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use portable_atomic::{
    AtomicU32,
    Ordering::{Acquire, Relaxed, Release},
};
use rcuref::rcu::ReadToken;

/// A read section begun by `rcuref_down_read` (Linux's `srcu_down_read` index): any
/// context may end it with `rcuref_up_read`, exactly once. Copy it once to hand it to
/// the context that will end it (a queue, a descriptor the interrupt handler reads);
/// its fields are private.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rcuref_read_token {
    // (Plain comments: the header shows the fields, not what they hold.)
    // `TOKEN_TAG` in the high half, the domain's index in the low half.
    domain: u32,
    // The token place, below `RCUREF_FFI_TOKENS`; `ENDED` once `rcuref_up_read` ended
    // it through this struct.
    place: u32,
    // The place's use word while this token holds it (odd).
    seq: u32,
}

/// A token's `domain` word: this tag in the high half (not the cookies' tag, so neither
/// passes for the other), the domain's index in the low half.
const TOKEN_TAG: u32 = 0x7274_0000;

/// A token's `place` once `rcuref_up_read` has ended it.
const ENDED: u32 = u32::MAX;

/// A domain's place for one token.
struct Place {
    /// Odd while a token holds the place (the value is that token's `seq`), even while
    /// it is free; each down_read and each up_read adds one, so a token's `seq` names
    /// one use of the place (until the word wraps, 2^31 uses later).
    seq: AtomicU32,
    /// The library's token while `seq` is odd.
    token: UnsafeCell<MaybeUninit<ReadToken<'static, DOMAIN_SLOTS>>>,
}

// SAFETY: `token` is written only by the `rcuref_down_read` whose library token claimed
// the place's slot (no other claim of that slot can succeed until that token drops), and
// read only by the one `rcuref_up_read` whose compare-exchange of `seq` from that token's
// odd value succeeded, which then drops it; the write happens before that read (the
// Release store of `seq`, the Acquire exchange), and the drop's Release store freeing
// the slot happens before the next claim of it (an Acquire exchange). So each value is
// accessed by one context at a time, and a `ReadToken` is `Send`.
unsafe impl Sync for Place {}

impl Place {
    const fn new() -> Self {
        Place {
            seq: AtomicU32::new(0),
            token: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }
}

/// Each domain's token places: place `i` is slot `SLOTS + i` of the domain.
static PLACES: [[Place; TOKENS]; DOMAINS] = [const { [const { Place::new() }; TOKENS] }; DOMAINS];

/// Begins a read section of `d` that any context may end (Linux's `srcu_down_read`: a
/// DMA completion interrupt ending what a task began, say), on a slot of its own among
/// the domain's `RCUREF_FFI_TOKENS`, and writes its token to `*out`. Grace periods wait
/// for it as for any section, until `rcuref_up_read`. Read under it with
/// `rcuref_dereference`, in any context that holds the token; it does not nest and
/// needs no context (`rcuref_ctx`). Never blocks; safe in interrupt handlers. Returns
/// `RCUREF_OK`, `RCUREF_EFULL` (every token slot holds a section: nothing begun),
/// `RCUREF_EINVAL` (a null domain or `out`) or `RCUREF_EDOMAIN`.
///
/// Where it differs from Linux: tokens are counted (`RCUREF_FFI_TOKENS` per domain),
/// and a wait (`rcuref_synchronize`) cannot tell that its caller holds a token of the
/// domain: it then waits for its own section, until its hook gives up.
///
/// # Safety
/// `out` is null or points to a writable `rcuref_read_token`.
#[no_mangle]
pub unsafe extern "C" fn rcuref_down_read(
    d: *const rcuref_rcu,
    out: *mut rcuref_read_token,
) -> i32 {
    let (index, rcu) = or_return!(domain(d));
    or_return!(valid(out));
    let places = or_return!(row(&PLACES, index));
    let token = match rcu.down_read() {
        Ok(t) => t,
        Err(e) => return code(e), // every free slot taken: RCUREF_EFULL
    };
    // The context slots are dedicated (never free), so the token's slot is a token
    // slot; anything else is refused rather than trusted (the token's drop ends it).
    let at = token.slot().checked_sub(SLOTS);
    let Some((i, place)) = at.and_then(|i| Some((i, places.get(i)?))) else {
        return RCUREF_EINVAL;
    };
    // Even: the place is free (its last token's up_read made it so before freeing the
    // slot this call has just claimed).
    let seq = place.seq.load(Relaxed).wrapping_add(1);
    // SAFETY: this call's token holds slot `SLOTS + i`, so no other down_read writes the
    // place and no up_read reads it until the Release store below (`Place`'s invariant).
    unsafe { (*place.token.get()).write(token) };
    // Release: the up_read that sees this value sees the token written.
    place.seq.store(seq, Release);
    // SAFETY: `out` is writable (the caller's promise) and aligned (checked).
    unsafe {
        out.write(rcuref_read_token {
            domain: TOKEN_TAG | index as u32,
            place: i as u32,
            seq,
        })
    };
    RCUREF_OK
}

/// Ends the read section of `*t` (Linux's `srcu_up_read`), from any context, interrupt
/// handlers included: never blocks. Each token is ended exactly once: this marks `*t`
/// ended, and a second `rcuref_up_read` of it, or of a copy of it, is refused with
/// `RCUREF_ENOTLOCKED`, nothing changed (a copy is caught by the place's use count,
/// which wraps after 2^31 sections of that place: a copy kept that long could end
/// another's section). Returns `RCUREF_OK`, `RCUREF_ENOTLOCKED`, `RCUREF_EINVAL` (a null
/// or misaligned `t`, or not a token) or `RCUREF_EDOMAIN` (a domain index that is not
/// one of the library's). Nothing read under the token may be used after it.
///
/// # Safety
/// `t` is null or points to a readable and writable `rcuref_read_token`.
#[no_mangle]
pub unsafe extern "C" fn rcuref_up_read(t: *mut rcuref_read_token) -> i32 {
    or_return!(valid(t));
    // SAFETY: the caller's promise: a readable token (aligned: checked).
    let tok = unsafe { t.read() };
    if tok.domain & 0xFFFF_0000 != TOKEN_TAG || (tok.place != ENDED && tok.seq & 1 == 0) {
        return RCUREF_EINVAL;
    }
    let Some(places) = PLACES.get((tok.domain & 0xFFFF) as usize) else {
        return RCUREF_EDOMAIN;
    };
    if tok.place == ENDED {
        return RCUREF_ENOTLOCKED;
    }
    let Some(place) = places.get(tok.place as usize) else {
        return RCUREF_EINVAL;
    };
    // Acquire: pairs with the down_read's Release store, so the token it wrote is seen.
    // The exchange from this token's own value lets one up_read through per section.
    if place
        .seq
        .compare_exchange(tok.seq, tok.seq.wrapping_add(1), Acquire, Relaxed)
        .is_err()
    {
        return RCUREF_ENOTLOCKED;
    }
    // SAFETY: the exchange above succeeded from the odd value that the down_read which
    // wrote the token stored (`Place`'s invariant): the token is initialised and this
    // call alone reads it; its slot stays claimed until the drop below, so no down_read
    // writes the place before this read.
    let token = unsafe { (*place.token.get()).assume_init_read() };
    // Ends the section and frees the slot (a Release store).
    token.up_read();
    // SAFETY: as the read above (the caller's promise: writable).
    unsafe {
        t.write(rcuref_read_token {
            place: ENDED,
            ..tok
        })
    };
    RCUREF_OK
}
