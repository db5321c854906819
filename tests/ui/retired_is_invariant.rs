//! A `Retired<'a, ..>` hands back `&'a mut T`: like the cell it came from, it is
//! invariant in `'a` (no lifetime games with what it will return).
use rcuref::rcu::Retired;

fn shrink<'long: 'short, 'short>(r: Retired<'long, u32, 2>) -> Retired<'short, u32, 2> {
    r
}

fn main() {}
