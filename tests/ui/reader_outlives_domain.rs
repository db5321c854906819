//! A reader cannot outlive its domain.
use rcuref::rcu::Rcu;

fn main() {
    let reader;
    {
        let rcu: Rcu<2> = Rcu::new();
        reader = rcu.reader().unwrap();
    }
    drop(reader);
}
