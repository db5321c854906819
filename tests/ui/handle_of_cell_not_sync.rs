// A handle of a !Sync T must not be shared across threads.
use rcuref::pool::Pool;
use std::cell::Cell;

fn main() {
    let pool: Pool<Cell<u32>, 4> = Pool::new();
    let h = pool.alloc(Cell::new(1)).ok().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| h.set(2));
    });
}
