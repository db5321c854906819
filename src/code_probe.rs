//! One exported function per fast path (`--cfg rcuref_code_probe` builds only), so that
//! `cargo xtask litmus` finds each path's object code by name and reads its memory
//! operations and barriers (see `litmus/README.md`). Each function is the path's inline
//! function and nothing else; nothing calls them.
//!
//! `rcuref_path_*` are the paths of `rcu::ops` and friends, the units the assembly
//! litmus tests are made of. `rcuref_api_*` are public entry points built from them: the
//! check also requires each path's instructions to appear, in order, in the entry
//! points that inline it.
#![allow(improper_ctypes_definitions, missing_docs)]

use crate::file_ref::zoned;
use crate::rcu::{cell, ops, value};
use crate::sync::{AtomicBool, AtomicPtr, AtomicU32};

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
    rcuref_path_claim_flag(flag: &AtomicBool) -> bool { crate::pool::free_map::claim_flag(flag) }
    rcuref_path_release_flag(flag: &AtomicBool) { crate::pool::free_map::release_flag(flag) }
    rcuref_path_location_load(cur: &AtomicU32) -> u32 { crate::pool::load_location(cur) }
    rcuref_path_location_swap(cur: &AtomicU32, raw: u32) -> u32 {
        crate::pool::swap_location(cur, raw)
    }

    rcuref_api_read_section(r: &crate::Reader<'static, 4>) {
        let g = r.lock();
        core::hint::black_box(&g);
    }
    rcuref_api_context_read_section(r: &crate::ContextReader<'static, 4>) {
        let g = r.lock();
        core::hint::black_box(&g);
    }
    rcuref_api_get32(r: &crate::FileRef32) -> bool { r.get() }
    rcuref_api_put32(r: &crate::FileRef32) -> bool { r.put() }
    rcuref_api_put_close32(r: &crate::FileRef32) -> bool { r.put_close() }
}

#[cfg(target_has_atomic = "64")]
probe! {
    rcuref_path_get64(cnt: &crate::sync::AtomicU64) -> bool { zoned::get::<u64>(cnt) }
    rcuref_path_put64(cnt: &crate::sync::AtomicU64) -> bool { zoned::put::<u64>(cnt) }
    rcuref_path_mark_dead64(cnt: &crate::sync::AtomicU64) -> bool {
        zoned::mark_dead::<u64>(cnt)
    }
}
