//! Sleeping waits for C (`rcuref_set_sleep`): a domain's sleep and wake functions, so a
//! writer that shares its core with the readers it waits for sleeps instead of polling,
//! and the last reader's unlock wakes it. The protocol is the library's
//! (`Waiting::sleep`, `Rcu::set_wake_hook`); what is here is C's own: the function
//! pointers, per domain.

use crate::{domain, or_return, rcuref_rcu, row, Domain, RCU, RCUREF_EINVAL, RCUREF_OK};
use core::ffi::c_void;
use portable_atomic::{AtomicPtr, AtomicU32, Ordering::*};
use rcuref::rcu::Waiting;

use crate::config::DOMAINS;

/// Sleeps the waiting context until the domain's wake function runs or a bound of its
/// own passes (a tick: `ulTaskNotifyTake(pdTRUE, 1)`), called with the `sleep_ctx`
/// given to `rcuref_set_sleep`.
pub type rcuref_sleep_fn = Option<unsafe extern "C" fn(ctx: *mut c_void)>;
/// Wakes every sleeping wait of the domain (`vTaskNotifyGiveFromISR`, a `sev`): called by
/// a reader's outermost unlock, from the reader's context, an interrupt handler's too.
pub type rcuref_wake_fn = Option<unsafe extern "C" fn()>;

/// One domain's sleep: its function and context, the polls before the first sleep, its
/// wake function (each a pointer made from the C function, or null).
struct Sleep {
    sleep: AtomicPtr<()>,
    ctx: AtomicPtr<c_void>,
    spins: AtomicU32,
    wake: AtomicPtr<()>,
}

static SLEEPS: [Sleep; DOMAINS] = [const {
    Sleep {
        sleep: AtomicPtr::new(core::ptr::null_mut()),
        ctx: AtomicPtr::new(core::ptr::null_mut()),
        spins: AtomicU32::new(0),
        wake: AtomicPtr::new(core::ptr::null_mut()),
    }
}; DOMAINS];

/// Makes the waits of domain `d` (`rcuref_synchronize`, `rcuref_rcu_barrier`) sleep
/// after `spins` polls: each further attempt calls `sleep(sleep_ctx)` if the grace
/// period has still not ended, and a reader's outermost unlock calls `wake` when a wait
/// of the domain may be asleep (one load and a branch not taken otherwise). The wait
/// hook a wait is given still runs between attempts (it may give up). Both null: waits
/// poll again. Call it before any wait of the domain (at start-up).
///
/// `sleep` must return when woken and also after a bound of its own: a reader's unlock
/// can miss a wait that is just falling asleep (a few instructions' window), and that
/// wait then sleeps out the bound (docs/c-api.md, "Waits that sleep"). Returns
/// `RCUREF_OK`, `RCUREF_EINVAL` (one of `sleep` and `wake` null, not both) or
/// `RCUREF_EDOMAIN`.
///
/// # Safety
/// `sleep` may be called with `sleep_ctx` from any context that waits on the domain;
/// `wake` from any context that reads it, interrupt handlers included.
#[no_mangle]
pub unsafe extern "C" fn rcuref_set_sleep(
    d: *const rcuref_rcu,
    spins: u32,
    sleep: rcuref_sleep_fn,
    sleep_ctx: *mut c_void,
    wake: rcuref_wake_fn,
) -> i32 {
    let (i, rcu) = or_return!(domain(d));
    let s = or_return!(row(&SLEEPS, i));
    if sleep.is_some() != wake.is_some() {
        return RCUREF_EINVAL;
    }
    s.spins.store(spins, Relaxed);
    s.ctx.store(sleep_ctx, Relaxed);
    s.wake.store(
        wake.map_or(core::ptr::null_mut(), |f| f as *mut ()),
        Release,
    );
    s.sleep.store(
        sleep.map_or(core::ptr::null_mut(), |f| f as *mut ()),
        Release,
    );
    rcu.set_wake_hook(wake.map(|_| wake_all as fn()));
    RCUREF_OK
}

/// The library's wake hook for every domain with a C wake function: calls each of them
/// (a wait woken for another domain re-checks and sleeps again).
fn wake_all() {
    for s in &SLEEPS {
        let p = s.wake.load(Acquire);
        if !p.is_null() {
            // SAFETY: `wake` holds null or a pointer made from an `unsafe extern "C"
            // fn()` by `rcuref_set_sleep`, whose caller promised it may be called from
            // any context that reads the domain (this is one).
            let f: unsafe extern "C" fn() = unsafe { core::mem::transmute(p) };
            // SAFETY: as above.
            unsafe { f() };
        }
    }
}

/// Between two attempts of a C wait: sleeps through the domain's sleep function, if it
/// has one and the wait has polled its `spins`.
pub(crate) fn between_attempts<const N: usize>(w: &Waiting<'_, '_, N>) {
    let domain = w.cookie().domain() as *const rcuref::rcu::Rcu<N>;
    let Some(s) = RCU
        .iter()
        .position(|r| core::ptr::eq(r as *const Domain, domain.cast()))
        .and_then(|i| SLEEPS.get(i))
    else {
        return;
    };
    let p = s.sleep.load(Acquire);
    if p.is_null() || w.attempts() <= s.spins.load(Relaxed) {
        return;
    }
    let ctx = s.ctx.load(Relaxed);
    // SAFETY: `sleep` holds null or a pointer made from an `unsafe extern "C" fn(*mut
    // c_void)` by `rcuref_set_sleep`, whose caller promised it may be called with
    // `sleep_ctx` from any context that waits on the domain (this is one).
    let f: unsafe extern "C" fn(*mut c_void) = unsafe { core::mem::transmute(p) };
    // SAFETY: as above.
    w.sleep(|| unsafe { f(ctx) });
}
