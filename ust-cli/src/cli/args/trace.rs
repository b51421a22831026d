//! The arguments of `ust trace`.

// The argument docs are also the `--help` texts.
#![allow(rustdoc::invalid_html_tags)]

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;

use super::{parse_context, BufferArgs, BuffersOpt, NetArgs};

/// `ust trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Output directory (default: $HOME/ust-traces/trace-<pid>-<YYYYmmdd-HHMMSS>/).
    #[arg(short = 'o', long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Enable only events matching GLOB (repeatable; default: every event).
    #[arg(short = 'e', long = "event", value_name = "GLOB")]
    pub events: Vec<String>,
    /// Also record kernel events (scheduling, interrupts, system calls, page faults) in
    /// DIR/kernel: with root or tracefs access, CMD's system calls and faults and
    /// everyone's scheduling, interrupts and timers; through root's ust-consumerd, what you
    /// may see of them; otherwise the traced tasks' switches, faults and user stacks
    /// through perf_event_open (no privilege needed), with CMD's system calls recorded
    /// with ptrace as strace records them (--no-ptrace: without).
    #[arg(long)]
    pub kernel: bool,
    /// With --kernel, as an ordinary user without root's daemon (tier 1): do not record
    /// CMD's system calls with ptrace (CMD then runs at full speed, as without strace).
    #[arg(long = "no-ptrace", requires = "kernel")]
    pub no_ptrace: bool,
    /// As root, with --kernel: record every task's system calls and faults too (one
    /// system-wide tracefs instance, as LTTng records), not only CMD's.
    #[arg(long = "system-wide", requires = "kernel")]
    pub system_wide: bool,
    /// With --kernel (tracefs): the per-CPU buffer size in KiB, instead of one sized from
    /// the event rate measured at the start (at least 4096).
    #[arg(long = "kernel-buffer-kb", value_name = "KIB", requires = "kernel", value_parser = clap::value_parser!(u64).range(4..))]
    pub kernel_buffer_kb: Option<u64>,
    /// As root, with --kernel: run CMD as USER (a name or uid; default: the user sudo was
    /// run by, $SUDO_UID/$SUDO_GID), with USER's groups, HOME, USER and LOGNAME, while the
    /// kernel is still recorded system-wide as root. The trace is given to USER, and by
    /// default written in USER's ~/ust-traces. CMD's own user-space events are recorded
    /// too (its processes register with root's daemon as well as USER's).
    #[arg(long = "as-user", value_name = "USER", num_args = 0..=1, default_missing_value = "", requires = "kernel")]
    pub as_user: Option<String>,
    /// Place a dynamic probe (a tracefs uprobe; repeatable), recorded in DIR/kernel with
    /// the kernel view (implies --kernel): SPEC is `elf:PATH:SYMBOL` (the function's entry,
    /// with its integer, bool, char and pointer arguments read from DWARF) or
    /// `elf:PATH:SYMBOL%return` (its return value, event `NAME_return`). SYMBOL is a Rust
    /// path (`app::db::query`, or its last components when unambiguous) or a C symbol; the
    /// event is named after its last component. `sdt:PATH:PROVIDER:PROBE`: a SystemTap
    /// SDT probe (`<sys/sdt.h>`, or ust's tracepoints built with cargo feature `sdt`) at
    /// every location of its notes, its semaphore set while probed, its operands recorded
    /// as arg0, arg1, ...; the event is named PROBE. Root probes any file; other users,
    /// through root's ust-consumerd, only regular files they own (not
    /// set-user-ID/set-group-ID), and see only their own processes' hits. `ust list
    /// --userspace-probes PATH` lists the functions and SDT probes.
    #[arg(long = "userspace-probe", value_name = "SPEC")]
    pub userspace_probes: Vec<String>,
    /// Stream the trace to a relay daemon instead (`--set-url net://HOST`, `--live`).
    #[command(flatten)]
    pub net: NetArgs,
    /// Buffer ownership: `--buffers-uid` writes one trace for all the command's processes
    /// (DIR/ust/uid/<UID>/64-bit/, with the vpid and procname contexts to tell them
    /// apart) instead of one per process.
    #[command(flatten)]
    pub buffers: BuffersOpt,
    /// The channel's buffers (as `ust enable-channel`).
    #[command(flatten)]
    pub buffer: BufferArgs,
    /// Flight recorder: a snapshot session, its channel in overwrite mode. Nothing is
    /// written while CMD runs; the buffers' content (the newest events) is written to
    /// DIR/snapshot-<N>-<stamp>/ when CMD ends, and also whenever `ust trace` receives
    /// SIGUSR1 or `ust snapshot record -s SESSION` runs (the session is named on stderr at
    /// start). The buffers of CMD's processes that exit are kept until the end.
    #[arg(long, conflicts_with_all = ["set_url", "ctrl_url", "live"])]
    pub snapshot: bool,
    /// Add this context to every event (repeatable, as `ust add-context -t`): vpid, vtid,
    /// procname, pthread_id, cpu_id, ip or span_id. `-t vtid -t procname` gives `ust export`
    /// one track per thread, named.
    #[arg(short = 't', long = "context", value_name = "TYPE", value_parser = parse_context)]
    pub contexts: Vec<ust_core::context::ContextType>,
    /// The command to trace, after `--`.
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}
