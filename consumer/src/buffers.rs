//! Per-CPU buffers and the daemon's side of each stream.
//!
//! The daemon creates every buffer (DESIGN.md, "Processes"): a `memfd` (close-on-exec,
//! sealing allowed), `ftruncate`d to [`ringbuffer::BufferConfig::file_size`], sealed with
//! `F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL` so that no process can change its size (and
//! SIGBUS the daemon), mapped shared, and formatted with [`ringbuffer::Buffer::create`]. The
//! descriptor goes to the application; the daemon keeps its own mapping so that it can
//! flush and drain after the application died.
//!
//! A [`Stream`] is one buffer plus its stream file and index file; a [`ProcessTrace`] is
//! every stream of one process in one session, with the directory they live in.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringbuffer::{Buffer, BufferConfig, Mode, StreamIdentity};
use ust_core::clock::Monotonic;
use ust_core::packet::{CtfPacketLayout, PacketInfo, HEADER_SIZE};
use ust_core::EventDesc;

use crate::ctf::index::{IndexEntry, IndexFile};
use crate::ctf::stream::StreamFile;
use crate::session::ChannelConfig;

/// Errors while setting up buffers and files.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A system call or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The ring buffer refused the geometry.
    #[error("buffer layout: {0}")]
    Layout(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SetupError {
    let what = what.into();
    move |source| SetupError::Io { what, source }
}

/// Creates, sizes, seals, maps and formats one buffer. Returns the daemon's handle and the
/// descriptor to hand to the application.
///
/// # Errors
/// [`SetupError::Io`] when `memfd_create`, `ftruncate`, `fcntl(F_ADD_SEALS)` or `mmap`
/// fail; [`SetupError::Layout`] when the ring buffer refuses `cfg`.
pub fn allocate(cfg: &BufferConfig, name: &str) -> Result<(Buffer, OwnedFd), SetupError> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let size = cfg.file_size().map_err(|e| SetupError::Layout(e.to_string()))?;
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
        .map_err(|e| SetupError::Io { what: "memfd_create".into(), source: e.into() })?;
    rustix::fs::ftruncate(&fd, size as u64).map_err(|e| SetupError::Io { what: "ftruncate".into(), source: e.into() })?;
    rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
        .map_err(|e| SetupError::Io { what: "F_ADD_SEALS".into(), source: e.into() })?;
    let file = std::fs::File::from(fd);
    let map = memmap2::MmapOptions::new().len(size).map_raw(&file).map_err(io("mmap"))?;
    let buffer = Buffer::create(map, cfg).map_err(|e| SetupError::Layout(e.to_string()))?;
    Ok((buffer, OwnedFd::from(file)))
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Counts kept for a stream, shown by `ust list SESSION` and `ust trace`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Packets written to the stream file.
    pub packets: u64,
    /// Bytes written to the stream file.
    pub bytes: u64,
    /// Packets that failed validation and were skipped.
    pub bad_packets: u64,
    /// Events discarded by the writer (full buffer, too big, nesting), from the buffer's
    /// counters, or from the last packet when larger.
    pub discarded: u64,
    /// Bytes left in sub-buffers that never completed when the stream was finished (a
    /// writer reserved and never committed: it died or is stuck); skipped.
    pub undelivered_bytes: u64,
    /// Overwrite mode: packets overwritten before they were read, from the buffer's
    /// counters.
    pub overwritten: u64,
    /// Packets read but not written because the session's output had stopped (disk full).
    pub unwritten_packets: u64,
    /// Packets missing from the stream file: the gaps in the `packet_seq_num` of the
    /// packets written (before the first one, between two, and up to the closing packet).
    /// What a reader of the trace sees as lost packets.
    pub lost_packets: u64,
}

/// What the last packet written to a stream file said, for the closing packet
/// ([`Stream::finish`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct LastPacket {
    seq: u64,
    timestamp_end: u64,
    events_discarded: u64,
}

/// One per-CPU buffer of one channel of one process, with its files.
pub struct Stream {
    /// Session name (for log lines).
    pub session: String,
    /// Channel name.
    pub channel: String,
    /// CPU.
    pub cpu: u32,
    /// What every packet of this buffer must name.
    pub identity: StreamIdentity,
    buffer: Option<Buffer>,
    file: Option<StreamFile>,
    index: Option<IndexFile>,
    /// Counts so far.
    pub stats: StreamStats,
    /// Sub-buffers in the ring.
    pub num_subbuf: u32,
    /// Read-timer period.
    pub read_period: Duration,
    /// Switch-timer period, if any.
    pub switch_period: Option<Duration>,
    /// Next time the drain thread reads this stream.
    pub next_read: Instant,
    /// Next time the switch timer flushes this stream.
    pub next_switch: Instant,
    /// Files closed and buffer unmapped: nothing more will be read.
    pub finished: bool,
    /// The buffer's control words hold values the algorithm cannot produce (a scribbling
    /// application): reported once, then the stream is left alone.
    pub broken: bool,
    last: Option<LastPacket>,
    /// The session's output state: once set, this stream writes nothing more.
    output_error: crate::session::OutputError,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("session", &self.session)
            .field("channel", &self.channel)
            .field("cpu", &self.cpu)
            .field("stats", &self.stats)
            .field("finished", &self.finished)
            .finish()
    }
}

impl Stream {
    /// Reads every delivered sub-buffer: `get_subbuf`, copy out of shared memory, validate
    /// the copy against [`Stream::identity`], append it to the stream file with one write,
    /// append its index entry, `put_subbuf`. A bad packet is logged and skipped; a write
    /// error closes the stream's files (later packets are released unread). Returns the
    /// number of packets written.
    pub fn drain(&mut self) -> u64 {
        if self.broken {
            return 0;
        }
        // Taken out for the loop (the packet writer borrows `self` mutably); put back below.
        let Some(buffer) = self.buffer.take() else { return 0 };
        // One copy buffer per thread, not per stream: the daemon's anonymous memory stays
        // at about one sub-buffer per draining thread however many streams there are.
        let mut scratch = SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
        let mut written = 0;
        // Bounded: at most the packets a full ring holds, twice, per call, so a writer that
        // keeps filling cannot pin the drain thread on one stream.
        for _ in 0..(2 * buffer.config().num_subbuf as u64 + 1) {
            let sb = match buffer.get_subbuf() {
                Ok(Some(sb)) => sb,
                Ok(None) => break,
                Err(e) => {
                    crate::log!(
                        "{}/{} cpu {}: buffer corrupted ({e}); this stream is no longer read, other streams go on",
                        self.session,
                        self.channel,
                        self.cpu
                    );
                    self.broken = true;
                    break;
                }
            };
            let copied = buffer.copy_subbuf(&sb, &mut scratch);
            if let Err(e) = copied {
                crate::log!("{}/{} cpu {}: copying sub-buffer failed: {e}; skipped", self.session, self.channel, self.cpu);
                self.stats.bad_packets += 1;
            } else {
                match PacketInfo::parse(&scratch, &self.identity) {
                    Ok(info) => {
                        if self.write_packet(&info, &scratch) {
                            written += 1;
                        }
                    }
                    Err(e) => {
                        crate::log!("{}/{} cpu {}: bad packet skipped: {e}", self.session, self.channel, self.cpu);
                        self.stats.bad_packets += 1;
                    }
                }
            }
            if let Err(e) = buffer.put_subbuf(sb) {
                crate::log!(
                    "{}/{} cpu {}: releasing sub-buffer failed ({e}); this stream is no longer read",
                    self.session,
                    self.channel,
                    self.cpu
                );
                self.broken = true;
                break;
            }
        }
        self.buffer = Some(buffer);
        SCRATCH.with(|s| *s.borrow_mut() = scratch);
        self.refresh_counters();
        written
    }

    /// The session's output failed at `path`: stop every stream of the session (this one
    /// now, the others at their next packet) and say so once, clearly.
    fn output_failed(&mut self, path: &std::path::Path, e: &std::io::Error) {
        let what = if e.raw_os_error() == Some(libc::ENOSPC) { "disk full" } else { "write error" };
        let msg = format!("{what} writing {}: {e}", path.display());
        if self.output_error.set(msg.clone()) {
            crate::log!(
                "session {}: {msg}; the session's output is stopped (every packet already written is kept, whole); other sessions go on",
                self.session
            );
        }
        self.file = None;
        self.index = None;
    }

    fn write_packet(&mut self, info: &PacketInfo, packet: &[u8]) -> bool {
        if self.output_error.get().is_some() {
            self.file = None;
            self.index = None;
        }
        let (Some(file), Some(_)) = (self.file.as_mut(), self.index.as_ref()) else {
            self.stats.unwritten_packets += 1;
            return false;
        };
        let offset = match file.append_packet(packet) {
            Ok(o) => o,
            Err(e) => {
                let path = file.path().to_path_buf();
                self.output_failed(&path, &e);
                self.stats.unwritten_packets += 1;
                return false;
            }
        };
        let entry = IndexEntry {
            offset,
            packet_size_bits: info.packet_size * 8,
            content_size_bits: info.content_size * 8,
            timestamp_begin: info.timestamp_begin,
            timestamp_end: info.timestamp_end,
            events_discarded: info.events_discarded,
            stream_id: info.stream_id as u64,
            stream_instance_id: info.stream_instance_id,
            packet_seq_num: info.packet_seq_num,
        };
        let index = self.index.as_mut().expect("checked above");
        if let Err(e) = index.append(&entry) {
            // The packet has no index entry: take it back out of the stream file too, so
            // that file and index agree.
            let file = self.file.as_mut().expect("checked above");
            let path = file.path().to_path_buf();
            let _ = file.truncate_to(offset);
            self.output_failed(&path.with_file_name(format!("index/{}.idx", path.file_name().unwrap_or_default().to_string_lossy())), &e);
            self.stats.unwritten_packets += 1;
            return false;
        }
        let expected = self.last.map_or(0, |l| l.seq + 1);
        self.stats.lost_packets += info.packet_seq_num.saturating_sub(expected);
        self.stats.packets += 1;
        self.stats.bytes += packet.len() as u64;
        self.stats.discarded = self.stats.discarded.max(info.events_discarded);
        self.last = Some(LastPacket {
            seq: info.packet_seq_num,
            timestamp_end: info.timestamp_end,
            events_discarded: info.events_discarded,
        });
        true
    }

    /// Appends an empty closing packet (header and context only) when the buffer's final
    /// counters say more than the last packet written: events discarded after it, or
    /// packets overwritten after it. Without it, losses at the end of a stream (a full
    /// ring that the writer never re-entered, the last laps of an overwrite ring) would
    /// be in no packet, and babeltrace2 would not report them. LTTng's consumer does the
    /// same with an empty-packet flush when a stream ends.
    fn write_closing_packet(&mut self) {
        let Some(b) = self.buffer.as_ref() else { return };
        let c = b.counters();
        let subbuf = b.config().subbuf_size.max(1);
        let discarded = c.discarded();
        let (next_seq, last_end, last_discarded) = match self.last {
            Some(l) => (l.seq + 1, l.timestamp_end, l.events_discarded),
            None => (0, 0, 0),
        };
        // Sub-buffers the writers opened so far: the next packet's sequence number.
        let opened = c.write.div_ceil(subbuf);
        let seq = next_seq.max(opened);
        if discarded <= last_discarded && seq == next_seq {
            return;
        }
        let now = ringbuffer::Clock::now(&Monotonic).max(last_end);
        let mut header = [0u8; HEADER_SIZE];
        ringbuffer::PacketLayout::write_end(
            &CtfPacketLayout,
            &self.identity,
            &mut header,
            &ringbuffer::PacketEnd {
                timestamp_begin: now,
                timestamp_end: now,
                content_size: HEADER_SIZE as u64,
                packet_size: HEADER_SIZE as u64,
                packet_seq_num: seq,
                events_discarded: discarded.max(last_discarded),
            },
        );
        let info = match PacketInfo::parse(&header, &self.identity) {
            Ok(i) => i,
            Err(e) => {
                crate::log!("{}/{} cpu {}: closing packet not written: {e}", self.session, self.channel, self.cpu);
                return;
            }
        };
        self.write_packet(&info, &header);
    }

    fn refresh_counters(&mut self) {
        if let Some(b) = self.buffer.as_ref() {
            let c = b.counters();
            let lost = c.lost_full.saturating_add(c.lost_big).saturating_add(c.lost_nesting);
            self.stats.discarded = self.stats.discarded.max(lost);
            self.stats.overwritten = self.stats.overwritten.max(c.overwritten);
        }
    }

    /// Switches the buffer from the reader side: closes a partly filled sub-buffer so the
    /// next [`Stream::drain`] reads it (the switch timer, stop, and a process's death).
    pub fn flush(&mut self) {
        if let Some(b) = self.buffer.as_ref() {
            b.flush(&CtfPacketLayout, &Monotonic);
        }
    }

    /// Final flush and drain, then closes the files and unmaps the buffer.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.flush();
        self.drain();
        self.refresh_counters();
        if !self.broken {
            self.write_closing_packet();
        }
        if let Some(b) = self.buffer.as_ref() {
            let c = b.counters();
            let pending = c.write.wrapping_sub(c.consumed);
            if pending > 0 && pending <= b.config().subbuf_size * b.config().num_subbuf as u64 {
                self.stats.undelivered_bytes = pending;
                crate::log!(
                    "{}/{} cpu {}: {pending} bytes in sub-buffers that were never completed (a writer did not commit); skipped",
                    self.session,
                    self.channel,
                    self.cpu
                );
            }
        }
        self.buffer = None;
        self.file = None;
        self.index = None;
        self.finished = true;
    }
}

/// Every stream of one process in one session.
#[derive(Debug)]
pub struct ProcessTrace {
    /// Process id.
    pub pid: i32,
    /// Process name.
    pub procname: String,
    /// The trace directory (`<output>/ust/pid/<procname>-<pid>-<stamp>`).
    pub dir: PathBuf,
    /// Trace UUID.
    pub uuid: [u8; 16],
    /// Mask slot of each channel in the process (index = channel index).
    pub slots: Vec<Option<u32>>,
    /// Streams, channel-major then CPU.
    pub streams: Vec<Arc<Mutex<Stream>>>,
    /// The process's events (for the record walker of `ust trace`).
    pub events: Vec<EventDesc>,
    /// The process is gone and its streams are finished.
    pub gone: bool,
}

/// What [`create_process_trace`] needs to know about the process.
#[derive(Debug, Clone)]
pub struct ProcessInfo<'a> {
    /// Process id.
    pub pid: i32,
    /// Process name.
    pub procname: &'a str,
    /// Possible CPUs (buffers per channel).
    pub ncpus: u32,
    /// Registration time (seconds since the Epoch), for the directory name.
    pub registered: i64,
    /// Registered events.
    pub events: &'a [EventDesc],
}

/// Creates the trace directory, writes the metadata (complete before any packet), and
/// allocates one buffer per CPU per channel of `session` with its stream and index files.
/// `next_instance` hands out stream instance ids. Returns the trace and, per channel, the
/// buffer descriptors to send (CPU 0 first).
///
/// # Errors
/// [`SetupError`] for the first failure; the trace directory is then removed.
pub fn create_process_trace(
    session: &crate::session::Session,
    p: &ProcessInfo<'_>,
    next_instance: &mut u64,
) -> Result<(ProcessTrace, Vec<Vec<OwnedFd>>), SetupError> {
    let dir = new_trace_dir(&crate::ctf::process_dir(&session.output, p.procname, p.pid, &crate::datetime::stamp_at(p.registered)))?;
    let r = fill_process_trace(session, p, next_instance, dir.clone());
    if r.is_err() {
        // No half-made trace left behind for readers to trip on (metadata without streams,
        // a stream file without its index): the directory is new and ours.
        let _ = std::fs::remove_dir_all(&dir);
    }
    r
}

fn fill_process_trace(
    session: &crate::session::Session,
    p: &ProcessInfo<'_>,
    next_instance: &mut u64,
    dir: PathBuf,
) -> Result<(ProcessTrace, Vec<Vec<OwnedFd>>), SetupError> {
    let uuid = *uuid::Uuid::new_v4().as_bytes();
    let channels: Vec<String> = session.channels.iter().map(|c| c.name.clone()).collect();
    let hostname = hostname();
    let clock_uuid = ust_core::clock::boot_id();
    let text = crate::ctf::metadata::render(&crate::ctf::metadata::TraceMetadata {
        uuid,
        clock_offset_ns: session.clock_offset_ns,
        clock_uuid: &clock_uuid,
        hostname: &hostname,
        procname: p.procname,
        vpid: p.pid,
        trace_name: &session.name,
        creation_datetime: &crate::datetime::iso_at(session.created),
        channels: &channels,
        events: p.events,
    });
    crate::ctf::metadata::write_atomically(&dir, &text).map_err(io(format!("writing {}/metadata", dir.display())))?;
    let mut streams = Vec::new();
    let mut fds = Vec::new();
    for (ci, ch) in session.channels.iter().enumerate() {
        let mut chan_fds = Vec::new();
        for cpu in 0..p.ncpus {
            let identity = StreamIdentity { uuid, stream_id: ci as u32, cpu, stream_instance_id: *next_instance };
            *next_instance += 1;
            let cfg = buffer_config(&ch.config, identity);
            let (buffer, fd) = allocate(&cfg, &format!("ust-{}-{}-{}", p.pid, ch.name, cpu))?;
            let name = crate::ctf::stream_file_name(&ch.name, cpu);
            let file = StreamFile::create(&dir, &name).map_err(io(format!("creating {}/{name}", dir.display())))?;
            let index = IndexFile::create(&dir, &name).map_err(io(format!("creating {}/index/{name}.idx", dir.display())))?;
            let now = Instant::now();
            let read_period = Duration::from_micros(ch.config.read_timer_us.max(1));
            let switch_period = (ch.config.switch_timer_us > 0).then(|| Duration::from_micros(ch.config.switch_timer_us));
            streams.push(Arc::new(Mutex::new(Stream {
                session: session.name.clone(),
                channel: ch.name.clone(),
                cpu,
                identity,
                buffer: Some(buffer),
                file: Some(file),
                index: Some(index),
                stats: StreamStats::default(),
                num_subbuf: ch.config.num_subbuf,
                read_period,
                switch_period,
                next_read: now + read_period,
                next_switch: now + switch_period.unwrap_or_default(),
                finished: false,
                broken: false,
                last: None,
                output_error: session.output_error.clone(),
            })));
            chan_fds.push(fd);
        }
        fds.push(chan_fds);
    }
    let trace = ProcessTrace {
        pid: p.pid,
        procname: p.procname.to_string(),
        dir,
        uuid,
        slots: vec![None; session.channels.len()],
        streams,
        events: p.events.to_vec(),
        gone: false,
    };
    Ok((trace, fds))
}

/// Creates the directory of a new process trace at `want`, or, when it exists (the same
/// process registered again within the same second: a reconnection, or a reused pid),
/// at `want-1`, `want-2`, …, so that a trace never truncates another's files.
fn new_trace_dir(want: &std::path::Path) -> Result<PathBuf, SetupError> {
    use std::os::unix::fs::DirBuilderExt;
    let parent = want.parent().unwrap_or(want);
    std::fs::DirBuilder::new().recursive(true).mode(0o750).create(parent).map_err(io(format!("creating {}", parent.display())))?;
    for n in 0u32..1000 {
        let dir = if n == 0 { want.to_path_buf() } else { PathBuf::from(format!("{}-{n}", want.display())) };
        match std::fs::DirBuilder::new().mode(0o750).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(SetupError::Io { what: format!("creating {}", dir.display()), source: e }),
        }
    }
    Err(SetupError::Io { what: format!("creating {}", want.display()), source: std::io::ErrorKind::AlreadyExists.into() })
}

/// This machine's host name (`gethostname`), `localhost` if it cannot be read.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates when it fits.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if r != 0 || end == 0 {
        return "localhost".into();
    }
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The ring-buffer configuration of a channel for one stream.
pub fn buffer_config(c: &ChannelConfig, stream: StreamIdentity) -> BufferConfig {
    BufferConfig {
        subbuf_size: c.subbuf_size,
        num_subbuf: c.num_subbuf,
        mode: if c.overwrite { Mode::Overwrite } else { Mode::Discard },
        header_size: HEADER_SIZE as u32,
        stream,
    }
}
