//! Regression test from the hostile review of issue 27 (fixed since); what went wrong: a future woken through `Wakers` hangs once `std_sleeping` has installed
//! its own wake hook on the domain.
//!
//! `GracePeriod::sleep_woken` sleeps only if the domain `has_wake_hook()`, taking any
//! hook as one that wakes its set. But the library installs a hook by itself: the
//! first time a blocking `std_sleeping` wait sleeps it sets `std_wake` on a domain that
//! has none (`wake_hook_or`). A program that awaits `wait_woken` on that domain (having
//! forgotten, or not yet reached, its own `set_wake_hook`) then sleeps on a cell that
//! nothing ever wakes: the reader's unlock calls `std_wake`, which knows nothing of
//! the set. In the default mode the same program re-polls and works.
//!
//! `cargo test --release --features std,membarrier --test std_wake_hook` (the
//! run-time mode, decided heavy where membarrier exists).
#![cfg(all(feature = "std", rcuref_membarrier, not(rcuref_asymmetric_fence)))]

use rcuref::rcu::heavy::{fence_mode, FenceMode};
use rcuref::rcu::{std_sleeping, Rcu, Wakers};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Duration;

static RCU: Rcu<4> = Rcu::new();
static WAKERS: Wakers<2> = Wakers::new();

struct Count(AtomicUsize);
impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn a_hook_std_sleeping_installed_does_not_wake_a_woken_future() {
    assert_eq!(fence_mode(), FenceMode::Heavy, "needs membarrier");

    // A blocking wait that sleeps once: it installs `std_wake` on the domain.
    let t = std::thread::spawn(|| {
        let r = RCU.reader().unwrap();
        let g = r.lock();
        std::thread::sleep(Duration::from_millis(100));
        drop(g);
    });
    std::thread::sleep(Duration::from_millis(20));
    let mut writer = RCU.reader().unwrap();
    writer.synchronize(std_sleeping()).unwrap();
    t.join().unwrap();

    // Now an async writer on the same domain, woken through its own set.
    let reader = RCU.reader().unwrap();
    let guard = reader.lock();
    let count = Arc::new(Count(AtomicUsize::new(0)));
    let waker = Waker::from(count.clone());
    let mut cx = Context::from_waker(&waker);
    let cookie = RCU.start_poll();
    let mut fut = pin!(cookie.wait_woken(&WAKERS));
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    drop(guard);
    std::thread::sleep(Duration::from_millis(50));
    let woken = count.0.load(SeqCst);
    assert!(
        woken >= 1 || WAKERS.in_use() == 0,
        "the reader left, nothing woke the future (woken {woken}, cells in use {}): \
         the domain's hook is std_wake, which std_sleeping installed",
        WAKERS.in_use()
    );
}
