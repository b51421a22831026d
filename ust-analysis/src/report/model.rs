//! What `ust report` prints and serializes (`--format json`): the report's structures, which
//! [`super::analysis`] fills; times in ns.

use serde::Serialize;

use super::faults::{Fault, FileFaultList, FileFaults};
use super::probes::ProbeRow;
use super::span_view::SpanView;
use super::syscalls::{ProcessCalls, SlowCall, SyscallRow, ThreadCalls};
use super::tracer::Role;
use super::user_view::UserView;

/// Per-task summary row.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct TaskRow {
    /// Thread id.
    pub tid: i32,
    /// Last known name.
    pub name: String,
    /// Kernel events in this thread plus user-space events of it.
    pub events: u64,
    /// Time on a CPU (ns).
    pub runtime_ns: u64,
    /// Time blocked (off CPU, not runnable) (ns).
    pub blocked_ns: u64,
}

/// What woke a thread.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Waker {
    /// A hardware interrupt handler.
    Irq {
        /// IRQ number.
        irq: i64,
        /// Handler name.
        handler: String,
        /// CPU.
        cpu: u32,
    },
    /// A softirq.
    Softirq {
        /// Kind (`TIMER`, `NET_RX`, ...).
        softirq: String,
        /// CPU.
        cpu: u32,
    },
    /// The local APIC timer interrupt (expiring hrtimers: sleeps, timeouts).
    TimerInterrupt {
        /// The hrtimer callback's address when one was expiring.
        hrtimer_function: Option<String>,
        /// CPU.
        cpu: u32,
    },
    /// Another task.
    Task {
        /// Its thread id.
        tid: i32,
        /// Its name.
        name: String,
        /// What it was doing: `in <syscall>` or `in user space`.
        doing: String,
        /// CPU.
        cpu: u32,
        /// Why that task was running: its own previous wait, explained in turn (not for a
        /// task of ust's: the chain stops there).
        chain: Option<Box<Wait>>,
        /// The task is ust's ([`super::tracer`]): whose.
        #[serde(skip_serializing_if = "Option::is_none")]
        ust: Option<Role>,
    },
    /// A task of another user (or one this user may not ptrace): a tier-2 trace shows only
    /// that much of it (`ust_kernel::filter`).
    OtherUser {
        /// CPU.
        cpu: u32,
    },
    /// A kernel thread (tier 2 shows no more of it).
    KernelThread {
        /// CPU.
        cpu: u32,
    },
    /// No wake-up event was seen (it happened before the trace started, or was lost).
    Unknown,
    /// A tier-1 trace ([`super::stacks`]): wake-ups are not visible without root.
    NeedsRoot,
}

/// One blocked interval.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Wait {
    /// Thread id.
    pub tid: i32,
    /// Thread name.
    pub name: String,
    /// When it blocked (ns, CLOCK_MONOTONIC).
    pub start_ns: u64,
    /// Blocked time: from leaving the CPU to running again (ns).
    pub duration_ns: u64,
    /// Wake-up to running again (ns), when the wake-up was seen.
    pub wakeup_latency_ns: Option<u64>,
    /// The kernel recorded no switch back to the task: the wait ends at the task's first
    /// event after it, so `duration_ns` and `wakeup_latency_ns` are upper bounds.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub end_inferred: bool,
    /// What it was blocked in: `syscall <name>`, `page fault at 0x..`, or `user space`.
    pub blocked_in: String,
    /// What woke it.
    pub woken_by: Waker,
    /// Its user-space stack when the trace has one (tier 1, [`super::stacks`]), innermost
    /// first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<super::symbols::Frame>,
    /// The blocking call as strace writes it ([`super::call_text`]), its descriptors named
    /// by what they held at the time of the call (`read(3</etc/hostname>, 0x7ffc…, 4096)`;
    /// `read(3, …)` when the trace does not tell), its paths as strings where the trace
    /// copied them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// The wait is ust's, not the program's ([`super::tracer`]): why (`ust's runtime`
    /// for a wait of ust's own thread, `the constructor waiting for ust's registration`,
    /// `woken by ust's daemon`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ust: Option<String>,
}

/// The whole report.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct Report {
    /// True when kernel events were found.
    pub kernel: bool,
    /// The traced command's pid (kernel trace `env.traced_pid`, else the first process).
    pub traced_pid: i32,
    /// First event (ns).
    pub start_ns: u64,
    /// Last minus first event (ns).
    pub span_ns: u64,
    /// Per task of the traced tree (kernel only).
    pub tasks: Vec<TaskRow>,
    /// Per system call (kernel only), from the traced command's exec on.
    pub syscalls: Vec<SyscallRow>,
    /// How the system calls were recorded when not by the kernel's tracepoints: `ptrace`
    /// (tier 1's system-call view, [`super::tiers`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syscall_source: Option<String>,
    /// System call totals per thread.
    pub syscall_threads: Vec<ThreadCalls>,
    /// System call totals per process.
    pub syscall_processes: Vec<ProcessCalls>,
    /// The slowest system calls, longest first.
    pub slowest_syscalls: Vec<SlowCall>,
    /// With `--wakeups`.
    pub wakeups: Option<Vec<Wait>>,
    /// With `--faults`.
    pub faults: Option<Vec<Fault>>,
    /// With `--faults`: per mapped file (and anonymous memory, heap, stack).
    pub fault_files: Option<Vec<FileFaults>>,
    /// With `--faults FILE`: that file's faults.
    pub file_faults: Option<FileFaultList>,
    /// What the program's own events show.
    pub user: UserView,
    /// The `tracing` spans: per name, durations, busy and idle time; the span tree.
    pub spans: SpanView,
    /// The dynamic probes' events ([`super::probes`]): per probed function, calls and,
    /// with its return probe, their durations.
    pub probes: Vec<ProbeRow>,
    /// ust's own activity, left out of every table above ([`super::tracer`]).
    pub tracer: TracerActivity,
    /// Remarks (missing data, bounds).
    pub notes: Vec<String>,
    /// What the kernel trace lost and what of the traced tree that touches (kernel only).
    pub kernel_loss: Option<super::loss::KernelLoss>,
}

/// One task of ust's.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct TracerTask {
    /// Process id.
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// Its name.
    pub name: String,
    /// Whose it is.
    pub role: Role,
    /// Kernel and user-space events of it.
    pub events: u64,
    /// Time on a CPU (ns).
    pub runtime_ns: u64,
    /// Time blocked (ns).
    pub blocked_ns: u64,
}

/// ust's own activity in the trace, left out of the program's tables ([`super::tracer`]):
/// its threads in the traced processes and its other tasks seen, and what the program's
/// threads spent in ust.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct TracerActivity {
    /// ust's tasks: the runtime's threads of the traced processes, and the daemon's and
    /// the `ust` command's tasks that woke a traced task.
    pub tasks: Vec<TracerTask>,
    /// System calls left out of the program's tables: those of ust's threads, those that
    /// held a wait of ust's (the constructor's registration wait), the `clone` that made a
    /// runtime thread.
    pub calls: u64,
    /// Their time (ns).
    pub calls_ns: u64,
    /// Blocked intervals left out (of ust's threads, and the program's that were ust's).
    pub waits: u64,
    /// Their time (ns).
    pub waits_ns: u64,
    /// Page faults of ust's threads left out of the fault tables (with `--faults`).
    pub faults: u64,
    /// With `--tracer`: ust's calls per system call.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub syscalls: Vec<SyscallRow>,
    /// With `--tracer`: per thread.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub syscall_threads: Vec<ThreadCalls>,
    /// With `--tracer`: the slowest.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slowest_syscalls: Vec<SlowCall>,
    /// With `--tracer --wakeups`: the waits left out, each with why it is ust's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wakeups: Option<Vec<Wait>>,
}
