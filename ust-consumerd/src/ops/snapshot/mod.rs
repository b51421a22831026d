//! Snapshots and post-mortem dumps of snapshot (flight-recorder) sessions, LTTng's
//! `lttng snapshot record` and what LTTng leaves to `lttng-crash`.
//!
//! A snapshot session's channels are in overwrite mode by default and have no live reader:
//! nothing is written while it runs. `ust snapshot record` copies what every buffer of
//! every process of the session holds, without consuming it and without stopping tracing
//! ([`ust_ctf::held::copy_held_packets`]: [`ringbuffer::Reader::snapshot_packet`] swaps
//! a packet out of the writers' reach while it copies it), into
//!
//! ```text
//! <output>/snapshot-<N>-<YYYYmmdd-HHMMSS>/ust/pid/<procname>-<pid>-<YYYYmmdd-HHMMSS>/
//!     metadata, <channel>_<cpu>, index/<channel>_<cpu>.idx
//! ```
//!
//! (N counts from 1 per session). When a process of a snapshot session goes away without
//! a normal exit (no `Exiting` message: SIGKILL, SIGSEGV, abort, `_exit`), the daemon
//! writes the same content at once to
//! `<output>/post-mortem/<procname>-<pid>-<YYYYmmdd-HHMMSS of death>/`, keeping the
//! committed prefix of sub-buffers its dead writers left incomplete (torn-event recovery),
//! and keeps the process's buffers so that later snapshots include it until the session is
//! destroyed.
//!
//! - [`source`]: what a snapshot copies, taken from the session's traces.
//! - [`dump`]: `ust snapshot record` and post-mortem dumps.
//! - [`relay`]: snapshots sent to a relay daemon.

pub mod dump;
pub mod relay;
pub mod source;
