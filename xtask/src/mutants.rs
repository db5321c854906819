//! `cargo xtask mutants`: mutation testing of the library (`src/`) with cargo-mutants.
//!
//! Five passes, because the loom models and each fence mode need a build of their own:
//! 1. every mutant against the host tests, in a mutant build (`--cfg rcuref_mutants`, so
//!    the exact-point preemption tests and the negative controls run too; the signal
//!    tortures are turned down to `RCUREF_FREEZES=20` freezes);
//! 2. the mutants that survived pass 1, against the loom models;
//! 3. the asymmetric-fence mode in its own build (Linux only: membarrier), against
//!    `tests/asymmetric.rs` and `tests/heavy_fence_placement.rs`: `src/rcu/heavy.rs`
//!    (excluded from pass 1: it is compiled only in that build) and the functions
//!    elsewhere with code of that mode (`examine_re` in `.cargo/mutants-asym.toml`).
//!    Those functions are in pass 1 too, where their asymmetric-only lines cannot be
//!    killed: a mutant pass 3 kills counts as killed, and one it misses survives only
//!    if pass 1 and 2 missed it too. Skipped in a narrowed run unless `--asym` is
//!    given.
//! 4. the fence chosen at run time (`auto-fence`, feature `membarrier` without the cfg),
//!    against `tests/asymmetric.rs`, `tests/auto_fence.rs` and `tests/async_wake.rs`:
//!    the `auto` module of `src/rcu/heavy.rs`, compiled only there (pass 3 leaves it
//!    out), the phase word's heavy bit (`record_phase`, `phase_in_word`,
//!    `reader_fence_after_phase`, `reader_fence_unmarked`), and the sleeping waits'
//!    announcement bits (`domain.rs`, against `tests/lost_wake.rs`), counted as pass 3 is;
//!    skipped with it.
//! 5. the same functions with feature `auto-fence` alone (no platform fence: the mode
//!    decides `Full`, or `Heavy` where a test installs one), against the same tests,
//!    where the `Full` mode's scenarios run: a mutant that skips the full fence is
//!    safe in pass 4's `Heavy` and caught only here.
//!
//! A mutant that survives every pass that tests it must be listed in
//! `mutants-equivalent.md` with why it is equivalent (keyed by file and description,
//! without line numbers, which move); the command fails on any survivor that is not
//! listed, and reports entries that no longer survive. It prints the score and writes it to `target/mutation/summary.txt`.
//! Settings: `.cargo/mutants.toml` (pass 1), `.cargo/mutants-loom.toml` (pass 2),
//! `.cargo/mutants-asym.toml` (pass 3), `.cargo/mutants-auto.toml` (pass 4) and
//! `.cargo/mutants-auto-full.toml` (pass 5).

use crate::steps::workspace_root;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const VERSION: &str = "27.1.0";

pub fn run(args: &[String]) -> Result<(), String> {
    // Extra arguments (e.g. `-f src/pool/free_map.rs` or `-F <regex>`) narrow pass 1;
    // `--asym` runs pass 3 in a narrowed run too.
    let asym_too = args.iter().any(|a| a == "--asym");
    let narrow: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--asym")
        .collect();
    crate::install::cargo_mutants(VERSION)?;
    let root = workspace_root();
    let out = root.join("target/mutation");
    let _ = fs::remove_dir_all(&out);
    fs::create_dir_all(&out).map_err(|e| e.to_string())?;

    let mut host = vec!["mutants", "-p", "rcuref", "--no-shuffle", "-o"];
    let host_out = out.join("host");
    let host_out_s = host_out.display().to_string();
    host.push(&host_out_s);
    host.extend(&narrow);
    cargo_mutants(
        "pass 1: host tests (mutant build)",
        &host,
        &[
            ("RUSTFLAGS", "--cfg rcuref_mutants"),
            ("CARGO_TARGET_DIR", "target/cm-host"),
            ("RCUREF_FREEZES", "20"),
        ],
    )?;
    let pass1 = Outcomes::read(&host_out)?;
    if pass1.total() == 0 {
        // A score over nothing would read as 100%.
        return Err(
            "cargo-mutants found no mutants: is a module hidden from it (declared \
                    inside a macro, say)? `cargo mutants --list-files` shows what it sees"
                .into(),
        );
    }
    let mut survivors = pass1.missed.clone();
    let mut loom_killed = 0;
    if !survivors.is_empty() {
        // One run per group of survivors, each against the models of its own module
        // (a loom run costs minutes; every model for every mutant would take hours).
        let mut groups: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for m in &survivors {
            groups.entry(loom_group(m)).or_default().push(m.clone());
        }
        let mut missed = Vec::new();
        for (group, members) in &groups {
            let loom_out = out.join(format!("loom-{group}"));
            let loom_out_s = loom_out.display().to_string();
            let res: Vec<String> = members
                .iter()
                .map(|m| format!("^{}$", regex_escape(m)))
                .collect();
            let mut loom = vec![
                "mutants",
                "--config",
                ".cargo/mutants-loom.toml",
                "-p",
                "rcuref",
                "--no-shuffle",
                "-o",
                &loom_out_s,
            ];
            let tests = loom_tests(group);
            for t in &tests {
                loom.push("--cargo-arg=--test");
                loom.push(t);
            }
            for r in &res {
                loom.push("-F");
                loom.push(r);
            }
            cargo_mutants(
                &format!("pass 2: loom models ({group}), on the survivors"),
                &loom,
                &[
                    ("RUSTFLAGS", "--cfg loom"),
                    ("CARGO_TARGET_DIR", "target/cm-loom"),
                ],
            )?;
            let pass2 = Outcomes::read(&loom_out)?;
            loom_killed += pass2.caught.len() + pass2.timeout.len();
            missed.extend(pass2.missed);
        }
        survivors = missed;
    }

    // Passes 3 to 5: the asymmetric-fence mode, and the fence chosen at run time with
    // and without membarrier, each in its own build.
    let mut later_extra = (0, 0, 0);
    let builds = [
        (
            "pass 3: the asymmetric-fence mode (heavy.rs, until_done, claim; its own build)",
            ".cargo/mutants-asym.toml",
            "asym",
            "--cfg rcuref_asymmetric_fence --cfg rcuref_mutants",
            "target/cm-asym",
        ),
        (
            "pass 4: the fence chosen at run time, found (heavy.rs's auto, the phase \
             word's heavy bit; feature membarrier: Heavy)",
            ".cargo/mutants-auto.toml",
            "auto",
            "--cfg rcuref_mutants",
            "target/cm-auto",
        ),
        (
            "pass 5: the fence chosen at run time, none found (the same functions; \
             feature auto-fence: Full, or Heavy once a fence is installed)",
            ".cargo/mutants-auto-full.toml",
            "auto-full",
            "--cfg rcuref_mutants",
            "target/cm-auto-full",
        ),
    ];
    // Every mutant a pass has already tested: a later build's pass counts only the
    // ones new to it, and the survivors it kills.
    let mut seen: Vec<String> = pass1.all().cloned().collect();
    for (name, config, dir, flags, target) in builds {
        if !((narrow.is_empty() || asym_too) && cfg!(target_os = "linux")) {
            break;
        }
        let build_out = out.join(dir);
        let build_out_s = build_out.display().to_string();
        cargo_mutants(
            name,
            &[
                "mutants",
                "--config",
                config,
                "-p",
                "rcuref",
                "--no-shuffle",
                "-o",
                &build_out_s,
            ],
            &[("RUSTFLAGS", flags), ("CARGO_TARGET_DIR", target)],
        )?;
        let p = Outcomes::read(&build_out)?;
        // A mutant of a function an earlier pass examined too is one mutant, not two:
        // killed if any build kills it, a survivor only if every one misses it.
        let new: Vec<String> = p.all().filter(|m| !seen.contains(m)).cloned().collect();
        let is_new = |m: &String| new.contains(m);
        // Counted below once: only what this pass adds (its own mutants, and the
        // survivors of the earlier passes it kills).
        later_extra.0 += new.len();
        later_extra.1 += p.unviable.iter().filter(|m| is_new(m)).count();
        later_extra.2 += p
            .killed()
            .filter(|m| is_new(m) || survivors.contains(m))
            .count();
        survivors.retain(|m| !p.killed().any(|k| k == m));
        survivors.extend(p.missed.iter().filter(|m| is_new(m)).cloned());
        seen.extend(new);
    }

    let listed = equivalents(&root.join("mutants-equivalent.md"))?;
    let mut unlisted = Vec::new();
    let mut used: BTreeMap<String, usize> = BTreeMap::new();
    for m in &survivors {
        let key = key(m);
        if listed.contains_key(&key) {
            *used.entry(key).or_default() += 1;
        } else {
            unlisted.push(m.clone());
        }
    }
    let stale: Vec<&String> = listed.keys().filter(|k| !used.contains_key(*k)).collect();

    let (later_total, later_unviable, later_killed) = later_extra;
    let total = pass1.total() + later_total;
    let unviable = pass1.unviable.len() + later_unviable;
    let viable = total - unviable;
    let killed = pass1.caught.len() + pass1.timeout.len() + loom_killed + later_killed;
    let equivalent = survivors.len() - unlisted.len();
    let score = if viable > equivalent {
        100.0 * killed as f64 / (viable - equivalent) as f64
    } else {
        100.0
    };
    let summary = format!(
        "mutants: {total} generated, {} unviable (do not compile), {viable} viable\n\
         killed: {killed} ({} by the host tests, {} of them by timeout; {loom_killed} more by loom; \
         {later_killed} in the asymmetric-fence and run-time-fence builds)\n\
         survived: {} ({equivalent} listed as equivalent in mutants-equivalent.md, {} not listed)\n\
         score: {score:.1}% of the non-equivalent viable mutants killed\n",
        unviable,
        pass1.caught.len() + pass1.timeout.len(),
        pass1.timeout.len(),
        survivors.len(),
        unlisted.len(),
    );
    println!("\n==== mutants summary ====\n{summary}");
    let mut report = summary.clone();
    for m in &unlisted {
        println!("NOT LISTED: {m}");
        report.push_str(&format!("not listed: {m}\n"));
    }
    for k in &stale {
        println!("stale entry (no longer survives): {k}");
        report.push_str(&format!("stale entry: {k}\n"));
    }
    fs::write(out.join("summary.txt"), report).map_err(|e| e.to_string())?;
    if !narrow.is_empty() {
        println!("(a narrowed run: the score covers only the mutants it selected)");
    }
    if unlisted.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} surviving mutant(s) neither killed nor listed in mutants-equivalent.md",
            unlisted.len()
        ))
    }
}

/// Runs one cargo-mutants pass with its output on the console. Exit codes 0 (all
/// caught), 2 (some missed) and 3 (some timed out) are results; anything else (a failed
/// baseline, a usage error) is an error.
fn cargo_mutants(name: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    println!("== {name}");
    let mut cmd = Command::new("cargo");
    cmd.args(args).current_dir(workspace_root());
    cmd.env_remove("RUSTFLAGS").env_remove("CARGO_TARGET_DIR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let st = cmd.status().map_err(|e| format!("cargo mutants: {e}"))?;
    match st.code() {
        Some(0 | 2 | 3) => Ok(()),
        _ => Err(format!("{name}: cargo mutants failed ({st})")),
    }
}

/// The outcome lists cargo-mutants writes.
struct Outcomes {
    caught: Vec<String>,
    missed: Vec<String>,
    timeout: Vec<String>,
    unviable: Vec<String>,
}

impl Outcomes {
    fn read(dir: &Path) -> Result<Self, String> {
        let list = |f: &str| -> Result<Vec<String>, String> {
            let p: PathBuf = dir.join("mutants.out").join(f);
            let text = fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            Ok(text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect())
        };
        Ok(Outcomes {
            caught: list("caught.txt")?,
            missed: list("missed.txt")?,
            timeout: list("timeout.txt")?,
            unviable: list("unviable.txt")?,
        })
    }

    fn total(&self) -> usize {
        self.caught.len() + self.missed.len() + self.timeout.len() + self.unviable.len()
    }

    fn killed(&self) -> impl Iterator<Item = &String> {
        self.caught.iter().chain(&self.timeout)
    }

    fn all(&self) -> impl Iterator<Item = &String> {
        self.killed().chain(&self.missed).chain(&self.unviable)
    }
}

/// Which loom models a surviving mutant is run against in pass 2: its module's.
fn loom_group(mutant: &str) -> &'static str {
    ["file_ref", "rcu", "pool"]
        .into_iter()
        .find(|m| mutant.starts_with(&format!("src/{m}/")))
        .unwrap_or("all")
}

/// The `--cargo-arg` values that select a group's loom test binaries.
fn loom_tests(group: &str) -> Vec<String> {
    // The RCU group also runs the interrupt models (a handler at every gap) and the
    // sleep/wake models (about a second).
    let all = ["file_ref", "rcu", "pool", "interrupts", "wake"];
    let rcu_extra = |m: &str| m == "interrupts" || m == "wake";
    all.iter()
        .filter(|m| group == "all" || group == **m || (group == "rcu" && rcu_extra(m)))
        .map(|m| format!("--cargo-arg=loom_{m}"))
        .collect()
}

/// A mutant's name without its line and column: `src/x.rs: replace a with b in f`.
fn key(name: &str) -> String {
    let mut parts = name.splitn(4, ':');
    let file = parts.next().unwrap_or_default();
    let _line = parts.next();
    let _col = parts.next();
    format!("{file}:{}", parts.next().unwrap_or_default())
}

/// The keys listed in the equivalents file: lines ``- `<key>` — reason``.
fn equivalents(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("- `") else {
            continue;
        };
        let Some((k, reason)) = rest.split_once('`') else {
            continue;
        };
        let reason = reason.trim_start_matches([' ', ':', '—', '-']).trim();
        if reason.is_empty() {
            return Err(format!("{}: `{k}` has no reason", path.display()));
        }
        map.insert(k.to_string(), reason.to_string());
    }
    Ok(map)
}

/// Escapes regex metacharacters (cargo-mutants' `-F` takes a regex).
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
