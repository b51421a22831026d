//! What the ring buffer's integration tests share: a packet layout with the five header
//! fields the tests check, a `CLOCK_MONOTONIC` clock, and a little-endian `u64` reader.

use ringbuffer::{Clock, PacketBegin, PacketEnd, PacketLayout, StreamIdentity};

/// Bytes of [`Layout`]'s packet header.
pub const HDR: usize = 40;

/// Header: ts_begin | ts_end | seq | content | discarded (u64 each).
pub struct Layout;
impl PacketLayout for Layout {
    fn header_size(&self) -> usize {
        HDR
    }
    fn write_begin(&self, _: &StreamIdentity, h: &mut [u8], b: &PacketBegin) {
        h[0..8].copy_from_slice(&b.timestamp_begin.to_le_bytes());
        h[16..24].copy_from_slice(&b.packet_seq_num.to_le_bytes());
    }
    fn write_end(&self, _: &StreamIdentity, h: &mut [u8], e: &PacketEnd) {
        h[8..16].copy_from_slice(&e.timestamp_end.to_le_bytes());
        h[24..32].copy_from_slice(&e.content_size.to_le_bytes());
        h[32..40].copy_from_slice(&e.events_discarded.to_le_bytes());
    }
}

/// `CLOCK_MONOTONIC` in ns.
pub struct Monotonic;
impl Clock for Monotonic {
    fn now(&self) -> u64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: valid pointer to a timespec; CLOCK_MONOTONIC always exists.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

/// The little-endian `u64` at `off` of `b`.
pub fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}
