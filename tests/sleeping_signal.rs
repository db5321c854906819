//! A signal handler's reader against `std_wake`: `std_sleeping` installs `std_wake` as the
//! domain's wake hook, and any outermost unlock with a wait asleep calls it, a signal
//! handler's too (the crate's hosted stand-in for an interrupt handler, `ContextReader`'s
//! documented use). `std_wake` took a process-wide mutex, and a handler that interrupted
//! its thread inside it relocked the mutex its thread held: deadlock. `std_wake` now
//! never blocks.
#![cfg(target_os = "linux")]

use rcuref::rcu::{std_sleeping, Rcu};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// Slot 0: the signal handler of thread T (its "interrupt level"), nobody else.
static D: Rcu<8> = Rcu::with_dedicated(1);
static IN_HANDLER: AtomicU64 = AtomicU64::new(0);
static HANDLED: AtomicU64 = AtomicU64::new(0);
static PROGRESS: AtomicU64 = AtomicU64::new(0);
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    IN_HANDLER.fetch_add(1, SeqCst);
    // SAFETY: slot 0 is used only by this handler, which runs on thread T only and
    // leaves its section before it returns.
    let me = unsafe { D.context_reader(0) };
    me.section(|_| {}); // outermost unlock: a wait is asleep, so std_wake runs here
    HANDLED.fetch_add(1, SeqCst);
}

#[test]
fn a_signal_handler_reader_ends_its_section_through_std_wake() {
    // SAFETY: installing a handler for SIGUSR1, which nothing else in this binary uses.
    unsafe { libc::signal(libc::SIGUSR1, on_signal as *const () as libc::sighandler_t) };
    // An old reader that holds the grace period up for the whole test.
    let inside: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    std::thread::spawn(move || {
        let r = D.reader().unwrap();
        let _g = r.lock();
        inside.store(true, SeqCst);
        while !STOP.load(SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    while !inside.load(SeqCst) {
        std::thread::yield_now();
    }
    // A writer asleep in std_sleeping (which installs std_wake on D).
    std::thread::spawn(|| {
        let mut w = D.reader().unwrap();
        let _ = w.synchronize(std_sleeping());
    });
    std::thread::sleep(Duration::from_millis(50));
    // Thread T: an ordinary reader; every unlock wakes the sleeping writer.
    let tid: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
    std::thread::spawn(move || {
        // SAFETY: (test) pthread_self has no precondition.
        tid.store(unsafe { libc::pthread_self() } as usize, SeqCst);
        let r = D.reader().unwrap();
        while !STOP.load(SeqCst) {
            r.section(|_| {});
            PROGRESS.fetch_add(1, SeqCst);
        }
    });
    while tid.load(SeqCst) == 0 {
        std::thread::yield_now();
    }
    while PROGRESS.load(SeqCst) < 10_000 {
        std::thread::yield_now(); // T is well under way (its thread-locals set up)
    }
    let t = tid.load(SeqCst) as libc::pthread_t;
    let start = Instant::now();
    let mut last = (0, Instant::now());
    while start.elapsed() < Duration::from_secs(5) {
        // SAFETY: T is alive (it only exits once STOP is set).
        unsafe { libc::pthread_kill(t, libc::SIGUSR1) };
        std::thread::sleep(Duration::from_micros(50));
        let p = PROGRESS.load(SeqCst);
        if p != last.0 {
            last = (p, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(1) {
            let (i, h) = (IN_HANDLER.load(SeqCst), HANDLED.load(SeqCst));
            if std::env::var_os("REVIEW28_GDB").is_some() {
                // Where T is stuck (diagnostics only).
                let out = std::process::Command::new("gdb")
                    .args(["-p", &std::process::id().to_string(), "-batch"])
                    .args(["-ex", "thread apply all bt 30"])
                    .output();
                if let Ok(o) = out {
                    println!("{}", String::from_utf8_lossy(&o.stdout));
                }
            }
            panic!(
                "thread T is stuck for 1 s after {p} sections: {i} signals entered the \
                 handler, {h} left it (a handler stuck in std_wake's mutex, which the \
                 interrupted thread holds)"
            );
        }
    }
    STOP.store(true, SeqCst);
    println!(
        "no deadlock in 5 s: {} sections, {} signals handled",
        PROGRESS.load(SeqCst),
        HANDLED.load(SeqCst)
    );
}
