//! Host tests for the RCU: the shared bodies (also run on every QEMU target).

#[path = "cases/rcu.rs"]
mod cases;

/// A reader on another thread, inside a read section of its domain from `start` until
/// `release` (the stalled reader that blocking waits are tested against).
struct HeldReader {
    release: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
    slot: usize,
}

impl HeldReader {
    /// Returns once the reader is inside its section.
    fn start<const N: usize>(rcu: &'static rcuref::rcu::Rcu<N>) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
        use std::sync::{mpsc, Arc};
        let release = Arc::new(AtomicBool::new(false));
        let go_on = release.clone();
        let (inside, entered) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let reader = rcu.reader().unwrap();
            reader.section(|_| {
                inside.send(reader.slot()).unwrap();
                while !go_on.load(SeqCst) {
                    std::thread::yield_now();
                }
            });
        });
        let slot = entered.recv().unwrap();
        HeldReader {
            release,
            thread,
            slot,
        }
    }

    /// Its slot in the domain.
    fn slot(&self) -> usize {
        self.slot
    }

    /// Lets it leave its section, and waits until its thread has ended.
    fn release(self) {
        self.release
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.join().unwrap();
    }
}

#[test]
fn nested_sections() {
    cases::nested_sections();
}

#[test]
fn grace_periods_end_under_back_to_back_readers() {
    cases::grace_periods_end_under_back_to_back_readers();
}

#[test]
fn cookies_compare_by_domain_and_point() {
    cases::cookies_compare_by_domain_and_point();
}

#[test]
fn stalled_reader() {
    cases::stalled_reader();
}

#[test]
fn epoch_wraps() {
    cases::epoch_wraps();
}

#[test]
fn linux_polled_contract() {
    cases::linux_polled_contract();
}

#[test]
fn reclamation_takes_a_budget() {
    cases::reclamation_takes_a_budget();
}

#[test]
fn a_read_token_holds_grace_periods() {
    cases::a_read_token_holds_grace_periods();
}

#[test]
fn slots_run_out() {
    cases::slots_run_out();
}

#[test]
fn defer_queue_is_bounded() {
    cases::defer_queue_is_bounded();
}

#[test]
fn dropping_a_queue_never_drops_a_waiting_value() {
    cases::dropping_a_queue_never_drops_a_waiting_value();
}

#[test]
fn cell_publish_and_reclaim() {
    cases::cell_publish_and_reclaim();
}

#[test]
fn context_readers_nest_and_report() {
    cases::context_readers_nest_and_report();
}

#[test]
fn split_raw_lock_and_raw_unlock_hold_grace_periods() {
    cases::split_raw_lock_and_raw_unlock_hold_grace_periods();
}

#[test]
fn a_per_cpu_writer_needs_no_slot_of_its_own() {
    cases::a_per_cpu_writer_needs_no_slot_of_its_own();
}

#[test]
fn rcu_value_reuses_buffers_after_grace_periods() {
    cases::rcu_value_reuses_buffers_after_grace_periods();
}

#[test]
fn layout_matches_the_padding_choice() {
    cases::layout_matches_the_padding_choice();
}

#[test]
fn dropping_a_reader_ends_a_leaked_section() {
    cases::dropping_a_reader_ends_a_leaked_section();
}

#[test]
fn poll_is_bounded_for_any_cookie() {
    cases::poll_is_bounded_for_any_cookie();
}

/// A blocking wait with a leaked guard is a documented error in every build,
/// never a hang (and never a panic: debug builds used to panic here).
#[test]
fn synchronize_in_read_section_is_an_error() {
    assert_eq!(
        cases::synchronize_in_read_section(),
        Err(rcuref::Error::InReadSection)
    );
}

/// A stalled reader, blocking half: `synchronize` keeps calling its wait hook while a reader on
/// another thread is inside, and returns once that section ends.
#[test]
fn synchronize_waits_for_a_reader_on_another_thread() {
    static RCU: rcuref::rcu::Rcu<2> = rcuref::rcu::Rcu::new();
    let mut held = Some(HeldReader::start(&RCU));
    let mut waits = 0;
    let mut writer = RCU.reader().unwrap();
    writer
        .synchronize(rcuref::rcu::forever(|| {
            waits += 1;
            if waits == 51 {
                held.take().unwrap().release();
            }
            std::thread::yield_now();
        }))
        .unwrap();
    assert!(
        waits > 50,
        "synchronize returned while the reader was still inside"
    );
}

/// Two readers on one thread: waiting through one while the other is inside a section
/// would deadlock. Debug builds with feature `std` (the host tests) report it.
#[cfg(debug_assertions)]
#[test]
fn waiting_inside_another_readers_section_is_an_error() {
    use rcuref::rcu::{DeferQueue, RcuCell};
    use rcuref::{Error, Refused};
    #[allow(clippy::assertions_on_constants)]
    let () = assert!(
        rcuref::rcu::DETECTS_WAIT_IN_OTHER_SECTION,
        "the host tests run with feature `std` (Cargo.toml's dev-dependency on itself)"
    );
    static RCU: rcuref::rcu::Rcu<3> = rcuref::rcu::Rcu::new();
    let a = RCU.reader().unwrap();
    let mut b = RCU.reader().unwrap();
    let guard = a.lock();
    assert_eq!(b.synchronize(rcuref::rcu::spin), Err(Error::InReadSection));
    let mut q: DeferQueue<u32, 1, 3> = DeferQueue::new(&RCU);
    q.defer(1).unwrap();
    assert_eq!(
        q.barrier(&mut b, rcuref::rcu::spin, drop),
        Err(Error::InReadSection)
    );
    assert_eq!(
        q.defer_or_wait(&mut b, 2, rcuref::rcu::spin, drop),
        Err(Refused {
            error: Error::InReadSection,
            value: 2
        })
    );
    let mut x = 1u32;
    let mut y = 2u32;
    let cell = RcuCell::new(&RCU, &mut x);
    let retired = cell.replace(&mut y);
    let retired = match retired.reclaim(&mut b, rcuref::rcu::spin) {
        Err(Refused {
            error: Error::InReadSection,
            value: r,
        }) => r,
        other => panic!("expected InReadSection, got {:?}", other.map(|v| *v)),
    };
    drop(guard);
    assert_eq!(*retired.reclaim(&mut b, rcuref::rcu::spin).unwrap(), 1);
    assert_eq!(b.synchronize(rcuref::rcu::spin), Ok(()));
    assert_eq!(q.barrier(&mut b, rcuref::rcu::spin, drop), Ok(1));
}

/// Item 8: queues, retired values and cells are bound to their domain; a reader or
/// guard of another domain is an error, never a wrong answer.
#[test]
fn objects_of_another_domain_are_refused() {
    use rcuref::rcu::{DeferQueue, RcuCell};
    use rcuref::{Error, Refused};
    static A: rcuref::rcu::Rcu<2> = rcuref::rcu::Rcu::new();
    static B: rcuref::rcu::Rcu<2> = rcuref::rcu::Rcu::new();
    let reader_a = A.reader().unwrap();
    let mut writer_b = B.reader().unwrap();
    // A value deferred on A is released only after a grace period of A, whoever drives.
    let mut q: DeferQueue<u32, 2, 2> = DeferQueue::new(&A);
    let guard = reader_a.lock();
    q.defer(7).unwrap();
    assert_eq!(
        q.barrier(&mut writer_b, rcuref::rcu::spin, drop),
        Err(Error::OtherDomain)
    );
    assert_eq!(
        q.defer_or_wait(&mut writer_b, 8, rcuref::rcu::spin, drop),
        Err(Refused {
            error: Error::OtherDomain,
            value: 8
        })
    );
    let mut writer_b2 = B.reader().unwrap();
    writer_b2.synchronize(rcuref::rcu::spin).unwrap(); // B's grace periods mean nothing to A
    assert_eq!(q.collect(drop), 0, "released during a reader of its domain");
    let mut x = 1u32;
    let mut y = 2u32;
    let cell = RcuCell::new(&A, &mut x);
    let b_reader = B.reader();
    assert!(b_reader.is_err(), "B has two slots, both taken");
    drop(writer_b2);
    let b_reader = B.reader().unwrap();
    assert_eq!(
        b_reader.section(|g| cell.try_load(g).copied()),
        Err(Error::OtherDomain)
    );
    let retired = cell.replace(&mut y);
    let retired = match retired.reclaim(&mut writer_b, rcuref::rcu::spin) {
        Err(Refused {
            error: Error::OtherDomain,
            value: r,
        }) => r,
        other => panic!("expected OtherDomain, got {:?}", other.map(|v| *v)),
    };
    assert!(std::ptr::eq(retired.cookie().domain(), &A));
    drop(guard);
    assert_eq!(q.collect(drop), 1);
    assert_eq!(*retired.try_reclaim().ok().unwrap(), 1);
}

/// Item 9: a panicking `reclaim` leaves the queue consistent: the value it was given is
/// gone, the others stay queued and are released by the next collect.
#[test]
fn a_panicking_reclaim_leaves_the_queue_consistent() {
    use rcuref::rcu::DeferQueue;
    static RCU: rcuref::rcu::Rcu<2> = rcuref::rcu::Rcu::new();
    let mut q: DeferQueue<u32, 4, 2> = DeferQueue::new(&RCU);
    for v in 1..=3 {
        q.defer(v).unwrap();
    }
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        q.collect(|v| {
            if v == 2 {
                panic!("reclaim of 2 fails");
            }
        })
    }));
    assert!(r.is_err());
    assert_eq!(q.len(), 1, "the panicking item was not taken off the queue");
    let mut got = Vec::new();
    assert_eq!(q.collect(|v| got.push(v)), 1);
    assert_eq!(got, [3]);
    q.defer(4).unwrap();
    assert_eq!(q.collect(|v| got.push(v)), 1, "the queue is wedged");
}

/// Item 9: a wait hook that panics in `defer_or_wait` leaks the value it was deferring
/// instead of dropping it before its grace period; the queue stays usable.
#[test]
fn a_panicking_wait_hook_never_drops_a_value_early() {
    use rcuref::rcu::DeferQueue;
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
    static RCU: rcuref::rcu::Rcu<3> = rcuref::rcu::Rcu::new();
    static DROPS: AtomicU32 = AtomicU32::new(0);
    struct Tracked;
    impl Drop for Tracked {
        fn drop(&mut self) {
            DROPS.fetch_add(1, SeqCst);
        }
    }
    let mut writer = RCU.reader().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (inside_tx, inside_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        let reader = RCU.reader().unwrap();
        reader.section(|_| {
            inside_tx.send(()).unwrap();
            rx.recv().unwrap();
        });
    });
    inside_rx.recv().unwrap();
    let mut q: DeferQueue<Tracked, 1, 3> = DeferQueue::new(&RCU);
    q.defer(Tracked).ok().unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = q.defer_or_wait(&mut writer, Tracked, |_| panic!("wait hook fails"), drop);
    }));
    assert!(r.is_err());
    assert_eq!(
        DROPS.load(SeqCst),
        0,
        "a value was dropped before its grace period"
    );
    tx.send(()).unwrap();
    t.join().unwrap();
    assert_eq!(q.barrier(&mut writer, rcuref::rcu::spin, drop), Ok(1));
    assert_eq!(DROPS.load(SeqCst), 1);
}

#[test]
fn guards_and_readers_are_not_send() {
    // Compile-time promises, pinned with a trick that fails to compile if they change:
    // a blanket impl for all T and a specific one for Send types make the call ambiguous
    // when T: Send.
    trait AmbiguousIfSend<A> {
        fn some_item() {}
    }
    impl<T: ?Sized> AmbiguousIfSend<()> for T {}
    #[allow(dead_code)]
    struct Invalid;
    impl<T: ?Sized + Send> AmbiguousIfSend<Invalid> for T {}
    <rcuref::rcu::Reader<'static, 2> as AmbiguousIfSend<_>>::some_item();
    <rcuref::rcu::Guard<'static, 'static, 2> as AmbiguousIfSend<_>>::some_item();
}

/// The re-entry race under Miri (which checks Rust's memory model, not just this
/// machine's): a reader leaves a section that read the published value and at once
/// enters a new one, while a writer replaces the value and reclaims it as soon as its
/// cookie is done. The reclaim must be ordered after the first section's read; with a
/// relaxed store on entry it was not (Miri: a data race).
#[test]
fn a_reader_reentering_its_section_keeps_reclamation_ordered() {
    use rcuref::rcu::{Rcu, RcuCell};
    use std::sync::atomic::{AtomicBool, Ordering::*};
    fn once() {
        let rcu: Rcu<2> = Rcu::new();
        let (mut a, mut b) = (1u64, 2u64);
        let cell = RcuCell::new(&rcu, &mut a);
        let read = AtomicBool::new(false);
        let finished = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let reader = rcu.reader().unwrap();
                {
                    let g = reader.lock();
                    assert!(matches!(*cell.load(&g), 1 | 2));
                    read.store(true, Relaxed);
                    for _ in 0..200 {
                        if rcu.gp_counter() >= 5 {
                            break;
                        }
                        std::thread::yield_now();
                    }
                }
                let _again = reader.lock(); // a new section at once
                while !finished.load(Acquire) {
                    std::thread::yield_now();
                }
            });
            let _ = rcu.cookie_from_raw(2).poll();
            while !read.load(Relaxed) {
                std::thread::yield_now();
            }
            let mut retired = cell.replace(&mut b);
            for _ in 0..400 {
                match retired.try_reclaim() {
                    Ok(old) => {
                        *old = 0xDEAD; // the write that must come after the reader's read
                        break;
                    }
                    Err(back) => retired = back,
                }
                std::thread::yield_now();
            }
            finished.store(true, Release);
        });
    }
    for _ in 0..if cfg!(miri) { 20 } else { 200 } {
        once();
    }
}

/// The per-thread section tracking (debug, `std`) tells domains apart even when a new
/// one lives where a freed one did, whose reader leaked a section on this thread: the
/// new domain's waits are not refused.
#[cfg(debug_assertions)]
#[test]
fn a_domain_at_a_freed_domains_address_is_not_confused_with_it() {
    use rcuref::rcu::Rcu;
    #[inline(never)]
    fn leak_a_section() -> usize {
        let rcu = Box::new(Rcu::<2>::new());
        let addr = &*rcu as *const Rcu<2> as usize;
        let reader = rcu.reader().unwrap();
        std::mem::forget(reader.lock());
        std::mem::forget(reader);
        drop(rcu);
        addr
    }
    let old = leak_a_section();
    let rcu = Box::new(Rcu::<2>::new());
    if &*rcu as *const Rcu<2> as usize != old {
        return; // the allocator put it elsewhere: nothing to confuse
    }
    let mut me = rcu.reader().unwrap();
    assert_eq!(
        me.synchronize(rcuref::rcu::spin),
        Ok(()),
        "a fresh domain's wait was refused"
    );
}

/// A stalled reader is named by the wait that it holds up; a wait can
/// give up (hook or deadline) and leaves the domain consistent: the next wait, once the
/// reader has left, succeeds.
#[test]
fn a_stalled_reader_is_named_and_a_wait_can_give_up() {
    use rcuref::rcu::Rcu;
    use rcuref::rcu::{Deadline, StallDetector};
    use rcuref::Error;
    use std::ops::ControlFlow;
    static RCU: Rcu<3> = Rcu::new();
    let held = HeldReader::start(&RCU);
    let mut writer = RCU.reader().unwrap();
    // A stall report with a threshold on a clock we supply (here: attempts).
    let ticks = std::cell::Cell::new(0u64);
    let mut named = Vec::new();
    let mut stall = StallDetector::new(
        || ticks.get(),
        50,
        |waited, holdouts| {
            assert!(waited >= 50);
            named.extend(holdouts.map(|h| h.slot));
        },
    );
    let r = writer.synchronize(|w| {
        ticks.set(ticks.get() + 1);
        stall.observe(w)?;
        if w.attempts() > 200 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    assert_eq!(r, Err(Error::GaveUp));
    assert_eq!(
        named,
        [held.slot()],
        "the stall report did not name the reader"
    );
    // A deadline on a real clock gives up too.
    let start = std::time::Instant::now();
    let mut deadline = Deadline::new(|| start.elapsed().as_millis() as u64, 20);
    assert_eq!(writer.synchronize(deadline.hook()), Err(Error::GaveUp));
    assert!(start.elapsed() >= std::time::Duration::from_millis(20));
    // Consistent afterwards: once the reader leaves, waits succeed.
    held.release();
    assert_eq!(writer.synchronize(rcuref::rcu::spin), Ok(()));
}

/// RcuValue's blocking replace waits for the readers of the oldest retired value; with a
/// hook it can give up instead, handing the value back; a second writer at the same time
/// is refused as busy, never made to wait.
#[test]
fn rcu_value_waits_for_readers() {
    use rcuref::rcu::{Rcu, RcuValue};
    use rcuref::{Error, Refused};
    use std::ops::ControlFlow;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    static RCU: Rcu<3> = Rcu::new();
    static VALUE: RcuValue<'static, u32, 2, 3> = RcuValue::new(&RCU, 1);
    static INSIDE: AtomicBool = AtomicBool::new(false);
    static RELEASE: AtomicBool = AtomicBool::new(false);
    VALUE.try_replace(2).unwrap(); // buffer 0 retired...
    RCU.reader()
        .unwrap()
        .synchronize(rcuref::rcu::spin)
        .unwrap(); // ...and its grace period over
    let t = std::thread::spawn(|| {
        let reader = RCU.reader().unwrap();
        reader.section(|g| {
            assert_eq!(*VALUE.load(g), 2);
            INSIDE.store(true, SeqCst);
            while !RELEASE.load(SeqCst) {
                std::thread::yield_now();
            }
            assert_eq!(*VALUE.load(g), 3, "the section sees the replacement");
        });
    });
    while !INSIDE.load(SeqCst) {
        std::thread::yield_now();
    }
    VALUE.try_replace(3).unwrap(); // reuses buffer 0; retires the one the reader read
    let mut writer = RCU.reader().unwrap();
    match VALUE.replace(&mut writer, 4, |w| {
        if w.attempts() > 100 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }) {
        Err(Refused {
            error: Error::GaveUp,
            value: 4,
        }) => {}
        other => panic!(
            "expected to give up, got {:?}",
            other.err().map(|r| r.error)
        ),
    }
    RELEASE.store(true, SeqCst);
    VALUE
        .replace(&mut writer, 4, rcuref::rcu::forever(std::thread::yield_now))
        .unwrap();
    t.join().unwrap();
    assert_eq!(RCU.with_reader(|g| *VALUE.load(g)).unwrap(), 4);
}

/// `barrier` waits for the newest value's grace period, so it releases every pending
/// value even while a reader on another thread still holds them up when it is called.
#[test]
fn barrier_waits_for_every_pending_value() {
    // Three values with two different grace periods: waiting for any but the newest
    // would leave some pending.
    barrier_case(&[3, 4, 5], true);
}

/// The same with two values after the ring has wrapped: a wrong index for the newest
/// value lands on an empty place, and the barrier would not wait at all.
#[test]
fn barrier_finds_the_newest_value_in_a_wrapped_ring() {
    barrier_case(&[3, 4], false);
}

/// A queue of 4 places whose front has moved to place 2; a reader on another thread
/// is inside a section while `values` are deferred (with `collect` after the first
/// when `split`, which starts its grace period so the later ones get a later one);
/// then `barrier` must wait for the reader and release every value.
fn barrier_case(values: &[u32], split: bool) {
    use rcuref::rcu::{DeferQueue, Rcu};
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let rcu: Rcu<3> = Rcu::new();
    let inside = AtomicBool::new(false);
    let release = AtomicBool::new(false);
    let mut q: DeferQueue<u32, 4, 3> = DeferQueue::new(&rcu);
    q.defer(1).unwrap();
    q.defer(2).unwrap();
    assert_eq!(q.collect(|_| ()), 2); // rotate the ring: the front is place 2 now
    std::thread::scope(|s| {
        s.spawn(|| {
            let reader = rcu.reader().unwrap();
            reader.section(|_| {
                inside.store(true, SeqCst);
                while !release.load(SeqCst) {
                    std::thread::yield_now();
                }
            });
        });
        while !inside.load(SeqCst) {
            std::thread::yield_now();
        }
        for (i, &v) in values.iter().enumerate() {
            q.defer(v).unwrap();
            if split && i == 0 {
                assert_eq!(q.collect(|_| ()), 0);
            }
        }
        let mut writer = rcu.reader().unwrap();
        let mut waits = 0;
        let mut got = Vec::new();
        let n = q
            .barrier(
                &mut writer,
                rcuref::rcu::forever(|| {
                    waits += 1;
                    if waits == 20 {
                        release.store(true, SeqCst);
                    }
                    std::thread::yield_now();
                }),
                |v| got.push(v),
            )
            .unwrap();
        assert!(
            waits >= 20,
            "barrier returned without waiting for the reader"
        );
        assert_eq!((n, got), (values.len(), values.to_vec()));
        assert!(q.is_empty());
    });
}

/// Holdouts name each slot that holds a grace period up with its nesting depth and the
/// phase its section started in, for either phase a wait can wait for; `Debug` lists
/// them.
#[test]
fn holdouts_report_slot_nesting_and_phase() {
    use rcuref::rcu::Holdout;
    use rcuref::rcu::Rcu;
    static RCU: Rcu<2> = Rcu::new();
    let a = RCU.reader().unwrap();
    let b = RCU.reader().unwrap();
    let outer = a.lock();
    let inner = a.lock();
    let cookie = RCU.start_poll();
    assert!(!cookie.poll(), "the first wait must stop at a's section");
    let hs: Vec<Holdout> = cookie.holdouts().collect();
    let expected = Holdout {
        slot: a.slot(),
        nesting: 2,
        phase: 0,
    };
    assert_eq!(hs, vec![expected]);
    assert_eq!(
        format!("{:?}", cookie.holdouts()),
        format!("[{expected:?}]")
    );
    let g = b.lock(); // after the flip: phase 1
    drop(inner);
    drop(outer);
    assert!(!cookie.poll(), "the second wait must stop at b's section");
    let hs: Vec<Holdout> = cookie.holdouts().collect();
    assert_eq!(
        hs,
        vec![Holdout {
            slot: b.slot(),
            nesting: 1,
            phase: 1
        }]
    );
    drop(g);
    assert!(cookie.poll());
    assert_eq!(cookie.holdouts().count(), 0);
}

/// A context reader reports its own slot and whether it is inside a section.
#[test]
fn a_context_reader_reports_its_slot_and_section() {
    use rcuref::rcu::{ContextReader, Rcu};
    static RCU: Rcu<3> = Rcu::with_dedicated(3);
    // SAFETY: (test) slot 2 is dedicated, and only this test's thread uses CTX.
    static CTX: ContextReader<'static, 3> = unsafe { RCU.context_reader(2) };
    assert_eq!(CTX.slot(), 2);
    assert!(!CTX.in_read_section());
    let g = CTX.lock();
    assert!(CTX.in_read_section());
    drop(g);
    assert!(!CTX.in_read_section());
}

/// An `RcuValue` drops every value it still holds when it is dropped (the current one
/// and the retired ones), and only those.
#[test]
fn an_rcu_value_drops_what_it_holds() {
    use rcuref::rcu::{Rcu, RcuValue};
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct D;
    impl Drop for D {
        fn drop(&mut self) {
            DROPS.fetch_add(1, SeqCst);
        }
    }
    let rcu: Rcu<2> = Rcu::new();
    let mut w = rcu.reader().unwrap();
    let value: RcuValue<'_, D, 3, 2> = RcuValue::new(&rcu, D);
    for _ in 0..4 {
        assert!(value.replace(&mut w, D, rcuref::rcu::spin).is_ok());
    }
    // Five values made, three buffers: some were dropped when their buffers were reused,
    // the rest are still held.
    assert!(DROPS.load(SeqCst) < 5);
    drop(value);
    assert_eq!(DROPS.load(SeqCst), 5, "not every held value was dropped");
}

/// A stall detector reused for a second wait reports that one too: it starts over
/// when a wait begins.
#[test]
fn a_stall_detector_reports_each_wait() {
    use rcuref::rcu::Rcu;
    use rcuref::rcu::StallDetector;
    use rcuref::Error;
    use std::ops::ControlFlow;
    static RCU: Rcu<2> = Rcu::new();
    let held = HeldReader::start(&RCU);
    let mut w = RCU.reader().unwrap();
    let ticks = std::cell::Cell::new(0u64);
    let mut reports = 0;
    let mut stall = StallDetector::new(|| ticks.get(), 5, |_, _| reports += 1);
    for _ in 0..2 {
        let r = w.synchronize(|wt| {
            ticks.set(ticks.get() + 1);
            stall.observe(wt)?;
            if wt.attempts() >= 20 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(r, Err(Error::GaveUp));
    }
    assert_eq!(reports, 2, "one report per stalled wait");
    held.release();
}

/// The same-thread deadlock check (feature `std`, debug builds) keeps each domain's open
/// sections apart, counts a domain's sections across several readers of one thread, and
/// never reports a section of a domain that no longer exists to a new domain at the same
/// address. (Each failure mode makes a wait either refuse wrongly or deadlock.)
#[cfg(debug_assertions)]
#[test]
fn the_same_thread_check_keeps_domains_apart() {
    use rcuref::rcu::Rcu;
    use rcuref::Error;
    static A: Rcu<7> = Rcu::new();
    static B: Rcu<2> = Rcu::new();
    let a = A.reader().unwrap();
    let mut a_w = A.reader().unwrap();
    let b = B.reader().unwrap();
    let mut b_w = B.reader().unwrap();
    // B's section opens and closes inside A's: A's stays counted, B's does not.
    let ga = a.lock();
    drop(b.lock());
    assert_eq!(
        a_w.synchronize(rcuref::rcu::spin),
        Err(Error::InReadSection)
    );
    assert_eq!(b_w.synchronize(rcuref::rcu::spin), Ok(()));
    drop(ga);
    assert_eq!(a_w.synchronize(rcuref::rcu::spin), Ok(()));
    // Five readers of A inside sections at once, four leave: one is still inside.
    let rs: Vec<_> = (0..5).map(|_| A.reader().unwrap()).collect();
    let mut gs: Vec<_> = rs.iter().map(|r| r.lock()).collect();
    gs.truncate(1);
    assert_eq!(
        a_w.synchronize(rcuref::rcu::spin),
        Err(Error::InReadSection)
    );
    drop(gs);
    assert_eq!(a_w.synchronize(rcuref::rcu::spin), Ok(()));

    // A section leaked on a domain that is then dropped, and a new domain at the same
    // address: its waits must not be refused.
    #[inline(never)]
    fn fresh_domain(leak: bool) -> (usize, Result<(), Error>) {
        let rcu: Rcu<3> = Rcu::with_dedicated(1);
        let at = &rcu as *const _ as usize;
        if leak {
            // SAFETY: (test) slot 0 is dedicated; only this thread uses this context
            // reader, which does not outlive the domain.
            let ctx = unsafe { rcu.context_reader(0) };
            core::mem::forget(ctx.lock());
            (at, Ok(()))
        } else {
            let mut w = rcu.reader().unwrap();
            (at, w.synchronize(rcuref::rcu::spin))
        }
    }
    // (Not under Miri, which never gives a new frame the same stack address.)
    if !cfg!(miri) {
        let (first, _) = fresh_domain(true);
        let (second, r) = fresh_domain(false);
        assert_eq!(
            first, second,
            "setup: the second domain is not at the first's address"
        );
        assert_eq!(
            r,
            Ok(()),
            "a dead domain's leaked section was reported for a new one"
        );
    }
}

/// A `ContextReader` needs a dedicated slot: asking for a slot `reader` may hand out
/// (or one beyond the domain) is refused, not left to the caller's promise.
#[test]
#[should_panic(expected = "a ContextReader needs a dedicated slot")]
fn a_context_reader_of_a_registrable_slot_is_refused() {
    let rcu: rcuref::rcu::Rcu<2> = rcuref::rcu::Rcu::with_dedicated(1);
    // SAFETY: (test) the call must panic before any reader exists.
    let _ = unsafe { rcu.context_reader(1) };
}

/// More per-CPU readers than dedicated slots is refused the same way.
#[test]
#[should_panic(expected = "more per-CPU readers than dedicated slots")]
fn more_per_cpu_readers_than_dedicated_slots_are_refused() {
    let rcu: rcuref::rcu::Rcu<4> = rcuref::rcu::Rcu::with_dedicated(2);
    // SAFETY: (test) the call must panic before any reader exists.
    let _ = unsafe { rcu.context_readers::<3>() };
}

/// A helper whose grace period has already ended needs no wait, so it goes ahead even
/// from inside a section of the context it was given; one that would have to wait is
/// refused (a fresh grace period would wait for the section itself).
#[test]
fn a_grace_period_already_over_needs_no_wait_inside_a_section() {
    use rcuref::rcu::{ContextReader, DeferQueue, Rcu, RcuCell};
    use rcuref::Error;
    static RCU: Rcu<2> = Rcu::with_dedicated(1);
    // SAFETY: (test) slot 0 is dedicated, and only this test's thread uses CTX.
    static CTX: ContextReader<'static, 2> = unsafe { RCU.context_reader(0) };
    let (mut x, mut y) = (1u32, 2u32);
    let cell = RcuCell::new(&RCU, &mut x);
    let retired = cell.replace(&mut y);
    let mut q: DeferQueue<'_, u32, 2, 2> = DeferQueue::new(&RCU);
    q.defer(7).unwrap();
    CTX.synchronize(rcuref::rcu::spin).unwrap(); // both grace periods are over now
    let guard = CTX.lock();
    assert_eq!(*retired.reclaim(CTX, rcuref::rcu::spin).ok().unwrap(), 1);
    assert_eq!(q.barrier(CTX, rcuref::rcu::spin, drop), Ok(1));
    assert_eq!(
        CTX.synchronize(rcuref::rcu::spin),
        Err(Error::InReadSection)
    );
    q.defer(8).unwrap(); // deferred inside the section: its grace period waits for it
    assert_eq!(
        q.barrier(CTX, rcuref::rcu::spin, drop),
        Err(Error::InReadSection)
    );
    drop(guard);
    assert_eq!(q.barrier(CTX, rcuref::rcu::spin, drop), Ok(1));
}
