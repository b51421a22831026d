//! Writer side: the commit of a reserved slot and the delivery of the packet it completes
//! (LTTng-UST `lib_ring_buffer_commit`/`_check_deliver`). The committer whose add brings
//! a sub-buffer's counter to `(lap + 1) * subbuf_size` is its unique completer: it writes
//! the packet end and publishes `delivered` (the proof is on [`Buffer`]).

use core::sync::atomic::Ordering::*;

use crate::ids::{IdState, SubbufId};
use crate::layout::*;
use crate::{Buffer, Memory, Mode, PacketEnd, PacketLayout, Reservation, Writer};

impl<M: Memory> Buffer<M> {
    /// [`commit`](Writer::commit) of a reservation known to come from this buffer (made
    /// by [`Writer::record`] a few instructions earlier): no check of its owner.
    #[inline(always)]
    pub(crate) fn commit_own<L: PacketLayout>(&self, layout: &L, r: Reservation, first_byte: u8) {
        debug_assert!(first_byte != 0, "byte 0 of a record must be nonzero");
        debug_assert_eq!(r.owner, self.mem.id());
        // SAFETY: `r` was made by this buffer (its fields are private to the crate; `commit`
        // checked the owner, `record` made it): its slot is in bounds by construction
        // (see `WriteAndCommit::then`), so its byte 0 is.
        unsafe { self.mem.store_u8_unchecked(r.off, first_byte, Release) };
        let amount = u64::from(r.len);
        // SAFETY: `hot_sb` offsets are aligned and in bounds (see `hot_sb`).
        let prev = unsafe { self.mem.fetch_add_u64_unchecked(self.hot_sb(r.pos, SB_COMMIT), amount, AcqRel) };
        // Complete when the counter reaches (lap + 1) * subbuf_size: a multiple of the
        // sub-buffer size first (one test: most commits stop here), then that one.
        let now = prev.wrapping_add(amount);
        if now & self.hot.sb_mask == 0 && now == (r.pos >> self.hot.ring_order).wrapping_add(1) << self.hot.sb_order {
            self.deliver(layout, r.pos);
        }
    }

    /// Adds `amount` bytes to the commit counter of the sub-buffer holding `pos`;
    /// delivers it if this completes the lap of `pos`.
    #[inline]
    pub(crate) fn commit_add<L: PacketLayout>(&self, layout: &L, pos: u64, amount: u64) {
        let g = &self.geo;
        let idx = g.pos.subbuf_index(pos);
        let prev = self.mem.fetch_add_u64(g.sb_word(idx, SB_COMMIT), amount, AcqRel);
        if prev.wrapping_add(amount) == g.pos.commit_complete(pos) {
            self.deliver(layout, pos);
        }
    }

    /// [`Buffer::deliver`] for a sub-buffer the reader completed for a dead writer
    /// ([`crate::abandoned`]): the reader then is its unique completer.
    pub(crate) fn deliver_completed<L: PacketLayout>(&self, layout: &L, pos: u64) {
        self.deliver(layout, pos);
    }

    /// The unique committer that completed the lap of the sub-buffer holding `pos`: writes
    /// the packet end through the client and publishes `delivered` (Release). Everything
    /// it reads was stored before a commit add in the counter's release sequence, which its
    /// AcqRel add read from.
    #[cold]
    #[inline(never)]
    fn deliver<L: PacketLayout>(&self, layout: &L, pos: u64) {
        let g = &self.geo;
        let p = g.pos;
        let start = p.subbuf_start(pos);
        let idx = p.subbuf_index(pos);
        let sbs = p.subbuf_size();
        let m = &self.mem;
        let content = m.load_u64(g.sb_word(idx, SB_CLOSED_END), Relaxed).wrapping_sub(start).min(sbs);
        let end = PacketEnd {
            timestamp_begin: m.load_u64(g.sb_word(idx, SB_TS_BEGIN), Relaxed),
            timestamp_end: m.load_u64(g.sb_word(idx, SB_TS_END), Relaxed),
            content_size: content,
            packet_size: sbs,
            packet_seq_num: m.load_u64(g.sb_word(idx, SB_SEQ), Relaxed),
            events_discarded: m.load_u64(g.sb_word(idx, SB_DISCARDED), Relaxed),
        };
        let phys = self.writing_phys(pos);
        if let (Some(phys), true) = (phys, layout.header_size() as u64 == g.header_size) {
            // (A header size that is not the client's: see the same check at open.)
            let hoff = g.data_at(phys, 0);
            m.with_bytes_mut(hoff, g.header_size as usize, |h| layout.write_end(&self.cfg.stream, h, &end));
        }
        m.store_u64(g.sb_word(idx, SB_DELIVERED), p.commit_complete(pos), Release);
        if let (Some(phys), Mode::Overwrite) = (phys, self.cfg.mode) {
            // Hand the packet over (to the reader's swap, or to the claimer of the next
            // lap) last: once the id says `Delivered`, the next lap may start at once, and
            // its own delivery must not be followed by this lap's store of `delivered`
            // (the model checker found that order).
            let id = SubbufId::new(phys, p.lap(pos), IdState::Delivered);
            m.store_u64(g.id_word(idx), id.0, Release);
        }
    }
}

impl<M: Memory> Writer<M> {
    /// Byte offset of a reservation's slot in the memory (what [`Writer::slot`] and
    /// [`Writer::write_slot`] use). Panics if `r` belongs to
    /// another buffer.
    #[inline]
    pub fn slot_offset(&self, r: &Reservation) -> usize {
        assert_eq!(r.owner, self.mem.id(), "reservation used on another buffer");
        r.off
    }

    /// Copies `src` into the slot at byte `offset` (the memory-generic way to write a
    /// payload; [`Writer::slot`] gives a slice on mapped buffers).
    ///
    /// Panics if `offset + src.len() > r.len` or `r` belongs to another buffer.
    pub fn write_slot(&self, r: &mut Reservation, offset: usize, src: &[u8]) {
        assert!(offset.checked_add(src.len()).is_some_and(|e| e <= r.len as usize), "write past the slot");
        let off = self.slot_offset(r);
        self.mem.write_bytes(off + offset, src);
    }

    /// Commits a reservation: stores `first_byte` (nonzero: it is the per-slot commit
    /// evidence, see [`Buffer`]) at slot byte 0 with Release, after the caller wrote bytes
    /// `1..len`, then adds `len` to the sub-buffer's commit counter. The committer that
    /// completes the sub-buffer calls [`PacketLayout::write_end`] (timestamp_end,
    /// content_size, packet_size, packet_seq_num, cumulative events_discarded) and marks
    /// the packet delivered for the reader.
    ///
    /// Panics if `r` belongs to another buffer. A zero `first_byte` is recorded as is
    /// (recovery would then treat the slot as uncommitted).
    #[inline(always)]
    pub fn commit<L: PacketLayout>(&self, layout: &L, r: Reservation, first_byte: u8) {
        self.slot_offset(&r);
        self.commit_own(layout, r, first_byte);
    }
}
