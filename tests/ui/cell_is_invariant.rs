//! Soundness: `RcuCell<'a, ..>` must be invariant in `'a`. If a
//! `&RcuCell<'long, ..>` could become a `&RcuCell<'short, ..>`, this function would
//! publish a stack slot that dies when it returns, and readers would load a dangling
//! reference.
use rcuref::rcu::RcuCell;

fn publish_a_local(c: &RcuCell<'_, u32, 2>) {
    let mut x = 5;
    let _ = c.replace(&mut x);
}

fn shrink<'long: 'short, 'short>(c: &'short RcuCell<'long, u32, 2>) -> &'short RcuCell<'short, u32, 2> {
    c
}

fn main() {}
