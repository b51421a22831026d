//! What the daemon does with the model, writing files: its state and traces, streams,
//! snapshots, clear, regenerate, rotate, the relay output. Nothing here runs a thread of
//! its own: the servers ([`crate::servers`]) call in.
//!
//! - [`state`]: the [`state::Daemon`] handle every worker shares, and the state behind its lock.
//! - [`attach`]: attaching a registered process to a session (per PID or per UID).
//! - [`process_life`]: a process's late events and its death, applied to its traces.
//! - [`sync`]: masks pushed and `Sync` round trips with the processes of a session.
//! - [`trace`]: a trace (per process or per user) and what making one takes.
//! - [`process_trace`]: a process's trace in a session: directory, metadata, buffers, streams.
//! - [`uid_trace`]: per-UID buffers (`--buffers-uid`): one trace per user, shared by its processes.
//! - [`stream`]: one stream: its buffer, where its packets go, and the drain's write policy.
//! - [`dead_writers`]: completing what a dead writer left open in a shared (per-UID) buffer.
//! - [`snapshot`]: `ust snapshot record` and post-mortem dumps of snapshot sessions.
//! - [`rotate`]: `ust rotate`: archiving a session's trace chunk.
//! - [`clear`]: `ust clear`: discard what a session recorded so far.
//! - [`regenerate`]: `ust regenerate metadata|statedump`.
//! - [`reclaim`]: `ust reclaim-memory`, automatic reclaim policies, channels' memory in `ust list`.
//! - [`triggers`]: `ust add-trigger`: the triggers and the notifier buffers of the processes.
//! - [`session_probes`]: a session's userspace probes, placed and recorded while it records.
//! - [`relay`]: streaming a session to lttng-relayd (network and live sessions).
//! - [`relay_session`]: the ends of a network session: data pending at `stop`, closing at `destroy`.
//! - [`output`]: a session's output directory, opened once (every file of the session is made
//!   through it), and the checks that it and the shm directory can keep what it records.
//! - [`fds`]: the descriptor budget.
//! - [`memory`]: keeping the daemon's heap bounded by what is live.
//! - [`sigbus`]: surviving SIGBUS on `--shm-path` buffer files.

pub mod attach;
pub mod clear;
pub mod dead_writers;
pub mod fds;
pub mod maps;
pub mod memory;
pub mod output;
pub mod process_life;
pub mod process_trace;
pub mod reclaim;
pub mod regenerate;
pub mod relay;
pub mod relay_session;
pub mod rotate;
pub mod session_probes;
pub mod sigbus;
pub mod snapshot;
pub mod state;
pub mod stream;
pub mod sync;
pub mod trace;
pub mod triggers;
pub mod uid_trace;
