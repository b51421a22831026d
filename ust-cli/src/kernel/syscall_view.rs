//! Tier 1's system calls: when `ust trace --kernel` records with perf_event_open (an
//! ordinary user without root's daemon), the command is launched by the system-call
//! recorder ([`super::ptrace::SyscallRecorder`], ptrace as strace uses it) instead of a
//! plain spawn, and its stream `syscalls_0` goes into the same kernel trace as the perf
//! records (one metadata, one clock: `CLOCK_MONOTONIC`).
//!
//! ```text
//! view::start_perf ── PerfRecorder::start_with_syscalls (the table has both recorders' classes)
//! spawn(cmd) ──────── SyscallRecorder::spawn(Launch::from_command(cmd), perf.syscall_sink())
//!                     ├─ seized: stderr says it is on and how to turn it off (--no-ptrace)
//!                     └─ not seizable (already traced, Yama 3): runs untraced, stderr says why
//! Running::try_wait ─ the command's exit status, exactly as waitpid gives it
//! Running::finish ─── the stream's last packet; the perf metadata says whether the
//!                     system calls are there (env.syscall_source) or why not (env.no_syscalls)
//! ```

use std::io;
use std::process::{Child, Command, ExitStatus};

use super::perf::SyscallView;
use super::ptrace::{Launch, SpawnError, SyscallRecorder, SyscallSummary};
use super::view::KernelView;
use super::KernelSummary;

/// Why the system-call view is off when `--no-ptrace` is given.
pub const OFF_BY_FLAG: &str = "--no-ptrace was given";
/// Why it is off for `--as-user` (the recorder launches the command as the caller only).
pub const OFF_AS_USER: &str = "the command runs as another user (--as-user), which the ptrace recorder does not launch";

/// The traced command, running.
#[derive(Debug)]
pub enum Running {
    /// Spawned as is.
    Plain(Child),
    /// Launched by the system-call recorder, whose thread is its parent and reaps it.
    Traced(Box<SyscallRecorder>),
}

impl Running {
    /// The command's pid.
    pub fn id(&self) -> i32 {
        match self {
            Running::Plain(c) => c.id() as i32,
            Running::Traced(r) => r.pid(),
        }
    }

    /// The command's exit status once it exited (exit code, or the signal that killed it).
    ///
    /// # Errors
    /// `waitpid`'s error for a plain child.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match self {
            Running::Plain(c) => c.try_wait(),
            Running::Traced(r) => Ok(r.try_wait()),
        }
    }

    /// Ends the system-call recording (call it once the command exited): what it wrote,
    /// for a traced command.
    pub fn finish(self) -> Option<SyscallSummary> {
        match self {
            Running::Plain(_) => None,
            Running::Traced(r) => Some(r.finish()),
        }
    }
}

/// Spawns `cmd`: launched by the system-call recorder when `kernel` is tier 1 started with
/// a system-call sink ([`super::perf::PerfRecorder::start_with_syscalls`], or the system
/// calls alone, [`KernelView::Syscalls`]), saying on stderr that the view is on and how to
/// turn it off, or why it is not; else as is.
///
/// # Errors
/// The command cannot run: not found (`NotFound`), its `execve` failed, the fork failed.
pub fn spawn(mut cmd: Command, kernel: Option<&mut KernelView>) -> io::Result<Running> {
    // Where the recorder writes, and the perf recording whose metadata says how it went.
    let (sink, mut perf) = match kernel {
        Some(KernelView::Perf(p)) => match p.syscall_sink() {
            Some(sink) => (sink, Some(p)),
            None => return cmd.spawn().map(Running::Plain),
        },
        Some(KernelView::Syscalls(t)) => (t.sink().clone(), None),
        _ => return cmd.spawn().map(Running::Plain),
    };
    let mut say = |v: SyscallView| {
        if let Some(p) = perf.as_deref_mut() {
            p.set_syscall_view(v);
        }
    };
    match SyscallRecorder::spawn(Launch::from_command(&cmd), sink) {
        Ok(rec) => {
            match rec.untraced() {
                Some(why) => {
                    eprintln!("ust: no system-call view: {why}; the command runs without it");
                    say(SyscallView::Off(why.to_string()));
                }
                None => {
                    eprintln!("ust: {}", super::ptrace::ANNOUNCE);
                    say(SyscallView::Ptrace);
                }
            }
            Ok(Running::Traced(Box::new(rec)))
        }
        // The command itself could not run (not found, or its `execve` failed).
        Err(SpawnError::Io(e)) => {
            say(SyscallView::Ptrace);
            Err(e)
        }
        // The recorder could not start: the command runs without it.
        Err(e) => {
            let why = format!("the system-call recorder could not start: {e}");
            eprintln!("ust: no system-call view: {why}");
            say(SyscallView::Off(why));
            cmd.spawn().map(Running::Plain)
        }
    }
}

/// Adds what the system-call recorder wrote to the kernel recording's summary, and says on
/// stderr what it could not follow (tasks handed to another tracer, a write error).
pub fn add_to_summary(s: &mut KernelSummary, sys: &SyscallSummary) {
    for (name, n) in &sys.counts {
        match s.counts.iter_mut().find(|c| &c.0 == name) {
            Some(c) => c.1 += n,
            None => s.counts.push((name.clone(), *n)),
        }
    }
    for (tid, why) in &sys.handed_off {
        eprintln!("ust: task {tid} left the system-call view: {why}");
    }
    if sys.detached_at_end > 0 {
        eprintln!("ust: {} task(s) of the command still ran when it exited: their later system calls are not recorded", sys.detached_at_end);
    }
    if let Some(e) = &sys.error {
        eprintln!("ust: the system-call view ended early: {e}");
    }
}
