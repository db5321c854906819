//! The C suite's broken variants of this crate, compiled only under `--cfg
//! rcuref_mutants` (`cargo xtask ffi` builds such an archive in `target/ffi-mutants`
//! for the negative controls). Their switches are C functions that the header does not
//! declare (`cbindgen.toml` excludes them): a control declares what it calls.

use core::ffi::c_void;
use portable_atomic::{AtomicBool, AtomicPtr, Ordering::Relaxed};

/// `rcuref_read_lock` returns after its `raw_lock` without looking at the owner again:
/// the code before 445d135, in which an interrupt handler that closes the context
/// between the lock's owner check and its `raw_lock` leaves a section on a slot nobody
/// owns.
pub(crate) static SKIP_OWNER_RECHECK: AtomicBool = AtomicBool::new(false);

/// Turns [`SKIP_OWNER_RECHECK`] on or off (`ffi/tests/c/ctx_close_signal.c`'s control).
#[no_mangle]
pub extern "C" fn rcuref_mutant_skip_owner_recheck(on: bool) {
    SKIP_OWNER_RECHECK.store(on, Relaxed);
}

/// A C function `rcuref_heavy_install` calls once, between its claim of the C fence and
/// its request to the library (`ffi/tests/c/heavy_install.c`'s race): it stands for a
/// second context that runs there. Null: none.
static AFTER_CLAIM: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

/// Sets the function [`after_claim`] runs once (null: none).
#[no_mangle]
pub extern "C" fn rcuref_mutant_after_claim(f: Option<unsafe extern "C" fn()>) {
    AFTER_CLAIM.store(
        f.map_or(core::ptr::null_mut(), |f| f as *mut c_void),
        Relaxed,
    );
}

/// Runs the function set by `rcuref_mutant_after_claim`, once.
#[cfg(feature = "auto-fence")]
pub(crate) fn after_claim() {
    let f = AFTER_CLAIM.swap(core::ptr::null_mut(), Relaxed);
    if !f.is_null() {
        // SAFETY: `AFTER_CLAIM` holds null or an `unsafe extern "C" fn()`
        // (`rcuref_mutant_after_claim`), taken back here so it runs once.
        unsafe {
            let f: unsafe extern "C" fn() = core::mem::transmute(f);
            f();
        }
    }
}

/// `rcuref_heavy_install` as first written: a caller whose claim of the C fence failed
/// answers `RCUREF_EBUSY` at once, before the claimer has installed anything.
pub(crate) static OLD_INSTALL: AtomicBool = AtomicBool::new(false);

/// Turns [`OLD_INSTALL`] on or off (`heavy_install.c`'s control).
#[no_mangle]
pub extern "C" fn rcuref_mutant_old_install(on: bool) {
    OLD_INSTALL.store(on, Relaxed);
}
