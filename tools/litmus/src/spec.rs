//! What the litmus suite checks: each fast path as abstract memory operations with the
//! orderings the Rust source gives them (the C11 tests are written from these, and the
//! object code of every target must agree with them), and the tests, each a claim of
//! the module docs' "Memory ordering" sections made of those paths, with the twins
//! that weaken one of them and must then fail.
//!
//! Values are small stand-ins where the real ones do not fit herd7's immediates: a
//! FileRef count stores references - 1 as the library does (ONEREF = 0, NOREF = -1),
//! with DEAD = -9 and SATURATED = 99 standing for the middles of their zones; a slot
//! word is the library's (1 offline, 5 or 7 online with phase 0 or 1, +4 a level); a
//! data word is 1 while live and 2 once freed.

/// An ordering, as the Rust source names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum O {
    Rlx,
    Acq,
    Rel,
    AcqRel,
    Sc,
}

impl O {
    pub fn acquires(self) -> bool {
        matches!(self, O::Acq | O::AcqRel | O::Sc)
    }
    pub fn releases(self) -> bool {
        matches!(self, O::Rel | O::AcqRel | O::Sc)
    }
}

/// A value: an immediate, or a parameter of the path (bound at the call).
#[derive(Clone, Copy, Debug)]
pub enum V {
    Imm(i64),
    P(&'static str),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
}

/// An abstract operation of a path. Names are the path's parameters: locations and
/// registers bound by the call, or temporaries of the call when left unbound.
#[derive(Clone, Copy, Debug)]
pub enum A {
    /// `dst = loc.load(o)`.
    Ld(&'static str, &'static str, O),
    /// `loc.store(v, o)`.
    St(&'static str, V, O),
    /// `old = loc.fetch_add(k, o)` (`k` < 0: a `fetch_sub`).
    Add(&'static str, i64, &'static str, O),
    /// `old = loc.swap(v, o)`.
    Swap(&'static str, V, &'static str, O),
    /// `ok = loc.compare_exchange(expect, new, o, fail).is_ok()`, `old` the value read.
    Cas {
        loc: &'static str,
        expect: V,
        new: V,
        old: &'static str,
        ok: &'static str,
        o: O,
        fail: O,
    },
    Fence(O),
    /// `dst = 5 + 2 * phase`: the slot word of an outermost section.
    Entered(&'static str, &'static str),
    /// `dst = src + k`.
    Plus(&'static str, &'static str, i64),
    /// `if reg <cmp> v { body }`.
    If(&'static str, Cmp, V, &'static [A]),
}

use A::*;
use O::*;
use V::{Imm, P};

pub const ONEREF: i64 = 0;
pub const NOREF: i64 = -1;
pub const DEAD: i64 = -9;
pub const SATURATED: i64 = 99;
pub const LIVE: i64 = 1;
pub const FREED: i64 = 2;

/// Every path: its name (`rcuref_path_<name>` / `rcuref_<name>` in `code_probe.rs`),
/// the source it stands for, and its operations.
pub const PATHS: &[(&str, &str, &[A])] = &[
    ("own_slot", "rcu::ops::own_slot", &[Ld("slot", "v", Rlx)]),
    (
        "lock_outer",
        "rcu::ops::lock_outer",
        &[
            Ld("phase", "p", Rlx),
            Entered("w", "p"),
            St("slot", P("w"), Rel),
            Fence(Sc),
        ],
    ),
    (
        "lock_nested",
        "rcu::ops::lock_nested",
        &[Plus("w", "v", 4), St("slot", P("w"), Rel)],
    ),
    (
        "lock_nested_in_context",
        "rcu::ops::lock_nested_in_context",
        &[Plus("w", "v", 4), St("slot", P("w"), Rel), Fence(Sc)],
    ),
    ("unlock", "rcu::ops::unlock", &[St("slot", P("v"), Rel)]),
    (
        "claim",
        "rcu::ops::claim",
        &[
            Ld("slot", "seen", Rlx),
            If(
                "seen",
                Cmp::Eq,
                Imm(0),
                &[Cas {
                    loc: "slot",
                    expect: Imm(0),
                    new: Imm(1),
                    old: "old",
                    ok: "ok",
                    o: Acq,
                    fail: Rlx,
                }],
            ),
        ],
    ),
    ("release", "rcu::ops::release", &[St("slot", Imm(0), Rel)]),
    (
        "cookie_snapshot",
        "rcu::ops::cookie_snapshot",
        &[Fence(Sc), Ld("gp", "g", Sc)],
    ),
    (
        "counter_acquire",
        "rcu::ops::counter_acquire",
        &[Ld("gp", "g", Acq)],
    ),
    (
        "counter_snapshot",
        "rcu::ops::counter_snapshot",
        &[Ld("gp", "g", Sc)],
    ),
    (
        "register_in_half",
        "rcu::ops::register_in_half",
        &[Add("stepping", 1, "before", Sc), Ld("gp", "g", Sc)],
    ),
    (
        "leave_half",
        "rcu::ops::leave_half",
        &[Add("stepping", -1, "before", Sc)],
    ),
    (
        "registered",
        "rcu::ops::registered",
        &[Ld("stepping", "n", Sc)],
    ),
    (
        "step",
        "rcu::ops::step",
        &[Cas {
            loc: "gp",
            expect: P("from"),
            new: P("to"),
            old: "old",
            ok: "ok",
            o: Sc,
            fail: Sc,
        }],
    ),
    (
        "set_phase",
        "rcu::ops::set_phase",
        &[
            Ld("phase", "cur", Rlx),
            If("cur", Cmp::Ne, P("want"), &[St("phase", P("want"), Rlx)]),
        ],
    ),
    ("wait_fence", "rcu::ops::wait_fence", &[Fence(Sc)]),
    ("scan_slot", "rcu::ops::scan_slot", &[Ld("slot", "v", Acq)]),
    (
        "cell_load",
        "rcu::cell::load_published",
        &[Ld("ptr", "p", Acq)],
    ),
    (
        "cell_publish",
        "rcu::cell::publish",
        &[Swap("ptr", P("new"), "old", AcqRel)],
    ),
    (
        "value_load",
        "rcu::value::load_current",
        &[Ld("cur", "i", Acq)],
    ),
    (
        "value_publish",
        "rcu::value::publish_index",
        &[Swap("cur", P("i"), "old", AcqRel)],
    ),
    ("get32", "file_ref::zoned::get", &[Add("cnt", 1, "old", Sc)]),
    (
        "inc32",
        "file_ref::zoned::inc",
        &[Add("cnt", 1, "old", Rlx)],
    ),
    (
        "put32",
        "file_ref::zoned::put",
        &[Add("cnt", -1, "old", Sc)],
    ),
    (
        "mark_dead32",
        "file_ref::zoned::mark_dead",
        &[
            Cas {
                loc: "cnt",
                expect: Imm(NOREF),
                new: Imm(DEAD),
                old: "old",
                ok: "ok",
                o: Rel,
                fail: Rlx,
            },
            If("ok", Cmp::Eq, Imm(1), &[Fence(Acq)]),
        ],
    ),
    (
        "close32",
        "file_ref::zoned::close_only_reference",
        &[
            Ld("cnt", "seen", Rlx),
            If(
                "seen",
                Cmp::Eq,
                Imm(ONEREF),
                &[Cas {
                    loc: "cnt",
                    expect: Imm(ONEREF),
                    new: Imm(DEAD),
                    old: "old",
                    ok: "ok",
                    o: AcqRel,
                    fail: Rlx,
                }],
            ),
        ],
    ),
    (
        "repair32",
        "file_ref::zoned::repair",
        &[Cas {
            loc: "cnt",
            expect: P("from"),
            new: P("to"),
            old: "old",
            ok: "ok",
            o: Rlx,
            fail: Rlx,
        }],
    ),
    (
        "init32",
        "file_ref::zoned::init",
        &[St("cnt", P("raw"), Rel)],
    ),
    (
        "resaturate32",
        "file_ref::zoned::resaturate",
        &[St("cnt", Imm(SATURATED), Rel)],
    ),
    (
        "claim_flag",
        "pool::free_map::claim_flag",
        &[Swap("flag", Imm(1), "old", Acq)],
    ),
    (
        "release_flag",
        "pool::free_map::release_flag",
        &[St("flag", Imm(0), Rel)],
    ),
    (
        "location_load",
        "pool::load_location",
        &[Ld("cur", "v", Acq)],
    ),
    (
        "location_swap",
        "pool::swap_location",
        &[Swap("cur", P("raw"), "old", AcqRel)],
    ),
    // The weakened twins (code_probe.rs).
    (
        "twin_lock_outer_no_fence",
        "lock_outer without its fence (Mutant::NoReaderFence)",
        &[
            Ld("phase", "p", Rlx),
            Entered("w", "p"),
            St("slot", P("w"), Rel),
        ],
    ),
    (
        "twin_lock_outer_relaxed_store",
        "lock_outer with a relaxed store (Mutant::RelaxedLockStore)",
        &[
            Ld("phase", "p", Rlx),
            Entered("w", "p"),
            St("slot", P("w"), Rlx),
            Fence(Sc),
        ],
    ),
    (
        "twin_lock_nested_relaxed",
        "a nested lock with a relaxed store and no fence",
        &[Plus("w", "v", 4), St("slot", P("w"), Rlx)],
    ),
    (
        "twin_unlock_relaxed",
        "unlock with a relaxed store",
        &[St("slot", P("v"), Rlx)],
    ),
    (
        "twin_release_relaxed",
        "release with a relaxed store",
        &[St("slot", Imm(0), Rlx)],
    ),
    (
        "twin_scan_slot_relaxed",
        "scan_slot with a relaxed load",
        &[Ld("slot", "v", Rlx)],
    ),
    (
        "twin_counter_acquire_relaxed",
        "counter_acquire with a relaxed load",
        &[Ld("gp", "g", Rlx)],
    ),
    (
        "twin_step_relaxed",
        "step with a relaxed compare-exchange",
        &[Cas {
            loc: "gp",
            expect: P("from"),
            new: P("to"),
            old: "old",
            ok: "ok",
            o: Rlx,
            fail: Rlx,
        }],
    ),
    (
        "twin_cookie_snapshot_no_fence",
        "cookie_snapshot without its fence",
        &[Ld("gp", "g", Sc)],
    ),
    (
        "twin_cookie_snapshot_relaxed",
        "cookie_snapshot without its fence, relaxed",
        &[Ld("gp", "g", Rlx)],
    ),
    (
        "twin_registered_acquire",
        "registered with an acquire load (LDAPR where RCpc is on)",
        &[Ld("stepping", "n", Acq)],
    ),
    (
        "twin_registered_relaxed",
        "registered with a relaxed load",
        &[Ld("stepping", "n", Rlx)],
    ),
    (
        "twin_value_load_relaxed",
        "value_load with a relaxed load",
        &[Ld("cur", "i", Rlx)],
    ),
    (
        "twin_value_publish_relaxed",
        "value_publish with a relaxed swap",
        &[Swap("cur", P("i"), "old", Rlx)],
    ),
    (
        "twin_cell_load_relaxed",
        "cell_load with a relaxed load",
        &[Ld("ptr", "p", Rlx)],
    ),
    (
        "twin_cell_publish_relaxed",
        "cell_publish with a relaxed swap",
        &[Swap("ptr", P("new"), "old", Rlx)],
    ),
    (
        "twin_get32_relaxed",
        "get with a relaxed add (Mutant::GetRelaxed)",
        &[Add("cnt", 1, "old", Rlx)],
    ),
    (
        "twin_put32_relaxed",
        "put with a relaxed subtract (Mutant::PutRelaxed)",
        &[Add("cnt", -1, "old", Rlx)],
    ),
    (
        "twin_mark_dead32_relaxed",
        "mark_dead relaxed, without its fence (Mutant::PutRelaxed)",
        &[Cas {
            loc: "cnt",
            expect: Imm(NOREF),
            new: Imm(DEAD),
            old: "old",
            ok: "ok",
            o: Rlx,
            fail: Rlx,
        }],
    ),
    (
        "twin_close32_relaxed",
        "close_only_reference with a relaxed exchange",
        &[
            Ld("cnt", "seen", Rlx),
            If(
                "seen",
                Cmp::Eq,
                Imm(ONEREF),
                &[Cas {
                    loc: "cnt",
                    expect: Imm(ONEREF),
                    new: Imm(DEAD),
                    old: "old",
                    ok: "ok",
                    o: Rlx,
                    fail: Rlx,
                }],
            ),
        ],
    ),
    (
        "twin_repair32_as_store",
        "a repair as a plain store",
        &[St("cnt", P("to"), Rlx)],
    ),
    (
        "twin_init32_relaxed",
        "init with a relaxed store",
        &[St("cnt", P("raw"), Rlx)],
    ),
    (
        "twin_resaturate32_relaxed",
        "a put re-saturating with a relaxed store",
        &[St("cnt", Imm(SATURATED), Rlx)],
    ),
    (
        "twin_claim_flag_relaxed",
        "claim_flag with a relaxed swap",
        &[Swap("flag", Imm(1), "old", Rlx)],
    ),
    (
        "twin_claim_flag_split",
        "claim_flag as a load and a store (Mutant::CheckThenClaim)",
        &[Ld("flag", "old", Rlx), St("flag", Imm(1), Rlx)],
    ),
    (
        "twin_release_flag_relaxed",
        "release_flag with a relaxed store",
        &[St("flag", Imm(0), Rlx)],
    ),
];

/// An argument of a call: a location, a register of the thread, an immediate.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    L(&'static str),
    R(&'static str),
    K(i64),
}

/// Where an interrupt handler runs inside a call.
#[derive(Clone, Copy, Debug)]
pub enum At {
    /// After the call's `n`-th memory access (1-based), before what follows it (the
    /// barriers of a fence included).
    Access(usize),
    /// After the whole call.
    End,
}

/// One step of a thread.
#[derive(Clone, Copy, Debug)]
pub enum I {
    Call(&'static str, &'static [(&'static str, Arg)]),
    /// A call with an interrupt handler taken inside it: the handler's steps run in the
    /// thread's program order at that point (a trap is not a fence).
    Irq(
        &'static str,
        &'static [(&'static str, Arg)],
        At,
        &'static [I],
    ),
    /// A plain (non-atomic) load of the caller's data.
    Load(&'static str, &'static str),
    /// A plain store of the caller's data (a free, a field write).
    Store(&'static str, Arg),
    If(&'static str, Cmp, i64, &'static [I]),
}

/// A weakened twin: paths swapped for weaker ones, or calls dropped; on the listed
/// configurations (all when empty), herd7 must find the outcome reachable.
pub struct Twin {
    pub name: &'static str,
    pub what: &'static str,
    pub swaps: &'static [(&'static str, &'static str)],
    /// (thread, path, n): the `n`-th call (from 1; 0: every call) of that path in that
    /// thread is left out.
    pub drops: &'static [(usize, &'static str, usize)],
    pub on: &'static [&'static str],
}

pub struct Test {
    pub name: &'static str,
    /// The claim, in one sentence, and where the docs make it.
    pub claim: &'static str,
    pub init: &'static [(&'static str, i64)],
    pub threads: &'static [&'static [I]],
    /// The forbidden outcome, over `thread:register` and final location values.
    pub exists: &'static str,
    pub twins: &'static [Twin],
}

use Arg::{K, L, R};
use I::{Call, If as When, Irq, Load, Store};

const READER: &[I] = &[
    Call("own_slot", &[("slot", L("slot")), ("v", R("v"))]),
    Call("lock_outer", &[("slot", L("slot")), ("phase", L("phase"))]),
    Call("value_load", &[("cur", L("cur")), ("i", R("i"))]),
    When("i", Cmp::Eq, 0, &[Load("buf0", "d")]),
];

const WRITER: &[I] = &[
    Call(
        "value_publish",
        &[("cur", L("cur")), ("i", K(1)), ("old", R("o"))],
    ),
    Call("cookie_snapshot", &[("gp", L("gp")), ("g", R("g"))]),
    Call("wait_fence", &[]),
    Call("scan_slot", &[("slot", L("slot")), ("v", R("s"))]),
    When("s", Cmp::Eq, 1, &[Store("buf0", K(FREED))]),
];

/// A handler of a context reader nesting on the interrupted context's online slot.
const NESTED_HANDLER: &[I] = &[
    Call("own_slot", &[("slot", L("slot")), ("v", R("hv"))]),
    Call(
        "lock_nested_in_context",
        &[("slot", L("slot")), ("v", R("hv"))],
    ),
    Call("value_load", &[("cur", L("cur")), ("i", R("hi"))]),
    When("hi", Cmp::Eq, 0, &[Load("buf0", "hd")]),
    Call("unlock", &[("slot", L("slot")), ("v", R("hv"))]),
];

/// A handler that finds the slot offline (interrupting before the store) and enters an
/// outermost section of its own.
const OUTER_HANDLER: &[I] = &[
    Call("own_slot", &[("slot", L("slot")), ("v", R("hv"))]),
    Call("lock_outer", &[("slot", L("slot")), ("phase", L("phase"))]),
    Call("value_load", &[("cur", L("cur")), ("i", R("hi"))]),
    When("hi", Cmp::Eq, 0, &[Load("buf0", "hd")]),
    Call("unlock", &[("slot", L("slot")), ("v", K(1))]),
];

/// Every configuration but Armv7-M, whose release stores begin with a full `DMB`.
const NOT_ARMV7: &[&str] = &[
    "c11",
    "c11-rs20",
    "aarch64",
    "aarch64-lse-rcpc",
    "riscv64",
    "riscv32",
];

const RCU_INIT: &[(&str, i64)] = &[
    ("slot", 1),
    ("phase", 0),
    ("cur", 0),
    ("buf0", LIVE),
    ("gp", 0),
];

const NO_READER_FENCE: Twin = Twin {
    name: "no-reader-fence",
    what: "the outermost lock without its fence",
    swaps: &[("lock_outer", "twin_lock_outer_no_fence")],
    drops: &[],
    on: &[
        "c11",
        "c11-rs20",
        "riscv64",
        "riscv32",
        "armv7m",
        "aarch64-lse-rcpc",
    ],
};

/// On AArch64 without RCpc a release store followed by an acquire load (STLR; LDAR) is
/// ordered by itself: the reader's fence matters there only once its loads are weaker.
const NO_READER_FENCE_RELAXED_LOAD: Twin = Twin {
    name: "no-reader-fence-relaxed-load",
    what: "the outermost lock without its fence, and a relaxed load of the pointer",
    swaps: &[
        ("lock_outer", "twin_lock_outer_no_fence"),
        ("value_load", "twin_value_load_relaxed"),
    ],
    drops: &[],
    on: &[],
};

pub const TESTS: &[Test] = &[
    Test {
        name: "rcu-lock-vs-wait",
        claim: "A reader's announcement and fence against a wait's fence and scan: either \
                the scan sees the reader, or the reader sees the unpublish (rcu module \
                docs, Memory ordering, first item).",
        init: RCU_INIT,
        threads: &[READER, WRITER],
        exists: "0:d=2",
        twins: &[NO_READER_FENCE, NO_READER_FENCE_RELAXED_LOAD],
    },
    Test {
        name: "rcu-irq-in-lock-after-phase",
        claim: "An interrupt handler taken inside the outermost lock after its phase load \
                finds the slot offline and enters a section of its own, which the scan \
                either sees or which sees the unpublish.",
        init: RCU_INIT,
        threads: &[
            &[
                Call("own_slot", &[("slot", L("slot")), ("v", R("v"))]),
                Irq(
                    "lock_outer",
                    &[("slot", L("slot")), ("phase", L("phase"))],
                    At::Access(1),
                    OUTER_HANDLER,
                ),
            ],
            WRITER,
        ],
        exists: "0:hd=2",
        twins: &[NO_READER_FENCE, NO_READER_FENCE_RELAXED_LOAD],
    },
    Test {
        name: "rcu-irq-in-lock-after-store",
        claim: "The second review's finding 1: a handler nesting on a context reader \
                between the outermost lock's store and its fence; its nested lock's own \
                fence keeps its loads after the announcement (ContextReader docs).",
        init: RCU_INIT,
        threads: &[
            &[
                Call("own_slot", &[("slot", L("slot")), ("v", R("v"))]),
                Irq(
                    "lock_outer",
                    &[("slot", L("slot")), ("phase", L("phase"))],
                    At::Access(2),
                    NESTED_HANDLER,
                ),
            ],
            WRITER,
        ],
        exists: "0:hd=2",
        twins: &[
            Twin {
                name: "nested-without-fence",
                what: "finding 1's fix undone: the nested lock without its fence (Armv7's \
                       release store has a leading DMB, which orders the outermost store \
                       before the handler's loads; AArch64 without RCpc orders STLR before \
                       LDAR)",
                swaps: &[("lock_nested_in_context", "lock_nested")],
                drops: &[],
                on: &["c11", "c11-rs20", "riscv64", "riscv32", "aarch64-lse-rcpc"],
            },
            Twin {
                name: "nested-relaxed",
                what: "the nested lock without its fence, its store relaxed",
                swaps: &[("lock_nested_in_context", "twin_lock_nested_relaxed")],
                drops: &[],
                on: &["armv7m"],
            },
            Twin {
                name: "nested-without-fence-relaxed-load",
                what: "the nested lock without its fence and a relaxed load (AArch64 \
                       without RCpc orders STLR before LDAR by itself)",
                swaps: &[
                    ("lock_nested_in_context", "lock_nested"),
                    ("value_load", "twin_value_load_relaxed"),
                ],
                drops: &[],
                on: NOT_ARMV7,
            },
        ],
    },
    Test {
        name: "rcu-irq-in-lock-after-fence",
        claim: "A handler nesting on a context reader whose outermost lock has run its \
                fence: protected by that fence (and its own).",
        init: RCU_INIT,
        threads: &[
            &[
                Call("own_slot", &[("slot", L("slot")), ("v", R("v"))]),
                Irq(
                    "lock_outer",
                    &[("slot", L("slot")), ("phase", L("phase"))],
                    At::End,
                    NESTED_HANDLER,
                ),
            ],
            WRITER,
        ],
        exists: "0:hd=2",
        twins: &[
            Twin {
                name: "no-fence-at-all",
                what: "neither the outermost lock nor the nested one fences",
                swaps: &[
                    ("lock_outer", "twin_lock_outer_no_fence"),
                    ("lock_nested_in_context", "lock_nested"),
                ],
                drops: &[],
                on: &["c11", "c11-rs20", "riscv64", "riscv32", "aarch64-lse-rcpc"],
            },
            Twin {
                name: "no-fence-nested-relaxed",
                what: "no fence, and the nested store relaxed (no leading DMB)",
                swaps: &[
                    ("lock_outer", "twin_lock_outer_no_fence"),
                    ("lock_nested_in_context", "twin_lock_nested_relaxed"),
                ],
                drops: &[],
                on: &["armv7m"],
            },
            Twin {
                name: "no-fence-relaxed-load",
                what: "no fence, and a relaxed load",
                swaps: &[
                    ("lock_outer", "twin_lock_outer_no_fence"),
                    ("lock_nested_in_context", "lock_nested"),
                    ("value_load", "twin_value_load_relaxed"),
                ],
                drops: &[],
                on: NOT_ARMV7,
            },
        ],
    },
    Test {
        name: "rcu-unlock-vs-reclaim",
        claim: "The unlock's Release store against the scan's Acquire load: a section's \
                loads happen before the reclaim that follows a scan seeing it ended \
                (Memory ordering, second item).",
        init: &[("slot", 5), ("buf0", LIVE)],
        threads: &[
            &[
                Load("buf0", "d"),
                Call("own_slot", &[("slot", L("slot")), ("v", R("v"))]),
                Call("unlock", &[("slot", L("slot")), ("v", K(1))]),
            ],
            &[
                Call("scan_slot", &[("slot", L("slot")), ("v", R("s"))]),
                When("s", Cmp::Eq, 1, &[Store("buf0", K(FREED))]),
            ],
        ],
        exists: "0:d=2 /\\ 1:s=1",
        twins: &[
            Twin {
                name: "relaxed-unlock",
                what: "a relaxed unlock",
                swaps: &[("unlock", "twin_unlock_relaxed")],
                drops: &[],
                on: &[],
            },
            Twin {
                name: "relaxed-scan",
                what: "a relaxed scan (the hardware keeps the free after it by the \
                       control dependency; C11 does not)",
                swaps: &[("scan_slot", "twin_scan_slot_relaxed")],
                drops: &[],
                on: &["c11", "c11-rs20"],
            },
        ],
    },
    Test {
        name: "rcu-unlock-vs-reclaim-by-cookie",
        claim: "Another context reclaims: the step's SeqCst exchange after the scan, and \
                the cookie holder's Acquire check, carry the section's end to the reclaim \
                (Memory ordering, second item).",
        init: &[("slot", 5), ("buf0", LIVE), ("gp", 1)],
        threads: &[
            &[
                Load("buf0", "d"),
                Call("own_slot", &[("slot", L("slot")), ("v", R("v"))]),
                Call("unlock", &[("slot", L("slot")), ("v", K(1))]),
            ],
            &[
                Call("scan_slot", &[("slot", L("slot")), ("v", R("s"))]),
                When(
                    "s",
                    Cmp::Eq,
                    1,
                    &[Call(
                        "step",
                        &[
                            ("gp", L("gp")),
                            ("from", K(1)),
                            ("to", K(2)),
                            ("ok", R("ok")),
                        ],
                    )],
                ),
            ],
            &[
                Call("counter_acquire", &[("gp", L("gp")), ("g", R("g"))]),
                When("g", Cmp::Eq, 2, &[Store("buf0", K(FREED))]),
            ],
        ],
        exists: "0:d=2 /\\ 2:g=2",
        twins: &[
            Twin {
                name: "relaxed-cookie-check",
                what: "the cookie holder's check and the step relaxed (control dependencies \
                       still order the hardware)",
                swaps: &[
                    ("counter_acquire", "twin_counter_acquire_relaxed"),
                    ("step", "twin_step_relaxed"),
                ],
                drops: &[],
                on: &["c11", "c11-rs20"],
            },
            Twin {
                name: "relaxed-unlock",
                what: "a relaxed unlock",
                swaps: &[("unlock", "twin_unlock_relaxed")],
                drops: &[],
                on: &[],
            },
        ],
    },
    Test {
        name: "rcu-release-sequence",
        claim: "Every slot store is Release: a scan that reads the next section's \
                announcement still orders the previous section's loads before the reclaim \
                (Memory ordering, third item).",
        init: &[("slot", 5), ("phase", 1), ("buf0", LIVE)],
        threads: &[
            &[
                Load("buf0", "d"),
                Call("own_slot", &[("slot", L("slot")), ("v", R("v"))]),
                Call("unlock", &[("slot", L("slot")), ("v", K(1))]),
                Call("own_slot", &[("slot", L("slot")), ("v", R("v2"))]),
                Call("lock_outer", &[("slot", L("slot")), ("phase", L("phase"))]),
            ],
            &[
                Call("scan_slot", &[("slot", L("slot")), ("v", R("s"))]),
                When("s", Cmp::Eq, 7, &[Store("buf0", K(FREED))]),
            ],
        ],
        exists: "0:d=2 /\\ 1:s=7",
        twins: &[
            Twin {
                name: "relaxed-lock-store",
                what: "the outermost lock's store relaxed (Mutant::RelaxedLockStore): under \
                       C++20's release sequences (no same-thread stores) nothing orders the \
                       previous section; on the hardware the unlock's barrier and the \
                       ordering of stores to one location still do",
                swaps: &[("lock_outer", "twin_lock_outer_relaxed_store")],
                drops: &[],
                on: &["c11-rs20"],
            },
            Twin {
                name: "relaxed-unlock-and-lock",
                what: "both slot stores relaxed",
                swaps: &[
                    ("lock_outer", "twin_lock_outer_relaxed_store"),
                    ("unlock", "twin_unlock_relaxed"),
                ],
                drops: &[],
                on: &[],
            },
        ],
    },
    Test {
        name: "rcu-cookie-vs-flip",
        claim: "The cookie's unpublish, fence and counter load against a flip and the \
                wait's fence and scan by another driver: a cookie that read the counter \
                before the flip counts that wait, and the wait either sees the reader or \
                the reader sees the unpublish (Memory ordering, first item).",
        init: RCU_INIT,
        threads: &[
            READER,
            &[
                Call(
                    "value_publish",
                    &[("cur", L("cur")), ("i", K(1)), ("old", R("o"))],
                ),
                Call("cookie_snapshot", &[("gp", L("gp")), ("g", R("g"))]),
            ],
            &[
                Call(
                    "step",
                    &[
                        ("gp", L("gp")),
                        ("from", K(0)),
                        ("to", K(1)),
                        ("ok", R("ok")),
                    ],
                ),
                Call("wait_fence", &[]),
                Call("scan_slot", &[("slot", L("slot")), ("v", R("s"))]),
            ],
        ],
        exists: "0:i=0 /\\ 1:g=0 /\\ 2:ok=1 /\\ 2:s=1",
        twins: &[
            Twin {
                name: "cookie-without-fence",
                what: "the cookie's fence left out (the SeqCst load alone does not order \
                       the AcqRel swap before it in C11; every instruction set's mapping of \
                       it does)",
                swaps: &[("cookie_snapshot", "twin_cookie_snapshot_no_fence")],
                drops: &[],
                on: &["c11", "c11-rs20"],
            },
            Twin {
                name: "relaxed-cookie",
                what: "the cookie relaxed and unfenced, the publish relaxed",
                swaps: &[
                    ("cookie_snapshot", "twin_cookie_snapshot_relaxed"),
                    ("value_publish", "twin_value_publish_relaxed"),
                ],
                drops: &[],
                on: &[],
            },
        ],
    },
    Test {
        name: "rcu-phase-word",
        claim: "Whatever phase a reader records, one of a grace period's two waits is for \
                it: safety does not depend on the phase word (rcu module docs, The phase \
                word).",
        init: RCU_INIT,
        threads: &[
            READER,
            &[
                Call(
                    "value_publish",
                    &[("cur", L("cur")), ("i", K(1)), ("old", R("o"))],
                ),
                Call("cookie_snapshot", &[("gp", L("gp")), ("g", R("g"))]),
                Call("wait_fence", &[]),
                Call("scan_slot", &[("slot", L("slot")), ("v", R("s1"))]),
                Call("set_phase", &[("phase", L("phase")), ("want", K(1))]),
                Call("wait_fence", &[]),
                Call("scan_slot", &[("slot", L("slot")), ("v", R("s2"))]),
            ],
        ],
        exists: "0:i=0 /\\ ~1:s1=5 /\\ ~1:s2=7",
        twins: &[Twin {
            name: "second-wait-only",
            what: "the first wait left out: a reader that recorded the phase before the \
                   flip is waited for by nobody",
            swaps: &[],
            drops: &[(1, "wait_fence", 1), (1, "scan_slot", 1)],
            on: &[],
        }],
    },
    Test {
        name: "rcu-lap-guard",
        claim: "The lap guard's registration and re-read against a step that leaves the \
                half and checks the registrations: either the step sees the registration, \
                or the registering driver sees the counter gone (rcu module docs, The lap \
                guard; all SeqCst: LDAR, never LDAPR).",
        init: &[("stepping", 0), ("gp", 0)],
        threads: &[
            &[Call(
                "register_in_half",
                &[("stepping", L("stepping")), ("gp", L("gp")), ("g", R("g"))],
            )],
            &[
                Call(
                    "step",
                    &[
                        ("gp", L("gp")),
                        ("from", K(0)),
                        ("to", K(1)),
                        ("ok", R("ok")),
                    ],
                ),
                Call("registered", &[("stepping", L("stepping")), ("n", R("n"))]),
            ],
        ],
        exists: "0:g=0 /\\ 1:ok=1 /\\ 1:n=0",
        twins: &[
            Twin {
                name: "acquire-check",
                what: "the registration check an Acquire load (after RISC-V's release-only \
                       store-conditional the load may pass it; LSE's CASAL orders even LDAPR \
                       after it)",
                swaps: &[("registered", "twin_registered_acquire")],
                drops: &[],
                on: &["c11", "c11-rs20", "riscv64", "riscv32"],
            },
            Twin {
                name: "relaxed-check",
                what: "the registration check and the step relaxed",
                swaps: &[
                    ("registered", "twin_registered_relaxed"),
                    ("step", "twin_step_relaxed"),
                ],
                drops: &[],
                on: &[],
            },
        ],
    },
    Test {
        name: "rcu-irq-claim",
        claim: "A handler's Rcu::read: a claim (Acquire exchange) and an outermost lock on \
                the claimed slot, against a wait.",
        init: &[
            ("slot", 0),
            ("phase", 0),
            ("cur", 0),
            ("buf0", LIVE),
            ("gp", 0),
        ],
        threads: &[
            &[
                Call("claim", &[("slot", L("slot")), ("ok", R("c"))]),
                When(
                    "c",
                    Cmp::Eq,
                    1,
                    &[
                        Call("own_slot", &[("slot", L("slot")), ("v", R("v"))]),
                        Call("lock_outer", &[("slot", L("slot")), ("phase", L("phase"))]),
                        Call("value_load", &[("cur", L("cur")), ("i", R("i"))]),
                        When("i", Cmp::Eq, 0, &[Load("buf0", "d")]),
                    ],
                ),
            ],
            &[
                Call(
                    "value_publish",
                    &[("cur", L("cur")), ("i", K(1)), ("old", R("o"))],
                ),
                Call("cookie_snapshot", &[("gp", L("gp")), ("g", R("g"))]),
                Call("wait_fence", &[]),
                Call("scan_slot", &[("slot", L("slot")), ("v", R("s"))]),
            ],
        ],
        exists: "0:c=1 /\\ 0:i=0 /\\ (1:s=0 \\/ 1:s=1)",
        twins: &[NO_READER_FENCE, NO_READER_FENCE_RELAXED_LOAD],
    },
    Test {
        name: "rcu-irq-release",
        claim: "Rcu::read's release: the unlock and the slot's freeing are both Release; a \
                scan that reads the free slot orders the section before the reclaim.",
        init: &[("slot", 5), ("buf0", LIVE)],
        threads: &[
            &[
                Load("buf0", "d"),
                Call("own_slot", &[("slot", L("slot")), ("v", R("v"))]),
                Call("unlock", &[("slot", L("slot")), ("v", K(1))]),
                Call("own_slot", &[("slot", L("slot")), ("v", R("v2"))]),
                Call("release", &[("slot", L("slot"))]),
            ],
            &[
                Call("scan_slot", &[("slot", L("slot")), ("v", R("s"))]),
                When("s", Cmp::Eq, 0, &[Store("buf0", K(FREED))]),
            ],
        ],
        exists: "0:d=2 /\\ 1:s=0",
        twins: &[
            Twin {
                name: "relaxed-release",
                what: "the slot freed with a relaxed store (C++20 release sequences; on the \
                       hardware the unlock before it still orders the section)",
                swaps: &[("release", "twin_release_relaxed")],
                drops: &[],
                on: &["c11-rs20"],
            },
            Twin {
                name: "relaxed-unlock-and-release",
                what: "the unlock and the release relaxed",
                swaps: &[
                    ("release", "twin_release_relaxed"),
                    ("unlock", "twin_unlock_relaxed"),
                ],
                drops: &[],
                on: &[],
            },
        ],
    },
    Test {
        name: "rcucell-publish",
        claim: "RcuCell: the publishing swap's release against the reader's Acquire load: \
                a reader that sees the new pointer sees the value's initialisation.",
        init: &[("ptr", 0), ("data", 0)],
        threads: &[
            &[
                Store("data", K(1)),
                Call(
                    "cell_publish",
                    &[("ptr", L("ptr")), ("new", K(1)), ("old", R("o"))],
                ),
            ],
            &[
                Call("cell_load", &[("ptr", L("ptr")), ("p", R("p"))]),
                When("p", Cmp::Eq, 1, &[Load("data", "d")]),
            ],
        ],
        exists: "1:p=1 /\\ 1:d=0",
        twins: &[
            Twin {
                name: "relaxed-publish",
                what: "a relaxed publish",
                swaps: &[("cell_publish", "twin_cell_publish_relaxed")],
                drops: &[],
                on: &[],
            },
            Twin {
                name: "relaxed-load",
                what: "a relaxed load of the pointer",
                swaps: &[("cell_load", "twin_cell_load_relaxed")],
                drops: &[],
                on: &[],
            },
        ],
    },
    Test {
        name: "rcuvalue-publish",
        claim: "RcuValue: the index swap's release against the reader's Acquire load.",
        init: &[("cur", 0), ("data", 0)],
        threads: &[
            &[
                Store("data", K(1)),
                Call(
                    "value_publish",
                    &[("cur", L("cur")), ("i", K(1)), ("old", R("o"))],
                ),
            ],
            &[
                Call("value_load", &[("cur", L("cur")), ("i", R("i"))]),
                When("i", Cmp::Eq, 1, &[Load("data", "d")]),
            ],
        ],
        exists: "1:i=1 /\\ 1:d=0",
        twins: &[Twin {
            name: "relaxed-publish",
            what: "a relaxed publish",
            swaps: &[("value_publish", "twin_value_publish_relaxed")],
            drops: &[],
            on: &[],
        }],
    },
    Test {
        name: "fileref-last-put",
        claim: "FileRef's last put: every holder's accesses happen before the destroyer's \
                (the SeqCst subtracts' release, the Release exchange NOREF -> DEAD and the \
                Acquire fence after it; file_ref module docs, Memory ordering).",
        init: &[("cnt", 1), ("x", LIVE)],
        threads: &[
            &[
                Load("x", "d"),
                Call("put32", &[("cnt", L("cnt")), ("old", R("o0"))]),
            ],
            &[
                Call("put32", &[("cnt", L("cnt")), ("old", R("o1"))]),
                When(
                    "o1",
                    Cmp::Eq,
                    ONEREF,
                    &[
                        Call("mark_dead32", &[("cnt", L("cnt")), ("ok", R("ok"))]),
                        When("ok", Cmp::Eq, 1, &[Store("x", K(FREED))]),
                    ],
                ),
            ],
        ],
        exists: "0:d=2 /\\ 1:ok=1",
        twins: &[Twin {
            name: "relaxed-put",
            what: "puts and the mark relaxed, no fence (Mutant::PutRelaxed)",
            swaps: &[
                ("put32", "twin_put32_relaxed"),
                ("mark_dead32", "twin_mark_dead32_relaxed"),
            ],
            drops: &[],
            on: &[],
        }],
    },
    Test {
        name: "fileref-put-close",
        claim: "put_close's single exchange ONEREF -> DEAD (AcqRel) acquires the other \
                holders' puts: their accesses happen before the destruction.",
        init: &[("cnt", 1), ("x", LIVE)],
        threads: &[
            &[
                Load("x", "d"),
                Call("put32", &[("cnt", L("cnt")), ("old", R("o"))]),
            ],
            &[
                Call("close32", &[("cnt", L("cnt")), ("ok", R("ok"))]),
                When("ok", Cmp::Eq, 1, &[Store("x", K(FREED))]),
            ],
        ],
        exists: "0:d=2 /\\ 1:ok=1",
        twins: &[
            Twin {
                name: "relaxed-close",
                what: "put_close's exchange relaxed (a control dependency still orders the \
                       hardware)",
                swaps: &[("close32", "twin_close32_relaxed")],
                drops: &[],
                on: &["c11", "c11-rs20"],
            },
            Twin {
                name: "relaxed-holder-put",
                what: "the other holder's put relaxed",
                swaps: &[("put32", "twin_put32_relaxed")],
                drops: &[],
                on: &[],
            },
        ],
    },
    Test {
        name: "fileref-repair-keeps-release-sequence",
        claim: "pull_back's relaxed exchanges are read-modify-writes, so they keep the \
                release sequence of init: a get that reads a repaired value still sees \
                what init published (file_ref module docs, Memory ordering).",
        init: &[("cnt", DEAD), ("x", 0)],
        threads: &[
            &[
                Store("x", K(1)),
                Call("init32", &[("cnt", L("cnt")), ("raw", K(SATURATED))]),
            ],
            &[
                Call("get32", &[("cnt", L("cnt")), ("old", R("o1"))]),
                When(
                    "o1",
                    Cmp::Eq,
                    SATURATED,
                    &[Call(
                        "repair32",
                        &[
                            ("cnt", L("cnt")),
                            ("from", K(SATURATED + 1)),
                            ("to", K(SATURATED)),
                            ("ok", R("ok")),
                        ],
                    )],
                ),
            ],
            &[
                Call("get32", &[("cnt", L("cnt")), ("old", R("o2"))]),
                When("o2", Cmp::Eq, SATURATED, &[Load("x", "d")]),
            ],
        ],
        exists: "1:o1=99 /\\ 1:ok=1 /\\ 2:o2=99 /\\ 2:d=0",
        twins: &[
            Twin {
                name: "repair-as-store",
                what: "the repair a plain store: it ends init's release sequence under \
                       C++20 (under C++11 the repairing get's own SeqCst add heads a new one \
                       that the store continues; on the hardware the gets' acquire orders \
                       it)",
                swaps: &[("repair32", "twin_repair32_as_store")],
                drops: &[],
                on: &["c11-rs20"],
            },
            Twin {
                name: "relaxed-get",
                what: "the reading get relaxed",
                swaps: &[("get32", "twin_get32_relaxed")],
                drops: &[],
                on: &[],
            },
        ],
    },
    Test {
        name: "fileref-resaturate-keeps-release-sequence",
        claim: "A put on a saturated count stores SATURATED back with Release, so a get \
                that reads it still sees what init published (file_ref module docs, \
                Memory ordering).",
        init: &[("cnt", DEAD), ("x", 0)],
        threads: &[
            &[
                Store("x", K(1)),
                Call("init32", &[("cnt", L("cnt")), ("raw", K(SATURATED))]),
            ],
            &[
                Call("put32", &[("cnt", L("cnt")), ("old", R("o1"))]),
                When(
                    "o1",
                    Cmp::Eq,
                    SATURATED,
                    &[Call("resaturate32", &[("cnt", L("cnt"))])],
                ),
            ],
            &[
                Call("get32", &[("cnt", L("cnt")), ("old", R("o2"))]),
                When("o2", Cmp::Eq, SATURATED, &[Load("x", "d")]),
            ],
        ],
        exists: "1:o1=99 /\\ 2:o2=99 /\\ 2:d=0",
        twins: &[
            Twin {
                name: "relaxed-resaturate",
                what: "the re-saturating store relaxed: it ends init's release sequence \
                       under C++20 (under C++11 the put's own SeqCst subtract heads one \
                       the store continues; the hardware orders it after that acquire)",
                swaps: &[("resaturate32", "twin_resaturate32_relaxed")],
                drops: &[],
                on: &["c11-rs20"],
            },
            Twin {
                name: "relaxed-get",
                what: "the reading get relaxed",
                swaps: &[("get32", "twin_get32_relaxed")],
                drops: &[],
                on: &[],
            },
        ],
    },
    Test {
        name: "fileref-deconstruction-under-rcu",
        claim: "The deconstruction race, closed by the caller's rule: a put inside a read \
                section, memory freed only after a grace period. The context that revives \
                the count (its get reads the put's NOREF) and then frees it after a wait \
                never frees under the first put's late exchange (file_ref module docs, \
                Deconstruction race).",
        init: &[("slot", 1), ("phase", 0), ("cnt", ONEREF), ("gp", 0)],
        threads: &[
            &[
                Call("lock_outer", &[("slot", L("slot")), ("phase", L("phase"))]),
                Call("put32", &[("cnt", L("cnt")), ("old", R("o"))]),
                When(
                    "o",
                    Cmp::Eq,
                    ONEREF,
                    &[Call(
                        "mark_dead32",
                        &[("cnt", L("cnt")), ("old", R("late"))],
                    )],
                ),
            ],
            &[
                Call("get32", &[("cnt", L("cnt")), ("old", R("g"))]),
                When(
                    "g",
                    Cmp::Eq,
                    NOREF,
                    &[
                        Call("wait_fence", &[]),
                        Call("scan_slot", &[("slot", L("slot")), ("v", R("s"))]),
                        When("s", Cmp::Eq, 1, &[Store("cnt", K(42))]),
                    ],
                ),
            ],
        ],
        exists: "0:late=42 /\\ 1:g=-1 /\\ 1:s=1",
        twins: &[Twin {
            name: "outside-a-read-section",
            what: "the put outside a read section",
            swaps: &[],
            drops: &[(0, "lock_outer", 0)],
            on: &[],
        }],
    },
    Test {
        name: "pool-init-then-publish",
        claim: "The pool publishes the count last with init's Release store; a get that \
                succeeds on it sees the value (pool module docs, Memory ordering).",
        init: &[("cnt", DEAD), ("val", 0)],
        threads: &[
            &[
                Store("val", K(1)),
                Call("init32", &[("cnt", L("cnt")), ("raw", K(ONEREF))]),
            ],
            &[
                Call("get32", &[("cnt", L("cnt")), ("old", R("o"))]),
                When("o", Cmp::Eq, ONEREF, &[Load("val", "d")]),
            ],
        ],
        exists: "1:o=0 /\\ 1:d=0",
        twins: &[
            Twin {
                name: "relaxed-init",
                what: "init relaxed",
                swaps: &[("init32", "twin_init32_relaxed")],
                drops: &[],
                on: &[],
            },
            Twin {
                name: "relaxed-get",
                what: "the get relaxed (Linus's rejected relaxed get; Mutant::GetRelaxed)",
                swaps: &[("get32", "twin_get32_relaxed")],
                drops: &[],
                on: &[],
            },
        ],
    },
    Test {
        name: "pool-identity-recheck",
        claim: "Get, then re-check: the get (SeqCst) keeps the re-check's load after it, so \
                a reader whose get took a reference on the slot's next object sees that \
                the location no longer names it (pool module docs, Memory ordering).",
        init: &[("loc", 1), ("cnt", DEAD), ("val", 0)],
        threads: &[
            &[
                Call(
                    "location_swap",
                    &[("cur", L("loc")), ("raw", K(0)), ("old", R("o"))],
                ),
                Store("val", K(2)),
                Call("init32", &[("cnt", L("cnt")), ("raw", K(ONEREF))]),
            ],
            &[
                Call("location_load", &[("cur", L("loc")), ("v", R("c"))]),
                When(
                    "c",
                    Cmp::Eq,
                    1,
                    &[
                        Call("get32", &[("cnt", L("cnt")), ("old", R("g"))]),
                        When(
                            "g",
                            Cmp::Eq,
                            ONEREF,
                            &[Call("location_load", &[("cur", L("loc")), ("v", R("c2"))])],
                        ),
                    ],
                ),
            ],
        ],
        exists: "1:c=1 /\\ 1:g=0 /\\ 1:c2=1",
        twins: &[Twin {
            name: "relaxed-get",
            what: "the get relaxed",
            swaps: &[("get32", "twin_get32_relaxed")],
            drops: &[],
            on: &[],
        }],
    },
    Test {
        name: "pool-free-then-claim",
        claim: "The free map's Release store when a slot is freed against the Acquire swap \
                that claims it: the old value's destruction happens before the new one's \
                construction (pool module docs, Memory ordering).",
        init: &[("flag", 1), ("val", LIVE)],
        threads: &[
            &[
                Load("val", "d"),
                Call("release_flag", &[("flag", L("flag"))]),
            ],
            &[
                Call("claim_flag", &[("flag", L("flag")), ("old", R("o"))]),
                When("o", Cmp::Eq, 0, &[Store("val", K(FREED))]),
            ],
        ],
        exists: "0:d=2 /\\ 1:o=0",
        twins: &[
            Twin {
                name: "relaxed-release",
                what: "the free relaxed",
                swaps: &[("release_flag", "twin_release_flag_relaxed")],
                drops: &[],
                on: &[],
            },
            Twin {
                name: "relaxed-claim",
                what: "the claim relaxed (a control dependency still orders the hardware)",
                swaps: &[("claim_flag", "twin_claim_flag_relaxed")],
                drops: &[],
                on: &["c11", "c11-rs20"],
            },
        ],
    },
    Test {
        name: "pool-claim-is-exclusive",
        claim: "Two allocators never both claim one slot: a claim is one read-modify-write \
                (pool module docs, Allocation).",
        init: &[("flag", 0)],
        threads: &[
            &[Call("claim_flag", &[("flag", L("flag")), ("old", R("a"))])],
            &[Call("claim_flag", &[("flag", L("flag")), ("old", R("b"))])],
        ],
        exists: "0:a=0 /\\ 1:b=0",
        twins: &[Twin {
            name: "check-then-claim",
            what: "a load and a store instead of one swap (Mutant::CheckThenClaim)",
            swaps: &[("claim_flag", "twin_claim_flag_split")],
            drops: &[],
            on: &[],
        }],
    },
];

/// A path's operations.
pub fn path(name: &str) -> Option<&'static [A]> {
    PATHS.iter().find(|p| p.0 == name).map(|p| p.2)
}
