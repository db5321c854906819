//! Reads the suite's tables from `litmus/spec/`: `paths.txt` (every path and weakened
//! twin as abstract operations), `common.txt` (the pieces several tests share: threads,
//! handlers, initial states, twins, lists of configurations) and `tests/*.test` (one
//! test a file, with its claim and twins). The format is described at the top of each
//! file; in short, one item a line, its parts indented below it.

use crate::spec::{Arg, At, Cmp, NamedPath, Test, Twin, A, I, O, V};
use std::collections::BTreeMap;
use std::path::Path;

/// A line and the lines indented below it.
#[derive(Debug)]
struct Node {
    text: String,
    line: usize,
    children: Vec<Node>,
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

fn leak_slice<T>(v: Vec<T>) -> &'static [T] {
    Box::leak(v.into_boxed_slice())
}

/// The lines of a file as a tree by indentation; `#` lines and blank lines are skipped.
fn tree(text: &str) -> Vec<Node> {
    let mut lines: Vec<(usize, String, usize)> = Vec::new();
    for (n, l) in text.lines().enumerate() {
        let t = l.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        lines.push((l.len() - l.trim_start().len(), t.to_string(), n + 1));
    }
    fn build(lines: &[(usize, String, usize)], i: &mut usize, indent: usize) -> Vec<Node> {
        let mut out = Vec::new();
        while *i < lines.len() && lines[*i].0 >= indent {
            let (ind, text, line) = lines[*i].clone();
            *i += 1;
            let children = build(lines, i, ind + 1);
            out.push(Node {
                text,
                line,
                children,
            });
        }
        out
    }
    build(&lines, &mut 0, 0)
}

/// A text field: the rest of its line and the lines below it, joined by spaces.
fn text_of(first: &str, n: &Node) -> String {
    let mut s = first.trim().to_string();
    fn add(s: &mut String, nodes: &[Node]) {
        for c in nodes {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(&c.text);
            add(s, &c.children);
        }
    }
    add(&mut s, &n.children);
    s
}

fn order(w: &str) -> Result<O, String> {
    Ok(match w.trim() {
        "Rlx" => O::Rlx,
        "Acq" => O::Acq,
        "Rel" => O::Rel,
        "AcqRel" => O::AcqRel,
        "Sc" => O::Sc,
        o => {
            return Err(format!(
                "unknown ordering {o:?} (Rlx, Acq, Rel, AcqRel, Sc)"
            ))
        }
    })
}

fn int(w: &str) -> Result<i64, String> {
    w.trim()
        .parse()
        .map_err(|_| format!("not a number: {:?}", w.trim()))
}

fn ident(w: &str) -> Result<&'static str, String> {
    let w = w.trim();
    if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(leak(w))
    } else {
        Err(format!("not a name: {w:?}"))
    }
}

/// A value of a path: a number, or a parameter.
fn value(w: &str) -> Result<V, String> {
    match int(w) {
        Ok(k) => Ok(V::Imm(k)),
        Err(_) => Ok(V::P(ident(w)?)),
    }
}

/// `head(a, b, ...)`: `head` and the arguments.
fn call(s: &str) -> Result<(&str, Vec<&str>), String> {
    let (head, rest) = s
        .split_once('(')
        .ok_or_else(|| format!("expected a call: {s:?}"))?;
    let args = rest
        .strip_suffix(')')
        .ok_or_else(|| format!("expected `)` at the end: {s:?}"))?;
    let args = if args.trim().is_empty() {
        Vec::new()
    } else {
        args.split(',').map(str::trim).collect()
    };
    Ok((head.trim(), args))
}

/// `if REG == V:` / `if REG != V:`: the register, the comparison, the value.
fn condition(s: &str) -> Option<Result<(&'static str, Cmp, &str), String>> {
    let c = s.strip_prefix("if ")?.strip_suffix(':')?;
    let (reg, cmp, v) = if let Some((r, v)) = c.split_once("==") {
        (r, Cmp::Eq, v)
    } else if let Some((r, v)) = c.split_once("!=") {
        (r, Cmp::Ne, v)
    } else {
        return Some(Err(format!("expected `==` or `!=`: {s:?}")));
    };
    Some(ident(reg).map(|r| (r, cmp, v.trim())))
}

/// One operation of a path (and the block below an `if`).
fn op(n: &Node) -> Result<A, String> {
    let s = n.text.as_str();
    if let Some(c) = condition(s) {
        let (reg, cmp, v) = c?;
        return Ok(A::If(reg, cmp, value(v)?, ops(&n.children)?));
    }
    if !n.children.is_empty() {
        return Err("only an `if` has lines below it".into());
    }
    if let Some(o) = s.strip_prefix("fence(").and_then(|r| r.strip_suffix(')')) {
        return Ok(A::Fence(order(o)?));
    }
    let (lhs, rhs) = match s.split_once(" = ") {
        Some((l, r)) => (Some(l.trim()), r.trim()),
        None => (None, s),
    };
    if let (Some(dst), Some(src)) = (
        lhs,
        rhs.strip_prefix("entered(")
            .and_then(|r| r.strip_suffix(')')),
    ) {
        return Ok(A::Entered(ident(dst)?, ident(src)?));
    }
    if let (Some(dst), Some((src, k))) = (lhs, rhs.split_once(" + ")) {
        return Ok(A::Plus(ident(dst)?, ident(src)?, int(k)?));
    }
    let (target, args) = call(rhs)?;
    let (loc, method) = target
        .split_once('.')
        .ok_or_else(|| format!("expected `location.operation(...)`: {rhs:?}"))?;
    let loc = ident(loc)?;
    let want = |n: usize| {
        if args.len() == n {
            Ok(())
        } else {
            Err(format!("{method} takes {n} arguments: {s:?}"))
        }
    };
    let dst = || lhs.ok_or_else(|| format!("{method} needs a result: {s:?}"));
    Ok(match method {
        "load" => {
            want(1)?;
            A::Ld(loc, ident(dst()?)?, order(args[0])?)
        }
        "store" => {
            want(2)?;
            if lhs.is_some() {
                return Err(format!("a store has no result: {s:?}"));
            }
            A::St(loc, value(args[0])?, order(args[1])?)
        }
        "fetch_add" => {
            want(2)?;
            A::Add(loc, int(args[0])?, ident(dst()?)?, order(args[1])?)
        }
        "swap" => {
            want(2)?;
            A::Swap(loc, value(args[0])?, ident(dst()?)?, order(args[1])?)
        }
        "cas" => {
            want(4)?;
            let (ok, old) = dst()?
                .split_once(',')
                .ok_or_else(|| format!("a cas gives `ok, old`: {s:?}"))?;
            A::Cas {
                loc,
                expect: value(args[0])?,
                new: value(args[1])?,
                old: ident(old)?,
                ok: ident(ok)?,
                o: order(args[2])?,
                fail: order(args[3])?,
            }
        }
        m => return Err(format!("unknown operation {m:?}: {s:?}")),
    })
}

fn ops(nodes: &[Node]) -> Result<&'static [A], String> {
    let mut out = Vec::new();
    for n in nodes {
        out.push(op(n).map_err(|e| format!("line {}: {e}", n.line))?);
    }
    Ok(leak_slice(out))
}

/// What the tests share, by name.
#[derive(Default)]
struct Common {
    threads: BTreeMap<String, &'static [I]>,
    inits: BTreeMap<String, &'static [(&'static str, i64)]>,
    configs: BTreeMap<String, &'static [&'static str]>,
    twins: BTreeMap<String, Twin>,
}

/// An argument of a call: `&loc`, a register, a number.
fn arg(w: &str) -> Result<Arg, String> {
    let w = w.trim();
    if let Some(l) = w.strip_prefix('&') {
        Ok(Arg::L(ident(l)?))
    } else if let Ok(k) = int(w) {
        Ok(Arg::K(k))
    } else {
        Ok(Arg::R(ident(w)?))
    }
}

/// A call's arguments: each parameter's argument.
type Args = &'static [(&'static str, Arg)];

/// `path(param=arg, ...)`.
fn call_of(s: &str) -> Result<(&'static str, Args), String> {
    let (path, args) = call(s)?;
    let mut out = Vec::new();
    for a in args {
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| format!("expected `parameter=argument`: {a:?}"))?;
        out.push((ident(k)?, arg(v)?));
    }
    Ok((ident(path)?, leak_slice(out)))
}

/// One step of a thread (and the block below an `if`).
fn step(n: &Node, common: &Common) -> Result<I, String> {
    let s = n.text.as_str();
    if let Some(c) = condition(s) {
        let (reg, cmp, v) = c?;
        return Ok(I::If(reg, cmp, int(v)?, steps(&n.children, common)?));
    }
    if !n.children.is_empty() {
        return Err("only an `if` has lines below it".into());
    }
    if let Some((loc, v)) = s.strip_prefix('*').and_then(|r| r.split_once(" = ")) {
        return Ok(I::Store(ident(loc)?, arg(v)?));
    }
    if let Some((reg, loc)) = s.split_once(" = *") {
        return Ok(I::Load(ident(loc)?, ident(reg)?));
    }
    if let Some((c, irq)) = s.split_once(", irq ") {
        let (path, args) = call_of(c)?;
        let (at, handler) = irq
            .split_once(':')
            .ok_or_else(|| format!("expected `irq after N: HANDLER`: {s:?}"))?;
        let at = match at.trim() {
            "at end" => At::End,
            a => At::Access(int(a
                .strip_prefix("after ")
                .ok_or_else(|| format!("expected `after N` or `at end`: {a:?}"))?)?
                as usize),
        };
        let handler = common
            .threads
            .get(handler.trim())
            .ok_or_else(|| format!("no handler {:?} in common.txt", handler.trim()))?;
        return Ok(I::Irq(path, args, at, handler));
    }
    let (path, args) = call_of(s)?;
    Ok(I::Call(path, args))
}

fn steps(nodes: &[Node], common: &Common) -> Result<&'static [I], String> {
    let mut out = Vec::new();
    for n in nodes {
        out.push(step(n, common).map_err(|e| format!("line {}: {e}", n.line))?);
    }
    Ok(leak_slice(out))
}

/// `loc=value ...`, or the name of a shared initial state.
fn init(s: &str, common: &Common) -> Result<&'static [(&'static str, i64)], String> {
    if let Some(i) = common.inits.get(s.trim()) {
        return Ok(i);
    }
    let mut out = Vec::new();
    for w in s.split_whitespace() {
        let (loc, v) = w
            .split_once('=')
            .ok_or_else(|| format!("expected `location=value`: {w:?}"))?;
        out.push((ident(loc)?, int(v)?));
    }
    Ok(leak_slice(out))
}

/// A list of configurations, or the name of a shared one.
fn configs(s: &str, common: &Common) -> Result<&'static [&'static str], String> {
    if let Some(c) = common.configs.get(s.trim()) {
        return Ok(c);
    }
    let v: Result<Vec<_>, _> = s
        .split_whitespace()
        .map(|w| {
            if w.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                Ok(leak(w))
            } else {
                Err(format!("not a configuration: {w:?}"))
            }
        })
        .collect();
    Ok(leak_slice(v?))
}

/// `key: rest` of a line.
fn field<'a>(n: &'a Node, key: &str) -> Option<&'a str> {
    n.text.strip_prefix(key)?.strip_prefix(':').map(str::trim)
}

/// A twin's parts (`what`, `swap`, `drop`, `on`), below its name.
fn twin(name: &str, n: &Node, common: &Common) -> Result<Twin, String> {
    let (mut what, mut swaps, mut drops, mut on) = (None, Vec::new(), Vec::new(), None);
    for c in &n.children {
        let at = |e: String| format!("line {}: {e}", c.line);
        if let Some(w) = field(c, "what") {
            what = Some(leak(&text_of(w, c)));
        } else if let Some(w) = field(c, "swap") {
            let (from, to) = w
                .split_once("->")
                .ok_or_else(|| at(format!("expected `path -> twin`: {w:?}")))?;
            swaps.push((ident(from).map_err(at)?, ident(to).map_err(at)?));
        } else if let Some(w) = field(c, "drop") {
            let p: Vec<&str> = w.split_whitespace().collect();
            let [thread, path, nth] = p[..] else {
                return Err(at(format!("expected `drop: THREAD PATH N`: {w:?}")));
            };
            drops.push((
                int(thread).map_err(at)? as usize,
                ident(path).map_err(at)?,
                int(nth).map_err(at)? as usize,
            ));
        } else if let Some(w) = field(c, "on") {
            on = Some(configs(w, common).map_err(at)?);
        } else {
            return Err(at(format!("unknown part of a twin: {:?}", c.text)));
        }
    }
    Ok(Twin {
        name: leak(name),
        what: what.ok_or_else(|| format!("line {}: twin {name} has no `what:`", n.line))?,
        swaps: leak_slice(swaps),
        drops: leak_slice(drops),
        on: on.unwrap_or(&[]),
    })
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `paths.txt`: `path NAME: SOURCE` and its operations below it.
fn paths(file: &Path) -> Result<Vec<NamedPath>, String> {
    let at = |e: String| format!("{}:{e}", file.display());
    let mut out = Vec::new();
    for n in tree(&read(file)?) {
        let (name, source) = n
            .text
            .strip_prefix("path ")
            .and_then(|r| r.split_once(':'))
            .ok_or_else(|| at(format!("{}: expected `path NAME: SOURCE`", n.line)))?;
        let ops = ops(&n.children).map_err(at)?;
        out.push((ident(name).map_err(at)?, leak(source.trim()), ops));
    }
    Ok(out)
}

/// `common.txt`: `thread NAME:`, `init NAME: ...`, `configs NAME: ...`, `twin NAME: twin`.
fn common(file: &Path) -> Result<Common, String> {
    let at = |line: usize, e: String| format!("{}:{line}: {e}", file.display());
    let mut c = Common::default();
    for n in tree(&read(file)?) {
        let (kind, rest) = n
            .text
            .split_once(' ')
            .ok_or_else(|| at(n.line, "expected `KIND NAME: ...`".into()))?;
        let (name, value) = rest
            .split_once(':')
            .ok_or_else(|| at(n.line, "expected `KIND NAME: ...`".into()))?;
        let name = name.trim().to_string();
        let err = |e: String| at(n.line, e);
        match kind {
            "thread" => {
                let t = steps(&n.children, &c).map_err(err)?;
                c.threads.insert(name, t);
            }
            "init" => {
                let i = init(value, &c).map_err(err)?;
                c.inits.insert(name, i);
            }
            "configs" => {
                let v = configs(value, &c).map_err(err)?;
                c.configs.insert(name, v);
            }
            "twin" => {
                let t = twin(value.trim(), &n, &c).map_err(err)?;
                c.twins.insert(name, t);
            }
            k => return Err(at(n.line, format!("unknown kind {k:?}"))),
        }
    }
    Ok(c)
}

/// One `tests/*.test` file.
fn test(file: &Path, common: &Common) -> Result<Test, String> {
    let mut t = Test {
        name: "",
        claim: "",
        init: &[],
        threads: &[],
        exists: "",
        twins: &[],
    };
    let (mut threads, mut twins) = (Vec::new(), Vec::new());
    for n in tree(&read(file)?) {
        let at = |e: String| format!("{}:{}: {e}", file.display(), n.line);
        if let Some(v) = field(&n, "test") {
            t.name = ident_dashed(v).map_err(at)?;
        } else if let Some(v) = field(&n, "claim") {
            t.claim = leak(&text_of(v, &n));
        } else if let Some(v) = field(&n, "init") {
            t.init = init(v, common).map_err(at)?;
        } else if let Some(v) = field(&n, "thread") {
            if v.is_empty() {
                threads.push(steps(&n.children, common).map_err(at)?);
            } else {
                let th = common
                    .threads
                    .get(v)
                    .ok_or_else(|| at(format!("no thread {v:?} in common.txt")))?;
                threads.push(*th);
            }
        } else if let Some(v) = field(&n, "exists") {
            t.exists = leak(&text_of(v, &n));
        } else if let Some(v) = field(&n, "twin") {
            if n.children.is_empty() {
                let tw = common
                    .twins
                    .get(v)
                    .ok_or_else(|| at(format!("no twin {v:?} in common.txt")))?;
                twins.push(Twin { ..*tw });
            } else {
                twins.push(twin(v, &n, common).map_err(at)?);
            }
        } else {
            return Err(at(format!("unknown field {:?}", n.text)));
        }
    }
    if t.name.is_empty() || t.claim.is_empty() || t.exists.is_empty() || threads.is_empty() {
        return Err(format!(
            "{}: a test needs `test:`, `claim:`, `thread:` and `exists:`",
            file.display()
        ));
    }
    t.threads = leak_slice(threads);
    t.twins = leak_slice(twins);
    Ok(t)
}

fn ident_dashed(w: &str) -> Result<&'static str, String> {
    if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        Ok(leak(w))
    } else {
        Err(format!("not a test name: {w:?}"))
    }
}

/// The paths and the tests (in the order of their file names) of `dir`.
pub fn load(dir: &Path) -> Result<(Vec<NamedPath>, Vec<Test>), String> {
    let paths = paths(&dir.join("paths.txt"))?;
    let common = common(&dir.join("common.txt"))?;
    let mut files: Vec<_> = std::fs::read_dir(dir.join("tests"))
        .map_err(|e| format!("{}: {e}", dir.join("tests").display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "test"))
        .collect();
    files.sort();
    let mut tests = Vec::new();
    for f in files {
        tests.push(test(&f, &common)?);
    }
    Ok((paths, tests))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> (Vec<NamedPath>, Vec<Test>) {
        load(&crate::workspace_root().join("litmus/spec")).expect("litmus/spec reads")
    }

    #[test]
    fn the_committed_spec_reads() {
        let (paths, tests) = spec();
        assert_eq!(
            paths.iter().filter(|p| p.0.starts_with("twin_")).count(),
            26
        );
        assert_eq!(paths.len(), 26 + 33);
        assert_eq!(tests.len(), 24);
        assert_eq!(tests.iter().map(|t| t.twins.len()).sum::<usize>(), 44);
    }

    /// Every path a test calls, swaps or drops is in paths.txt.
    #[test]
    fn every_path_named_exists() {
        let (paths, tests) = spec();
        let known = |p: &str| paths.iter().any(|q| q.0 == p);
        fn calls(steps: &[I], out: &mut Vec<&'static str>) {
            for s in steps {
                match *s {
                    I::Call(p, _) => out.push(p),
                    I::Irq(p, _, _, h) => {
                        out.push(p);
                        calls(h, out);
                    }
                    I::If(_, _, _, body) => calls(body, out),
                    I::Load(..) | I::Store(..) => {}
                }
            }
        }
        for t in &tests {
            let mut named = Vec::new();
            for th in t.threads {
                calls(th, &mut named);
            }
            for tw in t.twins {
                named.extend(tw.swaps.iter().flat_map(|(a, b)| [*a, *b]));
                named.extend(tw.drops.iter().map(|d| d.1));
            }
            for p in named {
                assert!(known(p), "{}: no path {p}", t.name);
            }
        }
    }

    #[test]
    fn a_nested_block_reads_as_one() {
        let t = tree("path claim: x\n    seen = slot.load(Rlx)\n    if seen == 0:\n        ok, old = slot.cas(0, 1, Acq, Rlx)\n");
        let a = ops(&t[0].children).unwrap();
        assert_eq!(
            format!("{a:?}"),
            "[Ld(\"slot\", \"seen\", Rlx), If(\"seen\", Eq, Imm(0), [Cas { loc: \"slot\", \
             expect: Imm(0), new: Imm(1), old: \"old\", ok: \"ok\", o: Acq, fail: Rlx }])]"
        );
    }

    #[test]
    fn a_mistake_names_its_line() {
        let t = tree("path p: x\n    v = slot.load(Relaxed)\n");
        let e = ops(&t[0].children).unwrap_err();
        assert!(e.starts_with("line 2: unknown ordering \"Relaxed\""), "{e}");
        let t = tree("path p: x\n    slot.stor(1, Rel)\n");
        assert!(ops(&t[0].children)
            .unwrap_err()
            .contains("unknown operation"));
        let c = Common::default();
        let t = tree("thread:\n    lock(slot=&slot), irq after 2: NOBODY\n");
        let e = steps(&t[0].children, &c).unwrap_err();
        assert!(
            e.contains("line 2") && e.contains("no handler \"NOBODY\""),
            "{e}"
        );
    }
}
