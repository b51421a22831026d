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
//! Modules, one job each:
//! - [`session`]: sessions, channels, enablers and the enable masks they yield.
//! - [`control`]: the daemon's handling of each control request.
//! - [`apps`]: application connections: registration, death watch, messages to the app.
//! - [`process_trace`]: a process's trace in a session: directory, metadata, buffers, streams.
//! - [`uid_trace`]: per-UID buffers (`--buffers-uid`): one trace per user, shared by its processes.
//! - [`registry`]: the event registry of a per-UID trace (ids assigned by the daemon).
//! - [`stream`]: one stream: its buffer, its files, and the drain's write policy.
//! - [`dead_writers`]: completing what a dead writer left open in a shared (per-UID) buffer.
//! - [`drain`]: the read and switch timers that move packets from buffers to stream files.
//! - [`state`]: the [`state::Daemon`] handle every worker shares, and the state behind its lock.
//! - [`fds`]: the descriptor budget.
//! - [`memory`]: keeping the daemon's heap bounded by what is live.
//! - [`output`]: checks that a session's output and shm directory can keep what it records.
//! - [`relay`]: streaming a session to lttng-relayd (network and live sessions).
//! - [`peers`]: who may use the `app` and `ctl` sockets.
//! - [`kview`]: root's daemon as the kernel broker of ordinary users (the `kview` socket).
//! - [`daemon`]: wiring of the daemon process (sockets, pid file, daemonizing, shutdown).
//! - [`sigbus`]: surviving SIGBUS on `--shm-path` buffer files.
//! - [`snapshot`]: `ust snapshot record` and post-mortem dumps of snapshot sessions.
//! - [`clear`]: `ust clear`: discard what a session recorded so far.
//! - [`regenerate`]: `ust regenerate metadata|statedump`.
//! - [`triggers`]: `ust add-trigger`: notifier buffers in the processes, the watch that fires them.
//! - [`mod@log`]: the daemon's log.

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod apps;
pub mod clear;
pub mod control;
pub mod daemon;
pub mod dead_writers;
pub mod drain;
pub mod fds;
pub mod kview;
pub mod log;
pub mod memory;
pub mod output;
pub mod peers;
pub mod process_trace;
pub mod regenerate;
pub mod registry;
pub mod relay;
pub mod session;
pub mod sigbus;
pub mod snapshot;
pub mod state;
pub mod stream;
pub mod triggers;
pub mod uid_trace;
