//! The typesafe-by-RCU pool for C objects (the kernel's `SLAB_TYPESAFE_BY_RCU`): the
//! caller's array of objects, each embedding an `rcuref_pool_node` (the library's
//! `pool::node::Node`: its reference count and state). A freed object is reused at
//! once for another object of the same type, so a reader that found an object through
//! a published location takes a reference and re-checks the location
//! (`rcuref_pool_lookup` does both).
//!
//! The protocol (claim, publish, get, put, the lookup's re-check) and its orderings are
//! the library's (`src/pool/node.rs`, under its loom models, litmus tests and broken
//! variants); what is C's own here is the array: finding an object's node, refusing
//! pointers and arrays that are not the pool's, and the error codes.

use crate::RCUREF_OK;
use crate::{or_return, valid, RCUREF_EBUSY, RCUREF_EDOMAIN, RCUREF_EFULL, RCUREF_EINVAL};
use core::ffi::c_void;
use portable_atomic::{AtomicPtr, AtomicU32, Ordering::*};
use rcuref::pool::node::{self, Node};

/// What each pooled object embeds, anywhere in it: its reference count and its state
/// (free, claimed, published, being destroyed). Only the pool functions touch it.
#[repr(C)]
pub struct rcuref_pool_node {
    count: u32,
    state: u32,
}

const _: () = {
    assert!(core::mem::size_of::<rcuref_pool_node>() == core::mem::size_of::<Node>());
    assert!(core::mem::align_of::<rcuref_pool_node>() == core::mem::align_of::<Node>());
};

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
    /// Object `i`'s node.
    fn node(&self, i: usize) -> &Node {
        let node = (self.base + i * self.stride + self.node_offset) as *const Node;
        // SAFETY: `rcuref_pool_init` checked that every object's node lies inside the
        // caller's array with the node's alignment and wrote a `Node` there, and the
        // caller promised that the array lives as long as the pool and that only these
        // functions touch the nodes (a `Node` is atomics only: shared access is sound);
        // the pointer comes from the address the caller gave, not from a shared
        // reference.
        unsafe { &*node }
    }

    /// The index of `obj` if it is one of this pool's objects (the start of one).
    fn index(&self, obj: *const c_void) -> Option<usize> {
        let a = obj as usize;
        let off = a.checked_sub(self.base)?;
        // `stride` is never 0 in an initialised pool (a node fits in it), but checked
        // division keeps a broken invariant from panicking.
        let i = off.checked_div(self.stride)?;
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
    valid(p)?;
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
/// reused. Returns `RCUREF_OK`, `RCUREF_EINVAL` (a null pointer, `count` 0, a
/// `stride` or `node_offset` that puts a node outside its object or misaligned), or
/// `RCUREF_EBUSY`, changing nothing, when `p` is a pool with an object in use (claimed,
/// published or being destroyed) or an object of `objects` is in use by a pool (this
/// one or another over the same array): freeing it would hand out an object that
/// someone still holds. A pool with no object in use may be initialised again.
///
/// # Safety
/// `p` points to writable pool storage that is zeroed or holds a pool (initialised
/// before, and whose array still lives), and that no other context uses during the
/// call; `objects` to `count * stride` bytes that live as long as the pool, whose nodes
/// are touched only by these functions from now on, and that no other context uses
/// during the call.
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
    // SAFETY: `p` is aligned (checked) and zeroed or a pool (the caller's promise).
    if let Ok(old) = unsafe { self::pool(p) } {
        if (0..old.count as usize).any(|i| old.node(i).is_in_use()) {
            return RCUREF_EBUSY;
        }
    }
    // Any pool's node in the new array, whatever that pool's layout (another stride,
    // node offset or base over the same memory): every aligned word that holds an
    // in-use state. A data word that happens to hold one of those three values refuses
    // the init too (docs/c-api.md says which values).
    let words = (stride * count as usize) / 4;
    let first = base.next_multiple_of(4);
    if (0..words).any(|k| {
        let at = first + 4 * k;
        at + 4 <= base + stride * count as usize && {
            // SAFETY: inside the caller's array (checked to fit the address space
            // above), 4-aligned. Read atomically, as the nodes of a pool that may be
            // using this memory are written; a race with a plain write to an object's
            // data is possible only where the caller broke init's contract (another
            // pool's objects in use here), which this check exists to refuse.
            Node::marks_in_use(unsafe { AtomicU32::from_ptr(at as *mut u32) }.load(Acquire))
        }
    }) {
        return RCUREF_EBUSY;
    }
    for i in 0..count as usize {
        let n = (base + i * stride + node_offset) as *mut Node;
        // SAFETY: inside the caller's array, aligned (checked above); nobody else uses
        // the objects during init (the caller's promise).
        unsafe { n.write(Node::new()) };
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
    let p = or_return!(unsafe { pool(p) });
    or_return!(valid(obj));
    let n = p.count as usize;
    // `count` is never 0 in an initialised pool (init refuses it); checked all the same,
    // so that this cannot panic.
    let Some(start) = (p.hint.load(Relaxed) as usize).checked_rem(n) else {
        return RCUREF_EINVAL;
    };
    for k in 0..n {
        let i = (start + k) % n;
        if p.node(i).claim() {
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
    let (p, i) = or_return!(unsafe { object(p, obj) });
    // Only a claimed object, once (a second publish, or one from a destroy callback,
    // finds it published or being destroyed and is refused).
    if p.node(i).publish() {
        RCUREF_OK
    } else {
        RCUREF_EINVAL
    }
}

/// Tries to take a reference to a pool object found through a published location
/// (inside a read section). Writes to `*taken` whether it took one (true: re-check
/// that it is still the object you looked for, and put it if not; false: free or
/// dying, not yours to use). Returns `RCUREF_OK`, or `RCUREF_EDOMAIN` / `RCUREF_EINVAL`
/// with nothing taken and `*taken` (if not null) false.
///
/// # Safety
/// `p` is null or an initialised pool; `taken` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rcuref_pool_get(
    p: *const rcuref_pool,
    obj: *const c_void,
    taken: *mut bool,
) -> i32 {
    // SAFETY: the caller's promise.
    let r = match unsafe { object(p, obj) } {
        Ok(_) if taken.is_null() => Err(RCUREF_EINVAL),
        Ok((p, i)) => Ok(p.node(i).get()),
        Err(e) => Err(e),
    };
    // SAFETY: `taken` is null or writable (the caller's promise).
    unsafe { crate::answer(taken, r) }
}

/// Drops a reference. The last one calls the pool's `destroy` with the object and then
/// frees it for reuse. Writes to `*last` (`last` may be null) whether it was the last.
/// Returns `RCUREF_OK`, or `RCUREF_EDOMAIN` / `RCUREF_EINVAL` with nothing dropped.
///
/// # Safety
/// `p` is null or an initialised pool, the caller holds the reference it drops, and
/// `last` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn rcuref_pool_put(
    p: *const rcuref_pool,
    obj: *mut c_void,
    last: *mut bool,
) -> i32 {
    // SAFETY: the caller's promise.
    let r = match unsafe { object(p, obj) } {
        Ok((p, i)) => Ok(put(p, i, obj)),
        Err(e) => Err(e),
    };
    if last.is_null() {
        return r.err().unwrap_or(RCUREF_OK);
    }
    // SAFETY: `last` is writable (the caller's promise).
    unsafe { crate::answer(last, r) }
}

/// The put of object `i` (`obj`): whether it was the last.
fn put(p: &Inner, i: usize, obj: *mut c_void) -> bool {
    p.node(i).put(|| destroyed(p, obj))
}

/// Looks up the pool object published at `*location` and takes a reference to it
/// (inside a read section: the kernel's `__get_file_rcu`): loads the location, gets a
/// reference, and loads the location again; if it names another object by then, puts
/// the reference and starts over. Writes the object (or null: the location is empty)
/// to `*out`. Returns `RCUREF_OK`, `RCUREF_EDOMAIN` (the location holds a pointer that
/// is not an object of this pool) or `RCUREF_EINVAL`.
///
/// The location must hold a reference to the object it names (store the object with
/// its reference; take it out before putting that reference): the re-check compares
/// addresses, so an object put to its last reference while a location still names it
/// can be freed and reused at the same address, and a lookup then returns the new
/// object. Code that cannot keep that rule must compare a key of its own.
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
    let p = or_return!(unsafe { pool(p) });
    or_return!(valid(location).and(valid(out)));
    // SAFETY: the caller's promise: an aligned location accessed atomically.
    let loc = unsafe { AtomicPtr::from_ptr(location.cast_mut()) };
    let found = node::lookup(
        || loc.load(Acquire),
        |obj| p.index(obj).map(|i| p.node(i)),
        |obj| destroyed(p, obj),
    );
    match found {
        Ok(obj) => {
            // SAFETY: `out` is writable (the caller's promise).
            unsafe { out.write(obj) };
            RCUREF_OK
        }
        Err(_) => RCUREF_EDOMAIN,
    }
}

/// Runs the pool's `destroy` on `obj`, whose last reference was just put.
fn destroyed(p: &Inner, obj: *mut c_void) {
    if let Some(destroy) = p.destroy {
        // SAFETY: the caller of init gave a destructor for the pool's objects; this is
        // one, and no reference to it is left.
        unsafe { destroy(obj) };
    }
}
