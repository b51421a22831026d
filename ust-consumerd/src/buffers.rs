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
//!
//! **Torn events** (DESIGN.md): when a process dies, [`Stream::finish_dead`] drains what was
//! delivered, then [`copy_held_packets`] copies the sub-buffers that will now never
//! complete, keeping only their committed prefix. This is sound with commits in any order
//! because the evidence is per slot, not a sum: a record's byte 0 is never zero (event ids
//! start at 1), is stored last with Release by the record's own writer at commit, and the
//! sub-buffer was zeroed before its lap began (by the reader at release, or by the writer
//! that claimed it in overwrite mode), so a non-zero byte 0 read with Acquire proves that
//! this slot's writer finished it in this lap. The walk decodes each record's length from
//! its header ([`ust_ctf::reader::record_size`]) and stops at the first zero byte 0;
//! records after it may be committed, but where they start is only known from the torn
//! record's length, which may never have been written, so they are counted as lost
//! instead of guessed at. A sum of committed bytes could not do this: two equal-size
//! records, one committed, one not, give the same sum whichever is missing. The proof of
//! the ring-buffer side is in the `ringbuffer::Buffer` docs ("Per-slot commit evidence").
//!
//! With `--shm-path`, buffers are files under the session's shm directory
//! ([`allocate_file`]) next to the plain-text metadata and [`EVENTS_FILE`], for
//! `ust crash-dump` ([`crate::crash`]).

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringbuffer::{Buffer, BufferConfig, Mode, StreamIdentity};
use ust_core::clock::TraceClock;
use ust_core::packet::{CtfPacketLayout, PacketInfo, HEADER_SIZE};
use ust_core::EventDesc;
pub use ust_ctf::held::{append_packet, copy_held_packets, HeldCopy, HeldReport, PacketSink, EVENTS_FILE};

use ust_ctf::index::{IndexEntry, IndexFile};
use ust_ctf::stream::StreamFile;
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


/// Like [`allocate`], but the buffer is the file `path` (`--shm-path`): created (it must
/// not exist), mode 0600, close-on-exec, sized, mapped shared and formatted. A file cannot
/// be sealed: [`Stream`] checks its size before every access (see
/// [`Stream::shm_intact`]) and the mapping is registered with [`crate::sigbus`].
///
/// # Errors
/// [`SetupError::Io`] when creating, sizing or mapping the file fails;
/// [`SetupError::Layout`] when the ring buffer refuses `cfg`.
pub fn allocate_file(cfg: &BufferConfig, path: &std::path::Path) -> Result<(Buffer, OwnedFd, std::fs::File), SetupError> {
    use std::os::unix::fs::OpenOptionsExt;
    let size = cfg.file_size().map_err(|e| SetupError::Layout(e.to_string()))?;
    let what = || format!("creating buffer file {}", path.display());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(io(what()))?;
    file.set_len(size as u64).map_err(io(what()))?;
    let map = memmap2::MmapOptions::new().len(size).map_raw(&file).map_err(io(what()))?;
    let buffer = Buffer::create(map, cfg).map_err(|e| SetupError::Layout(e.to_string()))?;
    let fd = OwnedFd::from(file.try_clone().map_err(io(what()))?);
    Ok((buffer, fd, file))
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
    /// Bytes of sub-buffers that never completed (a writer reserved and never committed:
    /// it died between reserve and commit) that torn-event recovery could not keep: the
    /// uncommitted slot and everything reserved after it in its sub-buffer.
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
    /// Packets written by torn-event recovery (the committed prefix of a sub-buffer whose
    /// writer died).
    pub recovered_packets: u64,
    /// Events torn-event recovery reported as lost (an upper bound: lost bytes divided by
    /// the smallest record the process can write), included in `discarded`.
    pub recovery_lost: u64,
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
    /// The process's events: the record-size callback of torn-event recovery.
    pub events: Arc<[EventDesc]>,
    /// Where the stream's files live, and how they are named and cut.
    pub files: TraceFiles,
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
    /// The buffer's stream-wide control words (`write`, `consumed`, the id table) hold
    /// values the algorithm cannot produce (a scribbling application): reported once, then
    /// the stream is left alone. A single packet's scribbled words only cost that packet
    /// ([`ringbuffer::Buffer::skip_subbuf`], counted in `bad_packets`).
    pub broken: bool,
    last: Option<LastPacket>,
    /// The session's output state: once set, this stream writes nothing more.
    output_error: crate::session::OutputError,
    /// `--shm-path`: the buffer file and the size it must keep (a file cannot be sealed:
    /// checked before every access, so that a shrunk file does not SIGBUS the daemon).
    pub shm_file: Option<(std::fs::File, u64)>,
    /// `--shm-path`: the mapping's registration with the SIGBUS handler
    /// ([`crate::sigbus`]), released with the buffer.
    pub shm_guard: Option<crate::sigbus::Guard>,
    /// A stream of a snapshot session: no live reader (nothing is consumed; `ust snapshot
    /// record` and post-mortem dumps copy what the buffer holds), no stream file.
    pub snapshot_only: bool,
    /// The trace clock the process writes with; switches read the same one.
    pub clock: TraceClock,
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

/// The stream files of one stream: `<channel>_<cpu>` in one piece, or with
/// `--tracefile-size` a series `<channel>_<cpu>_<k>` (k from 0), each with its index
/// `index/<name>.idx`, of which at most `--tracefile-count` are kept (the oldest removed).
#[derive(Debug, Clone)]
pub struct TraceFiles {
    /// The trace directory.
    pub dir: PathBuf,
    /// `<channel>_<cpu>`.
    pub base: String,
    /// Largest file in bytes before the next is started; 0 = one file.
    pub max_size: u64,
    /// Most files kept; 0 = all.
    pub max_count: u64,
    /// `k` of the file being written.
    pub current: u64,
    /// `k` of the oldest file still on disk.
    pub oldest: u64,
}

impl TraceFiles {
    /// File name of piece `k`.
    pub fn name(&self, k: u64) -> String {
        if self.max_size == 0 {
            self.base.clone()
        } else {
            format!("{}_{k}", self.base)
        }
    }

    /// Creates piece `k`'s stream and index files.
    fn create(&self, k: u64) -> Result<(StreamFile, IndexFile), SetupError> {
        let (dir, name) = (&self.dir, self.name(k));
        let file = StreamFile::create(dir, &name).map_err(io(format!("creating {}/{name}", dir.display())))?;
        let index = IndexFile::create(dir, &name).map_err(io(format!("creating {}/index/{name}.idx", dir.display())))?;
        Ok((file, index))
    }

    /// Moves every piece on disk (stream and index files) into `to` (and `to/index`).
    fn move_to(&self, to: &std::path::Path) -> std::io::Result<()> {
        std::fs::create_dir_all(to.join("index"))?;
        for k in self.oldest..=self.current {
            let name = self.name(k);
            let idx = format!("index/{name}.idx");
            for n in [name.as_str(), idx.as_str()] {
                match std::fs::rename(self.dir.join(n), to.join(n)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

impl Stream {
    /// Reads every delivered sub-buffer: `get_subbuf`, copy out of shared memory, validate
    /// the copy against [`Stream::identity`], append it to the stream file with one write,
    /// append its index entry, `put_subbuf`. A bad packet is logged and skipped; a write
    /// error closes the stream's files (later packets are released unread). Returns the
    /// number of packets written.
    pub fn drain(&mut self) -> u64 {
        if self.broken || self.snapshot_only || !self.shm_intact() {
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
                // One packet's control words are scribbled: drop that packet, go on.
                Err(e @ (ringbuffer::ReadError::ContentSize { .. } | ringbuffer::ReadError::PacketSeq { .. }))
                    if buffer.skip_subbuf().is_ok() =>
                {
                    crate::log!("{}/{} cpu {}: bad packet skipped: {e}", self.session, self.channel, self.cpu);
                    self.stats.bad_packets += 1;
                    continue;
                }
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
                    // The header is app-writable memory: it must agree with what the ring
                    // buffer itself validated for this sub-buffer, or the packet is bad.
                    Ok(info)
                        if info.packet_seq_num != sb.packet_seq_num
                            || info.content_size != sb.content_size
                            || info.packet_size != sb.packet_size =>
                    {
                        crate::log!(
                            "{}/{} cpu {}: bad packet skipped: header says seq {} content {} size {}, the ring buffer says seq {} content {} size {}",
                            self.session,
                            self.channel,
                            self.cpu,
                            info.packet_seq_num,
                            info.content_size,
                            info.packet_size,
                            sb.packet_seq_num,
                            sb.content_size,
                            sb.packet_size
                        );
                        self.stats.bad_packets += 1;
                    }
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

    /// Closes the current piece and starts the next (`--tracefile-size`), removing the
    /// oldest past `--tracefile-count`. On failure the stream's files are closed.
    fn next_piece(&mut self) {
        self.file = None;
        self.index = None;
        let k = self.files.current + 1;
        match self.files.create(k) {
            Ok((f, i)) => {
                self.file = Some(f);
                self.index = Some(i);
                self.files.current = k;
            }
            Err(e) => {
                crate::log!("{}/{} cpu {}: {e}; stream closed", self.session, self.channel, self.cpu);
                return;
            }
        }
        while self.files.max_count > 0 && self.files.current - self.files.oldest + 1 > self.files.max_count {
            let name = self.files.name(self.files.oldest);
            let _ = std::fs::remove_file(self.files.dir.join(&name));
            let _ = std::fs::remove_file(self.files.dir.join("index").join(format!("{name}.idx")));
            self.files.oldest += 1;
        }
    }

    /// Ends the current trace chunk (`ust rotate`): a reader-side switch and a drain, so
    /// that what was recorded so far is on disk, then every piece of the stream is moved
    /// into `to` (a process directory of an archive) and fresh files are started (piece 0)
    /// where they were, unless the stream is finished.
    ///
    /// # Errors
    /// The I/O error of the move or of creating the new files.
    pub fn rotate_chunk(&mut self, to: &std::path::Path) -> std::io::Result<()> {
        if !self.finished {
            self.flush();
            self.drain();
        }
        self.file = None;
        self.index = None;
        self.files.move_to(to)?;
        self.files.current = 0;
        self.files.oldest = 0;
        if !self.finished {
            let (f, i) = self.files.create(0).map_err(|e| std::io::Error::other(e.to_string()))?;
            self.file = Some(f);
            self.index = Some(i);
        }
        Ok(())
    }

    fn write_packet(&mut self, info: &PacketInfo, packet: &[u8]) -> bool {
        if self.output_error.get().is_some() {
            self.file = None;
            self.index = None;
        }
        if self.files.max_size > 0 && self.file.as_ref().is_some_and(|f| !f.is_empty() && f.len() + packet.len() as u64 > self.files.max_size) {
            self.next_piece();
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
        let entry = IndexEntry::for_packet(offset, info);
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
        // Every value here comes from shared memory (an app can write any of them):
        // wrapping/saturating arithmetic only, the daemon must not panic on them.
        let expected = self.last.map_or(0, |l| l.seq.wrapping_add(1));
        self.stats.lost_packets = self.stats.lost_packets.saturating_add(info.packet_seq_num.saturating_sub(expected));
        self.stats.packets += 1;
        self.stats.bytes = self.stats.bytes.saturating_add(packet.len() as u64);
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
            Some(l) => (l.seq.wrapping_add(1), l.timestamp_end, l.events_discarded),
            None => (0, 0, 0),
        };
        // Sub-buffers the writers opened so far: the next packet's sequence number.
        let opened = c.write.div_ceil(subbuf);
        let seq = next_seq.max(opened);
        if discarded <= last_discarded && seq == next_seq {
            return;
        }
        let now = ringbuffer::Clock::now(&self.clock).max(last_end);
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

    /// True unless the stream's `--shm-path` buffer file was shrunk (then the stream is
    /// marked broken, logged, and never accessed again). Always true for a sealed memfd.
    /// The check runs before each access; a file shrunk during one access faults, and the
    /// SIGBUS handler of [`crate::sigbus`] turns that into zero pages the reader skips.
    pub fn shm_intact(&mut self) -> bool {
        let Some((f, size)) = self.shm_file.as_ref() else { return true };
        if self.broken {
            return false;
        }
        match f.metadata() {
            Ok(m) if m.len() >= *size => true,
            r => {
                crate::log!(
                    "{}/{} cpu {}: buffer file shrunk or unreadable ({}); this stream is no longer read",
                    self.session,
                    self.channel,
                    self.cpu,
                    r.map(|m| format!("{} bytes, {size} needed", m.len())).unwrap_or_else(|e| e.to_string())
                );
                self.broken = true;
                false
            }
        }
    }

    /// Switches the buffer from the reader side: closes a partly filled sub-buffer so the
    /// next [`Stream::drain`] reads it (the switch timer, stop, and a process's death).
    pub fn flush(&mut self) {
        if !self.shm_intact() {
            return;
        }
        if let Some(b) = self.buffer.as_ref() {
            b.flush(&CtfPacketLayout, &self.clock);
        }
    }

    /// Final flush and drain, then closes the files and unmaps the buffer; writers may
    /// still be alive, so sub-buffers they have not completed are skipped (and logged).
    pub fn finish(&mut self) {
        self.finish_with(false);
    }

    /// [`Stream::finish`] for a process that is gone: torn-event recovery keeps the
    /// committed prefix of the sub-buffers it left incomplete.
    pub fn finish_dead(&mut self) {
        self.finish_with(true);
    }

    /// Final flush and drain, then closes the files and unmaps the buffer.
    ///
    /// `writers_dead`: the process is gone, so sub-buffers that never completed will never
    /// complete. Their committed prefix is then kept by torn-event recovery (see
    /// [`copy_held_packets`]): every event before the first uncommitted slot of each such
    /// sub-buffer reaches the stream file, the rest is reported as discarded. Never waits
    /// for a writer.
    fn finish_with(&mut self, writers_dead: bool) {
        if self.finished {
            return;
        }
        self.flush();
        self.drain();
        self.refresh_counters();
        if writers_dead && !self.broken && self.shm_intact() && self.file.is_some() {
            if let Some(b) = self.buffer.take() {
                let what = format!("{}/{} cpu {}", self.session, self.channel, self.cpu);
                let events = self.events.clone();
                let identity = self.identity;
                let mut out = HeldCopy::new(&identity, &events);
                out.last_end = self.last.map_or(0, |l| l.timestamp_end);
                // Through `write_packet`: the closing packet, lost-packet counts and the
                // session's output state see recovered packets as any other.
                let r = copy_held_packets(&b, &mut out, true, None, &mut |info, packet| {
                    if self.write_packet(info, packet) {
                        Ok(())
                    } else {
                        Err("the session's output stopped".into())
                    }
                });
                self.buffer = Some(b);
                if let Err(e) = r {
                    crate::log!("{what}: recovery stopped: {e}");
                }
                let r = out.report;
                self.stats.bad_packets += r.bad_packets;
                self.stats.recovered_packets += r.recovered;
                self.stats.recovery_lost = self.stats.recovery_lost.saturating_add(r.lost_events);
                self.stats.undelivered_bytes = self.stats.undelivered_bytes.saturating_add(r.lost_bytes);
                if r.recovered > 0 {
                    crate::log!(
                        "{what}: recovered {} record(s) from {} sub-buffer(s) a dead writer left incomplete; {} byte(s) after an uncommitted slot reported as up to {} lost event(s)",
                        r.records,
                        r.recovered,
                        r.lost_bytes,
                        r.lost_events
                    );
                }
            }
        }
        if !self.broken && !self.snapshot_only {
            self.write_closing_packet();
        }
        if !writers_dead && !self.snapshot_only {
            if let Some(b) = self.buffer.as_ref() {
                let c = b.counters();
                let pending = c.write.wrapping_sub(c.consumed);
                if pending > 0 && pending <= b.config().subbuf_size * b.config().num_subbuf as u64 {
                    self.stats.undelivered_bytes = pending;
                    crate::log!(
                        "{}/{} cpu {}: {pending} bytes in sub-buffers a live writer has not completed; skipped",
                        self.session,
                        self.channel,
                        self.cpu
                    );
                }
            }
        }
        self.buffer = None;
        self.shm_guard = None;
        self.file = None;
        self.index = None;
        self.finished = true;
    }

    /// The buffer, while the stream is not finished (snapshots, post-mortem dumps). Call
    /// [`Stream::shm_intact`] first.
    pub fn buffer(&self) -> Option<&Buffer> {
        self.buffer.as_ref()
    }
}

/// Every stream of one process in one session.
#[derive(Debug)]
pub struct ProcessTrace {
    /// Process id.
    pub pid: i32,
    /// Process name.
    pub procname: String,
    /// The trace directory (`<output>/ust/pid/<procname>-<pid>-<stamp>`); in a snapshot
    /// session it is not created, and its last component names the process's directory
    /// in each snapshot.
    pub dir: PathBuf,
    /// The trace's metadata text (written again into every snapshot).
    pub metadata: String,
    /// Post-mortem trace written when the process died abnormally (snapshot sessions).
    pub post_mortem: Option<PathBuf>,
    /// The process is gone but its buffers are kept (it died abnormally in a snapshot
    /// session): snapshots include it until the session is destroyed.
    pub retained: bool,
    /// Trace UUID.
    pub uuid: [u8; 16],
    /// Mask slot of each channel in the process (index = channel index).
    pub slots: Vec<Option<u32>>,
    /// Streams, channel-major then CPU.
    pub streams: Vec<Arc<Mutex<Stream>>>,
    /// The process's events (for the record walker of `ust trace`).
    pub events: Vec<EventDesc>,
    /// Size of each channel's event context block in bytes (index = stream class id).
    pub context_sizes: Vec<usize>,
    /// TSC parameters of the trace clock (`None`: `CLOCK_MONOTONIC`), sent with every
    /// channel grant.
    pub tsc: Option<ust_core::clock::TscParams>,
    /// The process is gone and its streams are finished.
    pub gone: bool,
    /// Gone, and every file moved into an archive by `ust rotate`: nothing left here.
    pub archived: bool,
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
    /// The trace clock's TSC parameters, `None` for `CLOCK_MONOTONIC`.
    pub tsc: Option<ust_core::clock::TscParams>,
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
    let want = ust_ctf::process_dir(&session.output, p.procname, p.pid, &ust_ctf::datetime::stamp_at(p.registered));
    // A snapshot session writes nothing as it runs: its trace directories are made by
    // each snapshot (`crate::snapshot`).
    let live = !session.snapshot;
    let dir = if live { new_trace_dir(&want)? } else { want };
    let r = fill_process_trace(session, p, next_instance, dir.clone());
    if r.is_err() && live {
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
    let live = !session.snapshot;
    let uuid = *uuid::Uuid::new_v4().as_bytes();
    let text = render_metadata(session, p, uuid);
    let clock = p.tsc.map_or(TraceClock::Monotonic, TraceClock::Tsc);
    if live {
        ust_ctf::metadata::write_atomically(&dir, &text).map_err(io(format!("writing {}/metadata", dir.display())))?;
    }
    let shm_dir = match &session.shm_dir {
        None => None,
        Some(base) => {
            use std::os::unix::fs::DirBuilderExt;
            let d = ust_ctf::process_dir(base, p.procname, p.pid, &ust_ctf::datetime::stamp_at(p.registered));
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&d).map_err(io(format!("creating {}", d.display())))?;
            ust_ctf::metadata::write_atomically(&d, &text).map_err(io(format!("writing {}/metadata", d.display())))?;
            let json = serde_json::to_vec(p.events).map_err(|e| SetupError::Layout(e.to_string()))?;
            std::fs::write(d.join(EVENTS_FILE), json).map_err(io(format!("writing {}/{EVENTS_FILE}", d.display())))?;
            Some(d)
        }
    };
    let mut streams = Vec::new();
    let mut fds = Vec::new();
    let events: Arc<[EventDesc]> = p.events.to_vec().into();
    for (ci, ch) in session.channels.iter().enumerate() {
        let mut chan_fds = Vec::new();
        for cpu in 0..p.ncpus {
            let identity = StreamIdentity { uuid, stream_id: ci as u32, cpu, stream_instance_id: *next_instance };
            *next_instance += 1;
            let cfg = buffer_config(&ch.config, identity);
            let name = ust_ctf::stream_file_name(&ch.name, cpu);
            let (buffer, fd, shm_file, shm_guard) = match &shm_dir {
                Some(d) => {
                    let (b, fd, f) = allocate_file(&cfg, &d.join(&name))?;
                    let size = b.config().file_size().unwrap_or(0) as u64;
                    let guard = crate::sigbus::register(b.map().as_ptr(), b.map().len());
                    (b, fd, Some((f, size)), guard)
                }
                None => {
                    let (b, fd) = allocate(&cfg, &format!("ust-{}-{}-{}", p.pid, ch.name, cpu))?;
                    (b, fd, None, None)
                }
            };
            let files = TraceFiles {
                dir: dir.clone(),
                base: name.clone(),
                max_size: ch.config.tracefile_size,
                max_count: ch.config.tracefile_count,
                current: 0,
                oldest: 0,
            };
            let (file, index) = if live {
                let (file, index) = files.create(0)?;
                (Some(file), Some(index))
            } else {
                (None, None)
            };
            let now = Instant::now();
            let read_period = Duration::from_micros(ch.config.read_timer_us.max(1));
            let switch_period = (ch.config.switch_timer_us > 0).then(|| Duration::from_micros(ch.config.switch_timer_us));
            streams.push(Arc::new(Mutex::new(Stream {
                session: session.name.clone(),
                channel: ch.name.clone(),
                cpu,
                identity,
                buffer: Some(buffer),
                file,
                index,
                events: events.clone(),
                files,
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
                snapshot_only: !live,
                shm_file,
                shm_guard,
                clock,
            })));
            chan_fds.push(fd);
        }
        fds.push(chan_fds);
    }
    let trace = ProcessTrace {
        pid: p.pid,
        procname: p.procname.to_string(),
        dir,
        metadata: text,
        post_mortem: None,
        retained: false,
        uuid,
        slots: vec![None; session.channels.len()],
        streams,
        events: p.events.to_vec(),
        context_sizes: session.channels.iter().map(|c| ust_core::context::block_size(&c.contexts)).collect(),
        tsc: p.tsc,
        gone: false,
        archived: false,
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

/// The TSDL metadata of process `p`'s trace (UUID `uuid`) in `session`: its channels and
/// contexts, its events, the session's clock offset and the process's trace clock.
fn render_metadata(session: &crate::session::Session, p: &ProcessInfo<'_>, uuid: [u8; 16]) -> String {
    let channels: Vec<String> = session.channels.iter().map(|c| c.name.clone()).collect();
    let contexts: Vec<Vec<ust_core::context::ContextType>> = session.channels.iter().map(|c| c.contexts.clone()).collect();
    ust_ctf::metadata::render(&ust_ctf::metadata::TraceMetadata {
        uuid,
        clock_offset_ns: session.clock_offset_ns,
        clock_uuid: &ust_core::clock::boot_id(),
        hostname: &ust_ctf::metadata::hostname(),
        procname: p.procname,
        vpid: p.pid,
        trace_name: &session.name,
        creation_datetime: &ust_ctf::datetime::iso_at(session.created),
        channels: &channels,
        contexts: &contexts,
        events: p.events,
        clock_description: &p.tsc.map_or(TraceClock::Monotonic, TraceClock::Tsc).description(),
    })
}

/// Writes (or rewrites) the metadata of process `p`'s trace in `dir` for `session`: temporary
/// file, then rename, so a reader never sees half of it. Rewritten when the process
/// registers tracepoints late ([`ust_core::protocol::AppMessage::RegisterEvents`]), before
/// any of them is enabled.
///
/// # Errors
/// The I/O error.
pub fn write_metadata(session: &crate::session::Session, p: &ProcessInfo<'_>, dir: &std::path::Path, uuid: [u8; 16]) -> std::io::Result<()> {
    ust_ctf::metadata::write_atomically(dir, &render_metadata(session, p, uuid))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;
    use ringbuffer::{Reservation, SlotSize};
    use ust_core::{event_header, FieldDesc, FieldType, IntegerType, Level};

    fn events() -> Vec<EventDesc> {
        vec![EventDesc {
            provider: Cow::Borrowed("t"),
            name: Cow::Borrowed("ev"),
            level: Level::Info,
            fields: Cow::Owned(vec![FieldDesc { name: Cow::Borrowed("v"), ty: FieldType::Integer(IntegerType::U64) }]),
            location: Cow::Borrowed(""),
        }]
    }

    fn reserve(b: &Buffer, ts: u64) -> Reservation {
        let clock = move || ts;
        let size = SlotSize { compact: 4 + 8, extended: 13 + 8 };
        b.reserve(&CtfPacketLayout, &clock, size).unwrap()
    }

    fn commit(b: &Buffer, mut r: Reservation, v: u64) {
        let (ts, ext) = (r.timestamp, r.extended);
        let slot = b.slot(&mut r);
        let (byte0, len) = event_header::write(slot, 1, ts, ext);
        slot[len..len + 8].copy_from_slice(&v.to_le_bytes());
        b.commit(&CtfPacketLayout, r, byte0);
    }

    /// Three records, committed out of order (third, first) and the second never: the
    /// recovered packet keeps the first only, ends its content there, and reports the
    /// rest as discarded in this packet and every later one.
    #[test]
    fn torn_slot_keeps_the_committed_prefix_whatever_the_commit_order() {
        for mode in [Mode::Discard, Mode::Overwrite] {
            let id = StreamIdentity { uuid: [7; 16], stream_id: 0, cpu: 0, stream_instance_id: 1 };
            let cfg = BufferConfig { subbuf_size: 4096, num_subbuf: 4, mode, header_size: HEADER_SIZE as u32, stream: id };
            let map = memmap2::MmapOptions::new().len(cfg.file_size().unwrap()).map_anon().unwrap();
            let b = Buffer::create(map.into(), &cfg).unwrap();
            let (r1, r2, r3) = (reserve(&b, 100), reserve(&b, 200), reserve(&b, 300));
            commit(&b, r3, 3);
            commit(&b, r1, 1);
            drop(r2); // its writer died between reserve and commit
            b.flush(&CtfPacketLayout, &|| 400u64);
            let ev = events();
            let mut held = HeldCopy::new(&id, &ev);
            let mut packets = Vec::new();
            copy_held_packets(&b, &mut held, true, None, &mut |info, p| {
                packets.push((*info, p.to_vec()));
                Ok(())
            })
            .unwrap();
            assert_eq!(packets.len(), 1, "{mode:?}");
            let (info, p) = &packets[0];
            assert_eq!(info.content_size, HEADER_SIZE as u64 + 12, "{mode:?}: only the first record");
            assert_eq!(info.events_discarded, 2, "{mode:?}: 24 lost bytes / 12-byte records");
            assert!(info.timestamp_begin <= 100 && info.timestamp_end >= 100);
            let (_, w) = ust_ctf::reader::RecordWalker::new(&ev, p).unwrap();
            let recs: Vec<_> = w.collect::<Result<_, _>>().unwrap();
            assert_eq!(recs.len(), 1);
            assert_eq!(recs[0].payload, 1u64.to_le_bytes());
            assert_eq!((held.report.recovered, held.report.lost_bytes, held.report.lost_events), (1, 24, 2));
        }
    }

    #[test]
    fn record_sizes_come_from_the_headers_and_descriptions() {
        let ev = events();
        let mut rec = [0u8; 12];
        let (b0, _) = event_header::write(&mut rec, 1, 5, false);
        rec[0] = b0;
        assert_eq!(ust_ctf::reader::record_size(&ev, &rec), Some(12));
        assert_eq!(ust_ctf::reader::record_size(&ev, &rec[..11]), None, "cut short");
        rec[0] = 0;
        assert_eq!(ust_ctf::reader::record_size(&ev, &rec), None, "uncommitted");
        assert_eq!(ust_ctf::reader::min_record_size(&ev), 12);
    }
}
