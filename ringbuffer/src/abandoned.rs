//! Sub-buffers a dead writer left uncommitted in a buffer other writers go on using (a
//! per-UID buffer shared by many processes): finding them, and completing them from the
//! reader's side so that the ring does not stall (what LTTng 2.15's consumer watchdog
//! does; earlier LTTng lost the channel).
//!
//! A writer that dies between reserve and commit leaves its sub-buffer's commit counter
//! short of `(lap + 1) * subbuf_size` for ever: the sub-buffer is never delivered, and
//! once the writers come round to it again they cannot enter it (both modes refuse to
//! open a sub-buffer whose previous lap is not fully committed), so every later event of
//! that CPU's buffer is dropped. Once the sub-buffer is closed (a later reservation moved
//! past it, or a flush), no live writer reserves in it any more; the ones that did commit
//! within microseconds. So a closed sub-buffer whose counter stays short while a writer
//! of the buffer is known dead is abandoned: [`Buffer::abandoned`] lists the candidates,
//! the caller decides (it knows about deaths and how long a candidate stayed unchanged),
//! and [`Buffer::complete_abandoned`] completes one:
//!
//! ```text
//! [hdr][rec][rec][ 0 …hole… ][rec][rec]…[closed_end)[padding]
//!                 ^ first slot with byte 0 == 0 (the per-slot commit evidence)
//! missing = (lap+1)*subbuf_size − commit
//! one hole of exactly `missing` bytes, the rest walks whole to closed_end?
//!   yes: move the rest down over the hole (nothing committed is lost)
//!   no (several holes): keep the prefix before the first one, the rest is lost
//! then: commit counter := (lap+1)*subbuf_size (CAS from the value seen), deliver
//! ```
//!
//! Records are packed (no alignment padding between them), so moving records keeps them
//! valid; a compact header's 27-bit time is relative to the previous record, and the
//! removed one was between them in time, so the next record stays right unless more than
//! 2^27 ns (134 ms) separate the records around the hole (the dead writer's record was
//! the only one in between): an edge case the caller may accept.
//!
//! The CAS makes the completion exclusive against a late commit of a writer that was
//! only slow, not dead: if that commit lands first, nothing is done; if it lands after,
//! the counter goes past complete and that sub-buffer is lost on its next lap (counted
//! by the reader as any undelivered sub-buffer). The caller's quiescence rule (unchanged
//! for a long time after a death) makes that unlikely.

use core::sync::atomic::Ordering::*;

use crate::ids::{IdState, SubbufId};
use crate::layout::*;
use crate::{Buffer, Memory, Mode, PacketLayout, ReadError};

/// A closed sub-buffer whose commit counter is short: a candidate for
/// [`Buffer::complete_abandoned`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Abandoned {
    /// Free-running start position of its packet.
    pub pos: u64,
    /// The commit counter seen.
    pub commit: u64,
    /// Bytes reserved and never committed (`(lap+1)*subbuf_size - commit`).
    pub missing: u64,
    /// `timestamp_begin` of the packet (trace clock).
    pub timestamp_begin: u64,
}

/// What [`Buffer::complete_abandoned`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completed {
    /// Bytes of the packet's content removed or cut.
    pub removed: u64,
    /// True when one hole of exactly the missing size was removed and every other record
    /// kept; false when the content was cut at the first hole.
    pub whole: bool,
    /// Records after the first hole that were kept (moved down).
    pub kept_after: u64,
}

impl<M: Memory> Buffer<M> {
    /// Closed, undelivered sub-buffers whose commit counter is short of complete, in
    /// ring order. Reads control words only; never writes.
    pub fn abandoned(&self) -> Vec<Abandoned> {
        let g = &self.geo;
        let p = g.pos;
        let sbs = p.subbuf_size();
        let mut out = Vec::new();
        for idx in 0..p.num_subbuf() as usize {
            let m = &self.mem;
            let commit = m.load_u64(g.sb_word(idx, SB_COMMIT), Acquire);
            let missing_in_lap = commit % sbs;
            if missing_in_lap == 0 {
                continue;
            }
            let lap = commit / sbs;
            let pos = lap.wrapping_mul(p.buf_size()).wrapping_add(idx as u64 * sbs);
            let closed = m.load_u64(g.sb_word(idx, SB_CLOSED_END), Acquire).wrapping_sub(pos);
            if closed < g.header_size || closed > sbs {
                continue; // still open in this lap (or hostile values)
            }
            if m.load_u64(g.sb_word(idx, SB_DELIVERED), Acquire) == p.commit_complete(pos) {
                continue;
            }
            let timestamp_begin = m.load_u64(g.sb_word(idx, SB_TS_BEGIN), Relaxed);
            out.push(Abandoned { pos, commit, missing: sbs - missing_in_lap, timestamp_begin });
        }
        out
    }

    /// Completes the abandoned sub-buffer `a` (from [`Buffer::abandoned`]): removes the
    /// dead writer's hole from its content, or cuts the content at the first hole when it
    /// cannot tell the holes apart (module docs), sets its commit counter to complete and
    /// delivers it (the packet end written through `layout`). `record_size` gives the
    /// length of the record at the start of a slice (`None`: not a whole record).
    ///
    /// Returns `Ok(None)` when `a` no longer holds (a commit arrived, the packet was
    /// delivered or the sub-buffer reused): nothing was changed.
    ///
    /// Errors: [`ReadError::Id`] for a corrupted id-table entry (overwrite mode).
    pub fn complete_abandoned<L: PacketLayout>(
        &self,
        layout: &L,
        a: &Abandoned,
        mut record_size: impl FnMut(&[u8]) -> Option<usize>,
    ) -> Result<Option<Completed>, ReadError> {
        let g = &self.geo;
        let p = g.pos;
        let m = &self.mem;
        let sbs = p.subbuf_size();
        let idx = p.subbuf_index(a.pos);
        let complete = p.commit_complete(a.pos);
        if p.subbuf_offset(a.pos) != 0 || a.commit >= complete || complete - a.commit != a.missing {
            return Ok(None);
        }
        let phys = match self.cfg.mode {
            Mode::Discard => idx,
            Mode::Overwrite => {
                let id = SubbufId(m.load_u64(g.id_word(idx), Acquire));
                if id.state().is_none() || id.phys() >= g.nphys {
                    return Err(ReadError::Id { index: idx, id: id.0 });
                }
                if !id.is(IdState::Writing, p.lap(a.pos)) {
                    return Ok(None);
                }
                id.phys()
            }
        };
        let closed_end = m.load_u64(g.sb_word(idx, SB_CLOSED_END), Acquire);
        let end = closed_end.wrapping_sub(a.pos);
        if end < g.header_size || end > sbs {
            return Ok(None);
        }
        // Claim it: from here on no commit of this lap can complete it, and no writer can
        // enter it before it is delivered.
        if m.cas_u64(g.sb_word(idx, SB_COMMIT), a.commit, complete, AcqRel, Relaxed).is_err() {
            return Ok(None);
        }
        let hdr = g.header_size as usize;
        let end = end as usize;
        let mut data = vec![0u8; end];
        m.read_bytes(g.data_at(phys, 0), &mut data);
        let walk = |data: &[u8], from: usize, record_size: &mut dyn FnMut(&[u8]) -> Option<usize>| -> (usize, u64, bool) {
            // (where the walk stopped, records walked, stopped at an uncommitted slot)
            let (mut off, mut n) = (from, 0u64);
            while off < end {
                if data[off] == 0 {
                    return (off, n, true);
                }
                match record_size(&data[off..end]) {
                    Some(len) if len > 0 && off + len <= end => {
                        off += len;
                        n += 1;
                    }
                    _ => return (off, n, false),
                }
            }
            (off, n, false)
        };
        let (hole, _, at_hole) = walk(&data, hdr, &mut record_size);
        let mut result = Completed { removed: 0, whole: true, kept_after: 0 };
        if hole < end {
            let skip = a.missing as usize;
            let after = hole.saturating_add(skip);
            let rest = (at_hole && after <= end).then(|| walk(&data, after, &mut record_size));
            let new_end = match rest {
                // One hole of exactly the missing size, every later record whole.
                Some((stop, kept, false)) if stop == end => {
                    data.copy_within(after..end, hole);
                    result.kept_after = kept;
                    end - skip
                }
                _ => {
                    result.whole = false;
                    hole
                }
            };
            result.removed = (end - new_end) as u64;
            data[new_end..end].fill(0);
            m.with_bytes_mut(g.data_at(phys, hole as u64), end - hole, |b| b.copy_from_slice(&data[hole..end]));
            m.store_u64(g.sb_word(idx, SB_CLOSED_END), a.pos.wrapping_add(new_end as u64), Release);
        }
        self.deliver_completed(layout, a.pos);
        Ok(Some(result))
    }
}
