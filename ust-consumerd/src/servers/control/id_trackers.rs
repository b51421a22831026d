//! `ust track/untrack --vuid|--vgid`: the session's user-id and group-id trackers
//! ([`ust_ctl::trackers`]), applied as the process-id tracker is
//! (`track_vpids`): at once, to running processes (attached when
//! they become tracked, their events turned off and confirmed when they stop being
//! tracked) and to those that register later.

use ust_ctl::protocol::Payload;
use ust_ctl::trackers::{IdKind, IdTracker, MAX_TRACKED_IDS};

use crate::ops::state::Daemon;
use crate::ops::sync::{retrack_live_apps, wait_syncs};

/// [`ust_ctl::protocol::Command::TrackIds`].
///
/// # Errors
/// Ids and `--all` together, neither, too many ids, untracking from "all", no session.
pub fn track_ids(daemon: &Daemon, session: Option<String>, kind: IdKind, ids: Vec<u32>, all: bool, track: bool) -> Result<Payload, String> {
    let verb = if track { "track" } else { "untrack" };
    let opt = kind.option();
    if all && !ids.is_empty() {
        return Err(format!("{verb} {opt}: give ids or --all, not both"));
    }
    if !all && ids.is_empty() {
        return Err(format!("{verb} {opt}: no {} id given (or use --all)", kind.noun()));
    }
    if ids.len() > MAX_TRACKED_IDS {
        return Err(format!("{} ids given, at most {MAX_TRACKED_IDS}", ids.len()));
    }
    let (sname, tracker, unchanged, waits) = {
        let mut st = daemon.lock();
        let sname = st.resolve(&session)?;
        let ss = st.sessions.get_mut(&sname).expect("resolved");
        let t = match kind {
            IdKind::Vuid => &mut ss.session.vuid_tracker,
            IdKind::Vgid => &mut ss.session.vgid_tracker,
        };
        let unchanged = match (all, track) {
            (true, true) => {
                *t = IdTracker::All;
                Vec::new()
            }
            (true, false) => {
                *t = IdTracker::Only(Default::default());
                Vec::new()
            }
            (false, true) => t.track(&ids).map_err(|e| format!("session {sname}: {e}"))?,
            (false, false) => t.untrack(kind, &ids).map_err(|e| format!("session {sname}: {e}"))?,
        };
        let tracker = t.clone();
        let waits = retrack_live_apps(daemon, &mut st, &sname);
        (sname, tracker, unchanged, waits)
    };
    wait_syncs(&sname, waits, "the tracker change");
    crate::log!("session {sname}: tracked {} ids: {}", kind.noun(), tracker.describe());
    Ok(Payload::IdTracker { session: sname, kind, tracker, unchanged })
}
