//! Host tests for FileRef: the shared bodies (also run on every QEMU target), the
//! warnings, and races on std threads.

#[path = "cases/file_ref.rs"]
mod cases;

use rcuref::{FileRef32, FileRef64};
use std::sync::{
    atomic::{AtomicBool, AtomicU64, Ordering},
    Barrier,
};
use std::thread;

/// Scales iteration counts down under Miri, which is ~1000x slower.
fn n(full: u32) -> u32 {
    if cfg!(miri) {
        (full / 1000).max(4)
    } else {
        full
    }
}

#[test]
fn zone_matrix_32() {
    cases::zone_matrix_32();
}

#[test]
fn zone_matrix_64() {
    cases::zone_matrix_64();
}

#[test]
fn no_resurrection_32() {
    cases::no_resurrection_32(n(200_000));
}

#[test]
fn no_resurrection_64() {
    cases::no_resurrection_64(n(200_000));
}

#[test]
fn saturation_leaks_32() {
    cases::saturation_leaks_32(n(10_000));
}

#[test]
fn saturation_leaks_64() {
    cases::saturation_leaks_64(n(10_000));
}

#[test]
fn lifecycle() {
    cases::lifecycle();
}

#[test]
fn sizes_and_auto_traits() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<FileRef32>();
    send_sync::<FileRef64>();
    assert_eq!(core::mem::size_of::<FileRef32>(), 4);
    assert_eq!(core::mem::size_of::<FileRef64>(), 8);
    assert_eq!(core::mem::size_of::<rcuref::FileRef>(), 8);
    // The constants are the kernel's.
    assert_eq!(FileRef64::SATURATED, 0xA000_0000_0000_0000);
    assert_eq!(FileRef64::RELEASED, 0xC000_0000_0000_0000);
    assert_eq!(FileRef64::DEAD, 0xE000_0000_0000_0000);
    assert_eq!(FileRef64::MAXREF, 0x7FFF_FFFF_FFFF_FFFF);
    assert_eq!(FileRef32::SATURATED, 0xA000_0000);
    assert_eq!(FileRef32::NOREF, 0xFFFF_FFFF);
}

/// Many threads get and put one shared count that the test holds one reference to:
/// no put may think it was the last, and the count ends where it started.
#[test]
fn concurrent_get_put_stays_balanced() {
    let threads = 4;
    let rounds = n(100_000);
    let r = FileRef64::new(1);
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..rounds {
                    assert!(r.get());
                    r.inc();
                    assert!(!r.put());
                    assert!(!r.put_close());
                }
            });
        }
    });
    assert_eq!(r.raw(), FileRef64::ONEREF);
}

/// Last put racing with a get, round after round: exactly one side destroys, and a get
/// that succeeded always finds the object not yet destroyed.
#[test]
fn last_put_vs_get_frees_exactly_once() {
    let rounds = n(20_000);
    let r = FileRef32::new(1);
    let destroyed = AtomicBool::new(false);
    let destroys = AtomicU64::new(0);
    let revived = AtomicU64::new(0);
    let barrier = Barrier::new(2);
    let destroy = || {
        assert!(!destroyed.swap(true, Ordering::Relaxed), "destroyed twice");
        destroys.fetch_add(1, Ordering::Relaxed);
    };
    thread::scope(|s| {
        s.spawn(|| {
            for i in 0..rounds {
                barrier.wait();
                let last = if i % 2 == 0 { r.put() } else { r.put_close() };
                if last {
                    destroy();
                }
                barrier.wait();
                // Round over: reset for the next one (only this thread writes now).
                barrier.wait();
            }
        });
        s.spawn(|| {
            for _ in 0..rounds {
                barrier.wait();
                if r.get() {
                    revived.fetch_add(1, Ordering::Relaxed);
                    assert!(!destroyed.load(Ordering::Relaxed), "got a destroyed object");
                    if r.put() {
                        destroy();
                    }
                }
                barrier.wait();
                assert!(destroyed.load(Ordering::Relaxed), "nobody destroyed");
                destroyed.store(false, Ordering::Relaxed);
                r.init(1);
                barrier.wait();
            }
        });
    });
    assert_eq!(destroys.load(Ordering::Relaxed), u64::from(rounds));
    println!(
        "{} of {rounds} gets revived the count",
        revived.load(Ordering::Relaxed)
    );
}

/// K threads failing gets on one dead count: the drift repair keeps it within DEAD + K.
#[test]
fn concurrent_failed_gets_stay_near_dead() {
    let threads = 3u32;
    let r = FileRef32::from_raw(FileRef32::DEAD);
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..n(200_000) {
                    assert!(!r.get());
                    let raw = r.raw();
                    assert!(
                        (FileRef32::DEAD..=FileRef32::DEAD + threads).contains(&raw),
                        "dead count drifted to {raw:#x}"
                    );
                }
            });
        }
    });
    assert_eq!(r.raw(), FileRef32::DEAD);
}
