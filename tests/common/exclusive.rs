//! One harness at a time in a test binary whose harnesses share the library's
//! process-wide test knobs (`mutants::select`, `mutants::set_read_delay`) and warning
//! counters.
//!
//! cargo runs a binary's tests on parallel threads. A negative control that selects a
//! broken variant selects it for every thread of the process, so a harness running beside
//! it fails on the control's variant, and a control can pass on another control's
//! symptom. An [`Exclusive`] is the only way to run a harness of these binaries (each
//! harness takes `&Exclusive`), and only one exists at a time: the binaries are serial by
//! construction, whatever `--test-threads` says. It selects variants and delays for its
//! holder and puts the real code back when dropped, also when the harness panicked.

#![allow(dead_code, unreachable_pub)]

use std::sync::{Mutex, MutexGuard};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The right to run a harness, and to turn the library's test knobs while it runs.
pub struct Exclusive {
    _held: MutexGuard<'static, ()>,
}

/// Waits until no other harness of this binary runs, then returns the right to run one,
/// with the real code selected and no delay injected.
pub fn exclusive() -> Exclusive {
    // A harness that panicked poisons the lock; its knobs were reset by its drop.
    let held = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let x = Exclusive { _held: held };
    x.reset();
    x
}

impl Exclusive {
    /// Selects the broken variant `m` (for the process: nothing else runs a harness now).
    #[cfg(rcuref_mutants)]
    pub fn select(&self, m: rcuref::mutants::Mutant) {
        rcuref::mutants::select(m);
    }

    /// Injects read delays of up to `max_spins` (0: none) into the lookup paths.
    #[cfg(rcuref_mutants)]
    pub fn set_read_delay(&self, max_spins: u32) {
        rcuref::mutants::set_read_delay(max_spins);
    }

    fn reset(&self) {
        #[cfg(rcuref_mutants)]
        {
            rcuref::mutants::select(rcuref::mutants::Mutant::None);
            rcuref::mutants::set_read_delay(0);
        }
    }
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        self.reset();
    }
}
