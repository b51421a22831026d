//! Root never writes through a path the user controls (issue 34): `sudo ust trace --kernel
//! --as-user`, root's own `ust trace` into a sudo user's home, `ust crash-dump` and `ust
//! view --repair` run by root in a user's directory. A symbolic link planted at every path
//! root writes (`kernel`, `kernel/metadata`, `kernel/index`, a kernel stream file, `proc`,
//! `proc/<pid>`, `kernel-stacks`, `ust`, a per-process trace directory, `~/ust-traces`, the
//! `removed` directory of a repair) points at a root-owned file or directory made here: each
//! target must keep its content, times, owner and mode, nothing may be created outside the
//! user's directory, the command must say what it refused, and everything else of the trace
//! must be written, as the user, and read back by babeltrace2. And the output directory
//! replaced by a link while the trace is written: said, nothing lost, nothing written
//! through the link.
//!
//! As root, with tracefs (skipped otherwise, saying why), and the user `ustrw` (made here
//! when missing, as `scripts/test.sh` makes it; its home too).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use system_tests as common;
use system_tests::{babeltrace, babeltrace_allowing_warnings, output_within, program, KillOnDrop, TestDaemon};

/// The user the trace is for.
const USER: &str = "ustrw";

/// How long one `ust trace` may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(180);

fn skip_reason() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("not root".into());
    }
    ust_kernel::tracefs::root().err().map(|e| e.to_string())
}

macro_rules! require_root_and_tracefs {
    () => {
        if let Some(r) = skip_reason() {
            eprintln!("skipped: needs root and tracefs ({r})");
            return;
        }
    };
}

/// The user: ids and home (from the password database; the home made, theirs, when
/// missing).
struct User {
    uid: u32,
    gid: u32,
    home: PathBuf,
}

fn user() -> User {
    common::users::ensure_users(&[USER]);
    let (uid, gid) = (common::users::id_of(USER, "-u"), common::users::id_of(USER, "-g"));
    let o = Command::new("getent").args(["passwd", USER]).output().unwrap();
    let home = PathBuf::from(String::from_utf8(o.stdout).unwrap().trim().split(':').nth(5).expect("a home in the password database"));
    if !home.exists() {
        std::fs::create_dir_all(&home).unwrap();
        std::os::unix::fs::chown(&home, Some(uid), Some(gid)).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    User { uid, gid, home }
}

impl User {
    /// A directory of the user's (0755) at `p`, as they would make it (with its missing
    /// parents, theirs too).
    fn dir(&self, p: &Path) -> PathBuf {
        if !p.exists() {
            self.dir(p.parent().expect("below the test's directory"));
            std::fs::create_dir(p).unwrap();
            std::os::unix::fs::chown(p, Some(self.uid), Some(self.gid)).unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        p.to_path_buf()
    }

    /// A symbolic link `link` -> `target`, the user's, as they would plant it.
    fn plant(&self, link: &Path, target: &Path) {
        std::os::unix::fs::symlink(target, link).unwrap();
        std::os::unix::fs::lchown(link, Some(self.uid), Some(self.gid)).unwrap();
    }

    /// Every entry under `dir` (itself included) is the user's.
    fn owns_all_of(&self, dir: &Path) {
        let mut stack = vec![dir.to_path_buf()];
        while let Some(p) = stack.pop() {
            let m = std::fs::symlink_metadata(&p).unwrap();
            assert_eq!((m.uid(), m.gid()), (self.uid, self.gid), "{} is not the user's", p.display());
            if m.is_dir() {
                stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            }
        }
    }
}

/// What a root-owned file or directory is, to prove it unchanged: owner, mode, times and
/// content of it and of every entry in it.
#[derive(Debug, PartialEq)]
struct Seen(Vec<Entry>);

/// One file or directory as [`Seen`] keeps it: path, owner, group, mode, modification time
/// (s, ns), content (of a file).
#[derive(Debug, PartialEq)]
struct Entry(PathBuf, u32, u32, u32, i64, i64, Vec<u8>);

fn seen(p: &Path) -> Seen {
    let mut out = Vec::new();
    let mut stack = vec![p.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        let content = if m.is_file() { std::fs::read(&p).unwrap() } else { Vec::new() };
        if m.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()).collect();
            entries.sort();
            stack.extend(entries);
        }
        out.push(Entry(p, m.uid(), m.gid(), m.mode(), m.mtime(), m.mtime_nsec(), content));
    }
    Seen(out)
}

/// Root's things the links point at: a directory holding a file, and a file, in a
/// directory of root's (0755).
struct Roots {
    dir: PathBuf,
    file: PathBuf,
    before: (Seen, Seen),
}

impl Roots {
    fn make(at: &Path) -> Roots {
        std::fs::create_dir_all(at).unwrap();
        std::fs::set_permissions(at, std::fs::Permissions::from_mode(0o755)).unwrap();
        let dir = at.join("roots-dir");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("roots-file"), b"root's own\n").unwrap();
        let file = at.join("roots-file");
        std::fs::write(&file, b"root's own file\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        Roots { before: (seen(&dir), seen(&file)), dir, file }
    }

    /// Neither changed (content, times, owner, mode), nothing created in the directory.
    fn untouched(&self) {
        assert_eq!(seen(&self.dir), self.before.0, "root's directory changed");
        assert_eq!(seen(&self.file), self.before.1, "root's file changed");
    }
}

/// A temporary directory every user may enter (root's, 0755), with root's things in
/// `roots/` and the user's directory `theirs/`.
fn place(u: &User) -> (tempfile::TempDir, Roots, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let roots = Roots::make(&tmp.path().join("roots"));
    let theirs = u.dir(&tmp.path().join("theirs"));
    (tmp, roots, theirs)
}

/// Nothing was made in the test's directory but `expected` (root's things, the user's
/// directory, and what the test made itself).
fn nothing_else_in(tmp: &Path, expected: &[&str]) {
    let mut names: Vec<String> = std::fs::read_dir(tmp).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    let mut expected: Vec<&str> = expected.to_vec();
    expected.sort();
    assert_eq!(names, expected, "something was made outside the user's directory");
}

/// `ust trace --kernel [--output OUT] --as-user -- CMD` as root run through sudo by the
/// user (`SUDO_UID`, `SUDO_GID`), against root's daemon `d`, no other system daemon.
fn sudo_trace(d: &TestDaemon, u: &User, out: Option<&Path>, cmd: &[&str]) -> Command {
    let mut c = d.ust_cmd();
    c.env("SUDO_UID", u.uid.to_string()).env("SUDO_GID", u.gid.to_string()).env("UST_SYSTEM_RUNDIR", d.tmp.path().join("no-system-daemon"));
    c.args(["trace", "--kernel"]);
    if let Some(o) = out {
        c.arg("--output").arg(o);
    }
    c.arg("--as-user").arg("--").args(cmd);
    c
}

fn threeevents() -> String {
    program("debug", "threeevents").to_string_lossy().into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `threeevents`' three events, read back from `ust` (babeltrace2, no warning).
fn three_events(ust: &Path) {
    events_of(ust, "short:ev");
}

/// The three events `name` with `i` = 0, 1, 2 (and no other event but the state dump) in
/// `ust`, read back by babeltrace2 with no warning.
fn events_of(ust: &Path, name: &str) {
    let events: Vec<(String, String)> = common::bt_events(&babeltrace(ust)).into_iter().map(|e| (e.name, e.fields)).collect();
    let want: Vec<(String, String)> = (0..3).map(|i| (name.to_string(), format!("i = {i}"))).collect();
    assert_eq!(events, want, "the program's events in {}", ust.display());
}

/// The kernel trace in `kernel` reads back and has events of the traced pid, unless the
/// kernel lost events (`err`: what `ust trace` said, `N kernel events recorded …, M lost`;
/// a loaded machine's system-wide recording may lose the few of a task that sleeps).
fn kernel_trace(kernel: &Path, err: &str) {
    let (text, _) = babeltrace_allowing_warnings(kernel);
    assert!(text.lines().any(|l| l.contains("sched_switch:")), "no kernel event in {}; ust trace said:\n{err}", kernel.display());
    let meta = std::fs::read_to_string(kernel.join("metadata")).unwrap();
    let traced: i32 = meta.split("traced_pid = ").nth(1).and_then(|r| r.split(';').next()).and_then(|v| v.trim().parse().ok()).expect("traced_pid");
    let lost: u64 = err
        .lines()
        .find(|l| l.contains(" kernel events recorded in "))
        .and_then(|l| l.rsplit(", ").next()?.strip_suffix(" lost")?.parse().ok())
        .expect("the kernel's count");
    assert!(lost > 0 || text.contains(&format!("{{ tid = {traced} }}")), "events of the traced pid {traced} in {}; ust trace said:\n{err}", kernel.display());
}

/// Says what was refused: a `refusing PATH` in stderr.
fn says_refused(err: &str, path: &Path) {
    assert!(err.contains(&format!("refusing {}", path.display())), "no refusal of {} in:\n{err}", path.display());
}

#[test]
fn a_link_planted_where_root_writes_is_refused_and_the_rest_is_written_as_the_user() {
    require_root_and_tracefs!();
    let u = user();
    let d = TestDaemon::start();
    let (tmp, roots, theirs) = place(&u);
    // (link below the output, what it points at, the part of the trace it stops)
    let cases: [(&str, &Path, &str); 7] = [
        ("kernel", &roots.dir, "kernel"),
        ("kernel/metadata", &roots.file, "kernel"),
        ("kernel/index", &roots.dir, "kernel"),
        ("kernel/channel0_0", &roots.file, "kernel"),
        ("kernel-stacks", &roots.dir, "kernel-stacks"),
        ("proc", &roots.dir, "proc"),
        ("ust", &roots.dir, "ust"),
    ];
    for (i, (link, target, stops)) in cases.into_iter().enumerate() {
        let out = u.dir(&theirs.join(format!("case-{i}")));
        if let Some(parent) = Path::new(link).parent().filter(|p| !p.as_os_str().is_empty()) {
            u.dir(&out.join(parent));
        }
        u.plant(&out.join(link), target);
        let (child, stdout, pid) = gated(sudo_trace(&d, &u, Some(&out), &[]), &threeevents());
        let o = go(child, stdout);
        let err = stderr(&o);
        assert!(o.status.success(), "{link}: {err}");
        roots.untouched();
        says_refused(&err, &out.join(link));
        u.owns_all_of(&out);
        // Everything else is there, and reads back.
        if stops != "ust" {
            three_events(&out.join("ust"));
        } else {
            assert!(err.contains("(threeevents) was not traced"), "{err}");
        }
        if stops != "kernel" {
            kernel_trace(&out.join("kernel"), &err);
        }
        if stops != "kernel-stacks" && stops != "kernel" {
            babeltrace_allowing_warnings(&out.join("kernel-stacks"));
        }
        if stops != "proc" {
            assert!(!std::fs::read_to_string(out.join(format!("proc/{pid}/maps"))).unwrap().is_empty(), "{link}: no maps saved");
        }
    }
    nothing_else_in(tmp.path(), &["roots", "theirs"]);
}

/// Runs `sh -c 'echo $$; read go; exec PROG'` under `ust trace`: returns the child, its
/// stdout and the command's pid once it printed it and `ust trace`'s sampler of `/proc`
/// went once over it (the recording runs, the program has not started).
fn gated(mut c: Command, prog: &str) -> (KillOnDrop, BufReader<std::process::ChildStdout>, i32) {
    c.args(["sh", "-c", &format!("echo $$; read go; exec {prog}")]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = KillOnDrop(c.spawn().unwrap());
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let pid = line.trim().parse().unwrap_or_else(|_| panic!("the command's pid, not {line:?}"));
    sampled(child.id());
    (child, stdout, pid)
}

/// Waits until the `/proc` sampler thread (`ust-maps`) of `ust trace` (`ust_pid`) made one
/// whole pass over the traced tree since now: it is seen asleep between two passes
/// (blocked in `nanosleep`, `/proc/<tid>/syscall`), then asleep again after blocking once
/// more (`voluntary_ctxt_switches` grew): the pass between began after the first look.
fn sampled(ust_pid: u32) {
    // (asleep, voluntary switches) of the sampler thread, once it exists.
    let look = || -> Option<(bool, u64)> {
        std::fs::read_dir(format!("/proc/{ust_pid}/task")).ok()?.flatten().find_map(|t| {
            (std::fs::read_to_string(t.path().join("comm")).ok()?.trim() == "ust-maps").then_some(())?;
            let call: i64 = std::fs::read_to_string(t.path().join("syscall")).ok()?.split_whitespace().next()?.parse().ok().unwrap_or(-1);
            let status = std::fs::read_to_string(t.path().join("status")).ok()?;
            let switches = status.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?.trim().parse().ok()?;
            Some((call == libc::SYS_nanosleep || call == libc::SYS_clock_nanosleep, switches))
        })
    };
    let deadline = std::time::Instant::now() + HANG;
    let mut first = None;
    loop {
        match (first, look()) {
            (None, Some((true, n))) => first = Some(n),
            (Some(f), Some((true, n))) if n > f => return,
            _ => {}
        }
        assert!(std::time::Instant::now() < deadline, "ust trace's /proc sampler never made a pass");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Lets a [`gated`] command go and waits for `ust trace` (at most [`HANG`]).
fn go(mut child: KillOnDrop, stdout: BufReader<std::process::ChildStdout>) -> Output {
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stderr, &mut s);
        let _ = tx.send(s);
    });
    let err = rx.recv_timeout(HANG).expect("ust trace hung");
    drop(stdout);
    let status = child.wait().unwrap();
    Output { status, stdout: Vec::new(), stderr: err }
}

#[test]
fn a_link_at_proc_pid_or_at_the_process_trace_directory_is_refused() {
    require_root_and_tracefs!();
    let u = user();
    let d = TestDaemon::start();
    let (tmp, roots, theirs) = place(&u);
    let out = u.dir(&theirs.join("out"));
    // `sudo_trace` ends with `--`: the gated shell follows.
    let (child, stdout, pid) = gated(sudo_trace(&d, &u, Some(&out), &[]), &threeevents());
    // The pid is known and nothing of the program has run: links where its `/proc` copy
    // and its trace directory (`threeevents-<pid>-<registration second>`) will go.
    u.dir(&out.join("proc"));
    u.plant(&out.join(format!("proc/{pid}")), &roots.dir);
    u.dir(&out.join("ust/pid"));
    let now = ust_ctf::datetime::now();
    for s in now - 2..now + 600 {
        u.plant(&out.join(format!("ust/pid/threeevents-{pid}-{}", ust_ctf::datetime::stamp_at(s))), &roots.dir);
    }
    let o = go(child, stdout);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    roots.untouched();
    says_refused(&err, &out.join(format!("proc/{pid}")));
    assert!(
        err.contains(&format!("process {pid} (threeevents) was not traced")) && err.contains(&format!("refusing {}/ust/pid/threeevents-{pid}-", out.display())),
        "{err}"
    );
    roots.untouched();
    u.owns_all_of(&out);
    kernel_trace(&out.join("kernel"), &err);
    nothing_else_in(tmp.path(), &["roots", "theirs"]);
}

#[test]
fn the_default_output_of_a_sudo_user_is_written_as_them() {
    require_root_and_tracefs!();
    let u = user();
    let d = TestDaemon::start();
    let (tmp, roots, _theirs) = place(&u);
    let traces = u.home.join("ust-traces");
    let written = |err: &str| -> PathBuf {
        let line = err.lines().find_map(|l| l.strip_prefix("ust: trace written to ")).unwrap_or_else(|| panic!("no output named:\n{err}"));
        PathBuf::from(line)
    };
    // `sudo ust trace --kernel --as-user`: the user's `~/ust-traces`, made as them.
    let _ = std::fs::remove_file(&traces);
    let o = output_within(sudo_trace(&d, &u, None, &[&threeevents()]), HANG);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let out = written(&err);
    assert!(out.starts_with(&traces), "{}", out.display());
    u.owns_all_of(&traces);
    three_events(&out.join("ust"));
    kernel_trace(&out.join("kernel"), &err);
    std::fs::remove_dir_all(&out).unwrap();
    // Root's own `sudo -E ust trace` (no --as-user) into the user's home: written as them,
    // and said.
    let mut c = d.ust_cmd();
    c.env("HOME", &u.home).env("UST_SYSTEM_RUNDIR", d.tmp.path().join("no-system-daemon")).args(["trace", "--kernel", "--", &threeevents()]);
    let o = output_within(c, HANG);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let out = written(&err);
    assert!(err.contains(&format!("belongs to uid {}: the trace is written as that user", u.uid)), "{err}");
    u.owns_all_of(&traces);
    three_events(&out.join("ust"));
    kernel_trace(&out.join("kernel"), &err);
    std::fs::remove_dir_all(&out).unwrap();
    // `~/ust-traces` a link to root's directory: followed as the user, who may not write
    // there; nothing runs.
    std::fs::remove_dir(&traces).unwrap();
    u.plant(&traces, &roots.dir);
    let marker = tmp.path().join("ran");
    let o = output_within(sudo_trace(&d, &u, None, &["sh", "-c", &format!("touch {}", marker.display())]), HANG);
    std::fs::remove_file(&traces).unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("cannot make the output directory {}", traces.display())) && err.contains("Permission denied"), "{err}");
    assert!(!marker.exists(), "the command ran");
    roots.untouched();
    nothing_else_in(tmp.path(), &["roots", "theirs"]);
}

#[test]
fn the_output_replaced_by_a_link_mid_trace_keeps_the_trace_where_it_was() {
    require_root_and_tracefs!();
    let u = user();
    let d = TestDaemon::start();
    let (tmp, roots, theirs) = place(&u);
    let out = theirs.join("out");
    let (child, stdout, pid) = gated(sudo_trace(&d, &u, Some(&out), &[]), &threeevents());
    // Recording: the output is open. The user moves it away and puts a link in its place.
    let moved = theirs.join("moved");
    std::fs::rename(&out, &moved).unwrap();
    u.plant(&out, &roots.dir);
    let o = go(child, stdout);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "{} was replaced by a symbolic link while the trace was written: nothing was written through it; the trace is in the directory that was there, now {}",
            out.display(),
            moved.display()
        )),
        "{err}"
    );
    roots.untouched();
    u.owns_all_of(&theirs);
    // Nothing lost: the kernel's start (before the move) and the program (after it).
    three_events(&moved.join("ust"));
    kernel_trace(&moved.join("kernel"), &err);
    assert!(!std::fs::read_to_string(moved.join(format!("proc/{pid}/maps"))).unwrap().is_empty());
    // The summary read the trace where it is.
    assert!(err.contains(&format!("ust: trace written to {}", moved.display())), "{err}");
    assert!(err.lines().any(|l| l.starts_with("ust:   short:ev ") && l.ends_with(" 3")), "{err}");
    nothing_else_in(tmp.path(), &["roots", "theirs"]);
}

/// A `--shm-path` buffer set in `shm` holding three `holder:ev` events, left as a crash
/// leaves it: the daemon killed while the program lives, then the program.
fn shm_set(shm: &Path) {
    let d = TestDaemon::start();
    let out = d.tmp.path().join("trace");
    d.ust_ok(&["create", "s", "--shm-path", shm.to_str().unwrap(), "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "holder:*"]);
    d.ust_ok(&["start"]);
    let (mut holder, _stdout) = common::spawn_ready(Command::new(program("debug", "holder")).arg("3").env("UST_RUNDIR", &d.rundir));
    // SAFETY: kill(2) of this test's own daemon: its buffer files stay behind.
    unsafe { libc::kill(d.pid(), libc::SIGKILL) };
    holder.kill().unwrap();
    holder.wait().unwrap();
}

#[test]
fn crash_dump_and_repair_in_a_users_directory_write_as_the_user_and_never_through_a_link() {
    require_root_and_tracefs!();
    let u = user();
    let (tmp, roots, theirs) = place(&u);
    let shm = tmp.path().join("shm");
    shm_set(&shm);
    let crash_dump = |out: &Path| {
        output_within(
            {
                let mut c = Command::new(common::ust_bin());
                c.arg("crash-dump").arg(&shm).arg(out);
                c
            },
            HANG,
        )
    };
    // `ust` a link: refused, said, exit status 1.
    let bad = u.dir(&theirs.join("bad"));
    u.plant(&bad.join("ust"), &roots.dir);
    let o = crash_dump(&bad);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    says_refused(&err, &bad.join("ust"));
    roots.untouched();
    // Into a fresh directory of theirs: written as them.
    let out = u.dir(&theirs.join("dump"));
    let o = crash_dump(&out);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains(&format!("belongs to uid {}: written as that user", u.uid)), "{err}");
    u.owns_all_of(&out);
    events_of(&out.join("ust"), "holder:ev");
    // A packet cut off at the end of a stream file (as a killed daemon leaves it), and the
    // directory the cut bytes go to a link to root's: `--repair` refuses and changes
    // nothing; a link to a file of root's that looks like a stream is not even read.
    let trace = std::fs::read_dir(out.join("ust/pid")).unwrap().next().unwrap().unwrap().path();
    let stream = std::fs::read_dir(&trace)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_file() && p.file_name().unwrap() != "metadata" && std::fs::metadata(p).unwrap().len() > 0)
        .expect("a stream file with packets");
    let whole = std::fs::read(&stream).unwrap();
    let cut = [whole.as_slice(), &whole[..1000]].concat();
    std::fs::write(&stream, &cut).unwrap();
    std::fs::write(&roots.file, &cut).unwrap();
    let roots = Roots { before: (seen(&roots.dir), seen(&roots.file)), ..roots };
    u.plant(&trace.join("removed"), &roots.dir);
    u.plant(&trace.join("channel9_0"), &roots.file);
    let repair = || {
        output_within(
            {
                let mut c = Command::new(common::ust_bin());
                c.args(["view", "--repair"]).arg(&out);
                c
            },
            HANG,
        )
    };
    let o = repair();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    says_refused(&err, &trace.join("removed"));
    assert_eq!(std::fs::read(&stream).unwrap(), cut, "nothing was cut");
    roots.untouched();
    // Without the links: repaired, as the user.
    std::fs::remove_file(trace.join("removed")).unwrap();
    std::fs::remove_file(trace.join("channel9_0")).unwrap();
    let o = repair();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains(&format!("belongs to uid {}: repaired as that user", u.uid)), "{err}");
    assert_eq!(std::fs::read(&stream).unwrap(), whole);
    u.owns_all_of(&out);
    roots.untouched();
    events_of(&out.join("ust"), "holder:ev");
    nothing_else_in(tmp.path(), &["roots", "shm", "theirs"]);
}
