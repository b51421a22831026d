//! Messages as the caller sees them ([`Message`], [`EventRef`]), and iteration over one
//! stream alone ([`StreamIter`]).

use crate::clock::Clock;
use crate::compiled::Compiled;
use crate::decode::Slot;
use crate::error::Error;
use crate::model::{EventClass, FieldType, Scope, StreamClass, Trace};
use crate::stream::{scope_slots, Batch, PacketInfo, RawEvent, RawMsg, StreamDecoder};
use crate::trace::{CtfTrace, StreamFile};
use crate::value::{build, Value};

/// Messages per batch a stream decodes at once.
pub(crate) const BATCH: usize = 1024;

/// One message of a stream.
pub enum Message<'a> {
    /// An event record.
    Event(EventRef<'a>),
    /// Events the tracer discarded (ring buffer full), as babeltrace2 reports them.
    DiscardedEvents(Discarded<'a>),
    /// Packets lost (gap in `packet_seq_num`).
    DiscardedPackets(Discarded<'a>),
}

impl Message<'_> {
    /// The stream file the message comes from.
    pub fn stream(&self) -> &StreamFile {
        match self {
            Message::Event(e) => e.stream,
            Message::DiscardedEvents(d) | Message::DiscardedPackets(d) => d.stream,
        }
    }
}

/// A discarded-events or discarded-packets notice.
pub struct Discarded<'a> {
    /// Stream file.
    pub stream: &'a StreamFile,
    /// The packet that revealed the loss.
    pub packet: &'a PacketInfo,
    /// Count (`None`: some events were discarded before a stream's first packet ended).
    pub count: Option<u64>,
    /// Time range, cycles (begin, end).
    pub cycles: Option<(u64, u64)>,
    /// Time range, ns from origin (begin, end).
    pub ns: Option<(i64, i64)>,
}

/// One event record, borrowed from its stream's current batch.
pub struct EventRef<'a> {
    /// The trace model.
    pub trace: &'a Trace,
    /// Stream file.
    pub stream: &'a StreamFile,
    /// Stream class.
    pub stream_class: &'a StreamClass,
    /// Event class.
    pub class: &'a EventClass,
    /// Packet the event is in.
    pub packet: &'a PacketInfo,
    /// Clock value, cycles (0 without a clock).
    pub cycles: u64,
    /// Nanoseconds from the clock's origin (`None` without a clock).
    pub ns: Option<i64>,
    pub(crate) raw: &'a RawEvent,
    pub(crate) batch: &'a Batch,
}

impl<'a> EventRef<'a> {
    /// Event class name.
    pub fn name(&self) -> &'a str {
        &self.class.name
    }

    /// CPU from the packet context's `cpu_id`.
    pub fn cpu(&self) -> Option<u64> {
        self.packet.cpu
    }

    /// Value of one event scope: `EventHeader`, `EventCommonContext`,
    /// `EventSpecificContext` or `EventPayload` (packet scopes are in [`EventRef::packet`]).
    pub fn scope(&self, scope: Scope) -> Option<Value> {
        let (i, ty) = match scope {
            Scope::EventHeader => (0, self.stream_class.event_header.as_ref()),
            Scope::EventCommonContext => (1, self.stream_class.event_context.as_ref()),
            Scope::EventSpecificContext => (2, self.class.context.as_ref()),
            Scope::EventPayload => (3, self.class.payload.as_ref()),
            Scope::PacketHeader => return self.packet.header.clone(),
            Scope::PacketContext => return self.packet.context.clone(),
        };
        let slots = scope_slots(&self.batch.out.slots, self.raw, i);
        build(ty?, &mut slots.iter(), &self.batch.out.text)
    }

    /// The payload (`event.fields`).
    pub fn payload(&self) -> Option<Value> {
        self.scope(Scope::EventPayload)
    }

    /// The decoded values of one event scope as flat [`Slot`]s, in the depth-first order of
    /// its type ([`EventRef::scope_type`]), without building a [`Value`] tree: one slot per
    /// integer, enumeration, float or string, one [`Slot::Str`] for a text array or
    /// sequence, a [`Slot::Len`] before the elements of any other array or sequence, a
    /// [`Slot::Opt`] before the chosen option of a variant; structures add none. Empty for
    /// a scope the event does not have, and for the packet scopes (see
    /// [`EventRef::packet`]).
    pub fn slots(&self, scope: Scope) -> &'a [Slot] {
        let i = match scope {
            Scope::EventHeader => 0,
            Scope::EventCommonContext => 1,
            Scope::EventSpecificContext => 2,
            Scope::EventPayload => 3,
            Scope::PacketHeader | Scope::PacketContext => return &[],
        };
        scope_slots(&self.batch.out.slots, self.raw, i)
    }

    /// The type of one event scope (what [`EventRef::slots`] follows), if the event has it.
    pub fn scope_type(&self, scope: Scope) -> Option<&'a FieldType> {
        self.trace.scope_type(self.stream_class, Some(self.class), scope)
    }

    /// The bytes of a [`Slot::Str`] of this event (a string without its NUL, or a text
    /// array's bytes, NULs included); `None` for another slot.
    pub fn text(&self, slot: Slot) -> Option<&'a [u8]> {
        let Slot::Str { off, len } = slot else { return None };
        self.batch.out.text.get(off as usize..off as usize + len as usize)
    }

    /// Where the event lies in its stream file, in bits from the file's start: its first
    /// bit, the first bit after its event header (where its contexts and payload begin),
    /// and the first bit after it.
    pub fn bits(&self) -> [u64; 3] {
        self.raw.bits
    }

    /// Index of the event's stream class in [`Trace::streams`] and of its event class in
    /// that stream class's [`StreamClass::events`]: a dense key for per-class state.
    pub fn class_index(&self) -> (usize, usize) {
        (self.packet.stream_class, self.raw.class as usize)
    }
}

/// Turns message `i` of `batch` into a [`Message`].
pub(crate) fn message<'a>(t: &'a CtfTrace, stream: &'a StreamFile, batch: &'a Batch, i: usize) -> Message<'a> {
    message_in(&t.cx, stream, batch, i)
}

/// [`message`] from the compiled metadata alone (on a decoding thread, which holds it and
/// its stream file, not the [`CtfTrace`]).
pub(crate) fn message_in<'a>(cx: &'a Compiled, stream: &'a StreamFile, batch: &'a Batch, i: usize) -> Message<'a> {
    let trace = &cx.trace;
    let packet_of = |p: u32| &*batch.packets[p as usize];
    let conv = |sc: usize, r: Option<(u64, u64)>| -> Option<(i64, i64)> {
        let c: &Clock = cx.streams[sc].clock.as_ref()?;
        let (b, e) = r?;
        Some((c.to_ns(b).ok()?, c.to_ns(e).ok()?))
    };
    match &batch.msgs[i] {
        RawMsg::Event(raw) => {
            let packet = packet_of(raw.packet);
            let sc = &trace.streams[packet.stream_class];
            Message::Event(EventRef {
                trace,
                stream,
                stream_class: sc,
                class: &sc.events[raw.class as usize],
                packet,
                cycles: raw.cycles,
                ns: raw.ns,
                raw,
                batch,
            })
        }
        &RawMsg::DiscardedEvents { packet, count, range } => {
            let packet = packet_of(packet);
            Message::DiscardedEvents(Discarded { stream, packet, count, cycles: range, ns: conv(packet.stream_class, range) })
        }
        &RawMsg::DiscardedPackets { packet, count, range } => {
            let packet = packet_of(packet);
            Message::DiscardedPackets(Discarded { stream, packet, count: Some(count), cycles: range, ns: conv(packet.stream_class, range) })
        }
    }
}

/// The messages of one stream file, in file order.
pub struct StreamIter<'a> {
    trace: &'a CtfTrace,
    index: usize,
    dec: StreamDecoder,
    batch: Batch,
    cursor: usize,
    pending: Option<Error>,
    ended: bool,
}

impl<'a> StreamIter<'a> {
    pub(crate) fn new(trace: &'a CtfTrace, index: usize) -> Self {
        StreamIter { trace, index, dec: trace.decoder(index), batch: Batch::default(), cursor: 0, pending: None, ended: false }
    }

    /// The next message, or the error that stopped the stream (once), or `None` at the end.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<Message<'_>, Error>> {
        if self.cursor >= self.batch.msgs.len() {
            if let Some(e) = self.pending.take() {
                return Some(Err(e));
            }
            if self.ended {
                return None;
            }
            self.batch.clear();
            self.cursor = 0;
            match self.dec.fill(&mut self.batch, BATCH) {
                Ok(more) => self.ended = !more,
                Err(e) => {
                    self.ended = true;
                    self.pending = Some(e);
                }
            }
            if self.batch.msgs.is_empty() {
                return self.pending.take().map(Err);
            }
        }
        let i = self.cursor;
        self.cursor += 1;
        Some(Ok(message(self.trace, &self.trace.streams()[self.index], &self.batch, i)))
    }
}

impl CtfTrace {
    /// Iterates the messages of stream file `i` alone, in file order.
    pub fn stream(&self, i: usize) -> StreamIter<'_> {
        StreamIter::new(self, i)
    }
}
