//! A reference loaded under a guard cannot outlive the guard (the section).
use rcuref::rcu::{Rcu, RcuCell};

static RCU: Rcu<2> = Rcu::new();

fn main() {
    let mut a = 1u32;
    let cell = RcuCell::new(&RCU, &mut a);
    let reader = RCU.reader().unwrap();
    let v;
    {
        let guard = reader.lock();
        v = cell.load(&guard);
    }
    assert_eq!(*v, 1);
}
