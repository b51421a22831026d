//! A session's life: `start`, `stop` (masks off, `Sync`, flush, drain), and `destroy`
//! (stop, `RemoveChannel`, the last drain, the report; the last chunk of a rotated session
//! archived by [`crate::ops::rotate`]).

use std::path::PathBuf;
use std::time::Instant;

use ust_core::protocol::DaemonMessage;
use ust_ctl::protocol::*;

use crate::ops::state::{Daemon, SessionState};
use crate::ops::stream::{SharedStream, Stream, StreamStats};

use crate::ops::sync::{push_masks_and_sync, wait_syncs, SYNC_TIMEOUT};

pub(super) fn start(daemon: &Daemon, session: Option<String>) -> Result<Payload, String> {
    // A network session: the relay daemon must still answer (one round trip, outside the
    // state lock); a failure here is recorded as the session's output error, checked below.
    let relay = {
        let st = daemon.lock();
        st.resolve(&session).ok().and_then(|n| st.sessions.get(&n).and_then(|s| s.relay.clone()))
    };
    if let Some(r) = relay {
        r.probe();
    }
    // The userspace probes first, outside the state lock (resolving a large binary's
    // symbols, tracefs, root's daemon): a refusal fails the start before anything records.
    // Dropped on any later refusal, the recording removes its probes.
    let probes = start_probes(daemon, &session)?;
    let mut st = daemon.lock();
    let sname = st.resolve(&session)?;
    let has_maps = st.maps.has_session(&sname);
    let ss = st.sessions.get_mut(&sname).expect("resolved");
    if ss.session.started {
        return Err(format!("session {sname} is already started"));
    }
    if ss.session.channels.is_empty() && probes.is_none() && !has_maps {
        return Err(format!("session {sname} has no channel: enable an event (`ust enable-event -a`) or a channel first"));
    }
    // Nothing is lost silently: an output that stopped taking files since `create`, or a
    // --shm-path that cannot back one process's buffers, fails `start` itself.
    match &ss.relay {
        // The directory opened at `create`; opened again, by the same user, if it was
        // removed or replaced before anything of the session was written (a session that
        // ran keeps writing where its traces are).
        None => match ss.session.out.as_ref().filter(|o| ss.session.ever_started || o.replaced().is_none()) {
            Some(o) => crate::ops::output::check_writable(o)?,
            None => {
                let owner = ss.session.out.as_ref().and_then(|o| o.owner());
                ss.session.out = Some(crate::ops::output::open_output(&ss.session.output, owner)?);
            }
        },
        Some(r) if !r.is_up() => {
            return Err(ss.session.output_error.get().unwrap_or_else(|| format!("relay daemon at {}: connection closed", r.url)));
        }
        Some(_) => {}
    }
    crate::ops::output::check_shm_room(&ss.session)?;
    if !ss.session.ever_started {
        ss.session.chunk_begin = ust_ctf::datetime::now();
    }
    ss.session.started = true;
    ss.session.ever_started = true;
    if let Some(p) = probes {
        crate::log!("session {sname}: userspace probes recorded in {}", p.dir().display());
        ss.probes = Some(p);
    }
    let ids: Vec<u64> = st.apps.values().filter(|a| a.alive).map(|a| a.id).collect();
    for id in &ids {
        if crate::ops::attach::attach(&mut st, &sname, *id) {
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

/// Starts recording the enabled userspace probes of the session named by `session`, if it
/// has any ([`crate::ops::session_probes`]).
fn start_probes(daemon: &Daemon, session: &Option<String>) -> Result<Option<crate::ops::session_probes::Recording>, String> {
    let (sname, out, rules) = {
        let st = daemon.lock();
        let sname = st.resolve(session)?;
        let ss = st.sessions.get(&sname).expect("resolved");
        if ss.session.started || !ss.session.probes.iter().any(|p| p.enabled) {
            return Ok(None);
        }
        (sname, ss.session.out.clone(), ss.session.probes.clone())
    };
    let Some(out) = out else {
        return Err(format!("session {sname} has no local output directory: its userspace probes cannot be recorded"));
    };
    crate::ops::session_probes::start(&out, &rules, daemon.uid).map(Some).map_err(|e| format!("session {sname}: {e}"))
}

pub(super) fn stop_cmd(daemon: &Daemon, session: Option<String>) -> Result<Payload, String> {
    let sname = daemon.lock().resolve(&session)?;
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
                probes: Vec::new(),
            };
        };
        let streams: Vec<Vec<SharedStream>> = ss.traces.values().map(|t| t.streams.clone()).collect();
        let traces = ss.traces.values().map(|t| trace_report(t, &StreamStats::default())).collect();
        (session_report(name, ss, traces, Vec::new()), streams)
    };
    for (t, streams) in report.traces.iter_mut().zip(streams) {
        for s in streams {
            let s = s.lock().unwrap_or_else(|e| e.into_inner());
            t.discarded = t.discarded.saturating_add(s.stats().discarded);
            t.packets = t.packets.saturating_add(s.stats().packets);
            t.bad_packets = t.bad_packets.saturating_add(s.stats().bad_packets);
        }
    }
    report
}

/// One process's (or user's) trace in a report, with its streams' statistics `stats`.
fn trace_report(t: &crate::ops::trace::ProcessTrace, stats: &StreamStats) -> TraceReport {
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
    let relay = ss.relay.as_ref().map(|r| (r.url.to_string(), r.relay_path.clone()));
    DestroyReport {
        name: name.to_string(),
        output: ss.session.output.clone(),
        snapshot: ss.session.snapshot,
        traces,
        archives,
        output_error: ss.session.output_error.get(),
        relay,
        probes: ss.probes_done.clone(),
    }
}

/// Stops session `name`: removes its userspace probes and finishes their trace
/// ([`crate::ops::session_probes`]), clears its masks, syncs every process (bounded by
/// [`SYNC_TIMEOUT`]), flushes and drains every buffer.
pub fn stop(daemon: &Daemon, name: &str) {
    let probes;
    let (waits, streams) = {
        let mut st = daemon.lock();
        let Some(ss) = st.sessions.get_mut(name) else { return };
        ss.session.started = false;
        let streams = ss.streams();
        probes = ss.probes.take().map(|p| (p, ss.session.clock_offset_ns));
        (push_masks_and_sync(&mut st, name), streams)
    };
    // The probes go first (their kernel trace is written with the session's offset).
    if let Some((p, offset)) = probes {
        let dir = p.dir().to_path_buf();
        let report = match p.finish(offset) {
            Ok((dir, counts)) => {
                let n: Vec<String> = counts.iter().filter(|c| c.1 > 0).map(|(e, n)| format!("{e} {n}")).collect();
                crate::log!("session {name}: userspace probes removed; {}: {}", dir.display(), if n.is_empty() { "no hit".into() } else { n.join(", ") });
                ProbesReport { dir, counts, error: None }
            }
            Err(e) => {
                crate::log!("session {name}: userspace probes: {e}");
                ProbesReport { dir, counts: Vec::new(), error: Some(e) }
            }
        };
        if let Some(ss) = daemon.lock().sessions.get_mut(name) {
            ss.probes_done.push(report);
        }
    }
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
    crate::ops::relay_session::wait_session_received(daemon, name);
    crate::log!("session {name} stopped");
}

/// Destroys session `name`: stops it if started, removes its channels from every process,
/// finishes every stream (final drain, files closed) and forgets the session.
///
/// # Errors
/// A message when no such session exists.
pub fn destroy(daemon: &Daemon, name: &str) -> Result<DestroyReport, String> {
    if daemon.lock().sessions.get(name).is_some_and(|s| s.session.started) {
        stop(daemon, name);
    }
    let (ss, mut dead, waits) = {
        let mut st = daemon.lock();
        let Some(ss) = st.sessions.remove(name) else {
            return Err(format!("no session named {name:?}"));
        };
        let gone = st.maps.session_destroyed(name);
        st.free_map_slots(&gone);
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
    if ss.relay.is_some() {
        crate::ops::relay_session::finish_network_session(&ss, &dead);
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
        let r = crate::ops::rotate::rotate_chunk(daemon, &sname, true);
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
            stats.discarded = stats.discarded.saturating_add(s.stats().discarded);
            stats.packets = stats.packets.saturating_add(s.stats().packets);
            stats.bad_packets = stats.bad_packets.saturating_add(s.stats().bad_packets);
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
