//! The stream file of one CPU ([`CpuStream`]), written packet by packet: ftrace records
//! decoded into their CTF class, events of given values ([`Given`]), the state dump, losses
//! (`events_discarded`) and the per-stream counters ([`StreamStats`]).

use ringbuffer::{PacketEnd, PacketLayout, StreamIdentity};
use ust_core::event_header;
use ust_core::packet::{CtfPacketLayout, PacketInfo, HEADER_SIZE};
use ust_ctf::outdir::TraceDir;
use ust_ctf::writer::{StreamWriter, WriteBack};

use super::table::EventTable;
use super::{CHANNEL, STATEDUMP_EVENT};
use crate::captured::CallArgs;
use crate::ctf_type::{CtfType, Source};
use crate::format::{dyn_string, probe_text, read_uint, FieldKind};

/// A packet is closed once its content reaches this many bytes.
pub const PACKET_TARGET: usize = 64 * 1024;

/// A value for a [`Source::Given`] field.
#[derive(Clone, Debug)]
pub enum Given<'a> {
    /// An integer (written in the field's size).
    Int(i64),
    /// Text (truncated to the field; NUL-padded for text arrays).
    Text(&'a str),
    /// The elements of a [`CtfType::U64Seq`], a [`CtfType::Seq`] or a [`CtfType::IntArray`]
    /// (each truncated to the element size; an array takes the first `n`, zero-padded).
    U64s(&'a [u64]),
    /// Bytes of a [`CtfType::String`] (a user-space string, not necessarily UTF-8; NULs are
    /// left out) or a [`CtfType::Text`].
    Bytes(&'a [u8]),
}

/// The captured arguments of the `sys_enter` record of thread `tid` (ftrace's
/// `common_pid`), system call `nr`, with `args`, at `ts` (ns): what
/// [`CpuStream::push_record_joined`] asks (`join(ts, tid, nr, args)`).
pub type Join<'a> = dyn FnMut(u64, i32, u32, &[u64; 6]) -> Option<CallArgs> + 'a;

/// Counters of one CPU stream.
#[derive(Clone, Debug, Default)]
pub struct StreamStats {
    /// Events written per class index.
    pub counts: Vec<u64>,
    /// Events lost before they were written (ftrace's missed events, perf's lost records,
    /// records the merge had to drop): the stream's cumulative `events_discarded`.
    pub lost: u64,
    /// Records or pages that could not be decoded (skipped).
    pub bad: u64,
    /// Packets written.
    pub packets: u64,
}

/// The stream file of one CPU, written packet by packet.
#[derive(Debug)]
pub struct CpuStream {
    table: std::sync::Arc<EventTable>,
    cpu: u32,
    uuid: [u8; 16],
    /// `stream_instance_id` of the packet header and index.
    instance: u64,
    writer: StreamWriter,
    buf: Vec<u8>,
    begin: Option<u64>,
    last_ts: u64,
    seq: u64,
    /// Counters so far.
    pub stats: StreamStats,
}

impl CpuStream {
    /// Creates `dir/channel0_<cpu>` and its index `dir/index/channel0_<cpu>.idx`, through
    /// `dir` ([`TraceDir`]: as its owner, never through a link); stream instance id: the CPU.
    ///
    /// # Errors
    /// The I/O error, or the refusal of what is in the way.
    pub fn create(dir: &TraceDir, table: std::sync::Arc<EventTable>, uuid: [u8; 16], cpu: u32) -> std::io::Result<CpuStream> {
        Self::create_named(dir, &ust_ctf::stream_file_name(CHANNEL, cpu), table, uuid, cpu, u64::from(cpu))
    }

    /// Creates `dir/<name>` and its index: a stream whose packets say `cpu_id` = `cpu` and
    /// `stream_instance_id` = `instance` (unique within the trace: babeltrace2 takes the
    /// files of one instance id as one stream).
    ///
    /// # Errors
    /// The I/O error, or the refusal of what is in the way.
    pub fn create_named(dir: &TraceDir, name: &str, table: std::sync::Arc<EventTable>, uuid: [u8; 16], cpu: u32, instance: u64) -> std::io::Result<CpuStream> {
        let writer = StreamWriter::create(dir, name, WriteBack::Cached)?;
        let n = table.events.len();
        Ok(CpuStream {
            table,
            cpu,
            uuid,
            instance,
            writer,
            buf: vec![0; HEADER_SIZE],
            begin: None,
            last_ts: 0,
            seq: 0,
            stats: StreamStats { counts: vec![0; n], ..Default::default() },
        })
    }

    fn header(&mut self, id: u32, ts: u64, tid: i32) -> u64 {
        let ts = ts.max(self.last_ts);
        let extended = self.begin.is_none() || ts - self.last_ts >= 1 << event_header::COMPACT_TIMESTAMP_BITS;
        if self.begin.is_none() {
            self.begin = Some(ts);
        }
        let mut h = [0u8; event_header::EXTENDED_SIZE];
        let (b0, len) = event_header::write(&mut h, id, ts, extended);
        h[0] = b0;
        self.buf.extend_from_slice(&h[..len]);
        self.buf.extend_from_slice(&tid.to_le_bytes());
        self.last_ts = ts;
        ts
    }

    /// Appends the state-dump record of one task.
    ///
    /// # Errors
    /// The I/O error of a packet flush.
    pub fn push_given(&mut self, class: usize, ts: u64, tid: i32, values: &[Given<'_>]) -> std::io::Result<()> {
        let table = self.table.clone();
        let Some(ev) = table.events.get(class) else { return Ok(()) };
        let mark = self.buf.len();
        let save = (self.begin, self.last_ts);
        self.header(ev.id, ts, tid);
        for (f, v) in ev.fields.iter().zip(values.iter().chain(std::iter::repeat(&Given::Int(0)))) {
            match (&f.ty, v) {
                (CtfType::Int { bytes, .. }, Given::Int(x)) => self.buf.extend_from_slice(&x.to_le_bytes()[..*bytes]),
                (CtfType::Text(n), Given::Text(t)) => {
                    let mut b = t.as_bytes().to_vec();
                    b.retain(|&c| c != 0);
                    b.resize(*n as usize, 0);
                    self.buf.extend_from_slice(&b);
                }
                (CtfType::Text(n), Given::Bytes(t)) => {
                    let mut b: Vec<u8> = t.iter().copied().filter(|&c| c != 0).collect();
                    b.resize(*n as usize, 0);
                    self.buf.extend_from_slice(&b);
                }
                (CtfType::String, Given::Text(t)) => {
                    self.buf.extend(t.bytes().filter(|&c| c != 0));
                    self.buf.push(0);
                }
                (CtfType::String, Given::Bytes(t)) => {
                    self.buf.extend(t.iter().copied().filter(|&c| c != 0));
                    self.buf.push(0);
                }
                (CtfType::U64Seq, Given::U64s(v)) => {
                    self.buf.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    for x in *v {
                        self.buf.extend_from_slice(&x.to_le_bytes());
                    }
                }
                (CtfType::Seq(elem), Given::U64s(v)) => {
                    self.buf.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    for x in *v {
                        match **elem {
                            // Network byte order (lttng-modules' `ctf_sequence_network`).
                            CtfType::NetU16 => self.buf.extend_from_slice(&(*x as u16).to_be_bytes()),
                            CtfType::Int { bytes, .. } => self.buf.extend_from_slice(&x.to_le_bytes()[..bytes.min(8)]),
                            _ => self.buf.extend_from_slice(&x.to_le_bytes()[..1]),
                        }
                    }
                }
                (CtfType::IntArray { bytes, n, .. }, Given::U64s(v)) => {
                    for i in 0..*n as usize {
                        self.buf.extend_from_slice(&v.get(i).copied().unwrap_or(0).to_le_bytes()[..*bytes]);
                    }
                }
                _ => {
                    self.buf.truncate(mark);
                    (self.begin, self.last_ts) = save;
                    self.stats.bad += 1;
                    return Ok(());
                }
            }
        }
        self.stats.counts[class] += 1;
        self.maybe_flush()
    }

    /// Appends the `lttng_statedump_process_state` record of task `t` (a user thread, in
    /// user mode: `/proc` says no more).
    ///
    /// # Errors
    /// The I/O error of a packet flush.
    pub fn push_process_state(&mut self, ts: u64, t: &crate::procfs::TaskState) -> std::io::Result<()> {
        let Some(class) = self.table.index_of(STATEDUMP_EVENT) else { return Ok(()) };
        let status = crate::lttng::process_status(t.state);
        let v = [
            Given::Int(t.tid.into()),
            Given::Int(t.pid.into()),
            Given::Int(t.ppid.into()),
            Given::Text(&t.comm),
            Given::Int(0),
            Given::Int(0),
            Given::Int(0),
            Given::Int(status),
            Given::Int(t.cpu.into()),
            Given::Int(0),
        ];
        self.push_given(class, ts, t.tid, &v)
    }

    /// Appends an event of state-dump class `name` with `values` (no record when the class
    /// is absent).
    ///
    /// # Errors
    /// The I/O error of a packet flush.
    pub fn push_named(&mut self, name: &str, ts: u64, tid: i32, values: &[Given<'_>]) -> std::io::Result<()> {
        match self.table.index_of(name) {
            Some(class) => self.push_given(class, ts, tid, values),
            None => Ok(()),
        }
    }

    /// Appends one decoded ftrace record (`payload` from `common_type` on, as
    /// [`crate::ftrace::RawEvent`] gives it); returns false (and counts it as bad) when it
    /// does not decode.
    ///
    /// # Errors
    /// The I/O error of a packet flush.
    pub fn push_record(&mut self, ts: u64, payload: &[u8]) -> std::io::Result<bool> {
        self.push_record_joined(ts, payload, &mut |_, _, _, _| None)
    }

    /// [`CpuStream::push_record`] with the captured arguments of a `sys_enter` record from
    /// `join`, as [`CpuStream::push_record_joined`].
    ///
    /// # Errors
    /// The I/O error of a packet flush.
    pub fn push_record_joined(&mut self, ts: u64, payload: &[u8], join: &mut Join<'_>) -> std::io::Result<bool> {
        let table = self.table.clone();
        let ok = self.push_raw(&table, ts, payload, join);
        if !ok {
            self.stats.bad += 1;
        }
        self.maybe_flush()?;
        Ok(ok)
    }

    /// The trace UUID this stream was created with.
    pub fn uuid(&self) -> [u8; 16] {
        self.uuid
    }

    /// Counts `n` events lost before time `ts` (ns) and after the last event appended: the
    /// packet being filled is closed, and an empty packet at `ts` carries the new cumulative
    /// `events_discarded`. A reader then sees the loss between the end of the packet before
    /// and `ts` (babeltrace2: a "discarded events" message with that time range), as
    /// LTTng's packet context tells it (CTF 1.8 section 5, `events_discarded`).
    ///
    /// # Errors
    /// The I/O error of the packet writes.
    pub fn note_discarded(&mut self, ts: u64, n: u64) -> std::io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.flush()?;
        self.stats.lost += n;
        self.empty_packet(ts)
    }

    /// Closes the packet being filled and writes an empty one at `ts` (or the last event's
    /// time, if later) with the stream's `events_discarded`: a stream's first packet, so
    /// that a loss before its first event has a packet before it (babeltrace2 cannot tell
    /// the count of a loss in a stream's first packet), or the packet of a loss.
    ///
    /// # Errors
    /// The I/O error of the packet writes.
    pub fn write_empty(&mut self, ts: u64) -> std::io::Result<()> {
        self.flush()?;
        self.empty_packet(ts)
    }

    fn empty_packet(&mut self, ts: u64) -> std::io::Result<()> {
        self.last_ts = self.last_ts.max(ts);
        self.begin = Some(self.last_ts);
        self.flush()
    }

    /// The time of the last event appended (or of the last loss noted), ns.
    pub fn last_ts(&self) -> u64 {
        self.last_ts
    }

    /// True when the current packet holds events not yet written.
    pub fn pending(&self) -> bool {
        self.begin.is_some()
    }

    fn push_raw(&mut self, table: &EventTable, ts: u64, payload: &[u8], join: &mut Join<'_>) -> bool {
        let Some(kind) = read_uint(payload, 0, 2) else { return false };
        let Some(ev) = table.class_of(kind as u16, payload).and_then(|i| table.events.get(i)) else { return false };
        let tid = read_uint(payload, 4, 4).unwrap_or(0) as u32 as i32;
        let captured = match ev.fields.iter().any(|f| matches!(f.source, Source::Captured { .. })) {
            true => table.syscall_call(kind as u16, payload).and_then(|(nr, args)| join(ts, tid, nr, &args)),
            false => None,
        };
        let mark = self.buf.len();
        let save = (self.begin, self.last_ts);
        self.header(ev.id, ts, tid);
        for f in &ev.fields {
            let ok = match (&f.source, &f.ty) {
                (Source::Format(ff), CtfType::String) if matches!(ff.kind, FieldKind::ProbeText { .. }) => match probe_text(payload, ff) {
                    Some(s) => {
                        self.buf.extend_from_slice(s.as_bytes());
                        self.buf.push(0);
                        true
                    }
                    None => false,
                },
                (Source::Format(ff), CtfType::String) => match dyn_string(payload, ff) {
                    Some(s) => {
                        self.buf.extend_from_slice(s);
                        self.buf.push(0);
                        true
                    }
                    None => false,
                },
                (Source::Format(ff), _) => match payload.get(ff.offset..ff.offset + ff.size) {
                    Some(b) => {
                        self.buf.extend_from_slice(b);
                        true
                    }
                    None => false,
                },
                (Source::SyscallName(ff), _) => match read_uint(payload, ff.offset, ff.size) {
                    Some(nr) => {
                        self.buf.extend_from_slice(crate::syscalls::syscall_name(nr as i64).as_bytes());
                        self.buf.push(0);
                        true
                    }
                    None => false,
                },
                (Source::RawArg { args, index }, CtfType::Int { bytes, .. }) => match payload.get(args.offset + 8 * index..args.offset + 8 * index + 8) {
                    Some(b) if 8 * index + 8 <= args.size => {
                        self.buf.extend_from_slice(&b[..*bytes]);
                        true
                    }
                    _ => false,
                },
                (Source::Captured { arg, part }, _) => {
                    crate::captured::encode(captured.as_ref(), *arg, *part, &mut self.buf);
                    true
                }
                (Source::Given, _) | (Source::RawArg { .. }, _) => false,
            };
            if !ok {
                self.buf.truncate(mark);
                (self.begin, self.last_ts) = save;
                return false;
            }
        }
        self.stats.counts[(ev.id - 1) as usize] += 1;
        true
    }

    fn maybe_flush(&mut self) -> std::io::Result<()> {
        if self.buf.len() >= PACKET_TARGET {
            self.flush()?;
        }
        Ok(())
    }

    /// Closes the current packet (if it holds events, or is the empty packet of
    /// [`CpuStream::note_discarded`]) and appends it to the file.
    ///
    /// # Errors
    /// The I/O error.
    pub fn flush(&mut self) -> std::io::Result<()> {
        let Some(begin) = self.begin else { return Ok(()) };
        let stream = StreamIdentity { uuid: self.uuid, stream_id: 0, cpu: self.cpu, stream_instance_id: self.instance };
        let len = self.buf.len() as u64;
        let end = PacketEnd {
            timestamp_begin: begin,
            timestamp_end: self.last_ts,
            content_size: len,
            packet_size: len,
            packet_seq_num: self.seq,
            events_discarded: self.stats.lost,
        };
        CtfPacketLayout.write_end(&stream, &mut self.buf[..HEADER_SIZE], &end);
        let info = PacketInfo {
            uuid: self.uuid,
            stream_id: 0,
            stream_instance_id: self.instance,
            timestamp_begin: begin,
            timestamp_end: self.last_ts,
            content_size: len,
            packet_size: len,
            packet_seq_num: self.seq,
            events_discarded: self.stats.lost,
            cpu_id: self.cpu,
        };
        // On failure neither file keeps any of the packet (ust_ctf::writer's rule), and the
        // packet stays here, so the next flush writes it once.
        self.writer.append(&self.buf, &info).map_err(|e| e.error)?;
        self.seq += 1;
        self.stats.packets += 1;
        self.buf.truncate(HEADER_SIZE);
        self.begin = None;
        Ok(())
    }
}
