//! `cargo xtask bench`: runs the benchmarks and writes `docs/bench/REPORT.md` with SVG
//! charts beside it.
//!
//! * criterion (`benches/benches/{refcount,rcu_read,pool}.rs`): medians, and ratios taken
//!   within one run against the rcuref entry of each group;
//! * the convoy (`benches/benches/convoy.rs`): reader throughput and latency, RCU vs RwLock;
//! * callgrind instruction counts per operation (`benches/src/bin/ops.rs`, minus an
//!   empty loop), stable on a noisy machine;
//! * instructions per operation on each embedded target, counted in QEMU
//!   (`crate::icount`; `--icount` runs only that and replaces its section);
//! * code size per embedded target (`cargo xtask size`'s measurement);
//! * the read side again in a build with `--cfg rcuref_asymmetric_fence` (membarrier);
//! * liburcu's memb flavour through a small C harness (`benches/liburcu/memb_read.c`,
//!   against Debian's liburcu-dev), measured the way the criterion runs measure rcuref;
//! * the read section from C (`benches/liburcu/ffi_read.c`: the C API through a context
//!   and through the current context, liburcu memb in the same process) beside the Rust
//!   `Reader` (`benches/src/bin/read_loop.rs`); `--c-read` measures only these and
//!   replaces their section of the report.
//!
//! `RCUREF_BENCH_THREADS=1,2,4,8,16` sets the thread counts of the contended runs.
//! Installs valgrind and liburcu-dev with apt-get where they are missing.

use crate::steps::workspace_root;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One criterion result: group, function, parameter, median in ns.
struct Point {
    group: String,
    function: String,
    param: Option<String>,
    median_ns: f64,
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| e.to_string())?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{cmd:?} failed:\n{text}"))
    }
}

fn criterion_points(dir: &Path) -> Vec<Point> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n == "new") {
                    if let Some(pt) = read_point(&p) {
                        out.push(pt);
                    }
                } else {
                    stack.push(p);
                }
            }
        }
    }
    out
}

fn read_point(new: &Path) -> Option<Point> {
    let b: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(new.join("benchmark.json")).ok()?).ok()?;
    let e: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(new.join("estimates.json")).ok()?).ok()?;
    Some(Point {
        group: b["group_id"].as_str()?.to_string(),
        function: b["function_id"].as_str().unwrap_or("").to_string(),
        param: b["value_str"].as_str().map(str::to_string),
        median_ns: e["median"]["point_estimate"].as_f64()?,
    })
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1000.0 {
        format!("{:.2} µs", ns / 1000.0)
    } else {
        format!("{ns:.1} ns")
    }
}

/// A horizontal bar chart, one bar per (label, value).
fn bar_svg(title: &str, unit: &str, bars: &[(String, f64)]) -> String {
    let (w, row, left) = (760.0, 26.0, 300.0);
    let h = 50.0 + row * bars.len() as f64;
    let max = bars.iter().map(|b| b.1).fold(0.0, f64::max).max(1e-9);
    let mut s = format!(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='13'>\
         <rect width='100%' height='100%' fill='white'/><text x='10' y='22' font-size='15' font-weight='bold'>{}</text>",
        esc(title)
    );
    for (i, (label, v)) in bars.iter().enumerate() {
        let y = 40.0 + row * i as f64;
        let bw = (w - left - 110.0) * v / max;
        let fill = if label.starts_with("rcuref")
            || label.starts_with("FileRef")
            || label.starts_with("rcu ")
        {
            "#2b7bb9"
        } else {
            "#999"
        };
        let _ = write!(
            s,
            "<text x='{}' y='{}' text-anchor='end'>{}</text><rect x='{left}' y='{}' width='{bw:.1}' height='18' fill='{fill}'/>\
             <text x='{:.1}' y='{}'>{} {unit}</text>",
            left - 8.0,
            y + 14.0,
            esc(label),
            y + 1.0,
            left + bw + 6.0,
            y + 14.0,
            trim(*v)
        );
    }
    s + "</svg>\n"
}

/// A line chart of several series over thread counts.
fn line_svg(title: &str, unit: &str, series: &BTreeMap<String, Vec<(f64, f64)>>) -> String {
    let (w, h, l, r, t, b) = (760.0, 380.0, 70.0, 220.0, 40.0, 50.0);
    let xs: Vec<f64> = series.values().flatten().map(|p| p.0).collect();
    let (xmin, xmax) = (
        xs.iter().cloned().fold(f64::MAX, f64::min),
        xs.iter().cloned().fold(0.0, f64::max),
    );
    let ymax = series
        .values()
        .flatten()
        .map(|p| p.1)
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.1;
    let px = |x: f64| {
        l + (w - l - r)
            * if xmax > xmin {
                (x - xmin) / (xmax - xmin)
            } else {
                0.5
            }
    };
    let py = |y: f64| h - b - (h - t - b) * y / ymax;
    let mut s = format!(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='13'>\
         <rect width='100%' height='100%' fill='white'/><text x='10' y='22' font-size='15' font-weight='bold'>{}</text>\
         <line x1='{l}' y1='{}' x2='{}' y2='{}' stroke='black'/><line x1='{l}' y1='{t}' x2='{l}' y2='{}' stroke='black'/>\
         <text x='{}' y='{}' text-anchor='middle'>threads</text><text x='12' y='{}'>{unit}</text>",
        esc(title),
        h - b,
        w - r,
        h - b,
        h - b,
        (l + w - r) / 2.0,
        h - 12.0,
        t - 4.0
    );
    for x in xs
        .iter()
        .map(|x| *x as i64)
        .collect::<std::collections::BTreeSet<_>>()
    {
        let _ = write!(
            s,
            "<text x='{:.1}' y='{}' text-anchor='middle'>{x}</text>",
            px(x as f64),
            h - b + 18.0
        );
    }
    let _ = write!(
        s,
        "<text x='{}' y='{:.1}' text-anchor='end'>{}</text>",
        l - 6.0,
        py(ymax / 1.1) + 4.0,
        trim(ymax / 1.1)
    );
    let colors = ["#2b7bb9", "#d95f02", "#7570b3", "#1b9e77", "#666"];
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = colors[i % colors.len()];
        let path: Vec<String> = pts
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let _ = write!(
            s,
            "<polyline fill='none' stroke='{c}' stroke-width='2' points='{}'/>",
            path.join(" ")
        );
        for (x, y) in pts {
            let _ = write!(
                s,
                "<circle cx='{:.1}' cy='{:.1}' r='3' fill='{c}'/>",
                px(*x),
                py(*y)
            );
        }
        let _ = write!(
            s,
            "<text x='{}' y='{}' fill='{c}'>{}</text>",
            w - r + 10.0,
            t + 20.0 + 20.0 * i as f64,
            esc(name)
        );
    }
    s + "</svg>\n"
}

fn trim(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn callgrind(ops_bin: &Path, op: &str, n: u64) -> Result<u64, String> {
    let out =
        std::env::temp_dir().join(format!("rcuref-callgrind-{op}-{}.out", std::process::id()));
    run(Command::new("valgrind")
        .args(["--tool=callgrind", "--quiet"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(ops_bin)
        .args([op, &n.to_string()]))?;
    let text = std::fs::read_to_string(&out).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&out);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| "no instruction total in callgrind output".to_string())
}

/// The thread counts of the contended runs (the same parsing as the benches' own).
fn thread_counts() -> Vec<usize> {
    let v: Vec<usize> = std::env::var("RCUREF_BENCH_THREADS")
        .ok()
        .map(|v| {
            v.split(',')
                .filter_map(|t| t.trim().parse().ok())
                .filter(|&t| t > 0)
                .collect()
        })
        .unwrap_or_default();
    if v.is_empty() {
        // As the benches' own default: powers of two below the core count, then it.
        let mut d: Vec<usize> = (0..usize::BITS)
            .map(|i| 1usize << i)
            .take_while(|&t| t < cores())
            .collect();
        d.push(cores());
        d
    } else {
        v
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The builds a benchmark runs in.
#[derive(Clone, Copy, PartialEq)]
enum Build {
    /// The static full fence (the bench crate takes rcuref without its default
    /// features): readers' full fence.
    Plain,
    /// `--cfg rcuref_asymmetric_fence` with membarrier (its own target dir).
    Asym,
    /// Feature `membarrier` without the cfg: the fence chosen at run time, heavy where
    /// the kernel has membarrier, as the library's default build on Linux is (its own
    /// target dir).
    Auto,
}

/// Builds benchmark binary `name` (`benches/src/bin/`) in `build`; returns its path.
fn bench_bin(root: &Path, name: &str, build: Build) -> Result<PathBuf, String> {
    let mut c = Command::new("cargo");
    c.current_dir(root).args([
        "build",
        "-q",
        "--release",
        "-p",
        "rcuref-bench",
        "--bin",
        name,
    ]);
    let dir = match build {
        Build::Plain => root.join("target/release"),
        Build::Asym => {
            c.args(["--features", "membarrier"])
                .env("RUSTFLAGS", "--cfg rcuref_asymmetric_fence")
                .env("CARGO_TARGET_DIR", root.join("target/bench-asym"));
            root.join("target/bench-asym/release")
        }
        Build::Auto => {
            c.args(["--features", "membarrier"])
                .env("CARGO_TARGET_DIR", root.join("target/bench-auto"));
            root.join("target/bench-auto/release")
        }
    };
    run(&mut c)?;
    Ok(dir.join(name))
}

/// Compiles liburcu harness `source` (`benches/liburcu/`) into `out`, against Debian's
/// liburcu-dev.
fn memb_harness(root: &Path, source: &str, out: &Path) -> Result<(), String> {
    run(Command::new("cc")
        .args(["-O2", "-o"])
        .arg(out)
        .arg(root.join("benches/liburcu").join(source))
        .args(["-lurcu-memb", "-lpthread"]))
    .map(|_| ())
}

/// `memb_gp.c` built for liburcu's mb flavour (`-DMB_FLAVOUR`): a full fence in its
/// read side, the counterpart of rcuref's static full fence.
fn mb_harness(root: &Path, out: &Path) -> Result<(), String> {
    run(Command::new("cc")
        .args(["-O2", "-DMB_FLAVOUR", "-o"])
        .arg(out)
        .arg(root.join("benches/liburcu/memb_gp.c"))
        .args(["-lurcu-mb", "-lpthread"]))
    .map(|_| ())
}

const MEMB: &str = "liburcu memb read_lock+unlock";

/// A writer's rate during a read-side run: (label, reader threads, writer operations
/// per second).
type WriterRate = (String, usize, f64);

/// liburcu's memb flavour: builds the harness and measures it at every thread count,
/// alone and (where a core is left for it) with a writer running `synchronize_rcu`
/// back to back. Returns points in the criterion groups' shape, and writer rates.
fn liburcu(root: &Path) -> Result<(Vec<Point>, Vec<WriterRate>), String> {
    let dir = root.join("target/rcuref-bench");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let bin = dir.join("memb_read");
    memb_harness(root, "memb_read.c", &bin)?;
    let (mut points, mut rates) = (Vec::new(), Vec::new());
    let field = |out: &str, key: &str| -> Result<f64, String> {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("no {key} in the harness output: {out}"))
    };
    for t in thread_counts() {
        let modes: &[&str] = if t == 1 || t < cores() {
            &["idle", "writer"]
        } else {
            &["idle"]
        };
        for mode in modes {
            let out = run(Command::new(&bin).args([&t.to_string(), "20000000", mode]))?;
            let ns = field(&out, "ns_per_section=")?;
            let group = if *mode == "idle" {
                "read_side_contended"
            } else {
                "read_side_with_writer"
            };
            points.push(Point {
                group: group.into(),
                function: MEMB.into(),
                param: Some(t.to_string()),
                median_ns: ns,
            });
            if *mode == "idle" && t == 1 {
                points.push(Point {
                    group: "read_side".into(),
                    function: MEMB.into(),
                    param: None,
                    median_ns: ns,
                });
            }
            if *mode == "writer" {
                rates.push((MEMB.to_string(), t, field(&out, "writer_ops_per_s=")?));
            }
        }
    }
    Ok((points, rates))
}

/// The writer rates the read-side benches recorded: (label, threads, operations/s).
fn writer_rates(root: &Path) -> Vec<WriterRate> {
    let text = std::fs::read_to_string(root.join("target/rcuref-bench/writer_rates.tsv"))
        .unwrap_or_default();
    let mut latest: BTreeMap<(String, usize), f64> = BTreeMap::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        if let [label, t, r] = f[..] {
            if let (Ok(t), Ok(r)) = (t.parse(), r.parse()) {
                latest.insert((label.to_string(), t), r);
            }
        }
    }
    latest.into_iter().map(|((l, t), r)| (l, t, r)).collect()
}

/// One convoy row from `convoy.json`.
struct Convoy {
    writer: String,
    threads: usize,
    walk: String,
    lookups_per_s: f64,
    p50_ns: f64,
    p99_ns: f64,
    writer_ops_per_s: f64,
}

fn convoy_rows(root: &Path) -> Result<Vec<Convoy>, String> {
    let text = std::fs::read_to_string(root.join("target/rcuref-bench/convoy.json"))
        .map_err(|e| format!("convoy.json: {e}"))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let rows = v.as_array().ok_or("convoy.json: not an array")?;
    rows.iter()
        .map(|r| {
            Some(Convoy {
                writer: r["writer"].as_str()?.to_string(),
                threads: r["threads"].as_u64()? as usize,
                walk: r["walk"].as_str()?.to_string(),
                lookups_per_s: r["lookups_per_s"].as_f64()?,
                p50_ns: r["p50_ns"].as_f64()?,
                p99_ns: r["p99_ns"].as_f64()?,
                writer_ops_per_s: r["writer_ops_per_s"].as_f64()?,
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| "convoy.json: a row lacks a field".to_string())
}

/// One grace-period row (`benches/src/bin/gp.rs`, `benches/liburcu/memb_gp.c`).
struct GpRow {
    row: String,
    threads: usize,
    who: &'static str,
    median: f64,
    p99: f64,
    unit: String,
    /// `read-paced`: the writer's achieved grace periods per second.
    writer: Option<f64>,
}

const GP_WHO: [&str; 4] = [
    "rcuref",
    "rcuref (asymmetric fences)",
    "liburcu memb",
    "rcuref (fence chosen at run time)",
];

/// Runs every grace-period row with each of the four binaries: rcuref's static full
/// fence (`default-features = false`), its asymmetric-fence build, liburcu's memb
/// flavour, and rcuref's default build on Linux (the fence chosen at run time).
fn gp_rows(root: &Path) -> Result<Vec<GpRow>, String> {
    let dir = root.join("target/rcuref-bench");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let memb = dir.join("memb_gp");
    memb_harness(root, "memb_gp.c", &memb)?;
    let bins: [PathBuf; 4] = [
        bench_bin(root, "gp", Build::Plain)?,
        bench_bin(root, "gp", Build::Asym)?,
        memb,
        bench_bin(root, "gp", Build::Auto)?,
    ];
    // Never more runnable threads than cores (the idle reader sleeps).
    let counts: Vec<usize> = thread_counts()
        .into_iter()
        .filter(|&t| t <= cores())
        .collect();
    let mut jobs: Vec<(&str, usize)> = vec![("latency", 1), ("latency-reader", 1)];
    if cores() >= 2 {
        jobs.push(("read-paced", 1)); // a reader and a writer
    }
    for &t in &counts {
        jobs.push(("throughput", t));
    }
    for &t in &counts {
        jobs.push(("defer", t));
    }
    let mut rows = Vec::new();
    for (row, t) in jobs {
        for (who, bin) in GP_WHO.iter().zip(&bins) {
            let out = run(Command::new(bin).args([row, &t.to_string()]))?;
            let field = |key: &str| -> Result<String, String> {
                out.split_whitespace()
                    .find_map(|w| w.strip_prefix(key))
                    .map(str::to_string)
                    .ok_or_else(|| format!("no {key} in `{row}` output: {out}"))
            };
            let num = |key: &str| -> Result<f64, String> {
                field(key)?.parse().map_err(|e| format!("{key}: {e}"))
            };
            rows.push(GpRow {
                row: row.to_string(),
                threads: t,
                who,
                median: num("median=")?,
                p99: num("p99=")?,
                unit: field("unit=")?,
                writer: num("writer=").ok(),
            });
        }
    }
    Ok(rows)
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let rustc = run(Command::new("rustc").arg("-V")).unwrap_or_default();
    format!("{cpu}, {cores} cores; {}", rustc.trim())
}

/// The markers around the C read-section rows in REPORT.md, which `--c-read` replaces.
const C_READ_BEGIN: &str = "<!-- c-read section begins -->";
const C_READ_END: &str = "<!-- c-read section ends -->";

/// The machine's load averages (`/proc/loadavg`'s first three fields).
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The read section from C: rcuref's C API through a context and through the current
/// context (`benches/liburcu/ffi_read.c`, against the host archive), liburcu memb in the
/// same process, and the Rust `Reader` section (`benches/src/bin/read_loop.rs`, run just
/// after it), at 1 thread and at 2 (each its own slot): the report's section, markers
/// included.
fn c_read_rows(root: &Path, how: &str) -> Result<String, String> {
    crate::install::liburcu_dev()?;
    crate::ffi::build_lib(None)?;
    let dir = root.join("target/rcuref-bench");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let bin = dir.join("ffi_read");
    run(Command::new("cc")
        .args(["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(root.join("ffi/include"))
        .arg("-o")
        .arg(&bin)
        .arg(root.join("benches/liburcu/ffi_read.c"))
        .arg(root.join("target/ffi/librcuref_ffi.a"))
        .args(["-lurcu-memb", "-lpthread"]))?;
    let rust = bench_bin(root, "read_loop", Build::Plain)?;
    let rust_auto = bench_bin(root, "read_loop", Build::Auto)?;
    let field = |out: &str, mode: &str| -> Result<f64, String> {
        out.lines()
            .find(|l| l.contains(&format!("mode={mode} ")))
            .and_then(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix("ns_per_section="))
            })
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("no {mode} time in the harness output: {out}"))
    };
    let load_before = load();
    let iterations = "20000000";
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{C_READ_BEGIN}\n## read section from C: rcuref's C API, the Rust Reader, liburcu memb\n\n\
         One thread, then two at once, each with its own reader (its own slot of domain 0, \
         or its own liburcu registration), each timing 20,000,000 sections (lock, compiler \
         barrier, unlock) in a tight loop after a common start; the median over threads and \
         7 rounds of one thread's ns per section. `benches/liburcu/ffi_read.c` runs the three \
         C modes in one process, taking turns within each round: liburcu memb's \
         `rcu_read_lock`/`rcu_read_unlock` (inlined, `_LGPL_SOURCE`), \
         `rcuref_read_lock`/`rcuref_read_unlock` through a `rcuref_ctx` (calls into \
         `librcuref_ffi.a`; each loads the slot's owner word) and \
         `rcuref_rcu_read_lock`/`rcuref_rcu_read_unlock` (the same, through the function \
         registered with `rcuref_set_current_context`, here one returning a thread-local \
         context). The Rust `Reader` row (`reader.lock()` and the guard's drop, \
         `benches/src/bin/read_loop.rs`, same protocol) runs just after, in its own process. \
         \"vs memb\": this row's time / memb's at the same thread count in this run (above 1: \
         slower than memb). Produced by `{how}` on {}; load averages {load_before} before.{}",
        machine(),
        if how.ends_with("--c-read") {
            " This section alone was measured then: compare its rows with each other, not \
             with the other sections' numbers, which come from another run (perhaps on \
             another machine)."
        } else {
            ""
        }
    );
    let _ = writeln!(
        md,
        "\n| section | threads | ns per section | vs memb |\n|---|---|---|---|"
    );
    for t in [1usize, 2] {
        let c = run(Command::new(&bin).args([&t.to_string(), iterations]))?;
        let r = run(Command::new(&rust).args([&t.to_string(), iterations]))?;
        let ra = run(Command::new(&rust_auto).args([&t.to_string(), iterations]))?;
        print!("{c}{r}{ra}");
        let memb = field(&c, "memb")?;
        for (label, ns) in [
            ("liburcu memb rcu_read_lock+unlock (C)", memb),
            (
                "rcuref_read_lock+unlock through a rcuref_ctx (C)",
                field(&c, "ctx")?,
            ),
            (
                "rcuref_rcu_read_lock+unlock, current context (C)",
                field(&c, "current")?,
            ),
            (
                "rcuref Reader lock+unlock, static full fence (Rust, no default features)",
                field(&r, "reader")?,
            ),
            (
                "rcuref Reader lock+unlock, the default build on Linux: fence chosen at run time, membarrier (Rust)",
                field(&ra, "reader")?,
            ),
        ] {
            let _ = writeln!(md, "| {label} | {t} | {} | {:.2} |", fmt_ns(ns), ns / memb);
        }
    }
    let _ = writeln!(md, "\nLoad averages after: {}.\n{C_READ_END}\n", load());
    Ok(md)
}

const URCU_BEGIN: &str = "<!-- urcu section begins -->";
const URCU_END: &str = "<!-- urcu section ends -->";
/// How long `latency-preempted`'s reader sleeps in its section (`PREEMPTED_US` in
/// benches/src/bin/gp.rs and benches/liburcu/memb_gp.c): for the report's words.
const PREEMPTED_US: u64 = 100;

/// Runs per cell of the test_urcu rows (the cell is their median).
const URCU_ROUNDS: usize = 5;

/// liburcu's `test_urcu` shape (`gp urcu` / `urcu-yield`, `memb_gp urcu`): readers in
/// tight loops, which outnumber the cores from 4 up, and one writer calling synchronize
/// back to back for a second: the writer's grace periods per second and each reader's
/// reads per second, rcuref sleeping (both modes) and yielding beside memb.
fn urcu_rows(root: &Path, how: &str) -> Result<String, String> {
    crate::install::liburcu_dev()?;
    let dir = root.join("target/rcuref-bench");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let memb = dir.join("memb_gp");
    memb_harness(root, "memb_gp.c", &memb)?;
    let mb = dir.join("mb_gp");
    mb_harness(root, &mb)?;
    let refused = dir.join("no_membarrier");
    run(Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&refused)
        .arg(root.join("benches/liburcu/no_membarrier.c")))?;
    let plain = bench_bin(root, "gp", Build::Plain)?;
    let asym = bench_bin(root, "gp", Build::Asym)?;
    let auto = bench_bin(root, "gp", Build::Auto)?;
    // memb first and mb second: the ratios' baselines. A row's command is its program
    // and the arguments before the row's name.
    let memb_args = [memb.as_os_str()];
    let who: [(&str, &Path, &[&std::ffi::OsStr], &str); 7] = [
        ("liburcu memb", &memb, &[], "urcu"),
        (
            "liburcu mb (a full fence in the read side, as the static full fence)",
            &mb,
            &[],
            "urcu",
        ),
        (
            "liburcu memb with membarrier refused (its fallback: full fences, as mb)",
            &refused,
            &memb_args,
            "urcu",
        ),
        (
            "rcuref static full fence (no default features), sleeping wait (std_sleeping)",
            &plain,
            &[],
            "urcu",
        ),
        (
            "rcuref asymmetric fences, sleeping wait",
            &asym,
            &[],
            "urcu",
        ),
        (
            "rcuref default on Linux: fence chosen at run time (membarrier), sleeping wait",
            &auto,
            &[],
            "urcu",
        ),
        (
            "rcuref static full fence, yielding wait (forever(yield_now))",
            &plain,
            &[],
            "urcu-yield",
        ),
    ];
    let num = |out: &str, key: &str| -> Result<f64, String> {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("no {key} in: {out}"))
    };
    // Runs a row: its program with the arguments before the row's name, then `args`,
    // and prints what it said. A row run through the launcher that refuses membarrier
    // must say that memb fell back.
    let run_row = |label: &str,
                   bin: &Path,
                   pre: &[&std::ffi::OsStr],
                   args: &[&str]|
     -> Result<String, String> {
        let out = run(Command::new(bin).args(pre).args(args))?;
        print!("{label}: {out}");
        if !pre.is_empty() && !out.contains("membarrier=0") {
            return Err(format!("{label}: memb did not fall back: {out}"));
        }
        Ok(out)
    };
    let load_before = load();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{URCU_BEGIN}\n## test_urcu shape: readers that outnumber the cores, one writer\n\n\
         `R` reader threads run read sections in a tight loop while one writer calls \
         `synchronize` back to back for a second (`benches/src/bin/gp.rs` rows `urcu`, \
         `urcu-yield`; `benches/liburcu/memb_gp.c` row `urcu`), on {} cores: from 4 readers \
         up the threads outnumber the cores and a reader is often descheduled inside its \
         section. The rows \"writer paced to memb's GP/s\" hold the sleeping writer to memb's \
         rate in the same run (sleeping off the gap), so the readers' rates compare under \
         the same writer load. Each cell is the median of {URCU_ROUNDS} one-second runs, taken \
         round-robin over the rows. \"GP/s\": the writer's grace periods per second; \"reads/s\": per reader; \
         \"x memb\", \"x mb\": this row / memb's (mb's) in the same run (above 1: more). liburcu's \
         mb flavour runs a full fence in its read side, as rcuref's static full fence \
         (`default-features = false`, or firmware without a heavy fence) does, and is its \
         counterpart; memb is the counterpart of the heavy-fence modes. Where membarrier \
         is missing (the platforms the static full fence is for), memb itself falls back to \
         the full fences of mb's read side: the row \"membarrier refused\" runs memb so \
         (`benches/liburcu/no_membarrier.c`, a seccomp filter). Produced by \
         `{how}` on {}; load averages {load_before} before.",
        cores(),
        machine()
    );
    let _ = writeln!(
        md,
        "\n| readers | implementation | GP/s | x memb | x mb | reads/s per reader | x memb | x mb |\n|---|---|---|---|---|---|---|---|"
    );
    // Each row is the median of URCU_ROUNDS runs, taken round-robin (every row once,
    // then again), so that a slow spell of the machine lands on all rows alike; the
    // one-second runs of the 1-reader rows differ by 10-20% from run to run.
    let median = |mut v: Vec<f64>| -> f64 {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    for r in [1usize, 2, 4, 8] {
        let mut free: Vec<Vec<(f64, f64)>> = vec![Vec::new(); who.len()];
        for _ in 0..URCU_ROUNDS {
            for ((label, bin, pre, row), runs) in who.iter().zip(&mut free) {
                let out = run_row(label, bin, pre, &[row, &r.to_string()])?;
                runs.push((num(&out, "median=")?, num(&out, "reads=")?));
            }
        }
        let rows: Vec<(f64, f64)> = free
            .into_iter()
            .map(|runs| {
                (
                    median(runs.iter().map(|x| x.0).collect()),
                    median(runs.iter().map(|x| x.1).collect()),
                )
            })
            .collect();
        let ((bg, br), (mg, mr)) = (rows[0], rows[1]);
        for ((label, _, _, _), (gps, reads)) in who.iter().zip(&rows) {
            let _ = writeln!(
                md,
                "| {r} | {label} | {gps:.0} | {:.2} | {:.2} | {reads:.3e} | {:.2} | {:.2} |",
                gps / bg,
                gps / mg,
                reads / br,
                reads / mr
            );
        }
        // The readers under the same writer load as memb's: each sleeping build of
        // rcuref again, its writer held to memb's (median) grace periods per second.
        let sleeping: Vec<_> = who
            .iter()
            .filter(|(label, _, _, row)| label.starts_with("rcuref") && *row == "urcu")
            .collect();
        let mut paced: Vec<Vec<(f64, f64)>> = vec![Vec::new(); sleeping.len()];
        for _ in 0..URCU_ROUNDS {
            for ((label, bin, _, _), runs) in sleeping.iter().zip(&mut paced) {
                let out = run(Command::new(bin)
                    .args(["urcu-paced", &r.to_string()])
                    .env("RCUREF_URCU_PACE", format!("{bg:.1}")))?;
                print!("{label}, paced: {out}");
                runs.push((num(&out, "median=")?, num(&out, "reads=")?));
            }
        }
        for ((label, _, _, _), runs) in sleeping.iter().zip(paced) {
            let gps = median(runs.iter().map(|x| x.0).collect());
            let reads = median(runs.iter().map(|x| x.1).collect());
            let _ = writeln!(
                md,
                "| {r} | {label}, writer paced to memb's GP/s | {gps:.0} | {:.2} | {:.2} | {reads:.3e} | {:.2} | {:.2} |",
                gps / bg,
                gps / mg,
                reads / br,
                reads / mr
            );
        }
    }
    // The preempted reader: the wake-up's latency when busy threads fill the cores.
    let _ = writeln!(
        md,
        "\n### a reader preempted inside its section: from its unlock to the waiter's return\n\n\
         Row `latency-preempted` of the same binaries: a reader enters its section, the \
         writer begins a sleeping `synchronize` (memb: `synchronize_rcu`, which sleeps on its \
         futex), the reader sleeps {} µs inside its section while `H` busy threads occupy \
         the cores, then unlocks; the time from its unlock to the writer's return, median \
         and p99 of 2000 rounds, each cell the median of {URCU_ROUNDS} runs taken \
         round-robin (one run's median is bimodal: tens of microseconds when the waiter \
         gets a core at the wake, milliseconds when the scheduler runs the busy threads \
         first; one such run gave a 3.8 ms median where three more of the same binary \
         gave 23-43 µs). \"x memb\": memb's time / this row's (above 1: sooner \
         than memb).\n\n\
         | busy threads | implementation | median | p99 | x memb (median) | x memb (p99) |\n\
         |---|---|---|---|---|---|",
        PREEMPTED_US
    );
    let sleepers: Vec<(&str, &Path, &[&std::ffi::OsStr])> = who
        .iter()
        .filter(|(_, _, _, row)| *row == "urcu")
        .map(|(label, bin, pre, _)| (*label, *bin, *pre))
        .collect();
    for h in [cores(), 2 * cores()] {
        let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new(); sleepers.len()];
        for _ in 0..URCU_ROUNDS {
            for ((label, bin, pre), runs) in sleepers.iter().zip(&mut runs) {
                let out = run_row(label, bin, pre, &["latency-preempted", &h.to_string()])?;
                runs.push((num(&out, "median=")?, num(&out, "p99=")?));
            }
        }
        let mut base: Option<(f64, f64)> = None;
        for ((label, _, _), runs) in sleepers.iter().zip(runs) {
            let m = median(runs.iter().map(|x| x.0).collect());
            let p = median(runs.iter().map(|x| x.1).collect());
            let (bm, bp) = *base.get_or_insert((m, p));
            let _ = writeln!(
                md,
                "| {h} | {label} | {} | {} | {:.2} | {:.2} |",
                fmt_ns(m),
                fmt_ns(p),
                bm / m.max(1.0),
                bp / p.max(1.0)
            );
        }
    }
    let _ = writeln!(md, "\nLoad averages after: {}.\n{URCU_END}\n", load());
    Ok(md)
}

/// Puts `rows` (a section between `begin` and `end`) into REPORT.md in place of the
/// one there, or before the convoy section.
fn replace_section(root: &Path, rows: &str, begin: &str, end: &str) -> Result<(), String> {
    let path = root.join("docs/bench/REPORT.md");
    let report = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let merged = match (report.find(begin), report.find(end)) {
        (Some(b), Some(e)) if b < e => {
            let stop = e + end.len();
            let stop = stop + report[stop..].find('\n').map_or(0, |i| i + 1);
            let stop = stop + usize::from(report[stop..].starts_with('\n'));
            format!("{}{rows}{}", &report[..b], &report[stop..])
        }
        _ => match report.find("## convoy") {
            Some(at) => format!("{}{rows}{}", &report[..at], &report[at..]),
            None => format!("{report}\n{rows}"),
        },
    };
    std::fs::write(&path, merged).map_err(|e| e.to_string())?;
    println!("bench: wrote a section into {}", path.display());
    Ok(())
}

/// `cargo xtask bench --c-read`: measures only the C read-section rows and puts them in
/// REPORT.md in place of the ones there (or before the convoy section).
fn c_read_only(root: &Path) -> Result<(), String> {
    let rows = c_read_rows(root, "cargo xtask bench --c-read")?;
    replace_section(root, &rows, C_READ_BEGIN, C_READ_END)
}

pub fn bench(args: &[String]) -> Result<(), String> {
    if args.iter().any(|a| a == "--icount") {
        return crate::icount::run();
    }
    let quick = args.iter().any(|a| a == "--quick");
    let root = workspace_root();
    if args.iter().any(|a| a == "--c-read") {
        return c_read_only(&root);
    }
    if args.iter().any(|a| a == "--urcu") {
        let rows = urcu_rows(&root, "cargo xtask bench --urcu")?;
        return replace_section(&root, &rows, URCU_BEGIN, URCU_END);
    }
    crate::install::bench_tools()?;
    let crit_dir = root.join("target").join("criterion");
    let _ = std::fs::remove_dir_all(&crit_dir);
    let _ = std::fs::remove_file(root.join("target/rcuref-bench/writer_rates.tsv"));
    let timing: &[&str] = if quick {
        &["--warm-up-time", "0.3", "--measurement-time", "1"]
    } else {
        &[]
    };
    println!("bench: criterion (refcount, RCU read side, pool) ...");
    let mut c = Command::new("cargo");
    c.current_dir(&root)
        .args([
            "bench",
            "-q",
            "-p",
            "rcuref-bench",
            "--bench",
            "refcount",
            "--bench",
            "rcu_read",
            "--bench",
            "pool",
            "--",
        ])
        .args(timing);
    let text = run(&mut c)?;
    std::fs::write(crate::steps::log_dir().join("bench-criterion.log"), &text).ok();

    // Problems with the optional comparisons are reported, not fatal: the rest of the
    // report still means something.
    let mut notes: Vec<String> = Vec::new();
    println!("bench: criterion, read side in the asymmetric-fence build (membarrier) ...");
    let asym = run(Command::new("cargo")
        .current_dir(&root)
        .env("RUSTFLAGS", "--cfg rcuref_asymmetric_fence")
        .env("CARGO_TARGET_DIR", root.join("target/bench-asym"))
        .env("CRITERION_HOME", &crit_dir)
        .args([
            "bench",
            "-q",
            "-p",
            "rcuref-bench",
            "--features",
            "membarrier",
            "--bench",
            "rcu_read",
            "--",
        ])
        .args(timing));
    match asym {
        Ok(t) => {
            std::fs::write(crate::steps::log_dir().join("bench-asym.log"), t).ok();
        }
        Err(e) => notes.push(format!("asymmetric-fence build not measured: {e}")),
    }
    println!("bench: liburcu memb harness ...");
    let (memb_points, memb_rates) = match liburcu(&root) {
        Ok(r) => r,
        Err(e) => {
            notes.push(format!("liburcu memb not measured: {e}"));
            (Vec::new(), Vec::new())
        }
    };
    println!("bench: grace periods (latency, throughput, deferred frees) ...");
    let gp = match gp_rows(&root) {
        Ok(r) => r,
        Err(e) => {
            notes.push(format!("grace-period rows not measured: {e}"));
            Vec::new()
        }
    };
    println!("bench: the read section from C ...");
    let c_read = match c_read_rows(&root, "cargo xtask bench") {
        Ok(r) => r,
        Err(e) => {
            notes.push(format!("the read section from C not measured: {e}"));
            String::new()
        }
    };
    println!("bench: test_urcu shape (readers that outnumber the cores) ...");
    let urcu = match urcu_rows(&root, "cargo xtask bench") {
        Ok(r) => r,
        Err(e) => {
            notes.push(format!("the test_urcu rows not measured: {e}"));
            String::new()
        }
    };
    println!("bench: convoy ...");
    let convoy_text = run(Command::new("cargo").current_dir(&root).args([
        "bench",
        "-q",
        "-p",
        "rcuref-bench",
        "--bench",
        "convoy",
    ]))?;
    println!("{}", convoy_text.trim());
    let convoy = convoy_rows(&root)?;
    println!("bench: callgrind instruction counts ...");
    let ops_bin = bench_bin(&root, "ops", Build::Plain)?;
    let n = 200_000;
    let empty = callgrind(&ops_bin, "empty", n)?;
    let mut instr = Vec::new();
    for (op, label) in [
        ("fileref_get_put", "FileRef get+put"),
        ("cas_get_put", "CAS-loop inc_not_zero+dec"),
        ("arc_clone_drop", "Arc clone+drop"),
        ("rcu_read", "rcuref read lock+unlock"),
        ("epoch_pin", "crossbeam-epoch pin"),
        ("pool_alloc_free", "rcuref Pool alloc+free"),
        ("heapless_alloc_free", "heapless box_pool alloc+free"),
    ] {
        let ir = callgrind(&ops_bin, op, n)?;
        instr.push((
            label.to_string(),
            (ir.saturating_sub(empty)) as f64 / n as f64,
        ));
    }
    // The same loop in the asymmetric-fence build, and liburcu memb's (C, inlined).
    let asym_ops = bench_bin(&root, "ops", Build::Asym).and_then(|bin| {
        let e = callgrind(&bin, "empty", n)?;
        Ok(callgrind(&bin, "rcu_read", n)?.saturating_sub(e))
    });
    match asym_ops {
        Ok(ir) => instr.push((
            "rcuref read lock+unlock (asymmetric fences)".into(),
            ir as f64 / n as f64,
        )),
        Err(e) => notes.push(format!("asymmetric-fence instructions not counted: {e}")),
    }
    let memb_ops = root.join("target/rcuref-bench/memb_ops");
    let memb_ir = memb_harness(&root, "memb_ops.c", &memb_ops).and_then(|_| {
        let e = callgrind(&memb_ops, "empty", n)?;
        Ok(callgrind(&memb_ops, "read", n)?.saturating_sub(e))
    });
    match memb_ir {
        Ok(ir) => instr.push(("liburcu memb read_lock+unlock".into(), ir as f64 / n as f64)),
        Err(e) => notes.push(format!("liburcu memb instructions not counted: {e}")),
    }
    println!("bench: instruction counts per target (QEMU) ...");
    let icount = crate::icount::report().unwrap_or_else(|e| {
        format!(
            "{}\n\n**Note:** not measured: {}\n\n",
            crate::icount::HEADING,
            e.lines().next().unwrap_or("")
        )
    });
    println!("bench: code size per target ...");
    crate::install::targets(crate::TARGETS)?;
    let mut sizes = Vec::new();
    for t in crate::TARGETS {
        sizes.push((*t, crate::size::measure(t)?));
    }

    // ---- the report ----------------------------------------------------------------
    let out_dir = root.join("docs").join("bench");
    std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
    let mut points = criterion_points(&crit_dir);
    points.extend(memb_points);
    let mut rates = writer_rates(&root);
    rates.extend(memb_rates);
    let mut groups: BTreeMap<String, Vec<&Point>> = BTreeMap::new();
    for p in &points {
        groups.entry(p.group.clone()).or_default().push(p);
    }
    let median = |g: &str, f: &str, t: Option<usize>| -> Option<f64> {
        points
            .iter()
            .find(|p| {
                p.group == g
                    && p.function == f
                    && p.param.as_deref().map(|v| v.parse::<usize>().ok()) == t.map(Some)
            })
            .map(|p| p.median_ns)
    };
    let mut md = String::new();
    let _ = writeln!(md, "# rcuref benchmark report\n");
    let _ = writeln!(
        md,
        "Machine: {}. Generated by `cargo xtask bench{}`; ratios are taken within this one run. \
         Thread counts: {:?} (`RCUREF_BENCH_THREADS`).",
        machine(),
        if quick { " --quick" } else { "" },
        thread_counts()
    );
    let _ = writeln!(md, "Timings are criterion medians (lower is better). \"vs rcuref\" = this row's time / the rcuref row's time at the same thread count (above 1: rcuref is faster). Contended rows give the time per operation **per thread**, all threads running at once.\n");
    for n in &notes {
        let _ = writeln!(md, "**Note:** {n}\n");
    }

    // The headline ratios, each from rows below.
    let tmax = *thread_counts().iter().max().unwrap_or(&1);
    let ours = "rcuref lock+unlock";
    let asym = "rcuref lock+unlock (asymmetric fences)";
    let cb = "crossbeam-epoch pin";
    let mut summary = Vec::new();
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if a > 0.0 => Some(b / a),
        _ => None,
    };
    if let (Some(one), Some(max)) = (
        median("read_side_contended", ours, Some(1)),
        median("read_side_contended", ours, Some(tmax)),
    ) {
        summary.push(format!(
            "Read section, {tmax} threads on one domain: {} per thread, {:.2}x the 1-thread time ({}).",
            fmt_ns(max),
            max / one,
            fmt_ns(one)
        ));
    }
    for t in thread_counts() {
        if let Some(r) = ratio(
            median("read_side_contended", ours, Some(t)),
            median("read_side_contended", cb, Some(t)),
        ) {
            summary.push(format!(
                "{t} thread(s): crossbeam-epoch pin takes {r:.2}x the time of an rcuref read section."
            ));
        }
    }
    if let Some(a) = median("read_side_contended", asym, Some(tmax)) {
        let vs = |f: &str| {
            median("read_side_contended", f, Some(tmax))
                .map(|x| format!("{:.2}x", x / a))
                .unwrap_or_else(|| "n/a".into())
        };
        summary.push(format!(
            "Asymmetric fences, {tmax} threads: {} per section; crossbeam pin takes {} that, liburcu memb {}.",
            fmt_ns(a),
            vs(cb),
            vs(MEMB)
        ));
    }
    if let Some(r) = ratio(
        median("read_side_with_writer", ours, Some(1)),
        median("read_side_with_writer", cb, Some(1)),
    ) {
        summary.push(format!(
            "Read section while a writer runs back to back: crossbeam pin / rcuref = {r:.2} (below 1: rcuref is slower); writer rates and the cost per grace period are in that section."
        ));
    }
    let convoy_max = convoy.iter().map(|c| c.threads).max().unwrap_or(1);
    for w in ["busy", "paced"] {
        let get = |walk: &str| {
            convoy
                .iter()
                .find(|c| c.writer == w && c.threads == convoy_max && c.walk == walk)
        };
        if let (Some(rcu), Some(rw), Some(rf)) = (get("RCU-walk"), get("RwLock"), get("ref-walk")) {
            summary.push(format!(
                "Convoy, {w} writer, {convoy_max} reader thread(s) + the writer: RCU-walk does {:.2}x the lookups of RwLock and {:.2}x those of ref-walk, while its writer makes {:.2}x the RwLock writer's changes.",
                rcu.lookups_per_s / rw.lookups_per_s,
                rcu.lookups_per_s / rf.lookups_per_s,
                rcu.writer_ops_per_s / rw.writer_ops_per_s.max(1e-9)
            ));
        }
    }
    if let Some(r) = ratio(
        median("pool_alloc_free", "rcuref Pool alloc+free", None),
        median("pool_alloc_free", "heapless box_pool alloc+free", None),
    ) {
        let i = |l: &str| instr.iter().find(|(n, _)| n == l).map(|x| x.1);
        let ir = match (
            i("rcuref Pool alloc+free"),
            i("heapless box_pool alloc+free"),
        ) {
            (Some(a), Some(b)) => format!(" and {:.1} vs {:.1} instructions", a, b),
            _ => String::new(),
        };
        summary.push(format!(
            "Pool alloc+free: heapless box_pool takes {r:.2}x the time of rcuref's pool{ir}."
        ));
    }
    // A grace-period row's medians for rcuref, its asymmetric build and memb, if all three
    // were measured.
    let gp_all = |row: &str, t: usize| -> Option<[f64; 3]> {
        let get = |who: &str| {
            gp.iter()
                .find(|r| r.row == row && r.threads == t && r.who == who)
                .map(|r| r.median)
        };
        Some([get(GP_WHO[0])?, get(GP_WHO[1])?, get(GP_WHO[2])?])
    };
    if let Some([d, a, m]) = gp_all("latency", 1) {
        summary.push(format!(
            "Grace period with no reader in a section: rcuref static full fence {}, asymmetric {}, liburcu memb {}.",
            fmt_ns(d),
            fmt_ns(a),
            fmt_ns(m)
        ));
    }
    let t = tmax.min(cores());
    if let Some([d, a, m]) = gp_all("throughput", t) {
        summary.push(format!(
            "{t} concurrent synchronizers: {d:.0}/s rcuref static full fence, {a:.0}/s asymmetric, {m:.0}/s liburcu memb."
        ));
    }
    if let Some([d, a, m]) = gp_all("read-paced", 1) {
        summary.push(format!(
            "Read section under a writer at 20,000 grace periods/s on every side: rcuref static full fence {} ({:.2}x liburcu memb's {}), asymmetric {} ({:.2}x).",
            fmt_ns(d),
            d / m,
            fmt_ns(m),
            fmt_ns(a),
            a / m
        ));
    }
    let _ = writeln!(md, "## Summary\n");
    for l in &summary {
        let _ = writeln!(md, "* {l}");
    }
    let _ = writeln!(md);

    for (g, pts) in &groups {
        let mut pts = pts.clone();
        let num = |p: &Point| {
            p.param
                .as_deref()
                .unwrap_or("0")
                .parse::<u32>()
                .unwrap_or(0)
        };
        pts.sort_by_key(|p| (num(p), p.function.clone()));
        let with_rates = g == "read_side_with_writer";
        let _ = writeln!(
            md,
            "## {g}\n\n| benchmark | threads | median | vs rcuref |{}\n|---|---|---|---|{}",
            if with_rates {
                " writer ops/s | extra reader time per writer op |"
            } else {
                ""
            },
            if with_rates { "---|---|" } else { "" }
        );
        for p in &pts {
            let ours = pts
                .iter()
                .find(|q| {
                    q.param == p.param
                        && (q.function == "rcuref lock+unlock"
                            || q.function.starts_with("rcuref Pool")
                            || q.function.starts_with("FileRef get+put"))
                })
                .map(|q| q.median_ns);
            let ratio = ours
                .map(|o| format!("{:.2}", p.median_ns / o))
                .unwrap_or_default();
            let threads = p.param.clone().unwrap_or_else(|| "1".into());
            let mut extra = String::new();
            if with_rates {
                let t: usize = threads.parse().unwrap_or(1);
                let rate = rates
                    .iter()
                    .find(|(l, rt, _)| *l == p.function && *rt == t)
                    .map(|r| r.2);
                // The reader's extra time per writer operation: (time with the writer -
                // time alone) x sections per second per thread x threads / writer ops per
                // second. What a grace period (or deferred free, or write lock) costs the
                // readers, whatever the writer's pace.
                let idle = median("read_side_contended", &p.function, Some(t));
                let per_op = match (rate, idle) {
                    (Some(r), Some(idle)) if r > 0.0 => {
                        let extra_ns_per_s =
                            (p.median_ns - idle).max(0.0) / p.median_ns * 1e9 * t as f64;
                        fmt_ns(extra_ns_per_s / r)
                    }
                    _ => "n/a".into(),
                };
                extra = format!(
                    " {} | {per_op} |",
                    rate.map(|r| format!("{:.0}", r))
                        .unwrap_or_else(|| "n/a".into())
                );
            }
            let _ = writeln!(
                md,
                "| {} | {threads} | {} | {ratio} |{extra}",
                p.function,
                fmt_ns(p.median_ns)
            );
        }
        let file = format!("{g}.svg");
        let contended = pts.iter().any(|p| p.param.is_some());
        if g == "refcount_contended" {
            let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
            for p in &pts {
                let threads: f64 = p.param.as_deref().unwrap_or("1").parse().unwrap_or(1.0);
                // Throughput: pairs per second over all threads, in millions.
                series
                    .entry(p.function.clone())
                    .or_default()
                    .push((threads, threads * 1e3 / p.median_ns));
            }
            std::fs::write(
                out_dir.join(&file),
                line_svg(
                    "get+put on one counter: total throughput",
                    "M pairs/s",
                    &series,
                ),
            )
            .map_err(|e| e.to_string())?;
        } else if contended {
            let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
            for p in &pts {
                let threads: f64 = p.param.as_deref().unwrap_or("1").parse().unwrap_or(1.0);
                series
                    .entry(p.function.clone())
                    .or_default()
                    .push((threads, p.median_ns));
            }
            std::fs::write(
                out_dir.join(&file),
                line_svg(
                    &format!("{g}: time per operation per thread"),
                    "ns",
                    &series,
                ),
            )
            .map_err(|e| e.to_string())?;
        } else {
            let bars: Vec<(String, f64)> = pts
                .iter()
                .map(|p| (p.function.clone(), p.median_ns))
                .collect();
            std::fs::write(out_dir.join(&file), bar_svg(g, "ns", &bars))
                .map_err(|e| e.to_string())?;
        }
        let _ = writeln!(md, "\n![{g}]({file})\n");
    }

    // ---- refscale: read sections by thread count, every mode side by side ----
    let cols = [ours, asym, MEMB, cb, "parking_lot RwLock read"];
    let _ = writeln!(
        md,
        "## refscale: ns per read section per thread, by thread count\n\n\
         The `read_side_contended` rows again, one line per thread count (all threads on \
         one domain at once). The same command on a bigger machine fills in more lines \
         (`benches/refscale.sh`).\n\n| threads | {} |\n|---|{}",
        cols.join(" | "),
        "---|".repeat(cols.len())
    );
    for t in thread_counts() {
        let cells: Vec<String> = cols
            .iter()
            .map(|f| {
                median("read_side_contended", f, Some(t))
                    .map(fmt_ns)
                    .unwrap_or_else(|| "n/a".into())
            })
            .collect();
        let _ = writeln!(md, "| {t} | {} |", cells.join(" | "));
    }
    let _ = writeln!(md);

    // ---- grace periods ----
    if !gp.is_empty() {
        let _ = writeln!(
            md,
            "## grace periods: latency, throughput, deferred frees\n\n\
             `benches/src/bin/gp.rs` (rcuref: the static full fence, `default-features = \
             false`; the asymmetric fences; the default build on Linux, the fence chosen at \
             run time, which finds membarrier here) and `benches/liburcu/memb_gp.c` \
             (liburcu memb), same protocol: **latency**, one `synchronize` with a registered \
             reader thread idle (median and p99 over batches of 64); **latency-reader**, from \
             a reader's unlock (after 20 µs in its section) to the return of the \
             `synchronize` begun when it entered; **read-paced**, one reader's time per \
             section while a writer calls `synchronize` at 20,000 per second on every side \
             (the same writer load; a busy writer's pace differs 30x between them); \
             **throughput**, threads calling \
             `synchronize` back to back (calls/s, all threads); **defer**, threads retiring \
             heap values (rcuref: a 64-place `DeferQueue` each, `defer_or_wait`; liburcu: \
             `call_rcu`, unbounded, its worker thread freeing) - frees/s, counted when freed; \
             in these two rows rcuref waits with the sleeping hook (`std_sleeping`), as \
             memb's `synchronize_rcu` sleeps, and the latency rows with a spinning one. \
             \"advantage\": liburcu's time / ours, or our rate / liburcu's (above 1: rcuref \
             is ahead).\n\n\
             | row | threads | rcuref static full fence | rcuref (asymmetric) | rcuref default (run time) | liburcu memb | advantage | advantage (asymmetric) | advantage (default) |\n\
             |---|---|---|---|---|---|---|---|---|"
        );
        let mut keys: Vec<(String, usize)> = Vec::new();
        for r in &gp {
            if !keys.contains(&(r.row.clone(), r.threads)) {
                keys.push((r.row.clone(), r.threads));
            }
        }
        for (row, t) in &keys {
            let get = |who: &str| {
                gp.iter()
                    .find(|r| r.row == *row && r.threads == *t && r.who == who)
            };
            let cell = |r: Option<&GpRow>| match r {
                Some(r) if r.writer.is_some() => format!(
                    "{} (writer {:.0}/s)",
                    fmt_ns(r.median),
                    r.writer.unwrap_or(0.0)
                ),
                Some(r) if r.unit == "ns" => {
                    format!("{} (p99 {})", fmt_ns(r.median), fmt_ns(r.p99))
                }
                Some(r) => format!("{:.0}/s", r.median),
                None => "n/a".into(),
            };
            let adv = |a: Option<&GpRow>, m: Option<&GpRow>| match (a, m) {
                (Some(a), Some(m)) if a.median > 0.0 && m.median > 0.0 => {
                    if a.unit == "ns" {
                        format!("{:.2}x", m.median / a.median)
                    } else {
                        format!("{:.2}x", a.median / m.median)
                    }
                }
                _ => "n/a".into(),
            };
            let (d, a, m, x) = (
                get(GP_WHO[0]),
                get(GP_WHO[1]),
                get(GP_WHO[2]),
                get(GP_WHO[3]),
            );
            let _ = writeln!(
                md,
                "| {row} | {t} | {} | {} | {} | {} | {} | {} | {} |",
                cell(d),
                cell(a),
                cell(x),
                cell(m),
                adv(d, m),
                adv(a, m),
                adv(x, m)
            );
        }
        let _ = writeln!(md);
    }

    md.push_str(&c_read);
    md.push_str(&urcu);
    let _ = writeln!(
        md,
        "## convoy: path lookups while a writer creates, renames, removes\n\n\
         Reader threads resolve `dir/file` while one writer changes entries back to back \
         (busy) or one change per 50 µs sleep (paced). RCU-walk: names tables read in the \
         section, no shared write; ref-walk: a reference per level; RwLock: the whole tree \
         behind `std::sync::RwLock`. Lookups/s are totals over all readers; latency is \
         sampled every 16th lookup; each row is the run with the median reader throughput \
         of three. Readers plus the writer never outnumber the cores \
         (on two cores: one reader), so no thread waits for a core; the writer's rate \
         stands beside the readers' because a starved writer makes readers look fast.\n\n\
         | writer | readers | walk | M lookups/s | vs RwLock | p50 | p99 | writer ops/s | writer vs RwLock's |\n\
         |---|---|---|---|---|---|---|---|---|"
    );
    for c in &convoy {
        let rw_row = convoy
            .iter()
            .find(|o| o.writer == c.writer && o.threads == c.threads && o.walk == "RwLock");
        let rw = rw_row.map(|o| o.lookups_per_s);
        let rw_writer = rw_row
            .filter(|o| o.writer_ops_per_s > 0.0)
            .map(|o| format!("{:.2}x", c.writer_ops_per_s / o.writer_ops_per_s))
            .unwrap_or_default();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2} | {} | {} ns | {} ns | {:.0} | {rw_writer} |",
            c.writer,
            c.threads,
            c.walk,
            c.lookups_per_s / 1e6,
            rw.map(|r| format!("{:.2}x", c.lookups_per_s / r))
                .unwrap_or_default(),
            c.p50_ns,
            c.p99_ns,
            c.writer_ops_per_s
        );
    }
    for w in ["busy", "paced"] {
        let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for c in convoy.iter().filter(|c| c.writer == w) {
            series
                .entry(c.walk.clone())
                .or_default()
                .push((c.threads as f64, c.lookups_per_s / 1e6));
        }
        let file = format!("convoy_{w}.svg");
        std::fs::write(
            out_dir.join(&file),
            line_svg(
                &format!("convoy, {w} writer: lookups per second, all readers"),
                "M/s",
                &series,
            ),
        )
        .map_err(|e| e.to_string())?;
        let _ = writeln!(md, "\n![convoy, {w} writer]({file})\n");
    }
    let _ = writeln!(md, "## instructions per operation (callgrind, x86_64, minus an empty loop)\n\n| operation | instructions |\n|---|---|");
    for (l, v) in &instr {
        let _ = writeln!(md, "| {l} | {v:.1} |");
    }
    std::fs::write(
        out_dir.join("instructions.svg"),
        bar_svg("instructions per operation (callgrind)", "instr", &instr),
    )
    .map_err(|e| e.to_string())?;
    let _ = writeln!(md, "\n![instructions](instructions.svg)\n");
    md.push_str(&icount);
    let _ = writeln!(md, "## code size per embedded target (bytes, release)\n");
    let cols: Vec<String> = sizes[0].1.keys().cloned().collect();
    let _ = writeln!(
        md,
        "| target | {} |\n|---|{}",
        cols.join(" | "),
        "---|".repeat(cols.len())
    );
    for (t, s) in &sizes {
        let _ = writeln!(
            md,
            "| {t} | {} |",
            cols.iter()
                .map(|c| s.get(c).copied().unwrap_or(0).to_string())
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    let path: PathBuf = out_dir.join("REPORT.md");
    std::fs::write(&path, md).map_err(|e| e.to_string())?;
    println!("bench: wrote {}", path.display());
    Ok(())
}
