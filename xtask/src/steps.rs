//! Runs commands as named steps, keeps each step's full log under `target/xtask/`, and
//! prints a one-screen summary built from the libtest `test result:` lines.
//!
//! A step that runs tests states how many must pass at least ([`Expect::Tests`]): a
//! filter that matches nothing on one target prints "0 passed" and exits 0, and such a
//! step is red here, as is one with fewer passed than its minimum.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

/// What a step must show, besides a successful exit, to be green.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// It runs tests: at least this many (never 0) must pass, and none fail.
    Tests(u64),
    /// It runs no tests (a lint, a build, a package check, a program that judges its own
    /// run): its exit status is the verdict.
    NoTests,
}

/// The verdict on one step's output: green or not, the counts, and why not.
#[derive(Debug, PartialEq, Eq)]
pub struct Verdict {
    pub ok: bool,
    pub passed: u64,
    pub failed: u64,
    /// Why a step whose command succeeded is still red.
    pub short: Option<String>,
}

/// Judges a step: its command's exit status (`exited_ok`), its output and what it was
/// expected to show.
pub fn verdict(exited_ok: bool, text: &str, expect: Expect) -> Verdict {
    let (passed, failed) = count_results(text);
    let short = match expect {
        Expect::NoTests => None,
        Expect::Tests(0) => Some("a test step must expect at least one test".to_string()),
        Expect::Tests(min) if passed < min => Some(format!(
            "{passed} passed, fewer than the {min} this step expects"
        )),
        Expect::Tests(_) if failed > 0 => Some(format!("{failed} failed")),
        Expect::Tests(_) => None,
    };
    Verdict {
        ok: exited_ok && short.is_none(),
        passed,
        failed,
        short: if exited_ok { short } else { None },
    }
}

/// What one step did.
pub struct Outcome {
    pub name: String,
    pub ok: bool,
    pub passed: u64,
    pub failed: u64,
    pub secs: f64,
    pub log: PathBuf,
}

pub struct Run {
    kind: &'static str,
    outcomes: Vec<Outcome>,
    /// Where commands run, relative to the workspace root (`""`: the root).
    dir: String,
    /// List the steps (name, minimum, directory, environment, command) without running
    /// them: `cargo xtask test --dry-run`.
    dry: bool,
}

/// Sums the `test result: ... N passed; M failed` lines of libtest-style output (ours
/// from `qemu-run` too).
pub fn count_results(text: &str) -> (u64, u64) {
    let (mut passed, mut failed) = (0, 0);
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("test result: ") else {
            continue;
        };
        for part in rest.split([';', '.']) {
            let mut words = part.split_whitespace();
            if let (Some(n), Some(what)) = (words.next(), words.next()) {
                if let Ok(n) = n.parse::<u64>() {
                    match what {
                        "passed" => passed += n,
                        "failed" => failed += n,
                        _ => {}
                    }
                }
            }
        }
    }
    (passed, failed)
}

pub fn log_dir() -> PathBuf {
    let dir = workspace_root().join("target").join("xtask");
    let _ = fs::create_dir_all(&dir);
    dir
}

pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

impl Run {
    pub fn new(kind: &'static str) -> Self {
        Run {
            kind,
            outcomes: Vec::new(),
            dir: String::new(),
            dry: false,
        }
    }

    /// A run that prints each step instead of running it (see [`Run::command`]).
    pub fn dry_run(kind: &'static str) -> Self {
        Run {
            dry: true,
            ..Run::new(kind)
        }
    }

    /// Runs the following commands in `dir` (relative to the workspace root) until the
    /// next call (`""` for the root).
    pub fn in_dir(&mut self, dir: &str) {
        self.dir = dir.to_string();
    }

    /// Runs `cargo args` as a step; its output goes to a log file, a line to the screen.
    pub fn cargo(
        &mut self,
        name: &str,
        expect: Expect,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> bool {
        self.command(name, expect, "cargo", args, env, false, true)
    }

    /// Like [`cargo`](Self::cargo) but also echoes the output (for demos).
    pub fn cargo_shown(
        &mut self,
        name: &str,
        expect: Expect,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> bool {
        self.command(name, expect, "cargo", args, env, true, true)
    }

    /// Runs one step. `echo` streams its output; `tail_on_failure` prints the end of the
    /// log when it fails.
    #[allow(clippy::too_many_arguments)]
    pub fn command(
        &mut self,
        name: &str,
        expect: Expect,
        program: &str,
        args: &[&str],
        env: &[(&str, &str)],
        echo: bool,
        tail_on_failure: bool,
    ) -> bool {
        let slug: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        let log = log_dir().join(format!("{}-{}.log", self.kind, slug.trim_matches('-')));
        if self.dry {
            println!("{}", describe(name, expect, &self.dir, program, args, env));
            self.outcomes.push(Outcome {
                name: name.to_string(),
                ok: true,
                passed: 0,
                failed: 0,
                secs: 0.0,
                log,
            });
            return true;
        }
        print!("{name} ... ");
        let _ = std::io::stdout().flush();
        let start = Instant::now();
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(workspace_root().join(&self.dir))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A step's environment is exactly what it names: nothing leaks between steps.
        cmd.env_remove("RUSTFLAGS").env_remove("CARGO_TARGET_DIR");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let (exited_ok, text) = match run_capturing(cmd, echo) {
            Ok(r) => r,
            Err(e) => (false, format!("could not start {program}: {e}\n")),
        };
        let _ = fs::write(&log, &text);
        let Verdict {
            ok,
            passed,
            failed,
            short,
        } = verdict(exited_ok, &text, expect);
        let secs = start.elapsed().as_secs_f64();
        if ok && expect == Expect::NoTests {
            println!("ok ({secs:.0} s)");
        } else if ok {
            println!("ok ({passed} passed, {secs:.0} s)");
        } else if let Some(why) = short {
            println!("FAILED ({why}, {secs:.0} s)");
        } else {
            println!("FAILED ({passed} passed, {failed} failed, {secs:.0} s)");
        }
        if !ok && tail_on_failure {
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            for line in tail.into_iter().rev() {
                println!("    | {line}");
            }
            println!("    full log: {}", log.display());
        }
        self.outcomes.push(Outcome {
            name: name.to_string(),
            ok,
            passed,
            failed,
            secs,
            log,
        });
        ok
    }

    /// A negative control for the pipeline itself: runs `cargo args`, which must FAIL
    /// and must show `message` (the decoded defmt panic message) in its output.
    pub fn expect_failure(&mut self, name: &str, args: &[&str], message: &str) {
        self.expect_failure_with(name, args, message, Some(1));
    }

    /// Like [`expect_failure`](Self::expect_failure) for any command: it must fail, show
    /// `message`, and (if `failed_tests` is given) report that many failed tests. For a
    /// build that must not compile, `failed_tests` is `None` and the message must be the
    /// only error (one `error:` line besides cargo's "could not compile").
    pub fn expect_failure_with(
        &mut self,
        name: &str,
        args: &[&str],
        message: &str,
        failed_tests: Option<u64>,
    ) {
        // Its own check below: the failure it must show, not a count of passes.
        self.command(name, Expect::NoTests, "cargo", args, &[], false, false);
        if self.dry {
            println!("    must fail, showing {message:?}, failed tests {failed_tests:?}");
            return;
        }
        let o = self
            .outcomes
            .last_mut()
            .expect("command() records an outcome");
        let text = std::fs::read_to_string(&o.log).unwrap_or_default();
        let counts_ok = match failed_tests {
            Some(n) => o.failed == n,
            None => {
                text.lines()
                    .filter(|l| l.starts_with("error") && !l.contains("could not compile"))
                    .count()
                    == 1
            }
        };
        let red_with_message = !o.ok && counts_ok && text.contains(message);
        if red_with_message {
            println!("    (expected: it failed and showed \"{message}\")");
        } else {
            println!("    NOT caught: it must fail and show \"{message}\" (alone)");
        }
        // As a check, this step passes exactly when the failure was seen.
        o.ok = red_with_message;
        o.passed = u64::from(red_with_message);
        o.failed = u64::from(!red_with_message);
    }

    /// Prints `<target>: N passed, M failed` for each embedded target, over its steps.
    pub fn per_target(&self, targets: &[&str]) {
        if self.dry {
            return;
        }
        println!();
        for t in targets {
            let (mut p, mut f) = (0, 0);
            for o in self
                .outcomes
                .iter()
                .filter(|o| o.name.starts_with(&format!("{t} (")))
            {
                p += o.passed;
                f += o.failed + u64::from(!o.ok && o.failed == 0);
            }
            println!("{t}: {p} passed, {f} failed");
        }
    }

    /// Prints the summary; `Err` if any step failed.
    pub fn finish(self) -> Result<(), String> {
        if self.dry {
            println!("{} steps", self.outcomes.len());
            return Ok(());
        }
        println!("\n==== {} summary ====", self.kind);
        let (mut passed, mut failed, mut bad) = (0, 0, 0);
        for o in &self.outcomes {
            println!(
                "{:<4} {:<62} {:>5} passed {:>3} failed {:>6.0} s",
                if o.ok { "ok" } else { "FAIL" },
                o.name,
                o.passed,
                o.failed,
                o.secs
            );
            passed += o.passed;
            failed += o.failed;
            if !o.ok {
                bad += 1;
                if o.failed == 0 {
                    failed += 1; // a step that failed without a test result still fails
                }
            }
        }
        println!("logs: {}", log_dir().display());
        if self.kind == "demo" {
            // Demos run programs, not tests: count the parts that ran clean.
            println!(
                "demo: {} of {} parts ran clean",
                self.outcomes.len() - bad,
                self.outcomes.len()
            );
        } else {
            println!("{}: {passed} passed, {failed} failed", self.kind);
        }
        if bad == 0 {
            Ok(())
        } else {
            Err(format!("{bad} step(s) failed"))
        }
    }
}

/// One line that says all a step is: its name, the tests it must pass, where and with
/// what environment it runs, and its command.
fn describe(
    name: &str,
    expect: Expect,
    dir: &str,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> String {
    let min = match expect {
        Expect::Tests(n) => format!(">= {n} tests"),
        Expect::NoTests => "no tests".to_string(),
    };
    let mut line = format!("{name} [{min}]");
    if !dir.is_empty() {
        line += &format!(" in {dir}");
    }
    line += ":";
    for (k, v) in env {
        line += &format!(" {k}={v:?}");
    }
    line += &format!(" {program}");
    for a in args {
        line += &format!(" {a:?}");
    }
    line
}

/// Runs `cmd`, merging stdout and stderr into one text; echoes lines if asked.
fn run_capturing(mut cmd: Command, echo: bool) -> std::io::Result<(bool, String)> {
    let mut child = cmd.spawn()?;
    let out = child.stdout.take().expect("piped");
    let err = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let tx2 = tx.clone();
    let h1 = std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let h2 = std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx2.send(line);
        }
    });
    let mut text = String::new();
    if echo {
        println!();
    }
    for line in rx {
        if echo {
            println!("  {line}");
        }
        text.push_str(&line);
        text.push('\n');
    }
    let _ = h1.join();
    let _ = h2.join();
    let status = child.wait()?;
    Ok((status.success(), text))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libtest's line for a binary with `passed` passes and `failed` failures.
    fn result(passed: u64, failed: u64) -> String {
        let status = if failed == 0 { "ok" } else { "FAILED" };
        format!(
            "test result: {status}. {passed} passed; {failed} failed; 0 ignored; 0 measured; \
             22 filtered out; finished in 0.01s\n"
        )
    }

    #[test]
    fn counts_every_result_line() {
        let text = format!("{}running 3 tests\n{}", result(2, 0), result(3, 1));
        assert_eq!(count_results(&text), (5, 1));
    }

    #[test]
    fn a_step_that_runs_no_test_is_red() {
        // The thumbv8m step of issue #24: its filter matched nothing, cargo exited 0.
        let v = verdict(true, &result(0, 0), Expect::Tests(3));
        assert!(!v.ok, "0 passed of 3 expected was green");
        assert_eq!((v.passed, v.failed), (0, 0));
        assert!(v.short.unwrap().contains("fewer than the 3"));
        // No result line at all (nothing was built or run) is no better.
        assert!(!verdict(true, "", Expect::Tests(1)).ok);
        assert!(!verdict(true, "   Compiling rcuref\n", Expect::Tests(1)).ok);
    }

    #[test]
    fn fewer_passed_than_the_minimum_is_red() {
        let text = format!("{}{}", result(4, 0), result(2, 0));
        assert!(!verdict(true, &text, Expect::Tests(7)).ok);
        assert!(verdict(true, &text, Expect::Tests(6)).ok);
        assert!(
            verdict(true, &text, Expect::Tests(5)).ok,
            "more than the minimum is fine"
        );
    }

    #[test]
    fn a_minimum_of_zero_is_refused() {
        assert!(!verdict(true, &result(5, 0), Expect::Tests(0)).ok);
    }

    #[test]
    fn failures_and_failed_commands_stay_red() {
        assert!(!verdict(true, &result(9, 1), Expect::Tests(1)).ok);
        let v = verdict(false, &result(9, 0), Expect::Tests(1));
        assert!(!v.ok && v.short.is_none(), "the exit status says why");
        assert!(!verdict(false, "", Expect::NoTests).ok);
    }

    #[test]
    fn a_step_without_tests_is_judged_by_its_exit() {
        assert!(verdict(true, "", Expect::NoTests).ok);
        assert!(verdict(true, "Finished `dev` profile\n", Expect::NoTests).ok);
    }
}
