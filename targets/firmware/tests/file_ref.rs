//! The host's FileRef test bodies (`tests/cases/file_ref.rs` at the repository root),
//! run on the target.
#![no_std]
#![no_main]

#[path = "../../../tests/cases/file_ref.rs"]
mod cases;

use rcuref_firmware as _;

#[cfg(target_arch = "arm")]
rcuref_firmware::systick_handler!();

#[embedded_test::tests(default_timeout = 60)]
mod tests {
    use super::cases;

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
        cases::no_resurrection_32(rcuref::file_ref::FileRef32::from_raw, 2_000);
    }

    #[test]
    fn no_resurrection_64() {
        cases::no_resurrection_64(rcuref::file_ref::FileRef64::from_raw, 2_000);
    }

    #[test]
    fn saturation_leaks_32() {
        cases::saturation_leaks_32(1_000);
    }

    #[test]
    fn saturation_leaks_64() {
        cases::saturation_leaks_64(1_000);
    }

    #[test]
    fn lifecycle() {
        cases::lifecycle();
    }

    /// embedded-test's should_panic: a failed assertion in library-using code panics.
    #[test]
    #[should_panic]
    fn a_failed_assertion_panics() {
        let r = rcuref::file_ref::FileRef32::new(1);
        assert!(!r.put(), "the last put returns true");
    }

    /// Proves that a failing on-target assertion turns the run red with its message
    /// (`cargo xtask test --failing` builds with this feature and expects failure).
    #[cfg(feature = "failing-test")]
    #[test]
    fn deliberately_failing() {
        let r = rcuref::file_ref::FileRef32::new(2);
        defmt::info!("raw before: {=u32:#x}", r.raw());
        assert!(
            r.put(),
            "deliberate failure: a put with a reference left returned false"
        );
    }
}
