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
    /// Packets dropped because no bounds could place them in time order after the
    /// previous packet (module `order`: a record earlier than the previous packet's end,
    /// records out of order, or an empty packet whose time is unknown with nothing after
    /// it). Their records are in `lost_events` and in the `events_discarded` of every
    /// later packet of the pass; babeltrace2 sees the gap in `packet_seq_num`.
    pub dropped: u64,
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
    /// in it), ns: no packet of the pass begins before it.
    pub last_end: u64,
    /// `events_discarded` of the last packet of the stream (written before the pass, or
    /// in it): no packet of the pass carries less.
    pub last_discarded: u64,
    /// Counts.
    pub report: HeldReport,
    /// Size of the stream's event context block (after each event header), bytes.
    pub context_size: usize,
    /// An empty packet whose time is not known yet ([`order::Fit::HoldBack`]).
    held_back: Option<Vec<u8>>,
}

impl<'a> HeldCopy<'a> {
    /// A fresh pass over the buffer of stream `identity` of a process with `events`.
    pub fn new(identity: &'a StreamIdentity, events: &'a [EventDesc]) -> HeldCopy<'a> {
        HeldCopy { identity, events, extra_discarded: 0, last_end: 0, last_discarded: 0, report: HeldReport::default(), context_size: 0, held_back: None }
    }

    /// The same pass for a stream whose records carry an event context of `n` bytes.
    pub fn with_context_size(mut self, n: usize) -> HeldCopy<'a> {
        self.context_size = n;
        self
    }

    /// The same pass for a stream whose packets so far ended at `timestamp_end` with
    /// `events_discarded` (the last drain of a stream the daemon was writing): the pass
    /// goes on from there.
    pub fn after(mut self, timestamp_end: u64, events_discarded: u64) -> HeldCopy<'a> {
        self.last_end = timestamp_end;
        self.last_discarded = events_discarded;
        self
    }

    /// Hands `packet` (context parsed as `info`) to `sink`, after a held-back empty
    /// packet, placed at its begin; counts it.
    fn emit(&mut self, info: &PacketInfo, packet: &[u8], sink: &mut PacketSink<'_>) -> Result<(), String> {
        if let Some(mut e) = self.held_back.take() {
            if let Ok(ei) = PacketInfo::parse(&e, self.identity) {
                let at = info.timestamp_begin;
                order::rewrite(self, &mut e, &ei, at, at, ei.events_discarded.min(info.events_discarded));
                if let Ok(ei) = PacketInfo::parse(&e, self.identity) {
                    self.sink_one(&ei, &e, sink)?;
                }
            }
        }
        self.sink_one(info, packet, sink)
    }

    fn sink_one(&mut self, info: &PacketInfo, packet: &[u8], sink: &mut PacketSink<'_>) -> Result<(), String> {
        sink(info, packet)?;
        self.report.packets += 1;
        self.report.bytes += packet.len() as u64;
        self.report.last_discarded = info.events_discarded;
        self.last_discarded = self.last_discarded.max(info.events_discarded);
        self.last_end = self.last_end.max(info.timestamp_end);
        Ok(())
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
/// corrected `content_size`; the bytes after it are reported as lost events (their count
/// bounded from above by [`crate::reader::min_record_size`]) in `events_discarded`,
/// which every later packet of the pass carries too. With live writers an incomplete
/// sub-buffer is skipped (counted in [`HeldReport::incomplete`]): its writer may still
/// commit.
///
/// Every packet, recovered or complete, is then placed in time order after the previous
/// one of the stream (`st.last_end` and `st.last_discarded` before the pass; module
/// `order`): its `timestamp_begin` and `timestamp_end` enclose its records, it begins no
/// earlier than the previous packet ended, and `events_discarded` never decreases. A
/// packet that cannot be placed so is dropped and counted ([`HeldReport::dropped`]; its
/// records as lost events), never written out of order: babeltrace2's muxer refuses a
/// stream whose time goes back.
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
                // Every record is at least `min_record` bytes, so the lost bytes hold at
                // most this many (fewer bytes than a record: the padding of a sub-buffer
                // whose close a killed closer never recorded, no record).
                let lost = r.lost_bytes / min_record.max(1);
                st.extra_discarded += lost;
                st.report.lost_bytes += r.lost_bytes;
                st.report.lost_events += lost;
            }
            if r.records == 0 {
                // Nothing kept: an empty packet only carries the lost count. Its opener
                // may have died before recording the begin (0): its recorded end, if it
                // was closed, is a moment it was open. Module `order` places it after the
                // previous packet (or, with no time at all, at the next one's begin).
                if r.end.timestamp_begin == 0 {
                    r.end.timestamp_begin = r.end.timestamp_end;
                }
                r.end.timestamp_end = r.end.timestamp_begin;
            }
            // `timestamp_end` is raised to the last kept record by `order::fit` (a closer
            // killed before recording the close left none).
            r.end.timestamp_end = r.end.timestamp_end.max(r.end.timestamp_begin);
            r.end.events_discarded = r.end.events_discarded.wrapping_add(st.extra_discarded);
            r.rewrite_end(&CtfPacketLayout, st.identity, &mut out);
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
        // In time order after the previous packet, or not at all (module `order`).
        let count_recovered = |st: &mut HeldCopy<'_>| {
            if let Some(r) = &recovered {
                st.report.recovered += 1;
                st.report.records += r.records;
            }
        };
        match order::fit(st, &mut out, recovered.is_some()) {
            order::Fit::Emit(info) => {
                count_recovered(st);
                st.emit(&info, &out, sink)?;
                kept += 1;
            }
            order::Fit::HoldBack => {
                count_recovered(st);
                if st.held_back.replace(out.clone()).is_some() {
                    // An older one never placed: this one carries its lost count too.
                    st.report.dropped += 1;
                }
            }
            order::Fit::Drop { records } => {
                st.extra_discarded += records;
                st.report.lost_events += records;
                st.report.dropped += 1;
            }
            order::Fit::Bad => st.report.bad_packets += 1,
        }
    }
    if st.held_back.take().is_some() {
        // Nothing after it to take a time from; its lost count is in the report.
        st.report.dropped += 1;
    }
    Ok(())
}

mod order;
#[cfg(test)]
mod tests;
