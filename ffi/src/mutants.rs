//! The C suite's broken variants of this crate, compiled only under `--cfg
//! rcuref_mutants` (`cargo xtask ffi` builds such an archive in `target/ffi-mutants`
//! for the negative controls). Their switches are C functions that the header does not
//! declare (`cbindgen.toml` excludes them): a control declares what it calls.

use portable_atomic::{AtomicBool, Ordering::Relaxed};

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
