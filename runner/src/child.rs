//! QEMU dies with the runner, whatever kills the runner.
//!
//! Two mechanisms, because neither covers everything alone:
//! * on Linux the child asks the kernel for `SIGKILL` when the thread that started it
//!   dies (`PR_SET_PDEATHSIG`, set between fork and exec): this covers a `SIGKILL` of
//!   the runner, a panic, anything;
//! * `SIGINT`, `SIGTERM`, `SIGHUP` and `SIGQUIT` are caught while a QEMU runs: the loop
//!   that watches QEMU kills and reaps it, shows what QEMU printed, then the runner dies of the same signal (its
//!   default action), so its parent sees the conventional status (a shell's 128+signo).
//!   Signals the runner was started with ignored (`nohup`) stay ignored. Outside a QEMU
//!   run the handler only restores the default action and re-raises: the runner behaves
//!   as if it had none.
//!
//! The handler never touches the child itself (it only records the signal), so it cannot
//! kill a reaped QEMU's recycled pid.

use std::process::{Child, Command};
use std::sync::atomic::{AtomicI32, Ordering::SeqCst};

/// No QEMU is being watched.
const IDLE: i32 = 0;
/// A QEMU is being watched and no signal came.
const ACTIVE: i32 = -1;
/// [`IDLE`], [`ACTIVE`], or the number of the signal that came while [`ACTIVE`].
static STATE: AtomicI32 = AtomicI32::new(IDLE);

#[cfg(unix)]
const CAUGHT: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

#[cfg(unix)]
extern "C" fn on_signal(sig: libc::c_int) {
    match STATE.compare_exchange(ACTIVE, sig, SeqCst, SeqCst) {
        // The watching loop kills QEMU, then re-raises.
        Ok(_) => {}
        Err(IDLE) => die_of(sig),
        // Another signal is already being handled.
        Err(_) => {}
    }
}

/// Restores `sig`'s default action and raises it: the process ends as the signal's
/// default says (inside the handler, when it returns). Async-signal-safe.
#[cfg(unix)]
fn die_of(sig: libc::c_int) {
    // SAFETY: signal(2) and raise(3) are async-signal-safe and take plain integers.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// Installs the handler for [`CAUGHT`] once, leaving ignored signals ignored.
#[cfg(unix)]
fn install_handlers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in CAUGHT {
            // SAFETY: a zeroed sigaction is a valid value (no handler, no flags); the
            // handler only does async-signal-safe things (an atomic, signal, raise).
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                    || old.sa_sigaction == libc::SIG_IGN
                {
                    continue;
                }
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    });
}

/// Starts `cmd` as a child that dies with this process (see the module docs).
pub(crate) fn spawn(cmd: &mut Command) -> std::io::Result<Child> {
    #[cfg(unix)]
    install_handlers();
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: getpid before the fork; in the child only prctl, getppid and raise,
        // which are async-signal-safe, and no allocation.
        unsafe {
            let parent = libc::getpid();
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent died before the request took effect: nobody would kill us.
                if libc::getppid() != parent {
                    libc::raise(libc::SIGKILL);
                }
                Ok(())
            });
        }
    }
    cmd.spawn()
}

/// Marks a QEMU run as watched (begun before QEMU starts): signals from now on are left
/// to [`Watch::pending`] until the watch is dropped (after the child is reaped); one that
/// came when the watch is dropped ends the process then.
pub(crate) struct Watch(());

impl Watch {
    pub(crate) fn begin() -> Watch {
        // A signal that came while idle has already ended the process.
        let _ = STATE.compare_exchange(IDLE, ACTIVE, SeqCst, SeqCst);
        Watch(())
    }

    /// The signal that came while this QEMU ran, if any: the caller kills and reaps
    /// QEMU, shows what it printed, then calls [`die_now`].
    pub(crate) fn pending(&self) -> Option<i32> {
        Some(STATE.load(SeqCst)).filter(|&sig| sig > 0)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Err(sig) = STATE.compare_exchange(ACTIVE, IDLE, SeqCst, SeqCst) {
            if sig > 0 {
                // The child is already reaped (or was never watched past this point).
                die_now(sig);
            }
        }
    }
}

/// Ends the process as signal `sig` would: flushes stdout, restores the default action,
/// raises it; falls back to exit status 128 + `sig` should the signal not end it.
pub(crate) fn die_now(sig: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    #[cfg(unix)]
    die_of(sig);
    std::process::exit(128 + sig)
}
