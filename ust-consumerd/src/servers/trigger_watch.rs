//! The trigger watch thread: while a trigger exists, it looks at every notifier buffer
//! each [`POLL`] and runs the actions of the triggers whose buffers moved, outside the
//! state lock ([`crate::ops::triggers`] says how a notifier works).

use std::sync::Arc;
use std::time::Duration;

use ust_ctl::protocol::{Command, Reply};
use ust_ctl::trigger::TriggerAction;

use crate::ops::state::Daemon;
use crate::ops::triggers::{wait_for_triggers, POLL};

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
            if st.triggers.is_empty() {
                drop(st);
                wait_for_triggers(Duration::from_millis(500));
                continue;
            }
            let st = &mut *st;
            let apps = &st.apps;
            st.triggers.poll(|id| apps.get(&id).is_some_and(|a| a.alive))
        };
        for (id, name, actions) in fired {
            let result = run_actions(daemon, &name, &actions);
            daemon.lock().triggers.record_result(id, result);
        }
        std::thread::sleep(POLL);
    }
}

fn command(daemon: &Daemon, c: Command) -> Result<(), String> {
    match crate::servers::control::dispatch::handle(daemon, c) {
        Reply::Ok(_) => Ok(()),
        Reply::Error { message } => Err(message),
    }
}

fn run_actions(daemon: &Daemon, name: &str, actions: &[TriggerAction]) -> String {
    let mut results = Vec::new();
    for a in actions {
        let r = match a {
            TriggerAction::Notify => Ok("notified".to_string()),
            TriggerAction::SnapshotSession(s) => {
                crate::ops::snapshot::dump::record(daemon, s, None).map(|r| format!("snapshot written to {}", r.dir.display()))
            }
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
