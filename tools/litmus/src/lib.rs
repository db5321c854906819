//! `cargo xtask litmus [--bless] [--control]`: the weak-memory suite (`litmus/README.md`),
//! a tool of its own that xtask dispatches to ([`run`]), with the machine's tools
//! (herd7, llvm-objdump, rustup targets) given by xtask's installer ([`Tools`]).
//!
//! 1. Builds the library with `--cfg rcuref_code_probe` for every instruction set we
//!    ship and reads each fast path's memory instructions and barriers out of the object
//!    code (`code.rs`); checks them against the orderings the spec gives each path, and
//!    that each path appears in the public entry points that inline it.
//! 2. Writes every litmus test, C11 and per instruction set (`gen.rs`, from the spec
//!    that `data.rs` reads out of `litmus/spec/`), and compares them and the paths'
//!    instructions with what is committed under `litmus/`: any difference (the compiler
//!    emitting other instructions, a changed ordering) fails until a person looks and
//!    runs `--bless`.
//! 3. Runs herd7 on every committed test: each must be `Never` (and free of C11 data
//!    races), each weakened twin `Sometimes` (a control that comes out `Never` fails).
//!
//! `--control` builds the library for AArch64 and RISC-V with a broken variant compiled
//! in (`Mutant::NestedWithoutFence`) and requires step 2 to fail on it: the check that
//! ties the tests to the code can fail.

mod code;
mod data;
mod gen;
mod spec;

use code::{Arch, Extracted, MemOp};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// What the suite needs from the machine, installed by its caller.
pub struct Tools {
    /// Makes herd7 available (or says how to).
    pub install_herd: fn() -> Result<(), String>,
    /// A command that runs herd7 with its models.
    pub herd7: fn() -> Result<Command, String>,
    /// Adds the rustup targets of the instruction sets it reads.
    pub install_targets: fn(&[&str]) -> Result<(), String>,
    /// The toolchain's llvm-objdump (installed if missing).
    pub llvm_objdump: fn() -> Result<PathBuf, String>,
}

static TOOLS: OnceLock<Tools> = OnceLock::new();

fn tools() -> &'static Tools {
    TOOLS.get().expect("run() sets the tools first")
}

/// The repository's root (this crate lives in `tools/litmus`).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("tools/litmus lives in the workspace")
        .to_path_buf()
}

/// A configuration of the suite: C11 under a model, or an instruction set as a target
/// compiles to it.
pub struct Config {
    pub name: &'static str,
    pub arch: Option<Arch>,
    target: &'static str,
    rustflags: &'static str,
    /// herd7's model: a file of its library, or one of `litmus/models/`.
    model: &'static str,
}

pub const CONFIGS: &[Config] = &[
    Config {
        name: "c11",
        arch: None,
        target: "",
        rustflags: "",
        model: "rc11.cat",
    },
    Config {
        name: "c11-rs20",
        arch: None,
        target: "",
        rustflags: "",
        model: "litmus/models/rc11-rs20.cat",
    },
    Config {
        name: "aarch64",
        arch: Some(Arch::AArch64),
        target: "aarch64-unknown-none",
        rustflags: "",
        model: "aarch64.cat",
    },
    Config {
        name: "aarch64-lse-rcpc",
        arch: Some(Arch::AArch64),
        target: "aarch64-unknown-none",
        rustflags: "-C target-feature=+lse,+rcpc",
        model: "aarch64.cat",
    },
    Config {
        name: "riscv64",
        arch: Some(Arch::RiscV),
        target: "riscv64gc-unknown-none-elf",
        rustflags: "",
        model: "riscv.cat",
    },
    Config {
        name: "riscv32",
        arch: Some(Arch::RiscV),
        target: "riscv32imac-unknown-none-elf",
        rustflags: "",
        model: "riscv.cat",
    },
    Config {
        name: "armv7m",
        arch: Some(Arch::Arm),
        target: "thumbv7em-none-eabihf",
        rustflags: "",
        model: "arm.cat",
    },
];

/// The folder of a configuration's committed tests (both C11 models share one).
fn tests_dir(cfg: &Config) -> PathBuf {
    let d = if cfg.arch.is_none() { "c11" } else { cfg.name };
    workspace_root().join("litmus/tests").join(d)
}

fn code_file(cfg: &Config) -> PathBuf {
    workspace_root()
        .join("litmus/code")
        .join(format!("{}.txt", cfg.name))
}

/// The exported symbols of `src/code_probe.rs`.
fn probe_symbols() -> Result<Vec<String>, String> {
    let src = std::fs::read_to_string(workspace_root().join("src/code_probe.rs"))
        .map_err(|e| e.to_string())?;
    let mut out: Vec<String> = Vec::new();
    for line in src.lines() {
        let t = line.trim_start();
        for prefix in ["rcuref_path_", "rcuref_twin_", "rcuref_api_"] {
            if let Some(rest) = t.strip_prefix(prefix) {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if rest[name.len()..].starts_with('(') {
                    out.push(format!("{prefix}{name}"));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Builds the library's code probe for the instruction-set configurations (one cargo
/// run per set of flags) and returns each configuration's rlib.
fn build(mutant: Option<&str>, only: &[&str]) -> Result<BTreeMap<&'static str, PathBuf>, String> {
    let mut out = BTreeMap::new();
    let mut groups: BTreeMap<&str, Vec<&Config>> = BTreeMap::new();
    for c in CONFIGS
        .iter()
        .filter(|c| c.arch.is_some() && (only.is_empty() || only.contains(&c.name)))
    {
        groups.entry(c.rustflags).or_default().push(c);
    }
    for (k, (flags, cfgs)) in groups.iter().enumerate() {
        let dir = format!(
            "target/litmus{}{}",
            if mutant.is_some() { "-control" } else { "" },
            if k == 0 {
                String::new()
            } else {
                format!("-{k}")
            }
        );
        let mut rustflags = format!("--cfg rcuref_code_probe {flags}");
        let mut cmd = Command::new("cargo");
        cmd.current_dir(workspace_root())
            .args([
                "build",
                "--release",
                "-p",
                "rcuref",
                "--message-format=json",
            ])
            .args(["--target-dir", &dir]);
        for c in cfgs {
            cmd.args(["--target", c.target]);
        }
        if let Some(m) = mutant {
            rustflags.push_str(" --cfg rcuref_static_mutant");
            cmd.env("RCUREF_STATIC_MUTANT", m);
        }
        cmd.env("RUSTFLAGS", rustflags.trim())
            .env_remove("CARGO_TARGET_DIR");
        let o = cmd.output().map_err(|e| format!("cargo: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "building the code probe failed:\n{}",
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if v["reason"] != "compiler-artifact" || v["target"]["name"] != "rcuref" {
                continue;
            }
            for f in v["filenames"].as_array().into_iter().flatten() {
                let Some(f) = f.as_str().filter(|f| f.ends_with(".rlib")) else {
                    continue;
                };
                for c in cfgs {
                    if f.contains(&format!("/{}/release/", c.target)) {
                        out.insert(c.name, PathBuf::from(f));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Each configuration's extracted paths.
fn extract_all(
    rlibs: &BTreeMap<&'static str, PathBuf>,
) -> Result<BTreeMap<&'static str, Extracted>, String> {
    let objdump = (tools().llvm_objdump)()?;
    let symbols = probe_symbols()?;
    let mut out = BTreeMap::new();
    for c in CONFIGS.iter().filter(|c| c.arch.is_some()) {
        let Some(rlib) = rlibs.get(c.name) else {
            continue;
        };
        out.insert(
            c.name,
            code::extract(c.arch.unwrap(), &objdump, rlib, &symbols)?,
        );
    }
    Ok(out)
}

/// The committed-form text of a configuration's paths: one line each.
fn code_text(cfg: &Config, x: &Extracted) -> String {
    let mut s = format!(
        "# {}: the memory instructions and barriers of each fast path as {} compiles\n\
         # them (--cfg rcuref_code_probe {}), read from the object code by `cargo xtask\n\
         # litmus`. A change here changes the assembly litmus tests: review both, then\n\
         # `cargo xtask litmus --bless`.\n",
        cfg.name, cfg.target, cfg.rustflags
    );
    for (name, ops) in &x.paths {
        s.push_str(&format!("{name}: {}\n", code::signature(ops)));
        // The other paths through it (a test models the first; these are what a branch
        // skips on the way out: a failed exchange, a slow path called).
        for other in x.all.get(name).into_iter().flatten().filter(|p| *p != ops) {
            s.push_str(&format!("    or: {}\n", code::signature(other)));
        }
    }
    s
}

/// The library's LLVM IR for AArch64 (the orderings do not depend on the target there).
fn build_ir() -> Result<PathBuf, String> {
    let dir = workspace_root().join("target/litmus-ir");
    let o = Command::new("cargo")
        .current_dir(workspace_root())
        .args(["rustc", "-q", "--release", "-p", "rcuref", "--lib"])
        .args(["--target", "aarch64-unknown-none", "--target-dir"])
        .arg(&dir)
        .args(["--", "--emit=llvm-ir", "-C", "codegen-units=1"])
        .env("RUSTFLAGS", "--cfg rcuref_code_probe")
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .map_err(|e| format!("cargo: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "building the IR failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    let deps = dir.join("aarch64-unknown-none/release/deps");
    std::fs::read_dir(&deps)
        .map_err(|e| format!("{}: {e}", deps.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "ll")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("rcuref-"))
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .ok_or_else(|| format!("no rcuref-*.ll in {}", deps.display()))
}

/// Every weakened twin that `src/code_probe.rs` exports has its abstract form in
/// `litmus/spec/paths.txt` (the other way round is `check_source_orders`'s "no IR"):
/// with the orderings compared there, the two spellings of a twin (Rust, compiled for
/// its instructions; abstract, for the C11 tests) cannot drift apart. (The probe's
/// 64-bit FileRef paths have no spec, so no tests: they are only shown in `code/`.)
fn check_probe_in_spec(symbols: &[String]) -> Vec<String> {
    symbols
        .iter()
        .filter_map(|s| Some((s, s.strip_prefix("rcuref_")?)))
        .filter(|(_, path)| path.starts_with("twin_") && spec::path(path).is_none())
        .map(|(s, path)| {
            format!(
                "source: src/code_probe.rs exports {s}, litmus/spec/paths.txt has no path {path}"
            )
        })
        .collect()
}

/// The spec's orderings against the source's (the IR): the problems found.
fn check_source_orders(ir: &BTreeMap<String, Vec<ir::Op>>) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, _, ops) in spec::paths() {
        let want = ir::of_spec(ops);
        match ir.get(*name) {
            None => problems.push(format!("source: no IR for path {name}")),
            Some(have) => {
                let agree =
                    have.len() == want.len() && have.iter().zip(&want).all(|(h, w)| ir::same(h, w));
                if !agree {
                    let show = |v: &[ir::Op]| {
                        v.iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    problems.push(format!(
                        "source: path {name}: the source's atomic operations are [{}], the spec (and so its C11 tests) says [{}]",
                        show(have),
                        show(&want)
                    ));
                }
            }
        }
    }
    problems
}

mod ir;

/// Checks the object code against the orderings of the spec and the public entry
/// points; returns the problems found.
fn check_code(cfg: &Config, x: &Extracted) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, _, ops) in spec::paths() {
        match x.paths.get(*name) {
            Some(elf) => {
                if let Err(e) = orders::check(cfg, ops, elf) {
                    problems.push(format!(
                        "{}: path {name} ({}): {e}",
                        cfg.name,
                        code::signature(elf)
                    ));
                }
            }
            None => problems.push(format!(
                "{}: path {name} not found in the object code",
                cfg.name
            )),
        }
    }
    // Each entry point must contain, on some path through it, each listed sequence of
    // paths back to back: the library composes its paths in that order (a cookie after
    // the unpublish; a lookup's load, get, re-check).
    const INLINED: &[(&str, &[&[&str]])] = &[
        (
            "read_section",
            &[
                &["own_slot"],
                &["lock_outer"],
                &["lock_nested"],
                &["unlock"],
            ],
        ),
        (
            "context_read_section",
            &[
                &["own_slot"],
                &["lock_outer"],
                &["lock_nested_in_context"],
                &["unlock"],
            ],
        ),
        ("get32", &[&["get32"]]),
        ("put32", &[&["put32"]]),
        ("put_close32", &[&["close32"], &["put32"]]),
        ("cell_replace", &[&["cell_publish", "cookie_snapshot"]]),
        ("pool_get", &[&["location_load", "get32", "location_load"]]),
    ];
    for (api, seqs) in INLINED {
        let Some(paths) = x.api.get(*api) else {
            problems.push(format!("{}: entry point {api} not found", cfg.name));
            continue;
        };
        for seq in *seqs {
            let mut sig: Vec<MemOp> = Vec::new();
            for p in *seq {
                sig.extend(x.paths.get(*p).cloned().unwrap_or_default());
            }
            if !paths.iter().any(|path| code::contains(path, &sig)) {
                problems.push(format!(
                    "{}: the entry point {api} does not contain {} ({}) on any of its paths",
                    cfg.name,
                    seq.join(" then "),
                    code::signature(&sig)
                ));
            }
        }
    }
    problems
}

mod orders;

/// Every test and twin file of a configuration, generated.
fn generate(
    cfg: &Config,
    sigs: Option<&BTreeMap<String, Vec<MemOp>>>,
) -> Result<BTreeMap<String, String>, String> {
    let mut files = BTreeMap::new();
    for t in spec::tests() {
        files.insert(gen::file_name(t, None), gen::write(t, None, cfg, sigs)?);
        for tw in t.twins {
            let applies_here = if cfg.arch.is_none() {
                gen::applies(tw, "c11") || gen::applies(tw, "c11-rs20")
            } else {
                gen::applies(tw, cfg.name)
            };
            if applies_here {
                files.insert(
                    gen::file_name(t, Some(tw)),
                    gen::write(t, Some(tw), cfg, sigs)?,
                );
            }
        }
    }
    Ok(files)
}

/// herd7 over every committed test of a configuration that applies to it.
fn herd_config(c: &Config) -> Result<BTreeMap<String, Verdict>, String> {
    let dir = tests_dir(c);
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e} (run `cargo xtask litmus --bless`)", dir.display()))?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|f| f.ends_with(".litmus"))
        .collect();
    files.sort();
    // A twin that does not apply to this configuration (C11: one of the two models).
    files.retain(|f| {
        let Some((test, twin)) = f.trim_end_matches(".litmus").split_once('+') else {
            return true;
        };
        spec::tests()
            .iter()
            .find(|t| t.name == test)
            .and_then(|t| t.twins.iter().find(|tw| tw.name == twin))
            .is_none_or(|tw| gen::applies(tw, c.name))
    });
    herd(c.model, &dir, &files)
}

/// herd7's verdict on one test.
#[derive(Debug)]
struct Verdict {
    observation: String,
    undefined: bool,
}

/// Runs herd7 on `files` under `model`, from `dir`.
fn herd(model: &str, dir: &Path, files: &[String]) -> Result<BTreeMap<String, Verdict>, String> {
    let mut cmd = (tools().herd7)()?;
    let model_path = if model.contains('/') {
        workspace_root().join(model).display().to_string()
    } else {
        model.to_string()
    };
    // `-speedcheck fast`: stop at the first execution that reaches the outcome (a
    // control needs one; a test explores them all).
    // C11 runs without it: herd7 only flags a data race when it lists every execution.
    cmd.current_dir(dir)
        .args(["-model", &model_path, "-timeout", "120"]);
    if !model.starts_with("rc11") && !model.contains("/rc11") {
        cmd.args(["-speedcheck", "fast"]);
    }
    cmd.args(files);
    let o = cmd.output().map_err(|e| format!("herd7: {e}"))?;
    let text = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    if err.contains("rror") || err.contains("Warning") {
        return Err(format!(
            "herd7 under {model} in {}: {}",
            dir.display(),
            err.trim()
        ));
    }
    let mut out = BTreeMap::new();
    let mut current: Option<(String, bool)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Test ") {
            current = Some((
                rest.split_whitespace().next().unwrap_or("").to_string(),
                false,
            ));
        } else if line.starts_with("Flag") && line.contains("undef") {
            if let Some(c) = current.as_mut() {
                c.1 = true;
            }
        } else if let Some(rest) = line.strip_prefix("Observation ") {
            let mut w = rest.split_whitespace();
            let name = w.next().unwrap_or("").to_string();
            let obs = w.next().unwrap_or("").to_string();
            let undefined = current.as_ref().is_some_and(|c| c.0 == name && c.1);
            out.insert(
                name,
                Verdict {
                    observation: obs,
                    undefined,
                },
            );
        }
    }
    Ok(out)
}

/// `cargo xtask litmus [--bless] [--control]`.
pub fn run(args: &[String], machine: Tools) -> Result<(), String> {
    let bless = args.iter().any(|a| a == "--bless");
    let control = args.iter().any(|a| a == "--control");
    let _ = TOOLS.set(machine);
    spec::load()?;
    (tools().install_herd)()?;
    let targets: Vec<&str> = CONFIGS
        .iter()
        .filter(|c| c.arch.is_some())
        .map(|c| c.target)
        .collect();
    (tools().install_targets)(&targets)?;
    if control {
        return run_control();
    }
    let started = std::time::Instant::now();
    let rlibs = build(None, &[])?;
    let extracted = extract_all(&rlibs)?;
    let mut failures: Vec<String> = Vec::new();
    let mut passed = 0u64;
    // 0. The spec's orderings against the source's.
    let ir_ops = ir::read(&build_ir()?)?;
    let mut problems = check_source_orders(&ir_ops);
    problems.extend(check_probe_in_spec(&probe_symbols()?));
    if problems.is_empty() {
        passed += 1;
    }
    failures.extend(problems);
    // 1. The object code against the spec's orderings and the entry points.
    for c in CONFIGS.iter().filter(|c| c.arch.is_some()) {
        let x = extracted
            .get(c.name)
            .ok_or_else(|| format!("{}: not built", c.name))?;
        let problems = check_code(c, x);
        if problems.is_empty() {
            passed += 1;
        }
        failures.extend(problems);
    }
    // 2. Generate; compare with (or write) what is committed.
    for c in CONFIGS {
        if c.name == "c11-rs20" {
            continue; // the same files as c11
        }
        let sigs = extracted.get(c.name).map(|x| &x.paths);
        let files = generate(c, sigs)?;
        let dir = tests_dir(c);
        let mut wanted: Vec<(PathBuf, String)> =
            files.into_iter().map(|(f, s)| (dir.join(f), s)).collect();
        if let Some(x) = extracted.get(c.name) {
            wanted.push((code_file(c), code_text(c, x)));
        }
        if bless {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            std::fs::create_dir_all(code_file(c).parent().unwrap()).map_err(|e| e.to_string())?;
            for (p, s) in &wanted {
                std::fs::write(p, s).map_err(|e| format!("{}: {e}", p.display()))?;
            }
            continue;
        }
        let mut stale = 0;
        for (p, s) in &wanted {
            let have = std::fs::read_to_string(p).unwrap_or_default();
            if have != *s {
                stale += 1;
                failures.push(format!(
                    "{} differs from what the code and the spec give now:\n{}",
                    rel(p),
                    first_difference(&have, s)
                ));
            }
        }
        // Files that the spec no longer makes.
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                if !wanted.iter().any(|(p, _)| *p == e.path()) {
                    stale += 1;
                    failures.push(format!(
                        "{} is not made by the spec any more",
                        rel(&e.path())
                    ));
                }
            }
        }
        if stale == 0 {
            passed += 1;
        }
    }
    // 3. herd7 on the committed tests, one herd7 per configuration, in parallel.
    let mut counts = (0, 0);
    type Run<'c> = (&'c Config, Result<BTreeMap<String, Verdict>, String>);
    let runs: Vec<Run<'_>> = std::thread::scope(|s| {
        let handles: Vec<_> = CONFIGS
            .iter()
            .map(|c| (c, s.spawn(move || herd_config(c))))
            .collect();
        handles
            .into_iter()
            .map(|(c, h)| {
                (
                    c,
                    h.join()
                        .unwrap_or_else(|_| Err("herd7 thread panicked".into())),
                )
            })
            .collect()
    });
    for (c, verdicts) in runs {
        let verdicts = verdicts?;
        for t in spec::tests() {
            let mut controls = 0;
            for (f, twin) in std::iter::once((gen::file_name(t, None), None)).chain(
                t.twins
                    .iter()
                    .filter(|tw| gen::applies(tw, c.name))
                    .map(|tw| (gen::file_name(t, Some(tw)), Some(tw))),
            ) {
                let name = f.trim_end_matches(".litmus");
                let Some(v) = verdicts.get(name) else {
                    failures.push(format!("{}: herd7 gave no verdict on {name}", c.name));
                    continue;
                };
                let reachable = v.observation != "Never" || v.undefined;
                let ok = if twin.is_some() {
                    reachable
                } else {
                    !reachable
                };
                if twin.is_some() {
                    controls += 1;
                    counts.1 += 1;
                } else {
                    counts.0 += 1;
                }
                if ok {
                    passed += 1;
                } else if twin.is_some() {
                    failures.push(format!(
                        "{}: the control {name} came out {}: it cannot tell the weakened code from the real one",
                        c.name, v.observation
                    ));
                } else {
                    failures.push(format!(
                        "{}: {name}: the forbidden outcome is {}{}",
                        c.name,
                        v.observation,
                        if v.undefined {
                            " (and a data race: undefined behaviour)"
                        } else {
                            ""
                        }
                    ));
                }
            }
            if controls == 0 {
                failures.push(format!(
                    "{}: test {} has no weakened twin here",
                    c.name, t.name
                ));
            }
        }
    }
    // 4. The hand-written tests (the asymmetric-fence mode; the shared callback queue
    // and the pool node, whose code the tie does not read), under both C11 models.
    if !bless {
        for dir in HAND_WRITTEN {
            let (tests, controls) = hand_written(dir, &mut passed, &mut failures)?;
            counts.0 += tests;
            counts.1 += controls;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    if bless {
        println!(
            "litmus: wrote litmus/tests and litmus/code; run `cargo xtask litmus` to check them"
        );
        return Ok(());
    }
    for f in &failures {
        println!("FAILED: {f}");
    }
    println!(
        "litmus: {} tests and {} controls over {} configurations, the code of {} instruction sets ({secs:.0} s)",
        counts.0,
        counts.1,
        CONFIGS.len(),
        CONFIGS.iter().filter(|c| c.arch.is_some()).count()
    );
    println!(
        "test result: {}. {passed} passed; {} failed",
        if failures.is_empty() { "ok" } else { "FAILED" },
        failures.len()
    );
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{} litmus check(s) failed", failures.len()))
    }
}

/// The negative control of the code tie: a broken variant compiled for AArch64 and
/// RISC-V must make the committed tests disagree with the object code.
fn run_control() -> Result<(), String> {
    const MUTANT: &str = "NestedWithoutFence";
    let cfgs = ["aarch64", "riscv64"];
    let rlibs = build(Some(MUTANT), &cfgs)?;
    let extracted = extract_all(&rlibs)?;
    let mut caught = 0;
    for name in cfgs {
        let c = CONFIGS.iter().find(|c| c.name == name).unwrap();
        let x = extracted
            .get(name)
            .ok_or_else(|| format!("{name}: not built"))?;
        let have = std::fs::read_to_string(code_file(c)).unwrap_or_default();
        let now = code_text(c, x);
        let files = generate(c, Some(&x.paths))?;
        let test = gen::file_name(
            spec::tests()
                .iter()
                .find(|t| t.name == "rcu-irq-in-lock-after-store")
                .unwrap(),
            None,
        );
        let committed = std::fs::read_to_string(tests_dir(c).join(&test)).unwrap_or_default();
        let differs = have != now && files.get(&test).is_some_and(|s| *s != committed);
        if differs {
            caught += 1;
            println!(
                "{name} with Mutant::{MUTANT}: the check fails, as it must:\n{}",
                first_difference(&have, &now)
            );
        } else {
            println!("{name} with Mutant::{MUTANT}: NOT caught: the object code still matches the committed tests");
        }
    }
    println!(
        "test result: {}. {caught} passed; {} failed",
        if caught == cfgs.len() { "ok" } else { "FAILED" },
        cfgs.len() - caught
    );
    if caught == cfgs.len() {
        Ok(())
    } else {
        Err("the code-tie check did not catch a broken variant".into())
    }
}

fn rel(p: &Path) -> String {
    p.strip_prefix(workspace_root())
        .unwrap_or(p)
        .display()
        .to_string()
}

/// The first line where two texts differ, both versions.
fn first_difference(have: &str, want: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (have.lines().collect(), want.lines().collect());
    for k in 0..a.len().max(b.len()) {
        let (x, y) = (
            a.get(k).copied().unwrap_or("(end)"),
            b.get(k).copied().unwrap_or("(end)"),
        );
        if x != y {
            return format!(
                "    line {}: committed: {x}\n    line {}: now:       {y}",
                k + 1,
                k + 1
            );
        }
    }
    "    (the same lines; line endings differ)".into()
}

/// The folders of `litmus/` whose tests are written by hand: `asymmetric/` (the
/// asymmetric-fence mode: that build's code is not read by the tie), `call/` (the
/// shared callback queue, `src/rcu/call.rs`), `node/` (the pool node for
/// caller-owned objects, `src/pool/node.rs`) and `proposals/` (protocols not built
/// yet, checked so that whoever builds one starts from a model that holds).
const HAND_WRITTEN: [&str; 4] = ["asymmetric", "call", "node", "proposals"];

/// `litmus/<folder>/`: tests written by hand, run under both C11 models. A test must be
/// `Never` without a data race; each twin (`<test>+<twin>.litmus`) reachable or racy,
/// and every test needs one. Returns (tests, controls) checked.
fn hand_written(
    folder: &str,
    passed: &mut u64,
    failures: &mut Vec<String>,
) -> Result<(u64, u64), String> {
    let dir = workspace_root().join("litmus").join(folder);
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|f| f.ends_with(".litmus"))
        .collect();
    files.sort();
    let tests: Vec<&str> = files
        .iter()
        .map(|f| f.trim_end_matches(".litmus"))
        .filter(|n| !n.contains('+'))
        .collect();
    let mut counts = (0, 0);
    for model in ["rc11.cat", "litmus/models/rc11-rs20.cat"] {
        let verdicts = herd(model, &dir, &files)?;
        for f in &files {
            let name = f.trim_end_matches(".litmus");
            let Some(v) = verdicts.get(name) else {
                failures.push(format!(
                    "{folder} ({model}): herd7 gave no verdict on {name}"
                ));
                continue;
            };
            let reachable = v.observation != "Never" || v.undefined;
            let twin = name.contains('+');
            if twin {
                counts.1 += 1;
            } else {
                counts.0 += 1;
            }
            if twin != reachable {
                failures.push(format!(
                    "{folder} ({model}): {name} came out {}{}",
                    v.observation,
                    if v.undefined { " with a data race" } else { "" }
                ));
            } else {
                *passed += 1;
            }
        }
    }
    for t in &tests {
        if !files.iter().any(|f| f.starts_with(&format!("{t}+"))) {
            failures.push(format!("{folder}: test {t} has no weakened twin"));
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_without_its_path_in_the_spec_is_a_problem() {
        spec::load().unwrap();
        let known = [
            "rcuref_path_own_slot",
            "rcuref_twin_unlock_relaxed",
            "rcuref_api_read",
        ]
        .map(String::from);
        assert_eq!(check_probe_in_spec(&known), Vec::<String>::new());
        let p = check_probe_in_spec(&["rcuref_twin_unlock_forgotten".to_string()]);
        assert_eq!(
            p,
            [
                "source: src/code_probe.rs exports rcuref_twin_unlock_forgotten, \
              litmus/spec/paths.txt has no path twin_unlock_forgotten"
            ]
        );
    }

    /// Every twin of the committed `src/code_probe.rs` is in the spec.
    #[test]
    fn the_committed_probe_is_in_the_spec() {
        spec::load().unwrap();
        assert_eq!(
            check_probe_in_spec(&probe_symbols().unwrap()),
            Vec::<String>::new()
        );
    }
}
