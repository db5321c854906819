//! `ops <name> <iterations>`: runs one hot path in a loop, for counting its instructions
//! under valgrind's callgrind (`cargo xtask bench` subtracts the `empty` loop).

use rcuref::file_ref::FileRef64;
use rcuref::pool::Pool;
use rcuref::rcu::Rcu;
use rcuref_bench::CasRef;
use std::hint::black_box;
use std::sync::Arc;

static RCU: Rcu<4> = Rcu::new();
static POOL: Pool<u64, 16> = Pool::new();
heapless::box_pool!(HP: u64);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (op, n): (&str, u64) = match args.as_slice() {
        [_, op, n] => (op, n.parse().expect("iterations")),
        _ => {
            eprintln!("usage: ops <empty|fileref_get_put|cas_get_put|arc_clone_drop|rcu_read|epoch_pin|pool_alloc_free|heapless_alloc_free> <iterations>");
            std::process::exit(2);
        }
    };
    let r = FileRef64::new(1);
    let c = CasRef::new(1);
    let a = Arc::new(0u64);
    let reader = RCU.reader().unwrap();
    for _ in 0..16 {
        let block: &'static mut heapless::pool::boxed::BoxBlock<u64> =
            Box::leak(Box::new(heapless::pool::boxed::BoxBlock::new()));
        HP.manage(block);
    }
    // One loop per operation (the match is outside it), so the empty loop's
    // instructions are exactly what every other loop has besides its operation.
    match op {
        "empty" => repeat(n, || {
            black_box(&r);
        }),
        "fileref_get_put" => repeat(n, || {
            black_box(r.get() && r.put());
        }),
        "cas_get_put" => repeat(n, || {
            black_box(c.get() && c.put());
        }),
        "arc_clone_drop" => repeat(n, || drop(black_box(a.clone()))),
        "rcu_read" => repeat(n, || {
            let _g = reader.lock();
            rcuref_bench::in_section();
        }),
        "epoch_pin" => repeat(n, || {
            let _g = crossbeam_epoch::pin();
            rcuref_bench::in_section();
        }),
        "pool_alloc_free" => repeat(n, || drop(black_box(POOL.alloc(7).ok()))),
        "heapless_alloc_free" => repeat(n, || drop(black_box(HP.alloc(7).ok()))),
        other => {
            eprintln!("unknown op {other}");
            std::process::exit(2);
        }
    }
}

#[inline(always)]
fn repeat(n: u64, mut f: impl FnMut()) {
    for _ in 0..n {
        f();
    }
}
