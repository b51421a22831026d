//! The trigger watch thread: while a trigger exists, it looks at every notifier buffer
//! each [`POLL`] and runs the actions of the triggers whose buffers moved or whose session
//! rotated, samples the consumed size of the sessions `session-consumed-size-ge` triggers
//! watch every [`ust_ctl::trigger::CONSUMED_SIZE_SAMPLE_MS`], and the buffer usage of the
//! channels `channel-buffer-usage-ge/le` triggers watch as often, and runs their actions
//! (those their rate policies admit), outside the state lock ([`crate::ops::triggers`]
//! says how a notifier works).

use std::sync::Arc;
use std::time::Duration;

use ust_ctl::protocol::{Command, Reply};
use ust_ctl::trigger::options::ActionOptions;
use ust_ctl::trigger::TriggerAction;

use crate::ops::state::Daemon;
use crate::ops::triggers::{wait_for_triggers, Fired, UsageSample, POLL};

/// Starts the watch thread (once, from [`crate::daemon`]): it sleeps while no trigger
/// exists, else looks at every notifier buffer each [`POLL`] and runs the actions of the
/// triggers whose buffers moved, outside the state lock.
pub fn spawn_watch(daemon: Arc<Daemon>) {
    let r = std::thread::Builder::new().name("triggers".into()).spawn(move || watch(&daemon));
    if let Err(e) = r {
        crate::log!("cannot start the trigger watch thread: {e}; triggers will not fire");
    }
}

/// Sums the bytes written of each of `sessions` (`None`: no such session), locking each
/// stream outside the state lock as `ust status` does.
fn consumed(daemon: &Daemon, sessions: Vec<String>) -> Vec<(String, Option<u64>)> {
    let streams: Vec<(String, Option<Vec<_>>)> = {
        let st = daemon.lock();
        sessions.into_iter().map(|s| (s.clone(), st.sessions.get(&s).map(|ss| ss.streams()))).collect()
    };
    streams
        .into_iter()
        .map(|(s, streams)| {
            let bytes = streams.map(|v| v.iter().fold(0u64, |a, x| a.saturating_add(x.lock().unwrap_or_else(|e| e.into_inner()).stats().bytes)));
            (s, bytes)
        })
        .collect()
}

/// One usage sample per live channel instance of each watched `(session, channel)`: the
/// highest `write − consumed` of its streams, each locked outside the state lock.
fn usage_samples(daemon: &Daemon, wanted: &[(String, String)]) -> Vec<UsageSample> {
    let instances: Vec<(String, String, u64, Vec<_>)> = {
        let st = daemon.lock();
        let mut v = Vec::new();
        for (session, channel) in wanted {
            let Some(ss) = st.sessions.get(session) else { continue };
            for (key, t) in ss.traces.iter().filter(|(_, t)| !t.gone) {
                v.push((session.clone(), channel.clone(), *key, t.streams.clone()));
            }
        }
        v
    };
    let mut out = Vec::new();
    for (session, channel, instance, streams) in instances {
        let mut found: Option<(u64, u64)> = None;
        for s in &streams {
            let s = s.lock().unwrap_or_else(|e| e.into_inner());
            if s.channel() != channel {
                continue;
            }
            if let Some((used, cap)) = s.buffer_usage() {
                let (h, c) = found.unwrap_or((0, cap));
                found = Some((h.max(used), c.max(cap)));
            }
        }
        if let Some((highest, capacity)) = found {
            out.push(UsageSample { session, channel, instance, highest, capacity });
        }
    }
    out
}

/// Runs the admitted actions of each fired trigger and records what they did.
fn run_fired(daemon: &Daemon, fired: Vec<Fired>) {
    for (id, name, _) in fired {
        let admitted = daemon.lock().triggers.admit(id);
        let result = if admitted.is_empty() { "no action ran (rate policy)".to_string() } else { run_actions(daemon, &name, &admitted) };
        daemon.lock().triggers.record_result(id, result);
    }
}

fn watch(daemon: &Daemon) {
    let sample_every = Duration::from_millis(ust_ctl::trigger::CONSUMED_SIZE_SAMPLE_MS);
    let mut last_sample = std::time::Instant::now();
    while !daemon.shutting_down() {
        if last_sample.elapsed() >= sample_every {
            last_sample = std::time::Instant::now();
            let sessions = daemon.lock().triggers.consumed_size_sessions();
            if !sessions.is_empty() {
                let values = consumed(daemon, sessions);
                let fired = daemon.lock().triggers.sample_consumed(|s| values.iter().find(|(n, _)| n == s).and_then(|(_, b)| *b));
                run_fired(daemon, fired);
            }
            let channels = daemon.lock().triggers.usage_channels();
            if !channels.is_empty() {
                let samples = usage_samples(daemon, &channels);
                let fired = daemon.lock().triggers.sample_usage(&samples);
                run_fired(daemon, fired);
            }
        }
        let fired = {
            let mut st = daemon.lock();
            if st.triggers.is_empty() {
                drop(st);
                wait_for_triggers(Duration::from_millis(500));
                continue;
            }
            let st = &mut *st;
            let apps = &st.apps;
            st.triggers.poll(|id| apps.get(&id).is_some_and(|a| a.alive))
        };
        run_fired(daemon, fired);
        std::thread::sleep(POLL);
    }
}

fn command(daemon: &Daemon, c: Command) -> Result<(), String> {
    match crate::servers::control::dispatch::handle(daemon, c) {
        Reply::Ok(_) => Ok(()),
        Reply::Error { message } => Err(message),
    }
}

fn run_actions(daemon: &Daemon, name: &str, actions: &[(TriggerAction, ActionOptions)]) -> String {
    let mut results = Vec::new();
    for (a, options) in actions {
        let r = match a {
            TriggerAction::Notify => Ok("notified".to_string()),
            TriggerAction::SnapshotSession(s) => match &options.snapshot_output {
                None => crate::ops::snapshot::dump::record(daemon, s, None),
                Some(out) => crate::ops::snapshot::dump::record_to_output(daemon, s, out),
            }
            .map(|r| format!("snapshot written to {}", r.dir.display())),
            TriggerAction::StartSession(s) => command(daemon, Command::Start { session: Some(s.clone()) }).map(|_| format!("session {s} started")),
            TriggerAction::StopSession(s) => command(daemon, Command::Stop { session: Some(s.clone()) }).map(|_| format!("session {s} stopped")),
            TriggerAction::RotateSession(s) => crate::ops::rotate::rotate(daemon, s).map(|d| format!("session {s} rotated to {}", d.display())),
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
