//! Writer side: reserve and sub-buffer switch (LTTng-UST `frontend_api.h`,
//! `lib_ring_buffer_reserve`/`_try_reserve_slow`/`_switch_old_end`/`_switch_new_start`);
//! the commit and delivery are in [`crate::commit`], the reader's flush in
//! [`crate::flush`], the writer mode's claim in [`crate::claim`]. The algorithm is
//! described on [`Buffer`]; these modules are written only against [`Memory`], so the
//! model checker runs this very code.
//!
//! ```text
//!            sub-buffer i, lap L                          sub-buffer i+1
//!  ┌────────┬──────┬──────┬─────┬──────────┐   ┌────────┬──────┬─────
//!  │ header │ rec  │ rec  │ rec │ padding  │   │ header │ rec  │ ...
//!  └────────┴──────┴──────┴─────┴──────────┘   └────────┴──────┴─────
//!   opener    writers' slots      closer         one CAS closes i and opens i+1
//!  commit[i] += header + every slot + padding  ==  (L+1) * subbuf_size  -> delivered
//! ```

use core::sync::atomic::{compiler_fence, Ordering::*};

use crate::ids::{IdState, SubbufId};
use crate::layout::*;
use crate::percpu::{CpuCas, FastGeometry, FastReserve, TscConv, Writers};
use crate::{Buffer, Clock, Counters, Dropped, Memory, Mode, PacketBegin, PacketLayout, Reservation, SlotSize, Writer, TIMESTAMP_BITS};

/// Values of the writer's fast path, derived once from the validated local geometry (so
/// the fast path does not rebuild masks from shift counts on every event).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hot {
    /// `subbuf_size - 1`.
    pub(crate) sb_mask: u64,
    /// `subbuf_size`.
    sbs: u64,
    /// The same two, in the layout the per-CPU critical section reads.
    fast: FastGeometry,
    /// `subbuf_size - header_size`: the largest record.
    room: u64,
    /// log2 of `subbuf_size`.
    pub(crate) sb_order: u32,
    /// log2 of the ring size (`subbuf_size * num_subbuf`).
    pub(crate) ring_order: u32,
    /// `num_subbuf - 1`.
    idx_mask: usize,
    /// Offset of the data region.
    data: usize,
}

impl Hot {
    pub(crate) fn new(g: &Geometry) -> Hot {
        let p = g.pos;
        Hot {
            sb_mask: p.subbuf_size() - 1,
            sbs: p.subbuf_size(),
            fast: FastGeometry { sb_mask: p.subbuf_size() - 1, sbs: p.subbuf_size() },
            room: p.subbuf_size() - g.header_size,
            sb_order: p.subbuf_order,
            ring_order: p.subbuf_order + p.num_order,
            idx_mask: p.num_subbuf() as usize - 1,
            data: g.data,
        }
    }
}

/// What one successful CAS on `write` does.
struct Plan {
    /// First byte of the record slot.
    begin: u64,
    /// Slot length.
    slot: u64,
    extended: bool,
    /// Closes the sub-buffer holding `old` (whose content ends at `old`).
    close_old: bool,
    /// Opens the sub-buffer starting at `begin - header_size`.
    open: bool,
}

/// What [`Buffer::reserve_then`] does with a reservation: a trait with an
/// `#[inline(always)]` method rather than a closure, so that the compiler inlines it on the
/// fast path even though the slow path calls it too.
pub(crate) trait Then<R> {
    /// Consumes the reservation.
    fn then(self, r: Reservation) -> R;
}

/// [`Then`] that hands the reservation back ([`Writer::reserve`]).
struct Keep;

impl Then<Reservation> for Keep {
    #[inline(always)]
    fn then(self, r: Reservation) -> Reservation {
        r
    }
}

/// What one try of a fast path gives.
enum Attempt {
    /// A slot.
    Got(Reservation),
    /// The general loop must decide, with this first load of `write`, clock read and load
    /// of `last_tsc` (`None`: from scratch).
    Slow(Option<(u64, u64, u64)>),
    /// Refused, already counted (or [`Dropped::Migrated`], counted by the caller's retry).
    Refused(Dropped),
}

impl<M: Memory> Buffer<M> {
    /// Writes the control block, the identity id table and the header (magic last).
    pub(crate) fn format(&self) {
        let g = &self.geo;
        let m = &self.mem;
        for w in CTRL_WORDS {
            m.store_u64(g.ctrl_word(w), 0, Relaxed);
        }
        // The reader starts with the extra physical sub-buffer as its spare, not holding.
        m.store_u64(g.ctrl_word(CTRL_READER_SPARE), g.pos.num_subbuf(), Relaxed);
        for i in 0..g.pos.num_subbuf() as usize {
            for w in SB_WORDS {
                m.store_u64(g.sb_word(i, w), 0, Relaxed);
            }
            // `Writing(0)` of physical `i`: the identity (all discard mode ever uses).
            m.store_u64(g.id_word(i), SubbufId::new(i, 0, IdState::Writing).0, Relaxed);
        }
        let h = g.header(&self.cfg).to_bytes();
        m.write_bytes(8, &h[8..]);
        core::sync::atomic::fence(Release);
        m.write_bytes(0, &h[..8]);
    }

    /// Physical sub-buffer that writers of the lap of `pos` use: the identity in discard
    /// mode; in overwrite mode the id table's entry, which must be `Writing(lap(pos))`
    /// (see the proof on [`Buffer`]: once a writer's CAS put `pos` inside a sub-buffer,
    /// the entry is that until the lap is delivered, which needs this writer's commit).
    /// `None` only if the shared memory was corrupted.
    #[inline(always)]
    pub(crate) fn writing_phys(&self, pos: u64) -> Option<usize> {
        let g = &self.geo;
        let idx = (pos >> self.hot.sb_order) as usize & self.hot.idx_mask;
        match self.cfg.mode {
            Mode::Discard => Some(idx),
            Mode::Overwrite => {
                let id = SubbufId(self.mem.load_u64(g.id_word(idx), Acquire));
                (id.is(IdState::Writing, g.pos.lap(pos)) && id.phys() < g.nphys).then(|| id.phys())
            }
        }
    }

    #[inline]
    fn count(&self, why: Dropped) {
        let w = match why {
            Dropped::Full => CTRL_LOST_FULL,
            Dropped::TooBig => CTRL_LOST_BIG,
            Dropped::Nested => CTRL_LOST_NESTING,
            // A writer that gave up following its migrations: counted as no room.
            Dropped::Migrated => CTRL_LOST_FULL,
        };
        self.mem.fetch_add_u64(self.geo.ctrl_word(w), 1, Relaxed);
    }

    /// [`reserve`](Writer::reserve), then `k` on the reservation: on the fast path `k`
    /// runs right where the reservation was made (its values still in registers, not
    /// merged through a `Result` with the other paths), once more after the slow path.
    #[inline(always)]
    pub(crate) fn reserve_then<L: PacketLayout, C: Clock, R>(&self, layout: &L, clock: &C, size: SlotSize, k: impl Then<R>) -> Result<R, Dropped> {
        let attempt = match self.writers {
            Writers::Atomic => self.reserve_fast(clock, size, |w, old, new| {
                // SAFETY: `hot_ctrl` offsets are aligned and in bounds (see `hot_ctrl`).
                unsafe { self.mem.cas_u64_unchecked(w, old, new, AcqRel, Relaxed) }.map_or(CpuCas::Changed, |_| CpuCas::Done)
            }),
            Writers::PerCpu(cpu) => match clock.tsc() {
                Some(conv) => self.reserve_percpu_tsc(size, cpu, conv),
                None => self.reserve_fast(clock, size, |w, old, new| self.mem.cpu_cas_u64(w, cpu, old, new)),
            },
        };
        match attempt {
            Attempt::Got(r) => Ok(k.then(r)),
            // `k` runs here after the slow path too (inlined twice): handing it to an
            // out-of-line function would store it to the stack on the fast path as well.
            Attempt::Slow(first) => self.reserve_slow_cold(layout, clock, size, first).map(|r| k.then(r)),
            Attempt::Refused(why) => Err(why),
        }
    }

    /// The slow path of [`Buffer::reserve_then`], out of line.
    #[cold]
    #[inline(never)]
    fn reserve_slow_cold<L: PacketLayout, C: Clock>(
        &self,
        layout: &L,
        clock: &C,
        size: SlotSize,
        first: Option<(u64, u64, u64)>,
    ) -> Result<Reservation, Dropped> {
        self.reserve_slow(layout, clock, size, first, true)
    }

    /// The fast path of [`reserve`](Writer::reserve) with `cas` as its one step that
    /// differs between writer modes (the compare-and-swap of `write`, word offset first).
    #[inline(always)]
    fn reserve_fast<C: Clock>(&self, clock: &C, size: SlotSize, cas: impl Fn(usize, u64, u64) -> CpuCas) -> Attempt {
        let h = &self.hot;
        let write_w = self.hot_ctrl(CTRL_WRITE);
        let last_w = self.hot_ctrl(CTRL_LAST_TSC);
        // SAFETY: `hot_ctrl` offsets are aligned and in bounds (see `hot_ctrl`).
        let old = unsafe { self.mem.load_u64_unchecked(write_w, Acquire) };
        compiler_fence(SeqCst);
        let ts = clock.now();
        compiler_fence(SeqCst);
        let off = old & h.sb_mask;
        if off == 0 {
            // `write` at a sub-buffer start: the next reservation opens it (slow path, with
            // this load and clock read: the same atomic steps as the general loop, so the
            // model checker's state space does not grow).
            return Attempt::Slow(Some((old, ts, 0)));
        }
        // SAFETY: as above.
        let last = unsafe { self.mem.load_u64_unchecked(last_w, Acquire) };
        let extended = size.compact == size.extended || (ts.wrapping_sub(last) >> TIMESTAMP_BITS) != 0;
        let slot = u64::from(if extended { size.extended } else { size.compact });
        // (No test of `size.compact` against the room after the header: a nonzero slot that
        // ends inside the sub-buffer, at or after `off`, fits it.)
        if !(slot != 0 && off + slot < h.sbs) {
            return Attempt::Slow(Some((old, ts, last)));
        }
        match cas(write_w, old, old.wrapping_add(slot)) {
            CpuCas::Done => {
                // SAFETY: as above.
                unsafe { self.mem.store_u64_unchecked(last_w, ts, Release) };
                let Some(phys) = self.writing_phys(old) else { return Attempt::Refused(self.lost_slot()) };
                Attempt::Got(Reservation {
                    timestamp: ts,
                    extended,
                    len: slot as u32,
                    pos: old,
                    off: h.data + (phys << h.sb_order) + off as usize,
                    owner: self.mem.id(),
                })
            }
            CpuCas::Moved => Attempt::Refused(Dropped::Migrated),
            // Lost the CAS race: start over (the general loop would `continue` here too).
            CpuCas::Changed => Attempt::Slow(None),
        }
    }

    /// [`reserve`](Writer::reserve) of a per-CPU buffer with a TSC clock: the fast case
    /// is one critical section ([`percpu::reserve_tsc`](crate::percpu::reserve_tsc)) that
    /// loads `write`, reads the TSC unordered, converts it, decides compact or not and
    /// stores `write`; any other case takes `reserve_slow` with the section's loads and
    /// clock read (ordered with the buffer's reservations: they were made on its CPU).
    #[inline(always)]
    fn reserve_percpu_tsc(&self, size: SlotSize, cpu: u32, conv: &TscConv) -> Attempt {
        let h = &self.hot;
        let (write_w, last_w) = (self.hot_ctrl(CTRL_WRITE), self.hot_ctrl(CTRL_LAST_TSC));
        debug_assert_eq!(last_w - write_w, crate::percpu::LAST_TSC_AFTER_WRITE);
        let forced = size.compact == size.extended;
        let slot = u64::from(if forced { size.extended } else { size.compact });
        // SAFETY: `hot_ctrl` offsets are aligned and in bounds (see `hot_ctrl`).
        let Some(wp) = (unsafe { self.mem.word_ptr_unchecked(write_w) }) else {
            return Attempt::Slow(None);
        };
        if slot == 0 || u64::from(size.compact) > h.room {
            return Attempt::Slow(None);
        }
        let delta_mask = if forced { 0 } else { !((1u64 << TIMESTAMP_BITS) - 1) };
        // SAFETY: `wp` is the aligned, in-bounds `write` word of the mapping, alive as long
        // as `self`, and `last_tsc` is `LAST_TSC_AFTER_WRITE` bytes after it in the same
        // control block (`hot_ctrl` of both constants: in bounds); `write` of a per-CPU
        // buffer is changed only through restartable sections on its CPU (the claim in
        // `claim_writers`).
        match unsafe { crate::percpu::reserve_tsc(wp, cpu, conv, &h.fast, slot, delta_mask) } {
            FastReserve::Reserved { old, ts } => {
                // SAFETY: `hot_ctrl` offsets are aligned and in bounds (see `hot_ctrl`).
                unsafe { self.mem.store_u64_unchecked(last_w, ts, Release) };
                let Some(phys) = self.writing_phys(old) else { return Attempt::Refused(self.lost_slot()) };
                Attempt::Got(Reservation {
                    timestamp: ts,
                    extended: forced,
                    len: slot as u32,
                    pos: old,
                    off: h.data + (phys << h.sb_order) + (old & h.sb_mask) as usize,
                    owner: self.mem.id(),
                })
            }
            FastReserve::Slow { old, ts, last } => Attempt::Slow(Some((old, ts, last))),
            FastReserve::Moved => Attempt::Refused(Dropped::Migrated),
        }
    }

    /// Our slot cannot be located (corrupted id table, overwrite mode): it stays reserved
    /// and uncommitted, so its sub-buffer is never delivered; the event counts as lost.
    #[cold]
    #[inline(never)]
    fn lost_slot(&self) -> Dropped {
        self.count(Dropped::Full);
        Dropped::Full
    }

    /// Offset of control word `w` (a `CTRL_*` constant) for the unchecked accessors of the
    /// fast path. In bounds and aligned by construction: `w` is masked into the control
    /// block (a no-op on the constants), `ctrl` is 8-aligned, and the validated geometry
    /// has `ctrl + CTRL_LEN <= file_size <= mem.len()` (`Geometry::from_header` checks
    /// the region chain against the mapping, `create_in` the length).
    #[inline(always)]
    fn hot_ctrl(&self, w: usize) -> usize {
        self.geo.ctrl + (w & (CTRL_LEN - 1) & !7)
    }

    /// Offset of word `w` (an `SB_*` constant) of the sub-buffer holding `pos`, for the
    /// unchecked accessors. In bounds and aligned by construction: the index is masked to
    /// `num_subbuf`, `w + 8 <= SB_USED <= stride`, the stride and `sb_ctrl` are 8-aligned,
    /// and `sb_ctrl + num_subbuf * stride <= file_size <= mem.len()` (validated geometry).
    #[inline(always)]
    pub(crate) fn hot_sb(&self, pos: u64, w: usize) -> usize {
        let g = &self.geo;
        let idx = (pos >> self.hot.sb_order) as usize & self.hot.idx_mask;
        g.sb_ctrl + idx * g.sb_stride + (w.min(SB_USED - 8) & !7)
    }

    /// The general reservation loop: every case of [`reserve`](Writer::reserve). `first`
    /// is the fast path's load of `write`, its clock read and (if `write` was not at a
    /// sub-buffer start) its load of `last_tsc`, used by the first iteration. With
    /// `count_full` false a full buffer is refused without being counted
    /// ([`Writer::try_reserve`]).
    #[cold]
    #[inline(never)]
    fn reserve_slow<L: PacketLayout, C: Clock>(
        &self,
        layout: &L,
        clock: &C,
        size: SlotSize,
        first: Option<(u64, u64, u64)>,
        count_full: bool,
    ) -> Result<Reservation, Dropped> {
        let mut first = first;
        let g = &self.geo;
        let p = g.pos;
        let sbs = p.subbuf_size();
        let hdr = g.header_size;
        let forced = size.compact == size.extended;
        if size.compact == 0 || size.extended == 0 || u64::from(size.compact) > sbs - hdr {
            self.count(Dropped::TooBig);
            return Err(Dropped::TooBig);
        }
        let write_w = g.ctrl_word(CTRL_WRITE);
        loop {
            let (old, ts, first_last) = match first.take() {
                Some((old, ts, last)) => (old, ts, Some(last)),
                None => {
                    let old = self.mem.load_u64(write_w, Acquire);
                    compiler_fence(SeqCst);
                    let ts = clock.now();
                    compiler_fence(SeqCst);
                    (old, ts, None)
                }
            };
            let off = p.subbuf_offset(old);
            let mut plan = None;
            if off != 0 {
                let last = match first_last {
                    Some(last) => last,
                    None => self.mem.load_u64(g.ctrl_word(CTRL_LAST_TSC), Acquire),
                };
                let extended = forced || (ts.wrapping_sub(last) >> TIMESTAMP_BITS) != 0;
                let slot = u64::from(if extended { size.extended } else { size.compact });
                if off + slot <= sbs {
                    plan = Some(Plan { begin: old, slot, extended, close_old: false, open: false });
                }
            }
            let plan = match plan {
                Some(fast) => fast,
                None => {
                    // Slow path: open a sub-buffer (closing the current one if it is open).
                    let start = if off == 0 { old } else { p.next_subbuf_start(old) };
                    if !self.may_open(start, old) {
                        if self.mem.load_u64(write_w, Acquire) != old {
                            continue; // our view was stale: somebody moved on, retry
                        }
                        if count_full {
                            self.count(Dropped::Full);
                        }
                        return Err(Dropped::Full);
                    }
                    // First record of a packet: compared with timestamp_begin == ts.
                    let slot = u64::from(size.compact);
                    Plan { begin: start.wrapping_add(hdr), slot, extended: forced, close_old: off != 0, open: true }
                }
            };
            let end = plan.begin.wrapping_add(plan.slot);
            let fills = p.subbuf_offset(end) == 0;
            // Packets closed by this CAS get the lost count read before it (see SB_DISCARDED).
            let discarded = if plan.close_old || fills { self.lost_total() } else { 0 };
            match self.advance_write(old, end) {
                CpuCas::Done => {}
                CpuCas::Changed => continue,
                CpuCas::Moved => return Err(Dropped::Migrated),
            }
            self.mem.store_u64(g.ctrl_word(CTRL_LAST_TSC), ts, Release);
            if plan.close_old {
                self.close(layout, old, ts, discarded);
            }
            let start = p.subbuf_start(plan.begin);
            let idx = p.subbuf_index(plan.begin);
            let Some(phys) = self.writing_phys(plan.begin) else {
                // Corrupted id table (overwrite mode): our slot cannot be located. It stays
                // reserved and uncommitted, so this sub-buffer is never delivered.
                self.count(Dropped::Full);
                return Err(Dropped::Full);
            };
            if plan.open {
                let seq = p.packet_seq(start);
                let hoff = g.data_at(phys, 0);
                // A buffer file whose recorded header size is not the client's is corrupted or
                // foreign: leave the header unwritten (the reader rejects the packet) rather
                // than hand the client a slice of the wrong length.
                if layout.header_size() as u64 == g.header_size {
                    self.mem.with_bytes_mut(hoff, hdr as usize, |h| {
                        layout.write_begin(&self.cfg.stream, h, &PacketBegin { timestamp_begin: ts, packet_seq_num: seq })
                    });
                }
                self.mem.store_u64(g.sb_word(idx, SB_TS_BEGIN), ts, Relaxed);
                self.mem.store_u64(g.sb_word(idx, SB_SEQ), seq, Relaxed);
            }
            if fills {
                // Exact fit: this record closes its sub-buffer, with no padding. Store
                // the close information before any of our commits to it (the record's
                // commit, maybe the header's) can complete it.
                self.mem.store_u64(g.sb_word(idx, SB_CLOSED_END), end, Relaxed);
                self.mem.store_u64(g.sb_word(idx, SB_TS_END), ts, Relaxed);
                self.mem.store_u64(g.sb_word(idx, SB_DISCARDED), discarded, Relaxed);
            }
            if plan.open && hdr != 0 {
                self.commit_add(layout, start, hdr);
            }
            return Ok(Reservation {
                timestamp: ts,
                extended: plan.extended,
                len: plan.slot as u32,
                pos: plan.begin,
                off: g.data_at(phys, p.subbuf_offset(plan.begin)),
                owner: self.mem.id(),
            });
        }
    }

    /// May a writer open the sub-buffer starting at `start` (its load of `write` read
    /// `old`)?
    ///
    /// * Discard mode: the reader has released its previous lap, and the previous lap is
    ///   fully committed.
    /// * Overwrite mode: the id-table entry is `Writing(lap)` (prepared), or the previous
    ///   lap is `Delivered`/`Spare` and this call prepares it: it pushes `consumed` off
    ///   the previous lap, claims the entry by CAS, zeroes the sub-buffer if it still
    ///   holds a packet (counting it in `overwritten`), and publishes `Writing(lap)`
    ///   (Release). All of this happens before any CAS of `write` into the sub-buffer, so
    ///   no writer can reserve in it before it is zero. Anything else (previous lap not
    ///   complete, another writer zeroing it right now) means "not now": the caller drops
    ///   the event rather than wait.
    #[inline]
    fn may_open(&self, start: u64, old: u64) -> bool {
        let g = &self.geo;
        let idx = g.pos.subbuf_index(start);
        match self.cfg.mode {
            Mode::Discard => {
                let consumed = self.mem.load_u64(g.ctrl_word(CTRL_CONSUMED), Acquire);
                if !g.pos.released_by_reader(start, consumed) {
                    return false;
                }
                self.mem.load_u64(g.sb_word(idx, SB_COMMIT), Acquire) == g.pos.commit_base(start)
            }
            Mode::Overwrite => self.prepare_overwrite(start, old),
        }
    }

    /// Overwrite mode part of [`may_open`](Self::may_open). Lock-free: a failed CAS on
    /// the id means the reader swapped, or another writer claimed, the entry.
    #[cold]
    fn prepare_overwrite(&self, start: u64, old: u64) -> bool {
        let g = &self.geo;
        let p = g.pos;
        let idx = p.subbuf_index(start);
        let lap = p.lap(start);
        let idw = g.id_word(idx);
        loop {
            let id = SubbufId(self.mem.load_u64(idw, Acquire));
            if id.phys() >= g.nphys {
                return false;
            }
            match id.state() {
                Some(IdState::Writing) if id.is_lap(lap) => return true,
                Some(st @ (IdState::Delivered | IdState::Spare)) if id.is_lap(lap.wrapping_sub(1)) => {
                    // A stale view of `write` must not push the reader nor claim: the
                    // entry's previous lap matching ours proves `start` is the next
                    // sub-buffer to open only if `write` has not moved past `old`.
                    if self.mem.load_u64(g.ctrl_word(CTRL_WRITE), Acquire) != old {
                        return false;
                    }
                    // Push the reader off the packet first: a reader whose swap then fails
                    // on our claim reloads `consumed` and sees the push.
                    self.push_consumed(start);
                    let read_by_reader = st == IdState::Spare;
                    let next = if read_by_reader { IdState::Writing } else { IdState::Claiming };
                    if self.mem.cas_u64(idw, id.0, id.with(lap, next).0, AcqRel, Acquire).is_err() {
                        continue;
                    }
                    if !read_by_reader {
                        // We own the sub-buffer: the reader cannot swap a `Claiming` entry,
                        // no writer reserves in it until `Writing(lap)` is published. The
                        // reader's spare was zeroed by the reader before its swap.
                        self.mem.fetch_add_u64(g.ctrl_word(CTRL_OVERWRITTEN), 1, Relaxed);
                        self.mem.zero(g.data_at(id.phys(), 0), p.subbuf_size() as usize);
                        self.mem.store_u64(idw, id.with(lap, IdState::Writing).0, Release);
                    }
                    return true;
                }
                _ => return false,
            }
        }
    }

    /// Overwrite mode: moves `consumed` off the previous lap of the sub-buffer starting at
    /// `start` if the reader is still there (one sub-buffer; see
    /// [`Positions::push_target`](crate::position::Positions::push_target)).
    fn push_consumed(&self, start: u64) {
        let cw = self.geo.ctrl_word(CTRL_CONSUMED);
        let mut consumed = self.mem.load_u64(cw, Acquire);
        while let Some(target) = self.geo.pos.push_target(start, consumed) {
            match self.mem.cas_u64(cw, consumed, target, AcqRel, Acquire) {
                Ok(_) => return,
                Err(now) => consumed = now,
            }
        }
    }

    /// After a CAS moved `write` from `old` (not at a sub-buffer start) to the next
    /// sub-buffer: records where the content ends and the end timestamp, then commits the
    /// padding (which may deliver the packet).
    pub(crate) fn close<L: PacketLayout>(&self, layout: &L, old: u64, ts: u64, discarded: u64) {
        let g = &self.geo;
        let idx = g.pos.subbuf_index(old);
        self.mem.store_u64(g.sb_word(idx, SB_CLOSED_END), old, Relaxed);
        self.mem.store_u64(g.sb_word(idx, SB_TS_END), ts, Relaxed);
        self.mem.store_u64(g.sb_word(idx, SB_DISCARDED), discarded, Relaxed);
        let padding = g.pos.subbuf_size() - g.pos.subbuf_offset(old);
        self.commit_add(layout, old, padding);
    }

    /// The one compare-and-swap of `write` every writer path makes, in this process's
    /// writer mode ([`Writer::claim_writers`]).
    #[inline(always)]
    fn advance_write(&self, old: u64, new: u64) -> CpuCas {
        let w = self.geo.ctrl_word(CTRL_WRITE);
        match self.writers {
            Writers::Atomic => self.mem.cas_u64(w, old, new, AcqRel, Relaxed).map_or(CpuCas::Changed, |_| CpuCas::Done),
            Writers::PerCpu(cpu) => self.mem.cpu_cas_u64(w, cpu, old, new),
        }
    }

    /// `lost_full + lost_big + lost_nesting`, each loaded Relaxed (callers order the loads
    /// after their Acquire load of `write`).
    #[inline]
    pub(crate) fn lost_total(&self) -> u64 {
        let g = &self.geo;
        let r = |w| self.mem.load_u64(g.ctrl_word(w), Relaxed);
        r(CTRL_LOST_FULL).wrapping_add(r(CTRL_LOST_BIG)).wrapping_add(r(CTRL_LOST_NESTING))
    }

    /// Reads the counters (each word atomically) and positions.
    pub fn counters(&self) -> Counters {
        let g = &self.geo;
        let r = |w| self.mem.load_u64(g.ctrl_word(w), Relaxed);
        Counters {
            lost_full: r(CTRL_LOST_FULL),
            lost_big: r(CTRL_LOST_BIG),
            lost_nesting: r(CTRL_LOST_NESTING),
            overwritten: r(CTRL_OVERWRITTEN),
            write: r(CTRL_WRITE),
            consumed: r(CTRL_CONSUMED),
        }
    }
}

impl<M: Memory> Writer<M> {
    /// Counts an event dropped before reaching [`reserve`](Writer::reserve) (nesting
    /// limit, see [`nesting`](crate::nesting)), so it shows in `events_discarded`.
    /// Lock-free, one atomic add.
    pub fn record_dropped(&self, why: Dropped) {
        self.count(why);
    }

    /// Reserves a slot of `size` for one record (writer side: no allocation, no syscall,
    /// no lock; lock-free: a CAS fails only because another party moved `write`).
    ///
    /// Loads `write`, reads `clock` (between that load and the CAS, so timestamps follow
    /// reservation order), picks the compact or extended size (see [`SlotSize`]), and CASes
    /// `write` forward. On the slow path (the record does not fit in the current
    /// sub-buffer, or `write` is at a sub-buffer start) the same CAS closes the current
    /// sub-buffer (end padding, `timestamp_end`) and opens the next one
    /// ([`PacketLayout::write_begin`] with `timestamp_begin` = this clock read).
    ///
    /// Errors (each already counted in [`Counters`]): [`Dropped::TooBig`] if `size` does
    /// not fit in a sub-buffer after its header (or is 0); [`Dropped::Full`] in discard
    /// mode if the sub-buffer to open has not been released by the reader, or its previous
    /// lap is not fully committed.
    #[inline(always)]
    pub fn reserve<L: PacketLayout, C: Clock>(&self, layout: &L, clock: &C, size: SlotSize) -> Result<Reservation, Dropped> {
        // Fast path (LTTng's `lib_ring_buffer_try_reserve` fast case): the current
        // sub-buffer is open, the record fits in it without filling it, and the CAS
        // succeeds. Nothing is closed or opened, so no lost count, close information or
        // header is involved. Everything else (a sub-buffer to open or close, an exact
        // fit, a bad size) takes `reserve_slow`, the general loop, handing it this load of
        // `write`, clock read and load of `last_tsc` for its first iteration: a reservation
        // makes the same atomic steps in the same order as with the loop alone, so the
        // model checker explores no more interleavings. A lost CAS race restarts the loop
        // (as the loop itself does).
        self.reserve_then(layout, clock, size, Keep)
    }

    /// [`reserve`](Writer::reserve), except that a [`Dropped::Full`] refusal is not
    /// counted: the attempts of a writer in blocking mode (`--blocking-timeout`), which
    /// waits and tries again, and counts the event with [`Writer::record_dropped`] only
    /// when it gives up. Always the general loop (the blocking path is cold).
    pub fn try_reserve<L: PacketLayout, C: Clock>(&self, layout: &L, clock: &C, size: SlotSize) -> Result<Reservation, Dropped> {
        self.reserve_slow(layout, clock, size, None, false)
    }
}
