//! Host tests for FileRef: the shared bodies, also run on every QEMU target.
//! Races on std threads are in `torture_file_ref.rs`, warnings in `warnings.rs`.

#[path = "cases/file_ref.rs"]
mod cases;

use rcuref::{FileRef32, FileRef64};

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
fn inc_is_sticky_32() {
    cases::inc_is_sticky_32(n(100_000));
}

#[test]
fn inc_is_sticky_64() {
    cases::inc_is_sticky_64(n(100_000));
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

/// `Debug` names the zone a count is in.
#[test]
fn debug_names_the_zone() {
    let show = |r: FileRef32| format!("{r:?}");
    assert_eq!(
        show(FileRef32::new(1)),
        "FileRef32 { raw: 0, state: \"live\" }"
    );
    assert!(show(FileRef32::from_raw(FileRef32::MAXREF)).contains("\"live\""));
    assert!(show(FileRef32::from_raw(FileRef32::MAXREF + 1)).contains("\"saturated\""));
    assert!(show(FileRef32::from_raw(FileRef32::RELEASED - 1)).contains("\"saturated\""));
    assert!(show(FileRef32::from_raw(FileRef32::RELEASED)).contains("\"dead\""));
    assert!(show(FileRef32::from_raw(FileRef32::NOREF - 1)).contains("\"dead\""));
    assert!(show(FileRef32::from_raw(FileRef32::NOREF)).contains("\"noref\""));
    assert!(format!("{:?}", FileRef64::new(0)).contains("\"dead\""));
}
