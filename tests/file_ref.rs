//! Host tests for FileRef: the shared bodies, also run on every QEMU target.
//! Races on std threads are in `torture_file_ref.rs`, warnings in `warnings.rs`.

#[path = "cases/file_ref.rs"]
mod cases;

use rcuref::file_ref::{FileRef32, FileRef64};

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
    cases::no_resurrection_32(FileRef32::from_raw, n(200_000));
}

#[test]
fn no_resurrection_64() {
    cases::no_resurrection_64(FileRef64::from_raw, n(200_000));
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
    // The native width: 64 bits on 64-bit hosts, 32 on i686 (Miri's 32-bit run).
    assert_eq!(
        core::mem::size_of::<rcuref::file_ref::FileRef>(),
        core::mem::size_of::<usize>()
    );
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
    // A stored NOREF is dead (no put in flight will finish it); the transient state
    // itself is named "noref" (made exactly, test builds only).
    assert!(show(FileRef32::from_raw(FileRef32::NOREF)).contains("\"dead\""));
    #[cfg(rcuref_mutants)]
    assert!(show(FileRef32::from_raw_verbatim(FileRef32::NOREF)).contains("\"noref\""));
    assert!(format!("{:?}", FileRef64::new(0)).contains("\"dead\""));
}

/// The states a count holds only in flight, made exactly (test builds only): one more
/// operation from each keeps its zone; failed gets started just below the wrap never
/// revive a count.
#[cfg(rcuref_mutants)]
#[test]
fn transient_states_keep_their_zone() {
    cases::transients_32(FileRef32::from_raw_verbatim);
    cases::transients_64(FileRef64::from_raw_verbatim);
    cases::no_resurrection_32(FileRef32::from_raw_verbatim, n(200_000));
    cases::no_resurrection_64(FileRef64::from_raw_verbatim, n(200_000));
}

/// The control of the zone edges: with `from_raw` keeping zone edges
/// verbatim, the zone matrix of counts at rest fails (one get makes a saturated count
/// dead, one put makes it live, a stored NOREF is revived). The matrix must catch it.
#[cfg(rcuref_mutants)]
#[test]
fn negative_control_verbatim_from_raw_breaks_the_zones() {
    /// (raw, op, what the zone says it returns, raw the zone says it leaves)
    type Row = (u32, fn(&FileRef32) -> bool, bool, u32);
    let edges_32: &[Row] = &[
        (
            FileRef32::RELEASED - 1,
            |r| r.get(),
            true,
            FileRef32::SATURATED,
        ),
        (
            FileRef32::MAXREF + 1,
            |r| r.put(),
            false,
            FileRef32::SATURATED,
        ),
        (FileRef32::NOREF, |r| r.get(), false, FileRef32::DEAD),
    ];
    for &(raw, op, want, after) in edges_32 {
        let fixed = FileRef32::from_raw(raw);
        assert_eq!(
            (op(&fixed), fixed.raw()),
            (want, after),
            "from_raw({raw:#x})"
        );
        let old = FileRef32::from_raw_verbatim(raw);
        assert_ne!(
            (op(&old), old.raw()),
            (want, after),
            "a verbatim from_raw({raw:#x}) behaved as its zone says: the check cannot fail"
        );
    }
}
