//! Types that fit the ecosystem: every public type is `Debug` (so a user's
//! `#[derive(Debug)]` works), errors implement `core::error::Error` and `Display`, and
//! the error shape is the documented one.

use rcuref::file_ref::{FileRef32, FileRef64};
use rcuref::pool::{Handle, Pool, PoolCell};
use rcuref::rcu::{DeferQueue, GpCookie, Guard, Rcu, RcuCell, Reader, Retired};
use rcuref::{Error, Refused, Warning};

#[derive(Debug)]
#[allow(dead_code)]
struct Everything<'a> {
    rcu: &'a Rcu<2>,
    reader: Reader<'a, 2>,
    cookie: GpCookie<'a, 2>,
    cell: RcuCell<'a, u32, 2>,
    retired: Retired<'a, u32, 2>,
    queue: DeferQueue<'a, u32, 2, 2>,
    pool: &'a Pool<u32, 2>,
    location: PoolCell<'a, u32, 2>,
    handle: Handle<'a, u32, 2>,
    counts: (FileRef32, FileRef64),
    errors: (Error, Refused<u32>, Warning),
}

#[derive(Debug)]
#[allow(dead_code)]
struct WithGuard<'r, 'd>(&'r Guard<'r, 'd, 2>);

#[test]
fn every_public_type_is_debug() {
    static RCU: Rcu<2> = Rcu::new();
    static POOL: Pool<u32, 2> = Pool::new();
    let (mut a, mut b) = (1u32, 2u32);
    let cell = RcuCell::new(&RCU, &mut a);
    let retired = cell.replace(&mut b);
    let e = Everything {
        rcu: &RCU,
        reader: RCU.reader().unwrap(),
        cookie: RCU.start_poll(),
        cell,
        retired,
        queue: DeferQueue::new(&RCU),
        pool: &POOL,
        location: PoolCell::new(&POOL),
        handle: POOL.alloc(7).ok().unwrap(),
        counts: (FileRef32::new(1), FileRef64::new(0)),
        errors: (
            Error::Full,
            Refused {
                error: Error::Full,
                value: 3,
            },
            Warning::Saturated,
        ),
    };
    let text = format!("{e:?}");
    for part in [
        "rcu: Rcu { slots: 2",
        "Reader",
        "GpCookie",
        "RcuCell",
        "Retired",
        "DeferQueue",
        "pool: Pool { capacity: 2, in_use: 1",
        "PoolCell",
        "Handle { slot: 0, value: 7 }",
        "FileRef32",
        "Refused",
    ] {
        assert!(text.contains(part), "{part} missing from {text}");
    }
    let guard = e.reader.lock();
    assert!(format!("{:?}", WithGuard(&guard)).contains("WithGuard(Guard"));
}

/// The RCU's other public types, each printed on its own (a derive around them would
/// print its own name, hiding an empty `Debug`).
#[test]
fn the_rcu_helpers_are_debug() {
    use rcuref::rcu::{ContextReader, Deadline, PerCpu, RcuValue, StallDetector};
    static RCU: Rcu<3> = Rcu::with_dedicated(1);
    // SAFETY: (test) slot 0 is dedicated, and only this test's thread uses CTX.
    static CTX: ContextReader<'static, 3> = unsafe { RCU.context_reader(0) };
    static VALUE: RcuValue<'static, u32, 2, 3> = RcuValue::new(&RCU, 5);
    // SAFETY: (test) as above: one CPU, this test's thread.
    static CPUS: PerCpu<'static, 3, 1> = unsafe { RCU.per_cpu(|| 0) };
    let guard = CTX.lock();
    let stall = StallDetector::new(|| 0, 10, |_, _| ());
    let deadline = Deadline::new(|| 0, 10);
    let wait = RCU.start_poll().wait();
    for (text, starts) in [
        (format!("{CTX:?}"), "ContextReader"),
        (format!("{guard:?}"), "Guard"),
        (format!("{VALUE:?}"), "RcuValue"),
        (format!("{wait:?}"), "GracePeriod"),
        (format!("{stall:?}"), "StallDetector"),
        (format!("{deadline:?}"), "Deadline"),
        (format!("{CPUS:?}"), "PerCpu"),
    ] {
        assert!(text.starts_with(starts), "{starts}: {text}");
    }
}

#[test]
fn errors_are_errors() {
    fn is_error<E: core::error::Error + Send + Sync + 'static>() {}
    is_error::<Error>();
    is_error::<Refused<u32>>();
    assert_eq!(Error::Full.to_string(), "no room left");
    let r = Refused {
        error: Error::OtherDomain,
        value: String::from("mine"),
    };
    assert_eq!(r.to_string(), Error::OtherDomain.to_string());
    assert_eq!(r.into_value(), "mine");
}
