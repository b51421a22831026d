//! Tier 1's system calls: `ust trace --kernel` run by an ordinary user with no root daemon
//! reachable (the real user `ustkuser`, through `setpriv`; `UST_SYSTEM_RUNDIR` names an
//! empty directory) launches the command under the ptrace recorder, beside the
//! perf_event_open recording, in one kernel trace.
//!
//! - Under the load of issue 34 ([`common::load::Load`]: two `yes`, a one-byte `dd` loop
//!   and an exec loop at `nice -n -10`, started and killed here), ten runs of a fixed shell
//!   workload in an empty environment each count its system calls (calls and errors) as
//!   `strace -f -c` does for the same workload run as the same user with the same kind of
//!   standard output (a file): from babeltrace2's reading of the trace, event by event, and
//!   in `ust report`, which labels them and says at the top what the perf rings lost. No
//!   retry.
//! - The command's exit status is kept exactly (a code, a signal as 128+N), as with
//!   `--no-ptrace`.
//! - A command that is already being traced (`ust trace` itself under `strace -f`, which
//!   follows the fork) runs without the view, and stderr and the report say why; a command
//!   that traces its own child (strace inside) still works.
//! - `--no-ptrace` records no system call, and says so.
//!
//! Needs root (to run as the user and to start the load at `nice -n -10`), strace, and
//! `perf_event_paranoid` <= 2; otherwise skipped with the reason printed.

use system_tests as common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::strace::{strace_counts, tid_of, trace_counts, WORKLOAD};
use common::users::{ensure_users, id_of};
use ust_analysis::report::{self as rep, Options};

const USER: &str = "ustkuser";

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: the tests run as user ustkuser".into());
    }
    if let Some(p) = ust_kernel::perf::attr::paranoid().filter(|&p| p >= 3) {
        return Some(format!("kernel.perf_event_paranoid = {p}: no tier 1"));
    }
    if Command::new("strace").arg("-V").output().is_err() {
        return Some("strace is not installed".into());
    }
    None
}

/// One test of this file at a time: the load must not slow the others down.
static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

macro_rules! require {
    () => {{
        if let Some(r) = skip_reason() {
            eprintln!("skipped: {r}");
            return;
        }
        MACHINE.lock().unwrap_or_else(|p| p.into_inner())
    }};
}

/// The user's home (theirs, 0700) in a temporary directory; the daemon `ust trace` started
/// for them (its pid file) is ended on drop.
struct Place {
    _base: tempfile::TempDir,
    home: PathBuf,
}

impl Place {
    fn new() -> Place {
        ensure_users(&[USER]);
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let home = base.path().join("home");
        std::fs::create_dir(&home).unwrap();
        std::os::unix::fs::chown(&home, Some(id_of(USER, "-u")), Some(id_of(USER, "-g"))).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        Place { _base: base, home }
    }

    /// `prog` as the user, with its home, its own `UST_RUNDIR` and no system daemon;
    /// standard output to the file `stdout` in its home.
    fn as_user(&self, prog: &str, stdout: &str) -> Command {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", &id_of(USER, "-u").to_string(), "--regid", &id_of(USER, "-g").to_string(), "--init-groups", "--", prog])
            .env("HOME", &self.home)
            .env("UST_RUNDIR", self.home.join("run"))
            .env("UST_SYSTEM_RUNDIR", self.home.join("no-system-daemon"))
            .env_remove("XDG_RUNTIME_DIR")
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(self.home.join(stdout)).unwrap());
        c
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.home.join(name)).unwrap_or_default()
    }

    /// `ust trace --kernel [EXTRA] -o <home>/NAME -- CMD`, standard output to
    /// `<home>/NAME.stdout`: the output directory, stderr, status.
    fn trace(&self, name: &str, extra: &[&str], cmd: &[&str]) -> (PathBuf, String, Output) {
        let out = self.home.join(name);
        let o = self
            .as_user(common::ust_bin(), &format!("{name}.stdout"))
            .args(["trace", "--kernel"])
            .args(extra)
            .arg("-o")
            .arg(&out)
            .arg("--")
            .args(cmd)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        (out, err, o)
    }

    /// `strace -f -c` of the workload as the user, its standard output a file too.
    fn strace(&self) -> BTreeMap<String, (u64, u64)> {
        let table = self.home.join("strace.txt");
        let o = self.as_user("/usr/bin/strace", "strace.stdout").args(["-f", "-c", "-o"]).arg(&table).args(WORKLOAD).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(self.file("strace.stdout"), format!("{}\n", hostname()));
        let want = strace_counts(&std::fs::read_to_string(&table).unwrap());
        assert!(want.get("execve").is_some_and(|c| c.0 >= 3) && want.get("openat").is_some_and(|c| c.1 > 0), "{want:?}");
        want
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.home.join("run/pid")).unwrap_or_default().trim().parse::<i32>() {
            if pid > 0 {
                // SAFETY: kill(2) on the daemon this test's `ust trace` started (its pid file).
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname").unwrap().trim().to_string()
}

/// The `L` of `ust: N kernel events recorded in DIR, L lost`, and `N`.
fn recorded_and_lost(stderr: &str) -> (u64, u64) {
    let l = stderr.lines().find(|l| l.contains(" kernel events recorded in ")).unwrap_or_else(|| panic!("no summary: {stderr}"));
    let n = l.trim_start_matches("ust: ").split(' ').next().unwrap().parse().unwrap();
    let lost = l.strip_suffix(" lost").and_then(|x| x.rsplit(' ').next()).and_then(|x| x.parse().ok()).unwrap();
    (n, lost)
}

/// babeltrace2's text of `out/kernel`: every recorded event, no error; discarded-event
/// warnings only as many as the recorder counted lost.
fn read_back(out: &Path, stderr: &str) -> String {
    let (n, lost) = recorded_and_lost(stderr);
    let (text, warnings) = common::babeltrace_allowing_warnings(&out.join("kernel"));
    assert_eq!(common::bt_discarded(&warnings), lost, "{warnings}");
    assert!(warnings.lines().all(|l| l.trim().is_empty() || l.contains("WARNING: Tracer discarded ")), "{warnings}");
    assert_eq!(text.lines().count() as u64, n, "babeltrace2 prints every recorded event");
    text
}

/// A babeltrace2 line's payload field `name`, as printed.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let payload = &line[line.rfind("}, { ")? + 5..];
    common::fields_map(payload.trim_end_matches(" }")).get(name).copied()
}

/// Every system-call event of the trace, event by event: each task's entries and exits
/// alternate, the first is the workload's `execve` with its path and arguments, `cat`
/// opens `/etc/hostname` and `ls` fails to find `/nonexistent`.
fn check_events(text: &str, run: usize) {
    let calls: Vec<&str> = text.lines().filter(|l| l.contains(" syscall_entry_") || l.contains(" syscall_exit_")).collect();
    let first = calls.first().unwrap_or_else(|| panic!("run {run}: no system call in the trace"));
    assert!(first.contains(" syscall_entry_execve: ") && field(first, "filename") == Some("\"/usr/bin/env\""), "run {run}: {first}");
    assert!(first.contains(r#"argv_text = "[\"env\", \"-i\", \"PATH=/usr/bin:/bin\", \"sh\", \"-c\", "#), "run {run}: {first}");
    let mut open: BTreeMap<i32, &str> = BTreeMap::new();
    let (mut cat_open, mut ls_missing) = (false, false);
    for l in &calls {
        let tid = tid_of(l).unwrap_or_else(|| panic!("run {run}: no tid: {l}"));
        let name = l.split_whitespace().nth(3).unwrap_or_default().trim_end_matches(':');
        if name.starts_with("syscall_entry_") {
            assert!(open.insert(tid, *l).is_none(), "run {run}: two entries without an exit in task {tid}: {l}");
        } else {
            let entry = open.remove(&tid).unwrap_or_else(|| panic!("run {run}: an exit without its entry: {l}"));
            let call = name.trim_start_matches("syscall_exit_");
            assert!(entry.contains(&format!(" syscall_entry_{call}: ")), "run {run}: {entry} then {l}");
            let ret: i64 = field(l, "ret").and_then(|r| r.parse().ok()).unwrap();
            let path = field(entry, "filename");
            cat_open |= call == "openat" && path == Some("\"/etc/hostname\"") && ret >= 0;
            ls_missing |= path == Some("\"/nonexistent\"") && ret == -2;
        }
    }
    // The workload's last task (ls) ends in exit_group, which has no exit.
    assert!(open.values().all(|e| e.contains(" syscall_entry_exit_group")), "run {run}: {open:?}");
    assert!(cat_open && ls_missing, "run {run}: cat's open of /etc/hostname, ls's failed lookup");
}

#[test]
fn ten_runs_count_as_strace_under_load() {
    let _machine = require!();
    let p = Place::new();
    let load = common::load::Load::start();
    let want = p.strace();
    for run in 0..10 {
        let name = format!("t{run}");
        let (out, err, o) = p.trace(&name, &[], &WORKLOAD);
        assert!(o.status.success(), "run {run}: {err}");
        assert_eq!(p.file(&format!("{name}.stdout")), format!("{}\n", hostname()), "run {run}");
        assert!(err.contains("kernel view: tier 1 (perf_event_open and ptrace, the traced tasks only)"), "run {run}: {err}");
        assert!(err.contains(ust_kernel::ptrace::ANNOUNCE) && err.contains("--no-ptrace turns it off"), "run {run}: {err}");
        let text = read_back(&out, &err);
        check_events(&text, run);
        // The ptrace stream holds the command's tree only: every call of it counts.
        let got = trace_counts(&text, &|_| true);
        assert_eq!(got, want, "run {run}: the trace read by babeltrace2 (left) against strace -f -c (right)\n{err}");
        let r = rep::report(&out, &Options::default()).unwrap();
        let rows: BTreeMap<String, (u64, u64)> = r.syscalls.iter().map(|c| (c.name.clone(), (c.count, c.errors))).collect();
        assert_eq!(rows, want, "run {run}: ust report (left) against strace -f -c (right)");
        assert_eq!(r.syscall_source.as_deref(), Some("ptrace"));
        let report = rep::render_text(&r);
        assert!(report.contains("\nSystem calls of the traced command (recorded with ptrace):\n"), "run {run}: {report}");
        assert!(r.notes.iter().any(|n| n == rep::tiers::TIER1_PTRACE_NOTE), "run {run}: {:?}", r.notes);
        // What the perf rings lost is said at the top, by ust trace and by the report.
        let (_, lost) = recorded_and_lost(&err);
        let second = report.lines().nth(1).unwrap_or_default();
        if lost == 0 {
            assert_eq!(second, "Kernel events: 0 of the traced tree's events lost", "run {run}: {report}");
            assert!(err.contains("ust: Kernel events: 0 of the traced tree's events lost"), "run {run}: {err}");
        } else {
            assert!(second.starts_with("WARNING: kernel events lost: "), "run {run}: {report}");
            eprintln!("run {run}: the perf rings lost {lost} records under load (said at the top of the report)");
        }
    }
    drop(load);
}

#[test]
fn the_commands_exit_status_is_kept() {
    let _machine = require!();
    let p = Place::new();
    for (cmd, code) in [("exit 3", 3), ("kill -TERM $$", 128 + libc::SIGTERM), ("kill -KILL $$", 128 + libc::SIGKILL), ("true", 0)] {
        for extra in [&[][..], &["--no-ptrace"][..]] {
            let (out, err, o) = p.trace("status", extra, &["sh", "-c", cmd]);
            assert_eq!(o.status.code(), Some(code), "{cmd} {extra:?}: {err}");
            let text = read_back(&out, &err);
            let calls = text.lines().filter(|l| l.contains(" syscall_entry_")).count();
            assert_eq!(calls > 0, extra.is_empty(), "{cmd} {extra:?}");
            std::fs::remove_dir_all(&out).unwrap();
        }
    }
}

#[test]
fn an_already_traced_command_runs_without_the_view() {
    let _machine = require!();
    let p = Place::new();
    // The user's daemon first: `ust trace` under strace -f would start it traced, and strace
    // would then wait for it.
    let o = p.as_user(common::ust_bin(), "daemon.stdout").args(["daemon", "start"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = p.home.join("traced");
    let o = p
        .as_user("/usr/bin/strace", "traced.stdout")
        .args(["-f", "-o", "/dev/null", common::ust_bin(), "trace", "--kernel", "-o"])
        .arg(&out)
        .args(["--", "sh", "-c", "cat /etc/hostname; exit 5"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert_eq!(p.file("traced.stdout"), format!("{}\n", hostname()));
    assert!(err.contains("ust: no system-call view: the command is already traced by "), "{err}");
    let text = read_back(&out, &err);
    assert!(!text.contains(" syscall_entry_"), "no system call recorded");
    assert!(text.lines().any(|l| l.contains(" perf_comm: ") && l.contains("comm = \"cat\", exec = 1")), "the perf view goes on");
    let r = rep::report(&out, &Options::default()).unwrap();
    assert!(r.syscalls.is_empty() && r.syscall_source.is_none());
    let why = r.notes.iter().find(|n| n.starts_with("no system-call view in this trace: the command is already traced by ")).cloned();
    assert!(why.is_some(), "{:?}", r.notes);
    assert!(rep::render_text(&r).contains(&why.unwrap()));
}

#[test]
fn a_command_that_traces_its_child_still_works() {
    let _machine = require!();
    let p = Place::new();
    // strace inside: it seizes its own child, which leaves the system-call view first.
    let log = p.home.join("inner.strace");
    let (out, err, o) = p.trace("inner", &[], &["strace", "-f", "-o", log.to_str().unwrap(), "sh", "-c", "cat /etc/hostname; exit 4"]);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert_eq!(p.file("inner.stdout"), format!("{}\n", hostname()));
    assert!(err.contains(" left the system-call view: "), "{err}");
    let inner = std::fs::read_to_string(&log).unwrap();
    assert!(inner.contains("openat(AT_FDCWD, \"/etc/hostname\", O_RDONLY") && inner.contains("+++ exited with 4 +++"), "{inner}");
    let text = read_back(&out, &err);
    // strace's own calls are recorded up to the hand-off, which the trace says.
    assert!(text.lines().any(|l| l.contains(" syscall_entry_execve: ") && field(l, "filename").is_some_and(|f| f.ends_with("strace\""))), "strace's exec");
    assert!(text.lines().any(|l| l.contains(" ptrace_detach: ")), "the hand-off is in the trace");
}

#[test]
fn no_ptrace_records_no_system_call_and_says_so() {
    let _machine = require!();
    let p = Place::new();
    let (out, err, o) = p.trace("off", &["--no-ptrace"], &WORKLOAD);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("kernel view: tier 1 (perf_event_open, the traced tasks only); no system-call view: --no-ptrace was given"), "{err}");
    assert!(!err.contains(ust_kernel::ptrace::ANNOUNCE), "{err}");
    let text = read_back(&out, &err);
    assert!(!text.contains(" syscall_"), "no system call recorded");
    assert!(text.lines().any(|l| l.contains(" perf_comm: ") && l.contains("comm = \"ls\", exec = 1")), "the perf view is there");
    let meta = std::fs::read_to_string(out.join("kernel/metadata")).unwrap();
    assert!(meta.contains("\tno_syscalls = \"--no-ptrace was given\";") && !meta.contains("syscall_source"), "{meta}");
    let r = rep::report(&out, &Options::default()).unwrap();
    assert!(r.syscalls.is_empty());
    assert_eq!(
        r.notes.iter().filter(|n| n.contains("tier 1") || n.contains("system-call view")).cloned().collect::<Vec<_>>(),
        [rep::tiers::TIER1_NOTE.to_string(), "no system-call view in this trace: --no-ptrace was given".to_string()]
    );
}
