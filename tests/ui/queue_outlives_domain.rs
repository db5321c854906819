//! A deferred-reclamation queue cannot outlive the domain it is bound to.
use rcuref::rcu::{DeferQueue, Rcu};

fn main() {
    let queue;
    {
        let rcu: Rcu<2> = Rcu::new();
        queue = DeferQueue::<u32, 2, 2>::new(&rcu);
    }
    drop(queue);
}
