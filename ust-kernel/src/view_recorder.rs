//! The tracefs recording of `ust trace --kernel`, for root (tier 3: everything,
//! [`ViewFilter::everything`]) and for an ordinary user through root's `ust-consumerd` (tier
//! 2, the kernel broker: what that user may see, [`ViewFilter::new`]).
//!
//! ```text
//! instances/ust-<pid>-<n>/per_cpu/cpuN/trace_pipe_raw ───┐  sched, irq, timers: system-wide
//! instances/ust-<pid>-<n>-t/per_cpu/cpuN/trace_pipe_raw ─┤  syscalls, faults, filemap: the
//!                                                        │  traced tree only (set_event_pid)
//! BPF ring (crate::arg_capture: paths, argv, sockaddrs of the tree's calls) ─────┤
//!   one thread (crate::merge): read every CPU, decode pages, merge by time, apply the
//!   filter, join the copied arguments to the sys_enter records
//!   ──> ctf::CpuStream ──> <dir>/channel0_N (system-wide), <dir>/tree_N, metadata
//! ```
//!
//! The argument capture ([`crate::arg_capture`]) is started first, before the events are
//! enabled, and follows the traced pid from [`Prepared::start`]; where the kernel refuses
//! BPF the trace keeps the pointers and its metadata says why (`env.args_capture`).
//!
//! Two instances. The first records scheduling, interrupts and timers system-wide: the
//! wakers of the traced tasks and the interrupt contexts they run in are needed whoever
//! they are. The second records the high-rate events (system calls, page faults, pages read
//! into the page cache) with `set_event_pid` = the traced pid and `options/event-fork`, so
//! the kernel keeps only the traced tree's there, whatever else runs: the command is
//! started gated and released once the pid is set, so it is in from its first instruction.
//! Each instance's CPUs have their own streams (channels [`ctf::CHANNEL`] and
//! [`ctf::TREE_CHANNEL`]), so a loss is accounted to the buffer it happened in. Root may ask
//! for one system-wide instance instead ([`Options::system_wide`]: LTTng's view, every
//! task's system calls and faults too). The system-wide instance's buffers are sized from
//! the event rate measured just before ([`crate::sizing`]).
//!
//! The writing thread of a user's view runs with the requester's file-system identity
//! (`setfsuid`, `setfsgid`, no supplementary groups: per thread on Linux), so every file
//! it creates in the directory the user handed over is created with the user's permissions
//! and owned by them; root's privileges never reach the user's directory. Packets are
//! flushed at least every [`crate::merge::FLUSH_EVERY`], so a recorder killed mid-trace leaves a
//! trace that is whole up to about that moment.

use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ust_ctf::outdir::TraceDir;

use crate::arg_capture::{ArgCapture, ArgsSummary};
use crate::ctf::{CpuStream, EventTable, Given};
use crate::filter::ViewFilter;
use crate::merge::{Buffer, Merge};
use crate::{ctf, format, lttng, procfs, sizing, tracefs, uprobe, KernelError, KernelSummary, BUFFER_KB};

pub use crate::kview_debug::{debug_enabled, DEBUG_ENV};

/// `env.kernel_source` of a brokered trace (tier 2).
pub const SOURCE: &str = "tracefs-view";
/// `env.kernel_source` of root's own trace (tier 3).
pub const ROOT_SOURCE: &str = "tracefs";

/// How a recording is set up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Root only: one instance with every event system-wide (every task's system calls and
    /// faults), instead of the traced tree's high-rate events filtered in the kernel.
    pub system_wide: bool,
    /// A per-CPU buffer size, KiB; `None`: sized from the measured event rate
    /// ([`crate::sizing`]).
    pub buffer_kb: Option<u64>,
    /// The dynamic probes' events alone, in one instance, system-wide (a session's
    /// `enable-event --userspace-probe` rules, as LTTng's kernel domain records only the
    /// events enabled): none of [`ctf::EVENTS`], no argument capture; the state dump is
    /// kept (it names the tasks). The buffers are [`BUFFER_KB`] unless `buffer_kb`.
    pub probes_only: bool,
}

/// True for the events recorded in the traced tree's instance: the high-rate ones.
fn tree_event(system: &str) -> bool {
    matches!(system, "raw_syscalls" | "exceptions" | "filemap")
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Gives the calling thread (only) the file-system identity `uid`/`gid` and no
/// supplementary groups; file-system capabilities leave its effective set with the uid.
fn become_fs_user(uid: u32, gid: u32) -> std::io::Result<()> {
    // SAFETY: raw setgroups(0, NULL) affects only this thread (glibc's wrapper would change
    // every thread of the daemon); the null list with size 0 is valid.
    if unsafe { libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: setfsgid/setfsuid only change this thread's credentials; they return the
    // previous id, so success is checked by asking again with an invalid id (-1).
    unsafe {
        libc::setfsgid(gid);
        libc::setfsuid(uid);
        if libc::setfsuid(u32::MAX) as u32 != uid || libc::setfsgid(u32::MAX) as u32 != gid {
            return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "setfsuid/setfsgid did not take"));
        }
    }
    Ok(())
}

/// Instances set up, events enabled, recording off: [`Prepared::start`] begins once the
/// traced pid is known.
#[derive(Debug)]
pub struct Prepared {
    main: tracefs::Instance,
    tree: Option<tracefs::Instance>,
    table: Arc<EventTable>,
    missing: Vec<String>,
    stale_removed: Vec<String>,
    all: bool,
    buffer_kb: u64,
    args: ArgCapture,
    /// `(event, tracepoint id)` of each probe placed (`events/<group>/<event>/id`): what
    /// perf_event_open samples their user stacks by ([`crate::perf::PerfRecorder::start_stacks_with_probes`]).
    probe_ids: Vec<(String, u64)>,
    /// The twins of the entry probes that perf samples (no instance enables them).
    stack_probes: Option<Box<uprobe::Placed>>,
    // Last: dropped after the instances that enable them.
    probes: Option<uprobe::Placed>,
}

/// A running recording.
#[derive(Debug)]
pub struct ViewRecorder {
    instances: Vec<tracefs::Instance>,
    stop: Arc<AtomicBool>,
    finish_args: Arc<Mutex<Option<(i32, i64)>>>,
    thread: Option<std::thread::JoinHandle<Result<KernelSummary, String>>>,
    /// Removed at the end, once the perf events sampling them are closed (the stacks
    /// recorder finishes first; a probe still open by perf is left to the next start's
    /// clean-up).
    stack_probes: Option<Box<uprobe::Placed>>,
    probes: Option<uprobe::Placed>,
}

impl ViewRecorder {
    /// Creates the instances (removing stale ones first) and enables the events of
    /// [`ctf::EVENTS`] this kernel has (and [`ctf::ROOT_EVENTS`] for root's view, `all`),
    /// recording off.
    ///
    /// # Errors
    /// [`KernelError`]: no tracefs, no permission (use [`KernelError::explain`]), no event.
    pub fn prepare(all: bool, opts: Options) -> Result<Prepared, KernelError> {
        Self::prepare_with_probes(all, opts, &[])
    }

    /// [`ViewRecorder::prepare`], and places `probes` ([`uprobe::Placed`]) and enables
    /// their events: in the traced tree's instance when there is one (the kernel keeps the
    /// tree's hits only), else in the system-wide one. Stale probes of dead recorders are
    /// removed first ([`uprobe::remove_stale`]).
    ///
    /// # Errors
    /// As [`ViewRecorder::prepare`]; [`KernelError::Uprobe`] when a probe is refused.
    pub fn prepare_with_probes(all: bool, opts: Options, probes: &[uprobe::Probe]) -> Result<Prepared, KernelError> {
        let root = tracefs::root()?;
        let mut stale_removed = tracefs::remove_stale(&root);
        stale_removed.extend(uprobe::remove_stale(&root));
        let name = format!("{}{}-{}", tracefs::INSTANCE_PREFIX, std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        if opts.probes_only && probes.is_empty() {
            return Err(KernelError::NoEvents);
        }
        // The argument capture first: its program then runs before ftrace's probe on
        // `raw_syscalls:sys_enter` (crate::bpf::Capture::start).
        let args = if opts.probes_only { ArgCapture::off("the dynamic probes alone: no system calls recorded") } else { ArgCapture::start(&root) };
        let main = tracefs::Instance::create_named(&root, &name)?;
        let tree = if (all && opts.system_wide) || opts.probes_only { None } else { Some(tracefs::Instance::create_named(&root, &format!("{name}-t"))?) };
        for inst in std::iter::once(&main).chain(&tree) {
            inst.set_clock("mono")?;
            inst.set_buffer_kb(opts.buffer_kb.unwrap_or(BUFFER_KB))?;
        }
        let mut formats = Vec::new();
        let mut missing = Vec::new();
        let extra = if all { ctf::ROOT_EVENTS } else { &[] };
        let kernel_events: &[(&str, &str, &str)] = if opts.probes_only { &[] } else { ctf::EVENTS };
        let extra = if opts.probes_only { &[] } else { extra };
        for (sys, ev, name) in kernel_events.iter().chain(extra) {
            let inst = match &tree {
                Some(t) if tree_event(sys) => t,
                _ => &main,
            };
            match format::EventFormat::read(&inst.dir().join("events"), sys, ev) {
                Ok(f) if inst.enable(sys, ev).is_ok() => formats.push((name.to_string(), f)),
                _ => missing.push(format!("{sys}:{ev}")),
            }
        }
        if formats.is_empty() && !opts.probes_only {
            return Err(KernelError::NoEvents);
        }
        let placed = if probes.is_empty() {
            None
        } else {
            let mut placed = uprobe::Placed::place(&root, probes).map_err(KernelError::Uprobe)?;
            let inst = tree.as_ref().unwrap_or(&main);
            for ((ev, _, _), hex) in placed.events.iter().zip(&placed.hex_fields) {
                let mut f = format::EventFormat::read(&inst.dir().join("events"), &placed.group, ev).map_err(KernelError::Uprobe)?;
                // A `&str`/`&[u8]` argument's content as text of its length.
                f.join_probe_text();
                // Addresses in base 16, under short names.
                for field in &mut f.fields {
                    let short = match field.name.as_str() {
                        "__probe_ip" => "ip",
                        "__probe_func" => "func",
                        "__probe_ret_ip" => "ret_ip",
                        n if hex.iter().any(|h| h == n) => n,
                        _ => continue,
                    };
                    field.name = short.to_string();
                    if let format::FieldKind::Int { hex } = &mut field.kind {
                        *hex = true;
                    }
                }
                formats.push((ev.clone(), f));
            }
            placed.enable_in(inst.dir()).map_err(KernelError::Uprobe)?;
            Some(placed)
        };
        let buffer_kb = match opts.buffer_kb {
            Some(kb) => kb,
            None if opts.probes_only => BUFFER_KB,
            None => {
                let events: Vec<(&str, &str)> =
                    formats.iter().filter(|(_, f)| tree.is_none() || !tree_event(&f.system)).map(|(_, f)| (f.system.as_str(), f.name.as_str())).collect();
                let buffers = ust_core::cpus::possible_cpus().len() * if tree.is_some() { 2 } else { 1 };
                let bytes = sizing::measure(&root, &format!("{name}-c"), &events, &ust_core::cpus::possible_cpus())?;
                let kb = sizing::size_for(bytes, BUFFER_KB, sizing::max_buffer_kb(buffers));
                sizing::set(&main, kb)?;
                kb
            }
        };
        let table = Arc::new(EventTable::with_captured_args(formats, &lttng::read_syscall_args(&main.dir().join("events")), args.on()));
        // A uprobe's event serves ftrace or perf, never both at once (the kernel refuses the
        // second with EINTR: trace_uprobe.c, probe_event_enable), so root's view samples the
        // stacks of each entry probe from a twin probe at the same place, without arguments,
        // in a group of its own that no instance enables (not for a session's probes-only
        // recording, which samples no stacks).
        let twins: Vec<uprobe::Probe> = if all && !opts.probes_only {
            probes
                .iter()
                .filter(|p| !p.ret)
                .filter_map(|p| {
                    Some(uprobe::Probe {
                        event: p.event.clone(),
                        file: p.file.try_clone().ok()?,
                        path: p.path.clone(),
                        function: p.function.clone(),
                        offset: p.offset,
                        ret: false,
                        args: Vec::new(),
                        note: None,
                        // The same reference counter as the probe's own: the kernel refuses
                        // two uprobes at one place with different counters.
                        ref_ctr: p.ref_ctr,
                        sdt: p.sdt,
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        let stack_probes = if twins.is_empty() { None } else { uprobe::Placed::place(&root, &twins).ok().map(Box::new) };
        let probe_ids = stack_probes
            .iter()
            .flat_map(|p| {
                p.events.iter().filter_map(|(ev, _, _)| {
                    let id = std::fs::read_to_string(root.join("events").join(&p.group).join(ev).join("id")).ok()?;
                    Some((ev.clone(), id.trim().parse().ok()?))
                })
            })
            .collect();
        Ok(Prepared { main, tree, table, missing, stale_removed, all, buffer_kb, args, probe_ids, stack_probes, probes: placed })
    }

    /// [`ViewRecorder::prepare`] and [`Prepared::start`] with the default [`Options`], into
    /// the directory `dir` (a path the daemon resolves through a descriptor the user sent,
    /// `/proc/self/fd/N`): every file is created through its descriptor ([`TraceDir`]), by
    /// the writing thread as the requester, never through a link below it.
    ///
    /// # Errors
    /// As those, and the directory's opening.
    pub fn start(dir: PathBuf, filter: ViewFilter) -> Result<ViewRecorder, KernelError> {
        Self::start_with_probes(dir, filter, &[])
    }

    /// [`ViewRecorder::start`] with `probes` placed ([`ViewRecorder::prepare_with_probes`]).
    ///
    /// # Errors
    /// As those.
    pub fn start_with_probes(dir: PathBuf, filter: ViewFilter, probes: &[uprobe::Probe]) -> Result<ViewRecorder, KernelError> {
        let mode = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC;
        let out = TraceDir::from_fd(rustix::fs::open(&dir, mode, rustix::fs::Mode::empty()).map_err(std::io::Error::from)?, dir, None);
        Self::prepare_with_probes(filter.sees_all(), Options::default(), probes)?.start(out, filter)
    }

    /// A session's userspace probes alone ([`Options::probes_only`]), written through
    /// `dir` (for a user's view, by the writing thread as that user): every task's hits
    /// for root ([`ViewFilter::everything`]), those of the tasks the user could ptrace for
    /// a user ([`ViewFilter::owner`]).
    ///
    /// # Errors
    /// As [`ViewRecorder::prepare_with_probes`] and [`Prepared::start`].
    pub fn start_probes(dir: TraceDir, filter: ViewFilter, probes: &[uprobe::Probe]) -> Result<ViewRecorder, KernelError> {
        let opts = Options { probes_only: true, ..Options::default() };
        Self::prepare_with_probes(filter.sees_all(), opts, probes)?.start(dir, filter)
    }

    /// Stops recording, applies and writes what is left, writes the final metadata (with
    /// `traced_pid` and the session's clock offset `offset`), removes the instances.
    ///
    /// # Errors
    /// The writing thread's first error, as text.
    pub fn finish(mut self, traced_pid: i32, offset: i64) -> Result<KernelSummary, String> {
        for i in &self.instances {
            let _ = i.set_on(false);
        }
        *self.finish_args.lock().unwrap_or_else(|p| p.into_inner()) = Some((traced_pid, offset));
        self.stop.store(true, Ordering::SeqCst);
        let r = match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            _ => Err("the recording thread panicked".into()),
        };
        for i in self.instances.drain(..) {
            if let Err(e) = i.remove() {
                eprintln!("ust: could not remove the tracefs instance: {e}");
            }
        }
        // The probes go once no instance enables them.
        self.probes.take();
        self.stack_probes.take();
        r
    }
}

/// The state dump, written before recording starts (at `ts`, before any ftrace event):
/// each task `filter` sees in the stream of the CPU it last ran on, for root's view with the
/// open file descriptors of each process, between `lttng_statedump_start` and `_end`
/// (first stream).
fn statedump(streams: &mut [CpuStream], cpus: &[u32], filter: &ViewFilter, ts: u64) -> std::io::Result<()> {
    let tasks: Vec<_> = procfs::statedump().into_iter().filter(|t| filter.sees(t.tid)).collect();
    let root = filter.visible().next().unwrap_or(0);
    let Some(first) = streams.first_mut() else { return Ok(()) };
    first.push_named(lttng::STATEDUMP_START, ts, 0, &[])?;
    for t in &tasks {
        let i = cpus.iter().position(|&c| c == t.cpu).unwrap_or(0);
        let s = &mut streams[i];
        s.push_process_state(ts, t)?;
        if filter.sees_all() && t.tid == t.pid {
            for (fd, path) in procfs::open_files(t.pid) {
                let flags = procfs::fd_flags(t.pid, fd);
                // The gated command is still a copy of `ust trace`: what closes at its exec
                // is not the command's.
                if t.pid == root && flags & libc::O_CLOEXEC as u32 != 0 {
                    continue;
                }
                s.push_named(
                    lttng::STATEDUMP_FILE_DESCRIPTOR,
                    ts,
                    t.tid,
                    &[Given::Int(t.pid.into()), Given::Int(0), Given::Int(fd.into()), Given::Int(flags.into()), Given::Int(0), Given::Text(&path)],
                )?;
            }
        }
    }
    streams[0].push_named(lttng::STATEDUMP_END, ts, 0, &[])?;
    // Every stream has a packet before any loss (a CPU may have no task to dump).
    for s in streams.iter_mut() {
        s.write_empty(ts)?;
    }
    Ok(())
}

impl Prepared {
    /// The events this kernel lacks (`system:event`).
    pub fn missing_events(&self) -> &[String] {
        &self.missing
    }

    /// `(event, tracepoint id)` of each dynamic probe placed, for sampling their user
    /// stacks with perf_event_open.
    pub fn probe_tracepoints(&self) -> &[(String, u64)] {
        &self.probe_ids
    }

    /// Whether the system-call arguments will be copied, and why not
    /// ([`crate::arg_capture`]).
    pub fn args_summary(&self) -> &ArgsSummary {
        self.args.summary()
    }

    /// Starts the thread that writes the view of `filter` through `dir` (for a user's view,
    /// as that user), and turns recording on once the first metadata and the state dump are
    /// written; the traced tree's instance follows `filter`'s root pid.
    ///
    /// # Errors
    /// [`KernelError`]: tracefs, or the thread's first writes into `dir`.
    pub fn start(self, dir: TraceDir, filter: ViewFilter) -> Result<ViewRecorder, KernelError> {
        let Prepared { main, tree, table, missing, stale_removed, all, buffer_kb, mut args, probes, stack_probes, .. } = self;
        if all != filter.sees_all() {
            return Err(KernelError::Io(std::io::Error::other("prepared for another kind of view")));
        }
        let root_pid = filter.visible().next().unwrap_or(0);
        args.follow(root_pid);
        if let Some(t) = &tree {
            tracefs::write(&t.dir().join("set_event_pid"), &root_pid.to_string())?;
            tracefs::write(&t.dir().join("options/event-fork"), "1")?;
        }
        let root = tracefs::root()?;
        let (layout, page_size) = crate::page_layout(&root);
        let cpus = ust_core::cpus::possible_cpus();
        let n = cpus.len();
        // Opened here (as root: a user's view's thread runs with the user's file-system
        // identity): main CPU i -> stream i, tree CPU i -> stream n + i.
        let mut buffers = Vec::new();
        for (k, inst) in std::iter::once(&main).chain(&tree).enumerate() {
            for (i, &cpu) in cpus.iter().enumerate() {
                let pipe = inst.pipe_raw(cpu);
                let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&pipe)?;
                let stats = std::fs::File::open(pipe.with_file_name("stats"))?;
                let label = if k == 0 { "main" } else { "tree" };
                buffers.push(Buffer::new(k * n + i, cpu, label, f, stats));
            }
        }
        let with_tree = tree.is_some();
        let source = if all { ROOT_SOURCE } else { SOURCE };
        let stop = Arc::new(AtomicBool::new(false));
        let finish_args = Arc::new(Mutex::new(None));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let (st, fa) = (stop.clone(), finish_args.clone());
        let thread = std::thread::Builder::new().name("ust-kview".into()).spawn(move || {
            let setup = (|| -> std::io::Result<(Vec<CpuStream>, [u8; 16])> {
                if !filter.sees_all() {
                    become_fs_user(filter.uid(), filter.gid())?;
                }
                let uuid = *uuid::Uuid::new_v4().as_bytes();
                let datetime = ust_ctf::datetime::iso_at(ust_ctf::datetime::now());
                crate::write_metadata_env(&dir, uuid, &table, &datetime, 0, ust_core::clock::realtime_offset_ns(), source, &args.summary().env())?;
                let mut streams = Vec::new();
                for &cpu in &cpus {
                    streams.push(CpuStream::create(&dir, table.clone(), uuid, cpu)?);
                }
                // Every stream starts at the state dump (tools that read the streams'
                // intersection, as lttng-analyses does, then keep it).
                let start = ust_core::clock::monotonic_ns();
                statedump(&mut streams, &cpus, &filter, start)?;
                if with_tree {
                    for &cpu in &cpus {
                        let name = ust_ctf::stream_file_name(ctf::TREE_CHANNEL, cpu);
                        let mut s = CpuStream::create_named(&dir, &name, table.clone(), uuid, cpu, ctf::TREE_INSTANCE_BASE + u64::from(cpu))?;
                        // A first packet, before any loss.
                        s.write_empty(start)?;
                        streams.push(s);
                    }
                }
                Ok((streams, uuid))
            })();
            let (streams, uuid) = match setup {
                Ok(s) => {
                    let _ = ready_tx.send(Ok(()));
                    s
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return Err(e.to_string());
                }
            };
            let m = Merge::new(table.clone(), filter, streams, buffers, layout, page_size, args);
            let (streams, out, args, mut err) = m.run(&st);
            let args = args.finish();
            // Not finished (the connection dropped): a fresh clock offset, no traced pid.
            let (traced_pid, offset) = fa.lock().unwrap_or_else(|p| p.into_inner()).unwrap_or((0, ust_core::clock::realtime_offset_ns()));
            let mut counts = vec![0u64; table.events.len()];
            let (mut lost, mut bad) = (0, 0);
            for s in &streams {
                for (c, n) in counts.iter_mut().zip(&s.stats.counts) {
                    *c += n;
                }
                lost += s.stats.lost;
                bad += s.stats.bad;
            }
            let now = ust_ctf::datetime::iso_at(ust_ctf::datetime::now());
            if let Err(e) = crate::write_metadata_env(&dir, uuid, &table, &now, traced_pid, offset, source, &args.env()) {
                err.get_or_insert(e.to_string());
            }
            if let Some(e) = err {
                return Err(e);
            }
            Ok(KernelSummary {
                dir: dir.path(),
                counts: table.events.iter().zip(counts).map(|(e, n)| (e.name.clone(), n)).collect(),
                lost,
                bad,
                stale_removed,
                missing_events: missing,
                decoded: out.decoded,
                late: out.late,
                reader_cpu_ns: out.cpu_ns,
                buffer_kb,
                args,
            })
        })?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(KernelError::Io(std::io::Error::new(std::io::ErrorKind::PermissionDenied, e)));
            }
            Err(_) => return Err(KernelError::Io(std::io::Error::other("the recording thread ended at start"))),
        }
        let mut instances = vec![main];
        instances.extend(tree);
        for i in instances.iter().rev() {
            i.set_on(true)?;
        }
        Ok(ViewRecorder { instances, stop, finish_args, thread: Some(thread), stack_probes, probes })
    }
}

impl Drop for ViewRecorder {
    fn drop(&mut self) {
        for i in &self.instances {
            let _ = i.set_on(false);
        }
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Each instance's own Drop removes it; the probes go after them.
        self.instances.clear();
        self.probes.take();
    }
}
