//! Regression test from the hostile review of issue 27 (fixed since); what went wrong: a `Waker::clone` that panics inside `WakerCell::register` leaves the cell
//! with REGISTERING set; the future's drop (`release`) then finds the key taken, sets
//! WAKING and clears CLAIMED, leaving REGISTERING | WAKING for ever. Every later owner
//! of that cell fails its registration and re-polls: the set has lost a cell for the
//! rest of the process (no hang, no unsoundness: a silent degradation, and the old
//! waker, if any, is never dropped).
//!
//! `RUSTFLAGS="--cfg rcuref_mutants" cargo test --release --features auto-fence
//! --test waker_panic`
#![cfg(all(rcuref_auto_fence, not(rcuref_asymmetric_fence)))]

use rcuref::rcu::{Rcu, Wakers};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, RawWaker, RawWakerVTable, Wake, Waker};

struct OneThread;
// SAFETY: single-threaded test: the caller's full fence is every reader's barrier.
unsafe impl rcuref::rcu::heavy::HeavyFence for OneThread {
    fn heavy_fence() {
        std::sync::atomic::fence(SeqCst);
    }
}

static RCU: Rcu<2> = Rcu::new();
static WAKERS: Wakers<1> = Wakers::new();
fn wake() {
    WAKERS.wake()
}

static PANIC_ON_CLONE: AtomicBool = AtomicBool::new(true);
fn clone(p: *const ()) -> RawWaker {
    if PANIC_ON_CLONE.load(SeqCst) {
        panic!("executor bug: clone panics");
    }
    RawWaker::new(p, &VTABLE)
}
fn noop(_: *const ()) {}
static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);

struct Count(AtomicUsize);
impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn a_panicking_waker_clone_wedges_its_cell_for_ever() {
    rcuref::rcu::heavy::install::<OneThread>().unwrap();
    RCU.set_wake_hook(Some(wake));
    let reader = RCU.reader().unwrap();
    let guard = reader.lock();

    // SAFETY: the vtable's functions ignore the data pointer.
    let bad = unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) };
    // Control: REVIEW27_CONTROL=1 skips the panic; the test then passes.
    let control = std::env::var_os("REVIEW27_CONTROL").is_some();
    PANIC_ON_CLONE.store(!control, SeqCst);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut f = pin!(RCU.start_poll().wait_woken(&WAKERS));
        let _ = f.as_mut().poll(&mut Context::from_waker(&bad));
    }));
    assert!(r.is_err() != control, "the clone should have panicked");
    PANIC_ON_CLONE.store(false, SeqCst);
    assert_eq!(WAKERS.in_use(), 0, "the dropped future gave its cell up");

    // A well-behaved future on a grace period the reader holds: it should sleep on
    // the (free) cell until the unlock.
    let count = Arc::new(Count(AtomicUsize::new(0)));
    let good = Waker::from(count.clone());
    let mut f = pin!(RCU.start_poll().wait_woken(&WAKERS));
    assert!(f
        .as_mut()
        .poll(&mut Context::from_waker(&good))
        .is_pending());
    let n = count.0.load(SeqCst);
    assert_eq!(
        n, 0,
        "the future woke itself ({n}): its cell is wedged (REGISTERING | WAKING left by \
         the panic), so it re-polls instead of sleeping, for ever"
    );
    drop(guard);
}
