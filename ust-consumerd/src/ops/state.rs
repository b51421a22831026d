//! The daemon's state, which every worker (application and control servers, the drain,
//! snapshots) shares: the [`Daemon`] handle and, behind its one mutex, the [`State`]:
//! sessions, registered processes, and each session's per-process traces. The wiring of
//! the process (sockets, threads, signals) is apart, in [`crate::daemon`]; nothing here
//! depends on it.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ust_core::clock::ClockKind;
use ust_core::protocol::{ChannelGrant, DaemonMessage, EventFilter, MAX_CHANNELS};
use ust_core::EventDesc;

use crate::model::enabler::Decision;
use crate::model::session::Session;
use crate::ops::process_trace::{ProcessInfo, ProcessTrace};

static SIGNALLED: AtomicBool = AtomicBool::new(false);

/// Records a `SIGTERM`/`SIGINT` (async-signal-safe: one atomic store); every loop sees it
/// through [`Daemon::shutting_down`].
pub extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// The daemon's shared state and identity.
#[derive(Debug)]
pub struct Daemon {
    state: Mutex<State>,
    /// Socket directory.
    pub rundir: PathBuf,
    /// Effective uid of the daemon.
    pub uid: u32,
    shutdown: AtomicBool,
    drain_wake: (Mutex<bool>, Condvar),
    /// Registrations and deaths, for the idle heap trim ([`crate::ops::memory`]).
    pub trim: crate::ops::memory::IdleTrim,
}

impl Daemon {
    /// A daemon with empty state serving `rundir`.
    pub fn new(rundir: PathBuf) -> Daemon {
        Daemon {
            state: Mutex::new(State::default()),
            rundir,
            uid: rustix::process::geteuid().as_raw(),
            shutdown: AtomicBool::new(false),
            drain_wake: (Mutex::new(false), Condvar::new()),
            trim: Default::default(),
        }
    }

    /// Locks the state. A panic in another thread while holding it does not poison the
    /// daemon: the state is used as it was left.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True once shutdown began.
    pub fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst) || SIGNALLED.load(Ordering::SeqCst)
    }

    /// Asks every loop to stop.
    pub fn request_shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
    }

    /// Ends the drain loop's current sleep early (call after adding streams); cheap, and
    /// harmless if the loop is not sleeping (its next sleep then returns at once).
    pub fn wake_drain(&self) {
        *self.drain_wake.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.drain_wake.1.notify_all();
    }

    /// The drain loop's sleep: `d`, or until [`Daemon::wake_drain`].
    pub fn drain_sleep(&self, d: Duration) {
        let guard = self.drain_wake.0.lock().unwrap_or_else(|e| e.into_inner());
        let (mut woken, _) = self.drain_wake.1.wait_timeout_while(guard, d, |w| !*w).unwrap_or_else(|e| e.into_inner());
        *woken = false;
    }
}

/// A message queued for an application's writer thread, with the descriptors it carries
/// (closed once sent).
#[derive(Debug)]
pub struct Outgoing {
    /// The message.
    pub msg: DaemonMessage,
    /// Descriptors sent with it as `SCM_RIGHTS`.
    pub fds: Vec<OwnedFd>,
}

/// Progress of `Sync` round trips with one application.
#[derive(Debug, Default)]
pub struct SyncState {
    inner: Mutex<(u64, bool)>,
    cv: Condvar,
}

impl SyncState {
    pub(crate) fn ack(&self, seq: u64) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.0 = g.0.max(seq);
        self.cv.notify_all();
    }

    pub(crate) fn close(&self) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.1 = true;
        self.cv.notify_all();
    }

    /// Waits until `SyncDone{seq}` (or a later one) arrived, the connection closed, or
    /// `deadline` passed. True only in the first case.
    pub fn wait(&self, seq: u64, deadline: Instant) -> bool {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if g.0 >= seq {
                return true;
            }
            if g.1 {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            g = self.cv.wait_timeout(g, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

/// A registered process, alive or gone.
#[derive(Debug)]
pub struct App {
    /// Daemon-local id.
    pub id: u64,
    /// Process id (from `SO_PEERCRED`).
    pub pid: i32,
    /// User id (from `SO_PEERCRED`).
    pub uid: u32,
    /// Group id (from `SO_PEERCRED`), for the `--vgid` tracker.
    pub gid: u32,
    /// Process name, as registered.
    pub procname: String,
    /// `ust trace` token, if any.
    pub token: Option<String>,
    /// Trace clock the process asked for (`UST_CLOCK`).
    pub clock: Option<ClockKind>,
    /// [`ust_core::ABI_MINOR`] of its runtime: what it can be granted.
    pub abi_minor: u16,
    /// Buffers per channel.
    pub ncpus: u32,
    /// Registered events; index `i` has CTF id `event_id(i)`.
    pub events: Vec<EventDesc>,
    /// Registration time (seconds since the Epoch).
    pub registered: i64,
    /// False once the process died or its connection closed.
    pub alive: bool,
    /// Said `Exiting` (a normal exit).
    pub exiting: bool,
    /// Mask slot → (session name, channel index).
    pub slots: BTreeMap<u32, (String, usize)>,
    pub(crate) out: Option<mpsc::Sender<Outgoing>>,
    /// `Sync` round trips.
    pub sync: Arc<SyncState>,
}

impl App {
    /// Queues a message for the writer thread (dropped if the process is gone).
    pub fn send(&self, msg: DaemonMessage, fds: Vec<OwnedFd>) {
        if let Some(out) = &self.out {
            let _ = out.send(Outgoing { msg, fds });
        }
    }

    fn free_slot(&self) -> Option<u32> {
        (0..MAX_CHANNELS).find(|s| !self.slots.contains_key(s))
    }
}

/// A session and the per-process traces it writes.
#[derive(Debug)]
pub struct SessionState {
    /// What the user configured.
    pub session: Session,
    /// App id → that process's trace in this session.
    pub traces: BTreeMap<u64, ProcessTrace>,
    /// The latest processes the session should have traced and could not, with why
    /// (at most [`MAX_UNTRACED`], oldest dropped first), for `ust list SESSION`.
    pub untraced: std::collections::VecDeque<ust_ctl::protocol::UntracedProcess>,
}

/// Most entries [`SessionState::untraced`] keeps.
pub const MAX_UNTRACED: usize = 32;

impl SessionState {
    /// A session with no process trace yet.
    pub fn new(session: Session) -> SessionState {
        SessionState { session, traces: BTreeMap::new(), untraced: Default::default() }
    }

    /// Remembers that process `pid` (`procname`) runs untraced, and why.
    pub fn record_untraced(&mut self, pid: i32, procname: &str, reason: String) {
        if self.untraced.len() == MAX_UNTRACED {
            self.untraced.pop_front();
        }
        self.untraced.push_back(ust_ctl::protocol::UntracedProcess { pid, procname: procname.to_string(), reason });
    }
}

/// Everything the daemon knows, behind one mutex ([`Daemon::lock`]). Never held across
/// blocking I/O to a peer; stream locks are taken only after it is released.
#[derive(Debug, Default)]
pub struct State {
    /// Sessions by name.
    pub sessions: BTreeMap<String, SessionState>,
    /// The current session (`ust create` sets it).
    pub current: Option<String>,
    /// Registered processes by daemon id.
    pub apps: BTreeMap<u64, App>,
    next_app: u64,
    pub(crate) next_instance: u64,
    next_seq: u64,
    event_tables: crate::ops::process_trace::EventTables,
    /// Triggers (`ust add-trigger`) and the notifier buffers of the processes they watch.
    pub triggers: crate::ops::triggers::Triggers,
}

impl State {
    /// A fresh daemon-local id for a registering process.
    pub fn next_app_id(&mut self) -> u64 {
        self.next_app += 1;
        self.next_app
    }

    /// The shared copy of an event list ([`crate::ops::process_trace::EventTables`]).
    pub fn share_events(&mut self, events: &[EventDesc]) -> Arc<[EventDesc]> {
        self.event_tables.share(events)
    }

    /// A fresh sequence number for `Sync`.
    pub fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Gives process `app_id` buffers for every channel of session `name`, if the session is
    /// started, takes the process (its token, and its process-id tracker:
    /// [`Session::tracks`]), and has not done so yet: trace directory, metadata,
    /// buffers, files, mask slots, and an `AddChannel` queued per channel. The caller then
    /// pushes masks ([`State::push_masks`]). True when streams were added.
    #[must_use = "when true, wake the drain (Daemon::wake_drain) so the new streams are read from their first period"]
    pub fn attach(&mut self, name: &str, app_id: u64) -> bool {
        match self.try_attach(name, app_id) {
            Ok(added) => added,
            Err(reason) => {
                crate::log!("session {name}: {reason}");
                if let (Some(ss), Some(app)) = (self.sessions.get_mut(name), self.apps.get(&app_id)) {
                    ss.record_untraced(app.pid, &app.procname, reason);
                }
                false
            }
        }
    }

    /// [`State::attach`]: `Ok(false)` when the session does not take the process now,
    /// `Err(why)` when it should but cannot.
    fn try_attach(&mut self, name: &str, app_id: u64) -> Result<bool, String> {
        let Some(ss) = self.sessions.get(name) else { return Ok(false) };
        let Some(app) = self.apps.get(&app_id) else { return Ok(false) };
        if !app.alive || !ss.session.started || !ss.session.takes(app.token.as_deref()) {
            return Ok(false);
        }
        // An untracked process (`ust untrack --vpid`) gets no buffers of the session; it
        // is attached when it is tracked again (`track_vpids` in control.rs).
        if !ss.session.tracks(app.pid) || !ss.session.tracks_ids(app.uid, app.gid) {
            return Ok(false);
        }
        if ss.session.buffers == crate::model::session::BufferOwnership::Uid && !ss.session.channels.is_empty() {
            return crate::ops::uid_trace::attach(self, name, app_id);
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
            let params = self.sessions.get_mut(name).and_then(|ss| ss.session.tsc_params());
            if params.is_none() {
                crate::log!("session {name}: process {pid} asked for the TSC clock; no invariant TSC here, CLOCK_MONOTONIC instead");
            }
            params
        } else {
            None
        };
        let (Some(ss), Some(app)) = (self.sessions.get(name), self.apps.get(&app_id)) else { return Ok(false) };
        let info = ProcessInfo { pid: app.pid, procname: &app.procname, ncpus: app.ncpus, registered: app.registered, events: &app.events, tsc };
        let (mut trace, fds) = match crate::ops::process_trace::create_process_trace(&ss.session, &info, &mut self.next_instance, &mut self.event_tables) {
            Ok(x) => x,
            Err(e) => return Err(format!("process {} not traced: cannot set up its buffers: {e}", app.pid)),
        };
        let channels: Vec<String> = ss.session.channels.iter().map(|c| c.name.clone()).collect();
        let contexts: Vec<Vec<ust_core::context::ContextType>> = ss.session.channels.iter().map(|c| c.contexts.clone()).collect();
        let blocking: Vec<u64> = ss.session.channels.iter().map(|c| c.config.blocking_timeout_us).collect();
        let app = self.apps.get_mut(&app_id).expect("checked above");
        for (ci, chan_fds) in fds.into_iter().enumerate() {
            let slot = app.free_slot().expect("counted above");
            app.slots.insert(slot, (name.to_string(), ci));
            trace.slots[ci] = Some(slot);
            app.send(
                DaemonMessage::AddChannel(ChannelGrant {
                    slot,
                    session: name.to_string(),
                    channel: channels[ci].clone(),
                    ncpus: app.ncpus,
                    contexts: contexts[ci].clone(),
                    tsc: trace.tsc,
                    shared_ids: false,
                    blocking_timeout_us: blocking[ci],
                }),
                chan_fds,
            );
        }
        match &self.sessions.get(name).and_then(|ss| ss.session.relay.clone()) {
            Some(r) => crate::log!(
                "session {name}: tracing process {} ({}), streamed to {} as ust/pid/{}",
                app.pid,
                app.procname,
                r.url,
                trace.dir.file_name().unwrap_or_default().to_string_lossy()
            ),
            None => crate::log!("session {name}: tracing process {} ({}) into {}", app.pid, app.procname, trace.dir.display()),
        }
        self.sessions.get_mut(name).expect("checked above").traces.insert(app_id, trace);
        Ok(true)
    }

    /// The enable masks of process `app_id`: bit `s` of `masks[i]` set when the channel in
    /// slot `s` records event `i` now.
    pub fn masks(&self, app_id: u64) -> Vec<u64> {
        self.masks_and_filters(app_id).0
    }

    /// The enable masks of process `app_id` and the filters that condition some of their
    /// bits (resolved per event: field indexes of that event). The bits of a session that
    /// does not track the process (`ust untrack --vpid`) are all clear: its buffers stay
    /// mapped in the process, and nothing is written to them until it is tracked again.
    pub fn masks_and_filters(&self, app_id: u64) -> (Vec<u64>, Vec<EventFilter>) {
        let Some(app) = self.apps.get(&app_id) else { return (Vec::new(), Vec::new()) };
        let mut masks = vec![0u64; app.events.len()];
        let mut filters = Vec::new();
        for (slot, (sname, ci)) in &app.slots {
            let Some(ss) = self.sessions.get(sname) else { continue };
            if !ss.session.tracks(app.pid) || !ss.session.tracks_ids(app.uid, app.gid) {
                continue;
            }
            // A per-UID channel records only the events that have an id in its trace.
            let ids = crate::ops::uid_trace::ids_for(ss, app.uid, &app.events);
            for (i, d) in ss.session.decisions(*ci, &app.events).into_iter().enumerate() {
                if ids.as_ref().is_some_and(|v| v.get(i).copied().unwrap_or(0) == 0) {
                    continue;
                }
                match d {
                    Decision::Off => {}
                    Decision::On => masks[i] |= 1u64 << slot,
                    Decision::Filtered(any_of) => {
                        masks[i] |= 1u64 << slot;
                        filters.push(EventFilter { event: i as u32, slot: *slot, any_of });
                    }
                }
            }
        }
        crate::ops::triggers::add_bits(self, app_id, &mut masks, &mut filters);
        (masks, filters)
    }

    /// The most verbose level an enabler of a started session tracking process `app_id`
    /// accepts (what the process's `tracing` layer may rule out beyond); `None`: none.
    pub fn max_level(&self, app_id: u64) -> Option<u8> {
        let app = self.apps.get(&app_id)?;
        app.slots
            .values()
            .filter_map(|(sname, ci)| {
                let ss = self.sessions.get(sname).filter(|ss| ss.session.tracks(app.pid) && ss.session.tracks_ids(app.uid, app.gid))?;
                ss.session.max_level(*ci)
            })
            .chain(crate::ops::triggers::max_level(self, app_id))
            .max()
    }

    /// Queues `SetEnabled` with the current masks and filters to process `app_id`.
    pub fn push_masks(&self, app_id: u64) {
        if let Some(app) = self.apps.get(&app_id).filter(|a| a.alive) {
            let (masks, filters) = self.masks_and_filters(app_id);
            let max_level = Some(self.max_level(app_id).unwrap_or(ust_core::protocol::NO_LEVEL));
            let ids = crate::ops::uid_trace::channel_ids(self, app_id);
            app.send(DaemonMessage::SetEnabled { masks, filters, max_level, ids }, Vec::new());
        }
    }

    /// Queues `SetEnabled` to every live process.
    pub fn push_all_masks(&self) {
        for id in self.apps.keys() {
            self.push_masks(*id);
        }
    }

    /// Drops the records of dead processes that no session's trace refers to (their
    /// traces keep pid, name and directory), so the table does not grow forever.
    pub fn forget_gone_apps(&mut self) {
        let sessions = &self.sessions;
        self.apps.retain(|id, a| a.alive || sessions.values().any(|ss| ss.traces.contains_key(id)));
    }

    /// Ids of live processes that have a slot in session `name`.
    pub fn apps_of(&self, name: &str) -> Vec<u64> {
        self.apps.values().filter(|a| a.alive && a.slots.values().any(|(s, _)| s == name)).map(|a| a.id).collect()
    }
}
