//! Does the object code of a path give each access the ordering the spec says the
//! source gives it? (The C11 tests are written from the spec, the assembly tests from
//! the object code: this is what keeps the two describing the same path.) Each
//! instruction set's mapping of C11 orderings, as LLVM implements it:
//!
//! * AArch64: acquire loads `LDAR` (`LDAPR` with RCpc, not for SeqCst), release stores
//!   `STLR`, read-modify-writes `LD(A)XR`/`ST(L)XR` or LSE's `A`/`L` suffixes, fences
//!   `DMB ISH` (`DMB ISHLD` for acquire).
//! * RISC-V: an acquire load is followed by `fence r,rw`, a SeqCst one also preceded by
//!   `fence rw,rw`; a release store is preceded by `fence rw,w`; AMOs and LR/SC carry
//!   `.aq`/`.rl`.
//! * Armv7-M: `DMB` after an acquire load, before a release store (and after a SeqCst
//!   one), before and after a read-modify-write as it releases and acquires.
//!
//! A barrier may serve two neighbouring accesses (LLVM merges adjacent ones).

use super::code::{Arch, Kind, MemOp};
use super::spec::{A, O};
use super::Config;

#[derive(Clone, Copy)]
enum Item {
    Ld(O),
    St(O),
    Rmw(O),
    Cas(O, O),
    Fence(O),
}

fn flatten(ops: &[A], out: &mut Vec<Item>) {
    for op in ops {
        match *op {
            A::Ld(_, _, o) => out.push(Item::Ld(o)),
            A::St(_, _, o) => out.push(Item::St(o)),
            A::Add(_, _, _, o) | A::Swap(_, _, _, o) => out.push(Item::Rmw(o)),
            A::Cas { o, fail, .. } => out.push(Item::Cas(o, fail)),
            A::Fence(o) => out.push(Item::Fence(o)),
            A::If(_, _, _, body) => flatten(body, out),
            A::Entered(..) | A::Plus(..) => {}
        }
    }
}

/// How strong a barrier is: (orders earlier loads, earlier stores, before later loads,
/// later stores), as pairs.
#[derive(Clone, Copy, Default)]
struct Orders {
    load_load: bool,
    load_store: bool,
    store_store: bool,
    store_load: bool,
}

fn strength(arch: Arch, b: &MemOp) -> Orders {
    let full = Orders {
        load_load: true,
        load_store: true,
        store_store: true,
        store_load: true,
    };
    match arch {
        Arch::AArch64 => match b.mn.as_str() {
            "dmb ish" | "dmb sy" | "dmb osh" => full,
            "dmb ishld" | "dmb ld" => Orders {
                load_load: true,
                load_store: true,
                ..Orders::default()
            },
            "dmb ishst" | "dmb st" => Orders {
                store_store: true,
                ..Orders::default()
            },
            _ => Orders::default(),
        },
        Arch::Arm => full,
        Arch::RiscV => {
            if b.mn == "fence.tso" {
                return Orders {
                    store_load: false,
                    ..full
                };
            }
            let Some((p, s)) = b.mn.strip_prefix("fence ").and_then(|f| f.split_once(',')) else {
                return Orders::default();
            };
            Orders {
                load_load: p.contains('r') && s.contains('r'),
                load_store: p.contains('r') && s.contains('w'),
                store_store: p.contains('w') && s.contains('w'),
                store_load: p.contains('w') && s.contains('r'),
            }
        }
    }
}

fn any(arch: Arch, bs: &[MemOp], want: impl Fn(Orders) -> bool) -> bool {
    bs.iter().any(|b| want(strength(arch, b)))
}

/// `mn` with a width or byte suffix removed, for AArch64 suffix checks (`ldaddalb` ->
/// `ldaddal`, `swpab` -> `swpa`).
fn stem(mn: &str) -> &str {
    let m = mn.trim_end_matches(['b', 'h']);
    if m.len() < mn.len()
        && (mn.starts_with("ld")
            || mn.starts_with("st")
            || mn.starts_with("swp")
            || mn.starts_with("cas"))
    {
        m
    } else {
        mn
    }
}

/// The acquire/release suffix of an AArch64 LSE instruction.
fn lse_suffix(mn: &str) -> (bool, bool) {
    let m = stem(mn);
    let base = [
        "ldadd", "ldclr", "ldeor", "ldset", "ldsmax", "ldsmin", "ldumax", "ldumin", "swp", "cas",
    ]
    .iter()
    .find(|b| m.starts_with(*b))
    .copied()
    .unwrap_or("");
    let suffix = &m[base.len()..];
    (suffix.contains('a'), suffix.contains('l'))
}

pub fn check(cfg: &Config, ops: &[A], elf: &[MemOp]) -> Result<(), String> {
    let arch = cfg.arch.expect("instruction sets only");
    let rcpc = cfg.name.contains("rcpc");
    let mut items = Vec::new();
    flatten(ops, &mut items);
    let accesses: Vec<usize> = elf
        .iter()
        .enumerate()
        .filter(|(_, o)| o.kind != Kind::Barrier)
        .map(|(i, _)| i)
        .collect();
    // The barriers strictly between two positions of `elf` (-1: the start).
    let between = |from: isize, to: usize| -> Vec<MemOp> {
        elf[((from + 1) as usize).min(to)..to]
            .iter()
            .filter(|o| o.kind == Kind::Barrier)
            .cloned()
            .collect()
    };
    let mut k = 0usize; // next access of `accesses`
    let mut last: isize = -1; // position of the last access consumed
    for item in items {
        let next_pos = |k: usize| accesses.get(k).copied().unwrap_or(elf.len());
        match item {
            Item::Fence(o) => {
                let bs = between(last, next_pos(k));
                let ok = match (arch, o) {
                    (_, O::Rlx) => true,
                    (Arch::AArch64, O::Acq) => any(arch, &bs, |s| s.load_load && s.load_store),
                    (Arch::RiscV, O::Acq) => any(arch, &bs, |s| s.load_load && s.load_store),
                    (Arch::RiscV, O::Rel) => any(arch, &bs, |s| s.load_store && s.store_store),
                    (Arch::RiscV, O::AcqRel) => {
                        any(arch, &bs, |s| s.load_load && s.load_store && s.store_store)
                    }
                    _ => any(arch, &bs, |s| {
                        s.load_load && s.load_store && s.store_store && s.store_load
                    }),
                };
                if !ok {
                    return Err(format!("no barrier for the {o:?} fence"));
                }
            }
            Item::Ld(o) | Item::St(o) => {
                let pos = *accesses
                    .get(k)
                    .ok_or("fewer accesses in the object code than in the spec")?;
                let m = &elf[pos];
                let before = between(last, pos);
                let after = between(pos as isize, next_pos(k + 1));
                let load = matches!(item, Item::Ld(_));
                if m.kind != if load { Kind::Load } else { Kind::Store } {
                    return Err(format!(
                        "`{m}` where the spec has a {}",
                        if load { "load" } else { "store" }
                    ));
                }
                let ok = match arch {
                    Arch::AArch64 => {
                        let s = stem(&m.mn);
                        match (load, o) {
                            (true, O::Rlx) => s == "ldr" || s == "ldur",
                            (true, O::Acq) => s == "ldar" || (rcpc && s == "ldapr"),
                            (true, _) => s == "ldar",
                            (false, O::Rlx) => s == "str" || s == "stur",
                            (false, _) => s == "stlr",
                        }
                    }
                    Arch::RiscV => match (load, o) {
                        (_, O::Rlx) => true,
                        (true, O::Acq) => any(arch, &after, |s| s.load_load && s.load_store),
                        (true, _) => {
                            any(arch, &after, |s| s.load_load && s.load_store)
                                && any(arch, &before, |s| s.store_load && s.load_load)
                        }
                        (false, _) => any(arch, &before, |s| s.load_store && s.store_store),
                    },
                    Arch::Arm => match (load, o) {
                        (_, O::Rlx) => true,
                        (true, _) => !after.is_empty(),
                        (false, O::Sc) => !before.is_empty() && !after.is_empty(),
                        (false, _) => !before.is_empty(),
                    },
                };
                if !ok {
                    return Err(format!(
                        "`{m}` is not a {o:?} {} on this instruction set",
                        if load { "load" } else { "store" }
                    ));
                }
                last = pos as isize;
                k += 1;
            }
            Item::Rmw(o) | Item::Cas(o, _) => {
                let fail = if let Item::Cas(_, f) = item {
                    Some(f)
                } else {
                    None
                };
                let acq = o.acquires() || fail.is_some_and(O::acquires);
                let rel = o.releases();
                let pos = *accesses
                    .get(k)
                    .ok_or("fewer accesses in the object code than in the spec")?;
                let m = &elf[pos];
                let before = between(last, pos);
                let (end, ok) = match m.kind {
                    Kind::Amo | Kind::Cas => {
                        let after = between(pos as isize, next_pos(k + 1));
                        let ok = match arch {
                            Arch::AArch64 => lse_suffix(&m.mn) == (acq, rel),
                            Arch::RiscV => {
                                (m.mn.contains(".aq"), m.mn.contains("rl")) == (acq, rel)
                                    // SeqCst: RISC-V's mapping is .aqrl
                                    || (o == O::Sc && m.mn.ends_with(".aqrl"))
                            }
                            Arch::Arm => false,
                        };
                        let _ = after;
                        (pos, ok)
                    }
                    Kind::LoadEx => {
                        let sc_pos = *accesses
                            .get(k + 1)
                            .ok_or("a load-exclusive with no store-exclusive")?;
                        let sc = &elf[sc_pos];
                        if sc.kind != Kind::StoreEx {
                            return Err(format!("`{m}` followed by `{sc}`"));
                        }
                        let inside = between(pos as isize, sc_pos);
                        let after = between(sc_pos as isize, next_pos(k + 2));
                        let ok = match arch {
                            Arch::AArch64 => {
                                (
                                    stem(&m.mn).starts_with("ldax"),
                                    stem(&sc.mn).starts_with("stlx"),
                                ) == (acq, rel)
                            }
                            Arch::RiscV => {
                                let lr_aq = m.mn.contains(".aq");
                                let sc_rl = sc.mn.contains(".rl");
                                lr_aq == acq && sc_rl == rel
                            }
                            Arch::Arm => {
                                let released = !before.is_empty() || !inside.is_empty();
                                let acquired = !after.is_empty();
                                (!rel || released) && (!acq || acquired)
                            }
                        };
                        (sc_pos, ok)
                    }
                    _ => return Err(format!("`{m}` where the spec has a read-modify-write")),
                };
                if !ok {
                    return Err(format!(
                        "`{m}` is not a {o:?} read-modify-write on this instruction set"
                    ));
                }
                k += if end == pos { 1 } else { 2 };
                last = end as isize;
            }
        }
    }
    if k != accesses.len() {
        return Err(format!(
            "{} accesses in the object code, {k} in the spec",
            accesses.len()
        ));
    }
    Ok(())
}
