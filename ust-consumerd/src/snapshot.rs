//! Snapshots and post-mortem dumps of snapshot (flight-recorder) sessions, LTTng's
//! `lttng snapshot record` and what LTTng leaves to `lttng-crash`.
//!
//! A snapshot session's channels are in overwrite mode by default and have no live reader:
//! nothing is written while it runs. `ust snapshot record` copies what every buffer of
//! every process of the session holds, without consuming it and without stopping tracing
//! ([`ust_ctf::held::copy_held_packets`]: [`ringbuffer::Buffer::snapshot_packet`] swaps
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

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ust_core::EventDesc;
use ust_ctl::protocol::SnapshotReport;

use crate::state::Daemon;
use crate::stream::Stream;
use ust_ctf::held::{append_packet, copy_held_packets, HeldCopy};
use ust_ctf::index::IndexFile;
use ust_ctf::outdir::TraceDir;
use ust_ctf::stream::StreamFile;

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

/// Writes one process's trace into `parent`'s `rel` (created through it, as the session's
/// owner: [`TraceDir`]): metadata first, then for every stream the packets its buffer
/// holds, at most `max_packets` (the newest) per stream.
fn write_process(src: &Source, parent: &TraceDir, rel: &str, max_packets: Option<usize>, report: &mut SnapshotReport) -> Result<(), String> {
    let path = parent.path().join(rel);
    let dir = &parent.dir(rel, 0o750).map_err(|e| format!("creating {}: {e}", path.display()))?;
    ust_ctf::metadata::write_atomically(dir, &src.metadata).map_err(|e| format!("writing {}/metadata: {e}", path.display()))?;
    for s in &src.streams {
        let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
        if s.finished || s.broken {
            continue;
        }
        // Close the packet being filled so the newest records are in (a reader-side switch,
        // as LTTng's snapshot does); a dead process's packets are closed once and for all.
        s.flush();
        if !s.shm_intact() {
            continue;
        }
        let Some(buffer) = s.buffer() else { continue };
        let name = ust_ctf::stream_file_name(&s.channel, s.cpu);
        let mut file = StreamFile::create(dir, &name).map_err(|e| format!("creating {}/{name}: {e}", path.display()))?;
        let mut index = IndexFile::create(dir, &name).map_err(|e| format!("creating {}/index/{name}.idx: {e}", path.display()))?;
        let mut held = HeldCopy::new(&s.identity, &src.events).with_context_size(s.context_size);
        copy_held_packets(buffer, &mut held, src.dead, max_packets, &mut |info, packet| {
            append_packet(&mut file, &mut index, info, packet).map_err(|e| format!("{}: {e}", file.path().display()))
        })?;
        report.packets += held.report.packets;
        report.bytes += held.report.bytes;
        report.recovered_packets += held.report.recovered;
        report.incomplete += held.report.incomplete;
    }
    report.processes += 1;
    Ok(())
}

pub(crate) fn source(t: &crate::process_trace::ProcessTrace, output: &Path) -> Source {
    let events: Arc<[EventDesc]> = t.events.clone();
    Source { rel: crate::uid_trace::rel_dir(t, output), metadata: t.metadata.clone(), streams: t.streams.clone(), events, dead: t.gone }
}

/// `ust snapshot record`: writes what every buffer of session `name` holds to
/// `<output>/snapshot-<N>-<YYYYmmdd-HHMMSS>/ust/pid/...`, tracing going on. `max_size`
/// bounds the total bytes (LTTng's `--max-size`): it is split evenly between the streams
/// and each keeps its newest packets that fit.
///
/// # Errors
/// A message when the session is not a snapshot session, is not started, `max_size` is
/// smaller than one sub-buffer per stream, or writing fails.
pub fn record(daemon: &Daemon, name: &str, max_size: Option<u64>) -> Result<SnapshotReport, String> {
    // A snapshot output on a relay daemon (`snapshot add-output URL`) takes it there.
    let url = daemon.lock().sessions.get(name).and_then(|s| s.session.snapshot_url.clone());
    if url.is_some() {
        return crate::relay::snapshot::record(daemon, name, max_size, url);
    }
    let (n, sources, max_subbuf) = begin(daemon, name)?;
    let (output, out) = daemon.lock().sessions.get(name).map(|s| (s.session.output.clone(), s.session.out.clone())).unwrap_or_default();
    let snap = format!("snapshot-{n}-{}", ust_ctf::datetime::stamp());
    let dir = output.join(&snap);
    let max_packets = packets_per_stream(&sources, max_size, max_subbuf)?;
    let mut report = SnapshotReport { dir: dir.clone(), ..SnapshotReport::default() };
    let out = out.ok_or_else(|| format!("session {name} has no output directory"))?;
    let sdir = out.dir(&snap, 0o750).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for src in &sources {
        write_process(src, &sdir, &src.rel.to_string_lossy(), max_packets, &mut report)?;
    }
    crate::log!(
        "session {name}: snapshot of {} process(es) written to {} ({} packets, {} bytes)",
        report.processes,
        dir.display(),
        report.packets,
        report.bytes
    );
    Ok(report)
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

/// A process of a snapshot session died without a normal exit: writes its flight-recorder
/// content to `<output>/post-mortem/<procname>-<pid>-<stamp of death>/` for every snapshot
/// session that traced it. Returns the directories written, with the session names.
pub fn post_mortem(daemon: &Daemon, app_id: u64, death_stamp: &str) -> Vec<(String, PathBuf)> {
    let jobs: Vec<(String, PathBuf, TraceDir, String, Source)> = {
        let st = daemon.lock();
        st.sessions
            .values()
            .filter(|ss| ss.session.snapshot)
            .filter_map(|ss| {
                let t = ss.traces.get(&app_id)?;
                let dir = ust_ctf::process_dir(&ss.session.output.join("post-mortem"), &t.procname, t.pid, death_stamp);
                // `process_dir` puts `ust/pid/` in between; the contract has none here.
                let rel = format!("post-mortem/{}", dir.file_name()?.to_string_lossy());
                let dir = ss.session.output.join(&rel);
                let mut src = source(t, &ss.session.output);
                src.dead = true;
                Some((ss.session.name.clone(), dir, ss.session.out.clone()?, rel, src))
            })
            .collect()
    };
    let mut done = Vec::new();
    for (session, dir, out, rel, src) in jobs {
        let mut report = SnapshotReport { dir: dir.clone(), ..SnapshotReport::default() };
        match write_process(&src, &out, &rel, None, &mut report) {
            Ok(()) => {
                crate::log!(
                    "session {session}: process died abnormally (no normal exit); post-mortem trace written to {} ({} packets, {} rebuilt from torn sub-buffers)",
                    dir.display(),
                    report.packets,
                    report.recovered_packets
                );
                done.push((session, dir));
            }
            Err(e) => crate::log!("session {session}: post-mortem trace to {} failed: {e}", dir.display()),
        }
    }
    done
}
