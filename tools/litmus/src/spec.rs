//! What the litmus suite checks: each fast path as abstract memory operations with the
//! orderings the Rust source gives them (the C11 tests are written from these, and the
//! object code of every target must agree with them), and the tests, each a claim of
//! the module docs' "Memory ordering" sections made of those paths, with the twins
//! that weaken one of them and must then fail. The types are here; the tables are data,
//! `litmus/spec/` (`paths.txt`, `common.txt`, `tests/*.test`), read at run time by
//! `data.rs`.

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
#[derive(Debug)]
pub struct Twin {
    pub name: &'static str,
    pub what: &'static str,
    pub swaps: &'static [(&'static str, &'static str)],
    /// (thread, path, n): the `n`-th call (from 1; 0: every call) of that path in that
    /// thread is left out.
    pub drops: &'static [(usize, &'static str, usize)],
    pub on: &'static [&'static str],
}

#[derive(Debug)]
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

/// A path: its name, the source it stands for, its operations.
pub type NamedPath = (&'static str, &'static str, &'static [A]);

/// The paths and the tests, read from `litmus/spec/`.
struct Spec {
    paths: Vec<NamedPath>,
    tests: Vec<Test>,
}

static SPEC: std::sync::OnceLock<Spec> = std::sync::OnceLock::new();

/// Reads `litmus/spec/` (once); every other function here needs it read.
pub fn load() -> Result<(), String> {
    if SPEC.get().is_none() {
        let (paths, tests) = super::data::load(&super::workspace_root().join("litmus/spec"))?;
        let _ = SPEC.set(Spec { paths, tests });
    }
    Ok(())
}

fn spec() -> &'static Spec {
    SPEC.get().expect("spec::load() runs first")
}

/// Every path: its name (`rcuref_path_<name>` / `rcuref_<name>` in `code_probe.rs`),
/// the source it stands for, and its operations.
pub fn paths() -> &'static [NamedPath] {
    &spec().paths
}

/// Every test, with its twins.
pub fn tests() -> &'static [Test] {
    &spec().tests
}

/// A path's operations.
pub fn path(name: &str) -> Option<&'static [A]> {
    paths().iter().find(|p| p.0 == name).map(|p| p.2)
}
