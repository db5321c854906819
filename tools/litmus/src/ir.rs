//! The orderings as the source gives them: each path's atomic operations read from the
//! library's LLVM IR (`--emit=llvm-ir`), where every load, store, read-modify-write,
//! compare-exchange and fence still carries its C11 ordering (`monotonic`, `acquire`,
//! `release`, `acq_rel`, `seq_cst`) whatever the instruction set makes of it. The spec's
//! paths (from which the C11 tests are written) must agree with them exactly: an AcqRel
//! that compiles to the same instructions as a SeqCst on every target we ship is still a
//! different C11 program.

use super::spec::{A, O};
use std::collections::BTreeMap;
use std::path::Path;

/// One atomic operation of the IR, or of the spec, in the same terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Load(O),
    Store(O),
    Rmw(String, O),
    Cas(O, O),
    Fence(O),
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Load(o) => write!(f, "load {o:?}"),
            Op::Store(o) => write!(f, "store {o:?}"),
            Op::Rmw(op, o) => write!(f, "{op} {o:?}"),
            Op::Cas(o, fail) => write!(f, "cmpxchg {o:?}/{fail:?}"),
            Op::Fence(o) => write!(f, "fence {o:?}"),
        }
    }
}

fn order(word: &str) -> Option<O> {
    Some(match word.trim_end_matches(',') {
        "monotonic" | "unordered" => O::Rlx,
        "acquire" => O::Acq,
        "release" => O::Rel,
        "acq_rel" => O::AcqRel,
        "seq_cst" => O::Sc,
        _ => return None,
    })
}

/// The atomic operations of every `rcuref_path_*` / `rcuref_twin_*` function of an IR
/// file, in the order the text lists them, by path name.
pub fn read(ll: &Path) -> Result<BTreeMap<String, Vec<Op>>, String> {
    let text = std::fs::read_to_string(ll).map_err(|e| format!("{}: {e}", ll.display()))?;
    // Every function's operations by symbol, then the path names (identical functions
    // are merged: `@a = unnamed_addr alias ..., ptr @b`).
    let mut funcs: BTreeMap<String, Vec<Op>> = BTreeMap::new();
    let mut aliases: Vec<(String, String)> = Vec::new();
    let mut current: Option<(String, Vec<Op>)> = None;
    for line in text.lines() {
        if line.starts_with('@') && line.contains(" alias ") {
            let name = line[1..]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_matches('"');
            if let Some(target) = line.rsplit('@').next() {
                aliases.push((
                    name.to_string(),
                    target.trim().trim_matches('"').to_string(),
                ));
            }
            continue;
        }
        if line.starts_with("define ") {
            let name = line
                .split('@')
                .nth(1)
                .and_then(|r| r.split('(').next())
                .unwrap_or("")
                .trim_matches('"');
            current = name
                .starts_with("rcuref_")
                .then(|| (name.to_string(), Vec::new()));
            continue;
        }
        if line.starts_with('}') {
            if let Some((name, ops)) = current.take() {
                funcs.insert(name, ops);
            }
            continue;
        }
        let Some((_, ops)) = current.as_mut() else {
            continue;
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        if line.contains("syncscope(\"singlethread\")") {
            return Err(format!(
                "a single-thread (compiler) fence in a path: {}",
                line.trim()
            ));
        }
        let orders: Vec<O> = words.iter().filter_map(|w| order(w)).collect();
        let has = |w: &str| words.contains(&w);
        if has("fence") {
            ops.push(Op::Fence(orders[0]));
        } else if has("cmpxchg") {
            ops.push(Op::Cas(orders[0], orders[1]));
        } else if has("atomicrmw") {
            let k = words.iter().position(|w| *w == "atomicrmw").unwrap();
            let mut op = words.get(k + 1).copied().unwrap_or("");
            if op == "volatile" {
                op = words.get(k + 2).copied().unwrap_or("");
            }
            ops.push(Op::Rmw(op.to_string(), orders[0]));
        } else if has("load") && has("atomic") {
            ops.push(Op::Load(orders[0]));
        } else if has("store") && has("atomic") {
            ops.push(Op::Store(orders[0]));
        }
    }
    for (name, target) in aliases {
        if let Some(ops) = funcs.get(&target).cloned() {
            funcs.insert(name, ops);
        }
    }
    let mut out = BTreeMap::new();
    for (name, ops) in funcs {
        if name.starts_with("rcuref_api_") {
            continue;
        }
        if let Some(p) = name
            .strip_prefix("rcuref_path_")
            .or_else(|| name.strip_prefix("rcuref_"))
        {
            out.insert(p.to_string(), ops);
        }
    }
    Ok(out)
}

/// A spec path's operations in the IR's terms.
pub fn of_spec(ops: &[A]) -> Vec<Op> {
    let mut out = Vec::new();
    for op in ops {
        match *op {
            A::Ld(_, _, o) => out.push(Op::Load(o)),
            A::St(_, _, o) => out.push(Op::Store(o)),
            A::Add(_, k, _, o) => out.push(Op::Rmw(if k < 0 { "sub" } else { "add" }.into(), o)),
            A::Swap(_, _, _, o) => out.push(Op::Rmw("xchg".into(), o)),
            A::Cas { o, fail, .. } => out.push(Op::Cas(o, fail)),
            A::Fence(o) => out.push(Op::Fence(o)),
            A::If(_, _, _, body) => out.extend(of_spec(body)),
            A::Entered(..) | A::Plus(..) => {}
        }
    }
    out
}

/// Whether an IR read-modify-write is the spec's (`swap(true)` on a bool may be lowered
/// to an `or`; a subtract of a constant to an add of its negation).
pub fn same(ir: &Op, spec: &Op) -> bool {
    match (ir, spec) {
        (Op::Rmw(a, o1), Op::Rmw(b, o2)) => {
            o1 == o2
                && (a == b
                    || (b == "xchg" && a == "or")
                    || (b == "sub" && a == "add")
                    || (b == "add" && a == "sub"))
        }
        _ => ir == spec,
    }
}
