//! CTF index files, `index/<channel>_<cpu>.idx`, as LTTng writes them
//! (`lttng-tools/src/common/index/ctf-index.h`, index format 1.1). All fields big-endian:
//!
//! ```text
//! header (16 bytes):  u32 magic = 0xC1F1DCC1 | u32 major = 1 | u32 minor = 1 | u32 entry_len = 72
//! entry (72 bytes):   u64 offset (bytes, of the packet in the stream file)
//!                     u64 packet_size (bits)     u64 content_size (bits)
//!                     u64 timestamp_begin        u64 timestamp_end       (clock cycles = ns)
//!                     u64 events_discarded       u64 stream_id
//!                     u64 stream_instance_id     u64 packet_seq_num
//! ```
//!
//! babeltrace2 uses the index to seek; it rebuilds it from the packets when it is missing.

use std::fs::File;
use std::io::Write;

use crate::outdir::TraceDir;

/// The directory of a trace's index files, beside its stream files.
pub const INDEX_DIR: &str = "index";

/// Index file magic number.
pub const INDEX_MAGIC: u32 = 0xC1F1_DCC1;
/// Index format major version.
pub const INDEX_MAJOR: u32 = 1;
/// Index format minor version (1.1 adds `stream_instance_id` and `packet_seq_num`).
pub const INDEX_MINOR: u32 = 1;
/// Bytes of the file header.
pub const HEADER_LEN: usize = 16;
/// Bytes of one entry.
pub const ENTRY_LEN: usize = 72;

/// One packet's entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexEntry {
    /// Offset of the packet in the stream file, in bytes.
    pub offset: u64,
    /// Size of the packet, in bits.
    pub packet_size_bits: u64,
    /// Size of the packet's content, in bits.
    pub content_size_bits: u64,
    /// Packet `timestamp_begin`, in clock cycles (ns).
    pub timestamp_begin: u64,
    /// Packet `timestamp_end`, in clock cycles (ns).
    pub timestamp_end: u64,
    /// Cumulative discarded events of the stream at the end of the packet.
    pub events_discarded: u64,
    /// Stream class id.
    pub stream_id: u64,
    /// Stream instance id.
    pub stream_instance_id: u64,
    /// Packet sequence number.
    pub packet_seq_num: u64,
}

impl IndexEntry {
    /// The entry of a packet written at byte `offset` of its stream file, from its parsed
    /// packet context (sizes converted from bytes to bits, as the index stores them).
    pub fn for_packet(offset: u64, info: &ust_core::packet::PacketInfo) -> IndexEntry {
        IndexEntry {
            offset,
            packet_size_bits: info.packet_size.saturating_mul(8),
            content_size_bits: info.content_size.saturating_mul(8),
            timestamp_begin: info.timestamp_begin,
            timestamp_end: info.timestamp_end,
            events_discarded: info.events_discarded,
            stream_id: u64::from(info.stream_id),
            stream_instance_id: info.stream_instance_id,
            packet_seq_num: info.packet_seq_num,
        }
    }

    /// The 72 big-endian bytes of the entry.
    pub fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut out = [0u8; ENTRY_LEN];
        let vals = [
            self.offset,
            self.packet_size_bits,
            self.content_size_bits,
            self.timestamp_begin,
            self.timestamp_end,
            self.events_discarded,
            self.stream_id,
            self.stream_instance_id,
            self.packet_seq_num,
        ];
        for (i, v) in vals.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
        }
        out
    }

    /// Reads an entry from 72 big-endian bytes; `None` when `b` is shorter.
    pub fn decode(b: &[u8]) -> Option<IndexEntry> {
        let w = |i: usize| -> Option<u64> { Some(u64::from_be_bytes(b.get(i * 8..i * 8 + 8)?.try_into().ok()?)) };
        Some(IndexEntry {
            offset: w(0)?,
            packet_size_bits: w(1)?,
            content_size_bits: w(2)?,
            timestamp_begin: w(3)?,
            timestamp_end: w(4)?,
            events_discarded: w(5)?,
            stream_id: w(6)?,
            stream_instance_id: w(7)?,
            packet_seq_num: w(8)?,
        })
    }
}

/// The 16-byte file header.
pub fn header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(&INDEX_MAGIC.to_be_bytes());
    h[4..8].copy_from_slice(&INDEX_MAJOR.to_be_bytes());
    h[8..12].copy_from_slice(&INDEX_MINOR.to_be_bytes());
    h[12..16].copy_from_slice(&(ENTRY_LEN as u32).to_be_bytes());
    h
}

/// Errors reading an index file back.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IndexError {
    /// Shorter than the header, wrong magic or version, or an entry length below 72.
    #[error("not a CTF index 1.1 file")]
    BadHeader,
}

/// Parses a whole index file: the entries it holds (a cut-off last entry is ignored).
///
/// # Errors
/// [`IndexError::BadHeader`].
pub fn parse(bytes: &[u8]) -> Result<Vec<IndexEntry>, IndexError> {
    let u = |i: usize| bytes.get(i..i + 4).map(|s| u32::from_be_bytes(s.try_into().expect("4 bytes")));
    if u(0) != Some(INDEX_MAGIC) || u(4) != Some(INDEX_MAJOR) || u(8).is_none_or(|m| m < 1) {
        return Err(IndexError::BadHeader);
    }
    let len = u(12).ok_or(IndexError::BadHeader)? as usize;
    if len < ENTRY_LEN {
        return Err(IndexError::BadHeader);
    }
    Ok(bytes[HEADER_LEN..].chunks_exact(len).filter_map(IndexEntry::decode).collect())
}

/// An open index file.
#[derive(Debug)]
pub struct IndexFile {
    file: File,
    len: u64,
}

impl IndexFile {
    /// Creates `dir/index/<name>.idx` (and `index/`, mode 0750), mode 0600, and writes the
    /// header ([`TraceDir::dir`], [`TraceDir::create_file`]).
    ///
    /// # Errors
    /// The I/O error, or the refusal of what is in the way.
    pub fn create(dir: &TraceDir, name: &str) -> std::io::Result<IndexFile> {
        let mut file = dir.dir(INDEX_DIR, 0o750)?.create_file(&format!("{name}.idx"), 0o600)?;
        file.write_all(&header())?;
        Ok(IndexFile { file, len: HEADER_LEN as u64 })
    }

    /// Appends one entry with a single write.
    ///
    /// # Errors
    /// The I/O error; a part of the entry that reached the disk is truncated away.
    pub fn append(&mut self, e: &IndexEntry) -> std::io::Result<()> {
        if let Err(err) = self.file.write_all(&e.encode()) {
            let _ = self.file.set_len(self.len);
            return Err(err);
        }
        self.len += ENTRY_LEN as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_lttng_reference_layout() {
        // First 32 bytes of the reference trace's index/ch_0.idx (LTTng-UST 2.13).
        let reference: [u8; 32] = [
            0xc1, 0xf1, 0xdc, 0xc1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0x48, //
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x00,
        ];
        assert_eq!(&header()[..], &reference[..16]);
        let e = IndexEntry { offset: 0, packet_size_bits: 0x8000, ..Default::default() };
        assert_eq!(&e.encode()[..16], &reference[16..]);
    }

    #[test]
    fn round_trip_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = IndexFile::create(&TraceDir::create(dir.path(), None).unwrap(), "c_0").unwrap();
        let e = IndexEntry {
            offset: 4096,
            packet_size_bits: 32768,
            content_size_bits: 800,
            timestamp_begin: 1,
            timestamp_end: 2,
            events_discarded: 3,
            stream_id: 4,
            stream_instance_id: 5,
            packet_seq_num: 6,
        };
        f.append(&e).unwrap();
        drop(f);
        let bytes = std::fs::read(dir.path().join("index/c_0.idx")).unwrap();
        assert_eq!(bytes.len(), HEADER_LEN + ENTRY_LEN);
        assert_eq!(parse(&bytes).unwrap(), vec![e]);
        assert_eq!(parse(&bytes[..3]), Err(IndexError::BadHeader));
    }
}
