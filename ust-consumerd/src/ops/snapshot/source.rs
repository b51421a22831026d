//! What a snapshot copies: each trace of the session as a `Source` (its directory in
//! the snapshot, metadata, streams, events), taken under the state lock, and the
//! `--max-size` budget per stream. Shared by local snapshots ([`super::dump`]) and
//! snapshots sent to a relay daemon ([`super::relay`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ust_core::EventDesc;

use crate::ops::state::Daemon;
use crate::ops::stream::Stream;
use crate::ops::trace::ProcessTrace;

/// One process's trace as a snapshot needs it.
pub(crate) struct Source {
    /// The trace's directory relative to the session output (`ust/pid/<proc dir>`,
    /// `ust/uid/<uid>/64-bit`).
    pub(crate) rel: PathBuf,
    /// Its metadata text.
    pub(crate) metadata: String,
    /// Its streams.
    pub(crate) streams: Vec<Arc<Mutex<Stream>>>,
    /// Its events (torn-event recovery sizes records with them).
    pub(crate) events: Arc<[EventDesc]>,
    /// The process is gone.
    pub(crate) dead: bool,
}

pub(crate) fn source(t: &ProcessTrace, output: &Path) -> Source {
    let events: Arc<[EventDesc]> = t.events.clone();
    Source { rel: crate::ops::trace::rel_dir(t, output), metadata: t.metadata.clone(), streams: t.streams.clone(), events, dead: t.gone }
}

/// `--max-size` as a number of packets per stream: the total split evenly between the
/// streams of `sources`, in sub-buffers of up to `max_subbuf` bytes.
///
/// # Errors
/// Less than one sub-buffer per stream.
pub(crate) fn packets_per_stream(sources: &[Source], max_size: Option<u64>, max_subbuf: u64) -> Result<Option<usize>, String> {
    let nstreams: usize = sources.iter().map(|s| s.streams.len()).sum();
    let Some(m) = max_size else { return Ok(None) };
    let per_stream = m / (nstreams.max(1) as u64);
    let packets = per_stream / max_subbuf.max(1);
    if packets == 0 {
        return Err(format!(
            "--max-size {m} is too small: {nstreams} stream(s) of sub-buffers of up to {max_subbuf} bytes need at least {} bytes (one sub-buffer each)",
            max_subbuf * nstreams.max(1) as u64
        ));
    }
    Ok(Some(packets as usize))
}

/// What a snapshot of session `name` takes: checks it may be taken, counts it, and
/// returns its number, the sources and the largest sub-buffer size.
///
/// # Errors
/// No such session, not a snapshot session, or not started.
pub(crate) fn begin(daemon: &Daemon, name: &str) -> Result<(u32, Vec<Source>, u64), String> {
    let mut st = daemon.lock();
    let Some(ss) = st.sessions.get_mut(name) else { return Err(format!("no session named {name:?}")) };
    if !ss.session.snapshot {
        return Err(format!(
            "session {name} is not a snapshot session: create one with `ust create NAME --snapshot` (its traces are written as they are recorded)"
        ));
    }
    if !ss.session.started {
        return Err(format!("session {name} is not started: start it with `ust start` before taking a snapshot"));
    }
    ss.session.snapshots_taken += 1;
    let sources: Vec<Source> = ss.traces.values().filter(|t| !t.gone || t.retained).map(|t| source(t, &ss.session.output)).collect();
    let max_subbuf = ss.session.channels.iter().map(|c| c.config.subbuf_size).max().unwrap_or(0);
    Ok((ss.session.snapshots_taken, sources, max_subbuf))
}
