//! One exported function per fast path (`--cfg rcuref_code_probe` builds only), so that
//! `cargo xtask litmus` finds each path's object code by name and reads its memory
//! operations and barriers (see `litmus/README.md`). Each function is the path's inline
//! function and nothing else; nothing calls them.
//!
//! `rcuref_path_*` are the paths of `rcu::ops` and friends, the units the assembly
//! litmus tests are made of. `rcuref_api_*` are public entry points built from them: the
//! check also requires each path's instructions to appear, in order, in the entry
//! points that inline it. `rcuref_twin_*` are deliberately weakened copies of paths (a
//! fence removed, an ordering relaxed), compiled by the same compiler for the same
//! target: the litmus suite's negative controls are made of their instructions, and
//! herd7 must find each control's forbidden outcome reachable.
#![allow(improper_ctypes_definitions, missing_docs)]

use crate::file_ref::zoned;
use crate::rcu::{cell, encoding, ops, value};
use crate::sync::Ordering::{Acquire, Relaxed, Release, SeqCst};
use crate::sync::{fence, AtomicBool, AtomicPtr, AtomicU32};

macro_rules! probe {
    ($($name:ident($($a:ident: $t:ty),*) $(-> $r:ty)? $body:block)*) => {$(
        #[no_mangle]
        #[inline(never)]
        pub extern "C" fn $name($($a: $t),*) $(-> $r)? $body
    )*};
}

probe! {
    rcuref_path_own_slot(slot: &AtomicU32) -> u32 { ops::own_slot(slot) }
    rcuref_path_lock_outer(slot: &AtomicU32, phase: &AtomicU32) { ops::lock_outer(slot, phase) }
    rcuref_path_lock_nested(slot: &AtomicU32, v: u32) { ops::lock_nested(slot, v) }
    rcuref_path_lock_nested_in_context(slot: &AtomicU32, v: u32) {
        ops::lock_nested_in_context(slot, v)
    }
    rcuref_path_unlock(slot: &AtomicU32, v: u32) { ops::unlock(slot, v) }
    rcuref_path_claim(slot: &AtomicU32) -> bool { ops::claim(slot) }
    rcuref_path_release(slot: &AtomicU32) { ops::release(slot) }
    rcuref_path_cookie_snapshot(gp: &AtomicU32) -> u32 { ops::cookie_snapshot(gp) }
    rcuref_path_counter_acquire(gp: &AtomicU32) -> u32 { ops::counter_acquire(gp) }
    rcuref_path_counter_snapshot(gp: &AtomicU32) -> u32 { ops::counter_snapshot(gp) }
    rcuref_path_register_in_half(stepping: &AtomicU32, gp: &AtomicU32) -> u32 {
        ops::register_in_half(stepping, gp)
    }
    rcuref_path_leave_half(stepping: &AtomicU32) { ops::leave_half(stepping) }
    rcuref_path_registered(stepping: &AtomicU32) -> u32 { ops::registered(stepping) }
    rcuref_path_step(gp: &AtomicU32, from: u32, to: u32) -> bool { ops::step(gp, from, to).is_ok() }
    rcuref_path_set_phase(phase: &AtomicU32, want: u32) { ops::set_phase(phase, want) }
    rcuref_path_wait_fence() { ops::wait_fence() }
    rcuref_path_scan_slot(slot: &AtomicU32) -> u32 { ops::scan_slot(slot) }
    rcuref_path_cell_load(ptr: &AtomicPtr<u32>) -> *mut u32 { cell::load_published(ptr) }
    rcuref_path_cell_publish(ptr: &AtomicPtr<u32>, new: *mut u32) -> *mut u32 {
        cell::publish(ptr, new)
    }
    rcuref_path_value_load(current: &AtomicU32) -> u32 { value::load_current(current) }
    rcuref_path_value_publish(current: &AtomicU32, i: u32) -> u32 {
        value::publish_index(current, i)
    }
    rcuref_path_get32(cnt: &AtomicU32) -> bool { zoned::get::<u32>(cnt) }
    rcuref_path_inc32(cnt: &AtomicU32) { zoned::inc::<u32>(cnt) }
    rcuref_path_put32(cnt: &AtomicU32) -> bool { zoned::put::<u32>(cnt) }
    rcuref_path_mark_dead32(cnt: &AtomicU32) -> bool { zoned::mark_dead::<u32>(cnt) }
    rcuref_path_close32(cnt: &AtomicU32) -> bool { zoned::close_only_reference::<u32>(cnt) }
    rcuref_path_repair32(cnt: &AtomicU32, from: u32, to: u32) -> bool {
        zoned::repair::<u32>(cnt, from, to).is_ok()
    }
    rcuref_path_init32(cnt: &AtomicU32, raw: u32) { zoned::init::<u32>(cnt, raw) }
    rcuref_path_resaturate32(cnt: &AtomicU32) { zoned::resaturate::<u32>(cnt) }
    rcuref_path_claim_flag(flag: &AtomicBool) -> bool { crate::pool::free_map::claim_flag(flag) }
    rcuref_path_release_flag(flag: &AtomicBool) { crate::pool::free_map::release_flag(flag) }
    rcuref_path_location_load(cur: &AtomicU32) -> u32 { crate::pool::load_location(cur) }
    rcuref_path_location_swap(cur: &AtomicU32, raw: u32) -> u32 {
        crate::pool::swap_location(cur, raw)
    }

    rcuref_api_read_section(r: &crate::rcu::Reader<'static, 4>) {
        let g = r.lock();
        core::hint::black_box(&g);
    }
    rcuref_api_context_read_section(r: &crate::rcu::ContextReader<'static, 4>) {
        let g = r.lock();
        core::hint::black_box(&g);
    }
    rcuref_api_get32(r: &crate::file_ref::FileRef32) -> bool { r.get() }
    rcuref_api_put32(r: &crate::file_ref::FileRef32) -> bool { r.put() }
    rcuref_api_put_close32(r: &crate::file_ref::FileRef32) -> bool { r.put_close() }
    rcuref_api_cell_replace(cell: &crate::rcu::RcuCell<'static, u32, 4>, new: &'static mut u32) {
        core::mem::forget(cell.replace(new));
    }
    rcuref_api_pool_get(
        cell: &crate::pool::PoolCell<'static, u32, 4>,
        guard: &crate::rcu::Guard<'_, 'static, 4>
    ) -> bool {
        let h = cell.get(guard);
        let found = h.is_some();
        core::mem::forget(h);
        found
    }
}

// The weakened twins. Each names what it drops from the path it copies.
probe! {
    rcuref_twin_lock_outer_no_fence(slot: &AtomicU32, phase: &AtomicU32) {
        let p = phase.load(Relaxed);
        slot.store(encoding::entered(p), Release);
    }
    rcuref_twin_lock_outer_relaxed_store(slot: &AtomicU32, phase: &AtomicU32) {
        let p = phase.load(Relaxed);
        slot.store(encoding::entered(p), Relaxed);
        fence(SeqCst);
    }
    rcuref_twin_lock_nested_relaxed(slot: &AtomicU32, v: u32) {
        slot.store(v + 4, Relaxed)
    }
    rcuref_twin_unlock_relaxed(slot: &AtomicU32, v: u32) { slot.store(v, Relaxed) }
    rcuref_twin_release_relaxed(slot: &AtomicU32) { slot.store(0, Relaxed) }
    rcuref_twin_scan_slot_relaxed(slot: &AtomicU32) -> u32 { slot.load(Relaxed) }
    rcuref_twin_counter_acquire_relaxed(gp: &AtomicU32) -> u32 { gp.load(Relaxed) }
    rcuref_twin_step_relaxed(gp: &AtomicU32, from: u32, to: u32) -> bool {
        gp.compare_exchange(from, to, Relaxed, Relaxed).is_ok()
    }
    rcuref_twin_cookie_snapshot_no_fence(gp: &AtomicU32) -> u32 { gp.load(SeqCst) }
    rcuref_twin_cookie_snapshot_relaxed(gp: &AtomicU32) -> u32 { gp.load(Relaxed) }
    rcuref_twin_registered_acquire(stepping: &AtomicU32) -> u32 { stepping.load(Acquire) }
    rcuref_twin_registered_relaxed(stepping: &AtomicU32) -> u32 { stepping.load(Relaxed) }
    rcuref_twin_value_load_relaxed(current: &AtomicU32) -> u32 { current.load(Relaxed) }
    rcuref_twin_value_publish_relaxed(current: &AtomicU32, i: u32) -> u32 {
        current.swap(i, Relaxed)
    }
    rcuref_twin_cell_load_relaxed(ptr: &AtomicPtr<u32>) -> *mut u32 { ptr.load(Relaxed) }
    rcuref_twin_cell_publish_relaxed(ptr: &AtomicPtr<u32>, new: *mut u32) -> *mut u32 {
        ptr.swap(new, Relaxed)
    }
    rcuref_twin_get32_relaxed(cnt: &AtomicU32) -> bool {
        cnt.fetch_add(1, Relaxed).wrapping_add(1) as i32 >= 0
    }
    rcuref_twin_put32_relaxed(cnt: &AtomicU32) -> bool {
        cnt.fetch_sub(1, Relaxed).wrapping_sub(1) as i32 >= 0
    }
    rcuref_twin_mark_dead32_relaxed(cnt: &AtomicU32) -> bool {
        cnt.compare_exchange(u32::MAX, crate::file_ref::FileRef32::DEAD, Relaxed, Relaxed).is_ok()
    }
    rcuref_twin_close32_relaxed(cnt: &AtomicU32) -> bool {
        cnt.load(Relaxed) == 0
            && cnt.compare_exchange(0, crate::file_ref::FileRef32::DEAD, Relaxed, Relaxed).is_ok()
    }
    rcuref_twin_repair32_as_store(cnt: &AtomicU32, to: u32) { cnt.store(to, Relaxed) }
    rcuref_twin_init32_relaxed(cnt: &AtomicU32, raw: u32) { cnt.store(raw, Relaxed) }
    rcuref_twin_resaturate32_relaxed(cnt: &AtomicU32) {
        cnt.store(crate::file_ref::FileRef32::SATURATED, Relaxed)
    }
    rcuref_twin_claim_flag_relaxed(flag: &AtomicBool) -> bool { !flag.swap(true, Relaxed) }
    rcuref_twin_claim_flag_split(flag: &AtomicBool) -> bool {
        let was = flag.load(Relaxed);
        flag.store(true, Relaxed);
        !was
    }
    rcuref_twin_release_flag_relaxed(flag: &AtomicBool) { flag.store(false, Relaxed) }
}

#[cfg(target_has_atomic = "64")]
probe! {
    rcuref_path_get64(cnt: &crate::sync::AtomicU64) -> bool { zoned::get::<u64>(cnt) }
    rcuref_path_put64(cnt: &crate::sync::AtomicU64) -> bool { zoned::put::<u64>(cnt) }
    rcuref_path_mark_dead64(cnt: &crate::sync::AtomicU64) -> bool {
        zoned::mark_dead::<u64>(cnt)
    }
}
