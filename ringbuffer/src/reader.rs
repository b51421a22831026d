//! Reader side (daemon): get, copy and put delivered sub-buffers (LTTng-UST's
//! `lib_ring_buffer_get_subbuf`/`put_subbuf`), and the state recovery needs.
//!
//! The reader treats the whole mapping as hostile: it only uses the local geometry for
//! sizes and offsets, checks every value it reads from shared memory before using it as
//! a size, offset or id, uses wrapping arithmetic on them, copies a packet out before
//! anyone validates its bytes, and never loops.

use core::sync::atomic::Ordering::*;

use crate::ids::{IdState, SubbufId, PHYS_MASK};
use crate::layout::*;
use crate::{Buffer, Memory, Mode, ReadError, Reader, Subbuf};

/// Bound on the retries of an overwrite-mode `get_subbuf` (each retry means a writer
/// overwrote the packet the reader was about to take, or moved `consumed`): the reader
/// never loops without bound, even on hostile memory or a buffer whose writers are dead.
const GET_RETRIES: u32 = 16;

/// The control words of one sub-buffer, as read (each atomically) by
/// [`Reader::subbuf_state`]: what crash recovery needs to find the records that were
/// committed in a packet nobody delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubbufState {
    /// Ring index.
    pub index: usize,
    /// Raw id-table entry (low 32 bits: physical sub-buffer).
    pub id: u64,
    /// Free-running commit counter, in bytes (complete for lap `L` at `(L+1)*subbuf_size`).
    pub commit_count: u64,
    /// Commit-counter value at the last delivery (`(L+1)*subbuf_size` once lap `L` is
    /// delivered; 0 before any).
    pub delivered: u64,
    /// Free-running position where the content of the last *closed* packet of this
    /// sub-buffer ends (stored before the padding is committed). For the packet still
    /// open, the content end is the buffer's `write` position instead.
    pub closed_end: u64,
    /// `timestamp_begin` of the last packet opened here, in ns.
    pub timestamp_begin: u64,
    /// `timestamp_end` of the last packet closed here, in ns.
    pub timestamp_end: u64,
    /// `packet_seq_num` of the last packet opened here.
    pub packet_seq_num: u64,
    /// `events_discarded` of the last packet closed here (cumulative lost count).
    pub events_discarded: u64,
}

impl<M: Memory> Buffer<M> {
    /// Discard mode: the packet at `consumed` if it is delivered for this lap, as
    /// (`consumed`, ring index, physical sub-buffer); `None` if it is not delivered yet.
    /// Errors: [`ReadError::Position`], [`ReadError::Id`] on impossible control words.
    fn delivered_at_consumed(&self) -> Result<Option<(u64, usize, usize)>, ReadError> {
        let g = &self.geo;
        let p = g.pos;
        let consumed = self.mem.load_u64(g.ctrl_word(CTRL_CONSUMED), Acquire);
        let write = self.mem.load_u64(g.ctrl_word(CTRL_WRITE), Acquire);
        let ahead = write.wrapping_sub(consumed);
        if p.subbuf_offset(consumed) != 0 || ahead > p.buf_size() {
            return Err(ReadError::Position { consumed, write });
        }
        let index = p.subbuf_index(consumed);
        if self.mem.load_u64(g.sb_word(index, SB_DELIVERED), Acquire) != p.commit_complete(consumed) {
            return Ok(None);
        }
        // Delivered for this lap: `write` is past its end (our load of `write` may be
        // older than the delivery; reload it).
        let write = self.mem.load_u64(g.ctrl_word(CTRL_WRITE), Acquire);
        let ahead = write.wrapping_sub(consumed);
        if ahead < p.subbuf_size() || ahead > p.buf_size() {
            return Err(ReadError::Position { consumed, write });
        }
        Ok(Some((consumed, index, self.checked_phys(index)?)))
    }

    /// The reader's word: (its physical sub-buffer, holding a packet?).
    pub(crate) fn reader_word(&self) -> Result<(usize, bool), ReadError> {
        let w = self.mem.load_u64(self.geo.ctrl_word(CTRL_READER_SPARE), Relaxed);
        let phys = (w & PHYS_MASK) as usize;
        if w & !(PHYS_MASK | READER_HELD) != 0 || phys >= self.geo.nphys {
            return Err(ReadError::Id { index: usize::MAX, id: w });
        }
        Ok((phys, w & READER_HELD != 0))
    }

    /// Overwrite-mode `get_subbuf`: take the packet at `consumed` out of the writers'
    /// reach by swapping the reader's spare into its id-table entry.
    fn get_subbuf_overwrite(&self) -> Result<Option<Subbuf>, ReadError> {
        let g = &self.geo;
        let p = g.pos;
        let sbs = p.subbuf_size();
        let m = &self.mem;
        let (spare, held) = self.reader_word()?;
        if held {
            // Not put back yet: hand out the same packet again (as discard mode does).
            let pos = m.load_u64(g.ctrl_word(CTRL_READER_POS), Relaxed);
            let content = m.load_u64(g.ctrl_word(CTRL_READER_CONTENT), Relaxed);
            if p.subbuf_offset(pos) != 0 || content < g.header_size || content > sbs || content == 0 {
                return Err(ReadError::ContentSize { content, subbuf_size: sbs });
            }
            let (index, packet_seq_num) = (p.subbuf_index(pos), p.packet_seq(pos));
            return Ok(Some(Subbuf { packet_seq_num, content_size: content, packet_size: sbs, index, phys: spare, pos }));
        }
        for _ in 0..GET_RETRIES {
            // `write` first: the writer that opens a sub-buffer pushed `consumed` before
            // its CAS of `write`, so `consumed` loaded after is within a ring of it.
            let write = m.load_u64(g.ctrl_word(CTRL_WRITE), Acquire);
            let consumed = m.load_u64(g.ctrl_word(CTRL_CONSUMED), Acquire);
            let ahead = write.wrapping_sub(consumed);
            if ahead > i64::MAX as u64 {
                continue; // `consumed` was pushed past our (older) `write`: reload both
            }
            if p.subbuf_offset(consumed) != 0 || ahead > p.buf_size() {
                return Err(ReadError::Position { consumed, write });
            }
            if ahead < sbs {
                return Ok(None); // the packet at `consumed` is still open
            }
            let index = p.subbuf_index(consumed);
            let lap = p.lap(consumed);
            if m.load_u64(g.sb_word(index, SB_DELIVERED), Acquire) != p.commit_complete(consumed) {
                if m.load_u64(g.ctrl_word(CTRL_CONSUMED), Acquire) != consumed {
                    continue;
                }
                return Ok(None); // closed, not fully committed yet
            }
            let id = SubbufId(m.load_u64(g.id_word(index), Acquire));
            if id.state().is_none() || id.phys() >= g.nphys {
                return Err(ReadError::Id { index, id: id.0 });
            }
            if id.is(IdState::Writing, lap) {
                return Ok(None); // its deliverer is between `delivered` and the id
            }
            if !id.is(IdState::Delivered, lap) {
                // A writer claimed it for the next lap (and pushed `consumed` first).
                continue;
            }
            if id.phys() == spare {
                return Err(ReadError::Id { index, id: id.0 });
            }
            // Read lap `lap`'s control words now; they are lap `lap`'s if the swap below
            // succeeds (the next lap's writers store them only after claiming the entry,
            // which our successful swap happens-before). Validated after the swap.
            let closed_end = m.load_u64(g.sb_word(index, SB_CLOSED_END), Relaxed);
            let seq = m.load_u64(g.sb_word(index, SB_SEQ), Relaxed);
            let spare_id = SubbufId::new(spare, lap, IdState::Spare);
            if m.cas_u64(g.id_word(index), id.0, spare_id.0, AcqRel, Acquire).is_err() {
                continue; // claimed by a writer meanwhile
            }
            // The packet is ours: no writer can reach this physical sub-buffer any more.
            let phys = id.phys();
            let content = closed_end.wrapping_sub(consumed);
            let bad = if content < g.header_size || content > sbs || content == 0 {
                Some(ReadError::ContentSize { content, subbuf_size: sbs })
            } else if seq != p.packet_seq(consumed) {
                Some(ReadError::PacketSeq { expected: p.packet_seq(consumed), found: seq })
            } else {
                None
            };
            if let Some(e) = bad {
                // Keep the sub-buffer as our (zeroed) spare and report the corruption.
                m.zero(g.data_at(phys, 0), sbs as usize);
                m.store_u64(g.ctrl_word(CTRL_READER_SPARE), phys as u64, Relaxed);
                return Err(e);
            }
            m.store_u64(g.ctrl_word(CTRL_READER_POS), consumed, Relaxed);
            m.store_u64(g.ctrl_word(CTRL_READER_CONTENT), content, Relaxed);
            m.store_u64(g.ctrl_word(CTRL_READER_SPARE), phys as u64 | READER_HELD, Relaxed);
            return Ok(Some(Subbuf { packet_seq_num: seq, content_size: content, packet_size: sbs, index, phys, pos: consumed }));
        }
        Ok(None)
    }

    /// Overwrite mode: checks that the reader holds `sb` (got, not yet put).
    fn check_held(&self, sb: &Subbuf) -> Result<(), ReadError> {
        let g = &self.geo;
        let (phys, held) = self.reader_word()?;
        let pos = self.mem.load_u64(g.ctrl_word(CTRL_READER_POS), Relaxed);
        if !held || phys != sb.phys || pos != sb.pos || sb.index != g.pos.subbuf_index(sb.pos) {
            return Err(ReadError::Stale { consumed: self.mem.load_u64(g.ctrl_word(CTRL_CONSUMED), Relaxed) });
        }
        Ok(())
    }

    /// Reads and checks the id of ring index `index`.
    fn checked_phys(&self, index: usize) -> Result<usize, ReadError> {
        let id = self.mem.load_u64(self.geo.id_word(index), Relaxed);
        let phys = (id & ID_INDEX_MASK) as usize;
        let ok = match self.cfg.mode {
            // Overwrite mode is not implemented yet and also reads in place.
            Mode::Discard | Mode::Overwrite => id == index as u64,
        };
        if !ok || phys >= self.geo.nphys {
            return Err(ReadError::Id { index, id });
        }
        Ok(phys)
    }

    /// Checks that `sb` is the sub-buffer at the consumed position of this buffer.
    fn check_current(&self, sb: &Subbuf) -> Result<(), ReadError> {
        let g = &self.geo;
        let consumed = self.mem.load_u64(g.ctrl_word(CTRL_CONSUMED), Acquire);
        if consumed != sb.pos || sb.phys >= g.nphys || sb.index != g.pos.subbuf_index(sb.pos) {
            return Err(ReadError::Stale { consumed });
        }
        Ok(())
    }
}

impl<M: Memory> Reader<M> {
    /// The next delivered (complete) sub-buffer at the consumed position, if any
    /// (`Ok(None)`: not delivered yet; call again later).
    ///
    /// Checks that `consumed` is at a sub-buffer start, that `write - consumed` lies in
    /// `subbuf_size..=buf_size` once delivered, that the sub-buffer was delivered for the
    /// lap of `consumed` (`delivered == (lap+1)*subbuf_size`), that its id names a
    /// physical sub-buffer (the identity in discard mode), and that its content size and
    /// sequence number are the ones its position implies.
    ///
    /// Overwrite mode: the packet at `consumed` is taken out of the writers' reach by
    /// swapping the reader's spare sub-buffer into its id-table entry (LTTng's
    /// `update_read_sb_index`); writers may meanwhile push `consumed` past packets they
    /// overwrite, so the packets got show gaps in `packet_seq_num`
    /// ([`Counters::overwritten`](crate::Counters::overwritten)). Retries a bounded
    /// number of times when a writer claims the packet first, then returns `Ok(None)`.
    /// Called again before `put_subbuf`, it returns the packet it holds.
    ///
    /// Never loops without bound, whatever the shared memory holds (a dead writer only
    /// leaves its packet undelivered: `Ok(None)`).
    ///
    /// Errors: [`ReadError::Position`], [`ReadError::Id`], [`ReadError::ContentSize`],
    /// [`ReadError::PacketSeq`] when the shared memory holds values the algorithm cannot
    /// produce.
    pub fn get_subbuf(&self) -> Result<Option<Subbuf>, ReadError> {
        if self.cfg.mode == Mode::Overwrite {
            return self.get_subbuf_overwrite();
        }
        let g = &self.geo;
        let p = g.pos;
        let sbs = p.subbuf_size();
        let Some((consumed, index, phys)) = self.delivered_at_consumed()? else { return Ok(None) };
        let content = self.mem.load_u64(g.sb_word(index, SB_CLOSED_END), Relaxed).wrapping_sub(consumed);
        if content < g.header_size || content > sbs || content == 0 {
            return Err(ReadError::ContentSize { content, subbuf_size: sbs });
        }
        let seq = self.mem.load_u64(g.sb_word(index, SB_SEQ), Relaxed);
        if seq != p.packet_seq(consumed) {
            return Err(ReadError::PacketSeq { expected: p.packet_seq(consumed), found: seq });
        }
        Ok(Some(Subbuf { packet_seq_num: seq, content_size: content, packet_size: sbs, index, phys, pos: consumed }))
    }

    /// Copies the whole packet (`packet_size` bytes: header, content and end padding) out
    /// of shared memory into `out` (cleared and resized first; reuse it to avoid
    /// allocating). Copy first, validate after: the bytes are a snapshot the caller
    /// validates, since a hostile application could still be changing them. After the
    /// copy, checks that the sub-buffer is still the current, delivered one.
    ///
    /// In overwrite mode the reader owns the packet's physical sub-buffer while it holds
    /// it, so no writer can change it during the copy (even if writers pushed `consumed`
    /// past it meanwhile).
    ///
    /// Errors: [`ReadError::Stale`] if `sb` is not the sub-buffer at the consumed position
    /// (before or after the copy) or is no longer delivered; in overwrite mode, if the
    /// reader does not hold `sb`.
    pub fn copy_subbuf(&self, sb: &Subbuf, out: &mut Vec<u8>) -> Result<(), ReadError> {
        let g = &self.geo;
        if self.cfg.mode == Mode::Overwrite {
            // The reader owns the physical sub-buffer: no writer can reach it.
            self.check_held(sb)?;
            out.clear();
            out.resize(g.pos.subbuf_size() as usize, 0);
            self.mem.read_bytes(g.data_at(sb.phys, 0), out);
            return Ok(());
        }
        self.check_current(sb)?;
        out.clear();
        out.resize(g.pos.subbuf_size() as usize, 0);
        self.mem.read_bytes(g.data_at(sb.phys, 0), out);
        self.check_current(sb)?;
        let delivered = self.mem.load_u64(g.sb_word(sb.index, SB_DELIVERED), Acquire);
        if delivered != g.pos.commit_complete(sb.pos) {
            return Err(ReadError::Stale { consumed: sb.pos });
        }
        Ok(())
    }

    /// Releases a sub-buffer got with [`get_subbuf`](Reader::get_subbuf): zeroes its data
    /// (so that a zero byte 0 means "not committed" in the next lap, see the commit
    /// evidence on [`Buffer`]), then advances `consumed` by one sub-buffer with a
    /// Release CAS, which lets writers enter it again.
    ///
    /// Overwrite mode: zeroes the packet's physical sub-buffer, which becomes the
    /// reader's spare, and advances `consumed` unless writers already pushed it past the
    /// packet (not an error).
    ///
    /// Errors: [`ReadError::Stale`] if `sb` is not the sub-buffer at the consumed position
    /// (already released, from another buffer, or `consumed` changed meanwhile); in
    /// overwrite mode, if the reader does not hold `sb`.
    pub fn put_subbuf(&self, sb: Subbuf) -> Result<(), ReadError> {
        let g = &self.geo;
        let sbs = g.pos.subbuf_size();
        if self.cfg.mode == Mode::Overwrite {
            self.check_held(&sb)?;
            // Zeroed before it can be swapped into the table again: a claimer takes a
            // `Spare` entry without zeroing it.
            self.mem.zero(g.data_at(sb.phys, 0), sbs as usize);
            self.mem.store_u64(g.ctrl_word(CTRL_READER_SPARE), sb.phys as u64, Relaxed);
            let cw = g.ctrl_word(CTRL_CONSUMED);
            return match self.mem.cas_u64(cw, sb.pos, sb.pos.wrapping_add(sbs), Release, Relaxed) {
                Ok(_) => Ok(()),
                // A writer pushed `consumed` past this packet while we read it: fine.
                Err(now) if (now.wrapping_sub(sb.pos) as i64) > 0 => Ok(()),
                Err(consumed) => Err(ReadError::Stale { consumed }),
            };
        }
        self.check_current(&sb)?;
        self.mem.zero(g.data_at(sb.phys, 0), sbs as usize);
        self.mem
            .cas_u64(g.ctrl_word(CTRL_CONSUMED), sb.pos, sb.pos.wrapping_add(sbs), Release, Relaxed)
            .map(drop)
            .map_err(|consumed| ReadError::Stale { consumed })
    }

    /// Drops the delivered packet at `consumed` without reading it, after [`get_subbuf`]
    /// refused it for corrupted control words ([`ReadError::ContentSize`] or
    /// [`ReadError::PacketSeq`]): the sub-buffer is zeroed and released as
    /// [`put_subbuf`](Reader::put_subbuf) would, so one scribbled packet costs that packet,
    /// not the rest of the stream. In overwrite mode `get_subbuf` already dropped the
    /// packet (it became the reader's spare): nothing to do.
    ///
    /// Errors: [`ReadError::Position`] if `write`/`consumed` are corrupted (the stream
    /// cannot go on); [`ReadError::Stale`] if the packet at `consumed` is not delivered
    /// (nothing to skip) or `consumed` moved meanwhile; [`ReadError::Id`] for a corrupted id.
    ///
    /// [`get_subbuf`]: Reader::get_subbuf
    pub fn skip_subbuf(&self) -> Result<(), ReadError> {
        if self.cfg.mode == Mode::Overwrite {
            return Ok(());
        }
        let g = &self.geo;
        let sbs = g.pos.subbuf_size();
        let Some((consumed, _, phys)) = self.delivered_at_consumed()? else {
            return Err(ReadError::Stale { consumed: self.mem.load_u64(g.ctrl_word(CTRL_CONSUMED), Relaxed) });
        };
        self.mem.zero(g.data_at(phys, 0), sbs as usize);
        self.mem
            .cas_u64(g.ctrl_word(CTRL_CONSUMED), consumed, consumed.wrapping_add(sbs), Release, Relaxed)
            .map(drop)
            .map_err(|consumed| ReadError::Stale { consumed })
    }

    /// The control words of ring index `index` (`< num_subbuf`), for crash recovery.
    ///
    /// Errors: [`ReadError::Index`] if `index` is out of range.
    pub fn subbuf_state(&self, index: usize) -> Result<SubbufState, ReadError> {
        let g = &self.geo;
        if index as u64 >= g.pos.num_subbuf() {
            return Err(ReadError::Index(index as u64));
        }
        let r = |w| self.mem.load_u64(g.sb_word(index, w), Acquire);
        Ok(SubbufState {
            index,
            id: self.mem.load_u64(g.id_word(index), Acquire),
            commit_count: r(SB_COMMIT),
            delivered: r(SB_DELIVERED),
            closed_end: r(SB_CLOSED_END),
            timestamp_begin: r(SB_TS_BEGIN),
            timestamp_end: r(SB_TS_END),
            packet_seq_num: r(SB_SEQ),
            events_discarded: r(SB_DISCARDED),
        })
    }

    /// Byte 0 of physical sub-buffer `phys` at offset `off` (Acquire): the per-slot
    /// commit evidence, for crash recovery walking records. `None` if out of range.
    pub fn evidence_byte(&self, phys: usize, off: u64) -> Option<u8> {
        let g = &self.geo;
        if phys >= g.nphys || off >= g.pos.subbuf_size() {
            return None;
        }
        Some(self.mem.load_u8(g.data_at(phys, off), Acquire))
    }
}
