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
//! of the buffer is known dead is abandoned: [`Reader::abandoned`] lists the candidates,
//! the caller decides (it knows about deaths and how long a candidate stayed unchanged),
//! and [`Reader::complete_abandoned`] completes one, with the caller's rewrite of its
//! content (the caller knows the record encoding: the daemon's `dead_writers` module
//! decodes CTF records):
//!
//! ```text
//! [hdr][rec][rec][ 0 …hole… ][rec][ 0 …hole… ][rec]…[closed_end)[padding]
//!                 ^ a slot with byte 0 == 0 (the per-slot commit evidence)
//! missing = (lap+1)*subbuf_size − commit   (the sum of the holes' sizes)
//! the caller's search: at each hole try the sizes its record can have (the caller decodes them from
//!   the bytes the dead writer did write: the header after byte 0, the context, the
//!   payload) such that every record after it walks whole, the holes add up to
//!   `missing` and the walk ends exactly at closed_end
//!   found: move the records down over the holes (nothing committed is lost)
//!   none:  keep the prefix before the first hole, the rest is lost
//! then: commit counter := (lap+1)*subbuf_size (CAS from the value seen), deliver
//! ```
//!
//! Records are packed (no alignment padding between them), so moving records keeps them
//! valid; a record whose header time is relative to the previous record's (the compact
//! CTF header) may need its header rewritten by the caller once the dead record before it
//! is gone.
//!
//! The CAS makes the completion exclusive against a late commit of a writer that was
//! only slow, not dead: if that commit lands first, nothing is done; if it lands after,
//! the counter goes past complete, where no writer may open the sub-buffer's next lap:
//! [`Reader::repair_late_commits`] (discard mode) sets it back. The late writer's record
//! is kept when its byte 0 was stored before the reader copied the content (it looks
//! committed, and the caller's search allows holes adding up to less than `missing`),
//! else it was removed as dead. The caller's quiescence rule (unchanged for a long time
//! after a death) makes a late commit rare; a late byte 0 store can still land in the
//! rewritten packet, over a byte of a moved record.

use core::sync::atomic::Ordering::*;

use crate::ids::{IdState, SubbufId};
use crate::layout::*;
use crate::{Memory, Mode, PacketLayout, ReadError, Reader};

/// A closed sub-buffer whose commit counter is short: a candidate for
/// [`Reader::complete_abandoned`].
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
    /// `timestamp_end` its closer recorded (trace clock): no record is later.
    pub timestamp_end: u64,
}

impl<M: Memory> Reader<M> {
    /// Counts `n` events lost with a writer that died (the slots of a dead writer that
    /// [`complete_abandoned`](Reader::complete_abandoned) removed or cut) as no room
    /// ([`Counters::lost_full`](crate::Counters::lost_full)), so they show in the next
    /// packet's `events_discarded`. One atomic add.
    pub fn record_dead_events(&self, n: u64) {
        self.mem.fetch_add_u64(self.geo.ctrl_word(CTRL_LOST_FULL), n, Relaxed);
    }

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
            let pos = p.counter_lap_start(idx, commit);
            let closed = m.load_u64(g.sb_word(idx, SB_CLOSED_END), Acquire).wrapping_sub(pos);
            if closed < g.header_size || closed > sbs {
                continue; // still open in this lap (or hostile values)
            }
            if m.load_u64(g.sb_word(idx, SB_DELIVERED), Acquire) == p.commit_complete(pos) {
                continue;
            }
            let timestamp_begin = m.load_u64(g.sb_word(idx, SB_TS_BEGIN), Relaxed);
            let timestamp_end = m.load_u64(g.sb_word(idx, SB_TS_END), Relaxed);
            out.push(Abandoned { pos, commit, missing: sbs - missing_in_lap, timestamp_begin, timestamp_end });
        }
        out
    }

    /// Completes the abandoned sub-buffer `a` (from [`Reader::abandoned`]): claims it
    /// (CAS of its commit counter from the value seen to complete), hands a copy of its
    /// bytes up to the content end to `rewrite` (the caller removes the dead slots, as
    /// the module docs say), which returns the new content end (at most
    /// the copy's length; everything after it is zeroed), writes the copy back, and
    /// delivers the packet (its end written through `layout`). Returns the new content
    /// size, or `Ok(None)` when `a` no longer holds (a commit arrived, the packet was
    /// delivered or the sub-buffer reused): nothing was changed.
    ///
    /// Errors: [`ReadError::Id`] for a corrupted id-table entry (overwrite mode).
    pub fn complete_abandoned<L: PacketLayout>(&self, layout: &L, a: &Abandoned, rewrite: impl FnOnce(&mut [u8]) -> usize) -> Result<Option<u64>, ReadError> {
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
        let end = m.load_u64(g.sb_word(idx, SB_CLOSED_END), Acquire).wrapping_sub(a.pos);
        if end < g.header_size || end > sbs {
            return Ok(None);
        }
        // Claim it: from here on no commit of this lap can complete it, and no writer can
        // enter it before it is delivered.
        if m.cas_u64(g.sb_word(idx, SB_COMMIT), a.commit, complete, AcqRel, Relaxed).is_err() {
            return Ok(None);
        }
        let hdr = g.header_size as usize;
        let mut data = vec![0u8; end as usize];
        m.read_bytes(g.data_at(phys, 0), &mut data);
        let new_end = rewrite(&mut data).clamp(hdr, end as usize);
        if new_end < end as usize {
            data[new_end..].fill(0);
            m.write_bytes(g.data_at(phys, hdr as u64), &data[hdr..]);
            m.store_u64(g.sb_word(idx, SB_CLOSED_END), a.pos.wrapping_add(new_end as u64), Release);
        }
        self.deliver_completed(layout, a.pos);
        Ok(Some(new_end as u64))
    }

    /// Undoes the late commits that came after [`Reader::complete_abandoned`] (a writer
    /// taken for dead that was only stalled, or killed between its byte 0 store and its
    /// commit add, whose add then never comes; only the first case reaches here): the
    /// reader set the counter to complete, and the late add took it past, to `complete +
    /// len`, a value at which no writer may open the sub-buffer's next lap (discard mode
    /// wants the counter at exactly the lap's base) and that lap could never complete: the
    /// channel would lose every later event of this buffer. A counter past the lap's base
    /// while `write` has not entered that next lap holds nothing but such late adds (no
    /// writer can have reserved there), so it is set back to the base by CAS. Returns
    /// `(pos, bytes)` for each sub-buffer repaired: the start of the packet the late
    /// commit was for (the completed one), and the late bytes.
    ///
    /// Discard mode only; in overwrite mode a writer may open the next lap without the
    /// counter's help, and an empty list is returned (see the module docs: there the late
    /// add still loses the next lap).
    pub fn repair_late_commits(&self) -> Vec<(u64, u64)> {
        let g = &self.geo;
        let p = g.pos;
        let m = &self.mem;
        let sbs = p.subbuf_size();
        let mut out = Vec::new();
        if self.cfg.mode != Mode::Discard {
            return out;
        }
        let write = m.load_u64(g.ctrl_word(CTRL_WRITE), Acquire);
        for idx in 0..p.num_subbuf() as usize {
            let commit = m.load_u64(g.sb_word(idx, SB_COMMIT), Acquire);
            let late = commit % sbs;
            if late == 0 || commit < sbs {
                continue;
            }
            let next = p.counter_lap_start(idx, commit);
            let prev = next.wrapping_sub(p.buf_size());
            // The previous lap delivered, and no writer past the next lap's start.
            if write > next || m.load_u64(g.sb_word(idx, SB_DELIVERED), Acquire) != p.commit_complete(prev) {
                continue;
            }
            if m.cas_u64(g.sb_word(idx, SB_COMMIT), commit, p.commit_base(next), AcqRel, Relaxed).is_ok() {
                out.push((prev, late));
            }
        }
        out
    }
}
