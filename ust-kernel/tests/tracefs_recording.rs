//! Root's kernel recording (`ust_kernel::view_recorder::ViewRecorder` with
//! `ViewFilter::everything`) against the real tracefs: private instances with the `mono`
//! clock, the traced tree's system calls filtered in the kernel, everyone's scheduling,
//! decoded pages written as a CTF trace that babeltrace2 reads, stale instances removed.
//! Skipped, with the reason printed, when not root or tracefs cannot be mounted.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use ust_ctf::outdir::TraceDir;
use ust_kernel::filter::ViewFilter;
use ust_kernel::tracefs;
use ust_kernel::view_recorder::{Options, ViewRecorder};

use system_tests as common;

/// Why live kernel tests cannot run here, if they cannot.
fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    match tracefs::root() {
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}

macro_rules! require_tracefs {
    () => {
        if let Some(r) = skip_reason() {
            eprintln!("skipped: kernel tracing unavailable ({r})");
            return;
        }
    };
}

fn babeltrace(dir: &Path) -> String {
    let out = Command::new("babeltrace2").arg(dir).output().expect("babeltrace2 runs");
    assert!(out.status.success(), "babeltrace2 failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "babeltrace2 warned: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `<out>/kernel`, made and opened as the recorder writes it ([`TraceDir`]).
fn kernel_dir(out: &Path) -> TraceDir {
    TraceDir::create(out, None).unwrap().dir(ust_kernel::KERNEL_DIR, 0o750).unwrap()
}

/// The `tid` context of a babeltrace2 line.
fn tid_of(line: &str) -> Option<i32> {
    line.split("}, { tid = ").nth(1)?.split(' ').next()?.parse().ok()
}

/// A shell waiting on its stdin is the traced tree; another shell making system calls runs
/// beside it. The tree's system calls are all in the trace (its `tree_N` streams) and no
/// other task's is; scheduling is system-wide, with every task's name.
#[test]
fn records_the_tree_in_the_kernel_and_scheduling_system_wide() {
    require_tracefs!();
    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new("sh").args(["-c", "read x; sleep 0.1; cat /etc/hostname"]).stdin(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    let pid = child.id() as i32;
    let prepared = ViewRecorder::prepare(true, Options::default()).expect("kernel recording is set up");
    let rec = prepared.start(kernel_dir(out.path()), ViewFilter::everything(pid)).expect("kernel recording starts");
    let root = tracefs::root().unwrap();
    let ours: Vec<String> = std::fs::read_dir(root.join("instances"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{}{}-", tracefs::INSTANCE_PREFIX, std::process::id())))
        .collect();
    assert_eq!(ours.len(), 2, "the system-wide and the tree's instance: {ours:?}");
    let tree_inst = ours.iter().find(|n| n.ends_with("-t")).unwrap();
    assert_eq!(std::fs::read_to_string(root.join("instances").join(tree_inst).join("set_event_pid")).unwrap().trim(), pid.to_string());
    for n in &ours {
        assert!(std::fs::read_to_string(root.join("instances").join(n).join("trace_clock")).unwrap().contains("[mono]"));
    }
    let mut other = Command::new("sh").args(["-c", "for i in 1 2 3 4 5 6 7 8; do cat /etc/hostname; done"]).stdout(Stdio::null()).spawn().unwrap();
    let other_pid = other.id() as i32;
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success() && other.wait().unwrap().success());
    let summary = rec.finish(pid, ust_core::clock::realtime_offset_ns()).unwrap();
    for n in &ours {
        assert!(!root.join("instances").join(n).exists(), "instance {n} removed");
    }
    let count = |n: &str| summary.counts.iter().find(|(k, _)| k == n).map(|x| x.1).unwrap_or(0);
    assert!(count("sched_switch") > 0, "{:?}", summary.counts);
    assert!(count("lttng_statedump_process_state") > 10);
    assert_eq!(summary.lost, 0, "a quiet machine loses nothing");
    let text = babeltrace(&out.path().join("kernel"));
    assert!(text.contains(&format!("next_tid = {pid}")), "the child was scheduled (lttng-modules' field name)");
    assert!(text.contains("syscall_entry_clock_nanosleep:") || text.contains("syscall_entry_nanosleep:"), "one event per system call");
    assert!(text.contains("syscall_exit_clock_nanosleep:") || text.contains("syscall_exit_nanosleep:"));
    assert!(text.contains("prev_comm = \""), "comm arrays print as strings");
    // The tree: the shell and its children, from the forks.
    let mut tree = std::collections::HashSet::from([pid]);
    for l in text.lines().filter(|l| l.contains(" sched_process_fork: ")) {
        let f = |n: &str| l.split(&format!(" {n} = ")).nth(1).and_then(|r| r.split([',', ' ']).next()).and_then(|v| v.parse::<i32>().ok());
        if let (Some(p), Some(c)) = (f("parent_tid"), f("child_tid")) {
            if tree.contains(&p) {
                tree.insert(c);
            }
        }
    }
    assert!(tree.len() >= 3, "sh, sleep and cat: {tree:?}");
    let calls: Vec<i32> = text.lines().filter(|l| l.contains(" syscall_")).filter_map(tid_of).collect();
    assert!(calls.iter().all(|t| tree.contains(t)), "only the tree's system calls");
    assert!(tree.iter().all(|t| calls.contains(t)), "each of its tasks' system calls");
    assert!(
        text.lines().any(|l| l.contains(" sched_switch: ") && l.contains(&format!("next_tid = {other_pid},"))),
        "other tasks' scheduling, with their names"
    );
    let files: Vec<String> = std::fs::read_dir(out.path().join("kernel")).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    assert!(files.iter().any(|f| f.starts_with("tree_")) && files.iter().any(|f| f.starts_with("channel0_")), "{files:?}");
    let meta = std::fs::read_to_string(out.path().join("kernel/metadata")).unwrap();
    assert!(meta.contains(&format!("traced_pid = {pid};")));
    assert!(meta.contains("tracer_name = \"lttng-modules\";") && meta.contains("tracer_major = 2;") && meta.contains("tracer_minor = 13;"));
    assert!(meta.contains(&format!("uuid = \"{}\"", ust_core::clock::boot_id())));
}

/// Buffers of 8 KiB against a burst of system calls (a one-byte `dd`): every event of the
/// burst is in the trace or counted lost, in the trace (babeltrace2 reports as many
/// discarded events as the recorder counted).
#[test]
fn small_buffers_under_a_burst_count_every_lost_event() {
    require_tracefs!();
    let out = tempfile::tempdir().unwrap();
    let mut child =
        Command::new("sh").args(["-c", "read x; exec dd if=/dev/zero of=/dev/null bs=1 count=300000 status=none"]).stdin(Stdio::piped()).spawn().unwrap();
    let pid = child.id() as i32;
    let opts = Options { buffer_kb: Some(8), ..Options::default() };
    let rec = ViewRecorder::prepare(true, opts).unwrap().start(kernel_dir(out.path()), ViewFilter::everything(pid)).unwrap();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    let summary = rec.finish(pid, ust_core::clock::realtime_offset_ns()).unwrap();
    assert_eq!(summary.buffer_kb, 8);
    let o = Command::new("babeltrace2").arg(out.path().join("kernel")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(common::bt_discarded(&err), summary.lost, "{err}");
    // dd's 300,000 reads and writes, entries and exits: each in the trace or counted lost.
    let calls = ["read", "write"].iter().flat_map(|c| [format!(" syscall_entry_{c}: "), format!(" syscall_exit_{c}: ")]).collect::<Vec<_>>();
    let seen = String::from_utf8_lossy(&o.stdout).lines().filter(|l| calls.iter().any(|c| l.contains(c.as_str()))).count() as u64;
    eprintln!("{seen} of dd's calls' events in the trace, {} lost", summary.lost);
    assert!(seen + summary.lost >= 1_200_000, "every event is in the trace or counted lost: {seen} + {}", summary.lost);
}

#[test]
fn stale_instances_of_dead_pids_are_removed() {
    require_tracefs!();
    let root = tracefs::root().unwrap();
    // A pid that is surely dead: a child that was reaped.
    let mut c = Command::new("true").spawn().unwrap();
    let dead = c.id();
    c.wait().unwrap();
    let stale = root.join("instances").join(format!("{}{dead}", tracefs::INSTANCE_PREFIX));
    std::fs::create_dir(&stale).unwrap();
    let removed = tracefs::remove_stale(&root);
    assert!(removed.contains(&format!("{}{dead}", tracefs::INSTANCE_PREFIX)), "{removed:?}");
    assert!(!stale.exists());
}

/// The test user `--as-user` drops to (created by scripts/test.sh; here too if missing).
const AS_USER: &str = "ustlttng";

fn id_of(user: &str, flag: &str) -> u32 {
    if !Command::new("id").arg(user).output().unwrap().status.success() {
        let o = Command::new("useradd").args(["--no-create-home", "--shell", "/usr/sbin/nologin", user]).output().unwrap();
        assert!(o.status.success(), "useradd {user}: {}", String::from_utf8_lossy(&o.stderr));
    }
    let o = Command::new("id").args([flag, user]).output().unwrap();
    String::from_utf8(o.stdout).unwrap().trim().parse().unwrap()
}

/// `ust trace --kernel --as-user USER` as root: the command runs as USER (its `id` says so,
/// by name and by `$SUDO_UID`), the kernel is recorded system-wide (the command's tasks are
/// in it), and the trace is USER's, readable by them; with no USER and no `SUDO_UID` it is
/// an error and nothing runs.
#[test]
fn as_user_runs_the_command_as_that_user_and_gives_them_the_trace() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    require_tracefs!();
    let (uid, gid) = (id_of(AS_USER, "-u"), id_of(AS_USER, "-g"));
    let d = common::TestDaemon::start();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The trace is written as the user: its output is where they may write.
    let theirs = tmp.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(uid), Some(gid)).unwrap();
    let run = |out: &Path, user: Option<&str>, sudo: Option<(u32, u32)>, cmd: &str| {
        let mut c = d.ust_cmd();
        c.env_remove("SUDO_UID").env_remove("SUDO_GID").args(["trace", "--kernel", "--output"]).arg(out).arg("--as-user");
        if let Some(u) = user {
            c.arg(u);
        }
        if let Some((u, g)) = sudo {
            c.env("SUDO_UID", u.to_string()).env("SUDO_GID", g.to_string());
        }
        c.args(["--", "sh", "-c", cmd]);
        common::output_within(c, std::time::Duration::from_secs(60))
    };
    let out = theirs.join("named");
    let o = run(&out, Some(AS_USER), None, "id -u; id -g; echo $HOME $USER; sleep 0.1; cat /etc/hostname");
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned());
    assert!(o.status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.first().copied(), Some(uid.to_string().as_str()), "{stdout}\n{stderr}");
    assert_eq!(lines.get(1).copied(), Some(gid.to_string().as_str()), "{stdout}");
    assert!(lines.get(2).is_some_and(|l| l.ends_with(&format!(" {AS_USER}"))), "USER is theirs: {stdout}");
    assert!(stderr.contains(&format!("running sh as {AS_USER} (uid {uid}")), "{stderr}");
    // The trace is theirs, every file of it, and they can read it.
    let mut stack = vec![out.clone()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert_eq!((m.uid(), m.gid()), (uid, gid), "{} is the user's", p.display());
        if m.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        }
    }
    let as_them = Command::new("setpriv")
        .args(["--reuid", &uid.to_string(), "--regid", &gid.to_string(), "--init-groups", "--", "babeltrace2"])
        .arg(out.join("kernel"))
        .output()
        .unwrap();
    assert!(as_them.status.success(), "the user reads their trace: {}", String::from_utf8_lossy(&as_them.stderr));
    // The kernel side is root's system-wide view, and the command's tasks are in it: the
    // traced pid, and its children running id, sleep and cat. (A system-wide recording on
    // a loaded machine may lose some events, so any of their events counts, not one each.)
    let text = String::from_utf8(as_them.stdout).unwrap();
    let meta = std::fs::read_to_string(out.join("kernel/metadata")).unwrap();
    let traced: i32 =
        meta.split("traced_pid = ").nth(1).and_then(|r| r.split(';').next()).and_then(|v| v.trim().parse().ok()).expect("traced_pid in the metadata");
    assert!(text.contains(&format!("{{ tid = {traced} }}")), "events of the traced pid {traced}");
    let children = ["id", "sleep", "cat"].iter().filter(|p| text.contains(&format!("/{p}\"")) || text.contains(&format!("comm = \"{p}\""))).count();
    assert!(children >= 2, "the children's tasks: {children} of 3");
    assert!(text.lines().filter(|l| l.contains("sched_switch:")).count() > 10, "system-wide switches");
    // From sudo's variables alone; an instrumented program run so has its user-space
    // events in the trace too (it registers with root's daemon).
    let out2 = theirs.join("sudo");
    let prog = common::program("debug", "threeevents");
    let o = run(&out2, None, Some((uid, gid)), &format!("id -u; {}", prog.display()));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), uid.to_string());
    assert_eq!(std::fs::metadata(&out2).unwrap().uid(), uid);
    let user_events: Vec<String> = common::babeltrace(&out2.join("ust"))
        .lines()
        .filter(|l| l.contains(" short:ev: "))
        .map(|l| l.rsplit("{ i = ").next().unwrap_or("").to_string())
        .collect();
    assert_eq!(user_events, ["0 }", "1 }", "2 }"], "the program's three events, run as {AS_USER}");
    // Neither: a clear error, and the command does not run.
    let marker = tmp.path().join("ran");
    let o = run(&tmp.path().join("none"), None, None, &format!("touch {}", marker.display()));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--as-user needs a USER: none was given and SUDO_UID is not set"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!marker.exists(), "nothing ran");
}
