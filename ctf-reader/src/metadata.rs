//! Reading a trace's `metadata` file: CTF 2 JSON text sequence (first byte 0x1E), CTF 1.8
//! packetized metadata (CTF 1.8 §7.1: packets starting with magic 0x75D11D57 in the trace's
//! byte order, found from the magic itself) or plain TSDL text.

use std::path::Path;

use crate::error::MetadataError;
use crate::model::Trace;

/// Magic number of a packetized metadata packet.
pub const METADATA_MAGIC: u32 = 0x75D1_1D57;
/// Size in bytes of a metadata packet header (magic, uuid, checksum, content and packet
/// sizes, compression/encryption/checksum schemes, major, minor).
pub const METADATA_HEADER_LEN: usize = 37;

/// Reads and parses the metadata file at `path` into a trace model.
///
/// The file must be a regular file itself, not a symbolic link to one (as the stream files,
/// [`crate::CtfTrace::open`]): a link planted in a user's trace would otherwise have root,
/// reading the trace, parse a file of root's and quote its lines in the syntax errors.
///
/// Errors: I/O (also when `path` is a link or not a regular file: a FIFO would block the
/// read, a device never end it), packet framing (with the offset of the bad packet), TSDL
/// syntax (with its line) and semantic errors.
pub fn read_metadata(path: &Path) -> Result<Trace, MetadataError> {
    use std::io::Read;
    let io = |source| MetadataError::Io { path: path.to_owned(), source };
    let (mut f, len) = crate::files::open_regular(path).map_err(io)?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0).min(1 << 26));
    f.read_to_end(&mut bytes).map_err(io)?;
    parse_metadata(&bytes, path)
}

/// Parses metadata bytes (the content of a `metadata` file); `path` names it in errors.
pub fn parse_metadata(bytes: &[u8], path: &Path) -> Result<Trace, MetadataError> {
    if bytes.first() == Some(&0x1e) {
        return crate::ctf2::parse(bytes, path);
    }
    let text = depacketize(bytes, path)?;
    crate::tsdl::parse(&text, path)
}

/// Returns the TSDL text of packetized metadata, or `bytes` itself when it is plain text.
pub fn depacketize(bytes: &[u8], path: &Path) -> Result<Vec<u8>, MetadataError> {
    let big = match bytes.get(..4) {
        Some(m) if u32::from_le_bytes([m[0], m[1], m[2], m[3]]) == METADATA_MAGIC => false,
        Some(m) if u32::from_be_bytes([m[0], m[1], m[2], m[3]]) == METADATA_MAGIC => true,
        _ => return Ok(bytes.to_vec()),
    };
    let u32_at = |b: &[u8], at: usize| {
        let a = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        if big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    };
    let bad = |offset: usize, msg: String| MetadataError::Packet { path: path.to_owned(), offset: offset as u64, msg };
    let mut out = Vec::with_capacity(bytes.len());
    let mut off = 0usize;
    while off < bytes.len() {
        let h = bytes.get(off..off + METADATA_HEADER_LEN).ok_or_else(|| bad(off, "truncated metadata packet header".into()))?;
        if u32_at(h, 0) != METADATA_MAGIC {
            return Err(bad(off, format!("bad metadata packet magic 0x{:08x}", u32_at(h, 0))));
        }
        let content_bits = u32_at(h, 24) as usize;
        let packet_bits = u32_at(h, 28) as usize;
        let (compression, encryption, checksum) = (h[32], h[33], h[34]);
        if compression != 0 || encryption != 0 || checksum != 0 {
            return Err(bad(off, format!("metadata packet uses compression {compression}, encryption {encryption} or checksum {checksum}: unsupported")));
        }
        if content_bits % 8 != 0 || packet_bits % 8 != 0 || content_bits < METADATA_HEADER_LEN * 8 || content_bits > packet_bits {
            return Err(bad(off, format!("bad metadata packet sizes: content {content_bits} bits, packet {packet_bits} bits")));
        }
        let end = off
            .checked_add(packet_bits / 8)
            .filter(|e| *e <= bytes.len())
            .ok_or_else(|| bad(off, format!("metadata packet of {packet_bits} bits runs past the end of the file")))?;
        out.extend_from_slice(&bytes[off + METADATA_HEADER_LEN..off + content_bits / 8]);
        off = end;
    }
    Ok(out)
}
