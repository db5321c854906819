// A read guard belongs to the context that entered the section: it must not be Send.
use rcuref::rcu::Rcu;

static RCU: Rcu<2> = Rcu::new();

fn main() {
    let reader = RCU.reader().unwrap();
    let guard = reader.lock();
    std::thread::scope(|s| {
        s.spawn(move || drop(guard));
    });
}
