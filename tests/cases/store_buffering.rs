//! The store-buffering torture (shared by tests/asymmetric.rs and tests/auto_fence.rs):
//! a reader whose announce is still in its core's store buffer while it reads, against a
//! writer that unpublishes, waits for a grace period and frees. Only a heavy fence or the
//! reader's own full fence keeps the reader from reading freed data.
#![allow(dead_code)] // each includer uses what it needs

use rcuref::rcu::Rcu;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::*};

/// Sets its flag when dropped, unwinding included: a torture's side that panics still
/// tells the other side to stop, so the run fails instead of hanging.
pub(crate) struct Raise<'a>(pub(crate) &'a AtomicBool);

impl Drop for Raise<'_> {
    fn drop(&mut self) {
        self.0.store(true, Release);
    }
}

pub(crate) const LIVE: u32 = 1;
pub(crate) const FREED: u32 = 2;

/// Cache lines both threads write, so that each write by one thread must fetch the line
/// from the other's cache.
#[repr(align(128))]
pub(crate) struct Line(pub(crate) AtomicU32);

/// A value on a cache line of its own (and at the line's start, so at the same offsets
/// in every process, wherever ASLR puts the stack): a torture's handshake flags and the
/// pointer the reader loads must not share a line by chance.
#[repr(align(128))]
pub(crate) struct Own<T>(pub(crate) T);

impl<T> core::ops::Deref for Own<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Lines the reader writes just before it announces itself: enough to keep its announce
/// queued in the store buffer (each needs the line back from the writer's cache) for
/// longer than the writer takes from publishing to scanning.
pub(crate) const LINES: usize = 32;

/// One run of the store-buffering torture: a reader enters sections back to back, reads
/// which buffer is published and, a moment later, checks it is not freed; a writer swaps
/// the two buffers, waits for the grace period by polling, frees the old one, and makes
/// it live again before it publishes it next. Before each section the reader raises a
/// flag and writes lines the writer has just taken back, so its announce queues behind
/// them in the store buffer while its loads go ahead; the writer starts each round when
/// it sees the flag, so that its publish and scan fall inside that window (the window
/// the heavy fence closes). Between rounds the writer moves the counter on by 0 to 3
/// steps (round `r` starts at a counter `% 4 == r % 4`), so its cookies are taken at
/// every point of a grace period: at the start, in its first wait, between its waits,
/// in its second wait (where heavy fences run, only a grace period's first wait issues
/// one, and a cookie taken later must not count its second wait as its own first:
/// `Mutant::UnalignedCookies`). Returns how many reads saw a freed buffer inside a
/// section.
pub(crate) fn store_buffering_torture(rounds: u32) -> u32 {
    store_buffering_torture_switching(rounds, &|| ())
}

/// [`store_buffering_torture`], with `switch` called by the writer right after each
/// unpublish (the reader may be inside, having entered in the mode before) and right
/// after each free: the run-time build's control tries to change the mode there.
pub(crate) fn store_buffering_torture_switching(rounds: u32, switch: &(dyn Fn() + Sync)) -> u32 {
    let rcu: Rcu<2> = Rcu::new();
    let bufs = [AtomicU32::new(LIVE), AtomicU32::new(FREED)];
    let current = AtomicUsize::new(0);
    let ready = AtomicU32::new(0);
    let done = AtomicBool::new(false);
    let bad = AtomicU32::new(0);
    let contended: [Line; LINES] = std::array::from_fn(|_| Line(AtomicU32::new(0)));
    std::thread::scope(|s| {
        s.spawn(|| {
            let reader = rcu.reader().unwrap();
            let mut n = 0u32;
            while !done.load(Relaxed) {
                n = n.wrapping_add(1);
                ready.store(n, Relaxed);
                for l in &contended {
                    l.0.store(n, Relaxed);
                }
                let g = reader.lock();
                let i = current.load(Acquire);
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
                if bufs[i].load(Acquire) != LIVE {
                    bad.fetch_add(1, Relaxed);
                }
                drop(g);
            }
        });
        let _done = Raise(&done);
        let mut seen = 0;
        for r in 0..rounds {
            // Wait for the reader to start an iteration (bounded: it may have stopped
            // short of one at the very end).
            for _ in 0..1_000_000 {
                let now = ready.load(Relaxed);
                if now != seen {
                    seen = now;
                    break;
                }
                std::hint::spin_loop();
            }
            let old = current.load(Relaxed);
            let new = 1 - old;
            bufs[new].store(LIVE, Release);
            current.store(new, Release); // publish new, unpublish old
            switch();
            let cookie = rcu.start_poll();
            while !cookie.poll() {
                std::hint::spin_loop();
            }
            bufs[old].store(FREED, Release);
            switch();
            // The next round's cookie at counter % 4 == (r + 1) % 4: flips never
            // wait, and a wait's step waits only for the reader's short section.
            let g = rcu.gp_counter();
            let on = rcu.cookie_from_raw(g.wrapping_add(r.wrapping_add(1).wrapping_sub(g) & 3));
            while !on.poll() {
                std::hint::spin_loop();
            }
            for l in &contended {
                l.0.store(r, Relaxed);
            }
        }
    });
    bad.load(Relaxed)
}
