//! The one place the crate takes its atomics from.
//!
//! * Normal builds: [`portable_atomic`], which compiles to native instructions where the
//!   target has them and, on thumbv6m (no compare-and-swap), to whatever the *binary*
//!   chose: portable-atomic's `critical-section` feature (our feature `critical-section`
//!   forwards it) or one of its `unsafe-assume-*` cfgs. The library chooses neither.
//! * `--cfg loom`: loom's model-checked atomics, so the loom models in `tests/loom_*.rs`
//!   explore every interleaving of the real code, not a copy of it.
//! * 64-bit counters on targets without native 64-bit atomics (thumbv7m, thumbv7em,
//!   riscv32imac, thumbv6m): [`CsAtomicU64`], a `u64` guarded by a critical section, only
//!   with feature `critical-section`. We deliberately do **not** use portable-atomic's
//!   `fallback` (a global spinlock table): a thread holding one of its locks that is
//!   interrupted by a handler touching the same lock deadlocks on a single core.
//!
//! The exceptions, each state that loom must not model (it is not part of any algorithm
//! a loom model checks, and loom's atomics cannot live in a `static` outside a model):
//! the warning counters and hook (`log.rs`, diagnostics), the debug section table's
//! domain serials (`rcu/sections.rs`, std debug builds), the membarrier mode flag
//! (`rcu/heavy.rs`, Linux hosts, never under loom), and the test hooks (`mutants.rs`).
//! They use portable-atomic or `core` atomics directly. (`cores.rs` and `harts.rs` are
//! critical-section implementations for the binary: real hardware only.)

#[cfg(all(loom, target_has_atomic = "64"))]
pub(crate) use loom::sync::atomic::AtomicU64;
#[cfg(all(loom, feature = "debug-callbacks"))]
pub(crate) use loom::sync::atomic::AtomicUsize;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::Ordering;
#[cfg(all(not(loom), target_has_atomic = "64"))]
pub(crate) use portable_atomic::AtomicU64;
#[cfg(all(not(loom), feature = "debug-callbacks"))]
pub(crate) use portable_atomic::AtomicUsize;
#[cfg(not(loom))]
pub(crate) use portable_atomic::{fence, AtomicBool, AtomicPtr, AtomicU32};

/// A plain store, except under loom, where it is a swap (the same write). loom 0.7 lets
/// a plain store slip between the read and the write of a concurrent read-modify-write
/// (tokio-rs/loom#254), a history no C++ execution or CPU can produce; it made the pool
/// models report a put against a count `init` had just replaced, and a claim flag still
/// set after its last release. A swap keeps the write atomic with respect to RMWs in
/// loom's model. The one place this workaround lives.
macro_rules! plain_store {
    ($atomic:expr, $value:expr, $order:expr) => {{
        #[cfg(loom)]
        let _ = $atomic.swap($value, $order);
        #[cfg(not(loom))]
        $atomic.store($value, $order);
    }};
}
pub(crate) use plain_store;

/// The fence a reader issues after announcing itself. A full fence, except:
/// * when the binary asserts a single core with `--cfg rcuref_unsafe_assume_single_core`:
///   then a compiler fence suffices, because writer and readers share one core's program
///   order (an interrupt is ordered after everything the code it interrupts has
///   executed);
/// * in the asymmetric mode (`--cfg rcuref_asymmetric_fence`), where grace periods make
///   every core execute the barrier instead (`rcu::heavy`);
/// * with feature `auto-fence`, once the mode has been decided heavy at run time.
///
/// loom has no compiler fence and models threads, so it always uses the full fence.
#[inline(always)]
pub(crate) fn reader_fence() {
    // (`rcuref_heavy`, the name build.rs gives the asymmetric mode outside loom, so the
    // read side and the grace periods take their mode from the same cfg.)
    #[cfg(any(rcuref_heavy, all(not(loom), rcuref_unsafe_assume_single_core)))]
    core::sync::atomic::compiler_fence(Ordering::SeqCst);
    // Chosen at run time (feature `auto-fence`): one relaxed load of a read-mostly word
    // and a branch; the full fence until the mode is decided heavy.
    #[cfg(all(rcuref_auto, not(rcuref_unsafe_assume_single_core)))]
    if crate::rcu::heavy::readers_skip_fence() {
        core::sync::atomic::compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
    #[cfg(not(any(
        rcuref_heavy,
        rcuref_auto,
        all(not(loom), rcuref_unsafe_assume_single_core)
    )))]
    fence(Ordering::SeqCst);
}

/// [`reader_fence`] for an outermost lock that has just loaded its domain's phase word
/// `word`: with feature `auto-fence`, a word that carries `encoding::PHASE_HEAVY` says
/// the mode is decided heavy, which saves the load of the mode (a flip stores the bit
/// only once the mode is heavy, and the mode never changes after that). Without the
/// bit (no flip since the decision, or the mode is not heavy) the mode is loaded as in
/// `reader_fence`. Every other build: `reader_fence`.
#[inline(always)]
pub(crate) fn reader_fence_after_phase(word: u32) {
    // The marked word is the path every section takes once the mode is heavy: it falls
    // through to the compiler fence, and the unmarked one (the full mode, or no flip
    // since the decision) is a call out of line. Written as `if marked { return }`, the
    // marked path was a taken branch over the mode's load, which cost the default
    // build's readers 0.6x the asymmetric build's reads; the call costs the Full mode
    // about 1.2x a section (docs/bench/ANALYSIS.md, "A branch taken").
    #[cfg(all(rcuref_auto, not(rcuref_unsafe_assume_single_core)))]
    {
        if word & crate::rcu::encoding::PHASE_HEAVY == 0 {
            reader_fence_unmarked();
        }
        core::sync::atomic::compiler_fence(Ordering::SeqCst);
    }
    #[cfg(not(all(rcuref_auto, not(rcuref_unsafe_assume_single_core))))]
    {
        let _ = word;
        reader_fence();
    }
}

/// [`reader_fence`] for a lock whose phase word is not marked heavy: out of line, so
/// that the marked path has no taken branch.
#[cfg(all(rcuref_auto, not(rcuref_unsafe_assume_single_core)))]
#[cold]
#[inline(never)]
fn reader_fence_unmarked() {
    reader_fence();
}

/// A fence as an entry of an ordering table (`variant_table!`): the real table names
/// the fence a step needs; a broken variant's table may name `None` instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)] // each build uses the kinds its tables name
pub(crate) enum Fence {
    /// No fence.
    None,
    /// `fence(Acquire)`.
    Acquire,
    /// `fence(SeqCst)`.
    Full,
    /// [`reader_fence`]: full, or a compiler fence where the build makes that enough.
    Reader,
}

impl Fence {
    /// Issues the fence.
    #[inline(always)]
    pub(crate) fn issue(self) {
        match self {
            Fence::None => {}
            Fence::Acquire => fence(Ordering::Acquire),
            Fence::Full => fence(Ordering::SeqCst),
            Fence::Reader => reader_fence(),
        }
    }

    /// Issues the fence in an outermost lock that read phase word `word`
    /// ([`reader_fence_after_phase`] for [`Fence::Reader`]).
    #[inline(always)]
    pub(crate) fn issue_after_phase(self, word: u32) {
        match self {
            Fence::Reader => reader_fence_after_phase(word),
            other => other.issue(),
        }
    }
}

#[cfg(all(not(loom), not(target_has_atomic = "64"), feature = "critical-section"))]
pub(crate) use cs_u64::CsAtomicU64 as AtomicU64;

#[cfg(all(not(target_has_atomic = "64"), feature = "critical-section"))]
mod cs_u64 {
    use core::cell::UnsafeCell;
    use core::sync::atomic::Ordering;

    /// A `u64` whose every access happens inside `critical_section::with`.
    ///
    /// # Invariants
    /// `value` is only read or written inside a critical section, so no two accesses
    /// overlap: on a single core because the critical section masks interrupts, on
    /// several cores because the binary's critical-section implementation must also
    /// exclude other cores (that is the `critical-section` crate's contract).
    ///
    /// Orderings are accepted for signature compatibility and ignored: acquiring and
    /// releasing the critical section is at least as strong as `SeqCst` for the
    /// accesses it guards (the implementation's release/acquire of its lock or the
    /// interrupt mask orders them).
    #[repr(transparent)]
    pub(crate) struct CsAtomicU64 {
        value: UnsafeCell<u64>,
    }

    // SAFETY: by the type invariant every access to `value` is serialised by a critical
    // section, so sharing `&CsAtomicU64` between threads or with interrupt handlers
    // cannot produce a data race.
    unsafe impl Sync for CsAtomicU64 {}

    impl CsAtomicU64 {
        pub(crate) const fn new(v: u64) -> Self {
            Self {
                value: UnsafeCell::new(v),
            }
        }

        #[inline]
        fn with<R>(&self, f: impl FnOnce(&mut u64) -> R) -> R {
            critical_section::with(|_| {
                // SAFETY: we are inside a critical section, which by the type invariant
                // is the only place `value` is accessed; no other reference exists.
                let v = unsafe { &mut *self.value.get() };
                f(v)
            })
        }

        pub(crate) fn load(&self, _: Ordering) -> u64 {
            self.with(|v| *v)
        }

        pub(crate) fn store(&self, new: u64, _: Ordering) {
            self.with(|v| *v = new)
        }

        pub(crate) fn fetch_add(&self, d: u64, _: Ordering) -> u64 {
            self.with(|v| {
                let old = *v;
                *v = old.wrapping_add(d);
                old
            })
        }

        pub(crate) fn fetch_sub(&self, d: u64, _: Ordering) -> u64 {
            self.with(|v| {
                let old = *v;
                *v = old.wrapping_sub(d);
                old
            })
        }

        pub(crate) fn compare_exchange(
            &self,
            current: u64,
            new: u64,
            _: Ordering,
            _: Ordering,
        ) -> Result<u64, u64> {
            self.with(|v| {
                let old = *v;
                if old == current {
                    *v = new;
                    Ok(old)
                } else {
                    Err(old)
                }
            })
        }
    }
}

/// Every store to a reader slot (entering, nesting, leaving a section): a `Release`
/// store of `v`, or, under `rcuref_unsafe_assume_single_core`, a compiler fence and a
/// relaxed store (the same single-core argument as [`reader_fence`]). Release on every
/// store, not only on leaving: a grace period's scan may read any of them, and must then
/// still synchronise with the end of the slot's previous section (a relaxed store would
/// end that release sequence).
#[inline(always)]
pub(crate) fn reader_release_store(a: &AtomicU32, v: u32) {
    #[cfg(all(not(loom), rcuref_unsafe_assume_single_core))]
    {
        core::sync::atomic::compiler_fence(Ordering::Release);
        a.store(v, Ordering::Relaxed);
    }
    #[cfg(not(all(not(loom), rcuref_unsafe_assume_single_core)))]
    a.store(v, Ordering::Release);
}

/// An `UnsafeCell` with loom's closure API, so loom can check every access to a pool
/// slot's value: loom's own cell under `cfg(loom)`, a zero-cost wrapper otherwise.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

#[cfg(not(loom))]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(v: T) -> Self {
        UnsafeCell(core::cell::UnsafeCell::new(v))
    }
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
