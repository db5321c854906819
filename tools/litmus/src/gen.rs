//! Writes the litmus tests: C11 from the paths' abstract operations, and for every
//! instruction set the assembly made of each path's instructions as the compiler emitted
//! them for that target (the memory instructions and barriers read from the object
//! code, with the test's locations and values in the registers).

use super::code::{Kind, MemOp};
use super::spec::{self, Arg, At, Cmp, Test, Twin, A, I, O, V};
use super::Config;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One thread's code being written.
struct Thread<'a> {
    cfg: &'a Config,
    sigs: Option<&'a BTreeMap<String, Vec<MemOp>>>,
    twin: Option<&'a Twin>,
    index: usize,
    lines: Vec<String>,
    /// Thread register names -> the register (asm) or variable (C) holding them.
    regs: BTreeMap<String, String>,
    /// Locations -> their base register (asm).
    bases: BTreeMap<String, String>,
    next: usize,
    calls: usize,
    labels: usize,
    /// Conjuncts the outcome must also meet: store-exclusives of read-modify-writes
    /// that cannot fail in the real code (it retries them) succeeded.
    extra: Vec<String>,
    /// C11: per-exchange cells holding the expected value (plain, this thread's only).
    cells: Vec<String>,
    /// Asm: registers free for temporaries, and the temporaries of each open frame (a
    /// call, or a step outside calls), given back when it ends (Armv7 has 13 registers).
    pool: Vec<String>,
    frames: Vec<Vec<String>>,
    temps: usize,
    /// Calls of each path so far (for a twin's `drops`).
    seen: BTreeMap<&'static str, usize>,
}

/// A path's parameters bound for one call: to a location, a thread register, an
/// immediate, or (unbound) a temporary of the call.
struct Binding<'b> {
    args: &'b [(&'static str, Arg)],
    call: usize,
}

impl Binding<'_> {
    fn get(&self, p: &str) -> Arg {
        self.args
            .iter()
            .find(|(n, _)| *n == p)
            .map(|(_, a)| *a)
            .unwrap_or(Arg::R(""))
    }
    fn loc(&self, p: &str) -> Result<&'static str, String> {
        match self.get(p) {
            Arg::L(l) => Ok(l),
            _ => Err(format!("parameter {p} must be bound to a location")),
        }
    }
    /// The thread register a value parameter names (a temporary when unbound).
    fn reg(&self, p: &str) -> String {
        match self.get(p) {
            Arg::R(r) if !r.is_empty() => r.to_string(),
            _ => format!("t{}_{p}", self.call),
        }
    }
    fn val(&self, v: V) -> Val {
        match v {
            V::Imm(k) => Val::Imm(k),
            V::P(p) => match self.get(p) {
                Arg::K(k) => Val::Imm(k),
                _ => Val::Reg(self.reg(p)),
            },
        }
    }
}

#[derive(Clone, Debug)]
enum Val {
    Imm(i64),
    Reg(String),
}

/// Applies a twin's swaps to a path name.
fn swapped(twin: Option<&Twin>, path: &'static str) -> &'static str {
    twin.and_then(|t| {
        t.swaps
            .iter()
            .find(|(from, _)| *from == path)
            .map(|(_, to)| *to)
    })
    .unwrap_or(path)
}

impl<'a> Thread<'a> {
    fn new(
        cfg: &'a Config,
        sigs: Option<&'a BTreeMap<String, Vec<MemOp>>>,
        twin: Option<&'a Twin>,
        index: usize,
    ) -> Self {
        Thread {
            cfg,
            sigs,
            twin,
            index,
            lines: Vec::new(),
            regs: BTreeMap::new(),
            bases: BTreeMap::new(),
            next: 0,
            calls: 0,
            labels: 0,
            extra: Vec::new(),
            cells: Vec::new(),
            pool: Vec::new(),
            frames: Vec::new(),
            temps: 0,
            seen: BTreeMap::new(),
        }
    }

    /// Opens a frame of temporaries.
    fn open(&mut self) {
        self.frames.push(Vec::new());
    }

    /// Closes the innermost frame: its temporaries' registers are free again.
    fn close(&mut self) {
        for name in self.frames.pop().unwrap_or_default() {
            if let Some(r) = self.regs.remove(&name) {
                self.pool.push(r);
            }
        }
    }

    /// A temporary register (asm), given back when the innermost frame closes.
    fn temp(&mut self) -> String {
        self.temps += 1;
        let n = format!("~{}", self.temps);
        self.temp_named(&n)
    }

    fn temp_named(&mut self, name: &str) -> String {
        let r = match self.pool.pop() {
            Some(r) => r,
            None => self.fresh(),
        };
        self.regs.insert(name.to_string(), r.clone());
        if let Some(f) = self.frames.last_mut() {
            f.push(name.to_string());
        }
        r
    }

    fn c11(&self) -> bool {
        self.cfg.arch.is_none()
    }

    fn emit(&mut self, s: impl Into<String>) {
        self.lines.push(s.into());
    }

    fn label(&mut self) -> String {
        self.labels += 1;
        format!("L{}x{}", self.index, self.labels)
    }

    /// A fresh register (asm): the instruction set's numbering.
    fn fresh(&mut self) -> String {
        use super::code::Arch::*;
        let n = self.next;
        self.next += 1;
        match self.cfg.arch.expect("asm only") {
            AArch64 => format!("{}", n),
            RiscV => format!("x{}", n + 5),
            // herd7's Armv7 takes R0-R12, SP and LR as registers.
            Arm => match n {
                0..=12 => format!("R{n}"),
                13 => "SP".to_string(),
                14 => "LR".to_string(),
                _ => format!("R{n}"), // herd7 refuses it: the test needs fewer registers
            },
        }
    }

    /// The register (asm) or variable (C) of a thread register name.
    fn r(&mut self, name: &str) -> String {
        if let Some(r) = self.regs.get(name) {
            return r.clone();
        }
        if !self.c11()
            && name.starts_with('t')
            && name[1..].starts_with(|c: char| c.is_ascii_digit())
        {
            return self.temp_named(name);
        }
        let r = if self.c11() {
            name.to_string()
        } else {
            self.fresh()
        };
        self.regs.insert(name.to_string(), r.clone());
        r
    }

    fn base(&mut self, loc: &str) -> String {
        if let Some(b) = self.bases.get(loc) {
            return b.clone();
        }
        let b = self.fresh();
        self.bases.insert(loc.to_string(), b.clone());
        b
    }

    /// AArch64 register text for register number `n`.
    fn a64(n: &str, wide: bool) -> String {
        format!("{}{n}", if wide { 'X' } else { 'W' })
    }

    /// A register holding `v` (asm): the value's own register, or a fresh one loaded
    /// with the immediate.
    fn in_reg(&mut self, v: &Val, wide: bool) -> String {
        use super::code::Arch::*;
        match v {
            Val::Reg(name) => self.r(name),
            Val::Imm(k) => {
                let r = self.temp();
                match self.cfg.arch.unwrap() {
                    AArch64 => self.emit(format!("MOV {},#{k}", Self::a64(&r, wide))),
                    RiscV => self.emit(format!("li {r},{k}")),
                    Arm => self.emit(format!("MOV {r},#{k}")),
                }
                r
            }
        }
    }

    /// Branches to `label` unless `reg <cmp> v` (asm).
    fn branch_unless(&mut self, reg: &str, cmp: Cmp, v: &Val, label: &str) {
        use super::code::Arch::*;
        let a = self.r(reg);
        let skip_if_equal = cmp == Cmp::Ne;
        let imm = match v {
            Val::Imm(k) if *k >= 0 && *k < 256 => Some(*k),
            _ => None,
        };
        match self.cfg.arch.unwrap() {
            AArch64 => {
                match imm {
                    Some(k) => self.emit(format!("CMP W{a},#{k}")),
                    None => {
                        let b = self.in_reg(v, false);
                        self.emit(format!("CMP W{a},W{b}"));
                    }
                }
                self.emit(format!(
                    "{} {label}",
                    if skip_if_equal { "B.EQ" } else { "B.NE" }
                ));
            }
            RiscV => {
                let b = if imm == Some(0) {
                    "x0".to_string()
                } else {
                    self.in_reg(v, false)
                };
                self.emit(format!(
                    "{} {a},{b},{label}",
                    if skip_if_equal { "beq" } else { "bne" }
                ));
            }
            Arm => {
                match imm {
                    Some(k) => self.emit(format!("CMP {a},#{k}")),
                    None => {
                        let b = self.in_reg(v, false);
                        self.emit(format!("CMP {a},{b}"));
                    }
                }
                self.emit(format!(
                    "{} {label}",
                    if skip_if_equal { "BEQ" } else { "BNE" }
                ));
            }
        }
    }

    fn mo(o: O) -> &'static str {
        match o {
            O::Rlx => "memory_order_relaxed",
            O::Acq => "memory_order_acquire",
            O::Rel => "memory_order_release",
            O::AcqRel => "memory_order_acq_rel",
            O::Sc => "memory_order_seq_cst",
        }
    }

    fn cval(&mut self, v: &Val) -> String {
        match v {
            Val::Imm(k) => k.to_string(),
            Val::Reg(n) => self.r(n),
        }
    }

    // ---- the thread's steps -------------------------------------------------------

    fn items(&mut self, items: &[I]) -> Result<(), String> {
        for it in items {
            self.open();
            let r = self.item(it);
            self.close();
            r?;
        }
        Ok(())
    }

    fn item(&mut self, it: &I) -> Result<(), String> {
        match *it {
            I::Call(path, args) => self.call(path, args, None),
            I::Irq(path, args, at, handler) => self.call(path, args, Some((at, handler))),
            I::Load(loc, dst) => {
                let d = self.r(dst);
                if self.c11() {
                    self.emit(format!("{d} = *{loc};"));
                } else {
                    let b = self.base(loc);
                    self.plain(Kind::Load, &d, &b);
                }
                Ok(())
            }
            I::Store(loc, v) => {
                let v = match v {
                    Arg::K(k) => Val::Imm(k),
                    Arg::R(r) => Val::Reg(r.to_string()),
                    Arg::L(_) => return Err("a store of a location".into()),
                };
                if self.c11() {
                    let v = self.cval(&v);
                    self.emit(format!("STORE {loc} {v}")); // resolved when the thread is written
                } else {
                    let r = self.in_reg(&v, false);
                    let b = self.base(loc);
                    self.plain(Kind::Store, &r, &b);
                }
                Ok(())
            }
            I::If(reg, cmp, k, body) => {
                if self.c11() {
                    let r = self.r(reg);
                    self.emit(format!(
                        "if ({r} {} {k}) {{",
                        if cmp == Cmp::Eq { "==" } else { "!=" }
                    ));
                    self.items(body)?;
                    self.emit("}");
                } else {
                    let l = self.label();
                    self.branch_unless(reg, cmp, &Val::Imm(k), &l);
                    self.items(body)?;
                    self.emit(format!("{l}:"));
                }
                Ok(())
            }
        }
    }

    /// A plain load or store of 32 bits (asm).
    fn plain(&mut self, kind: Kind, r: &str, b: &str) {
        use super::code::Arch::*;
        let (l, s) = (kind == Kind::Load, kind == Kind::Store);
        debug_assert!(l || s);
        match self.cfg.arch.unwrap() {
            AArch64 => self.emit(format!("{} W{r},[X{b}]", if l { "LDR" } else { "STR" })),
            RiscV => self.emit(format!("{} {r},0({b})", if l { "lw" } else { "sw" })),
            Arm => self.emit(format!("{} {r},[{b}]", if l { "LDR" } else { "STR" })),
        }
    }

    /// Whether this call of `path` is left out by the twin (counting the thread's calls
    /// of that path).
    fn dropped(&mut self, path: &'static str) -> bool {
        let n = self.seen.entry(path).or_insert(0);
        *n += 1;
        let n = *n;
        self.twin.is_some_and(|t| {
            t.drops
                .iter()
                .any(|&(th, p, k)| th == self.index && p == path && (k == 0 || k == n))
        })
    }

    fn call(
        &mut self,
        path: &'static str,
        args: &'static [(&'static str, Arg)],
        irq: Option<(At, &'static [I])>,
    ) -> Result<(), String> {
        let path = swapped(self.twin, path);
        if self.dropped(path) {
            if let Some((_, h)) = irq {
                self.items(h)?; // the handler still runs where the call would have been
            }
            return Ok(());
        }
        let ops = spec::path(path).ok_or_else(|| format!("no path {path} in the spec"))?;
        self.calls += 1;
        let b = Binding {
            args,
            call: self.calls,
        };
        if self.c11() {
            let mut accesses = 0;
            self.c11_ops(ops, &b, irq, &mut accesses)?;
            if let Some((At::End, h)) = irq {
                self.items(h)?;
            }
            return Ok(());
        }
        let sigs = self.sigs.ok_or("no signatures for an instruction set")?;
        let elf = sigs
            .get(path)
            .ok_or_else(|| format!("{}: no object code for path {path}", self.cfg.name))?
            .clone();
        let mut pos = 0;
        let mut accesses = 0;
        self.asm_ops(path, ops, &b, &elf, &mut pos, irq, &mut accesses)?;
        // Barriers after the last access.
        while pos < elf.len() {
            let op = elf[pos].clone();
            if op.kind != Kind::Barrier {
                return Err(format!(
                    "{}: path {path}: the object code has more memory accesses than the spec ({})",
                    self.cfg.name,
                    super::code::signature(&elf)
                ));
            }
            self.barrier(&op);
            pos += 1;
        }
        if let Some((At::End, h)) = irq {
            self.items(h)?;
        }
        Ok(())
    }

    // ---- C11 -----------------------------------------------------------------------

    fn c11_ops(
        &mut self,
        ops: &[A],
        b: &Binding<'_>,
        irq: Option<(At, &'static [I])>,
        accesses: &mut usize,
    ) -> Result<(), String> {
        for op in ops {
            let is_access = matches!(
                op,
                A::Ld(..) | A::St(..) | A::Add(..) | A::Swap(..) | A::Cas { .. }
            );
            match *op {
                A::Ld(loc, dst, o) => {
                    let l = b.loc(loc)?;
                    let d = self.r(&b.reg(dst));
                    self.emit(format!("{d} = atomic_load_explicit({l}, {});", Self::mo(o)));
                }
                A::St(loc, v, o) => {
                    let l = b.loc(loc)?;
                    let v = self.cval(&b.val(v));
                    self.emit(format!("atomic_store_explicit({l}, {v}, {});", Self::mo(o)));
                }
                A::Add(loc, k, dst, o) => {
                    let l = b.loc(loc)?;
                    let d = self.r(&b.reg(dst));
                    self.emit(format!(
                        "{d} = atomic_fetch_add_explicit({l}, {k}, {});",
                        Self::mo(o)
                    ));
                }
                A::Swap(loc, v, dst, o) => {
                    let l = b.loc(loc)?;
                    let v = self.cval(&b.val(v));
                    let d = self.r(&b.reg(dst));
                    self.emit(format!(
                        "{d} = atomic_exchange_explicit({l}, {v}, {});",
                        Self::mo(o)
                    ));
                }
                A::Cas {
                    loc,
                    expect,
                    new,
                    old,
                    ok,
                    o,
                    fail,
                } => {
                    let l = b.loc(loc)?;
                    let e = self.cval(&b.val(expect));
                    let n = self.cval(&b.val(new));
                    let cell = format!("cas{}x{}", self.index, self.cells.len());
                    self.cells.push(cell.clone());
                    let okr = self.r(&b.reg(ok));
                    let oldr = self.r(&b.reg(old));
                    self.emit(format!("*{cell} = {e};"));
                    self.emit(format!(
                        "{okr} = atomic_compare_exchange_strong_explicit({l}, {cell}, {n}, {}, {});",
                        Self::mo(o),
                        Self::mo(fail)
                    ));
                    self.emit(format!("{oldr} = *{cell};"));
                }
                A::Fence(o) => self.emit(format!("atomic_thread_fence({});", Self::mo(o))),
                A::Entered(dst, p) => {
                    let d = self.r(&b.reg(dst));
                    let p = self.r(&b.reg(p));
                    self.emit(format!("{d} = {p} + {p} + 5;"));
                }
                A::Plus(dst, src, k) => {
                    let d = self.r(&b.reg(dst));
                    let s = self.cval(&b.val(V::P(src)));
                    self.emit(format!("{d} = {s} + {k};"));
                }
                A::If(reg, cmp, v, body) => {
                    let r = self.r(&b.reg(reg));
                    let v = self.cval(&b.val(v));
                    self.emit(format!(
                        "if ({r} {} {v}) {{",
                        if cmp == Cmp::Eq { "==" } else { "!=" }
                    ));
                    self.c11_ops(body, b, irq, accesses)?;
                    self.emit("}");
                }
            }
            if is_access {
                *accesses += 1;
                if let Some((At::Access(n), h)) = irq {
                    if n == *accesses {
                        self.items(h)?;
                    }
                }
            }
        }
        Ok(())
    }

    // ---- assembly ------------------------------------------------------------------

    fn barrier(&mut self, op: &MemOp) {
        use super::code::Arch::*;
        match self.cfg.arch.unwrap() {
            AArch64 => self.emit(op.mn.to_uppercase()),
            RiscV => self.emit(op.mn.clone()),
            Arm => self.emit("DMB"),
        }
    }

    /// Emits the barriers at `elf[pos..]` up to the next access, and returns that access.
    fn next_access(&mut self, path: &str, elf: &[MemOp], pos: &mut usize) -> Result<MemOp, String> {
        while *pos < elf.len() && elf[*pos].kind == Kind::Barrier {
            let op = elf[*pos].clone();
            self.barrier(&op);
            *pos += 1;
        }
        let op = elf.get(*pos).cloned().ok_or_else(|| {
            format!(
                "{}: path {path}: the spec has more memory accesses than the object code ({})",
                self.cfg.name,
                super::code::signature(elf)
            )
        })?;
        *pos += 1;
        Ok(op)
    }

    /// The herd7 spelling of an instruction's mnemonic: upper case on Arm, `.aq.rl` on
    /// RISC-V, and byte or halfword accesses as word accesses (each test location is a
    /// word; the orderings are the instruction's).
    fn herd_mn(&self, op: &MemOp) -> String {
        use super::code::Arch::*;
        match self.cfg.arch.unwrap() {
            AArch64 => {
                let m = op.mn.as_str();
                let m = if (m.len() > 3)
                    && (m.ends_with('b') || m.ends_with('h'))
                    && !m.starts_with("ldr")
                    && !m.starts_with("str")
                {
                    &m[..m.len() - 1]
                } else if m == "ldrb" || m == "ldrh" {
                    "ldr"
                } else if m == "strb" || m == "strh" {
                    "str"
                } else {
                    m
                };
                m.to_uppercase()
            }
            RiscV => {
                let m = op.mn.replace(".aqrl", ".aq.rl");
                match m.as_str() {
                    "lb" | "lbu" | "lh" | "lhu" => "lw".to_string(),
                    "sb" | "sh" => "sw".to_string(),
                    _ => m,
                }
            }
            Arm => {
                let m = op.mn.trim_end_matches(['b', 'h', 'd']);
                let m = if m == "ldrex" || m == "strex" || m == "ldr" || m == "str" {
                    m
                } else {
                    op.mn.as_str()
                };
                m.to_uppercase()
            }
        }
    }

    /// A data register of the access's width (AArch64 `W`/`X`; others as they are).
    fn data(&self, r: &str, wide: bool) -> String {
        match self.cfg.arch.unwrap() {
            super::code::Arch::AArch64 => Self::a64(r, wide),
            _ => r.to_string(),
        }
    }

    fn base_text(&self, b: &str) -> String {
        use super::code::Arch::*;
        match self.cfg.arch.unwrap() {
            AArch64 => format!("[X{b}]"),
            RiscV => format!("0({b})"),
            Arm => format!("[{b}]"),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn asm_ops(
        &mut self,
        path: &str,
        ops: &[A],
        b: &Binding<'_>,
        elf: &[MemOp],
        pos: &mut usize,
        irq: Option<(At, &'static [I])>,
        accesses: &mut usize,
    ) -> Result<(), String> {
        use super::code::Arch::*;
        let arch = self.cfg.arch.unwrap();
        for op in ops {
            let mut is_access = true;
            match *op {
                A::Ld(loc, dst, _) => {
                    let m = self.next_access(path, elf, pos)?;
                    expect(path, &m, &[Kind::Load])?;
                    let l = b.loc(loc)?;
                    let base = self.base(l);
                    let d = self.r(&b.reg(dst));
                    let (mn, d, bt) = (
                        self.herd_mn(&m),
                        self.data(&d, m.wide),
                        self.base_text(&base),
                    );
                    self.emit(format!("{mn} {d},{bt}"));
                }
                A::St(loc, v, _) => {
                    let m = self.next_access(path, elf, pos)?;
                    expect(path, &m, &[Kind::Store])?;
                    let l = b.loc(loc)?;
                    let r = self.in_reg(&b.val(v), m.wide);
                    let base = self.base(l);
                    let (mn, r, bt) = (
                        self.herd_mn(&m),
                        self.data(&r, m.wide),
                        self.base_text(&base),
                    );
                    self.emit(format!("{mn} {r},{bt}"));
                }
                A::Add(loc, k, dst, _) => self.rmw(path, b, elf, pos, loc, Rmw::Add(k), dst)?,
                A::Swap(loc, v, dst, _) => {
                    self.rmw(path, b, elf, pos, loc, Rmw::Swap(b.val(v)), dst)?
                }
                A::Cas {
                    loc,
                    expect: e,
                    new,
                    old,
                    ok,
                    ..
                } => {
                    let l = b.loc(loc)?;
                    let base = self.base(l);
                    let m = self.next_access(path, elf, pos)?;
                    let okr = self.r(&b.reg(ok));
                    let oldr = self.r(&b.reg(old));
                    let fail = self.label();
                    let bt = self.base_text(&base);
                    if m.kind == Kind::Cas {
                        // AArch64 LSE: CAS{A,L,AL} Ws,Wt,[Xn] with Ws the expected value in,
                        // the old value out.
                        let er = self.in_reg(&b.val(e), m.wide);
                        let nr = self.in_reg(&b.val(new), m.wide);
                        let mn = self.herd_mn(&m);
                        self.emit(format!(
                            "MOV {},{}",
                            Self::a64(&oldr, m.wide),
                            Self::a64(&er, m.wide)
                        ));
                        self.emit(format!(
                            "{mn} {},{},{bt}",
                            Self::a64(&oldr, m.wide),
                            Self::a64(&nr, m.wide)
                        ));
                        self.emit(format!(
                            "CMP {},{}",
                            Self::a64(&oldr, m.wide),
                            Self::a64(&er, m.wide)
                        ));
                        self.emit(format!("B.NE {fail}"));
                        self.emit(format!("MOV W{okr},#1"));
                        self.emit(format!("{fail}:"));
                    } else {
                        expect(path, &m, &[Kind::LoadEx])?;
                        let er = self.in_reg(&b.val(e), m.wide);
                        let ll = self.herd_mn(&m);
                        self.emit(format!("{ll} {},{bt}", self.data(&oldr, m.wide)));
                        match arch {
                            AArch64 => {
                                self.emit(format!(
                                    "CMP {},{}",
                                    Self::a64(&oldr, m.wide),
                                    Self::a64(&er, m.wide)
                                ));
                                self.emit(format!("B.NE {fail}"));
                            }
                            RiscV => self.emit(format!("bne {oldr},{er},{fail}")),
                            Arm => {
                                self.emit(format!("CMP {oldr},{er}"));
                                self.emit(format!("BNE {fail}"));
                            }
                        }
                        let sc = self.next_access(path, elf, pos)?;
                        expect(path, &sc, &[Kind::StoreEx])?;
                        let nr = self.in_reg(&b.val(new), m.wide);
                        let st = self.temp();
                        let scm = self.herd_mn(&sc);
                        match arch {
                            AArch64 => {
                                self.emit(format!("{scm} W{st},{},{bt}", Self::a64(&nr, m.wide)));
                                self.emit(format!("CBNZ W{st},{fail}"));
                                self.emit(format!("MOV W{okr},#1"));
                            }
                            RiscV => {
                                self.emit(format!("{scm} {st},{nr},{bt}"));
                                self.emit(format!("bne {st},x0,{fail}"));
                                self.emit(format!("li {okr},1"));
                            }
                            Arm => {
                                self.emit(format!("{scm} {st},{nr},{bt}"));
                                self.emit(format!("CMP {st},#0"));
                                self.emit(format!("BNE {fail}"));
                                self.emit(format!("MOV {okr},#1"));
                            }
                        }
                        self.emit(format!("{fail}:"));
                    }
                }
                A::Fence(_) => is_access = false, // its barrier comes from the object code
                A::Entered(dst, p) => {
                    is_access = false;
                    let d = self.r(&b.reg(dst));
                    let p = self.r(&b.reg(p));
                    match arch {
                        AArch64 => {
                            self.emit(format!("ADD W{d},W{p},W{p}"));
                            self.emit(format!("ADD W{d},W{d},#5"));
                        }
                        RiscV => {
                            self.emit(format!("add {d},{p},{p}"));
                            self.emit(format!("addi {d},{d},5"));
                        }
                        Arm => {
                            self.emit(format!("ADD {d},{p},{p}"));
                            self.emit(format!("ADD {d},{d},#5"));
                        }
                    }
                }
                A::Plus(dst, src, k) => {
                    is_access = false;
                    let d = self.r(&b.reg(dst));
                    let s = self.in_reg(&b.val(V::P(src)), false);
                    match arch {
                        AArch64 => self.emit(format!("ADD W{d},W{s},#{k}")),
                        RiscV => self.emit(format!("addi {d},{s},{k}")),
                        Arm => self.emit(format!("ADD {d},{s},#{k}")),
                    }
                }
                A::If(_, _, _, body) if !has_access(body) => {
                    // Only a fence (its barrier comes from the object code): no branch.
                    is_access = false;
                }
                A::If(reg, cmp, v, body) => {
                    is_access = false;
                    let l = self.label();
                    let r = b.reg(reg);
                    self.branch_unless(&r, cmp, &b.val(v), &l);
                    self.asm_ops(path, body, b, elf, pos, irq, accesses)?;
                    self.emit(format!("{l}:"));
                }
            }
            if is_access {
                *accesses += 1;
                if let Some((At::Access(n), h)) = irq {
                    if n == *accesses {
                        self.items(h)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A fetch-add or swap: one instruction (LSE, RISC-V AMO) or a load-exclusive and a
    /// store-exclusive (whose success the outcome then requires: the real code retries).
    #[allow(clippy::too_many_arguments)]
    fn rmw(
        &mut self,
        path: &str,
        b: &Binding<'_>,
        elf: &[MemOp],
        pos: &mut usize,
        loc: &str,
        what: Rmw,
        dst: &str,
    ) -> Result<(), String> {
        use super::code::Arch::*;
        let arch = self.cfg.arch.unwrap();
        let l = b.loc(loc)?;
        let base = self.base(l);
        let bt = self.base_text(&base);
        let m = self.next_access(path, elf, pos)?;
        let old = self.r(&b.reg(dst));
        match m.kind {
            Kind::Amo => {
                let mn = self.herd_mn(&m);
                let operand = match &what {
                    Rmw::Add(k) => self.in_reg(&Val::Imm(*k), m.wide),
                    Rmw::Swap(v) => self.in_reg(v, m.wide),
                };
                match arch {
                    AArch64 => self.emit(format!(
                        "{mn} {},{},{bt}",
                        Self::a64(&operand, m.wide),
                        Self::a64(&old, m.wide)
                    )),
                    RiscV => self.emit(format!("{mn} {old},{operand},({base})")),
                    Arm => return Err(format!("{path}: an AMO on Arm")),
                }
            }
            Kind::LoadEx => {
                let ll = self.herd_mn(&m);
                self.emit(format!("{ll} {},{bt}", self.data(&old, m.wide)));
                let newv = match &what {
                    Rmw::Add(k) => {
                        let t = self.temp();
                        match arch {
                            AArch64 if *k >= 0 => self.emit(format!(
                                "ADD {},{},#{k}",
                                Self::a64(&t, m.wide),
                                Self::a64(&old, m.wide)
                            )),
                            AArch64 => self.emit(format!(
                                "SUB {},{},#{}",
                                Self::a64(&t, m.wide),
                                Self::a64(&old, m.wide),
                                -k
                            )),
                            RiscV => self.emit(format!("addi {t},{old},{k}")),
                            Arm if *k >= 0 => self.emit(format!("ADD {t},{old},#{k}")),
                            Arm => self.emit(format!("SUB {t},{old},#{}", -k)),
                        }
                        t
                    }
                    Rmw::Swap(v) => self.in_reg(v, m.wide),
                };
                let sc = self.next_access(path, elf, pos)?;
                expect(path, &sc, &[Kind::StoreEx])?;
                let st = self.fresh();
                let scm = self.herd_mn(&sc);
                match arch {
                    AArch64 => self.emit(format!("{scm} W{st},{},{bt}", Self::a64(&newv, m.wide))),
                    RiscV => self.emit(format!("{scm} {st},{newv},{bt}")),
                    Arm => self.emit(format!("{scm} {st},{newv},{bt}")),
                }
                let cond_reg = match arch {
                    AArch64 => format!("X{st}"),
                    _ => st,
                };
                self.extra.push(format!("{}:{cond_reg}=0", self.index));
            }
            _ => {
                return Err(format!(
                    "{}: path {path}: a read-modify-write compiled to `{m}`",
                    self.cfg.name
                ))
            }
        }
        Ok(())
    }
}

fn has_access(ops: &[A]) -> bool {
    ops.iter().any(|o| match o {
        A::If(_, _, _, b) => has_access(b),
        A::Fence(_) | A::Entered(..) | A::Plus(..) => false,
        _ => true,
    })
}

enum Rmw {
    Add(i64),
    Swap(Val),
}

fn expect(path: &str, m: &MemOp, kinds: &[Kind]) -> Result<(), String> {
    if kinds.contains(&m.kind) {
        Ok(())
    } else {
        Err(format!(
            "path {path}: expected {kinds:?} in the object code, found `{m}`"
        ))
    }
}

/// Whether a twin applies to a configuration.
pub fn applies(twin: &Twin, cfg: &str) -> bool {
    twin.on.is_empty() || twin.on.contains(&cfg)
}

/// The file name of a test or twin.
pub fn file_name(test: &Test, twin: Option<&Twin>) -> String {
    match twin {
        Some(t) => format!("{}+{}.litmus", test.name, t.name),
        None => format!("{}.litmus", test.name),
    }
}

/// The herd7 test name of a test or twin.
fn test_name(test: &Test, twin: Option<&Twin>) -> String {
    file_name(test, twin)
        .trim_end_matches(".litmus")
        .to_string()
}

/// Replaces `T:reg` tokens of an outcome with the configuration's register names.
fn outcome(
    cond: &str,
    threads: &[Thread<'_>],
    c11: bool,
    arch: Option<super::code::Arch>,
) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = cond;
    while let Some(k) = rest.find(|c: char| c.is_ascii_digit()) {
        let (before, after) = rest.split_at(k);
        out.push_str(before);
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        let tail = &after[digits.len()..];
        if let Some(tail) = tail.strip_prefix(':') {
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let t: usize = digits.parse().unwrap();
            let th = threads.get(t).ok_or_else(|| format!("no thread {t}"))?;
            let r = th
                .regs
                .get(&name)
                .ok_or_else(|| format!("thread {t} has no register {name}"))?;
            let r = if c11 {
                r.clone()
            } else if arch == Some(super::code::Arch::AArch64) {
                format!("X{r}")
            } else {
                r.clone()
            };
            write!(out, "{t}:{r}").unwrap();
            rest = &tail[name.len()..];
        } else {
            out.push_str(&digits);
            rest = tail;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Writes one test (or twin) for a configuration: C11 when `sigs` is `None`.
pub fn write(
    test: &Test,
    twin: Option<&Twin>,
    cfg: &Config,
    sigs: Option<&BTreeMap<String, Vec<MemOp>>>,
) -> Result<String, String> {
    let mut threads = Vec::new();
    for (k, items) in test.threads.iter().enumerate() {
        let mut th = Thread::new(cfg, sigs, twin, k);
        th.items(items)
            .map_err(|e| format!("{}: thread {k}: {e}", test_name(test, twin)))?;
        threads.push(th);
    }
    // A twin whose weaker path has no register a conjunct names (a repair that is a
    // plain store has no success flag) drops that conjunct.
    let mut kept = Vec::new();
    for conj in test.exists.split("/\\") {
        match outcome(conj.trim(), &threads, cfg.arch.is_none(), cfg.arch) {
            Ok(c) => kept.push(c),
            Err(e) if twin.is_some() && e.contains("has no register") => {}
            Err(e) => return Err(format!("{} on {}: {e}", test_name(test, twin), cfg.name)),
        }
    }
    let mut cond = kept.join(" /\\ ");
    for th in &threads {
        for e in &th.extra {
            cond = format!("{cond} /\\ {e}");
        }
    }
    let mut s = String::new();
    let name = test_name(test, twin);
    let header = match cfg.arch {
        None => "C",
        Some(super::code::Arch::AArch64) => "AArch64",
        Some(super::code::Arch::RiscV) => "RISCV",
        Some(super::code::Arch::Arm) => "ARM",
    };
    writeln!(s, "{header} {name}").unwrap();
    // Locations: atomics are those any path touches; plain data only plain steps.
    let mut atomic: Vec<&str> = Vec::new();
    fn atomics(items: &[I], twin: Option<&Twin>, out: &mut Vec<&'static str>) {
        for it in items {
            match *it {
                I::Call(p, args) | I::Irq(p, args, _, _) => {
                    let _ = swapped(twin, p);
                    for (_, a) in args {
                        if let Arg::L(l) = a {
                            out.push(l);
                        }
                    }
                    if let I::Irq(_, _, _, h) = it {
                        atomics(h, twin, out);
                    }
                }
                I::If(_, _, _, body) => atomics(body, twin, out),
                _ => {}
            }
        }
    }
    for t in test.threads {
        atomics(t, twin, &mut atomic);
    }
    let comment = |s: &mut String| {
        let what = match twin {
            Some(t) => format!("Weakened twin: {}. Must be reachable.", t.what),
            None => "The outcome below must be unreachable.".to_string(),
        };
        writeln!(s, "(* {} {what}", test.claim).unwrap();
        writeln!(
            s,
            "   Generated by `cargo xtask litmus --bless` from litmus/spec{}; do not edit. *)",
            if cfg.arch.is_some() {
                " and the object code of each path"
            } else {
                ""
            }
        )
        .unwrap();
    };
    if cfg.arch.is_none() {
        comment(&mut s);
        let mut init = String::new();
        for (loc, v) in test.init {
            write!(init, " {loc} = {v};").unwrap();
        }
        for th in &threads {
            for c in &th.cells {
                write!(init, " {c} = 0;").unwrap();
            }
        }
        writeln!(s, "{{{init} }}").unwrap();
        for (k, th) in threads.iter().enumerate() {
            let mut params: Vec<String> = Vec::new();
            let mut used: Vec<&str> = Vec::new();
            for l in th.lines.iter() {
                for (loc, _) in test.init {
                    let uses = l.contains(&format!("({loc},"))
                        || l.contains(&format!("*{loc} "))
                        || l.contains(&format!("*{loc};"))
                        || l.starts_with(&format!("STORE {loc} "));
                    if uses && !used.contains(loc) {
                        used.push(loc);
                    }
                }
            }
            for loc in used {
                if atomic.contains(&loc) {
                    params.push(format!("atomic_int *{loc}"));
                } else {
                    params.push(format!("int *{loc}"));
                }
            }
            for c in &th.cells {
                params.push(format!("int *{c}"));
            }
            writeln!(s, "P{k}({}) {{", params.join(", ")).unwrap();
            let mut regs: Vec<&String> = th.regs.values().collect();
            regs.sort();
            regs.dedup();
            for r in regs {
                writeln!(s, "  int {r} = 0;").unwrap();
            }
            let mut depth = 1;
            for l in &th.lines {
                if l == "}" {
                    depth -= 1;
                }
                let line = if let Some(rest) = l.strip_prefix("STORE ") {
                    let (loc, v) = rest.split_once(' ').unwrap();
                    if atomic.contains(&loc) {
                        format!("atomic_store_explicit({loc}, {v}, memory_order_relaxed);")
                    } else {
                        format!("*{loc} = {v};")
                    }
                } else {
                    l.clone()
                };
                writeln!(s, "{}{line}", "  ".repeat(depth)).unwrap();
                if l.ends_with('{') {
                    depth += 1;
                }
            }
            writeln!(s, "}}").unwrap();
        }
        writeln!(s, "exists ({cond})").unwrap();
        return Ok(s);
    }
    comment(&mut s);
    writeln!(s, "{{").unwrap();
    let mut init = String::new();
    for (loc, v) in test.init {
        write!(init, "{loc}={v}; ").unwrap();
    }
    writeln!(s, "{}", init.trim_end()).unwrap();
    for (k, th) in threads.iter().enumerate() {
        let mut regs = String::new();
        for (loc, b) in &th.bases {
            let r = match cfg.arch.unwrap() {
                super::code::Arch::AArch64 => format!("X{b}"),
                _ => b.clone(),
            };
            write!(regs, "{k}:{r}={loc}; ").unwrap();
        }
        writeln!(s, "{}", regs.trim_end()).unwrap();
    }
    writeln!(s, "}}").unwrap();
    let rows = threads.iter().map(|t| t.lines.len()).max().unwrap_or(0);
    let widths: Vec<usize> = threads
        .iter()
        .enumerate()
        .map(|(k, t)| {
            t.lines
                .iter()
                .map(String::len)
                .max()
                .unwrap_or(0)
                .max(format!("P{k}").len())
        })
        .collect();
    let row = |cells: Vec<String>| -> String {
        let mut line = String::new();
        for (k, c) in cells.iter().enumerate() {
            if k > 0 {
                line.push_str(" | ");
            }
            write!(line, "{:<w$}", c, w = widths[k]).unwrap();
        }
        format!(" {} ;", line.trim_end())
    };
    writeln!(
        s,
        "{}",
        row((0..threads.len()).map(|k| format!("P{k}")).collect())
    )
    .unwrap();
    for i in 0..rows {
        writeln!(
            s,
            "{}",
            row(threads
                .iter()
                .map(|t| t.lines.get(i).cloned().unwrap_or_default())
                .collect())
        )
        .unwrap();
    }
    writeln!(s, "exists ({cond})").unwrap();
    Ok(s)
}
