//! RCU test bodies shared by the host tests (`tests/rcu.rs`, `tests/torture_rcu.rs`) and
//! the on-target firmware. `core` only.

#![allow(dead_code, unreachable_pub, unexpected_cfgs)]

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use portable_atomic::{AtomicBool, AtomicU32};
use rcuref::rcu::{CallQueue, ContextReader, DeferQueue, PerCpu, Ran, Rcu, RcuCell, RcuValue};
use rcuref::{Error, Refused};

/// Grace periods end even when some reader is inside a section at every moment: two
/// readers hand over without a gap, and a cookie taken during the first section still
/// completes within a few polls, because a wait holds up only the sections that began
/// before its flip (the two-phase design). A wait that counted every reader online, or
/// a phase word that never changed, would poll for ever here.
pub fn grace_periods_end_under_back_to_back_readers() {
    static RCU: Rcu<2> = Rcu::new();
    let a = RCU.reader().unwrap();
    let b = RCU.reader().unwrap();
    let mut held = Some(a.lock());
    let cookie = RCU.start_poll();
    let mut polls = 0;
    let mut on_a = true;
    while !cookie.poll() {
        polls += 1;
        assert!(
            polls < 100,
            "no grace period ends under overlapping readers"
        );
        // The other reader enters before this one leaves.
        let next = if on_a { b.lock() } else { a.lock() };
        held = Some(next);
        on_a = !on_a;
    }
    assert!(held.is_some() && (a.in_read_section() || b.in_read_section()));
}

/// Cookies are equal exactly when they name the same point of the same domain.
pub fn cookies_compare_by_domain_and_point() {
    static A: Rcu<1> = Rcu::new();
    static B: Rcu<1> = Rcu::new();
    let (a1, a2) = (A.start_poll(), A.start_poll());
    assert_eq!(a1, a2);
    assert_ne!(a1, B.start_poll(), "same point, other domain");
    let mut r = A.reader().unwrap();
    r.synchronize(rcuref::rcu::spin).unwrap();
    assert_ne!(a1, A.start_poll(), "same domain, later point");
}

/// Linux's polled contract: `get_state` is `start_poll`'s cookie; the completed cookie
/// is done at once and stays done, raw `u32::MAX`; `cond_synchronize` returns at once for a done
/// cookie even inside a section, refuses to wait for an unfinished one there, and
/// waits for it outside; at most `ACTIVE_COOKIES` (3) unfinished targets.
pub fn linux_polled_contract() {
    static RCU: Rcu<3> = Rcu::with_dedicated(1);
    static OTHER: Rcu<3> = Rcu::new();
    assert_eq!(Rcu::<3>::ACTIVE_COOKIES, 3);
    // SAFETY: (test) slot 0 is used by this context only.
    let ctx = unsafe { RCU.context_reader(0) };
    let a = RCU.get_state();
    assert_eq!(a, RCU.start_poll(), "get_state and start_poll differ");
    let done = RCU.completed();
    assert!(done.is_done() && done.into_raw() == u32::MAX);
    assert!(a.poll());
    ctx.raw_lock().unwrap();
    assert_eq!(ctx.cond_synchronize(a, rcuref::rcu::spin), Ok(()));
    assert_eq!(ctx.cond_synchronize(done, rcuref::rcu::spin), Ok(()));
    let b = RCU.get_state();
    assert_eq!(
        ctx.cond_synchronize(b, rcuref::rcu::spin),
        Err(Error::InReadSection)
    );
    assert!(!b.poll(), "a grace period ended under a section");
    assert!(done.is_done(), "the completed cookie stopped being done");
    // SAFETY: (test) nothing was read in the section.
    unsafe { ctx.raw_unlock().unwrap() };
    assert_eq!(
        ctx.cond_synchronize(OTHER.get_state(), rcuref::rcu::spin),
        Err(Error::OtherDomain)
    );
    assert_eq!(ctx.cond_synchronize(b, rcuref::rcu::spin), Ok(()));
    assert!(b.is_done());
}

/// Bounded reclamation work: `DeferQueue::collect_at_most` and `CallQueue::run` hand out
/// at most their budget and report what is left; the call queue's barrier runs the rest.
pub fn reclamation_takes_a_budget() {
    static RCU: Rcu<2> = Rcu::new();
    static CALLS: CallQueue<'static, u32, 4, 2> = CallQueue::new(&RCU);
    let mut q: DeferQueue<u32, 4, 2> = DeferQueue::new(&RCU);
    for i in 0..4 {
        q.defer(i).unwrap();
        CALLS.call(i).unwrap();
    }
    let mut sum = 0;
    assert_eq!(q.collect_at_most(3, |v| sum += v), Ran { ran: 3, left: 1 });
    assert_eq!(q.collect_at_most(3, |v| sum += v), Ran { ran: 1, left: 0 });
    assert_eq!(CALLS.run(2, |v| sum += v), Ran { ran: 2, left: 2 });
    assert_eq!(CALLS.call(9).map_err(|r| r.error), Ok(()));
    let mut w = RCU.reader().unwrap();
    assert_eq!(
        CALLS.barrier(&mut w, rcuref::rcu::spin, |v| sum += v),
        Ok(3)
    );
    assert_eq!(sum, 6 + 6 + 9);
    assert_eq!(CALLS.pending(), 0);
}

/// A read section held by a token (`down_read`) holds grace periods until `up_read`,
/// takes a slot of its own, and reads through a nested guard.
pub fn a_read_token_holds_grace_periods() {
    static RCU: Rcu<2> = Rcu::new();
    let token = RCU.down_read().unwrap();
    assert_eq!(RCU.reader_count(), 1);
    let c = RCU.get_state();
    for _ in 0..100 {
        assert!(!c.poll(), "a grace period ended under a token");
    }
    drop(token.lock());
    assert!(!c.poll());
    token.up_read();
    assert!(c.poll(), "up_read did not end the section");
    assert_eq!(RCU.reader_count(), 0);
}

/// Feature `strict-grace-periods`: the outermost unlock drives the grace period, so a
/// cookie taken inside a section is done right after it, with nobody polling; a token's
/// end does the same.
#[cfg(feature = "strict-grace-periods")]
pub fn debug_aid_strict_grace_periods() {
    static RCU: Rcu<2> = Rcu::new();
    let r = RCU.reader().unwrap();
    let g = r.lock();
    let c = RCU.get_state();
    assert!(!c.is_done());
    drop(g);
    assert!(c.is_done(), "the unlock did not drive the grace period");
    let t = RCU.down_read().unwrap();
    let c = RCU.get_state();
    t.up_read();
    assert!(c.is_done(), "up_read did not drive the grace period");
}

/// Feature `debug-callbacks`: a key already queued is refused, the queue unchanged; once
/// its callback has run, the key may be queued again.
#[cfg(feature = "debug-callbacks")]
pub fn debug_aid_a_key_queued_twice_is_refused() {
    static RCU: Rcu<2> = Rcu::new();
    static Q: CallQueue<'static, u32, 4, 2> = CallQueue::new(&RCU);
    assert_eq!(Q.call_keyed(0x100, 1).map_err(|r| r.error), Ok(()));
    let again = Q.call_keyed(0x100, 2);
    assert!(matches!(
        again,
        Err(Refused {
            error: Error::Busy,
            value: 2
        })
    ));
    assert_eq!(Q.pending(), 1);
    let mut w = RCU.reader().unwrap();
    assert_eq!(Q.barrier(&mut w, rcuref::rcu::spin, |_| {}), Ok(1));
    assert_eq!(Q.call_keyed(0x100, 3).map_err(|r| r.error), Ok(()));
}

/// Dropping an inner guard does not end the section.
pub fn nested_sections() {
    static RCU: Rcu<2> = Rcu::new();
    let reader = RCU.reader().unwrap();
    let outer = reader.lock();
    let cookie = {
        let inner = reader.lock();
        let c = RCU.start_poll();
        drop(inner);
        c
    };
    assert!(reader.in_read_section(), "inner guard ended the section");
    for _ in 0..100 {
        assert!(
            !cookie.poll(),
            "grace period ended inside the outer section"
        );
    }
    drop(outer);
    assert!(!reader.in_read_section());
    assert!(
        cookie.poll(),
        "grace period did not end after the section closed"
    );
}

/// A stalled reader keeps every cookie taken during its section saying "not
/// yet", however often it is polled; all finish once it closes. (A blocking
/// `synchronize` against a stalled reader needs a second context: the host runs one on
/// a thread, `tests/rcu.rs`.)
pub fn stalled_reader() {
    static RCU: Rcu<2> = Rcu::new();
    let reader = RCU.reader().unwrap();
    let guard = reader.lock();
    let first = RCU.start_poll();
    for _ in 0..1000 {
        assert!(!first.poll(), "poll says done while a reader is stalled");
    }
    let second = RCU.start_poll();
    for _ in 0..1000 {
        assert!(
            !second.poll(),
            "a later cookie done while the reader is stalled"
        );
        assert!(!first.is_done());
    }
    drop(guard);
    assert!(first.poll(), "not done after the section closed");
    assert!(second.poll(), "not done after the section closed");
}

/// A leaked guard leaves its section open (every grace
/// period waits), until its reader is dropped, which ends it.
pub fn dropping_a_reader_ends_a_leaked_section() {
    static RCU: Rcu<2> = Rcu::new();
    let reader = RCU.reader().unwrap();
    core::mem::forget(reader.lock());
    let cookie = RCU.start_poll();
    for _ in 0..100 {
        assert!(!cookie.poll(), "done while a leaked section is open");
    }
    drop(reader);
    assert!(
        cookie.poll(),
        "dropping the reader did not end its leaked section"
    );
    assert_eq!(RCU.reader_count(), 0, "the slot stayed claimed");
    let mut writer = RCU.reader().unwrap();
    writer.synchronize(rcuref::rcu::spin).unwrap();
}

/// Item 10: a cookie that is not from this domain's sequence, or very old, never makes
/// `poll` loop for long: it answers within one grace period's worth of steps.
pub fn poll_is_bounded_for_any_cookie() {
    static RCU: Rcu<2> = Rcu::new();
    let reader = RCU.reader().unwrap();
    let guard = reader.lock(); // nothing can complete: a poll that advanced would spin
    for raw in [0u32, 1, 3, 5, 6, 1 << 30, 1 << 31, u32::MAX, u32::MAX - 3] {
        let before = RCU.gp_counter();
        let _ = RCU.cookie_from_raw(before.wrapping_add(raw)).poll();
        let moved = RCU.gp_counter().wrapping_sub(before);
        assert!(
            moved <= 5,
            "one poll advanced the counter by {} steps",
            moved
        );
    }
    drop(guard);
}

/// Grace periods across the wrap of the counter.
pub fn epoch_wraps() {
    static RCU: Rcu<2> = Rcu::new_at(u32::MAX - 9);
    let reader = RCU.reader().unwrap();
    let mut writer = RCU.reader().unwrap();
    let start = RCU.gp_counter();
    for _ in 0..8 {
        let guard = reader.lock();
        let cookie = RCU.start_poll();
        assert!(
            !cookie.poll(),
            "done while a reader is inside (near the wrap)"
        );
        drop(guard);
        writer.synchronize(rcuref::rcu::spin).unwrap();
        assert!(cookie.poll());
    }
    assert!(
        RCU.gp_counter() < start,
        "the counter did not wrap: the test proves nothing"
    );
}

/// Registration past the last slot is an error, never a panic or a block.
pub fn slots_run_out() {
    static RCU: Rcu<2> = Rcu::new();
    assert_eq!(RCU.capacity(), 2);
    let a = RCU.reader().unwrap();
    assert_eq!(RCU.reader_count(), 1);
    let b = RCU.reader().unwrap();
    assert_eq!(RCU.reader_count(), 2);
    assert!(matches!(RCU.reader(), Err(Error::NoFreeSlot)));
    assert!(matches!(RCU.with_reader(|_| ()), Err(Error::NoFreeSlot)));
    drop(a);
    assert_eq!(RCU.with_reader(|_| 7), Ok(7));
    drop(b);
    assert_eq!(RCU.reader_count(), 0);
}

/// The deferred queue gives values back when full and releases them only after a
/// grace period, oldest first.
pub fn defer_queue_is_bounded() {
    static RCU: Rcu<2> = Rcu::new();
    let reader = RCU.reader().unwrap();
    let mut writer = RCU.reader().unwrap();
    let mut q: DeferQueue<u32, 2, 2> = DeferQueue::new(&RCU);
    let guard = reader.lock();
    assert!(q.is_empty() && !q.is_full() && q.capacity() == 2);
    assert_eq!(q.defer(1), Ok(()));
    assert_eq!(q.len(), 1);
    assert!(!q.is_full());
    assert_eq!(q.defer(2), Ok(()));
    assert!(q.is_full() && q.len() == 2);
    assert_eq!(
        q.defer(3),
        Err(Refused {
            error: Error::Full,
            value: 3
        }),
        "a full queue must hand the value back"
    );
    let mut got = [0u32; 4];
    let mut n = 0;
    assert_eq!(q.collect(|_| ()), 0, "released while a reader was inside");
    drop(guard);
    assert_eq!(
        q.barrier(&mut writer, rcuref::rcu::spin, |v| {
            got[n] = v;
            n += 1;
        }),
        Ok(2)
    );
    assert_eq!(&got[..n], &[1, 2]);
    assert!(q.is_empty());
    // defer_or_wait with room never waits, even inside a reader's section.
    {
        let _inside = reader.lock();
        q.defer_or_wait(&mut writer, 3, |_| panic!("waited with room"), |_| ())
            .unwrap();
        assert_eq!(q.len(), 1);
    }
    q.barrier(&mut writer, rcuref::rcu::spin, |_| ()).unwrap();
    // defer_or_wait on a full queue waits instead of failing.
    q.defer(4).unwrap();
    q.defer(5).unwrap();
    let mut released = 0;
    q.defer_or_wait(&mut writer, 6, rcuref::rcu::spin, |_| released += 1)
        .unwrap();
    assert!(released >= 1 && q.len() <= 2);
    // Round and round the ring: values come back in order every time.
    let mut released = [0u32; 2];
    for round in 0..7u32 {
        q.barrier(&mut writer, rcuref::rcu::spin, |_| ()).unwrap();
        q.defer(2 * round).unwrap();
        q.defer(2 * round + 1).unwrap();
        let mut n = 0;
        assert_eq!(
            q.barrier(&mut writer, rcuref::rcu::spin, |v| {
                released[n] = v;
                n += 1;
            }),
            Ok(2)
        );
        assert_eq!(
            released,
            [2 * round, 2 * round + 1],
            "out of order round the ring"
        );
    }
    // A queue with no room at all degrades to a synchronous wait, never an error.
    let mut none: DeferQueue<u32, 0, 2> = DeferQueue::new(&RCU);
    let mut got = None;
    none.defer_or_wait(&mut writer, 9, rcuref::rcu::spin, |v| got = Some(v))
        .unwrap();
    assert!(
        got == Some(9),
        "a zero-capacity queue must release the value after waiting"
    );
}

/// Dropping a queue (`Mutant::QueueDropsPending`): values whose grace period has ended
/// are dropped, values still waiting are leaked, never dropped early, here with a reader
/// inside a section that started before they were deferred.
pub fn dropping_a_queue_never_drops_a_waiting_value() {
    static RCU: Rcu<2> = Rcu::new();
    static DROPPED: [AtomicBool; 4] = [const { AtomicBool::new(false) }; 4];
    struct V(usize);
    impl Drop for V {
        fn drop(&mut self) {
            DROPPED[self.0].store(true, Relaxed);
        }
    }
    let reader = RCU.reader().unwrap();
    let mut writer = RCU.reader().unwrap();
    {
        let mut q: DeferQueue<V, 4, 2> = DeferQueue::new(&RCU);
        assert!(q.defer(V(0)).is_ok() && q.defer(V(1)).is_ok());
        writer.synchronize(rcuref::rcu::spin).unwrap(); // 0 and 1 are done now
        let inside = reader.lock();
        assert!(q.defer(V(2)).is_ok() && q.defer(V(3)).is_ok());
        drop(q); // with the reader still inside
        for (i, d) in DROPPED.iter().enumerate().skip(2) {
            assert!(
                !d.load(Relaxed),
                "value {} dropped before its grace period",
                i
            );
        }
        drop(inside);
    }
    assert!(
        DROPPED[0].load(Relaxed) && DROPPED[1].load(Relaxed),
        "done values not dropped"
    );
    writer.synchronize(rcuref::rcu::spin).unwrap();
    for d in &DROPPED[2..] {
        assert!(!d.load(Relaxed), "a leaked value was dropped later");
    }
}

/// RcuCell: readers see the published value; a retired value comes back only after
/// the readers that could see it have left.
pub fn cell_publish_and_reclaim() {
    static RCU: Rcu<2> = Rcu::new();
    static mut A: u32 = 1;
    static mut B: u32 = 2;
    // SAFETY: (test) A and B are used only through this cell, in this test.
    let (a, b) = unsafe {
        (
            &mut *core::ptr::addr_of_mut!(A),
            &mut *core::ptr::addr_of_mut!(B),
        )
    };
    let cell = RcuCell::new(&RCU, a);
    let reader = RCU.reader().unwrap();
    let mut writer = RCU.reader().unwrap();
    let guard = reader.lock();
    assert_eq!(*cell.load(&guard), 1);
    let retired = cell.replace(b);
    let retired = match retired.try_reclaim() {
        Ok(_) => panic!("reclaimed while a reader holds the old value"),
        Err(r) => r,
    };
    assert_eq!(
        *cell.load(&guard),
        2,
        "a reader sees the new value after replace"
    );
    drop(guard);
    let old = retired
        .reclaim(&mut writer, rcuref::rcu::spin)
        .ok()
        .unwrap();
    assert_eq!(*old, 1);
    *old = 3; // exclusive again: reuse the memory
    let _ = cell.replace(old);
    assert_eq!(reader.section(|g| *cell.load(g)), 3);
}

/// RAM: a domain of 4 slots is a few words where padding is off (the default on 32-bit
/// microcontrollers), and a cache line per slot plus three where it is on.
pub fn layout_matches_the_padding_choice() {
    let size = core::mem::size_of::<Rcu<4>>();
    if rcuref::CACHE_PADDED {
        assert!(
            size >= 7 * 64,
            "padding on, but the domain is only {} bytes",
            size
        );
    } else {
        // phase, gp, two registration counters, four slots, the sleeping-wait flag
        // and the wake hook, the count of dedicated slots (+ a debug-only serial on
        // hosts; + the two heavy-fence marks in the asymmetric-fence mode; + the mark
        // that a cookie was handed out, 4 bytes with alignment, in builds without
        // heavy fences: bounded here in every build).
        let words = core::mem::size_of::<usize>();
        let marks = if cfg!(rcuref_asymmetric_fence) { 8 } else { 0 };
        assert!(
            size <= 4 * 8 + 4 + words + words + 4 + marks,
            "padding off, but the domain takes {} bytes",
            size
        );
    }
}

/// A reader dedicated to one context (a CPU, an interrupt level): in a `static`, on a
/// slot `reader` never hands out; sections nest on it (as an interrupt handler's would
/// inside the code it interrupted); a cookie taken inside names it as the holdout; a wait
/// from inside is refused.
pub fn context_readers_nest_and_report() {
    static RCU: Rcu<3> = Rcu::with_dedicated(1);
    // SAFETY: (test) slot 0 is dedicated, and only this test's context uses CTX.
    static CTX: ContextReader<'static, 3> = unsafe { RCU.context_reader(0) };
    assert_eq!(
        RCU.reader_count(),
        1,
        "the dedicated slot counts as claimed"
    );
    let a = RCU.reader().unwrap();
    let b = RCU.reader().unwrap();
    assert!(
        a.slot() != 0 && b.slot() != 0,
        "register handed out a dedicated slot"
    );
    assert!(matches!(RCU.reader(), Err(Error::NoFreeSlot)));
    drop((a, b));
    let outer = CTX.lock();
    let cookie = RCU.start_poll();
    {
        let _inner = CTX.lock(); // a handler nesting on its context's slot
        assert!(!cookie.poll());
    }
    assert!(
        !cookie.poll(),
        "leaving the nested section ended the outer one"
    );
    let mut holdouts = cookie.holdouts();
    let h = holdouts
        .next()
        .expect("the context holds the grace period up");
    assert!(h.slot == 0 && h.nesting == 1, "wrong holdout");
    assert!(holdouts.next().is_none());
    assert_eq!(
        CTX.synchronize(|_| core::ops::ControlFlow::Continue(())),
        Err(Error::InReadSection)
    );
    drop(outer);
    assert!(cookie.poll());
    assert!(
        cookie.holdouts().next().is_none(),
        "holdouts of a finished grace period"
    );
    assert_eq!(
        CTX.synchronize(|_| core::ops::ControlFlow::Continue(())),
        Ok(())
    );
}

/// A section entered without a guard (`ContextReader::raw_lock`, for C and for sections
/// that open in one function and close in another) is a section like a guard's: it
/// nests, holds grace periods up until its `raw_unlock`, and a `raw_unlock` with no
/// section open is refused with `Error::NotInSection`, changing nothing.
pub fn split_raw_lock_and_raw_unlock_hold_grace_periods() {
    static RCU: Rcu<2> = Rcu::with_dedicated(2);
    // SAFETY: (test) each reader is used by this one context only.
    static READERS: [ContextReader<'static, 2>; 2] = unsafe { RCU.context_readers() };
    let (me, writer) = (&READERS[0], &READERS[1]);
    // SAFETY: (test) nothing is read in a section here.
    assert_eq!(unsafe { me.raw_unlock() }, Err(Error::NotInSection));
    assert!(!me.in_read_section());
    me.raw_lock().unwrap();
    me.raw_lock().unwrap();
    let cookie = RCU.start_poll();
    // SAFETY: (test) as above; the level left is one this code entered.
    unsafe { me.raw_unlock() }.unwrap();
    assert!(me.in_read_section(), "one raw_unlock left both levels");
    for _ in 0..10 {
        assert!(
            !cookie.poll(),
            "a grace period ended under an entered section"
        );
    }
    // Another context's wait gives up; a hosted debug build sees that the section is
    // this thread's and refuses instead.
    assert!(matches!(
        writer.synchronize(|_| core::ops::ControlFlow::Break(())),
        Err(Error::GaveUp | Error::InReadSection)
    ));
    assert_eq!(me.synchronize(rcuref::rcu::spin), Err(Error::InReadSection));
    // A guard nests inside the entered section and leaves only its own level.
    drop(me.lock());
    assert!(me.in_read_section());
    // SAFETY: (test) as above.
    unsafe { me.raw_unlock() }.unwrap();
    assert!(!me.in_read_section());
    let mut polls = 0;
    while !cookie.poll() {
        polls += 1;
        assert!(
            polls < 10,
            "the grace period did not end after the raw_unlock"
        );
    }
    // SAFETY: (test) as above.
    assert_eq!(unsafe { me.raw_unlock() }, Err(Error::NotInSection));
    writer.synchronize(rcuref::rcu::spin).unwrap();
}

/// A per-CPU kernel's domain: every slot dedicated, one per CPU, made at once by
/// `Rcu::per_cpu` with a current-CPU hook. The writer on CPU 0 waits through CPU 0's own
/// reader in every blocking helper (`synchronize`, `Retired::reclaim`,
/// `RcuValue::replace`, `DeferQueue::defer_or_wait` and `barrier`): no slot of its own,
/// so `reader` has nothing to give and is never needed. Each helper refuses, without
/// waiting, a context inside a section of the domain and a context of another domain.
pub fn a_per_cpu_writer_needs_no_slot_of_its_own() {
    static CPU: AtomicU32 = AtomicU32::new(0);
    fn current_cpu() -> usize {
        CPU.load(Relaxed) as usize
    }
    static RCU: Rcu<2> = Rcu::with_dedicated(2);
    static OTHER: Rcu<2> = Rcu::with_dedicated(2);
    // SAFETY: (test) one context plays both CPUs in turn, `current_cpu` says which, and
    // no section is open when it switches.
    static CPUS: PerCpu<'static, 2, 2> = unsafe { RCU.per_cpu(current_cpu) };
    // SAFETY: (test) as above, for the other domain.
    static FOREIGN: [ContextReader<'static, 2>; 2] = unsafe { OTHER.context_readers() };
    static VALUE: RcuValue<'static, u32, 2, 2> = RcuValue::new(&RCU, 0);
    assert!(matches!(RCU.reader(), Err(Error::NoFreeSlot)));
    assert_eq!(CPUS.all()[1].slot(), 1);
    CPU.store(7, Relaxed);
    assert!(
        CPUS.current().is_none(),
        "a CPU beyond the array got a reader"
    );
    CPU.store(1, Relaxed);
    let cpu1 = CPUS.current().unwrap();
    assert_eq!(cpu1.slot(), 1);
    CPU.store(0, Relaxed);
    let me = CPUS.current().unwrap();
    assert_eq!(me.slot(), 0);

    // synchronize, on both kinds of wait hook.
    me.synchronize(rcuref::rcu::spin).unwrap();
    let mut polls = 0;
    me.synchronize(rcuref::rcu::forever(|| polls += 1)).unwrap();

    // RcuValue::replace through the CPU's reader, waiting for a buffer held by CPU 1.
    for v in 1..=3 {
        VALUE.replace(me, v, rcuref::rcu::spin).unwrap();
    }
    me.synchronize(rcuref::rcu::spin).unwrap(); // 2's buffer is free to reuse now
    let held = cpu1.lock();
    assert_eq!(*VALUE.load(&held), 3);
    VALUE.try_replace(4).ok().unwrap(); // into 2's buffer; 3 waits for CPU 1
    let gave_up = VALUE.replace(me, 5, |w| {
        if w.attempts() < 3 {
            core::ops::ControlFlow::Continue(())
        } else {
            core::ops::ControlFlow::Break(())
        }
    });
    // One thread plays both CPUs here: builds with the debug section table see CPU 1's
    // section on this thread and refuse at once; others wait, and the hook gives up.
    let expected = if rcuref::rcu::DETECTS_WAIT_IN_OTHER_SECTION {
        Error::InReadSection
    } else {
        Error::GaveUp
    };
    assert_eq!(
        gave_up.map_err(|r| (r.error, r.value)),
        Err((expected, 5)),
        "the buffer CPU 1 reads was reused, or the wait did not give up"
    );
    drop(held);
    VALUE.replace(me, 5, rcuref::rcu::spin).unwrap();

    // Retired::reclaim through the CPU's reader (by value and by reference).
    let (mut a, mut b, mut c) = (1u32, 2u32, 3u32);
    let cell = RcuCell::new(&RCU, &mut a);
    let was_a = cell
        .replace(&mut b)
        .reclaim(me, rcuref::rcu::spin)
        .ok()
        .unwrap();
    assert_eq!(*was_a, 1);
    #[allow(clippy::needless_borrows_for_generic_args)] // the by-reference form, tested
    let was_b = cell
        .replace(&mut c)
        .reclaim(&me, rcuref::rcu::spin)
        .ok()
        .unwrap();
    assert_eq!(*was_b, 2);

    // DeferQueue: defer_or_wait with a full queue, then barrier.
    let mut q: DeferQueue<'_, u32, 1, 2> = DeferQueue::new(&RCU);
    let mut released = 0;
    q.defer_or_wait(me, 10, rcuref::rcu::spin, |_| released += 1)
        .unwrap();
    q.defer_or_wait(me, 11, rcuref::rcu::spin, |_| released += 1)
        .unwrap();
    assert_eq!(
        released, 1,
        "the full queue did not wait and release the oldest"
    );
    assert_eq!(q.barrier(me, rcuref::rcu::spin, |_| released += 1), Ok(1));

    // Refused without waiting: inside a section of the domain (the wait would wait for
    // itself), and a reader of another domain.
    let open = me.lock();
    assert_eq!(me.synchronize(rcuref::rcu::spin), Err(Error::InReadSection));
    q.defer(12).unwrap();
    assert_eq!(
        q.barrier(me, rcuref::rcu::spin, drop),
        Err(Error::InReadSection)
    );
    let r = q.defer_or_wait(me, 13, rcuref::rcu::spin, drop);
    assert_eq!(
        r.map_err(|r| (r.error, r.value)),
        Err((Error::InReadSection, 13))
    );
    let retired = cell.replace(was_a);
    let retired = match retired.reclaim(me, rcuref::rcu::spin) {
        Err(r) if r.error == Error::InReadSection => r.value,
        _ => panic!("reclaim waited inside its own section"),
    };
    drop(open);
    let foreign = FOREIGN[0];
    assert_eq!(
        q.barrier(foreign, rcuref::rcu::spin, drop),
        Err(Error::OtherDomain)
    );
    let r = VALUE.replace(foreign, 6, rcuref::rcu::spin);
    assert_eq!(r.map_err(|r| r.error), Err(Error::OtherDomain));
    let retired = match retired.reclaim(foreign, rcuref::rcu::spin) {
        Err(r) if r.error == Error::OtherDomain => r.value,
        _ => panic!("reclaim waited through another domain"),
    };
    assert_eq!(*retired.reclaim(me, rcuref::rcu::spin).ok().unwrap(), 3);
    assert_eq!(q.barrier(me, rcuref::rcu::spin, drop), Ok(1));
    assert!(polls < 1_000_000);
}

/// RcuValue: a `static` that owns its buffers. A replacement needs a free buffer (or one
/// whose grace period has ended); the replaced value is dropped only after its grace
/// period; writers never wait in `try_replace`.
pub fn rcu_value_reuses_buffers_after_grace_periods() {
    static DROPS: AtomicU32 = AtomicU32::new(0);
    struct V(u32);
    impl Drop for V {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Relaxed);
        }
    }
    static RCU: Rcu<2> = Rcu::new();
    static VALUE: RcuValue<'static, V, 2, 2> = RcuValue::new(&RCU, V(1));
    let reader = RCU.reader().unwrap();
    let mut writer = RCU.reader().unwrap();
    let g = reader.lock();
    assert_eq!(VALUE.load(&g).0, 1);
    assert!(VALUE.try_replace(V(2)).is_ok(), "the spare buffer was free");
    assert_eq!(
        VALUE.load(&g).0,
        2,
        "a section sees the new value after replace"
    );
    match VALUE.try_replace(V(3)) {
        Err(Refused {
            error: Error::Full,
            value,
        }) => assert_eq!(value.0, 3),
        _ => panic!("replaced while the old value's readers may still be inside"),
    }
    assert_eq!(DROPS.load(Relaxed), 1, "only the refused value was dropped");
    drop(g);
    assert!(
        VALUE.try_replace(V(4)).is_ok(),
        "the old buffer's grace period has ended"
    );
    assert_eq!(
        DROPS.load(Relaxed),
        2,
        "V(1) dropped when its buffer was reused"
    );
    assert_eq!(reader.section(|g| VALUE.load(g).0), 4);
    // The blocking form, with nobody inside: the retired buffer is free at once. (Waiting
    // for a reader of another context: the host's `rcu_value_waits_for_readers`.)
    assert!(VALUE.replace(&mut writer, V(5), rcuref::rcu::spin).is_ok());
    assert_eq!(reader.section(|g| VALUE.load(g).0), 5);
    assert_eq!(DROPS.load(Relaxed), 3);
}

/// A blocking wait with a leaked guard. Returns what synchronize said
/// (an error in every build, never a hang).
pub fn synchronize_in_read_section() -> Result<(), Error> {
    static RCU: Rcu<1> = Rcu::new();
    let mut reader = RCU.reader().unwrap();
    core::mem::forget(reader.lock());
    reader.synchronize(rcuref::rcu::spin)
}

// ---- the reader-age torture (rcutorture's "pipe") -------------------------------------
//
// The writer publishes objects one after another; each retired object's `pipe` starts
// at 1 and grows by one after every grace period, and the object is reused once it
// reaches FREE_AT. A reader notes the largest `pipe` it sees on an object inside one
// section: 0 or 1 is fine, 2 or more means a full grace period ended while the reader
// was inside (RCU is broken). A changed generation means the object was reused under it.

pub const OBJECTS: usize = 8;
const FREE_AT: u32 = 3;
const FREE: u32 = u32::MAX;
/// `current` before the writer has published anything.
const NOTHING: u32 = u32::MAX;

pub struct Obj {
    pipe: AtomicU32,
    gen: AtomicU32,
}

pub struct Torture {
    pub rcu: Rcu<4>,
    objs: [Obj; OBJECTS],
    current: AtomicU32,
    done: AtomicBool,
    /// histogram[age]: reads that saw an object this many grace periods old (3 = more).
    pub histogram: [AtomicU32; 4],
    pub reused_under_reader: AtomicU32,
    pub exhausted: AtomicU32,
    pub grace_periods: AtomicU32,
    /// Set while the blocking writer is inside `synchronize` (for "mid-grace-period").
    pub in_synchronize: AtomicBool,
    /// Ends the blocking writer early (after its current round), for runs whose length
    /// another context decides.
    pub stop: AtomicBool,
    /// Polled writer (interrupt context): publications so far, the current object, and
    /// the cookie of the grace period it is waiting for (if `waiting`).
    pub published: AtomicU32,
    cur: AtomicU32,
    waiting: AtomicBool,
    cookie: AtomicU32,
}

/// Spins `n` times: how long a read section holds its object.
pub fn spin(n: u32) {
    for _ in 0..n {
        core::hint::spin_loop();
    }
}

impl Torture {
    pub const fn new() -> Self {
        Self::with_dedicated(0)
    }

    /// A torture whose domain reserves its first `dedicated` slots for `ContextReader`s.
    pub const fn with_dedicated(dedicated: usize) -> Self {
        Torture {
            rcu: Rcu::with_dedicated(dedicated),
            objs: [const {
                Obj {
                    pipe: AtomicU32::new(FREE),
                    gen: AtomicU32::new(0),
                }
            }; OBJECTS],
            current: AtomicU32::new(NOTHING),
            done: AtomicBool::new(false),
            histogram: [const { AtomicU32::new(0) }; 4],
            reused_under_reader: AtomicU32::new(0),
            exhausted: AtomicU32::new(0),
            grace_periods: AtomicU32::new(0),
            in_synchronize: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            published: AtomicU32::new(0),
            cur: AtomicU32::new(NOTHING),
            waiting: AtomicBool::new(false),
            cookie: AtomicU32::new(0),
        }
    }

    /// One step of a writer that must never block (an interrupt handler): if a grace
    /// period is pending, poll it and age the retired objects when it ends; otherwise
    /// publish a new object, retire the old one and start a grace period.
    pub fn writer_step_polled(&self) {
        if self.waiting.load(Relaxed) {
            if !self.rcu.cookie_from_raw(self.cookie.load(Relaxed)).poll() {
                return;
            }
            self.waiting.store(false, Relaxed);
            self.grace_periods.fetch_add(1, Relaxed);
            self.age_retired();
            return;
        }
        let cur = self.cur.load(Relaxed);
        let Some(next) = (0..OBJECTS as u32)
            .find(|&j| j != cur && self.objs[j as usize].pipe.load(Relaxed) == FREE)
        else {
            self.exhausted.fetch_add(1, Relaxed);
            return;
        };
        let round = self.published.fetch_add(1, Relaxed) + 1;
        let o = &self.objs[next as usize];
        o.gen.store(round, Relaxed);
        o.pipe.store(0, Relaxed);
        self.current.store(next, Release); // publish
        if cur != NOTHING {
            self.objs[cur as usize].pipe.store(1, Release); // retire
        }
        self.cur.store(next, Relaxed);
        self.cookie.store(self.rcu.start_poll().into_raw(), Relaxed);
        self.waiting.store(true, Relaxed);
    }

    /// Reads (with long sections, so the writer's interrupts land inside them) until the
    /// polled writer has published `rounds` objects.
    pub fn reader_until_published(&self, rounds: u32, delay: u32) {
        while self.published.load(Relaxed) < rounds {
            self.read_once(delay);
        }
    }

    /// One read section: the reader half, also callable from an interrupt handler
    /// (it takes a slot for the section). `delay` spins inside the section.
    pub fn read_once(&self, delay: u32) {
        let r = self.rcu.with_reader(|_guard| self.read_body(delay));
        // A slot is always free for the torture's few readers.
        r.unwrap();
    }

    /// One read section on a context's dedicated slot: from the thread, or from a
    /// handler that nests on the slot of the thread it interrupted.
    pub fn read_once_in(&self, ctx: &ContextReader<'_, 4>, delay: u32) {
        self.read_once_in_holding(ctx, || spin(delay));
    }

    /// One read section on a context's dedicated slot that holds its object for as long
    /// as `hold` runs (a control that must see a section span interrupts, whatever the
    /// speed of the host running the emulator, waits for ticks instead of spinning).
    pub fn read_once_in_holding(&self, ctx: &ContextReader<'_, 4>, hold: impl FnOnce()) {
        let _guard = ctx.lock();
        self.read_body_holding(hold);
    }

    /// What a read section does: load the current object, hold it `delay` spins, and
    /// record its age (and whether it was reused under us).
    fn read_body(&self, delay: u32) {
        self.read_body_holding(|| spin(delay));
    }

    /// `read_body`, holding the object while `hold` runs.
    fn read_body_holding(&self, hold: impl FnOnce()) {
        let j = self.current.load(Acquire);
        if j == NOTHING {
            return; // the writer has not started
        }
        let o = &self.objs[j as usize];
        let (g1, p1) = (o.gen.load(Acquire), o.pipe.load(Acquire));
        hold();
        let (p2, g2) = (o.pipe.load(Acquire), o.gen.load(Acquire));
        let age = if p1 == FREE || p2 == FREE {
            3
        } else {
            p1.max(p2).min(3)
        };
        self.histogram[age as usize].fetch_add(1, Relaxed);
        if g1 != g2 {
            self.reused_under_reader.fetch_add(1, Relaxed);
        }
    }

    /// Reads until the writer is done (for a second thread or hart), or another reader
    /// has panicked (the writer stops, and its `stop` ends the others).
    pub fn reader_loop(&self) {
        /// Stops the writer if this reader panics (it is disarmed on the way out
        /// otherwise): the writer would wait for reads that never come.
        struct StopsWriter<'a>(&'a AtomicBool, bool);
        impl Drop for StopsWriter<'_> {
            fn drop(&mut self) {
                if self.1 {
                    self.0.store(true, Relaxed);
                }
            }
        }
        let mut armed = StopsWriter(&self.stop, true);
        let mut i = 0u32;
        while !self.done.load(Acquire) {
            self.read_once(i % 64);
            i = i.wrapping_add(1);
        }
        armed.1 = false;
    }

    /// Reads done so far (all ages).
    pub fn reads(&self) -> u32 {
        self.ages().iter().sum()
    }

    /// The writer half: at least `rounds` publications, each followed by a grace period,
    /// and on until the readers have done `min_reads` (so the two really overlap). Ends
    /// the run (the readers stop) when it returns and when it panics.
    pub fn writer(&self, rounds: u32, min_reads: u32, mut wait: impl FnMut()) {
        /// Sets `done` when dropped, unwinding included: readers waiting for it would
        /// otherwise spin for ever and the run would hang instead of failing.
        struct EndsRun<'a>(&'a AtomicBool);
        impl Drop for EndsRun<'_> {
            fn drop(&mut self) {
                self.0.store(true, Release);
            }
        }
        let _ends = EndsRun(&self.done);
        let mut w = self.rcu.reader().unwrap();
        let first = 0usize;
        self.objs[first].pipe.store(0, Relaxed);
        self.current.store(first as u32, Release);
        let mut cur = first;
        let mut round = 0u32;
        while (round < rounds || self.reads() < min_reads) && !self.stop.load(Relaxed) {
            round += 1;
            // Find a free object; if none, let grace periods age the retired ones.
            let next = loop {
                if let Some(j) =
                    (0..OBJECTS).find(|&j| j != cur && self.objs[j].pipe.load(Relaxed) == FREE)
                {
                    break j;
                }
                self.exhausted.fetch_add(1, Relaxed);
                self.age(&mut w, &mut wait);
            };
            let o = &self.objs[next];
            o.gen.store(round, Relaxed);
            o.pipe.store(0, Relaxed);
            self.current.store(next as u32, Release); // publish
            self.objs[cur].pipe.store(1, Release); // retire the old one
            cur = next;
            self.age(&mut w, &mut wait);
        }
    }

    /// One grace period, then every retired object is one older (and freed at FREE_AT).
    fn age(&self, w: &mut rcuref::rcu::Reader<'_, 4>, wait: &mut impl FnMut()) {
        self.in_synchronize.store(true, Relaxed);
        w.synchronize(rcuref::rcu::forever(&mut *wait)).unwrap();
        self.in_synchronize.store(false, Relaxed);
        self.grace_periods.fetch_add(1, Relaxed);
        self.age_retired();
    }

    /// Every retired object is one grace period older (and free at FREE_AT).
    fn age_retired(&self) {
        for o in &self.objs {
            let p = o.pipe.load(Relaxed);
            if p != FREE && p >= 1 {
                o.pipe
                    .store(if p + 1 >= FREE_AT { FREE } else { p + 1 }, Release);
            }
        }
    }

    /// Reads seen at ages 0, 1, 2, 3+.
    pub fn ages(&self) -> [u32; 4] {
        [0, 1, 2, 3].map(|i| self.histogram[i].load(Relaxed))
    }

    /// Panics unless the run was clean: no reader saw an object older than one grace
    /// period, and none saw it reused.
    pub fn check(&self) {
        let h = self.ages();
        assert!(
            h[0] + h[1] > 0,
            "no reads happened: the torture proves nothing"
        );
        assert!(
            h[2] == 0 && h[3] == 0,
            "a reader saw an object retired two or more grace periods ago"
        );
        assert!(
            self.reused_under_reader.load(Relaxed) == 0,
            "an object was reused under a reader"
        );
    }
}

impl Default for Torture {
    fn default() -> Self {
        Self::new()
    }
}
