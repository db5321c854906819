//! A future woken through `Wakers` must not miss its only wake (found by the hostile
//! review of issue 27: it did, and hung for ever).
//!
//! The reader's unlock stores its slot word, *then* loads the phase word
//! (`Rcu::wake_sleepers` -> `wake_for`) and skips the wake when its section's phase
//! equals the word. If, between the two, another driver ends the wait that the
//! reader held and flips the counter to the next wait (which records the reader's own
//! phase again, phases alternate), the unlock finds "its" phase current and skips the
//! wake. `GpCookie::only_readers_hold` only looks at the moment the future goes to
//! sleep, so it cannot exclude a driver that registers later. The second driver's
//! wait at the next flip finds the domain empty (the reader held a `ReadToken`, whose
//! drop frees the slot in the same store) and so issues no heavy fence, whose
//! `UnderWay` drop would have woken the sleepers. Nobody wakes the future; its grace
//! period is over; a quiescent program never polls it again.
//!
//! The third race is the one the step's own wake is for (`gp::wake_after_wait`): the
//! other driver ends the future's last wait and flips on to a wait that a second reader
//! holds, so the unlock's check reads the counter at a wait its section does not hold
//! and rightly sends no wake; only the step wakes the future. Its control
//! (`Mutant::StepWakesNobody`) runs only on one core: in the heavy modes the other
//! driver's heavy fence for that next wait wakes the sleepers as it returns.
//!
//! The interleaving is made exact with the library's interrupt point
//! `Gap::DropAfterStore` (the token's drop, between its release store and its wake
//! check): the handler is the other driver (it could as well be another core while
//! the reader's thread is preempted there).
//!
//! The fourth race is the sleeper's own (`Rcu::announce_sleep`): it chooses the phase
//! bit it announces from the counter, and another driver moves the counter between that
//! read and the announcement. Raced at every counter value of two laps of a 4-bit
//! counter (`mutants::set_gp_bits`, so across the wrap) through the pause point
//! `Point::SleepBeforeAnnounce`, its control is `Mutant::SleepBitNotRechecked`. The
//! loop over two laps was written by the hostile review of the announcement bits.
//!
//! Commands:
//! * run-time mode: `RUSTFLAGS="--cfg rcuref_mutants" cargo test --release
//!   --features auto-fence --test lost_wake`
//! * asymmetric mode: `RUSTFLAGS="--cfg rcuref_asymmetric_fence --cfg rcuref_mutants"
//!   cargo test --release --test lost_wake`
//! * one core: `RUSTFLAGS="--cfg rcuref_unsafe_assume_single_core --cfg rcuref_mutants"
//!   cargo test --release --test lost_wake` (the reader preempted by a
//!   higher-priority writer task; there no heavy fence wakes anyone, so the step's wake
//!   is the only one: the control of the third race; `cargo xtask test` runs this build
//!   as its step "one core's fences")
#![cfg(all(
    rcuref_mutants,
    any(
        rcuref_auto_fence,
        rcuref_asymmetric_fence,
        rcuref_unsafe_assume_single_core
    ),
    not(miri)
))]

use rcuref::mutants::{interrupt_pending, set_gp_bits, set_interrupt, set_pause_hook, Gap, Point};
use rcuref::rcu::{Rcu, ReadToken, Wakers};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

/// A heavy fence for this single-threaded test: the calling thread's own full fence is
/// the only reader's barrier (readers and writers all run on this thread).
#[allow(dead_code)]
struct OneThread;
// SAFETY: used only by a test whose readers and writers all run on one thread.
unsafe impl rcuref::rcu::heavy::HeavyFence for OneThread {
    fn heavy_fence() {
        std::sync::atomic::fence(SeqCst);
    }
}

#[cfg(rcuref_asymmetric_fence)]
rcuref::set_heavy_fence!(OneThread);

static RCU: Rcu<2> = Rcu::new();
static WAKERS: Wakers<2> = Wakers::new();
fn wake() {
    WAKERS.wake()
}

/// The second driver's cookie (raw), polled by the handler.
static OTHER: AtomicU32 = AtomicU32::new(0);

/// The "interrupt" (or another core) between the token's release store and its wake
/// check: another driver polls its own grace period, taken at the same counter value as
/// the future's.
fn other_driver(_: usize) {
    let c = RCU.cookie_from_raw(OTHER.load(SeqCst));
    assert!(c.poll(), "the other driver's grace period should end here");
}

struct Count(AtomicUsize);
impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// The tests share the process's test hooks (the interrupt, the pause hook, the
/// selected variant, the counter's width) and its fence mode: one at a time. The first
/// installs the one-thread fence (the mode must come out heavy).
fn serial() -> Serial {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let held = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    #[cfg(all(rcuref_auto_fence, not(rcuref_asymmetric_fence)))]
    {
        let _ = rcuref::rcu::heavy::install::<OneThread>();
        assert_eq!(
            rcuref::rcu::heavy::fence_mode(),
            rcuref::rcu::heavy::FenceMode::Heavy
        );
    }
    Serial(held)
}

/// A test's turn (`serial`): when it ends, passed or failed, the hooks are back to none,
/// the real code selected and the counter 32 bits wide, so that a failed test cannot
/// run the next under its broken variant.
struct Serial(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);
impl Drop for Serial {
    fn drop(&mut self) {
        rcuref::mutants::select(rcuref::mutants::Mutant::None);
        set_pause_hook(None);
        set_interrupt(None, |_| {}, 0);
        set_gp_bits(32);
    }
}

/// The race, made exact: returns how often the future's task was woken once both grace
/// periods were over.
fn unlock_racing_a_flip() -> usize {
    RCU.set_wake_hook(Some(wake));

    // A reader inside a section of phase 0, on a slot of its own (`down_read`).
    let token = RCU.down_read().unwrap();
    let slot = RCU.slot_addr(token.slot());

    // Two writers take cookies at the same counter value: the future, and another
    // driver (a second task, a blocking `synchronize` on another core, ...).
    let mine = RCU.start_poll();
    OTHER.store(RCU.start_poll().into_raw(), SeqCst);

    let count = Arc::new(Count(AtomicUsize::new(0)));
    let waker = Waker::from(count.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(mine.wait_woken(&WAKERS));
    assert!(
        fut.as_mut().poll(&mut cx).is_pending(),
        "the reader holds it"
    );
    assert_eq!(
        WAKERS.in_use(),
        1,
        "the future did not go to sleep on its cell"
    );
    assert_eq!(count.0.load(SeqCst), 0, "woken before the unlock");

    // The reader leaves; between its release store and its wake check the other
    // driver ends both grace periods.
    set_interrupt(Some((Gap::DropAfterStore, slot)), other_driver, 0);
    drop(token);
    assert!(!interrupt_pending(), "the interrupt did not fire");

    assert!(mine.is_done(), "the future's grace period is over");
    // The program is quiescent now: no reader, no other writer. Only a wake that has
    // already been sent can ever make the executor poll the future again.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let woken = count.0.load(SeqCst);
    if woken >= 1 {
        assert!(fut.as_mut().poll(&mut cx).is_ready());
    }
    woken
}

/// An unlock that races another driver's flip (the reader's wake check reads the
/// counter past its wait): the step that ended the wait wakes the future.
#[test]
fn an_unlock_racing_a_flip_still_wakes_the_future() {
    let _serial = serial();
    let woken = unlock_racing_a_flip();
    assert!(
        woken >= 1,
        "lost wake: the grace period is over, the future's task was woken {woken} times \
         and sleeps on its cell for ever (cells in use: {})",
        WAKERS.in_use()
    );
}

/// The control: the old protocol (the unlock judged by the phase word, steps that wake
/// nobody) loses the future's only wake.
#[test]
fn negative_control_the_old_wake_protocol_is_caught() {
    let _serial = serial();
    rcuref::mutants::select(rcuref::mutants::Mutant::OldWakeProtocol);
    let woken = unlock_racing_a_flip();
    rcuref::mutants::select(rcuref::mutants::Mutant::None);
    assert_eq!(woken, 0, "the variant's lost wake did not happen");
}

static RCU3: Rcu<3> = Rcu::new();
static WAKERS3: Wakers<2> = Wakers::new();
fn wake3() {
    WAKERS3.wake()
}
static OTHER3: AtomicU32 = AtomicU32::new(0);
/// The other driver of `a_step_that_ends_the_wait_wakes_the_future`: ends the wait the
/// reader held and flips to the next, which a second reader holds.
fn other_driver3(_: usize) {
    let c = RCU3.cookie_from_raw(OTHER3.load(SeqCst));
    assert!(
        !c.poll(),
        "the second reader should hold the other driver's next wait"
    );
}

/// The step's own wake (`gp::wake_after_wait`): the future's last wait ends by another
/// driver's step, between the last reader's release store and its wake check, and that
/// driver flips on to the next wait, which a second reader (entered during the future's
/// first wait) holds. The unlock then reads the counter at that next wait, which its
/// section does not hold, and rightly sends no wake: only the step that ended the
/// future's wait can wake it. Returns how often the future's task was woken while the
/// second reader is still inside (its unlock would wake it, late).
fn step_past_the_last_readers_wait() -> usize {
    RCU3.set_wake_hook(Some(wake3));
    // R0 holds the future's first wait; R enters during it, so it holds the second.
    let r0 = RCU3.down_read().unwrap();
    let mine = RCU3.start_poll();
    assert!(!mine.poll(), "R0 holds the first wait");
    let r = RCU3.down_read().unwrap();
    let slot = RCU3.slot_addr(r.slot());
    drop(r0);
    assert!(!mine.poll(), "R holds the second wait");
    // R2 enters during the second wait: it holds the wait after it.
    let r2 = RCU3.down_read().unwrap();
    OTHER3.store(RCU3.start_poll().into_raw(), SeqCst);

    let count = Arc::new(Count(AtomicUsize::new(0)));
    let waker = Waker::from(count.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(mine.wait_woken(&WAKERS3));
    assert!(fut.as_mut().poll(&mut cx).is_pending(), "R holds it");
    assert_eq!(WAKERS3.in_use(), 1, "the future did not sleep on its cell");

    set_interrupt(Some((Gap::DropAfterStore, slot)), other_driver3, 0);
    drop(r);
    assert!(!interrupt_pending(), "the interrupt did not fire");
    assert!(mine.is_done(), "the future's grace period is over");
    let woken = count.0.load(SeqCst);
    // The second reader's unlock sends no wake either: its section holds no wait the
    // future announced (it sleeps on the phase of its own last wait). The test polls
    // the future itself, as an executor would never do without a wake.
    drop(r2);
    assert!(fut.as_mut().poll(&mut cx).is_ready());
    assert!(RCU3.cookie_from_raw(OTHER3.load(SeqCst)).poll());
    woken
}

/// The step that ends a sleeping future's wait wakes it, even when the last reader's
/// wake check comes after the counter has moved on to a wait that another reader holds.
#[test]
fn a_step_that_ends_the_wait_wakes_the_future() {
    let _serial = serial();
    let woken = step_past_the_last_readers_wait();
    assert!(
        woken >= 1,
        "the future's grace period ended and it slept on until a later reader left \
         (woken {woken} times)"
    );
}

/// The control: steps that wake nobody (`Mutant::StepWakesNobody`), the unlock's
/// protocol kept. Only on one core: in the heavy modes the other driver's heavy fence for
/// the next wait (the second reader's slot is claimed) wakes the sleepers as it returns
/// (`UnderWay`), so the variant loses nothing there.
#[cfg(rcuref_unsafe_assume_single_core)]
#[test]
fn negative_control_a_step_that_wakes_nobody_is_caught() {
    let _serial = serial();
    rcuref::mutants::select(rcuref::mutants::Mutant::StepWakesNobody);
    let woken = step_past_the_last_readers_wait();
    rcuref::mutants::select(rcuref::mutants::Mutant::None);
    assert_eq!(woken, 0, "the variant's lost wake did not happen");
}

static RCU2: Rcu<2> = Rcu::new();
static WAKERS2: Wakers<2> = Wakers::new();
fn wake2() {
    WAKERS2.wake()
}
static OTHER2: AtomicU32 = AtomicU32::new(0);
fn other_driver2(_: usize) {
    let c = RCU2.cookie_from_raw(OTHER2.load(SeqCst));
    assert!(c.poll(), "the other driver's grace period should end here");
}

/// The same race with a reader that keeps its slot (`Reader`), interrupted at
/// `Gap::UnlockAfterStore`. In the heavy modes the second driver's next wait sees the
/// slot claimed and issues a heavy fence, whose `UnderWay` wakes the sleepers (this
/// passes there); on one core (`rcuref_unsafe_assume_single_core`) nothing does.
#[test]
fn an_unlock_racing_a_flip_still_wakes_a_reader_that_keeps_its_slot() {
    let _serial = serial();
    RCU2.set_wake_hook(Some(wake2));
    let reader = RCU2.reader().unwrap();
    let slot = RCU2.slot_addr(reader.slot());
    let guard = reader.lock();
    let mine = RCU2.start_poll();
    OTHER2.store(RCU2.start_poll().into_raw(), SeqCst);
    let count = Arc::new(Count(AtomicUsize::new(0)));
    let waker = Waker::from(count.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(mine.wait_woken(&WAKERS2));
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    assert_eq!(WAKERS2.in_use(), 1, "the future did not sleep on its cell");
    set_interrupt(Some((Gap::UnlockAfterStore, slot)), other_driver2, 0);
    drop(guard);
    assert!(!interrupt_pending(), "the interrupt did not fire");
    assert!(mine.is_done());
    let woken = count.0.load(SeqCst);
    assert!(
        woken >= 1,
        "lost wake: grace period over, task woken {woken} times, cells in use: {}",
        WAKERS2.in_use()
    );
    assert!(fut.as_mut().poll(&mut cx).is_ready());
    drop(reader);
}

/// The counter's width while the announcement races run (a lap is 16 values), and the
/// domain of the current run (a fresh one for each counter value, leaked).
const MASK4: u32 = 15;
static DOM4: AtomicPtr<Rcu<3>> = AtomicPtr::new(std::ptr::null_mut());
static WAKES4: AtomicUsize = AtomicUsize::new(0);
fn wake4() {
    WAKES4.fetch_add(1, SeqCst);
}
static OTHER4: AtomicU32 = AtomicU32::new(0);
static ARMED4: AtomicBool = AtomicBool::new(false);
static TWO_WAITS4: AtomicBool = AtomicBool::new(false);
std::thread_local! {
    /// The readers' sections (the test runs on one thread: the pause hook is the other
    /// contexts).
    static SECTIONS4: std::cell::RefCell<Vec<ReadToken<'static, 3>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}
fn dom4() -> &'static Rcu<3> {
    // SAFETY: (test) `DOM4` holds a domain leaked by `flip_before_the_announcement`
    // (never freed), stored before the pause hook is installed.
    unsafe { &*DOM4.load(SeqCst) }
}

/// The pause hook of `flip_before_the_announcement`, at the sleeper's announcement
/// point. The first reader leaves (nobody has announced: no wake). With one wait, a
/// second reader enters (it records the new phase) and another driver ends the wait and
/// flips to the next, which the second reader holds: the bit changes. With two waits,
/// another driver ends the sleeper's wait and the next one, and flips to the one after,
/// held by a second reader: the bit is the same again, the counter two waits on.
fn race_the_announcement(at: Point) {
    if !matches!(at, Point::SleepBeforeAnnounce) || !ARMED4.swap(false, SeqCst) {
        return;
    }
    let d = dom4();
    SECTIONS4.with(|s| s.borrow_mut().clear());
    if !TWO_WAITS4.load(SeqCst) {
        SECTIONS4.with(|s| s.borrow_mut().push(d.down_read().unwrap()));
        let c = d.cookie_from_raw(OTHER4.load(SeqCst));
        assert!(
            !c.poll(),
            "the second reader should hold the other driver's next wait"
        );
    } else {
        let w = d.gp_counter();
        assert_eq!(w & 1, 1, "the sleeper sleeps at a wait");
        let c = d.cookie_from_raw((w + 3) & MASK4);
        assert!(c.poll());
        assert_eq!(d.gp_counter(), (w + 3) & MASK4);
        SECTIONS4.with(|s| s.borrow_mut().push(d.down_read().unwrap()));
        let c = d.start_poll();
        OTHER4.store(c.into_raw(), SeqCst);
        assert!(
            !c.poll(),
            "the second reader should hold the wait two after the sleeper's"
        );
        assert_eq!(d.gp_counter(), (w + 4) & MASK4);
    }
}

/// A sleeping wait chooses the phase bit of its announcement from the counter
/// (`Rcu::announce_sleep`); between that read and the announcement another driver
/// moves the counter (`race_the_announcement`), `start` waits into the counter's lap.
/// Returns (wakes sent by the second reader's unlock while the wait slept on it, wakes
/// sent by a section begun after the flip).
fn flip_before_the_announcement(start: u32, two_waits: bool) -> (usize, usize) {
    let d: &'static Rcu<3> = Box::leak(Box::new(Rcu::new()));
    DOM4.store(d as *const _ as *mut _, SeqCst);
    for k in 1..=start {
        assert!(d.cookie_from_raw(k & MASK4).poll());
    }
    assert_eq!(d.gp_counter(), start & MASK4);
    d.set_wake_hook(Some(wake4));
    TWO_WAITS4.store(two_waits, SeqCst);
    SECTIONS4.with(|s| s.borrow_mut().push(d.down_read().unwrap()));
    let mine = if two_waits {
        d.cookie_from_raw((start + 5) & MASK4)
    } else {
        d.start_poll()
    };
    OTHER4.store(d.start_poll().into_raw(), SeqCst);
    set_pause_hook(Some(race_the_announcement));
    let mut woken = None;
    let mut stray = 0;
    let mut me = d.reader().unwrap();
    me.cond_synchronize(mine, |w| {
        if w.attempts() == 1 {
            ARMED4.store(true, SeqCst);
        }
        w.sleep(|| {
            if woken.is_none() {
                // A section that begins now records the phase of the stale bit: its
                // unlock passes the bit's test and must find, by the counter, that it
                // holds no wait (`Rcu::wake_for`).
                let before = WAKES4.load(SeqCst);
                drop(d.down_read().unwrap());
                stray = WAKES4.load(SeqCst) - before;
                // Asleep on the second reader: its unlock is the wait's only wake.
                let before = WAKES4.load(SeqCst);
                SECTIONS4.with(|s| s.borrow_mut().clear());
                woken = Some(WAKES4.load(SeqCst) - before);
            }
        });
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    set_pause_hook(None);
    assert!(
        !ARMED4.load(SeqCst),
        "the pause point was never reached (start {start})"
    );
    assert!(
        d.cookie_from_raw(OTHER4.load(SeqCst)).poll(),
        "the other driver's grace period should end once the readers have left"
    );
    d.set_wake_hook(None);
    drop(me);
    (
        woken.expect("the wait never slept on the second reader"),
        stray,
    )
}

/// The counter moved between the sleeper's choice of its announcement bit and the
/// announcement, from every counter value of two laps (so across the wrap): by one
/// wait (the bit changes: the check after announcing adds the new one) and, from each
/// wait, by two (the bit is the same again). Each time the second reader's unlock wakes
/// the wait once and a section begun after the flip sends no wake.
#[test]
fn a_flip_before_the_announcement_costs_no_wake() {
    let _serial = serial();
    set_gp_bits(4); // until the test's turn ends (`Serial`)
    let mut bad = Vec::new();
    for start in 0..2 * (MASK4 + 1) {
        let r = flip_before_the_announcement(start, false);
        if r != (1, 0) {
            bad.push(("one wait", start, r));
        }
        if start & 1 == 1 {
            let r = flip_before_the_announcement(start, true);
            if r != (1, 0) {
                bad.push(("two waits", start, r));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "lost or extra wakes (case, start, (woken, stray)): {bad:?}"
    );
}

/// The control: without that check (`Mutant::SleepBitNotRechecked`) the unlock skips
/// the wake path and nothing else wakes the wait, at every start of the two laps.
#[test]
fn negative_control_a_stale_announcement_bit_is_caught() {
    let _serial = serial();
    set_gp_bits(4); // until the test's turn ends (`Serial`)
    rcuref::mutants::select(rcuref::mutants::Mutant::SleepBitNotRechecked);
    let lost: Vec<u32> = (0..2 * (MASK4 + 1))
        .filter(|&start| flip_before_the_announcement(start, false).0 != 1)
        .collect();
    rcuref::mutants::select(rcuref::mutants::Mutant::None);
    assert_eq!(
        lost.len(),
        32,
        "the variant's lost wake did not happen at every start: {lost:?}"
    );
}
