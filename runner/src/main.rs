//! `qemu-embedded-runner`: see the crate docs, or `qemu-embedded-runner --help`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match qemu_embedded_runner::cli(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("qemu-embedded-runner: {e}");
            ExitCode::FAILURE
        }
    }
}
