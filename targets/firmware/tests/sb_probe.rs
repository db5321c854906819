//! Scratch probe (not committed): does QEMU virt with two harts show store buffering?
#![no_std]
#![no_main]

use rcuref_firmware as _;

#[embedded_test::tests(default_timeout = 120)]
mod tests {
    #[cfg(any(target_arch = "riscv32", target_arch = "riscv64"))]
    #[test]
    fn sb_probe() {
        use core::sync::atomic::Ordering::Relaxed;
        use portable_atomic::AtomicU32;
        use rcuref_firmware::hart::{run_on_both, Rendezvous};
        static X: AtomicU32 = AtomicU32::new(0);
        static Y: AtomicU32 = AtomicU32::new(0);
        static R: [AtomicU32; 2] = [AtomicU32::new(9), AtomicU32::new(9)];
        static SB: AtomicU32 = AtomicU32::new(0);
        static SB_FENCED: AtomicU32 = AtomicU32::new(0);
        static RV: Rendezvous = Rendezvous::new();
        const N: u32 = 20_000;
        fn job(h: usize) {
            for round in 0..2 * N {
                let fenced = round >= N;
                RV.wait();
                let (mine, other) = if h == 0 { (&X, &Y) } else { (&Y, &X) };
                mine.store(1, Relaxed);
                if fenced {
                    portable_atomic::fence(core::sync::atomic::Ordering::SeqCst);
                } else {
                    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
                }
                R[h].store(other.load(Relaxed), Relaxed);
                RV.wait();
                if h == 0 {
                    if R[0].load(Relaxed) == 0 && R[1].load(Relaxed) == 0 {
                        if fenced {
                            SB_FENCED.fetch_add(1, Relaxed);
                        } else {
                            SB.fetch_add(1, Relaxed);
                        }
                    }
                    X.store(0, Relaxed);
                    Y.store(0, Relaxed);
                }
                RV.wait();
            }
        }
        run_on_both(job);
        defmt::info!(
            "store buffering: {=u32} of {=u32} rounds unfenced, {=u32} fenced",
            SB.load(Relaxed),
            N,
            SB_FENCED.load(Relaxed)
        );
    }
}
