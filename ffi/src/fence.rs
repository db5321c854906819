//! The read side's fence chosen at run time, from C (`rcuref_heavy_install`,
//! `rcuref_fence_mode`): the library's `rcu::heavy::install` and `fence_mode` behind a
//! C function pointer. With the feature `auto-fence` (or `membarrier`, which implies it
//! and finds Linux's `membarrier` at run time), readers pay a full fence until the mode
//! is decided and only a compiler fence once it is decided heavy; without the feature
//! the archive keeps the full fence for ever, `rcuref_heavy_install` answers
//! `RCUREF_ENOTSUP` and `rcuref_fence_mode` `RCUREF_FENCE_FULL`.

use crate::{RCUREF_EBUSY, RCUREF_EINVAL, RCUREF_OK};

/// The mode is not the caller's to choose any more: a grace period (or
/// `rcuref_fence_mode`) decided it without a heavy fence, and it never changes once
/// decided (a reader inside a section could meet the other mode). Nothing changed.
pub const RCUREF_EDECIDED: i32 = -13;
/// This archive was built without the feature `auto-fence` (`RCUREF_FFI_AUTO_FENCE` is
/// 0 in its `rcuref_config.h`): its readers always run the full fence. Nothing changed.
pub const RCUREF_ENOTSUP: i32 = -14;

/// `rcuref_fence_mode`: readers run a full fence after announcing a section, and grace
/// periods no heavy fence.
pub const RCUREF_FENCE_FULL: i32 = 0;
/// `rcuref_fence_mode`: readers run only a compiler barrier, and the first wait of
/// every grace period runs the heavy fence.
pub const RCUREF_FENCE_HEAVY: i32 = 1;

/// A heavy fence: when it returns, every core that runs or may run a reader of this
/// library has executed a full memory barrier since the call began, and the calling
/// core one before and one after (an IPI to every other core whose handler runs a
/// barrier, and waits for them all; Linux's `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`).
/// Called from the waits of a grace period (never from a read section or an interrupt
/// handler that the library runs), about once per grace period (at its first wait), and
/// once more for a wait that sleeps.
pub type rcuref_heavy_fence_fn = Option<unsafe extern "C" fn()>;

#[cfg(all(feature = "auto-fence", not(rcuref_asymmetric_fence)))]
mod chosen {
    use core::ffi::c_void;
    use portable_atomic::{AtomicPtr, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

    /// The C function the first `rcuref_heavy_install` was given.
    ///
    /// INVARIANT: null until that call's claim, then that function, for good: an
    /// `unsafe extern "C" fn()` whose caller promised the heavy-fence contract
    /// (`rcuref_heavy_fence_fn`). Nobody asks the library to install [`CFence`] before
    /// it is set (the claimer after its claim, any other caller after its claim failed),
    /// so [`CFence`]'s fence always finds it.
    pub(super) static FENCE: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

    /// The library's view of the C fence.
    pub(super) struct CFence;

    // SAFETY: the library calls `heavy_fence` only once `CFence` is installed, which
    // happens only after `FENCE` holds the first caller's function (`FENCE`'s
    // invariant; its `Release` store happens before the install's, which the waits'
    // `Acquire` load of the installed fence reads), and that caller promised the
    // function's heavy-fence contract, which is this trait's.
    unsafe impl rcuref::rcu::heavy::HeavyFence for CFence {
        fn heavy_fence() {
            let f = FENCE.load(Acquire);
            // Never null here (above); a null would mean no fence, so nothing to call.
            if !f.is_null() {
                // SAFETY: `FENCE` only ever holds null or an `unsafe extern "C" fn()`
                // (its invariant); function and data pointers have the same size and
                // representation on every target this library supports.
                unsafe {
                    let f: unsafe extern "C" fn() = core::mem::transmute(f);
                    f();
                }
            }
        }
    }

    /// Sets `FENCE` to `f` if it is null: whether it was.
    pub(super) fn claim(f: *mut c_void) -> bool {
        FENCE
            .compare_exchange(core::ptr::null_mut(), f, Release, Relaxed)
            .is_ok()
    }
}

/// Installs `fence` as the heavy fence and makes the read side's mode heavy: from then
/// on readers run only a compiler barrier after announcing a section, and the first wait
/// of every grace period calls `fence` (about once per grace period, and once more for a
/// wait that sleeps). Call it at boot, once `fence` works (its IPI is set
/// up), before the first grace period; readers that entered before it used the full
/// fence, which stays correct. `fence` must keep its contract (`rcuref_heavy_fence_fn`)
/// for the rest of the program: the mode never changes back.
///
/// Returns `RCUREF_OK` once `fence` is in effect (the mode is heavy and grace periods
/// call it); `RCUREF_EINVAL` for a null `fence`; `RCUREF_EBUSY` if another heavy fence
/// is in effect (installed by an earlier call or one at the same time, or Linux's
/// `membarrier`, found by an archive with the feature `membarrier`): of two calls at
/// once, one installs its fence and the other answers `RCUREF_EBUSY` only once that
/// fence is in effect, never before; `RCUREF_EDECIDED` if the mode was decided full (a
/// grace period or `rcuref_fence_mode` came first, also while another call's install was
/// under way: then that call answers `RCUREF_EDECIDED` too, and no fence is in effect);
/// `RCUREF_ENOTSUP` from an archive without the feature `auto-fence`; `RCUREF_EBUSY`
/// too from an archive built with `--cfg rcuref_asymmetric_fence`, whose fence is the
/// binary's, chosen at link time. On an error this call installs nothing, and the mode
/// is as the answer says.
#[no_mangle]
pub extern "C" fn rcuref_heavy_install(fence: rcuref_heavy_fence_fn) -> i32 {
    let Some(f) = fence else {
        return RCUREF_EINVAL;
    };
    #[cfg(all(feature = "auto-fence", not(rcuref_asymmetric_fence)))]
    {
        use rcuref::rcu::heavy::{install, is_installed};
        // The first caller's fence is the C fence for good. Every caller then asks the
        // library to install it: a caller whose claim failed may find the claimer not
        // there yet (stopped between its claim and its install), and must not answer
        // "installed" while nothing is, nor leave the mode to be decided without it
        // (the review's race: both refused, the mode decided full).
        let claimed = chosen::claim(f as *mut core::ffi::c_void);
        #[cfg(rcuref_mutants)]
        {
            crate::mutants::after_claim();
            if !claimed && crate::mutants::OLD_INSTALL.load(portable_atomic::Ordering::Relaxed) {
                return RCUREF_EBUSY; // the old code: refused before the claimer installs
            }
        }
        match install::<chosen::CFence>() {
            Ok(()) if claimed => RCUREF_OK,
            // Installed for the claimer, whose fence it is.
            Ok(()) => RCUREF_EBUSY,
            Err(rcuref::Error::Decided) => RCUREF_EDECIDED,
            // A caller whose claim failed installed it first.
            Err(_) if claimed && is_installed::<chosen::CFence>() => RCUREF_OK,
            Err(_) => RCUREF_EBUSY,
        }
    }
    #[cfg(rcuref_asymmetric_fence)]
    {
        // The static choice: the binary's `_rcuref_heavy_fence_v1` is the fence.
        let _ = (f, RCUREF_OK);
        RCUREF_EBUSY
    }
    #[cfg(not(any(feature = "auto-fence", rcuref_asymmetric_fence)))]
    {
        let _ = (f, RCUREF_OK, RCUREF_EBUSY);
        RCUREF_ENOTSUP
    }
}

/// The read side's mode, `RCUREF_FENCE_FULL` or `RCUREF_FENCE_HEAVY`, deciding it now
/// if nothing has: heavy if a fence was installed (or, with the feature `membarrier`,
/// Linux offers `MEMBARRIER_CMD_PRIVATE_EXPEDITED`), full otherwise, and final either
/// way. A program whose readers start long before its first grace period calls it at
/// start-up (after `rcuref_heavy_install`, where it has a fence), so that they stop
/// paying the full fence at once. Always `RCUREF_FENCE_FULL` from an archive without the
/// feature `auto-fence`, always `RCUREF_FENCE_HEAVY` from one built with `--cfg
/// rcuref_asymmetric_fence`.
#[no_mangle]
pub extern "C" fn rcuref_fence_mode() -> i32 {
    #[cfg(all(feature = "auto-fence", not(rcuref_asymmetric_fence)))]
    if rcuref::rcu::heavy::fence_mode() == rcuref::rcu::heavy::FenceMode::Heavy {
        return RCUREF_FENCE_HEAVY;
    }
    if cfg!(rcuref_asymmetric_fence) {
        return RCUREF_FENCE_HEAVY;
    }
    RCUREF_FENCE_FULL
}
