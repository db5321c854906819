// A reference loaded from an RcuCell must not outlive the cell (and with it the
// borrow of the storage): this must not compile.
use rcuref::rcu::{Rcu, RcuCell};

static RCU: Rcu<2> = Rcu::new();

fn main() {
    let reader = RCU.reader().unwrap();
    let guard = reader.lock();
    let r;
    {
        let mut storage = 5u32;
        let cell = RcuCell::new(&RCU, &mut storage);
        r = cell.load(&guard);
    }
    println!("{r}");
}
