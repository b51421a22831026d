//! The CTF event header that starts every record: LTTng's "compact" header with its
//! extended form (docs/DESIGN.md#event-header; LTTng-UST `lttng-ring-buffer-client.h`,
//! `lttng_write_event_header`).
//!
//! ```text
//! compact  (4 bytes):  bits 0..5 id (0..=30) | bits 5..32 low 27 bits of the timestamp   (LE u32)
//! extended (13 bytes): byte 0 = 31 (id tag) | u32 id | u64 timestamp                    (LE, packed)
//! ```
//!
//! A reader rebuilds a full timestamp from 27 bits by taking the previous timestamp of the
//! stream (the previous event, or the packet's `timestamp_begin`) and adding 2^27 when the
//! low bits went backwards (CTF 1.8 section 8, clock mapping of integers narrower than the
//! clock). That is exact only if less than 2^27 ns (about 134 ms) passed since the previous
//! record, so the ring buffer asks for the extended form otherwise.
//!
//! Event ids start at 1 ([`FIRST_EVENT_ID`]): byte 0 of a record is then never zero, which
//! the ring buffer's per-slot commit evidence relies on (`ringbuffer` crate docs).

/// Size in bytes of a compact header.
pub const COMPACT_SIZE: usize = 4;
/// Size in bytes of an extended header.
pub const EXTENDED_SIZE: usize = 13;
/// The 5-bit id value that announces the extended form.
pub const EXTENDED_TAG: u32 = 31;
/// Largest id a compact header can carry.
pub const MAX_COMPACT_ID: u32 = 30;
/// Smallest event id: id 0 is never used, so byte 0 of a record is never zero.
pub const FIRST_EVENT_ID: u32 = 1;
/// Bits of timestamp a compact header carries: the ring buffer's
/// [`ringbuffer::TIMESTAMP_BITS`], which decides at reservation whether a record gets the
/// compact header, re-exported so that the header's writer and decoder use the same width.
pub use ringbuffer::TIMESTAMP_BITS as COMPACT_TIMESTAMP_BITS;

// The compact header is one 32-bit word: a 5-bit id (31 = the extended tag) below the
// timestamp's bits.
const _: () = assert!(EXTENDED_TAG == (1 << (32 - COMPACT_TIMESTAMP_BITS)) - 1, "the compact header's id and timestamp fill one 32-bit word");

/// Header size in bytes for event `id`: `(compact, extended)`. Both are the extended size
/// when `id` does not fit in a compact header.
pub const fn sizes(id: u32) -> (usize, usize) {
    if id <= MAX_COMPACT_ID {
        (COMPACT_SIZE, EXTENDED_SIZE)
    } else {
        (EXTENDED_SIZE, EXTENDED_SIZE)
    }
}

/// Writes the header of event `id` at `timestamp` (ns) into `slot`, except byte 0, which it
/// returns: the ring buffer publishes byte 0 last, at commit (the compact form stores the
/// 4-byte word with byte 0 zero, the value of an uncommitted slot's byte 0; the extended
/// form leaves byte 0 alone). `extended` selects the form
/// (forced when `id > MAX_COMPACT_ID`). Returns `(byte0, header_len)`.
///
/// # Panics
/// If `slot` is shorter than the header, or `id` is 0: both are bugs of the caller.
#[inline(always)]
pub fn write(slot: &mut [u8], id: u32, timestamp: u64, extended: bool) -> (u8, usize) {
    debug_assert!(id >= FIRST_EVENT_ID);
    write_reserved(slot, id, timestamp, extended || id > MAX_COMPACT_ID)
}

/// [`write()`] for a slot reserved with the sizes of [`sizes`]`(id)`: the ring buffer takes
/// the compact size only when it differs from the extended one, which is only for an id
/// the compact form holds, so `extended == false` already says `id <= MAX_COMPACT_ID` and
/// the id is not tested again (one test less on the emit path). Returns `(byte0,
/// header_len)` as [`write()`] does.
///
/// # Panics
/// As [`write()`]. With `extended == false` for an id above [`MAX_COMPACT_ID`] (a caller
/// that did not reserve with `sizes(id)`) the header names a wrong event; debug builds
/// assert against it.
#[inline(always)]
pub fn write_reserved(slot: &mut [u8], id: u32, timestamp: u64, extended: bool) -> (u8, usize) {
    debug_assert!(id >= FIRST_EVENT_ID);
    debug_assert!(extended || id <= MAX_COMPACT_ID);
    if !extended {
        let word = id | ((timestamp as u32) << 5);
        // One 4-byte store with byte 0 left zero (as an uncommitted slot's byte 0 is):
        // the commit stores it.
        slot[..COMPACT_SIZE].copy_from_slice(&(word & !0xff).to_le_bytes());
        (word as u8, COMPACT_SIZE)
    } else {
        slot[1..5].copy_from_slice(&id.to_le_bytes());
        slot[5..13].copy_from_slice(&timestamp.to_le_bytes());
        (EXTENDED_TAG as u8, EXTENDED_SIZE)
    }
}

/// A decoded event header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Event id.
    pub id: u32,
    /// Full timestamp in ns, rebuilt from `previous` for a compact header.
    pub timestamp: u64,
    /// Header length in bytes.
    pub len: usize,
}

/// Reads the header at the start of `bytes`; `previous` is the stream's previous timestamp
/// (ns). `None` when `bytes` is too short or byte 0 is zero (an uncommitted slot).
pub fn decode(bytes: &[u8], previous: u64) -> Option<Decoded> {
    let b0 = *bytes.first()?;
    if b0 == 0 {
        return None;
    }
    if u32::from(b0 & 0x1f) == EXTENDED_TAG {
        let id = u32::from_le_bytes(bytes.get(1..5)?.try_into().ok()?);
        let timestamp = u64::from_le_bytes(bytes.get(5..13)?.try_into().ok()?);
        Some(Decoded { id, timestamp, len: EXTENDED_SIZE })
    } else {
        let word = u32::from_le_bytes(bytes.get(0..4)?.try_into().ok()?);
        let low = u64::from(word >> 5);
        let mask = (1u64 << COMPACT_TIMESTAMP_BITS) - 1;
        let mut ts = (previous & !mask) | low;
        if ts < previous {
            // A previous time within 2^27 ns of u64::MAX (hostile memory) has no later time.
            ts = ts.checked_add(1 << COMPACT_TIMESTAMP_BITS)?;
        }
        Some(Decoded { id: word & 0x1f, timestamp: ts, len: COMPACT_SIZE })
    }
}

/// TSDL of the event header and of the clock-mapped integer types it uses, for a clock named
/// `clock` (CTF 1.8 sections 6 and 8). Declared as `struct event_header_compact`.
pub fn tsdl(clock: &str) -> String {
    format!(
        r#"typealias integer {{ size = {COMPACT_TIMESTAMP_BITS}; align = 1; signed = false; map = clock.{clock}.value; }} := uint{COMPACT_TIMESTAMP_BITS}_clock_{clock}_t;
typealias integer {{ size = 64; align = 8; signed = false; map = clock.{clock}.value; }} := uint64_clock_{clock}_t;

struct event_header_compact {{
	enum : integer {{ size = 5; align = 1; signed = false; }} {{ compact = 0 ... 30, extended = 31 }} id;
	variant <id> {{
		struct {{
			uint{COMPACT_TIMESTAMP_BITS}_clock_{clock}_t timestamp;
		}} compact;
		struct {{
			integer {{ size = 32; align = 8; signed = false; }} id;
			uint64_clock_{clock}_t timestamp;
		}} extended;
	}} v;
}} align(8);
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A previous time within 2^27 ns of `u64::MAX` (read from hostile memory) and low
    /// bits that would wrap: no time, not an overflow.
    #[test]
    fn a_compact_time_past_u64_max_is_none() {
        let word: u32 = (5 << 5) | 1;
        assert_eq!(decode(&word.to_le_bytes(), u64::MAX - 3), None);
        assert!(decode(&word.to_le_bytes(), u64::MAX - (1 << 27) - 100).is_some());
    }

    fn round_trip(id: u32, ts: u64, prev: u64, extended: bool) -> Decoded {
        let mut buf = [0u8; 16];
        let (b0, len) = write(&mut buf, id, ts, extended);
        buf[0] = b0;
        let d = decode(&buf, prev).unwrap();
        assert_eq!(d.len, len);
        d
    }

    #[test]
    fn compact_and_extended_forms() {
        let d = round_trip(5, 1000, 900, false);
        assert_eq!((d.id, d.timestamp, d.len), (5, 1000, 4));
        let d = round_trip(31, 1 << 40, 0, false);
        assert_eq!((d.id, d.timestamp, d.len), (31, 1 << 40, 13));
        let d = round_trip(2, 7, 0, true);
        assert_eq!((d.id, d.timestamp, d.len), (2, 7, 13));
        assert_eq!(sizes(30), (4, 13));
        assert_eq!(sizes(31), (13, 13));
    }

    #[test]
    fn zero_byte_is_uncommitted() {
        assert_eq!(decode(&[0, 1, 2, 3], 0), None);
        assert_eq!(decode(&[31, 1, 2], 0), None);
    }

    proptest! {
        #[test]
        fn compact_rebuilds_any_delta_below_2_27(prev in 0u64..(1 << 60), delta in 0u64..(1 << 27), id in 1u32..=30) {
            let ts = prev + delta;
            let mut buf = [0u8; 4];
            let (b0, _) = write(&mut buf, id, ts, false);
            prop_assert!(b0 != 0);
            buf[0] = b0;
            let d = decode(&buf, prev).unwrap();
            prop_assert_eq!(d.timestamp, ts);
            prop_assert_eq!(d.id, id);
        }
    }
}
