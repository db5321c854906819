//! `cargo xtask bench`: runs the benchmarks and writes `docs/bench/REPORT.md` with SVG
//! charts beside it.
//!
//! * criterion (`benches/benches/{refcount,rcu_read,pool}.rs`): medians, and ratios taken
//!   within one run against the rcuref entry of each group;
//! * the convoy (`benches/benches/convoy.rs`): reader throughput and latency, RCU vs RwLock;
//! * callgrind instruction counts per operation (`benches/src/bin/ops.rs`, minus an
//!   empty loop), stable on a noisy machine;
//! * code size per embedded target (`cargo xtask size`'s measurement).
//!
//! `RCUREF_BENCH_THREADS=1,2,4,8,16` sets the thread counts of the contended runs.

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

pub fn bench(args: &[String]) -> Result<(), String> {
    let quick = args.iter().any(|a| a == "--quick");
    let root = workspace_root();
    let crit_dir = root.join("target").join("criterion");
    let _ = std::fs::remove_dir_all(&crit_dir);
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
    println!("bench: callgrind instruction counts ...");
    run(Command::new("cargo").current_dir(&root).args([
        "build",
        "-q",
        "--release",
        "-p",
        "rcuref-bench",
        "--bin",
        "ops",
    ]))?;
    let ops_bin = root.join("target/release/ops");
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
    ] {
        let ir = callgrind(&ops_bin, op, n)?;
        instr.push((
            label.to_string(),
            (ir.saturating_sub(empty)) as f64 / n as f64,
        ));
    }
    println!("bench: code size per target ...");
    crate::install::targets(crate::TARGETS)?;
    let mut sizes = Vec::new();
    for t in crate::TARGETS {
        sizes.push((*t, crate::size::measure(t)?));
    }

    // ---- the report ----------------------------------------------------------------
    let out_dir = root.join("docs").join("bench");
    std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
    let points = criterion_points(&crit_dir);
    let mut groups: BTreeMap<String, Vec<&Point>> = BTreeMap::new();
    for p in &points {
        groups.entry(p.group.clone()).or_default().push(p);
    }
    let mut md = String::new();
    let _ = writeln!(md, "# rcuref benchmark report\n");
    let _ = writeln!(
        md,
        "Machine: {}. Generated by `cargo xtask bench{}`; ratios are taken within this one run.",
        machine(),
        if quick { " --quick" } else { "" }
    );
    let _ = writeln!(md, "Timings are criterion medians (lower is better). \"vs rcuref\" = this row's time / the rcuref row's time (above 1: rcuref is faster).\n");
    for (g, pts) in &groups {
        let mut pts = pts.clone();
        pts.sort_by(|a, b| {
            (
                a.param
                    .clone()
                    .unwrap_or_default()
                    .parse::<u32>()
                    .unwrap_or(0),
                a.function.clone(),
            )
                .cmp(&(
                    b.param
                        .clone()
                        .unwrap_or_default()
                        .parse::<u32>()
                        .unwrap_or(0),
                    b.function.clone(),
                ))
        });
        let _ = writeln!(
            md,
            "## {g}\n\n| benchmark | threads | median | vs rcuref |\n|---|---|---|---|"
        );
        for p in &pts {
            let ours = pts
                .iter()
                .find(|q| {
                    q.param == p.param
                        && (q.function.starts_with("rcuref")
                            || q.function.starts_with("FileRef get+put"))
                })
                .map(|q| q.median_ns);
            let ratio = ours
                .map(|o| format!("{:.2}", p.median_ns / o))
                .unwrap_or_default();
            let _ = writeln!(
                md,
                "| {} | {} | {} | {ratio} |",
                p.function,
                p.param.clone().unwrap_or_else(|| "1".into()),
                fmt_ns(p.median_ns)
            );
        }
        let file = format!("{g}.svg");
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
    let _ = writeln!(
        md,
        "## convoy: path lookups while a writer creates, renames, removes\n\n```\n{}\n```\n",
        convoy_text.trim()
    );
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
