//! The system-call recorder (`ust_kernel::ptrace`) against the real kernel, strace, gdb and
//! babeltrace2, run as an ordinary user: as root, every recording runs through `setpriv
//! --reuid=65534 --regid=65534 --clear-groups` (nobody), as strace would for that user.
//!
//! The recorder runs in a child process: this test binary again, with [`HARNESS`] set (the
//! `harness` test then records the command it is given and exits with its status, as `ust
//! trace` does). The small programs the scenarios need (one that calls PTRACE_TRACEME, one
//! that traces its child, a bad pointer, an exec from a thread) are this binary too, with
//! [`ROLE`] set (the `role` test). Every trace is read back with babeltrace2 and checked
//! event by event.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ust_kernel::ptrace::{Launch, SyscallRecorder, SyscallTrace};

/// Set in the recorder child: the output directory.
const HARNESS: &str = "UST_PTRACE_HARNESS";
/// The command, its words separated by U+001F.
const ARGV: &str = "UST_PTRACE_ARGV";
/// `1`: the command starts from an empty environment (`env -i`).
const CLEAR_ENV: &str = "UST_PTRACE_CLEAR_ENV";
/// A file the command's standard output goes to.
const STDOUT: &str = "UST_PTRACE_STDOUT";
/// Set in a test program: which one.
const ROLE: &str = "UST_PTRACE_ROLE";

/// The recorder child (see the module docs): does nothing in a normal test run.
#[test]
fn harness() {
    let Some(out) = std::env::var_os(HARNESS) else { return };
    let out = PathBuf::from(out);
    let argv: Vec<String> = std::env::var(ARGV).unwrap().split('\u{1f}').map(String::from).collect();
    let mut launch = Launch::new(&argv[0], &argv[1..]);
    if std::env::var_os(CLEAR_ENV).is_some() {
        launch.clear_env();
    } else {
        for k in [HARNESS, ARGV, CLEAR_ENV, STDOUT] {
            launch.remove_env(k);
        }
    }
    launch.current_dir("/");
    if let Some(p) = std::env::var_os(STDOUT) {
        launch.stdio(1, std::fs::OpenOptions::new().append(true).open(p).unwrap().into());
    }
    let out = ust_ctf::outdir::TraceDir::create(&out, None).unwrap();
    let trace = SyscallTrace::create(&out).unwrap();
    let rec = match SyscallRecorder::spawn(launch, trace.sink().clone()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("harness: spawn failed: {e}");
            std::process::exit(match e {
                ust_kernel::ptrace::SpawnError::Io(e) if e.kind() == std::io::ErrorKind::NotFound => 127,
                _ => 126,
            });
        }
    };
    let pid = rec.pid();
    eprintln!("harness: pid={pid}");
    if let Some(why) = rec.untraced() {
        eprintln!("harness: untraced: {why}");
    }
    let status = rec.wait();
    let summary = rec.finish();
    if let Err(e) = trace.finish(&out, pid) {
        eprintln!("harness: the final metadata: {e}");
    }
    eprintln!("harness: tasks={} handed_off={} detached_at_end={} error={:?}", summary.tasks, summary.handed_off.len(), summary.detached_at_end, summary.error);
    use std::os::unix::process::ExitStatusExt;
    std::process::exit(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)));
}

/// The test programs (see the module docs): does nothing in a normal test run.
#[test]
fn role() {
    let Ok(role) = std::env::var(ROLE) else { return };
    // SAFETY: plain system calls with integer or valid pointer arguments, in a process that
    // is about to exit.
    let code = unsafe {
        match role.as_str() {
            "traceme" => {
                let r = libc::ptrace(libc::PTRACE_TRACEME, 0, 0usize, 0usize);
                println!("traceme={r}");
                0
            }
            "tracer" => tracer_role(),
            "attacher" => attacher_role(),
            "fault" => {
                let a = libc::syscall(libc::SYS_openat, libc::AT_FDCWD, 1usize, libc::O_RDONLY);
                let b = libc::syscall(libc::SYS_openat, libc::AT_FDCWD, 0usize, libc::O_RDONLY);
                let e = *libc::__errno_location();
                let c = libc::syscall(libc::SYS_openat, libc::AT_FDCWD, c"/nonexistent-after-faults".as_ptr(), libc::O_RDONLY);
                println!("fault={a},{b},{c},{e}");
                0
            }
            "thread_exec" => {
                std::thread::spawn(|| {
                    let e = std::os::unix::process::CommandExt::exec(Command::new("/bin/sh").args(["-c", "exit 7"]));
                    panic!("exec: {e}");
                });
                loop {
                    libc::pause();
                }
            }
            "threads_exit" => {
                // Four threads making calls; once each made 500, the main thread ends the
                // process under them.
                use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
                static CALLS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
                for n in &CALLS {
                    std::thread::spawn(move || loop {
                        libc::getppid();
                        n.fetch_add(1, Relaxed);
                    });
                }
                while CALLS.iter().any(|n| n.load(Relaxed) < 500) {
                    libc::sched_yield();
                }
                libc::syscall(libc::SYS_exit_group, 3);
                unreachable!()
            }
            other => panic!("unknown role {other}"),
        }
    };
    use std::io::Write;
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

/// A parent tracing its child as a debugger does: the child asks (PTRACE_TRACEME) and stops
/// itself; the parent sees the stop, continues it, and reaps its exit code.
unsafe fn tracer_role() -> i32 {
    // SAFETY: fork, then only async-signal-safe calls in the child.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0usize, 0usize);
            libc::raise(libc::SIGSTOP);
            libc::_exit(5);
        }
    }
    let mut st = 0;
    // SAFETY: waitpid and ptrace on our own child with a valid status pointer.
    unsafe {
        libc::waitpid(pid, &mut st, 0);
        let stopped = libc::WIFSTOPPED(st) && libc::WSTOPSIG(st) == libc::SIGSTOP;
        libc::ptrace(libc::PTRACE_CONT, pid, 0usize, 0usize);
        libc::waitpid(pid, &mut st, 0);
        println!("tracer: stopped={stopped} exited={}", if libc::WIFEXITED(st) { libc::WEXITSTATUS(st) } else { -1 });
    }
    0
}

/// A parent attaching to its running child (`gdb -p`): PTRACE_ATTACH, the attach stop,
/// PTRACE_DETACH, then SIGTERM and the child's death by it.
unsafe fn attacher_role() -> i32 {
    // SAFETY: fork; the child only pauses.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        loop {
            // SAFETY: pause has no arguments.
            unsafe { libc::pause() };
        }
    }
    let mut st = 0;
    // SAFETY: ptrace, waitpid and kill on our own child with a valid status pointer.
    unsafe {
        let r = libc::ptrace(libc::PTRACE_ATTACH, pid, 0usize, 0usize);
        libc::waitpid(pid, &mut st, libc::__WALL);
        let stopped = libc::WIFSTOPPED(st);
        libc::ptrace(libc::PTRACE_DETACH, pid, 0usize, 0usize);
        libc::kill(pid, libc::SIGTERM);
        libc::waitpid(pid, &mut st, 0);
        println!("attacher: attach={r} stopped={stopped} killed_by={}", if libc::WIFSIGNALED(st) { libc::WTERMSIG(st) } else { -1 });
    }
    0
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The uid and gid tests run the recorder as: nobody when root, else ourselves.
fn user() -> (u32, u32) {
    if is_root() {
        (65534, 65534)
    } else {
        // SAFETY: getuid/getgid cannot fail.
        unsafe { (libc::getuid(), libc::getgid()) }
    }
}

/// `cmd` run as [`user`]: through setpriv when root.
fn as_user(program: &str) -> Command {
    if !is_root() {
        return Command::new(program);
    }
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", program]);
    c
}

/// A directory the recording user may write.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new() -> Scratch {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let (u, g) = user();
        std::os::unix::fs::chown(d.path(), Some(u), Some(g)).unwrap();
        Scratch(d)
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    /// An empty file the user may write.
    fn file(&self, name: &str) -> PathBuf {
        let p = self.path().join(name);
        std::fs::write(&p, b"").unwrap();
        let (u, g) = user();
        std::os::unix::fs::chown(&p, Some(u), Some(g)).unwrap();
        p
    }
}

/// The recorder child, recording `argv` into `scratch/out`, its stdout into `scratch/stdout`.
fn harness_command(scratch: &Scratch, argv: &[&str], clear_env: bool) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut c = as_user(exe.to_str().unwrap());
    c.args(["--exact", "harness", "--nocapture", "--test-threads=1", "-q"]);
    c.env(HARNESS, scratch.path().join("out")).env(ARGV, argv.join("\u{1f}")).env(STDOUT, scratch.file("stdout"));
    if clear_env {
        c.env(CLEAR_ENV, "1");
    }
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    // A process group of its own, whose parent (this test) is in another group of the same
    // session: never an orphaned group, in which the kernel discards SIGTSTP (POSIX; traced
    // or not), whatever started the tests (a job whose shell has exited makes cargo's
    // group orphaned: the ^Z test then failed, waiting for a stop that cannot come).
    c.process_group(0);
    c
}

/// This binary as a test program of role `role`.
fn role_argv(role: &str) -> Vec<String> {
    let exe = std::env::current_exe().unwrap().to_str().unwrap().to_string();
    ["/usr/bin/env", &format!("{ROLE}={role}"), &exe, "--exact", "role", "--nocapture", "--test-threads=1", "-q"].map(String::from).to_vec()
}

/// A finished recording.
struct Recorded {
    code: i32,
    stderr: String,
    stdout: String,
    events: Vec<Event>,
}

fn finish(scratch: &Scratch, child: Child) -> Recorded {
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let stdout = std::fs::read_to_string(scratch.path().join("stdout")).unwrap_or_default();
    let code = o.status.code().unwrap_or(-1);
    Recorded { code, events: read_trace(&scratch.path().join("out/kernel"), &stderr), stderr, stdout }
}

fn record(scratch: &Scratch, argv: &[&str], clear_env: bool) -> Recorded {
    finish(scratch, harness_command(scratch, argv, clear_env).spawn().unwrap())
}

/// Records this binary as the test program `role`.
fn record_role(role: &str) -> Recorded {
    let argv = role_argv(role);
    record(&Scratch::new(), &argv.iter().map(String::as_str).collect::<Vec<_>>(), false)
}

/// One event as babeltrace2 prints it.
#[derive(Clone, Debug)]
struct Event {
    name: String,
    tid: i32,
    payload: String,
}

impl Event {
    /// A field's value as printed: a string without its quotes (escapes kept), or a number.
    fn field(&self, key: &str) -> Option<String> {
        let at = self.payload.find(&format!("{key} = "))? + key.len() + 3;
        let rest = &self.payload[at..];
        if let Some(s) = rest.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = s.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        out.push(c);
                        out.extend(chars.next());
                    }
                    '"' => return Some(out),
                    _ => out.push(c),
                }
            }
            None
        } else {
            Some(rest.split([',', ' ']).next()?.to_string())
        }
    }

    fn int(&self, key: &str) -> Option<i64> {
        self.field(key)?.parse().ok()
    }
}

/// Reads the trace with babeltrace2, which must succeed without a warning.
fn read_trace(dir: &Path, context: &str) -> Vec<Event> {
    let o = Command::new("babeltrace2").arg(dir).output().expect("babeltrace2 runs (scripts/test.sh installs it)");
    assert!(o.status.success() && o.stderr.is_empty(), "babeltrace2 on {}: {}\n{context}", dir.display(), String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    text.lines()
        .map(|l| {
            // `[time] (+delta) host NAME: { cpu_id = N }, { tid = T }, { payload }`
            let after_host = l.splitn(4, ' ').nth(3).unwrap();
            let (name, rest) = after_host.split_once(": ").unwrap();
            let tid = rest.split("tid = ").nth(1).and_then(|t| t.split(' ').next()).and_then(|t| t.parse().ok()).unwrap();
            let payload = rest.splitn(3, "}, ").nth(2).unwrap_or("").to_string();
            Event { name: name.to_string(), tid, payload }
        })
        .collect()
}

/// `(calls, errors)` per system call, as `strace -c` counts them: a call counts at its exit,
/// an error is a return value in -4095..=-1.
fn counts(events: &[Event]) -> BTreeMap<String, (u64, u64)> {
    let mut open: HashMap<i32, String> = HashMap::new();
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for e in events {
        if let Some(call) = e.name.strip_prefix("syscall_entry_") {
            open.insert(e.tid, call.to_string());
        } else if e.name.starts_with("syscall_exit_") {
            let Some(call) = open.remove(&e.tid) else { continue };
            let ret = e.int("ret").unwrap();
            let c = out.entry(call).or_default();
            c.0 += 1;
            c.1 += u64::from((-4095..=-1).contains(&ret));
        }
    }
    out
}

/// `strace -c -U name,calls,errors`'s table.
fn strace_counts(file: &Path) -> BTreeMap<String, (u64, u64)> {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines()
        .skip(2)
        .filter(|l| !l.starts_with('-') && !l.trim().is_empty())
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let name = *w.first()?;
            (name != "total").then(|| (name.to_string(), (w[1].parse().unwrap(), w.get(2).map_or(0, |e| e.parse().unwrap()))))
        })
        .collect()
}

/// The shell workload: reads, writes, opens of missing files, a pipe (the here-document),
/// a fork (the subshell), vforks (dash's external commands) and an exec. Its counts are the
/// same from run to run (checked under strace, also with two `yes` beside it).
const WORKLOAD: &str = "read a </etc/hostname; read b </etc/hostname; cat /etc/hostname /nonexistent 2>/dev/null; cat <<EOF
piped $a
EOF
[ -e /nonexistent2 ]; (echo sub); exec ls -d /tmp /nonexistent3 2>/dev/null";

fn strace_workload(scratch: &Scratch, n: usize) -> BTreeMap<String, (u64, u64)> {
    let table = scratch.file(&format!("strace-{n}.txt"));
    let out = scratch.file(&format!("strace-stdout-{n}"));
    let st = as_user("/usr/bin/env")
        .args(["-i", "strace", "-f", "-c", "-U", "name,calls,errors", "-o"])
        .arg(&table)
        .args(["/bin/sh", "-c", WORKLOAD])
        .current_dir("/")
        .stdout(std::fs::OpenOptions::new().append(true).open(&out).unwrap())
        .status()
        .expect("strace runs (scripts/test.sh installs it)");
    assert_eq!(st.code(), Some(2), "ls of a missing file exits 2");
    let h = hostname();
    assert_eq!(std::fs::read_to_string(out).unwrap().lines().collect::<Vec<_>>(), [h.as_str(), &format!("piped {h}"), "sub", "/tmp"]);
    strace_counts(&table)
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname").unwrap().trim().to_string()
}

/// The per-call counts (errors included) are those of `strace -f -c` on the same command in
/// the same environment, quiet and with two `yes >/dev/null` beside it; and the known
/// calls are there in order, with their paths and results.
#[test]
fn counts_match_strace() {
    for load in [false, true] {
        let mut yes: Vec<Child> = if load { (0..2).map(|_| Command::new("yes").stdout(Stdio::null()).spawn().unwrap()).collect() } else { Vec::new() };
        let scratch = Scratch::new();
        let theirs = strace_workload(&scratch, 0);
        let r = record(&scratch, &["/bin/sh", "-c", WORKLOAD], true);
        for y in &mut yes {
            let _ = y.kill();
            let _ = y.wait();
        }
        assert_eq!(r.code, 2, "{}", r.stderr);
        let h = hostname();
        assert_eq!(r.stdout.lines().collect::<Vec<_>>(), [h.as_str(), &format!("piped {h}"), "sub", "/tmp"]);
        let ours = counts(&r.events);
        assert!(ours.len() > 20, "{ours:?}");
        assert_eq!(ours, theirs, "load={load}\n{}", r.stderr);
        check_workload_sequence(&r.events);
    }
}

/// The workload's calls with a path, in order, per process: the shell's first, its exec
/// of `cat` next.
fn check_workload_sequence(events: &[Event]) {
    let first = &events[0];
    assert_eq!(first.name, "syscall_entry_execve");
    assert_eq!(first.field("filename").as_deref(), Some("/bin/sh"));
    assert!(first.field("argv_text").unwrap().starts_with(r#"[\"/bin/sh\", \"-c\", \"read a"#), "{first:?}");
    let shell = first.tid;
    let exit_of = |i: usize| events[i + 1..].iter().find(|e| e.tid == events[i].tid && e.name.starts_with("syscall_exit_")).and_then(|e| e.int("ret"));
    // The shell opens /etc/hostname twice (the two reads), then execs cat in a vforked child.
    let opens: Vec<(String, i64)> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.tid == shell && e.name == "syscall_entry_openat")
        .map(|(i, e)| (e.field("filename").unwrap(), exit_of(i).unwrap()))
        .filter(|(f, _)| f.starts_with("/etc/h") || f.starts_with("/nonex"))
        .collect();
    assert_eq!(opens.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(), ["/etc/hostname", "/etc/hostname"]);
    assert!(opens.iter().all(|(_, r)| *r >= 0));
    // cat: its exec, its two opens (one missing), its output.
    let cat = events.iter().find(|e| e.name == "sched_process_exec" && e.field("filename").is_some_and(|f| f.ends_with("/cat"))).expect("cat exec'd");
    let cat_paths: Vec<(String, i64)> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.tid == cat.tid && e.name == "syscall_entry_openat")
        .map(|(i, e)| (e.field("filename").unwrap(), exit_of(i).unwrap()))
        .filter(|(f, _)| !f.contains(".so") && !f.contains("locale"))
        .take(2)
        .collect();
    assert_eq!(cat_paths, [("/etc/hostname".to_string(), cat_paths[0].1), ("/nonexistent".to_string(), -2)]);
    assert!(cat_paths[0].1 >= 0);
    // A trace of the recorder alone names the command and says who forked whom: the shell
    // vforks cat and the here-document's cat, forks the subshell.
    let dump = events.iter().find(|e| e.name == "lttng_statedump_process_state").expect("the command's state dump");
    assert_eq!((dump.int("tid"), dump.field("name").as_deref()), (Some(shell.into()), Some("sh")));
    let forks: Vec<(i64, i64)> =
        events.iter().filter(|e| e.name == "sched_process_fork").map(|e| (e.int("parent_tid").unwrap(), e.int("child_pid").unwrap())).collect();
    assert_eq!(forks.len(), 3, "{forks:?}");
    assert!(forks.iter().all(|&(p, _)| p == i64::from(shell)));
    assert!(forks.iter().any(|&(_, c)| c == i64::from(cat.tid)));
    // The shell's test of a missing file, the subshell's fork, the final exec of ls.
    assert!(events.iter().any(|e| e.tid == shell && e.field("filename").as_deref() == Some("/nonexistent2")));
    assert!(events.iter().any(|e| e.tid == shell && e.name == "syscall_entry_clone"));
    let ls =
        events.iter().position(|e| e.tid == shell && e.name == "sched_process_exec" && e.field("filename").is_some_and(|f| f.ends_with("/ls"))).expect("ls");
    assert!(events[ls + 1..].iter().any(|e| e.tid == shell && e.name.starts_with("syscall_entry_") && e.field("filename").as_deref() == Some("/nonexistent3")));
    assert_eq!(events.last().map(|e| e.name.as_str()), Some("syscall_entry_exit_group"));
}

/// Spawns the recorder and returns it with the command's pid, read from its stderr.
fn start(scratch: &Scratch, argv: &[&str]) -> (Child, i32, BufReader<std::process::ChildStderr>) {
    let mut child = harness_command(scratch, argv, false).spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let pid = loop {
        line.clear();
        if err.read_line(&mut line).unwrap() == 0 {
            let st = child.wait();
            panic!("the harness ended before saying the pid: {st:?}");
        }
        if let Some(p) = line.trim().strip_prefix("harness: pid=") {
            break p.parse().unwrap();
        }
    };
    (child, pid, err)
}

fn rest_of(mut err: BufReader<std::process::ChildStderr>) -> String {
    let mut s = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut s);
    s
}

/// `/proc/<pid>/stat`'s state letter.
fn state(pid: i32) -> char {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    s.rsplit_once(") ").and_then(|(_, r)| r.chars().next()).unwrap_or('?')
}

fn wait_for(mut cond: impl FnMut() -> bool, what: &str) {
    for _ in 0..6000 {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("timed out waiting for {what}");
}

/// A SIGTERM sent to the command (as `ust trace` forwards one) kills it as it would
/// untraced: the recorder reports death by signal 15, and the harness exits 128+15.
#[test]
fn sigterm_kills_the_command_as_untraced() {
    let scratch = Scratch::new();
    let (child, pid, err) = start(&scratch, &["/bin/sh", "-c", "echo up; exec sleep 600"]);
    let nanosleep = format!("{} ", libc::SYS_clock_nanosleep);
    wait_for(|| std::fs::read_to_string(format!("/proc/{pid}/syscall")).is_ok_and(|c| c.starts_with(&nanosleep)), "sleep in clock_nanosleep");
    // SAFETY: kill with integers.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let o = child.wait_with_output().unwrap();
    let stderr = rest_of(err);
    assert_eq!(o.status.code(), Some(128 + 15), "{stderr}");
    let events = read_trace(&scratch.path().join("out/kernel"), &stderr);
    let sig = events.iter().find(|e| e.name == "signal_deliver").expect("the delivery is recorded");
    assert_eq!((sig.tid, sig.int("sig")), (pid, Some(15)));
    // Its last call is the nanosleep the signal ended (ERESTART_RESTARTBLOCK), then the
    // delivery, then nothing.
    let at = events.iter().rposition(|e| e.tid == pid && e.name.starts_with("syscall_entry_")).unwrap();
    let tail: Vec<(&str, Option<i64>)> = events[at..].iter().filter(|e| e.tid == pid).map(|e| (e.name.as_str(), e.int("ret").or(e.int("sig")))).collect();
    assert_eq!(tail, [("syscall_entry_clock_nanosleep", None), ("syscall_exit_clock_nanosleep", Some(-516)), ("signal_deliver", Some(15))]);
}

/// A stopped command stays stopped until continued, then goes on: `kill -STOP` from
/// itself, and `^Z` (SIGTSTP) from outside.
#[test]
fn a_stopped_command_stays_stopped_until_continued() {
    let scratch = Scratch::new();
    let stdout = scratch.path().join("stdout");
    let (child, pid, err) = start(&scratch, &["/bin/sh", "-c", "echo one; kill -STOP $$; echo two; sleep 600"]);
    wait_for(|| matches!(state(pid), 't' | 'T'), "the self-stop");
    // It stays stopped: the shell does not go on to "two".
    std::thread::sleep(Duration::from_millis(300));
    assert!(matches!(state(pid), 't' | 'T'));
    assert_eq!(std::fs::read_to_string(&stdout).unwrap(), "one\n");
    // SAFETY: kill with integers.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    wait_for(|| std::fs::read_to_string(&stdout).is_ok_and(|s| s == "one\ntwo\n"), "the shell going on");
    wait_for(|| std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).is_ok_and(|c| !c.trim().is_empty()), "sleep's fork");
    let sleeper: i32 = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap().trim().parse().unwrap();
    wait_for(|| std::fs::read_to_string(format!("/proc/{sleeper}/comm")).is_ok_and(|c| c.trim() == "sleep"), "sleep's exec");
    // ^Z: the sleeper stops, and stays stopped; SIGCONT; then it ends by SIGTERM.
    // SAFETY: kill with integers.
    unsafe { libc::kill(sleeper, libc::SIGTSTP) };
    wait_for(|| matches!(state(sleeper), 't' | 'T'), "the stop by SIGTSTP");
    std::thread::sleep(Duration::from_millis(300));
    assert!(matches!(state(sleeper), 't' | 'T'));
    // SAFETY: kill with integers.
    unsafe { libc::kill(sleeper, libc::SIGCONT) };
    wait_for(|| matches!(state(sleeper), 'S'), "sleep running again");
    // SAFETY: kill with integers.
    unsafe { libc::kill(sleeper, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    let stderr = rest_of(err);
    assert_eq!(o.status.code(), Some(128 + 15), "the shell reports its child's death: {stderr}");
    let events = read_trace(&scratch.path().join("out/kernel"), &stderr);
    let sigs: Vec<(i32, i64)> = events.iter().filter(|e| e.name == "signal_deliver").map(|e| (e.tid, e.int("sig").unwrap())).collect();
    for want in [(pid, 19), (pid, 18), (sleeper, 20), (sleeper, 18), (sleeper, 15)] {
        assert!(sigs.contains(&want), "{want:?} in {sigs:?}");
    }
}

/// A program that calls PTRACE_TRACEME works as untraced (the call succeeds), both as the
/// command itself and as a shell's child, and the trace says it left the view.
#[test]
fn a_program_calling_traceme_works() {
    let role = role_argv("traceme");
    for under_shell in [false, true] {
        let scratch = Scratch::new();
        let line = role.join(" ");
        let argv: Vec<&str> = if under_shell { vec!["/bin/sh", "-c", &line] } else { role.iter().map(String::as_str).collect() };
        let r = record(&scratch, &argv, false);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.contains("traceme=0"), "{}\n{}", r.stdout, r.stderr);
        assert!(r.stderr.contains("left the system-call view: it called ptrace(PTRACE_TRACEME)"), "{}", r.stderr);
        let note = r.events.iter().find(|e| e.name == "ptrace_detach").expect("the note");
        assert!(note.field("reason").unwrap().contains("PTRACE_TRACEME"));
        let entry = r.events.iter().rfind(|e| e.name == "syscall_entry_ptrace").expect("the call's entry is recorded");
        assert_eq!((entry.tid, entry.int("request")), (note.int("tid").unwrap() as i32, Some(0)));
    }
}

/// A parent that traces its child (TRACEME and stop; PTRACE_ATTACH to a running child)
/// sees what it would see untraced.
#[test]
fn a_parent_tracing_its_child_works() {
    let r = record_role("tracer");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("tracer: stopped=true exited=5"), "{}\n{}", r.stdout, r.stderr);
    let r = record_role("attacher");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("attacher: attach=0 stopped=true killed_by=15"), "{}\n{}", r.stdout, r.stderr);
    let note = r.events.iter().find(|e| e.name == "ptrace_detach").expect("the note");
    assert!(note.field("reason").unwrap().contains("PTRACE_ATTACH"), "{note:?}");
    // The attacher's own calls go on being recorded: its ptrace calls and the kill.
    let attacher = r.events.iter().find(|e| e.name == "syscall_entry_ptrace" && e.int("request") == Some(16)).expect("PTRACE_ATTACH");
    assert_eq!(attacher.int("pid"), note.int("tid"));
    assert!(r.events.iter().any(|e| e.tid == attacher.tid && e.name == "syscall_entry_kill" && e.int("sig") == Some(15)));
}

/// strace and gdb run under the recorder as they run without it.
#[test]
fn strace_and_gdb_work_under_the_recorder() {
    let scratch = Scratch::new();
    let inner = scratch.file("inner.txt");
    let inner_s = inner.to_str().unwrap();
    let r = record(&scratch, &["strace", "-f", "-o", inner_s, "/bin/sh", "-c", "echo from-inner"], false);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "from-inner\n");
    let text = std::fs::read_to_string(&inner).unwrap();
    assert!(text.contains("execve(\"/bin/sh\"") && text.contains("write(1, \"from-inner\\n\""), "{text}");
    assert!(r.events.iter().any(|e| e.name == "ptrace_detach"));
    if Command::new("gdb").arg("--version").output().is_err() {
        eprintln!("skipped the gdb half: gdb is not installed");
        return;
    }
    let scratch = Scratch::new();
    let r = record(&scratch, &["gdb", "-nx", "-batch", "-ex", "run", "--args", "/bin/echo", "hello-from-gdb"], false);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("hello-from-gdb") && r.stdout.contains("exited normally"), "{}\n{}", r.stdout, r.stderr);
}

/// A string pointer into nothing records a fault marker; the call fails with EFAULT as
/// untraced and the program goes on.
#[test]
fn an_unmapped_string_pointer_gives_a_fault_marker() {
    let r = record_role("fault");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains(&format!("fault=-1,-1,-1,{}", libc::EFAULT)), "{}", r.stdout);
    let opens: Vec<(usize, &Event)> = r.events.iter().enumerate().filter(|(_, e)| e.name == "syscall_entry_openat").collect();
    let at = opens.iter().position(|(_, e)| e.field("filename").as_deref() == Some("<fault 0x1>")).expect("the fault marker");
    let (i, bad) = opens[at];
    assert_eq!(opens[at + 1].1.field("filename").as_deref(), Some("<fault 0x0>"));
    assert_eq!(opens[at + 2].1.field("filename").as_deref(), Some("/nonexistent-after-faults"));
    let exit = r.events[i + 1..].iter().find(|e| e.tid == bad.tid).unwrap();
    assert_eq!((exit.name.as_str(), exit.int("ret")), ("syscall_exit_openat", Some(-libc::EFAULT as i64)));
}

/// A thread's execve: the thread takes the process's id (sched_process_exec says from
/// which), and the new program's exit code is the command's.
#[test]
fn an_exec_from_a_thread_is_followed() {
    let r = record_role("thread_exec");
    assert_eq!(r.code, 7, "{}", r.stderr);
    let exec = r.events.iter().rfind(|e| e.name == "sched_process_exec").unwrap();
    assert_eq!(exec.field("filename").as_deref(), Some("/bin/sh"));
    let (tid, old) = (exec.int("tid").unwrap() as i32, exec.int("old_tid").unwrap() as i32);
    assert_ne!(tid, old, "the exec came from a thread");
    let entry = r.events.iter().rfind(|e| e.name == "syscall_entry_execve").unwrap();
    assert_eq!(entry.tid, old);
    let exit = r.events.iter().rfind(|e| e.name == "syscall_exit_execve").unwrap();
    assert_eq!((exit.tid, exit.int("ret")), (tid, Some(0)));
    let last = r.events.iter().rfind(|e| e.name.starts_with("syscall_entry_")).unwrap();
    assert_eq!((last.name.as_str(), last.tid, last.int("error_code")), ("syscall_entry_exit_group", tid, Some(7)));
}

/// A process ends (exit_group) while its threads are in system calls and ptrace-stops:
/// they die in them (the tracer's requests get ESRCH), the exit code is the process's, and
/// every thread's calls up to then are in the trace.
#[test]
fn threads_dying_in_their_calls_are_followed() {
    let r = record_role("threads_exit");
    assert_eq!(r.code, 3, "{}", r.stderr);
    let mut per_tid: HashMap<i32, u64> = HashMap::new();
    for e in r.events.iter().filter(|e| e.name == "syscall_exit_getppid") {
        *per_tid.entry(e.tid).or_default() += 1;
    }
    assert_eq!(per_tid.len(), 4, "{per_tid:?}");
    assert!(per_tid.values().all(|&n| n >= 500), "{per_tid:?}");
    let last = r.events.iter().rfind(|e| e.name == "syscall_entry_exit_group").unwrap();
    assert_eq!(last.int("error_code"), Some(3));
    assert!(r.stderr.contains("error=None"), "{}", r.stderr);
}

/// The trace's file system fills up: the recorder says so, lets every task go, and the
/// command runs to its end as untraced; the trace holds whole packets up to then. Needs
/// root (a small tmpfs).
#[test]
fn a_full_disk_ends_the_recording_not_the_command() {
    if !is_root() {
        eprintln!("skipped: mounting a small tmpfs needs root");
        return;
    }
    let scratch = Scratch::new();
    let out = scratch.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let (u, g) = user();
    // The metadata (~180 KiB) and a few 64 KiB packets fit.
    let st = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size=448k,uid={u},gid={g},mode=0755"), "tmpfs"]).arg(&out).status().unwrap();
    if !st.success() {
        eprintln!("skipped: mount -t tmpfs failed here ({st})");
        return;
    }
    /// Unmounts on every way out, a failed assertion too.
    struct Mounted<'a>(&'a Path);
    impl Drop for Mounted<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(self.0).status();
        }
    }
    let mounted = Mounted(&out);
    let loop_ = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); : </dev/null; done; echo finished";
    let r = record(&scratch, &["/bin/sh", "-c", loop_], false);
    drop(mounted);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "finished\n");
    assert!(r.stderr.contains("error=Some(\"writing the system-call stream:") && r.stderr.contains("No space left on device"), "{}", r.stderr);
    // What was written reads back, and ends before the loop did.
    let opens = r.events.iter().filter(|e| e.name == "syscall_entry_openat" && e.field("filename").as_deref() == Some("/dev/null")).count();
    assert!(opens > 100 && opens < 20000, "{opens}");
}

/// `ust` itself under `strace -f`: the command is already traced, runs untraced for system
/// calls, and the message says why.
#[test]
fn an_already_traced_command_runs_without_the_view() {
    let scratch = Scratch::new();
    let exe = std::env::current_exe().unwrap();
    let mut c = as_user("strace");
    c.args(["-f", "-o", "/dev/null"]).arg(exe).args(["--exact", "harness", "--nocapture", "--test-threads=1", "-q"]);
    c.env(HARNESS, scratch.path().join("out")).env(ARGV, ["/bin/sh", "-c", "echo still-runs; exit 3"].join("\u{1f}")).env(STDOUT, scratch.file("stdout"));
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    let r = finish(&scratch, c.spawn().unwrap());
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(r.stdout, "still-runs\n");
    assert!(r.stderr.contains("untraced: the command is already traced by") && r.stderr.contains("(strace)"), "{}", r.stderr);
    assert!(r.events.is_empty(), "{:?}", r.events.first());
}

/// A program not in PATH is refused before anything runs (127, as a shell); one that is
/// not executable fails with its execve's errno (126).
#[test]
fn launch_failures_are_errors() {
    let scratch = Scratch::new();
    let r = record(&scratch, &["no-such-program-ust"], false);
    assert_eq!(r.code, 127, "{}", r.stderr);
    let scratch = Scratch::new();
    let script = scratch.file("not-executable");
    std::fs::write(&script, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = record(&scratch, &[script.to_str().unwrap()], false);
    assert_eq!(r.code, 126, "{}", r.stderr);
    assert_eq!(r.stdout, "");
    assert!(r.stderr.contains("Permission denied"), "{}", r.stderr);
}
