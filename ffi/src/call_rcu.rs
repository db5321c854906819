//! A bounded `call_rcu` per domain: `RCUREF_FFI_CALLBACKS` places, each a small state
//! machine, so any number of contexts (interrupt handlers included) can queue and run
//! callbacks at once without a lock, an allocation or a wait.
//!
//! A place moves FREE → FILLING (the compare-exchange that claims it, by
//! `rcuref_call_rcu`) → READY (a release store, once its callback, argument and cookie
//! are written) → RUNNING (the compare-exchange that takes it, by a runner) → FREE
//! (a release store, after the callback returned) or back to READY (its grace period
//! has not ended). Only the context that moved a place out of FREE or READY touches its
//! fields until it moves it on, so they need no ordering of their own beyond the
//! state's release and acquire.

use crate::{
    code, domain, hook_fn, rcuref_rcu, rcuref_wait_hook, reader, RCUREF_EFULL, RCUREF_EINVAL,
    RCUREF_OK,
};
use core::ffi::c_void;
use portable_atomic::{AtomicPtr, AtomicU32, AtomicU8, AtomicUsize, Ordering::*};

use crate::config::{CALLBACKS, DOMAINS};

/// A callback queued with `rcuref_call_rcu`: called once with its argument after a
/// grace period, by whichever context runs the queue.
pub type rcuref_callback = Option<unsafe extern "C" fn(arg: *mut c_void)>;

const FREE: u8 = 0;
const FILLING: u8 = 1;
const READY: u8 = 2;
const RUNNING: u8 = 3;

struct Place {
    state: AtomicU8,
    func: AtomicUsize,
    arg: AtomicPtr<c_void>,
    cookie: AtomicU32,
}

impl Place {
    const fn new() -> Self {
        Place {
            state: AtomicU8::new(FREE),
            func: AtomicUsize::new(0),
            arg: AtomicPtr::new(core::ptr::null_mut()),
            cookie: AtomicU32::new(0),
        }
    }
}

struct Queue {
    places: [Place; CALLBACKS],
    /// Where the next claim starts looking (a hint).
    next: AtomicUsize,
}

static QUEUES: [Queue; DOMAINS] = [const {
    Queue {
        places: [const { Place::new() }; CALLBACKS],
        next: AtomicUsize::new(0),
    }
}; DOMAINS];

/// Queues `func(arg)` to run after a grace period of `d` (`call_rcu`). Call it after
/// unpublishing what `func` frees. Never blocks and never allocates: safe from any
/// number of contexts at once, interrupt handlers included. Returns `RCUREF_OK`,
/// `RCUREF_EFULL` (every place holds a callback: nothing queued; run the queue, or wait
/// with `rcuref_synchronize` and free directly), `RCUREF_EINVAL` (null domain or
/// callback) or `RCUREF_EDOMAIN`.
///
/// # Safety
/// `func` may be called once with `arg`, from whichever context runs the queue, after
/// a grace period.
#[no_mangle]
pub unsafe extern "C" fn rcuref_call_rcu(
    d: *const rcuref_rcu,
    func: rcuref_callback,
    arg: *mut c_void,
) -> i32 {
    let (i, rcu) = match domain(d) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let Some(func) = func else {
        return RCUREF_EINVAL;
    };
    let q = &QUEUES[i];
    let start = q.next.load(Relaxed) % CALLBACKS;
    for k in 0..CALLBACKS {
        let at = (start + k) % CALLBACKS;
        let p = &q.places[at];
        // Acquire: pairs with the release store of FREE, so the previous callback's run
        // is over before this one's fields are written.
        if p.state.load(Relaxed) == FREE
            && p.state
                .compare_exchange(FREE, FILLING, Acquire, Relaxed)
                .is_ok()
        {
            q.next.store(at + 1, Relaxed);
            p.func.store(func as usize, Relaxed);
            p.arg.store(arg, Relaxed);
            // The cookie after the caller's unpublish (program order; `start_poll`
            // fences), so its grace period covers every section that might see it.
            p.cookie.store(rcu.start_poll().into_raw(), Relaxed);
            // Release: a runner that sees READY sees the fields, the cookie included
            // (a cookie must travel with release/acquire to another core).
            p.state.store(READY, Release);
            return RCUREF_OK;
        }
    }
    RCUREF_EFULL
}

/// Runs every queued callback of `d` whose grace period has ended, in the calling
/// context, and returns how many ran (or `RCUREF_EINVAL`/`RCUREF_EDOMAIN`). Never
/// blocks (it may advance the grace period, as `rcuref_poll` does); any number of
/// contexts may run the queue at once, each callback runs exactly once. Call it from a
/// kernel thread, a timer, the idle loop, or an interrupt handler if the callbacks are
/// safe there.
#[no_mangle]
pub extern "C" fn rcuref_call_rcu_run(d: *const rcuref_rcu) -> i32 {
    match domain(d) {
        Ok((i, rcu)) => run(i, rcu).0 as i32,
        Err(e) => e,
    }
}

/// Runs what is done; returns (callbacks run, places left READY or RUNNING).
fn run(i: usize, rcu: &'static rcuref::rcu::Rcu<{ crate::SLOTS }>) -> (u32, u32) {
    let q = &QUEUES[i];
    let (mut ran, mut left) = (0u32, 0u32);
    // One poll that may advance the grace period per call; then only looks.
    let mut polled = false;
    for p in &q.places {
        match p.state.load(Relaxed) {
            READY => {}
            RUNNING => {
                left += 1;
                continue;
            }
            _ => continue,
        }
        // Acquire: pairs with the producer's release store of READY (its fields).
        if p.state
            .compare_exchange(READY, RUNNING, Acquire, Relaxed)
            .is_err()
        {
            left += 1;
            continue;
        }
        let cookie = rcu.cookie_from_raw(p.cookie.load(Relaxed));
        let done = if polled {
            cookie.is_done()
        } else {
            let done = cookie.poll();
            polled = !done;
            done
        };
        if !done {
            p.state.store(READY, Release);
            left += 1;
            continue;
        }
        let f = p.func.load(Relaxed);
        let arg = p.arg.load(Relaxed);
        // SAFETY: `f` was stored from an `unsafe extern "C" fn(*mut c_void)` by
        // `rcuref_call_rcu` (never 0: a null callback is refused), and the caller of
        // `rcuref_call_rcu` promised it may be called with `arg` after a grace period,
        // which has now ended.
        unsafe {
            let f: unsafe extern "C" fn(*mut c_void) = core::mem::transmute(f);
            f(arg);
        }
        // Release: the callback's accesses happen before the place's next claim.
        p.state.store(FREE, Release);
        ran += 1;
    }
    (ran, left)
}

/// Waits for every callback of `d` queued before this call to have run
/// (`rcu_barrier`), from the context that owns `slot` (not an interrupt handler),
/// calling `hook` between attempts; runs them itself. Returns `RCUREF_OK` or an error
/// of `rcuref_synchronize` (nothing has then been run by this call). Callbacks queued
/// after it began may run in it too; while other contexts keep queueing callbacks whose
/// grace periods end, it keeps running them and returns at the first pass that finds
/// nothing due and nothing running.
///
/// # Safety
/// As `rcuref_synchronize`'s.
#[no_mangle]
pub unsafe extern "C" fn rcuref_rcu_barrier(
    d: *const rcuref_rcu,
    slot: u32,
    hook: rcuref_wait_hook,
    ctx: *mut c_void,
) -> i32 {
    let r = match reader(d, slot) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let (i, rcu) = match domain(d) {
        Ok(x) => x,
        Err(e) => return e,
    };
    // Every callback queued before took its cookie before this grace period began
    // (the counter never goes back), so once it has ended they are all done.
    // SAFETY: this function's caller promised `hook_fn`'s condition.
    if let Err(e) = r.synchronize(unsafe { hook_fn(hook, ctx) }) {
        return code(e);
    }
    let mut attempts = 0u32;
    loop {
        run(i, rcu);
        // Left: callbacks another context is running now, and those queued after this
        // call began (not done yet). Wait only for the first kind.
        let busy = QUEUES[i]
            .places
            .iter()
            .any(|p| match p.state.load(Acquire) {
                RUNNING => true,
                READY => rcu.cookie_from_raw(p.cookie.load(Relaxed)).is_done(),
                _ => false,
            });
        if !busy {
            return RCUREF_OK;
        }
        attempts = attempts.saturating_add(1);
        match hook {
            // SAFETY: this function's caller promised `hook_fn`'s condition.
            Some(h) if unsafe { h(ctx, attempts) } != 0 => return crate::RCUREF_EGAVEUP,
            Some(_) => {}
            None => core::hint::spin_loop(),
        }
    }
}

/// How many places of `d`'s queue hold a callback (queued, running, or being queued),
/// 0 for a null or foreign domain.
#[no_mangle]
pub extern "C" fn rcuref_call_rcu_pending(d: *const rcuref_rcu) -> u32 {
    match domain(d) {
        Ok((i, _)) => QUEUES[i]
            .places
            .iter()
            .filter(|p| p.state.load(Relaxed) != FREE)
            .count() as u32,
        Err(_) => 0,
    }
}

/// The places of each domain's queue (`RCUREF_FFI_CALLBACKS`), 0 for a null or foreign
/// domain.
#[no_mangle]
pub extern "C" fn rcuref_call_rcu_capacity(d: *const rcuref_rcu) -> u32 {
    domain(d).map_or(0, |_| CALLBACKS as u32)
}
