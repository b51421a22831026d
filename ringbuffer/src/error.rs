//! Errors of the ring buffer: formatting/opening a buffer file, and reading it.

/// Why a buffer file could not be formatted ([`Buffer::create`](crate::Buffer::create)) or
/// opened ([`Buffer::open`](crate::Buffer::open)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The mapping is shorter than the file needs (`needed` and `len` in bytes).
    #[error("buffer mapping too small: {len} bytes, need {needed}")]
    TooSmall {
        /// Bytes the layout needs.
        needed: u64,
        /// Bytes mapped.
        len: u64,
    },
    /// The file does not start with [`layout::MAGIC`](crate::layout::MAGIC).
    #[error("not a ust ring-buffer file (bad magic)")]
    BadMagic,
    /// The file was written on a machine of the other byte order.
    #[error("buffer file has foreign endianness (tag {found})")]
    Endianness {
        /// The endianness tag found (1 little, 2 big).
        found: u8,
    },
    /// The file was written by a process with another word size.
    #[error("buffer file has word size {found} bytes, this process uses 8")]
    WordSize {
        /// Word size found, in bytes.
        found: u8,
    },
    /// The file's ABI major version is not the one this crate implements.
    #[error("buffer file ABI major version {found}, this build supports {supported}")]
    AbiMajor {
        /// Major version found in the file.
        found: u16,
        /// Major version this crate implements.
        supported: u16,
    },
    /// Unknown mode byte.
    #[error("unknown buffer mode {0}")]
    BadMode(u8),
    /// Sub-buffer size, count or header size out of range (the message says which).
    #[error("invalid buffer geometry: {0}")]
    Geometry(&'static str),
    /// An offset in the file header is misaligned, overlaps another region or lies
    /// outside the file (the message says which).
    #[error("invalid buffer layout: {0}")]
    Offsets(&'static str),
}

/// Why the reader could not get, copy or release a sub-buffer. Every one of these means
/// the shared memory holds values the algorithm cannot produce (a scribbling or hostile
/// application), or the reader API was misused; the caller reports it and skips the buffer
/// (or the packet).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// `consumed` is not at a sub-buffer start, or `write` and `consumed` are further
    /// apart than the ring (or `write` is behind `consumed`).
    #[error("corrupted positions: consumed {consumed}, write {write}")]
    Position {
        /// Consumed position read from shared memory.
        consumed: u64,
        /// Write position read from shared memory.
        write: u64,
    },
    /// A sub-buffer id in the id table does not name a physical sub-buffer (or, in
    /// discard mode, is not the identity).
    #[error("corrupted sub-buffer id {id:#x} at index {index}")]
    Id {
        /// Index in the id table.
        index: usize,
        /// Id found.
        id: u64,
    },
    /// The recorded content end of a delivered sub-buffer lies outside it.
    #[error("corrupted content size {content} (sub-buffer size {subbuf_size})")]
    ContentSize {
        /// Content size computed, in bytes.
        content: u64,
        /// Sub-buffer size, in bytes.
        subbuf_size: u64,
    },
    /// The packet sequence number stored for a sub-buffer is not the one its position
    /// implies.
    #[error("corrupted packet sequence number {found}, expected {expected}")]
    PacketSeq {
        /// Sequence number the position implies.
        expected: u64,
        /// Sequence number found.
        found: u64,
    },
    /// The [`Subbuf`](crate::Subbuf) is not the one at the consumed position any more
    /// (released twice, from another buffer, or `consumed` was changed behind the reader).
    #[error("sub-buffer handle is stale (consumed moved to {consumed})")]
    Stale {
        /// Consumed position now.
        consumed: u64,
    },
    /// A sub-buffer index passed to a recovery helper is out of range.
    #[error("sub-buffer index {0} out of range")]
    Index(u64),
}
