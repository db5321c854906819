//! `call_rcu` for C: each domain's queue is the library's `rcu::CallQueue` (its
//! protocol, loom models, litmus tests and broken variants live there, in
//! `src/rcu/call.rs`), of `RCUREF_FFI_CALLBACKS` places holding a C function and its
//! argument. What is C's own here: the codes, and the owner checks of a context (a
//! barrier from one of its owner's callbacks, or inside its owner's section on another
//! slot, is refused).

use crate::{
    code, context, domain, hook_fn, or_return, rcuref_ctx, rcuref_rcu, rcuref_wait_hook, row, Ctx,
    DOMAIN_SLOTS, RCU, RCUREF_EINVAL, RCUREF_OK,
};
use core::ffi::c_void;
use portable_atomic::{AtomicU32, Ordering::Relaxed};
use rcuref::rcu::CallQueue;

use crate::config::{CALLBACKS, DOMAINS};

/// A callback queued with `rcuref_call_rcu`: called once with its argument after a
/// grace period, by whichever context runs the queue.
pub type rcuref_callback = Option<unsafe extern "C" fn(arg: *mut c_void)>;

/// A queued C callback: the function and its argument.
struct Callback {
    func: unsafe extern "C" fn(*mut c_void),
    arg: *mut c_void,
}

// SAFETY: the caller of `rcuref_call_rcu` promised that `func` may be called with `arg`
// from whichever context runs the queue (its documented contract).
unsafe impl Send for Callback {}

impl Callback {
    fn call(self) {
        // SAFETY: `rcuref_call_rcu`'s caller promised that `func` may be called once
        // with `arg` after a grace period, from any context that runs the queue; the
        // queue hands each callback out once, after its grace period.
        unsafe { (self.func)(self.arg) }
    }
}

type Queue = CallQueue<'static, Callback, CALLBACKS, DOMAIN_SLOTS>;

/// Domain `i`'s queue.
const fn queue_of(i: usize) -> Queue {
    CallQueue::new(&RCU[i])
}

static QUEUES: [Queue; DOMAINS] = per_domain!(queue_of);

/// Queues `func(arg)` to run after a grace period of `d` (`call_rcu`). Call it after
/// unpublishing what `func` frees. Never blocks and never allocates: safe from any
/// number of contexts at once, interrupt handlers included. Returns `RCUREF_OK`,
/// `RCUREF_EFULL` (every place holds a callback: nothing queued; run the queue, or wait
/// with `rcuref_synchronize` and free directly), `RCUREF_EINVAL` (null domain or
/// callback) or `RCUREF_EDOMAIN`.
///
/// With the feature `debug-objects` (Linux's `DEBUG_OBJECTS_RCU_HEAD`, which catches an
/// `rcu_head` queued twice), a non-null `arg` that a callback still queued (or running)
/// in `d`'s queue already has is refused with `RCUREF_EQUEUED`, nothing queued: the
/// object would be freed twice. The key is `arg`, not an `rcu_head`, so two callbacks
/// meant for one object (a free and a log, say) are refused too. A debug aid, not a
/// guarantee: two contexts queueing the same `arg` at the same instant may both get
/// through. Without the feature nothing is checked and nothing is spent.
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
    let (i, _) = or_return!(domain(d));
    let queue = or_return!(row(&QUEUES, i));
    let Some(func) = func else {
        return RCUREF_EINVAL;
    };
    // `call` without the library's `debug-callbacks` (the key is not even stored).
    match queue.call_keyed(arg as usize, Callback { func, arg }) {
        Ok(()) => RCUREF_OK,
        Err(refused) => code(refused.error), // RCUREF_EFULL, or RCUREF_EQUEUED
    }
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
    let c = or_return!(unsafe { context(ctx) });
    ran_count(or_return!(run(&c, usize::MAX)).ran)
}

/// `rcuref_call_rcu_run` with a budget: runs at most `budget` callbacks whose grace
/// period has ended (in the queue's place order, not strictly oldest first) and leaves
/// the rest for a later call, so a tick handler or an interrupt
/// bounds its work, as Linux bounds the callbacks one softirq invokes (`rcu_do_batch`'s
/// limit; there the limit is the kernel's, here it is the caller's). Writes to `*left`
/// (if not null) how many places still hold a callback this call did not run (due or
/// not, and those other contexts are queueing or running): 0 means the queue was empty
/// when scanned, not that it is now. Returns how many ran, or an error of the context
/// or `RCUREF_EINVAL` (a misaligned `left`), with `*left` (if writable) 0 on an error.
/// `budget` 0 runs nothing and only counts. As `rcuref_call_rcu_run` otherwise: never
/// blocks, and a barrier from a callback it runs is refused (`RCUREF_EINCALLBACK`).
///
/// # Safety
/// `ctx` is null or readable; `left` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rcuref_call_rcu_run_some(
    ctx: *const rcuref_ctx,
    budget: u32,
    left: *mut u32,
) -> i32 {
    if !left.is_aligned() {
        return RCUREF_EINVAL;
    }
    // SAFETY: the caller's promise.
    let (result, rest) = match unsafe { context(ctx) } {
        Ok(c) => match run(&c, budget as usize) {
            Ok(r) => (ran_count(r.ran), r.left),
            Err(e) => (e, 0),
        },
        Err(e) => (e, 0),
    };
    if !left.is_null() {
        // SAFETY: `left` is writable (the caller's promise) and aligned (checked).
        unsafe { left.write(u32::try_from(rest).unwrap_or(u32::MAX)) };
    }
    result
}

/// Runs at most `budget` due callbacks of `c`'s domain, counted as `c`'s owner's.
fn run(c: &Ctx, budget: usize) -> Result<rcuref::rcu::Ran, i32> {
    let queue = row(&QUEUES, c.index)?;
    let _running = Running::new(c);
    Ok(queue.run(budget, Callback::call))
}

/// A count of callbacks run as a result (never negative: a code is).
fn ran_count(ran: usize) -> i32 {
    i32::try_from(ran).unwrap_or(i32::MAX)
}

/// A context running callbacks: counted in `RUNNING_CALLBACKS` while it lives (a callback that
/// unwinds out, with a panic-unwinding build, still uncounts it).
struct Running(&'static AtomicU32);

impl Running {
    fn new(c: &Ctx) -> Self {
        let r = c.slot.running;
        r.fetch_add(1, Relaxed);
        Running(r)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
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
    let c = or_return!(unsafe { context(ctx) });
    if c.owner_in_callbacks() {
        return crate::RCUREF_EINCALLBACK;
    }
    if c.owner_in_section() {
        return crate::RCUREF_EINSECTION;
    }
    let queue = or_return!(row(&QUEUES, c.index));
    // The callbacks this barrier runs are its owner's too: one that calls the barrier
    // (or closes the context) is refused as under `rcuref_call_rcu_run`.
    let _running = Running::new(&c);
    // SAFETY: this function's caller promised `hook_fn`'s condition.
    let hook = unsafe { hook_fn(hook, hook_ctx) };
    match queue.barrier(c.reader(), hook, Callback::call) {
        Ok(_) => RCUREF_OK,
        Err(e) => code(e),
    }
}

/// How many places of `d`'s queue hold a callback (queued, running, or being queued),
/// 0 for a null or foreign domain.
#[no_mangle]
pub extern "C" fn rcuref_call_rcu_pending(d: *const rcuref_rcu) -> u32 {
    match domain(d) {
        Ok((i, _)) => row(&QUEUES, i).map_or(0, |q| q.pending() as u32),
        Err(_) => 0,
    }
}

/// The places of each domain's queue (`RCUREF_FFI_CALLBACKS`), 0 for a null or foreign
/// domain.
#[no_mangle]
pub extern "C" fn rcuref_call_rcu_capacity(d: *const rcuref_rcu) -> u32 {
    domain(d).map_or(0, |_| CALLBACKS as u32)
}
