//! The file_ref counter's broken variants: its ordering table as each ordering variant
//! changes it, and the broken twins of the functions a whole-function variant replaces
//! (`divert!` in `file_ref/zoned.rs`).

use super::Mutant;
use crate::file_ref::zoned::{mark_dead, resaturate, Orders, Word};
use crate::log::{warn, Warning};
use crate::sync::Fence;
use crate::sync::Ordering::{Relaxed, Release};

/// `ORDERS` as `m` changes it.
pub(crate) const fn orders(m: Mutant) -> Orders {
    let real = crate::file_ref::zoned::ORDERS;
    match m {
        Mutant::GetRelaxed => Orders {
            get: Relaxed,
            ..real
        },
        Mutant::PutRelaxed => Orders {
            put: Relaxed,
            mark_dead: Relaxed,
            after_mark_dead: Fence::None,
            ..real
        },
        _ => real,
    }
}

/// `Mutant::IncNotSticky`: warns, but leaves the count where the add put it (mainline's
/// plain add), so increments walk it through the zones.
pub(crate) fn inc_slow_not_sticky<W: Word>(new: W) {
    warn(crate::file_ref::zoned::inc_warning::<W>(new >= W::RELEASED));
}

/// `Mutant::PutRereads`: `put`'s slow path deciding on a re-read of the counter instead
/// of the value its decrement returned (otherwise the real one).
pub(crate) fn put_slow_rereads<W: Word>(cnt: &W::Atomic) -> bool {
    let new = W::load(cnt, Relaxed);
    if new == W::NOREF {
        return mark_dead::<W>(cnt);
    }
    put_slow_not_last::<W>(cnt, new)
}

/// `Mutant::PutStoresDead`: `put`'s slow path marking NOREF dead with a plain store, so
/// that two contexts can both take themselves for the last put (otherwise the real one).
pub(crate) fn put_slow_stores_dead<W: Word>(cnt: &W::Atomic, new: W) -> bool {
    if new == W::NOREF {
        W::store(cnt, W::DEAD, Release);
        return true;
    }
    put_slow_not_last::<W>(cnt, new)
}

/// The real slow path's other cases (a put on a released or saturated count).
fn put_slow_not_last<W: Word>(cnt: &W::Atomic, new: W) -> bool {
    if new >= W::RELEASED {
        W::store(cnt, W::DEAD, Relaxed);
        warn(Warning::ImbalancedPut);
        return false;
    }
    resaturate::<W>(cnt);
    warn(Warning::Saturated);
    false
}

/// `Mutant::PutCloseStores`: `put_close` storing DEAD after reading ONEREF instead of
/// exchanging, so a get between the read and the store is lost.
pub(crate) fn close_by_store<W: Word>(cnt: &W::Atomic) -> bool {
    W::store(cnt, W::DEAD, Release);
    true
}
