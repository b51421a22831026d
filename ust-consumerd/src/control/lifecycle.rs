//! A session's life: `start`, `stop` (masks off, `Sync`, flush, drain), rotation of its
//! chunks, and `destroy` (stop, `RemoveChannel`, the last drain, the report).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ust_core::protocol::DaemonMessage;
use ust_ctl::protocol::*;

use crate::state::{Daemon, SessionState, State, SyncState};
use crate::stream::{Stream, StreamStats};

use super::{resolve, Res};

/// Longest wait for `SyncDone` from the processes of a session at `stop`.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) fn start(daemon: &Daemon, session: Option<String>) -> Res<Payload> {
    // A network session: the relay daemon must still answer (one round trip, outside the
    // state lock); a failure here is recorded as the session's output error, checked below.
    let relay = {
        let st = daemon.lock();
        resolve(&st, &session).ok().and_then(|n| st.sessions.get(&n).and_then(|s| s.session.relay.clone()))
    };
    if let Some(r) = relay {
        r.probe();
    }
    let mut st = daemon.lock();
    let sname = resolve(&st, &session)?;
    let ss = st.sessions.get_mut(&sname).expect("resolved");
    if ss.session.started {
        return Err(format!("session {sname} is already started"));
    }
    if ss.session.channels.is_empty() {
        return Err(format!("session {sname} has no channel: enable an event (`ust enable-event -a`) or a channel first"));
    }
    // Nothing is lost silently: an output that stopped taking files since `create`, or a
    // --shm-path that cannot back one process's buffers, fails `start` itself.
    match &ss.session.relay {
        // The directory opened at `create`; opened again, by the same user, if it was
        // removed or replaced before anything of the session was written (a session that
        // ran keeps writing where its traces are).
        None => match ss.session.out.as_ref().filter(|o| ss.session.ever_started || o.replaced().is_none()) {
            Some(o) => crate::output::check_writable(o)?,
            None => {
                let owner = ss.session.out.as_ref().and_then(|o| o.owner());
                ss.session.out = Some(crate::output::open_output(&ss.session.output, owner)?);
            }
        },
        Some(r) if !r.is_up() => {
            return Err(ss.session.output_error.get().unwrap_or_else(|| format!("relay daemon at {}: connection closed", r.url)));
        }
        Some(_) => {}
    }
    crate::output::check_shm_room(&ss.session)?;
    if !ss.session.ever_started {
        ss.session.chunk_begin = ust_ctf::datetime::now();
    }
    ss.session.started = true;
    ss.session.ever_started = true;
    let ids: Vec<u64> = st.apps.values().filter(|a| a.alive).map(|a| a.id).collect();
    for id in &ids {
        if st.attach(&sname, *id) {
            daemon.wake_drain();
        }
    }
    // As `lttng start`: when `ust start` returns, the processes running now have their
    // buffers and masks (and have written their state dump).
    let waits = push_masks_and_sync(&mut st, &sname);
    drop(st);
    wait_syncs(&sname, waits, "the start");
    crate::log!("session {sname} started");
    Ok(Payload::Done)
}

/// A `Sync` round trip in progress with one process: its sync state, the sequence number
/// sent, its pid.
pub(super) type SyncWait = (Arc<SyncState>, u64, i32);

/// Queues `SetEnabled` with fresh masks, then `Sync`, to every live process that has a
/// slot in session `name`; the caller releases the state lock and [`wait_syncs`].
pub(super) fn push_masks_and_sync(st: &mut State, name: &str) -> Vec<SyncWait> {
    let mut waits = Vec::new();
    for id in st.apps_of(name) {
        st.push_masks(id);
        let seq = st.next_seq();
        let app = &st.apps[&id];
        app.send(DaemonMessage::Sync { seq }, Vec::new());
        waits.push((app.sync.clone(), seq, app.pid));
    }
    waits
}

/// After a tracker of session `sname` changed: attaches every live process the session now
/// takes (waking the drain for its new streams), pushes the event masks to all of them, and
/// returns the syncs to wait for (outside the state lock) before the change is confirmed.
pub(super) fn retrack_live_apps(daemon: &Daemon, st: &mut State, sname: &str) -> Vec<SyncWait> {
    let live: Vec<u64> = st.apps.values().filter(|a| a.alive).map(|a| a.id).collect();
    for id in live {
        if st.attach(sname, id) {
            daemon.wake_drain();
        }
    }
    push_masks_and_sync(st, sname)
}

/// Waits until every process of `waits` answered its `Sync` (so it has applied what was
/// queued before), at most [`SYNC_TIMEOUT`] in all; logs the ones that did not.
pub(super) fn wait_syncs(name: &str, waits: Vec<SyncWait>, what: &str) {
    let deadline = Instant::now() + SYNC_TIMEOUT;
    for (sync, seq, pid) in waits {
        if !sync.wait(seq, deadline) {
            crate::log!("session {name}: process {pid} did not confirm {what} (Sync {seq})");
        }
    }
}

/// Archives the current trace chunk of session `name` (see [`Command::Rotate`]) and
/// returns the archive directory.
///
/// # Errors
/// A message when the session was never started or a file cannot be moved.
pub fn rotate(daemon: &Daemon, name: &str) -> Res<PathBuf> {
    rotate_chunk(daemon, name, false)
}

/// [`rotate`]; with `last`, the session is being destroyed: every trace is finished and its
/// directory goes away with the move.
pub(super) fn rotate_chunk(daemon: &Daemon, name: &str, last: bool) -> Res<PathBuf> {
    let (archive, archive_rel, out, jobs) = {
        let mut st = daemon.lock();
        let Some(ss) = st.sessions.get_mut(name) else { return Err(format!("no session named {name:?}")) };
        if ss.session.snapshot {
            return Err(format!("session {name} is a snapshot session: it writes no trace to rotate (use `ust snapshot record`)"));
        }
        if ss.session.relay.is_some() {
            return Err(format!("session {name} streams to a relay daemon: rotation of network sessions is not supported"));
        }
        if !ss.session.ever_started {
            return Err(format!("session {name} has not been started: there is no trace to rotate"));
        }
        let now = ust_ctf::datetime::now();
        let archive_rel = format!("archives/{}-{}-{}", ust_ctf::datetime::iso_at(ss.session.chunk_begin), ust_ctf::datetime::iso_at(now), ss.session.rotations);
        let archive = ss.session.output.join(&archive_rel);
        ss.session.rotations += 1;
        ss.session.chunk_begin = now;
        let mut jobs = Vec::new();
        for t in ss.traces.values_mut().filter(|t| !t.archived) {
            let rel = crate::uid_trace::rel_dir(t, &ss.session.output).to_string_lossy().into_owned();
            let done = t.gone || last;
            jobs.push((t.dir.clone(), t.out.clone(), rel, t.streams.clone(), done));
            t.archived = done;
        }
        (archive, archive_rel, ss.session.out.clone(), jobs)
    };
    // Everything through the session's output directory, as its owner ([`TraceDir`]).
    let out = out.ok_or_else(|| format!("session {name} has no output directory"))?;
    let archive_dir = out.dir(&archive_rel, 0o750).map_err(|e| format!("cannot create {}: {e}", archive.display()))?;
    for (dir, trace_out, rel, streams, gone) in jobs {
        let dest = archive_dir.dir(&rel, 0o750).map_err(|e| format!("cannot create {}: {e}", archive.join(&rel).display()))?;
        let Some(trace_out) = trace_out else { continue };
        // The metadata first: the archive is complete before any of its packets is there.
        let copy = || -> std::io::Result<()> {
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut trace_out.open_file("metadata", false)?, &mut text)?;
            dest.write_atomically("metadata", &text, 0o600)
        };
        copy().map_err(|e| format!("cannot copy {}/metadata: {e}", dir.display()))?;
        for s in &streams {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            s.rotate_chunk(&dest).map_err(|e| format!("rotating {}/{}: {e}", dir.display(), s.files.base))?;
        }
        if gone {
            let _ = trace_out.remove_dir_all();
        }
    }
    crate::log!("session {name}: trace chunk archived in {}", archive.display());
    Ok(archive)
}

pub(super) fn stop_cmd(daemon: &Daemon, session: Option<String>) -> Res<Payload> {
    let sname = resolve(&daemon.lock(), &session)?;
    if !daemon.lock().sessions.get(&sname).is_some_and(|s| s.session.started) {
        return Err(format!("session {sname} is not started"));
    }
    stop(daemon, &sname);
    Ok(Payload::Stopped(stop_report(daemon, &sname)))
}

/// What the traces of stopped session `name` hold: [`finish_report`]'s report, the streams
/// left open (their statistics read under their own locks, after the state lock is released).
fn stop_report(daemon: &Daemon, name: &str) -> DestroyReport {
    let (mut report, streams) = {
        let st = daemon.lock();
        let Some(ss) = st.sessions.get(name) else {
            return DestroyReport {
                name: name.to_string(),
                output: PathBuf::new(),
                snapshot: false,
                traces: Vec::new(),
                archives: Vec::new(),
                output_error: None,
                relay: None,
            };
        };
        let streams: Vec<Vec<Arc<Mutex<Stream>>>> = ss.traces.values().map(|t| t.streams.clone()).collect();
        let traces = ss.traces.values().map(|t| trace_report(t, &StreamStats::default())).collect();
        (session_report(name, ss, traces, Vec::new()), streams)
    };
    for (t, streams) in report.traces.iter_mut().zip(streams) {
        for s in streams {
            let s = s.lock().unwrap_or_else(|e| e.into_inner());
            t.discarded = t.discarded.saturating_add(s.stats.discarded);
            t.packets = t.packets.saturating_add(s.stats.packets);
            t.bad_packets = t.bad_packets.saturating_add(s.stats.bad_packets);
        }
    }
    report
}

/// One process's (or user's) trace in a report, with its streams' statistics `stats`.
fn trace_report(t: &crate::process_trace::ProcessTrace, stats: &StreamStats) -> TraceReport {
    TraceReport {
        pid: t.pid,
        procname: t.procname.clone(),
        dir: t.dir.clone(),
        events: t.events.to_vec(),
        context_sizes: t.context_sizes.clone(),
        discarded: stats.discarded,
        packets: stats.packets,
        bad_packets: stats.bad_packets,
    }
}

/// The report of session `ss` named `name` with its `traces` and `archives`.
fn session_report(name: &str, ss: &SessionState, traces: Vec<TraceReport>, archives: Vec<PathBuf>) -> DestroyReport {
    let relay = ss.session.relay.as_ref().map(|r| (r.url.to_string(), r.relay_path.clone()));
    DestroyReport {
        name: name.to_string(),
        output: ss.session.output.clone(),
        snapshot: ss.session.snapshot,
        traces,
        archives,
        output_error: ss.session.output_error.get(),
        relay,
    }
}

pub(super) fn session_streams(ss: &SessionState) -> Vec<Arc<Mutex<Stream>>> {
    ss.traces.values().flat_map(|t| t.streams.iter().cloned()).collect()
}

/// Stops session `name`: clears its masks, syncs every process (bounded by
/// [`SYNC_TIMEOUT`]), flushes and drains every buffer.
pub fn stop(daemon: &Daemon, name: &str) {
    let (waits, streams) = {
        let mut st = daemon.lock();
        let Some(ss) = st.sessions.get_mut(name) else { return };
        ss.session.started = false;
        let streams = session_streams(ss);
        (push_masks_and_sync(&mut st, name), streams)
    };
    let deadline = Instant::now() + SYNC_TIMEOUT;
    for (sync, seq, pid) in waits {
        if !sync.wait(seq, deadline) {
            crate::log!("session {name}: process {pid} did not confirm the stop (Sync {seq}); draining anyway");
        }
    }
    for s in &streams {
        let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
        s.flush();
        s.drain();
    }
    // As `lttng stop` with a relay daemon: return once it has written what was sent.
    crate::relay::finish::wait_session_received(daemon, name);
    crate::log!("session {name} stopped");
}

/// Destroys session `name`: stops it if started, removes its channels from every process,
/// finishes every stream (final drain, files closed) and forgets the session.
///
/// # Errors
/// A message when no such session exists.
pub fn destroy(daemon: &Daemon, name: &str) -> Res<DestroyReport> {
    if daemon.lock().sessions.get(name).is_some_and(|s| s.session.started) {
        stop(daemon, name);
    }
    let (ss, mut dead, waits) = {
        let mut st = daemon.lock();
        let Some(ss) = st.sessions.remove(name) else {
            return Err(format!("no session named {name:?}"));
        };
        // Processes whose death is being handled right now: their streams are no longer in
        // a session `process_gone` can find, so torn-event recovery happens here.
        let dead: Vec<u64> = ss.traces.keys().filter(|id| !st.apps.get(id).is_some_and(|a| a.alive)).copied().collect();
        let mut removed_from = Vec::new();
        for app in st.apps.values_mut() {
            let slots: Vec<u32> = app.slots.iter().filter(|(_, (s, _))| s == name).map(|(k, _)| *k).collect();
            if !slots.is_empty() && app.alive {
                removed_from.push(app.id);
            }
            for slot in slots {
                app.slots.remove(&slot);
                app.send(DaemonMessage::RemoveChannel { slot }, Vec::new());
            }
        }
        for id in st.apps.keys().copied().collect::<Vec<_>>() {
            st.push_masks(id);
        }
        // A Sync after the RemoveChannels: the runtime answers it only once it has run
        // `remove_channel`, which retires the mapping (replaced by private memory), so after
        // SyncDone no thread of that process can write the session's buffers any more.
        let mut waits = Vec::new();
        for id in removed_from {
            let seq = st.next_seq();
            let app = &st.apps[&id];
            app.send(DaemonMessage::Sync { seq }, Vec::new());
            waits.push((id, app.sync.clone(), seq, app.pid));
        }
        if st.current.as_deref() == Some(name) {
            st.current = None;
        }
        st.forget_gone_apps();
        (ss, dead, waits)
    };
    // Processes that confirmed: their writers are done with these buffers, so the streams
    // are finished through torn-event recovery, which keeps the committed prefix of a
    // sub-buffer left incomplete (plain `finish` would skip it whole). A process that did
    // not confirm in time may still write: its incomplete sub-buffers are skipped.
    let deadline = Instant::now() + SYNC_TIMEOUT;
    for (id, sync, seq, pid) in waits {
        if sync.wait(seq, deadline) {
            dead.push(id);
        } else {
            crate::log!("session {name}: process {pid} did not confirm the channel removal (Sync {seq}); its incomplete sub-buffers are skipped");
        }
    }
    if ss.session.relay.is_some() {
        crate::relay::finish::finish_network_session(&ss, &dead);
    }
    let mut archives = Vec::new();
    if ss.session.rotations > 0 {
        // As LTTng: once a session has been rotated, its last chunk is archived too.
        let sname = ss.session.name.clone();
        // Streams are finished before the state lock is taken (stream locks never under it).
        for (id, t) in &ss.traces {
            for s in &t.streams {
                finish_stream(&mut s.lock().unwrap_or_else(|e| e.into_inner()), t.gone || dead.contains(id));
            }
        }
        daemon.lock().sessions.insert(sname.clone(), ss);
        let r = rotate_chunk(daemon, &sname, true);
        // A second `destroy` of the same name (a client that timed out and retried) may
        // have taken the session meanwhile: it then reports, not this one.
        let Some(ss2) = daemon.lock().sessions.remove(&sname) else {
            return Err(format!("session {sname} was destroyed by another request while its last chunk was archived"));
        };
        match r {
            Ok(a) => archives.push(a),
            Err(e) => crate::log!("session {sname}: archiving the last chunk failed: {e}"),
        }
        if let Some(out) = &ss2.session.out {
            if let Ok(entries) = out.existing("archives").and_then(|a| a.entries()) {
                archives = entries.into_iter().map(|(n, _)| ss2.session.output.join("archives").join(n)).collect();
            }
            let _ = out.remove_empty_dir("ust/pid");
            let _ = out.remove_empty_dir("ust");
        }
        return Ok(finish_report(name, ss2, archives, &dead));
    }
    Ok(finish_report(name, ss, archives, &dead))
}

/// Final drain and close of a stream: a dead process's through recovery of its
/// incomplete sub-buffers ([`Stream::finish_dead`]), a live one's normally.
pub(super) fn finish_stream(s: &mut Stream, process_dead: bool) {
    if process_dead {
        s.finish_dead();
    } else {
        s.finish();
    }
}

pub(super) fn finish_report(name: &str, ss: SessionState, archives: Vec<PathBuf>, dead: &[u64]) -> DestroyReport {
    let mut traces = Vec::new();
    for (id, t) in &ss.traces {
        let mut stats = StreamStats::default();
        for s in &t.streams {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            finish_stream(&mut s, t.gone || dead.contains(id));
            stats.discarded = stats.discarded.saturating_add(s.stats.discarded);
            stats.packets = stats.packets.saturating_add(s.stats.packets);
            stats.bad_packets = stats.bad_packets.saturating_add(s.stats.bad_packets);
        }
        traces.push(trace_report(t, &stats));
    }
    if let Some(d) = &ss.session.shm_dir {
        // Everything the buffers held is in the trace now: the crash-recovery copies go
        // (as LTTng removes its shm files at destroy).
        match std::fs::remove_dir_all(d) {
            Ok(()) => crate::log!("session {name}: buffer files in {} removed", d.display()),
            Err(e) => crate::log!("session {name}: removing buffer files in {}: {e}", d.display()),
        }
    }
    crate::log!("session {name} destroyed");
    session_report(name, &ss, traces, archives)
}

/// Destroys every session (daemon shutdown).
pub fn destroy_all(daemon: &Daemon) {
    let names: Vec<String> = daemon.lock().sessions.keys().cloned().collect();
    for n in names {
        let _ = destroy(daemon, &n);
    }
}
