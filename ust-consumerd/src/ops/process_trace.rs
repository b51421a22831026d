//! Every stream of one process in one session, and the directory they live in: creating
//! them when a process is attached to a session (trace directory, metadata, one buffer per
//! CPU per channel, stream and index files), and rewriting the metadata when the process
//! registers more events.
//!
//! The daemon creates every buffer (docs/DESIGN.md#buffers), with [`ringbuffer::shm`]:
//! a sealed, fully backed `memfd`, or with `--shm-path` a backed file under the session's
//! shm directory next to the plain-text metadata, [`ust_ctf::held::EVENTS_FILE`] and
//! [`ust_ctf::held::CONTEXTS_FILE`], for
//! `ust crash-dump`.
//! The descriptor goes to the application; the daemon keeps its own mapping so that it can
//! flush and drain after the application died.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ust_core::clock::TraceClock;
use ust_core::EventDesc;
use ust_ctf::outdir::TraceDir;

use crate::model::session::Session;
use crate::ops::relay::RelayOutput;
use crate::ops::trace::{
    announce_to_relay, io, make_streams, render_trace_metadata, session_dir, shm_set_dir, write_shm_set, EventTables, ProcessTrace, SetupError, StreamsOf,
};

/// What [`create_process_trace`] needs to know about the process.
#[derive(Debug, Clone)]
pub struct ProcessInfo<'a> {
    /// Process id.
    pub pid: i32,
    /// Process name.
    pub procname: &'a str,
    /// Possible CPUs (buffers per channel).
    pub ncpus: u32,
    /// Registration time (seconds since the Epoch), for the directory name.
    pub registered: i64,
    /// Registered events.
    pub events: &'a [EventDesc],
    /// The trace clock's TSC parameters, `None` for `CLOCK_MONOTONIC`.
    pub tsc: Option<ust_core::clock::TscParams>,
}

/// Creates the trace directory, writes the metadata (complete before any packet), and
/// allocates one buffer per CPU per channel of `session` with its stream and index files.
/// `next_instance` hands out stream instance ids. Returns the trace and, per channel, the
/// buffer descriptors to send (CPU 0 first).
///
/// # Errors
/// [`SetupError`] for the first failure; the trace directory is then removed.
pub fn create_process_trace(
    session: &Session,
    relay: Option<&Arc<RelayOutput>>,
    p: &ProcessInfo<'_>,
    next_instance: &mut u64,
    tables: &mut EventTables,
) -> Result<(ProcessTrace, Vec<Vec<OwnedFd>>), SetupError> {
    let want = ust_ctf::process_dir(&session.output, p.procname, p.pid, &ust_ctf::datetime::stamp_at(p.registered));
    // A snapshot session writes nothing as it runs: its trace directories are made by
    // each snapshot (`crate::ops::snapshot`); a network session's are made by the relay daemon.
    let (dir, out) = if !session.snapshot && relay.is_none() {
        let (d, out) = new_trace_dir(session, &want)?;
        (d, Some(out))
    } else {
        (want, None)
    };
    let r = fill_process_trace(session, relay, p, next_instance, tables, dir, out.clone());
    if r.is_err() {
        // No half-made trace left behind for readers to trip on (metadata without streams,
        // a stream file without its index): the directory is new and ours. The same for
        // the buffer files made before the failure (backed files hold real memory).
        if let Some(out) = &out {
            let _ = out.remove_dir_all();
        }
        if let Some(base) = &session.shm_dir {
            let _ = std::fs::remove_dir_all(ust_ctf::process_dir(base, p.procname, p.pid, &ust_ctf::datetime::stamp_at(p.registered)));
        }
    }
    r
}

fn fill_process_trace(
    session: &Session,
    relay: Option<&Arc<RelayOutput>>,
    p: &ProcessInfo<'_>,
    next_instance: &mut u64,
    tables: &mut EventTables,
    dir: PathBuf,
    out: Option<TraceDir>,
) -> Result<(ProcessTrace, Vec<Vec<OwnedFd>>), SetupError> {
    let uuid = *uuid::Uuid::new_v4().as_bytes();
    let text = render_metadata(session, p, uuid);
    let clock = p.tsc.map_or(TraceClock::Monotonic, TraceClock::Tsc);
    let (relay_meta, mut relay_streams) = announce_to_relay(session, relay, p.ncpus, &relay_trace_path(&dir), &text)?;
    if let Some(out) = &out {
        ust_ctf::metadata::write_atomically(out, &text).map_err(io(format!("writing {}/metadata", dir.display())))?;
    }
    let shm_dir = match &session.shm_dir {
        None => None,
        Some(base) => {
            let d = ust_ctf::process_dir(base, p.procname, p.pid, &ust_ctf::datetime::stamp_at(p.registered));
            let set = shm_set_dir(base, &d)?;
            let sizes: Vec<usize> = session.channels.iter().map(|c| ust_core::context::block_size(&c.contexts)).collect();
            write_shm_set(&set, &text, p.events, &sizes)?;
            Some(d)
        }
    };
    let events = tables.share(p.events);
    let of = StreamsOf {
        session,
        out: out.as_ref(),
        uuid,
        ncpus: p.ncpus,
        events: events.clone(),
        clock,
        shm_dir: shm_dir.as_deref(),
        memfd_prefix: format!("ust-{}", p.pid),
        deaths: None,
    };
    let (streams, fds) = make_streams(&of, next_instance, &mut relay_streams)?;
    let trace = ProcessTrace {
        pid: p.pid,
        procname: p.procname.to_string(),
        dir,
        out,
        metadata: text,
        post_mortem: None,
        retained: false,
        uuid,
        slots: vec![None; session.channels.len()],
        streams,
        events: events.clone(),
        context_sizes: session.channels.iter().map(|c| ust_core::context::block_size(&c.contexts)).collect(),
        tsc: p.tsc,
        gone: false,
        archived: false,
        shm_dir,
        relay: relay_meta,
        shared: None,
    };
    Ok((trace, fds))
}

/// The relay stream path of the trace whose local directory would be `dir`:
/// `ust/pid/<procname>-<pid>-<stamp>`, relative to the session on the relay daemon.
fn relay_trace_path(dir: &Path) -> String {
    let leaf = dir.file_name().map(|l| l.to_string_lossy().into_owned()).unwrap_or_default();
    format!("ust/pid/{leaf}")
}

/// Creates the directory of a new process trace at `want` (under the session's output
/// directory, through it: [`TraceDir::new_dir`]), or, when it exists (the same process
/// registered again within the same second: a reconnection, or a reused pid), at
/// `want-1`, `want-2`, …, so that a trace never truncates another's files.
fn new_trace_dir(session: &Session, want: &Path) -> Result<(PathBuf, TraceDir), SetupError> {
    let parent = want.parent().unwrap_or(want);
    let creating = |what: &Path| io(format!("creating {}", what.display()));
    let parent_dir = session_dir(session, parent).map_err(creating(parent))?;
    let leaf = want.file_name().unwrap_or_default().to_string_lossy();
    for n in 0u32..1000 {
        let name = if n == 0 { leaf.to_string() } else { format!("{leaf}-{n}") };
        let dir = parent.join(&name);
        match parent_dir.new_dir(&name, 0o750) {
            Ok(out) => return Ok((dir, out)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(creating(&dir)(e)),
        }
    }
    Err(SetupError::Io { what: format!("creating {}", want.display()), source: std::io::ErrorKind::AlreadyExists.into() })
}

/// The TSDL metadata of process `p`'s trace (UUID `uuid`) in `session`: its channels and
/// contexts, its events, the session's clock offset and the process's trace clock (a
/// network session sends the same text to the relay daemon).
pub fn render_metadata(session: &Session, p: &ProcessInfo<'_>, uuid: [u8; 16]) -> String {
    render_trace_metadata(session, uuid, (p.procname, p.pid), None, p.events, p.tsc)
}

/// Writes (or rewrites) the metadata of process `p`'s trace in `dir` for `session`: temporary
/// file, then rename, so a reader never sees half of it. Rewritten when the process
/// registers tracepoints late ([`ust_core::protocol::AppMessage::RegisterEvents`]), before
/// any of them is enabled.
///
/// # Errors
/// The I/O error.
pub fn write_metadata(session: &Session, p: &ProcessInfo<'_>, dir: &TraceDir, uuid: [u8; 16]) -> std::io::Result<()> {
    ust_ctf::metadata::write_atomically(dir, &render_metadata(session, p, uuid))
}
