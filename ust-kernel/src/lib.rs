//! `ust-kernel`: kernel events for `ust trace --kernel`: scheduling, interrupts, system calls and user page
//! faults, recorded from private tracefs instances with the `mono` trace clock
//! (= `CLOCK_MONOTONIC`, the clock of the user-space traces) and written as a CTF 1.8 trace
//! in `<output>/kernel/` that babeltrace2 merges with `<output>/ust/` into one timeline.
//!
//! ```text
//! tracefs/instances/ust-<pid>-<n>[-t]/  (tracefs: mkdir, trace_clock=mono, events/*/enable, set_event_pid)
//!   per_cpu/cpuN/trace_pipe_raw ──page──> ftrace::decode_page ──> merge ──> ctf::CpuStream ──> kernel/channel0_N, tree_N
//!   events/*/format ──────────────────> format::EventFormat ──> ctf::EventTable ──> kernel/metadata
//! /proc/*/task/*/stat, fd ──────────> procfs::statedump ──────> lttng_statedump_* (start, process_state,
//!                                                                    file_descriptor, end)
//! ```
//!
//! The trace is in LTTng's kernel layout, lttng-modules 2.13's names ([`lttng`]).
//!
//! Modules: [`tracefs`] (mount, instance, stale instances), [`format`](mod@format) (event format files),
//! [`ftrace`] (ring-buffer page decoder), [`ctf`] (the kernel CTF writer; [`ctf_type`] its field types), [`lttng`]
//! (lttng-modules' event and field names), [`syscalls`] (x86-64 system call names),
//! [`procfs`] (state dump, memory maps), [`sizing`] (buffer sizes from the measured event
//! rate), [`view_recorder`] (the tracefs recording: root's,
//! and the one root's daemon makes for a user), [`merge`] (its reading thread: time order,
//! loss accounting), [`filter`] (what a view keeps), [`perf`] (tier 1:
//! `perf_event_open` on the traced tasks, for any user), [`ptrace`] (tier 1's system calls,
//! recorded with ptrace as strace records them), [`bpf`] (system-call arguments copied by
//! a BPF program, [`argspec`] which ones, [`captured`] their values and CTF bytes,
//! [`arg_capture`] its run in the tracefs recordings). The
//! crate is shared by `ust-cli` (`ust trace --kernel`; its `kernel::view` chooses the tier)
//! and `ust-consumerd` (root's daemon as the kernel broker of ordinary users).
//!
//! Every event lost on the way (a full tracefs or perf buffer, a record the merge had to
//! drop) is counted in the `events_discarded` of its stream's packets, with the packets'
//! times bounding when ([`ctf::CpuStream::note_discarded`]). An instance left by a killed
//! run is removed by the next run ([`tracefs::remove_stale`]).

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod arg_capture;
pub mod argspec;
pub mod bpf;
pub mod captured;
pub mod ctf;
pub mod ctf_type;
pub mod filter;
pub mod format;
pub mod ftrace;
pub mod kview_debug;
pub mod lttng;
pub mod merge;
pub mod perf;
pub mod procfs;
pub mod ptrace;
pub mod sizing;
pub mod syscall_args;
pub mod syscalls;
pub mod tracefs;
pub mod uprobe;
pub mod view_recorder;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ctf::EventTable;
use ust_ctf::outdir::TraceDir;

/// The kernel trace's directory in the output: `kernel`.
pub const KERNEL_DIR: &str = "kernel";

/// Per-CPU buffer size of a tracefs instance, KiB, unless [`sizing`] finds the machine
/// needs more (never less).
pub const BUFFER_KB: u64 = 4096;
/// How often the reader threads poll `trace_pipe_raw`.
pub const POLL: Duration = Duration::from_millis(10);

/// Why kernel recording could not start.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// tracefs problems (not mounted, no permission, unknown clock).
    #[error(transparent)]
    Tracefs(#[from] tracefs::TracefsError),
    /// Writing the trace failed.
    #[error("writing the kernel trace: {0}")]
    Io(#[from] std::io::Error),
    /// None of the events exists in this kernel.
    #[error("none of the kernel events is available")]
    NoEvents,
    /// Root's daemon, recording for this user (tier 2), failed or went away.
    #[error("{0}")]
    Broker(String),
    /// A dynamic probe could not be placed ([`uprobe`]).
    #[error("{0}")]
    Uprobe(String),
}

impl KernelError {
    /// The message `ust trace --kernel` prints when recording cannot start: what is missing,
    /// and that user-space tracing goes on.
    pub fn explain(&self) -> String {
        let privilege = match self {
            KernelError::Tracefs(tracefs::TracefsError::NotMounted(e)) | KernelError::Tracefs(tracefs::TracefsError::Instance(_, e))
                if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) =>
            {
                "\nust: kernel tracing needs root (or CAP_SYS_ADMIN, or write access to tracefs: /sys/kernel/tracing/instances)"
            }
            _ => "",
        };
        format!("kernel events will not be recorded: {self}{privilege}\nust: user-space tracing still works: the command is traced without kernel events")
    }
}

/// What a finished kernel recording wrote.
#[derive(Clone, Debug, Default)]
pub struct KernelSummary {
    /// `<output>/kernel`.
    pub dir: PathBuf,
    /// Events per CTF name.
    pub counts: Vec<(String, u64)>,
    /// Events the kernel lost (buffers full).
    pub lost: u64,
    /// Records that could not be decoded.
    pub bad: u64,
    /// Stale instances removed at start.
    pub stale_removed: Vec<String>,
    /// Events of the list that this kernel lacks.
    pub missing_events: Vec<String>,
    /// Records the reader decoded (tracefs; every event read, kept or not).
    pub decoded: u64,
    /// Records applied after newer ones ([`merge`]).
    pub late: u64,
    /// CPU time of the reading thread, ns.
    pub reader_cpu_ns: u64,
    /// The per-CPU buffer size of the system-wide tracefs instance, KiB ([`sizing`]).
    pub buffer_kb: u64,
    /// What the system-call argument capture did ([`arg_capture`]); default (off, no
    /// note) for the views that have none.
    pub args: arg_capture::ArgsSummary,
}

pub(crate) fn page_layout(root: &Path) -> (ftrace::PageLayout, usize) {
    let text = std::fs::read_to_string(root.join("events/header_page")).unwrap_or_default();
    let layout = ftrace::PageLayout::parse(&text);
    (layout, 4096)
}

/// Writes `dir/metadata` (atomically, through `dir`: [`TraceDir::write_atomically`]) for a
/// kernel trace of `table` recorded from `source` (`env.kernel_source`: `tracefs` or
/// `perf_event_open`), with this host's name, boot id and kernel release, and the clock
/// offset `offset` (ns) the session's traces share.
///
/// # Errors
/// The write error, or the refusal of a `metadata` that is not a regular file.
pub fn write_metadata(dir: &TraceDir, uuid: [u8; 16], table: &EventTable, datetime: &str, traced_pid: i32, offset: i64, source: &str) -> std::io::Result<()> {
    write_metadata_env::<&str>(dir, uuid, table, datetime, traced_pid, offset, source, &[])
}

/// [`write_metadata`] with more `env` keys after `kernel_source` (`extra_env`: key, string
/// value; [`ctf::KernelMetadata::extra_env`]): tier 1's system-call source, the argument
/// capture's counts ([`arg_capture::ArgsSummary::env`]).
///
/// # Errors
/// As [`write_metadata`].
#[allow(clippy::too_many_arguments)]
pub fn write_metadata_env<V: AsRef<str>>(
    dir: &TraceDir,
    uuid: [u8; 16],
    table: &EventTable,
    datetime: &str,
    traced_pid: i32,
    offset: i64,
    source: &str,
    extra_env: &[(&str, V)],
) -> std::io::Result<()> {
    let extra_env: Vec<(&str, &str)> = extra_env.iter().map(|(k, v)| (*k, v.as_ref())).collect();
    let boot = ust_core::clock::boot_id();
    let host = ust_ctf::metadata::hostname();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let version = std::fs::read_to_string("/proc/sys/kernel/version").unwrap_or_default();
    let text = ctf::render_metadata(
        &ctf::KernelMetadata {
            uuid,
            clock_offset_ns: offset,
            clock_uuid: &boot,
            hostname: &host,
            kernel_release: release.trim(),
            kernel_version: version.trim(),
            traced_pid,
            creation_datetime: datetime,
            source,
            extra_env: &extra_env,
        },
        table,
    );
    ust_ctf::metadata::write_atomically(dir, &text)
}

/// The `offset` of the `monotonic` clock in the first user-space metadata found under
/// `<output>/ust/` (every trace of a session has the same one), read through `output`
/// ([`TraceDir`]: as its owner, never through a link; at most
/// [`ust_ctf::files::MAX_TEXT_FILE`] bytes).
pub fn session_clock_offset(output: &TraceDir) -> Option<i64> {
    let mut stack = vec![output.existing("ust").ok()?];
    while let Some(d) = stack.pop() {
        for (name, kind) in d.entries().ok()? {
            if kind == rustix::fs::FileType::Directory {
                stack.push(d.existing(&name).ok()?);
            } else if name == "metadata" {
                let mut text = String::new();
                d.open_file(&name, false).ok()?.take(ust_ctf::files::MAX_TEXT_FILE).read_to_string(&mut text).ok()?;
                let clock = &text[text.find("clock {")?..];
                let off = clock[clock.find("offset =")? + 8..].split(';').next()?.trim().parse().ok()?;
                return Some(off);
            }
        }
    }
    None
}
