//! The user-id and group-id trackers of a session (`ust track/untrack --vuid|--vgid`,
//! LTTng 2.13's `lttng track/untrack --userspace --vuid|--vgid`), beside the process-id
//! tracker ([`crate::config::VpidTracker`]) and with its semantics: a tracker takes every
//! id (the default, policy "all") or only those of an inclusion set (possibly empty:
//! nothing is recorded). A process is recorded when every tracker of the session takes it.
//!
//! The ids are those the daemon sees for the process (`SO_PEERCRED` when it registered:
//! its effective uid and gid), which are its own unless it runs in another user namespace.
//!
//! JSON (`ust list SESSION --json`, fields `vuid_tracker`, `vgid_tracker`): `"all"`, or
//! `{"only": [id, ...]}` in increasing order.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// Most ids one tracker lists.
pub const MAX_TRACKED_IDS: usize = 65536;

/// Which id a tracker is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdKind {
    /// Virtual user id (`--vuid`).
    Vuid,
    /// Virtual group id (`--vgid`).
    Vgid,
}

impl IdKind {
    /// `user` or `group`, for messages.
    pub fn noun(self) -> &'static str {
        match self {
            IdKind::Vuid => "user",
            IdKind::Vgid => "group",
        }
    }

    /// `--vuid` or `--vgid`.
    pub fn option(self) -> &'static str {
        match self {
            IdKind::Vuid => "--vuid",
            IdKind::Vgid => "--vgid",
        }
    }
}

/// A user-id or group-id tracker.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdTracker {
    /// Every id is tracked (the default; `ust track --vuid --all`).
    #[default]
    All,
    /// Only these ids; empty after `ust untrack --vuid --all`.
    Only(BTreeSet<u32>),
}

impl IdTracker {
    /// True when id `id` is tracked.
    pub fn tracks(&self, id: u32) -> bool {
        match self {
            IdTracker::All => true,
            IdTracker::Only(s) => s.contains(&id),
        }
    }

    /// `track IDS`: from "all" to the set `IDS`, or adds to the set. Returns the ids that
    /// were in the set already (LTTng warns and goes on).
    ///
    /// # Errors
    /// More than [`MAX_TRACKED_IDS`] ids; the tracker is then unchanged.
    pub fn track(&mut self, ids: &[u32]) -> Result<Vec<u32>, String> {
        let was_all = *self == IdTracker::All;
        let mut set = match self {
            IdTracker::All => BTreeSet::new(),
            IdTracker::Only(s) => s.clone(),
        };
        let mut already: Vec<u32> = ids.iter().copied().filter(|i| !set.insert(*i)).collect();
        already.dedup();
        if was_all {
            already.clear();
        }
        if set.len() > MAX_TRACKED_IDS {
            return Err(format!("a session tracks at most {MAX_TRACKED_IDS} ids of one kind"));
        }
        *self = IdTracker::Only(set);
        Ok(already)
    }

    /// `untrack IDS`: removes them from the set. Returns the ids that were not in it.
    ///
    /// # Errors
    /// The tracker takes every id: there is no list to remove from (LTTng has no
    /// exclusion set); the message says what to do instead.
    pub fn untrack(&mut self, kind: IdKind, ids: &[u32]) -> Result<Vec<u32>, String> {
        match self {
            IdTracker::All => Err(format!(
                "every {0} is tracked (policy \"all\"): there is no list to remove a {0} id from; track the ones to keep with `ust track {1} ID,...`, or none with `ust untrack {1} --all`",
                kind.noun(),
                kind.option()
            )),
            IdTracker::Only(set) => {
                let mut missing: Vec<u32> = ids.iter().copied().filter(|i| !set.remove(i)).collect();
                missing.dedup();
                Ok(missing)
            }
        }
    }

    /// Human form: `all`, `none`, or the ids, comma-separated.
    pub fn describe(&self) -> String {
        match self {
            IdTracker::All => "all".into(),
            IdTracker::Only(s) if s.is_empty() => "none".into(),
            IdTracker::Only(s) => s.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_tracker_follows_lttng() {
        let mut t = IdTracker::default();
        assert!(t.tracks(0) && t.tracks(1000));
        assert!(t.untrack(IdKind::Vuid, &[5]).unwrap_err().contains("--vuid"));
        assert_eq!(t.track(&[1000, 0]), Ok(vec![]));
        assert!(t.tracks(0) && !t.tracks(7));
        assert_eq!(t.describe(), "0, 1000");
        assert_eq!(t.track(&[0, 9]), Ok(vec![0]));
        assert_eq!(t.untrack(IdKind::Vgid, &[9, 8]), Ok(vec![8]));
        assert_eq!(t.describe(), "0, 1000");
        assert_eq!(serde_json::to_string(&t).unwrap(), r#"{"only":[0,1000]}"#);
        assert_eq!(IdTracker::Only(Default::default()).describe(), "none");
    }
}
