//! The warning counters and hook. Their own binary, so the process-wide counters see no
//! other test's warnings and exact deltas can be asserted; the two tests take a lock, as
//! both install the process-wide hook.

use rcuref::file_ref::{FileRef32, FileRef64};
use rcuref::{set_warning_hook, warning_count, Warning};
use std::sync::atomic::{AtomicUsize, Ordering};

static HOOKED: AtomicUsize = AtomicUsize::new(0);

fn hook(_: Warning) {
    HOOKED.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn every_warning_is_counted_and_hooked() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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
    assert!(r.get(), "a get that saturates pins the object and succeeds");
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

fn panicking_hook(w: Warning) {
    panic!("hook says {w:?}");
}

/// Item 25: a warning hook that panics unwinds out of the operation that warned, after
/// the count reached its final state: the counter is left consistent.
#[test]
fn a_panicking_hook_leaves_counts_consistent() {
    // Serialised with the other test of this binary by the hook itself being global:
    // this test installs its own hook and restores none, so it runs its checks only on
    // values it owns.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    set_warning_hook(Some(panicking_hook));
    let caught = |f: &dyn Fn()| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err();

    let r = FileRef32::from_raw(FileRef32::DEAD);
    assert!(
        caught(&|| {
            let _ = r.put();
        }),
        "the hook was not called"
    );
    assert_eq!(
        r.raw(),
        FileRef32::DEAD,
        "an imbalanced put left the count off DEAD"
    );

    let r = FileRef32::from_raw(FileRef32::MAXREF);
    assert!(caught(&|| r.inc()));
    assert_eq!(
        r.raw(),
        FileRef32::SATURATED,
        "a saturating inc left the count unpinned"
    );
    assert!(caught(&|| {
        let _ = r.get();
    }));
    assert_eq!(r.raw(), FileRef32::SATURATED);
    assert!(caught(&|| {
        let _ = r.put();
    }));
    assert_eq!(r.raw(), FileRef32::SATURATED);

    // A failed get is no warning: the hook is not called.
    let r = FileRef64::from_raw(FileRef64::NOREF - 1);
    assert!(!r.get());
    assert_eq!(r.raw(), FileRef64::DEAD, "a failed get left drift behind");
    set_warning_hook(None);
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
