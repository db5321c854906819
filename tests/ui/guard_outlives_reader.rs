//! A guard cannot outlive its reader (whose drop ends a leaked section).
use rcuref::rcu::Rcu;

static RCU: Rcu<2> = Rcu::new();

fn main() {
    let guard;
    {
        let reader = RCU.reader().unwrap();
        guard = reader.lock();
    }
    drop(guard);
}
