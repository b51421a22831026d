//! System calls of the traced command by the means strace uses: `ptrace(2)`, for an
//! ordinary user who has neither tracefs nor root's daemon (tier 1 of `ust trace
//! --kernel`, whose perf_event_open recording has no system calls: `ust-cli`'s
//! `kernel::syscall_view` launches the command with [`SyscallRecorder::spawn`] on
//! [`crate::perf::PerfRecorder::syscall_sink`]). Every call of every
//! task of the command's tree, from the command's `execve` on, following forks, vforks,
//! clones and execs, with the entry and exit times (`CLOCK_MONOTONIC`, the clock of every
//! other trace of the session), the arguments, the strings they point to and the return
//! value, written as the kernel trace's `syscall_entry_<call>`/`syscall_exit_<call>`
//! events ([`classes`]).
//!
//! ```text
//! SyscallRecorder::spawn ──> thread ust-ptrace (tracer::run): it alone makes ptrace calls
//!   launch: fork, gate ── PTRACE_SEIZE(EXITKILL|TRACESYSGOOD|TRACEFORK|TRACEVFORK|
//!                         TRACECLONE|TRACEEXEC|TRACESECCOMP), PTRACE_INTERRUPT ── release
//!   loop: waitpid(-1, __WALL|__WNOTHREAD) ── stop ── record ── resume
//!          └─ syscall_entry_*/exit_*, sched_process_exec, signal_deliver, ptrace_detach
//!             (alone: sched_process_fork, the command's state dump) ──> kernel/syscalls_<n>
//! try_wait / wait: the command's exit status (the tracer thread reaps it)
//! finish: detach the tasks still running, flush the stream
//! ```
//!
//! Modules: [`sys`] (the ptrace, waitpid and process_vm_readv calls), [`launch`] (the
//! gated child), [`tracer`] (the stop loop), [`handoff`] (a traced debugger), [`memory`]
//! (strings, `argv`, socket addresses from the tracee), [`args`] (argument names and
//! types), [`classes`] (the event classes and how their fields are filled), [`writer`]
//! (the CTF stream, or a trace of its own).
//!
//! Correct as strace is correct: a signal is delivered unchanged (the signal-delivery stop
//! re-injects it); a group-stop is kept with `PTRACE_LISTEN` (`^Z`, `SIGSTOP`/`SIGCONT`
//! work as untraced); the command's exit status or fatal signal is reported as is
//! ([`SyscallRecorder::try_wait`]); a multithreaded `execve` (the thread takes the
//! leader's id, `PTRACE_GETEVENTMSG` gives the former one) and a task that dies while
//! stopped (`ESRCH`) are expected. A traced program that debugs or is debugged keeps
//! working: the task concerned leaves the syscall view first ([`handoff`]). When the
//! command cannot be seized (`ust` itself runs under `strace -f`, Yama `ptrace_scope` 3, a
//! container), it runs without the syscall view and [`SyscallRecorder::untraced`] says why.
//!
//! **Why `PTRACE_SYSCALL` and not a seccomp filter.** strace's `--seccomp-bpf` has the child
//! install, before its `execve`, a filter returning `SECCOMP_RET_TRACE` for the calls to
//! trace, so that the others run without stopping; a traced call then costs a seccomp stop
//! and, resumed with `PTRACE_SYSCALL`, an exit stop. The recorder traces every call, so the
//! filter saves no stop (strace itself refuses `--seccomp-bpf` without `-e trace=`), and
//! both designs were measured on 100 000 `getppid` calls, tracer and tracee pinned on one
//! CPU (`taskset -c 1 perf stat -e task-clock`, three runs each, load average 12): CPU time
//! 640-648 ms with `PTRACE_SYSCALL`, 655-667 ms with the filter (its evaluation and the
//! `PTRACE_CONT`/`PTRACE_SYSCALL` alternation), 716-718 ms for `strace -f -o /dev/null`,
//! 8 ms untraced. The filter also breaks the debugger hand-off: a seccomp filter cannot be
//! removed, and `SECCOMP_RET_TRACE` without a tracer that set `PTRACE_O_TRACESECCOMP`
//! makes every call fail with `ENOSYS` (kernel/seccomp.c), so a task let go to gdb or
//! strace, or still running when the recording ends, could no longer make a system call
//! (measured: strace under the filter design died of `SIGSEGV`, gdb hung). The filter
//! design is in this module's history (commit c3b3e88).

pub mod args;
pub mod classes;
pub mod handoff;
pub mod launch;
pub mod memory;
pub mod sys;
pub mod tracer;
pub mod writer;

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

pub use launch::Launch;
pub use tracer::SpawnError;
pub use writer::{Sink, SyscallTrace};

/// What `ust trace` says on stderr when the system-call view is on, and how to turn it off.
pub const ANNOUNCE: &str = "system calls of the traced tasks are recorded with ptrace, as strace records them \
     (syscall-heavy programs run slower under it; --no-ptrace turns it off)";

/// What a finished recording did.
#[derive(Clone, Debug, Default)]
pub struct SyscallSummary {
    /// Events written per class name (only the classes with events).
    pub counts: Vec<(String, u64)>,
    /// Tasks traced.
    pub tasks: u64,
    /// Ptrace-stops handled.
    pub stops: u64,
    /// Tasks that left the syscall view for another tracer: `(tid, reason)`.
    pub handed_off: Vec<(i32, String)>,
    /// Tasks still running at the end, detached (they run on untraced).
    pub detached_at_end: u64,
    /// The write error that ended the recording early, if any.
    pub error: Option<String>,
}

/// A command running under the system-call recorder.
#[derive(Debug)]
pub struct SyscallRecorder {
    pid: i32,
    untraced: Option<String>,
    shared: Arc<tracer::Shared>,
    thread: Option<std::thread::JoinHandle<tracer::Report>>,
    table: Arc<crate::ctf::EventTable>,
}

impl SyscallRecorder {
    /// Starts `launch` under a tracer thread writing to `sink`, and returns once the
    /// command exec'd (or runs untraced: [`SyscallRecorder::untraced`]). The command's
    /// parent is the tracer thread, which alone waits for it: use [`Self::try_wait`], never
    /// `waitpid` on its pid. Installs a do-nothing handler for `SIGRTMAX` (the tracer
    /// thread's wake-up, [`sys::wake_signal`]).
    ///
    /// A perf_event_open recording that follows the command (`inherit`, `enable_on_exec`)
    /// must be opened before this call: the fork happens in the thread started here.
    ///
    /// # Errors
    /// [`SpawnError`]: the program is not found (`NotFound`), its `execve` failed (its
    /// errno), the stream could not be created.
    pub fn spawn(launch: Launch, sink: Sink) -> Result<SyscallRecorder, SpawnError> {
        sys::install_wake_handler();
        let shared = Arc::new(tracer::Shared::default());
        let (tx, rx) = std::sync::mpsc::channel();
        let table = sink.table.clone();
        let s = shared.clone();
        let thread = std::thread::Builder::new().name("ust-ptrace".into()).spawn(move || tracer::run(launch, sink, s, tx))?;
        match rx.recv() {
            Ok(Ok((pid, untraced))) => Ok(SyscallRecorder { pid, untraced, shared, thread: Some(thread), table }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(SpawnError::Thread(match thread.join() {
                Ok(r) => r.error.unwrap_or_else(|| "it ended".into()),
                Err(_) => "it panicked".into(),
            })),
        }
    }

    /// The command's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Why the command runs without the syscall view (it could not be seized), if it does.
    pub fn untraced(&self) -> Option<&str> {
        self.untraced.as_deref()
    }

    /// The command's exit status once it exited (exit code, or the signal that killed it).
    pub fn try_wait(&self) -> Option<ExitStatus> {
        self.shared.status.lock().ok().and_then(|s| *s).map(ExitStatus::from_raw)
    }

    /// Waits for the command's exit status.
    pub fn wait(&self) -> ExitStatus {
        let mut s = match self.shared.status.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        loop {
            if let Some(st) = *s {
                return ExitStatus::from_raw(st);
            }
            s = match self.shared.exited.wait(s) {
                Ok(s) => s,
                Err(p) => p.into_inner(),
            };
        }
    }

    fn stop_thread(&mut self) -> Option<tracer::Report> {
        let thread = self.thread.take()?;
        self.shared.stop.store(true, Ordering::SeqCst);
        // The tracer may be blocked in waitpid: the signal makes it return EINTR. It may
        // also check the flag just before the signal and then block: send it again until
        // the thread is done.
        while !thread.is_finished() {
            sys::wake(self.shared.tid.load(Ordering::SeqCst));
            std::thread::sleep(Duration::from_millis(5));
        }
        thread.join().ok()
    }

    /// Ends the recording: the tasks still running are detached (they run on, untraced),
    /// the stream's last packet is written. Call it after the command exited; the caller
    /// writes the metadata ([`SyscallTrace::finish`], or the merged trace's own).
    pub fn finish(mut self) -> SyscallSummary {
        let Some(r) = self.stop_thread() else {
            return SyscallSummary { error: Some("the system-call tracer thread panicked".into()), ..Default::default() };
        };
        let counts = match &r.stream {
            Some(s) => self.table.events.iter().zip(s.counts()).filter(|(_, &n)| n > 0).map(|(e, &n)| (e.name.clone(), n)).collect(),
            None => Vec::new(),
        };
        SyscallSummary { counts, tasks: r.tasks, stops: r.stops, handed_off: r.handed_off, detached_at_end: r.detached_at_end, error: r.error }
    }
}

impl Drop for SyscallRecorder {
    fn drop(&mut self) {
        self.stop_thread();
    }
}
