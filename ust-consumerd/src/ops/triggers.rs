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
//! never switches these buffers). Its slot is in [`crate::model::app::App::slots`] with
//! the owner [`crate::model::app::SLOT_OWNER`] (no session has that name), so slot
//! allocation, process death and mask computation need no second table. The watch costs the daemon one position load
//! per CPU per process per trigger each millisecond while a trigger exists, and sleeps
//! when none does.
//!
//! LTTng 2.15's session conditions need no notifier: `session-consumed-size-ge` is
//! evaluated on samples of the bytes the daemon wrote of the session
//! ([`Triggers::sample_consumed`]), `session-rotation-starts/finishes` on the rotations
//! [`crate::ops::rotate::rotate`] reports ([`Triggers::note_rotation`]).
//!
//! Here: the triggers and their notifiers, as data with the operations on them. The
//! requests are [`crate::servers::control`]'s, the watch thread is
//! [`crate::servers::trigger_watch`].

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use ringbuffer::{BufferConfig, Mode, StreamIdentity};
use ust_core::packet::HEADER_SIZE;
use ust_core::protocol::{ChannelGrant, MAX_CHANNELS};
use ust_ctl::trigger::{SessionCondition, TriggerAction, TriggerInfo, TriggerSpec};

use crate::model::app::{App, SLOT_OWNER};
use crate::model::enabler::{Decision, Rule};

/// How often the watch thread looks at the notifier buffers.
pub const POLL: Duration = Duration::from_millis(1);

/// Most triggers a daemon keeps.
pub const MAX_TRIGGERS: usize = 256;

const NOTIFIER_SUBBUF: u64 = 4096;
const NOTIFIER_NUM_SUBBUF: u32 = 2;

/// One process's notifier buffers for one trigger.
struct Notifier {
    slot: u32,
    buffers: Vec<ringbuffer::Reader>,
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
    /// `session-consumed-size-ge`: the last sample was at or above the threshold.
    satisfied: bool,
    /// App id → its notifier (none for a session condition).
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

/// An `incr-map-value` action of an `event-rule-matches` trigger: trigger id, action
/// index, the rule, session, channel, key template ([`crate::ops::maps`] gives processes
/// their map slots for it).
pub type MapAction<'a> = (usize, usize, &'a Rule, &'a str, &'a str, &'a str);

/// A trigger that fired: its id, name and actions.
pub type Fired = (usize, String, Vec<TriggerAction>);

/// The daemon's triggers (a field of [`crate::ops::state::State`]).
#[derive(Debug, Default)]
pub struct Triggers {
    list: Vec<Trigger>,
    next_id: usize,
    /// Rotations begun or finished since the last [`Triggers::poll`]: session name, and
    /// true when it finished.
    rotations: Vec<(String, bool)>,
}

static WAKE: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());

/// Ends the watch thread's idle wait ([`wait_for_triggers`]): a trigger was added.
pub fn wake_watch() {
    *WAKE.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
    WAKE.1.notify_all();
}

/// The watch thread's idle wait while no trigger exists: `timeout`, or until
/// [`wake_watch`].
pub fn wait_for_triggers(timeout: Duration) {
    let g = WAKE.0.lock().unwrap_or_else(|e| e.into_inner());
    let (mut w, _) = WAKE.1.wait_timeout_while(g, timeout, |w| !*w).unwrap_or_else(|e| e.into_inner());
    *w = false;
}

impl Triggers {
    /// True when no trigger exists.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The rule of trigger `id` (the owner of a notifier slot, for the masks).
    pub fn rule(&self, id: usize) -> Option<&Rule> {
        self.list.iter().find(|t| t.id == id).map(|t| &t.rule)
    }

    /// Every `incr-map-value` action of the `event-rule-matches` triggers (what map slots
    /// processes get: [`crate::ops::maps`]).
    pub fn map_actions(&self) -> Vec<MapAction<'_>> {
        let mut v = Vec::new();
        for t in self.list.iter().filter(|t| t.spec.condition.is_none()) {
            for (i, a) in t.spec.actions.iter().enumerate() {
                if let TriggerAction::IncrMapValue { session, channel, key } = a {
                    v.push((t.id, i, &t.rule, session.as_str(), channel.as_str(), key.as_str()));
                }
            }
        }
        v
    }

    /// `ust list-triggers`.
    pub fn list(&self) -> Vec<TriggerInfo> {
        self.list.iter().map(Trigger::info).collect()
    }

    /// Adds trigger `spec` (`ust add-trigger`), named `trigger<N>` when it has no name;
    /// `session_exists` says whether an action's session exists. Returns what `ust
    /// list-triggers` shows of it. The caller then gives every live process its notifier
    /// ([`Triggers::attach_app`]) and pushes the masks.
    ///
    /// # Errors
    /// A duplicate name, [`MAX_TRIGGERS`] reached, a rule the daemon's checks refuse, or an
    /// action naming a session that does not exist (LTTng checks that when firing; a typo
    /// is better caught now).
    pub fn add(&mut self, mut spec: TriggerSpec, session_exists: impl Fn(&str) -> bool) -> Result<TriggerInfo, String> {
        if let Some(c) = &spec.condition {
            if !session_exists(c.session()) {
                return Err(format!("condition {}: no session named {:?} (see `ust list`)", c.lttng_name(), c.session()));
            }
        }
        ust_ctl::config::check_event_name(&spec.rule.pattern)?;
        let rule = Rule::parse(spec.rule.clone()).map_err(|e| format!("--filter {:?}: {e}", spec.rule.filter.as_deref().unwrap_or_default()))?;
        ust_ctl::config::check_exclusions(std::slice::from_ref(&spec.rule.pattern), &spec.rule.exclusions)?;
        if spec.actions.is_empty() {
            return Err("a trigger needs at least one action".into());
        }
        for a in &spec.actions {
            match a {
                TriggerAction::Notify | TriggerAction::IncrMapValue { .. } => {}
                TriggerAction::SnapshotSession(s) | TriggerAction::StartSession(s) | TriggerAction::StopSession(s) | TriggerAction::RotateSession(s) => {
                    if !session_exists(s) {
                        return Err(format!("action {a}: no session named {s:?} (see `ust list`)"));
                    }
                }
            }
        }
        if self.list.len() >= MAX_TRIGGERS {
            return Err(format!("at most {MAX_TRIGGERS} triggers: remove one with `ust remove-trigger NAME`"));
        }
        let id = self.next_id;
        self.next_id += 1;
        let name = match spec.name.take() {
            Some(n) => n,
            None => (id..).map(|n| format!("trigger{n}")).find(|n| !self.list.iter().any(|t| t.name() == n)).unwrap_or_default(),
        };
        ust_ctl::config::check_name("trigger", &name)?;
        if self.list.iter().any(|t| t.name() == name) {
            return Err(format!("a trigger named {name:?} exists already (see `ust list-triggers`)"));
        }
        spec.name = Some(name);
        let t = Trigger { id, spec, rule, fired: 0, last_result: None, satisfied: false, notifiers: BTreeMap::new() };
        let info = t.info();
        self.list.push(t);
        Ok(info)
    }

    /// Removes trigger `name` (`ust remove-trigger`); returns the processes that had a
    /// notifier for it, with its slot in each, for the caller to free the slots, push the
    /// masks and have each drop its notifier buffers.
    ///
    /// # Errors
    /// No trigger of that name.
    pub fn remove(&mut self, name: &str) -> Result<(usize, Vec<(u64, u32)>), String> {
        let Some(pos) = self.list.iter().position(|t| t.name() == name) else {
            return Err(format!("no trigger named {name:?} (see `ust list-triggers`)"));
        };
        let t = self.list.remove(pos);
        Ok((t.id, t.notifiers.iter().map(|(app, n)| (*app, n.slot)).collect()))
    }

    /// Gives process `app` a notifier for every trigger whose rule matches one of its
    /// events and that it has none for yet (at registration, when it registers events
    /// late, and when a trigger is added). The caller pushes the masks afterwards. A
    /// process with no free slot or whose notifier buffers cannot be made is logged and not
    /// watched.
    pub fn attach_app(&mut self, app: &mut App) {
        if !app.alive {
            return;
        }
        for t in self.list.iter_mut() {
            // Only actions the daemon runs need a notifier: `incr-map-value` counts in the
            // process itself.
            let daemon_actions = t.spec.actions.iter().any(|a| !matches!(a, TriggerAction::IncrMapValue { .. }));
            if !daemon_actions
                || t.spec.condition.is_some()
                || t.notifiers.contains_key(&app.id)
                || !app.events.iter().any(|e| t.rule.decide(e) != Decision::Off)
            {
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
            app.send_channel(
                ChannelGrant {
                    slot,
                    session: format!("trigger {}", t.name()),
                    channel: "notifier".into(),
                    ncpus: app.ncpus,
                    contexts: Vec::new(),
                    tsc: None,
                    shared_ids: false,
                    blocking_timeout_us: 0,
                    map: None,
                },
                fds,
            );
            crate::log!("trigger {}: watching process {} ({})", t.name(), app.pid, app.procname);
            t.notifiers.insert(app.id, Notifier { slot, buffers, seen });
        }
    }

    /// A rotation of `session` began (`finished` false) or archived its chunk (true): the
    /// next [`Triggers::poll`] fires the `session-rotation-starts`/`-finishes` triggers
    /// of that session.
    pub fn note_rotation(&mut self, session: &str, finished: bool) {
        if self.list.iter().any(|t| matches!(&t.spec.condition, Some(SessionCondition::RotationStarts { .. } | SessionCondition::RotationFinishes { .. }))) {
            self.rotations.push((session.to_string(), finished));
        }
    }

    /// The sessions that `session-consumed-size-ge` triggers watch.
    pub fn consumed_size_sessions(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .list
            .iter()
            .filter_map(|t| match &t.spec.condition {
                Some(SessionCondition::ConsumedSizeGe { session, .. }) => Some(session.clone()),
                _ => None,
            })
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Evaluates the `session-consumed-size-ge` triggers on one sample (`consumed` gives
    /// a session's consumed bytes, `None` when it no longer exists): a trigger fires when
    /// its sample crosses its threshold upwards, once per crossing, as LTTng's
    /// notification thread does on a state change.
    pub fn sample_consumed(&mut self, consumed: impl Fn(&str) -> Option<u64>) -> Vec<Fired> {
        let mut fired = Vec::new();
        for t in self.list.iter_mut() {
            let Some(SessionCondition::ConsumedSizeGe { session, threshold }) = &t.spec.condition else { continue };
            let now = consumed(session).is_some_and(|b| b >= *threshold);
            if now && !t.satisfied {
                fired.push((t.id, t.name().to_string(), t.spec.actions.clone()));
            }
            t.satisfied = now;
        }
        fired
    }

    /// One look at every notifier: forgets those of processes that are no longer alive
    /// (`alive` says which are), returns the triggers whose buffers moved, then those of
    /// the rotations noted since the last look ([`Triggers::note_rotation`]).
    pub fn poll(&mut self, alive: impl Fn(u64) -> bool) -> Vec<Fired> {
        let mut fired = Vec::new();
        for (session, finished) in std::mem::take(&mut self.rotations) {
            for t in &self.list {
                let hit = match &t.spec.condition {
                    Some(SessionCondition::RotationStarts { session: s }) => !finished && *s == session,
                    Some(SessionCondition::RotationFinishes { session: s }) => finished && *s == session,
                    _ => false,
                };
                if hit {
                    fired.push((t.id, t.name().to_string(), t.spec.actions.clone()));
                }
            }
        }
        for t in self.list.iter_mut() {
            t.notifiers.retain(|id, _| alive(*id));
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
                // Its `incr-map-value` actions were counted by the processes themselves.
                let actions = t.spec.actions.iter().filter(|a| !matches!(a, TriggerAction::IncrMapValue { .. })).cloned().collect();
                fired.push((t.id, t.name().to_string(), actions));
            }
        }
        fired
    }

    /// Trigger `id` fired and its actions said `result`.
    pub fn record_result(&mut self, id: usize, result: String) {
        if let Some(t) = self.list.iter_mut().find(|t| t.id == id) {
            t.fired += 1;
            t.last_result = Some(result);
        }
    }
}
