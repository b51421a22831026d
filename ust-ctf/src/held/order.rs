//! Keeping the packets a copy pass hands out in time order (docs/DESIGN.md#timestamps),
//! whatever a dead writer left behind: what babeltrace2's muxer needs of one stream.
//!
//! Every packet goes through [`fit`] before the sink sees it. The rules, for the packets
//! of one stream in sequence order:
//!
//! ```text
//!   prev.timestamp_end <= timestamp_begin <= first record <= ... <= last record <= timestamp_end
//!   events_discarded >= prev.events_discarded
//! ```
//!
//! A recovered packet's bounds come from control words a killed writer may have left
//! half written (a closer killed between its CAS of `write` and recording the close: no
//! `timestamp_end`; an opener killed before recording the open: no `timestamp_begin`).
//! [`fit`] decodes the packet's records and moves its bounds to enclose them
//! (`timestamp_begin` up to the previous packet's end, never past its first record;
//! `timestamp_end` up to its last record). A packet that cannot be placed so (a record
//! earlier than the previous packet's end, or records out of order) is dropped, never
//! written wrong: its records are added to the discarded count every later packet
//! carries, and the gap in `packet_seq_num` shows babeltrace2 a lost packet. An empty
//! packet (it only carries a lost count) whose time is unknown is held back and placed at
//! the next packet's begin.
//!
//! Moving `timestamp_begin` up to at most the first record keeps every record's decoded
//! time: a compact header holds the low 27 bits of a time less than 2^27 ns after the
//! previous one, and the first record is that close to any base between the old begin
//! and itself.

use ringbuffer::PacketLayout as _;
use ust_core::packet::{CtfPacketLayout, PacketInfo, HEADER_SIZE};

use super::HeldCopy;
use crate::reader::RecordWalker;

/// What [`fit`] decided for a packet.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Fit {
    /// Hand it to the sink (its context possibly rewritten).
    Emit(PacketInfo),
    /// An empty packet with no known time: hold it back until the next packet's begin.
    HoldBack,
    /// It cannot be placed in order: drop it; `records` of its records are lost.
    Drop {
        /// Records it held.
        records: u64,
    },
    /// Its header does not parse (counted as a bad packet).
    Bad,
}

/// Time span of the records of one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    records: u64,
    first: u64,
    last: u64,
    /// No record is earlier than the one before it.
    ordered: bool,
}

/// The records of `content` (a packet cut at its content size) decoded from `begin`:
/// `None` when a record does not decode (an event the descriptions lack).
fn span(events: &[ust_core::EventDesc], context_size: usize, content: &[u8], begin: u64) -> Option<Span> {
    let mut s = Span { records: 0, first: 0, last: 0, ordered: true };
    for r in RecordWalker::over_content(events, content, begin).with_context_size(context_size) {
        let t = r.ok()?.timestamp;
        if s.records == 0 {
            s.first = t;
        } else if t < s.last {
            s.ordered = false;
        }
        s.last = t;
        s.records += 1;
    }
    Some(s)
}

/// Places the packet `out` (a whole packet copy) after the stream's previous one
/// (`st.last_end`, `st.last_discarded`), as the module docs say, rewriting its context
/// when its bounds or its discarded count move. `recovered`: rebuilt by torn-event
/// recovery (its records were walked when it was rebuilt, so they decode).
pub(super) fn fit(st: &HeldCopy<'_>, out: &mut [u8], recovered: bool) -> Fit {
    let Ok(info) = PacketInfo::parse(out, st.identity) else { return Fit::Bad };
    let content = out.get(..info.content_size as usize).unwrap_or(&[]);
    let (mut begin, mut end) = (info.timestamp_begin, info.timestamp_end);
    match span(st.events, st.context_size, content, begin) {
        Some(s) if s.records > 0 => {
            if !s.ordered || s.first < begin || s.first < st.last_end {
                return Fit::Drop { records: s.records };
            }
            begin = begin.max(st.last_end);
            end = end.max(s.last);
        }
        Some(_) => {
            begin = begin.max(st.last_end);
            if begin == 0 {
                return Fit::HoldBack;
            }
            end = end.max(begin);
        }
        // Not decodable: a recovered packet always is (same descriptions); a complete one
        // is kept if its own bounds are in order.
        None if recovered => return Fit::Drop { records: 0 },
        None => {
            if begin < st.last_end || end < begin {
                return Fit::Drop { records: 0 };
            }
        }
    }
    let discarded = info.events_discarded.max(st.last_discarded);
    if (begin, end, discarded) != (info.timestamp_begin, info.timestamp_end, info.events_discarded) {
        rewrite(st, out, &info, begin, end, discarded);
    }
    match PacketInfo::parse(out, st.identity) {
        Ok(i) => Fit::Emit(i),
        Err(_) => Fit::Bad,
    }
}

/// Rewrites the packet context of `out` (parsed as `info`) with new bounds and discarded
/// count: a held-back empty packet placed at `at` ([`Fit::HoldBack`]) or a packet [`fit`]
/// moved.
pub(super) fn rewrite(st: &HeldCopy<'_>, out: &mut [u8], info: &PacketInfo, begin: u64, end: u64, discarded: u64) {
    let e = ringbuffer::PacketEnd {
        timestamp_begin: begin,
        timestamp_end: end,
        content_size: info.content_size,
        packet_size: info.packet_size,
        packet_seq_num: info.packet_seq_num,
        events_discarded: discarded,
    };
    let n = HEADER_SIZE.min(out.len());
    CtfPacketLayout.write_end(st.identity, &mut out[..n], &e);
}
