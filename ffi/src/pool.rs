//! The typesafe-by-RCU pool for C objects (the kernel's `SLAB_TYPESAFE_BY_RCU`): the
//! caller's array of objects, each embedding an `rcuref_pool_node` (its reference count
//! and claim flag). A freed object is reused at once for another object of the same
//! type, so a reader that found an object through a published location takes a
//! reference and re-checks the location (`rcuref_pool_lookup` does both).
//!
//! The same rules and orderings as the Rust `Pool` (`src/pool/mod.rs`): the count rests
//! at DEAD while an object is free or being built, so every get on it fails; publish
//! is the count's `init(1)` (`Release`), after the fields; the last put destroys and
//! then frees the claim flag (`Release`), which the next claim's swap acquires.

use crate::{rcuref_fileref32, RCUREF_EDOMAIN, RCUREF_EFULL, RCUREF_EINVAL, RCUREF_OK};
use core::ffi::c_void;
use portable_atomic::{AtomicPtr, AtomicU32, Ordering::*};
use rcuref::file_ref::FileRef32;

/// What each pooled object embeds, anywhere in it: its reference count and its state
/// (free, claimed, published, being destroyed). Only the pool functions touch it.
#[repr(C)]
pub struct rcuref_pool_node {
    count: rcuref_fileref32,
    claimed: u32,
}

// A node's `claimed` word: each move out of a state is one compare-exchange (or, for
// the last put, the only context that can be there), so no two contexts act on one
// object's life at once.
/// Free: `alloc` may claim it.
const FREE: u32 = 0;
/// Claimed by `alloc`, fields being written; `publish` moves it on.
const CLAIMED: u32 = 1;
/// Published: its count is live (until the last put).
const LIVE: u32 = 2;
/// The last put is running `destroy`; freed after it.
const DYING: u32 = 3;

/// Called with an object whose last reference was just put, before the pool reuses it.
pub type rcuref_pool_destroy = Option<unsafe extern "C" fn(obj: *mut c_void)>;

/// A pool: storage for `rcuref_pool_init` (zero it, or init it, before any other
/// call). Private: use it only through these functions.
#[repr(C)]
pub struct rcuref_pool {
    _storage: [usize; 8],
}

/// What a `rcuref_pool`'s storage holds.
struct Inner {
    base: usize,
    stride: usize,
    node_offset: usize,
    count: u32,
    /// Where the next claim starts looking (an index).
    hint: AtomicU32,
    destroy: rcuref_pool_destroy,
    /// `MAGIC` once initialised.
    magic: u32,
}

const _: () = {
    assert!(core::mem::size_of::<Inner>() <= core::mem::size_of::<rcuref_pool>());
    assert!(core::mem::align_of::<Inner>() <= core::mem::align_of::<rcuref_pool>());
};

const MAGIC: u32 = 0x7063_6f6c;

impl Inner {
    /// Object `i`'s node: its count and claim flag.
    fn node(&self, i: usize) -> (&FileRef32, &AtomicU32) {
        let node = (self.base + i * self.stride + self.node_offset) as *mut rcuref_pool_node;
        // SAFETY: `rcuref_pool_init` checked that every object's node lies inside the
        // caller's array with the node's alignment, and the caller promised that the
        // array lives as long as the pool and that only these functions touch the
        // nodes; the count is `FileRef32`'s storage (asserted in lib.rs) and the claim
        // flag a u32, both accessed only atomically; the pointer comes from the
        // address the caller gave, not from a shared reference.
        unsafe {
            (
                &*core::ptr::addr_of!((*node).count).cast::<FileRef32>(),
                AtomicU32::from_ptr(core::ptr::addr_of_mut!((*node).claimed)),
            )
        }
    }

    /// The index of `obj` if it is one of this pool's objects (the start of one).
    fn index(&self, obj: *const c_void) -> Option<usize> {
        let a = obj as usize;
        let off = a.checked_sub(self.base)?;
        let i = off / self.stride;
        (off % self.stride == 0 && i < self.count as usize).then_some(i)
    }

    fn object(&self, i: usize) -> *mut c_void {
        (self.base + i * self.stride) as *mut c_void
    }
}

/// The pool behind `p`, if initialised.
///
/// # Safety
/// `p` is null or points to a pool that is initialised or zeroed.
unsafe fn pool<'a>(p: *const rcuref_pool) -> Result<&'a Inner, i32> {
    if p.is_null() || !p.is_aligned() {
        return Err(RCUREF_EINVAL);
    }
    // SAFETY: the caller's promise: storage that is zeroed or holds an `Inner` written
    // by init (before the pool was shared; the caller's publication of the pool orders
    // it), aligned (checked) and large enough (asserted); zeroed storage is a valid
    // `Inner` bit pattern (null destroy, zero numbers) and fails the magic check.
    let p = unsafe { &*p.cast::<Inner>() };
    if p.magic != MAGIC {
        return Err(RCUREF_EINVAL);
    }
    Ok(p)
}

/// The pool behind `p` and the index of `obj` in it: `RCUREF_EINVAL` for a bad pool,
/// `RCUREF_EDOMAIN` for a pointer that is not the start of one of its objects.
///
/// # Safety
/// As [`pool`].
unsafe fn object<'a>(p: *const rcuref_pool, obj: *const c_void) -> Result<(&'a Inner, usize), i32> {
    // SAFETY: the caller's promise.
    let p = unsafe { pool(p) }?;
    p.index(obj).map(|i| (p, i)).ok_or(RCUREF_EDOMAIN)
}

/// Makes `p` a pool of the caller's `count` objects at `objects`, `stride` bytes apart,
/// each embedding an `rcuref_pool_node` at `node_offset`; every object starts free.
/// `destroy` (may be null) is called with an object after its last put, before it is
/// reused. Returns `RCUREF_OK`, or `RCUREF_EINVAL` (a null pointer, `count` 0, a
/// `stride` or `node_offset` that puts a node outside its object or misaligned).
///
/// # Safety
/// `p` points to writable pool storage that no other context uses during the call;
/// `objects` to `count * stride` bytes that live as long as the pool and whose nodes
/// are touched only by these functions from now on.
#[no_mangle]
pub unsafe extern "C" fn rcuref_pool_init(
    p: *mut rcuref_pool,
    objects: *mut c_void,
    stride: usize,
    node_offset: usize,
    count: u32,
    destroy: rcuref_pool_destroy,
) -> i32 {
    let node = core::mem::size_of::<rcuref_pool_node>();
    let align = core::mem::align_of::<rcuref_pool_node>();
    let base = objects as usize;
    let fits = node_offset
        .checked_add(node)
        .is_some_and(|end| end <= stride);
    // The whole array must fit the address space (checked before any sum below).
    let end = stride
        .checked_mul(count as usize)
        .and_then(|t| base.checked_add(t));
    if p.is_null()
        || !p.is_aligned()
        || objects.is_null()
        || count == 0
        || !fits
        || end.is_none()
        || stride % align != 0
        || base.wrapping_add(node_offset) % align != 0
    {
        return RCUREF_EINVAL;
    }
    let pool = Inner {
        base,
        stride,
        node_offset,
        count,
        hint: AtomicU32::new(0),
        destroy,
        magic: MAGIC,
    };
    for i in 0..count as usize {
        let n = (base + i * stride + node_offset) as *mut rcuref_pool_node;
        // SAFETY: inside the caller's array, aligned (checked above); nobody else uses
        // the objects during init (the caller's promise).
        unsafe {
            n.write(rcuref_pool_node {
                count: rcuref_fileref32 {
                    raw: FileRef32::DEAD,
                },
                claimed: FREE,
            })
        };
    }
    // SAFETY: `p` is writable, aligned (checked) and unshared during the call (the
    // caller's promise), and large enough for an `Inner` (asserted).
    unsafe { p.cast::<Inner>().write(pool) };
    RCUREF_OK
}

/// Claims a free object: writes it to `*obj`. Its count is still dead, so lookups fail
/// on it: write its fields, then `rcuref_pool_publish` it. Never blocks. Returns
/// `RCUREF_OK`, `RCUREF_EFULL` (every object was seen in use during the call) or
/// `RCUREF_EINVAL`.
///
/// # Safety
/// `p` is null or an initialised pool; `obj` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rcuref_pool_alloc(p: *const rcuref_pool, obj: *mut *mut c_void) -> i32 {
    // SAFETY: the caller's promise.
    let p = match unsafe { pool(p) } {
        Ok(p) => p,
        Err(e) => return e,
    };
    if obj.is_null() {
        return RCUREF_EINVAL;
    }
    let n = p.count as usize;
    let start = p.hint.load(Relaxed) as usize % n;
    for k in 0..n {
        let i = (start + k) % n;
        let (_, claimed) = p.node(i);
        // One compare-exchange decides (no ABA); Acquire pairs with the Release that
        // freed it.
        if claimed.load(Relaxed) == FREE
            && claimed
                .compare_exchange(FREE, CLAIMED, Acquire, Relaxed)
                .is_ok()
        {
            p.hint.store(((i + 1) % n) as u32, Relaxed);
            // SAFETY: `obj` is writable (the caller's promise).
            unsafe { obj.write(p.object(i)) };
            return RCUREF_OK;
        }
    }
    RCUREF_EFULL
}

/// Publishes a claimed object's count: one reference, the caller's, with a release
/// store, so a reader whose get succeeds sees the fields written before. Call it after
/// writing every field and before storing the object where readers find it. Returns
/// `RCUREF_OK`, `RCUREF_EDOMAIN` (not an object of this pool), or `RCUREF_EINVAL` (a
/// bad pool, or an object that is not claimed: free, already published, or being
/// destroyed).
///
/// # Safety
/// `p` is null or an initialised pool.
#[no_mangle]
pub unsafe extern "C" fn rcuref_pool_publish(p: *const rcuref_pool, obj: *mut c_void) -> i32 {
    // SAFETY: the caller's promise.
    let (p, i) = match unsafe { object(p, obj) } {
        Ok(x) => x,
        Err(e) => return e,
    };
    let (count, claimed) = p.node(i);
    // Only a claimed object, once (a second publish, or one from a destroy callback,
    // finds it LIVE or DYING and is refused).
    if claimed
        .compare_exchange(CLAIMED, LIVE, Relaxed, Relaxed)
        .is_err()
    {
        return RCUREF_EINVAL;
    }
    count.init(1);
    RCUREF_OK
}

/// Tries to take a reference to a pool object found through a published location
/// (inside a read section): 1 taken (re-check that it is still the object you looked
/// for, and put it if not), 0 (free or dying: not yours to use), or `RCUREF_EDOMAIN` /
/// `RCUREF_EINVAL`.
///
/// # Safety
/// `p` is null or an initialised pool.
#[no_mangle]
pub unsafe extern "C" fn rcuref_pool_get(p: *const rcuref_pool, obj: *const c_void) -> i32 {
    // SAFETY: the caller's promise.
    match unsafe { object(p, obj) } {
        Ok((p, i)) => i32::from(p.node(i).0.get()),
        Err(e) => e,
    }
}

/// Drops a reference. The last one calls the pool's `destroy` with the object and then
/// frees it for reuse; returns 1 then, 0 otherwise, or `RCUREF_EDOMAIN` /
/// `RCUREF_EINVAL`.
///
/// # Safety
/// `p` is null or an initialised pool, and the caller holds the reference it drops.
#[no_mangle]
pub unsafe extern "C" fn rcuref_pool_put(p: *const rcuref_pool, obj: *mut c_void) -> i32 {
    // SAFETY: the caller's promise.
    match unsafe { object(p, obj) } {
        Ok((p, i)) => put(p, i, obj),
        Err(e) => e,
    }
}

/// The put of object `i` (`obj`): 1 if it was the last.
fn put(p: &Inner, i: usize, obj: *mut c_void) -> i32 {
    let (count, claimed) = p.node(i);
    if !count.put() {
        return 0;
    }
    // The last reference: nobody else can be here, and nothing may publish it again
    // while `destroy` runs.
    claimed.store(DYING, Relaxed);
    // The last put acquired every holder's use; destroy, then free (Release: the
    // destruction happens before the next claim's writes).
    if let Some(destroy) = p.destroy {
        // SAFETY: the caller of init gave a destructor for the pool's objects; this is
        // one, and no reference to it is left.
        unsafe { destroy(obj) };
    }
    claimed.store(FREE, Release);
    1
}

/// Looks up the pool object published at `*location` and takes a reference to it
/// (inside a read section: the kernel's `__get_file_rcu`): loads the location, gets a
/// reference, and loads the location again; if it names another object by then, puts
/// the reference and starts over. Writes the object (or null: the location is empty)
/// to `*out`. Returns `RCUREF_OK`, `RCUREF_EDOMAIN` (the location holds a pointer that
/// is not an object of this pool) or `RCUREF_EINVAL`.
///
/// # Safety
/// `p` is null or an initialised pool; `location` is null or a pointer location
/// written only with `rcuref_assign_pointer`/`rcuref_exchange_pointer`; `out` is null
/// or writable; the caller is inside a read section.
#[no_mangle]
pub unsafe extern "C" fn rcuref_pool_lookup(
    p: *const rcuref_pool,
    location: *const *mut c_void,
    out: *mut *mut c_void,
) -> i32 {
    // SAFETY: the caller's promise.
    let p = match unsafe { pool(p) } {
        Ok(p) => p,
        Err(e) => return e,
    };
    if location.is_null() || !location.is_aligned() || out.is_null() {
        return RCUREF_EINVAL;
    }
    // SAFETY: the caller's promise: an aligned location accessed atomically.
    let loc = unsafe { AtomicPtr::from_ptr(location.cast_mut()) };
    loop {
        let obj = loc.load(Acquire);
        if obj.is_null() {
            // SAFETY: `out` is writable.
            unsafe { out.write(obj) };
            return RCUREF_OK;
        }
        let Some(i) = p.index(obj) else {
            return RCUREF_EDOMAIN;
        };
        if !p.node(i).0.get() {
            if loc.load(Acquire) == obj {
                // Still named, but dying (its last put came before the unpublish):
                // absent, as it is about to be.
                // SAFETY: `out` is writable.
                unsafe { out.write(core::ptr::null_mut()) };
                return RCUREF_OK;
            }
            continue; // the location changed: look again
        }
        // The re-check: after the get (its full ordering keeps this load after it).
        if loc.load(Acquire) == obj {
            // SAFETY: `out` is writable.
            unsafe { out.write(obj) };
            return RCUREF_OK;
        }
        // Another object now: not the one this location names. Drop it and retry.
        put(p, i, obj);
    }
}
