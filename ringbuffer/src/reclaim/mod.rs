//! Memory reclaim (LTTng 2.15's `lttng reclaim-memory`, `--auto-reclaim-memory`): give the
//! pages of sub-buffers nobody needs back to the system while writers keep the buffer
//! mapped, and measure what a buffer holds resident.
//!
//! **How pages are given back.** `madvise(MADV_REMOVE)` on the daemon's shared mapping
//! punches a hole in the file behind it (a `memfd` is `tmpfs`; a `--shm-path` file on a
//! file system that can punch holes): the pages are freed for every process that maps the
//! file, and the range reads as zeros afterwards. A writer that later enters the sub-buffer
//! faults in fresh zero pages, exactly what the algorithm expects of a free sub-buffer (the
//! reader zeroes every sub-buffer it releases: a zero byte 0 means "not committed").
//! Memory that cannot punch holes is zeroed instead ([`Memory::release`]).
//!
//! **Which sub-buffers** (LTTng's rules, `lttng-reclaim-memory(1)`), through
//! [`Reader::reclaim`]:
//!
//! * Discard mode: only sub-buffers that are delivered *and consumed*, and that no writer
//!   has entered again. Writers enter a free sub-buffer only by opening it, and only after
//!   checking that its previous lap is fully committed (its commit counter equals
//!   `commit_base`). The reader *gates* a candidate by moving that counter off its base
//!   (one CAS), then reloads `write`: the writers that could have passed the check before
//!   the gate loaded `write` before it, so if `write` is still at least one whole
//!   sub-buffer before the candidate, none of them can open it, and every later opener sees
//!   the gate (and drops its event as on a full buffer, counted, for the microseconds the
//!   punch lasts). The reader punches, then lifts the gate. The sub-buffer writers will open
//!   next (the one at or just after `write`) is never a candidate: a writer may enter it at
//!   any instant with no step the reader can gate. The reader's spare physical sub-buffer,
//!   which discard mode never uses, is always given back.
//! * Overwrite mode: any delivered sub-buffer (its packet would be overwritten anyway). The
//!   reader swaps its (already given back) spare into the sub-buffer's id-table entry with
//!   one CAS, as `get_subbuf` does to read; a writer that claimed the entry first makes the
//!   CAS fail, and the sub-buffer is skipped. The sub-buffer taken out becomes the spare and
//!   is given back. Unread packets at `consumed` advance `consumed` (they are dropped, as
//!   LTTng does: a snapshot taken afterwards no longer holds them); the entries the reader
//!   already read (its zeroed spares, left in the ring) are swapped the same way.
//! * `closed_before`: only sub-buffers whose last packet was closed (`timestamp_end`, the
//!   closing time) before this trace-clock time; `None`: any age.
//!
//! A sub-buffer this reader gave back whose pages are still all absent (`mincore`) is not
//! given back and counted again ([`ReclaimState`]). (`mincore` alone cannot tell: a page a
//! `memfd` allocated with `fallocate` but nobody wrote reads as absent, yet holds memory.)

use core::sync::atomic::Ordering::*;

use crate::ids::{IdState, SubbufId};
use crate::layout::*;
use crate::{Memory, Mode, ReadError, Reader};

/// What [`Reader::reclaim`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reclaimed {
    /// Sub-buffers whose memory was given back (each `subbuf_size` bytes).
    pub subbufs: u64,
    /// Discard mode: delivered sub-buffers not consumed yet, which the rules keep until
    /// the reader has consumed them (LTTng's "pending" sub-buffers).
    pub pending: u64,
    /// Overwrite mode: unread packets dropped by the reclaim.
    pub dropped: u64,
}

/// Which sub-buffers [`Reader::reclaim`] may take, besides the mode's rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    /// Only sub-buffers whose last packet was closed before this trace-clock time (ns);
    /// `None`: any age.
    pub closed_before: Option<u64>,
    /// Overwrite mode: drop delivered packets nobody read (a snapshot session's flight
    /// recorder, LTTng's rule). A reader that consumes everything (a session writing its
    /// trace) says `false`: it reads them first, and a packet delivered meanwhile is left
    /// for it.
    pub drop_unread: bool,
}

/// The reader's memory of what it gave back: the physical sub-buffers released and not
/// seen resident since. Kept by the reader next to its [`Reader`] (one per buffer).
#[derive(Clone, Debug, Default)]
pub struct ReclaimState {
    punched: Vec<bool>,
}

/// What a buffer costs in memory: its whole mapping, and how much of it is resident.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryUse {
    /// Bytes allocated (the buffer file's size, as mapped).
    pub allocated: u64,
    /// Bytes resident now (`mincore(2)` on the mapping), `None` if the memory cannot tell.
    pub resident: Option<u64>,
}

impl<M: Memory> Reader<M> {
    /// Gives back the memory of the sub-buffers the rules allow (see the module docs):
    /// discard mode, delivered and consumed ones; overwrite mode, delivered ones (unread
    /// ones only with [`Rule::drop_unread`]); in both, only those closed before
    /// [`Rule::closed_before`] when given. The caller is
    /// the one reader of the buffer, between its `get_subbuf`/`put_subbuf` pairs.
    ///
    /// Errors: [`ReadError::Position`] or [`ReadError::Id`] when the control words hold
    /// values the algorithm cannot produce (nothing is released then).
    pub fn reclaim(&self, rule: Rule, state: &mut ReclaimState) -> Result<Reclaimed, ReadError> {
        state.punched.resize(self.geo.nphys, false);
        match self.cfg.mode {
            Mode::Discard => self.reclaim_discard(rule.closed_before, state),
            Mode::Overwrite => self.reclaim_overwrite(rule, state),
        }
    }

    /// `timestamp` of the buffer's most recent reservation (trace-clock ns): the stream's
    /// last activity, which decides whether a reclaim with an age limit flushes first.
    pub fn last_activity(&self) -> u64 {
        self.mem.load_u64(self.geo.ctrl_word(CTRL_LAST_TSC), Relaxed)
    }

    /// Bytes allocated and resident ([`MemoryUse`]).
    pub fn memory_use(&self) -> MemoryUse {
        MemoryUse { allocated: self.mem.len() as u64, resident: self.mem.resident(0, self.mem.len()) }
    }

    /// Resident bytes of physical sub-buffer `phys` (`None`: out of range, or the memory
    /// cannot tell).
    pub fn subbuf_resident(&self, phys: usize) -> Option<u64> {
        let g = &self.geo;
        (phys < g.nphys).then(|| self.mem.resident(g.data_at(phys, 0), g.pos.subbuf_size() as usize)).flatten()
    }

    /// Releases physical sub-buffer `phys` unless this reader released it already and no
    /// page of it came back since; true if it released it.
    fn release_subbuf(&self, phys: usize, state: &mut ReclaimState) -> bool {
        let g = &self.geo;
        let (off, len) = (g.data_at(phys, 0), g.pos.subbuf_size() as usize);
        if state.punched[phys] && self.mem.resident(off, len) == Some(0) {
            return false;
        }
        self.mem.release(off, len);
        state.punched[phys] = true;
        true
    }

    fn old_enough(&self, index: usize, closed_before: Option<u64>) -> bool {
        closed_before.is_none_or(|limit| self.mem.load_u64(self.geo.sb_word(index, SB_TS_END), Relaxed) < limit)
    }

    fn reclaim_discard(&self, closed_before: Option<u64>, state: &mut ReclaimState) -> Result<Reclaimed, ReadError> {
        let g = &self.geo;
        let p = g.pos;
        let sbs = p.subbuf_size();
        let m = &self.mem;
        let mut out = Reclaimed::default();
        let write = m.load_u64(g.ctrl_word(CTRL_WRITE), Acquire);
        let consumed = m.load_u64(g.ctrl_word(CTRL_CONSUMED), Acquire);
        let ahead = write.wrapping_sub(consumed);
        if p.subbuf_offset(consumed) != 0 || ahead > p.buf_size() {
            return Err(ReadError::Position { consumed, write });
        }
        // Delivered, not consumed yet: kept (pending).
        let mut pos = consumed;
        while write.wrapping_sub(pos) >= sbs && write.wrapping_sub(pos) <= p.buf_size() {
            if m.load_u64(g.sb_word(p.subbuf_index(pos), SB_DELIVERED), Acquire) == p.commit_complete(pos) {
                out.pending += 1;
            }
            pos = pos.wrapping_add(sbs);
        }
        // The spare physical sub-buffer: discard mode never uses it.
        self.release_subbuf(p.num_subbuf() as usize, state);
        // Candidates: from one sub-buffer after the one writers open next, to the last one
        // the reader has released.
        let next_open = if p.subbuf_offset(write) == 0 { write } else { p.next_subbuf_start(write) };
        let mut start = next_open.wrapping_add(sbs);
        while p.released_by_reader(start, consumed) {
            let index = p.subbuf_index(start);
            let cw = g.sb_word(index, SB_COMMIT);
            let base = p.commit_base(start);
            if self.old_enough(index, closed_before) && m.cas_u64(cw, base, base.wrapping_add(1), SeqCst, Relaxed).is_ok() {
                // Gated: an opener that checked the counter before the gate loaded `write`
                // before our load below; `write` still a whole sub-buffer before `start`
                // proves there is none.
                let now = m.load_u64(g.ctrl_word(CTRL_WRITE), SeqCst);
                let before = start.wrapping_sub(now);
                if before >= sbs && before <= p.buf_size() && self.release_subbuf(index, state) {
                    out.subbufs += 1;
                }
                m.store_u64(cw, base, Release);
            }
            start = start.wrapping_add(sbs);
        }
        Ok(out)
    }

    /// Overwrite mode: swaps the reader's (released) spare into entry `index` in place of
    /// `id`, as `Spare` of the same lap; the physical sub-buffer taken out becomes the spare
    /// and is released. `None` if the CAS failed (a writer claimed the entry), else whether
    /// pages were released.
    fn swap_spare(&self, spare: &mut usize, index: usize, id: SubbufId, state: &mut ReclaimState) -> Option<bool> {
        let g = &self.geo;
        let new = SubbufId::new(*spare, id.tag(), IdState::Spare);
        self.mem.cas_u64(g.id_word(index), id.0, new.0, AcqRel, Acquire).ok()?;
        self.mem.store_u64(g.ctrl_word(CTRL_READER_SPARE), id.phys() as u64, Relaxed);
        *spare = id.phys();
        Some(self.release_subbuf(*spare, state))
    }

    fn reclaim_overwrite(&self, rule: Rule, state: &mut ReclaimState) -> Result<Reclaimed, ReadError> {
        let closed_before = rule.closed_before;
        let g = &self.geo;
        let p = g.pos;
        let sbs = p.subbuf_size();
        let m = &self.mem;
        let mut out = Reclaimed::default();
        let (mut spare, held) = self.reader_word()?;
        if held {
            return Ok(out); // the reader holds a packet: not between get and put
        }
        self.release_subbuf(spare, state);
        // Unread packets at `consumed`, oldest first.
        for _ in 0..if rule.drop_unread { p.num_subbuf() } else { 0 } {
            let write = m.load_u64(g.ctrl_word(CTRL_WRITE), Acquire);
            let consumed = m.load_u64(g.ctrl_word(CTRL_CONSUMED), Acquire);
            let ahead = write.wrapping_sub(consumed);
            if ahead < sbs || ahead > p.buf_size() || p.subbuf_offset(consumed) != 0 {
                break;
            }
            let index = p.subbuf_index(consumed);
            let lap = p.lap(consumed);
            let id = SubbufId(m.load_u64(g.id_word(index), Acquire));
            let delivered = m.load_u64(g.sb_word(index, SB_DELIVERED), Acquire) == p.commit_complete(consumed);
            if !delivered || !id.is(IdState::Delivered, lap) || id.phys() >= g.nphys || id.phys() == spare {
                break;
            }
            if !self.old_enough(index, closed_before) {
                break;
            }
            let Some(released) = self.swap_spare(&mut spare, index, id, state) else { break };
            // Swapped out: the packet is gone; move the reader past it (a writer may have
            // pushed it already).
            let _ = m.cas_u64(g.ctrl_word(CTRL_CONSUMED), consumed, consumed.wrapping_add(sbs), Release, Relaxed);
            out.dropped += 1;
            out.subbufs += u64::from(released);
        }
        // Entries holding the reader's earlier spares (packets it read): swap them too.
        for index in 0..p.num_subbuf() as usize {
            let id = SubbufId(m.load_u64(g.id_word(index), Acquire));
            if id.state() != Some(IdState::Spare) || id.phys() >= g.nphys || id.phys() == spare {
                continue;
            }
            let (off, len) = (g.data_at(id.phys(), 0), sbs as usize);
            let gone = state.punched[id.phys()] && m.resident(off, len) == Some(0);
            if gone || !self.old_enough(index, closed_before) {
                continue;
            }
            if self.swap_spare(&mut spare, index, id, state) == Some(true) {
                out.subbufs += 1;
            }
        }
        Ok(out)
    }
}

/// [`Memory::release`] of a mapping: `madvise(MADV_REMOVE)` on the page-aligned range,
/// zeroing it instead where the kernel or file system refuses.
pub(crate) fn release_pages(mem: &crate::MapMemory, off: usize, len: usize) -> bool {
    mem.check_range(off, len);
    let page = page_size();
    if off.is_multiple_of(page) && len.is_multiple_of(page) && len > 0 {
        // SAFETY: the range is inside the mapping (checked) and page aligned (the mapping's
        // base is); MADV_REMOVE only frees the file's pages there, after which the range
        // reads as zeros. No reference into the range exists: the memory is only accessed
        // through raw pointers and atomics, and the caller owns the range (gated or spare).
        let r = unsafe { libc::madvise(mem.base().add(off).cast(), len, libc::MADV_REMOVE) };
        if r == 0 {
            return true;
        }
    }
    mem.zero(off, len);
    false
}

/// [`Memory::resident`] of a mapping: `mincore(2)` over the pages of the range.
pub(crate) fn resident_pages(mem: &crate::MapMemory, off: usize, len: usize) -> Option<u64> {
    mem.check_range(off, len);
    let page = page_size();
    let first = off / page * page;
    let end = off.checked_add(len)?.div_ceil(page) * page;
    let mut resident = 0u64;
    let mut vec = [0u8; 1024];
    let mut at = first;
    while at < end {
        let pages = ((end - at) / page).min(vec.len());
        // SAFETY: `at..at + pages * page` is inside the mapping (the range was checked and
        // the mapping's length is a whole number of pages: buffer files are); `vec` has room
        // for `pages` bytes.
        let r = unsafe { libc::mincore(mem.base().add(at).cast(), pages * page, vec.as_mut_ptr()) };
        if r != 0 {
            return None;
        }
        resident += vec[..pages].iter().filter(|b| *b & 1 != 0).count() as u64 * page as u64;
        at += pages * page;
    }
    Some(resident)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
