//! Which kernel view `ust trace --kernel` gets, best first, saying on stderr which tier it
//! used and why a better one is not available:
//!
//! - tier 3: root's tracefs recording ([`ViewRecorder`] with [`ViewFilter::everything`]:
//!   root, or write access to tracefs): the command's system calls, faults and page-cache
//!   reads, filtered to its tree in the kernel, and everyone's scheduling, interrupts and
//!   timers (or, with `--system-wide`, everything of every task), with tier 1's user
//!   stacks of the traced tasks (each page fault and blocked interval) beside it in
//!   `kernel-stacks/` ([`PerfRecorder::start_stacks`]), which tracefs cannot give for
//!   programs built without frame pointers;
//! - tier 2: root's `ust-consumerd` as a broker ([`super::broker`]): the same recording,
//!   keeping the kernel events of the tasks this user could ptrace, every other task
//!   reduced to its kind;
//! - tier 1: [`super::perf::PerfRecorder`], any user: the traced tasks only, through
//!   perf_event_open, no wake-ups; their system calls recorded with ptrace beside it
//!   ([`super::syscall_view`]) unless `--no-ptrace`;
//! - none: user-space tracing goes on.
//!
//! Tiers 3 and 2 need the command's pid before it runs: the command is started gated
//! ([`super::gate::Gated`]) and released once its view records.

use ust_ctf::outdir::TraceDir;

use super::broker::{Broker, Pending};
use super::filter::ViewFilter;
use super::perf::{PerfRecorder, SyscallView};
use super::uprobe::Probe;
use super::view_recorder::{Options, Prepared, ViewRecorder};
use super::{KernelError, KernelSummary};

/// A running kernel recording of any kind.
#[derive(Debug)]
pub enum KernelView {
    /// Root's tracefs recording (tier 3), with the traced tasks' user stacks from
    /// perf_event_open beside it ([`PerfRecorder::start_stacks`]) when it opens.
    Tracefs(ViewRecorder, Option<Box<PerfRecorder>>),
    /// Recorded and filtered for this user by root's daemon (tier 2).
    Broker(Broker),
    /// The traced tasks, from perf_event_open (tier 1).
    Perf(PerfRecorder),
    /// The traced tasks' system calls alone, with ptrace: tier 1 where perf_event_open is
    /// refused (`perf_event_paranoid` 3, a container's seccomp profile).
    Syscalls(super::ptrace::SyscallTrace),
}

/// What [`plan`] found.
#[derive(Debug)]
pub enum Plan {
    /// A view that records once it has the command's pid: spawn the command gated, then
    /// [`Gate::start`].
    Gated(Gate),
    /// Recording already (tier 1).
    Ready(KernelView),
    /// No kernel view.
    None,
    /// Dynamic probes were asked for and cannot be placed: the reason (the command must
    /// not run as if they were).
    Refused(String),
}

/// A view waiting for the gated command's pid.
#[derive(Debug)]
pub enum Gate {
    /// Root's tracefs recording is set up (tier 3; the stacks recorder already follows
    /// the next child that execs).
    Tracefs(Box<Prepared>, Option<Box<PerfRecorder>>, bool),
    /// Root's daemon will record (tier 2), placing the probes; the error says why tier 3
    /// is not available.
    Broker(Pending, KernelError, Vec<Probe>),
}

impl Gate {
    /// Starts the view of the gated command `pid` into `<output>/kernel`, saying on stderr
    /// which tier it is.
    ///
    /// # Errors
    /// Why not (printed), to pass to [`start_perf`] once the caller has cancelled the
    /// gated command (then spawned with [`super::syscall_view::spawn`]).
    pub fn start(self, output: &TraceDir, pid: i32) -> Result<KernelView, KernelError> {
        match self {
            Gate::Tracefs(p, stacks, system_wide) => {
                start_tracefs(*p, stacks, output, pid, system_wide).inspect_err(|e| eprintln!("ust: root's kernel view failed to start: {e}"))
            }
            Gate::Broker(p, tracefs_err, probes) => start_broker(p, output, pid, &probes).ok_or(tracefs_err),
        }
    }
}

/// Sets up the best view, or finds root's broker. Call it right before the command is
/// spawned (tier 1 and the user stacks follow the next child that execs). `opts` are
/// tier 3's; `syscalls` whether tier 1 records the system calls with ptrace
/// ([`SyscallView::Ptrace`]) or why not. With `probes` (dynamic probes,
/// [`super::uprobe`]), only tiers 3 and 2 do: without them the plan is [`Plan::Refused`].
pub fn plan(output: &TraceDir, opts: Options, syscalls: &SyscallView, probes: Vec<Probe>) -> Plan {
    let tracefs_err = match ViewRecorder::prepare_with_probes(true, opts, &probes) {
        Ok(p) => {
            let stacks = match PerfRecorder::start_stacks_with_probes(output, p.probe_tracepoints()) {
                Ok(s) => {
                    if let Some(n) = s.probe_note() {
                        eprintln!("ust: {n}");
                    }
                    Some(Box::new(s))
                }
                Err(e) => {
                    eprintln!("ust: no user stacks in the kernel view (perf_event_open: {e})");
                    None
                }
            };
            return Plan::Gated(Gate::Tracefs(Box::new(p), stacks, opts.system_wide));
        }
        Err(KernelError::Uprobe(e)) => return Plan::Refused(e),
        Err(e) => e,
    };
    if opts.system_wide {
        eprintln!("ust: --system-wide needs root's tracefs view (tier 3): {tracefs_err}");
    }
    match super::broker::hello() {
        Ok(p) => Plan::Gated(Gate::Broker(p, tracefs_err, probes)),
        Err(reason) if !probes.is_empty() => Plan::Refused(format!(
            "--userspace-probe: uprobes need root's tracefs or root's ust-consumerd (the kernel broker), and neither is available here \
             (tracefs: {tracefs_err}; root's daemon: {reason}); ask root to run `ust daemon start` as root"
        )),
        Err(reason) => {
            eprintln!("ust: root's ust-consumerd gives no kernel view: {reason}");
            start_perf(output, &tracefs_err, syscalls).map_or(Plan::None, Plan::Ready)
        }
    }
}

/// Starts root's recording of the tree of the gated command `pid` into `<output>/kernel`.
fn start_tracefs(p: Prepared, stacks: Option<Box<PerfRecorder>>, output: &TraceDir, pid: i32, system_wide: bool) -> Result<KernelView, KernelError> {
    let rec = p.start(output.dir(super::KERNEL_DIR, 0o750)?, ViewFilter::everything(pid))?;
    if system_wide {
        eprintln!("ust: kernel view: tier 3 (tracefs, system-wide: every task's events)");
    } else {
        eprintln!(
            "ust: kernel view: tier 3 (tracefs: the command's system calls and faults, filtered in the kernel; everyone's scheduling, interrupts and timers)"
        );
    }
    Ok(KernelView::Tracefs(rec, stacks))
}

/// Hands the gated command's `pid` to the broker; on refusal, says why.
fn start_broker(p: Pending, output: &TraceDir, pid: i32, probes: &[Probe]) -> Option<KernelView> {
    let dir = p.rundir.clone();
    match p.start(output, pid, probes) {
        Ok(b) => {
            eprintln!(
                "ust: kernel view: tier 2 (root's ust-consumerd in {}: the kernel events of the tasks you could ptrace; \
                 other tasks, interrupts and timers appear only as their kind)",
                dir.display()
            );
            Some(KernelView::Broker(b))
        }
        Err(reason) => {
            eprintln!("ust: root's ust-consumerd refused the kernel view: {reason}");
            None
        }
    }
}

/// Tier 1, or none, with the reasons on stderr. With `syscalls` [`SyscallView::Ptrace`],
/// the trace's table has the system-call recorder's classes too, and the command is to be
/// launched by it ([`super::syscall_view::spawn`]); else the trace says why it has no
/// system calls. Where perf_event_open is refused, the system calls alone
/// ([`KernelView::Syscalls`]).
pub fn start_perf(output: &TraceDir, tracefs_err: &KernelError, syscalls: &SyscallView) -> Option<KernelView> {
    let started = match syscalls {
        SyscallView::Ptrace => PerfRecorder::start_with_syscalls(output),
        SyscallView::Off(_) => PerfRecorder::start(output),
    };
    match started {
        Ok(mut p) => {
            eprintln!(
                "ust: no tracefs access ({tracefs_err}): recording the traced tasks only, with perf_event_open \
                 (switches, faults, forks, mmaps and user stacks; no wake-ups: run as root for those)"
            );
            match syscalls {
                SyscallView::Ptrace => eprintln!("ust: kernel view: tier 1 (perf_event_open and ptrace, the traced tasks only)"),
                SyscallView::Off(why) => {
                    eprintln!("ust: kernel view: tier 1 (perf_event_open, the traced tasks only); no system-call view: {why}");
                    p.set_syscall_view(syscalls.clone());
                }
            }
            Some(KernelView::Perf(p))
        }
        Err(e) => {
            let alone = (*syscalls == SyscallView::Ptrace).then(|| super::ptrace::SyscallTrace::create(output));
            match alone {
                Some(Ok(t)) => {
                    eprintln!("ust: no tracefs access ({tracefs_err})");
                    eprintln!("ust: nor with perf_event_open: {e}");
                    eprintln!("ust: kernel view: tier 1 (ptrace only: the traced tasks' system calls, forks and execs; no switches, faults or stacks)");
                    Some(KernelView::Syscalls(t))
                }
                _ => {
                    eprintln!("ust: {}", tracefs_err.explain());
                    eprintln!("ust: nor with perf_event_open: {e}");
                    if let Some(Err(e)) = alone {
                        eprintln!("ust: nor with ptrace: {e}");
                    }
                    None
                }
            }
        }
    }
}

impl KernelView {
    /// Finishes the recording (see [`ViewRecorder::finish`], [`Broker::finish`],
    /// [`PerfRecorder::finish`]).
    ///
    /// # Errors
    /// The metadata write error; for tier 2, the broker's failure or disappearance.
    pub fn finish(self, output: &TraceDir, traced_pid: i32) -> Result<KernelSummary, KernelError> {
        match self {
            KernelView::Tracefs(k, stacks) => {
                if let Some(Err(e)) = stacks.map(|s| s.finish(output, traced_pid)) {
                    eprintln!("ust: the user stacks of the kernel view: {e}");
                }
                let offset = super::session_clock_offset(output).unwrap_or_else(ust_core::clock::realtime_offset_ns);
                k.finish(traced_pid, offset).map_err(|e| KernelError::Io(std::io::Error::other(e)))
            }
            KernelView::Broker(b) => b.finish(output, traced_pid),
            KernelView::Perf(p) => p.finish(output, traced_pid),
            KernelView::Syscalls(t) => {
                t.finish(output, traced_pid)?;
                Ok(KernelSummary { dir: output.path().join(super::KERNEL_DIR), ..Default::default() })
            }
        }
    }
}
