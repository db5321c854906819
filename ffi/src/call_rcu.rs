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
    code, context, domain, hook_fn, rcuref_ctx, rcuref_rcu, rcuref_wait_hook, Ctx, RCUREF_EFULL,
    RCUREF_EINVAL, RCUREF_OK, RUNNING_CALLBACKS,
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
    /// The queue's `queued` count when this callback was queued: orders callbacks for
    /// `rcuref_rcu_barrier` without trusting a cookie's age (a cookie left queued for a
    /// whole lap of the grace-period counter reads "not done" again for a few steps).
    seq: AtomicU32,
}

impl Place {
    const fn new() -> Self {
        Place {
            state: AtomicU8::new(FREE),
            func: AtomicUsize::new(0),
            arg: AtomicPtr::new(core::ptr::null_mut()),
            cookie: AtomicU32::new(0),
            seq: AtomicU32::new(0),
        }
    }
}

struct Queue {
    places: [Place; CALLBACKS],
    /// Where the next claim starts looking (a hint).
    next: AtomicUsize,
    /// Callbacks queued so far (wrapping): each place's `seq` is taken from it.
    queued: AtomicU32,
}

static QUEUES: [Queue; DOMAINS] = [const {
    Queue {
        places: [const { Place::new() }; CALLBACKS],
        next: AtomicUsize::new(0),
        queued: AtomicU32::new(0),
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
            // Release (a read-modify-write: every later number continues the release
            // sequence): a barrier that reads a count past this one sees the caller's
            // unpublish and this cookie happen before its own grace period starts.
            p.seq.store(q.queued.fetch_add(1, Release), Relaxed);
            // Release: a runner that sees READY sees the fields, the cookie included
            // (a cookie must travel with release/acquire to another core).
            p.state.store(READY, Release);
            return RCUREF_OK;
        }
    }
    RCUREF_EFULL
}

/// Runs every queued callback of the context's domain whose grace period has ended, in
/// the calling context (the one `ctx` names), and returns how many ran (or an error of
/// the context). Never blocks (it may advance the grace period, as `rcuref_poll`
/// does); any number of contexts may run the queue at once, each callback runs exactly
/// once. Call it from a kernel thread, a timer, the idle loop, or an interrupt handler
/// if the callbacks are safe there. While it runs callbacks, a barrier of the same
/// owner (from a callback) is refused with `RCUREF_EINCALLBACK`: it would wait for
/// itself.
///
/// # Safety
/// `ctx` is null or readable.
#[no_mangle]
pub unsafe extern "C" fn rcuref_call_rcu_run(ctx: *const rcuref_ctx) -> i32 {
    // SAFETY: the caller's promise.
    match unsafe { context(ctx) } {
        Ok(c) => {
            let _running = Running::new(&c);
            run(c.index, c.rcu, None).0 as i32
        }
        Err(e) => e,
    }
}

/// A context running callbacks: counted in `RUNNING_CALLBACKS` while it lives (a callback that
/// unwinds out, with a panic-unwinding build, still uncounts it).
struct Running(&'static AtomicU32);

impl Running {
    fn new(c: &Ctx) -> Self {
        let r = &RUNNING_CALLBACKS[c.index][c.slot];
        r.fetch_add(1, Relaxed);
        Running(r)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// Whether `seq` was taken before `limit` (wrapping: fewer than 2^31 callbacks are
/// queued while one barrier runs).
fn before(seq: u32, limit: u32) -> bool {
    (seq.wrapping_sub(limit) as i32) < 0
}

/// Runs what is done, and with `ended_before = Some(limit)` also every callback queued
/// before `limit` whatever its cookie says (the caller waited for a grace period that
/// began after they were queued). Returns (callbacks run, places left READY, RUNNING or
/// FILLING: with a `limit`, only those queued before it).
fn run(
    i: usize,
    rcu: &'static rcuref::rcu::Rcu<{ crate::SLOTS }>,
    ended_before: Option<u32>,
) -> (u32, u32) {
    let q = &QUEUES[i];
    let (mut ran, mut left) = (0u32, 0u32);
    // One poll that may advance the grace period per call; then only looks.
    let mut polled = false;
    // Whether a place left over counts: with a limit, only if queued before it.
    let counts = |p: &Place| ended_before.is_none_or(|l| before(p.seq.load(Relaxed), l));
    for p in &q.places {
        match p.state.load(Acquire) {
            READY => {}
            // Running elsewhere, or being queued (that call has not returned yet).
            RUNNING | FILLING => {
                if counts(p) {
                    left += 1;
                }
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
        let forced = ended_before.is_some_and(|l| before(p.seq.load(Relaxed), l));
        let cookie = rcu.cookie_from_raw(p.cookie.load(Relaxed));
        let done = forced
            || if polled {
                cookie.is_done()
            } else {
                let done = cookie.poll();
                polled = !done;
                done
            };
        if !done {
            p.state.store(READY, Release);
            if counts(p) {
                left += 1;
            }
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

/// Waits for every callback of the context's domain queued before this call to have
/// run (`rcu_barrier`), from that context (not an interrupt handler, not a callback:
/// `RCUREF_EINCALLBACK` while its owner runs callbacks),
/// calling `hook` between attempts; runs them itself. Returns `RCUREF_OK` or an error
/// of `rcuref_synchronize`. A give-up (`RCUREF_EGAVEUP`) during the grace period runs
/// nothing; one while another context is still running or queueing one of the
/// callbacks waited for comes after this call may have run some of them (each still
/// runs exactly once, by whichever context gets to it). Callbacks queued
/// after it began may run in it too if their grace period has ended; it waits only for
/// those queued before (numbered when queued, so one whose cookie has aged a whole lap
/// of the grace-period counter is still waited for and run).
///
/// # Safety
/// As `rcuref_synchronize`'s.
#[no_mangle]
pub unsafe extern "C" fn rcuref_rcu_barrier(
    ctx: *const rcuref_ctx,
    hook: rcuref_wait_hook,
    hook_ctx: *mut c_void,
) -> i32 {
    // SAFETY: the caller's promise.
    let c = match unsafe { context(ctx) } {
        Ok(c) => c,
        Err(e) => return e,
    };
    if c.owner_in_callbacks() {
        return crate::RCUREF_EINCALLBACK;
    }
    if c.owner_in_section() {
        return crate::RCUREF_EINSECTION;
    }
    let (i, rcu, r) = (c.index, c.rcu, c.reader());
    // The callbacks this barrier runs are its owner's too: one that calls the barrier
    // (or closes the context) is refused as under `rcuref_call_rcu_run`.
    let _running = Running::new(&c);
    // The callbacks to wait for: those queued before now (`seq` before `limit`; a call
    // that returned before this one took its number first). Each was queued before the
    // grace period waited for below began, so once it has ended they are all due,
    // whatever their cookies say (a cookie can look young again after a whole lap).
    let limit = QUEUES[i].queued.load(Acquire);
    // SAFETY: this function's caller promised `hook_fn`'s condition.
    if let Err(e) = r.synchronize(unsafe { hook_fn(hook, hook_ctx) }) {
        return code(e);
    }
    let mut attempts = 0u32;
    loop {
        // Left: those of them that another context is running (or still queueing).
        if run(i, rcu, Some(limit)).1 == 0 {
            return RCUREF_OK;
        }
        attempts = attempts.saturating_add(1);
        match hook {
            // SAFETY: this function's caller promised `hook_fn`'s condition.
            Some(h) if unsafe { h(hook_ctx, attempts) } != 0 => return crate::RCUREF_EGAVEUP,
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

/// White-box tests of the queue with a 4-bit grace-period counter (test builds of the
/// library: `RUSTFLAGS="--cfg rcuref_mutants" cargo test -p rcuref-ffi`, which `cargo
/// xtask ffi` runs), so a callback can be left queued for a whole lap.
#[cfg(all(test, rcuref_mutants))]
mod tests {
    use super::*;
    use crate::{rcuref_ctx_open, rcuref_rcu_domain, rcuref_read_lock, rcuref_read_unlock, RCU};
    use core::sync::atomic::AtomicUsize as StdAtomicUsize;

    static RAN: StdAtomicUsize = StdAtomicUsize::new(0);

    unsafe extern "C" fn count(_: *mut c_void) {
        RAN.fetch_add(1, Relaxed);
    }

    /// The hostile review's finding: a callback whose cookie aged one lap of the counter
    /// reads "not done" again, and `rcuref_rcu_barrier` returned without running it while
    /// a reader kept its own poll from advancing. The barrier now waits for every
    /// callback numbered before it, and runs it whatever its cookie says.
    #[test]
    fn barrier_runs_a_callback_whose_cookie_aged_a_whole_lap() {
        rcuref::mutants::set_gp_bits(4);
        let d = rcuref_rcu_domain(1);
        let rcu = &RCU[1];
        let mut me = core::mem::MaybeUninit::<rcuref_ctx>::uninit();
        // SAFETY: (test) `me` is writable.
        assert_eq!(unsafe { rcuref_ctx_open(d, 3, 1, me.as_mut_ptr()) }, 0);
        // SAFETY: (test) written by the open above.
        let me = unsafe { me.assume_init() };
        // SAFETY: (test) `count` may run with a null argument at any time.
        let queued = unsafe { rcuref_call_rcu(d, Some(count), core::ptr::null_mut()) };
        assert_eq!(queued, 0);
        let target = QUEUES[1]
            .places
            .iter()
            .find(|p| p.state.load(Relaxed) == READY);
        let target = target.expect("the callback's place").cookie.load(Relaxed);
        // Other users drive grace periods until one more ends a lap later, just short
        // of the callback's target: it reads 4 steps ahead, "not done".
        while rcu.gp_counter() != (target + 16 - 8) & 15 {
            let c = rcu.start_poll();
            while !c.poll() {}
        }
        let limit = QUEUES[1].queued.load(Acquire);
        let c = rcu.start_poll();
        while !c.poll() {}
        assert!(
            !rcu.cookie_from_raw(target).is_done(),
            "the cookie did not age"
        );
        // A reader in a section: nothing can advance the counter now.
        // SAFETY: (test) `me` is a context this test opened.
        assert_eq!(unsafe { rcuref_read_lock(&me) }, 0);
        assert_eq!(
            run(1, rcu, None),
            (0, 1),
            "an aged cookie was run without a barrier"
        );
        assert_eq!(RAN.load(Relaxed), 0);
        assert_eq!(
            run(1, rcu, Some(limit)).0,
            1,
            "the barrier's pass did not run it"
        );
        assert_eq!(RAN.load(Relaxed), 1);
        // SAFETY: (test) nothing was read in the section.
        assert_eq!(unsafe { rcuref_read_unlock(&me) }, 0);
        rcuref::mutants::set_gp_bits(32);
    }
}
