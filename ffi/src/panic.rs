//! The library's panic handler (feature `panic-handler`, on by default). Nothing in
//! this library panics on a condition its caller can cause: every one is a return
//! code. A panic here is a bug in rcuref; it stops the program rather than unwind into
//! C. Turn the feature off to link beside another Rust library that has its own.

#[cfg(target_os = "linux")]
extern "C" {
    fn abort() -> !;
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    #[cfg(target_os = "linux")]
    // SAFETY: C's abort() takes nothing and never returns.
    unsafe {
        abort()
    }
    #[cfg(not(target_os = "linux"))]
    loop {
        core::hint::spin_loop();
    }
}

/// The unwinder's personality routine, which core's precompiled objects for hosted
/// targets still name although this library aborts on panic (`panic = "abort"`):
/// without it a C program linked without `--gc-sections` fails to link. Nothing calls
/// it: no frame of this library unwinds. Part of `panic-handler` because a Rust
/// library with `std` beside this one brings the real one.
#[cfg(not(target_os = "none"))]
#[no_mangle]
extern "C" fn rust_eh_personality() {}
