//! Reading the fast paths out of object code: `llvm-objdump` disassembly of the
//! library's `rcuref_path_*` / `rcuref_twin_*` / `rcuref_api_*` symbols, the paths
//! through each function's control flow, and the memory operations and barriers along
//! them, in a form that names what herd7 needs (the instruction, its width) and nothing
//! that a harmless change of register allocation would alter.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// The instruction sets of the suite (herd7's names for them in the litmus header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    AArch64,
    RiscV,
    Arm,
}

/// What a memory instruction does, for the litmus tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Load,
    Store,
    /// A load-exclusive / load-reserved.
    LoadEx,
    /// A store-exclusive / store-conditional.
    StoreEx,
    /// A read-modify-write in one instruction (RISC-V `amo*`, AArch64 `ldadd*`/`swp*`).
    Amo,
    /// AArch64 `cas*`.
    Cas,
    Barrier,
}

/// One memory instruction or barrier of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemOp {
    pub kind: Kind,
    /// The mnemonic as the disassembler prints it, condition codes and width suffixes
    /// removed (`ldaxr`, `amoadd.w.aqrl`, `dmb ish`, `fence rw,w`, `ldrexb`).
    pub mn: String,
    /// A 64-bit access (AArch64 `x` registers, RISC-V `.d`/`ld`/`sd`).
    pub wide: bool,
}

impl std::fmt::Display for MemOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.wide && !self.mn.ends_with(".d") && !matches!(self.mn.as_str(), "ld" | "sd") {
            write!(f, "{}.64", self.mn)
        } else {
            write!(f, "{}", self.mn)
        }
    }
}

/// One disassembled instruction.
#[derive(Clone, Debug)]
struct Insn {
    addr: u64,
    mn: String,
    ops: String,
}

/// Disassembles the named symbols of `rlib` (an archive: llvm-objdump reads every
/// member). Symbols that share one body (identical functions folded together) each get
/// that body. Returns, per symbol, its instructions.
fn disassemble(
    objdump: &Path,
    rlib: &Path,
    symbols: &[String],
) -> Result<BTreeMap<String, Vec<Insn>>, String> {
    let out = Command::new(objdump)
        .args(["-d", "--no-show-raw-insn"])
        .arg(format!("--disassemble-symbols={}", symbols.join(",")))
        .arg(rlib)
        .output()
        .map_err(|e| format!("{}: {e}", objdump.display()))?;
    if !out.status.success() {
        return Err(format!(
            "llvm-objdump failed on {}: {}",
            rlib.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut funcs: BTreeMap<String, Vec<Insn>> = BTreeMap::new();
    let mut current: Vec<String> = Vec::new();
    let mut body_started = false;
    for line in text.lines() {
        let t = line.trim();
        // A symbol: "0000000000000000 <name>:".
        if let Some((a, name)) = t.split_once(" <") {
            if let Some(name) = name.strip_suffix(">:") {
                if u64::from_str_radix(a, 16).is_ok() {
                    if body_started {
                        current.clear();
                    }
                    body_started = false;
                    current.push(name.to_string());
                    funcs.entry(name.to_string()).or_default();
                    continue;
                }
            }
        }
        if t.is_empty()
            || current.is_empty()
            || t.starts_with("Disassembly")
            || t.contains("file format")
        {
            continue;
        }
        // An instruction: "4:\tmnemonic\toperands".
        let Some((a, rest)) = t.split_once(':') else {
            continue;
        };
        let Ok(a) = u64::from_str_radix(a.trim(), 16) else {
            continue;
        };
        let rest = rest.trim();
        let rest = rest.split("//").next().unwrap_or("");
        let rest = rest.split(" @ ").next().unwrap_or("").trim();
        let (mn, ops) = match rest.split_once(char::is_whitespace) {
            Some((m, o)) => (m.trim().to_string(), o.trim().to_string()),
            None => (rest.to_string(), String::new()),
        };
        if mn.is_empty() {
            continue;
        }
        body_started = true;
        for name in &current {
            funcs.get_mut(name).unwrap().push(Insn {
                addr: a,
                mn: mn.clone(),
                ops: ops.clone(),
            });
        }
    }
    Ok(funcs)
}

/// The base register of a memory operand, if any: `[x0, #8]` -> `x0`, `0x0(a0)` -> `a0`.
fn base_of(arch: Arch, ops: &str) -> Option<String> {
    let inner = match arch {
        Arch::RiscV => ops.split_once('(')?.1.split(')').next()?,
        _ => ops.split_once('[')?.1.split(']').next()?,
    };
    Some(inner.split(',').next()?.trim().to_string())
}

const ARM_CONDS: &[&str] = &[
    "eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs", "vc", "hi", "ls", "ge", "lt", "gt", "le",
    "al",
];

/// Splits a Thumb mnemonic into its base and condition (`strls.w` -> `str`, `ls`).
fn arm_split(mn: &str) -> (String, Option<String>) {
    let mn = mn.trim_end_matches(".w").trim_end_matches(".n");
    const BASES: &[&str] = &[
        "ldrexb", "ldrexh", "ldrexd", "strexb", "strexh", "strexd", "ldrex", "strex", "ldrsb",
        "ldrsh", "ldrb", "ldrh", "ldrd", "strb", "strh", "strd", "clrex", "push", "pop", "ldr",
        "str", "dmb", "dsb", "ldm", "stm", "cbnz", "cbz", "bx", "bl", "b",
    ];
    for b in BASES {
        if let Some(rest) = mn.strip_prefix(b) {
            if rest.is_empty() {
                return (b.to_string(), None);
            }
            if ARM_CONDS.contains(&rest) {
                return (b.to_string(), Some(rest.to_string()));
            }
        }
    }
    (mn.to_string(), None)
}

/// The memory operation an instruction is, if it is one that concerns the litmus tests
/// (stack accesses and `clrex` are not).
fn mem_op(arch: Arch, i: &Insn) -> Option<MemOp> {
    let mn = i.mn.as_str();
    let base = base_of(arch, &i.ops);
    if base.as_deref() == Some("sp") {
        return None;
    }
    let first_reg = i.ops.split(',').next().unwrap_or("").trim().to_string();
    match arch {
        Arch::AArch64 => {
            let kind = if mn.starts_with("dmb") || mn == "dsb" {
                return Some(MemOp {
                    kind: Kind::Barrier,
                    mn: format!("dmb {}", i.ops.trim()),
                    wide: false,
                });
            } else if mn.starts_with("ldaxr") || mn.starts_with("ldxr") {
                Kind::LoadEx
            } else if mn.starts_with("stlxr") || mn.starts_with("stxr") {
                Kind::StoreEx
            } else if mn.starts_with("cas") {
                Kind::Cas
            } else if mn.starts_with("swp")
                || [
                    "ldadd", "ldclr", "ldeor", "ldset", "ldsmax", "ldsmin", "ldumax", "ldumin",
                ]
                .iter()
                .any(|p| mn.starts_with(p))
            {
                Kind::Amo
            } else if mn.starts_with("ld") && base.is_some() {
                Kind::Load
            } else if mn.starts_with("st") && base.is_some() {
                Kind::Store
            } else {
                return None;
            };
            // The data register: the second operand of a store-exclusive, else the first.
            let data = if kind == Kind::StoreEx {
                i.ops.split(',').nth(1).unwrap_or("").trim().to_string()
            } else {
                first_reg
            };
            Some(MemOp {
                kind,
                mn: mn.to_string(),
                wide: data.starts_with('x'),
            })
        }
        Arch::RiscV => {
            if mn == "fence" || mn == "fence.tso" {
                let ops: String = i.ops.chars().filter(|c| !c.is_whitespace()).collect();
                return Some(MemOp {
                    kind: Kind::Barrier,
                    mn: if mn == "fence" {
                        format!("fence {ops}")
                    } else {
                        mn.to_string()
                    },
                    wide: false,
                });
            }
            let kind = if mn.starts_with("lr.") {
                Kind::LoadEx
            } else if mn.starts_with("sc.") {
                Kind::StoreEx
            } else if mn.starts_with("amo") {
                Kind::Amo
            } else if ["lb", "lbu", "lh", "lhu", "lw", "lwu", "ld"].contains(&mn) {
                Kind::Load
            } else if ["sb", "sh", "sw", "sd"].contains(&mn) {
                Kind::Store
            } else {
                return None;
            };
            Some(MemOp {
                kind,
                mn: mn.to_string(),
                wide: mn.contains(".d") || mn == "ld" || mn == "sd",
            })
        }
        Arch::Arm => {
            let (b, _) = arm_split(mn);
            let kind = match b.as_str() {
                "dmb" | "dsb" => {
                    return Some(MemOp {
                        kind: Kind::Barrier,
                        mn: format!("dmb {}", i.ops.trim()),
                        wide: false,
                    })
                }
                "ldrex" | "ldrexb" | "ldrexh" | "ldrexd" => Kind::LoadEx,
                "strex" | "strexb" | "strexh" | "strexd" => Kind::StoreEx,
                "ldr" | "ldrb" | "ldrh" | "ldrd" | "ldrsb" | "ldrsh" => Kind::Load,
                "str" | "strb" | "strh" | "strd" => Kind::Store,
                _ => return None,
            };
            Some(MemOp {
                kind,
                mn: b,
                wide: false,
            })
        }
    }
}

/// How an instruction moves control.
enum Flow {
    Next,
    /// A conditional branch: falls through or goes to the address.
    Cond(u64),
    Jump(u64),
    Exit,
    /// A Thumb IT block: the condition pattern of the next instructions (`true` = then).
    It(Vec<bool>),
}

/// The last hexadecimal address among an instruction's operands.
fn target(ops: &str) -> Option<u64> {
    ops.split(|c: char| c == ',' || c.is_whitespace())
        .filter_map(|w| w.strip_prefix("0x"))
        .filter_map(|h| u64::from_str_radix(h, 16).ok())
        .next_back()
}

fn flow(arch: Arch, i: &Insn) -> Flow {
    let mn = i.mn.as_str();
    match arch {
        Arch::AArch64 => match mn {
            "ret" | "br" => Flow::Exit,
            "b" => target(&i.ops).map_or(Flow::Exit, Flow::Jump),
            "bl" | "blr" => Flow::Next,
            m if m.starts_with("b.") || ["cbz", "cbnz", "tbz", "tbnz"].contains(&m) => {
                target(&i.ops).map_or(Flow::Next, Flow::Cond)
            }
            _ => Flow::Next,
        },
        Arch::RiscV => match mn {
            "ret" | "jr" | "jalr" => Flow::Exit,
            "j" => target(&i.ops).map_or(Flow::Exit, Flow::Jump),
            "jal" | "call" | "tail" => {
                if i.ops.starts_with("ra") || mn == "call" {
                    Flow::Next
                } else {
                    Flow::Exit
                }
            }
            m if m.starts_with('b') => target(&i.ops).map_or(Flow::Next, Flow::Cond),
            _ => Flow::Next,
        },
        Arch::Arm => {
            if let Some(pat) = mn
                .strip_prefix('i')
                .filter(|p| !p.is_empty() && p.chars().all(|c| c == 't' || c == 'e'))
            {
                return Flow::It(pat.chars().map(|c| c == 't').collect());
            }
            let (b, cond) = arm_split(mn);
            let exit = (b == "bx" && i.ops.trim() == "lr") || (b == "pop" && i.ops.contains("pc"));
            match (b.as_str(), cond) {
                _ if exit => Flow::Exit,
                ("b", None) => target(&i.ops).map_or(Flow::Exit, Flow::Jump),
                ("b", Some(_)) | ("cbz", _) | ("cbnz", _) => {
                    target(&i.ops).map_or(Flow::Next, Flow::Cond)
                }
                _ => Flow::Next,
            }
        }
    }
}

/// Every path through `insns` from the entry to an exit (a return, a tail call, a
/// branch out of the function or to itself), each taken back edge ending the path
/// (retry loops are run once), as the memory operations along it. A load-exclusive
/// after a store-exclusive to the same address in one path is a loop's retry and is
/// left out.
fn paths(arch: Arch, insns: &[Insn]) -> Result<Vec<Vec<MemOp>>, String> {
    let index: BTreeMap<u64, usize> = insns.iter().enumerate().map(|(k, i)| (i.addr, k)).collect();
    let mut done: Vec<Vec<MemOp>> = Vec::new();
    // (next index, pending IT predicates, visited, ops, stores-exclusive bases)
    type State = (
        usize,
        Vec<bool>,
        BTreeSet<usize>,
        Vec<MemOp>,
        BTreeSet<String>,
    );
    let mut stack: Vec<State> = vec![(0, Vec::new(), BTreeSet::new(), Vec::new(), BTreeSet::new())];
    while let Some((k, mut pending, mut seen, mut ops, mut sc_bases)) = stack.pop() {
        if done.len() > 4096 {
            return Err("more than 4096 paths".into());
        }
        let Some(i) = insns.get(k) else {
            done.push(ops); // fell off the end
            continue;
        };
        if !seen.insert(k) {
            continue; // a back edge: a retry, run once already
        }
        let executes = if pending.is_empty() {
            true
        } else {
            pending.remove(0)
        };
        if !executes {
            stack.push((k + 1, pending, seen, ops, sc_bases));
            continue;
        }
        if let Some(op) = mem_op(arch, i) {
            let base = base_of(arch, &i.ops).unwrap_or_default();
            let retry = op.kind == Kind::LoadEx && sc_bases.contains(&base);
            if op.kind == Kind::StoreEx {
                sc_bases.insert(base);
            }
            if !retry {
                ops.push(op);
            }
        }
        let own = i.addr;
        let to = |a: u64| index.get(&a).copied().filter(|_| a != own);
        match flow(arch, i) {
            Flow::Next => stack.push((k + 1, pending, seen, ops, sc_bases)),
            Flow::Exit => done.push(ops),
            Flow::Jump(a) => match to(a) {
                Some(t) => stack.push((t, pending, seen, ops, sc_bases)),
                None => done.push(ops), // a tail call
            },
            Flow::Cond(a) => {
                match to(a) {
                    Some(t) => {
                        stack.push((t, Vec::new(), seen.clone(), ops.clone(), sc_bases.clone()))
                    }
                    None => done.push(ops.clone()),
                }
                stack.push((k + 1, pending, seen, ops, sc_bases));
            }
            Flow::It(pat) => {
                let other: Vec<bool> = pat.iter().map(|t| !t).collect();
                stack.push((k + 1, other, seen.clone(), ops.clone(), sc_bases.clone()));
                stack.push((k + 1, pat, seen, ops, sc_bases));
            }
        }
    }
    Ok(done)
}

/// The path the litmus tests model: the one with the most memory operations (the
/// read-modify-writes succeed, the comparisons match, conditional stores happen). Two
/// different paths of that length would make the choice ambiguous: an error.
fn main_path(arch: Arch, name: &str, insns: &[Insn]) -> Result<Vec<MemOp>, String> {
    let all = paths(arch, insns).map_err(|e| format!("{name}: {e}"))?;
    let most = all.iter().map(Vec::len).max().unwrap_or(0);
    let longest: Vec<&Vec<MemOp>> = all.iter().filter(|p| p.len() == most).collect();
    if longest.windows(2).any(|w| w[0] != w[1]) {
        let show: Vec<String> = longest.iter().map(|p| signature(p)).collect();
        return Err(format!(
            "{name}: its longest paths differ, which one is the fast path is ambiguous: {}",
            show.join(" | ")
        ));
    }
    Ok(longest.first().map(|p| (*p).clone()).unwrap_or_default())
}

/// A path as one line: `ldr ; stlr ; dmb ish`.
pub fn signature(ops: &[MemOp]) -> String {
    if ops.is_empty() {
        return "(no memory operation)".into();
    }
    ops.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ; ")
}

/// The fast paths of one build: each `rcuref_path_*` and `rcuref_twin_*` symbol's main
/// path (by its name without the prefix), and for each `rcuref_api_*` entry point every
/// path through it.
pub struct Extracted {
    pub paths: BTreeMap<String, Vec<MemOp>>,
    /// Every distinct path through each path function, the main one included: a branch
    /// that skips a barrier (a fence only at some depth, say) adds one, and the committed
    /// code file lists them all.
    pub all: BTreeMap<String, Vec<Vec<MemOp>>>,
    pub api: BTreeMap<String, Vec<Vec<MemOp>>>,
}

pub fn extract(
    arch: Arch,
    objdump: &Path,
    rlib: &Path,
    symbols: &[String],
) -> Result<Extracted, String> {
    let funcs = disassemble(objdump, rlib, symbols)?;
    let mut paths_out = BTreeMap::new();
    let mut all = BTreeMap::new();
    let mut api = BTreeMap::new();
    for s in symbols {
        // A symbol this target does not have (64-bit paths on 32-bit targets) is left
        // out; a path the spec needs and that is missing is reported by the caller.
        let Some(insns) = funcs.get(s).filter(|v| !v.is_empty()) else {
            continue;
        };
        if let Some(api_name) = s.strip_prefix("rcuref_api_") {
            api.insert(api_name.to_string(), paths(arch, insns)?);
        } else {
            let name = s
                .strip_prefix("rcuref_path_")
                .or_else(|| s.strip_prefix("rcuref_"))
                .unwrap_or(s)
                .to_string();
            paths_out.insert(name.clone(), main_path(arch, s, insns)?);
            let mut every = paths(arch, insns).map_err(|e| format!("{s}: {e}"))?;
            every.sort_by_key(|p| signature(p));
            every.dedup();
            all.insert(name.clone(), every);
        }
    }
    Ok(Extracted {
        paths: paths_out,
        all,
        api,
    })
}

/// A plain load or store (no acquire or release of its own): what an entry point may
/// do between the paths it inlines (load a field of the reader, the cell, the pool).
fn plain(op: &MemOp) -> bool {
    matches!(op.kind, Kind::Load | Kind::Store)
        && !["ldar", "ldapr", "stlr", "ldapur", "stlur"]
            .iter()
            .any(|p| op.mn.starts_with(p))
}

/// Whether `needle` occurs in `hay` in order, with nothing between its operations but
/// plain loads and stores (no barrier, no ordered access, no read-modify-write).
pub fn contains(hay: &[MemOp], needle: &[MemOp]) -> bool {
    if needle.is_empty() {
        return true;
    }
    (0..hay.len()).any(|start| {
        let mut k = 0;
        let mut i = start;
        while k < needle.len() && i < hay.len() {
            if hay[i] == needle[k] {
                k += 1;
            } else if !(k > 0 && plain(&hay[i])) {
                return false;
            }
            i += 1;
        }
        k == needle.len()
    })
}
