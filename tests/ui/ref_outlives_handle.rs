//! A reference through a handle cannot outlive the handle, whose drop may free the
//! object and let the slot be reused.
use rcuref::pool::Pool;

static POOL: Pool<u32, 2> = Pool::new();

fn main() {
    let r: &u32;
    {
        let h = POOL.alloc(2).ok().unwrap();
        r = &*h;
    }
    assert_eq!(*r, 2);
}
