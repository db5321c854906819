//! A cargo runner for no_std firmware in QEMU: [embedded-test] suites and plain programs.
//!
//! probe-rs, embedded-test's usual runner, only drives physical probes. This speaks the
//! same protocol to QEMU:
//! * embedded-test puts one symbol per test in the `.embedded_test` section; its *name*
//!   is a JSON object (`name`, `ignored`, `should_panic`, optional `timeout`) and its
//!   value points at a `(fn() -> !, &'static str)`: the entry point and the module path;
//! * the firmware reads its command line over semihosting and, for `run_addr <decimal>`,
//!   jumps to that entry; the test passes with semihosting exit 0, and fails with abort
//!   (exit 134) or any other exit;
//! * one fresh QEMU per test, killed at the test's timeout.
//!
//! The firmware's defmt frames arrive on QEMU's stdout (semihosting) and are decoded with
//! `defmt-decoder` against the same ELF. Output is libtest's, ending in `test result:`,
//! so `cargo test` reports it like any other test binary. An ELF without an
//! `.embedded_test` section is a plain program: it boots once, its log is printed and its
//! semihosting exit code is the result (for `cargo run`).
//!
//! The binary (`qemu-embedded-runner`) is this crate's front end; [`cli`] is the same
//! thing as a function, for build tools that embed it.
//!
//! [embedded-test]: https://crates.io/crates/embedded-test

mod child;
mod elf;
pub mod install;
mod qemu;

pub use args::{parse, Options, USAGE};
pub use machine::{memory_map, Known, Machine, KNOWN};
pub use qemu::{find_qemu, install_qemu, QEMU_DIR_VAR};

use defmt_decoder::Table;
use std::time::{Duration, Instant};

/// Writes to stdout; a closed stdout (the runner piped into `head`) kills QEMU and ends
/// the runner as `SIGPIPE` would, never a panic.
fn say(args: std::fmt::Arguments, flush: bool) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if o.write_fmt(args).is_err() || (flush && o.flush().is_err()) {
        drop(o);
        child::stdout_closed();
    }
}

/// `println!` through [`say`].
macro_rules! outln {
    () => { $crate::say(format_args!("\n"), false) };
    ($($t:tt)*) => { $crate::say(format_args!("{}\n", format_args!($($t)*)), false) };
}

/// `print!` and a flush, through [`say`].
macro_rules! out {
    ($($t:tt)*) => { say(format_args!($($t)*), true) };
}

// After the macros, which they use.
mod args;
mod machine;

/// The whole runner: `install-qemu`, or parse and [`run`].
///
/// # Errors
/// A message for the user (failed tests included: the process should exit non-zero).
pub fn cli(args: &[String]) -> Result<(), String> {
    if args.first().map(String::as_str) == Some("install-qemu") {
        let mut dir = None;
        let mut it = args[1..].iter();
        while let Some(a) = it.next() {
            let d = match a.split_once('=') {
                Some(("--dir", d)) => Some(d),
                _ if a == "--dir" => it.next().map(String::as_str),
                _ => {
                    return Err(format!(
                        "install-qemu: unknown option {a}\n\
                         usage: qemu-embedded-runner install-qemu [--dir DIR]"
                    ))
                }
            };
            match d {
                Some(d) if !d.is_empty() => dir = Some(std::path::PathBuf::from(d)),
                _ => return Err("install-qemu: --dir needs a folder".into()),
            }
        }
        let bin = install_qemu(dir.as_deref())?;
        outln!("QEMU is ready: {}", bin.display());
        return Ok(());
    }
    match parse(args)? {
        Some(o) => run(&o),
        None => Ok(()),
    }
}

/// Runs the firmware of `o`: its tests, or the program once.
///
/// While a QEMU runs, `SIGINT`, `SIGTERM`, `SIGHUP` and `SIGQUIT` (those not ignored)
/// have a handler, installed once for the process: such a signal kills QEMU, shows what
/// it printed, and ends the process as the signal would. Outside a QEMU run the handler
/// does what the default action does. QEMU runs in a process group of its own, killed
/// whole. On Linux QEMU's group is also killed when the runner dies in any other way
/// (`SIGKILL` included), by a supervisor process forked between fork and exec, which is
/// the runner's direct child (the [`std::process::Child`] waited for). A closed stdout kills QEMU and
/// ends the process as `SIGPIPE` would; a stdout nobody reads does not stop the signals
/// or the timeout (a thread of its own, which never writes to stdout, acts on them).
///
/// # Errors
/// A message: QEMU missing or failing to start, an unreadable ELF, failed tests, a
/// failed program or one whose output differs from `--expect`'s file.
pub fn run(o: &Options) -> Result<(), String> {
    let elf = std::fs::read(&o.elf).map_err(|e| format!("{}: {e}", o.elf))?;
    elf::check_elf(&elf, &o.elf, &o.machine.qemu)?;
    // A stripped ELF keeps `.defmt` but not the symbols that make it a table: it runs,
    // its frames shown undecoded, and the user is told why.
    let stripped_table = elf::stripped_defmt(&elf);
    let table = if stripped_table {
        None
    } else {
        Table::parse(&elf).map_err(|e| format!("defmt table: {e}"))?
    };
    let qemu = || match &o.qemu_path {
        Some(p) => Ok(p.clone()),
        None => find_qemu(&o.machine.qemu),
    };
    if o.list && !elf::has_test_section(&elf) {
        // A plain program has no tests to list (and is not booted for it).
        print_list(std::iter::empty(), o.terse);
        return Ok(());
    }
    if stripped_table && !o.list {
        eprintln!("{}", elf::stripped_note(&o.elf));
    }
    let locs = elf::locations(table.as_ref(), &elf);
    let rtt_only = elf::has_symbol(&elf, "_SEGGER_RTT");
    if !elf::has_test_section(&elf) {
        let qemu = qemu()?;
        let expected = match &o.expect {
            Some(f) => Some(std::fs::read_to_string(f).map_err(|e| format!("--expect {f}: {e}"))?),
            None => None,
        };
        let mut dec = elf::LogDecoder::new(table.as_ref(), locs.as_ref());
        let r = run_one(
            &qemu,
            &o.machine,
            &o.elf,
            o.program_timeout,
            &[],
            "qemu: ",
            &mut dec,
            &mut |l| outln!("{l}"),
        )?;
        if let Some(why) = r.failed_to_start(&qemu) {
            return Err(why);
        }
        let lines = r.lines;
        if lines.is_empty() && rtt_only {
            eprintln!("{RTT_ONLY}");
        }
        if dec.undecoded && !stripped_table {
            eprintln!("{}", elf::no_defmt_table(&elf, &o.elf));
        }
        match r.verdict {
            Verdict::Exit(0) => {}
            Verdict::Exit(code) => return Err(format!("the firmware exited with {code}")),
            Verdict::Signal(sig) => return Err(format!("QEMU was killed by {}", signal_name(sig))),
            Verdict::Timeout => {
                return Err(format!(
                    "the firmware did not finish within {} s",
                    o.program_timeout.as_secs()
                ))
            }
        }
        if let Some(want) = expected {
            let got: String = lines.iter().map(|l| format!("{l}\n")).collect();
            if got != want {
                return Err(format!(
                    "the output differs from {} (- expected, + got):\n{}",
                    o.expect.as_deref().unwrap_or_default(),
                    diff(&want, &got)
                ));
            }
        }
        return Ok(());
    }
    if o.expect.is_some() {
        return Err("--expect is for plain programs; this ELF is an embedded-test suite".into());
    }
    let tests = elf::read_tests(&elf, o.test_timeout)?;
    let matches = |name: &str, f: &String| {
        if o.exact {
            name == f
        } else {
            name.contains(f.as_str())
        }
    };
    // As libtest: with --ignored only the ignored tests are selected (the others are
    // filtered out), and then they run.
    let selected: Vec<&elf::Test> = tests
        .iter()
        .filter(|t| o.filters.is_empty() || o.filters.iter().any(|f| matches(&t.name, f)))
        .filter(|t| !o.skip.iter().any(|f| matches(&t.name, f)))
        .filter(|t| !o.ignored_only || t.ignored)
        .collect();
    let filtered_out = tests.len() - selected.len();
    if o.list {
        print_list(selected.iter().map(|t| t.name.as_str()), o.terse);
        return Ok(());
    }
    let qemu = qemu()?;
    let bin = o.elf.rsplit('/').next().unwrap_or(&o.elf);
    outln!(
        "\nrunning {} ({}, {bin})",
        plural(selected.len(), "test"),
        o.machine.machine
    );
    let start = Instant::now();
    let (mut passed, mut failed, mut ignored) = (0, 0, 0);
    let mut failures = Vec::new();
    let mut told_undecoded = false;
    for t in selected {
        if t.ignored && !o.ignored_only && !o.include_ignored {
            outln!("test {} ... ignored", t.name);
            ignored += 1;
            continue;
        }
        let t0 = Instant::now();
        let entry = t.entry.to_string();
        // As libtest with one thread: the name while the test runs, then its output
        // (indented) as it comes; the result line is repeated whole after any output.
        out!("test {} ... ", t.name);
        let mut dec = elf::LogDecoder::new(table.as_ref(), locs.as_ref());
        let mut printed = false;
        let mut retries_left = o.retry_timeouts;
        let mut r = loop {
            let r = run_one(
                &qemu,
                &o.machine,
                &o.elf,
                t.timeout,
                &["run_addr", &entry],
                &format!("qemu ({}): ", t.name),
                &mut dec,
                &mut |l| {
                    if !printed {
                        outln!();
                        printed = true;
                    }
                    outln!("    {l}");
                },
            )?;
            if !matches!(r.verdict, Verdict::Timeout) || retries_left == 0 {
                break r;
            }
            retries_left -= 1;
            if !printed {
                outln!();
                printed = true;
            }
            outln!(
                "    timed out after {} s: running it again (--retry-timeouts)",
                t.timeout.as_secs()
            );
        };
        if let Some(why) = r.failed_to_start(&qemu) {
            if !printed {
                outln!();
            }
            return Err(why);
        }
        let lines = std::mem::take(&mut r.lines);
        if dec.undecoded && !told_undecoded && !stripped_table {
            eprintln!("{}", elf::no_defmt_table(&elf, &o.elf));
            told_undecoded = true;
        }
        let (ok, why) = match r.verdict {
            Verdict::Exit(0) if !t.should_panic => (true, String::new()),
            Verdict::Exit(0) => (false, "expected a panic, but the test passed".into()),
            Verdict::Exit(code) if t.should_panic => {
                (true, format!("panicked as expected (exit {code})"))
            }
            Verdict::Exit(code) => (false, format!("exit code {code}")),
            Verdict::Signal(sig) => (false, format!("QEMU was killed by {}", signal_name(sig))),
            Verdict::Timeout => (false, format!("timed out after {} s", t.timeout.as_secs())),
        };
        let why = if !ok && lines.is_empty() && rtt_only {
            format!("{why}; {RTT_ONLY}")
        } else {
            why
        };
        if printed {
            out!("test {} ... ", t.name);
        }
        outln!(
            "{} ({:.2} s)",
            if ok { "ok" } else { "FAILED" },
            t0.elapsed().as_secs_f64()
        );
        if ok {
            passed += 1;
        } else {
            failed += 1;
            failures.push((t.name.clone(), why, lines));
        }
    }
    if !failures.is_empty() {
        outln!("\nfailures:");
        for (name, why, lines) in &failures {
            outln!("\n---- {name} ({why}) ----");
            for l in lines {
                outln!("    {l}");
            }
        }
        outln!();
    }
    outln!(
        "test result: {}. {passed} passed; {failed} failed; {ignored} ignored; 0 measured; {filtered_out} filtered out; finished in {:.2}s\n",
        if failed == 0 { "ok" } else { "FAILED" },
        start.elapsed().as_secs_f64()
    );
    if failed == 0 {
        Ok(())
    } else {
        Err(format!("{failed} on-target test(s) failed"))
    }
}

/// `--list` as libtest prints it: `name: test` lines, then (unless terse) a blank line
/// if any were listed and `N tests, 0 benchmarks`.
fn print_list<'a>(names: impl Iterator<Item = &'a str>, terse: bool) {
    let mut n = 0;
    for name in names {
        outln!("{name}: test");
        n += 1;
    }
    if !terse {
        if n != 0 {
            outln!();
        }
        outln!("{}, 0 benchmarks", plural(n, "test"));
    }
}

/// `1 test`, `2 tests`.
fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("{n} {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// What a firmware that logs only over RTT gets told.
const RTT_ONLY: &str = "the firmware has an RTT control block (`_SEGGER_RTT`) and printed \
    nothing: QEMU cannot read RTT (only a debug probe can); log over semihosting instead \
    (defmt-semihosting, or embedded-test's `semihosting` feature)";

/// A line diff of `want` and `got` (longest common subsequence; `-` lines expected,
/// `+` lines got, the rest shared).
fn diff(want: &str, got: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        }
    }
    if want.ends_with('\n') != got.ends_with('\n') && !want.is_empty() && !got.is_empty() {
        out.push_str("(the two differ in a final newline)\n");
    }
    out
}

enum Verdict {
    Exit(i32),
    /// QEMU was killed by this signal (not by the runner).
    Signal(i32),
    Timeout,
}

/// A signal's name (`SIGKILL`), or its number.
fn signal_name(sig: i32) -> String {
    #[cfg(unix)]
    {
        let names = [
            (libc::SIGHUP, "SIGHUP"),
            (libc::SIGINT, "SIGINT"),
            (libc::SIGQUIT, "SIGQUIT"),
            (libc::SIGILL, "SIGILL"),
            (libc::SIGTRAP, "SIGTRAP"),
            (libc::SIGABRT, "SIGABRT"),
            (libc::SIGBUS, "SIGBUS"),
            (libc::SIGFPE, "SIGFPE"),
            (libc::SIGKILL, "SIGKILL"),
            (libc::SIGSEGV, "SIGSEGV"),
            (libc::SIGPIPE, "SIGPIPE"),
            (libc::SIGALRM, "SIGALRM"),
            (libc::SIGTERM, "SIGTERM"),
            (libc::SIGUSR1, "SIGUSR1"),
            (libc::SIGUSR2, "SIGUSR2"),
        ];
        if let Some((_, n)) = names.iter().find(|(s, _)| *s == sig) {
            return format!("{n} ({sig})");
        }
    }
    format!("signal {sig}")
}

/// One QEMU run: how it ended, the firmware's output (decoded), QEMU's stderr.
struct RunResult {
    verdict: Verdict,
    lines: Vec<String>,
    /// The firmware wrote nothing at all.
    no_output: bool,
    stderr: String,
}

impl RunResult {
    /// QEMU itself failed (a bad machine, CPU or option): it exits 1 before the
    /// firmware prints anything, with a message on stderr that starts with its own name.
    /// A firmware that exits 1 over semihosting leaves no such line.
    fn failed_to_start(&self, qemu: &str) -> Option<String> {
        if !matches!(self.verdict, Verdict::Exit(c) if c != 0) || !self.no_output {
            return None;
        }
        let name = std::path::Path::new(qemu)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| qemu.to_string());
        let prefix = format!("{name}:");
        let msg: Vec<&str> = self
            .stderr
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .map(|l| l[prefix.len()..].trim())
            .collect();
        if msg.is_empty() {
            None
        } else {
            Some(format!("QEMU failed to start: {}", msg.join("; ")))
        }
    }
}

/// How long a quiet output waits before a partial line (text without its newline, or
/// text not yet followed by a defmt frame's zero byte) is shown.
const QUIET: Duration = Duration::from_millis(50);

/// How long the control thread lets the main thread show what is left once QEMU is gone
/// (after a signal, or past the timeout) before it ends the runner without it.
const GRACE: Duration = Duration::from_secs(2);

/// How often the pipe readers look at their stop flag.
const POLL: Duration = Duration::from_millis(20);

/// One pipe reader's state, shared with the main thread.
#[derive(Default)]
struct ReaderState {
    /// Times the pipe was found empty (a poll that timed out): the reader held nothing.
    idle: std::sync::atomic::AtomicU64,
    /// The pipe reached its end (every writer closed it) or the reader stopped.
    done: std::sync::atomic::AtomicBool,
}

/// Reads `pipe` in a thread, giving each chunk to `sink` (false: stop), until its end or
/// `stop`. Polls, so that it notices `stop` and tells when the pipe is empty.
fn reader<P, F>(
    pipe: P,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    mut sink: F,
) -> (
    std::sync::Arc<ReaderState>,
    std::thread::JoinHandle<F::Output>,
)
where
    P: std::io::Read + std::os::fd::AsRawFd + Send + 'static,
    F: ReaderSink + Send + 'static,
    F::Output: Send + 'static,
{
    use std::sync::atomic::Ordering::SeqCst;
    let state = std::sync::Arc::new(ReaderState::default());
    let st = state.clone();
    let handle = std::thread::spawn(move || {
        let mut pipe = pipe;
        let mut buf = vec![0u8; 64 * 1024];
        while !stop.load(SeqCst) {
            let mut fd = libc::pollfd {
                fd: pipe.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll(2) on one pollfd of a pipe this thread owns.
            let r = unsafe { libc::poll(&mut fd, 1, POLL.as_millis() as libc::c_int) };
            if r == 0 {
                st.idle.fetch_add(1, SeqCst);
                continue;
            }
            if r < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                break;
            }
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if !sink.take(&buf[..n]) {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        st.done.store(true, SeqCst);
        sink.end()
    });
    (state, handle)
}

/// Where a [`reader`] puts what it reads.
trait ReaderSink {
    type Output;
    fn take(&mut self, bytes: &[u8]) -> bool;
    fn end(self) -> Self::Output;
}

/// QEMU's stdout goes to the main thread; a bounded channel, so that output the main
/// thread cannot write yet stays in QEMU's pipe (QEMU waits, as it would on a terminal).
struct ToMain(std::sync::mpsc::SyncSender<Vec<u8>>);

impl ReaderSink for ToMain {
    type Output = ();
    fn take(&mut self, bytes: &[u8]) -> bool {
        self.0.send(bytes.to_vec()).is_ok()
    }
    fn end(self) {}
}

/// QEMU's stderr goes to the runner's, each line after a prefix; kept for the verdict.
struct ToStderr {
    prefix: String,
    partial: Vec<u8>,
    all: String,
}

impl ToStderr {
    fn line(&mut self, l: &[u8]) {
        let l = String::from_utf8_lossy(l);
        let l = l.trim_end_matches('\r');
        if !l.trim().is_empty() {
            eprintln!("{}{l}", self.prefix);
        }
        self.all.push_str(l);
        self.all.push('\n');
    }
}

impl ReaderSink for ToStderr {
    type Output = String;
    fn take(&mut self, bytes: &[u8]) -> bool {
        self.partial.extend_from_slice(bytes);
        while let Some(at) = self.partial.iter().position(|&b| b == b'\n') {
            let l: Vec<u8> = self.partial.drain(..=at).collect();
            self.line(&l[..at]);
        }
        true
    }
    fn end(mut self) -> String {
        if !self.partial.is_empty() {
            let l = std::mem::take(&mut self.partial);
            self.line(&l);
        }
        self.all
    }
}

/// What the control thread found (it owns QEMU).
const RUNNING: u8 = 0;
const EXITED: u8 = 1;
const TIMED_OUT: u8 = 2;
const SIGNALLED: u8 = 3;

/// Shared between the main thread and the control thread of one run.
#[derive(Default)]
struct Control {
    /// [`RUNNING`], [`EXITED`], [`TIMED_OUT`], [`SIGNALLED`]: set once QEMU's group is
    /// killed and QEMU reaped.
    ended: std::sync::atomic::AtomicU8,
    /// QEMU's status, once ended: an exit code, or `-signal`.
    status: std::sync::atomic::AtomicI32,
    /// The signal the runner got.
    signal: std::sync::atomic::AtomicI32,
    /// The readers' idle counts when QEMU ended.
    idle_at_end: [std::sync::atomic::AtomicU64; 2],
    /// The main thread is done with the run (the control thread must not end the runner).
    main_done: std::sync::atomic::AtomicBool,
    /// The control thread gave up on the main thread and is ending the runner.
    gave_up: std::sync::atomic::AtomicBool,
}

impl Control {
    /// The main thread says it is done; false if the control thread already gave up (and
    /// is ending the runner).
    fn main_done(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        self.main_done.store(true, SeqCst);
        !self.gave_up.load(SeqCst)
    }

    /// Waits until `deadline` for the main thread; if it is not done by then, ends the
    /// runner: with `sig`, or with a failure.
    /// A signal meanwhile shortens the wait to [`GRACE`] and ends the runner with it.
    fn wait_for_main(&self, mut deadline: Instant, mut sig: Option<i32>, why: &str) {
        use std::sync::atomic::Ordering::SeqCst;
        let mut why = why.to_string();
        while Instant::now() < deadline {
            if self.main_done.load(SeqCst) {
                return;
            }
            if sig.is_none() {
                if let Some(s) = child::Watch::pending() {
                    sig = Some(s);
                    deadline = deadline.min(Instant::now() + GRACE);
                    why = format!("ended by {}", signal_name(s));
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.gave_up.store(true, SeqCst);
        if self.main_done.load(SeqCst) {
            return;
        }
        child::tell(format!(
            "qemu-embedded-runner: {why}; QEMU's output could not all be shown (the \
             runner's stdout is not being read): the rest is cut"
        ));
        match sig {
            Some(sig) => child::die_without_flushing(sig),
            None => child::exit_now(1),
        }
    }
}

/// The control thread: owns QEMU; never writes to stdout. Kills QEMU's group when QEMU
/// exits (helpers it left), at `deadline`, or on a signal to the runner; then makes sure
/// the runner ends even if the main thread is stuck on a stdout nobody reads.
fn control(
    mut child: std::process::Child,
    ctl: std::sync::Arc<Control>,
    readers: [std::sync::Arc<ReaderState>; 2],
    deadline: Instant,
    timeout: Duration,
) {
    use std::sync::atomic::Ordering::SeqCst;
    let end = |how: u8, child: &mut std::process::Child| {
        child::kill_group();
        let status = match child.wait() {
            Ok(st) => {
                #[cfg(unix)]
                let sig = std::os::unix::process::ExitStatusExt::signal(&st);
                #[cfg(not(unix))]
                let sig: Option<i32> = None;
                match (st.code(), sig) {
                    (Some(c), _) => c,
                    (None, Some(s)) => -s,
                    (None, None) => -1,
                }
            }
            Err(_) => -libc::SIGKILL,
        };
        ctl.status.store(status, SeqCst);
        for (i, r) in readers.iter().enumerate() {
            ctl.idle_at_end[i].store(r.idle.load(SeqCst), SeqCst);
        }
        ctl.ended.store(how, SeqCst);
    };
    loop {
        if let Some(sig) = child::Watch::pending() {
            ctl.signal.store(sig, SeqCst);
            end(SIGNALLED, &mut child);
            ctl.wait_for_main(
                Instant::now() + GRACE,
                Some(sig),
                &format!("ended by {}", signal_name(sig)),
            );
            break;
        }
        match child::has_exited(&mut child) {
            Ok(true) => {
                end(EXITED, &mut child);
                // The output left is shown until the timeout; past it, it is cut.
                ctl.wait_for_main(
                    deadline.max(Instant::now()) + GRACE,
                    None,
                    &format!(
                        "the firmware's output did not end within {} s",
                        timeout.as_secs()
                    ),
                );
                break;
            }
            Ok(false) => {}
            Err(_) => {
                end(EXITED, &mut child);
                break;
            }
        }
        if Instant::now() > deadline {
            end(TIMED_OUT, &mut child);
            ctl.wait_for_main(
                Instant::now() + GRACE,
                None,
                &format!("the firmware did not finish within {} s", timeout.as_secs()),
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // A signal that came after QEMU ended is the main thread's (the watch's drop).
    let _ = child::Watch::pending();
}

/// Boots `elf_path` in a fresh QEMU with `args` as its semihosting command line; kills
/// it after `timeout`. The firmware's output is decoded with `dec` and each line given
/// to `line` as it comes; QEMU's own messages go to stderr as they come, after `prefix`.
/// A signal to the runner meanwhile kills QEMU, shows what it printed, and ends the
/// runner as the signal would. Everything QEMU wrote is read to the end of its pipe
/// (once QEMU and its process group are gone, to where the pipe is empty).
#[allow(clippy::too_many_arguments)]
fn run_one(
    qemu: &str,
    m: &Machine,
    elf_path: &str,
    timeout: Duration,
    args: &[&str],
    prefix: &str,
    dec: &mut elf::LogDecoder,
    line: &mut dyn FnMut(&str),
) -> Result<RunResult, String> {
    use std::process::{Command, Stdio};
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::{mpsc, Arc};
    let mut cmd = Command::new(qemu);
    cmd.args(m.command_line(elf_path, args))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Watched from before the start: a signal meanwhile is handled once QEMU exists.
    let watch = child::Watch::begin();
    let start = Instant::now();
    let (mut child, group) =
        child::spawn(&mut cmd).map_err(|e| format!("QEMU failed to start: {qemu}: {e}"))?;
    let (Some(out), Some(err)) = (child.stdout.take(), child.stderr.take()) else {
        child::kill_group();
        let _ = child.wait();
        return Err("QEMU's output could not be read".into());
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(16);
    let (out_state, out_reader) = reader(out, stop.clone(), ToMain(tx));
    let (err_state, err_reader) = reader(
        err,
        stop.clone(),
        ToStderr {
            prefix: prefix.to_string(),
            partial: Vec::new(),
            all: String::new(),
        },
    );
    let ctl = Arc::new(Control::default());
    let control_thread = {
        let (ctl, readers) = (ctl.clone(), [out_state.clone(), err_state.clone()]);
        let deadline = start + timeout;
        std::thread::spawn(move || control(child, ctl, readers, deadline, timeout))
    };
    let mut lines = Vec::new();
    let mut no_output = true;
    let mut last_data = Instant::now();
    let mut flushed = true;
    loop {
        match rx.recv_timeout(Duration::from_millis(5)) {
            Ok(bytes) => {
                no_output = false;
                for l in dec.push(&bytes) {
                    line(&l);
                    lines.push(l);
                }
                last_data = Instant::now();
                flushed = false;
            }
            // QEMU's stdout has ended; its stderr may not have.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let ended = ctl.ended.load(SeqCst) != RUNNING;
                let err_drained = err_state.done.load(SeqCst)
                    || err_state.idle.load(SeqCst) >= ctl.idle_at_end[1].load(SeqCst) + 2;
                if ended && err_drained {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if !flushed && last_data.elapsed() >= QUIET {
                    for l in dec.idle() {
                        line(&l);
                        lines.push(l);
                    }
                    flushed = true;
                }
                // Once QEMU's group is gone, the pipes seen empty since mean all is read
                // (a process that left the group may hold them open: not waited for).
                if ctl.ended.load(SeqCst) != RUNNING {
                    let drained = [&out_state, &err_state].iter().enumerate().all(|(i, r)| {
                        r.done.load(SeqCst)
                            || r.idle.load(SeqCst) >= ctl.idle_at_end[i].load(SeqCst) + 2
                    });
                    if drained {
                        stop.store(true, SeqCst);
                    }
                }
            }
        }
    }
    stop.store(true, SeqCst);
    let _ = out_reader.join();
    let stderr = err_reader.join().unwrap_or_default();
    // The reader has ended, so QEMU has ended (its group killed) or the pipe closed: the
    // control thread ends it now if it has not.
    while ctl.ended.load(SeqCst) == RUNNING {
        std::thread::sleep(Duration::from_millis(5));
    }
    for l in dec.finish() {
        line(&l);
        lines.push(l);
    }
    let how = ctl.ended.load(SeqCst);
    if how == SIGNALLED {
        let sig = ctl.signal.load(SeqCst);
        if ctl.main_done() {
            child::die_now(sig);
        }
        // The control thread is ending the runner.
        loop {
            std::thread::park();
        }
    }
    if !ctl.main_done() {
        loop {
            std::thread::park();
        }
    }
    let _ = control_thread.join();
    drop(group);
    drop(watch);
    let status = ctl.status.load(SeqCst);
    let verdict = match how {
        TIMED_OUT => Verdict::Timeout,
        _ if status < 0 => Verdict::Signal(-status),
        _ => Verdict::Exit(status),
    };
    Ok(RunResult {
        verdict,
        lines,
        no_output,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_marks_what_is_missing_and_what_is_extra() {
        assert_eq!(diff("a\nb\nc\n", "a\nb\nc\n"), "  a\n  b\n  c\n");
        assert_eq!(diff("a\nb\nc\n", "a\nx\nc\n"), "  a\n+ x\n- b\n  c\n");
        assert_eq!(diff("a\n", "a\nb\n"), "  a\n+ b\n");
        assert_eq!(diff("a\nb\n", "b\n"), "- a\n  b\n");
        assert_eq!(diff("", "a\n"), "+ a\n");
    }

    #[test]
    fn the_diff_names_a_missing_final_newline() {
        assert_eq!(
            diff("a\n", "a"),
            "  a\n(the two differ in a final newline)\n"
        );
    }

    #[test]
    fn signals_by_name_and_counts_in_words() {
        #[cfg(unix)]
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL (9)");
        assert_eq!(signal_name(200), "signal 200");
        assert_eq!(plural(1, "test"), "1 test");
        assert_eq!(plural(0, "test"), "0 tests");
        assert_eq!(plural(3, "test"), "3 tests");
    }
}
