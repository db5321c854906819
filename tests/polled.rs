//! Linux's grace-period contract on `Rcu` (issue 28): the polled API (`get_state`,
//! `completed`, cookie equality, `cond_synchronize`, the bound on unfinished cookies,
//! old cookies after the counter has gone round), bounded reclamation work
//! (`DeferQueue::collect_at_most`), read sections ended by another context
//! (`down_read`/`ReadToken`), and the debug aids (features `strict-grace-periods`,
//! `debug-callbacks`). The counter-lap tests need `--cfg rcuref_mutants` (a 4-bit
//! counter); `cargo xtask test` runs every part.

#[allow(dead_code)]
mod common {
    pub mod exclusive;
}
use common::exclusive::exclusive;
use rcuref::rcu::{spin, DeferQueue, Ran, Rcu};
use rcuref::Error;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

#[test]
fn get_state_and_start_poll_name_the_same_grace_period() {
    let _x = exclusive();
    let rcu: &Rcu<2> = leak(Rcu::new());
    let a = rcu.get_state();
    let b = rcu.start_poll();
    assert_eq!(a, b, "two cookies with no step between them differ");
    assert!(a.poll());
    let c = rcu.get_state();
    assert_ne!(a, c, "a cookie after a grace period names the same one");
    let other: &Rcu<2> = leak(Rcu::new());
    assert_ne!(a, other.get_state(), "cookies of two domains compare equal");
}

#[test]
fn a_completed_cookie_is_done_and_never_handed_out() {
    let _x = exclusive();
    let rcu: &Rcu<2> = leak(Rcu::new());
    let done = rcu.completed();
    assert!(done.is_done());
    assert_eq!(done.into_raw(), u32::MAX);
    assert_eq!(rcu.completed(), rcu.cookie_from_raw(u32::MAX));
    assert_eq!(done.holdouts().count(), 0);
    let r = rcu.reader().unwrap();
    let _g = r.lock();
    // A reader holds every real grace period up; the completed cookie stays done.
    assert!(!rcu.start_poll().poll());
    assert!(done.poll() && done.is_done());
    // Every counter value a domain can start at, odd or even, gives an even target.
    for g in [0, 1, 2, 3, 0xFFFF_FFFB, 0xFFFF_FFFE, 0xFFFF_FFFF] {
        let t = Rcu::<2>::new_at(g).start_poll().into_raw();
        assert_eq!(
            t % 2,
            0,
            "start_poll at {g:#x} handed out odd target {t:#x}"
        );
    }
}

/// A domain whose counter is at `g`: an even value directly, an odd one (a wait in
/// progress) by a flip that a reader's section then holds at its wait.
fn domain_at(g: u32) -> &'static Rcu<2> {
    let d: &'static Rcu<2> = leak(Rcu::new_at(g & !1));
    if g & 1 == 1 {
        let r = d.reader().unwrap();
        let guard = r.lock();
        assert!(!d.get_state().poll());
        // Kept: an unlock would let the wait pass (at once, in strict mode).
        std::mem::forget(guard);
        std::mem::forget(r);
    }
    assert_eq!(d.gp_counter(), g);
    d
}

/// `Rcu::ACTIVE_COOKIES` (3) bounds the unfinished cookies with distinct targets in
/// every build, and is tight where cookies are a grace period from the next flip. Where
/// heavy fences may run (`rcuref_fences`: the default build on Linux, feature
/// `auto-fence`, the asymmetric-fence cfg) targets are aligned to grace periods
/// (multiples of 4), and two is the most.
#[test]
fn at_most_three_unfinished_cookies_have_distinct_targets() {
    let _x = exclusive();
    assert_eq!(Rcu::<2>::ACTIVE_COOKIES, 3);
    // Every cookie a domain could have handed out at counter values g - 8 ..= g,
    // answered at g, for g at both parities and across the wrap.
    let mut most = 0;
    for g in (8u32..24).chain(0xFFFF_FFF0..=0xFFFF_FFFF).chain(0..8) {
        let now = domain_at(g);
        let mut unfinished: Vec<u32> = (0..=8)
            .map(|back| domain_at(g.wrapping_sub(back)).start_poll().into_raw())
            .filter(|&t| !now.cookie_from_raw(t).is_done())
            .collect();
        unfinished.sort();
        unfinished.dedup();
        assert!(
            unfinished.len() <= Rcu::<2>::ACTIVE_COOKIES,
            "at {g:#x}: {} unfinished targets {unfinished:x?}",
            unfinished.len()
        );
        most = most.max(unfinished.len());
    }
    let tight = if cfg!(rcuref_fences) {
        2
    } else {
        Rcu::<2>::ACTIVE_COOKIES
    };
    assert_eq!(most, tight, "the bound is not what this build gives");
}

/// One poll with no reader in the way ends the grace period of a cookie taken at any
/// point of the counter (`MAX_TRIES` attempts: up to 7 steps where heavy fences may
/// run, 5 elsewhere).
#[test]
fn one_poll_ends_a_fresh_cookie_with_no_reader() {
    let _x = exclusive();
    // (Not 0xFFFF_FFFF: that raw cookie is `completed`. The targets of 0xFFFF_FFFA to
    // 0xFFFF_FFFE cross the wrap.)
    for g in (0u32..16).chain(0xFFFF_FFF0..0xFFFF_FFFF) {
        let d: &'static Rcu<2> = leak(Rcu::new_at(g & !1));
        // An odd `g`: the flip onto the wait, and no further (the target is reached).
        assert!(d.cookie_from_raw(g).poll());
        assert_eq!(d.gp_counter(), g);
        let c = d.start_poll();
        assert!(
            c.poll(),
            "at {g:#x}: one poll did not end {:#x}",
            c.into_raw()
        );
    }
}

/// Every cookie counts two whole waits that begin after it was taken (the two before
/// its target), whatever the counter was doing: flipping, waiting, or between. Where
/// heavy fences may run, its target is also the end of a grace period (a multiple of
/// 4), so its first wait is a grace period's first, the one that issues the heavy fence
/// (`src/rcu/heavy.rs`, "One fence per grace period"), and it is at most 7 steps ahead.
#[test]
fn every_cookie_counts_two_whole_waits_after_it() {
    let _x = exclusive();
    for g in (0u32..24).chain(0xFFFF_FFF0..=0xFFFF_FFFF) {
        let target = domain_at(g).start_poll().into_raw();
        let ahead = target.wrapping_sub(g);
        let first = target.wrapping_sub(3);
        assert_eq!(first & 1, 1, "at {g:#x}: target {target:#x}");
        assert!(
            (1..=4).contains(&first.wrapping_sub(g)),
            "at {g:#x}: target {target:#x} counts a wait begun before it"
        );
        if cfg!(rcuref_fences) {
            assert_eq!(target & 3, 0, "at {g:#x}: target {target:#x} not aligned");
            assert!((4..=7).contains(&ahead), "at {g:#x}: {ahead} steps ahead");
        } else {
            assert_eq!(ahead, 4 + (g & 1), "at {g:#x}");
        }
    }
}

#[test]
fn cond_synchronize_waits_only_when_it_must() {
    let _x = exclusive();
    let rcu: &Rcu<4> = leak(Rcu::with_dedicated(1));
    let other: &Rcu<4> = leak(Rcu::new());
    let mut w = rcu.reader().unwrap();
    // SAFETY: (test) slot 0 is used by this thread only.
    let ctx = unsafe { rcu.context_reader(0) };
    let old = rcu.get_state();
    assert!(old.poll());
    // Done: at once, even from inside a section of the waiting context.
    ctx.raw_lock().unwrap();
    assert_eq!(ctx.cond_synchronize(old, spin), Ok(()));
    assert_eq!(ctx.cond_synchronize(rcu.completed(), spin), Ok(()));
    // Not done: a wait from inside the section would wait for itself.
    let new = rcu.get_state();
    assert_eq!(ctx.cond_synchronize(new, spin), Err(Error::InReadSection));
    // SAFETY: (test) nothing was read in the section.
    unsafe { ctx.raw_unlock().unwrap() };
    assert_eq!(
        w.cond_synchronize(other.get_state(), spin),
        Err(Error::OtherDomain)
    );
    assert_eq!(w.cond_synchronize(new, spin), Ok(()));
    assert!(new.is_done());
}

#[test]
fn collect_at_most_bounds_the_work_and_reports_what_is_left() {
    let _x = exclusive();
    let rcu: &Rcu<2> = leak(Rcu::new());
    let mut q: DeferQueue<u32, 8, 2> = DeferQueue::new(rcu);
    for i in 0..5 {
        q.defer(i).unwrap();
    }
    let mut got = vec![];
    assert_eq!(
        q.collect_at_most(2, |v| got.push(v)),
        Ran { ran: 2, left: 3 }
    );
    assert_eq!(
        q.collect_at_most(0, |v| got.push(v)),
        Ran { ran: 0, left: 3 }
    );
    let r = rcu.reader().unwrap();
    let g = r.lock();
    q.defer(5).unwrap(); // not due while `g` lives
    assert_eq!(
        q.collect_at_most(9, |v| got.push(v)),
        Ran { ran: 3, left: 1 }
    );
    drop(g);
    assert_eq!(
        q.collect_at_most(9, |v| got.push(v)),
        Ran { ran: 1, left: 0 }
    );
    assert_eq!(got, [0, 1, 2, 3, 4, 5], "not oldest first, or lost");
}

/// A section begun on one thread and ended on another holds grace periods up until it
/// ends there. Returns whether a grace period ended while the token was held.
fn token_moved_to_another_thread() -> bool {
    let rcu: &'static Rcu<4> = leak(Rcu::new());
    let token = rcu.down_read().unwrap();
    let cookie = rcu.get_state();
    let (go, moved) = (leak(AtomicBool::new(false)), leak(AtomicBool::new(false)));
    let t = std::thread::spawn(move || {
        moved.store(true, SeqCst);
        while !go.load(SeqCst) {
            std::thread::yield_now();
        }
        let _read = token.lock(); // a nested read on the new holder
        drop(_read);
        token.up_read();
    });
    while !moved.load(SeqCst) {
        std::thread::yield_now();
    }
    let early = (0..1000).any(|_| cookie.poll());
    go.store(true, SeqCst);
    t.join().unwrap();
    assert!(cookie.poll(), "the grace period did not end after up_read");
    assert_eq!(rcu.reader_count(), 0, "up_read left its slot claimed");
    early
}

#[test]
fn a_section_ended_by_another_thread_holds_grace_periods_until_then() {
    let _x = exclusive();
    assert!(
        !token_moved_to_another_thread(),
        "a grace period ended under a token"
    );
    // Tokens never nest: each takes a slot of its own, and the domain runs out.
    let rcu: &Rcu<2> = leak(Rcu::new());
    let (a, b) = (rcu.down_read().unwrap(), rcu.down_read().unwrap());
    assert_ne!(a.slot(), b.slot());
    assert_eq!(rcu.down_read().unwrap_err(), Error::NoFreeSlot);
    drop((a, b));
    assert!(rcu.start_poll().poll());
}

#[cfg(feature = "strict-grace-periods")]
#[test]
fn strict_mode_ends_the_grace_period_at_the_last_unlock() {
    let _x = exclusive();
    let rcu: &Rcu<4> = leak(Rcu::new());
    let r = rcu.reader().unwrap();
    let g = r.lock();
    let cookie = rcu.get_state();
    assert!(!cookie.is_done());
    drop(g);
    // Nobody polled: the unlock drove the grace period.
    assert!(
        cookie.is_done(),
        "the outermost unlock did not drive the grace period"
    );
    let t = rcu.down_read().unwrap();
    let c2 = rcu.get_state();
    t.up_read();
    assert!(c2.is_done(), "up_read did not drive the grace period");
}

#[cfg(feature = "debug-callbacks")]
#[test]
fn a_callback_key_queued_twice_is_refused() {
    use rcuref::rcu::CallQueue;
    use rcuref::{warning_count, Warning};
    let _x = exclusive();
    let rcu: &Rcu<2> = leak(Rcu::new());
    let q: &CallQueue<u32, 4, 2> = leak(CallQueue::new(rcu));
    let before = warning_count(Warning::QueuedTwice);
    q.call_keyed(0x1000, 1).unwrap();
    let e = q.call_keyed(0x1000, 2).unwrap_err();
    assert_eq!((e.error, e.value), (Error::Busy, 2));
    assert_eq!(warning_count(Warning::QueuedTwice), before + 1);
    assert_eq!(q.pending(), 1, "the refused callback changed the queue");
    q.call_keyed(0x2000, 3).unwrap();
    q.call(4).unwrap(); // unkeyed
    q.call(5).unwrap();
    assert_eq!(q.run(usize::MAX, |_| {}).ran, 4);
    q.call_keyed(0x1000, 6).unwrap(); // run: its key is free again
}

#[cfg(rcuref_mutants)]
mod laps {
    use super::*;
    use rcuref::mutants::{set_gp_bits, Mutant};

    /// An old cookie on a 4-bit counter, answered at every step of three laps after it
    /// was taken: done from its grace period's end on, except while the counter is one
    /// to five steps behind its target on a later lap (one to seven where heavy fences
    /// may run: "not yet", never "done" early).
    #[test]
    fn an_old_cookie_after_the_counter_went_round() {
        let _x = exclusive();
        set_gp_bits(4);
        let rcu: &'static Rcu<2> = leak(Rcu::with_dedicated(1));
        // SAFETY: (test) slot 0 is used by this thread only.
        let ctx = unsafe { rcu.context_reader(0) };
        let cookie = rcu.get_state();
        let target = cookie.into_raw();
        let mut seen = vec![];
        let max_ahead = if cfg!(rcuref_fences) { 7 } else { 5 };
        // One step at a time: a section of the context's own (the wait it is at, or
        // the next one, must see it leave), then a poll to exactly one step further.
        for _ in 0..48 {
            let g = rcu.gp_counter();
            let ahead = target.wrapping_sub(g) & 15;
            let expect_done = !(1..=max_ahead).contains(&ahead);
            seen.push((g, cookie.is_done()));
            assert_eq!(cookie.is_done(), expect_done, "at {g}: target {target}");
            ctx.raw_lock().unwrap();
            // SAFETY: (test) nothing was read in the section.
            unsafe { ctx.raw_unlock().unwrap() };
            let next = rcu.cookie_from_raw((g + 1) & 15);
            assert!(next.poll(), "at {g}: no reader, and one step did not pass");
            assert_eq!(rcu.gp_counter(), (g + 1) & 15);
        }
        set_gp_bits(32);
        let laps = seen.iter().filter(|(g, _)| *g == target).count();
        assert!(laps >= 2, "the counter did not go round: {seen:?}");
    }

    #[test]
    fn negative_control_busted_grace_periods_end_a_token_early() {
        let x = exclusive();
        x.select(Mutant::BustedGracePeriod);
        assert!(
            token_moved_to_another_thread(),
            "the control did not end a grace period"
        );
    }
}
