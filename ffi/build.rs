//! The integrator's build-time choices (docs/c-api.md, "Configuration"):
//! `RCUREF_FFI_DOMAINS` (default 2), `RCUREF_FFI_SLOTS` reader slots per domain
//! (default 8), `RCUREF_FFI_CALLBACKS` places per domain's call_rcu queue (default 64).

fn main() {
    let mut out = String::new();
    for (name, default, max) in [
        ("RCUREF_FFI_DOMAINS", 2usize, 64usize),
        ("RCUREF_FFI_SLOTS", 8, 1024),
        ("RCUREF_FFI_CALLBACKS", 64, 65536),
    ] {
        println!("cargo:rerun-if-env-changed={name}");
        let v = match std::env::var(name) {
            Ok(s) => match s.trim().parse::<usize>() {
                Ok(v) if (1..=max).contains(&v) => v,
                _ => panic!("{name}={s}: want a whole number from 1 to {max}"),
            },
            Err(_) => default,
        };
        let konst = name.trim_start_matches("RCUREF_FFI_");
        out.push_str(&format!("pub(crate) const {konst}: usize = {v};\n"));
    }
    let dir = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(dir.join("config.rs"), out).unwrap();
}
