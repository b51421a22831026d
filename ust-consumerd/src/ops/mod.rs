//! What the daemon does with the model, writing files: its state and traces, streams,
//! snapshots, clear, regenerate, rotate, the relay output.
//!
//! - [`state`]: the [`state::Daemon`] handle every worker shares, and the state behind its lock.
//! - [`process_trace`]: a process's trace in a session: directory, metadata, buffers, streams.
//! - [`uid_trace`]: per-UID buffers (`--buffers-uid`): one trace per user, shared by its processes.
//! - [`stream`]: one stream: its buffer, its files, and the drain's write policy.
//! - [`dead_writers`]: completing what a dead writer left open in a shared (per-UID) buffer.
//! - [`snapshot`]: `ust snapshot record` and post-mortem dumps of snapshot sessions.
//! - [`clear`]: `ust clear`: discard what a session recorded so far.
//! - [`regenerate`]: `ust regenerate metadata|statedump`.
//! - [`triggers`]: `ust add-trigger`: notifier buffers in the processes, the watch that fires them.
//! - [`relay`]: streaming a session to lttng-relayd (network and live sessions).
//! - [`output`]: checks that a session's output and shm directory can keep what it records.
//! - [`fds`]: the descriptor budget.
//! - [`memory`]: keeping the daemon's heap bounded by what is live.
//! - [`sigbus`]: surviving SIGBUS on `--shm-path` buffer files.

pub mod clear;
pub mod dead_writers;
pub mod fds;
pub mod memory;
pub mod output;
pub mod process_trace;
pub mod regenerate;
pub mod relay;
pub mod sigbus;
pub mod snapshot;
pub mod state;
pub mod stream;
pub mod triggers;
pub mod uid_trace;
