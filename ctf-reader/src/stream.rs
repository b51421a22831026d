//! Decoding one data stream file, packet after packet, into [`Batch`]es of messages.
//!
//! The packet context's `packet_size`/`content_size` are the truth (an index file is never
//! needed), checked against the file size. Per packet, as babeltrace2's message iterator
//! does: a "discarded events" message when `events_discarded` grew since the previous
//! packet (time range: previous packet end to this packet end; for a stream's first packet
//! with a non-zero count, this packet's range and no count), a "discarded packets" message
//! when `packet_seq_num` skips (range: previous packet end to this packet beginning), then
//! the events. At a packet end the stream clock moves to `timestamp_end` unless that would
//! move it backwards or the packet was never closed (`timestamp_end` 0, lttng-crash).

use std::path::Path;
use std::sync::Arc;

use crate::compiled::Compiled;
use crate::decode::bits::BitReader;
use crate::decode::exec::{exec, DecState, Out};
use crate::decode::Slot;
use crate::error::{DecodeFault, Error};
use crate::files::FileData;
use crate::trace::CtfTrace;
use crate::value::{build, Value};

/// Decoded bytes of a stream file that are handed back to the kernel at once.
const RELEASE_BYTES: usize = 4 << 20;
/// Bytes of values (slots and text) after which a batch takes no more events, whatever
/// its count of messages: a batch of large events (long strings, long sequences) stays
/// a few MiB.
const BATCH_VALUE_BYTES: usize = 4 << 20;

/// CTF packet header magic.
pub const PACKET_MAGIC: u64 = 0xC1FC_1FC1;

/// What one packet's header and context say.
#[derive(Debug, Clone)]
pub struct PacketInfo {
    /// Byte offset of the packet in its stream file.
    pub offset: u64,
    /// Packet size in bits.
    pub total_bits: u64,
    /// Content size in bits.
    pub content_bits: u64,
    /// Index of the stream class in [`crate::Trace::streams`].
    pub stream_class: usize,
    /// Stream class id.
    pub stream_class_id: u64,
    /// `stream_instance_id` of the packet header, if any.
    pub stream_instance_id: Option<u64>,
    /// `cpu_id` of the packet context, if any.
    pub cpu: Option<u64>,
    /// `timestamp_begin`, cycles.
    pub ts_begin: Option<u64>,
    /// `timestamp_end`, cycles.
    pub ts_end: Option<u64>,
    /// `events_discarded` (running count).
    pub events_discarded: Option<u64>,
    /// `packet_seq_num`.
    pub seq_num: Option<u64>,
    /// The packet header value.
    pub header: Option<Value>,
    /// The packet context value.
    pub context: Option<Value>,
}

/// Position of one event's scopes in a batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawEvent {
    pub packet: u32,
    pub class: u32,
    pub cycles: u64,
    pub ns: Option<i64>,
    /// Slot offsets: header, stream event context, event context, payload starts, end.
    pub bounds: [u32; 5],
    /// Bit positions in the stream file: the event's start, the end of its header, its end.
    pub bits: [u64; 3],
}

/// A decoded message, stored in a [`Batch`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum RawMsg {
    Event(RawEvent),
    /// Discarded events (`count` unknown for a stream's first packet) between two clock
    /// values (cycles) of the packet's stream.
    DiscardedEvents {
        packet: u32,
        count: Option<u64>,
        range: Option<(u64, u64)>,
    },
    /// Lost packets.
    DiscardedPackets {
        packet: u32,
        count: u64,
        range: Option<(u64, u64)>,
    },
}

/// Messages decoded from one stream, with their values.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub msgs: Vec<RawMsg>,
    pub out: Out,
    pub packets: Vec<Arc<PacketInfo>>,
}

impl Batch {
    pub(crate) fn clear(&mut self) {
        self.msgs.clear();
        self.out.slots.clear();
        self.out.text.clear();
        self.packets.clear();
    }

    /// Time key (ns, or `i64::MIN` without a clock) of message `i`.
    pub(crate) fn key(&self, i: usize, clock: Option<&crate::clock::Clock>) -> i64 {
        match self.msgs[i] {
            RawMsg::Event(e) => e.ns.unwrap_or(i64::MIN),
            RawMsg::DiscardedEvents { range, .. } | RawMsg::DiscardedPackets { range, .. } => match (range, clock) {
                (Some((b, _)), Some(c)) => c.to_ns(b).unwrap_or(i64::MIN),
                _ => i64::MIN,
            },
        }
    }
}

struct Current {
    start: usize,
    total_bits: u64,
    content_bits: u64,
    pos: u64,
    sc: usize,
}

/// Decodes one stream file.
pub(crate) struct StreamDecoder {
    cx: Arc<Compiled>,
    path: Arc<Path>,
    data: Arc<FileData>,
    next_packet: usize,
    /// Bytes of the file before this offset were handed back to the kernel.
    released: usize,
    cur: Option<Current>,
    st: DecState,
    pkt_out: Out,
    prev_discarded: Option<u64>,
    prev_seq: Option<u64>,
    prev_end: Option<u64>,
    cur_info: Option<Arc<PacketInfo>>,
    done: bool,
}

impl StreamDecoder {
    /// The stream file's path.
    pub(crate) fn path(&self) -> Arc<Path> {
        self.path.clone()
    }

    pub(crate) fn new(cx: Arc<Compiled>, path: Arc<Path>, data: Arc<FileData>) -> Self {
        let st = DecState { regs: vec![0; cx.n_regs], ..Default::default() };
        StreamDecoder {
            cx,
            path,
            data,
            next_packet: 0,
            released: 0,
            cur: None,
            st,
            pkt_out: Out::default(),
            prev_discarded: None,
            prev_seq: None,
            prev_end: None,
            cur_info: None,
            done: false,
        }
    }

    fn fault(&self, base: usize, f: DecodeFault) -> Error {
        Error::Decode { path: self.path.to_path_buf(), offset: base as u64 + f.bit / 8, msg: f.msg }
    }

    /// Decodes up to about `max` messages into `batch` (fewer once its values pass
    /// [`BATCH_VALUE_BYTES`]); `Ok(false)` at the end of the file.
    /// After an error the decoder is done (the messages before it stay in the batch).
    pub(crate) fn fill(&mut self, batch: &mut Batch, max: usize) -> Result<bool, Error> {
        if self.done {
            return Ok(false);
        }
        let target = batch.msgs.len() + max;
        let r = self.fill_inner(batch, target);
        if r.is_err() {
            self.done = true;
        }
        r
    }

    fn fill_inner(&mut self, batch: &mut Batch, target: usize) -> Result<bool, Error> {
        if let Some(i) = &self.cur_info {
            if batch.packets.last().is_none_or(|p| !Arc::ptr_eq(p, i)) {
                batch.packets.push(i.clone());
            }
        }
        while batch.msgs.len() < target && batch.out.slots.len() * std::mem::size_of::<Slot>() + batch.out.text.len() < BATCH_VALUE_BYTES {
            if self.cur.is_none() {
                if self.next_packet >= self.data.len() {
                    self.done = true;
                    return Ok(false);
                }
                self.open_packet(batch)?;
                continue;
            }
            let cur = self.cur.as_mut().expect("checked above");
            if cur.pos >= cur.content_bits {
                self.close_packet();
                continue;
            }
            self.event(batch)?;
        }
        Ok(true)
    }

    fn close_packet(&mut self) {
        let info = self.cur_info.take();
        self.cur = None;
        // What is decoded is in the batches: the file's pages before the next packet leave
        // the process, so its resident memory stays bounded however large the file.
        if self.next_packet - self.released >= RELEASE_BYTES {
            self.data.release(self.released, self.next_packet - self.released);
            self.released = self.next_packet;
        }
        if let Some(info) = info {
            if let Some(end) = info.ts_end {
                let unclosed = info.ts_begin.is_some_and(|b| b != 0) && end == 0;
                if !unclosed && end >= self.st.clock {
                    self.st.clock = end;
                }
            }
            self.prev_end = info.ts_end;
            self.prev_discarded = info.events_discarded;
            self.prev_seq = info.seq_num;
        }
    }

    fn open_packet(&mut self, batch: &mut Batch) -> Result<(), Error> {
        let start = self.next_packet;
        let file = self.data.bytes();
        let buf = &file[start..];
        let cx = &*self.cx;
        let mut r = BitReader::new(buf, buf.len() as u64 * 8);
        let st = &mut self.st;
        st.magic = None;
        st.stream_class_id = None;
        st.stream_instance_id = None;
        st.ts_begin = None;
        st.ts_end = None;
        st.content_size = None;
        st.packet_size = None;
        st.discarded = None;
        st.seq_num = None;
        // The packet header and context, before the packet's size is known: the bits left in
        // the file.
        st.empty_budget = crate::decode::exec::MAX_EMPTY_ELEMS.min(buf.len() as u64 * 8);
        self.pkt_out.slots.clear();
        self.pkt_out.text.clear();
        let path = &self.path;
        let fault = |f: DecodeFault| Error::Decode { path: path.to_path_buf(), offset: start as u64 + f.bit / 8, msg: f.msg };
        if let Some(h) = &cx.packet_header {
            exec(h, &mut r, st, &mut self.pkt_out, 0).map_err(fault)?;
        }
        let header_slots = self.pkt_out.slots.len();
        if let Some(m) = st.magic {
            if m != PACKET_MAGIC {
                return Err(fault(DecodeFault::new(0, format!("bad packet magic 0x{m:08x}"))));
            }
        }
        let sc = match st.stream_class_id {
            Some(id) => {
                cx.trace.streams.iter().position(|s| s.id == id).ok_or_else(|| fault(DecodeFault::new(r.pos, format!("unknown stream class id {id}"))))?
            }
            None if cx.trace.streams.len() == 1 => 0,
            None => return Err(fault(DecodeFault::new(r.pos, "packet header has no stream_id and there are several stream classes"))),
        };
        if let Some(c) = &cx.streams[sc].packet_context {
            exec(c, &mut r, st, &mut self.pkt_out, 0).map_err(fault)?;
        }
        let file_bits = buf.len() as u64 * 8;
        let total = st.packet_size.unwrap_or(file_bits);
        let content = st.content_size.unwrap_or(total);
        if total == 0 || total % 8 != 0 || content > total || total > file_bits || content < r.pos {
            return Err(fault(DecodeFault::new(
                0,
                format!(
                    "packet sizes do not fit: packet_size {total} bits, content_size {content} bits, {} bits of headers, {file_bits} bits left in the file",
                    r.pos
                ),
            )));
        }
        st.empty_budget = content;
        let model = &cx.trace;
        let sct = &model.streams[sc];
        let mut slots = self.pkt_out.slots.iter();
        let header = model.packet_header.as_ref().and_then(|t| build(t, &mut slots, &self.pkt_out.text));
        debug_assert_eq!(slots.as_slice().len(), self.pkt_out.slots.len() - header_slots);
        let context = sct.packet_context.as_ref().and_then(|t| build(t, &mut slots, &self.pkt_out.text));
        let cpu = context.as_ref().and_then(|c| c.get("cpu_id")).and_then(|v| v.as_i128()).and_then(|v| u64::try_from(v).ok());
        // A packet's clock starts at `timestamp_begin` (the packet context updated it).
        let info = Arc::new(PacketInfo {
            offset: start as u64,
            total_bits: total,
            content_bits: content,
            stream_class: sc,
            stream_class_id: sct.id,
            stream_instance_id: st.stream_instance_id,
            cpu,
            ts_begin: st.ts_begin,
            ts_end: st.ts_end,
            events_discarded: st.discarded,
            seq_num: st.seq_num,
            header,
            context,
        });
        let pidx = batch.packets.len() as u32;
        batch.packets.push(info.clone());
        let has_clock = cx.streams[sc].clock.is_some();
        // Discarded events, as babeltrace2 computes them.
        if let Some(now) = info.events_discarded {
            let (count, range) = match self.prev_discarded {
                None if now == 0 => (None, None),
                None => (Some(None), info.ts_begin.zip(info.ts_end)),
                Some(prev) if now == prev => (None, None),
                Some(prev) => (Some(Some(now.wrapping_sub(prev))), self.prev_end.zip(info.ts_end)),
            };
            if let Some(count) = count {
                batch.msgs.push(RawMsg::DiscardedEvents { packet: pidx, count, range: range.filter(|_| has_clock) });
            }
        }
        if let (Some(now), Some(prev)) = (info.seq_num, self.prev_seq) {
            if now.wrapping_sub(prev) > 1 {
                let range = self.prev_end.zip(info.ts_begin).filter(|_| has_clock);
                batch.msgs.push(RawMsg::DiscardedPackets { packet: pidx, count: now.wrapping_sub(prev) - 1, range });
            }
        }
        self.cur = Some(Current { start, total_bits: total, content_bits: content, pos: r.pos, sc });
        self.cur_info = Some(info);
        self.next_packet = start + (total / 8) as usize;
        Ok(())
    }

    fn event(&mut self, batch: &mut Batch) -> Result<(), Error> {
        let cur = self.cur.as_mut().expect("an open packet");
        let file = self.data.bytes();
        let buf = &file[cur.start..cur.start + (cur.total_bits / 8) as usize];
        let mut r = BitReader::new(buf, cur.content_bits);
        r.pos = cur.pos;
        let start_pos = cur.pos;
        let base = cur.start;
        let scd = &self.cx.streams[cur.sc];
        let sc_model = &self.cx.trace.streams[cur.sc];
        let st = &mut self.st;
        let out = &mut batch.out;
        let slot_base = out.slots.len();
        let text_len = out.text.len();
        let mut bounds = [0u32; 5];
        let mut header_end = start_pos;
        let res: Result<usize, DecodeFault> = (|| {
            st.event_id = None;
            bounds[0] = out.slots.len() as u32;
            if let Some(h) = &scd.event_header {
                exec(h, &mut r, st, out, slot_base)?;
            }
            header_end = r.pos;
            bounds[1] = out.slots.len() as u32;
            if let Some(c) = &scd.event_context {
                exec(c, &mut r, st, out, slot_base)?;
            }
            let idx = match st.event_id {
                Some(id) => scd.event_index(id).ok_or_else(|| DecodeFault::new(r.pos, format!("unknown event class id {id}")))?,
                None if scd.events.len() == 1 => 0,
                None => return Err(DecodeFault::new(r.pos, "event header has no id and the stream class has several event classes")),
            };
            let ed = &scd.events[idx];
            bounds[2] = out.slots.len() as u32;
            if let Some(c) = &ed.context {
                exec(c, &mut r, st, out, slot_base)?;
            }
            bounds[3] = out.slots.len() as u32;
            if let Some(p) = &ed.payload {
                exec(p, &mut r, st, out, slot_base)?;
            }
            bounds[4] = out.slots.len() as u32;
            if r.pos == start_pos {
                return Err(DecodeFault::new(r.pos, "event of zero bits"));
            }
            Ok(idx)
        })();
        let idx = match res {
            Ok(i) => i,
            Err(f) => {
                out.slots.truncate(slot_base);
                out.text.truncate(text_len);
                return Err(Error::Decode { path: self.path.to_path_buf(), offset: base as u64 + f.bit / 8, msg: f.msg });
            }
        };
        cur.pos = r.pos;
        let _ = sc_model;
        let cycles = st.clock;
        let ns = match &scd.clock {
            Some(c) => Some(c.to_ns(cycles).map_err(|e| e.in_file(&self.path))?),
            None => None,
        };
        let packet = (batch.packets.len() - 1) as u32;
        let at = base as u64 * 8;
        let bits = [at + start_pos, at + header_end, at + r.pos];
        batch.msgs.push(RawMsg::Event(RawEvent { packet, class: idx as u32, cycles, ns, bounds, bits }));
        if batch.out.slots.len() > u32::MAX as usize / 2 {
            return Err(self.fault(base, DecodeFault::new(r.pos, "batch too large")));
        }
        Ok(())
    }
}

/// Slots of one scope of an event.
pub(crate) fn scope_slots<'a>(slots: &'a [Slot], e: &RawEvent, scope: usize) -> &'a [Slot] {
    &slots[e.bounds[scope] as usize..e.bounds[scope + 1] as usize]
}

impl CtfTrace {
    /// A decoder of stream file `i`.
    pub(crate) fn decoder(&self, i: usize) -> StreamDecoder {
        let s = &self.streams()[i];
        StreamDecoder::new(self.cx.clone(), s.path.clone(), s.data.clone())
    }
}
