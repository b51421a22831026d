//! The CTF packet header and packet context at the start of every packet, and the
//! [`ringbuffer::PacketLayout`] client that writes them (LTTng-UST's `client_buffer_begin`
//! and `client_buffer_end`).
//!
//! Layout, packed little-endian, 84 bytes (CTF 1.8 section 5, "Streams"; the fields are
//! LTTng-UST 2.13's):
//!
//! ```text
//! offset  size  field
//!      0     4  magic = 0xC1FC1FC1              packet header
//!      4    16  uuid (trace UUID)
//!     20     4  stream_id (channel)
//!     24     8  stream_instance_id
//!     32     8  timestamp_begin (ns)            packet context
//!     40     8  timestamp_end (ns)
//!     48     8  content_size (bits)
//!     56     8  packet_size (bits)
//!     64     8  packet_seq_num
//!     72     8  events_discarded (cumulative for the stream)
//!     80     4  cpu_id
//! ```

use ringbuffer::{PacketBegin, PacketEnd, PacketLayout, StreamIdentity};

/// CTF packet magic number (CTF 1.8 section 5).
pub const MAGIC: u32 = 0xC1FC_1FC1;
/// Bytes of packet header plus context.
pub const HEADER_SIZE: usize = 84;

const OFF_MAGIC: usize = 0;
const OFF_UUID: usize = 4;
const OFF_STREAM_ID: usize = 20;
const OFF_INSTANCE: usize = 24;
const OFF_TS_BEGIN: usize = 32;
const OFF_TS_END: usize = 40;
const OFF_CONTENT: usize = 48;
const OFF_PACKET: usize = 56;
const OFF_SEQ: usize = 64;
const OFF_DISCARDED: usize = 72;
const OFF_CPU: usize = 80;

/// Bytes of a packet's start that hold its `packet_size`: what a reader splitting a
/// stream file into packets needs before the rest.
pub const PACKET_SIZE_END: usize = OFF_PACKET + 8;

/// The size in bytes a packet starting with `prefix` announces (its context's
/// `packet_size`, in bits at bytes 56..64, divided by 8), unchecked: a value read from a
/// file, which callers bound by what the file holds. `None` when `prefix` is shorter than
/// [`PACKET_SIZE_END`].
pub fn announced_size(prefix: &[u8]) -> Option<u64> {
    (prefix.len() >= PACKET_SIZE_END).then(|| get_u64(prefix, OFF_PACKET) / 8)
}

/// The CTF packet-layout client. Stateless: everything it writes comes from the
/// [`StreamIdentity`] stored in the buffer file and from the ring buffer's counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct CtfPacketLayout;

fn put(buf: &mut [u8], off: usize, bytes: &[u8]) {
    buf[off..off + bytes.len()].copy_from_slice(bytes);
}

impl PacketLayout for CtfPacketLayout {
    #[inline]
    fn header_size(&self) -> usize {
        HEADER_SIZE
    }

    fn write_begin(&self, stream: &StreamIdentity, header: &mut [u8], begin: &PacketBegin) {
        put(header, OFF_MAGIC, &MAGIC.to_le_bytes());
        put(header, OFF_UUID, &stream.uuid);
        put(header, OFF_STREAM_ID, &stream.stream_id.to_le_bytes());
        put(header, OFF_INSTANCE, &stream.stream_instance_id.to_le_bytes());
        put(header, OFF_TS_BEGIN, &begin.timestamp_begin.to_le_bytes());
        put(header, OFF_SEQ, &begin.packet_seq_num.to_le_bytes());
        put(header, OFF_CPU, &stream.cpu.to_le_bytes());
    }

    fn write_end(&self, stream: &StreamIdentity, header: &mut [u8], end: &PacketEnd) {
        // The begin fields are rewritten too: a packet is then whole even if the opener's
        // writes were lost to a crash between open and the first commit.
        self.write_begin(stream, header, &PacketBegin { timestamp_begin: end.timestamp_begin, packet_seq_num: end.packet_seq_num });
        put(header, OFF_TS_END, &end.timestamp_end.to_le_bytes());
        put(header, OFF_CONTENT, &(end.content_size * 8).to_le_bytes());
        put(header, OFF_PACKET, &(end.packet_size * 8).to_le_bytes());
        put(header, OFF_DISCARDED, &end.events_discarded.to_le_bytes());
    }
}

/// A packet header and context read back from bytes copied out of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketInfo {
    /// Trace UUID.
    pub uuid: [u8; 16],
    /// Stream class id.
    pub stream_id: u32,
    /// Stream instance id.
    pub stream_instance_id: u64,
    /// ns.
    pub timestamp_begin: u64,
    /// ns.
    pub timestamp_end: u64,
    /// Bytes of header, context and events.
    pub content_size: u64,
    /// Bytes of the whole packet.
    pub packet_size: u64,
    /// Packet sequence number in the stream.
    pub packet_seq_num: u64,
    /// Cumulative discarded events of the stream.
    pub events_discarded: u64,
    /// CPU id.
    pub cpu_id: u32,
}

/// Why a copied packet was rejected.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PacketError {
    /// Fewer bytes than a header.
    #[error("packet of {0} bytes is shorter than its {HEADER_SIZE}-byte header")]
    Short(usize),
    /// Wrong magic number.
    #[error("bad packet magic {0:#x}")]
    Magic(u32),
    /// Sizes that are not whole bytes or do not fit the packet.
    #[error("inconsistent sizes: content {content} bits, packet {packet} bits, {len} bytes copied")]
    Sizes {
        /// content_size in bits.
        content: u64,
        /// packet_size in bits.
        packet: u64,
        /// bytes available.
        len: usize,
    },
    /// timestamp_end before timestamp_begin.
    #[error("timestamp_end {end} before timestamp_begin {begin}")]
    Time {
        /// ns.
        begin: u64,
        /// ns.
        end: u64,
    },
    /// The header names another stream than the buffer it came from.
    #[error("packet header names another stream than its buffer")]
    Stream,
}

fn get_u64(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}
fn get_u32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

impl PacketInfo {
    /// Parses and checks a packet copied out of shared memory (never the shared memory
    /// itself: it could change under the check). `expected` is the identity of the buffer it
    /// was read from: a packet that names another stream is refused.
    ///
    /// # Errors
    /// [`PacketError`] for a short packet, bad magic, sizes that do not fit `bytes`, times out
    /// of order, or a foreign stream identity.
    pub fn parse(bytes: &[u8], expected: &StreamIdentity) -> Result<PacketInfo, PacketError> {
        if bytes.len() < HEADER_SIZE {
            return Err(PacketError::Short(bytes.len()));
        }
        let magic = get_u32(bytes, OFF_MAGIC);
        if magic != MAGIC {
            return Err(PacketError::Magic(magic));
        }
        let info = PacketInfo {
            uuid: bytes[OFF_UUID..OFF_UUID + 16].try_into().expect("16 bytes"),
            stream_id: get_u32(bytes, OFF_STREAM_ID),
            stream_instance_id: get_u64(bytes, OFF_INSTANCE),
            timestamp_begin: get_u64(bytes, OFF_TS_BEGIN),
            timestamp_end: get_u64(bytes, OFF_TS_END),
            content_size: get_u64(bytes, OFF_CONTENT) / 8,
            packet_size: get_u64(bytes, OFF_PACKET) / 8,
            packet_seq_num: get_u64(bytes, OFF_SEQ),
            events_discarded: get_u64(bytes, OFF_DISCARDED),
            cpu_id: get_u32(bytes, OFF_CPU),
        };
        let (content_bits, packet_bits) = (get_u64(bytes, OFF_CONTENT), get_u64(bytes, OFF_PACKET));
        if content_bits % 8 != 0
            || packet_bits % 8 != 0
            || info.content_size < HEADER_SIZE as u64
            || info.content_size > info.packet_size
            || info.packet_size != bytes.len() as u64
        {
            return Err(PacketError::Sizes { content: content_bits, packet: packet_bits, len: bytes.len() });
        }
        if info.timestamp_end < info.timestamp_begin {
            return Err(PacketError::Time { begin: info.timestamp_begin, end: info.timestamp_end });
        }
        if info.uuid != expected.uuid
            || info.stream_id != expected.stream_id
            || info.stream_instance_id != expected.stream_instance_id
            || info.cpu_id != expected.cpu
        {
            return Err(PacketError::Stream);
        }
        Ok(info)
    }
}

/// TSDL of the packet header (inside the `trace` block) as a `packet.header := struct {...};`
/// line (CTF 1.8 section 7.3).
pub const TSDL_PACKET_HEADER: &str = "\tpacket.header := struct {
\t\tinteger { size = 32; align = 8; signed = false; base = 16; } magic;
\t\tinteger { size = 8; align = 8; signed = false; } uuid[16];
\t\tinteger { size = 32; align = 8; signed = false; } stream_id;
\t\tinteger { size = 64; align = 8; signed = false; } stream_instance_id;
\t};
";

/// TSDL of the packet context for a clock named `clock`, as a `packet.context := struct
/// {...};` line inside a `stream` block. Needs the `uint64_clock_<clock>_t` alias that
/// [`crate::event_header::tsdl`] declares.
pub fn tsdl_packet_context(clock: &str) -> String {
    format!(
        "\tpacket.context := struct {{
\t\tuint64_clock_{clock}_t timestamp_begin;
\t\tuint64_clock_{clock}_t timestamp_end;
\t\tinteger {{ size = 64; align = 8; signed = false; }} content_size;
\t\tinteger {{ size = 64; align = 8; signed = false; }} packet_size;
\t\tinteger {{ size = 64; align = 8; signed = false; }} packet_seq_num;
\t\tinteger {{ size = 64; align = 8; signed = false; }} events_discarded;
\t\tinteger {{ size = 32; align = 8; signed = false; }} cpu_id;
\t}};
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_then_end_parses_back() {
        let stream = StreamIdentity { uuid: [7; 16], stream_id: 2, cpu: 1, stream_instance_id: 9 };
        let mut pkt = vec![0u8; 4096];
        CtfPacketLayout.write_begin(&stream, &mut pkt[..HEADER_SIZE], &PacketBegin { timestamp_begin: 10, packet_seq_num: 3 });
        CtfPacketLayout.write_end(
            &stream,
            &mut pkt[..HEADER_SIZE],
            &PacketEnd { timestamp_begin: 10, timestamp_end: 20, content_size: 100, packet_size: 4096, packet_seq_num: 3, events_discarded: 5 },
        );
        let info = PacketInfo::parse(&pkt, &stream).unwrap();
        assert_eq!(info.content_size, 100);
        assert_eq!(info.packet_size, 4096);
        assert_eq!(info.events_discarded, 5);
        assert_eq!(info.cpu_id, 1);
        let other = StreamIdentity { cpu: 0, ..stream };
        assert_eq!(PacketInfo::parse(&pkt, &other), Err(PacketError::Stream));
        assert!(matches!(PacketInfo::parse(&pkt[..2000], &stream), Err(PacketError::Sizes { .. })));
        pkt[0] = 0;
        assert!(matches!(PacketInfo::parse(&pkt, &stream), Err(PacketError::Magic(_))));
    }
}
