//! What a trace's user-space events show by themselves (the whole report of a trace
//! without kernel events): per event name the count and rate, per thread the gaps between
//! consecutive events.

use crate::report::fast_hash::HashMap;
use std::collections::BTreeMap;

use serde::Serialize;

use super::load::{Domain, Event, Loaded, Name};
use super::tracer::Role;

/// Per-event-name row of the user-space view.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct UserEventRow {
    /// `provider:name`.
    pub name: String,
    /// Count.
    pub count: u64,
    /// Events per second over the trace's span.
    pub rate_per_s: f64,
}

/// Per-thread gaps of the user-space view.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct UserThreadRow {
    /// Process id.
    pub pid: i32,
    /// Thread id (the `vtid` context), or the process id without it.
    pub tid: i32,
    /// Process name.
    pub procname: String,
    /// Events.
    pub events: u64,
    /// Longest time between two consecutive events (ns).
    pub max_gap_ns: u64,
    /// Mean time between consecutive events (ns).
    pub mean_gap_ns: u64,
    /// Start of the longest gap (ns).
    pub max_gap_at_ns: u64,
    /// The thread is ust's ([`super::tracer`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ust: Option<Role>,
}

/// The user-space view.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct UserView {
    /// Per event name.
    pub events: Vec<UserEventRow>,
    /// Per thread.
    pub threads: Vec<UserThreadRow>,
}

/// What the user-space events show: per event name counts and rates, per thread the gaps
/// between consecutive events.
pub fn user_view(l: &Loaded) -> UserView {
    let ust: Vec<&Event> = l.events.iter().filter(|e| e.domain == Domain::Ust).collect();
    let mut v = UserView::default();
    let (Some(first), Some(last)) = (ust.first(), ust.last()) else { return v };
    let span = (last.ts - first.ts).max(1) as f64 / 1e9;
    // Counted by hash (a few dozen names, hundreds of thousands of events; a name hashes
    // as its pointer), then sorted.
    let mut counts: HashMap<Name, u64> = HashMap::default();
    let mut per: HashMap<(i32, i32), Vec<u64>> = HashMap::default();
    for e in &ust {
        *counts.entry(e.name).or_default() += 1;
        per.entry((e.pid, e.tid)).or_default().push(e.ts);
    }
    let counts: BTreeMap<&str, u64> = counts.into_iter().map(|(n, c)| (n.as_str(), c)).collect();
    let per: BTreeMap<(i32, i32), Vec<u64>> = per.into_iter().collect();
    v.events = counts.into_iter().map(|(n, c)| UserEventRow { name: n.to_string(), count: c, rate_per_s: c as f64 / span }).collect();
    for ((pid, tid), ts) in per {
        let gaps: Vec<(u64, u64)> = ts.windows(2).map(|w| (w[1] - w[0], w[0])).collect();
        let (max_gap, at) = gaps.iter().max_by_key(|g| g.0).copied().unwrap_or((0, ts[0]));
        let mean = if gaps.is_empty() { 0 } else { gaps.iter().map(|g| g.0).sum::<u64>() / gaps.len() as u64 };
        let procname = l.processes.iter().find(|p| p.0 == pid).map(|p| p.1.clone()).unwrap_or_default();
        v.threads.push(UserThreadRow { pid, tid, procname, events: ts.len() as u64, max_gap_ns: max_gap, mean_gap_ns: mean, max_gap_at_ns: at, ust: None });
    }
    v
}
