//! Each hot path once between two marks, for counting the instructions it executes in
//! QEMU (`cargo xtask bench --icount`; the counting plugin is `../plugin/icount.c`).
//!
//! [`OPS`] lists the operations; [`REPS`] rounds run each in turn: `setup` (not
//! counted), then [`icount_begin`], the operation called through a function pointer,
//! [`icount_end`].
//! The plugin writes the instruction count at every execution of either mark, so a
//! `begin`..`end` difference is the operation plus a constant (the marks' bodies, the
//! call and return), which the `empty` operation measures and xtask subtracts. Each
//! operation runs on a single core with interrupts never enabled, from statics set up
//! before the first mark: an uncontended fast path. The firmware exits through
//! semihosting, after printing the operations' names in order (`icount rounds=3
//! ops=empty,...`), with 0 only if every operation did what it should (a lookup found its
//! value, a `put_close` closed, a poll ended its grace period).
//!
//! On the host (x86_64) the same rounds run as a program, `icount <operation>`, under
//! valgrind's callgrind: the named operation's last-round call goes through
//! [`icount_window`](ops::icount_window), the only function callgrind collects
//! (`--toggle-collect`); `icount --list` prints the operations.
#![cfg_attr(target_os = "none", no_std, no_main)]

mod ops {
    use core::cell::UnsafeCell;
    use core::mem::MaybeUninit;
    use core::ops::ControlFlow;
    use core::sync::atomic::{compiler_fence, Ordering};
    use portable_atomic::AtomicU32;
    use rcuref::file_ref::FileRef32;
    use rcuref::pool::{Handle, Pool, PoolCell};
    use rcuref::rcu::{ContextReader, Rcu, Reader};

    /// Rounds over [`OPS`] (xtask reports the last: the steady state).
    pub const REPS: usize = 3;

    /// The domain: slot 0 dedicated (the [`ContextReader`]), three for `reader`.
    static RCU: Rcu<4> = Rcu::with_dedicated(1);
    // SAFETY: only this one flow of control uses slot 0; nothing interrupts it.
    static CTX: ContextReader<'static, 4> = unsafe { RCU.context_reader(0) };
    static POOL: Pool<u32, 8> = Pool::new();
    static CELL: PoolCell<'static, u32, 8> = PoolCell::new(&POOL);
    heapless::box_pool!(HBOX: u32);
    heapless::arc_pool!(HARC: u32);

    /// The refcount file_ref replaces: `inc_not_zero` as a compare-exchange loop, and a
    /// `fetch_sub` put (the shape of Linux's `refcount_t` before `file_ref`, and of
    /// `Arc::upgrade` + drop).
    pub struct CasRef(AtomicU32);

    impl CasRef {
        #[inline]
        pub fn get(&self) -> bool {
            let mut cur = self.0.load(Ordering::Relaxed);
            loop {
                if cur == 0 {
                    return false;
                }
                match self.0.compare_exchange_weak(
                    cur,
                    cur + 1,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return true,
                    Err(now) => cur = now,
                }
            }
        }
        /// Whether this was the last reference.
        #[inline]
        pub fn put(&self) -> bool {
            self.0.fetch_sub(1, Ordering::Release) == 1
        }
    }

    /// Everything the operations touch, set up before the first mark.
    pub struct Ctx {
        reader: UnsafeCell<Reader<'static, 4>>,
        file: FileRef32,
        closing: UnsafeCell<FileRef32>,
        cas: CasRef,
        cas_closing: CasRef,
        held: UnsafeCell<MaybeUninit<Handle<'static, u32, 8>>>,
        hbox: UnsafeCell<MaybeUninit<heapless::pool::boxed::Box<HBOX>>>,
        harc: UnsafeCell<MaybeUninit<heapless::pool::arc::Arc<HARC>>>,
    }

    static FAILED: AtomicU32 = AtomicU32::new(0);

    #[inline(always)]
    fn check(ok: bool) {
        if !ok {
            FAILED.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn reader(c: &Ctx) -> &Reader<'static, 4> {
        // SAFETY: single flow of control; `synchronize` (the one &mut use) holds no guard.
        unsafe { &*c.reader.get() }
    }

    type Op = fn(&Ctx);

    fn nothing(_: &Ctx) {}

    /// (name, setup, operation). The names are the rows xtask knows.
    pub static OPS: &[(&str, Op, Op)] = &[
        ("empty", nothing, |_| {}),
        ("reader_lock", nothing, |c| {
            let g = reader(c).lock();
            compiler_fence(Ordering::SeqCst);
            drop(g);
        }),
        ("rcu_read", nothing, |_| {
            check(
                RCU.with_reader(|_| compiler_fence(Ordering::SeqCst))
                    .is_ok(),
            );
        }),
        ("context_lock", nothing, |_| {
            let g = CTX.lock();
            compiler_fence(Ordering::SeqCst);
            drop(g);
        }),
        ("synchronize", nothing, |c| {
            // SAFETY: as `reader`; no guard of it is held.
            let r = unsafe { &mut *c.reader.get() };
            check(r.synchronize(|_| ControlFlow::Continue(())).is_ok());
        }),
        ("poll", nothing, |_| check(RCU.start_poll().poll())),
        ("fileref_get_put", nothing, |c| {
            check(c.file.get());
            check(!c.file.put());
        }),
        ("fileref_put_close", reset_closing, |c| {
            // SAFETY: single flow of control.
            check(unsafe { &*c.closing.get() }.put_close());
        }),
        ("cas_get_put", nothing, |c| {
            check(c.cas.get());
            check(!c.cas.put());
        }),
        (
            "cas_put_last",
            |c| c.cas_closing.0.store(1, Ordering::Relaxed),
            |c| {
                check(c.cas_closing.put());
            },
        ),
        ("pool_alloc_free", nothing, |_| check(POOL.alloc(7).is_ok())),
        ("pool_alloc", nothing, |c| match POOL.alloc(7) {
            // SAFETY: single flow of control; `pool_free` takes it back out.
            Ok(h) => unsafe {
                (*c.held.get()).write(h);
            },
            Err(_) => check(false),
        }),
        ("pool_free", nothing, |c| {
            // SAFETY: `pool_alloc` wrote it just before.
            drop(unsafe { (*c.held.get()).assume_init_read() })
        }),
        ("pool_get", nothing, |c| {
            let g = reader(c).lock();
            check(CELL.get(&g).is_some());
            drop(g);
        }),
        ("heapless_box_alloc_free", nothing, |_| {
            check(HBOX.alloc(7).is_ok())
        }),
        ("heapless_box_alloc", nothing, |c| match HBOX.alloc(7) {
            // SAFETY: as `pool_alloc`.
            Ok(b) => unsafe {
                (*c.hbox.get()).write(b);
            },
            Err(_) => check(false),
        }),
        ("heapless_box_free", nothing, |c| {
            // SAFETY: as `pool_free`.
            drop(unsafe { (*c.hbox.get()).assume_init_read() })
        }),
        ("heapless_arc_alloc_free", nothing, |_| {
            check(HARC.alloc(7).is_ok())
        }),
        ("heapless_arc_alloc", nothing, |c| match HARC.alloc(7) {
            // SAFETY: as `pool_alloc`.
            Ok(a) => unsafe {
                (*c.harc.get()).write(a);
            },
            Err(_) => check(false),
        }),
        ("heapless_arc_free", nothing, |c| {
            // SAFETY: as `pool_free`.
            drop(unsafe { (*c.harc.get()).assume_init_read() })
        }),
    ];

    fn reset_closing(c: &Ctx) {
        // SAFETY: single flow of control; no reference to it is held.
        unsafe { *c.closing.get() = FileRef32::new(1) };
    }

    /// The mark before an operation (distinct code from `icount_end` and from an empty
    /// operation, so that no linker folds them together).
    #[no_mangle]
    #[inline(never)]
    pub extern "C" fn icount_begin() {
        // SAFETY: a no-op.
        unsafe { core::arch::asm!("nop", options(nomem, nostack, preserves_flags)) }
    }

    /// The mark after an operation.
    #[no_mangle]
    #[inline(never)]
    pub extern "C" fn icount_end() {
        // SAFETY: no-ops.
        unsafe { core::arch::asm!("nop", "nop", options(nomem, nostack, preserves_flags)) }
    }

    /// The calls of the host's counted window: the operation, through a function
    /// callgrind is told to collect (`--toggle-collect=icount_window`).
    #[no_mangle]
    #[inline(never)]
    pub fn icount_window(op: Op, c: &Ctx) {
        op(c)
    }

    /// Runs [`REPS`] rounds of every operation, each between the marks, operation
    /// `window` of the last round inside [`icount_window`] as well. Whether every
    /// operation did what it should.
    pub fn run(window: Option<usize>) -> bool {
        let Ok(reader) = RCU.reader() else {
            return false;
        };
        // Four blocks per heapless pool, from statics (heapless's `manage`).
        static mut BOX_BLOCKS: [heapless::pool::boxed::BoxBlock<u32>; 4] =
            [const { heapless::pool::boxed::BoxBlock::new() }; 4];
        static mut ARC_BLOCKS: [heapless::pool::arc::ArcBlock<u32>; 4] =
            [const { heapless::pool::arc::ArcBlock::new() }; 4];
        // SAFETY: taken once, here, before anything else uses them.
        let (bb, ab) = unsafe {
            (
                &mut *core::ptr::addr_of_mut!(BOX_BLOCKS),
                &mut *core::ptr::addr_of_mut!(ARC_BLOCKS),
            )
        };
        for b in bb {
            HBOX.manage(b);
        }
        for b in ab {
            HARC.manage(b);
        }
        // The value a lookup finds.
        let Ok(h) = POOL.alloc(42) else {
            return false;
        };
        CELL.replace(Some(h));
        let ctx = Ctx {
            reader: UnsafeCell::new(reader),
            file: FileRef32::new(1),
            closing: UnsafeCell::new(FileRef32::new(1)),
            cas: CasRef(AtomicU32::new(1)),
            cas_closing: CasRef(AtomicU32::new(1)),
            held: UnsafeCell::new(MaybeUninit::uninit()),
            hbox: UnsafeCell::new(MaybeUninit::uninit()),
            harc: UnsafeCell::new(MaybeUninit::uninit()),
        };
        // Round by round, so that an allocation is followed by its free.
        for r in 0..REPS {
            for (k, &(_, setup, op)) in OPS.iter().enumerate() {
                setup(&ctx);
                let op: Op = core::hint::black_box(op);
                icount_begin();
                if r == REPS - 1 && window == Some(k) {
                    icount_window(op, &ctx);
                } else {
                    op(&ctx);
                }
                icount_end();
            }
        }
        FAILED.load(Ordering::Relaxed) == 0
    }
}

#[cfg(target_os = "none")]
mod fw {
    use crate::ops::{run, OPS, REPS};

    fn main_loop() -> ! {
        let ok = run(None);
        // The order of the counts, for xtask.
        semihosting::print!("icount rounds={REPS} ops=");
        for (k, &(name, _, _)) in OPS.iter().enumerate() {
            semihosting::print!("{}{name}", if k == 0 { "" } else { "," });
        }
        semihosting::println!();
        if !ok {
            semihosting::println!("icount: an operation failed its check");
            fail();
        }
        semihosting::process::exit(0)
    }

    pub fn fail() -> ! {
        semihosting::process::exit(1)
    }

    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo) -> ! {
        fail()
    }

    // The single-core critical sections (features of these crates) are linked only if
    // the crate is.
    #[cfg(target_arch = "arm")]
    use cortex_m as _;
    #[cfg(any(target_arch = "riscv32", target_arch = "riscv64"))]
    use riscv as _;

    #[cfg(target_arch = "arm")]
    #[cortex_m_rt::entry]
    fn main() -> ! {
        main_loop()
    }

    #[cfg(any(target_arch = "riscv32", target_arch = "riscv64"))]
    #[riscv_rt::entry]
    fn main() -> ! {
        main_loop()
    }

    // AArch64 on QEMU `virt`, one core at EL1, MMU off, no runtime crate: a stack, FP/SIMD
    // on, `.bss` cleared, then `run`. The critical section masks IRQs and FIQs.
    #[cfg(target_arch = "aarch64")]
    core::arch::global_asm!(
        r#"
        .section .text.boot, "ax"
        .global _start
    _start:
        ldr     x1, =__stacks_end
        mov     sp, x1
        mov     x3, #(3 << 20)
        msr     cpacr_el1, x3
        isb
        ldr     x1, =__bss_start
        ldr     x2, =__bss_end
    1:  cmp     x1, x2
        b.hs    2f
        str     xzr, [x1], #8
        b       1b
    2:  bl      rcuref_icount_main
        b       .
        .ltorg
    "#
    );

    #[cfg(target_arch = "aarch64")]
    #[no_mangle]
    extern "C" fn rcuref_icount_main() -> ! {
        main_loop()
    }

    #[cfg(target_arch = "aarch64")]
    mod cs {
        struct Single;
        critical_section::set_impl!(Single);
        // SAFETY: one core; masking IRQ and FIQ excludes everything else that could run.
        unsafe impl critical_section::Impl for Single {
            unsafe fn acquire() -> u8 {
                let daif: u64;
                core::arch::asm!("mrs {}, daif", "msr daifset, #3", out(reg) daif);
                ((daif >> 6) & 3) as u8
            }
            unsafe fn release(was: u8) {
                if was & 3 == 0 {
                    core::arch::asm!("msr daifclr, #3");
                }
            }
        }
    }
}

/// The host: `icount --list`, or `icount <operation>` under callgrind.
#[cfg(not(target_os = "none"))]
fn main() {
    let arg = std::env::args().nth(1).unwrap_or_default();
    if arg == "--list" {
        let names: Vec<&str> = ops::OPS.iter().map(|o| o.0).collect();
        println!("icount rounds={} ops={}", ops::REPS, names.join(","));
        return;
    }
    let Some(k) = ops::OPS.iter().position(|o| o.0 == arg) else {
        eprintln!("usage: icount --list | icount <operation>");
        std::process::exit(2);
    };
    if !ops::run(Some(k)) {
        eprintln!("icount: an operation failed its check");
        std::process::exit(1);
    }
}
