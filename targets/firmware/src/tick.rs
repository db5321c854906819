//! SysTick as a source of preemption for interrupt-context tests.
//!
//! A test installs a handler with [`start`], runs its thread-side loop, and calls
//! [`stop`]; the binary must route the `SysTick` exception to [`on_tick`] (the
//! `systick_handler!` macro does).

use core::sync::atomic::Ordering;
use cortex_m::peripheral::{syst::SystClkSource, SYST};
use portable_atomic::{AtomicPtr, AtomicU32};

static HANDLER: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());
static TICKS: AtomicU32 = AtomicU32::new(0);

/// Starts SysTick every `reload + 1` core cycles, calling `handler` from the interrupt.
pub fn start(reload: u32, handler: fn()) {
    HANDLER.store(handler as *mut (), Ordering::Release);
    TICKS.store(0, Ordering::Relaxed);
    // SAFETY: the tests are the only users of SYST; stealing the peripherals here does
    // not alias a `Peripherals` value held elsewhere that touches SYST concurrently.
    let mut syst = unsafe { cortex_m::Peripherals::steal() }.SYST;
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(reload);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

/// Stops SysTick and returns how many times the handler ran.
pub fn stop() -> u32 {
    // SAFETY: as in `start`.
    let mut syst = unsafe { cortex_m::Peripherals::steal() }.SYST;
    syst.disable_interrupt();
    syst.disable_counter();
    HANDLER.store(core::ptr::null_mut(), Ordering::Release);
    cortex_m::asm::dsb();
    TICKS.load(Ordering::Relaxed)
}

/// How many ticks have run since `start`.
pub fn ticks() -> u32 {
    TICKS.load(Ordering::Relaxed)
}

/// Called from the SysTick exception.
pub fn on_tick() {
    let p = HANDLER.load(Ordering::Acquire);
    if !p.is_null() {
        TICKS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `HANDLER` only holds null or a `fn()` stored by `start`; function and
        // data pointers have the same representation on Cortex-M.
        let f: fn() = unsafe { core::mem::transmute::<*mut (), fn()>(p) };
        f();
    }
}

/// Keeps `SYST` from being flagged unused on builds that never start it.
#[allow(dead_code)]
fn _uses(_: &SYST) {}

/// Defines the `SysTick` exception handler of the binary, forwarding to [`on_tick`].
#[macro_export]
macro_rules! systick_handler {
    () => {
        #[cortex_m_rt::exception]
        fn SysTick() {
            $crate::tick::on_tick();
        }
    };
}
