//! The buffer file: its self-describing header and where every region lives.
//!
//! One file (a memfd, or a file under `--shm-path`) holds one per-CPU ring buffer. The
//! daemon formats it ([`Buffer::create`](crate::Buffer::create)); the application and the
//! daemon map it; `ust crash-dump` can read it with nobody alive. So the file starts with
//! a versioned header that says everything needed to interpret the rest:
//!
//! ```text
//!  0                     HEADER_LEN  ctrl_offset        subbuf_ctrl_offset      id_table   data_offset
//!  +---------------------+-----------+------------------+-----------------------+----------+------------------------+
//!  | FileHeader (128 B)  |  (gap)    | control block    | per-sub-buffer control| ids      | num_subbuf + 1 physical|
//!  | magic, ABI, sizes,  |           | 4 cache lines:   | num_subbuf x stride:  | u64 each | sub-buffers (the last  |
//!  | offsets             |           | write, last_tsc, | commit count (own     |          | one is the reader's    |
//!  |                     |           | lost, consumed   | line), delivered, ... |          | spare), page aligned   |
//!  +---------------------+-----------+------------------+-----------------------+----------+------------------------+
//! ```
//!
//! All integers are in the byte order of the machine that formatted the file (tagged by
//! `endianness`); the header's field offsets are listed on [`FileHeader`]. Hot words that
//! different parties write (`write` and `last_tsc` by writers, the lost counters, the
//! reader's `consumed`, each sub-buffer's commit counter) sit on their own
//! [`CACHE_LINE`]-byte lines so that writers on different CPUs do not false-share them.
//!
//! **Versioning.** A reader refuses a file whose [`ABI_MAJOR`] differs. Minor versions
//! may append header fields (within `header_len`) and use the reserved words; they keep
//! every offset below. The region offsets are *stored*, not implied, and `open` validates
//! them (alignment, no overlap, inside the mapping) before using them.
//!
//! **Sub-buffer ids** (overwrite mode, LTTng-UST's `subbuffer_id_*` scheme): the id table
//! maps each ring index to the physical sub-buffer that currently plays it. The low 32 bits
//! of an id are the physical index (`0..=num_subbuf`); the high bits are the lap tag and
//! the state flags of [`crate::ids`]. The reader owns physical sub-buffer `num_subbuf`
//! (its spare) at start, recorded in `CTRL_READER_SPARE`. In discard mode the table is
//! the identity and is never changed.

use crate::error::LayoutError;
use crate::position::Positions;
use crate::{BufferConfig, Mode, StreamIdentity};

/// First 8 bytes of every buffer file.
pub const MAGIC: [u8; 8] = *b"USTRBUF\0";
/// ABI major version of the layout and algorithm this crate implements.
pub const ABI_MAJOR: u16 = 1;
/// ABI minor version this crate writes.
///
/// Minor 1 added overwrite mode: the `overwritten` counter, the reader's held position
/// and content words, and the id encoding of [`crate::ids`] (a minor-0 reader, which only
/// knew discard mode, reads the discard-mode files of this version unchanged).
/// Minor 2 added the `writers` control word ([`CTRL_WRITERS`]): writers claim per-CPU
/// (rseq) mode only in files of minor 2 or later, whose daemon flushes such buffers from
/// their CPU.
pub const ABI_MINOR: u16 = 2;
/// Length of the header this version writes, in bytes.
pub const HEADER_LEN: usize = 128;
/// Cache-line size the layout pads hot words to, in bytes (128: two 64-byte lines, because
/// x86-64 prefetches line pairs; crossbeam's `CachePadded` uses the same).
pub const CACHE_LINE: usize = 128;
/// `endianness` tag of a little-endian file.
pub const ENDIAN_LITTLE: u8 = 1;
/// `endianness` tag of a big-endian file.
pub const ENDIAN_BIG: u8 = 2;
/// Smallest sub-buffer size accepted, in bytes.
#[cfg(not(loom))]
pub const MIN_SUBBUF_SIZE: u64 = 4096;
/// Largest packet header + context a buffer may reserve, in bytes (the CTF layout uses 84):
/// the header is written through a stack copy ([`Memory::with_bytes_mut`](crate::Memory::with_bytes_mut)).
pub const MAX_HEADER_SIZE: usize = 1024;
/// Smallest sub-buffer size accepted, in bytes (tiny under the model checker).
#[cfg(loom)]
pub const MIN_SUBBUF_SIZE: u64 = 16;
/// Largest number of sub-buffers accepted.
pub const MAX_NUM_SUBBUF: u32 = 1 << 16;
/// Largest sub-buffer size accepted, in bytes (1 GiB).
pub const MAX_SUBBUF_SIZE: u64 = 1 << 30;
/// Alignment of the data region, in bytes (a page, so sub-buffers are page aligned).
#[cfg(not(loom))]
pub const DATA_ALIGN: u64 = 4096;
/// Alignment of the data region, in bytes (small under the model checker).
#[cfg(loom)]
pub const DATA_ALIGN: u64 = 64;

/// Byte order of this process, as an `endianness` tag.
pub const NATIVE_ENDIAN: u8 = if cfg!(target_endian = "little") { ENDIAN_LITTLE } else { ENDIAN_BIG };

// Control block, offsets relative to `ctrl_offset`.
/// `write`: free-running reserve position (writers CAS it).
pub const CTRL_WRITE: usize = 0;
/// `last_tsc`: timestamp of a recent reservation (for the compact-header decision).
pub const CTRL_LAST_TSC: usize = CACHE_LINE;
/// `lost_full`: events dropped because the buffer was full (discard mode).
pub const CTRL_LOST_FULL: usize = 2 * CACHE_LINE;
/// `lost_big`: events dropped because they were larger than a sub-buffer's payload.
pub const CTRL_LOST_BIG: usize = 2 * CACHE_LINE + 8;
/// `lost_nesting`: events dropped because tracing nested too deep.
pub const CTRL_LOST_NESTING: usize = 2 * CACHE_LINE + 16;
/// `overwritten` (ABI 1.1): packets a writer overwrote before the reader took them
/// (overwrite mode; not part of `events_discarded`).
pub const CTRL_OVERWRITTEN: usize = 2 * CACHE_LINE + 24;
/// `writers` (ABI 1.2): how writers change `write` ([`crate::percpu`]): 0 unclaimed, 1
/// compare-and-swap from any CPU, 2 restartable compare-and-store on the buffer's CPU only.
/// Claimed once by the first writer ([`crate::Writer::claim_writers`]); the daemon's flush
/// reads it to know how it may close a packet.
pub const CTRL_WRITERS: usize = 2 * CACHE_LINE + 32;
/// `consumed`: free-running reader position (the reader advances it; in overwrite mode
/// writers push it too).
pub const CTRL_CONSUMED: usize = 3 * CACHE_LINE;
/// The reader's sub-buffer (overwrite mode): its physical index, with
/// [`READER_HELD`] set while the reader holds a packet it got (its spare otherwise).
pub const CTRL_READER_SPARE: usize = 3 * CACHE_LINE + 8;
/// Position of the packet the reader holds (ABI 1.1, overwrite mode; valid with
/// [`READER_HELD`]).
pub const CTRL_READER_POS: usize = 3 * CACHE_LINE + 16;
/// Content size of the packet the reader holds, in bytes (ABI 1.1, overwrite mode).
pub const CTRL_READER_CONTENT: usize = 3 * CACHE_LINE + 24;
/// Flag of the `CTRL_READER_SPARE` word: the reader holds a packet (between
/// `get_subbuf` and `put_subbuf`).
pub const READER_HELD: u64 = 1 << 63;
/// Every word of the control block, in offset order (formatting and the model memory
/// use this list).
pub const CTRL_WORDS: [usize; 11] = [
    CTRL_WRITE,
    CTRL_LAST_TSC,
    CTRL_LOST_FULL,
    CTRL_LOST_BIG,
    CTRL_LOST_NESTING,
    CTRL_OVERWRITTEN,
    CTRL_WRITERS,
    CTRL_CONSUMED,
    CTRL_READER_SPARE,
    CTRL_READER_POS,
    CTRL_READER_CONTENT,
];
/// Length of the control block, in bytes.
pub const CTRL_LEN: usize = 4 * CACHE_LINE;

// Per-sub-buffer control, offsets relative to `subbuf_ctrl_offset + index * stride`.
/// Free-running commit counter in bytes (LTTng's `commit_hot`), alone on its line.
pub const SB_COMMIT: usize = 0;
/// Commit-counter value at which the sub-buffer was last delivered (LTTng's
/// `commit_cold.cc_sb`): `(lap + 1) * subbuf_size` once lap `lap` is delivered.
pub const SB_DELIVERED: usize = CACHE_LINE;
/// Free-running position where the content of the last closed packet ends (stored by the
/// closer before it commits the padding).
pub const SB_CLOSED_END: usize = CACHE_LINE + 8;
/// `timestamp_begin` of the packet (ns), stored by the opener.
pub const SB_TS_BEGIN: usize = CACHE_LINE + 16;
/// `timestamp_end` of the packet (ns), stored by the closer.
pub const SB_TS_END: usize = CACHE_LINE + 24;
/// `packet_seq_num` of the packet, stored by the opener.
pub const SB_SEQ: usize = CACHE_LINE + 32;
/// `events_discarded` of the packet: the buffer's total lost count read by the closer
/// between its load of `write` and its closing CAS (so it never decreases from one packet
/// to the next, whatever order packets are delivered in).
pub const SB_DISCARDED: usize = CACHE_LINE + 40;
/// Bytes of per-sub-buffer control used.
pub const SB_USED: usize = CACHE_LINE + 48;
/// Every word of a sub-buffer's control, in offset order.
pub const SB_WORDS: [usize; 7] = [SB_COMMIT, SB_DELIVERED, SB_CLOSED_END, SB_TS_BEGIN, SB_TS_END, SB_SEQ, SB_DISCARDED];
/// Stride of the per-sub-buffer control array, in bytes.
pub const SB_STRIDE: usize = 2 * CACHE_LINE;

/// Mask of the physical index in a sub-buffer id.
pub const ID_INDEX_MASK: u64 = 0xffff_ffff;

/// The self-describing file header, as read from or written to the first
/// [`HEADER_LEN`] bytes (native byte order, tagged by `endianness`).
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 8 | `magic` |
/// | 8 | 2 | `abi_major` |
/// | 10 | 2 | `abi_minor` |
/// | 12 | 1 | `word_size` |
/// | 13 | 1 | `endianness` |
/// | 14 | 1 | `mode` |
/// | 16 | 4 | `header_size` |
/// | 20 | 4 | `num_subbuf` |
/// | 24 | 8 | `subbuf_size` |
/// | 32 | 32 | `stream` (uuid 16, stream_id u32, cpu u32, stream_instance_id u64) |
/// | 64 | 8 | `file_size` |
/// | 72 | 8 | `ctrl_offset` |
/// | 80 | 8 | `subbuf_ctrl_offset` |
/// | 88 | 8 | `subbuf_ctrl_stride` |
/// | 96 | 8 | `id_table_offset` |
/// | 104 | 8 | `data_offset` |
/// | 112 | 4 | `num_phys_subbuf` |
/// | 116 | 4 | `cache_line` |
/// | 120 | 4 | `header_len` |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// ABI major version ([`ABI_MAJOR`]).
    pub abi_major: u16,
    /// ABI minor version.
    pub abi_minor: u16,
    /// Word size of the formatting process in bytes (8).
    pub word_size: u8,
    /// [`ENDIAN_LITTLE`] or [`ENDIAN_BIG`].
    pub endianness: u8,
    /// [`Mode`] as its `u8` value.
    pub mode: u8,
    /// Packet header + context bytes at the start of every sub-buffer.
    pub header_size: u32,
    /// Number of sub-buffers in the ring (power of two).
    pub num_subbuf: u32,
    /// Sub-buffer size in bytes (power of two).
    pub subbuf_size: u64,
    /// Stream the buffer feeds.
    pub stream: StreamIdentity,
    /// Total file size in bytes.
    pub file_size: u64,
    /// Offset of the control block.
    pub ctrl_offset: u64,
    /// Offset of the per-sub-buffer control array.
    pub subbuf_ctrl_offset: u64,
    /// Stride of the per-sub-buffer control array, in bytes.
    pub subbuf_ctrl_stride: u64,
    /// Offset of the sub-buffer id table (`num_subbuf` u64 ids).
    pub id_table_offset: u64,
    /// Offset of the data region (`num_phys_subbuf * subbuf_size` bytes).
    pub data_offset: u64,
    /// Physical sub-buffers in the data region (`num_subbuf + 1`: one reader spare).
    pub num_phys_subbuf: u32,
    /// [`CACHE_LINE`] of the formatting build.
    pub cache_line: u32,
    /// Bytes of header written ([`HEADER_LEN`] for this version).
    pub header_len: u32,
}

fn get<const N: usize>(b: &[u8; HEADER_LEN], off: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[off..off + N]);
    a
}

impl FileHeader {
    /// Serializes to the on-file form (native byte order).
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&self.magic);
        b[8..10].copy_from_slice(&self.abi_major.to_ne_bytes());
        b[10..12].copy_from_slice(&self.abi_minor.to_ne_bytes());
        b[12] = self.word_size;
        b[13] = self.endianness;
        b[14] = self.mode;
        b[16..20].copy_from_slice(&self.header_size.to_ne_bytes());
        b[20..24].copy_from_slice(&self.num_subbuf.to_ne_bytes());
        b[24..32].copy_from_slice(&self.subbuf_size.to_ne_bytes());
        b[32..48].copy_from_slice(&self.stream.uuid);
        b[48..52].copy_from_slice(&self.stream.stream_id.to_ne_bytes());
        b[52..56].copy_from_slice(&self.stream.cpu.to_ne_bytes());
        b[56..64].copy_from_slice(&self.stream.stream_instance_id.to_ne_bytes());
        b[64..72].copy_from_slice(&self.file_size.to_ne_bytes());
        b[72..80].copy_from_slice(&self.ctrl_offset.to_ne_bytes());
        b[80..88].copy_from_slice(&self.subbuf_ctrl_offset.to_ne_bytes());
        b[88..96].copy_from_slice(&self.subbuf_ctrl_stride.to_ne_bytes());
        b[96..104].copy_from_slice(&self.id_table_offset.to_ne_bytes());
        b[104..112].copy_from_slice(&self.data_offset.to_ne_bytes());
        b[112..116].copy_from_slice(&self.num_phys_subbuf.to_ne_bytes());
        b[116..120].copy_from_slice(&self.cache_line.to_ne_bytes());
        b[120..124].copy_from_slice(&self.header_len.to_ne_bytes());
        b
    }

    /// Parses the on-file form. Never fails: validation is [`Geometry::from_header`]'s job.
    pub fn from_bytes(b: &[u8; HEADER_LEN]) -> FileHeader {
        FileHeader {
            magic: get(b, 0),
            abi_major: u16::from_ne_bytes(get(b, 8)),
            abi_minor: u16::from_ne_bytes(get(b, 10)),
            word_size: b[12],
            endianness: b[13],
            mode: b[14],
            header_size: u32::from_ne_bytes(get(b, 16)),
            num_subbuf: u32::from_ne_bytes(get(b, 20)),
            subbuf_size: u64::from_ne_bytes(get(b, 24)),
            stream: StreamIdentity {
                uuid: get(b, 32),
                stream_id: u32::from_ne_bytes(get(b, 48)),
                cpu: u32::from_ne_bytes(get(b, 52)),
                stream_instance_id: u64::from_ne_bytes(get(b, 56)),
            },
            file_size: u64::from_ne_bytes(get(b, 64)),
            ctrl_offset: u64::from_ne_bytes(get(b, 72)),
            subbuf_ctrl_offset: u64::from_ne_bytes(get(b, 80)),
            subbuf_ctrl_stride: u64::from_ne_bytes(get(b, 88)),
            id_table_offset: u64::from_ne_bytes(get(b, 96)),
            data_offset: u64::from_ne_bytes(get(b, 104)),
            num_phys_subbuf: u32::from_ne_bytes(get(b, 112)),
            cache_line: u32::from_ne_bytes(get(b, 116)),
            header_len: u32::from_ne_bytes(get(b, 120)),
        }
    }
}

/// The validated geometry of one buffer: a *local* copy made once at create/open time.
/// The algorithm never re-reads sizes or offsets from shared memory after that, so an
/// application scribbling on the header cannot make the daemon index out of bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Shift form of the ring sizes.
    pub pos: Positions,
    /// Packet header + context bytes per sub-buffer.
    pub header_size: u64,
    /// Offset of the control block.
    pub ctrl: usize,
    /// Offset of the per-sub-buffer control array.
    pub sb_ctrl: usize,
    /// Stride of the per-sub-buffer control array.
    pub sb_stride: usize,
    /// Offset of the id table.
    pub ids: usize,
    /// Offset of the data region.
    pub data: usize,
    /// Physical sub-buffers (`num_subbuf + 1`).
    pub nphys: usize,
    /// File size in bytes.
    pub file_size: usize,
}

fn align_up(v: u64, a: u64) -> Option<u64> {
    Some(v.checked_add(a - 1)? & !(a - 1))
}

fn check_sizes(subbuf_size: u64, num_subbuf: u32, header_size: u32) -> Result<Positions, LayoutError> {
    if !subbuf_size.is_power_of_two() || !(MIN_SUBBUF_SIZE..=MAX_SUBBUF_SIZE).contains(&subbuf_size) {
        return Err(LayoutError::Geometry("subbuf_size must be a power of two in 4 KiB..=1 GiB"));
    }
    if !num_subbuf.is_power_of_two() || !(2..=MAX_NUM_SUBBUF).contains(&num_subbuf) {
        return Err(LayoutError::Geometry("num_subbuf must be a power of two in 2..=65536"));
    }
    if u64::from(header_size) > subbuf_size / 2 || header_size as usize > MAX_HEADER_SIZE {
        return Err(LayoutError::Geometry("header_size must be at most half a sub-buffer and at most 1 KiB"));
    }
    Positions::new(subbuf_size, num_subbuf).ok_or(LayoutError::Geometry("ring too large"))
}

impl Geometry {
    /// The standard layout of `cfg` (the one [`Buffer::create`](crate::Buffer::create)
    /// writes). Errors: [`LayoutError::Geometry`] on invalid sizes.
    pub fn for_config(cfg: &BufferConfig) -> Result<Geometry, LayoutError> {
        let pos = check_sizes(cfg.subbuf_size, cfg.num_subbuf, cfg.header_size)?;
        let n = pos.num_subbuf();
        let ctrl = CACHE_LINE as u64; // HEADER_LEN rounded up to a line
        let sb_ctrl = ctrl + CTRL_LEN as u64;
        let ids = sb_ctrl + n * SB_STRIDE as u64;
        let data = align_up(ids + n * 8, DATA_ALIGN).ok_or(LayoutError::Geometry("too large"))?;
        let nphys = n + 1;
        let file_size = nphys
            .checked_mul(pos.subbuf_size())
            .and_then(|d| d.checked_add(data))
            .filter(|&s| usize::try_from(s).is_ok())
            .ok_or(LayoutError::Geometry("buffer file larger than the address space"))?;
        Ok(Geometry {
            pos,
            header_size: u64::from(cfg.header_size),
            ctrl: ctrl as usize,
            sb_ctrl: sb_ctrl as usize,
            sb_stride: SB_STRIDE,
            ids: ids as usize,
            data: data as usize,
            nphys: nphys as usize,
            file_size: file_size as usize,
        })
    }

    /// The header `create` writes for `cfg` with this geometry.
    pub fn header(&self, cfg: &BufferConfig) -> FileHeader {
        FileHeader {
            magic: MAGIC,
            abi_major: ABI_MAJOR,
            abi_minor: ABI_MINOR,
            word_size: 8,
            endianness: NATIVE_ENDIAN,
            mode: cfg.mode as u8,
            header_size: cfg.header_size,
            num_subbuf: cfg.num_subbuf,
            subbuf_size: cfg.subbuf_size,
            stream: cfg.stream,
            file_size: self.file_size as u64,
            ctrl_offset: self.ctrl as u64,
            subbuf_ctrl_offset: self.sb_ctrl as u64,
            subbuf_ctrl_stride: self.sb_stride as u64,
            id_table_offset: self.ids as u64,
            data_offset: self.data as u64,
            num_phys_subbuf: self.nphys as u32,
            cache_line: CACHE_LINE as u32,
            header_len: HEADER_LEN as u32,
        }
    }

    /// Validates a header read from a mapping of `map_len` bytes and returns the local
    /// geometry and configuration. Checks, in order: magic, endianness, word size, ABI
    /// major, mode, sizes, then that every region is aligned, in order, non-overlapping
    /// and inside both `file_size` and the mapping.
    pub fn from_header(h: &FileHeader, map_len: usize) -> Result<(Geometry, BufferConfig), LayoutError> {
        if h.magic != MAGIC {
            return Err(LayoutError::BadMagic);
        }
        if h.endianness != NATIVE_ENDIAN {
            return Err(LayoutError::Endianness { found: h.endianness });
        }
        if h.word_size != 8 {
            return Err(LayoutError::WordSize { found: h.word_size });
        }
        if h.abi_major != ABI_MAJOR {
            return Err(LayoutError::AbiMajor { found: h.abi_major, supported: ABI_MAJOR });
        }
        let mode = match h.mode {
            0 => Mode::Discard,
            1 => Mode::Overwrite,
            m => return Err(LayoutError::BadMode(m)),
        };
        let pos = check_sizes(h.subbuf_size, h.num_subbuf, h.header_size)?;
        let n = pos.num_subbuf();
        if u64::from(h.num_phys_subbuf) != n + 1 {
            return Err(LayoutError::Geometry("num_phys_subbuf must be num_subbuf + 1"));
        }
        let bad = LayoutError::Offsets;
        if (h.header_len as usize) < HEADER_LEN {
            return Err(bad("header_len too small"));
        }
        let misaligned = (h.ctrl_offset | h.subbuf_ctrl_offset | h.subbuf_ctrl_stride | h.id_table_offset | h.data_offset) & 7;
        if misaligned != 0 {
            return Err(bad("misaligned region offset"));
        }
        if h.ctrl_offset < u64::from(h.header_len) {
            return Err(bad("control block overlaps the header"));
        }
        let ctrl_end = h.ctrl_offset.checked_add(CTRL_LEN as u64).ok_or(bad("control block"))?;
        if h.subbuf_ctrl_offset < ctrl_end {
            return Err(bad("sub-buffer control overlaps the control block"));
        }
        if !(SB_USED as u64..=1 << 20).contains(&h.subbuf_ctrl_stride) {
            return Err(bad("sub-buffer control stride"));
        }
        let sb_end = h.subbuf_ctrl_stride.checked_mul(n).and_then(|l| l.checked_add(h.subbuf_ctrl_offset)).ok_or(bad("sub-buffer control"))?;
        if h.id_table_offset < sb_end {
            return Err(bad("id table overlaps sub-buffer control"));
        }
        let ids_end = h.id_table_offset.checked_add(8 * n).ok_or(bad("id table"))?;
        if h.data_offset < ids_end {
            return Err(bad("data overlaps the id table"));
        }
        let data_end = (n + 1).checked_mul(h.subbuf_size).and_then(|l| l.checked_add(h.data_offset)).ok_or(bad("data region"))?;
        if data_end > h.file_size {
            return Err(bad("data region past file_size"));
        }
        if h.file_size > map_len as u64 {
            return Err(LayoutError::TooSmall { needed: h.file_size, len: map_len as u64 });
        }
        let geo = Geometry {
            pos,
            header_size: u64::from(h.header_size),
            ctrl: h.ctrl_offset as usize,
            sb_ctrl: h.subbuf_ctrl_offset as usize,
            sb_stride: h.subbuf_ctrl_stride as usize,
            ids: h.id_table_offset as usize,
            data: h.data_offset as usize,
            nphys: (n + 1) as usize,
            file_size: h.file_size as usize,
        };
        let cfg = BufferConfig { subbuf_size: h.subbuf_size, num_subbuf: h.num_subbuf, mode, header_size: h.header_size, stream: h.stream };
        Ok((geo, cfg))
    }

    /// Offset of a control-block word (`CTRL_*`).
    #[inline]
    pub fn ctrl_word(&self, which: usize) -> usize {
        self.ctrl + which
    }

    /// Offset of a per-sub-buffer word (`SB_*`) of ring index `idx` (`< num_subbuf`).
    #[inline]
    pub fn sb_word(&self, idx: usize, which: usize) -> usize {
        self.sb_ctrl + idx * self.sb_stride + which
    }

    /// Offset of the id-table entry of ring index `idx`.
    #[inline]
    pub fn id_word(&self, idx: usize) -> usize {
        self.ids + idx * 8
    }

    /// Offset of byte `off` (`< subbuf_size`) of physical sub-buffer `phys` (`< nphys`).
    #[inline]
    pub fn data_at(&self, phys: usize, off: u64) -> usize {
        self.data + phys * self.pos.subbuf_size() as usize + off as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> BufferConfig {
        BufferConfig {
            subbuf_size: 4096,
            num_subbuf: 4,
            mode: Mode::Discard,
            header_size: 64,
            stream: StreamIdentity { uuid: [7; 16], stream_id: 3, cpu: 1, stream_instance_id: 9 },
        }
    }

    #[test]
    fn header_roundtrip_and_validate() {
        let c = cfg();
        let g = Geometry::for_config(&c).unwrap();
        let h = g.header(&c);
        let h2 = FileHeader::from_bytes(&h.to_bytes());
        assert_eq!(h, h2);
        let (g2, c2) = Geometry::from_header(&h2, g.file_size).unwrap();
        assert_eq!(g, g2);
        assert_eq!(c, c2);
        assert_eq!(g.data % 4096, 0);
        assert_eq!(g.file_size, g.data + 5 * 4096);
        assert!(matches!(Geometry::from_header(&h2, g.file_size - 1), Err(LayoutError::TooSmall { .. })));
    }

    #[test]
    fn bad_geometry() {
        let mut c = cfg();
        c.subbuf_size = 3000;
        assert!(Geometry::for_config(&c).is_err());
        let mut c = cfg();
        c.num_subbuf = 1;
        assert!(Geometry::for_config(&c).is_err());
        let mut c = cfg();
        c.header_size = 2049;
        assert!(Geometry::for_config(&c).is_err());
    }

    #[test]
    fn overlapping_offsets_refused() {
        let c = cfg();
        let g = Geometry::for_config(&c).unwrap();
        let mut h = g.header(&c);
        h.data_offset = h.id_table_offset;
        assert!(matches!(Geometry::from_header(&h, g.file_size), Err(LayoutError::Offsets(_))));
        let mut h = g.header(&c);
        h.ctrl_offset = 8;
        assert!(Geometry::from_header(&h, g.file_size).is_err());
        let mut h = g.header(&c);
        h.abi_major = 2;
        assert!(matches!(Geometry::from_header(&h, g.file_size), Err(LayoutError::AbiMajor { .. })));
    }
}
