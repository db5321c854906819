//! The RCU's broken variants: the read side's ordering table as each ordering variant
//! changes it, and the broken twins of the functions that a whole-function variant
//! replaces (`divert!` in `rcu/`). Compiled as `rcu::broken`, a child of `rcu`, in test
//! builds only, so a twin reaches what the real function reaches.

use super::domain::Rcu;
use super::encoding::{half, online, phase, phase_of, reached, MAX_TRIES};
use super::gp::{enter, record_phase, stepping_in, Driver};
use super::ops::{self, ReadSide, SlotStore};
use crate::mutants::Mutant;
use crate::sync::Fence;
use crate::sync::Ordering::Release;

/// `ops::READ_SIDE` as `m` changes it.
pub(crate) const fn read_side(m: Mutant) -> ReadSide {
    let real = ops::READ_SIDE;
    match m {
        Mutant::RelaxedLockStore => ReadSide {
            lock_store: SlotStore::Relaxed,
            ..real
        },
        Mutant::NoReaderFence => ReadSide {
            after_lock: Fence::None,
            ..real
        },
        Mutant::NestedWithoutFence => ReadSide {
            after_nested_in_context: Fence::None,
            ..real
        },
        Mutant::ClaimWithoutFence => ReadSide {
            after_claim: Fence::None,
            ..real
        },
        _ => real,
    }
}

/// `Mutant::BustedGracePeriod` (rcutorture's `rcu_busted_ops`): the grace period ends at
/// once.
pub(crate) fn busted_grace_period<const N: usize>(rcu: &Rcu<N>, target: u32) {
    if !reached(ops::counter_snapshot(&rcu.gp.0), target) {
        rcu.gp.0.store(target, Release);
    }
}

/// `Mutant::StaleFastPath`, the old idle fast path: every step scans, and a scan that
/// found nobody online stores the cookie's target outright, a store decided on a scan
/// that may be stale by now (completing cookies taken after it). Otherwise `advance`.
pub(crate) fn advance_idle_fast_path<const N: usize>(rcu: &Rcu<N>, target: u32, patient: bool) {
    let (mut driver, mut g) = Driver::new(rcu);
    for _ in 0..MAX_TRIES {
        if reached(g, target) {
            break;
        }
        if g & 1 == 1 {
            record_phase(rcu, g);
        }
        ops::wait_fence();
        if !super::heavy::in_wait_step(rcu, g, patient) {
            break;
        }
        pause_point!(GpBeforeScan(g));
        let old = phase(g) ^ 1;
        let (mut anyone, mut held) = (false, false);
        for s in &rcu.slots {
            let v = ops::scan_slot(&s.0);
            anyone |= online(v);
            held |= online(v) && phase_of(v) == old;
        }
        pause_point!(GpAfterScan);
        if !anyone {
            rcu.gp.0.store(target, Release);
            break;
        }
        if g & 1 == 1 && held {
            break;
        }
        match driver.step(g) {
            Some(now) => g = now,
            None => break,
        }
    }
    driver.finish();
}

/// The try-lock of `Mutant::WriterLock` (one for the process: the tests that select it
/// use one domain).
static OLD_WRITER_LOCK: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// `Mutant::WriterLock`, the old design: a try-lock around the steps, so a context
/// stopped while holding it stops every grace period of the domain. Otherwise `advance`.
pub(crate) fn advance_writer_lock<const N: usize>(rcu: &Rcu<N>, target: u32, patient: bool) {
    use core::sync::atomic::Ordering;
    if OLD_WRITER_LOCK.swap(true, Ordering::Acquire) {
        return;
    }
    let (mut driver, mut g) = Driver::new(rcu);
    for _ in 0..MAX_TRIES {
        if reached(g, target) {
            break;
        }
        if g & 1 == 1 && !driver.wait_for_phase(g, patient) {
            break;
        }
        match driver.step(g) {
            Some(now) => g = now,
            None => break,
        }
    }
    driver.finish();
    OLD_WRITER_LOCK.store(false, Ordering::Release);
}

/// `Mutant::RegisterWithoutRecheck`: registers in the half of the counter value it read,
/// without reading the counter again, so it may hold a snapshot in a half it is not
/// registered in.
pub(crate) fn enter_without_recheck<const N: usize>(rcu: &Rcu<N>) -> (usize, u32) {
    let g = ops::counter_snapshot(&rcu.gp.0);
    let h = half(g);
    pause_point!(GpEnterBeforeRegister);
    (h, ops::register_in_half(stepping_in(rcu, h), &rcu.gp.0))
}

/// `Mutant::StaleSnapshotAfterRegister`: registers again in the half the counter moved
/// to, but goes on stepping from `g` (the value that told it the counter had moved)
/// instead of `enter`'s fresh snapshot.
pub(crate) fn follow_stale<const N: usize>(reg: &mut Driver<'_, N>, g: u32) -> u32 {
    if half(g) != reg.half {
        ops::leave_half(stepping_in(reg.rcu, reg.half));
        reg.half = enter(reg.rcu).0;
    }
    g
}

/// `Mutant::RegistrationLeakedWhenBlocked`: a driver held by a reader registers once
/// more, a registration nobody ever leaves.
pub(crate) fn leak_registration<const N: usize>(reg: &Driver<'_, N>) {
    ops::register_in_half(stepping_in(reg.rcu, reg.half), &reg.rcu.gp.0);
}

/// `Mutant::LateReset`, **not a bug**: a driver that crossed into a half resets the mark
/// even when the counter has already left its snapshot, wiping a mark of the new lap.
#[cfg(rcuref_fences)]
pub(crate) fn late_reset<const N: usize>(rcu: &Rcu<N>, g: u32, next: u32) {
    if half(next) != half(g) {
        rcu.fences
            .0
            .returned
            .store(super::heavy::NO_WAIT, crate::sync::Ordering::Relaxed);
    }
}

/// `heavy::in_wait_step` with the variants of its marks: `HeavyFenceEveryScan` (no
/// fence shared: a fence at every scan of every wait, the design before the marks),
/// `FenceEmptyDomain` (a fence though every slot is free),
/// `ImpatientWaiters` (a blocking waiter fences beside another driver's fence) and
/// `FencedBeforeHeavyFence` (marked returned before the fence has run).
#[cfg(rcuref_fences)]
pub(crate) fn in_wait_step<const N: usize>(rcu: &Rcu<N>, g: u32, patient: bool) -> bool {
    use crate::sync::Ordering::{Acquire, Relaxed};
    let marks = &rcu.fences.0;
    if !super::encoding::is_first_wait(g) && !mutant!(HeavyFenceEveryScan) {
        return true;
    }
    if marks.returned.load(Acquire) == g && !mutant!(HeavyFenceEveryScan) {
        return true;
    }
    if !mutant!(FenceEmptyDomain) && rcu.slots.iter().all(|s| ops::scan_slot(&s.0) == 0) {
        return true;
    }
    if patient && marks.begun.load(Relaxed) == g && !mutant!(ImpatientWaiters) {
        return false;
    }
    marks.begun.store(g, Relaxed);
    let _under_way = super::heavy::UnderWay { rcu, g };
    if mutant!(FencedBeforeHeavyFence) {
        marks.returned.store(g, Release);
    }
    super::heavy::heavy_fence();
    marks.returned.store(g, Release);
    true
}

/// `Mutant::DeferDropsOnPanic`: the value being deferred dropped by the unwinding of a
/// panic in user code, as the old plain local was, before its grace period.
pub(crate) fn drop_unpublished<T>(value: &mut core::mem::ManuallyDrop<T>) {
    // SAFETY: called once, from the `Drop` of the `Unpublished` that holds `value`,
    // which is not used afterwards.
    unsafe { core::mem::ManuallyDrop::drop(value) };
}

/// `Mutant::CookieBeforeUnpublish`, for `RcuCell::replace`: the cookie taken before the
/// swap that unpublishes the old value, so a grace period that began before the
/// unpublish (another driver's) can end while a reader that loaded it is inside.
pub(crate) fn replace_cookie_first<'a, T, const N: usize>(
    cell: &super::RcuCell<'a, T, N>,
    new: &'a mut T,
) -> super::Retired<'a, T, N> {
    let cookie = cell.rcu.start_poll();
    super::Retired::new(super::cell::publish(&cell.ptr, new), cookie)
}

/// `Mutant::CookieBeforeUnpublish`, for `RcuValue`'s publish.
pub(crate) fn swap_in_cookie_first<T, const K: usize, const N: usize>(
    value: &super::RcuValue<'_, T, K, N>,
    i: usize,
) {
    let cookie = value.rcu.start_poll();
    let old = super::value::publish_index(&value.current, i as u32) as usize;
    value.retire(i, old, cookie.into_raw());
}

/// `call::ORDERS` as `m` changes it.
pub(crate) const fn call_orders(m: Mutant) -> super::call::Orders {
    let real = super::call::ORDERS;
    match m {
        Mutant::CallRelaxedScan => super::call::Orders {
            scan: crate::sync::Ordering::Relaxed,
            ..real
        },
        Mutant::CallRelaxedNumber => super::call::Orders {
            count: crate::sync::Ordering::Relaxed,
            ..real
        },
        _ => real,
    }
}

/// `Mutant::CallReadyBeforeFilled`: the place made READY before the callback is written
/// into it, so a runner that takes it reads what is not there yet.
pub(crate) fn fill_ready_first<C, const M: usize, const N: usize>(
    queue: &super::CallQueue<'_, C, M, N>,
    p: &super::call::Place<C>,
    callback: C,
) {
    super::call::hand_on(&p.state, super::call::READY);
    // SAFETY: none: this is the bug (a runner may read or take the value meanwhile);
    // only the tests that expect it to fail select it.
    p.value.with_mut(|v| unsafe { (*v).write(callback) });
    queue.number(p);
    super::call::hand_on(&p.state, super::call::READY);
}

/// `Mutant::CallFreeBeforeRun`: the place freed before its callback runs, so a barrier
/// that sees it free returns while the callback still runs in another context.
pub(crate) fn free_before_run<'a, const N: usize>(
    state: &'a crate::sync::AtomicU32,
) -> Option<super::call::FreeOnDrop<'a, N>> {
    super::call::hand_on(state, super::call::FREE);
    None
}

/// `Mutant::ModeSwitchesLive`: `heavy::install` that switches the mode whatever it was,
/// readers inside or not: to heavy (with `fence`), or back to full if it was heavy.
#[cfg(rcuref_auto)]
pub(crate) fn install_live(fence: fn()) -> Result<(), crate::Error> {
    use super::heavy::FenceMode;
    if super::heavy::readers_skip_fence() {
        super::heavy::force(FenceMode::Full, None);
    } else {
        super::heavy::force(FenceMode::Heavy, Some(fence));
    }
    Ok(())
}

/// `Mutant::WakersKeptOnRelease`: a waker cell given up with its waker still in it (its
/// `state`), so a later wake of the set wakes the task of a future that is gone.
pub(crate) fn release_keeping_waker(state: &crate::sync::AtomicU32) {
    state.fetch_and(!super::wakers::CLAIMED, Release);
}

/// `Mutant::SleepWithoutRepoll`: `Waiting::sleep` without its last poll: announced, then
/// asleep whatever the readers have done meanwhile.
pub(crate) fn sleep_without_repoll<const N: usize>(
    w: &super::Waiting<'_, '_, N>,
    sleep: impl FnOnce(),
) {
    w.cookie().domain().announce_sleep(false);
    super::heavy::after_announce();
    sleep();
}

/// `Mutant::UnlockWakesBeforeStore`: an unlock (`At::leave`) that looks for a sleeping
/// wait, and wakes it, before the store that ends the section.
pub(crate) fn leave_waking_first<const N: usize>(at: &super::readers::At<'_, N>) {
    use super::encoding::{CLAIMED, ONE_LEVEL, STICKY};
    let slot = at.word();
    let v = ops::own_slot(slot);
    interrupt_point!(UnlockAfterLoad, slot);
    if v < 2 * ONE_LEVEL {
        at.rcu.wake_sleepers(v);
        ops::unlock(slot, CLAIMED);
        super::sections::left(at.rcu.section_key());
    } else if v < STICKY {
        ops::unlock(slot, v - ONE_LEVEL);
    }
}

/// `Mutant::OldWakeProtocol`'s unlock: wakes unless the section's phase is the phase
/// word's (which may lag or lead the counter's wait).
pub(crate) fn wake_by_phase_word<const N: usize>(rcu: &Rcu<N>, v: u32) {
    let word = rcu.phase.0.phase.load(crate::sync::Ordering::Relaxed);
    if super::encoding::phase_of(v) == super::encoding::phase_in_word(word) {
        return;
    }
    rcu.call_wake_hook();
}
