//! The trace model both metadata readers (TSDL in [`crate::tsdl`], JSON in [`crate::ctf2`])
//! build: environment, clock classes, stream classes, event classes and their field types.
//!
//! Field types follow CTF 1.8 section 4 (and the CTF 2 field classes that map onto them):
//! every type is resolved (no aliases left), every byte order is concrete (`native` replaced
//! by the trace's), every sequence length and variant selector is an index path
//! ([`FieldPath`]) into an earlier scope or earlier sibling, checked to precede its user.

use std::collections::BTreeMap;

/// Byte order of an integer or float, concrete (CTF 1.8 §4.1.3: `native` is the trace's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    /// Least significant byte first; bit fields fill from the least significant bit.
    Little,
    /// Most significant byte first; bit fields fill from the most significant bit.
    Big,
}

/// Character encoding of an integer (for text arrays), a string or nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// Not text.
    None,
    /// UTF-8 text (also what `ASCII` reads as).
    Utf8,
    /// ASCII text.
    Ascii,
}

/// What a field means to the reader beyond its value (babeltrace2's "meanings", found by
/// name in CTF 1.8 and by `roles` in CTF 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Packet header `magic` (must be 0xC1FC1FC1).
    Magic,
    /// Packet header `stream_id`: the stream class id.
    StreamClassId,
    /// Packet header `stream_instance_id`.
    StreamInstanceId,
    /// Packet context `timestamp_begin` (clock cycles).
    PacketBeginTime,
    /// Packet context `timestamp_end` (clock cycles; does not update the stream clock).
    PacketEndTime,
    /// Packet context `content_size` (bits).
    ContentSize,
    /// Packet context `packet_size` (bits).
    PacketSize,
    /// Packet context `events_discarded`: running count of discarded events.
    DiscardedEvents,
    /// Packet context `packet_seq_num`.
    PacketSeqNum,
    /// Event header `id` (the last one decoded wins, as in LTTng's extended header).
    EventClassId,
}

/// Preferred display base of an integer (2, 8, 10 or 16).
pub type Base = u8;

/// A fixed-size integer, 1 to 64 bits (CTF 1.8 §4.1.5).
#[derive(Clone, Debug, PartialEq)]
pub struct IntType {
    /// Size in bits, 1..=64.
    pub size: u8,
    /// Alignment in bits (a power of two).
    pub align: u32,
    /// Two's complement signed.
    pub signed: bool,
    /// Concrete byte order.
    pub byte_order: ByteOrder,
    /// Display base: 2, 8, 10 or 16.
    pub base: Base,
    /// Encoding (makes arrays/sequences of 8-bit integers text).
    pub encoding: Encoding,
    /// Index into [`Trace::clocks`] of the clock this integer updates (`map = clock.X.value`).
    pub clock: Option<usize>,
    /// Special meaning, if any.
    pub role: Option<Role>,
    /// Whether a sequence length or variant selector refers to this field.
    pub referenced: bool,
}

/// One enumeration mapping: a label for an inclusive range of values.
#[derive(Clone, Debug, PartialEq)]
pub struct EnumMapping {
    /// Label as written (escapes decoded).
    pub label: String,
    /// Inclusive lower bound.
    pub lo: i128,
    /// Inclusive upper bound.
    pub hi: i128,
}

/// A named member of a structure or option of a variant.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// Name as a reader shows it: CTF 1.8 strips one leading underscore (§4.2.2 note).
    pub name: String,
    /// Type of the member.
    pub ty: FieldType,
    /// `Some` for a BLOB field (LTTng 2.16: bytes tagged with a media type, a byte array or
    /// sequence in the model): its media type, from the comment lttng-sessiond 2.16 writes
    /// before it in CTF 1.8 (``// dynamic length BLOB field with `image/png` media type``)
    /// or the field class's `media-type` in CTF 2; `application/octet-stream`, CTF 2's
    /// default, when the metadata names none. `None` for every other field.
    pub media_type: Option<String>,
}

/// The root scopes a [`FieldPath`] starts from, in decoding order (CTF 1.8 §7.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// `trace.packet.header`.
    PacketHeader,
    /// `stream.packet.context`.
    PacketContext,
    /// `stream.event.header`.
    EventHeader,
    /// `stream.event.context` (the stream event context).
    EventCommonContext,
    /// `event.context` (the event-specific context).
    EventSpecificContext,
    /// `event.fields` (the payload).
    EventPayload,
}

/// Absolute location of a field: a root scope, then member indices through structures.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldPath {
    /// Root scope.
    pub scope: Scope,
    /// Member index at each structure level from the root structure.
    pub indices: Vec<u32>,
}

/// A resolved field type.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldType {
    /// Integer.
    Int(IntType),
    /// Enumeration over an integer.
    Enum {
        /// Container integer.
        int: IntType,
        /// Mappings in declaration order.
        mappings: Vec<EnumMapping>,
    },
    /// IEEE 754 binary32 (`exp_dig` 8, `mant_dig` 24) or binary64 (11/53).
    Float {
        /// 32 or 64.
        size: u8,
        /// Alignment in bits.
        align: u32,
        /// Byte order.
        byte_order: ByteOrder,
    },
    /// Null-terminated string (byte aligned).
    String {
        /// Encoding.
        encoding: Encoding,
    },
    /// Structure.
    Struct {
        /// Minimum alignment in bits (the effective one is the max of it and the members').
        align: u32,
        /// Members in order.
        fields: Vec<Field>,
    },
    /// Variant: the option whose name is the selector's enum label (CTF 1.8) or whose ranges
    /// hold the selector's value (CTF 2).
    Variant {
        /// Selector field.
        tag: FieldPath,
        /// Options in order.
        options: Vec<Field>,
        /// Per option, the selector ranges choosing it (filled from the selector's enum
        /// labels for CTF 1.8).
        ranges: Vec<Vec<(i128, i128)>>,
    },
    /// Fixed-length array.
    Array {
        /// Element type.
        elem: Box<FieldType>,
        /// Number of elements.
        len: u64,
    },
    /// Sequence whose length is an earlier unsigned integer.
    Sequence {
        /// Element type.
        elem: Box<FieldType>,
        /// Length field.
        len: FieldPath,
    },
}

impl FieldType {
    /// Alignment in bits of the type's first bit (CTF 1.8 §4.3; a structure aligns as its
    /// most aligned member, an array/sequence as its element, a string/variant on a byte...).
    pub fn align(&self) -> u32 {
        match self {
            FieldType::Int(i) | FieldType::Enum { int: i, .. } => i.align,
            FieldType::Float { align, .. } => *align,
            FieldType::String { .. } => 8,
            FieldType::Struct { align, fields } => fields.iter().map(|f| f.ty.align()).fold(*align, u32::max),
            FieldType::Variant { .. } => 1,
            FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } => elem.align(),
        }
    }

    /// The integer of an `Int` or `Enum`.
    pub fn as_int(&self) -> Option<&IntType> {
        match self {
            FieldType::Int(i) | FieldType::Enum { int: i, .. } => Some(i),
            _ => None,
        }
    }

    /// Whether this array/sequence element type makes the array text (babeltrace2's rule:
    /// an 8-bit, byte-aligned integer with an encoding).
    pub fn is_text_element(&self) -> bool {
        matches!(self.as_int(), Some(i) if i.size == 8 && i.align % 8 == 0 && i.encoding != Encoding::None)
    }

    /// The member named `name` of a structure.
    pub fn member(&self, name: &str) -> Option<(usize, &Field)> {
        match self {
            FieldType::Struct { fields, .. } => fields.iter().enumerate().find(|(_, f)| f.name == name),
            _ => None,
        }
    }

    /// The type at `indices` below this structure.
    pub fn at_path(&self, indices: &[u32]) -> Option<&FieldType> {
        let mut t = self;
        for &i in indices {
            match t {
                FieldType::Struct { fields, .. } => t = &fields.get(i as usize)?.ty,
                _ => return None,
            }
        }
        Some(t)
    }
}

/// A clock class (CTF 1.8 §8, CTF 2 clock-class).
#[derive(Clone, Debug, PartialEq)]
pub struct ClockClass {
    /// Name (`monotonic` for LTTng).
    pub name: String,
    /// Frequency in Hz (> 0).
    pub freq: u64,
    /// Offset from origin in seconds (after moving whole seconds out of `offset_cycles`).
    pub offset_s: i64,
    /// Offset in cycles, `< freq`.
    pub offset_cycles: u64,
    /// Whether the origin is the Unix epoch.
    pub origin_is_unix_epoch: bool,
    /// Description, if given.
    pub description: Option<String>,
    /// UUID, if given.
    pub uuid: Option<[u8; 16]>,
    /// Precision in cycles.
    pub precision: u64,
}

/// An event class (CTF 1.8 `event` block, CTF 2 event-record-class).
#[derive(Clone, Debug, PartialEq)]
pub struct EventClass {
    /// Numeric id within its stream class.
    pub id: u64,
    /// Name.
    pub name: String,
    /// `loglevel`, if given.
    pub loglevel: Option<i64>,
    /// `model.emf.uri`, if given.
    pub emf_uri: Option<String>,
    /// Event-specific context.
    pub context: Option<FieldType>,
    /// Payload.
    pub payload: Option<FieldType>,
}

/// A stream class (CTF 1.8 `stream` block, CTF 2 data-stream-class).
#[derive(Clone, Debug, PartialEq)]
pub struct StreamClass {
    /// Id (0 when the metadata gives none).
    pub id: u64,
    /// Packet context.
    pub packet_context: Option<FieldType>,
    /// Event header.
    pub event_header: Option<FieldType>,
    /// Stream event context.
    pub event_context: Option<FieldType>,
    /// Event classes, in declaration order.
    pub events: Vec<EventClass>,
    /// Index into [`Trace::clocks`] of the default clock (the one the event header's or
    /// packet context's timestamps map to).
    pub default_clock: Option<usize>,
}

impl EventClass {
    /// The media type of the payload's BLOB field `name` (see [`Field::media_type`]);
    /// `None` when the payload has no such field or it is not a BLOB.
    pub fn media_type(&self, name: &str) -> Option<&str> {
        self.payload.as_ref()?.member(name)?.1.media_type.as_deref()
    }
}

impl StreamClass {
    /// The event class with id `id`.
    pub fn event_by_id(&self, id: u64) -> Option<&EventClass> {
        self.events.iter().find(|e| e.id == id)
    }
}

/// An environment value (CTF 1.8 `env` block: integers or strings).
#[derive(Clone, Debug, PartialEq)]
pub enum EnvValue {
    /// Integer.
    Int(i64),
    /// String.
    Str(String),
}

/// Which metadata format the trace was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtfVersion {
    /// CTF 1.8 TSDL (plain text or packetized).
    Ctf1,
    /// CTF 2 JSON text sequence.
    Ctf2,
}

/// A trace class: everything the metadata says.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// Metadata format.
    pub version: CtfVersion,
    /// Trace UUID, if given.
    pub uuid: Option<[u8; 16]>,
    /// Default byte order of the trace.
    pub byte_order: ByteOrder,
    /// Packet header.
    pub packet_header: Option<FieldType>,
    /// Environment, by name.
    pub env: BTreeMap<String, EnvValue>,
    /// Clock classes.
    pub clocks: Vec<ClockClass>,
    /// Stream classes, in declaration order.
    pub streams: Vec<StreamClass>,
}

impl Trace {
    /// The stream class with id `id`.
    pub fn stream_class(&self, id: u64) -> Option<&StreamClass> {
        self.streams.iter().find(|s| s.id == id)
    }

    /// The type of root scope `scope` for event class `event` of stream class `stream`.
    pub fn scope_type<'a>(&'a self, stream: &'a StreamClass, event: Option<&'a EventClass>, scope: Scope) -> Option<&'a FieldType> {
        match scope {
            Scope::PacketHeader => self.packet_header.as_ref(),
            Scope::PacketContext => stream.packet_context.as_ref(),
            Scope::EventHeader => stream.event_header.as_ref(),
            Scope::EventCommonContext => stream.event_context.as_ref(),
            Scope::EventSpecificContext => event?.context.as_ref(),
            Scope::EventPayload => event?.payload.as_ref(),
        }
    }
}
