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
//! ([`Triggers::sample_consumed`]), `channel-buffer-usage-ge/le` on samples of the
//! channel's ring buffers (`write − consumed` of each, the highest per process, or per
//! user with per-UID buffers: [`Triggers::sample_usage`]), `session-rotation-starts/finishes`
//! on the rotations [`crate::ops::rotate::rotate`] reports ([`Triggers::note_rotation`]).
//! Sampled conditions fire on a crossing, as LTTng's notification thread: when a sample
//! satisfies the condition and the previous one (of that process's channel) did not.
//!
//! Each firing is an execution request for each action; an action runs when its count
//! satisfies its rate policy ([`Triggers::admit`]).
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
use ust_ctl::trigger::options::ActionOptions;
use ust_ctl::trigger::{SessionCondition, TriggerAction, TriggerInfo, TriggerSpec, UsageThreshold};

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
    /// `channel-buffer-usage-ge/le`: the last sample's result for each channel instance
    /// (the key of a process's trace in the session, or of a per-UID trace).
    usage: BTreeMap<u64, bool>,
    /// Execution requests of each action so far (the rate policies count them).
    requests: Vec<u64>,
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
        if let Some(SessionCondition::BufferUsageGe { channel, threshold, .. } | SessionCondition::BufferUsageLe { channel, threshold, .. }) = &spec.condition {
            ust_ctl::config::check_name("channel", channel)?;
            threshold.check()?;
        }
        for o in &spec.action_options {
            if let Some(out) = &o.snapshot_output {
                out.check()?;
            }
        }
        spec.normalize();
        for a in &spec.actions {
            match a {
                TriggerAction::Notify => {}
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
        let requests = vec![0; spec.actions.len()];
        let t = Trigger { id, spec, rule, fired: 0, last_result: None, satisfied: false, usage: BTreeMap::new(), requests, notifiers: BTreeMap::new() };
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
    pub fn remove(&mut self, name: &str) -> Result<Vec<(u64, u32)>, String> {
        let Some(pos) = self.list.iter().position(|t| t.name() == name) else {
            return Err(format!("no trigger named {name:?} (see `ust list-triggers`)"));
        };
        Ok(self.list.remove(pos).notifiers.iter().map(|(app, n)| (*app, n.slot)).collect())
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
            if t.spec.condition.is_some() || t.notifiers.contains_key(&app.id) || !app.events.iter().any(|e| t.rule.decide(e) != Decision::Off) {
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

    /// The `(session, channel)` pairs that `channel-buffer-usage-ge/le` triggers watch.
    pub fn usage_channels(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .list
            .iter()
            .filter_map(|t| match &t.spec.condition {
                Some(SessionCondition::BufferUsageGe { session, channel, .. } | SessionCondition::BufferUsageLe { session, channel, .. }) => {
                    Some((session.clone(), channel.clone()))
                }
                _ => None,
            })
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Evaluates the `channel-buffer-usage-ge/le` triggers on one round of samples (one
    /// per channel instance that exists now): for each instance, fires when the sample
    /// satisfies the condition and that instance's previous sample did not (a first
    /// sample counts as not satisfied before, as in LTTng), and forgets instances that are
    /// gone.
    pub fn sample_usage(&mut self, samples: &[UsageSample]) -> Vec<Fired> {
        let mut fired = Vec::new();
        for t in self.list.iter_mut() {
            let (session, channel, threshold, high) = match &t.spec.condition {
                Some(SessionCondition::BufferUsageGe { session, channel, threshold }) => (session, channel, *threshold, true),
                Some(SessionCondition::BufferUsageLe { session, channel, threshold }) => (session, channel, *threshold, false),
                _ => continue,
            };
            let mine: Vec<&UsageSample> = samples.iter().filter(|s| s.session == *session && s.channel == *channel).collect();
            t.usage.retain(|k, _| mine.iter().any(|s| s.instance == *k));
            for s in mine {
                let now = usage_satisfies(high, threshold, s);
                let before = t.usage.insert(s.instance, now).unwrap_or(false);
                if now && !before {
                    fired.push((t.id, t.name().to_string(), t.spec.actions.clone()));
                }
            }
        }
        fired
    }

    /// Trigger `id` fired: counts an execution request for each of its actions and
    /// returns those whose rate policy lets them run, in order, with their options.
    pub fn admit(&mut self, id: usize) -> Vec<(TriggerAction, ActionOptions)> {
        let Some(t) = self.list.iter_mut().find(|t| t.id == id) else { return Vec::new() };
        t.requests.resize(t.spec.actions.len(), 0);
        let mut run = Vec::new();
        for (i, a) in t.spec.actions.iter().enumerate() {
            t.requests[i] += 1;
            let o = t.spec.options(i);
            if o.rate_policy.admits(t.requests[i]) {
                run.push((a.clone(), o));
            }
        }
        run
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
                fired.push((t.id, t.name().to_string(), t.spec.actions.clone()));
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

/// One sample of a channel instance's buffer usage: the highest `write − consumed` of its
/// ring buffers and the size of one ring (sub-buffer size × count), bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageSample {
    /// Session.
    pub session: String,
    /// Channel.
    pub channel: String,
    /// The channel instance: the key of the process's (or per-UID) trace in the session.
    pub instance: u64,
    /// Highest usage of its ring buffers, bytes.
    pub highest: u64,
    /// One ring buffer's size, bytes (what a ratio is of).
    pub capacity: u64,
}

/// LTTng's `evaluate_buffer_usage_condition`: high when the highest usage is at least the
/// threshold (any buffer that full), low when it is at most (every buffer that empty).
fn usage_satisfies(high: bool, threshold: UsageThreshold, s: &UsageSample) -> bool {
    let t = threshold.bytes(s.capacity);
    if high {
        s.highest >= t
    } else {
        s.highest <= t
    }
}

#[cfg(test)]
mod usage_tests {
    use super::*;
    use ust_ctl::config::{Enabler, LevelFilter};
    use ust_ctl::trigger::options::RatePolicy;
    use ust_ctl::trigger::Ratio;

    fn spec(name: &str, condition: SessionCondition, rate: RatePolicy) -> TriggerSpec {
        TriggerSpec {
            name: Some(name.into()),
            rule: Enabler::new("*", LevelFilter::Any),
            condition: Some(condition),
            actions: vec![TriggerAction::Notify],
            action_options: vec![ActionOptions { rate_policy: rate, snapshot_output: None }],
        }
    }

    fn sample(instance: u64, highest: u64) -> UsageSample {
        UsageSample { session: "s".into(), channel: "c".into(), instance, highest, capacity: 8192 }
    }

    #[test]
    fn usage_fires_on_crossings_per_instance() {
        let mut t = Triggers::default();
        let ge = SessionCondition::BufferUsageGe { session: "s".into(), channel: "c".into(), threshold: UsageThreshold::Ratio(Ratio(0.5)) };
        let le = SessionCondition::BufferUsageLe { session: "s".into(), channel: "c".into(), threshold: UsageThreshold::Bytes(0) };
        t.add(spec("ge", ge, RatePolicy::default()), |_| true).unwrap();
        t.add(spec("le", le, RatePolicy::default()), |_| true).unwrap();
        assert_eq!(t.usage_channels(), vec![("s".to_string(), "c".to_string())]);
        let names = |f: Vec<Fired>| f.into_iter().map(|(_, n, _)| n).collect::<Vec<_>>();
        // First sample: empty, so `le` fires (nothing before), `ge` does not.
        assert_eq!(names(t.sample_usage(&[sample(1, 0)])), vec!["le"]);
        assert_eq!(names(t.sample_usage(&[sample(1, 0)])), Vec::<String>::new());
        assert_eq!(names(t.sample_usage(&[sample(1, 4095)])), Vec::<String>::new());
        assert_eq!(names(t.sample_usage(&[sample(1, 4096)])), vec!["ge"], "at 0.5 of 8192");
        assert_eq!(names(t.sample_usage(&[sample(1, 8192)])), Vec::<String>::new(), "still above: no new firing");
        // A second process's channel is an instance of its own.
        assert_eq!(names(t.sample_usage(&[sample(1, 8192), sample(2, 8192)])), vec!["ge"]);
        assert_eq!(names(t.sample_usage(&[sample(1, 0), sample(2, 8192)])), vec!["le"]);
        // Instance 1 gone and back: a first sample again.
        assert_eq!(names(t.sample_usage(&[sample(2, 8192)])), Vec::<String>::new());
        assert_eq!(names(t.sample_usage(&[sample(1, 8192), sample(2, 8192)])), vec!["ge"]);
        // Other channels and sessions do not count.
        let other = UsageSample { channel: "d".into(), ..sample(3, 0) };
        assert_eq!(names(t.sample_usage(&[sample(1, 8192), sample(2, 8192), other])), Vec::<String>::new());
    }

    #[test]
    fn rate_policies_admit_actions() {
        let mut t = Triggers::default();
        let c = SessionCondition::RotationStarts { session: "s".into() };
        let every = t.add(spec("every", c.clone(), RatePolicy::EveryN(3)), |_| true).unwrap();
        let once = t.add(spec("once", c, RatePolicy::OnceAfterN(2)), |_| true).unwrap();
        let id = |name: &str| t.list.iter().find(|x| x.name() == name).unwrap().id;
        let (e, o) = (id("every"), id("once"));
        let ran = |t: &mut Triggers, i: usize| (1..=7).filter(|_| !t.admit(i).is_empty()).count();
        assert_eq!(ran(&mut t, e), 2, "requests 3 and 6 of 7");
        assert_eq!(ran(&mut t, o), 1, "request 2 only");
        assert_eq!(every.spec.options(0).rate_policy, RatePolicy::EveryN(3));
        assert_eq!(once.spec.options(0).rate_policy, RatePolicy::OnceAfterN(2));
    }
}
