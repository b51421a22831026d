//! The tracer thread: forks the gated command ([`super::launch`]), seizes it, and handles
//! every ptrace-stop of every task of the tree until the tree is gone or the recording is
//! finished, recording each system call's entry and exit ([`super::writer`]).
//!
//! Per stop (`waitpid(-1, __WALL | __WNOTHREAD)`: this thread's tracees and children only,
//! never another thread's children):
//!
//! | stop | what the tracer does |
//! |---|---|
//! | syscall-entry | `PTRACE_GET_SYSCALL_INFO`, record `syscall_entry_<call>` (strings read now), then the hand-off check ([`super::handoff`]) |
//! | syscall-exit | record `syscall_exit_<call> { ret }` |
//! | signal-delivery | record `signal_deliver`, resume *with the signal* (delivered unchanged) |
//! | group-stop (`PTRACE_EVENT_STOP` with a stop signal) | `PTRACE_LISTEN`: the task stays stopped, `^Z` and `SIGSTOP`/`SIGCONT` work as untraced |
//! | `PTRACE_EVENT_STOP` otherwise | the first stop of a new task, or one the tracer asked for: resume |
//! | fork, vfork, clone event | the new task is traced from its first instruction (the kernel attached it) |
//! | exec event | `PTRACE_GETEVENTMSG` is the former thread id: a non-leader thread that exec'd takes the leader's id, the leader's state is dropped (it never reports an exit) |
//! | exit, killed | forget the task; for the command itself, keep its wait status |
//!
//! Every request may fail with `ESRCH` (the task was killed meanwhile): its exit report
//! follows, so the failure is ignored. The command's own system calls are recorded from the
//! entry of its first successful `execve` (the launcher's are not, as strace hides them).
//!
//! The tracer must not harm the traced program: a task to be let go ([`super::handoff`],
//! or still running when the recording finishes) is detached at its next stop with its
//! pending signal delivered; a write error detaches everyone and the command runs on; a
//! panic here detaches everyone before the thread exits (`PTRACE_O_EXITKILL` would kill
//! them).

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};

use super::classes::Value;
use super::handoff::{self, Handoff};
use super::launch::{Gated, Launch};
use super::sys::{self, Resume, SyscallInfo, Wait};
use super::writer::{Sink, SyscallStream};

/// State the tracer thread shares with [`super::SyscallRecorder`].
#[derive(Debug, Default)]
pub struct Shared {
    /// The command's raw wait status, once it exited.
    pub status: Mutex<Option<i32>>,
    /// Signalled when `status` is set.
    pub exited: Condvar,
    /// Set by `finish`: detach everyone and end.
    pub stop: AtomicBool,
    /// The tracer thread's id (for [`sys::wake`]).
    pub tid: AtomicI32,
}

impl Shared {
    fn set_status(&self, status: i32) {
        if let Ok(mut s) = self.status.lock() {
            *s = Some(status);
        }
        self.exited.notify_all();
    }
}

/// What [`super::SyscallRecorder::spawn`] learns from the tracer thread: the command's pid
/// and why it runs untraced, if it does.
pub type Started = Result<(i32, Option<String>), SpawnError>;

/// Why the command could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// Not found in `PATH` (`NotFound`: exit 127 as a shell does), the fork, or the
    /// command's `execve` failed (its errno: exit 126).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The trace's table or stream.
    #[error(transparent)]
    Sink(#[from] super::writer::SinkError),
    /// The tracer thread could not start or failed.
    #[error("the system-call tracer thread: {0}")]
    Thread(String),
}

/// What the tracer thread hands back at the end.
#[derive(Debug)]
pub struct Report {
    /// The stream, flushed (`None` when it could not be created).
    pub stream: Option<SyscallStream>,
    /// Tasks seen.
    pub tasks: u64,
    /// Ptrace-stops handled.
    pub stops: u64,
    /// Tasks that left the syscall view for another tracer: `(tid, reason)`.
    pub handed_off: Vec<(i32, String)>,
    /// Tasks still running when the recording finished, detached.
    pub detached_at_end: u64,
    /// The first error writing the trace (everyone was detached then).
    pub error: Option<String>,
}

/// Why a task is let go at its next stop.
#[derive(Clone, Debug)]
struct Leave {
    /// The `ptrace_detach` reason.
    reason: String,
    /// Who traces it next (0: nobody).
    tracer: i32,
    /// Said on stderr (a hand-off; not the end of the recording).
    announce: bool,
}

/// A system call between its entry and exit stops.
#[derive(Debug)]
struct Pending {
    nr: u64,
    arch: u32,
    /// The entry was written: write the exit.
    recorded: bool,
    /// The command's first `execve`: the entry, written with the exit if it succeeds.
    deferred: Option<(usize, u64, Vec<Value>)>,
    /// An `execve`/`execveat`'s path and exec event.
    exec: Option<Exec>,
}

/// An exec call in flight: the path it was given, and once its exec event came, when and
/// from which thread (written as `sched_process_exec` before the exit).
#[derive(Debug)]
struct Exec {
    path: Vec<u8>,
    at: Option<(u64, i32)>,
}

/// The argument register holding the path of an exec call, if `nr` is one.
fn exec_path_slot(nr: u64, arch: u32) -> Option<usize> {
    match nr {
        _ if arch != sys::NATIVE_ARCH => None,
        n if n == libc::SYS_execve as u64 => Some(0),
        n if n == libc::SYS_execveat as u64 => Some(1),
        _ => None,
    }
}

#[derive(Debug, Default)]
struct Task {
    recording: bool,
    pending: Option<Pending>,
    leave: Option<Leave>,
}

struct Tracer {
    root: i32,
    tasks: HashMap<i32, Task>,
    /// Our own children that called `PTRACE_TRACEME` after we let them go: their tracer is
    /// this thread again (legacy attach, no options); they are resumed, never recorded.
    adopted: HashSet<i32>,
    /// Held callers of `PTRACE_ATTACH`/`PTRACE_SEIZE`, by the target they wait for.
    held: HashMap<i32, i32>,
    out: Option<SyscallStream>,
    shared: Arc<Shared>,
    started: Option<Sender<Started>>,
    gated: Gated,
    root_done: bool,
    finishing: bool,
    report: Report,
}

/// The tracer thread's body (see the module docs).
pub fn run(launch: Launch, sink: Sink, shared: Arc<Shared>, started: Sender<Started>) -> Report {
    sys::block_signals_but_wake();
    shared.tid.store(sys::gettid(), Ordering::SeqCst);
    let mut report = Report { stream: None, tasks: 0, stops: 0, handed_off: Vec::new(), detached_at_end: 0, error: None };
    let out = match SyscallStream::create(&sink) {
        Ok(s) => s,
        Err(e) => {
            let _ = started.send(Err(e.into()));
            return report;
        }
    };
    let mut gated = match Gated::fork(launch) {
        Ok(g) => g,
        Err(e) => {
            let _ = started.send(Err(e.into()));
            return report;
        }
    };
    let root = gated.pid;
    if let Err(why) = seize_at_gate(root) {
        run_untraced(&mut gated, &shared, started, why);
        return report;
    }
    gated.release();
    let _ = sys::resume(root, Resume::Syscall, 0);
    report.tasks = 1;
    let mut t = Tracer {
        root,
        tasks: HashMap::from([(root, Task::default())]),
        adopted: HashSet::new(),
        held: HashMap::new(),
        out: Some(out),
        shared,
        started: Some(started),
        gated,
        root_done: false,
        finishing: false,
        report,
    };
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.run())).is_err() {
        t.report.error.get_or_insert_with(|| "the system-call tracer failed (a bug): every task was detached".into());
        t.finishing = false;
        t.begin_finish("the system-call tracer failed");
        t.run();
    }
    if !t.root_done {
        // Everyone was let go early (a write error, a failure): the command runs on
        // untraced, and `try_wait` still needs its status.
        wait_root(root, &t.shared);
    }
    if let Some(out) = t.out.as_mut() {
        if let Err(e) = out.flush() {
            t.report.error.get_or_insert(e.to_string());
        }
    }
    if let Some(tx) = t.started.take() {
        let _ = tx.send(Err(SpawnError::Io(io::Error::other("the command ended before it started"))));
    }
    t.report.stream = t.out.take();
    t.report
}

/// Seizes the child waiting at its gate and brings it to a ptrace-stop (so that it can be
/// resumed with `PTRACE_SYSCALL`), checking that the kernel has `PTRACE_GET_SYSCALL_INFO`.
///
/// # Errors
/// Why the command must run untraced (it is left detached, still at its gate).
fn seize_at_gate(pid: i32) -> Result<(), String> {
    sys::seize(pid).map_err(|e| explain_refusal(pid, &e))?;
    let stopped = sys::interrupt(pid).and_then(|()| loop {
        match sys::wait(pid) {
            Ok((_, Wait::Stopped { .. })) => return Ok(()),
            Ok((_, Wait::Gone(_))) => return Err(io::Error::from_raw_os_error(libc::ESRCH)),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(e),
        }
    });
    let checked = stopped
        .map_err(|e| format!("the command could not be stopped after PTRACE_SEIZE ({e})"))
        .and_then(|()| sys::syscall_info(pid).map(drop).map_err(|e| format!("this kernel lacks PTRACE_GET_SYSCALL_INFO (Linux 5.3): {e}")));
    if checked.is_err() {
        let _ = sys::resume(pid, Resume::Detach, 0);
    }
    checked
}

/// Why `PTRACE_SEIZE` of the command was refused, for the user.
fn explain_refusal(pid: i32, e: &io::Error) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let tracer: i32 = status.lines().find_map(|l| l.strip_prefix("TracerPid:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    if tracer != 0 {
        return format!("the command is already traced by {} (ust itself runs under a tracer that follows forks)", handoff::Task(tracer));
    }
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").ok().and_then(|s| s.trim().parse::<u32>().ok());
    match yama {
        Some(3) => "ptrace is disabled on this system (kernel.yama.ptrace_scope = 3)".into(),
        Some(2) => format!("ptrace is reserved to CAP_SYS_PTRACE (kernel.yama.ptrace_scope = 2): {e}"),
        _ => format!("PTRACE_SEIZE was refused ({e}): a container's seccomp profile or a security module may forbid ptrace"),
    }
}

/// The command runs without the syscall view: release it, report how its `execve` went,
/// wait for its exit (or the stop request).
fn run_untraced(gated: &mut Gated, shared: &Shared, started: Sender<Started>, why: String) {
    gated.release();
    let pid = gated.pid;
    if let Some(e) = gated.exec_error() {
        let _ = sys::wait(pid);
        let _ = started.send(Err(e.into()));
        return;
    }
    let _ = started.send(Ok((pid, Some(why))));
    wait_root(pid, shared);
}

/// Waits for the exit of the command, not (or no longer) traced, until the stop request. A
/// stop it reports is one of a `PTRACE_TRACEME` it made ([`let_go_on`]).
fn wait_root(pid: i32, shared: &Shared) {
    while !shared.stop.load(Ordering::SeqCst) {
        match sys::wait(pid) {
            Ok((_, Wait::Gone(st))) => return shared.set_status(st),
            Ok((_, Wait::Stopped { sig, .. })) => let_go_on(pid, sig),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            Err(_) => return,
        }
    }
}

/// A stop of our own child after its `PTRACE_TRACEME`: this thread is its tracer (no
/// options); resume it as if untraced: a signal is delivered, the exec `SIGTRAP` of a
/// legacy tracee is not, and a group-stop cannot be kept (`PTRACE_LISTEN` needs a seize).
fn let_go_on(tid: i32, sig: i32) {
    let deliver = match sys::siginfo(tid) {
        Ok(_) if sig == libc::SIGTRAP => 0,
        Ok(_) => sig,
        Err(_) => 0,
    };
    let _ = sys::resume(tid, Resume::Cont, deliver);
}

fn is_stop_signal(sig: i32) -> bool {
    matches!(sig, libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU)
}

impl Tracer {
    fn run(&mut self) {
        loop {
            if self.shared.stop.load(Ordering::SeqCst) && !self.finishing {
                self.begin_finish("the recording ended while it ran");
            }
            if self.tasks.is_empty() && (self.root_done || self.finishing) {
                return;
            }
            match sys::wait(-1) {
                Ok((tid, w)) => {
                    self.report.stops += 1;
                    let now = ust_core::clock::monotonic_ns();
                    match w {
                        Wait::Gone(status) => self.gone(tid, status),
                        Wait::Stopped { sig, event } => self.stopped(tid, sig, event, now),
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(_) => return,
            }
        }
    }

    /// Lets every task go at its next stop (held callers at once: they are stopped now).
    fn begin_finish(&mut self, reason: &str) {
        self.finishing = true;
        for caller in std::mem::take(&mut self.held).into_values() {
            let _ = sys::resume(caller, Resume::Detach, 0);
            self.tasks.remove(&caller);
            self.report.detached_at_end += 1;
        }
        for (&tid, t) in self.tasks.iter_mut() {
            if t.leave.is_none() {
                t.leave = Some(Leave { reason: reason.into(), tracer: 0, announce: false });
                let _ = sys::interrupt(tid);
            }
        }
    }

    fn write(&mut self, class: usize, ts: u64, tid: i32, values: &[Value]) {
        let Some(out) = self.out.as_mut() else { return };
        if let Err(e) = out.push(class, ts, tid, values) {
            self.write_failed(&e);
        }
    }

    /// The stream cannot be written: stop writing, let everyone go.
    fn write_failed(&mut self, e: &io::Error) {
        self.report.error = Some(format!("writing the system-call stream: {e}; the command runs on without the syscall view"));
        self.out = None;
        self.begin_finish("the system-call stream could not be written");
    }

    /// Resumes `tid` after a stop, to its next syscall stop, delivering `sig` (0: none).
    fn resume(&self, tid: i32, sig: i32) {
        let _ = sys::resume(tid, Resume::Syscall, sig);
    }

    fn gone(&mut self, tid: i32, status: i32) {
        self.tasks.remove(&tid);
        self.adopted.remove(&tid);
        if let Some(caller) = self.held.remove(&tid) {
            self.resume(caller, 0);
        }
        if tid == self.root {
            self.root_done = true;
            if let Some(tx) = self.started.take() {
                let e = self.gated.exec_error().unwrap_or_else(|| io::Error::other("the command ended before its execve"));
                let _ = tx.send(Err(e.into()));
            }
            self.shared.set_status(status);
        }
    }

    fn stopped(&mut self, tid: i32, sig: i32, event: i32, now: u64) {
        if self.adopted.contains(&tid) {
            return let_go_on(tid, sig);
        }
        // A new task, attached by the kernel at its fork (its parent's fork event may come
        // after this first stop).
        self.add_task(tid);
        if self.tasks.get(&tid).is_some_and(|t| t.leave.is_some()) {
            return self.leave(tid, sig, event, now);
        }
        match event {
            0 if sig == sys::SYSCALL_TRAP => self.syscall_stop(tid, now),
            0 => self.signal_stop(tid, sig, now),
            libc::PTRACE_EVENT_STOP if is_stop_signal(sig) => {
                let _ = sys::resume(tid, Resume::Listen, 0);
            }
            libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK | libc::PTRACE_EVENT_CLONE => {
                if let Ok(child) = sys::event_msg(tid) {
                    self.add_task(child as i32);
                    self.fork_event(tid, child as i32, now);
                }
                self.resume(tid, 0);
            }
            libc::PTRACE_EVENT_EXEC => {
                let former = sys::event_msg(tid).map(|m| m as i32).unwrap_or(tid);
                if former != tid {
                    // A non-leader thread exec'd: it is the leader now; the leader's own
                    // state (a call it was in) ends unreported.
                    if let Some(t) = self.tasks.remove(&former) {
                        self.tasks.insert(tid, t);
                    }
                }
                if let Some(exec) = self.tasks.get_mut(&tid).and_then(|t| t.pending.as_mut()).and_then(|p| p.exec.as_mut()) {
                    exec.at = Some((now, former));
                }
                self.resume(tid, 0);
            }
            _ => self.resume(tid, 0),
        }
    }

    /// Starts following a task the kernel attached at its fork, if not yet known (once the
    /// recording is finishing, only to let it go at its first stop).
    fn add_task(&mut self, tid: i32) {
        let leave = self.finishing.then(|| Leave { reason: "the recording ended while it ran".into(), tracer: 0, announce: false });
        if let std::collections::hash_map::Entry::Vacant(v) = self.tasks.entry(tid) {
            v.insert(Task { recording: true, pending: None, leave });
            self.report.tasks += 1;
        }
    }

    /// Writes `sched_process_fork` (a trace of this recorder alone): names and thread-group
    /// ids from `/proc` (the child is stopped at its start, or running the parent's code).
    fn fork_event(&mut self, parent: i32, child: i32, now: u64) {
        let Some(class) = self.out.as_ref().and_then(|o| o.calls.fork) else { return };
        let (Some(p), Some(c)) = (crate::procfs::task(parent), crate::procfs::task(child)) else { return };
        let comm = Value::Bytes(p.comm.into_bytes());
        self.write(
            class,
            now,
            parent,
            &[comm.clone(), Value::Int(parent.into()), comm, Value::Int(child.into()), Value::Int(p.pid.into()), Value::Int(c.pid.into())],
        );
    }

    fn syscall_stop(&mut self, tid: i32, now: u64) {
        match sys::syscall_info(tid) {
            Ok(SyscallInfo::Entry { nr, args, arch }) => self.entry(tid, nr, args, arch, now),
            Ok(SyscallInfo::Exit { ret, .. }) => {
                self.exit(tid, ret, now);
                self.resume(tid, 0);
            }
            Ok(SyscallInfo::None) => self.resume(tid, 0),
            // Killed meanwhile: its exit report follows.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            // Never seen (the kernel was checked at the seize): not recorded, but let go on.
            Err(_) => self.resume(tid, 0),
        }
    }

    fn entry(&mut self, tid: i32, nr: u64, args: [u64; 6], arch: u32, now: u64) {
        let recording = self.tasks.get(&tid).is_some_and(|t| t.recording);
        let path_slot = exec_path_slot(nr, arch);
        let first_exec = tid == self.root && !recording && path_slot.is_some();
        let exec = path_slot.filter(|_| recording || first_exec).map(|s| Exec { path: super::memory::string(tid, args[s]), at: None });
        let mut pending = Pending { nr, arch, recorded: false, deferred: None, exec };
        if recording || first_exec {
            let (class, values) = self.out.as_ref().map(|o| o.calls.entry(tid, nr, &args, arch)).unwrap_or_default();
            if first_exec {
                pending.deferred = Some((class, now, values));
            } else {
                self.write(class, now, tid, &values);
                pending.recorded = true;
            }
        }
        if let Some(t) = self.tasks.get_mut(&tid) {
            t.pending = Some(pending);
        }
        if let Some(h) = handoff::request(nr, &args, arch) {
            if self.hand_off(tid, h, now) {
                return;
            }
        }
        self.resume(tid, 0);
    }

    fn exit(&mut self, tid: i32, ret: i64, now: u64) {
        let Some(p) = self.tasks.get_mut(&tid).and_then(|t| t.pending.take()) else { return };
        let first_exec = p.deferred.is_some();
        if let Some((class, ts, values)) = p.deferred {
            if ret != 0 {
                // A failed execve of the launcher: the command has not started.
                return;
            }
            if let Some(t) = self.tasks.get_mut(&tid) {
                t.recording = true;
            }
            self.write(class, ts, tid, &values);
            if let Some(tx) = self.started.take() {
                let _ = tx.send(Ok((self.root, None)));
            }
        } else if !p.recorded {
            return;
        }
        if let (Some(Exec { path, at: Some((ts, former)) }), Some(class)) = (p.exec, self.out.as_ref().map(|o| o.calls.exec)) {
            self.write(class, ts, tid, &[Value::Bytes(path), Value::Int(tid.into()), Value::Int(former.into())]);
        }
        let exit = self.out.as_ref().map(|o| o.calls.exit(p.nr, p.arch, ret));
        if let Some((class, values)) = exit {
            self.write(class, now, tid, &values);
        }
        if first_exec {
            self.dump_root(now);
        }
    }

    fn signal_stop(&mut self, tid: i32, sig: i32, now: u64) {
        if self.tasks.get(&tid).is_some_and(|t| t.recording) {
            if let (Ok((signo, errno, code)), Some(class)) = (sys::siginfo(tid), self.out.as_ref().map(|o| o.calls.signal)) {
                self.write(class, now, tid, &[Value::Int(signo.into()), Value::Int(errno.into()), Value::Int(code.into())]);
            }
        }
        self.resume(tid, sig);
    }

    /// The command's state-dump record once it exec'd (a trace of this recorder alone: its
    /// name, its parent), so readers name it.
    fn dump_root(&mut self, now: u64) {
        let Some(out) = self.out.as_mut().filter(|o| o.calls.fork.is_some()) else { return };
        let Some(t) = crate::procfs::task(self.root) else { return };
        if let Err(e) = out.push_process_state(now, &t) {
            self.write_failed(&e);
        }
    }

    /// Lets the task concerned by `caller`'s `ptrace` call go first; true when `caller`
    /// must not be resumed now (it was detached, or waits for the target's detach).
    fn hand_off(&mut self, caller: i32, h: Handoff, now: u64) -> bool {
        match h {
            Handoff::TraceMe => {
                let reason = handoff::reason(h, caller);
                let parent = handoff::parent_of(caller);
                let ours = parent == std::process::id() as i32;
                let recording = self.tasks.get(&caller).is_some_and(|t| t.recording);
                self.note(caller, caller, parent, &reason, now, recording);
                let _ = sys::resume(caller, Resume::Detach, 0);
                self.tasks.remove(&caller);
                if ours {
                    self.adopted.insert(caller);
                }
                true
            }
            Handoff::Attach { target, .. } => {
                if target == caller || !self.tasks.contains_key(&target) || self.held.contains_key(&target) {
                    return false;
                }
                let reason = handoff::reason(h, caller);
                if let Some(t) = self.tasks.get_mut(&target) {
                    t.leave = Some(Leave { reason, tracer: caller, announce: true });
                }
                if sys::interrupt(target).is_err() {
                    // Gone: its exit comes, and lets the caller go on.
                }
                self.held.insert(target, caller);
                true
            }
        }
    }

    /// A task to let go, at this stop: detach (delivering the signal of a signal-delivery
    /// stop, recording the exit of a call it returns from), say so, and let a held caller go on.
    fn leave(&mut self, tid: i32, sig: i32, event: i32, now: u64) {
        let deliver = if event == 0 && sig != sys::SYSCALL_TRAP { sig } else { 0 };
        if event == 0 && sig == sys::SYSCALL_TRAP {
            if let Ok(SyscallInfo::Exit { ret, .. }) = sys::syscall_info(tid) {
                self.exit(tid, ret, now);
            }
        }
        let _ = sys::resume(tid, Resume::Detach, deliver);
        let Some(t) = self.tasks.remove(&tid) else { return };
        let Some(leave) = t.leave else { return };
        if leave.announce {
            self.note(tid, tid, leave.tracer, &leave.reason, now, t.recording);
        } else {
            self.report.detached_at_end += 1;
        }
        if let Some(caller) = self.held.remove(&tid) {
            self.resume(caller, 0);
        }
    }

    /// Records and says that `tid` left the syscall view.
    fn note(&mut self, by: i32, tid: i32, tracer: i32, reason: &str, now: u64, record: bool) {
        eprintln!("ust: task {} left the system-call view: {reason}", handoff::Task(tid));
        self.report.handed_off.push((tid, reason.to_string()));
        if let (true, Some(class)) = (record, self.out.as_ref().map(|o| o.calls.detach)) {
            self.write(class, now, by, &[Value::Int(tid.into()), Value::Int(tracer.into()), Value::Bytes(reason.as_bytes().to_vec())]);
        }
    }
}
