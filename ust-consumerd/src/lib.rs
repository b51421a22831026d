//! `ust-consumerd`, the per-user tracing daemon, in the line of LTTng's
//! `lttng-sessiond`/`lttng-consumerd`.
//!
//! ```text
//!  servers/ (threads)                ops/ (writes files)                 model/ (data)
//!  ust (cli) ─ctl─> control ───────> state, attach, sync, rotate, ──> session, enabler,
//!                                    snapshot, clear, regenerate         masks, app, registry
//!  traced app ─app─> apps ─────────> attach, process_life
//!  drain loop ─────> drain ────────> stream ──> ust_ctf::writer (stream file + index)
//!                                          └──> relay (lttng-relayd)
//!  trigger_watch, kview
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
//! Every file and directory `ops` makes goes through the session's output directory,
//! opened once ([`ops::output::open_output`]) as the user it belongs to: a
//! [`ust_ctf::outdir::TraceDir`], never followed through a symbolic link; stream and index
//! files are made by [`ust_ctf::writer::StreamWriter::create`].
//!
//! The daemon's state ([`ops::state`]) is in `ops`, not `model`: besides the model's data
//! it holds each session's traces, whose streams own mapped buffers and open files. What
//! is a pure function of the data, a process's enable masks, is [`model::masks`], which
//! the state only feeds.
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
