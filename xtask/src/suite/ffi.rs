//! The C API's step (`cargo xtask ffi`).

use crate::steps::{Expect, Run};

/// The C API: with QEMU unless `host_only`.
pub fn suite(run: &mut Run, host_only: bool) {
    run.cargo(
        "ffi: the C API: header current, static library for the host and every target, \
         the C suite (api, torture plain / TSan / its broken control, an interrupt's close \
         of a locking context and its broken control, the C page's example under ASan, \
         debug-objects and its control, the fence installed from C and the heavy-mode torture), a C firmware in QEMU and its broken control, the \
         FreeRTOS example on mps2-an385/an386 and its broken control",
        Expect::Tests(if host_only {
            FFI_CHECKS_HOST
        } else {
            FFI_CHECKS_HOST + FFI_CHECKS_QEMU
        }),
        if host_only {
            &["xtask", "ffi", "--host-only"][..]
        } else {
            &["xtask", "ffi"][..]
        },
        &[],
    );
}

/// `cargo xtask ffi --host-only`'s checks: header, the C page's copy, the host library,
/// (3), a static library per embedded target and its check for panic paths (14), api.c,
/// ceiling.c, sleep.c and its control (2), the two C tortures and their two controls,
/// ctx_close_signal.c and its control (2), two under TSan, the example under ASan (11),
/// debug_objects.c on the debug-objects archive and its control on the plain one (2),
/// heavy_install.c on the auto-fence archive (2), on the membarrier one and on the plain
/// one (2), its race of two installs on a mutants auto-fence archive and its control (2), torture.c in the heavy mode and its control, the auto-fence archive for
/// thumbv7em (3),
/// the header as C++ alone and on either side of the standard headers (3).
const FFI_CHECKS_HOST: u64 = 44;
/// With QEMU: the C firmware and its broken control on each of its two targets (4), the
/// FreeRTOS example, its broken control and its no-wake control on mps2-an385 and
/// mps2-an386 (6), and the C page's example built with each of the six embedded C
/// compilers' flags (6).
const FFI_CHECKS_QEMU: u64 = 16;
