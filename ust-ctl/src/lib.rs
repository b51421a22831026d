//! `ust-ctl`: the control protocol both ends speak — the `ust` command and `ust-consumerd`
//! on the daemon's `ctl` socket — as types of its own, independent of the daemon's session
//! model, in the role of LTTng's `lttng-ctl` library.
//!
//! - [`protocol`]: requests, replies and the payloads they carry (framed JSON).
//! - [`config`]: channel settings and their limits, log-level filters, the process-id
//!   tracker, name rules.
//! - [`client`]: the connection the CLI (and tests) use.
//! - [`filter`]: the `--filter` language: parser and type check, run by the CLI before it
//!   sends a filter and by the daemon again when it receives one.
//! - [`url`]: LTTng's output URLs (`net://`, `tcp://`, `file://`) for streaming to a relay
//!   daemon.
//! - [`kview`]: the kernel-view requests an ordinary user's `ust trace --kernel` sends to
//!   root's daemon (the kernel broker) on its `kview` socket.
//! - [`maps`]: map channels (`add-map-channel`, `show-maps`, `export-maps`), key
//!   templates of `incr-map-value`.
//! - [`probes`]: a session's userspace-probe rules (`enable-event --userspace-probe`).
//! - [`session_xml`]: session configurations in LTTng's XML format (`save`, `load`).
//! - [`trackers`]: the user-id and group-id trackers (`track --vuid|--vgid`).
//! - [`trigger`]: triggers (`add-trigger`'s condition and actions, and its argument
//!   parser).

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod alloc;
pub mod client;
pub mod config;
pub mod filter;
pub mod kview;
pub mod maps;
pub mod probes;
pub mod protocol;
pub mod reclaim;
pub mod session_xml;
pub mod trackers;
pub mod trigger;
pub mod url;

pub use client::{Client, ClientError};
