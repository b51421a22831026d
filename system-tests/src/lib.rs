//! `system-tests`: the tests that run ust as a whole (the daemon, the `ust` command and
//! instrumented programs as separate processes, real users, lttng-relayd, babeltrace2) live
//! in this crate's `tests/`; this library is their one set of helpers, shared with the
//! crates whose own tests start a daemon (`ust-consumerd`, `ust-kernel`):
//! [`TestDaemon`] starts `ust-consumerd` in a temporary `$UST_RUNDIR` (killed on drop, with
//! any daemon a test made `ust` start there) and runs `ust` against it; [`users::World`] is
//! root's daemon serving two ordinary users; [`load::Load`] keeps the machine busy; [`strace`] reads strace's counts; the
//! `bt_*` helpers read traces back with babeltrace2.
#![allow(missing_docs)]

pub mod load;
pub mod maps;
pub mod strace;
pub mod uprobe;
pub mod users;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use ust_ctl::Client;

/// A socket directory, a home directory, and maybe a daemon serving them.
pub struct TestDaemon {
    /// Holds `$UST_RUNDIR` (its `run/` subdirectory, which the daemon creates: 0700, or
    /// 0755 when the tests run as root, whose daemon is system-wide).
    pub tmp: tempfile::TempDir,
    /// `$UST_RUNDIR`.
    pub rundir: PathBuf,
    /// `$HOME` for the commands (default outputs land here).
    pub home: tempfile::TempDir,
    child: Option<Child>,
}

/// The `ust` binary of this build, in `target/<profile>/` beside the test (cargo gives a
/// test only its own package's binaries: `scripts/test.sh` builds them all first).
pub fn ust_bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| program_here("ust").to_string_lossy().into_owned())
}

/// The `ust-consumerd` binary of this build, as [`ust_bin`].
pub fn consumerd_bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| program_here("ust-consumerd").to_string_lossy().into_owned())
}

impl TestDaemon {
    /// Directories only; no daemon (for "none runs" tests and for `create` starting one).
    pub fn without_daemon() -> TestDaemon {
        let tmp = tempfile::tempdir().unwrap();
        let rundir = tmp.path().join("run");
        TestDaemon { tmp, rundir, home: tempfile::tempdir().unwrap(), child: None }
    }

    /// Starts `ust-consumerd --foreground` and waits until its `ctl` socket answers.
    pub fn start() -> TestDaemon {
        Self::start_with_fd_limit(None)
    }

    /// As [`TestDaemon::start`], with `RLIMIT_NOFILE` set to `limit` in the daemon (as
    /// `ulimit -n` would).
    pub fn start_with_fd_limit(limit: Option<u64>) -> TestDaemon {
        use std::os::unix::process::CommandExt;
        let mut d = TestDaemon::without_daemon();
        let log = std::fs::File::create(d.home.path().join("consumerd.log")).unwrap();
        let mut cmd = Command::new(consumerd_bin());
        if let Some(n) = limit {
            // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
            unsafe {
                cmd.pre_exec(move || {
                    let r = libc::rlimit { rlim_cur: n, rlim_max: n };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = cmd
            .arg("--foreground")
            .env("UST_RUNDIR", d.rundir.as_path())
            .env("HOME", d.home.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn ust-consumerd");
        d.child = Some(child);
        d.wait_ready();
        d
    }

    /// Waits (5 s at most) until a daemon answers.
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Client::connect(self.rundir.as_path()).is_err() {
            assert!(Instant::now() < deadline, "ust-consumerd did not come up; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The daemon's log so far (foreground: its stderr; daemonized: consumerd.log).
    pub fn log(&self) -> String {
        let a = std::fs::read_to_string(self.home.path().join("consumerd.log")).unwrap_or_default();
        let b = std::fs::read_to_string(self.rundir.as_path().join("consumerd.log")).unwrap_or_default();
        a + &b
    }

    /// A control connection.
    pub fn client(&self) -> Client {
        Client::connect(self.rundir.as_path()).expect("connect to ctl")
    }

    /// A `ust` command with this directory's environment.
    pub fn ust_cmd(&self) -> Command {
        let mut c = Command::new(ust_bin());
        c.env("UST_RUNDIR", self.rundir.as_path()).env("HOME", self.home.path()).stdin(Stdio::null());
        c
    }

    /// Runs `ust ARGS` and returns its output.
    pub fn ust(&self, args: &[&str]) -> Output {
        self.ust_cmd().args(args).output().expect("run ust")
    }

    /// Runs `ust ARGS`, asserts success, returns stdout.
    pub fn ust_ok(&self, args: &[&str]) -> String {
        let o = self.ust(args);
        assert!(o.status.success(), "ust {args:?} failed: {}\n{}\nlog:\n{}", o.status, String::from_utf8_lossy(&o.stderr), self.log());
        String::from_utf8(o.stdout).unwrap()
    }

    /// Runs `ust ARGS --json`-style commands and parses stdout.
    pub fn ust_json(&self, args: &[&str]) -> serde_json::Value {
        serde_json::from_str(&self.ust_ok(args)).expect("JSON output")
    }

    /// Path of socket `name`.
    pub fn socket(&self, name: &str) -> PathBuf {
        self.rundir.as_path().join(name)
    }

    /// A fresh output directory under the temporary home.
    pub fn output(&self, name: &str) -> PathBuf {
        self.home.path().join(name)
    }
}

/// True while `pid` exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

fn kill_and_wait(pid: i32) {
    // SAFETY: kill(2) with a pid we started (directly or through `ust create`).
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        // Reap if it is our child (a zombie still answers kill(pid, 0)).
        // SAFETY: waitpid with WNOHANG on a pid; harmless if it is not our child.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
    }
    if alive(pid) {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            kill_and_wait(c.id() as i32);
            let _ = c.wait();
        }
        if let Ok(s) = std::fs::read_to_string(self.rundir.as_path().join("pid")) {
            if let Ok(pid) = s.trim().parse::<i32>() {
                if pid > 0 {
                    kill_and_wait(pid);
                }
            }
        }
    }
}

/// Runs babeltrace2 on `dir`; returns stdout, panicking with stderr on failure.
pub fn babeltrace(dir: &Path) -> String {
    let o = Command::new("babeltrace2").arg(dir).output().expect("babeltrace2 is installed");
    assert!(o.status.success(), "babeltrace2 {} failed:\n{}", dir.display(), String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("ERROR") && !err.contains("WARN"), "babeltrace2 complained:\n{err}");
    String::from_utf8(o.stdout).unwrap()
}

/// Runs babeltrace2 on `dir`; returns (stdout, stderr), panicking on failure or on any
/// `ERROR` line. For traces that legitimately carry warnings (discarded events, lost
/// packets); the caller checks stderr.
pub fn babeltrace_allowing_warnings(dir: &Path) -> (String, String) {
    let o = Command::new("babeltrace2").arg(dir).output().expect("babeltrace2 is installed");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "babeltrace2 {} failed:\n{err}", dir.display());
    assert!(!err.contains("ERROR"), "babeltrace2 complained:\n{err}");
    (String::from_utf8(o.stdout).unwrap(), err)
}

/// Path of workspace binary `name` in `profile` (`debug` or `release`), next to this test
/// binary's profile directory (`target/<profile>/deps/<test>-*`).
pub fn program(profile: &str, name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe.parent().and_then(Path::parent).and_then(Path::parent).unwrap();
    let p = target.join(profile).join(name);
    assert!(p.exists(), "{} is missing: run `cargo build --workspace --bins` (and with --release) first, as scripts/test.sh does", p.display());
    p
}

/// Path of workspace binary `name` in the profile this test was built with.
pub fn program_here(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).and_then(Path::file_name).unwrap();
    program(&profile.to_string_lossy(), name)
}

/// One event of babeltrace2's default text output: its name and its payload fields as
/// written (`a = 1, b = "x"`).
#[derive(Debug, Clone)]
pub struct BtEvent {
    /// The process id babeltrace2 prints as `host:procname:(pid)`.
    pub pid: i32,
    /// `provider:name`.
    pub name: String,
    /// The payload, between the last `}, { ` and ` }` of the line.
    pub fields: String,
}

/// True for a line of the runtime's state dump (`lttng_ust_statedump:*`,
/// `lttng_ust_lib:*`), which tests/statedump.rs checks; the other tests skip them.
pub fn is_statedump(line: &str) -> bool {
    line.contains(") lttng_ust_statedump:") || line.contains(") lttng_ust_lib:")
}

/// Splits babeltrace2's text output into events (state dump events left out).
pub fn bt_events(text: &str) -> Vec<BtEvent> {
    text.lines()
        .filter(|l| !is_statedump(l))
        .map(|l| {
            let mut w = l.split_whitespace();
            let origin = w.nth(2).unwrap_or_default();
            let pid = origin.rsplit(":(").next().and_then(|p| p.strip_suffix(')')).and_then(|p| p.parse().ok()).unwrap_or(-1);
            let name = w.next().unwrap_or_default().trim_end_matches(':').to_string();
            let fields = match l.rfind("}, { ") {
                Some(i) => l[i + 5..].trim_end_matches(" }").to_string(),
                None => String::new(),
            };
            BtEvent { pid, name, fields }
        })
        .collect()
}

/// Sum of the counts of babeltrace2's `Tracer discarded N events` warnings.
pub fn bt_discarded(stderr: &str) -> u64 {
    bt_discarded_counts(stderr, "event")
}

/// Sum of the counts of babeltrace2's `Tracer discarded N packets` warnings (gaps in
/// `packet_seq_num`).
pub fn bt_lost_packets(stderr: &str) -> u64 {
    bt_discarded_counts(stderr, "packet")
}

/// Sum of N over babeltrace2's `Tracer discarded N <unit>s` warnings.
fn bt_discarded_counts(stderr: &str, unit: &str) -> u64 {
    stderr
        .split("Tracer discarded ")
        .skip(1)
        .filter_map(|r| {
            let mut w = r.split(' ');
            let n = w.next()?.parse::<u64>().ok()?;
            w.next().filter(|u| u.starts_with(unit)).map(|_| n)
        })
        .sum()
}

impl TestDaemon {
    /// Pid of the daemon this helper started.
    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("a daemon started by TestDaemon::start").id() as i32
    }

    /// `ust create NAME --output OUT`, `ust enable-channel ch CHANNEL_ARGS...`,
    /// `ust enable-event -c ch -a`, `ust start`: a started session with one channel `ch`.
    pub fn session(&self, name: &str, out: &Path, channel_args: &[&str]) {
        self.session_with_events(name, out, channel_args, "-a");
    }

    /// As [`TestDaemon::session`], enabling only the events matching `pattern` (`-a`:
    /// all).
    pub fn session_with_events(&self, name: &str, out: &Path, channel_args: &[&str], pattern: &str) {
        self.ust_ok(&["create", name, "--output", out.to_str().unwrap()]);
        let mut args = vec!["enable-channel", "-s", name, "ch"];
        args.extend_from_slice(channel_args);
        self.ust_ok(&args);
        self.ust_ok(&["enable-event", "-s", name, "-c", "ch", pattern]);
        self.ust_ok(&["start", "-s", name]);
    }

    /// `ust stop` then `ust destroy` of session `name`; returns `ust list NAME --json` as
    /// it was after the stop.
    pub fn stop_and_destroy(&self, name: &str) -> serde_json::Value {
        self.ust_ok(&["stop", "-s", name]);
        let detail = self.ust_json(&["list", name, "--json"]);
        self.ust_ok(&["destroy", "-s", name]);
        detail
    }
}

/// Runs `cmd` to completion, killing it and panicking if it takes longer than `limit`
/// (a deadlock). Returns its output.
pub fn output_within(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(o) => o.expect("wait"),
        Err(_) => {
            // SAFETY: kill(2) on the child this function started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{cmd:?} did not finish within {limit:?}: deadlocked?");
        }
    }
}

/// The fields of a babeltrace2 payload (`a = 1, b = "x"`) as a map; values as printed.
pub fn fields_map(fields: &str) -> std::collections::BTreeMap<&str, &str> {
    fields.split(", ").filter_map(|p| p.split_once(" = ")).collect()
}

/// A child process that is SIGKILLed and reaped when dropped, so a failing assertion
/// does not leave it running (an orphan writer holding the test harness's pipes keeps
/// `cargo test | ...` from ever ending).
#[allow(dead_code)]
pub struct KillOnDrop(pub std::process::Child);

impl std::ops::Deref for KillOnDrop {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Spawns `cmd` with its standard input and output piped and reads the first line it
/// prints, which must be `ready`: what the example programs `holder`, `steady` and `burst …
/// wait` print once registered with their daemons, before they wait on standard input.
/// Returns the child (killed on drop; its `stdin` left in it, for the caller to write to or
/// close) and its standard output past that line (keep it while the program may still
/// print: a program writing to a closed pipe fails). Panics, naming the command, when the
/// program ends first or says anything else.
pub fn spawn_ready(cmd: &mut Command) -> (KillOnDrop, BufReader<ChildStdout>) {
    let mut child = KillOnDrop(cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}")));
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut line = String::new();
    let n = stdout.read_line(&mut line).unwrap_or_else(|e| panic!("read the first line of {cmd:?}: {e}"));
    assert!(n > 0, "{cmd:?} ended before saying ready");
    assert_eq!(line.trim(), "ready", "{cmd:?} did not start");
    (child, stdout)
}

/// The texts of the `<title>` elements of an SVG document (inferno's frame tooltips:
/// `name (N ns, P%)`), after checking it is well-formed XML whose root element is `svg`.
pub fn svg_titles(text: &str) -> Vec<String> {
    use quick_xml::events::Event;
    let mut r = quick_xml::Reader::from_str(text);
    let (mut root, mut in_title, mut depth, mut out) = (None, false, 0usize, Vec::new());
    loop {
        match r.read_event().unwrap_or_else(|e| panic!("not XML at {}: {e}", r.buffer_position())) {
            Event::Start(e) => {
                root.get_or_insert_with(|| String::from_utf8_lossy(e.name().as_ref()).into_owned());
                in_title = e.name().as_ref() == b"title";
                depth += 1;
            }
            Event::End(e) => {
                in_title = false;
                depth = depth.checked_sub(1).expect("balanced elements");
                let _ = e;
            }
            Event::Empty(e) => {
                root.get_or_insert_with(|| String::from_utf8_lossy(e.name().as_ref()).into_owned());
            }
            Event::Text(t) if in_title => out.push(String::from_utf8_lossy(&t.into_inner()).into_owned()),
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!((root.as_deref(), depth), (Some("svg"), 0), "an SVG document");
    out
}

/// Copies the directory tree `from` to `to` (created), files and directories only.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
