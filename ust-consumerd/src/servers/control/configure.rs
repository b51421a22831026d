//! Requests that change a session's settings: `create`, `enable-channel`, `add-context`,
//! `enable-event`, `disable-event`, `track`/`untrack`.

use std::path::PathBuf;

use ust_ctl::protocol::*;

use crate::model::enabler::Rule;
use crate::model::session::{check_name, Channel, ChannelConfig, Enabler, LevelFilter, Session, VpidTracker, DEFAULT_CHANNEL, MAX_TRACKED_VPIDS};
use crate::ops::state::{Daemon, SessionState};

use crate::ops::sync::{retrack_live_apps, wait_syncs};

pub(super) fn create(daemon: &Daemon, name: String, output: PathBuf, token: Option<String>, options: CreateOptions) -> Result<Payload, String> {
    let CreateOptions { snapshot, shm_path, clock, buffers, relay, live_timer_us, token: with_token, owner } = options;
    let token = token.or(with_token);
    check_name("session", &name)?;
    if !output.is_absolute() {
        return Err(format!("output directory {} is not an absolute path", output.display()));
    }
    if token.as_ref().is_some_and(|t| t.is_empty() || t.len() > 256) {
        return Err("bad session token".into());
    }
    if daemon.lock().sessions.contains_key(&name) {
        return Err(format!("a session named {name:?} already exists"));
    }
    if live_timer_us.is_some() && relay.is_none() {
        return Err("--live needs a network output (--set-url net://HOST, or --ctrl-url and --data-url)".into());
    }
    if live_timer_us.is_some() && snapshot {
        return Err("a snapshot session cannot be live: its snapshots go to the URL when recorded".into());
    }
    // A snapshot session with a network URL streams nothing: the URL is where
    // `ust snapshot record` sends snapshots (as `lttng create --snapshot --set-url`).
    let (relay, snapshot_url) = if snapshot { (None, relay) } else { (relay, None) };
    if let Some(u) = &snapshot_url {
        crate::ops::relay::check_reachable(u)?;
    }
    if live_timer_us == Some(0) {
        return Err("--live period must be at least 1 µs".into());
    }
    let out = match relay {
        None => Some(crate::ops::output::open_output(&output, owner.map(|o| ust_ctf::outdir::Owner { uid: o.uid, gid: o.gid }))?),
        Some(_) => None,
    };
    let shm_dir = match shm_path {
        None => None,
        Some(p) => {
            if !p.is_absolute() {
                return Err(format!("--shm-path {} is not an absolute path", p.display()));
            }
            let d = p.join(format!("{name}-{}", ust_ctf::datetime::stamp()));
            // Made as `TraceDir::create` makes an output directory (root hands a user's path
            // to that user); the buffer sets are made below it (`ops::trace::shm_set_dir`).
            ust_ctf::outdir::TraceDir::create(&d, None).map_err(|e| format!("cannot create shm directory {}: {e}", d.display()))?;
            Some(d)
        }
    };
    // A network session: the relay daemon is reached now, so that `create` says at once
    // when it cannot be (the connection is made outside the state lock).
    let relay_error = crate::model::session::OutputError::default();
    let created = ust_ctf::datetime::now();
    let relay = match &relay {
        None => None,
        Some(url) => match crate::ops::relay::RelayOutput::connect(url, &name, created, live_timer_us.unwrap_or(0), None, relay_error.clone()) {
            Ok(r) => Some(r),
            Err(e) => {
                if let Some(d) = &shm_dir {
                    let _ = std::fs::remove_dir(d);
                }
                return Err(format!("{e}; is lttng-relayd running there?"));
            }
        },
    };
    let mut st = daemon.lock();
    if st.sessions.contains_key(&name) {
        if let Some(d) = &shm_dir {
            let _ = std::fs::remove_dir(d);
        }
        return Err(format!("a session named {name:?} already exists"));
    }
    let is_trace = token.is_some();
    let mut session = Session::new(name.clone(), output.clone(), token);
    session.out = out;
    session.snapshot = snapshot;
    session.shm_dir = shm_dir;
    session.clock = clock;
    session.buffers = buffers.unwrap_or_default();
    session.snapshot_url = snapshot_url;
    let mut ss = SessionState::new(session);
    if let Some(r) = relay {
        ss.session.created = created;
        ss.session.output_error = relay_error;
        ss.relay = Some(r);
    }
    st.sessions.insert(name.clone(), ss);
    if !is_trace {
        st.current = Some(name.clone());
    }
    crate::log!("session {name} created{}, output {}", if snapshot { " (snapshot)" } else { "" }, output.display());
    if let Some(u) = st.sessions.get(&name).and_then(|s| s.relay.as_ref().map(|r| r.url.clone()).or_else(|| s.session.snapshot_url.clone())) {
        return Ok(Payload::Created { name, output: PathBuf::from(u.to_string()) });
    }
    Ok(Payload::Created { name, output })
}

pub(super) fn enable_channel(daemon: &Daemon, session: Option<String>, name: String, mut config: ChannelConfig) -> Result<Payload, String> {
    check_name("channel", &name)?;
    config.validate()?;
    let mut st = daemon.lock();
    let sname = st.resolve(&session)?;
    let ss = st.sessions.get_mut(&sname).expect("resolved");
    crate::ops::reclaim::check_policy(&ss.session, &name, &config)?;
    // The ownership is the session's: kept there, not in each channel's configuration.
    crate::ops::uid_trace::set_ownership(&mut ss.session, &name, config.buffers.take())?;
    let started = ss.session.ever_started;
    if let Some(c) = ss.session.channels.iter_mut().find(|c| c.name == name) {
        if c.config == config {
            return Ok(Payload::Done);
        }
        if started {
            return Err(format!("channel {name} of session {sname} has buffers already; its configuration cannot change after start"));
        }
        c.config = config;
        return Ok(Payload::Done);
    }
    if started {
        return Err(format!("session {sname} has been started: channels cannot be added after start (as in LTTng)"));
    }
    if ss.session.channels.len() >= ust_core::protocol::MAX_CHANNELS as usize {
        return Err(format!("session {sname} has {} channels, the most a session can have", ss.session.channels.len()));
    }
    ss.session.channels.push(Channel::new(name, config));
    Ok(Payload::Done)
}

pub(super) fn add_context(
    daemon: &Daemon,
    session: Option<String>,
    channel: Option<String>,
    contexts: Vec<ust_core::context::ContextType>,
) -> Result<Payload, String> {
    if contexts.is_empty() {
        return Err("no context type given (-t)".into());
    }
    let mut st = daemon.lock();
    let sname = st.resolve(&session)?;
    let ss = st.sessions.get_mut(&sname).expect("resolved");
    if ss.session.ever_started {
        return Err(format!("session {sname} has been started: contexts cannot be added after start (as in LTTng)"));
    }
    let targets: Vec<usize> = match &channel {
        Some(c) => vec![ss.session.channel_index(c).ok_or_else(|| format!("session {sname} has no channel {c:?}; create it with `ust enable-channel {c}`"))?],
        None => {
            if ss.session.channels.is_empty() {
                let config = ChannelConfig { overwrite: ss.session.snapshot, ..ChannelConfig::default() };
                ss.session.channels.push(Channel::new(DEFAULT_CHANNEL, config));
            }
            (0..ss.session.channels.len()).collect()
        }
    };
    for ci in targets {
        let ch = &mut ss.session.channels[ci];
        for c in &contexts {
            if !ch.contexts.contains(c) {
                ch.contexts.push(*c);
            }
        }
        ust_core::context::validate(&ch.contexts)?;
    }
    Ok(Payload::Done)
}

pub(super) fn enable_event(
    daemon: &Daemon,
    session: Option<String>,
    channel: Option<String>,
    patterns: Vec<String>,
    level: LevelFilter,
    exclusions: Vec<String>,
    filter: Option<String>,
) -> Result<Payload, String> {
    // The CLI ran the same check; a client may not have. The filter is parsed here, once.
    let parsed = ust_ctl::config::check_enable_event(&patterns, &exclusions, filter.as_deref())?;
    let mut st = daemon.lock();
    let sname = st.resolve(&session)?;
    if parsed.is_some() {
        // A filter comparing a whole BLOB field never holds: refused now, naming the field,
        // for the events of the processes registered so far (a process registered later
        // records nothing for such a filter, as for any filter its fields cannot satisfy).
        let rules: Vec<Rule> = patterns
            .iter()
            .map(|p| Rule::new(Enabler { exclusions: exclusions.clone(), filter: filter.clone(), ..Enabler::new(p.clone(), level) }, parsed.clone()))
            .collect();
        let session = &st.sessions.get(&sname).expect("resolved").session;
        let apps = st.apps.values().filter(|a| a.alive && session.tracks_ids(a.uid, a.gid));
        if let Some(m) = apps.flat_map(|a| a.events.iter()).find_map(|e| rules.iter().find_map(|r| r.whole_blob_refusal(e))) {
            return Err(m);
        }
    }
    let ss = st.sessions.get_mut(&sname).expect("resolved");
    let cname = channel.clone().unwrap_or_else(|| DEFAULT_CHANNEL.to_string());
    let ci = match ss.session.channel_index(&cname) {
        Some(i) => i,
        None if channel.is_none() => {
            if ss.session.ever_started {
                return Err(format!("session {sname} has been started and has no channel {DEFAULT_CHANNEL}; name a channel with -c"));
            }
            let config = ChannelConfig { overwrite: ss.session.snapshot, ..ChannelConfig::default() };
            ss.session.channels.push(Channel::new(cname.clone(), config));
            ss.session.channels.len() - 1
        }
        None => return Err(format!("session {sname} has no channel {cname:?}; create it with `ust enable-channel {cname}`")),
    };
    let ch = &mut ss.session.channels[ci];
    for p in patterns {
        match ch.enablers.iter_mut().map(|r| &mut r.enabler).find(|e| e.pattern == p && e.level == level && e.exclusions == exclusions && e.filter == filter) {
            Some(e) => e.enabled = true,
            None => ch.enablers.push(Rule::new(Enabler { exclusions: exclusions.clone(), filter: filter.clone(), ..Enabler::new(p, level) }, parsed.clone())),
        }
    }
    for id in st.apps_of(&sname) {
        st.push_masks(id);
    }
    Ok(Payload::Done)
}

/// `enable-event --userspace-probe`: adds (or enables again) a probe rule of the session.
pub(super) fn enable_userspace_probe(daemon: &Daemon, session: Option<String>, probe: ust_ctl::probes::UserspaceProbe) -> Result<Payload, String> {
    ust_ctl::probes::check_probe(&probe)?;
    let mut st = daemon.lock();
    let sname = st.resolve(&session)?;
    let ss = st.sessions.get_mut(&sname).expect("resolved");
    if ss.relay.is_some() {
        return Err(format!("session {sname} streams to a relay daemon: userspace probes are recorded in a local output only"));
    }
    if ss.session.snapshot {
        return Err(format!(
            "session {sname} is a snapshot session: userspace probes are written as they hit, not kept in the flight recorder's buffers; use a session without --snapshot"
        ));
    }
    if ss.session.clock == Some(ust_core::clock::ClockKind::Tsc) {
        return Err(format!("session {sname} uses the TSC clock: userspace probes are recorded on CLOCK_MONOTONIC (create the session without --clock tsc)"));
    }
    if ss.session.started {
        return Err(format!("session {sname} is recording: stop it to change its userspace probes (they are placed at start)"));
    }
    let probes = &mut ss.session.probes;
    if let Some(p) = probes.iter_mut().find(|p| p.name == probe.name) {
        if p.location != probe.location {
            return Err(format!("session {sname} has a userspace probe named {} already, on {}: choose another name", p.name, p.location.spec()));
        }
        p.enabled = true;
        return Ok(Payload::Done);
    }
    if probes.len() >= ust_ctl::probes::MAX_SESSION_PROBES {
        return Err(format!("session {sname} has {} userspace probes: the most a session keeps", probes.len()));
    }
    probes.push(ust_ctl::probes::UserspaceProbe { enabled: true, ..probe });
    Ok(Payload::Done)
}

/// `disable-event -k`: disables userspace-probe rules by name (or all of them).
pub(super) fn disable_userspace_probes(daemon: &Daemon, session: Option<String>, names: Vec<String>, all: bool) -> Result<Payload, String> {
    let mut st = daemon.lock();
    let sname = st.resolve(&session)?;
    let ss = st.sessions.get_mut(&sname).expect("resolved");
    if ss.session.started {
        return Err(format!("session {sname} is recording: stop it to change its userspace probes"));
    }
    let probes = &mut ss.session.probes;
    if all {
        if probes.is_empty() {
            return Err(format!("session {sname} has no userspace probe"));
        }
        probes.iter_mut().for_each(|p| p.enabled = false);
        return Ok(Payload::Done);
    }
    if names.is_empty() {
        return Err("no event name given (or use -a)".into());
    }
    if let Some(n) = names.iter().find(|n| !probes.iter().any(|p| &p.name == *n)) {
        return Err(format!("session {sname} has no userspace probe named {n:?}"));
    }
    probes.iter_mut().filter(|p| names.contains(&p.name)).for_each(|p| p.enabled = false);
    Ok(Payload::Done)
}

pub(super) fn disable_event(daemon: &Daemon, session: Option<String>, channel: Option<String>, patterns: Vec<String>, all: bool) -> Result<Payload, String> {
    let mut st = daemon.lock();
    let sname = st.resolve(&session)?;
    let ss = st.sessions.get_mut(&sname).expect("resolved");
    let cname = channel.unwrap_or_else(|| DEFAULT_CHANNEL.to_string());
    let Some(ci) = ss.session.channel_index(&cname) else {
        return Err(format!("session {sname} has no channel {cname:?}"));
    };
    let ch = &mut ss.session.channels[ci];
    if all {
        if ch.enablers.is_empty() {
            return Err(format!("no event is enabled in channel {cname} of session {sname}"));
        }
        ch.enablers.iter_mut().for_each(|e| e.enabler.enabled = false);
    } else {
        if patterns.is_empty() {
            return Err("no event name given (or use -a)".into());
        }
        for p in &patterns {
            if !ch.enablers.iter().any(|e| &e.enabler.pattern == p) {
                return Err(format!("event {p:?} is not enabled in channel {cname} of session {sname}"));
            }
        }
        for e in ch.enablers.iter_mut().map(|r| &mut r.enabler).filter(|e| patterns.contains(&e.pattern)) {
            e.enabled = false;
        }
    }
    for id in st.apps_of(&sname) {
        st.push_masks(id);
    }
    Ok(Payload::Done)
}

/// `ust track --vpid` (`track`) or `ust untrack --vpid`: changes the session's tracker,
/// attaches the live processes it now takes (if the session is started), pushes every
/// process of the session its masks (zero for the session's slots of an untracked one)
/// and waits until each confirmed (`Sync`, at most [`SYNC_TIMEOUT`]), so that when `ust`
/// returns, an untracked process records nothing more for the session.
pub(super) fn track_vpids(daemon: &Daemon, session: Option<String>, pids: Vec<i32>, all: bool, track: bool) -> Result<Payload, String> {
    let verb = if track { "track" } else { "untrack" };
    if all && !pids.is_empty() {
        return Err(format!("{verb} --vpid: give process ids or --all, not both"));
    }
    if !all && pids.is_empty() {
        return Err(format!("{verb} --vpid: no process id given (or use --all)"));
    }
    if pids.len() > MAX_TRACKED_VPIDS {
        return Err(format!("{} process ids given, at most {MAX_TRACKED_VPIDS}", pids.len()));
    }
    let (sname, tracker, unchanged, waits) = {
        let mut st = daemon.lock();
        let sname = st.resolve(&session)?;
        let ss = st.sessions.get_mut(&sname).expect("resolved");
        let t = &mut ss.session.vpid_tracker;
        let unchanged = match (all, track) {
            (true, true) => {
                *t = VpidTracker::All;
                Vec::new()
            }
            (true, false) => {
                *t = VpidTracker::Only(Default::default());
                Vec::new()
            }
            (false, true) => t.track(&pids).map_err(|e| format!("session {sname}: {e}"))?,
            (false, false) => t.untrack(&pids).map_err(|e| format!("session {sname}: {e}"))?,
        };
        let tracker = t.clone();
        let waits = retrack_live_apps(daemon, &mut st, &sname);
        (sname, tracker, unchanged, waits)
    };
    wait_syncs(&sname, waits, "the tracker change");
    crate::log!("session {sname}: tracked process ids: {}", tracker.describe());
    Ok(Payload::Tracker { session: sname, tracker, unchanged })
}
