//! The warning counters and hook. One test in its own binary, so the process-wide
//! counters see no other test's warnings and exact deltas can be asserted.

use rcuref::{set_warning_hook, warning_count, FileRef32, FileRef64, Warning};
use std::sync::atomic::{AtomicUsize, Ordering};

static HOOKED: AtomicUsize = AtomicUsize::new(0);

fn hook(_: Warning) {
    HOOKED.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn every_warning_is_counted_and_hooked() {
    set_warning_hook(Some(hook));
    let base = |w| warning_count(w);
    let (sat, imb, inc) = (
        base(Warning::Saturated),
        base(Warning::ImbalancedPut),
        base(Warning::IncOnReleased),
    );

    // Imbalanced put, twice: counted twice (logged once).
    let r = FileRef32::from_raw(FileRef32::DEAD);
    assert!(!r.put());
    assert!(!r.put());
    assert_eq!(warning_count(Warning::ImbalancedPut), imb + 2);

    // inc on a released count.
    let r = FileRef64::from_raw(FileRef64::DEAD);
    r.inc();
    assert_eq!(warning_count(Warning::IncOnReleased), inc + 1);

    // Saturation from a get past MAXREF, and from a put on a saturated count.
    let r = FileRef32::from_raw(FileRef32::MAXREF);
    assert!(!r.get());
    assert!(!r.put());
    assert_eq!(warning_count(Warning::Saturated), sat + 2);

    // Healthy operations warn about nothing.
    let r = FileRef32::new(1);
    assert!(r.get());
    r.inc();
    assert!(!r.put() && !r.put() && r.put());
    assert_eq!(HOOKED.load(Ordering::Relaxed), 5);

    set_warning_hook(None);
    assert!(!FileRef32::from_raw(FileRef32::DEAD).put());
    assert_eq!(
        HOOKED.load(Ordering::Relaxed),
        5,
        "removed hook still called"
    );
    assert_eq!(warning_count(Warning::ImbalancedPut), imb + 3);
}
