//! `ust-consumerd` (the per-user tracing daemon), the `ust` command line, and the CTF 1.8
//! writer, in the line of LTTng's `lttng-sessiond`/`lttng-consumerd` and `lttng`.
//!
//! ```text
//!  ust (cli) ──ctl socket, framed JSON (control)──> daemon ──> session (channels, enablers)
//!                                                     │
//!  traced app ──app socket (ust_core::protocol)──> apps ──> buffers (sealed memfds, per CPU)
//!                                                     │
//!                                   drain thread ─────┴──> ctf::{metadata, stream, index}
//! ```
//!
//! Modules, one job each:
//! - [`session`]: sessions, channels, enablers and the enable masks they yield.
//! - [`filter`]: the `--filter` language: parser and type check (CLI and daemon).
//! - [`control`]: the CLI ↔ daemon protocol and the daemon's handling of each request.
//! - [`apps`]: application connections: registration, death watch, messages to the app.
//! - [`buffers`]: per-CPU buffer allocation (memfd, seals, mapping) and the daemon's streams.
//! - [`drain`]: the read and switch timers that move packets from buffers to stream files.
//! - [`ctf`]: the CTF 1.8 writer (metadata, stream files, index files) and a record walker.
//! - [`daemon`]: wiring of the daemon process (sockets, pid file, daemonizing, shutdown).
//! - [`sigbus`]: surviving SIGBUS on `--shm-path` buffer files.
//! - [`snapshot`]: `ust snapshot record` and post-mortem dumps of snapshot sessions.
//! - [`cli`]: the `ust` command.
//! - [`kernel`]: kernel events from tracefs for `ust trace --kernel`, written as CTF.
//! - [`report`]: `ust report`: what the traced program waited for and what woke it.
//! - [`mod@log`] and [`datetime`]: the daemon's log and the timestamps used in names.

#![warn(missing_docs)]

pub mod apps;
pub mod buffers;
pub mod cli;
pub mod control;
pub mod ctf;
pub mod crash;
pub mod daemon;
pub mod datetime;
pub mod drain;
pub mod filter;
pub mod kernel;
pub mod log;
pub mod report;
pub mod session;
pub mod sigbus;
pub mod snapshot;
