//! Tier 1 of the kernel view: what `perf_event_open(2)` shows an ordinary user about the
//! tasks of the traced command, with `kernel.perf_event_paranoid = 2` (the default) and no
//! privilege at all, written as the same kind of CTF trace in `<output>/kernel/` as the
//! tracefs recording ([`super::view_recorder`]), with `env.kernel_source =
//! "perf_event_open"`.
//!
//! ```text
//! ust trace: perf_event_open(pid 0, cpu N, inherit, enable_on_exec, exclude_kernel)  (attr)
//!   fork + exec of CMD ──> the events switch on in CMD and follow its children
//! thread ust-perf (reader), never waiting for the converter:
//!   per CPU: side-band ring (mmap) ──> ring::Ring::drain ──> record::parse
//!   a traced thread went off CPU voluntarily ──> blockstack::snapshot (/proc), at once
//!   per CPU: side-band ring again (off_cpu::OffCpu, tree::Tree: the traced processes)
//!   per CPU: fault ring ──> drain (dropped, counted lost, while the converter is behind)
//!   per CPU (root's probes, CPU-wide events): probe ring ──> the tree's hits only
//!   ──> batch (records + stacks), held and merged while the channel is full ──channel──┐
//! thread ust-perf-ctf (converter):                                                     v
//!   sort the batch by time ──> to_ctf::Converter (unwind::Processes: mmap records +
//!   .eh_frame) ──> kernel/channel0_N
//! ```
//!
//! Per CPU, every item of a batch is later than that CPU's items in the batches before it
//! (a ring is read in order, and a stack is stamped just after the latest record of its
//! CPU read so far, inside its blocked interval), so sorting each batch keeps every CPU's
//! stream in time order.
//!
//! What it records (measured as an unprivileged user on Linux 6.18, paranoid 2, a VM with
//! no hardware PMU): every context switch of the traced tasks (switch records, voluntary
//! or preempted), migrations (derived: a switch-in on another CPU), forks, exits, comm and
//! exec, file mappings, minor and major page faults with the faulting address, the IP and
//! the DWARF-unwound user stack, and at each block the user stack read from `/proc`
//! ([`blockstack`]). What it cannot: system calls (no syscall tracepoints without
//! tracefs: `ust trace` records them beside it with ptrace, [`crate::ptrace`], in the
//! same trace: [`PerfRecorder::start_with_syscalls`]), wake-ups and their wakers (`sched_waking` is a kernel tracepoint), interrupts,
//! faults taken in the kernel on user addresses (`copy_to_user`), and whatever runs
//! instead of the traced tasks. `ust report` says so ("woken by: unknown (needs root's
//! ust-consumerd)").
//!
//! Modules: [`attr`] (the attributes, opening, the paranoid advice), [`ring`] (mmap ring
//! reader), [`record`] (record parsing), [`unwind`] (address spaces, DWARF unwinding),
//! [`off_cpu`] (which threads are blocked), [`blockstack`] (stacks of blocked threads),
//! [`tree`] (the traced processes), [`to_ctf`] (records as CTF events).

pub mod attr;
pub mod blockstack;
pub mod off_cpu;
pub mod record;
pub mod ring;
pub mod to_ctf;
pub mod tree;
pub mod unwind;

use std::os::fd::{AsRawFd, OwnedFd};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use ust_ctf::outdir::TraceDir;

use super::ctf::{CpuStream, EventTable, StreamStats};
use super::{KernelError, KernelSummary};

/// Data pages of each CPU's side-band ring (switch, task, comm, mmap records), tried largest
/// first (the per-user locked-memory allowance, `kernel.perf_event_mlock_kb` (516 KiB)
/// times the online CPUs, may refuse the larger).
pub const SIDEBAND_PAGES: [usize; 3] = [32, 8, 2];
/// Data pages of each CPU's page-fault ring (2 MiB first: an exec faults ~100 times in a
/// millisecond, 4 KiB of stack each), tried largest first: past the perf allowance the
/// pages count against `RLIMIT_MEMLOCK` (8 MiB by default). Faults have their own ring so
/// that a fault storm which fills it loses fault samples, not the switch records the
/// blocked intervals are made of.
pub const FAULT_PAGES: [usize; 4] = [512, 64, 16, 4];
/// How long the reader waits in poll(2) for records.
pub const POLL: Duration = Duration::from_millis(10);

/// Why tier 1 cannot record.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// perf_event_paranoid or a refusal: the message says what to change.
    #[error("{0}")]
    Refused(String),
    /// Mapping a ring failed.
    #[error("cannot map the perf ring buffer ({0}): raise kernel.perf_event_mlock_kb or `ulimit -l`")]
    Mmap(std::io::Error),
    /// Writing the trace failed.
    #[error("writing the kernel trace: {0}")]
    Io(#[from] std::io::Error),
}

/// What the reader thread hands back: per-stream counters, records that could not be
/// read, the first write error.
type ReaderResult = (Vec<StreamStats>, u64, Option<String>);

/// Where root's recording keeps the user stacks of the traced tasks, beside `kernel/`
/// (the tracefs trace): a trace of [`to_ctf::STACKS_ONLY`] events.
pub const STACKS_DIR: &str = "kernel-stacks";
/// Its `env.kernel_source`.
pub const STACKS_SOURCE: &str = "perf_event_open_stacks";

/// `env` key of a tier-1 trace whose system calls were recorded beside it
/// ([`SyscallView::Ptrace`]); its value names the recorder: `ptrace`.
pub const SYSCALL_SOURCE_KEY: &str = "syscall_source";
/// `env` key of a tier-1 trace without system calls ([`SyscallView::Off`]): why.
pub const NO_SYSCALLS_KEY: &str = "no_syscalls";

/// Whether a tier-1 trace has the traced tasks' system calls, said in its metadata's `env`
/// so that `ust report` can say it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyscallView {
    /// Recorded with ptrace ([`crate::ptrace`]) in the stream `syscalls_0` of this trace.
    Ptrace,
    /// Not recorded, and why (`--no-ptrace`, the command could not be seized, ...).
    Off(String),
}

impl SyscallView {
    /// The `env` entries that say it.
    pub fn env(&self) -> [(&'static str, &str); 1] {
        match self {
            SyscallView::Ptrace => [(SYSCALL_SOURCE_KEY, crate::ptrace::writer::SOURCE)],
            SyscallView::Off(why) => [(NO_SYSCALLS_KEY, why.as_str())],
        }
    }
}

/// A running tier-1 recording.
#[derive(Debug)]
pub struct PerfRecorder {
    dir: TraceDir,
    source: &'static str,
    uuid: [u8; 16],
    table: Arc<EventTable>,
    datetime: String,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<ReaderResult>>,
    /// Where the system-call recorder writes, when the table has its classes.
    sink: Option<crate::ptrace::Sink>,
    /// What the metadata says of the system calls.
    syscalls: Option<SyscallView>,
    /// Why some dynamic probe's stacks are not recorded.
    probe_note: Option<String>,
}

struct CpuEvents {
    cpu: u32,
    /// Side-band ring, fault ring, and the dynamic probes' ring when there are probes.
    rings: Vec<ring::Ring>,
    /// Side-band, minor-fault (owns the fault ring), major-fault events, then the probes'
    /// (the first owns the probes' ring).
    fds: Vec<OwnedFd>,
}

impl CpuEvents {
    /// The event that owns the dynamic probes' ring, when there is one (the first probe's,
    /// right after the three fault and side-band events): polled too, so that a full
    /// [`PROBE_WATERMARK`] wakes the reader before the ring overflows.
    fn probe_ring_fd(&self) -> Option<&OwnedFd> {
        self.fds.get(3).filter(|_| self.rings.len() > 2)
    }
}

/// Maps a ring of the first size in `sizes` that the locked-memory allowance grants.
fn map_ring(fd: &OwnedFd, sizes: &[usize]) -> Result<ring::Ring, PerfError> {
    let mut last = None;
    for &pages in sizes {
        match ring::Ring::map(fd, pages) {
            Ok(r) => return Ok(r),
            Err(e) => last = Some(e),
        }
    }
    Err(PerfError::Mmap(last.unwrap_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))))
}

/// Bytes of side-band records that wake the reader (half the smallest ring of
/// [`SIDEBAND_PAGES`]) when the traced tasks' system calls are
/// recorded with ptrace beside it (instead of each record: every call's two ptrace stops
/// are four switch records, and a reader woken for each took more CPU than the command;
/// a blocked interval still gets its stack at the next [`POLL`]).
pub const SIDEBAND_WATERMARK_WITH_PTRACE: u32 = 4096;

/// Bytes of probe stack samples that wake the reader (a sixteenth of the largest ring of
/// [`FAULT_PAGES`]; the reader also drains every [`POLL`]).
pub const PROBE_WATERMARK: u32 = 128 * 1024;

/// [`attr::open_system_wide`], again while it is interrupted (`EINTR`: opening a uprobe's
/// tracepoint waits interruptibly, and a signal of this process's threads can cut it).
fn open_retrying(a: &mut perf_event_open_sys::bindings::perf_event_attr, cpu: i32) -> std::io::Result<OwnedFd> {
    let mut tries = 0;
    loop {
        match attr::open_system_wide(a, cpu) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted && tries < 100 => tries += 1,
            r => return r,
        }
    }
}

/// What [`open_cpu`] records of the events it opens: fault events by kernel id (major or
/// minor), dynamic probes' events by kernel id (their event name), and why a probe's
/// could not be opened.
#[derive(Default)]
struct Opened {
    faults: std::collections::HashMap<u64, bool>,
    probes: std::collections::HashMap<u64, String>,
    probe_error: Option<String>,
}

fn open_cpu(cpu: u32, opened: &mut Opened, with_ptrace: bool, probes: &[(String, u64)]) -> Result<Option<CpuEvents>, PerfError> {
    let refused = |e: std::io::Error| PerfError::Refused(attr::paranoid_advice(attr::paranoid(), e.raw_os_error()).unwrap_or_else(|| e.to_string()));
    let mut sb_attr = attr::attr(attr::Kind::SideBand);
    if with_ptrace {
        sb_attr.__bindgen_anon_2.wakeup_watermark = SIDEBAND_WATERMARK_WITH_PTRACE;
    }
    let sb = match attr::open(&mut sb_attr, cpu as i32) {
        Ok(fd) => fd,
        // An offline CPU.
        Err(e) if e.raw_os_error() == Some(libc::ENODEV) || (e.raw_os_error() == Some(libc::EINVAL) && cpu > 0) => return Ok(None),
        Err(e) => return Err(refused(e)),
    };
    let sb_ring = map_ring(&sb, &SIDEBAND_PAGES)?;
    let minor = attr::open(&mut attr::attr(attr::Kind::MinorFaults), cpu as i32).map_err(refused)?;
    // The ring before the redirection: PERF_EVENT_IOC_SET_OUTPUT needs the target's
    // buffer to exist.
    let fault_ring = map_ring(&minor, &FAULT_PAGES)?;
    let major = attr::open(&mut attr::attr(attr::Kind::MajorFaults), cpu as i32).map_err(refused)?;
    attr::set_output(&major, &minor).map_err(refused)?;
    opened.faults.insert(attr::id(&minor).map_err(refused)?, false);
    opened.faults.insert(attr::id(&major).map_err(refused)?, true);
    let mut fds = vec![sb, minor, major];
    let mut rings = vec![sb_ring, fault_ring];
    // Each dynamic probe's hits, sampled with the user stack, into a ring of their own per
    // CPU (the first probe's; a probe storm costs samples there, never switch records or
    // faults) that wakes the reader only when [`PROBE_WATERMARK`] bytes are in: a wake-up
    // per hit would double a hit's cost. Not opened: no stacks, said once. Every task's
    // hits on the CPU (see [`attr::tracepoint`] for why): the converter keeps the tree's.
    let mut probe_fd: Option<usize> = None;
    for (event, id) in probes {
        let mut a = attr::tracepoint(*id);
        a.__bindgen_anon_2.wakeup_watermark = PROBE_WATERMARK;
        let fd = open_retrying(&mut a, cpu as i32).and_then(|fd| {
            let kid = attr::id(&fd)?;
            match probe_fd {
                Some(i) => attr::set_output(&fd, &fds[i])?,
                None => {
                    rings.push(map_ring(&fd, &FAULT_PAGES).map_err(|e| std::io::Error::other(e.to_string()))?);
                    probe_fd = Some(fds.len());
                }
            }
            Ok((kid, fd))
        });
        match fd {
            Ok((kid, fd)) => {
                opened.probes.insert(kid, event.clone());
                fds.push(fd);
            }
            Err(e) => {
                opened.probe_error.get_or_insert_with(|| format!("no user stacks of probe {event}: perf_event_open of its tracepoint: {e}"));
            }
        }
    }
    Ok(Some(CpuEvents { cpu, rings, fds }))
}

impl PerfRecorder {
    /// Opens the events on this process for every CPU (they switch on when the command
    /// forked next execs), writes the first metadata and starts the reader thread. Call it
    /// right before spawning the command: every child forked later inherits the events.
    ///
    /// # Errors
    /// [`PerfError::Refused`] (with the sysctl to change, [`attr::paranoid_advice`]) when
    /// perf_event_open is refused (as it is for unprivileged users at
    /// perf_event_paranoid 3 or more; with CAP_PERFMON it is tried anyway); [`PerfError::Mmap`]; I/O errors of the trace.
    pub fn start(output: &TraceDir) -> Result<PerfRecorder, PerfError> {
        Self::start_in(output, false, false, &[])
    }

    /// [`PerfRecorder::start`], with the classes of the system-call recorder
    /// ([`crate::ptrace::classes::classes`]) in the trace's table after its own: the
    /// [`crate::ptrace::SyscallRecorder`] started next, on [`PerfRecorder::syscall_sink`],
    /// writes the stream `syscalls_0` of this trace (same metadata, UUID and clock). Say
    /// how it went with [`PerfRecorder::set_syscall_view`].
    ///
    /// # Errors
    /// As [`PerfRecorder::start`].
    pub fn start_with_syscalls(output: &TraceDir) -> Result<PerfRecorder, PerfError> {
        Self::start_in(output, false, true, &[])
    }

    /// Where the system-call recorder writes, for a recording started with
    /// [`PerfRecorder::start_with_syscalls`] (`process_events` off: this recording writes
    /// the forks and the state dump).
    pub fn syscall_sink(&self) -> Option<crate::ptrace::Sink> {
        self.sink.clone()
    }

    /// What the trace's metadata says of the system calls (written at [`PerfRecorder::finish`]).
    pub fn set_syscall_view(&mut self, view: SyscallView) {
        self.syscalls = Some(view);
    }

    /// The same events, written as the user stacks only ([`to_ctf::Converter::stacks_only`])
    /// to `<output>/`[`STACKS_DIR`], with `env.kernel_source` [`STACKS_SOURCE`]: what root's
    /// tracefs recording ([`super::view_recorder`]) cannot have, the DWARF-unwound user
    /// stack of each page fault and of each blocked interval.
    ///
    /// # Errors
    /// As [`PerfRecorder::start`].
    pub fn start_stacks(output: &TraceDir) -> Result<PerfRecorder, PerfError> {
        Self::start_in(output, true, false, &[])
    }

    /// [`PerfRecorder::start_stacks`], with the user stack of every hit of the dynamic
    /// probes `probes` (`(event, tracepoint id)`: [`super::view_recorder::Prepared::probe_tracepoints`])
    /// as `perf_probe_stack` events (a CPU-wide tracepoint event per probe and CPU, sampling
    /// each hit with the user registers and stack, DWARF-unwound as the faults are; the
    /// reader keeps the hits of the traced tree, [`tree`]). A probe whose
    /// tracepoint cannot be opened has no stacks: [`PerfRecorder::probe_note`] says why.
    ///
    /// # Errors
    /// As [`PerfRecorder::start`].
    pub fn start_stacks_with_probes(output: &TraceDir, probes: &[(String, u64)]) -> Result<PerfRecorder, PerfError> {
        Self::start_in(output, true, false, probes)
    }

    /// Why the stacks of some dynamic probe are not recorded, if so.
    pub fn probe_note(&self) -> Option<&str> {
        self.probe_note.as_deref()
    }

    /// Opens the events, then creates the trace's directory (`kernel`, or [`STACKS_DIR`])
    /// through `output`, as its owner; with `syscalls`, the table has the system-call
    /// recorder's classes too.
    fn start_in(output: &TraceDir, stacks: bool, syscalls: bool, probes: &[(String, u64)]) -> Result<PerfRecorder, PerfError> {
        let mut opened = Opened::default();
        let mut cpus = Vec::new();
        for cpu in ust_core::cpus::possible_cpus() {
            if let Some(c) = open_cpu(cpu, &mut opened, syscalls, probes)? {
                cpus.push(c);
            }
        }
        if cpus.is_empty() {
            return Err(PerfError::Refused("perf_event_open opened no CPU".into()));
        }
        let mut classes = to_ctf::event_classes();
        let args = syscalls.then(|| Arc::new(crate::ptrace::args::syscall_args()));
        if let Some(args) = &args {
            classes.extend(crate::ptrace::classes::classes(args));
        }
        let table = Arc::new(EventTable::given(classes));
        let dir = output.dir(if stacks { STACKS_DIR } else { super::KERNEL_DIR }, 0o750)?;
        let uuid = *uuid::Uuid::new_v4().as_bytes();
        let datetime = ust_ctf::datetime::iso_at(ust_ctf::datetime::now());
        let source = if stacks { STACKS_SOURCE } else { "perf_event_open" };
        let sink = args.map(|args| crate::ptrace::Sink { dir: dir.clone(), table: table.clone(), uuid, stream: 0, args, process_events: false });
        let mut rec = PerfRecorder {
            dir: dir.clone(),
            source,
            uuid,
            table: table.clone(),
            datetime,
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
            sink,
            syscalls: None,
            probe_note: None,
        };
        rec.write_metadata(0, ust_core::clock::realtime_offset_ns())?;
        let max_cpu = cpus.iter().map(|c| c.cpu).max().unwrap_or(0);
        let mut streams = Vec::new();
        for cpu in 0..=max_cpu {
            streams.push(CpuStream::create(&dir, table.clone(), uuid, cpu)?);
        }
        // A state-dump record of `ust trace` itself (the command's parent) in each CPU's
        // stream: no stream is without packets, and the parent has a name.
        let me = std::process::id() as i32;
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
        for (cpu, s) in streams.iter_mut().enumerate() {
            let me = crate::procfs::TaskState {
                tid: me,
                pid: me,
                ppid: std::os::unix::process::parent_id() as i32,
                comm: comm.trim().to_string(),
                state: 'R',
                cpu: cpu as u32,
            };
            s.push_process_state(ust_core::clock::monotonic_ns(), &me)?;
            s.flush()?;
        }
        let mut conv = to_ctf::Converter::new(table, streams);
        conv.fault_events = opened.faults;
        conv.probe_events = opened.probes;
        rec.probe_note = opened.probe_error;
        if stacks {
            conv.stacks_only();
        }
        let stop = rec.stop.clone();
        rec.thread = Some(std::thread::Builder::new().name("ust-perf".into()).spawn(move || read_loop(cpus, conv, &stop))?);
        Ok(rec)
    }

    fn write_metadata(&self, traced_pid: i32, offset: i64) -> std::io::Result<()> {
        let env = self.syscalls.as_ref().map(SyscallView::env);
        let extra: &[(&str, &str)] = env.as_ref().map_or(&[], |e| e.as_slice());
        crate::write_metadata_env(&self.dir, self.uuid, &self.table, &self.datetime, traced_pid, offset, self.source, extra)
    }

    /// `<output>/kernel` (or [`STACKS_DIR`]).
    pub fn dir(&self) -> &TraceDir {
        &self.dir
    }

    /// Drains the rings one last time (call it after the command exited), closes the
    /// events and writes the final metadata (the session's clock offset, as
    /// [`super::view_recorder::ViewRecorder::finish`]).
    ///
    /// # Errors
    /// The metadata write error.
    pub fn finish(mut self, output: &TraceDir, traced_pid: i32) -> Result<KernelSummary, KernelError> {
        self.stop.store(true, Ordering::SeqCst);
        let mut counts = vec![0u64; self.table.events.len()];
        let (mut lost, mut bad) = (0, 0);
        if let Some(t) = self.thread.take() {
            if let Ok((stats, b, err)) = t.join() {
                for st in stats {
                    for (c, n) in counts.iter_mut().zip(st.counts) {
                        *c += n;
                    }
                    lost += st.lost;
                    bad += st.bad;
                }
                bad += b;
                if let Some(e) = err {
                    eprintln!("ust: kernel reader: {e}");
                }
            }
        }
        let offset = super::session_clock_offset(output).unwrap_or_else(ust_core::clock::realtime_offset_ns);
        self.write_metadata(traced_pid, offset)?;
        Ok(KernelSummary {
            dir: self.dir.path(),
            counts: self.table.events.iter().zip(counts).map(|(e, n)| (e.name.clone(), n)).collect(),
            lost,
            bad,
            ..Default::default()
        })
    }
}

impl Drop for PerfRecorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Batches the converter may have queued before the reader holds the next ones back (the
/// reader never waits for the converter: see [`read_loop`]).
const BATCHES_IN_FLIGHT: usize = 8;
/// Fault samples the reader holds back, beyond which it drops the next ones (counted as
/// lost in their CPU's stream) until the converter catches up.
const HELD_FAULTS: usize = 16 * 1024;
/// Records of any kind held back beyond which the reader drops them all (counted as lost):
/// a converter that far behind is not catching up.
const HELD_RECORDS: usize = 1024 * 1024;

/// The reader: poll the rings, look at the threads that blocked (at once, before anything
/// slow), and hand each batch to the converter thread, which merges it by time with the
/// block stacks taken after the previous batch (so every item of a batch is later than
/// every item of the batches before), unwinds and writes.
///
/// A blocked thread's stack is read from `/proc` while it is still blocked (there is no
/// kernel sample of it for an unprivileged user: [`blockstack`]), so the reader must be
/// back on the rings as soon as a thread blocks: it reads the side-band rings (the
/// switches) and looks at the blocked threads before it reads the fault rings, and it never
/// waits for the converter. When the converter falls behind (unwinding a fault storm),
/// the batches are held back and merged, in ring order, and past [`HELD_FAULTS`] fault
/// samples the next ones are dropped and counted as lost, as a full ring would lose them.
fn read_loop(mut cpus: Vec<CpuEvents>, conv: to_ctf::Converter, stop: &AtomicBool) -> ReaderResult {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<to_ctf::Item>>(BATCHES_IN_FLIGHT);
    let converter = std::thread::Builder::new().name("ust-perf-ctf".into()).spawn(move || convert_loop(conv, rx));
    let converter = match converter {
        Ok(c) => c,
        Err(e) => return (Vec::new(), 0, Some(format!("cannot start the converter thread: {e}"))),
    };
    // What the converter has not taken yet; per CPU, the latest time of a record read so far.
    let mut held: Vec<to_ctf::Item> = Vec::new();
    let mut held_faults = 0usize;
    let mut latest: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
    let mut off_cpu = off_cpu::OffCpu::default();
    let mut tree = tree::Tree::default();
    loop {
        let last = stop.load(Ordering::SeqCst);
        let mut pfd: Vec<libc::pollfd> = cpus
            .iter()
            .flat_map(|c| c.fds[..2].iter().chain(c.probe_ring_fd()))
            .map(|fd| libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 })
            .collect();
        if !last {
            // SAFETY: pfd is a valid array of pollfd of the given length.
            unsafe { libc::poll(pfd.as_mut_ptr(), pfd.len() as libc::nfds_t, POLL.as_millis() as i32) };
        }
        let mut batch = Vec::new();
        // The switches first (ring 0 of each CPU), then the blocked threads, at once.
        drain_side_band(&mut cpus, &mut batch, &mut off_cpu, &mut tree, &mut latest);
        for (tid, pid, cpu) in off_cpu.unlooked() {
            if let Some(mut s) = blockstack::snapshot(pid, tid) {
                off_cpu.stacked.insert(tid);
                // Stamped just after the latest record of its CPU read so far: inside the
                // interval (its switch-out is among those records, its switch-in is not yet
                // written: the thread was seen asleep after the drain), and in time order
                // with what the converter got before and gets next.
                s.time = latest.get(&cpu).map_or(s.time, |t| t + 1);
                batch.push(to_ctf::Item::Block(cpu, s));
            }
        }
        // Where the probes' rings end now, then the side band again: a hit before those
        // ends came after the exec or fork record of its process, which is read by then,
        // so each hit read below is of a process the tree knows, or not the tree's.
        let probe_ends: Vec<Option<u64>> = cpus.iter().map(|c| c.rings.get(2).map(ring::Ring::head)).collect();
        drain_side_band(&mut cpus, &mut batch, &mut off_cpu, &mut tree, &mut latest);
        // Then the faults and the tree's probe hits: kept while the converter keeps up,
        // else dropped and counted. Other processes' hits are dropped unread.
        for (c, probe_end) in cpus.iter_mut().zip(probe_ends) {
            let cpu = c.cpu;
            let (mut dropped, mut at) = (0u64, 0u64);
            let mut keep = |r: &[u8]| {
                if held_faults < HELD_FAULTS && held.len() + batch.len() < HELD_RECORDS {
                    held_faults += 1;
                    batch.push(to_ctf::Item::Record(cpu, record::parse(r)));
                } else {
                    let rec = record::parse(r);
                    at = to_ctf::Item::Record(cpu, rec).time().max(at);
                    dropped += 1;
                }
            };
            c.rings[1].drain(&mut keep);
            if let (Some(ring), Some(end)) = (c.rings.get_mut(2), probe_end) {
                ring.drain_until(end, |r| {
                    if record::sample_pid_time(r).is_none_or(|(pid, time)| tree.contains(pid, time)) {
                        keep(r);
                    }
                });
            }
            if dropped > 0 {
                let id = record::Id { cpu, time: at, ..Default::default() };
                batch.push(to_ctf::Item::Record(cpu, record::Record::Lost { id, lost: dropped }));
            }
        }
        if held.len() + batch.len() >= HELD_RECORDS {
            // The converter is that far behind: this batch is counted, not kept.
            let n = batch.len() as u64;
            let time = batch.iter().map(to_ctf::Item::time).max().unwrap_or(0);
            batch.clear();
            batch.push(to_ctf::Item::Record(0, record::Record::Lost { id: record::Id { time, ..Default::default() }, lost: n }));
        }
        for item in &batch {
            if let to_ctf::Item::Record(cpu, _) = item {
                let t = latest.entry(*cpu).or_default();
                *t = item.time().max(*t);
            }
        }
        held.append(&mut batch);
        if last {
            break;
        }
        match tx.try_send(std::mem::take(&mut held)) {
            Ok(()) => held_faults = 0,
            Err(std::sync::mpsc::TrySendError::Full(b)) => held = b,
            Err(std::sync::mpsc::TrySendError::Disconnected(_)) => break,
        }
    }
    // The end: what is held, waiting for the converter.
    let _ = tx.send(held);
    drop(tx);
    let (stats, bad, err) = converter.join().unwrap_or_else(|_| (Vec::new(), 0, Some("the converter thread panicked".into())));
    let ring_bad: u64 = cpus.iter().flat_map(|c| c.rings.iter()).map(|r| r.bad).sum();
    (stats, bad + ring_bad, err)
}

/// Drains the side-band ring of every CPU onto `batch` and applies what it read, in time
/// order, to the blocked threads and the tree.
fn drain_side_band(
    cpus: &mut [CpuEvents],
    batch: &mut Vec<to_ctf::Item>,
    off_cpu: &mut off_cpu::OffCpu,
    tree: &mut tree::Tree,
    latest: &mut std::collections::HashMap<u32, u64>,
) {
    let start = batch.len();
    for c in cpus.iter_mut() {
        let cpu = c.cpu;
        c.rings[0].drain(|r| batch.push(to_ctf::Item::Record(cpu, record::parse(r))));
    }
    let read = &mut batch[start..];
    off_cpu.note(read, latest);
    for item in read.iter() {
        if let to_ctf::Item::Record(_, r) = item {
            tree.note(r);
        }
    }
}

/// The converter thread: each batch in time order into the CTF streams; at the end the
/// streams are flushed.
fn convert_loop(mut conv: to_ctf::Converter, rx: std::sync::mpsc::Receiver<Vec<to_ctf::Item>>) -> ReaderResult {
    let mut err = None;
    for mut batch in rx {
        batch.sort_by_key(|i| i.time());
        for item in batch {
            if let Err(e) = conv.convert(item) {
                err.get_or_insert(e.to_string());
            }
        }
    }
    let mut stats = Vec::new();
    for s in conv.streams.iter_mut() {
        if let Err(e) = s.flush() {
            err.get_or_insert(e.to_string());
        }
        stats.push(s.stats.clone());
    }
    (stats, conv.bad, err)
}
