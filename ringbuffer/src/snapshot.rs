//! Reading a buffer without consuming it: snapshots of the complete packets it holds
//! (`ust snapshot record`, LTTng's `lttng_ust_ctl_snapshot` + `get_subbuf` at positions),
//! and recovery of the committed prefix of packets that were never completed (a writer
//! died between reserve and commit: post-mortem dumps and `ust crash-dump`).
//!
//! A snapshot, after a reader-side [`flush`](Reader::flush), walks the positions of
//! [`snapshot_positions`](Reader::snapshot_positions) oldest first and copies each with
//! [`snapshot_packet`](Reader::snapshot_packet):
//!
//! ```text
//!   consumed (or write - ring)                      write
//!   │ pkt n │ pkt n+1 │ pkt n+2 │ pkt n+3 (open) │
//!     Copied   Copied    Copied    Incomplete -> recover_packet() for a dead writer
//! ```
//!
//! * **Overwrite mode**: `snapshot_packet` takes the packet out of the writers' reach
//!   exactly as the live reader does (it swaps the reader's spare into the packet's
//!   id-table entry, so a writer that needs the sub-buffer meanwhile claims the spare
//!   instead), copies it, and swaps it back if no writer claimed the spare meanwhile (the
//!   snapshot then consumed nothing). If a writer did, that writer was about to overwrite
//!   the packet anyway: the copy is kept, the packet leaves the ring and becomes the
//!   reader's (zeroed) spare. Either way the copy is intact and writers never wait.
//! * **Discard mode**: packets between `consumed` and `write` cannot be entered by a
//!   writer until the reader releases them, so they are copied in place.
//!
//! **Interaction with the live reader.** A snapshot uses the reader's spare and the
//! reader's position words: it must not run concurrently with
//! [`get_subbuf`](Reader::get_subbuf)/[`put_subbuf`](Reader::put_subbuf) on the same
//! buffer (one reader at a time; a snapshot session has no live consumer, as in LTTng,
//! and a daemon serializes both on a buffer). It never moves `consumed`. While the live
//! reader holds a packet, `snapshot_packet` refuses ([`ReadError::Stale`]).

use core::sync::atomic::Ordering::*;

use crate::ids::{IdState, SubbufId};
use crate::layout::*;
use crate::{Buffer, Memory, Mode, PacketEnd, PacketLayout, ReadError, Reader};

/// Where a packet copied out by [`Reader::snapshot_packet`] or
/// [`Reader::recover_packet`] came from and what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketCopy {
    /// Free-running position of the packet's start, in bytes.
    pub position: u64,
    /// Sequence number of the packet (`position / subbuf_size`).
    pub packet_seq_num: u64,
    /// Bytes of header, context and records (no end padding).
    pub content_size: u64,
    /// Bytes of the packet (the sub-buffer size); the copy has this length.
    pub packet_size: u64,
}

/// What [`Reader::snapshot_packet`] found at a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotRead {
    /// The complete packet was copied (header and context as its deliverer wrote them).
    Copied(PacketCopy),
    /// The sub-buffer at this position is open, or closed with a commit missing (a slow
    /// or dead writer): nothing copied. For a dead writer, [`Reader::recover_packet`]
    /// keeps its committed prefix.
    Incomplete,
    /// No packet of this position is in the ring any more (overwritten, being
    /// overwritten, released by the reader, or held by the live reader), or the position
    /// was never written.
    Gone,
}

/// Why a recovery walk stopped ([`Recovered::stop`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkStop {
    /// At the content end (the closer's recorded end, the write position, or the
    /// sub-buffer end): every reserved record was committed.
    End,
    /// At a record whose byte 0 is zero: reserved, never committed.
    Uncommitted,
    /// The record-size callback refused a record (`None`, 0, or past the content end).
    BadRecord,
}

/// The committed prefix of a packet, found by [`Reader::recover_packet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recovered {
    /// Position, sequence number, corrected content size, packet size.
    pub packet: PacketCopy,
    /// What was written into the copy's packet context with
    /// [`PacketLayout::write_end`]. `timestamp_begin` is the opener's, 0 if the opener
    /// died before recording it (then no record is kept: the opener's own slot, the
    /// first, was never committed). `timestamp_end` is the closer's when the packet was
    /// closed; for the newest sub-buffer left open, the buffer's latest reservation
    /// timestamp (at least `timestamp_begin`); for an older one whose closer was killed
    /// between its CAS of `write` and recording the close, `timestamp_begin`: the caller
    /// must raise it to its last kept record's timestamp (it decodes them) and call
    /// [`Recovered::rewrite_end`]. It is never a later packet's time, so it never
    /// overlaps the packets after it.
    pub end: PacketEnd,
    /// Records kept (walked before the stop).
    pub records: u64,
    /// Bytes reserved after the kept prefix (lost: uncommitted, or after an uncommitted
    /// one), up to the content end.
    pub lost_bytes: u64,
    /// Where the walk stopped.
    pub stop: WalkStop,
    /// True if the packet had been delivered (all of it committed): `lost_bytes` is then
    /// 0 unless the callback refused a record.
    pub delivered: bool,
}

impl Recovered {
    /// Rewrites the packet context of `copy` (the packet returned by
    /// [`Reader::recover_packet`]) from [`Recovered::end`], through the client.
    pub fn rewrite_end<L: PacketLayout>(&self, layout: &L, stream: &crate::StreamIdentity, copy: &mut [u8]) {
        let hdr = layout.header_size().min(copy.len());
        layout.write_end(stream, &mut copy[..hdr], &self.end);
    }
}

/// Bound on the retries of a snapshot's swap (a retry means a writer claimed the entry).
const SNAPSHOT_RETRIES: u32 = 4;

impl<M: Memory> Buffer<M> {
    /// Validated (content size, seq) from the control words of the packet at `pos`.
    fn packet_words(&self, pos: u64) -> Result<PacketCopy, ReadError> {
        let g = &self.geo;
        let p = g.pos;
        let idx = p.subbuf_index(pos);
        let sbs = p.subbuf_size();
        let content = self.mem.load_u64(g.sb_word(idx, SB_CLOSED_END), Relaxed).wrapping_sub(pos);
        let seq = self.mem.load_u64(g.sb_word(idx, SB_SEQ), Relaxed);
        if content < g.header_size || content > sbs || content == 0 {
            return Err(ReadError::ContentSize { content, subbuf_size: sbs });
        }
        if seq != p.packet_seq(pos) {
            return Err(ReadError::PacketSeq { expected: p.packet_seq(pos), found: seq });
        }
        Ok(PacketCopy { position: pos, packet_seq_num: seq, content_size: content, packet_size: sbs })
    }

    fn snapshot_in_place(&self, pos: u64, out: &mut Vec<u8>) -> Result<SnapshotRead, ReadError> {
        let g = &self.geo;
        let p = g.pos;
        let idx = p.subbuf_index(pos);
        let consumed = self.mem.load_u64(g.ctrl_word(CTRL_CONSUMED), Acquire);
        if (pos.wrapping_sub(consumed) as i64) < 0 || pos.wrapping_sub(consumed) >= p.buf_size() {
            return Ok(SnapshotRead::Gone);
        }
        if self.mem.load_u64(g.sb_word(idx, SB_DELIVERED), Acquire) != p.commit_complete(pos) {
            return Ok(SnapshotRead::Incomplete);
        }
        let info = self.packet_words(pos)?;
        out.clear();
        out.resize(p.subbuf_size() as usize, 0);
        self.mem.read_bytes(g.data_at(idx, 0), out);
        // No concurrent reader (module docs): `consumed` cannot have moved, and writers
        // do not enter an unreleased sub-buffer.
        Ok(SnapshotRead::Copied(info))
    }

    fn snapshot_swap(&self, pos: u64, out: &mut Vec<u8>) -> Result<SnapshotRead, ReadError> {
        let g = &self.geo;
        let p = g.pos;
        let m = &self.mem;
        let idx = p.subbuf_index(pos);
        let lap = p.lap(pos);
        let idw = g.id_word(idx);
        let (spare, held) = self.reader_word()?;
        if held {
            return Err(ReadError::Stale { consumed: m.load_u64(g.ctrl_word(CTRL_CONSUMED), Relaxed) });
        }
        for _ in 0..SNAPSHOT_RETRIES {
            let id = SubbufId(m.load_u64(idw, Acquire));
            if id.state().is_none() || id.phys() >= g.nphys || id.phys() == spare {
                return Err(ReadError::Id { index: idx, id: id.0 });
            }
            if id.is(IdState::Writing, lap) {
                return Ok(SnapshotRead::Incomplete);
            }
            if !id.is(IdState::Delivered, lap) {
                return Ok(SnapshotRead::Gone);
            }
            // Lap `lap`'s words, valid if the swap succeeds (as in `get_subbuf`).
            let words = self.packet_words(pos);
            let spare_id = SubbufId::new(spare, lap, IdState::Spare);
            if m.cas_u64(idw, id.0, spare_id.0, AcqRel, Acquire).is_err() {
                continue;
            }
            // The packet is ours until we give it back.
            let phys = id.phys();
            if words.is_ok() {
                out.clear();
                out.resize(p.subbuf_size() as usize, 0);
                m.read_bytes(g.data_at(phys, 0), out);
            }
            // Give it back unless a writer claimed our spare meanwhile (it would have
            // overwritten the packet): then the packet's sub-buffer is our new spare.
            if m.cas_u64(idw, spare_id.0, id.0, AcqRel, Relaxed).is_err() {
                m.zero(g.data_at(phys, 0), p.subbuf_size() as usize);
                m.store_u64(g.ctrl_word(CTRL_READER_SPARE), phys as u64, Relaxed);
            }
            return words.map(SnapshotRead::Copied);
        }
        Ok(SnapshotRead::Gone)
    }
}

impl<M: Memory> Reader<M> {
    /// Start positions of the sub-buffers that may hold a packet, oldest first: from
    /// `consumed` (at most one ring back) to the sub-buffer `write` is in, included if
    /// it is open. Call after [`flush`](Reader::flush) to include the newest records.
    /// Each position goes to [`snapshot_packet`](Reader::snapshot_packet) (and, for a
    /// dead writer, [`recover_packet`](Reader::recover_packet) when that returns
    /// [`SnapshotRead::Incomplete`]).
    ///
    /// ```
    /// # use ringbuffer::*;
    /// # let cfg = BufferConfig { subbuf_size: 4096, num_subbuf: 2, mode: Mode::Overwrite,
    /// #     header_size: 16, stream: StreamIdentity::default() };
    /// # let buf = Buffer::create(memmap2::MmapOptions::new().len(cfg.file_size()?).map_anon()?.into(), &cfg)?.into_reader();
    /// let mut out = Vec::new();
    /// for pos in buf.snapshot_positions() {
    ///     if let SnapshotRead::Copied(p) = buf.snapshot_packet(pos, &mut out)? {
    ///         // write out[..p.packet_size] to the stream file
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot_positions(&self) -> core::iter::StepBy<core::ops::Range<u64>> {
        let g = &self.geo;
        let write = self.mem.load_u64(g.ctrl_word(CTRL_WRITE), Acquire);
        let consumed = self.mem.load_u64(g.ctrl_word(CTRL_CONSUMED), Acquire);
        let (begin, end) = g.pos.held_range(write, consumed);
        (begin..end).step_by(g.pos.subbuf_size() as usize)
    }

    /// Copies the complete packet at `pos` (a sub-buffer start) into `out` (cleared and
    /// resized to the sub-buffer size) without consuming it; see the [module
    /// docs](crate::snapshot) for how the copy is kept intact while writers run.
    ///
    /// Errors: [`ReadError::Position`] if `pos` is not a sub-buffer start;
    /// [`ReadError::Stale`] if the live reader holds a packet (overwrite mode);
    /// [`ReadError::Id`], [`ReadError::ContentSize`], [`ReadError::PacketSeq`] on
    /// corrupted shared memory.
    pub fn snapshot_packet(&self, pos: u64, out: &mut Vec<u8>) -> Result<SnapshotRead, ReadError> {
        let g = &self.geo;
        let p = g.pos;
        if p.subbuf_offset(pos) != 0 {
            let write = self.mem.load_u64(g.ctrl_word(CTRL_WRITE), Relaxed);
            return Err(ReadError::Position { consumed: pos, write });
        }
        match self.cfg.mode {
            Mode::Discard => self.snapshot_in_place(pos, out),
            Mode::Overwrite => self.snapshot_swap(pos, out),
        }
    }

    /// Recovers the committed prefix of the packet at `pos` (a sub-buffer start), for a
    /// packet that was never completed because a writer died between reserve and
    /// commit (docs/DESIGN.md#torn-events; for a delivered packet it returns the whole
    /// packet). Copies the sub-buffer into `out` (resized to the sub-buffer size), walks
    /// its records from the end of the packet header, calling `record_size` with the
    /// bytes from a record's start to the content end (it returns the record's length
    /// in bytes, decoded from its header, or `None` if the bytes are not a record), and
    /// stops at the first record whose byte 0 is zero (reserved, not committed), at the
    /// content end (the closer's recorded end if the packet was closed, else the
    /// `write` position, else the sub-buffer end), or at a refused record. Then it
    /// zeroes the copy after the kept prefix and rewrites the copy's packet context with
    /// [`PacketLayout::write_end`] (`content_size` = the prefix). Everything after the
    /// prefix is reported in [`Recovered::lost_bytes`].
    ///
    /// Why stopping at the first uncommitted record is sound with out-of-order commits:
    /// byte 0 of a slot is non-zero exactly when its writer committed it in this lap
    /// (crate docs, "Per-slot commit evidence"), so every kept record is whole. Records
    /// after an uncommitted one may be committed, but their start is only known from
    /// the uncommitted record's length, whose bytes may never have been written; any
    /// guess (scanning for a plausible header) could start a record inside another's
    /// payload and emit garbage. Keeping the prefix never emits a torn or misparsed
    /// event; the rest is counted as lost.
    ///
    /// The walk reads each kept record's byte 0 with Acquire before the bytes it keeps
    /// (a second copy, checked against the first walk), so a writer that is still
    /// committing records *in this lap* only makes the prefix shorter. That is all it
    /// covers: a live writer may also close the packet, or in overwrite mode claim the
    /// sub-buffer for the next lap and zero it during the walk, and the copy could then
    /// mix laps. So call it only when every writer of the buffer is dead (the daemon does:
    /// a process's death, `ust crash-dump`), and not concurrently with the live reader.
    /// No model-checker run covers it against live writers.
    /// Returns `Ok(None)` if no packet of `pos` is in the ring (never opened, released,
    /// overwritten, or taken by the reader).
    ///
    /// Errors: [`ReadError::Position`] if `pos` is not a sub-buffer start or `write` and
    /// `consumed` are corrupted; [`ReadError::Id`] for a corrupted id.
    pub fn recover_packet<L: PacketLayout>(
        &self,
        layout: &L,
        pos: u64,
        out: &mut Vec<u8>,
        mut record_size: impl FnMut(&[u8]) -> Option<usize>,
    ) -> Result<Option<Recovered>, ReadError> {
        let g = &self.geo;
        let p = g.pos;
        let m = &self.mem;
        let sbs = p.subbuf_size();
        let hdr = g.header_size;
        let idx = p.subbuf_index(pos);
        let lap = p.lap(pos);
        let write = m.load_u64(g.ctrl_word(CTRL_WRITE), Acquire);
        if p.subbuf_offset(pos) != 0 {
            return Err(ReadError::Position { consumed: pos, write });
        }
        let written = write.wrapping_sub(pos);
        if written == 0 || written > i64::MAX as u64 || written > p.buf_size() {
            return Ok(None); // not opened yet, or more than a ring ago
        }
        // Which physical sub-buffer, and is it still this lap's?
        let still_ours = |phys: usize| -> Result<bool, ReadError> {
            match self.cfg.mode {
                Mode::Discard => {
                    let consumed = m.load_u64(g.ctrl_word(CTRL_CONSUMED), Acquire);
                    Ok(pos.wrapping_sub(consumed) < p.buf_size() && phys == idx)
                }
                Mode::Overwrite => {
                    let id = SubbufId(m.load_u64(g.id_word(idx), Acquire));
                    if id.state().is_none() || id.phys() >= g.nphys {
                        return Err(ReadError::Id { index: idx, id: id.0 });
                    }
                    Ok(id.phys() == phys && (id.is(IdState::Writing, lap) || id.is(IdState::Delivered, lap)))
                }
            }
        };
        let phys = match self.cfg.mode {
            Mode::Discard => idx,
            Mode::Overwrite => SubbufId(m.load_u64(g.id_word(idx), Acquire)).phys(),
        };
        if phys >= g.nphys || !still_ours(phys)? {
            return Ok(None);
        }
        let delivered = m.load_u64(g.sb_word(idx, SB_DELIVERED), Acquire) == p.commit_complete(pos);
        // Content end: the closer's record, else `write` in this sub-buffer, else the end.
        let closed_end = m.load_u64(g.sb_word(idx, SB_CLOSED_END), Acquire).wrapping_sub(pos);
        let closed = (hdr..=sbs).contains(&closed_end) && closed_end != 0;
        let end = if closed {
            closed_end
        } else if written < sbs {
            written
        } else {
            sbs
        };
        let opened = m.load_u64(g.sb_word(idx, SB_SEQ), Relaxed) == p.packet_seq(pos);
        let ts_begin = if opened { m.load_u64(g.sb_word(idx, SB_TS_BEGIN), Relaxed) } else { 0 };
        let (ts_end, discarded) = if closed {
            (m.load_u64(g.sb_word(idx, SB_TS_END), Relaxed), m.load_u64(g.sb_word(idx, SB_DISCARDED), Relaxed))
        } else if written < sbs {
            // The newest sub-buffer (`write` is inside it): no reservation of the buffer is
            // later than its records, so the latest one bounds them all.
            (m.load_u64(g.ctrl_word(CTRL_LAST_TSC), Relaxed).max(ts_begin), self.lost_total())
        } else {
            // `write` moved past it but its close was never recorded: the closer (or the
            // writer whose record filled it) was killed between its CAS and its close.
            // The latest reservation belongs to a later packet, so it must not end this
            // one (the next packets would begin before it ends); nothing recorded says
            // when its last record was reserved, so the caller takes it from the records.
            (ts_begin, self.lost_total())
        };
        let end = end.max(hdr);
        // First copy and walk: candidate record starts.
        let mut first = vec![0u8; sbs as usize];
        m.read_bytes(g.data_at(phys, 0), &mut first);
        let mut starts = Vec::new();
        let mut off = hdr;
        let mut stop = WalkStop::End;
        while off < end {
            if first[off as usize] == 0 {
                stop = WalkStop::Uncommitted;
                break;
            }
            match record_size(&first[off as usize..end as usize]) {
                Some(n) if n > 0 && off + n as u64 <= end => {
                    starts.push(off);
                    off += n as u64;
                }
                _ => {
                    stop = WalkStop::BadRecord;
                    break;
                }
            }
        }
        // Commit evidence, with Acquire, before the copy we keep.
        if let Some(k) = starts.iter().position(|&o| m.load_u8(g.data_at(phys, o), Acquire) == 0) {
            starts.truncate(k);
            stop = WalkStop::Uncommitted;
        }
        out.clear();
        out.resize(sbs as usize, 0);
        m.read_bytes(g.data_at(phys, 0), out);
        if !still_ours(phys)? {
            return Ok(None);
        }
        // Second walk, on the copy we keep, over the verified starts only.
        let mut content = hdr;
        let mut records = 0u64;
        for &o in &starts {
            if o != content || out[o as usize] == 0 {
                stop = WalkStop::Uncommitted;
                break;
            }
            match record_size(&out[o as usize..end as usize]) {
                Some(n) if n > 0 && o + n as u64 <= end => {
                    content = o + n as u64;
                    records += 1;
                }
                _ => {
                    stop = WalkStop::BadRecord;
                    break;
                }
            }
        }
        out[content as usize..].fill(0);
        let packet = PacketCopy { position: pos, packet_seq_num: p.packet_seq(pos), content_size: content, packet_size: sbs };
        let rec = Recovered {
            packet,
            end: PacketEnd {
                timestamp_begin: ts_begin,
                timestamp_end: ts_end,
                content_size: content,
                packet_size: sbs,
                packet_seq_num: packet.packet_seq_num,
                events_discarded: discarded,
            },
            records,
            lost_bytes: end - content,
            stop: if content == end { WalkStop::End } else { stop },
            delivered,
        };
        rec.rewrite_end(layout, &self.cfg.stream, out);
        Ok(Some(rec))
    }
}
