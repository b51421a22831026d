//! The listings: `list` (sessions, one session in detail, `--apps`) and `status`.

use std::sync::{Arc, Mutex};

use ust_ctl::maps::MapChannelInfo;
use ust_ctl::protocol::*;

use crate::ops::state::{Daemon, SessionState, State};
use crate::ops::stream::Stream;

pub(super) fn summary(st: &State, ss: &SessionState) -> SessionSummary {
    SessionSummary {
        name: ss.session.name.clone(),
        output: ss.session.output.clone(),
        active: ss.session.started,
        current: st.current.as_deref() == Some(ss.session.name.as_str()),
        trace: ss.session.token.is_some(),
        snapshot: ss.session.snapshot,
        channels: ss.session.channels.len(),
        processes: ss.traces.len(),
        output_error: ss.session.output_error.get(),
        url: ss.relay.as_ref().map(|r| r.url.to_string()),
        buffers: ss.session.buffers,
    }
}

pub(super) fn list_sessions(daemon: &Daemon) -> Vec<SessionSummary> {
    let st = daemon.lock();
    st.sessions.values().map(|ss| summary(&st, ss)).collect()
}

/// `ust list SESSION`: configuration, enablers, counts. Stream counters are read after the
/// state lock is released.
pub fn detail(daemon: &Daemon, name: &str) -> Option<SessionDetail> {
    let (mut d, per_channel, owners) = {
        let st = daemon.lock();
        let ss = st.sessions.get(name)?;
        let channels = ss
            .session
            .channels
            .iter()
            .map(|c| ChannelDetail {
                name: c.name.clone(),
                config: c.config.clone(),
                enablers: c.enablers.iter().map(|r| r.enabler.clone()).collect(),
                contexts: c.contexts.clone(),
                discarded: 0,
                packets: 0,
                bytes: 0,
                bad_packets: 0,
                overwritten: 0,
                lost_packets: 0,
                memory: None,
            })
            .collect();
        let processes = ss
            .traces
            .values()
            .map(|t| ProcessDetail { pid: t.pid, procname: t.procname.clone(), dir: t.dir.clone(), alive: !t.gone, post_mortem: t.post_mortem.clone() })
            .collect();
        let streams: Vec<Arc<Mutex<Stream>>> = ss.streams();
        let owners: Vec<crate::ops::reclaim::Owner> =
            ss.traces.values().filter(|t| !t.gone).map(|t| (Some(t.pid), t.shared.as_ref().map(|s| s.uid), t.streams.clone())).collect();
        (
            SessionDetail {
                summary: summary(&st, ss),
                channels,
                processes,
                vpid_tracker: ss.session.vpid_tracker.clone(),
                vuid_tracker: ss.session.vuid_tracker.clone(),
                vgid_tracker: ss.session.vgid_tracker.clone(),
                untraced: ss.untraced.iter().cloned().collect(),
                userspace_probes: ss.session.probes.clone(),
                map_channels: st
                    .maps
                    .channels
                    .iter()
                    .filter(|((s, _), _)| s == name)
                    .map(|(_, m)| MapChannelInfo { name: m.name.clone(), config: m.config.clone() })
                    .collect(),
            },
            streams,
            owners,
        )
    };
    for s in per_channel {
        let s = s.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = d.channels.iter_mut().find(|c| c.name == s.channel()) {
            // Stats derive from app-writable memory: saturate, never overflow.
            c.discarded = c.discarded.saturating_add(s.stats().discarded);
            c.packets = c.packets.saturating_add(s.stats().packets);
            c.bytes = c.bytes.saturating_add(s.stats().bytes);
            c.bad_packets = c.bad_packets.saturating_add(s.stats().bad_packets);
            c.overwritten = c.overwritten.saturating_add(s.stats().overwritten);
            c.lost_packets = c.lost_packets.saturating_add(s.stats().lost_packets);
        }
    }
    crate::ops::reclaim::fill_memory(&mut d.channels, owners);
    Some(d)
}

pub(super) fn list_apps(daemon: &Daemon) -> Vec<AppInfo> {
    let st = daemon.lock();
    st.apps
        .values()
        .filter(|a| a.alive)
        .map(|a| AppInfo {
            pid: a.pid,
            procname: a.procname.clone(),
            uid: a.uid,
            traced_by_token: a.token.is_some(),
            registered: ust_ctf::datetime::stamp_at(a.registered),
            events: a
                .events
                .iter()
                .map(|e| EventInfo {
                    name: e.full_name(),
                    level: e.level.number(),
                    level_name: e.level.lttng_name().to_string(),
                    fields: e.fields.iter().map(|f| FieldInfo { name: f.name.to_string(), ty: type_name(f), ctf_type: f.ty.clone() }).collect(),
                    location: e.location.to_string(),
                })
                .collect(),
        })
        .collect()
}

pub(super) fn status(daemon: &Daemon, session: Option<String>) -> Result<Payload, String> {
    let (current, name, apps) = {
        let st = daemon.lock();
        let name = match &session {
            Some(_) => Some(st.resolve(&session)?),
            None => st.current.clone().filter(|c| st.sessions.contains_key(c)),
        };
        (st.current.clone(), name, st.apps.values().filter(|a| a.alive).count())
    };
    let session = name.and_then(|n| detail(daemon, &n));
    Ok(Payload::Status(StatusReport { daemon_pid: std::process::id(), rundir: daemon.rundir.clone(), current, session, apps }))
}
