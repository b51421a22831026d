//! A system-wide recording seen through one user's [`ViewFilter`]: what root's
//! `ust-consumerd` runs for an ordinary user's `ust trace --kernel` (the kernel broker).
//!
//! ```text
//! instances/ust-<daemon pid>-<n>/per_cpu/cpuN/trace_pipe_raw ───┐  (opened as root)
//! instances/ust-<daemon pid>-<n>-t/per_cpu/cpuN/trace_pipe_raw ─┤
//!                                                               ├─ one thread: read every CPU,
//!   decode pages, merge the records by time (a heap), apply    ─┘  those up to the watermark
//!   the filter in that order ──> ctf::CpuStream ──> <user's fd>/channel0_N, metadata
//! ```
//!
//! Two instances: scheduling, interrupts and timers system-wide in the first (wakers and
//! the interrupt contexts they run in are needed whoever they are), and system calls and
//! page faults, by far the most frequent, in the second with `set_event_pid` = the
//! traced pid and `options/event-fork`, so the kernel keeps only the traced tree's there
//! (the filter still decides what is written; the kernel only spares the reader the rest).
//!
//! Unlike [`crate::KernelRecorder`], which writes each CPU's pages as they come, records are
//! applied in global time order, so that a fork or exec changes the view at its own
//! timestamp on every CPU. The watermark up to which records are applied comes from each
//! buffer's own evidence, not from a guess of how late pages may be: per buffer (each CPU of
//! each instance), "complete up to" is the newest record read from it, or, when a read
//! came back empty (`EAGAIN`, or 0 bytes) and the buffer's `per_cpu/cpuN/stats` counts no
//! unread `entries`, the time just before that read less [`COMMIT_MARGIN`]; the watermark is
//! the least of these. An empty read does not prove a buffer empty: the kernel may hold
//! back a partly filled page (seen here on a CPU gone idle: `EAGAIN` with `entries` > 0,
//! the page handed out only when that CPU writes again), so `stats` is asked each time,
//! and such a buffer holds the watermark back until its events come (at most [`MAX_HOLD`]).
//! So no record is applied after a newer one of another CPU (the filter's state, which
//! forks, execs and exits change, would be wrong for it, and its stream's clock would have
//! to be pushed forward to it). Those that still are (a writer held longer than
//! [`COMMIT_MARGIN`], a buffer held or failing for [`MAX_HOLD`]) are counted and logged; at
//! the end, events the kernel still holds are waited for [`STOP_ROUNDS`] rounds, and those
//! it never hands out are logged.
//!
//! [`ViewFilter::recheck`] looks at `/proc` as it is now, while the records applied after it
//! are older: what it decides is scheduled at its own time ([`ViewFilter::advance_to`]).
//!
//! The writing thread runs with the requester's file-system identity (`setfsuid`,
//! `setfsgid`, no supplementary groups: per thread on Linux), so every file it creates in
//! the directory the user handed over is created with the user's permissions and owned by
//! them; root's privileges never reach the user's directory. Packets are flushed at least
//! every [`FLUSH_EVERY`], so a daemon killed mid-trace leaves a trace that is whole up to
//! about that moment.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ust_ctf::outdir::TraceDir;

use crate::ctf::{CpuStream, EventTable};
use crate::filter::{Verdict, ViewFilter};
use crate::{ctf, format, tracefs, KernelError, KernelSummary, BUFFER_KB, POLL};

/// How long after its timestamp a record may still be committed to its ring buffer: the
/// writer takes the time when it reserves the record and commits it once its fields are
/// filled, with preemption off (nested interrupts' records commit in between). A read of a
/// CPU's buffer that comes back empty proves that CPU complete up to the moment before the
/// read, less this.
pub const COMMIT_MARGIN: Duration = Duration::from_millis(10);
/// Records are held at most this long for a buffer whose reads fail (an error other than
/// `EAGAIN`) or whose kernel holds unread events back: past it, that buffer no longer
/// holds the others back (records of it that arrive later than newer ones of others are
/// counted and logged). A buffer that is merely slow to read (a starved reader) holds the
/// watermark back as long as it takes.
pub const MAX_HOLD: Duration = Duration::from_secs(1);
/// Longest time a record waits in memory before its packet is written.
pub const FLUSH_EVERY: Duration = Duration::from_millis(200);
/// Deepest interrupt nesting kept per CPU (entries whose exit was lost are forgotten).
const MAX_NESTING: usize = 8;
/// Rounds (of [`POLL`]) the last reading waits for events the kernel still holds.
pub const STOP_ROUNDS: usize = 50;

/// The `entries:` of a CPU buffer's `per_cpu/cpuN/stats`: events in it not read yet
/// (0 when the file cannot be read or parsed).
fn unread(stats: &mut std::fs::File) -> u64 {
    use std::io::Seek;
    let mut text = String::new();
    if stats.seek(std::io::SeekFrom::Start(0)).is_err() || stats.read_to_string(&mut text).is_err() {
        return 0;
    }
    text.lines().find_map(|l| l.strip_prefix("entries:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// The environment variable that turns on the broker's debug log (any value): lines
/// `ust-kview debug [ROOT PID]: …` on the daemon's stderr, per recording, saying for each
/// read of a tracefs buffer (`main`/`tasks` instance, CPU) how many records it gave and the
/// timestamps of the first and last, and of each `sched_switch` which tasks it names; per
/// round the watermark; and when a task enters or leaves the view, at what time and why
/// ([`ViewFilter`]). For finding where a record went: read from tracefs or not, applied
/// before or after its task left the view.
pub const DEBUG_ENV: &str = "UST_KVIEW_DEBUG";

/// Whether [`DEBUG_ENV`] is set.
pub fn debug_enabled() -> bool {
    std::env::var_os(DEBUG_ENV).is_some()
}

/// `env.kernel_source` of a brokered trace.
pub const SOURCE: &str = "tracefs-view";

/// A record read but not applied yet: (timestamp, arrival order, stream, payload).
type Pending = (u64, u64, usize, Vec<u8>);

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A running recording for one requester.
#[derive(Debug)]
pub struct ViewRecorder {
    instances: Vec<tracefs::Instance>,
    stop: Arc<AtomicBool>,
    finish_args: Arc<Mutex<Option<(i32, i64)>>>,
    thread: Option<std::thread::JoinHandle<Result<KernelSummary, String>>>,
}

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

impl ViewRecorder {
    /// Sets up a fresh instance with the events of [`ctf::EVENTS`], then starts the thread
    /// that writes the view of `filter` into `dir` (a path the daemon resolves through a
    /// descriptor the user sent, `/proc/self/fd/N`) as the requester, and turns recording
    /// on once the first metadata and the state dump (of the visible tasks) are written.
    ///
    /// # Errors
    /// [`KernelError`]: tracefs setup, or the thread's first writes into `dir`.
    pub fn start(dir: PathBuf, filter: ViewFilter) -> Result<ViewRecorder, KernelError> {
        let root = tracefs::root()?;
        tracefs::remove_stale(&root);
        let name = format!("{}{}-{}", tracefs::INSTANCE_PREFIX, std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        let instance = tracefs::Instance::create_named(&root, &name)?;
        let tasks = tracefs::Instance::create_named(&root, &format!("{name}-t"))?;
        let root_pid = filter.visible().next().unwrap_or(0);
        tracefs::write(&tasks.dir().join("set_event_pid"), &root_pid.to_string())?;
        tracefs::write(&tasks.dir().join("options/event-fork"), "1")?;
        let mut formats = Vec::new();
        let mut missing = Vec::new();
        for inst in [&instance, &tasks] {
            inst.set_clock("mono")?;
            inst.set_buffer_kb(BUFFER_KB)?;
        }
        for (sys, ev, name) in ctf::EVENTS {
            let inst = if matches!(*sys, "raw_syscalls" | "exceptions") { &tasks } else { &instance };
            match format::EventFormat::read(&inst.dir().join("events"), sys, ev) {
                Ok(f) if inst.enable(sys, ev).is_ok() => formats.push((name.to_string(), f)),
                _ => missing.push(format!("{sys}:{ev}")),
            }
        }
        if formats.is_empty() {
            return Err(KernelError::NoEvents);
        }
        let table = Arc::new(EventTable::new(formats));
        let (layout, page_size) = crate::page_layout(&root);
        let cpus = ust_core::cpus::possible_cpus();
        // (stream index, reader, its `stats`): both instances' CPU n go to stream n. Opened
        // here, as root: the thread runs with the user's file-system identity.
        let mut files = Vec::new();
        for inst in [&instance, &tasks] {
            for (i, &cpu) in cpus.iter().enumerate() {
                let pipe = inst.pipe_raw(cpu);
                let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&pipe)?;
                let stats = std::fs::File::open(pipe.with_file_name("stats"))?;
                files.push((i, f, stats));
            }
        }
        // Every file is created through this descriptor ([`TraceDir`]), by the thread as the
        // requester: never through a link below it.
        let mode = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC;
        let out = TraceDir::from_fd(rustix::fs::open(&dir, mode, rustix::fs::Mode::empty()).map_err(std::io::Error::from)?, dir, None);
        let stop = Arc::new(AtomicBool::new(false));
        let finish_args = Arc::new(Mutex::new(None));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let (st, fa) = (stop.clone(), finish_args.clone());
        let thread = std::thread::Builder::new().name("ust-kview".into()).spawn(move || {
            let mut filter = filter;
            let setup = (|| -> std::io::Result<Vec<CpuStream>> {
                become_fs_user(filter.uid(), filter.gid())?;
                let uuid = *uuid::Uuid::new_v4().as_bytes();
                let datetime = ust_ctf::datetime::iso_at(ust_ctf::datetime::now());
                crate::write_metadata(&out, uuid, &table, &datetime, 0, ust_core::clock::realtime_offset_ns(), SOURCE)?;
                let mut streams = Vec::new();
                let dump_ts = ust_core::clock::monotonic_ns();
                let tasks: Vec<_> = crate::procfs::statedump().into_iter().filter(|t| filter.sees(t.tid)).collect();
                for &cpu in &cpus {
                    let mut s = CpuStream::create(&out, table.clone(), uuid, cpu)?;
                    if cpu == cpus[0] {
                        for t in &tasks {
                            s.push_process_state(dump_ts, t)?;
                        }
                    }
                    s.flush()?;
                    streams.push(s);
                }
                Ok(streams)
            })();
            let mut streams = match setup {
                Ok(s) => {
                    let _ = ready_tx.send(Ok(()));
                    s
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return Err(e.to_string());
                }
            };
            let mut files = files;
            let mut heap: BinaryHeap<Reverse<Pending>> = BinaryHeap::new();
            let mut seq = 0u64;
            let mut page = vec![0u8; page_size.max(64 * 1024)];
            let mut last_flush = Instant::now();
            let mut err = None;
            let (mut last_applied, mut late) = (0u64, 0u64);
            let mut ctx: Vec<Vec<(u64, Vec<u8>, bool)>> = vec![Vec::new(); streams.len()];
            // Per buffer: every record up to this time has been read (see the module docs).
            let mut complete = vec![0u64; files.len()];
            let margin = COMMIT_MARGIN.as_nanos() as u64;
            let mut batch: Vec<Pending> = Vec::new();
            let mut held_since: Vec<Option<u64>> = vec![None; files.len()];
            // Rounds since recording was turned off: events still held then are waited for
            // this many rounds, then counted as lost.
            let mut stop_rounds = 0usize;
            let debug = debug_enabled();
            let root_pid = filter.visible().next().unwrap_or(0);
            let switch_id = table.events.iter().find(|e| e.name == "sched_switch").and_then(|e| e.format.as_ref()).map(|f| u64::from(f.id));
            let n_cpus = cpus.len().max(1);
            loop {
                let stopping = st.load(Ordering::SeqCst);
                if stopping {
                    stop_rounds += 1;
                }
                // Every buffer read to its end (empty, or failing) in this round.
                let mut all_read = true;
                for (fi, (i, f, stats)) in files.iter_mut().enumerate() {
                    let i = *i;
                    let (mut drained, mut ended, mut failed) = (false, false, false);
                    let mut before = ust_core::clock::monotonic_ns();
                    for _ in 0..256 {
                        match f.read(&mut page) {
                            Ok(0) => {
                                // Not necessarily empty (the kernel may hold a page back):
                                // `stats` says below.
                                (drained, ended) = (true, true);
                                break;
                            }
                            Ok(n) => {
                                let newest = &mut complete[fi];
                                let (mut first, mut last, mut switches) = (None, 0u64, String::new());
                                let res = crate::ftrace::decode_page(&page[..n], &layout, |e| {
                                    if debug {
                                        first.get_or_insert(e.timestamp);
                                        last = e.timestamp;
                                        if switch_id.is_some() && format::read_uint(e.payload, 0, 2) == switch_id {
                                            let pid = |o| format::read_uint(e.payload, o, 4).map_or(-1, |v| v as u32 as i32);
                                            switches += &format!(" {}:{}->{}", e.timestamp, pid(24), pid(56));
                                        }
                                    }
                                    *newest = (*newest).max(e.timestamp);
                                    batch.push((e.timestamp, seq, i, e.payload.to_vec()));
                                    seq += 1;
                                });
                                if debug {
                                    let inst = if fi < n_cpus { "main" } else { "tasks" };
                                    eprintln!(
                                        "ust-kview debug [{root_pid}]: read {inst} cpu {}: {res:?}, records {first:?}..{last}, switches{switches}",
                                        cpus.get(i).copied().unwrap_or(0)
                                    );
                                }
                                match res {
                                    Ok(info) => streams[i].stats.lost += info.missed.unwrap_or(0),
                                    Err(_) => streams[i].stats.bad += 1,
                                }
                                before = ust_core::clock::monotonic_ns();
                            }
                            Err(e) => {
                                (drained, ended) = (e.kind() == std::io::ErrorKind::WouldBlock, true);
                                failed = e.kind() != std::io::ErrorKind::WouldBlock;
                                break;
                            }
                        }
                    }
                    // Events the kernel still holds (a partly filled page it would not hand
                    // out): no evidence beyond the newest record read, until they come.
                    let held = drained && unread(stats) > 0;
                    if held {
                        drained = false;
                        let since = *held_since[fi].get_or_insert(before);
                        if before.saturating_sub(since) > MAX_HOLD.as_nanos() as u64 {
                            complete[fi] = complete[fi].max(before.saturating_sub(MAX_HOLD.as_nanos() as u64));
                        }
                    } else {
                        held_since[fi] = None;
                    }
                    all_read &= ended && (!held || stop_rounds >= STOP_ROUNDS);
                    if drained {
                        complete[fi] = complete[fi].max(before.saturating_sub(margin));
                    } else if failed {
                        // No evidence from a buffer whose reads fail: its records wait at most
                        // MAX_HOLD. (Only this buffer's: the others keep their own evidence.)
                        complete[fi] = complete[fi].max(ust_core::clock::monotonic_ns().saturating_sub(MAX_HOLD.as_nanos() as u64));
                    }
                }
                // What this round read, in time order (a fork before its child's exec,
                // whatever the CPUs), seen by the filter as soon as read, then held.
                batch.sort_unstable();
                for r in batch.drain(..) {
                    if let Some(ev) = format::read_uint(&r.3, 0, 2).and_then(|k| table.by_ftrace_id(k as u16)) {
                        filter.observe(ev, &r.3, r.0);
                    }
                    heap.push(Reverse(r));
                }
                for (tid, file, why) in filter.take_exec_exits() {
                    if file.is_empty() {
                        eprintln!("ust-kview: task {tid} leaves the view of uid {}: {why}", filter.uid());
                    } else {
                        eprintln!("ust-kview: task {tid} leaves the view of uid {} at its exec of {file}: {why}", filter.uid());
                    }
                }
                let now = ust_core::clock::monotonic_ns();
                filter.recheck(now, ust_core::clock::monotonic_ns);
                let evidence = complete.iter().copied().min().unwrap_or(0);
                if debug {
                    eprintln!(
                        "ust-kview debug [{root_pid}]: round at {now}: complete up to {complete:?}, watermark {evidence}, {} records waiting",
                        heap.len()
                    );
                }
                // Stopping (recording is off): once every buffer is read to its end, all is in.
                let last = stopping && all_read;
                let watermark = if last { u64::MAX } else { evidence };
                while heap.peek().is_some_and(|Reverse(e)| e.0 <= watermark) {
                    let Reverse((ts, _, i, mut payload)) = heap.pop().expect("peeked");
                    if ts < last_applied {
                        late += 1;
                    }
                    last_applied = last_applied.max(ts);
                    filter.advance_to(ts);
                    let Some(kind) = format::read_uint(&payload, 0, 2) else { continue };
                    let Some(ev) = table.by_ftrace_id(kind as u16) else { continue };
                    // Interrupt contexts held per CPU: (ts, record, written).
                    let stack = &mut ctx[i];
                    let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
                    match filter.apply(ev, &mut payload) {
                        Verdict::Drop => {}
                        Verdict::Keep => {
                            for c in stack.iter_mut().filter(|c| !c.2) {
                                c.2 = true;
                                out.push((c.0, std::mem::take(&mut c.1)));
                            }
                            out.push((ts, payload));
                        }
                        Verdict::Enter { interrupts_visible } => {
                            if stack.len() >= MAX_NESTING {
                                stack.remove(0);
                            }
                            if interrupts_visible {
                                out.push((ts, payload));
                                stack.push((ts, Vec::new(), true));
                            } else {
                                stack.push((ts, payload, false));
                            }
                        }
                        Verdict::Exit => {
                            if stack.pop().is_some_and(|c| c.2) {
                                out.push((ts, payload));
                            }
                        }
                    }
                    for (ts, p) in out {
                        if let Err(e) = streams[i].push_record(ts, &p) {
                            err.get_or_insert(e.to_string());
                        }
                    }
                }
                if last || last_flush.elapsed() >= FLUSH_EVERY {
                    for s in streams.iter_mut().filter(|s| s.pending()) {
                        if let Err(e) = s.flush() {
                            err.get_or_insert(e.to_string());
                        }
                    }
                    last_flush = Instant::now();
                }
                if last || err.is_some() {
                    break;
                }
                if !stopping || !all_read {
                    std::thread::sleep(POLL);
                }
            }
            let never_read: u64 = files.iter_mut().map(|(_, _, stats)| unread(stats)).sum();
            if never_read > 0 {
                eprintln!("ust-kview: {never_read} events the kernel did not hand out by the end");
            }
            drop(files);
            if late > 0 {
                eprintln!("ust-kview: {late} records arrived after newer ones were applied");
            }
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
            // The final metadata: the session's clock offset and the traced pid.
            let uuid = streams.first().map(CpuStream::uuid).unwrap_or_default();
            if let Err(e) = crate::write_metadata(&out, uuid, &table, &ust_ctf::datetime::iso_at(ust_ctf::datetime::now()), traced_pid, offset, SOURCE) {
                err.get_or_insert(e.to_string());
            }
            if let Some(e) = err {
                return Err(e);
            }
            Ok(KernelSummary {
                dir: out.path(),
                counts: table.events.iter().zip(counts).map(|(e, n)| (e.name.clone(), n)).collect(),
                lost,
                bad,
                stale_removed: Vec::new(),
                missing_events: missing,
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
        tasks.set_on(true)?;
        instance.set_on(true)?;
        Ok(ViewRecorder { instances: vec![instance, tasks], stop, finish_args, thread: Some(thread) })
    }

    /// Stops recording, applies and writes what is left, writes the final metadata (with
    /// `traced_pid` and the session's clock offset `offset`), removes the instance.
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
            let _ = i.remove();
        }
        r
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
        // The instance's own Drop removes it.
    }
}
