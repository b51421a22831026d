//! The trigger requests: `ust add-trigger`, `list-triggers`, `remove-trigger`
//! ([`crate::ops::triggers`] holds the triggers; [`crate::servers::trigger_watch`] fires
//! them).

use ust_core::protocol::DaemonMessage;
use ust_ctl::protocol::Payload;
use ust_ctl::trigger::TriggerSpec;

use crate::ops::state::Daemon;
use crate::ops::triggers::wake_watch;

/// `ust add-trigger`: adds the trigger, gives every live process whose events it matches
/// a notifier, and pushes their masks.
///
/// # Errors
/// What [`crate::ops::triggers::Triggers::add`] refuses.
pub fn add(daemon: &Daemon, spec: TriggerSpec) -> Result<Payload, String> {
    let mut st = daemon.lock();
    let sessions: Vec<String> = st.sessions.keys().cloned().collect();
    let info = st.triggers.add(spec, |s| sessions.iter().any(|n| n == s))?;
    let apps: Vec<u64> = st.apps.values().filter(|a| a.alive).map(|a| a.id).collect();
    for a in apps {
        let st = &mut *st;
        if let Some(app) = st.apps.get_mut(&a) {
            st.triggers.attach_app(app);
        }
        st.attach_maps(a);
        st.push_masks(a);
    }
    drop(st);
    crate::log!("trigger {} added", info.spec.name.as_deref().unwrap_or_default());
    wake_watch();
    Ok(Payload::Triggers(vec![info]))
}

/// `ust add-map-channel`: adds the map channel, then gives every live process the map
/// slots of the triggers' `incr-map-value` actions that name it, and pushes their masks.
///
/// # Errors
/// No such session, or what [`crate::ops::maps::Maps::add_channel`] refuses.
pub fn add_map_channel(daemon: &Daemon, session: Option<String>, name: Option<String>, config: ust_ctl::maps::MapChannelConfig) -> Result<Payload, String> {
    let mut st = daemon.lock();
    let session = st.resolve(&session)?;
    let channel = st.maps.add_channel(&session, name, config)?;
    let apps: Vec<u64> = st.apps.values().filter(|a| a.alive).map(|a| a.id).collect();
    for a in apps {
        st.attach_maps(a);
        st.push_masks(a);
    }
    crate::log!("session {session}: map channel {channel} added");
    Ok(Payload::MapChannelAdded(session, channel))
}

/// `ust list-triggers`.
pub fn list(daemon: &Daemon) -> Payload {
    Payload::Triggers(daemon.lock().triggers.list())
}

/// `ust remove-trigger NAME`: clears the trigger's bits in every process, then has each
/// drop its notifier buffers.
///
/// # Errors
/// No trigger of that name.
pub fn remove(daemon: &Daemon, name: &str) -> Result<Payload, String> {
    let mut st = daemon.lock();
    let (id, notifiers) = st.triggers.remove(name)?;
    let gone = st.maps.trigger_removed(id);
    st.free_map_slots(&gone);
    for (app_id, slot) in notifiers {
        let Some(app) = st.apps.get_mut(&app_id) else { continue };
        app.slots.remove(&slot);
        st.push_masks(app_id);
        if let Some(app) = st.apps.get(&app_id) {
            app.send(DaemonMessage::RemoveChannel { slot }, Vec::new());
        }
    }
    crate::log!("trigger {name} removed");
    Ok(Payload::Done)
}
