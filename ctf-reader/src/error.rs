//! Errors of metadata reading and stream decoding. Every error names the file and the byte
//! offset (or metadata line) where it was found, so a broken trace can be located.

use std::path::PathBuf;

/// Where and why metadata could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// A TSDL syntax error.
    #[error("{path}: line {line}: {msg}")]
    Syntax {
        /// Metadata file.
        path: PathBuf,
        /// 1-based line in the (depacketized) metadata text.
        line: u32,
        /// What was expected.
        msg: String,
    },
    /// A packetized-metadata framing error.
    #[error("{path}: offset {offset}: {msg}")]
    Packet {
        /// Metadata file.
        path: PathBuf,
        /// Byte offset of the bad packet header.
        offset: u64,
        /// What is wrong.
        msg: String,
    },
    /// A semantic error (unknown type, bad path, unsupported size...).
    #[error("{path}: {msg}")]
    Semantic {
        /// Metadata file.
        path: PathBuf,
        /// What is wrong, with the declaration it concerns.
        msg: String,
    },
    /// Reading the file failed.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// OS error.
        source: std::io::Error,
    },
}

/// Why a stream could not be decoded further.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Metadata error.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    /// Reading a stream or directory failed.
    #[error("{path}: {source}")]
    Io {
        /// File or directory.
        path: PathBuf,
        /// OS error.
        source: std::io::Error,
    },
    /// Bad data in a stream file.
    #[error("{path}: offset {offset}: {msg}")]
    Decode {
        /// Stream file.
        path: PathBuf,
        /// Byte offset in the file where decoding failed (the packet start plus the bit
        /// position, rounded down).
        offset: u64,
        /// What is wrong.
        msg: String,
    },
    /// A clock value that does not fit 64-bit signed nanoseconds from origin (babeltrace2:
    /// "Cannot convert clock cycles to nanoseconds from origin").
    #[error("{}clock `{clock}`: cycles {cycles} with offset {offset_s} s + {offset_cycles} cycles at {freq} Hz overflow 64-bit nanoseconds from origin", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    ClockOverflow {
        /// The metadata file (a clock's offset alone overflows) or the stream file (an
        /// event's time does), once known.
        path: Option<PathBuf>,
        /// Clock class name.
        clock: String,
        /// Cycles value.
        cycles: u64,
        /// Clock offset, seconds.
        offset_s: i64,
        /// Clock offset, cycles.
        offset_cycles: u64,
        /// Frequency.
        freq: u64,
    },
}

impl Error {
    /// The error with `path` as its file, where it names none yet (a clock's overflow).
    pub(crate) fn in_file(self, path: &std::path::Path) -> Error {
        match self {
            Error::ClockOverflow { path: None, clock, cycles, offset_s, offset_cycles, freq } => {
                Error::ClockOverflow { path: Some(path.to_owned()), clock, cycles, offset_s, offset_cycles, freq }
            }
            e => e,
        }
    }
}

/// A decoding failure inside a packet, before the file and offset are attached.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DecodeFault {
    /// Bit position in the packet.
    pub bit: u64,
    /// What is wrong.
    pub msg: String,
}

impl DecodeFault {
    pub(crate) fn new(bit: u64, msg: impl Into<String>) -> Self {
        DecodeFault { bit, msg: msg.into() }
    }
}
