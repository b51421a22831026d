//! The daemon's state, which every worker (application and control servers, the drain,
//! snapshots) shares: the [`Daemon`] handle and, behind its one mutex, the [`State`]:
//! sessions, registered processes, and each session's per-process traces. The wiring of
//! the process (sockets, threads, signals) is apart, in [`crate::daemon`]; nothing here
//! depends on it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use ust_core::protocol::{ChannelIds, DaemonMessage};
use ust_core::EventDesc;

use crate::model::app::{App, SLOT_OWNER};
use crate::model::masks::{Enabled, SlotOwner};
use crate::model::registry::Registry;
use crate::model::session::Session;
use crate::ops::relay::RelayOutput;
use crate::ops::stream::Stream;
use crate::ops::trace::{EventTables, ProcessTrace};
use crate::ops::triggers::Triggers;

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

/// A session and the per-process traces it writes.
#[derive(Debug)]
pub struct SessionState {
    /// What the user configured.
    pub session: Session,
    /// A network session (`--set-url net://…`): its connection to the relay daemon,
    /// which receives every packet instead of the output directory ([`crate::ops::relay`]).
    pub relay: Option<Arc<RelayOutput>>,
    /// App id → that process's trace in this session.
    pub traces: BTreeMap<u64, ProcessTrace>,
    /// The latest processes the session should have traced and could not, with why
    /// (at most [`MAX_UNTRACED`], oldest dropped first), for `ust list SESSION`.
    pub untraced: std::collections::VecDeque<ust_ctl::protocol::UntracedProcess>,
    /// The userspace probes' recording while the session records
    /// ([`crate::ops::session_probes`]).
    pub probes: Option<crate::ops::session_probes::Recording>,
    /// What each finished recording of the probes wrote, for the reports.
    pub probes_done: Vec<ust_ctl::protocol::ProbesReport>,
}

/// Most entries [`SessionState::untraced`] keeps.
pub const MAX_UNTRACED: usize = 32;

impl SessionState {
    /// A session with no process trace yet.
    pub fn new(session: Session) -> SessionState {
        SessionState { session, relay: None, traces: BTreeMap::new(), untraced: Default::default(), probes: None, probes_done: Vec::new() }
    }

    /// Every stream of the session's traces.
    pub fn streams(&self) -> Vec<Arc<Mutex<Stream>>> {
        self.traces.values().flat_map(|t| t.streams.iter().cloned()).collect()
    }

    /// The event registry of the per-UID trace of `uid`, when the session has one.
    pub fn uid_registry(&self, uid: u32) -> Option<&Registry> {
        if self.session.buffers != crate::model::session::BufferOwnership::Uid {
            return None;
        }
        Some(&self.traces.get(&crate::ops::uid_trace::trace_key(uid))?.shared.as_ref()?.registry)
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
    pub(crate) event_tables: EventTables,
    /// Triggers (`ust add-trigger`) and the notifier buffers of the processes they watch.
    pub triggers: Triggers,
    /// Map channels (`ust add-map-channel`) and the map slots of processes.
    pub maps: crate::ops::maps::Maps,
}

impl State {
    /// A fresh daemon-local id for a registering process.
    pub fn next_app_id(&mut self) -> u64 {
        self.next_app += 1;
        self.next_app
    }

    /// The shared copy of an event list ([`EventTables`]).
    pub fn share_events(&mut self, events: &[EventDesc]) -> Arc<[EventDesc]> {
        self.event_tables.share(events)
    }

    /// The session a request names, or the current one (`ust create` sets it).
    ///
    /// # Errors
    /// No session of that name, or no current session.
    pub fn resolve(&self, session: &Option<String>) -> Result<String, String> {
        match session {
            Some(n) => {
                if self.sessions.contains_key(n) {
                    Ok(n.clone())
                } else {
                    Err(format!("no session named {n:?} (see `ust list`)"))
                }
            }
            None => match &self.current {
                Some(n) if self.sessions.contains_key(n) => Ok(n.clone()),
                _ => Err("no current session: create one with `ust create`, or name one with -s/--session".into()),
            },
        }
    }

    /// What process `app_id`'s enable masks are made of: the owner of each of its mask
    /// slots, in slot order (a session's channel, with the per-UID ids of its events and
    /// whether the session's trackers take the process; or a trigger's rule).
    fn slot_owners<'a>(&'a self, app: &'a App) -> Vec<(u32, SlotOwner<'a>)> {
        let mut out = Vec::new();
        for (slot, (owner, ci)) in &app.slots {
            if owner == crate::ops::maps::MAP_SLOT_OWNER {
                let Some(ms) = self.maps.slots.get(&(app.id, *slot)) else { continue };
                let Some(rule) = self.triggers.rule(ms.trigger) else { continue };
                let active = self.sessions.get(&ms.session).is_some_and(|ss| ss.session.started);
                out.push((*slot, SlotOwner::Map { rule, keys: &ms.keys, active }));
                continue;
            }
            if owner == SLOT_OWNER {
                if let Some(rule) = self.triggers.rule(*ci) {
                    out.push((*slot, SlotOwner::Trigger(rule)));
                }
                continue;
            }
            let Some(ss) = self.sessions.get(owner) else { continue };
            let tracked = ss.session.tracks(app.pid) && ss.session.tracks_ids(app.uid, app.gid);
            let ids = ss.uid_registry(app.uid).map(|r| r.ids_of(&app.events));
            out.push((*slot, SlotOwner::Channel { session: &ss.session, channel: *ci, tracked, ids }));
        }
        out
    }

    /// Process `app_id`'s enable masks, their filters, the most verbose level it may
    /// record and its per-UID event ids ([`crate::model::masks::enabled`]); `None` for an
    /// unknown process.
    pub fn enabled(&self, app_id: u64) -> Option<Enabled> {
        let app = self.apps.get(&app_id)?;
        Some(crate::model::masks::enabled(app, &self.slot_owners(app)))
    }

    /// Queues `SetEnabled` with the current masks, filters and ids to process `app_id`.
    pub fn push_masks(&self, app_id: u64) {
        let Some(app) = self.apps.get(&app_id).filter(|a| a.alive) else { return };
        let e = crate::model::masks::enabled(app, &self.slot_owners(app));
        let ids: Vec<ChannelIds> = e.ids;
        app.send(
            DaemonMessage::SetEnabled { masks: e.masks, filters: e.filters, max_level: Some(e.max_level.unwrap_or(ust_core::protocol::NO_LEVEL)), ids },
            Vec::new(),
        );
    }

    /// Gives process `app_id` its map slots ([`crate::ops::maps::Maps::attach_app`]) for
    /// every trigger's `incr-map-value` action; the caller pushes the masks.
    pub fn attach_maps(&mut self, app_id: u64) {
        let actions = self.triggers.map_actions();
        if let Some(app) = self.apps.get_mut(&app_id) {
            self.maps.attach_app(app, &actions);
        }
    }

    /// Frees map slots `gone` ((app, slot)) in their processes: slot released, masks
    /// pushed, then `RemoveChannel`.
    pub fn free_map_slots(&mut self, gone: &[(u64, u32)]) {
        for &(app_id, slot) in gone {
            let Some(app) = self.apps.get_mut(&app_id) else { continue };
            app.slots.remove(&slot);
            self.push_masks(app_id);
            if let Some(app) = self.apps.get(&app_id) {
                app.send(DaemonMessage::RemoveChannel { slot }, Vec::new());
            }
        }
    }

    /// A fresh sequence number for `Sync`.
    pub fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
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
        self.apps.values().filter(|a| a.alive && (a.slots.values().any(|(s, _)| s == name) || self.maps.app_counts_for(a.id, name))).map(|a| a.id).collect()
    }
}
