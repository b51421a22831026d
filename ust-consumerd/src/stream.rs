//! The daemon's side of one stream: a ring buffer it reads (or, after the process died,
//! drains and finishes), its stream file and index file, and the write policy (drain
//! passes, tracefile rotation, flushes, what to do with a bad packet).
//!
//! **Torn events** (docs/DESIGN.md#torn-events): when a process dies,
//! [`Stream::finish_dead`] drains what was delivered, then
//! [`ust_ctf::held::copy_held_packets`] copies the sub-buffers that will now never
//! complete, keeping only their committed prefix.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ringbuffer::{Buffer, StreamIdentity};
use ust_core::clock::TraceClock;
use ust_core::packet::{CtfPacketLayout, PacketInfo, HEADER_SIZE};
use ust_core::EventDesc;
use ust_ctf::held::{copy_held_packets, HeldCopy};
use ust_ctf::index::{IndexEntry, IndexFile, INDEX_DIR};
use ust_ctf::outdir::TraceDir;
use ust_ctf::stream::StreamFile;

use crate::session::ChannelConfig;

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
    /// A network session's stream: packets go to the relay daemon instead of files.
    pub relay: Option<crate::relay::RelayStream>,
    /// A buffer shared by many processes (per-UID): watched for sub-buffers a dead
    /// writer left uncommitted ([`crate::dead_writers`]).
    pub dead_watch: Option<crate::dead_writers::Watch>,
    /// Size of the channel's event context block after each event header, bytes (record
    /// sizes in torn-event recovery).
    pub context_size: usize,
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
    /// The trace directory, where the files are created ([`TraceDir`]: as the session's
    /// owner, never through a link); `None` where none are written (a snapshot or network
    /// session).
    pub dir: Option<TraceDir>,
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
    ///
    /// # Errors
    /// The I/O error, its message naming the file.
    pub fn create(&self, k: u64) -> std::io::Result<(StreamFile, IndexFile)> {
        let (dir, name) = (self.local()?, self.name(k));
        let ctx = |what: String| move |e: std::io::Error| std::io::Error::new(e.kind(), format!("creating {what}: {e}"));
        let file = StreamFile::create_written_back(dir, &name).map_err(ctx(format!("{}/{name}", dir.path().display())))?;
        let index = IndexFile::create(dir, &name).map_err(ctx(format!("{}/index/{name}.idx", dir.path().display())))?;
        Ok((file, index))
    }

    /// The trace directory; an error where none is written.
    fn local(&self) -> std::io::Result<&TraceDir> {
        self.dir.as_ref().ok_or_else(|| std::io::Error::other(format!("stream {}: no trace directory", self.base)))
    }

    /// Moves every piece on disk (stream and index files) into `to` (and `to/index`).
    fn move_to(&self, to: &TraceDir) -> std::io::Result<()> {
        let dir = self.local()?;
        let to_index = to.dir(INDEX_DIR, 0o750)?;
        let index = match dir.existing(INDEX_DIR) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            r => Some(r?),
        };
        let gone = |r: std::io::Result<()>| match r {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
        for k in self.oldest..=self.current {
            let name = self.name(k);
            gone(dir.rename_to(&name, to, &name))?;
            if let Some(index) = &index {
                let idx = format!("{name}.idx");
                gone(index.rename_to(&idx, &to_index, &idx))?;
            }
        }
        Ok(())
    }
}

/// What a new [`Stream`] is made of, besides its buffer (see [`Stream::new`]).
#[derive(Debug)]
pub struct StreamSetup<'a> {
    /// Session name.
    pub session: &'a str,
    /// Channel name.
    pub channel: &'a str,
    /// The channel's configuration (timers, sub-buffer count).
    pub config: &'a ChannelConfig,
    /// The stream's identity (uuid, stream class, CPU, instance).
    pub identity: StreamIdentity,
    /// The process's event descriptions (index `i` has CTF id `i + 1`).
    pub events: Arc<[EventDesc]>,
    /// Where its files go.
    pub files: TraceFiles,
    /// False for a snapshot session: nothing is drained to files until a snapshot.
    pub live: bool,
    /// The trace clock of its packets.
    pub clock: TraceClock,
    /// A network session's stream on the relay daemon (then no file is created).
    pub relay: Option<crate::relay::RelayStream>,
}

/// The file behind a `--shm-path` buffer (and its size at creation), and the mapping's
/// registration with [`crate::sigbus`]; both `None` for a sealed memfd.
#[derive(Debug, Default)]
pub struct StreamShm {
    /// The buffer file and its size.
    pub file: Option<(std::fs::File, u64)>,
    /// The SIGBUS guard of the daemon's mapping of it.
    pub guard: Option<crate::sigbus::Guard>,
}

impl Stream {
    /// A stream over `buffer`, with its first stream and index files created now when
    /// `setup.live`, timers starting now, and errors reported to `output_error`.
    ///
    /// # Errors
    /// Creating the files failed.
    pub fn new(setup: StreamSetup<'_>, buffer: Buffer, output_error: crate::session::OutputError, shm: StreamShm) -> std::io::Result<Stream> {
        let (file, index) = if setup.live && setup.relay.is_none() {
            let (file, index) = setup.files.create(0)?;
            (Some(file), Some(index))
        } else {
            (None, None)
        };
        let now = Instant::now();
        let mut relay = setup.relay;
        if let Some(r) = relay.as_mut() {
            // Before the application has the buffer: no packet of it can begin earlier.
            r.created_ts = ringbuffer::Clock::now(&setup.clock);
        }
        let read_period = Duration::from_micros(setup.config.read_timer_us.max(1));
        let switch_period = (setup.config.switch_timer_us > 0).then(|| Duration::from_micros(setup.config.switch_timer_us));
        Ok(Stream {
            session: setup.session.to_string(),
            channel: setup.channel.to_string(),
            cpu: setup.identity.cpu,
            identity: setup.identity,
            buffer: Some(buffer),
            file,
            index,
            events: setup.events,
            files: setup.files,
            stats: StreamStats::default(),
            num_subbuf: setup.config.num_subbuf,
            read_period,
            switch_period,
            next_read: now + read_period,
            next_switch: now + switch_period.unwrap_or_default(),
            finished: false,
            broken: false,
            last: None,
            output_error,
            snapshot_only: !setup.live,
            shm_file: shm.file,
            shm_guard: shm.guard,
            clock: setup.clock,
            relay,
            dead_watch: None,
            context_size: 0,
        })
    }

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
                Err(e @ (ringbuffer::ReadError::ContentSize { .. } | ringbuffer::ReadError::PacketSeq { .. })) if buffer.skip_subbuf().is_ok() => {
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
                    Ok(info) if info.packet_seq_num != sb.packet_seq_num || info.content_size != sb.content_size || info.packet_size != sb.packet_size => {
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
                crate::log!("{}/{} cpu {}: releasing sub-buffer failed ({e}); this stream is no longer read", self.session, self.channel, self.cpu);
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
            crate::log!("session {}: {msg}; the session's output is stopped (every packet already written is kept, whole); other sessions go on", self.session);
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
            if let Some(dir) = &self.files.dir {
                let _ = dir.remove(&name);
                let _ = dir.remove(&format!("{INDEX_DIR}/{name}.idx"));
            }
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
    pub fn rotate_chunk(&mut self, to: &TraceDir) -> std::io::Result<()> {
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
            let (f, i) = self.files.create(0)?;
            self.file = Some(f);
            self.index = Some(i);
        }
        Ok(())
    }

    fn write_packet(&mut self, info: &PacketInfo, packet: &[u8]) -> bool {
        if let Some(r) = self.relay.as_mut() {
            // A network session: the packet goes to the relay daemon, not to a file.
            if self.output_error.get().is_some() || !r.send(info, packet) {
                self.stats.unwritten_packets += 1;
                return false;
            }
            self.count_written(info, packet.len());
            return true;
        }
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
        self.count_written(info, packet.len());
        true
    }

    /// Counts a packet written (to a file or the relay daemon).
    fn count_written(&mut self, info: &PacketInfo, len: usize) {
        // Every value here comes from shared memory (an app can write any of them):
        // wrapping/saturating arithmetic only, the daemon must not panic on them.
        let expected = self.last.map_or(0, |l| l.seq.wrapping_add(1));
        self.stats.lost_packets = self.stats.lost_packets.saturating_add(info.packet_seq_num.saturating_sub(expected));
        self.stats.packets += 1;
        self.stats.bytes = self.stats.bytes.saturating_add(len as u64);
        self.stats.discarded = self.stats.discarded.max(info.events_discarded);
        self.last = Some(LastPacket { seq: info.packet_seq_num, timestamp_end: info.timestamp_end, events_discarded: info.events_discarded });
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
        self.write_empty_packet(now, seq, discarded.max(last_discarded));
    }

    /// Writes a packet with a header and context only (no event): at `timestamp`, with
    /// sequence number `seq` and the cumulative `events_discarded`. The closing packet,
    /// and a live stream's first packet ([`crate::relay::live`]). False when it was not
    /// written.
    pub fn write_empty_packet(&mut self, timestamp: u64, seq: u64, events_discarded: u64) -> bool {
        let mut header = [0u8; HEADER_SIZE];
        ringbuffer::PacketLayout::write_end(
            &CtfPacketLayout,
            &self.identity,
            &mut header,
            &ringbuffer::PacketEnd {
                timestamp_begin: timestamp,
                timestamp_end: timestamp,
                content_size: HEADER_SIZE as u64,
                packet_size: HEADER_SIZE as u64,
                packet_seq_num: seq,
                events_discarded,
            },
        );
        let info = match PacketInfo::parse(&header, &self.identity) {
            Ok(i) => i,
            Err(e) => {
                crate::log!("{}/{} cpu {}: empty packet not written: {e}", self.session, self.channel, self.cpu);
                return false;
            }
        };
        self.write_packet(&info, &header)
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
        if writers_dead {
            // A shared buffer: complete what dead writers left open first, so the records
            // after their slots are kept (every writer is gone or has confirmed).
            crate::dead_writers::complete_all(self);
        }
        self.drain();
        self.refresh_counters();
        if writers_dead && !self.broken && self.shm_intact() && (self.file.is_some() || self.relay.is_some()) {
            if let Some(b) = self.buffer.take() {
                let what = format!("{}/{} cpu {}", self.session, self.channel, self.cpu);
                let events = self.events.clone();
                let identity = self.identity;
                let mut out = HeldCopy::new(&identity, &events).with_context_size(self.context_size);
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
                    crate::log!("{}/{} cpu {}: {pending} bytes in sub-buffers a live writer has not completed; skipped", self.session, self.channel, self.cpu);
                }
            }
        }
        self.buffer = None;
        self.shm_guard = None;
        self.file = None;
        self.index = None;
        // The relay daemon closes the stream once it has its last packet; a live viewer
        // then sees the stream end.
        if let Some(r) = self.relay.as_mut() {
            r.close();
        }
        self.finished = true;
    }

    /// The buffer, while the stream is not finished (snapshots, post-mortem dumps). Call
    /// [`Stream::shm_intact`] first.
    pub fn buffer(&self) -> Option<&Buffer> {
        self.buffer.as_ref()
    }
}
