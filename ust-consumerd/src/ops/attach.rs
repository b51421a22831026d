//! Attaching a registered process to a session: per PID, a trace of its own (directory,
//! metadata, buffers, streams: [`crate::ops::process_trace`]); per UID, a place in its
//! user's shared trace ([`crate::ops::uid_trace`]), its events registered there. Either
//! way its mask slots are taken and an `AddChannel` with the buffers is queued per
//! channel; the caller then pushes the masks ([`State::push_masks`]).

use std::os::fd::OwnedFd;

use ust_core::clock::ClockKind;
use ust_core::protocol::{ChannelGrant, MAX_CHANNELS};

use crate::ops::process_trace::{create_process_trace, ProcessInfo};
use crate::ops::state::{SessionState, State};
use crate::ops::uid_trace::{add_events, create, is_uid_key, trace_key, SINCE_MINOR};

/// Gives process `app_id` buffers for every channel of session `name`, if the session is
/// started, takes the process (its token, and its process-id tracker:
/// [`crate::model::session::Session::tracks`]), and has not done so yet: trace directory, metadata,
/// buffers, files, mask slots, and an `AddChannel` queued per channel. The caller then
/// pushes masks ([`State::push_masks`]). True when streams were added.
#[must_use = "when true, wake the drain (Daemon::wake_drain) so the new streams are read from their first period"]
pub fn attach(st: &mut State, name: &str, app_id: u64) -> bool {
    match try_attach(st, name, app_id) {
        Ok(added) => added,
        Err(reason) => {
            crate::log!("session {name}: {reason}");
            if let (Some(ss), Some(app)) = (st.sessions.get_mut(name), st.apps.get(&app_id)) {
                ss.record_untraced(app.pid, &app.procname, reason);
            }
            false
        }
    }
}

/// [`attach`]: `Ok(false)` when the session does not take the process now,
/// `Err(why)` when it should but cannot.
fn try_attach(st: &mut State, name: &str, app_id: u64) -> Result<bool, String> {
    let Some(ss) = st.sessions.get(name) else { return Ok(false) };
    let Some(app) = st.apps.get(&app_id) else { return Ok(false) };
    if !app.alive || !ss.session.started || !ss.session.takes(app.token.as_deref()) {
        return Ok(false);
    }
    // An untracked process (`ust untrack --vpid`) gets no buffers of the session; it
    // is attached when it is tracked again (`track_vpids` in control.rs).
    if !ss.session.tracks(app.pid) || !ss.session.tracks_ids(app.uid, app.gid) {
        return Ok(false);
    }
    if ss.session.buffers == crate::model::session::BufferOwnership::Uid && !ss.session.channels.is_empty() {
        return attach_uid(st, name, app_id);
    }
    if ss.traces.contains_key(&app_id) || ss.session.channels.is_empty() {
        return Ok(false);
    }
    if let Some(e) = ss.session.output_error.get() {
        return Err(format!("process {} not traced: the session's output is stopped ({e})", app.pid));
    }
    // The `ip` context came with ABI minor 2, `span_id` with 3: an older runtime could
    // not read the grant.
    if let Some(c) = ss.session.channels.iter().flat_map(|c| c.contexts.iter()).find(|c| app.abi_minor < c.since_minor()) {
        return Err(format!(
            "process {} not traced: its ust runtime (ABI {}.{}) predates the {c} context the session records; rebuild it with a newer ust",
            app.pid,
            ust_core::ABI_MAJOR,
            app.abi_minor
        ));
    }
    let free = (0..MAX_CHANNELS).filter(|s| !app.slots.contains_key(s)).count();
    if free < ss.session.channels.len() {
        return Err(format!("process {} not traced: it has no free channel slot left", app.pid));
    }
    // Each buffer costs a memfd (until sent) plus a stream and an index file; keep a
    // margin for control connections and metadata files.
    let need = ss.session.channels.len() as u64 * u64::from(app.ncpus) * 3 + crate::ops::fds::FD_MARGIN;
    if crate::ops::fds::fd_headroom() < need {
        return Err(format!(
            "process {} ({}) not traced: out of file descriptors ({}; it needs {need}); raise ust-consumerd's limit (ulimit -n)",
            app.pid,
            app.procname,
            crate::ops::fds::fd_usage()
        ));
    }
    // The session's clock, else the one the process asked for (UST_CLOCK).
    let tsc = if ss.session.clock.or(app.clock) == Some(ClockKind::Tsc) {
        let pid = app.pid;
        let params = st.sessions.get_mut(name).and_then(|ss| ss.session.tsc_params());
        if params.is_none() {
            crate::log!("session {name}: process {pid} asked for the TSC clock; no invariant TSC here, CLOCK_MONOTONIC instead");
        }
        params
    } else {
        None
    };
    let (Some(ss), Some(app)) = (st.sessions.get(name), st.apps.get(&app_id)) else { return Ok(false) };
    let info = ProcessInfo { pid: app.pid, procname: &app.procname, ncpus: app.ncpus, registered: app.registered, events: &app.events, tsc };
    let (mut trace, fds) = match create_process_trace(&ss.session, ss.relay.as_ref(), &info, &mut st.next_instance, &mut st.event_tables) {
        Ok(x) => x,
        Err(e) => return Err(format!("process {} not traced: cannot set up its buffers: {e}", app.pid)),
    };
    let channels: Vec<String> = ss.session.channels.iter().map(|c| c.name.clone()).collect();
    let contexts: Vec<Vec<ust_core::context::ContextType>> = ss.session.channels.iter().map(|c| c.contexts.clone()).collect();
    let blocking: Vec<u64> = ss.session.channels.iter().map(|c| c.config.blocking_timeout_us).collect();
    let app = st.apps.get_mut(&app_id).expect("checked above");
    for (ci, chan_fds) in fds.into_iter().enumerate() {
        // Per CPU, one buffer per possible CPU; per channel (`--buffer-allocation`), one.
        let nbuf = chan_fds.len() as u32;
        let slot = app.free_slot().expect("counted above");
        app.slots.insert(slot, (name.to_string(), ci));
        trace.slots[ci] = Some(slot);
        app.send_channel(
            ChannelGrant {
                slot,
                session: name.to_string(),
                channel: channels[ci].clone(),
                ncpus: nbuf,
                contexts: contexts[ci].clone(),
                tsc: trace.tsc,
                shared_ids: false,
                blocking_timeout_us: blocking[ci],
                map: None,
            },
            chan_fds,
        );
    }
    match &st.sessions.get(name).and_then(|ss| ss.relay.clone()) {
        Some(r) => crate::log!(
            "session {name}: tracing process {} ({}), streamed to {} as ust/pid/{}",
            app.pid,
            app.procname,
            r.url,
            trace.dir.file_name().unwrap_or_default().to_string_lossy()
        ),
        None => crate::log!("session {name}: tracing process {} ({}) into {}", app.pid, app.procname, trace.dir.display()),
    }
    st.sessions.get_mut(name).expect("checked above").traces.insert(app_id, trace);
    Ok(true)
}

/// Attaches process `app_id` to the per-UID trace of its user in session `name` (made
/// now if it is the user's first process): registers its events, hands it the shared
/// buffers. `Ok(true)` when streams were made (wake the drain).
///
/// # Errors
/// Why the process is not traced.
fn attach_uid(st: &mut State, name: &str, app_id: u64) -> Result<bool, String> {
    let (Some(ss), Some(app)) = (st.sessions.get(name), st.apps.get(&app_id)) else { return Ok(false) };
    if app.slots.values().any(|(s, _)| s == name) {
        return Ok(false);
    }
    if let Some(e) = ss.session.output_error.get() {
        return Err(format!("process {} not traced: the session's output is stopped ({e})", app.pid));
    }
    if app.abi_minor < SINCE_MINOR {
        return Err(format!(
            "process {} not traced: its ust runtime (ABI {}.{}) predates per-UID buffers (ABI {}.{SINCE_MINOR}); rebuild it with a newer ust",
            app.pid,
            ust_core::ABI_MAJOR,
            app.abi_minor,
            ust_core::ABI_MAJOR
        ));
    }
    if let Some(c) = ss.session.channels.iter().flat_map(|c| c.contexts.iter()).find(|c| app.abi_minor < c.since_minor()) {
        return Err(format!("process {} not traced: its ust runtime predates the {c} context the session records", app.pid));
    }
    let free = (0..MAX_CHANNELS).filter(|s| !app.slots.contains_key(s)).count();
    if free < ss.session.channels.len() {
        return Err(format!("process {} not traced: it has no free channel slot left", app.pid));
    }
    let (uid, pid, procname, ncpus) = (app.uid, app.pid, app.procname.clone(), app.ncpus);
    let key = trace_key(uid);
    let mut made = false;
    if !ss.traces.contains_key(&key) {
        let need = ss.session.channels.len() as u64 * u64::from(ncpus) * 3 + crate::ops::fds::FD_MARGIN;
        if crate::ops::fds::fd_headroom() < need {
            return Err(format!("per-UID trace of uid {uid} not made: out of file descriptors ({})", crate::ops::fds::fd_usage()));
        }
        let tsc = if ss.session.clock.or(app.clock) == Some(ClockKind::Tsc) { st.sessions.get_mut(name).and_then(|ss| ss.session.tsc_params()) } else { None };
        let ss = st.sessions.get(name).expect("checked above");
        let trace =
            create(&ss.session, ss.relay.as_ref(), uid, ncpus, tsc, &mut st.next_instance).map_err(|e| format!("per-UID trace of uid {uid} not made: {e}"))?;
        crate::log!("session {name}: per-UID trace of uid {uid} in {}", trace.dir.display());
        st.sessions.get_mut(name).expect("checked above").traces.insert(key, trace);
        made = true;
    }
    // Its events first (the metadata is complete before it can record any), then the
    // buffers.
    let events = st.apps[&app_id].events.clone();
    let ss = st.sessions.get_mut(name).expect("checked above");
    let t = ss.traces.get_mut(&key).expect("made above");
    add_events(&ss.session, t, &events, &format!("process {pid} ({procname})"));
    let Some(shared) = t.shared.as_mut() else { return Err("per-UID trace without its registry".into()) };
    let mut grants = Vec::new();
    for (ci, ch) in ss.session.channels.iter().enumerate() {
        let fds: Result<Vec<OwnedFd>, _> = shared.fds.get(ci).map_or(Ok(Vec::new()), |v| v.iter().map(|f| f.try_clone()).collect());
        let fds = fds.map_err(|e| format!("process {pid} not traced: cannot duplicate its buffer descriptors: {e}"))?;
        grants.push((ci, ch.name.clone(), ch.contexts.clone(), fds, ch.config.blocking_timeout_us));
    }
    shared.members.insert(app_id);
    let tsc = t.tsc;
    let app = st.apps.get_mut(&app_id).expect("checked above");
    for (ci, channel, contexts, fds, blocking) in grants {
        let slot = (0..MAX_CHANNELS).find(|s| !app.slots.contains_key(s)).expect("counted above");
        app.slots.insert(slot, (name.to_string(), ci));
        // The channel's buffer count: every possible CPU's, or one (`--buffer-allocation`).
        let nbuf = fds.len() as u32;
        let grant =
            ChannelGrant { slot, session: name.to_string(), channel, ncpus: nbuf, contexts, tsc, shared_ids: true, blocking_timeout_us: blocking, map: None };
        app.send_channel(grant, fds);
    }
    Ok(made)
}

/// Late events of process `app_id` (`RegisterEvents`, a `dlopen`ed library): registered
/// in every per-UID trace it writes. The caller pushes the masks (and ids) afterwards.
pub fn register_uid_events(st: &mut State, app_id: u64) {
    let Some(app) = st.apps.get(&app_id) else { return };
    let (events, who, key) = (app.events.clone(), format!("process {} ({})", app.pid, app.procname), trace_key(app.uid));
    for ss in st.sessions.values_mut() {
        let SessionState { session, traces, .. } = ss;
        if let Some(t) = traces.get_mut(&key).filter(|t| t.shared.as_ref().is_some_and(|s| s.members.contains(&app_id))) {
            add_events(session, t, &events, &who);
        }
    }
}

/// Process `app_id` is gone: it is no longer a member of any per-UID trace.
pub fn forget(st: &mut State, app_id: u64) {
    for ss in st.sessions.values_mut() {
        for (_, t) in ss.traces.iter_mut().filter(|(k, _)| is_uid_key(**k)) {
            if let Some(s) = t.shared.as_mut() {
                if s.members.remove(&app_id) {
                    s.deaths.note();
                }
            }
        }
    }
}
