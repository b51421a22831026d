//! The daemon's handling of each control request ([`ust_ctl::protocol`]) and the server
//! loop of one `ctl` connection.
//!
//! `stop` follows LTTng's order: clear the enable masks (`SetEnabled`), `Sync` every
//! process of the session and wait for `SyncDone` (at most [`SYNC_TIMEOUT`]: a dead or
//! stuck writer never blocks it), flush every buffer from the reader side, drain.
//! `destroy` is `stop`, then `RemoveChannel`, a final drain, and closing the files.

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ust_core::protocol::{read_frame, write_frame, DaemonMessage, ProtocolError};
use ust_ctl::protocol::*;

use crate::apps::SessionState;
use crate::buffers::{Stream, StreamStats};
use crate::daemon::Daemon;
use crate::session::{check_name, Channel, ChannelConfig, Enabler, LevelFilter, Session, VpidTracker, DEFAULT_CHANNEL, MAX_TRACKED_VPIDS};

/// Longest wait for `SyncDone` from the processes of a session at `stop`.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a new `ctl` connection has to send its first request: a peer that connects
/// and never speaks gets an error and is closed instead of holding a thread forever.
/// (Later requests may come after any pause: `ust trace` keeps its connection while the
/// command runs.)
pub const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the rest of a request may take once its first byte arrived: a frame cut
/// short by a stuck or malicious peer does not pin the thread.
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(2);

type Res<T> = Result<T, String>;

fn resolve(st: &crate::apps::State, session: &Option<String>) -> Res<String> {
    match session {
        Some(n) => {
            if st.sessions.contains_key(n) {
                Ok(n.clone())
            } else {
                Err(format!("no session named {n:?} (see `ust list`)"))
            }
        }
        None => match &st.current {
            Some(n) if st.sessions.contains_key(n) => Ok(n.clone()),
            _ => Err("no current session: create one with `ust create`, or name one with -s/--session".into()),
        },
    }
}

fn check_pattern(p: &str) -> Res<()> {
    if p.is_empty() || p.len() > 300 || !p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '*' | '.' | '-' | '\\')) {
        return Err(format!("invalid event name or glob {p:?}: use provider:name with letters, digits, _ and * wildcards"));
    }
    // As LTTng (and `ust enable-event`): at most one `:` not escaped as `\:`, with a
    // non-empty provider before it and name after it.
    let mut colons = Vec::new();
    let mut escaped = false;
    for (i, c) in p.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ':' => colons.push(i),
            _ => {}
        }
    }
    match colons[..] {
        [] => Ok(()),
        [i] if i > 0 && i + 1 < p.len() => Ok(()),
        [_] => Err(format!("invalid event name {p:?}: the provider and the name (provider:name) must not be empty")),
        _ => Err(format!("invalid event name {p:?}: at most one `:`, between provider and name (write a `:` of a name as `\\:`)")),
    }
}

/// Handles one command. Never panics on its input; errors are messages for the user.
pub fn handle(daemon: &Daemon, cmd: Command) -> Reply {
    let r = match cmd {
        Command::Ping => Ok(Payload::Pong { version: CTL_VERSION, pid: std::process::id(), rundir: daemon.rundir.clone() }),
        Command::CreateSession { name, output, token } => create(daemon, name, output, token, CreateOptions::default()),
        Command::CreateSessionWith { name, output, options } => create(daemon, name, output, None, options),
        Command::EnableChannel { session, name, config } => enable_channel(daemon, session, name, config),
        Command::EnableEvent { session, channel, patterns, level, exclusions, filter } => {
            enable_event(daemon, session, channel, patterns, level, exclusions, filter)
        }
        Command::AddContext { session, channel, contexts } => add_context(daemon, session, channel, contexts),
        Command::DisableEvent { session, channel, patterns, all } => disable_event(daemon, session, channel, patterns, all),
        Command::Start { session } => start(daemon, session),
        Command::Rotate { session } => {
            let name = resolve(&daemon.lock(), &session);
            name.and_then(|n| rotate(daemon, &n)).map(|archive| Payload::Rotated { archive })
        }
        Command::Stop { session } => stop_cmd(daemon, session),
        Command::Destroy { session } => {
            let name = resolve(&daemon.lock(), &session);
            name.and_then(|n| destroy(daemon, &n)).map(Payload::Destroyed)
        }
        Command::ListSessions => Ok(Payload::Sessions(list_sessions(daemon))),
        Command::ListSession { session } => {
            let name = resolve(&daemon.lock(), &session);
            name.and_then(|n| detail(daemon, &n).ok_or_else(|| format!("no session named {n:?}"))).map(Payload::Session)
        }
        Command::ListApps => Ok(Payload::Apps(list_apps(daemon))),
        Command::Status { session } => status(daemon, session),
        Command::TrackVpid { session, pids, all } => track_vpids(daemon, session, pids, all, true),
        Command::UntrackVpid { session, pids, all } => track_vpids(daemon, session, pids, all, false),
        Command::SnapshotRecord { session, max_size } => {
            let name = resolve(&daemon.lock(), &session);
            name.and_then(|n| crate::snapshot::record(daemon, &n, max_size)).map(Payload::Snapshot)
        }
    };
    match r {
        Ok(p) => Reply::Ok(Box::new(p)),
        Err(message) => Reply::Error { message },
    }
}

fn create(daemon: &Daemon, name: String, output: PathBuf, token: Option<String>, options: CreateOptions) -> Res<Payload> {
    let CreateOptions { snapshot, shm_path, clock } = options;
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
    if snapshot && token.is_some() {
        return Err("a `ust trace` session cannot be a snapshot session".into());
    }
    let shm_dir = match shm_path {
        None => None,
        Some(p) => {
            if !p.is_absolute() {
                return Err(format!("--shm-path {} is not an absolute path", p.display()));
            }
            let d = p.join(format!("{name}-{}", ust_ctf::datetime::stamp()));
            std::fs::create_dir_all(&d).map_err(|e| format!("cannot create shm directory {}: {e}", d.display()))?;
            Some(d)
        }
    };
    std::fs::create_dir_all(&output).map_err(|e| format!("cannot create output directory {}: {e}", output.display()))?;
    let mut st = daemon.lock();
    if st.sessions.contains_key(&name) {
        return Err(format!("a session named {name:?} already exists"));
    }
    let is_trace = token.is_some();
    let mut session = Session::new(name.clone(), output.clone(), token);
    session.snapshot = snapshot;
    session.shm_dir = shm_dir;
    session.clock = clock;
    st.sessions.insert(name.clone(), SessionState { session, traces: Default::default() });
    if !is_trace {
        st.current = Some(name.clone());
    }
    crate::log!("session {name} created{}, output {}", if snapshot { " (snapshot)" } else { "" }, output.display());
    Ok(Payload::Created { name, output })
}

fn enable_channel(daemon: &Daemon, session: Option<String>, name: String, config: ChannelConfig) -> Res<Payload> {
    check_name("channel", &name)?;
    config.validate()?;
    let mut st = daemon.lock();
    let sname = resolve(&st, &session)?;
    let ss = st.sessions.get_mut(&sname).expect("resolved");
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

fn add_context(daemon: &Daemon, session: Option<String>, channel: Option<String>, contexts: Vec<ust_core::context::ContextType>) -> Res<Payload> {
    if contexts.is_empty() {
        return Err("no context type given (-t)".into());
    }
    let mut st = daemon.lock();
    let sname = resolve(&st, &session)?;
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

fn enable_event(
    daemon: &Daemon,
    session: Option<String>,
    channel: Option<String>,
    patterns: Vec<String>,
    level: LevelFilter,
    exclusions: Vec<String>,
    filter: Option<String>,
) -> Res<Payload> {
    if patterns.is_empty() {
        return Err("no event name given".into());
    }
    for p in patterns.iter().chain(&exclusions) {
        check_pattern(p)?;
    }
    if exclusions.len() > 64 {
        return Err("too many exclusions (at most 64)".into());
    }
    if !exclusions.is_empty() && !patterns.iter().any(|p| p.contains('*')) {
        return Err("--exclude needs a glob event name (with `*`): an exact name has nothing to exclude".into());
    }
    if let Some(f) = &filter {
        ust_ctl::filter::parse(f).map_err(|e| format!("invalid filter: {}", e.render(f)))?;
    }
    let mut st = daemon.lock();
    let sname = resolve(&st, &session)?;
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
        match ch.enablers.iter_mut().find(|e| e.pattern == p && e.level == level && e.exclusions == exclusions && e.filter == filter) {
            Some(e) => e.enabled = true,
            None => ch.enablers.push(Enabler { exclusions: exclusions.clone(), filter: filter.clone(), ..Enabler::new(p, level) }),
        }
    }
    for id in st.apps_of(&sname) {
        st.push_masks(id);
    }
    Ok(Payload::Done)
}

fn disable_event(daemon: &Daemon, session: Option<String>, channel: Option<String>, patterns: Vec<String>, all: bool) -> Res<Payload> {
    let mut st = daemon.lock();
    let sname = resolve(&st, &session)?;
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
        ch.enablers.iter_mut().for_each(|e| e.enabled = false);
    } else {
        if patterns.is_empty() {
            return Err("no event name given (or use -a)".into());
        }
        for p in &patterns {
            if !ch.enablers.iter().any(|e| &e.pattern == p) {
                return Err(format!("event {p:?} is not enabled in channel {cname} of session {sname}"));
            }
        }
        for e in ch.enablers.iter_mut().filter(|e| patterns.contains(&e.pattern)) {
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
fn track_vpids(daemon: &Daemon, session: Option<String>, pids: Vec<i32>, all: bool, track: bool) -> Res<Payload> {
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
        let sname = resolve(&st, &session)?;
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
        let live: Vec<u64> = st.apps.values().filter(|a| a.alive).map(|a| a.id).collect();
        for id in live {
            st.attach(&sname, id);
        }
        let waits = push_masks_and_sync(&mut st, &sname);
        (sname, tracker, unchanged, waits)
    };
    wait_syncs(&sname, waits, "the tracker change");
    crate::log!("session {sname}: tracked process ids: {}", tracker.describe());
    Ok(Payload::Tracker { session: sname, tracker, unchanged })
}

fn start(daemon: &Daemon, session: Option<String>) -> Res<Payload> {
    let mut st = daemon.lock();
    let sname = resolve(&st, &session)?;
    let ss = st.sessions.get_mut(&sname).expect("resolved");
    if ss.session.started {
        return Err(format!("session {sname} is already started"));
    }
    if ss.session.channels.is_empty() {
        return Err(format!("session {sname} has no channel: enable an event (`ust enable-event -a`) or a channel first"));
    }
    if !ss.session.ever_started {
        ss.session.chunk_begin = ust_ctf::datetime::now();
    }
    ss.session.started = true;
    ss.session.ever_started = true;
    let ids: Vec<u64> = st.apps.values().filter(|a| a.alive).map(|a| a.id).collect();
    for id in &ids {
        st.attach(&sname, *id);
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
type SyncWait = (Arc<crate::apps::SyncState>, u64, i32);

/// Queues `SetEnabled` with fresh masks, then `Sync`, to every live process that has a
/// slot in session `name`; the caller releases the state lock and [`wait_syncs`].
fn push_masks_and_sync(st: &mut crate::apps::State, name: &str) -> Vec<SyncWait> {
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

/// Waits until every process of `waits` answered its `Sync` (so it has applied what was
/// queued before), at most [`SYNC_TIMEOUT`] in all; logs the ones that did not.
fn wait_syncs(name: &str, waits: Vec<SyncWait>, what: &str) {
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
fn rotate_chunk(daemon: &Daemon, name: &str, last: bool) -> Res<PathBuf> {
    let (archive, jobs) = {
        let mut st = daemon.lock();
        let Some(ss) = st.sessions.get_mut(name) else { return Err(format!("no session named {name:?}")) };
        if ss.session.snapshot {
            return Err(format!("session {name} is a snapshot session: it writes no trace to rotate (use `ust snapshot record`)"));
        }
        if !ss.session.ever_started {
            return Err(format!("session {name} has not been started: there is no trace to rotate"));
        }
        let now = ust_ctf::datetime::now();
        let archive = ss.session.output.join("archives").join(format!(
            "{}-{}-{}",
            ust_ctf::datetime::iso_at(ss.session.chunk_begin),
            ust_ctf::datetime::iso_at(now),
            ss.session.rotations
        ));
        ss.session.rotations += 1;
        ss.session.chunk_begin = now;
        let mut jobs = Vec::new();
        for t in ss.traces.values_mut().filter(|t| !t.archived) {
            let Some(leaf) = t.dir.file_name() else { continue };
            let done = t.gone || last;
            jobs.push((t.dir.clone(), archive.join("ust").join("pid").join(leaf), t.streams.clone(), done));
            t.archived = done;
        }
        (archive, jobs)
    };
    std::fs::create_dir_all(&archive).map_err(|e| format!("cannot create {}: {e}", archive.display()))?;
    for (dir, dest, streams, gone) in jobs {
        std::fs::create_dir_all(&dest).map_err(|e| format!("cannot create {}: {e}", dest.display()))?;
        // The metadata first: the archive is complete before any of its packets is there.
        std::fs::copy(dir.join("metadata"), dest.join("metadata")).map_err(|e| format!("cannot copy {}/metadata: {e}", dir.display()))?;
        for s in &streams {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            s.rotate_chunk(&dest).map_err(|e| format!("rotating {}/{}: {e}", dir.display(), s.files.base))?;
        }
        if gone {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    crate::log!("session {name}: trace chunk archived in {}", archive.display());
    Ok(archive)
}

fn stop_cmd(daemon: &Daemon, session: Option<String>) -> Res<Payload> {
    let sname = resolve(&daemon.lock(), &session)?;
    if !daemon.lock().sessions.get(&sname).is_some_and(|s| s.session.started) {
        return Err(format!("session {sname} is not started"));
    }
    stop(daemon, &sname);
    Ok(Payload::Done)
}

fn session_streams(ss: &SessionState) -> Vec<Arc<Mutex<Stream>>> {
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
    let mut archives = Vec::new();
    if ss.session.rotations > 0 {
        // As LTTng: once a session has been rotated, its last chunk is archived too.
        let mut st = daemon.lock();
        let sname = ss.session.name.clone();
        for (id, t) in &ss.traces {
            for s in &t.streams {
                finish_stream(&mut s.lock().unwrap_or_else(|e| e.into_inner()), t.gone || dead.contains(id));
            }
        }
        st.sessions.insert(sname.clone(), ss);
        drop(st);
        let r = rotate_chunk(daemon, &sname, true);
        let ss2 = daemon.lock().sessions.remove(&sname).expect("just put back");
        match r {
            Ok(a) => archives.push(a),
            Err(e) => crate::log!("session {sname}: archiving the last chunk failed: {e}"),
        }
        if let Ok(rd) = std::fs::read_dir(ss2.session.output.join("archives")) {
            archives = rd.flatten().map(|e| e.path()).collect();
            archives.sort();
        }
        let _ = std::fs::remove_dir(ss2.session.output.join("ust").join("pid"));
        let _ = std::fs::remove_dir(ss2.session.output.join("ust"));
        return Ok(finish_report(name, ss2, archives, &dead));
    }
    Ok(finish_report(name, ss, archives, &dead))
}

/// Final drain and close of a stream: a dead process's through recovery of its
/// incomplete sub-buffers ([`Stream::finish_dead`]), a live one's normally.
fn finish_stream(s: &mut Stream, process_dead: bool) {
    if process_dead {
        s.finish_dead();
    } else {
        s.finish();
    }
}

fn finish_report(name: &str, ss: SessionState, archives: Vec<PathBuf>, dead: &[u64]) -> DestroyReport {
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
        traces.push(TraceReport {
            pid: t.pid,
            procname: t.procname.clone(),
            dir: t.dir.clone(),
            events: t.events.clone(),
            context_sizes: t.context_sizes.clone(),
            discarded: stats.discarded,
            packets: stats.packets,
            bad_packets: stats.bad_packets,
        });
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
    DestroyReport { name: name.to_string(), output: ss.session.output.clone(), traces, archives, output_error: ss.session.output_error.get() }
}

/// Destroys every session (daemon shutdown).
pub fn destroy_all(daemon: &Daemon) {
    let names: Vec<String> = daemon.lock().sessions.keys().cloned().collect();
    for n in names {
        let _ = destroy(daemon, &n);
    }
}

fn summary(st: &crate::apps::State, ss: &SessionState) -> SessionSummary {
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
    }
}

fn list_sessions(daemon: &Daemon) -> Vec<SessionSummary> {
    let st = daemon.lock();
    st.sessions.values().map(|ss| summary(&st, ss)).collect()
}

/// `ust list SESSION`: configuration, enablers, counts. Stream counters are read after the
/// state lock is released.
pub fn detail(daemon: &Daemon, name: &str) -> Option<SessionDetail> {
    let (mut d, per_channel) = {
        let st = daemon.lock();
        let ss = st.sessions.get(name)?;
        let channels = ss
            .session
            .channels
            .iter()
            .map(|c| ChannelDetail {
                name: c.name.clone(),
                config: c.config.clone(),
                enablers: c.enablers.clone(),
                contexts: c.contexts.clone(),
                discarded: 0,
                packets: 0,
                bytes: 0,
                bad_packets: 0,
                overwritten: 0,
                lost_packets: 0,
            })
            .collect();
        let processes = ss
            .traces
            .values()
            .map(|t| ProcessDetail {
                pid: t.pid,
                procname: t.procname.clone(),
                dir: t.dir.clone(),
                alive: !t.gone,
                post_mortem: t.post_mortem.clone(),
            })
            .collect();
        let streams: Vec<Arc<Mutex<Stream>>> = session_streams(ss);
        (SessionDetail { summary: summary(&st, ss), channels, processes, vpid_tracker: ss.session.vpid_tracker.clone() }, streams)
    };
    for s in per_channel {
        let s = s.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = d.channels.iter_mut().find(|c| c.name == s.channel) {
            // Stats derive from app-writable memory: saturate, never overflow.
            c.discarded = c.discarded.saturating_add(s.stats.discarded);
            c.packets = c.packets.saturating_add(s.stats.packets);
            c.bytes = c.bytes.saturating_add(s.stats.bytes);
            c.bad_packets = c.bad_packets.saturating_add(s.stats.bad_packets);
            c.overwritten = c.overwritten.saturating_add(s.stats.overwritten);
            c.lost_packets = c.lost_packets.saturating_add(s.stats.lost_packets);
        }
    }
    Some(d)
}

fn list_apps(daemon: &Daemon) -> Vec<AppInfo> {
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
                    fields: e
                        .fields
                        .iter()
                        .map(|f| FieldInfo { name: f.name.to_string(), ty: type_name(f), ctf_type: f.ty.clone() })
                        .collect(),
                    location: e.location.to_string(),
                })
                .collect(),
        })
        .collect()
}

fn status(daemon: &Daemon, session: Option<String>) -> Res<Payload> {
    let (current, name, apps) = {
        let st = daemon.lock();
        let name = match &session {
            Some(_) => Some(resolve(&st, &session)?),
            None => st.current.clone().filter(|c| st.sessions.contains_key(c)),
        };
        (st.current.clone(), name, st.apps.values().filter(|a| a.alive).count())
    };
    let session = name.and_then(|n| detail(daemon, &n));
    Ok(Payload::Status(StatusReport { daemon_pid: std::process::id(), rundir: daemon.rundir.clone(), current, session, apps }))
}

/// Sends `Reply::Error{message}` (best effort).
pub fn reply_error(sock: &UnixStream, message: &str) {
    let _ = write_frame(sock, &Reply::Error { message: message.to_string() });
}

/// Waits until `sock` is readable (or closed). The first wait is bounded by
/// [`FIRST_REQUEST_TIMEOUT`]; later ones are not, but end when the daemon shuts down.
/// False on timeout or shutdown.
fn wait_readable(daemon: &Daemon, sock: &UnixStream, first: bool) -> bool {
    use rustix::event::{PollFd, PollFlags};
    let start = Instant::now();
    loop {
        if daemon.shutting_down() {
            return false;
        }
        let left = if first { FIRST_REQUEST_TIMEOUT.saturating_sub(start.elapsed()) } else { Duration::from_millis(500) };
        if first && left.is_zero() {
            return false;
        }
        let slice = left.min(Duration::from_millis(500));
        let ts = rustix::time::Timespec { tv_sec: 0, tv_nsec: slice.subsec_nanos() as _ };
        let mut fds = [PollFd::new(sock, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => return true,
            Err(_) => return true, // let the read report it
        }
    }
}

/// Serves one `ctl` connection: one reply per request, until the client closes it, sends
/// something that is not a request (an error reply, then the connection closes), sends
/// nothing within [`FIRST_REQUEST_TIMEOUT`] of connecting, or leaves a request unfinished
/// for [`FRAME_TIMEOUT`].
pub fn serve(daemon: Arc<Daemon>, sock: UnixStream) {
    let _ = sock.set_read_timeout(Some(FRAME_TIMEOUT));
    let _ = sock.set_write_timeout(Some(FRAME_TIMEOUT));
    let mut first = true;
    loop {
        if !wait_readable(&daemon, &sock, first) {
            if first && !daemon.shutting_down() {
                crate::log!("ctl: no request within {} ms of connecting; connection closed", FIRST_REQUEST_TIMEOUT.as_millis());
                reply_error(&sock, &format!("no request within {} ms of connecting; connection closed", FIRST_REQUEST_TIMEOUT.as_millis()));
            }
            return;
        }
        first = false;
        let req: Request = match read_frame(&sock) {
            Ok(r) => r,
            Err(ProtocolError::Eof) => return,
            Err(ProtocolError::Io(e)) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                crate::log!("ctl: request not finished within {} ms; connection closed", FRAME_TIMEOUT.as_millis());
                reply_error(&sock, &format!("request not finished within {} ms; connection closed", FRAME_TIMEOUT.as_millis()));
                return;
            }
            Err(e) => {
                crate::log!("ctl: malformed request: {e}; connection closed");
                reply_error(&sock, &format!("malformed request: {e}"));
                return;
            }
        };
        if req.version != CTL_VERSION {
            reply_error(
                &sock,
                &format!("control protocol version {} is not supported (this daemon speaks {CTL_VERSION}); use matching ust and ust-consumerd", req.version),
            );
            return;
        }
        let reply = handle(&daemon, req.command);
        if write_frame(&sock, &reply).is_err() {
            return;
        }
    }
}
