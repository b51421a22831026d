//! Where the recorder's events go: one CTF stream `syscalls_<n>` in `<output>/kernel/`,
//! beside the perf_event_open recorder's `channel0_<cpu>` streams, in the same trace (one
//! metadata, one UUID, one [`EventTable`] holding both recorders' classes), or alone in a
//! trace of its own ([`SyscallTrace`], `env.kernel_source = "ptrace"`).
//!
//! The stream's packets carry `stream_instance_id` = [`INSTANCE_BASE`] + n (babeltrace2
//! reads the files of one instance id as one stream, so it must differ from every
//! `channel0_<cpu>`'s, which is the CPU number) and `cpu_id` = [`NO_CPU`]: ptrace does not
//! say which CPU a call ran on. Events are written in the order the tracer handles the
//! stops, with the `CLOCK_MONOTONIC` time read when it handles each, so the stream is in
//! time order; babeltrace2 merges it with the others by time.

use std::sync::Arc;
use ust_ctf::outdir::TraceDir;

use super::classes::{Calls, MissingClass, Value};
use crate::ctf::{CpuStream, EventTable, Given};
use crate::lttng::SyscallArgs;

/// Stream file prefix: `syscalls_<n>`.
pub const STREAM_PREFIX: &str = "syscalls";
/// `stream_instance_id` of `syscalls_0` (`channel0_<cpu>` streams use the CPU number).
pub const INSTANCE_BASE: u64 = 1 << 32;
/// The packets' `cpu_id`: unknown.
pub const NO_CPU: u32 = u32::MAX;
/// `env.kernel_source` of a trace of this recorder alone.
pub const SOURCE: &str = "ptrace";

/// Where a recorder writes: the kernel trace's directory, its event table (built with
/// [`super::classes::classes`], alone or after other recorders' classes), its UUID, and
/// the stream number `n` of `syscalls_<n>`.
#[derive(Clone, Debug)]
pub struct Sink {
    /// `<output>/kernel`, opened as the output's owner ([`ust_ctf::outdir`]).
    pub dir: TraceDir,
    /// The trace's event classes.
    pub table: Arc<EventTable>,
    /// The trace's UUID (every stream's packet header has it).
    pub uuid: [u8; 16],
    /// `n` of `syscalls_<n>`.
    pub stream: u32,
    /// The argument lists the table was built with ([`super::args::syscall_args`]).
    pub args: Arc<SyscallArgs>,
    /// Write the forks (`sched_process_fork`, [`super::classes::process_classes`], which the
    /// table then has) and a state-dump record of the command at its exec: when no
    /// perf_event_open recording beside this one writes its own.
    pub process_events: bool,
}

/// The stream the tracer writes.
#[derive(Debug)]
pub struct SyscallStream {
    stream: CpuStream,
    /// The classes by call number.
    pub calls: Calls,
}

/// Why the stream could not be created.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The table is not one [`super::classes::classes`] built.
    #[error(transparent)]
    Table(#[from] MissingClass),
    /// Creating the stream file.
    #[error("creating the system-call stream: {0}")]
    Io(#[from] std::io::Error),
}

impl SyscallStream {
    /// Creates `sink.dir/syscalls_<n>` and its index.
    ///
    /// # Errors
    /// [`SinkError`].
    pub fn create(sink: &Sink) -> Result<SyscallStream, SinkError> {
        let calls = Calls::new(&sink.table, &sink.args, sink.process_events)?;
        let name = format!("{STREAM_PREFIX}_{}", sink.stream);
        let stream = CpuStream::create_named(&sink.dir, &name, sink.table.clone(), sink.uuid, NO_CPU, INSTANCE_BASE + u64::from(sink.stream))?;
        Ok(SyscallStream { stream, calls })
    }

    /// Appends an event of class `class` at `ts` (ns, `CLOCK_MONOTONIC`) by task `tid`.
    ///
    /// # Errors
    /// The I/O error of a packet flush.
    pub fn push(&mut self, class: usize, ts: u64, tid: i32, values: &[Value]) -> std::io::Result<()> {
        let given: Vec<Given<'_>> = values.iter().map(Value::given).collect();
        self.stream.push_given(class, ts, tid, &given)
    }

    /// Appends a `lttng_statedump_process_state` record of task `t`.
    ///
    /// # Errors
    /// The I/O error of a packet flush.
    pub fn push_process_state(&mut self, ts: u64, t: &crate::procfs::TaskState) -> std::io::Result<()> {
        self.stream.push_process_state(ts, t)
    }

    /// Events written per class index of the table.
    pub fn counts(&self) -> &[u64] {
        &self.stream.stats.counts
    }

    /// Writes the last packet.
    ///
    /// # Errors
    /// The I/O error.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush()
    }
}

/// A kernel trace of the system-call recorder alone (no perf_event_open recording beside
/// it): its table (with [`super::classes::process_classes`]), UUID and the metadata
/// written at the end.
#[derive(Debug)]
pub struct SyscallTrace {
    sink: Sink,
    datetime: String,
}

impl SyscallTrace {
    /// Prepares `<output>/kernel/` with a first metadata file.
    ///
    /// # Errors
    /// The I/O error.
    pub fn create(output: &TraceDir) -> std::io::Result<SyscallTrace> {
        let args = Arc::new(super::args::syscall_args());
        let mut classes = super::classes::classes(&args);
        classes.extend(super::classes::process_classes());
        let table = Arc::new(EventTable::given(classes));
        let dir = output.dir(crate::KERNEL_DIR, 0o750)?;
        let sink = Sink { dir, table, uuid: *uuid::Uuid::new_v4().as_bytes(), stream: 0, args, process_events: true };
        let t = SyscallTrace { sink, datetime: ust_ctf::datetime::iso_at(ust_ctf::datetime::now()) };
        t.write_metadata(0, ust_core::clock::realtime_offset_ns())?;
        Ok(t)
    }

    /// Where the recorder writes.
    pub fn sink(&self) -> &Sink {
        &self.sink
    }

    fn write_metadata(&self, traced_pid: i32, offset: i64) -> std::io::Result<()> {
        crate::write_metadata(&self.sink.dir, self.sink.uuid, &self.sink.table, &self.datetime, traced_pid, offset, SOURCE)
    }

    /// Writes the final metadata, with the clock offset of the user-space traces under
    /// `output/ust/` when there are some ([`crate::session_clock_offset`]).
    ///
    /// # Errors
    /// The I/O error.
    pub fn finish(&self, output: &TraceDir, traced_pid: i32) -> std::io::Result<()> {
        let offset = crate::session_clock_offset(output).unwrap_or_else(ust_core::clock::realtime_offset_ns);
        self.write_metadata(traced_pid, offset)
    }
}
