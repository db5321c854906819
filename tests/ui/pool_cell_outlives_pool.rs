//! A published location cannot outlive its pool.
use rcuref::pool::{Pool, PoolCell};

fn main() {
    let cell;
    {
        let pool: Pool<u32, 2> = Pool::new();
        cell = PoolCell::new(&pool);
    }
    drop(cell);
}
