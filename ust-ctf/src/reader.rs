//! A small CTF record walker for the packets this project writes: packet header and context
//! of [`ust_core::packet`], records of [`ust_core::event_header`] followed by packed fields
//! (every field byte-aligned, little-endian, as [`ust_core::event`] lays them out).
//!
//! ```text
//! packet:  [ header + context (84 B) ][ hdr | payload ][ hdr | payload ] … [ padding ]
//!          0                          84                               content_size  packet_size
//! ```
//!
//! Sizes come from the event descriptions: a string runs up to and including its NUL, a
//! sequence is its length field then that many elements. Every read is bounds-checked and
//! nothing panics on hostile bytes: the walker stops at the first record it cannot read and
//! says why. `ust trace` counts events with it; torn-event recovery uses [`record_size`] to find the
//! last whole record of a sub-buffer.

use ust_core::event_header;
use ust_core::packet::{PacketInfo, HEADER_SIZE};
use ust_core::{EventDesc, FieldType, IntegerType};

/// Why walking stopped before the end of the content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WalkError {
    /// The packet header or context is not valid.
    #[error("bad packet: {0}")]
    Packet(String),
    /// An event header could not be read at `offset` (too short, or a zero first byte: an
    /// uncommitted slot).
    #[error("no event header at offset {offset}")]
    Header {
        /// Byte offset in the packet.
        offset: usize,
    },
    /// An event id that the process never registered.
    #[error("unknown event id {id} at offset {offset}")]
    UnknownId {
        /// The id.
        id: u32,
        /// Byte offset in the packet.
        offset: usize,
    },
    /// A field runs past the end of the content.
    #[error("event {name} at offset {offset} runs past the packet content")]
    Truncated {
        /// `provider:name`.
        name: String,
        /// Byte offset of the record in the packet.
        offset: usize,
    },
}

/// One record found in a packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// Byte offset of the record (its header) in the packet.
    pub offset: usize,
    /// CTF event id.
    pub id: u32,
    /// Index of the event in the registration (`id - FIRST_EVENT_ID`).
    pub index: usize,
    /// Full timestamp in ns.
    pub timestamp: u64,
    /// The field bytes.
    pub payload: &'a [u8],
}

/// A decoded field value, for tests and summaries.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Any unsigned integer (also bool, char).
    Unsigned(u64),
    /// Any signed integer.
    Signed(i64),
    /// A float (f32 widened).
    Float(f64),
    /// A string (lossy UTF-8, without the NUL).
    Str(String),
    /// Array or sequence elements; text sequences decode as [`Value::Str`].
    List(Vec<Value>),
    /// An enumeration: its label (if the value has one) and integer value.
    Enum(Option<String>, i64),
}

fn read_uint(b: &[u8], ty: IntegerType) -> Option<u64> {
    let n = ty.size_bytes();
    let s = b.get(..n)?;
    let mut v = [0u8; 8];
    v[..n].copy_from_slice(s);
    Some(u64::from_le_bytes(v))
}

fn int_value(b: &[u8], ty: IntegerType) -> Option<Value> {
    let u = read_uint(b, ty)?;
    Some(if ty.signed {
        let shift = 64 - ty.size_bits as u32;
        Value::Signed(((u << shift) as i64) >> shift)
    } else {
        Value::Unsigned(u)
    })
}

/// Size in bytes of a value of `ty` at the start of `b`, or `None` when it does not fit.
pub fn field_size(ty: &FieldType, b: &[u8]) -> Option<usize> {
    let size = match ty {
        FieldType::String => b.iter().position(|&c| c == 0)? + 1,
        FieldType::Dynamic => ust_core::event::dynamic_size(b)?,
        FieldType::Sequence { .. } | FieldType::Blob { .. } => {
            let (length, elem, _) = ty.as_sequence()?;
            let n = read_uint(b, length)?;
            let body = usize::try_from(n).ok()?.checked_mul(elem.size_bytes())?;
            length.size_bytes().checked_add(body)?
        }
        other => other.fixed_size()?,
    };
    (size <= b.len()).then_some(size)
}

/// Size in bytes of the payload of `desc` at the start of `b`, or `None` when a field does
/// not fit.
pub fn payload_size(desc: &EventDesc, b: &[u8]) -> Option<usize> {
    let mut off = 0usize;
    for f in desc.fields.iter() {
        off += field_size(&f.ty, b.get(off..)?)?;
    }
    Some(off)
}

/// Length in bytes of the record (event header and payload) at the start of `bytes`, or
/// `None` when the bytes are not a whole record of one of `events`: a zero first byte (an
/// uncommitted slot), an unknown id, or a field running past the end of `bytes`. The
/// record-size callback of [`ringbuffer::Reader::recover_packet`] (torn-event recovery).
pub fn record_size(events: &[EventDesc], bytes: &[u8]) -> Option<usize> {
    let h = event_header::decode(bytes, 0)?;
    let desc = events.get(h.id.checked_sub(event_header::FIRST_EVENT_ID)? as usize)?;
    let size = payload_size(desc, bytes.get(h.len..)?)?;
    h.len.checked_add(size)
}

/// [`record_size`] for a stream whose records carry a fixed-size event context of
/// `context_size` bytes after the event header ([`ust_core::context::block_size`]).
pub fn record_size_with_context(events: &[EventDesc], context_size: usize, bytes: &[u8]) -> Option<usize> {
    let h = event_header::decode(bytes, 0)?;
    let desc = events.get(h.id.checked_sub(event_header::FIRST_EVENT_ID)? as usize)?;
    let at = h.len.checked_add(context_size)?;
    let size = payload_size(desc, bytes.get(at..)?)?;
    at.checked_add(size)
}

/// Smallest number of bytes a record of any of `events` can take (compact header, strings
/// empty, sequences empty), at least 1. Dividing lost bytes by it bounds the number of
/// events they held from above: what torn-event recovery reports as discarded.
pub fn min_record_size(events: &[EventDesc]) -> usize {
    let min_field = |ty: &FieldType| match ty {
        FieldType::String => 1,
        FieldType::Sequence { length, .. } => length.size_bytes(),
        FieldType::Blob { .. } => 8,
        other => other.fixed_size().unwrap_or(1),
    };
    events
        .iter()
        .map(|e| event_header::COMPACT_SIZE + e.fields.iter().map(|f| min_field(&f.ty)).sum::<usize>())
        .min()
        .unwrap_or(event_header::COMPACT_SIZE)
        .max(1)
}

/// Decodes the fields of `desc` from `payload`: `(name, value)` in order. `None` when the
/// payload is too short.
pub fn decode_fields(desc: &EventDesc, payload: &[u8]) -> Option<Vec<(String, Value)>> {
    let mut out = Vec::with_capacity(desc.fields.len());
    let mut off = 0usize;
    for f in desc.fields.iter() {
        let b = payload.get(off..)?;
        let size = field_size(&f.ty, b)?;
        let v = match &f.ty {
            FieldType::Integer(i) => int_value(b, *i)?,
            FieldType::Float { exp_dig, .. } => {
                if *exp_dig == 8 {
                    Value::Float(f32::from_le_bytes(b.get(..4)?.try_into().ok()?) as f64)
                } else {
                    Value::Float(f64::from_le_bytes(b.get(..8)?.try_into().ok()?))
                }
            }
            FieldType::String => Value::Str(String::from_utf8_lossy(&b[..size - 1]).into_owned()),
            FieldType::Dynamic => {
                let v = &b[1..size];
                match ust_core::DynamicTag::from_byte(b[0])? {
                    ust_core::DynamicTag::None => Value::List(Vec::new()),
                    ust_core::DynamicTag::I64 => Value::Signed(i64::from_le_bytes(v.try_into().ok()?)),
                    ust_core::DynamicTag::U64 => Value::Unsigned(u64::from_le_bytes(v.try_into().ok()?)),
                    ust_core::DynamicTag::F64 => Value::Float(f64::from_le_bytes(v.try_into().ok()?)),
                    ust_core::DynamicTag::Bool => Value::Unsigned(v[0] as u64),
                    ust_core::DynamicTag::Str => Value::Str(String::from_utf8_lossy(&v[..v.len() - 1]).into_owned()),
                }
            }
            FieldType::Sequence { length, elem, text } => {
                let body = &b[length.size_bytes()..size];
                if *text {
                    Value::Str(String::from_utf8_lossy(body).into_owned())
                } else {
                    Value::List(body.chunks_exact(elem.size_bytes()).filter_map(|c| int_value(c, *elem)).collect())
                }
            }
            FieldType::Blob { .. } => Value::List(b[8..size].iter().map(|&c| Value::Unsigned(c as u64)).collect()),
            FieldType::Array { elem, .. } => Value::List(b[..size].chunks_exact(elem.size_bytes()).filter_map(|c| int_value(c, *elem)).collect()),
            FieldType::Enum { container, mappings, .. } => {
                let v = match int_value(b, *container)? {
                    Value::Signed(s) => s,
                    Value::Unsigned(u) => u as i64,
                    _ => unreachable!("int_value yields integers"),
                };
                Value::Enum(mappings.iter().find(|m| m.value == v).map(|m| m.label.to_string()), v)
            }
        };
        out.push((f.name.to_string(), v));
        off += size;
    }
    Some(out)
}

/// Walks the records of one packet.
///
/// Create it with [`RecordWalker::new`], then iterate: each item is a [`Record`] or, once,
/// the [`WalkError`] that stopped the walk.
#[derive(Debug)]
pub struct RecordWalker<'a> {
    events: &'a [EventDesc],
    context_size: usize,
    content: &'a [u8],
    offset: usize,
    previous: u64,
    done: bool,
}

impl<'a> RecordWalker<'a> {
    /// Checks the packet header and context of `packet` (a whole packet as written to a
    /// stream file: `packet_size` must equal `packet.len()`), and starts after them.
    ///
    /// # Errors
    /// [`WalkError::Packet`] when the header is not valid.
    pub fn new(events: &'a [EventDesc], packet: &'a [u8]) -> Result<(PacketInfo, RecordWalker<'a>), WalkError> {
        let info = parse_packet(packet)?;
        Ok((info, Self::over_content(events, &packet[..info.content_size as usize], info.timestamp_begin)))
    }

    /// Walks `content` (a packet cut at its `content_size`) from byte [`HEADER_SIZE`], with
    /// `timestamp_begin` as the base of the first compact timestamp.
    pub fn over_content(events: &'a [EventDesc], content: &'a [u8], timestamp_begin: u64) -> RecordWalker<'a> {
        RecordWalker { events, context_size: 0, content, offset: HEADER_SIZE, previous: timestamp_begin, done: false }
    }

    /// Skips a fixed-size event context of `n` bytes after each event header (the
    /// stream's `event.context`, [`ust_core::context::block_size`]).
    pub fn with_context_size(mut self, n: usize) -> Self {
        self.context_size = n;
        self
    }
}

/// Parses the header and context of a packet taken from a stream file, checking it against
/// the identity it names itself (the file alone does not say which stream it is).
///
/// # Errors
/// [`WalkError::Packet`].
pub fn parse_packet(packet: &[u8]) -> Result<PacketInfo, WalkError> {
    if packet.len() < HEADER_SIZE {
        return Err(WalkError::Packet(format!("{} bytes, shorter than a packet header", packet.len())));
    }
    let id = ringbuffer::StreamIdentity {
        uuid: packet[4..20].try_into().expect("16 bytes"),
        stream_id: u32::from_le_bytes(packet[20..24].try_into().expect("4 bytes")),
        stream_instance_id: u64::from_le_bytes(packet[24..32].try_into().expect("8 bytes")),
        cpu: u32::from_le_bytes(packet[80..84].try_into().expect("4 bytes")),
    };
    PacketInfo::parse(packet, &id).map_err(|e| WalkError::Packet(e.to_string()))
}

impl<'a> Iterator for RecordWalker<'a> {
    type Item = Result<Record<'a>, WalkError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.offset >= self.content.len() {
            return None;
        }
        let offset = self.offset;
        let fail = |s: &mut Self, e: WalkError| {
            s.done = true;
            Some(Err(e))
        };
        let Some(h) = event_header::decode(&self.content[offset..], self.previous) else {
            return fail(self, WalkError::Header { offset });
        };
        let index = h.id.checked_sub(event_header::FIRST_EVENT_ID).map(|i| i as usize);
        let Some(desc) = index.and_then(|i| self.events.get(i)) else {
            return fail(self, WalkError::UnknownId { id: h.id, offset });
        };
        let start = offset + h.len + self.context_size;
        if start > self.content.len() {
            return fail(self, WalkError::Truncated { name: desc.full_name(), offset });
        }
        let rest = self.content.get(start..).unwrap_or(&[]);
        let Some(size) = payload_size(desc, rest) else {
            return fail(self, WalkError::Truncated { name: desc.full_name(), offset });
        };
        self.offset = start + size;
        self.previous = h.timestamp;
        Some(Ok(Record { offset, id: h.id, index: index.unwrap_or(0), timestamp: h.timestamp, payload: &rest[..size] }))
    }
}

/// The size in bytes of the packet whose start is `prefix`, when it is a whole packet: it
/// announces ([`ust_core::packet::announced_size`]) at least a header and at most the
/// `left` bytes its file holds from its start. `None` for a cut-off or bad packet (or a
/// `prefix` too short to say). [`packets`] and [`crate::count::count_stream_file`] split
/// stream files by it.
pub fn whole_packet_size(prefix: &[u8], left: u64) -> Option<usize> {
    let size = ust_core::packet::announced_size(prefix)?;
    if size < HEADER_SIZE as u64 || size > left {
        return None;
    }
    usize::try_from(size).ok()
}

/// Splits the bytes of a stream file into packets (each `packet_size` long, read from its
/// context), stopping at a cut-off tail or a packet whose header is invalid.
pub fn packets(file: &[u8]) -> impl Iterator<Item = Result<&[u8], WalkError>> + '_ {
    let mut off = 0usize;
    let mut done = false;
    std::iter::from_fn(move || {
        if done || off >= file.len() {
            return None;
        }
        let rest = &file[off..];
        let Some(size) = whole_packet_size(rest, rest.len() as u64) else {
            done = true;
            return Some(Err(WalkError::Packet(format!("cut-off or bad packet at file offset {off}"))));
        };
        off += size;
        Some(Ok(&rest[..size]))
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use ringbuffer::{PacketBegin, PacketEnd, PacketLayout, StreamIdentity};
    use std::borrow::Cow;
    use ust_core::packet::CtfPacketLayout;
    use ust_core::{EnumMapping, FieldDesc, Level};

    fn desc(name: &'static str, fields: Vec<FieldDesc>) -> EventDesc {
        EventDesc { provider: Cow::Borrowed("t"), name: Cow::Borrowed(name), level: Level::Info, fields: Cow::Owned(fields), location: Cow::Borrowed("") }
    }

    fn f(name: &'static str, ty: FieldType) -> FieldDesc {
        FieldDesc { name: Cow::Borrowed(name), ty }
    }

    /// Two event descriptions: `t:a {u64, i32}` (id 1) and `t:b`, every other field kind (id 2).
    pub(crate) fn events() -> Vec<EventDesc> {
        vec![
            desc("a", vec![f("x", FieldType::Integer(IntegerType::U64)), f("y", FieldType::Integer(IntegerType::I32))]),
            desc(
                "b",
                vec![
                    f("s", FieldType::String),
                    f("q", FieldType::Sequence { length: IntegerType::U32, elem: IntegerType::U16, text: false }),
                    f("m", FieldType::Sequence { length: IntegerType::U8, elem: IntegerType::U8, text: true }),
                    f("arr", FieldType::Array { elem: IntegerType::I8, len: 3 }),
                    f(
                        "e",
                        FieldType::Enum {
                            container: IntegerType::U8,
                            name: Cow::Borrowed("E"),
                            mappings: Cow::Owned(vec![EnumMapping { label: Cow::Borrowed("ONE"), value: 1 }]),
                        },
                    ),
                    f("fl", FieldType::Float { exp_dig: 8, mant_dig: 24 }),
                ],
            ),
        ]
    }

    fn record(out: &mut Vec<u8>, id: u32, ts: u64, extended: bool, payload: &[u8]) {
        let mut h = [0u8; 16];
        let (b0, len) = event_header::write(&mut h, id, ts, extended);
        h[0] = b0;
        out.extend_from_slice(&h[..len]);
        out.extend_from_slice(payload);
    }

    fn packet(body: &[u8], size: usize) -> Vec<u8> {
        let stream = StreamIdentity { uuid: [3; 16], stream_id: 0, cpu: 1, stream_instance_id: 7 };
        let mut p = vec![0u8; size];
        p[HEADER_SIZE..HEADER_SIZE + body.len()].copy_from_slice(body);
        CtfPacketLayout.write_end(
            &stream,
            &mut p[..HEADER_SIZE],
            &PacketEnd {
                timestamp_begin: 1000,
                timestamp_end: 5000,
                content_size: (HEADER_SIZE + body.len()) as u64,
                packet_size: size as u64,
                packet_seq_num: 0,
                events_discarded: 0,
            },
        );
        let _ = PacketBegin { timestamp_begin: 0, packet_seq_num: 0 };
        p
    }

    /// A 1024-byte packet holding one `t:a` and one `t:b` record.
    pub(crate) fn sample() -> Vec<u8> {
        let mut body = Vec::new();
        let mut a = 5u64.to_le_bytes().to_vec();
        a.extend_from_slice(&(-2i32).to_le_bytes());
        record(&mut body, 1, 1100, false, &a);
        let mut b = b"hi\0".to_vec();
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&7u16.to_le_bytes());
        b.extend_from_slice(&9u16.to_le_bytes());
        b.push(3);
        b.extend_from_slice(b"abc");
        b.extend_from_slice(&[0xff, 0, 1]);
        b.push(1);
        b.extend_from_slice(&1.5f32.to_le_bytes());
        record(&mut body, 2, 4000, true, &b);
        packet(&body, 1024)
    }

    #[test]
    fn walks_and_decodes_every_field_kind() {
        let ev = events();
        let p = sample();
        let (info, walker) = RecordWalker::new(&ev, &p).unwrap();
        assert_eq!(info.cpu_id, 1);
        let recs: Vec<_> = walker.collect::<Result<_, _>>().unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!((recs[0].id, recs[0].timestamp), (1, 1100));
        assert_eq!((recs[1].id, recs[1].timestamp), (2, 4000));
        let a = decode_fields(&ev[0], recs[0].payload).unwrap();
        assert_eq!(a, vec![("x".into(), Value::Unsigned(5)), ("y".into(), Value::Signed(-2))]);
        let b = decode_fields(&ev[1], recs[1].payload).unwrap();
        assert_eq!(b[0].1, Value::Str("hi".into()));
        assert_eq!(b[1].1, Value::List(vec![Value::Unsigned(7), Value::Unsigned(9)]));
        assert_eq!(b[2].1, Value::Str("abc".into()));
        assert_eq!(b[3].1, Value::List(vec![Value::Signed(-1), Value::Signed(0), Value::Signed(1)]));
        assert_eq!(b[4].1, Value::Enum(Some("ONE".into()), 1));
        assert_eq!(b[5].1, Value::Float(1.5));
    }

    #[test]
    fn stops_on_unknown_ids_and_truncation() {
        let ev = events();
        let mut body = Vec::new();
        record(&mut body, 9, 1100, false, &[]);
        let p = packet(&body, 512);
        let (_, mut w) = RecordWalker::new(&ev, &p).unwrap();
        assert_eq!(w.next(), Some(Err(WalkError::UnknownId { id: 9, offset: HEADER_SIZE })));
        assert_eq!(w.next(), None);
        let mut body = Vec::new();
        record(&mut body, 1, 1100, false, &[1, 2, 3]);
        let p = packet(&body, 512);
        let (_, mut w) = RecordWalker::new(&ev, &p).unwrap();
        assert!(matches!(w.next(), Some(Err(WalkError::Truncated { .. }))));
    }

    #[test]
    fn splits_stream_files_into_packets() {
        let mut file = sample();
        file.extend_from_slice(&sample());
        file.extend_from_slice(&[1, 2, 3]);
        let ps: Vec<_> = packets(&file).collect();
        assert_eq!(ps.len(), 3);
        assert!(ps[0].is_ok() && ps[1].is_ok() && ps[2].is_err());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600), ts in any::<u64>()) {
            let ev = events();
            for r in RecordWalker::over_content(&ev, &bytes, ts).take(1000).flatten() {
                let _ = decode_fields(&ev[r.index], r.payload);
            }
            let _ = RecordWalker::new(&ev, &bytes).map(|(_, w)| w.take(1000).count());
            let _ = packets(&bytes).take(1000).count();
        }

        #[test]
        fn random_bodies_in_valid_packets_never_panic(body in proptest::collection::vec(any::<u8>(), 0..400)) {
            let ev = events();
            let p = packet(&body, 512);
            let (_, w) = RecordWalker::new(&ev, &p).unwrap();
            for r in w.take(1000).flatten() {
                let _ = decode_fields(&ev[r.index], r.payload);
            }
        }
    }
}
