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
    let mut t = UserTally::default();
    for e in l.events.iter().filter(|e| e.domain == Domain::Ust) {
        t.add(e, 0);
    }
    t.view(&l.processes).unwrap_or_default()
}

/// A set of user-space traces loaded for a count ([`load_counted`]).
pub struct Counted {
    /// The set's processes, problems and span events (no other event).
    pub loaded: Loaded,
    /// Every user-space event, counted.
    pub tally: UserTally,
}

/// Whether [`load_counted`] can give the report of `set` (user-space traces only): not
/// when two of its traces may hold the same thread at once, which the counts cannot tell
/// apart ([`UserTally`]): traces of several hosts (process ids are per host), or two
/// traces whose events may have no process id (no `env.vpid` and a stream without a `vpid`
/// context: LTTng-UST's per-user buffers without the context, where every event is
/// process -1). The report then loads the events whole, as it always did.
pub fn countable(set: &crate::traces::TraceSet) -> bool {
    let hosts: std::collections::BTreeSet<Option<&str>> = set.members.iter().map(|m| m.origin.hostname.as_deref()).collect();
    let without_pid = |m: &crate::traces::Member| {
        m.origin.vpid.is_none()
            && m.ctf
                .metadata()
                .streams
                .iter()
                .any(|s| !matches!(&s.event_context, Some(ctf_reader::FieldType::Struct { fields, .. }) if fields.iter().any(|f| f.name == "vpid")))
    };
    hosts.len() <= 1 && set.members.iter().filter(|m| without_pid(m)).count() <= 1
}

/// Loads a set of user-space traces (no kernel trace: the report's user-space view only)
/// without keeping its events: each is counted, and only the `tracing` layer's span events
/// ([`crate::spans::span_parts`]), which the span view pairs, are kept; the other events
/// are built without fields ([`super::brief`]). Memory: the span events and a few numbers
/// per event name and thread, whatever the trace's size.
pub fn load_counted(set: &crate::traces::TraceSet) -> Counted {
    let mut tally = UserTally::default();
    let spans = |name: &str| crate::spans::span_parts(name).is_some();
    let loaded = super::load::load_set_kept(set, &spans, &mut |e, trace| {
        if e.domain == Domain::Ust {
            tally.add(e, trace);
        }
    });
    Counted { loaded, tally }
}

/// The user-space view's counts, fed one event at a time ([`UserTally::add`]): per event
/// name a count, per thread a few numbers per trace it appears in, so that a report of
/// traces without kernel events keeps none of the events it counts ([`load_counted`]).
///
/// A thread's figures depend only on its events' times (its gaps are the differences of
/// its sorted times, each at the earlier one), so they are kept per trace, where the
/// thread's events come in time order, and joined when the traces' runs follow one another
/// in time. A thread whose events in two traces interleave in time (the same process and
/// thread ids in two traces at once: two pid namespaces), or whose events in one trace
/// run backwards (a damaged trace), makes [`UserTally::view`] give `None`: the caller then
/// reads the events whole.
#[derive(Default)]
pub struct UserTally {
    counts: HashMap<Name, u64>,
    /// Per `(pid, tid)`, its events in each trace (in the order the traces came), in the
    /// order first seen; `index` finds them.
    threads: Vec<((i32, i32), Vec<Run>)>,
    index: HashMap<(i32, i32), usize>,
    /// The last two threads counted, with their index (most events follow one of them:
    /// no lookup).
    recent: [Option<((i32, i32), usize)>; 2],
    /// The last event name counted and its count so far, not yet in `counts`.
    name_run: Option<(Name, u64)>,
    /// The first and last time of the events.
    span: Option<(u64, u64)>,
    /// A trace's events of one thread ran backwards.
    unordered: bool,
}

/// One thread's events in one trace.
#[derive(Clone, Copy)]
struct Run {
    trace: usize,
    first: u64,
    last: u64,
    events: u64,
    /// The longest gap and where it starts (the latest of equal ones); `events` > 1.
    max_gap: (u64, u64),
    gaps_ns: u64,
}

impl UserTally {
    /// Counts `e`, a user-space event of trace number `trace` (the traces in any order,
    /// each trace's events in time order).
    pub fn add(&mut self, e: &Event, trace: usize) {
        match &mut self.name_run {
            Some((n, c)) if *n == e.name => *c += 1,
            run => {
                if let Some((n, c)) = run.replace((e.name, 1)) {
                    *self.counts.entry(n).or_default() += c;
                }
            }
        }
        self.span = Some(self.span.map_or((e.ts, e.ts), |(a, b)| (a.min(e.ts), b.max(e.ts))));
        let t = self.thread((e.pid, e.tid));
        let runs = &mut self.threads[t].1;
        match runs.last_mut() {
            Some(r) if r.trace == trace => {
                let Some(gap) = e.ts.checked_sub(r.last) else {
                    self.unordered = true;
                    return;
                };
                if r.events == 1 || gap >= r.max_gap.0 {
                    r.max_gap = (gap, r.last);
                }
                r.gaps_ns += gap;
                r.events += 1;
                r.last = e.ts;
            }
            _ => runs.push(Run { trace, first: e.ts, last: e.ts, events: 1, max_gap: (0, e.ts), gaps_ns: 0 }),
        }
    }

    /// The first and last time of the events counted (`None` without any).
    pub fn span(&self) -> Option<(u64, u64)> {
        self.span
    }

    /// Each thread's first event time.
    pub fn first_events(&self) -> HashMap<(i32, i32), u64> {
        self.threads.iter().map(|(k, runs)| (*k, runs.iter().map(|r| r.first).min().unwrap_or(0))).collect()
    }

    /// The index of thread `key` in `threads` (added when new).
    fn thread(&mut self, key: (i32, i32)) -> usize {
        match self.recent {
            [Some((k, i)), _] if k == key => return i,
            [a, Some((k, i))] if k == key => {
                self.recent = [Some((k, i)), a];
                return i;
            }
            _ => {}
        }
        let next = self.threads.len();
        let i = *self.index.entry(key).or_insert(next);
        if i == next {
            self.threads.push((key, Vec::new()));
        }
        self.recent = [Some((key, i)), self.recent[0]];
        i
    }

    /// The view (`processes`: [`Loaded::processes`], for the threads' process names);
    /// `None` when the counts cannot give it exactly (see [`UserTally`]).
    pub fn view(&self, processes: &[(i32, String, std::path::PathBuf)]) -> Option<UserView> {
        if self.unordered {
            return None;
        }
        let mut v = UserView::default();
        let Some((first, last)) = self.span else { return Some(v) };
        let span = (last - first).max(1) as f64 / 1e9;
        let mut counts: BTreeMap<&str, u64> = self.counts.iter().map(|(n, c)| (n.as_str(), *c)).collect();
        if let Some((n, c)) = &self.name_run {
            *counts.entry(n.as_str()).or_default() += c;
        }
        v.events = counts.into_iter().map(|(n, c)| UserEventRow { name: n.to_string(), count: c, rate_per_s: c as f64 / span }).collect();
        let threads: BTreeMap<(i32, i32), &Vec<Run>> = self.threads.iter().map(|(k, r)| (*k, r)).collect();
        for ((pid, tid), runs) in threads {
            let (events, max_gap, gaps_ns) = joined(runs)?;
            let (max_gap_ns, max_gap_at_ns) = max_gap;
            let mean_gap_ns = if events > 1 { gaps_ns / (events - 1) } else { 0 };
            let procname = processes.iter().find(|p| p.0 == pid).map(|p| p.1.clone()).unwrap_or_default();
            v.threads.push(UserThreadRow { pid, tid, procname, events, max_gap_ns, mean_gap_ns, max_gap_at_ns, ust: None });
        }
        Some(v)
    }
}

/// A thread's runs in time order as one: its events, its longest gap (the latest of equal
/// ones, and where it starts; the first event's time without gaps) and the sum of its
/// gaps; `None` when two runs interleave in time (a run starting before the one before it
/// ends: the gaps between their events are not in the runs' figures).
fn joined(runs: &[Run]) -> Option<(u64, (u64, u64), u64)> {
    let mut runs = runs.to_vec();
    runs.sort_by_key(|r| (r.first, r.last, r.trace));
    let mut max: Option<(u64, u64)> = None;
    let (mut events, mut gaps_ns) = (0u64, 0u64);
    for (i, r) in runs.iter().enumerate() {
        if let Some(prev) = i.checked_sub(1).map(|j| runs[j]) {
            if r.first < prev.last {
                return None;
            }
            let bridge = r.first - prev.last;
            if max.is_none_or(|m| bridge >= m.0) {
                max = Some((bridge, prev.last));
            }
            gaps_ns += bridge;
        }
        if r.events > 1 && max.is_none_or(|m| r.max_gap.0 >= m.0) {
            max = Some(r.max_gap);
        }
        events += r.events;
        gaps_ns += r.gaps_ns;
    }
    Some((events, max.unwrap_or((0, runs.first()?.first)), gaps_ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ev(ts: u64, pid: i32, tid: i32, name: &str) -> Event {
        Event { ts, cpu: 0, name: name.into(), tid, pid, domain: Domain::Ust, fields: Vec::new() }
    }

    /// The view of `events` (sorted by time) as the report made it before the tally: per
    /// thread, the list of its times and the gaps between them (the latest of equal
    /// longest ones).
    fn oracle(events: &[Event]) -> UserView {
        let mut v = UserView::default();
        let (Some(first), Some(last)) = (events.first(), events.last()) else { return v };
        let span = (last.ts - first.ts).max(1) as f64 / 1e9;
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        let mut per: BTreeMap<(i32, i32), Vec<u64>> = BTreeMap::new();
        for e in events {
            *counts.entry(e.name.as_str()).or_default() += 1;
            per.entry((e.pid, e.tid)).or_default().push(e.ts);
        }
        v.events = counts.into_iter().map(|(n, c)| UserEventRow { name: n.to_string(), count: c, rate_per_s: c as f64 / span }).collect();
        for ((pid, tid), ts) in per {
            let gaps: Vec<(u64, u64)> = ts.windows(2).map(|w| (w[1] - w[0], w[0])).collect();
            let (max_gap, at) = gaps.iter().max_by_key(|g| g.0).copied().unwrap_or((0, ts[0]));
            let mean = if gaps.is_empty() { 0 } else { gaps.iter().map(|g| g.0).sum::<u64>() / gaps.len() as u64 };
            v.threads.push(UserThreadRow {
                pid,
                tid,
                procname: String::new(),
                events: ts.len() as u64,
                max_gap_ns: max_gap,
                mean_gap_ns: mean,
                max_gap_at_ns: at,
                ust: None,
            });
        }
        v
    }

    /// The view of traces (each a list of events in time order) as the report makes it of
    /// them loaded whole (concatenated in order, then a stable sort by time: [`oracle`],
    /// and [`user_view`] must agree), and as the tally makes it of them one trace after the
    /// other.
    fn both(traces: &[Vec<Event>]) -> (UserView, Option<UserView>) {
        let mut events: Vec<Event> = traces.iter().flatten().cloned().collect();
        events.sort_by_key(|e| e.ts);
        let whole = oracle(&events);
        assert_eq!(user_view(&Loaded { events, ..Loaded::default() }), whole);
        let mut t = UserTally::default();
        for (i, tr) in traces.iter().enumerate() {
            for e in tr {
                t.add(e, i);
            }
        }
        (whole, t.view(&[]))
    }

    #[test]
    fn a_thread_in_two_traces_one_after_the_other_is_one_row() {
        // Pid 7 thread 7 in trace 0, then again (pid reuse) in trace 1 from t = 50; the
        // longest gap is the one between the traces.
        let a = vec![ev(10, 7, 7, "p:a"), ev(20, 7, 7, "p:a"), ev(25, 7, 7, "p:b")];
        let b = vec![ev(50, 7, 7, "p:a"), ev(52, 7, 7, "p:a")];
        let (whole, tally) = both(&[a, b]);
        assert_eq!(tally.as_ref(), Some(&whole));
        let row = &whole.threads[0];
        assert_eq!((row.events, row.max_gap_ns, row.max_gap_at_ns, row.mean_gap_ns), (5, 25, 25, 42 / 4));
    }

    #[test]
    fn interleaved_threads_of_two_traces_are_refused() {
        let a = vec![ev(10, 7, 7, "p:a"), ev(30, 7, 7, "p:a")];
        let b = vec![ev(20, 7, 7, "p:a")];
        assert_eq!(both(&[a, b]).1, None);
        // Runs meeting at one time follow one another, whichever trace comes first.
        let a = vec![ev(10, 7, 7, "p:a"), ev(20, 7, 7, "p:a")];
        let b = vec![ev(20, 7, 7, "p:a"), ev(25, 7, 7, "p:a")];
        let (whole, tally) = both(&[a.clone(), b.clone()]);
        assert_eq!(tally, Some(whole));
        let (whole, tally) = both(&[b, a]);
        assert_eq!(tally, Some(whole));
    }

    #[test]
    fn a_trace_running_backwards_is_refused() {
        let mut t = UserTally::default();
        t.add(&ev(20, 1, 1, "p:a"), 0);
        t.add(&ev(10, 1, 1, "p:a"), 0);
        assert_eq!(t.view(&[]), None);
    }

    proptest! {
        /// Whenever the tally gives a view, it is the one of the events loaded whole; it
        /// gives one whenever no thread is in two traces at once.
        #[test]
        fn the_tally_is_the_view_of_the_events_loaded_whole(
            traces in prop::collection::vec(
                prop::collection::vec((0u64..200, 1i32..4, 0i32..3, 0usize..3), 0..40), 1..4),
        ) {
            let names = ["p:a", "p:b", "q:c"];
            let traces: Vec<Vec<Event>> = traces
                .into_iter()
                .map(|tr| {
                    let mut tr: Vec<Event> = tr.into_iter().map(|(ts, pid, tid, n)| ev(ts, pid, pid * 10 + tid, names[n])).collect();
                    tr.sort_by_key(|e| e.ts);
                    tr
                })
                .collect();
            let (whole, tally) = both(&traces);
            // Threads in more than one trace, and whether their times overlap there.
            // Per thread, its (first, last, trace) in each trace.
            type Spans = HashMap<(i32, i32), Vec<(u64, u64, usize)>>;
            let mut spans = Spans::default();
            for (i, tr) in traces.iter().enumerate() {
                for e in tr {
                    let v = spans.entry((e.pid, e.tid)).or_default();
                    match v.last_mut() {
                        Some(s) if s.2 == i => s.1 = e.ts,
                        _ => v.push((e.ts, e.ts, i)),
                    }
                }
            }
            let disjoint = spans.values().all(|v| {
                let mut v = v.clone();
                v.sort_by_key(|s| (s.0, s.1));
                v.windows(2).all(|w| w[1].0 >= w[0].1)
            });
            match tally {
                Some(t) => prop_assert_eq!(t, whole),
                None => prop_assert!(!disjoint, "refused though no thread is in two traces at once"),
            }
        }
    }
}
