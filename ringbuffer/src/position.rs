//! Pure position arithmetic: where a free-running byte position falls in the ring.
//!
//! Positions (`write`, `consumed`, the begin and end of every slot) are free-running
//! 64-bit byte counters that never wrap in practice (2^64 bytes). With a sub-buffer of
//! `2^s` bytes and `2^n` sub-buffers the ring holds `2^(s+n)` bytes, and a position `p`
//! splits into three fields, as in LTTng-UST's `subbuf_index`, `subbuf_offset` and
//! `buf_trunc`:
//!
//! ```text
//!   63                       s+n            s                 0
//!  +---------------------------+-------------+-----------------+
//!  |  lap (times round ring)   | sub-buffer  | offset in the   |
//!  |                           |   index     |   sub-buffer    |
//!  +---------------------------+-------------+-----------------+
//! ```
//!
//! Each sub-buffer has a free-running commit counter; sub-buffer `i` in lap `L` is
//! complete when its counter reaches `(L + 1) * 2^s` (every byte of every lap is
//! reserved exactly once: packet header, records, end padding). All arithmetic on values
//! that may come from shared memory wraps instead of overflowing, so hostile values never
//! panic.

/// Geometry of the ring in shift form. Cheap to copy; built from validated sizes only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Positions {
    /// log2 of the sub-buffer size in bytes.
    pub subbuf_order: u32,
    /// log2 of the number of sub-buffers.
    pub num_order: u32,
}

impl Positions {
    /// Builds the shift form of `subbuf_size` bytes times `num_subbuf` sub-buffers.
    /// Returns `None` unless both are powers of two and the ring fits in 2^62 bytes.
    pub fn new(subbuf_size: u64, num_subbuf: u32) -> Option<Positions> {
        if !subbuf_size.is_power_of_two() || !num_subbuf.is_power_of_two() {
            return None;
        }
        let p = Positions { subbuf_order: subbuf_size.trailing_zeros(), num_order: num_subbuf.trailing_zeros() };
        if p.subbuf_order + p.num_order > 62 {
            return None;
        }
        Some(p)
    }

    /// Sub-buffer size in bytes.
    #[inline]
    pub fn subbuf_size(&self) -> u64 {
        1u64 << self.subbuf_order
    }

    /// Number of sub-buffers in the ring.
    #[inline]
    pub fn num_subbuf(&self) -> u64 {
        1u64 << self.num_order
    }

    /// Ring size in bytes (`subbuf_size * num_subbuf`).
    #[inline]
    pub fn buf_size(&self) -> u64 {
        1u64 << (self.subbuf_order + self.num_order)
    }

    /// Offset of `pos` inside its sub-buffer, in bytes (`0..subbuf_size`).
    #[inline]
    pub fn subbuf_offset(&self, pos: u64) -> u64 {
        pos & (self.subbuf_size() - 1)
    }

    /// Index of the sub-buffer `pos` falls in (`0..num_subbuf`).
    #[inline]
    pub fn subbuf_index(&self, pos: u64) -> usize {
        ((pos >> self.subbuf_order) & (self.num_subbuf() - 1)) as usize
    }

    /// How many times the ring was wrapped before `pos`.
    #[inline]
    pub fn lap(&self, pos: u64) -> u64 {
        pos >> (self.subbuf_order + self.num_order)
    }

    /// Position of the start of the sub-buffer `pos` falls in.
    #[inline]
    pub fn subbuf_start(&self, pos: u64) -> u64 {
        pos & !(self.subbuf_size() - 1)
    }

    /// Position of the start of the sub-buffer after the one `pos` falls in.
    #[inline]
    pub fn next_subbuf_start(&self, pos: u64) -> u64 {
        self.subbuf_start(pos).wrapping_add(self.subbuf_size())
    }

    /// Sequence number of the packet that starts at or contains `pos`: the number of
    /// sub-buffers opened before it in this buffer (`pos / subbuf_size`).
    #[inline]
    pub fn packet_seq(&self, pos: u64) -> u64 {
        pos >> self.subbuf_order
    }

    /// Value the commit counter of the sub-buffer containing `pos` holds once every lap
    /// before `lap(pos)` is fully committed (and nothing of this lap yet).
    #[inline]
    pub fn commit_base(&self, pos: u64) -> u64 {
        self.lap(pos).wrapping_mul(self.subbuf_size())
    }

    /// Value the commit counter of the sub-buffer containing `pos` holds when the lap of
    /// `pos` is complete: `(lap + 1) * subbuf_size`.
    #[inline]
    pub fn commit_complete(&self, pos: u64) -> u64 {
        self.lap(pos).wrapping_add(1).wrapping_mul(self.subbuf_size())
    }

    /// Start of the lap of sub-buffer `index` that its commit counter, reading `commit`, is
    /// in: lap `commit / subbuf_size` (the counter of lap L runs from L * subbuf_size to its
    /// completion, see [`commit_base`](Self::commit_base)), so `lap * buf_size + index *
    /// subbuf_size`. The counter is read from memory writers share: any value gives some
    /// position (wrapping), which callers check against the sub-buffer's other words.
    #[inline]
    pub fn counter_lap_start(&self, index: usize, commit: u64) -> u64 {
        (commit >> self.subbuf_order).wrapping_mul(self.buf_size()).wrapping_add((index as u64) << self.subbuf_order)
    }

    /// True if the sub-buffer starting at `start` (a sub-buffer start position) can be
    /// entered by a writer with respect to the reader: the reader has released lap
    /// `lap(start) - 1` of it, i.e. `start + subbuf_size - consumed <= buf_size`.
    /// Wrapping: a `consumed` ahead of `start` (corrupted memory) reads as "not free".
    #[inline]
    pub fn released_by_reader(&self, start: u64, consumed: u64) -> bool {
        start.wrapping_sub(consumed) <= self.buf_size() - self.subbuf_size()
    }
}

impl Positions {
    /// Overwrite mode: where a writer about to open the sub-buffer starting at `start`
    /// must push `consumed` so the reader leaves the packet it is about to overwrite (the
    /// previous lap of the same sub-buffer, at `start - buf_size`): `Some(start +
    /// subbuf_size - buf_size)` when `start - consumed >= buf_size`, else `None`
    /// (nothing to push). The difference is taken as signed: a `consumed` ahead of a
    /// stale `start` never pushes (LTTng's `lib_ring_buffer_reserve_push_reader`).
    #[inline]
    pub fn push_target(&self, start: u64, consumed: u64) -> Option<u64> {
        let d = start.wrapping_sub(consumed);
        (d >= self.buf_size() && d <= i64::MAX as u64).then(|| start.wrapping_add(self.subbuf_size()).wrapping_sub(self.buf_size()))
    }

    /// The sub-buffer start positions that may hold a packet, oldest first, as a half-open
    /// range `(begin, end)` of positions: `end` is the start of the sub-buffer after the
    /// one `write` is in (or `write` itself when it is at a sub-buffer start, i.e. nothing
    /// is open), and `begin` is `consumed` (clamped to at most one ring before `end`, and
    /// to 0). Both are sub-buffer starts when `consumed` is one.
    #[inline]
    pub fn held_range(&self, write: u64, consumed: u64) -> (u64, u64) {
        let end = if self.subbuf_offset(write) == 0 { write } else { self.next_subbuf_start(write) };
        let oldest = end.saturating_sub(self.buf_size());
        let ahead = end.wrapping_sub(consumed);
        let begin = if ahead <= self.buf_size() { self.subbuf_start(consumed) } else { oldest };
        (begin, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_ring() {
        let p = Positions::new(4096, 4).unwrap();
        assert_eq!(p.buf_size(), 16384);
        assert_eq!(p.subbuf_index(4096 * 5 + 7), 1);
        assert_eq!(p.subbuf_offset(4096 * 5 + 7), 7);
        assert_eq!(p.lap(4096 * 5 + 7), 1);
        assert_eq!(p.subbuf_start(4096 * 5 + 7), 4096 * 5);
        assert_eq!(p.next_subbuf_start(4096 * 5), 4096 * 6);
        assert_eq!(p.commit_complete(4096 * 5), 2 * 4096);
        assert_eq!(p.commit_base(4096 * 5), 4096);
        assert!(p.released_by_reader(0, 0));
        assert!(p.released_by_reader(3 * 4096, 0));
        assert!(!p.released_by_reader(4 * 4096, 0));
        assert!(p.released_by_reader(4 * 4096, 4096));
        assert!(!p.released_by_reader(0, 4096), "consumed ahead of write is not free");
        assert!(Positions::new(4095, 4).is_none());
        assert!(Positions::new(4096, 3).is_none());
        assert!(Positions::new(1 << 40, 1 << 30).is_none());
    }

    proptest! {
        #[test]
        fn fields_recompose(s in 0u32..32, n in 0u32..20, pos in any::<u64>()) {
            let p = Positions::new(1 << s, 1 << n).unwrap();
            let recomposed = (p.lap(pos) << (s + n))
                | ((p.subbuf_index(pos) as u64) << s)
                | p.subbuf_offset(pos);
            prop_assert_eq!(recomposed, pos);
            prop_assert_eq!(p.subbuf_start(pos) + p.subbuf_offset(pos), pos);
            prop_assert!(p.subbuf_offset(pos) < p.subbuf_size());
            prop_assert!((p.subbuf_index(pos) as u64) < p.num_subbuf());
        }

        #[test]
        fn next_start_is_next_index(s in 0u32..32, n in 0u32..20, pos in 0u64..(1 << 62)) {
            let p = Positions::new(1 << s, 1 << n).unwrap();
            let next = p.next_subbuf_start(pos);
            prop_assert_eq!(p.subbuf_offset(next), 0);
            prop_assert_eq!(next - p.subbuf_start(pos), p.subbuf_size());
            prop_assert_eq!(p.subbuf_index(next), (p.subbuf_index(pos) + 1) % p.num_subbuf() as usize);
            prop_assert_eq!(p.packet_seq(next), p.packet_seq(pos) + 1);
        }

        #[test]
        fn commit_counter_laps(s in 0u32..32, n in 0u32..20, pos in 0u64..(1 << 62)) {
            // Completing lap L of a sub-buffer is the base of lap L+1 of the same one.
            let p = Positions::new(1 << s, 1 << n).unwrap();
            let start = p.subbuf_start(pos);
            prop_assert_eq!(p.commit_complete(start), p.commit_base(start + p.buf_size()));
            prop_assert_eq!(p.commit_complete(start) - p.commit_base(start), p.subbuf_size());
            // The counter, anywhere in its lap, names the lap's start.
            let idx = p.subbuf_index(start);
            prop_assert_eq!(p.counter_lap_start(idx, p.commit_base(start)), start);
            prop_assert_eq!(p.counter_lap_start(idx, p.commit_complete(start) - 1), start);
        }

        #[test]
        fn push_only_the_lap_being_overwritten(s in 0u32..20, n in 1u32..10, c_sb in 0u64..1000, ahead in 0u64..2000) {
            // consumed at a sub-buffer start, a writer opening `ahead` sub-buffers later.
            let p = Positions::new(1 << s, 1 << n).unwrap();
            let consumed = c_sb << s;
            let start = consumed + (ahead << s);
            match p.push_target(start, consumed) {
                None => prop_assert!(ahead < p.num_subbuf()),
                Some(t) => {
                    prop_assert!(ahead >= p.num_subbuf());
                    // The pushed position is just after the previous lap of `start`'s
                    // sub-buffer: the writer may then open `start` (reader window).
                    prop_assert_eq!(t, start - p.buf_size() + p.subbuf_size());
                    prop_assert!(p.released_by_reader(start, t));
                    prop_assert_eq!(p.subbuf_index(t - p.subbuf_size()), p.subbuf_index(start));
                    prop_assert_eq!(p.lap(t - p.subbuf_size()) + 1, p.lap(start));
                }
            }
            // A stale `start` behind `consumed` never pushes.
            prop_assert_eq!(p.push_target(consumed.wrapping_sub((ahead + 1) << s), consumed), None);
        }

        #[test]
        fn held_range_is_at_most_a_ring(s in 0u32..20, n in 1u32..10, w in 0u64..(1 << 40), back in 0u64..3000) {
            let p = Positions::new(1 << s, 1 << n).unwrap();
            let consumed = p.subbuf_start(w.saturating_sub(back << s));
            let (b, e) = p.held_range(w, consumed);
            prop_assert_eq!(p.subbuf_offset(b), 0);
            prop_assert_eq!(p.subbuf_offset(e), 0);
            prop_assert!(b <= e && e - b <= p.buf_size());
            prop_assert!(e >= w && e - w < p.subbuf_size());
            if w - consumed <= p.buf_size() - p.subbuf_size() {
                prop_assert_eq!(b, consumed);
            }
        }

        #[test]
        fn reader_window(s in 0u32..20, n in 1u32..10, consumed_sb in 0u64..1000, ahead in 0u64..2000) {
            // With `consumed` at a sub-buffer start, exactly the num_subbuf sub-buffers
            // from consumed on may be entered.
            let p = Positions::new(1 << s, 1 << n).unwrap();
            let consumed = consumed_sb << s;
            let start = consumed + (ahead << s);
            prop_assert_eq!(p.released_by_reader(start, consumed), ahead < p.num_subbuf());
        }
    }
}
