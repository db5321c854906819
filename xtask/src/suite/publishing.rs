//! What a release needs.

use crate::steps::{Expect, Run};

/// What a release needs: the packaged files, `cargo publish --dry-run`, the docs with
/// docs.rs's settings (nightly, `--cfg docsrs`, broken links are errors; with `nightly`)
/// and on two embedded targets, and the MSRV on the host and one embedded target.
pub fn checks(run: &mut Run, msrv: &str, nightly: bool) {
    for pkg in ["rcuref", "qemu-embedded-runner"] {
        run.command(
            &format!("package: {pkg}'s files are only what a user needs"),
            Expect::NoTests,
            "sh",
            &[
                "-c",
                &format!(
                    "out=$(cargo package --list --allow-dirty -p {pkg}) || exit 1; echo \"$out\"; \
                     echo \"$out\" | grep -vE '^(src/.*\\.rs|build\\.rs|README\\.md|CHANGELOG\\.md|LICENSE-(MIT|APACHE)|Cargo\\.(toml|toml\\.orig|lock)|\\.cargo_vcs_info\\.json)$' \
                     && {{ echo 'unexpected files in the package (above)'; exit 1; }}; exit 0"
                ),
            ],
            &[],
            false,
            true,
        );
        run.cargo(
            &format!("package: cargo publish --dry-run -p {pkg}"),
            Expect::NoTests,
            &[
                "publish",
                "--dry-run",
                "--allow-dirty",
                "-p",
                pkg,
                "--target-dir",
                "target/package",
            ],
            &[],
        );
    }
    let features = "critical-section,defmt,std,pool-stats,membarrier";
    if nightly {
        run.cargo(
            "docs: docs.rs settings (nightly, --cfg docsrs, all features; broken links fail)",
            Expect::NoTests,
            &[
                "+nightly",
                "doc",
                "--no-deps",
                "-p",
                "rcuref",
                "--features",
                features,
            ],
            &[
                ("RUSTDOCFLAGS", "--cfg docsrs -D warnings"),
                ("CARGO_TARGET_DIR", "target/docsrs"),
            ],
        );
    }
    for (t, f) in [
        ("thumbv7em-none-eabihf", "critical-section,defmt,pool-stats"),
        (
            "riscv32imac-unknown-none-elf",
            "critical-section,defmt,pool-stats,riscv-harts",
        ),
    ] {
        run.cargo(
            &format!("docs: {t} (broken links fail)"),
            Expect::NoTests,
            &[
                "doc",
                "--no-deps",
                "-p",
                "rcuref",
                "--target",
                t,
                "--features",
                f,
            ],
            &[("RUSTDOCFLAGS", "-D warnings")],
        );
    }
    let tc = format!("+{msrv}");
    run.cargo(
        &format!("MSRV {msrv}: the library on the host"),
        Expect::NoTests,
        &[&tc, "check", "-p", "rcuref", "--features", features],
        &[("CARGO_TARGET_DIR", "target/msrv")],
    );
    run.cargo(
        &format!("MSRV {msrv}: the library on thumbv7em"),
        Expect::NoTests,
        &[
            &tc,
            "check",
            "-p",
            "rcuref",
            "--target",
            "thumbv7em-none-eabihf",
            "--features",
            "critical-section,defmt",
        ],
        &[("CARGO_TARGET_DIR", "target/msrv")],
    );
}
