//! A reader of CTF traces: CTF 1.8 (TSDL metadata, plain text or packetized, either byte
//! order) and CTF 2 (JSON text-sequence metadata), as written by LTTng (kernel and
//! user space), babeltrace's CTF writer, ust and other tracers.
//!
//! - [`CtfTrace::open`] reads `metadata` into a [`Trace`] model and compiles one decoder per
//!   root scope of every stream and event class ([`decode`]): no names or paths are looked
//!   at while decoding.
//! - Stream files are `mmap`ed; packets are found from the packet context's `packet_size`
//!   and `content_size` (checked against the file); index files are not needed.
//! - [`CtfTrace::stream`] iterates one stream; [`CtfTrace::messages`] and
//!   [`CtfTrace::messages_parallel`] merge all streams by time (a heap over per-stream
//!   cursors; in parallel mode each stream decodes on its own thread). Memory is bounded
//!   by the number of streams, not of events.
//! - Messages are events ([`EventRef`]: class, stream, packet, cycles and ns from origin,
//!   values as a [`Value`] tree per scope on demand, or as the decoded [`Slot`]s themselves
//!   for consumers that walk them beside the scope's type, with no allocation:
//!   [`EventRef::slots`]) and babeltrace2's discarded-events and discarded-packets notices
//!   ([`Discarded`]).
//! - Hostile input gives an [`Error`] naming the file and offset: no panic, bounded memory
//!   and recursion.
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

mod clock;
mod compiled;
mod ctf2;
pub mod decode;
mod error;
mod files;
mod merge;
mod metadata;
mod model;
mod reader;
mod roles;
mod stream;
mod trace;
mod tsdl;
mod value;

pub use clock::Clock;
pub use decode::Slot;
pub use error::{Error, MetadataError};
pub use merge::{Merged, Prepare};
pub use metadata::{depacketize, parse_metadata, read_metadata, METADATA_MAGIC};
pub use model::*;
pub use reader::{Discarded, EventRef, Message, StreamIter};
pub use stream::{PacketInfo, PACKET_MAGIC};
pub use trace::{CtfTrace, StreamFile};
pub use value::Value;
