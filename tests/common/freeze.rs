//! Preemption injection on the host (Linux): stop a chosen thread between any two of its
//! instructions, for as long as a test likes, while other threads work. This is what an
//! RTOS does to a low-priority context when higher-priority work runs, and what broke
//! the old free list (ABA) and grace-period try-lock (priority inversion).
//!
//! * [`Freezer`] (arbitrary points): a signal whose handler sleeps until released. The
//!   frozen thread stops wherever the signal lands.
//! * [`stop_at`] (exact points, mutant builds only): the library calls a pause hook at a
//!   few named points (`mutants::Point`); the thread that armed a point stops there.

#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

static FROZEN: AtomicBool = AtomicBool::new(false);
static INSIDE: AtomicI32 = AtomicI32::new(0);
static FREEZES: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_freeze_signal(_: libc::c_int) {
    // Only atomics and nanosleep here: both are async-signal-safe.
    INSIDE.fetch_add(1, SeqCst);
    let pause = libc::timespec {
        tv_sec: 0,
        tv_nsec: 50_000,
    };
    while FROZEN.load(SeqCst) {
        // SAFETY: nanosleep with a valid timespec and no remainder pointer.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
    }
    INSIDE.fetch_sub(1, SeqCst);
}

/// The identity of the calling thread, for [`Freezer::freeze`].
pub fn me() -> libc::pthread_t {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() }
}

/// Freezes threads at arbitrary points with `SIGUSR1`. One freeze at a time.
pub struct Freezer;

impl Freezer {
    /// Installs the signal handler (idempotent).
    pub fn new() -> Self {
        // SAFETY: a zeroed sigaction with our handler and SA_RESTART (so interrupted
        // system calls resume) is a valid argument; the handler is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_freeze_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
        }
        Freezer
    }

    /// Stops `thread` wherever it is now and returns once it is stopped; it resumes
    /// when the returned guard is dropped.
    pub fn freeze(&self, thread: libc::pthread_t) -> Frozen {
        // One freeze at a time in the process (tests run in parallel).
        let serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        assert!(!FROZEN.swap(true, SeqCst));
        // SAFETY: `thread` is a live thread of this process (the caller's contract).
        assert_eq!(unsafe { libc::pthread_kill(thread, libc::SIGUSR1) }, 0);
        let t0 = Instant::now();
        while INSIDE.load(SeqCst) == 0 {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the thread never stopped"
            );
            std::hint::spin_loop();
        }
        FREEZES.fetch_add(1, SeqCst);
        Frozen(serial)
    }

    /// How many freezes have been applied in this process.
    pub fn count() -> u64 {
        FREEZES.load(SeqCst)
    }
}

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A frozen thread; dropping this thaws it (and waits until it has left the handler).
pub struct Frozen(std::sync::MutexGuard<'static, ()>);

impl Drop for Frozen {
    fn drop(&mut self) {
        FROZEN.store(false, SeqCst);
        while INSIDE.load(SeqCst) != 0 {
            std::hint::spin_loop();
        }
    }
}

#[cfg(rcuref_mutants)]
pub use exact::*;

#[cfg(rcuref_mutants)]
mod exact {
    use rcuref::mutants::{set_pause_hook, Point};
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

    /// How many stops a scenario can number (each stop happens once).
    const STOPS: usize = 4;

    std::thread_local! {
        /// The calling thread's stops still to come, in order: (point, stop number).
        static PLAN: RefCell<VecDeque<(Point, usize)>> = const { RefCell::new(VecDeque::new()) };
    }
    static STOPPED: [AtomicBool; STOPS] = [const { AtomicBool::new(false) }; STOPS];
    static GO: [AtomicBool; STOPS] = [const { AtomicBool::new(false) }; STOPS];

    fn hook(at: Point) {
        let next = PLAN.with(|p| {
            let mut p = p.borrow_mut();
            match p.front() {
                Some(&(point, n)) if point == at => {
                    p.pop_front();
                    Some(n)
                }
                _ => None,
            }
        });
        if let Some(n) = next {
            STOPPED[n].store(true, SeqCst);
            while !GO[n].load(SeqCst) {
                std::thread::yield_now();
            }
        }
    }

    /// Prepares stops (installs the hook, clears the last stops' state): call it on
    /// the controlling thread before starting the threads that will stop.
    pub fn prepare_stop() {
        set_pause_hook(Some(hook));
        for n in 0..STOPS {
            STOPPED[n].store(false, SeqCst);
            GO[n].store(false, SeqCst);
        }
    }

    /// Arms `at` for the calling thread as stop 0: the next time it reaches that point
    /// it stops until [`resume`].
    pub fn stop_at(at: Point) {
        stop_n_at(0, at);
    }

    /// Adds stop `n` (below `STOPS`) to the calling thread's plan: once its earlier
    /// stops have happened, the next time it reaches `at` it stops until [`resume_n`].
    pub fn stop_n_at(n: usize, at: Point) {
        assert!(n < STOPS);
        PLAN.with(|p| p.borrow_mut().push_back((at, n)));
    }

    /// Waits until stop 0 has happened (true), or `timeout` passed (false).
    pub fn wait_stopped(timeout: std::time::Duration) -> bool {
        wait_stopped_n(0, timeout)
    }

    /// Waits until stop `n` has happened (true), or `timeout` passed (false).
    pub fn wait_stopped_n(n: usize, timeout: std::time::Duration) -> bool {
        let t0 = std::time::Instant::now();
        while !stopped_n(n) {
            if t0.elapsed() > timeout {
                return false;
            }
            std::thread::yield_now();
        }
        true
    }

    /// Whether stop `n` has happened.
    pub fn stopped_n(n: usize) -> bool {
        STOPPED[n].load(SeqCst)
    }

    /// Lets the thread of stop 0 go on.
    pub fn resume() {
        resume_n(0);
    }

    /// Lets the thread of stop `n` go on.
    pub fn resume_n(n: usize) {
        GO[n].store(true, SeqCst);
    }

    /// Lets every stopped thread go on and removes the hook (a scenario's clean-up,
    /// however it ended).
    pub fn release_all() {
        for go in &GO {
            go.store(true, SeqCst);
        }
        set_pause_hook(None);
    }
}
