//! Per-UID buffers (`--buffers-uid`, LTTng's default for user space): one set of per-CPU
//! buffers per user per channel, shared by every process of that user in the session, and
//! one trace, `<output>/ust/uid/<UID>/64-bit/`.
//!
//! ```text
//! first process of uid U ──> create trace: dir, metadata, buffers (memfds, or files
//!                              under --shm-path), streams
//! every process of uid U ──> registry.add(its events) ─ new? ─> metadata rewritten (tmp+rename)
//!                        ──> AddChannel{shared_ids} + a duplicate of each buffer descriptor
//!                        ──> SetEnabled{masks, ids}: its events' ids in this trace
//! process gone           ──> forgotten (nothing of it is kept: the trace is the user's)
//! ```
//!
//! The trace lives in [`crate::state::SessionState::traces`] like a process's, under the
//! key [`trace_key`]`(uid)` (above every process id), so the drain, `stop`, `rotate`,
//! snapshots and `destroy` handle it as they handle a process's trace; what only a per-UID
//! trace has (its event [`Registry`], the descriptors handed to each new process, its
//! live members) is in [`Shared`].
//!
//! Event ids: a record in a shared buffer must carry an id every process agrees on, so the
//! daemon assigns them ([`Registry`]) and sends each process the table of its events' ids
//! in that channel with every `SetEnabled` ([`ust_core::protocol::ChannelIds`]). The
//! runtime keeps the table beside the channel and the emit path loads the id from it (two
//! loads more than a per-PID record, no lock, no round trip), as LTTng-UST keeps the id
//! its session daemon returned for each event in each channel.

use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ringbuffer::StreamIdentity;
use ust_core::clock::{ClockKind, TraceClock};
use ust_core::protocol::{ChannelGrant, ChannelIds, DaemonMessage, MAX_CHANNELS};
use ust_core::EventDesc;

use crate::process_trace::{buffer_config, ProcessTrace, SetupError};
use crate::registry::Registry;
use crate::session::{BufferOwnership, Session};
use crate::state::{SessionState, State};
use crate::stream::{Stream, StreamSetup, StreamShm, TraceFiles};

/// First [`ust_core::ABI_MINOR`] whose runtimes can write per-UID channels.
pub const SINCE_MINOR: u16 = 5;

/// The key of the per-UID trace of `uid` in a session's traces: above every process id.
pub const fn trace_key(uid: u32) -> u64 {
    (1 << 63) | uid as u64
}

/// True for a key made by [`trace_key`].
pub const fn is_uid_key(key: u64) -> bool {
    key >> 63 == 1
}

/// `<output>/ust/uid/<uid>/64-bit` (LTTng's layout; `64-bit` is the word size of the
/// processes that write it).
pub fn uid_dir(output: &Path, uid: u32) -> PathBuf {
    output.join("ust").join("uid").join(uid.to_string()).join(format!("{}-bit", usize::BITS))
}

/// The path of the per-UID trace of `uid` relative to the session on a relay daemon:
/// `ust/uid/<uid>/64-bit`, as lttng-sessiond names a per-UID trace to lttng-relayd.
pub fn relay_path(uid: u32) -> String {
    format!("ust/uid/{uid}/{}-bit", usize::BITS)
}

/// The trace's directory relative to the session's output (`ust/pid/<proc dir>` or
/// `ust/uid/<uid>/64-bit`): where a snapshot or an archive puts its copy.
pub fn rel_dir(t: &ProcessTrace, output: &Path) -> PathBuf {
    match t.dir.strip_prefix(output) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.to_path_buf(),
        _ => Path::new("ust").join("pid").join(t.dir.file_name().unwrap_or_default()),
    }
}

/// What only a per-UID trace has.
#[derive(Debug)]
pub struct Shared {
    /// The user.
    pub uid: u32,
    /// Its events, ids assigned here.
    pub registry: Registry,
    /// The daemon's descriptor of every buffer, channel-major then CPU: a duplicate of
    /// each goes to every process that joins.
    pub fds: Vec<Vec<OwnedFd>>,
    /// Live processes writing the buffers (daemon app ids).
    pub members: BTreeSet<u64>,
    /// Deaths of members, watched by every stream ([`crate::dead_writers`]).
    pub deaths: Arc<crate::dead_writers::Deaths>,
}

/// Applies `--buffers-uid/--buffers-pid` of `enable-channel NAME`: the first channel of a
/// session sets the session's kind, a later one must agree.
///
/// # Errors
/// LTTng's "Buffer ownership mismatch for session" when it does not.
pub fn set_ownership(s: &mut Session, channel: &str, want: Option<BufferOwnership>) -> Result<(), String> {
    let Some(want) = want else { return Ok(()) };
    let others = s.channels.iter().any(|c| c.name != channel);
    if want == s.buffers {
        return Ok(());
    }
    if others || s.ever_started {
        return Err(format!(
            "Buffer ownership mismatch for session {}: its channels are {} ({}); a session's channels all have one kind",
            s.name,
            s.buffers,
            if s.buffers == BufferOwnership::Uid { "--buffers-uid" } else { "--buffers-pid" }
        ));
    }
    s.buffers = want;
    Ok(())
}

/// Attaches process `app_id` to the per-UID trace of its user in session `name` (made
/// now if it is the user's first process): registers its events, hands it the shared
/// buffers. `Ok(true)` when streams were made (wake the drain).
///
/// # Errors
/// Why the process is not traced.
pub(crate) fn attach(st: &mut State, name: &str, app_id: u64) -> Result<bool, String> {
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
        let need = ss.session.channels.len() as u64 * u64::from(ncpus) * 3 + crate::fds::FD_MARGIN;
        if crate::fds::fd_headroom() < need {
            return Err(format!("per-UID trace of uid {uid} not made: out of file descriptors ({})", crate::fds::fd_usage()));
        }
        let tsc = if ss.session.clock.or(app.clock) == Some(ClockKind::Tsc) { st.sessions.get_mut(name).and_then(|ss| ss.session.tsc_params()) } else { None };
        let ss = st.sessions.get(name).expect("checked above");
        let trace = create(&ss.session, uid, ncpus, tsc, &mut st.next_instance).map_err(|e| format!("per-UID trace of uid {uid} not made: {e}"))?;
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
    let nbuf = t.streams.len() / ss.session.channels.len().max(1);
    let app = st.apps.get_mut(&app_id).expect("checked above");
    for (ci, channel, contexts, fds, blocking) in grants {
        let slot = (0..MAX_CHANNELS).find(|s| !app.slots.contains_key(s)).expect("counted above");
        app.slots.insert(slot, (name.to_string(), ci));
        let grant =
            ChannelGrant { slot, session: name.to_string(), channel, ncpus: nbuf as u32, contexts, tsc, shared_ids: true, blocking_timeout_us: blocking };
        app.send(DaemonMessage::AddChannel(grant), fds);
    }
    Ok(made)
}

/// Registers `events` of one process in trace `t`; when some are new, rewrites the
/// metadata (temporary file + rename) and gives the streams the longer list, before any
/// mask can enable them. Refusals are logged.
fn add_events(session: &Session, t: &mut ProcessTrace, events: &[EventDesc], who: &str) {
    let Some(shared) = t.shared.as_mut() else { return };
    let added = shared.registry.add(events, who);
    for m in &added.refused {
        crate::log!("session {}: {m}", session.name);
    }
    if added.new == 0 {
        return;
    }
    let all = shared.registry.events();
    t.metadata = render(session, shared.uid, t.uuid, t.tsc, &all);
    if let Some(m) = t.relay.as_mut() {
        // A network session: what the new events add goes on the trace's metadata stream
        // (events are declared last, so the text only grows).
        m.update(&t.metadata);
    } else if let Some(out) = &t.out {
        if let Err(e) = ust_ctf::metadata::write_atomically(out, &t.metadata) {
            crate::log!("session {}: rewriting {}/metadata failed: {e}", session.name, t.dir.display());
        }
    }
    // `--shm-path`: the buffer set keeps up with the registry, so `ust crash-dump` can
    // decode every id a writer may use (written before any mask enables them).
    if let Some(d) = &t.shm_dir {
        if let Err(e) = crate::process_trace::write_shm_set(d, &t.metadata, &all, &t.context_sizes) {
            crate::log!("session {}: rewriting the buffer set in {} failed: {e}", session.name, d.display());
        }
    }
    // A brief hold of each stream (the drain holds one only while it copies packets).
    for s in &t.streams {
        s.lock().unwrap_or_else(|e| e.into_inner()).events = all.clone();
    }
    t.events = all;
}

/// Late events of process `app_id` (`RegisterEvents`, a `dlopen`ed library): registered
/// in every per-UID trace it writes. The caller pushes the masks (and ids) afterwards.
pub(crate) fn register_events(st: &mut State, app_id: u64) {
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
pub(crate) fn forget(st: &mut State, app_id: u64) {
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

/// The ids of `events` (a process of user `uid`) in the per-UID trace of session `ss`;
/// `None` when the session is per-PID or has no trace of that user.
pub fn ids_for(ss: &SessionState, uid: u32, events: &[EventDesc]) -> Option<Vec<u32>> {
    if ss.session.buffers != BufferOwnership::Uid {
        return None;
    }
    Some(ss.traces.get(&trace_key(uid))?.shared.as_ref()?.registry.ids_of(events))
}

/// The [`ChannelIds`] of every per-UID slot of process `app_id`, for `SetEnabled`.
pub fn channel_ids(st: &State, app_id: u64) -> Vec<ChannelIds> {
    let Some(app) = st.apps.get(&app_id) else { return Vec::new() };
    let mut out = Vec::new();
    for (slot, (sname, _)) in &app.slots {
        if let Some(ids) = st.sessions.get(sname).and_then(|ss| ids_for(ss, app.uid, &app.events)) {
            out.push(ChannelIds { slot: *slot, ids });
        }
    }
    out
}

/// The TSDL metadata of the per-UID trace of `uid`.
fn render(session: &Session, uid: u32, uuid: [u8; 16], tsc: Option<ust_core::clock::TscParams>, events: &[EventDesc]) -> String {
    crate::process_trace::render_trace_metadata(session, uuid, ("", 0), Some(uid), events, tsc)
}

/// Creates the per-UID trace of `uid`: its directory (not in a snapshot session), its
/// metadata (no event yet), one buffer per CPU per channel and its stream. A buffer is a
/// sealed memfd, or with `--shm-path` a backed file in `<shm dir>/ust/uid/<uid>/64-bit/`
/// (LTTng's per-UID shm layout) beside the set's metadata, events and context sizes
/// ([`crate::process_trace::write_shm_set`]), for `ust crash-dump`.
fn create(session: &Session, uid: u32, ncpus: u32, tsc: Option<ust_core::clock::TscParams>, next_instance: &mut u64) -> Result<ProcessTrace, SetupError> {
    let dir = uid_dir(&session.output, uid);
    // Nothing is written locally by a snapshot session (its snapshots are) or a network
    // one (the relay daemon writes the trace, as `ust/uid/<uid>/64-bit` of the session).
    let live = !session.snapshot;
    let local = live && session.relay.is_none();
    let io = |what: String| move |source| SetupError::Io { what, source };
    let uuid = *uuid::Uuid::new_v4().as_bytes();
    let metadata = render(session, uid, uuid, tsc, &[]);
    let context_sizes: Vec<usize> = session.channels.iter().map(|c| ust_core::context::block_size(&c.contexts)).collect();
    let shm_dir = session.shm_dir.as_ref().map(|base| uid_dir(base, uid));
    // A network session: its streams are announced before any buffer exists.
    let (relay_meta, mut relay_streams) = crate::process_trace::announce_to_relay(session, ncpus, &relay_path(uid), &metadata)?;
    let mut out = None;
    let made = (|| {
        use std::os::unix::fs::DirBuilderExt;
        if local {
            let d = crate::process_trace::session_dir(session, &dir).map_err(io(format!("creating {}", dir.display())))?;
            out = Some(d.clone());
            ust_ctf::metadata::write_atomically(&d, &metadata).map_err(io(format!("writing {}/metadata", dir.display())))?;
        }
        if let Some(d) = &shm_dir {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(d).map_err(io(format!("creating {}", d.display())))?;
            crate::process_trace::write_shm_set(d, &metadata, &[], &context_sizes)?;
        }
        Ok::<(), SetupError>(())
    })();
    if let Err(e) = made {
        remove_made(out.as_ref(), shm_dir.as_deref());
        return Err(e);
    }
    let clock = tsc.map_or(TraceClock::Monotonic, TraceClock::Tsc);
    let events: Arc<[EventDesc]> = Vec::new().into();
    let deaths = Arc::new(crate::dead_writers::Deaths::default());
    let mut streams = Vec::new();
    let mut fds = Vec::new();
    let made = (|| {
        for (ci, ch) in session.channels.iter().enumerate() {
            let mut chan_fds = Vec::new();
            for cpu in 0..ncpus {
                let identity = StreamIdentity { uuid, stream_id: ci as u32, cpu, stream_instance_id: *next_instance };
                *next_instance += 1;
                let cfg = buffer_config(&ch.config, identity);
                let name = ust_ctf::stream_file_name(&ch.name, cpu);
                let (buffer, fd, shm) = match &shm_dir {
                    Some(d) => {
                        let (b, fd, f) = ringbuffer::shm::create_file(&cfg, &d.join(&name))?;
                        let size = b.config().file_size().unwrap_or(0) as u64;
                        let guard = crate::sigbus::register(b.map().as_ptr(), b.map().len());
                        (b, fd, StreamShm { file: Some((f, size)), guard })
                    }
                    None => {
                        let (b, fd) = ringbuffer::shm::create_memfd(&cfg, &format!("ust-uid{uid}-{}-{cpu}", ch.name))?;
                        (b, fd, StreamShm::default())
                    }
                };
                let files = TraceFiles {
                    dir: out.clone(),
                    base: name,
                    max_size: ch.config.tracefile_size,
                    max_count: ch.config.tracefile_count,
                    current: 0,
                    oldest: 0,
                };
                let setup = StreamSetup {
                    session: &session.name,
                    channel: &ch.name,
                    config: &ch.config,
                    identity,
                    events: events.clone(),
                    files,
                    live,
                    clock,
                    relay: relay_streams.pop(),
                };
                let mut stream = Stream::new(setup, buffer, session.output_error.clone(), shm).map_err(io("creating stream files".into()))?;
                stream.context_size = ust_core::context::block_size(&ch.contexts);
                stream.dead_watch = Some(crate::dead_writers::Watch::new(deaths.clone(), ust_core::context::block_size(&ch.contexts)));
                streams.push(Arc::new(Mutex::new(stream)));
                chan_fds.push(fd);
            }
            fds.push(chan_fds);
        }
        Ok::<(), SetupError>(())
    })();
    if let Err(e) = made {
        remove_made(out.as_ref(), shm_dir.as_deref());
        return Err(e);
    }
    Ok(ProcessTrace {
        relay: relay_meta,
        pid: 0,
        procname: format!("uid-{uid}"),
        dir,
        out,
        metadata,
        post_mortem: None,
        retained: false,
        uuid,
        slots: vec![None; session.channels.len()],
        streams,
        events,
        context_sizes,
        tsc,
        gone: false,
        archived: false,
        shm_dir,
        shared: Some(Box::new(Shared { uid, registry: Registry::default(), fds, members: BTreeSet::new(), deaths })),
    })
}

/// Removes what a failed [`create`] made: no half-made trace for readers to trip on, no
/// backed buffer file holding memory (both directories are the trace's own).
fn remove_made(out: Option<&ust_ctf::outdir::TraceDir>, shm_dir: Option<&Path>) {
    if let Some(out) = out {
        let _ = out.remove_dir_all();
    }
    if let Some(d) = shm_dir {
        let _ = std::fs::remove_dir_all(d);
    }
}
