//! What happens to a registered process's traces as it lives: late tracepoints (a
//! `dlopen`ed library registers more events: every trace's metadata is rewritten before
//! anything enables them), and its death (every buffer flushed and drained, torn events
//! recovered, files closed; a post-mortem trace in snapshot sessions).

use std::sync::{Arc, Mutex};

use ust_core::EventDesc;

use crate::model::app::MAX_EVENTS;
use crate::ops::attach::{forget, register_uid_events};
use crate::ops::process_trace::{render_metadata, write_metadata, ProcessInfo};
use crate::ops::state::Daemon;
use crate::ops::stream::Stream;

/// Late tracepoints of process `app_id`: validated, appended to its events, every trace's
/// metadata rewritten (before anything enables them), then the masks pushed again.
///
/// # Errors
/// A reason to refuse the process: `first` is not the number of events known, too many
/// events, or a bad description.
pub fn register_events(daemon: &Daemon, app_id: u64, first: u32, events: Vec<EventDesc>) -> Result<(), String> {
    let mut st = daemon.lock();
    let Some(app) = st.apps.get_mut(&app_id) else { return Ok(()) };
    if first as usize != app.events.len() {
        return Err(format!("RegisterEvents from index {first}, but {} events are registered", app.events.len()));
    }
    if app.events.len() + events.len() > MAX_EVENTS {
        return Err(format!("more than {MAX_EVENTS} events registered"));
    }
    for (i, e) in events.iter().enumerate() {
        e.validate().map_err(|err| format!("event #{} ({}): {err}", first as usize + i, e.full_name()))?;
    }
    app.events.extend(events);
    let (pid, procname, ncpus, registered) = (app.pid, app.procname.clone(), app.ncpus, app.registered);
    let full = app.events.clone();
    let all = st.share_events(&full);
    let mut streams = Vec::new();
    for ss in st.sessions.values_mut() {
        let Some(t) = ss.traces.get_mut(&app_id) else { continue };
        let info = ProcessInfo { pid, procname: &procname, ncpus, registered, events: &all, tsc: t.tsc };
        if let Some(m) = t.relay.as_mut() {
            m.update(&render_metadata(&ss.session, &info, t.uuid));
        } else if let Some(Err(e)) = t.out.as_ref().map(|out| write_metadata(&ss.session, &info, out, t.uuid)) {
            crate::log!("session {}: rewriting {}/metadata failed: {e}", ss.session.name, t.dir.display());
        }
        t.events = all.clone();
        streams.extend(t.streams.iter().cloned());
    }
    register_uid_events(&mut st, app_id);
    crate::log!("process {pid} registered {} more events ({} in all)", all.len() - first as usize, all.len());
    // The streams learn the new descriptions (torn-event recovery sizes records with them)
    // before any mask enables the new events; stream locks are taken outside the state lock.
    drop(st);
    for s in &streams {
        s.lock().unwrap_or_else(|e| e.into_inner()).set_events(all.clone());
    }
    let mut st = daemon.lock();
    let st = &mut *st;
    if let Some(app) = st.apps.get_mut(&app_id) {
        st.triggers.attach_app(app);
    }
    st.attach_maps(app_id);
    st.push_masks(app_id);
    Ok(())
}

/// The process behind `app_id` is gone: flush every buffer it had (a reader-side switch),
/// drain what was delivered, keep the committed prefix of sub-buffers its dead writers
/// left incomplete (torn-event recovery), close its stream files, free its slots and mark
/// it gone. In a snapshot session, a process that did not say `Exiting` (it died
/// abnormally) gets a post-mortem trace ([`crate::ops::snapshot::dump::post_mortem`]) and
/// its buffers are kept for later snapshots until the session is destroyed (in a `ust trace
/// --snapshot` session, every process's buffers are).
pub fn process_gone(daemon: &Daemon, app_id: u64) {
    let death = ust_ctf::datetime::stamp();
    let (abnormal, pid, procname) = {
        let st = daemon.lock();
        let Some(app) = st.apps.get(&app_id) else { return };
        (!app.exiting, app.pid, app.procname.clone())
    };
    {
        let mut st = daemon.lock();
        let Some(app) = st.apps.get_mut(&app_id) else { return };
        app.alive = false;
        app.out = None;
        app.slots.clear();
        st.maps.process_gone(app_id);
        forget(&mut st, app_id);
        let Some(app) = st.apps.get_mut(&app_id) else { return };
        // A gone process's descriptions live on in its traces (one shared copy each).
        app.events = Vec::new();
        for ss in st.sessions.values_mut() {
            if let Some(t) = ss.traces.get_mut(&app_id) {
                t.slots.iter_mut().for_each(|s| *s = None);
                // Its metadata is on disk; only snapshots and post-mortem dumps, which
                // retained traces are kept for, write it again.
                if !ss.session.snapshot {
                    t.metadata = String::new();
                }
            }
        }
    }
    // The traces are marked gone only once their content is on disk, so that a client
    // that sees "gone" can read them.
    if abnormal {
        let written = crate::ops::snapshot::dump::post_mortem(daemon, app_id, &death);
        let mut st = daemon.lock();
        for (session, dir) in written {
            if let Some(t) = st.sessions.get_mut(&session).and_then(|ss| ss.traces.get_mut(&app_id)) {
                t.post_mortem = Some(dir);
            }
        }
    }
    {
        // Kept for later snapshots: the buffers of a process that died abnormally, and in a
        // `ust trace --snapshot` session (which lives as long as its command) every
        // process's, for the snapshot taken when the command ends.
        let mut st = daemon.lock();
        for ss in st.sessions.values_mut().filter(|ss| ss.session.snapshot && (abnormal || ss.session.token.is_some())) {
            if let Some(t) = ss.traces.get_mut(&app_id) {
                t.retained = true;
            }
        }
    }
    let streams: Vec<Arc<Mutex<Stream>>> = {
        let st = daemon.lock();
        st.sessions.values().filter_map(|ss| ss.traces.get(&app_id)).filter(|t| !t.retained).flat_map(|t| t.streams.iter().cloned()).collect()
    };
    for s in &streams {
        s.lock().unwrap_or_else(|e| e.into_inner()).finish_dead();
    }
    let mut st = daemon.lock();
    for ss in st.sessions.values_mut() {
        if let Some(t) = ss.traces.get_mut(&app_id) {
            // Everything its buffer files held is in the trace now (its streams are
            // finished): the crash-recovery copies go, as they would at destroy, so that a
            // long --shm-path session does not fill the file system with dead processes.
            if !t.retained {
                if let Some(d) = t.shm_dir.take() {
                    let _ = std::fs::remove_dir_all(&d);
                }
            }
            t.gone = true;
        }
    }
    crate::log!("process {pid} ({procname}) gone{}; {} streams finished", if abnormal { " without a normal exit" } else { "" }, streams.len());
    st.forget_gone_apps();
    drop(st);
}
