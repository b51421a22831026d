//! `ust-kernel`: kernel events for `ust trace --kernel`: scheduling, interrupts, system calls and user page
//! faults, recorded system-wide from a private tracefs instance with the `mono` trace clock
//! (= `CLOCK_MONOTONIC`, the clock of the user-space traces) and written as a CTF 1.8 trace
//! in `<output>/kernel/` that babeltrace2 merges with `<output>/ust/` into one timeline.
//!
//! ```text
//! tracefs/instances/ust-<pid>/            (tracefs: mkdir, trace_clock=mono, events/*/enable)
//!   per_cpu/cpuN/trace_pipe_raw ──page──> ftrace::decode_page ──> ctf::CpuStream ──> kernel/channel0_N
//!   events/*/format ──────────────────> format::EventFormat ──> ctf::EventTable ──> kernel/metadata
//! /proc/*/task/*/stat, fd ──────────> procfs::statedump ──────> lttng_statedump_* (start, process_state,
//!                                                                    file_descriptor, end)
//! ```
//!
//! The trace is in LTTng's kernel layout, lttng-modules 2.13's names ([`lttng`]).
//!
//! Modules: [`tracefs`] (mount, instance, stale instances), [`format`](mod@format) (event format files),
//! [`ftrace`] (ring-buffer page decoder), [`ctf`] (the kernel CTF writer; [`ctf_type`] its field types), [`lttng`]
//! (lttng-modules' event and field names), [`syscalls`]
//! (x86-64 system call names), [`procfs`] (state dump, memory maps), [`perf`] (tier 1:
//! `perf_event_open` on the traced tasks, for any user), [`ptrace`] (tier 1's system calls,
//! recorded with ptrace as strace records them), [`bpf`] (system-call arguments copied by
//! a BPF program, [`argspec`] which ones, [`captured`] their values and CTF bytes). The
//! crate is shared by `ust-cli` (root's own recording, tier 1, and `kernel::view`, which
//! chooses the tier) and `ust-consumerd` (root's daemon as the kernel broker of ordinary users, which records
//! through [`view_recorder::ViewRecorder`] and keeps only what the requester may see, [`filter`]).
//!
//! [`KernelRecorder::start`] sets everything up and starts one reader thread per CPU that
//! polls `trace_pipe_raw` (non-blocking, every 10 ms) and writes packets as pages arrive;
//! [`KernelRecorder::finish`] stops recording, drains what is left, writes the final
//! metadata (with the session's clock offset) and removes the instance. Dropping a recorder
//! without `finish` also removes the instance; an instance left by a killed run is removed by
//! the next run ([`tracefs::remove_stale`]).

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod argspec;
pub mod bpf;
pub mod captured;
pub mod ctf;
pub mod ctf_type;
pub mod filter;
pub mod format;
pub mod ftrace;
pub mod lttng;
pub mod perf;
pub mod procfs;
pub mod ptrace;
pub mod syscalls;
pub mod tracefs;
pub mod view_recorder;

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use ust_ctf::outdir::TraceDir;

use ctf::{CpuStream, EventTable, Given, StreamStats};

/// The kernel trace's directory in the output: `kernel`.
pub const KERNEL_DIR: &str = "kernel";
/// Per-CPU buffer size of the instance, KiB.
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
}

/// A running kernel recording.
#[derive(Debug)]
pub struct KernelRecorder {
    instance: Option<tracefs::Instance>,
    dir: TraceDir,
    uuid: [u8; 16],
    table: Arc<EventTable>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<(StreamStats, Option<String>)>>,
    stale_removed: Vec<String>,
    missing: Vec<String>,
    datetime: String,
}

pub(crate) fn page_layout(root: &Path) -> (ftrace::PageLayout, usize) {
    let text = std::fs::read_to_string(root.join("events/header_page")).unwrap_or_default();
    let layout = ftrace::PageLayout::parse(&text);
    (layout, 4096)
}

impl KernelRecorder {
    /// Sets up the instance `ust-<pid>` (removing stale ones first), enables the events of
    /// [`ctf::EVENTS`] that this kernel has, writes the state dump and a first metadata file
    /// in `<output>/kernel/` (created through `output`, as its owner: [`TraceDir`]), turns
    /// recording on and starts the per-CPU readers.
    ///
    /// # Errors
    /// [`KernelError`]; use [`KernelError::explain`] for the user.
    pub fn start(output: &TraceDir) -> Result<KernelRecorder, KernelError> {
        let root = tracefs::root()?;
        let stale_removed = tracefs::remove_stale(&root);
        let instance = tracefs::Instance::create(&root)?;
        instance.set_clock("mono")?;
        instance.set_buffer_kb(BUFFER_KB)?;
        let events_dir = instance.dir().join("events");
        let mut formats = Vec::new();
        let mut missing = Vec::new();
        for (sys, ev, name) in ctf::EVENTS.iter().chain(ctf::ROOT_EVENTS) {
            match format::EventFormat::read(&events_dir, sys, ev) {
                Ok(f) if instance.enable(sys, ev).is_ok() => formats.push((name.to_string(), f)),
                _ => missing.push(format!("{sys}:{ev}")),
            }
        }
        if formats.is_empty() {
            return Err(KernelError::NoEvents);
        }
        let table = Arc::new(EventTable::with_syscall_args(formats, &lttng::read_syscall_args(&events_dir)));
        let dir = output.dir(KERNEL_DIR, 0o750)?;
        let uuid = *uuid::Uuid::new_v4().as_bytes();
        let datetime = ust_ctf::datetime::iso_at(ust_ctf::datetime::now());
        let mut rec = KernelRecorder {
            instance: Some(instance),
            dir: dir.clone(),
            uuid,
            table: table.clone(),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            stale_removed,
            missing,
            datetime,
        };
        rec.write_metadata(0, ust_core::clock::realtime_offset_ns())?;
        // State dump first, at a time before any ftrace event of this instance.
        let dump_ts = ust_core::clock::monotonic_ns();
        let tasks = procfs::statedump();
        let cpus = ust_core::cpus::possible_cpus();
        let mut streams = Vec::new();
        for &cpu in &cpus {
            let mut s = CpuStream::create(&dir, table.clone(), uuid, cpu)?;
            if cpu == cpus[0] {
                s.push_named(lttng::STATEDUMP_START, dump_ts, 0, &[])?;
            }
            for t in tasks.iter().filter(|t| t.cpu == cpu || (t.cpu as usize >= cpus.len() && cpu == 0)) {
                s.push_process_state(dump_ts, t)?;
                if t.tid == t.pid {
                    for (fd, path) in procfs::open_files(t.pid) {
                        let flags = procfs::fd_flags(t.pid, fd);
                        s.push_named(
                            lttng::STATEDUMP_FILE_DESCRIPTOR,
                            dump_ts,
                            t.tid,
                            &[Given::Int(t.pid.into()), Given::Int(0), Given::Int(fd.into()), Given::Int(flags.into()), Given::Int(0), Given::Text(&path)],
                        )?;
                    }
                }
            }
            streams.push(s);
        }
        if let Some(s) = streams.first_mut() {
            s.push_named(lttng::STATEDUMP_END, dump_ts, 0, &[])?;
        }
        for s in &mut streams {
            s.flush()?;
        }
        let inst = rec.instance.as_ref().expect("set above");
        let (layout, page_size) = page_layout(&root);
        let mut files = Vec::new();
        for &cpu in &cpus {
            files.push(std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(inst.pipe_raw(cpu)).ok());
        }
        inst.set_on(true)?;
        for (mut s, f) in streams.into_iter().zip(files) {
            let stop = rec.stop.clone();
            let handle = std::thread::Builder::new().name("ust-kernel".into()).spawn(move || {
                let Some(mut f) = f else { return (s.stats.clone(), Some("cannot open trace_pipe_raw".to_string())) };
                let mut page = vec![0u8; page_size.max(64 * 1024)];
                let mut err = None;
                loop {
                    match f.read(&mut page) {
                        Ok(0) => {
                            if stop.load(Ordering::SeqCst) {
                                break;
                            }
                            std::thread::sleep(POLL);
                        }
                        Ok(n) => {
                            if let Err(e) = s.push_page(&page[..n], &layout) {
                                err = Some(e.to_string());
                                break;
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::Interrupted => {
                            if stop.load(Ordering::SeqCst) {
                                break;
                            }
                            std::thread::sleep(POLL);
                        }
                        Err(e) => {
                            err = Some(e.to_string());
                            break;
                        }
                    }
                }
                if let Err(e) = s.flush() {
                    err.get_or_insert(e.to_string());
                }
                (s.stats.clone(), err)
            })?;
            rec.threads.push(handle);
        }
        Ok(rec)
    }

    /// `<output>/kernel`.
    pub fn dir(&self) -> &TraceDir {
        &self.dir
    }

    fn write_metadata(&self, traced_pid: i32, offset: i64) -> std::io::Result<()> {
        write_metadata(&self.dir, self.uuid, &self.table, &self.datetime, traced_pid, offset, "tracefs")
    }

    /// Stops recording, drains the buffers, writes the final metadata (clock offset: that of
    /// the user-space traces under `output/ust/` when there are some, so all traces of the
    /// session share it; else a fresh sample), removes the instance.
    ///
    /// # Errors
    /// The metadata write error (the instance is removed anyway).
    pub fn finish(mut self, output: &TraceDir, traced_pid: i32) -> Result<KernelSummary, KernelError> {
        if let Some(i) = &self.instance {
            let _ = i.set_on(false);
        }
        self.stop.store(true, Ordering::SeqCst);
        let mut counts = vec![0u64; self.table.events.len()];
        let (mut lost, mut bad) = (0, 0);
        for t in self.threads.drain(..) {
            if let Ok((st, err)) = t.join() {
                for (c, n) in counts.iter_mut().zip(st.counts) {
                    *c += n;
                }
                lost += st.lost;
                bad += st.bad;
                if let Some(e) = err {
                    eprintln!("ust: kernel reader: {e}");
                }
            }
        }
        if let Some(i) = self.instance.take() {
            if let Err(e) = i.remove() {
                eprintln!("ust: could not remove the tracefs instance: {e}");
            }
        }
        let offset = session_clock_offset(output).unwrap_or_else(ust_core::clock::realtime_offset_ns);
        self.write_metadata(traced_pid, offset)?;
        Ok(KernelSummary {
            dir: self.dir.path(),
            counts: self.table.events.iter().zip(counts).map(|(e, n)| (e.name.clone(), n)).collect(),
            lost,
            bad,
            stale_removed: std::mem::take(&mut self.stale_removed),
            missing_events: std::mem::take(&mut self.missing),
        })
    }
}

impl Drop for KernelRecorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // The instance's own Drop removes it.
    }
}

/// Writes `dir/metadata` (atomically, through `dir`: [`TraceDir::write_atomically`]) for a
/// kernel trace of `table` recorded from `source` (`env.kernel_source`: `tracefs` or
/// `perf_event_open`), with this host's name, boot id and kernel release, and the clock
/// offset `offset` (ns) the session's traces share.
///
/// # Errors
/// The write error, or the refusal of a `metadata` that is not a regular file.
pub fn write_metadata(dir: &TraceDir, uuid: [u8; 16], table: &EventTable, datetime: &str, traced_pid: i32, offset: i64, source: &str) -> std::io::Result<()> {
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
