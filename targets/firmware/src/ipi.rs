//! The ticket protocol of the asymmetric-fence mode's heavy fence on the multi-core
//! targets, an IPI to every other core: what a kernel on QEMU `virt` would provide.
//! Each target brings its interrupt and its full fence (RISC-V: the CLINT's machine
//! software interrupt and `fence iorw, iorw`, `hart.rs`; AArch64: a GIC SGI and
//! `dmb ish`, `a64.rs`).
//!
//! The caller takes a ticket on each other core, raises their interrupt and waits until
//! each has served a ticket at least as new; the handler reads the newest ticket asked
//! of its core, executes a full fence and publishes the ticket as served.
//!
//! Why that meets the contract (`rcuref::rcu::heavy::HeavyFence`): the served core's
//! fence comes after its load of our ticket (acquire, from our `AcqRel` increment, which
//! follows our own fence), so everything we made visible before the call is visible to
//! what it runs after the fence; and its release of the served ticket, which we acquire,
//! follows the fence, so everything it did before is visible to us when we return. A
//! handler that clears its interrupt *before* reading the ticket misses no request: one
//! whose ticket it did not see raised the interrupt again and is served by the next
//! entry. A core that waits also serves a request pending on itself from its wait loop
//! (the contract's first way out, `rcuref::rcu::heavy::HeavyFence`): two cores that
//! fence at once with the interrupt masked (from handlers that poll a grace period)
//! serve each other's requests there instead of waiting for each other for ever. The
//! served ticket only moves forward, so a serve from the loop and one from the handler
//! that interrupts it cannot take it back.

use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use portable_atomic::{AtomicBool, AtomicPtr, AtomicU32};

/// Per core: the newest ticket asked of it, and the newest it has served; and the full
/// fence every serve and request runs (one for the handler's serves and the wait loop's
/// alike: a serve cannot be given another).
pub(crate) struct Tickets<const N: usize> {
    asked: [AtomicU32; N],
    served: [AtomicU32; N],
    fence: fn(),
}

impl<const N: usize> Tickets<N> {
    /// No ticket asked of any core yet; `fence` is the target's full fence (one that
    /// also orders the accesses that raise the interrupt).
    pub(crate) const fn new(fence: fn()) -> Self {
        Tickets {
            asked: [const { AtomicU32::new(0) }; N],
            served: [const { AtomicU32::new(0) }; N],
            fence,
        }
    }

    /// The heavy fence, from core `me`: `fence`, a ticket on every other core, `raise`
    /// with the set of them (a bit per core), a wait until each has served a ticket at
    /// least as new (serving this core's own pending requests meanwhile), `fence`.
    pub(crate) fn request(&self, me: usize, raise: impl FnOnce(u32)) {
        (self.fence)();
        let mut ticket = [0u32; N];
        let mut targets = 0u32;
        for (c, t) in ticket.iter_mut().enumerate().filter(|&(c, _)| c != me) {
            *t = self.asked[c].fetch_add(1, AcqRel).wrapping_add(1);
            targets |= 1 << c;
        }
        raise(targets);
        for (c, &t) in ticket.iter().enumerate().filter(|&(c, _)| c != me) {
            let mut spins = 0u32;
            // Served at least up to `t` (wrapping: within half the range).
            while (self.served[c].load(Acquire).wrapping_sub(t) as i32) < 0 {
                if SERVE_WHILE_WAITING.load(Relaxed) {
                    if self.asked[me].load(Acquire) != self.served[me].load(Relaxed) {
                        self.serve(me);
                    }
                } else {
                    // The control (`serve_while_waiting(false)`): after a bound, count
                    // the wait as stuck and serve once, so the test ends to say so.
                    spins += 1;
                    if spins == STUCK_AFTER {
                        STUCK.fetch_add(1, Relaxed);
                        self.serve(me);
                        spins = 0;
                    }
                }
                core::hint::spin_loop();
            }
        }
        (self.fence)();
    }

    /// The interrupt handler's part (its interrupt already cleared), and the wait
    /// loop's, on core `me`: the newest ticket asked of it, `fence`, the observer
    /// ([`observe_serves`]), the ticket published as served unless a newer one already
    /// is (the handler can interrupt the loop's serve between its load and its store).
    pub(crate) fn serve(&self, me: usize) {
        let ticket = self.asked[me].load(Acquire);
        (self.fence)();
        let observer = OBSERVER.load(Acquire);
        if !observer.is_null() {
            // SAFETY: `OBSERVER` only holds null or a `fn(usize)` stored by
            // `observe_serves`.
            let f: fn(usize) = unsafe { core::mem::transmute::<*mut (), fn(usize)>(observer) };
            f(me);
        }
        let mut served = self.served[me].load(Relaxed);
        // Forward only (wrapping: within half the range).
        while (ticket.wrapping_sub(served) as i32) > 0 {
            match self.served[me].compare_exchange_weak(served, ticket, Release, Relaxed) {
                Ok(_) => break,
                Err(now) => served = now,
            }
        }
    }
}

/// Whether a waiting core serves its own pending requests (test instrumentation: false
/// only in the control of `tests/rcu.rs`'s masked fences).
static SERVE_WHILE_WAITING: AtomicBool = AtomicBool::new(true);
/// Spins after which the control counts a wait as stuck, and how many were.
const STUCK_AFTER: u32 = 200_000;
static STUCK: AtomicU32 = AtomicU32::new(0);

/// Test instrumentation: `false` makes a waiting core serve nothing but its interrupt
/// (the protocol before it served from its wait loop), except once a wait has spun
/// [`stuck`]'s bound, so that the control can finish and count its deadlocks.
pub fn serve_while_waiting(on: bool) {
    SERVE_WHILE_WAITING.store(on, Relaxed);
}

/// Waits that spun past the control's bound (only counted with
/// `serve_while_waiting(false)`).
pub fn stuck() -> u32 {
    STUCK.load(Relaxed)
}

/// Test instrumentation: checks of the protocol's two subtle points on tickets of their
/// own (`tests/rcu.rs`, the masked fences' module).
pub mod checks {
    use super::*;

    fn no_fence() {}

    static NESTED: Tickets<1> = Tickets::new(fence_interrupted_by_a_newer_serve);
    static INTERRUPTED: AtomicBool = AtomicBool::new(false);

    /// The fence of the outer serve below: "interrupted" once by a request of another
    /// core and the handler's serve of it, between the outer serve's load of its ticket
    /// and its publication (as the handler can interrupt a wait loop's serve). The
    /// nested serve's own fence finds the interruption done and returns.
    fn fence_interrupted_by_a_newer_serve() {
        if !INTERRUPTED.swap(true, Relaxed) {
            NESTED.asked[0].fetch_add(1, AcqRel);
            NESTED.serve(0);
        }
    }

    /// A serve interrupted by the serve of a newer ticket, from `start` (so across the
    /// counter's wrap when `start` is near `u32::MAX`): returns the ticket published at
    /// the end minus `start`, 2 when the newer ticket stays published, 1 when the
    /// interrupted serve took it back.
    pub fn interrupted_serve(start: u32) -> u32 {
        NESTED.asked[0].store(start.wrapping_add(1), Relaxed);
        NESTED.served[0].store(start, Relaxed);
        INTERRUPTED.store(false, Relaxed);
        NESTED.serve(0);
        NESTED.served[0].load(Acquire).wrapping_sub(start)
    }

    static WRAP: Tickets<2> = Tickets::new(no_fence);
    static ABOUT_TO_SERVE: AtomicBool = AtomicBool::new(false);

    /// Core 0's part of a request whose ticket wraps (the counters start at
    /// `u32::MAX`): requests a fence of core 1 and returns whether core 1 had begun to
    /// serve it when the request returned (a wait that compares tickets without
    /// wrapping returns at once). Core 1 runs [`serve_late`] meanwhile.
    pub fn request_across_the_wrap() -> bool {
        WRAP.request(0, |_| {});
        ABOUT_TO_SERVE.load(Acquire)
    }

    /// Core 1's part: waits for core 0's ticket, a while more, then serves it.
    pub fn serve_late() {
        while WRAP.asked[1].load(Acquire) == u32::MAX {
            core::hint::spin_loop();
        }
        for _ in 0..100_000 {
            core::hint::spin_loop();
        }
        ABOUT_TO_SERVE.store(true, Release);
        WRAP.serve(1);
    }

    /// Sets the counters of [`request_across_the_wrap`] to `u32::MAX`, no serve begun.
    pub fn prepare_the_wrap() {
        for c in 0..2 {
            WRAP.asked[c].store(u32::MAX, Relaxed);
            WRAP.served[c].store(u32::MAX, Relaxed);
        }
        ABOUT_TO_SERVE.store(false, Relaxed);
    }
}

/// Test instrumentation: a `fn(usize)` as a pointer, or null.
static OBSERVER: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

/// Test instrumentation: `f(core)` runs in every serve from now on (the handler's or a
/// waiting core's own), on the served core, after its fence and before the requester is
/// released (so while the requester waits inside its heavy fence). `None` stops it.
pub fn observe_serves(f: Option<fn(usize)>) {
    let p = f.map_or(core::ptr::null_mut(), |f| f as *mut ());
    OBSERVER.store(p, Release);
}
