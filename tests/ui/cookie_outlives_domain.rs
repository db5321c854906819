//! A grace-period cookie cannot outlive its domain (it answers about that domain only).
use rcuref::rcu::Rcu;

fn main() {
    let cookie;
    {
        let rcu: Rcu<2> = Rcu::new();
        cookie = rcu.start_poll();
    }
    assert!(cookie.is_done());
}
