//! The kernel CTF 1.8 trace, `<output>/kernel/`: one stream per CPU (`channel0_<cpu>` and
//! `index/channel0_<cpu>.idx`), with the packet header, packet context (`cpu_id` included)
//! and compact event header of the user-space traces ([`ust_core::packet`],
//! [`ust_core::event_header`]: the layout of lttng-modules' own ring-buffer client, a 5-bit
//! id and 27-bit timestamp or the extended form) and the same `monotonic` clock block
//! (boot-id UUID, the session's offset), so babeltrace2 merges `<output>` into one timeline.
//! The trace has its own UUID.
//!
//! The trace is in LTTng's kernel layout ([`super::lttng`]): the metadata `env` of
//! lttng-modules 2.13 (`domain = "kernel"`, `tracer_name = "lttng-modules"`, version,
//! `sysname`, `kernel_release`, `kernel_version`, `hostname`; plus `ust_writer`, naming
//! this writer, and `traced_pid`, `kernel_source`), and lttng-modules' event and field names,
//! so babeltrace 1, lttng-analyses and Trace Compass's kernel analyses read it.
//!
//! Stream class 0 has an event context `{ int32 _tid; }` (the ftrace `common_pid`: the
//! thread the event happened in, 0 for the idle task; what `lttng add-context -k -t tid`
//! adds). Event payloads are the format-file fields after the `common_*` ones, packed, in
//! format order, typed from the format file ([`super::format`]): integers with their size
//! and signedness (pointers in base 16), `char x[N]` as UTF-8 text arrays (babeltrace2
//! prints them as strings), integer arrays, and `__data_loc char[]` as CTF strings.
//!
//! Event names are LTTng's kernel names (`sched_switch`, `irq_softirq_entry`,
//! `timer_hrtimer_expire_entry`, `x86_irq_vectors_local_timer_entry`,
//! `x86_exceptions_page_fault_user`, `_kernel`; `filemap_add_to_page_cache`, which
//! lttng-modules lacks). A `raw_syscalls` record becomes `syscall_entry_<name>` with the
//! call's named arguments or `syscall_exit_<name>` with `ret`, by its number (the x86-64
//! table, [`super::syscalls`]); with [`EventTable::with_captured_args`], the strings,
//! sockaddrs and argv the BPF capture copied ([`super::bpf`]), joined to the record by
//! [`CpuStream::push_record_joined`]. The state dump at the start ([`super::lttng`]) is written in
//! the stream of the CPU each task last ran on.
//!
//! Its parts, all re-exported here: the event classes (`table.rs`: [`EventTable`]), the TSDL
//! metadata (`metadata.rs`: [`render_metadata`]) and the stream files (`stream.rs`:
//! [`CpuStream`]).

mod metadata;
mod stream;
mod table;
#[cfg(test)]
mod tests;

pub use metadata::{render_metadata, KernelMetadata};
pub use stream::{CpuStream, Given, Join, StreamStats, PACKET_TARGET};
pub use table::{EventTable, KernelEvent};

/// The ftrace events recorded: `(system, event, CTF name)`.
pub const EVENTS: &[(&str, &str, &str)] = &[
    ("sched", "sched_switch", "sched_switch"),
    ("sched", "sched_waking", "sched_waking"),
    ("sched", "sched_wakeup", "sched_wakeup"),
    ("sched", "sched_wakeup_new", "sched_wakeup_new"),
    ("sched", "sched_process_fork", "sched_process_fork"),
    ("sched", "sched_process_exec", "sched_process_exec"),
    ("sched", "sched_process_exit", "sched_process_exit"),
    // A new task's clone flags (ftrace's name; lttng-modules has no such event): tells a
    // thread (`CLONE_THREAD`, `CLONE_VM`) from a process, which `sched_process_fork` does
    // not (report/addrspace.rs).
    ("task", "task_newtask", "task_newtask"),
    ("irq", "irq_handler_entry", "irq_handler_entry"),
    ("irq", "irq_handler_exit", "irq_handler_exit"),
    ("irq", "softirq_entry", "irq_softirq_entry"),
    ("irq", "softirq_exit", "irq_softirq_exit"),
    ("timer", "hrtimer_expire_entry", "timer_hrtimer_expire_entry"),
    ("timer", "hrtimer_expire_exit", "timer_hrtimer_expire_exit"),
    ("irq_vectors", "local_timer_entry", "x86_irq_vectors_local_timer_entry"),
    ("irq_vectors", "local_timer_exit", "x86_irq_vectors_local_timer_exit"),
    ("raw_syscalls", "sys_enter", "syscall_entry"),
    ("raw_syscalls", "sys_exit", "syscall_exit"),
    ("exceptions", "page_fault_user", "x86_exceptions_page_fault_user"),
    // The kernel touching user memory (perf's page-faults counts these too).
    ("exceptions", "page_fault_kernel", "x86_exceptions_page_fault_kernel"),
    // A page read into the page cache: makes a fault major (report/faults.rs).
    ("filemap", "mm_filemap_add_to_page_cache", "filemap_add_to_page_cache"),
];

/// Events root's own recording ([`crate::filter::ViewFilter::everything`]) adds to [`EVENTS`]
/// (lttng-modules records them; the tier-2 view does not, its filter has no rule for them).
pub const ROOT_EVENTS: &[(&str, &str, &str)] = &[
    ("sched", "sched_process_free", "sched_process_free"),
    ("sched", "sched_migrate_task", "sched_migrate_task"),
    ("irq", "softirq_raise", "irq_softirq_raise"),
];

/// Name of the state-dump event.
pub const STATEDUMP_EVENT: &str = super::lttng::STATEDUMP_PROCESS_STATE;
/// Name of the kernel channel (stream files `channel0_<cpu>`): everything, or, beside
/// [`TREE_CHANNEL`], what is recorded system-wide (scheduling, interrupts, timers).
pub const CHANNEL: &str = "channel0";
/// Name of the channel of the traced tree's own high-rate events (system calls, page
/// faults, page-cache reads), filtered to the tree in the kernel (stream files `tree_<cpu>`;
/// their stream instance ids are [`TREE_INSTANCE_BASE`] + CPU).
pub const TREE_CHANNEL: &str = "tree";
/// Stream instance id of [`TREE_CHANNEL`]'s stream of CPU 0 (those of [`CHANNEL`] are the
/// CPU numbers): babeltrace2 takes files with the same stream class and instance id for
/// pieces of one stream.
pub const TREE_INSTANCE_BASE: u64 = 1 << 32;

pub use super::ctf_type::{CtfField, CtfType, Source};
