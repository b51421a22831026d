//! Copying the packets a ring buffer holds, for snapshots, post-mortem dumps, `ust
//! crash-dump` and the last drain of a dead process: whole packets as they are, and for a
//! sub-buffer that will never complete (its writer died), its committed prefix only.
//!
//! **Torn events** (docs/DESIGN.md#torn-events): this is sound with commits in any order
//! because the evidence is per slot, not a sum: a record's byte 0 is never zero (event ids
//! start at 1), is stored last with Release by the record's own writer at commit, and the
//! sub-buffer was zeroed before its lap began (by the reader at release, or by the writer
//! that claimed it in overwrite mode), so a non-zero byte 0 read with Acquire proves that
//! this slot's writer finished it in this lap. The walk decodes each record's length from
//! its header ([`crate::reader::record_size`]) and stops at the first zero byte 0; records
//! after it may be committed, but where they start is only known from the torn record's
//! length, which may never have been written, so they are counted as lost instead of
//! guessed at. The proof of the ring-buffer side is in the `ringbuffer::Buffer` docs
//! ("Per-slot commit evidence").

use ringbuffer::{PacketLayout, Reader, StreamIdentity};
use ust_core::packet::{CtfPacketLayout, PacketInfo, HEADER_SIZE};
use ust_core::EventDesc;

/// Name of the file, next to `metadata` in a `--shm-path` buffer set, that holds the
/// process's event descriptions as JSON (`[EventDesc]`, registration order): `ust
/// crash-dump` needs their field layouts to walk the records of packets it recovers.
pub const EVENTS_FILE: &str = "events.json";

/// Name of the file, next to `metadata` in a `--shm-path` buffer set, that holds the size
/// in bytes of each channel's event context block as JSON (`[usize]`, index = stream
/// class id, the buffer header's `stream_id`): `ust crash-dump` needs it to walk the
/// records of a channel with contexts (`vpid`, `procname`, …). A set without it (made by
/// an older daemon) is walked as if no channel had contexts.
pub const CONTEXTS_FILE: &str = "contexts.json";

/// Where [`copy_held_packets`] puts each packet (parsed context, whole packet bytes); an
/// error stops the pass.
pub type PacketSink<'a> = dyn FnMut(&PacketInfo, &[u8]) -> Result<(), String> + 'a;

/// What [`copy_held_packets`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeldReport {
    /// Packets handed to the sink.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Packets skipped because their copy failed validation.
    pub bad_packets: u64,
    /// Of `packets`, those rebuilt by torn-event recovery.
    pub recovered: u64,
    /// Records kept in recovered packets.
    pub records: u64,
    /// Bytes lost after an uncommitted slot.
    pub lost_bytes: u64,
    /// Events reported lost for those bytes (upper bound, added to `events_discarded`).
    pub lost_events: u64,
    /// `events_discarded` of the last packet handed to the sink.
    pub last_discarded: u64,
    /// Sub-buffers skipped because a (live) writer has not completed them yet.
    pub incomplete: u64,
}

/// State of one [`copy_held_packets`] pass over one buffer.
#[derive(Debug)]
pub struct HeldCopy<'a> {
    /// Identity every packet must carry.
    pub identity: &'a StreamIdentity,
    /// The process's events (record sizes).
    pub events: &'a [EventDesc],
    /// Events reported lost by recovery so far in this pass: added to the
    /// `events_discarded` of every later packet, so the counter stays cumulative.
    pub extra_discarded: u64,
    /// `timestamp_end` of the last packet of the stream (written before the pass, or
    /// in it), ns: a recovered packet never starts before it.
    pub last_end: u64,
    /// Counts.
    pub report: HeldReport,
    /// Size of the stream's event context block (after each event header), bytes.
    pub context_size: usize,
}

impl<'a> HeldCopy<'a> {
    /// A fresh pass over the buffer of stream `identity` of a process with `events`.
    pub fn new(identity: &'a StreamIdentity, events: &'a [EventDesc]) -> HeldCopy<'a> {
        HeldCopy { identity, events, extra_discarded: 0, last_end: 0, report: HeldReport::default(), context_size: 0 }
    }

    /// The same pass for a stream whose records carry an event context of `n` bytes.
    pub fn with_context_size(mut self, n: usize) -> HeldCopy<'a> {
        self.context_size = n;
        self
    }
}

/// Copies every packet a buffer still holds, oldest first, without consuming any, and
/// hands each to `sink` (LTTng's `lttng_ust_ctl_snapshot` walk, used by `ust snapshot
/// record`, post-mortem dumps, and the final drain of a dead process's buffers).
///
/// Complete packets are copied with [`Reader::snapshot_packet`]. A sub-buffer that never
/// completed is, when `writers_dead`, rebuilt by [`Reader::recover_packet`]: its records
/// are walked with [`crate::reader::record_size`] and the walk stops at the first
/// slot whose byte 0 is zero (reserved, never committed). Why that is sound with commits
/// out of order: byte 0 of a record is stored last, with Release, by its own writer, and
/// the sub-buffer was zeroed before the lap began (the `ringbuffer` crate docs,
/// "Per-slot commit evidence"), so a non-zero byte 0 proves a whole record, whereas a sum
/// of committed bytes cannot say *which* slot is missing. The kept prefix gets a
/// corrected `content_size` and a `timestamp_end` no earlier than its last record; the
/// bytes after it are reported as lost events (their count bounded from above by
/// [`crate::reader::min_record_size`]) in `events_discarded`, which every later
/// packet of the pass carries too. With live writers an incomplete sub-buffer is skipped
/// (counted in [`HeldReport::incomplete`]): its writer may still commit.
///
/// `max_packets` keeps only the newest packets (`ust snapshot record --max-size`).
///
/// In overwrite mode writers may lap the ring during the pass; a packet found gone sends
/// the pass on to the oldest packet held at that moment (at most `num_subbuf` such
/// chases), so a pass slower than the writers still keeps the newest packets instead of
/// coming out empty. At most `num_subbuf` packets are kept per stream, chases included;
/// with `max_packets`, the newest delivered ones (not the packet still being written).
///
/// Not concurrently with `get_subbuf`/`put_subbuf` on the same buffer: callers hold the
/// stream's lock.
///
/// # Errors
/// The sink's error (the pass stops), or the buffer's control words are corrupted.
pub fn copy_held_packets(
    buffer: &Reader,
    st: &mut HeldCopy<'_>,
    writers_dead: bool,
    max_packets: Option<usize>,
    sink: &mut PacketSink<'_>,
) -> Result<(), String> {
    use ringbuffer::SnapshotRead;
    let sbs = buffer.config().subbuf_size;
    let pos_of = buffer.geometry().pos;
    let range = |b: &Reader| {
        let mut r = b.snapshot_positions();
        let first = r.next();
        (first, first.map_or(0, |f| f + (r.count() as u64 + 1) * sbs))
    };
    let (first, mut end) = range(buffer);
    let Some(first) = first else { return Ok(()) };
    // Never more than a ring's worth per stream, chases included (the copy then spans
    // the moments of one ring, not the writers' progress during the pass).
    let limit = max_packets.map_or(u64::from(buffer.config().num_subbuf), |m| (m as u64).min(u64::from(buffer.config().num_subbuf)));
    // The newest position is usually the packet being written (a snapshot's flush closes
    // it, and full-speed writers open the next at once): the newest `limit` *delivered*
    // packets are the ones before it.
    let newest_open = buffer.subbuf_state(pos_of.subbuf_index(end - sbs)).is_ok_and(|s| s.delivered != pos_of.commit_complete(end - sbs));
    let held = (end - first) / sbs - u64::from(newest_open && end - sbs > first);
    let skip = held.saturating_sub(limit);
    let mut next = first + skip * sbs;
    // Writers in overwrite mode may lap the ring while the pass copies (a 64 KiB ring at
    // 10 M events/s lasts ~100 µs): a position found gone sends the pass on to the oldest
    // packet held now, at most one more ring's worth of chasing.
    let mut chases = buffer.config().num_subbuf;
    let mut out = Vec::new();
    let min_record = crate::reader::min_record_size(st.events) as u64;
    let mut kept = 0u64;
    while next < end && kept < limit {
        let pos = next;
        next += sbs;
        let mut recovered = None;
        match buffer.snapshot_packet(pos, &mut out) {
            Ok(SnapshotRead::Copied(_)) => {}
            Ok(SnapshotRead::Gone) => {
                if chases > 0 {
                    chases -= 1;
                    if let (Some(oldest), now_end) = range(buffer) {
                        if oldest > next {
                            next = oldest;
                            end = end.max(now_end);
                        }
                    }
                }
                continue;
            }
            Ok(SnapshotRead::Incomplete) if !writers_dead => {
                st.report.incomplete += 1;
                continue;
            }
            Ok(SnapshotRead::Incomplete) => {
                let (events, ctx) = (st.events, st.context_size);
                match buffer.recover_packet(&CtfPacketLayout, pos, &mut out, |b| crate::reader::record_size_with_context(events, ctx, b)) {
                    Ok(Some(r)) => recovered = Some(r),
                    Ok(None) => continue,
                    Err(e) => return Err(format!("recovery at position {pos}: {e}")),
                }
            }
            Err(ringbuffer::ReadError::Stale { .. }) => continue,
            Err(e) => return Err(format!("snapshot at position {pos}: {e}")),
        }
        if let Some(mut r) = recovered {
            if r.lost_bytes > 0 {
                let lost = r.lost_bytes.div_ceil(min_record).max(1);
                st.extra_discarded += lost;
                st.report.lost_bytes += r.lost_bytes;
                st.report.lost_events += lost;
            }
            // The last kept record's timestamp bounds timestamp_end from below.
            let content = r.packet.content_size as usize;
            let last = crate::reader::RecordWalker::over_content(st.events, &out[..content], r.end.timestamp_begin)
                .map_while(Result::ok)
                .map(|rec| rec.timestamp)
                .max();
            if r.records == 0 {
                // Nothing kept: its opener may have died before writing the packet's
                // begin (timestamp 0). An empty packet only carries the lost count; place
                // it right after the previous packet so timestamps stay in order.
                let after = if st.last_end > 0 { st.last_end } else { r.end.timestamp_end };
                r.end.timestamp_begin = r.end.timestamp_begin.max(after);
                r.end.timestamp_end = r.end.timestamp_begin;
            }
            r.end.timestamp_end = r.end.timestamp_end.max(last.unwrap_or(0)).max(r.end.timestamp_begin);
            r.end.events_discarded = r.end.events_discarded.wrapping_add(st.extra_discarded);
            r.rewrite_end(&CtfPacketLayout, st.identity, &mut out);
            st.report.recovered += 1;
            st.report.records += r.records;
        } else if st.extra_discarded > 0 {
            if let Ok(info) = PacketInfo::parse(&out, st.identity) {
                let end = ringbuffer::PacketEnd {
                    timestamp_begin: info.timestamp_begin,
                    timestamp_end: info.timestamp_end,
                    content_size: info.content_size,
                    packet_size: info.packet_size,
                    packet_seq_num: info.packet_seq_num,
                    events_discarded: info.events_discarded.wrapping_add(st.extra_discarded),
                };
                CtfPacketLayout.write_end(st.identity, &mut out[..HEADER_SIZE], &end);
            }
        }
        match PacketInfo::parse(&out, st.identity) {
            Ok(info) => {
                sink(&info, &out)?;
                kept += 1;
                st.report.packets += 1;
                st.report.bytes += out.len() as u64;
                st.report.last_discarded = info.events_discarded;
                st.last_end = st.last_end.max(info.timestamp_end);
            }
            Err(_) => st.report.bad_packets += 1,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringbuffer::{Buffer, BufferConfig, Mode, Reservation, SlotSize, Writer};
    use std::borrow::Cow;
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

    fn reserve(b: &Writer, ts: u64) -> Reservation {
        let clock = move || ts;
        let size = SlotSize { compact: 4 + 8, extended: 13 + 8 };
        b.reserve(&CtfPacketLayout, &clock, size).unwrap()
    }

    fn commit(b: &Writer, mut r: Reservation, v: u64) {
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
            let (w, b) = Buffer::create(map.into(), &cfg).unwrap().split();
            let (r1, r2, r3) = (reserve(&w, 100), reserve(&w, 200), reserve(&w, 300));
            commit(&w, r3, 3);
            commit(&w, r1, 1);
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
            let (_, w) = crate::reader::RecordWalker::new(&ev, p).unwrap();
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
        assert_eq!(crate::reader::record_size(&ev, &rec), Some(12));
        assert_eq!(crate::reader::record_size(&ev, &rec[..11]), None, "cut short");
        rec[0] = 0;
        assert_eq!(crate::reader::record_size(&ev, &rec), None, "uncommitted");
        assert_eq!(crate::reader::min_record_size(&ev), 12);
    }
}
