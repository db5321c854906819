//! A handle cannot outlive its pool.
use rcuref::pool::Pool;

fn main() {
    let h;
    {
        let pool: Pool<u32, 2> = Pool::new();
        h = pool.alloc(1).ok().unwrap();
    }
    drop(h);
}
