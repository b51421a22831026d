//! Triggers (`ust add-trigger`, `list-triggers`, `remove-trigger`; LTTng's event
//! notifiers): when an event matching a trigger's event rule occurs in any traced
//! process, the daemon runs the trigger's actions within milliseconds (the classic use: a
//! flight-recorder session snapshots itself on `myapp:error`).
//!
//! LTTng-UST gives each application an event notifier group with a ring buffer and a
//! pipe to the session daemon. ust reuses what the emit path already has, so that a
//! process with no trigger pays nothing and one with a trigger pays only for the events
//! that match it:
//!
//! ```text
//! daemon                                       process
//!  ── AddChannel{slot s, "trigger NAME"} ──>   maps a small notifier buffer per CPU
//!  ── SetEnabled: bit s on matching events ─>  (with the rule's filter, evaluated there)
//!                                              a matching event is written to slot s:
//!                                              reserve + commit, no system call, never
//!                                              blocking (overwrite mode, never full)
//!  watch thread: every 1 ms loads the write
//!  position of each notifier buffer; one that
//!  moved fires the trigger → actions
//! ```
//!
//! A notifier buffer is an ordinary ring buffer (2 sub-buffers of 4 KiB per CPU, overwrite
//! mode, so its write position advances at every matching event and never stalls); its
//! content is not read, only its position, and nothing but a writer moves it (the daemon
//! never switches these buffers). Its slot is in [`crate::ops::state::App::slots`] with the
//! owner [`SLOT_OWNER`] (no session has that name), so slot allocation, process death and
//! mask computation need no second table. The watch costs the daemon one position load
//! per CPU per process per trigger each millisecond while a trigger exists, and sleeps
//! when none does.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use ringbuffer::{BufferConfig, Mode, StreamIdentity};
use ust_core::packet::HEADER_SIZE;
use ust_core::protocol::{ChannelGrant, DaemonMessage, EventFilter, MAX_CHANNELS};
use ust_ctl::protocol::{Command, Payload, Reply};
use ust_ctl::trigger::{TriggerAction, TriggerInfo, TriggerSpec};

use crate::model::enabler::{Decision, Rule};
use crate::ops::state::{Daemon, State};

/// Owner of a notifier slot in [`crate::ops::state::App::slots`], in place of a session name
/// (the slot's channel index is the trigger's id).
pub const SLOT_OWNER: &str = "";

/// How often the watch thread looks at the notifier buffers.
pub const POLL: Duration = Duration::from_millis(1);

/// Most triggers a daemon keeps.
pub const MAX_TRIGGERS: usize = 256;

const NOTIFIER_SUBBUF: u64 = 4096;
const NOTIFIER_NUM_SUBBUF: u32 = 2;

/// One process's notifier buffers for one trigger.
struct Notifier {
    slot: u32,
    buffers: Vec<ringbuffer::Buffer>,
    seen: Vec<u64>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier").field("slot", &self.slot).field("buffers", &self.buffers.len()).field("seen", &self.seen).finish()
    }
}

#[derive(Debug)]
struct Trigger {
    id: usize,
    spec: TriggerSpec,
    /// `spec.rule` with its filter parsed (once, when the trigger was added).
    rule: Rule,
    fired: u64,
    last_result: Option<String>,
    /// App id → its notifier.
    notifiers: BTreeMap<u64, Notifier>,
}

impl Trigger {
    fn info(&self) -> TriggerInfo {
        TriggerInfo { spec: self.spec.clone(), fired: self.fired, processes: self.notifiers.len(), last_result: self.last_result.clone() }
    }

    fn name(&self) -> &str {
        self.spec.name.as_deref().unwrap_or("")
    }
}

/// The daemon's triggers (a field of [`State`]).
#[derive(Debug, Default)]
pub struct Triggers {
    list: Vec<Trigger>,
    next_id: usize,
}

static WAKE: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

fn wake_watch() {
    *WAKE.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
    WAKE.1.notify_all();
}

/// Gives process `app_id` a notifier for every trigger whose rule matches one of its
/// events and that it has none for yet (at registration, when it registers events late,
/// and when a trigger is added). The caller pushes the masks afterwards
/// ([`State::push_masks`]). A process with no free slot or whose notifier buffers cannot
/// be made is logged and not watched.
pub fn attach_app(st: &mut State, app_id: u64) {
    let State { triggers, apps, .. } = st;
    let Some(app) = apps.get_mut(&app_id).filter(|a| a.alive) else { return };
    for t in triggers.list.iter_mut() {
        if t.notifiers.contains_key(&app_id) || !app.events.iter().any(|e| t.rule.decide(e) != Decision::Off) {
            continue;
        }
        let Some(slot) = (0..MAX_CHANNELS).find(|s| !app.slots.contains_key(s)) else {
            crate::log!("trigger {}: process {} has no free channel slot; not watched", t.name(), app.pid);
            continue;
        };
        let mut buffers = Vec::new();
        let mut fds = Vec::new();
        let uuid = *uuid::Uuid::new_v4().as_bytes();
        for cpu in 0..app.ncpus {
            let cfg = BufferConfig {
                subbuf_size: NOTIFIER_SUBBUF,
                num_subbuf: NOTIFIER_NUM_SUBBUF,
                mode: Mode::Overwrite,
                header_size: HEADER_SIZE as u32,
                stream: StreamIdentity { uuid, stream_id: 0, cpu, stream_instance_id: 0 },
            };
            match ringbuffer::shm::create_memfd(&cfg, &format!("ust-trigger-{}-{cpu}", app.pid)) {
                Ok((b, fd)) => {
                    buffers.push(b);
                    fds.push(fd);
                }
                Err(e) => {
                    crate::log!("trigger {}: cannot make a notifier buffer for process {}: {e}; not watched", t.name(), app.pid);
                    break;
                }
            }
        }
        if buffers.len() != app.ncpus as usize {
            continue;
        }
        let seen = buffers.iter().map(|b| b.counters().write).collect();
        app.slots.insert(slot, (SLOT_OWNER.to_string(), t.id));
        app.send(
            DaemonMessage::AddChannel(ChannelGrant {
                slot,
                session: format!("trigger {}", t.name()),
                channel: "notifier".into(),
                ncpus: app.ncpus,
                contexts: Vec::new(),
                tsc: None,
                shared_ids: false,
                blocking_timeout_us: 0,
            }),
            fds,
        );
        crate::log!("trigger {}: watching process {} ({})", t.name(), app.pid, app.procname);
        t.notifiers.insert(app_id, Notifier { slot, buffers, seen });
    }
}

/// Adds the bits (and filters) of process `app_id`'s notifier slots to its enable masks:
/// bit `slot` on every event the trigger's rule matches. Called by
/// [`State::masks_and_filters`].
pub fn add_bits(st: &State, app_id: u64, masks: &mut [u64], filters: &mut Vec<EventFilter>) {
    let Some(app) = st.apps.get(&app_id) else { return };
    for (slot, (owner, id)) in &app.slots {
        if owner != SLOT_OWNER {
            continue;
        }
        let Some(t) = st.triggers.list.iter().find(|t| t.id == *id) else { continue };
        for (i, e) in app.events.iter().enumerate().take(masks.len()) {
            match t.rule.decide(e) {
                Decision::Off => {}
                Decision::On => masks[i] |= 1u64 << slot,
                Decision::Filtered(any_of) => {
                    masks[i] |= 1u64 << slot;
                    filters.push(EventFilter { event: i as u32, slot: *slot, any_of });
                }
            }
        }
    }
}

/// The most verbose level a trigger watching process `app_id` accepts (joined with the
/// sessions' in [`State::max_level`]).
pub fn max_level(st: &State, app_id: u64) -> Option<u8> {
    let app = st.apps.get(&app_id)?;
    app.slots
        .values()
        .filter(|(owner, _)| owner == SLOT_OWNER)
        .filter_map(|(_, id)| st.triggers.list.iter().find(|t| t.id == *id))
        .map(|t| match t.spec.rule.level {
            ust_ctl::config::LevelFilter::Any => ust_core::Level::Debug.number(),
            ust_ctl::config::LevelFilter::UpTo(l) | ust_ctl::config::LevelFilter::Only(l) => l.number(),
        })
        .max()
}

/// `ust add-trigger`.
///
/// # Errors
/// A duplicate name, [`MAX_TRIGGERS`] reached, a rule the daemon's checks refuse, or an
/// action naming a session that does not exist (LTTng checks that when firing; a typo is
/// better caught now).
pub fn add(daemon: &Daemon, mut spec: TriggerSpec) -> Result<Payload, String> {
    ust_ctl::config::check_event_name(&spec.rule.pattern)?;
    let rule = Rule::parse(spec.rule.clone()).map_err(|e| format!("--filter {:?}: {e}", spec.rule.filter.as_deref().unwrap_or_default()))?;
    ust_ctl::config::check_exclusions(std::slice::from_ref(&spec.rule.pattern), &spec.rule.exclusions)?;
    if spec.actions.is_empty() {
        return Err("a trigger needs at least one action".into());
    }
    let mut st = daemon.lock();
    for a in &spec.actions {
        match a {
            TriggerAction::Notify => {}
            TriggerAction::SnapshotSession(s) | TriggerAction::StartSession(s) | TriggerAction::StopSession(s) | TriggerAction::RotateSession(s) => {
                if !st.sessions.contains_key(s) {
                    return Err(format!("action {a}: no session named {s:?} (see `ust list`)"));
                }
            }
        }
    }
    if st.triggers.list.len() >= MAX_TRIGGERS {
        return Err(format!("at most {MAX_TRIGGERS} triggers: remove one with `ust remove-trigger NAME`"));
    }
    let id = st.triggers.next_id;
    st.triggers.next_id += 1;
    let name = match spec.name.take() {
        Some(n) => n,
        None => (id..).map(|n| format!("trigger{n}")).find(|n| !st.triggers.list.iter().any(|t| t.name() == n)).unwrap_or_default(),
    };
    ust_ctl::config::check_name("trigger", &name)?;
    if st.triggers.list.iter().any(|t| t.name() == name) {
        return Err(format!("a trigger named {name:?} exists already (see `ust list-triggers`)"));
    }
    spec.name = Some(name.clone());
    st.triggers.list.push(Trigger { id, spec, rule, fired: 0, last_result: None, notifiers: BTreeMap::new() });
    let apps: Vec<u64> = st.apps.values().filter(|a| a.alive).map(|a| a.id).collect();
    for a in apps {
        attach_app(&mut st, a);
        st.push_masks(a);
    }
    let info = st.triggers.list.last().map(Trigger::info).into_iter().collect();
    drop(st);
    crate::log!("trigger {name} added");
    wake_watch();
    Ok(Payload::Triggers(info))
}

/// `ust list-triggers`.
pub fn list(daemon: &Daemon) -> Payload {
    Payload::Triggers(daemon.lock().triggers.list.iter().map(Trigger::info).collect())
}

/// `ust remove-trigger NAME`: clears the trigger's bits in every process, then has each
/// drop its notifier buffers.
///
/// # Errors
/// No trigger of that name.
pub fn remove(daemon: &Daemon, name: &str) -> Result<Payload, String> {
    let mut st = daemon.lock();
    let Some(pos) = st.triggers.list.iter().position(|t| t.name() == name) else {
        return Err(format!("no trigger named {name:?} (see `ust list-triggers`)"));
    };
    let t = st.triggers.list.remove(pos);
    for (app_id, n) in &t.notifiers {
        let Some(app) = st.apps.get_mut(app_id) else { continue };
        app.slots.remove(&n.slot);
        st.push_masks(*app_id);
        if let Some(app) = st.apps.get(app_id) {
            app.send(DaemonMessage::RemoveChannel { slot: n.slot }, Vec::new());
        }
    }
    crate::log!("trigger {name} removed");
    Ok(Payload::Done)
}

/// Starts the watch thread (once, from [`crate::daemon`]): it sleeps while no trigger
/// exists, else looks at every notifier buffer each [`POLL`] and runs the actions of the
/// triggers whose buffers moved, outside the state lock.
pub fn spawn_watch(daemon: Arc<Daemon>) {
    let r = std::thread::Builder::new().name("triggers".into()).spawn(move || watch(&daemon));
    if let Err(e) = r {
        crate::log!("cannot start the trigger watch thread: {e}; triggers will not fire");
    }
}

fn watch(daemon: &Daemon) {
    while !daemon.shutting_down() {
        let fired = {
            let mut st = daemon.lock();
            if st.triggers.list.is_empty() {
                drop(st);
                let g = WAKE.0.lock().unwrap_or_else(|e| e.into_inner());
                let (mut w, _) = WAKE.1.wait_timeout_while(g, Duration::from_millis(500), |w| !*w).unwrap_or_else(|e| e.into_inner());
                *w = false;
                continue;
            }
            poll(&mut st)
        };
        for (id, name, actions) in fired {
            let result = run_actions(daemon, &name, &actions);
            let mut st = daemon.lock();
            if let Some(t) = st.triggers.list.iter_mut().find(|t| t.id == id) {
                t.fired += 1;
                t.last_result = Some(result);
            }
        }
        std::thread::sleep(POLL);
    }
}

/// One look at every notifier: forgets those of processes that are gone, returns the
/// triggers whose buffers moved (id, name, actions).
fn poll(st: &mut State) -> Vec<(usize, String, Vec<TriggerAction>)> {
    let State { triggers, apps, .. } = st;
    let mut fired = Vec::new();
    for t in triggers.list.iter_mut() {
        t.notifiers.retain(|id, _| apps.get(id).is_some_and(|a| a.alive));
        let mut moved = false;
        for n in t.notifiers.values_mut() {
            for (b, seen) in n.buffers.iter().zip(n.seen.iter_mut()) {
                let w = b.counters().write;
                if w != *seen {
                    *seen = w;
                    moved = true;
                }
            }
        }
        if moved {
            fired.push((t.id, t.name().to_string(), t.spec.actions.clone()));
        }
    }
    fired
}

fn command(daemon: &Daemon, c: Command) -> Result<(), String> {
    match crate::servers::control::handle(daemon, c) {
        Reply::Ok(_) => Ok(()),
        Reply::Error { message } => Err(message),
    }
}

fn run_actions(daemon: &Daemon, name: &str, actions: &[TriggerAction]) -> String {
    let mut results = Vec::new();
    for a in actions {
        let r = match a {
            TriggerAction::Notify => Ok("notified".to_string()),
            TriggerAction::SnapshotSession(s) => crate::ops::snapshot::record(daemon, s, None).map(|r| format!("snapshot written to {}", r.dir.display())),
            TriggerAction::StartSession(s) => command(daemon, Command::Start { session: Some(s.clone()) }).map(|_| format!("session {s} started")),
            TriggerAction::StopSession(s) => command(daemon, Command::Stop { session: Some(s.clone()) }).map(|_| format!("session {s} stopped")),
            TriggerAction::RotateSession(s) => crate::servers::control::rotate(daemon, s).map(|d| format!("session {s} rotated to {}", d.display())),
        };
        let line = match r {
            Ok(x) => x,
            Err(e) => format!("{a} failed: {e}"),
        };
        crate::log!("trigger {name} fired: {line}");
        results.push(line);
    }
    results.join("; ")
}
