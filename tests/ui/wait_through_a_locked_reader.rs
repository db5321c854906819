//! A `Reader` is a wait context only as `&mut`: no writer helper can wait through it
//! while one of its guards is alive (the wait would wait for itself).
use rcuref::rcu::{Rcu, RcuValue};

static RCU: Rcu<2> = Rcu::new();
static VALUE: RcuValue<'static, u32, 2, 2> = RcuValue::new(&RCU, 0);

fn main() {
    let mut reader = RCU.reader().unwrap();
    let guard = reader.lock();
    let _ = VALUE.replace(&mut reader, 1, rcuref::rcu::spin);
    drop(guard);
}
