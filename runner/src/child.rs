//! QEMU dies with the runner, whatever ends the runner.
//!
//! * QEMU starts in a process group of its own (`setpgid` between fork and exec), and
//!   every kill is of the whole group: a QEMU that is a wrapper script, or one that
//!   started helpers, goes with everything it started (unless a process left the group
//!   on purpose, `setsid`).
//! * On Linux the runner's direct child is a supervisor forked between fork and exec
//!   (see [`supervise`]): QEMU is its child, in the same group. It ends with QEMU's
//!   status, and when the runner dies in any way (a `SIGKILL`, a panic) it kills the
//!   whole group within 10 ms, so a wrapper script's real QEMU goes too. QEMU also has
//!   `PR_SET_PDEATHSIG` (`SIGKILL`) towards the supervisor.
//! * `SIGINT`, `SIGTERM`, `SIGHUP` and `SIGQUIT` are caught while a QEMU runs: a thread
//!   that never writes to stdout (the runner's control thread) kills QEMU's group, reaps
//!   it, lets the output still in QEMU's pipe be shown, then the runner dies of the same
//!   signal (its default action), so its parent sees the conventional status (a shell's
//!   128+signo). Signals the runner was started with ignored (`nohup`) stay ignored.
//!   Outside a QEMU run the handler only restores the default action and re-raises: the
//!   runner behaves as if it had none.
//! * A closed stdout (the runner piped into `head`) kills QEMU's group, and the runner
//!   ends as a program killed by `SIGPIPE` does.
//!
//! The handler never touches the child itself (it only records the signal).

use std::process::{Child, Command};
use std::sync::atomic::{AtomicI32, Ordering::SeqCst};

/// No QEMU is being watched.
const IDLE: i32 = 0;
/// A QEMU is being watched and no signal came.
const ACTIVE: i32 = -1;
/// [`IDLE`], [`ACTIVE`], or the number of the signal that came while [`ACTIVE`].
static STATE: AtomicI32 = AtomicI32::new(IDLE);

/// The process group of the QEMU that runs now (0: none).
static GROUP: AtomicI32 = AtomicI32::new(0);

#[cfg(unix)]
const CAUGHT: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

#[cfg(unix)]
extern "C" fn on_signal(sig: libc::c_int) {
    match STATE.compare_exchange(ACTIVE, sig, SeqCst, SeqCst) {
        // The control thread kills QEMU, then re-raises.
        Ok(_) => {}
        Err(IDLE) => die_of(sig),
        // Another signal is already being handled.
        Err(_) => {}
    }
}

/// Restores `sig`'s default action and raises it: the process ends as the signal's
/// default says (inside the handler, when it returns). Async-signal-safe.
#[cfg(unix)]
pub(crate) fn die_of(sig: libc::c_int) {
    // SAFETY: signal(2) and kill(2) are async-signal-safe and take plain integers. The
    // signal goes to the process (raise(3) would pick the calling thread, where a
    // blocked signal would wait).
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
    }
}

/// Installs the handler for [`CAUGHT`] once, leaving ignored signals ignored.
#[cfg(unix)]
fn install_handlers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in CAUGHT {
            // SAFETY: a zeroed sigaction is a valid value (no handler, no flags); the
            // handler only does async-signal-safe things (an atomic, signal, kill).
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

/// Starts `cmd` as a child in a process group of its own that dies with this process
/// (see the module docs); the group is [`kill_group`]'s until [`Group`] is dropped.
pub(crate) fn spawn(cmd: &mut Command) -> std::io::Result<(Child, Group)> {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        install_handlers();
        // SAFETY: getpid before the fork; in the child only async-signal-safe calls
        // (setpgid, fork, prctl, getppid, waitpid, kill, close, nanosleep, _exit) and no
        // allocation.
        unsafe {
            #[cfg(target_os = "linux")]
            let parent = libc::getpid();
            cmd.pre_exec(move || {
                if libc::setpgid(0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                #[cfg(target_os = "linux")]
                supervise(parent)?;
                Ok(())
            });
        }
    }
    let child = cmd.spawn()?;
    let pgid = child.id() as i32;
    GROUP.store(pgid, SeqCst);
    Ok((child, Group(pgid)))
}

/// Between fork and exec (of a child already in its own group): forks again. The new
/// process returns, to become QEMU; this one stays as QEMU's supervisor, the runner's
/// direct child and the group's leader, and never returns: it closes every descriptor
/// (QEMU's pipes, the exec-error pipe), then every 10 ms checks whether QEMU ended (it
/// then ends with QEMU's status: its exit code, or its signal) and whether the runner
/// died (it then kills the whole group, itself included). So a `SIGKILL` of the runner
/// kills what QEMU started too, not only the direct child, as `PR_SET_PDEATHSIG` would.
///
/// # Safety
/// Only between fork and exec (async-signal-safe calls only, no allocation).
#[cfg(target_os = "linux")]
unsafe fn supervise(parent: libc::pid_t) -> std::io::Result<()> {
    let supervisor = libc::getpid();
    let qemu = libc::fork();
    if qemu < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if qemu == 0 {
        // QEMU: dies with its supervisor (which the group kill takes too).
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The supervisor died before the request took effect.
        if libc::getppid() != supervisor {
            libc::_exit(127);
        }
        return Ok(());
    }
    // The supervisor: no core of its own when it mirrors QEMU's SIGSEGV.
    libc::prctl(libc::PR_SET_DUMPABLE, 0);
    for sig in CAUGHT {
        libc::signal(sig, libc::SIG_IGN);
    }
    if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
        for fd in 0..4096 {
            libc::close(fd);
        }
    }
    let tick = libc::timespec {
        tv_sec: 0,
        tv_nsec: 10_000_000,
    };
    loop {
        let mut status = 0;
        let r = libc::waitpid(qemu, &mut status, libc::WNOHANG);
        if r == qemu {
            if libc::WIFSIGNALED(status) {
                let sig = libc::WTERMSIG(status);
                libc::signal(sig, libc::SIG_DFL);
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, sig);
                libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                libc::kill(libc::getpid(), sig);
                libc::_exit(128 + sig);
            }
            libc::_exit(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                1
            });
        }
        if r < 0 || libc::getppid() != parent {
            // QEMU is gone unseen, or the runner died (SIGKILL, a crash).
            libc::kill(0, libc::SIGKILL);
            libc::_exit(1);
        }
        libc::nanosleep(&tick, std::ptr::null_mut());
    }
}

/// The process group of a running QEMU (its pid): [`kill_group`] kills it until this is
/// dropped.
pub(crate) struct Group(i32);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = GROUP.compare_exchange(self.0, 0, SeqCst, SeqCst);
    }
}

/// Kills every process of the QEMU group that runs now, if any.
pub(crate) fn kill_group() {
    let g = GROUP.load(SeqCst);
    #[cfg(unix)]
    if g > 0 {
        // SAFETY: kill(2) with a negative pid: the group QEMU leads (its leader not yet
        // reaped, or its group still has members, so the id is not reused).
        unsafe {
            libc::kill(-g, libc::SIGKILL);
        }
    }
}

/// Whether `child` has exited, without reaping it (so that its pid, the group's id,
/// stays taken while the group is killed).
pub(crate) fn has_exited(child: &mut Child) -> std::io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: waitid(2) with a zeroed siginfo to fill; WNOWAIT leaves it a zombie.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let r = libc::waitid(
                libc::P_PID,
                child.id(),
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            if r != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(info.si_pid() != 0)
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        child.try_wait().map(|s| s.is_some())
    }
}

/// The runner's stdout was closed (piped into `head`, say): QEMU's group is killed and
/// the runner ends as `SIGPIPE` ends a program.
pub(crate) fn stdout_closed() -> ! {
    kill_group();
    #[cfg(unix)]
    die_of(libc::SIGPIPE);
    std::process::exit(141)
}

/// Marks a QEMU run as watched (begun before QEMU starts): signals from now on are left
/// to [`Watch::pending`] until the watch is dropped; one that came when the watch is
/// dropped ends the process then.
pub(crate) struct Watch(());

impl Watch {
    pub(crate) fn begin() -> Watch {
        // A signal that came while idle has already ended the process.
        let _ = STATE.compare_exchange(IDLE, ACTIVE, SeqCst, SeqCst);
        Watch(())
    }

    /// The signal that came while this QEMU ran, if any.
    pub(crate) fn pending() -> Option<i32> {
        Some(STATE.load(SeqCst)).filter(|&sig| sig > 0)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Err(sig) = STATE.compare_exchange(ACTIVE, IDLE, SeqCst, SeqCst) {
            if sig > 0 {
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
    die_without_flushing(sig)
}

/// [`die_now`] without touching stdout (which may be blocked).
pub(crate) fn die_without_flushing(sig: i32) -> ! {
    #[cfg(unix)]
    die_of(sig);
    // SAFETY: _exit(2) ends the process at once, without running (blocking) cleanups.
    #[cfg(unix)]
    unsafe {
        libc::_exit(128 + sig)
    };
    #[cfg(not(unix))]
    std::process::exit(128 + sig)
}

/// Writes `msg` to stderr from a thread of its own, waiting for it at most 200 ms (stderr
/// may be blocked too): for the control thread, which must not block.
pub(crate) fn tell(msg: String) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        eprintln!("{msg}");
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(std::time::Duration::from_millis(200));
}

/// Ends the process at once with `code`, without flushing (stdout may be blocked).
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit(2) ends the process at once.
    #[cfg(unix)]
    unsafe {
        libc::_exit(code)
    };
    #[cfg(not(unix))]
    std::process::exit(code)
}
