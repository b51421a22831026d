//! The kernel-view protocol: an ordinary user's `ust trace --kernel` asks root's
//! `ust-consumerd` (the kernel broker) to record the kernel side of one command for them.
//!
//! Root's daemon listens on `kview` ([`KVIEW_SOCKET`]) in its socket directory
//! ([`system_rundir`]: `$UST_SYSTEM_RUNDIR`, else `/run/ust`), mode 0666: any user may send
//! these requests, and only these (the `ctl` socket stays root's and group `tracing`'s).
//! Frames are those of `ust_core::protocol` (JSON, descriptors as `SCM_RIGHTS`); the
//! daemon knows the requester from `SO_PEERCRED`, never from the messages.
//!
//! ```text
//! ust trace (user)                                   root's ust-consumerd
//!   Hello ─────────────────────────────────────────>  policy (--kernel-view)
//!         <────────────────────────── Ready | Refused
//!   fork; the child waits on a pipe
//!   Start { pid, probes } + fd of <output>/kernel (O_DIRECTORY) + fd per probe file
//!                                                 ─>  pid is the requester's child,
//!                                                      ptraceable by them; fd a directory
//!                                                      they own; each probe file theirs,
//!                                                      the symbol a function of it;
//!                                                      probes placed, instance on, state dump
//!         <────────────────────────── Started | Refused
//!   release the child: it execs CMD
//!   … CMD runs …
//!   Finish { traced_pid, clock_offset_ns } ─────────>  stop, write the rest, metadata
//!         <────────────────────────── Finished
//! ```
//!
//! A user's session with userspace probes (`ust enable-event --userspace-probe`) sends
//! `StartProbes { probes }` instead of `Start` (from the user's daemon, at `ust start`):
//! no pid, the hits of every task the user could ptrace, until `Finish` at `ust stop`.
//!
//! A connection that closes before `Finish` ends the recording the same way (what was
//! recorded is written). A daemon that dies mid-trace leaves the packets it wrote: the trace
//! is whole up to that moment.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Name of the socket in root's socket directory.
pub const KVIEW_SOCKET: &str = "kview";
/// Environment variable naming root's socket directory (tests; default `/run/ust`).
pub const ENV_SYSTEM_RUNDIR: &str = "UST_SYSTEM_RUNDIR";
/// Root's socket directory when [`ENV_SYSTEM_RUNDIR`] is not set.
pub const SYSTEM_RUNDIR: &str = "/run/ust";

/// Root's socket directory as other users see it: `$UST_SYSTEM_RUNDIR`, else `/run/ust`.
pub fn system_rundir() -> PathBuf {
    std::env::var_os(ENV_SYSTEM_RUNDIR).filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(SYSTEM_RUNDIR))
}

/// What the CLI sends.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum KviewRequest {
    /// May this user have a kernel view?
    Hello,
    /// Record for the requester's child `pid` (stopped before its exec), writing into the
    /// directory whose descriptor comes first with the message; with `probes`, dynamic
    /// probes, one descriptor each after the directory's (the file to probe, opened by the
    /// requester).
    Start {
        /// The child's pid.
        pid: i32,
        /// Dynamic probes to place (none from an older client).
        #[serde(default)]
        probes: Vec<ProbeRequest>,
    },
    /// Record dynamic probes alone, for a session of the requester's (`ust enable-event
    /// --userspace-probe`, sent by the user's own `ust-consumerd` at `ust start`): no
    /// traced command; the hits of every task the requester could ptrace, in the directory
    /// whose descriptor comes first, each probe's file descriptor after it (as `Start`'s).
    /// Answered `Started`; ended by `Finish` (at `ust stop`) or the connection's close.
    StartProbes {
        /// The probes (at least one).
        probes: Vec<ProbeRequest>,
    },
    /// The command ended: write the final metadata and stop.
    Finish {
        /// The traced command's pid (`env.traced_pid`).
        traced_pid: i32,
        /// The user-space traces' clock offset, so the traces merge; `None`: a fresh sample.
        clock_offset_ns: Option<i64>,
    },
}

/// A dynamic probe an ordinary user asks root's daemon for (`ust trace --userspace-probe`):
/// the daemon resolves `symbol` itself in the file whose descriptor comes with the
/// request, and places it only at that function's entry or return, with these fetch
/// arguments only if each is an argument register (or `$retval`) read as an integer.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProbeRequest {
    /// Event name.
    pub event: String,
    /// The file's path as the user gave it (messages only; the descriptor is what counts).
    pub path: String,
    /// The function: a demangled Rust path or a C symbol.
    pub symbol: String,
    /// A return probe.
    pub ret: bool,
    /// Fetch arguments `(name, fetch, type)`: `("count", "%si", "u64")`.
    pub args: Vec<(String, String, String)>,
}

/// What the daemon answers.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum KviewReply {
    /// `Hello` accepted.
    Ready,
    /// Refused, with the reason to print.
    Refused {
        /// Why.
        reason: String,
    },
    /// Recording: the child may exec.
    Started,
    /// Done.
    Finished {
        /// Events written per CTF name.
        counts: Vec<(String, u64)>,
        /// Events the kernel lost.
        lost: u64,
        /// An error while writing, if any (the trace is then whole up to it).
        error: Option<String>,
    },
}
