//! The daemon's side of one stream: a ring buffer it reads (or, after the process died,
//! drains and finishes), where its packets go (`Sink`: stream and index files, the relay
//! daemon, or nowhere until a snapshot), and the write policy (drain passes, timers,
//! tracefile rotation, flushes, what to do with a bad packet).
//!
//! **Torn events** (docs/DESIGN.md#torn-events): when a process dies,
//! [`Stream::finish_dead`] drains what was delivered, then
//! [`ust_ctf::held::copy_held_packets`] copies the sub-buffers that will now never
//! complete, keeping only their committed prefix.

mod files;
mod reclaim;
mod timers;

pub use files::TraceFiles;
pub use reclaim::AutoReclaimTimer;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ringbuffer::{Reader, StreamIdentity};
use ust_core::clock::TraceClock;
use ust_core::packet::{CtfPacketLayout, PacketInfo, HEADER_SIZE};
use ust_core::EventDesc;
use ust_ctf::held::{copy_held_packets, HeldCopy};
use ust_ctf::outdir::TraceDir;

use crate::model::session::{ChannelConfig, OutputError};
use crate::ops::dead_writers::Watch;
use crate::ops::relay::RelayStream;
use files::FileSink;

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

/// Where a stream's packets go.
#[derive(Debug)]
enum Sink {
    /// Stream and index files in the trace directory.
    Files(FileSink),
    /// A network session: the relay daemon, which writes the trace.
    Relay(RelayStream),
    /// A snapshot session: nothing is drained (no live reader, nothing consumed); `ust
    /// snapshot record` and post-mortem dumps copy what the buffer holds.
    SnapshotOnly,
}

/// When the drain loop next reads and flushes a stream (LTTng's consumer read and switch
/// timers), and what it watches between reads (module `timers`).
#[derive(Debug)]
struct Timers {
    read_period: Duration,
    switch_period: Option<Duration>,
    next_read: Instant,
    next_switch: Instant,
    /// Whether the stream is read as its writers fill it, not only every read period: a
    /// discard-mode channel with the default read timer (see `timers::Watch`).
    watch: Option<timers::Watch>,
}

/// One per-CPU buffer of one channel of one process (or of one user's processes), and
/// where its packets go.
pub struct Stream {
    /// `<session>/<channel> cpu <cpu>`, for log lines.
    what: String,
    session: String,
    channel: String,
    identity: StreamIdentity,
    buffer: Option<Reader>,
    sink: Sink,
    /// The process's events: the record-size callback of torn-event recovery.
    events: Arc<[EventDesc]>,
    stats: StreamStats,
    num_subbuf: u32,
    timers: Timers,
    /// Files closed and buffer unmapped: nothing more will be read.
    finished: bool,
    /// The buffer's stream-wide control words (`write`, `consumed`, the id table) hold
    /// values the algorithm cannot produce (a scribbling application): reported once, then
    /// the stream is left alone. A single packet's scribbled words only cost that packet
    /// ([`ringbuffer::Reader::skip_subbuf`], counted in `bad_packets`).
    broken: bool,
    last: Option<LastPacket>,
    /// The session's output state: once set, this stream writes nothing more.
    output_error: OutputError,
    shm: StreamShm,
    /// The trace clock the process writes with; switches read the same one.
    clock: TraceClock,
    /// A buffer shared by many processes (per-UID): watched for sub-buffers a dead
    /// writer left uncommitted ([`crate::ops::dead_writers`]).
    dead_watch: Option<Watch>,
    /// Size of the channel's event context block after each event header, bytes (record
    /// sizes in torn-event recovery).
    context_size: usize,
    /// Memory reclaim: what was given back, the channel's automatic policy, a `--no-wait`
    /// request waiting for consumption ([`reclaim`]).
    reclaim: reclaim::ReclaimSide,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").field("what", &self.what).field("stats", &self.stats).field("finished", &self.finished).finish()
    }
}

/// A stream as the daemon's workers share it: locked by whoever drains, flushes or
/// copies it (never under the state lock).
pub type SharedStream = Arc<std::sync::Mutex<Stream>>;

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
    /// Where its files go; `None` for a stream that writes none as the session runs (a
    /// snapshot session's: nothing is drained until a snapshot; a network session's).
    pub files: Option<TraceFiles>,
    /// The trace clock of its packets.
    pub clock: TraceClock,
    /// A network session's stream on the relay daemon (then no file is created).
    pub relay: Option<RelayStream>,
    /// Size of the channel's event context block, bytes.
    pub context_size: usize,
    /// A per-UID stream: the watch for writers that die in it.
    pub dead_watch: Option<Watch>,
}

/// The file behind a `--shm-path` buffer (and its size at creation), and the mapping's
/// registration with [`crate::ops::sigbus`]; both `None` for a sealed memfd.
#[derive(Debug, Default)]
pub struct StreamShm {
    /// The buffer file and the size it must keep (a file cannot be sealed: checked before
    /// every access, so that a shrunk file does not SIGBUS the daemon).
    pub file: Option<(std::fs::File, u64)>,
    /// The SIGBUS guard of the daemon's mapping of it, released with the buffer.
    pub guard: Option<crate::ops::sigbus::Guard>,
}

impl Stream {
    /// A stream over `buffer`, with its first stream and index files created now when it
    /// has `setup.files` (and is not a network session's), timers starting now, and errors
    /// reported to `output_error`.
    ///
    /// # Errors
    /// Creating the files failed.
    pub fn new(setup: StreamSetup<'_>, buffer: Reader, output_error: OutputError, shm: StreamShm) -> std::io::Result<Stream> {
        let sink = match setup.relay {
            Some(mut r) => {
                // Before the application has the buffer: no packet of it can begin earlier.
                r.created_ts = ringbuffer::Clock::now(&setup.clock);
                Sink::Relay(r)
            }
            None => match setup.files {
                Some(files) => Sink::Files(FileSink::new(files, true)?),
                None => Sink::SnapshotOnly,
            },
        };
        let now = Instant::now();
        let read_period = Duration::from_micros(setup.config.read_timer_us.max(1));
        let switch_period = (setup.config.switch_timer_us > 0).then(|| Duration::from_micros(setup.config.switch_timer_us));
        let cpu = setup.identity.cpu;
        // A snapshot session's stream is never drained: nothing to watch.
        let watch = timers::Watch::for_channel(setup.config, now).filter(|_| !matches!(sink, Sink::SnapshotOnly));
        Ok(Stream {
            what: format!("{}/{} cpu {cpu}", setup.session, setup.channel),
            session: setup.session.to_string(),
            channel: setup.channel.to_string(),
            identity: setup.identity,
            buffer: Some(buffer),
            sink,
            events: setup.events,
            stats: StreamStats::default(),
            num_subbuf: setup.config.num_subbuf,
            timers: Timers { read_period, switch_period, next_read: now + read_period, next_switch: now + switch_period.unwrap_or_default(), watch },
            finished: false,
            broken: false,
            last: None,
            output_error,
            shm,
            clock: setup.clock,
            dead_watch: setup.dead_watch,
            context_size: setup.context_size,
            reclaim: reclaim::ReclaimSide::new(setup.config, now),
        })
    }

    /// The channel's name.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The name of its stream file (and of its files in snapshots): `<channel>_<cpu>`.
    pub fn file_name(&self) -> String {
        ust_ctf::stream_file_name(&self.channel, self.identity.cpu)
    }

    /// What every packet of this buffer must name.
    pub fn identity(&self) -> &StreamIdentity {
        &self.identity
    }

    /// Size of the channel's event context block after each event header, bytes.
    pub fn context_size(&self) -> usize {
        self.context_size
    }

    /// Counts so far.
    pub fn stats(&self) -> &StreamStats {
        &self.stats
    }

    /// LTTng's buffer usage sample: bytes written and not yet consumed (`write −
    /// consumed`, at most the ring's size: the words are the application's to scribble
    /// on), and the ring's size (sub-buffer size × count). `None` once finished.
    pub fn buffer_usage(&self) -> Option<(u64, u64)> {
        let b = self.buffer.as_ref()?;
        let cap = b.config().subbuf_size.saturating_mul(u64::from(b.config().num_subbuf));
        let c = b.counters();
        Some((c.write.saturating_sub(c.consumed).min(cap), cap))
    }

    /// True once finished: files closed and buffer unmapped.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The process's events grew (late registrations, or a per-UID trace's registry):
    /// torn-event recovery sizes records with the new list.
    pub fn set_events(&mut self, events: Arc<[EventDesc]>) {
        self.events = events;
    }

    /// A network session's stream that is not closed: its relay stream id and the
    /// sequence number of its last packet, for the data-pending round at `stop`.
    pub fn relay_pending(&self) -> Option<(u64, u64)> {
        match &self.sink {
            Sink::Relay(r) if !r.is_closed() => Some((r.handle, r.last_seq())),
            _ => None,
        }
    }

    /// Reads every delivered sub-buffer: `get_subbuf`, copy out of shared memory, validate
    /// the copy against [`Stream::identity`], append it to the stream file with one write,
    /// append its index entry, `put_subbuf`. A bad packet is logged and skipped; a write
    /// error closes the stream's files (later packets are released unread). Returns the
    /// number of packets written.
    pub fn drain(&mut self) -> u64 {
        if self.broken || matches!(self.sink, Sink::SnapshotOnly) || !self.shm_intact() {
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
                    crate::log!("{}: bad packet skipped: {e}", self.what);
                    self.stats.bad_packets += 1;
                    continue;
                }
                Err(e) => {
                    crate::log!("{}: buffer corrupted ({e}); this stream is no longer read, other streams go on", self.what);
                    self.broken = true;
                    break;
                }
            };
            let copied = buffer.copy_subbuf(&sb, &mut scratch);
            if let Err(e) = copied {
                crate::log!("{}: copying sub-buffer failed: {e}; skipped", self.what);
                self.stats.bad_packets += 1;
            } else {
                match PacketInfo::parse(&scratch, &self.identity) {
                    // The header is app-writable memory: it must agree with what the ring
                    // buffer itself validated for this sub-buffer, or the packet is bad.
                    Ok(info) if info.packet_seq_num != sb.packet_seq_num || info.content_size != sb.content_size || info.packet_size != sb.packet_size => {
                        crate::log!(
                            "{}: bad packet skipped: header says seq {} content {} size {}, the ring buffer says seq {} content {} size {}",
                            self.what,
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
                        crate::log!("{}: bad packet skipped: {e}", self.what);
                        self.stats.bad_packets += 1;
                    }
                }
            }
            if let Err(e) = buffer.put_subbuf(sb) {
                crate::log!("{}: releasing sub-buffer failed ({e}); this stream is no longer read", self.what);
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
        if let Sink::Files(f) = &mut self.sink {
            f.close();
        }
    }

    /// Ends the current trace chunk (`ust rotate`, `ust clear`): a reader-side switch and
    /// a drain, so that what was recorded so far is on disk, then every piece of the stream
    /// is moved into `to` (a process directory of an archive) and fresh files are started
    /// (piece 0) where they were, unless the stream is finished. Nothing to do for a stream
    /// that writes no file (network and snapshot sessions: their callers refuse them).
    ///
    /// # Errors
    /// The I/O error of the move or of creating the new files, naming the stream's file.
    pub fn rotate_chunk(&mut self, to: &TraceDir) -> std::io::Result<()> {
        if !matches!(self.sink, Sink::Files(_)) {
            return Ok(());
        }
        if !self.finished {
            self.flush();
            self.drain();
        }
        let reopen = !self.finished;
        let Sink::Files(f) = &mut self.sink else { return Ok(()) };
        f.rotate(to, reopen).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", f.files.base)))
    }

    /// Writes one validated packet where the stream's packets go; false when it was not
    /// written (counted in `unwritten_packets`).
    fn write_packet(&mut self, info: &PacketInfo, packet: &[u8]) -> bool {
        let stopped = self.output_error.get().is_some();
        let written = match &mut self.sink {
            // A network session: the packet goes to the relay daemon, not to a file.
            Sink::Relay(r) => Ok(!stopped && r.send(info, packet)),
            Sink::Files(f) => {
                if stopped {
                    f.close();
                }
                f.append(packet, info, &self.what)
            }
            Sink::SnapshotOnly => Ok(false),
        };
        match written {
            Ok(true) => {
                self.count_written(info, packet.len());
                true
            }
            Ok(false) => {
                self.stats.unwritten_packets += 1;
                false
            }
            Err(e) => {
                self.output_failed(&e.path, &e.error);
                self.stats.unwritten_packets += 1;
                false
            }
        }
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
    /// and a live stream's first packet ([`Stream::live_tick`]). False when it was not
    /// written.
    fn write_empty_packet(&mut self, timestamp: u64, seq: u64, events_discarded: u64) -> bool {
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
                crate::log!("{}: empty packet not written: {e}", self.what);
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
    /// SIGBUS handler of [`crate::ops::sigbus`] turns that into zero pages the reader skips.
    fn shm_intact(&mut self) -> bool {
        let Some((f, size)) = self.shm.file.as_ref() else { return true };
        if self.broken {
            return false;
        }
        match f.metadata() {
            Ok(m) if m.len() >= *size => true,
            r => {
                crate::log!(
                    "{}: buffer file shrunk or unreadable ({}); this stream is no longer read",
                    self.what,
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
            self.look_for_dead_writers(None);
        }
        self.drain();
        self.refresh_counters();
        let open = match &self.sink {
            Sink::Files(f) => f.is_open(),
            Sink::Relay(_) => true,
            Sink::SnapshotOnly => false,
        };
        if writers_dead && !self.broken && self.shm_intact() && open {
            if let Some(b) = self.buffer.take() {
                let what = self.what.clone();
                let events = self.events.clone();
                let identity = self.identity;
                // Recovered packets go on from the last packet written (time order, and a
                // cumulative discarded count that never goes down).
                let (end, discarded) = self.last.map_or((0, 0), |l| (l.timestamp_end, l.events_discarded));
                let mut out = HeldCopy::new(&identity, &events).with_context_size(self.context_size).after(end, discarded);
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
                if r.dropped > 0 {
                    crate::log!("{what}: {} recovered packet(s) dropped: no bounds place them in time order after the packets before them (their records counted as discarded)", r.dropped);
                }
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
        let snapshot_only = matches!(self.sink, Sink::SnapshotOnly);
        if !self.broken && !snapshot_only {
            self.write_closing_packet();
        }
        if !writers_dead && !snapshot_only {
            if let Some(b) = self.buffer.as_ref() {
                let c = b.counters();
                let pending = c.write.wrapping_sub(c.consumed);
                if pending > 0 && pending <= b.config().subbuf_size * b.config().num_subbuf as u64 {
                    self.stats.undelivered_bytes = pending;
                    crate::log!("{}: {pending} bytes in sub-buffers a live writer has not completed; skipped", self.what);
                }
            }
        }
        self.buffer = None;
        self.shm.guard = None;
        match &mut self.sink {
            Sink::Files(f) => f.close(),
            // The relay daemon closes the stream once it has its last packet; a live
            // viewer then sees the stream end.
            Sink::Relay(r) => r.close(),
            Sink::SnapshotOnly => {}
        }
        self.finished = true;
    }

    /// Flushes the buffer and hands it out for a copy of the packets it holds (snapshots,
    /// post-mortem dumps); `None` for a finished or broken stream, or one whose
    /// `--shm-path` file was shrunk.
    pub fn flushed_buffer(&mut self) -> Option<&Reader> {
        if self.finished || self.broken {
            return None;
        }
        self.flush();
        if !self.shm_intact() {
            return None;
        }
        self.buffer.as_ref()
    }

    /// `ust clear` of a snapshot session: flushes the buffer and releases every packet it
    /// holds unread. Returns the sub-buffers discarded.
    pub fn discard_held(&mut self) -> u64 {
        if self.finished && self.buffer.is_none() {
            return 0;
        }
        self.flush();
        if !self.shm_intact() {
            return 0;
        }
        let Some(b) = self.buffer.as_ref() else { return 0 };
        let mut emptied = 0;
        while let Ok(Some(sb)) = b.get_subbuf() {
            if b.put_subbuf(sb).is_err() {
                break;
            }
            emptied += 1;
        }
        emptied
    }
}
