//! `cargo xtask bench --icount` (and a step of the whole `cargo xtask bench`): the
//! instructions each hot path executes on every embedded target, counted in QEMU.
//!
//! `targets/icount` is a bare firmware that runs each operation between two marks,
//! `icount_begin` and `icount_end`; `targets/icount/plugin/icount.c`, a TCG plugin built
//! here with `cc`, counts every executed instruction and writes the count at each mark.
//! An operation's count is its `begin`..`end` difference minus that of the `empty`
//! operation of the same round (the marks, the call and the return), in the last of the
//! firmware's rounds; rounds after the first that disagree are shown as a range.

use crate::steps::workspace_root;
use object::{Object, ObjectSymbol};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The heading of the report's section (`--icount` replaces the section it starts).
pub const HEADING: &str = "## instructions per operation on each target (QEMU, counted)";

/// One target's counts: operation -> the last round's count, and the smallest and
/// largest of the rounds after the first.
pub type Counts = BTreeMap<String, (u64, u64, u64)>;

/// Builds the plugin for the QEMU found, into `target/icount/`.
fn plugin(root: &Path, qemu: &str) -> Result<PathBuf, String> {
    let v = Command::new(qemu)
        .arg("--version")
        .output()
        .map_err(|e| format!("{qemu}: {e}"))?;
    let text = String::from_utf8_lossy(&v.stdout);
    // "QEMU emulator version 7.2.22 (...)": the plugin API version it accepts (QEMU 9.0
    // raised the oldest one accepted to 2).
    let major: u32 = text
        .split("version ")
        .nth(1)
        .and_then(|r| r.split('.').next())
        .and_then(|m| m.trim().parse().ok())
        .ok_or_else(|| format!("no version in `{qemu} --version`: {text}"))?;
    let api = if major >= 9 { 2 } else { 1 };
    let dir = root.join("target/icount");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let so = dir.join("libicount.so");
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-Wall"])
        .arg(format!("-DICOUNT_PLUGIN_VERSION={api}"))
        .arg("-o")
        .arg(&so)
        .arg(root.join("targets/icount/plugin/icount.c"))
        .output()
        .map_err(|e| format!("cc: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building the QEMU plugin failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(so)
}

/// The address of a function symbol of `elf` (the Thumb bit cleared).
fn symbol(elf: &[u8], name: &str) -> Result<u64, String> {
    let file = object::File::parse(elf).map_err(|e| e.to_string())?;
    file.symbols()
        .find(|s| s.name() == Ok(name))
        .map(|s| s.address() & !1)
        .ok_or_else(|| format!("no symbol {name} in the icount firmware"))
}

/// heapless's benchmark settings (its `pool` module's docs), as cargo profile
/// overrides: `opt-level = "z"`, fat LTO, one codegen unit.
const HEAPLESS_SETTINGS: &[(&str, &str)] = &[
    ("CARGO_PROFILE_RELEASE_OPT_LEVEL", "z"),
    ("CARGO_PROFILE_RELEASE_LTO", "fat"),
    ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1"),
];

/// The core of heapless's published cycle counts.
const HEAPLESS_TARGET: &str = "thumbv7em-none-eabihf";

/// How the firmware is built.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Build {
    /// The release profile; the library's feature `critical-section`.
    Release,
    /// heapless's benchmark settings (`HEAPLESS_SETTINGS`).
    Heapless,
    /// thumbv6m: portable-atomic's `unsafe-assume-single-core` instead of feature
    /// `critical-section` (read-modify-writes with interrupts masked inline, plain loads
    /// and stores).
    SingleCore,
}

/// The column of thumbv6m's single-core build.
const V6M_SINGLE_CORE: &str = "thumbv6m-none-eabi, single-core";

/// Builds the firmware for `target` (in the default target directory, or a variant in
/// one of its own under `target/icount/`), runs it once under the plugin and returns the
/// counts per operation.
fn measure(root: &Path, target: &str, how: Build) -> Result<Counts, String> {
    let (target_dir, tag) = match how {
        Build::Release => (root.join("target"), ""),
        Build::Heapless => (root.join("target/icount/heapless-settings"), "-heapless"),
        Build::SingleCore => (root.join("target/icount/single-core"), "-single-core"),
    };
    let mut cmd = Command::new("cargo");
    match how {
        Build::Release => {}
        Build::Heapless => {
            cmd.envs(HEAPLESS_SETTINGS.iter().copied());
        }
        Build::SingleCore => {
            cmd.env(
                "RUSTFLAGS",
                "--cfg portable_atomic_unsafe_assume_single_core",
            );
        }
    }
    let build = cmd
        .current_dir(root)
        .env("CARGO_TARGET_DIR", &target_dir)
        .args([
            "build",
            "-q",
            "--release",
            "-p",
            "rcuref-icount",
            "--target",
            target,
        ])
        .args((how == Build::SingleCore).then_some("--no-default-features"))
        .output()
        .map_err(|e| e.to_string())?;
    if !build.status.success() {
        return Err(format!(
            "building the icount firmware for {target} failed: {}",
            String::from_utf8_lossy(&build.stderr)
        ));
    }
    let elf_path = target_dir.join(target).join("release/icount");
    let elf = std::fs::read(&elf_path).map_err(|e| format!("{}: {e}", elf_path.display()))?;
    let (begin, end) = (symbol(&elf, "icount_begin")?, symbol(&elf, "icount_end")?);
    let mut machine = qemu_embedded_runner::Machine::for_target(target)
        .ok_or_else(|| format!("the runner knows no machine for {target}"))?;
    machine.smp = None; // one core: the plugin's count is not per vCPU
    let qemu = qemu_embedded_runner::find_qemu(&machine.qemu)?;
    let so = plugin(root, &qemu)?;
    let counts_file = root
        .join("target/icount")
        .join(format!("{target}{tag}.txt"));
    let _ = std::fs::remove_file(&counts_file);
    let elf_arg = elf_path
        .to_str()
        .ok_or_else(|| format!("{}: not a UTF-8 path", elf_path.display()))?;
    let out = Command::new(&qemu)
        .args(machine.command_line(elf_arg, &[]))
        .arg("-plugin")
        .arg(format!(
            "{},begin={begin:#x},end={end:#x},out={}",
            so.display(),
            counts_file.display()
        ))
        .output()
        .map_err(|e| format!("{qemu}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        return Err(format!(
            "the icount firmware failed on {target}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let header = stdout
        .lines()
        .find_map(|l| l.strip_prefix("icount "))
        .ok_or_else(|| format!("{target}: no `icount` line in the output: {stdout}"))?;
    let field = |key: &str| {
        header
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .ok_or_else(|| format!("{target}: no {key} in `{header}`"))
    };
    let rounds: usize = field("rounds=")?.parse().map_err(|e| format!("{e}"))?;
    let ops: Vec<&str> = field("ops=")?.split(',').collect();
    let text = std::fs::read_to_string(&counts_file)
        .map_err(|e| format!("{}: {e}", counts_file.display()))?;
    let marks: Vec<(char, u64)> = text
        .lines()
        .filter_map(|l| {
            let (k, n) = l.split_once(' ')?;
            Some((k.chars().next()?, n.parse().ok()?))
        })
        .collect();
    if marks.len() != 2 * rounds * ops.len() {
        return Err(format!(
            "{target}: {} marks for {rounds} rounds of {} operations",
            marks.len(),
            ops.len()
        ));
    }
    // Round-major: round r, operation k is pair r * ops + k.
    let mut per_op: Vec<Vec<u64>> = vec![Vec::new(); ops.len()];
    for (i, pair) in marks.chunks(2).enumerate() {
        let [(b, n0), (e, n1)] = [pair[0], pair[1]];
        if b != 'B' || e != 'E' || n1 < n0 {
            return Err(format!("{target}: marks out of order at pair {i}"));
        }
        per_op[i % ops.len()].push(n1 - n0);
    }
    let empty = ops
        .iter()
        .position(|o| *o == "empty")
        .ok_or("no `empty` operation")?;
    let mut counts = Counts::new();
    for (k, op) in ops.iter().enumerate() {
        if k == empty {
            continue;
        }
        let net: Vec<u64> = (0..rounds)
            .map(|r| per_op[k][r].saturating_sub(per_op[empty][r]))
            .collect();
        let later = if rounds > 1 { &net[1..] } else { &net[..] };
        let (lo, hi) = (
            *later.iter().min().unwrap_or(&0),
            *later.iter().max().unwrap_or(&0),
        );
        counts.insert(op.to_string(), (net[rounds - 1], lo, hi));
    }
    Ok(counts)
}

/// The host column's name.
const HOST: &str = "x86_64 (callgrind)";

/// The host: the same rounds as a program (`target/release/icount`), each operation's
/// last-round call counted by callgrind inside `icount_window`, minus the `empty`
/// operation's count.
fn measure_host(root: &Path) -> Result<Counts, String> {
    let build = Command::new("cargo")
        .current_dir(root)
        .args(["build", "-q", "--release", "-p", "rcuref-icount"])
        .output()
        .map_err(|e| e.to_string())?;
    if !build.status.success() {
        return Err(format!(
            "building the icount program failed: {}",
            String::from_utf8_lossy(&build.stderr)
        ));
    }
    let bin = root.join("target/release/icount");
    let list = Command::new(&bin)
        .arg("--list")
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let text = String::from_utf8_lossy(&list.stdout).to_string();
    let ops: Vec<String> = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("ops="))
        .ok_or_else(|| format!("no ops= in `icount --list`: {text}"))?
        .split(',')
        .map(str::to_string)
        .collect();
    let out_file = root.join("target/icount/host.callgrind");
    let ir = |op: &str| -> Result<u64, String> {
        let out = Command::new("valgrind")
            .args([
                "--tool=callgrind",
                "--quiet",
                "--collect-atstart=no",
                "--toggle-collect=icount_window",
            ])
            .arg(format!("--callgrind-out-file={}", out_file.display()))
            .arg(&bin)
            .arg(op)
            .output()
            .map_err(|e| format!("valgrind: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "callgrind on `icount {op}` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let text = std::fs::read_to_string(&out_file).map_err(|e| e.to_string())?;
        text.lines()
            .find_map(|l| {
                l.strip_prefix("summary:")
                    .or_else(|| l.strip_prefix("totals:"))
            })
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .ok_or_else(|| format!("no instruction total in callgrind's output for {op}"))
    };
    let empty = ir("empty")?;
    let mut counts = Counts::new();
    for op in ops.iter().filter(|o| *o != "empty") {
        let n = ir(op)?.saturating_sub(empty);
        counts.insert(op.clone(), (n, n, n));
    }
    Ok(counts)
}

/// The report's rows: an operation, then (label, firmware operation, whether a
/// critical section stands in for the missing atomics on a target) per implementation,
/// ours first.
type Impl = (&'static str, &'static str, fn(&str) -> bool);

/// Targets on which heapless's pool runs through portable-atomic's critical section:
/// its tagged-pointer CAS is 64-bit on 32-bit targets and 128-bit on 64-bit ones, LL/SC
/// only on ARMv7-M/v8-M.
fn heapless_cs(t: &str) -> bool {
    t == "thumbv6m-none-eabi" || t.starts_with("riscv")
}

/// thumbv6m has no compare-and-swap at all: every read-modify-write, ours and the CAS
/// loop's, is portable-atomic's critical section (interrupts masked).
fn v6m(t: &str) -> bool {
    t == "thumbv6m-none-eabi"
}

const ROWS: &[(&str, &[Impl])] = &[
    (
        "read section: `Reader::lock` + guard drop",
        &[("rcuref", "reader_lock", v6m)],
    ),
    (
        "read section: `Rcu::with_reader(\\|_\\| ())` (claims and frees a slot too)",
        &[("rcuref", "rcu_read", v6m)],
    ),
    (
        "read section: `ContextReader` lock + unlock",
        &[("rcuref", "context_lock", v6m)],
    ),
    (
        "grace period, no reader in a section: `Reader::synchronize`",
        &[("rcuref", "synchronize", v6m)],
    ),
    (
        "grace period, no reader in a section: `start_poll().poll()`",
        &[("rcuref", "poll", v6m)],
    ),
    (
        "refcount get + put",
        &[
            ("rcuref `FileRef32`", "fileref_get_put", v6m),
            ("CAS-loop `inc_not_zero` + `fetch_sub`", "cas_get_put", v6m),
        ],
    ),
    (
        "refcount: the last put",
        &[
            ("rcuref `FileRef32::put_close`", "fileref_put_close", v6m),
            ("CAS-loop `fetch_sub` to 0", "cas_put_last", v6m),
        ],
    ),
    (
        "pool alloc + free",
        &[
            (
                "rcuref `Pool::alloc` + `Handle` drop",
                "pool_alloc_free",
                v6m,
            ),
            (
                "heapless `box_pool` alloc + drop",
                "heapless_box_alloc_free",
                heapless_cs,
            ),
            (
                "heapless `arc_pool` alloc + drop",
                "heapless_arc_alloc_free",
                heapless_cs,
            ),
        ],
    ),
    (
        "pool alloc",
        &[
            ("rcuref `Pool::alloc`", "pool_alloc", v6m),
            (
                "heapless `box_pool` alloc",
                "heapless_box_alloc",
                heapless_cs,
            ),
            (
                "heapless `arc_pool` alloc",
                "heapless_arc_alloc",
                heapless_cs,
            ),
        ],
    ),
    (
        "pool free",
        &[
            (
                "rcuref `Handle` drop (the last reference)",
                "pool_free",
                v6m,
            ),
            ("heapless `Box` drop", "heapless_box_free", heapless_cs),
            (
                "heapless `Arc` drop (the last reference)",
                "heapless_arc_free",
                heapless_cs,
            ),
        ],
    ),
    (
        "lookup: lock + `PoolCell::get` + `Handle` drop + unlock",
        &[("rcuref", "pool_get", v6m)],
    ),
];

/// The report's section: the table, then how it was made. `results` has one entry per
/// target, its counts or why there are none.
pub fn section(
    results: &[(&str, Result<Counts, String>)],
    heapless_settings: &Result<Counts, String>,
) -> String {
    let mut md = format!(
        "{HEADING}\n\n\
         Instructions executed by one call of each operation, uncontended, on one core, \
         counted by QEMU (TCG plugin `targets/icount/plugin/icount.c`; x86_64: callgrind) \
         while the firmware \
         `targets/icount` runs it; generated by `cargo xtask bench --icount`. \
         In parentheses: the alternative's count / ours (above 1: ours executes fewer). \
         \"cs\": through portable-atomic's critical section (the target has no \
         compare-and-swap of that width), which then takes a critical section for every \
         atomic operation, loads and stores included; \"{V6M_SINGLE_CORE}\": the same \
         target built with `--cfg portable_atomic_unsafe_assume_single_core` instead of \
         feature `critical-section` (read-modify-writes with interrupts masked inline, \
         plain loads and stores: sound on one core only); \"n/a\": not measured (see the \
         notes).\n\n\
         | operation | implementation |"
    );
    for (t, _) in results {
        let _ = write!(md, " {t} |");
    }
    let _ = write!(md, "\n|---|---|{}\n", "---|".repeat(results.len()));
    let mut missing = Vec::new();
    for (op_label, impls) in ROWS {
        for (i, (label, op, cs)) in impls.iter().enumerate() {
            let _ = write!(md, "| {} | {label} |", if i == 0 { op_label } else { "" });
            for (t, r) in results {
                let cell = match r {
                    Ok(c) => match c.get(*op) {
                        Some(&(n, lo, hi)) => {
                            let mut s = if lo == hi {
                                n.to_string()
                            } else {
                                format!("{lo}-{hi}")
                            };
                            if cs(t) {
                                s.push_str(" cs");
                            }
                            if i > 0 {
                                if let Some(&(ours, _, _)) = c.get(impls[0].1) {
                                    if ours > 0 {
                                        let _ = write!(s, " ({:.2}x)", n as f64 / ours as f64);
                                    }
                                }
                            }
                            s
                        }
                        None => {
                            missing.push(format!("{op} on {t}"));
                            "n/a".into()
                        }
                    },
                    Err(_) => "n/a".into(),
                };
                let _ = write!(md, " {cell} |");
            }
            md.push('\n');
        }
    }
    md.push('\n');
    for (t, r) in results {
        if let Err(e) = r {
            let first = e.lines().next().unwrap_or("");
            let _ = writeln!(md, "**Note:** {t} not measured: {first}\n");
        }
    }
    if !missing.is_empty() {
        let _ = writeln!(md, "**Note:** no count for {}.\n", missing.join(", "));
    }
    // heapless's own benchmark, in its terms as far as QEMU allows.
    let _ = writeln!(
        md,
        "**heapless's published benchmark, beside ours.** heapless documents clock \
         cycles measured with the cycle counter on a Cortex-M4F, built for \
         {HEAPLESS_TARGET} with `opt-level = \"z\"`, fat LTO and one codegen unit. The \
         same firmware built with those settings ({HEAPLESS_TARGET}, counted as above; \
         instructions, not cycles):\n\n\
         | operation | heapless's docs (cycles, hardware) | heapless here (instructions) | rcuref here (instructions) |\n\
         |---|---|---|---|"
    );
    let hs = |op: &str| match heapless_settings {
        Ok(c) => c
            .get(op)
            .map(|&(n, lo, hi)| {
                if lo == hi {
                    n.to_string()
                } else {
                    format!("{lo}-{hi}")
                }
            })
            .unwrap_or_else(|| "n/a".into()),
        Err(_) => "n/a".into(),
    };
    for (label, published, theirs, ours) in [
        (
            "`box_pool` alloc / `Pool::alloc`",
            "23",
            "heapless_box_alloc",
            "pool_alloc",
        ),
        (
            "`Box` drop / `Handle` drop",
            "23",
            "heapless_box_free",
            "pool_free",
        ),
        (
            "`arc_pool` alloc / `Pool::alloc`",
            "28",
            "heapless_arc_alloc",
            "pool_alloc",
        ),
        (
            "`Arc` drop / `Handle` drop (last reference)",
            "59",
            "heapless_arc_free",
            "pool_free",
        ),
    ] {
        let _ = writeln!(
            md,
            "| {label} | {published} | {} | {} |",
            hs(theirs),
            hs(ours)
        );
    }
    md.push('\n');
    if let Err(e) = heapless_settings {
        let _ = writeln!(
            md,
            "**Note:** not measured with heapless's settings: {}\n",
            e.lines().next().unwrap_or("")
        );
    }
    md.push_str(
        "**Method.** Each operation is a function of the firmware (release build, the \
         library with feature `critical-section` only, none in the single-core column: no \
         `pool-stats`, no `defmt`), called \
         through a function pointer between two marks; the plugin counts every instruction \
         QEMU executes and writes the count at each mark. A cell is the difference between \
         the marks minus that of an empty function, so it is what the operation's own \
         function executes: its body, its prologue and epilogue, the calls it makes into \
         the library, not the call and return. The firmware runs all operations in turn, \
         three rounds, from state set up outside the marks (a registered reader, a counter \
         holding one reference, a pool cell holding a value, pools of 8 slots / 4 blocks, a \
         domain of 4 slots), and the cell is the last round's count; where the later rounds \
         differ the cell gives their range (the first round may take a colder path: a pool's \
         first allocation probes past the slot the cell holds, later ones take the slot \
         just freed). These are dynamic counts along the path actually taken, \
         uncontended: no retry loop runs twice, no grace period waits for a reader, no \
         interrupt arrives. The CAS loop is `inc_not_zero` as a `compare_exchange_weak` \
         loop (acquire) and a release `fetch_sub`, on `portable_atomic::AtomicU32`; heapless \
         is 0.9 with its `portable-atomic` feature (the pool needs it on targets without \
         the CAS it wants). QEMU machines: those of the on-target tests, with one core.\n\n\
         **Caveats.** These are instruction counts, not cycles: QEMU's TCG is not a timing \
         model, and no cycle-accurate model of these cores was at hand. heapless's \
         published figures are cycles on hardware, taken between breakpoints around the \
         call (so the call and return are in them, and each LDREX/STREX pair, taken \
         branch and DMB costs more than one cycle there); the table above sets them beside \
         instruction counts in the same build settings, not beside cycles. heapless \
         documents its pool for ARMv7-M/v8-M (LDREX/STREX) and x86 only; the \"cs\" cells \
         are its `portable-atomic` feature taking it further, through a critical section \
         for its 64-bit (128-bit on 64-bit targets) tagged-pointer CAS. Our pool is not \
         heapless's kind of pool: each slot is a `FileRef32` (alloc initialises it, the \
         last `Handle` drop retires it) and its memory stays typed so that a reader under \
         a guard may look it up (`PoolCell::get`); heapless's `Box` has no count, its `Arc` \
         has no lookup. The counts depend on the compiler version and the code around a \
         call site (an inlined operation may share work with its caller); the ratios \
         within one column are the robust part. The x86_64 column is the same program \
         on the host, counted by valgrind's callgrind (the operation's last-round call, \
         inside a function it is told to collect, minus the empty operation's); there \
         heapless's 128-bit tagged-pointer CAS is portable-atomic's, which checks for \
         `cmpxchg16b` at run time unless the build enables that target feature.\n\n",
    );
    md
}

/// Measures every target and returns the report section.
pub fn report() -> Result<String, String> {
    let root = workspace_root();
    crate::install::targets(crate::TARGETS)?;
    crate::install::qemu()?;
    let mut results = Vec::new();
    for t in crate::TARGETS {
        println!("bench: icount on {t} ...");
        results.push((*t, measure(&root, t, Build::Release)));
        if t.starts_with("thumbv6m") {
            println!("bench: icount on {V6M_SINGLE_CORE} ...");
            results.push((V6M_SINGLE_CORE, measure(&root, t, Build::SingleCore)));
        }
    }
    println!("bench: icount on the host (callgrind) ...");
    results.push((HOST, measure_host(&root)));
    println!("bench: icount on {HEAPLESS_TARGET}, heapless's settings ...");
    let heapless_settings = measure(&root, HEAPLESS_TARGET, Build::Heapless);
    if results.iter().all(|(_, r)| r.is_err()) {
        let why: Vec<String> = results
            .iter()
            .filter_map(|(t, r)| r.as_ref().err().map(|e| format!("{t}: {e}")))
            .collect();
        return Err(format!("no target could be counted:\n{}", why.join("\n")));
    }
    Ok(section(&results, &heapless_settings))
}

/// `cargo xtask bench --icount`: measures, then replaces only this section of
/// `docs/bench/REPORT.md` (appended if the report has none).
pub fn run() -> Result<(), String> {
    let sec = report()?;
    let path = workspace_root().join("docs/bench/REPORT.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let new = splice(&old, &sec);
    std::fs::write(&path, new).map_err(|e| e.to_string())?;
    println!("bench: wrote the icount section of {}", path.display());
    Ok(())
}

/// `report` with the section starting at [`HEADING`] (up to the next `## ` heading)
/// replaced by `section`, or `section` appended.
fn splice(report: &str, section: &str) -> String {
    match report.find(HEADING) {
        Some(start) => {
            let after = start + HEADING.len();
            let end = report[after..]
                .find("\n## ")
                .map_or(report.len(), |e| after + e + 1);
            format!("{}{section}{}", &report[..start], &report[end..])
        }
        None => {
            let sep = if report.is_empty() || report.ends_with("\n\n") {
                ""
            } else if report.ends_with('\n') {
                "\n"
            } else {
                "\n\n"
            };
            format!("{report}{sep}{section}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_replaces_only_its_section() {
        let sec = format!("{HEADING}\n\nnew\n\n");
        let old = format!("# r\n\n## a\n\nx\n\n{HEADING}\n\nold\n\n## b\n\ny\n");
        assert_eq!(
            splice(&old, &sec),
            format!("# r\n\n## a\n\nx\n\n{HEADING}\n\nnew\n\n## b\n\ny\n")
        );
        // Last in the report, then absent: replaced to the end, then appended.
        let last = format!("# r\n\n{HEADING}\n\nold\n");
        assert_eq!(splice(&last, &sec), format!("# r\n\n{sec}"));
        assert_eq!(splice("# r\n", &sec), format!("# r\n\n{sec}"));
    }
}
