//! A sleeping wait's announcement bit (`Rcu::announce_sleep`) raced by another driver
//! at every counter value of two laps of a 4-bit counter (so across the wrap), the other
//! driver ending one wait between the sleeper's choice of its bit and its announcement
//! (the bit changes: the check after the announcement must add the new one) or two
//! (the bit is the same again). Each time, a section begun after the flip sends no
//! wake and the last holder's unlock sends one. Written by the hostile review of the
//! announcement bits (issue 27); `tests/lost_wake.rs` has the one-counter-value case.
//!
//! Commands: as `tests/lost_wake.rs` (the one-core, run-time and asymmetric builds).
#![cfg(all(
    rcuref_mutants,
    any(
        rcuref_auto_fence,
        rcuref_asymmetric_fence,
        rcuref_unsafe_assume_single_core
    ),
    not(miri)
))]

use rcuref::mutants::{set_gp_bits, set_pause_hook, Point};
use rcuref::rcu::{Rcu, ReadToken};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering::SeqCst};

/// A heavy fence for this single-threaded test (readers and writers on one thread).
#[allow(dead_code)]
struct OneThread;
// SAFETY: used only by a test whose readers and writers all run on one thread.
unsafe impl rcuref::rcu::heavy::HeavyFence for OneThread {
    fn heavy_fence() {
        std::sync::atomic::fence(SeqCst);
    }
}
#[cfg(rcuref_asymmetric_fence)]
rcuref::set_heavy_fence!(OneThread);

const MASK: u32 = 15;
static DOM: AtomicPtr<Rcu<3>> = AtomicPtr::new(std::ptr::null_mut());
static WAKES: AtomicUsize = AtomicUsize::new(0);
fn wake() {
    WAKES.fetch_add(1, SeqCst);
}
static OTHER: AtomicU32 = AtomicU32::new(0);
static ARMED: AtomicBool = AtomicBool::new(false);
static TWO_WAITS: AtomicBool = AtomicBool::new(false);
std::thread_local! {
    static SECTIONS: std::cell::RefCell<Vec<ReadToken<'static, 3>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}
fn dom() -> &'static Rcu<3> {
    // SAFETY: (test) `DOM` holds a domain leaked by `scenario` (never freed) before
    // the pause hook can run.
    unsafe { &*DOM.load(SeqCst) }
}

/// The two tests share the pause hook, the counter's width and the selected variant.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let held = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    #[cfg(all(rcuref_auto_fence, not(rcuref_asymmetric_fence)))]
    {
        let _ = rcuref::rcu::heavy::install::<OneThread>();
    }
    held
}

fn hook(at: Point) {
    if !matches!(at, Point::SleepBeforeAnnounce) || !ARMED.swap(false, SeqCst) {
        return;
    }
    let d = dom();
    SECTIONS.with(|s| s.borrow_mut().clear()); // R0 leaves (no announcement yet)
    if !TWO_WAITS.load(SeqCst) {
        SECTIONS.with(|s| s.borrow_mut().push(d.down_read().unwrap()));
        let c = d.cookie_from_raw(OTHER.load(SeqCst));
        assert!(!c.poll(), "R1 should hold the other driver's next wait");
    } else {
        let w = d.gp_counter();
        assert_eq!(w & 1, 1, "the sleeper sleeps at a wait");
        let c = d.cookie_from_raw((w + 3) & MASK);
        assert!(c.poll());
        assert_eq!(d.gp_counter(), (w + 3) & MASK);
        SECTIONS.with(|s| s.borrow_mut().push(d.down_read().unwrap())); // R2
        let c = d.start_poll();
        OTHER.store(c.into_raw(), SeqCst);
        assert!(!c.poll(), "R2 should hold the wait two after the sleeper's");
        assert_eq!(d.gp_counter(), (w + 4) & MASK);
    }
}

/// Returns (wakes by the last holder's unlock, wakes sent by a new section).
fn scenario(start: u32, two_waits: bool) -> (usize, usize) {
    let d: &'static Rcu<3> = Box::leak(Box::new(Rcu::new()));
    DOM.store(d as *const _ as *mut _, SeqCst);
    for k in 1..=start {
        assert!(d.cookie_from_raw(k & MASK).poll());
    }
    assert_eq!(d.gp_counter(), start & MASK);
    d.set_wake_hook(Some(wake));
    TWO_WAITS.store(two_waits, SeqCst);
    SECTIONS.with(|s| s.borrow_mut().push(d.down_read().unwrap())); // R0
    let mine = if two_waits {
        d.cookie_from_raw((start + 5) & MASK)
    } else {
        d.start_poll()
    };
    OTHER.store(d.start_poll().into_raw(), SeqCst);
    set_pause_hook(Some(hook));
    let mut woken = None;
    let mut stray = 0;
    let mut me = d.reader().unwrap();
    me.cond_synchronize(mine, |w| {
        if w.attempts() == 1 {
            ARMED.store(true, SeqCst);
        }
        w.sleep(|| {
            if woken.is_none() {
                let before = WAKES.load(SeqCst);
                drop(d.down_read().unwrap());
                stray = WAKES.load(SeqCst) - before;
                let before = WAKES.load(SeqCst);
                SECTIONS.with(|s| s.borrow_mut().clear());
                woken = Some(WAKES.load(SeqCst) - before);
            }
        });
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    set_pause_hook(None);
    assert!(
        !ARMED.load(SeqCst),
        "pause point never reached (start {start})"
    );
    d.set_wake_hook(None);
    drop(me);
    (woken.expect("never slept on the last holder"), stray)
}

#[test]
fn announcement_bits_across_two_laps() {
    let _serial = serial();
    set_gp_bits(4);
    let mut bad = Vec::new();
    for start in 0..32u32 {
        let r = scenario(start, false);
        if r != (1, 0) {
            bad.push(("one wait", start, r));
        }
        if start & 1 == 1 {
            let r = scenario(start, true);
            if r != (1, 0) {
                bad.push(("two waits", start, r));
            }
        }
    }
    set_gp_bits(32);
    assert!(bad.is_empty(), "lost or extra wakes: {bad:?}");
}

/// The control: without the check after the announcement
/// (`Mutant::SleepBitNotRechecked`) the wake is lost at every start.
#[test]
fn negative_control_without_the_recheck() {
    let _serial = serial();
    rcuref::mutants::select(rcuref::mutants::Mutant::SleepBitNotRechecked);
    set_gp_bits(4);
    let mut bad = Vec::new();
    for start in 0..32u32 {
        let r = scenario(start, false);
        if r.0 != 1 {
            bad.push(start);
        }
    }
    set_gp_bits(32);
    rcuref::mutants::select(rcuref::mutants::Mutant::None);
    assert_eq!(bad.len(), 32, "{bad:?}");
}
