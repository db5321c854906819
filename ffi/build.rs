//! The integrator's build-time choices (docs/c-api.md, "Configuration"):
//! `RCUREF_FFI_DOMAINS` (default 2), `RCUREF_FFI_SLOTS` reader slots per domain
//! (default 8), `RCUREF_FFI_TOKENS` slots per domain for read sections that another
//! context ends (`rcuref_down_read`, default 4), `RCUREF_FFI_CALLBACKS` places per
//! domain's call_rcu queue (default 64).
//!
//! Besides the Rust constants it writes `rcuref_config.h`, the same numbers as
//! `#define`s for C to check at compile time (and `RCUREF_FFI_DEBUG_OBJECTS`, 1 when
//! the crate's feature `debug-objects` is on, else 0), next to the archive
//! (`target/<triple>/<profile>/rcuref_config.h`, or `target/<profile>/` for the host):
//! the build directory's three levels above `OUT_DIR`, which is
//! `<that>/build/rcuref-ffi-<hash>/out`.

fn main() {
    let mut out = String::new();
    let mut header = String::from(
        "/* rcuref_config.h: the build-time configuration this librcuref_ffi.a was built\n \
         * with (written by ffi/build.rs; do not edit). */\n\
         #ifndef RCUREF_CONFIG_H\n#define RCUREF_CONFIG_H\n",
    );
    for (name, default, min, max) in [
        ("RCUREF_FFI_DOMAINS", 2usize, 1usize, 64usize),
        ("RCUREF_FFI_SLOTS", 8, 1, 1024),
        // 0: no `rcuref_down_read` (it answers RCUREF_EFULL).
        ("RCUREF_FFI_TOKENS", 4, 0, 1024),
        ("RCUREF_FFI_CALLBACKS", 64, 1, 65536),
    ] {
        println!("cargo:rerun-if-env-changed={name}");
        let v = match std::env::var(name) {
            Ok(s) => match s.trim().parse::<usize>() {
                Ok(v) if (min..=max).contains(&v) => v,
                _ => panic!("{name}={s}: want a whole number from {min} to {max}"),
            },
            Err(_) => default,
        };
        let konst = name.trim_start_matches("RCUREF_FFI_");
        out.push_str(&format!("pub(crate) const {konst}: usize = {v};\n"));
        if konst == "DOMAINS" {
            // `[f(0), f(1), ...]`: one element per domain, for statics whose elements
            // differ by their domain (each call queue borrows its own domain).
            let calls: Vec<String> = (0..v).map(|i| format!("$f({i})")).collect();
            out.push_str(&format!(
                "macro_rules! per_domain {{ ($f:expr) => {{ [{}] }}; }}\n",
                calls.join(", ")
            ));
        }
        header.push_str(&format!("#define {name} {v}u\n"));
    }
    // A cargo feature, not a variable: it turns on the library's `debug-callbacks`,
    // which only a feature can do. The define tells C which archive it links.
    let debug_objects = std::env::var_os("CARGO_FEATURE_DEBUG_OBJECTS").is_some();
    header.push_str(&format!(
        "#define RCUREF_FFI_DEBUG_OBJECTS {}\n",
        u8::from(debug_objects)
    ));
    // Likewise the fence chosen at run time (`rcuref_heavy_install`). Membarrier only
    // where it can be found: the feature does nothing for a target other than Linux, and
    // a C program that read 1 there would skip its own install.
    let auto_fence = std::env::var_os("CARGO_FEATURE_AUTO_FENCE").is_some();
    let membarrier = std::env::var_os("CARGO_FEATURE_MEMBARRIER").is_some()
        && std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    header.push_str(&format!(
        "#define RCUREF_FFI_AUTO_FENCE {}\n#define RCUREF_FFI_MEMBARRIER {}\n",
        u8::from(auto_fence),
        u8::from(membarrier)
    ));
    header.push_str("#endif /* RCUREF_CONFIG_H */\n");
    let dir = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(dir.join("config.rs"), out).unwrap();
    std::fs::write(dir.join("rcuref_config.h"), &header).unwrap();
    // Next to the archive, where C builds can find it.
    if let Some(artifacts) = dir.ancestors().nth(3) {
        if artifacts.join("build").is_dir() {
            std::fs::write(artifacts.join("rcuref_config.h"), &header).unwrap();
        }
    }
}
