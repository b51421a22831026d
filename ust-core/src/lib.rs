//! The small, stable core that the `ust` runtime (inside traced applications) and
//! `ust-consumerd` (the daemon) share, in the spirit of `tracing-core`: levels, static event
//! descriptions and their CTF field types, the CTF packet and event-header layout, the trace
//! clock, the socket directory and the application ↔ daemon registration protocol.
//!
//! Nothing here allocates on a path an event takes; the protocol and description types
//! allocate only at registration.

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

/// This crate's version (`Cargo.toml`), for compatibility checks between copies linked
/// into one process.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub mod clock;
pub mod context;
pub mod cpus;
pub mod event;
pub mod event_header;
pub mod filter;
pub mod level;
pub mod packet;
pub mod protocol;
pub mod rundir;
pub mod runtime_threads;

pub use event::{fixed_layout, valid_media_type, DynamicTag, EnumMapping, EventDesc, FieldDesc, FieldType, IntegerType};
pub use level::Level;

/// Major version of the application ↔ daemon ABI (registration protocol and buffer
/// layout). A daemon refuses an application with another major version.
pub const ABI_MAJOR: u16 = 1;
/// Minor version of the ABI: additions that older peers can ignore. 2: the `ip` context
/// ([`context::ContextType::Ip`]), which the daemon grants only to runtimes of minor 2 or
/// later (an older one could not read the channel grant). 3: the `span_id` context, granted
/// likewise ([`context::ContextType::since_minor`]). 4: [`protocol::DaemonMessage::Statedump`]
/// (`ust regenerate statedump`), sent only to runtimes of minor 4 or later. 5: per-UID
/// channels, whose records take daemon-assigned ids ([`protocol::ChannelGrant::shared_ids`],
/// [`protocol::ChannelIds`]), granted only to runtimes of minor 5 or later (an older one
/// would write its own ids into buffers other processes share). 6: BLOB fields
/// ([`event::FieldType::Blob`]) in event descriptions; a daemon of minor 6 reads the
/// descriptions of every older runtime unchanged. 7: channels of more than 253 buffers
/// ([`protocol::DaemonMessage::MoreFds`]); a daemon accepts more than 253 CPUs only from
/// runtimes of minor 7 or later. 8: map slots ([`protocol::MapGrant`]: LTTng 2.16's
/// counter maps), granted only to runtimes of minor 8 or later.
pub const ABI_MINOR: u16 = 8;

/// First [`ABI_MINOR`] whose runtimes take map slots ([`protocol::ChannelGrant::map`]).
pub const MAPS_SINCE_MINOR: u16 = 8;

/// First [`ABI_MINOR`] whose runtimes take [`protocol::DaemonMessage::MoreFds`].
pub const MORE_FDS_SINCE_MINOR: u16 = 7;
