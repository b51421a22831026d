//! `Sync` round trips with the processes of a session: masks pushed, then a `Sync` each
//! process answers only once it has applied what was queued before, waited for outside
//! the state lock and bounded by [`SYNC_TIMEOUT`] (a dead or stuck writer never blocks a
//! request).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ust_core::protocol::DaemonMessage;

use crate::model::app::SyncState;
use crate::ops::state::{Daemon, State};

/// Longest wait for `SyncDone` from the processes of a session at `stop`.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(2);

/// A `Sync` round trip in progress with one process: its sync state, the sequence number
/// sent, its pid.
pub type SyncWait = (Arc<SyncState>, u64, i32);

/// Queues `SetEnabled` with fresh masks, then `Sync`, to every live process that has a
/// slot in session `name`; the caller releases the state lock and [`wait_syncs`].
pub fn push_masks_and_sync(st: &mut State, name: &str) -> Vec<SyncWait> {
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

/// After a tracker of session `sname` changed: attaches every live process the session now
/// takes (waking the drain for its new streams), pushes the event masks to all of them, and
/// returns the syncs to wait for (outside the state lock) before the change is confirmed.
pub fn retrack_live_apps(daemon: &Daemon, st: &mut State, sname: &str) -> Vec<SyncWait> {
    let live: Vec<u64> = st.apps.values().filter(|a| a.alive).map(|a| a.id).collect();
    for id in live {
        if crate::ops::attach::attach(st, sname, id) {
            daemon.wake_drain();
        }
    }
    push_masks_and_sync(st, sname)
}

/// Waits until every process of `waits` answered its `Sync` (so it has applied what was
/// queued before), at most [`SYNC_TIMEOUT`] in all; logs the ones that did not.
pub fn wait_syncs(name: &str, waits: Vec<SyncWait>, what: &str) {
    let deadline = Instant::now() + SYNC_TIMEOUT;
    for (sync, seq, pid) in waits {
        if !sync.wait(seq, deadline) {
            crate::log!("session {name}: process {pid} did not confirm {what} (Sync {seq})");
        }
    }
}
