//! `cargo xtask size [--save]`: bytes of machine code of each hot path, per embedded
//! target, release build, from the `rcuref-probe` crate's exported wrappers.
//!
//! Each probe is compiled to one object file (`-C codegen-units=1`); a probe's size is
//! its symbol's size (the inlined fast path plus the call into any cold path), and
//! "cold" is the total of the out-of-line slow paths it may call. Results are compared
//! with `docs/size-baseline.tsv`; `--save` rewrites that baseline.

use crate::steps::workspace_root;
use object::{Object, ObjectSymbol, SymbolKind};
use std::collections::BTreeMap;
use std::process::Command;

const BASELINE: &str = "docs/size-baseline.tsv";

/// Builds `package` for `target` into one object file and returns its text symbols.
fn symbols(target: &str, package: &str, extra: &[&str]) -> Result<Vec<(String, u64)>, String> {
    let root = workspace_root();
    let out = root
        .join("target")
        .join("size")
        .join(format!("{target}-{package}.o"));
    std::fs::create_dir_all(out.parent().unwrap()).map_err(|e| e.to_string())?;
    let emit = format!("--emit=obj={}", out.display());
    let st = Command::new("cargo")
        .current_dir(&root)
        .args([
            "rustc",
            "-q",
            "--release",
            "-p",
            package,
            "--target",
            target,
        ])
        .args(extra)
        .args(["--", &emit, "-C", "codegen-units=1"])
        .status()
        .map_err(|e| e.to_string())?;
    if !st.success() {
        return Err(format!("building {package} for {target} failed"));
    }
    let data = std::fs::read(&out).map_err(|e| e.to_string())?;
    let file = object::File::parse(&*data).map_err(|e| e.to_string())?;
    Ok(file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .map(|s| (s.name().unwrap_or("").to_string(), s.size()))
        .collect())
}

pub fn measure(target: &str) -> Result<BTreeMap<String, u64>, String> {
    let mut sizes = BTreeMap::new();
    let mut cold = 0;
    for (name, size) in symbols(target, "rcuref-probe", &[])? {
        if let Some(probe) = name.strip_prefix("rcuref_probe_") {
            sizes.insert(probe.to_string(), size);
        } else if COLD.iter().any(|c| name.contains(c)) {
            // The zone logic is generic: its out-of-line paths are instantiated in the
            // probe's object, once per counter width.
            cold += size;
        }
    }
    sizes.insert("(cold paths)".into(), cold);
    Ok(sizes)
}

/// The out-of-line slow paths of FileRef (`src/file_ref/zoned.rs`).
const COLD: &[&str] = &["get_slow", "inc_slow", "put_slow", "pull_back"];

pub fn run(args: &[String]) -> Result<(), String> {
    let save = args.iter().any(|a| a == "--save");
    crate::install::targets(crate::TARGETS)?;
    let baseline_path = workspace_root().join(BASELINE);
    let baseline: BTreeMap<(String, String), u64> = std::fs::read_to_string(&baseline_path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some((
                (f.next()?.to_string(), f.next()?.to_string()),
                f.next()?.parse().ok()?,
            ))
        })
        .collect();
    let mut tsv = String::from("# target\tprobe\tbytes (cargo xtask size --save)\n");
    let mut all = Vec::new();
    for t in crate::TARGETS {
        let sizes = measure(t)?;
        for (probe, bytes) in &sizes {
            tsv.push_str(&format!("{t}\t{probe}\t{bytes}\n"));
        }
        all.push((*t, sizes));
    }
    let probes: Vec<String> = all[0].1.keys().cloned().collect();
    print!("{:<30}", "bytes (release)");
    for p in &probes {
        print!("{p:>14}");
    }
    println!();
    for (t, sizes) in &all {
        print!("{t:<30}");
        for p in &probes {
            let now = sizes.get(p).copied().unwrap_or(0);
            let cell = match baseline.get(&(t.to_string(), p.clone())) {
                Some(&was) if was != now => format!("{now} ({:+})", now as i64 - was as i64),
                _ => now.to_string(),
            };
            print!("{cell:>14}");
        }
        println!();
    }
    if save {
        std::fs::create_dir_all(baseline_path.parent().unwrap()).map_err(|e| e.to_string())?;
        std::fs::write(&baseline_path, tsv).map_err(|e| e.to_string())?;
        println!("saved {BASELINE}");
    } else if !baseline.is_empty() {
        println!("(differences from {BASELINE} in parentheses)");
    }
    Ok(())
}
