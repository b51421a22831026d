//! Sub-buffer ids: who owns a physical sub-buffer, for which lap, in which state
//! (overwrite mode; LTTng-UST's `subbuffer_id_*` helpers in `backend_internal.h`).
//!
//! The file has `num_subbuf + 1` physical sub-buffers for `num_subbuf` ring indices. The
//! id table maps each ring index to the physical sub-buffer that currently plays it; the
//! extra physical sub-buffer is the reader's *spare*. To read, the reader swaps its spare
//! into the table in place of the sub-buffer it wants (one CAS on the id word), so no
//! writer can reach the packet while it is read. In discard mode the table stays the
//! identity (writers never enter a sub-buffer the reader has not released, so no swap
//! is needed).
//!
//! An id is one `u64`:
//!
//! ```text
//!   63      62      61       60 .. 32              31 .. 0
//!  +-------+-------+--------+---------------------+------------------+
//!  | NOREF | SPARE | CLAIM  | lap tag (29 bits)   | physical index   |
//!  +-------+-------+--------+---------------------+------------------+
//! ```
//!
//! The flags encode four states ([`IdState`]); the lap tag is the lap (`position >>
//! log2(buf_size)`) the state refers to, modulo 2^29 (a reader would have to sleep
//! through 2^29 turns of the ring between two loads to be fooled, as LTTng's
//! truncated-offset tags):
//!
//! ```text
//!              deliverer of lap L                  reader swaps its spare in
//!  Writing(L) ──────────────────> Delivered(L) ─────────────────────────> Spare(L)
//!      ^                              │                                    │
//!      │  store (Release),            │ writer: CAS (overwrites lap L,     │ writer: CAS
//!      │  after zeroing               v  counted in `overwritten`)         │ (no zeroing:
//!      └──────────────────────── Claiming(L+1) <───────────────────────────┘  the reader
//!                                (the claimer zeroes the sub-buffer)  (directly to Writing)
//! ```
//!
//! * `Writing(L)`: writers of lap `L` use this physical sub-buffer (NOREF clear: "the
//!   writers hold a reference", as in LTTng). Nobody else changes the id until the lap is
//!   delivered.
//! * `Delivered(L)`: lap `L` is complete; the reader may swap it out, or a writer that
//!   needs the sub-buffer for lap `L + 1` may claim it (overwriting the packet).
//! * `Spare(L)`: the reader took lap `L` out and left its (zeroed) spare here.
//! * `Claiming(L+1)`: a writer is zeroing the sub-buffer for lap `L + 1`; no one may
//!   reserve in it yet, and the reader may not take it.

/// Mask of the physical index.
pub const PHYS_MASK: u64 = 0xffff_ffff;
/// Shift of the lap tag.
pub const TAG_SHIFT: u32 = 32;
/// Bits of the lap tag.
pub const TAG_BITS: u32 = 29;
/// Mask of the lap tag (after shifting down).
pub const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
/// "A writer is zeroing this sub-buffer for a new lap" flag.
pub const FLAG_CLAIM: u64 = 1 << 61;
/// "This is the reader's spare (zeroed), swapped in for a packet the reader took" flag.
pub const FLAG_SPARE: u64 = 1 << 62;
/// "No writer references this sub-buffer" flag (LTTng's `SB_ID_NOREF`).
pub const FLAG_NOREF: u64 = 1 << 63;

/// The state part of a sub-buffer id (see the module docs for the transitions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdState {
    /// Writers of the tagged lap write into it.
    Writing,
    /// A writer is zeroing it for the tagged lap; nobody reserves in it yet.
    Claiming,
    /// The tagged lap is complete and delivered; not yet taken by the reader.
    Delivered,
    /// The reader's zeroed spare, left in place of the tagged lap the reader took.
    Spare,
}

/// A decoded sub-buffer id. `SubbufId(raw)` is the word as stored in the id table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubbufId(pub u64);

impl SubbufId {
    /// Builds the id of physical sub-buffer `phys` (`< 2^32`) in state `state` for lap
    /// `lap` (any value: only its low [`TAG_BITS`] bits are kept).
    #[inline]
    pub fn new(phys: usize, lap: u64, state: IdState) -> SubbufId {
        let flags = match state {
            IdState::Writing => 0,
            IdState::Claiming => FLAG_CLAIM,
            IdState::Delivered => FLAG_NOREF,
            IdState::Spare => FLAG_NOREF | FLAG_SPARE,
        };
        SubbufId(flags | ((lap & TAG_MASK) << TAG_SHIFT) | (phys as u64 & PHYS_MASK))
    }

    /// Physical sub-buffer index (unchecked: compare with the number of physical
    /// sub-buffers before using it).
    #[inline]
    pub fn phys(self) -> usize {
        (self.0 & PHYS_MASK) as usize
    }

    /// The lap tag (lap modulo 2^[`TAG_BITS`]).
    #[inline]
    pub fn tag(self) -> u64 {
        (self.0 >> TAG_SHIFT) & TAG_MASK
    }

    /// True if the tag is that of lap `lap`.
    #[inline]
    pub fn is_lap(self, lap: u64) -> bool {
        self.tag() == lap & TAG_MASK
    }

    /// The state, or `None` for a flag combination the algorithm never writes (corrupted
    /// memory).
    #[inline]
    pub fn state(self) -> Option<IdState> {
        match self.0 & (FLAG_NOREF | FLAG_SPARE | FLAG_CLAIM) {
            0 => Some(IdState::Writing),
            FLAG_CLAIM => Some(IdState::Claiming),
            FLAG_NOREF => Some(IdState::Delivered),
            f if f == FLAG_NOREF | FLAG_SPARE => Some(IdState::Spare),
            _ => None,
        }
    }

    /// True if the id is `state` for lap `lap`.
    #[inline]
    pub fn is(self, state: IdState, lap: u64) -> bool {
        self.state() == Some(state) && self.is_lap(lap)
    }

    /// The same physical sub-buffer in another state and lap.
    #[inline]
    pub fn with(self, lap: u64, state: IdState) -> SubbufId {
        SubbufId::new(self.phys(), lap, state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STATES: [IdState; 4] = [IdState::Writing, IdState::Claiming, IdState::Delivered, IdState::Spare];

    #[test]
    fn lap_zero_writing_is_the_identity() {
        // Discard-mode tables (the identity) read as `Writing(0)` of the same index.
        for i in 0..5 {
            let id = SubbufId::new(i, 0, IdState::Writing);
            assert_eq!(id.0, i as u64);
            assert!(id.is(IdState::Writing, 0));
        }
    }

    #[test]
    fn bad_flags_have_no_state() {
        assert_eq!(SubbufId(FLAG_SPARE).state(), None);
        assert_eq!(SubbufId(FLAG_CLAIM | FLAG_NOREF).state(), None);
        assert_eq!(SubbufId(u64::MAX).state(), None);
    }

    proptest! {
        #[test]
        fn roundtrip(phys in 0usize..=65536, lap in any::<u64>(), s in 0usize..4) {
            let id = SubbufId::new(phys, lap, STATES[s]);
            prop_assert_eq!(id.phys(), phys);
            prop_assert_eq!(id.state(), Some(STATES[s]));
            prop_assert!(id.is_lap(lap));
            prop_assert!(!id.is_lap(lap.wrapping_add(1)));
            prop_assert!(id.is_lap(lap.wrapping_add(1 << TAG_BITS)), "tags are modulo 2^29");
            let other = STATES[(s + 1) % 4];
            prop_assert!(!id.is(other, lap));
            prop_assert_eq!(id.with(lap + 1, other), SubbufId::new(phys, lap + 1, other));
        }
    }
}
