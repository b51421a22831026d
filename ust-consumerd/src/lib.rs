//! `ust-consumerd`, the per-user tracing daemon, in the line of LTTng's
//! `lttng-sessiond`/`lttng-consumerd`.
//!
//! ```text
//!  ust (cli) ──ctl socket, ust_ctl::protocol──> control ──> session (channels, enablers)
//!                                                  │
//!  traced app ──app socket (ust_core::protocol)──> apps ──> buffers (sealed memfds, per CPU)
//!                                                  │
//!                                drain thread ─────┴──> ust_ctf::{metadata, stream, index}
//! ```
//!
//! Three layers, each a directory, each calling only the layers below it:
//! - [`model`]: what the user asked for and what registered, as data: sessions,
//!   channels, enablers, trackers, the per-UID event registry.
//! - [`ops`]: what the daemon does with it, writing files: the daemon's state and its
//!   traces (per process, per UID), streams and their files, snapshots, post-mortem dumps,
//!   clear, regenerate, rotate, the relay output.
//! - [`servers`]: the threads that take requests and run the timers: the control server,
//!   the app server, the kernel-view broker, the drain loop.
//!
//! [`daemon`] wires them into a process; [`mod@log`] is the daemon's log, used by all.

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod daemon;
pub mod log;
pub mod model;
pub mod ops;
pub mod servers;
