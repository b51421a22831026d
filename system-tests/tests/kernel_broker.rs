//! Tier 2 of the kernel view: root's `ust-consumerd` as the kernel broker of ordinary users
//! (`ust_consumerd::servers::kview`, `ust_kernel::filter`). A root daemon runs in a temporary
//! `UST_RUNDIR`; users `ustkb-a` and `ustkb-b` (created with `useradd -M` if missing) run
//! `ust trace --kernel` through `setpriv` with `UST_SYSTEM_RUNDIR` pointing at it. Every
//! trace is read back by babeltrace2 and `ust report`.
//!
//! Needs root and tracefs (CI runs as root); otherwise skipped with the reason printed.

use system_tests as common;

use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::strace::{strace_counts, WORKLOAD};
use common::users::{self, id_of};
use common::{babeltrace, ust_bin, KillOnDrop};
use ust_ctl::kview::{KviewReply, KviewRequest};

const A: &str = "ustkb-a";
const B: &str = "ustkb-b";

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if ust_kernel::tracefs::root().is_err() {
        return Some("no tracefs".into());
    }
    None
}

macro_rules! require_root {
    () => {
        if let Some(r) = skip_reason() {
            eprintln!("skipped: {r}");
            return;
        }
    };
}

/// Tests of this file share the machine through this lock: the one that runs 20 traced
/// commands at once takes it alone (its load would starve the others' recorders on a
/// 2-CPU machine), the others together.
static MACHINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

#[allow(dead_code)] // held for its Drop
enum Turn {
    Shared(std::sync::RwLockReadGuard<'static, ()>),
    Alone(std::sync::RwLockWriteGuard<'static, ()>),
}

/// Root's daemon as the kernel broker, with the users' homes beside it
/// ([`users::World`], ready once its `kview` socket answers), holding its turn of the
/// machine.
struct World {
    w: users::World,
    _turn: Turn,
}

impl std::ops::Deref for World {
    type Target = users::World;
    fn deref(&self) -> &users::World {
        &self.w
    }
}

impl std::ops::DerefMut for World {
    fn deref_mut(&mut self) -> &mut users::World {
        &mut self.w
    }
}

impl World {
    fn new(extra: &[&str]) -> World {
        World::with_wrapper(extra, &[])
    }

    /// As [`World::new`], with the machine to itself (see [`MACHINE`]).
    fn alone(extra: &[&str]) -> World {
        let turn = Turn::Alone(MACHINE.write().unwrap_or_else(|p| p.into_inner()));
        World::start(extra, &[], turn)
    }

    /// Root's daemon started through `wrapper` (a command that execs its arguments), e.g.
    /// in a mount namespace of its own.
    fn with_wrapper(extra: &[&str], wrapper: &[&str]) -> World {
        World::start(extra, wrapper, Turn::Shared(MACHINE.read().unwrap_or_else(|p| p.into_inner())))
    }

    fn start(extra: &[&str], wrapper: &[&str], turn: Turn) -> World {
        World { w: users::World::start([A, B], "kview", extra, wrapper), _turn: turn }
    }

    /// `ust trace --kernel --output <home>/<name> -- CMD` as `user`: (output, stderr, status).
    fn trace(&self, user: &str, name: &str, cmd: &[&str]) -> (PathBuf, String, Output) {
        let out = self.home(user).join(name);
        let mut c = self.as_user(user, Path::new(ust_bin()));
        c.args(["trace", "--kernel", "--output", out.to_str().unwrap(), "--"]).args(cmd);
        let o = common::output_within(c, Duration::from_secs(60));
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        (out, err, o)
    }

    fn report(&self, out: &Path) -> String {
        let o = Command::new(ust_bin()).args(["report", "--wakeups", out.to_str().unwrap()]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.w.stop_daemons();
        if let Ok(root) = ust_kernel::tracefs::root() {
            ust_kernel::tracefs::remove_stale(&root);
        }
    }
}

/// Every file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Whether `text` names `pid` as a task: the number as a whole token where a task id is
/// written — after a `pid`/`tid` key (`tid = N`, `prev_tid = N`, `pid N`), in brackets or
/// parentheses (`cat[N]`, `(N)`), or between dashes or slashes of a path (`cat-N-…`). A bare
/// number elsewhere (a size, an alignment, a count in the metadata or the report) is not a
/// task id: pids wrap, and B's may equal any such constant.
fn names_pid(text: &str, pid: &str) -> bool {
    let b = text.as_bytes();
    let mut from = 0;
    while let Some(i) = text[from..].find(pid).map(|i| i + from) {
        from = i + 1;
        let end = i + pid.len();
        let before = if i > 0 { b[i - 1] } else { b' ' };
        let after = b.get(end).copied().unwrap_or(b' ');
        if before.is_ascii_digit() || after.is_ascii_digit() || before == b'.' || after == b'.' {
            continue;
        }
        let key = b[i.saturating_sub(16)..i].to_ascii_lowercase();
        let mut k = key.as_slice();
        while let [rest @ .., b' ' | b'=' | b':'] = k {
            k = rest;
        }
        let keyed = k.ends_with(b"pid") || k.ends_with(b"tid");
        let bracketed = matches!((before, after), (b'[', b']') | (b'(', b')'));
        let in_path = matches!(before, b'-' | b'/') && matches!(after, b'-' | b'/' | b' ' | b'\n');
        if keyed || bracketed || in_path {
            return true;
        }
    }
    false
}

#[test]
fn names_pid_finds_task_ids_not_constants() {
    assert!(names_pid("{ prev_tid = 2048, next_tid = 7 }", "2048"));
    assert!(names_pid("woken by cat[2048] at", "2048"));
    assert!(names_pid("ust/pid/cat-2048-20261201-101010/", "2048"));
    assert!(names_pid("pid 2048 exits", "2048"));
    assert!(!names_pid("integer { size = 32; align = 2048; }", "2048"));
    assert!(!names_pid("[11:52:52.002048111] read 20480 bytes", "2048"));
    assert!(!names_pid("blocked 2048 ns", "2048"));
    assert!(!names_pid("µs 2048µs", "2048"));
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The waits of the report text for task `name` blocked in `what`, with their waker line.
fn woken_lines(report: &str, name: &str, what: &str) -> Vec<String> {
    let lines: Vec<&str> = report.lines().collect();
    lines.windows(2).filter(|w| w[0].trim_start().starts_with(&format!("{name} [")) && w[0].contains(what)).map(|w| w[1].trim().to_string()).collect()
}

#[test]
fn sleep_is_woken_by_a_timer_in_the_users_own_files() {
    require_root!();
    let w = World::new(&[]);
    let (out, err, o) = w.trace(A, "sleep", &["sh", "-c", "sleep 0.2; cat /etc/hostname"]);
    assert!(o.status.success(), "{err}\nroot's daemon:\n{}", w.log());
    assert!(err.contains("kernel view: tier 2"), "{err}");
    let uid = id_of(A, "-u");
    for f in files(&out.join("kernel")) {
        assert_eq!(std::fs::metadata(&f).unwrap().uid(), uid, "{} is the user's", f.display());
    }
    assert_eq!(std::fs::metadata(out.join("kernel")).unwrap().uid(), uid);
    let text = babeltrace(&out);
    assert!(text.lines().any(|l| l.contains("sched_process_exec") && l.contains("sleep")), "exec of sleep is seen");
    let r = w.report(&out);
    assert!(!r.contains("needs root's ust-consumerd"), "{r}");
    assert!(r.contains("kernel view of tier 2"), "{r}");
}

/// The timer that woke `sleep` is named: the switch back to `sleep` on the CPU the timer
/// woke is applied in its place among the other CPUs' records. Some kernels record no
/// switch out of the idle task on some CPUs (CPU 1 of 2-vCPU KVM guests), so when the timer
/// fires on such an idle CPU the wait ends at sleep's first event after it (`ust report`'s
/// inferred end), not nowhere.
#[test]
fn sleep_is_woken_by_a_timer_in_the_report() {
    require_root!();
    let w = World::new(&[]);
    let (out, err, o) = w.trace(A, "sleep", &["sh", "-c", "sleep 0.2; cat /etc/hostname"]);
    assert!(o.status.success(), "{err}\nroot's daemon:\n{}", w.log());
    let r = w.report(&out);
    let woke = woken_lines(&r, "sleep", "clock_nanosleep");
    assert!(!woke.is_empty(), "{r}\n{}", babeltrace(&out));
    assert!(woke.iter().any(|l| l.contains("woken by: timer interrupt")), "the timer woke sleep: {woke:?}\n{r}");
}

#[test]
fn a_reader_woken_by_another_users_writer_never_sees_who() {
    require_root!();
    let w = World::new(&[]);
    let shared = w.tmp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let fifo = shared.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
    std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o666)).unwrap();
    // B's writer has a name of its own, so that it can be looked for.
    let writer = shared.join("ustbwriter");
    std::fs::copy(std::fs::canonicalize("/bin/sh").unwrap(), &writer).unwrap();
    std::fs::set_permissions(&writer, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = format!("sleep 3; echo hello > {}", fifo.display());
    let mut b = KillOnDrop(w.as_user(B, &writer).args(["-c", &script]).spawn().unwrap());
    let b_pid = b.id() as i32;
    let (out, err, o) = w.trace(A, "fifo", &["cat", fifo.to_str().unwrap()]);
    assert!(b.wait().unwrap().success());
    assert!(o.status.success(), "{err}\nroot's daemon:\n{}", w.log());
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "hello");
    let r = w.report(&out);
    let woke: Vec<String> = ["openat", "read"].iter().flat_map(|s| woken_lines(&r, "cat", s)).collect();
    let sched = || babeltrace(&out.join("kernel")).lines().filter(|l| l.contains("sched_")).map(String::from).collect::<Vec<_>>().join("\n");
    assert!(woke.iter().any(|l| l.contains("woken by: another user's task")), "{woke:?}\n{r}\n{}\nroot's daemon:\n{}", sched(), w.log());
    // Nothing of B: not its pid, not its name, in any file of A's output or what reads it.
    let pid = b_pid.to_string();
    for f in files(&out) {
        let bytes = std::fs::read(&f).unwrap();
        assert!(!contains(&bytes, b"ustbwriter"), "B's name in {}", f.display());
        if let Ok(text) = std::str::from_utf8(&bytes) {
            assert!(!names_pid(text, &pid), "B's pid in {}", f.display());
        }
    }
    let text = babeltrace(&out);
    assert!(!text.contains("ustbwriter"));
    assert!(!names_pid(&text, &pid), "B's pid {pid} in the events");
    assert!(!r.contains("ustbwriter") && !names_pid(&r, &pid), "{r}");
    assert!(text.contains("another user"), "the writer is there as its kind");
}

#[test]
fn nothing_of_a_setuid_program_after_its_exec() {
    require_root!();
    let w = World::new(&[]);
    // A script whose interpreter is set-user-ID runs with root's credentials too.
    let script = w.tmp.path().join("ustkbsuidscript");
    std::fs::write(&script, "#!/usr/bin/passwd -S\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cmd = format!("{} 2>/dev/null; passwd -S; sleep 0.1", script.display());
    let (out, err, o) = w.trace(A, "passwd", &["sh", "-c", &cmd]);
    assert!(o.status.success() || o.status.code().is_some(), "{err}");
    assert!(err.contains("kernel view: tier 2"), "{err}");
    let text = babeltrace(&out.join("kernel"));
    assert!(text.contains("sleep"), "the view goes on for the other tasks");
    // The user's own calls before the exec name the program (the shell's argv, its PATH
    // search, the child's execve: strings the BPF capture copied, LTTng's `filename`,
    // `argv_text`): those are the user's. Nothing else may, and nothing the set-user-ID
    // program did after its exec (passwd -S reads /etc/shadow) is there.
    assert!(!text.contains("/etc/shadow"), "passwd's own calls after its exec");
    let text = without_call_strings(&text);
    assert!(!text.contains("passwd"), "passwd after its exec: {}", text.lines().filter(|l| l.contains("passwd")).collect::<Vec<_>>().join("\n"));
    assert!(
        !text.contains("ustkbsuidscript"),
        "the script after its exec: {}",
        text.lines().filter(|l| l.contains("ustkbsuidscript")).collect::<Vec<_>>().join("\n")
    );
    // The stream files hold the user's own call strings (above); the metadata and the
    // indexes hold no names at all.
    for f in files(&out.join("kernel")).into_iter().filter(|f| {
        !f.file_name().is_some_and(|n| n.to_string_lossy().contains("channel0_") || n.to_string_lossy().starts_with("tree_"))
            || f.extension().is_some_and(|e| e == "idx")
    }) {
        let b = std::fs::read(&f).unwrap();
        assert!(!contains(&b, b"passwd") && !contains(&b, b"ustkbsuidscript"), "{}", f.display());
    }
}

/// babeltrace2's text with the strings of `syscall_entry_*` payloads blanked: the call
/// arguments the BPF capture copied (escaped quotes kept inside).
fn without_call_strings(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for l in text.lines() {
        let Some(at) = l.find(" syscall_entry_") else {
            out.push_str(l);
            out.push('\n');
            continue;
        };
        out.push_str(&l[..at]);
        let (mut quoted, mut escaped) = (false, false);
        for c in l[at..].chars() {
            match (quoted, escaped, c) {
                (true, false, '\\') => escaped = true,
                (true, false, '"') => {
                    quoted = false;
                    out.push('"');
                }
                (true, _, _) => escaped = false,
                (false, _, '"') => {
                    quoted = true;
                    out.push('"');
                }
                (false, _, c) => out.push(c),
            }
        }
        out.push('\n');
    }
    out
}

/// Connects to `kview` as `uid`/`gid` from a thread of this process (raw setresuid: only
/// that thread changes), sends Hello then Start { pid } with `dir`; returns the replies.
fn probe_as(uid: u32, gid: u32, sys: &Path, pid: i32, dir: &Path) -> (KviewReply, Option<KviewReply>) {
    let (sys, dir) = (sys.to_path_buf(), dir.to_path_buf());
    std::thread::spawn(move || {
        // SAFETY: raw system calls change only this thread's credentials, which is all it
        // uses them for; the null group list with size 0 is valid.
        unsafe {
            assert_eq!(libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()), 0);
            assert_eq!(libc::syscall(libc::SYS_setresgid, gid, gid, gid), 0);
            assert_eq!(libc::syscall(libc::SYS_setresuid, uid, uid, uid), 0);
        }
        let s = UnixStream::connect(sys.join("kview")).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        ust_core::protocol::send(&s, &KviewRequest::Hello, &[]).unwrap();
        let hello = ust_core::protocol::recv::<KviewReply>(&s).unwrap().0;
        if hello != KviewReply::Ready {
            return (hello, None);
        }
        let d = std::fs::File::open(&dir).unwrap();
        ust_core::protocol::send(&s, &KviewRequest::Start { pid, probes: Vec::new() }, &[d.as_fd()]).unwrap();
        let start = ust_core::protocol::recv::<KviewReply>(&s).unwrap().0;
        (hello, Some(start))
    })
    .join()
    .unwrap()
}

#[test]
fn another_user_can_neither_attach_read_nor_list() {
    require_root!();
    let w = World::new(&[]);
    let out = w.home(A).join("long");
    let mut a = KillOnDrop(
        w.as_user(A, Path::new(ust_bin()))
            .args(["trace", "--kernel", "--output", out.to_str().unwrap(), "--", "sleep", "3"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Wait for A's traced sleep.
    let deadline = Instant::now() + Duration::from_secs(20);
    let sleep_pid = loop {
        let kids = ust_kernel::procfs::descendants(a.id() as i32);
        if let Some(p) = kids.iter().copied().find(|&p| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sleep")) {
            break p;
        }
        assert!(Instant::now() < deadline, "A's sleep did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    let (b_uid, b_gid) = (id_of(B, "-u"), id_of(B, "-g"));
    let b_dir = w.home(B);
    // B asks for A's pid: refused.
    let (hello, start) = probe_as(b_uid, b_gid, &w.sys, sleep_pid, &b_dir);
    assert_eq!(hello, KviewReply::Ready);
    match start {
        Some(KviewReply::Refused { reason }) => assert!(reason.contains("not a child of yours"), "{reason}"),
        other => panic!("B attached to A's command: {other:?}"),
    }
    // A asking for its own pid, but not from its own `ust trace`: refused as well.
    let (_, start) = probe_as(id_of(A, "-u"), id_of(A, "-g"), &w.sys, sleep_pid, &w.home(A));
    assert!(matches!(start, Some(KviewReply::Refused { .. })), "{start:?}");
    // B cannot read or list A's output, nor list root's daemon.
    let ls = w.as_user(B, Path::new("/bin/ls")).arg(out.join("kernel")).output().unwrap();
    assert!(!ls.status.success(), "B listed A's kernel trace");
    let cat = w.as_user(B, Path::new("/bin/cat")).arg(out.join("kernel/metadata")).output().unwrap();
    assert!(!cat.status.success(), "B read A's kernel metadata");
    let list = w.as_user(B, Path::new(ust_bin())).env("UST_RUNDIR", &w.sys).arg("list").output().unwrap();
    assert!(!list.status.success(), "B listed root's daemon: {}", String::from_utf8_lossy(&list.stdout));
    let st = a.wait().unwrap();
    assert!(st.success());
    for f in files(&out.join("kernel")) {
        let m = std::fs::metadata(&f).unwrap();
        assert_eq!(m.uid(), id_of(A, "-u"));
        assert_eq!(m.mode() & 0o077 & !0o055, 0, "{} is not writable by others", f.display());
    }
}

#[test]
fn broker_off_says_so_and_tier_1_is_used() {
    require_root!();
    let w = World::new(&["--kernel-view", "none"]);
    let (out, err, o) = w.trace(A, "off", &["sh", "-c", "sleep 0.1"]);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("does not offer kernel views") && err.contains("--kernel-view none"), "{err}");
    assert!(!err.contains("tier 2"), "{err}");
    let perf_ok = ust_kernel::perf::attr::paranoid().is_none_or(|p| p < 3);
    if perf_ok {
        assert!(err.contains("kernel view: tier 1"), "{err}");
        let meta = std::fs::read_to_string(out.join("kernel/metadata")).unwrap();
        assert!(meta.contains("kernel_source = \"perf_event_open\";"));
    } else {
        assert!(err.contains("nor with perf_event_open"), "{err}");
    }
}

#[test]
fn group_policy_refuses_outsiders() {
    require_root!();
    let w = World::new(&["--kernel-view", "group", "root"]);
    let (_out, err, o) = w.trace(A, "group", &["true"]);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("members of group root only"), "{err}");
}

#[test]
fn root_daemon_killed_mid_trace_leaves_a_whole_trace() {
    require_root!();
    let mut w = World::new(&[]);
    let out = w.home(A).join("cut");
    let mut a = w
        .as_user(A, Path::new(ust_bin()))
        .args(["trace", "--kernel", "--output", out.to_str().unwrap(), "--", "sh", "-c", "sleep 0.3; cat /etc/hostname; sleep 1.5"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Cut once the command is past its cat (it prints the host name), during its last sleep.
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(a.stdout.take().unwrap()), &mut line).unwrap();
    assert!(!line.is_empty(), "the command printed the host name");
    let mut d = w.daemon.take().unwrap();
    d.0.kill().unwrap();
    d.0.wait().unwrap();
    let o = a.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("went away during the trace") && err.contains("whole up to that moment"), "{err}");
    let text = babeltrace(&out.join("kernel"));
    assert!(text.contains("sched_process_exec"), "the events before the cut are there");
    assert!(text.lines().count() > 50, "{}", text.lines().count());
}

/// Runs `f` on a thread whose credentials are `uid`/`gid` (raw setresuid: that thread only),
/// so that what it connects to and spawns is that user's.
fn as_thread_of<T: Send + 'static>(uid: u32, gid: u32, f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        // SAFETY: raw system calls change only this thread's credentials; the null group
        // list with size 0 is valid.
        unsafe {
            assert_eq!(libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()), 0);
            assert_eq!(libc::syscall(libc::SYS_setresgid, gid, gid, gid), 0);
            assert_eq!(libc::syscall(libc::SYS_setresuid, uid, uid, uid), 0);
        }
        f()
    })
    .join()
    .unwrap()
}

fn hello(sys: &Path) -> UnixStream {
    let s = UnixStream::connect(sys.join("kview")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    ust_core::protocol::send(&s, &KviewRequest::Hello, &[]).unwrap();
    assert_eq!(ust_core::protocol::recv::<KviewReply>(&s).unwrap().0, KviewReply::Ready);
    s
}

fn start_with(s: &UnixStream, pid: i32, fds: &[std::os::fd::BorrowedFd<'_>]) -> KviewReply {
    ust_core::protocol::send(s, &KviewRequest::Start { pid, probes: Vec::new() }, fds).unwrap();
    ust_core::protocol::recv::<KviewReply>(s).map(|r| r.0).unwrap_or(KviewReply::Refused { reason: "closed".into() })
}

#[test]
fn hostile_requests_are_refused() {
    require_root!();
    let w = World::new(&[]);
    let (uid, gid) = (id_of(B, "-u"), id_of(B, "-g"));
    let (sys, home) = (w.sys.clone(), w.home(B));
    let replies = as_thread_of(uid, gid, move || {
        // A child of B's own (spawned from this thread, so with its credentials).
        let mut child = KillOnDrop(Command::new("sleep").arg("5").spawn().unwrap());
        let pid = child.id() as i32;
        let dir = std::fs::File::open(&home).unwrap();
        let file = std::fs::File::open("/etc/hostname").unwrap();
        let roots = std::fs::File::open("/tmp").unwrap();
        let mut r = vec![
            ("no descriptor", start_with(&hello(&sys), pid, &[])),
            ("two descriptors", start_with(&hello(&sys), pid, &[dir.as_fd(), dir.as_fd()])),
            ("a file", start_with(&hello(&sys), pid, &[file.as_fd()])),
            ("root's directory", start_with(&hello(&sys), pid, &[roots.as_fd()])),
            ("pid 1", start_with(&hello(&sys), 1, &[dir.as_fd()])),
            ("a negative pid", start_with(&hello(&sys), -5, &[dir.as_fd()])),
        ];
        // Garbage instead of Hello.
        let s = UnixStream::connect(sys.join("kview")).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        ust_core::protocol::send(&s, &KviewRequest::Finish { traced_pid: 1, clock_offset_ns: None }, &[]).unwrap();
        r.push(("Finish first", ust_core::protocol::recv::<KviewReply>(&s).map(|r| r.0).unwrap_or(KviewReply::Refused { reason: "closed".into() })));
        // And the well-formed request: recorded into B's directory, as B.
        let s = hello(&sys);
        r.push(("well-formed", start_with(&s, pid, &[dir.as_fd()])));
        drop(s);
        let _ = child.0.kill();
        r
    });
    for (what, reply) in &replies[..replies.len() - 1] {
        assert!(matches!(reply, KviewReply::Refused { .. }), "{what}: {reply:?}");
    }
    let reason = |i: usize| match &replies[i].1 {
        KviewReply::Refused { reason } => reason.clone(),
        _ => String::new(),
    };
    assert!(reason(0).contains("exactly one descriptor") && reason(1).contains("exactly one descriptor"));
    assert!(reason(2).contains("not a directory"), "{}", reason(2));
    assert!(reason(3).contains("belongs to uid 0"), "{}", reason(3));
    assert!(reason(4).contains("not a child of yours") && reason(5).contains("not a child of yours"));
    assert_eq!(replies.last().unwrap().1, KviewReply::Started, "{replies:?}\n{}", w.log());
    // The connection closed without Finish: the recording ends and its files are B's.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !w.log().contains("kview: done for uid") {
        assert!(Instant::now() < deadline, "{}", w.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let meta = w.home(B).join("metadata");
    assert_eq!(std::fs::metadata(&meta).unwrap().uid(), uid);
    for f in files(&w.home(B)) {
        assert_eq!(std::fs::metadata(&f).unwrap().uid(), uid, "{}", f.display());
    }
    babeltrace(&w.home(B));
}

/// The tids (and pids) in the events of a babeltrace2 text, less the idle task and the
/// kinds others are reduced to.
fn tids_in(text: &str) -> std::collections::BTreeSet<i64> {
    let mut out = std::collections::BTreeSet::new();
    for l in text.lines() {
        for key in ["tid = ", "pid = ", "prev_tid = ", "next_tid = "] {
            for (i, _) in l.match_indices(key) {
                let rest = &l[i + key.len()..];
                let n: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
                if let Ok(v) = n.parse::<i64>() {
                    if v > 0 {
                        out.insert(v);
                    }
                }
            }
        }
    }
    out
}

/// 20 traced commands, 10 of each user, at once through one root daemon: each trace is
/// complete (its program's exec, its timer wake-up, its exit) and holds nothing of any
/// other: no other command's name, no other trace's tasks.
#[test]
fn twenty_commands_of_two_users_at_once_each_see_only_their_own() {
    require_root!();
    let w = World::alone(&[]);
    // Each command is a copy of sleep with a name of its own, in root's directory (the
    // users could not have swapped it: under load the exec may be judged after the task
    // is gone, and then a program in the user's own directory fails closed).
    let sleep = std::fs::canonicalize("/bin/sleep").unwrap();
    let bin = w.tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut jobs = Vec::new();
    for (u, tag) in [(A, "a"), (B, "b")] {
        for n in 0..10 {
            let name = format!("ustkv{tag}{n:02}");
            let prog = bin.join(&name);
            std::fs::copy(&sleep, &prog).unwrap();
            std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
            jobs.push((u, name, prog));
        }
    }
    // Complete views are required, and crossing fails, in one round: a task found gone at
    // a recheck leaves the view only from after the look (its last records are kept), and a
    // wait whose switch-in the kernel never records ends at the task's next event.
    let running: Vec<_> = jobs
        .iter()
        .map(|(u, name, prog)| {
            let out = w.home(u).join(format!("t-{name}"));
            let cmd = format!("{} 0.5; cat /etc/hostname", prog.display());
            let child = w
                .as_user(u, Path::new(ust_bin()))
                .args(["trace", "--kernel", "--output", out.to_str().unwrap(), "--", "sh", "-c", &cmd])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (out, child)
        })
        .collect();
    let mut traces = Vec::new();
    for ((u, name, _), (out, child)) in jobs.iter().zip(running) {
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{name}: {err}\nroot's daemon:\n{}", w.log());
        assert!(err.contains("kernel view: tier 2"), "{name}: {err}");
        // Twenty recordings each read the machine's scheduling events (their system-wide
        // instances): on a busy machine one may lose some, which babeltrace2 warns of as
        // discarded events and the report must then say (below).
        let (text, warnings) = common::babeltrace_allowing_warnings(&out.join("kernel"));
        traces.push((*u, name.clone(), out.clone(), text, err, warnings));
    }
    let mut incomplete: Vec<String> = Vec::new();
    let mut lossy = 0;
    for (u, name, out, text, err, warnings) in &traces {
        let r = w.report(out);
        let other = warnings.lines().filter(|l| l.contains("WARN") && !l.contains("discarded events")).collect::<Vec<_>>();
        assert!(other.is_empty(), "{name}: babeltrace2 complained:\n{}", other.join("\n"));
        if warnings.contains("discarded") {
            // A trace that lost events is complete only where nothing was lost: the
            // report says so at its top, and the isolation checks below still hold.
            assert!(
                r.contains("WARNING: kernel events lost") || r.contains("events of other tasks or interrupts lost"),
                "{name}: babeltrace2 saw discarded events and the report does not say so:\n{warnings}\n{r}"
            );
            lossy += 1;
        }
        // Complete: the exec of its program, its exit, and the timer that woke it.
        if !warnings.contains("discarded") && !text.lines().any(|l| l.contains("sched_process_exec") && l.contains(name.as_str())) {
            incomplete.push(format!(
                "{name}: no exec ({err}): {}",
                text.lines().filter(|l| l.contains("exec") || l.contains(name.as_str())).collect::<Vec<_>>().join("\n")
            ));
        }
        if !warnings.contains("discarded") && !text.lines().any(|l| l.contains("sched_process_exit") && l.contains(&format!("\"{name}\""))) {
            incomplete.push(format!(
                "{name}: no exit ({err}): {}",
                text.lines().filter(|l| l.contains("sched_process_exit") || l.contains(name.as_str())).collect::<Vec<_>>().join("\n")
            ));
        }
        let woke = woken_lines(&r, name, "clock_nanosleep");
        if !warnings.contains("discarded") && !woke.iter().any(|l| l.contains("woken by: timer interrupt")) {
            incomplete.push(format!(
                "{name} ({err}): {woke:?}\n{r}\n{}",
                text.lines().filter(|l| l.contains("sched_") && l.contains(name.as_str()) || l.contains("clock_nanosleep")).collect::<Vec<_>>().join("\n")
            ));
        }
        let mine = tids_in(text);
        for (u2, other, out2, text2, _, _) in &traces {
            if other == name {
                continue;
            }
            // Another command's name appears in no file of this output, nor in its report.
            for f in files(out) {
                assert!(!contains(&std::fs::read(&f).unwrap(), other.as_bytes()), "{other} in {} ({name}'s)", f.display());
            }
            assert!(!r.contains(other.as_str()), "{other} in {name}'s report");
            // And none of its tasks: the traces' task sets are disjoint (pids are not
            // reused within this test: far fewer than pid_max).
            let theirs = tids_in(text2);
            let shared: Vec<_> = mine.intersection(&theirs).collect();
            assert!(shared.is_empty(), "{name} ({u}) and {other} ({u2}) share tasks {shared:?} ({})", out2.display());
        }
    }
    assert!(!w.log().contains("records arrived after newer ones"), "{}", w.log());
    assert!(incomplete.is_empty(), "incomplete views:\n{}\nroot's daemon:\n{}", incomplete.join("\n"), w.log());
    // Completeness is checked on most of them: a machine that made most views lossy is
    // one this test cannot judge, and says so rather than passing on nothing.
    assert!(lossy <= traces.len() / 2, "{lossy} of {} views lost events: too busy a machine to judge completeness", traces.len());
}

/// Tier 2 under the load (two `yes`, a one-byte `dd` and an exec loop at nice -10),
/// ten times, no retry: each run's counts equal `strace -f -c`'s (both as the same user, in
/// the same empty environment, stdout a pipe), and `ust trace` and the report say that
/// nothing of the traced tree was lost.
#[test]
fn broker_view_counts_equal_strace_ten_times_under_load() {
    require_root!();
    let w = World::alone(&[]);
    let load = common::load::Load::start();
    let s = w.home(A).join("strace-load.txt");
    let o = w.as_user(A, Path::new("/usr/bin/strace")).args(["-f", "-c", "-o", s.to_str().unwrap()]).args(WORKLOAD).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = strace_counts(&std::fs::read_to_string(&s).unwrap());
    assert!(want.get("execve").is_some_and(|c| c.0 >= 3) && want.contains_key("openat"), "{want:?}");
    for run in 0..10 {
        let (out, err, o) = w.trace(A, &format!("load{run}"), &WORKLOAD);
        assert!(o.status.success(), "run {run}: {err}\nroot's daemon:\n{}", w.log());
        assert!(err.contains("kernel view: tier 2"), "run {run}: {err}");
        assert!(err.contains("ust: Kernel events: 0 of the traced tree's events lost"), "run {run}: {err}");
        let r = ust_analysis::report::report(&out, &ust_analysis::report::Options::default()).unwrap();
        let got: std::collections::BTreeMap<String, (u64, u64)> = r.syscalls.iter().map(|c| (c.name.clone(), (c.count, c.errors))).collect();
        assert_eq!(got, want, "run {run}: ust report of tier 2 (left) against strace -f -c (right)\n{err}");
        let text = ust_analysis::report::render_text(&r);
        assert!(text.lines().nth(1).is_some_and(|l| l.starts_with("Kernel events: 0 of the traced tree's events lost")), "run {run}: {text}");
    }
    drop(load);
}

/// Tier 2 counts the system calls of the traced command exactly as `strace -f -c` does,
/// both run as the same ordinary user on the same command; the launcher's calls before the
/// exec (the gate's read of its pipe, its execve) are not counted.
#[test]
fn syscall_counts_equal_strace_as_an_ordinary_user() {
    require_root!();
    let w = World::new(&[]);
    let cmd = ["sh", "-c", "cat /etc/hostname; ls /nonexistent || true"];
    let s = w.home(A).join("strace.txt");
    let o = w.as_user(A, Path::new("/usr/bin/strace")).args(["-f", "-c", "-o", s.to_str().unwrap()]).args(cmd).output();
    let Ok(o) = o else {
        eprintln!("skipped: strace is not installed");
        return;
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = strace_counts(&std::fs::read_to_string(&s).unwrap());
    assert!(want.get("execve").is_some_and(|c| c.0 >= 3) && want.contains_key("openat"), "{want:?}");
    let (out, err, o) = w.trace(A, "counts", &cmd);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("kernel view: tier 2"), "{err}");
    let r = ust_analysis::report::report(&out, &ust_analysis::report::Options::default()).unwrap();
    let got: std::collections::BTreeMap<String, (u64, u64)> = r.syscalls.iter().map(|c| (c.name.clone(), (c.count, c.errors))).collect();
    assert_eq!(got, want, "ust report of tier 2 (left) against strace -f -c (right)");
    let names: std::collections::HashSet<&str> = r.syscall_processes.iter().map(|p| p.name.as_str()).collect();
    assert!(names.contains("sh") && names.contains("cat") && names.contains("ls") && !names.contains("ust"), "{names:?}");
}

/// A recording belongs to the connection that started it: a `Finish` on another one, a
/// `Start` for a child that has already exited (stale) or for one reaped, are refused with
/// a message that says so.
#[test]
fn stale_and_forged_requests_are_refused() {
    require_root!();
    let w = World::new(&[]);
    let (uid, gid) = (id_of(B, "-u"), id_of(B, "-g"));
    let (sys, home) = (w.sys.clone(), w.home(B));
    let replies = as_thread_of(uid, gid, move || {
        let dir = std::fs::File::open(&home).unwrap();
        // A child that has exited and is not reaped yet: a zombie.
        let mut zombie = Command::new("true").spawn().unwrap();
        let zpid = zombie.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(10);
        while ust_kernel::filter::is_running(zpid) {
            assert!(Instant::now() < deadline, "true did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
        let stale = start_with(&hello(&sys), zpid, &[dir.as_fd()]);
        zombie.wait().unwrap();
        let reaped = start_with(&hello(&sys), zpid, &[dir.as_fd()]);
        // Finish after Hello, on a connection that started nothing (naming another's pid).
        let s = hello(&sys);
        ust_core::protocol::send(&s, &KviewRequest::Finish { traced_pid: zpid, clock_offset_ns: None }, &[]).unwrap();
        let forged = ust_core::protocol::recv::<KviewReply>(&s).map(|r| r.0).unwrap_or(KviewReply::Refused { reason: "closed".into() });
        vec![stale, reaped, forged]
    });
    let reason = |r: &KviewReply| match r {
        KviewReply::Refused { reason } => reason.clone(),
        other => panic!("not refused: {other:?}"),
    };
    assert!(reason(&replies[0]).contains("has already exited: a stale request"), "{:?}", replies[0]);
    assert!(reason(&replies[1]).contains("not a child of yours"), "{:?}", replies[1]);
    assert!(reason(&replies[2]).contains("Finish without a recording on this connection"), "{:?}", replies[2]);
    assert!(!w.log().contains("kview: recording for"), "nothing was recorded: {}", w.log());
}

/// Root's daemon without tracefs (started in a mount namespace where /sys/kernel is an
/// empty read-only tmpfs, so tracefs is neither there nor mountable): it says so at
/// `Hello`, and `ust trace` goes on with tier 1 (or says why not).
#[test]
fn no_tracefs_for_the_broker_says_so_and_tier_1_is_used() {
    require_root!();
    if !Command::new("unshare").args(["-m", "true"]).status().is_ok_and(|s| s.success()) {
        eprintln!("skipped: unshare -m is not possible here");
        return;
    }
    let w = World::with_wrapper(
        &[],
        &["unshare", "-m", "--propagation", "private", "sh", "-c", "mount -t tmpfs -o ro,size=4k none /sys/kernel && exec \"$0\" \"$@\""],
    );
    let (out, err, o) = w.trace(A, "notracefs", &["sh", "-c", "sleep 0.1"]);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("root's ust-consumerd gives no kernel view: root's ust-consumerd cannot record the kernel: tracefs is not mounted"), "{err}");
    assert!(!err.contains("tier 2"), "{err}");
    assert!(w.log().contains("refused: no tracefs"), "{}", w.log());
    if ust_kernel::perf::attr::paranoid().is_none_or(|p| p < 3) {
        assert!(err.contains("kernel view: tier 1"), "{err}");
        babeltrace(&out.join("kernel"));
    } else {
        assert!(err.contains("nor with perf_event_open"), "{err}");
    }
}

/// A traced command whose exec fails never runs: tier 2 says so, and the trace it leaves
/// (the state dump of the gate, the failed exec) reads back cleanly. A child that only
/// forks (a subshell) is followed without any exec.
#[test]
fn commands_that_never_exec_in_tier_2() {
    require_root!();
    let w = World::new(&[]);
    let (out, err, o) = w.trace(A, "noexec", &["/nonexistent/command"]);
    assert_eq!(o.status.code(), Some(127), "{err}");
    assert!(err.contains("kernel view: tier 2") && err.contains("cannot run /nonexistent/command"), "{err}");
    let text = babeltrace(&out.join("kernel"));
    assert!(!text.contains("sched_process_exec"), "nothing was executed");
    assert!(text.lines().any(|l| l.contains("syscall_exit") && l.contains("ret = -2")), "the failed execve (ENOENT) is there");
    let (out, err, o) = w.trace(A, "fork", &["sh", "-c", "( i=0; while [ $i -lt 300 ]; do i=$((i+1)); done; exit 3 ); echo $?"]);
    assert!(o.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "3");
    let text = babeltrace(&out.join("kernel"));
    let forks: Vec<&str> = text.lines().filter(|l| l.contains("sched_process_fork") && l.contains("parent_comm = \"sh\"")).collect();
    assert_eq!(forks.len(), 1, "{forks:?}");
    let child = forks[0].split("child_pid = ").nth(1).and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next()).unwrap().to_string();
    let exits: Vec<&str> = text.lines().filter(|l| l.contains("sched_process_exit")).collect();
    assert!(exits.iter().any(|l| l.contains(&format!("tid = {child}"))), "the subshell's exit: {exits:?}");
    assert!(text.lines().any(|l| l.contains("sched_switch") && l.contains(&format!("prev_tid = {child}"))), "the subshell's switches");
}

/// Installs, in the calling process (a child before its exec), a seccomp filter under which
/// `perf_event_open` fails with `EACCES`, as a container's seccomp profile makes it.
///
/// # Safety
/// For `pre_exec`: only async-signal-safe system calls on stack data.
unsafe fn refuse_perf_event_open() -> std::io::Result<()> {
    #[repr(C)]
    struct SockFilter {
        code: u16,
        jt: u8,
        jf: u8,
        k: u32,
    }
    #[repr(C)]
    struct SockFprog {
        len: u16,
        filter: *const SockFilter,
    }
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    const RET_ERRNO: u32 = 0x0005_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    let prog = [
        SockFilter { code: LD_W_ABS, jt: 0, jf: 0, k: 0 }, // seccomp_data.nr
        SockFilter { code: JEQ_K, jt: 0, jf: 1, k: libc::SYS_perf_event_open as u32 },
        SockFilter { code: RET_K, jt: 0, jf: 0, k: RET_ERRNO | libc::EACCES as u32 },
        SockFilter { code: RET_K, jt: 0, jf: 0, k: RET_ALLOW },
    ];
    let fprog = SockFprog { len: prog.len() as u16, filter: prog.as_ptr() };
    // SAFETY: prctl with valid arguments; the filter program outlives the call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || libc::prctl(libc::PR_SET_SECCOMP, 2, &fprog as *const SockFprog) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The broker off and perf_event_open refused (a seccomp filter, as in a container): `ust
/// trace` says which sysctl and what else it needs, records the command's system calls
/// alone with ptrace (tier 1, ptrace only), or nothing of the kernel with `--no-ptrace`,
/// and still traces user space; the command runs.
#[test]
fn perf_event_open_refused_names_the_sysctl() {
    require_root!();
    if ust_kernel::perf::attr::paranoid().is_some_and(|p| p >= 3) {
        eprintln!("skipped: kernel.perf_event_paranoid >= 3 already (broker_off_says_so_and_tier_1_is_used covers it)");
        return;
    }
    let w = World::new(&["--kernel-view", "none"]);
    for no_ptrace in [false, true] {
        let out = w.home(A).join(format!("noperf-{no_ptrace}"));
        let mut c = w.as_user(A, Path::new(ust_bin()));
        c.args(["trace", "--kernel", "--output", out.to_str().unwrap()]).args(no_ptrace.then_some("--no-ptrace")).args(["--", "sh", "-c", "echo ran"]);
        // SAFETY: refuse_perf_event_open makes only async-signal-safe system calls.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut c, || refuse_perf_event_open());
        }
        let o = common::output_within(c, Duration::from_secs(60));
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{err}");
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ran");
        assert!(err.contains("nor with perf_event_open"), "{err}");
        assert!(
            err.contains("perf_event_open was refused")
                && err.contains("kernel.perf_event_paranoid")
                && err.contains("sysctl kernel.perf_event_paranoid=2")
                && err.contains("seccomp"),
            "{err}"
        );
        assert!(err.contains("trace written to"), "user space is still traced: {err}");
        if no_ptrace {
            assert!(!err.contains("kernel view: tier"), "{err}");
            continue;
        }
        // The system calls alone: the shell's exec, its write of "ran", its exit.
        assert!(err.contains("kernel view: tier 1 (ptrace only: ") && err.contains(ust_kernel::ptrace::ANNOUNCE), "{err}");
        let text = babeltrace(&out.join("kernel"));
        let names: Vec<&str> = text.lines().filter_map(|l| l.split_whitespace().nth(3)).collect();
        assert_eq!(names.first().copied(), Some("syscall_entry_execve:"), "{text}");
        assert!(text.lines().any(|l| l.contains(" syscall_entry_write: ") && l.contains("fd = 1,")), "{text}");
        assert_eq!(names.last().copied(), Some("syscall_entry_exit_group:"), "{text}");
        assert!(std::fs::read_to_string(out.join("kernel/metadata")).unwrap().contains("kernel_source = \"ptrace\";"));
        let r = ust_analysis::report::report(&out, &ust_analysis::report::Options::default()).unwrap();
        assert_eq!(r.syscall_source.as_deref(), Some("ptrace"));
        assert!(r.syscalls.iter().any(|c| c.name == "write" && c.count == 1), "{:?}", r.syscalls);
        assert!(r.notes.iter().any(|n| n == ust_analysis::report::tiers::TIER1_PTRACE_ONLY_NOTE), "{:?}", r.notes);
    }
}
