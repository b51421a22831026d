//! The span events of ust's `tracing` layer paired into spans: one pairing, shared by `ust
//! export`'s slices ([`crate::export::spans`]) and `ust report`'s span view
//! ([`crate::report::span_view`]).
//!
//! The layer and subscriber ([`ust::tracing`](../../ust/tracing/index.html),
//! docs/instrumenting.md) write six events per span callsite: `<provider>:<span>_new {
//! _span_id, _parent_id, <fields> }`, `_enter { _span_id }`, `_exit { _span_id }`, `_record
//! { _span_id, <fields> }`, `_follows_from { _span_id, _follows_id }` and `_close { _span_id
//! }` (traces of an older ust name the ids `id`, `parent` and `follows`: read too, the newer
//! names first). Ids are `tracing`'s, reused after a close: a span is `(process, id)` from its
//! `_new` to its `_close`; a `_new` for an id still live means its `_close` was lost, and
//! starts a new span all the same; an event of an id never seen created starts a span the
//! trace began inside. Its parent is the live span of the `_new`'s parent id in the same
//! process (parent 0: a root span).
//!
//! Each `_enter` … `_exit` of one span on one thread is a [`Poll`] (an `#[instrument]`ed
//! future is entered and exited around each poll, on the thread that polls it). An `_exit`
//! without its `_enter` (the trace began inside) starts at the thread's first user-space
//! event; an `_enter` without its `_exit` ends at the trace's last event, `unfinished`.

use ust_ctf::reader::Value;

use crate::report::fast_hash::HashMap;
use crate::report::load::{Domain, Event, Loaded, Name};

/// The suffixes of the span events, in the layer's naming.
const SUFFIXES: [&str; 6] = ["_new", "_enter", "_exit", "_close", "_record", "_follows_from"];

/// The field of every span event holding the span's id, in either naming.
pub const SPAN_ID: [&str; 2] = ["_span_id", "id"];
/// The field of `_new` holding the parent's id, in either naming.
pub const PARENT_ID: [&str; 2] = ["_parent_id", "parent"];
/// The field of `_follows_from` holding the other span's id, in either naming.
pub const FOLLOWS_ID: [&str; 2] = ["_follows_id", "follows"];

/// Splits `provider:<span><suffix>` into `(provider, span, suffix)` when the name ends with
/// a span suffix.
pub fn span_parts(name: &str) -> Option<(&str, &str, &str)> {
    let (prov, ev) = name.split_once(':')?;
    SUFFIXES.iter().find_map(|s| ev.strip_suffix(s).filter(|b| !b.is_empty()).map(|b| (prov, b, *s)))
}

/// The first of `names` that `fields` has, as an unsigned integer.
pub fn id_field(fields: &[(Name, Value)], names: [&str; 2]) -> Option<u64> {
    let v = names.iter().find_map(|n| fields.iter().find(|(f, _)| f == n))?;
    if let Value::Unsigned(u) = v.1 {
        Some(u)
    } else {
        None
    }
}

/// The span id of `e` when it is a span event: `(provider, span, suffix, id)`.
pub fn span_event(e: &Event) -> Option<(&str, &str, &str, u64)> {
    let (p, s, x) = span_parts(&e.name)?;
    Some((p, s, x, id_field(&e.fields, SPAN_ID)?))
}

/// One time a span was entered, on one thread, until it was exited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Poll {
    /// The thread (the event's `tid`: its `vtid` context, else the process).
    pub tid: i32,
    /// `_enter` (CLOCK_MONOTONIC ns), or the thread's first event for an `_exit` without
    /// its `_enter`.
    pub start: u64,
    /// `_exit`, or the trace's last event when `unfinished`.
    pub end: u64,
    /// Entered and never exited in the trace.
    pub unfinished: bool,
}

/// One span, from its `_new` (or its first event in the trace) to its `_close` (or the
/// trace's end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// Process.
    pub pid: i32,
    /// `tracing`'s id (unique among the process's live spans).
    pub id: u64,
    /// The provider (the callsite's target, `<crate>`).
    pub provider: String,
    /// The span's name (the event names without their suffix).
    pub name: String,
    /// Index in [`Spans::spans`] of its parent (the live span of the `_new`'s parent id).
    pub parent: Option<usize>,
    /// `_new`'s time; `None` when the trace began inside the span.
    pub created: Option<u64>,
    /// `_close`'s time; `None` when the trace ended inside the span (or its close was lost).
    pub closed: Option<u64>,
    /// Indices in [`Loaded::events`] of its `_new` and `_record` events, in time order
    /// (where its fields are).
    pub field_events: Vec<usize>,
    /// The ids it follows from (`_follows_from`).
    pub follows: Vec<u64>,
    /// Its polls, in the order they ended (unfinished ones last).
    pub polls: Vec<Poll>,
}

impl Span {
    /// Time entered, summed over its polls (ns).
    pub fn busy_ns(&self) -> u64 {
        self.polls.iter().map(|p| p.end.saturating_sub(p.start)).sum()
    }

    /// `_new` to `_close` (ns), when the trace has both.
    pub fn duration_ns(&self) -> Option<u64> {
        Some(self.closed?.saturating_sub(self.created?))
    }
}

/// An `_enter` waiting for its `_exit`: the span's index and the enter's time.
type Entered = (usize, u64);

/// Every span of a loaded trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spans {
    /// In the order they were created (or first seen): a parent comes before its children.
    pub spans: Vec<Span>,
}

/// The time of each user-space thread's first event in `l`, by `(pid, tid)`.
fn first_events(l: &Loaded) -> HashMap<(i32, i32), u64> {
    let mut first = HashMap::default();
    for e in l.events.iter().filter(|e| e.domain == Domain::Ust) {
        first.entry((e.pid, e.tid)).or_insert(e.ts);
    }
    first
}

/// Pairs the span events of `l` (see the module docs).
pub fn pair(l: &Loaded) -> Spans {
    pair_events(&l.events, l.events.last().map_or(0, |e| e.ts), &|| first_events(l))
}

/// Pairs the span events among `events` (in time order; [`Span::field_events`] index it),
/// of a trace whose last event is at `last_ts`, with `first` giving each user-space
/// thread's first event time, by `(pid, tid)` (asked only when an `_exit` has no
/// `_enter`): [`pair`] of a list that need not hold every event.
pub fn pair_events(events: &[Event], last_ts: u64, first: &dyn Fn() -> HashMap<(i32, i32), u64>) -> Spans {
    let mut spans: Vec<Span> = Vec::new();
    // (pid, id) -> index of the live span with that id.
    let mut live: HashMap<(i32, u64), usize> = HashMap::default();
    // Open enters per (pid, tid): (span index, enter ts).
    let mut open: HashMap<(i32, i32), Vec<Entered>> = HashMap::default();
    // Each thread's first user-space event, found when an `_exit` without its `_enter`
    // first needs it (one pass; most traces have none).
    let mut first_ts: Option<HashMap<(i32, i32), u64>> = None;
    // What each event name is (the names are interned: a pointer's hash).
    let mut parts: HashMap<Name, Option<(&str, &str, &str)>> = HashMap::default();
    for (i, e) in events.iter().enumerate().filter(|(_, e)| e.domain == Domain::Ust) {
        let key = (e.pid, e.tid);
        let Some((prov, base, suffix)) = *parts.entry(e.name).or_insert_with(|| span_parts(e.name.as_str())) else { continue };
        let Some(id) = id_field(&e.fields, SPAN_ID) else { continue };
        let span_of = |spans: &mut Vec<Span>, live: &mut HashMap<(i32, u64), usize>, parent: Option<usize>, created: Option<u64>| {
            *live.entry((e.pid, id)).or_insert_with(|| {
                spans.push(Span {
                    pid: e.pid,
                    id,
                    provider: prov.to_string(),
                    name: base.to_string(),
                    parent,
                    created,
                    closed: None,
                    field_events: Vec::new(),
                    follows: Vec::new(),
                    polls: Vec::new(),
                });
                spans.len() - 1
            })
        };
        match suffix {
            "_new" => {
                live.remove(&(e.pid, id));
                let parent = id_field(&e.fields, PARENT_ID).filter(|p| *p != 0).and_then(|p| live.get(&(e.pid, p)).copied());
                let s = span_of(&mut spans, &mut live, parent, Some(e.ts));
                spans[s].field_events.push(i);
            }
            "_enter" => {
                let s = span_of(&mut spans, &mut live, None, None);
                open.entry(key).or_default().push((s, e.ts));
            }
            "_exit" => {
                let s = span_of(&mut spans, &mut live, None, None);
                let stack = open.entry(key).or_default();
                let start = match stack.iter().rposition(|(x, _)| *x == s) {
                    Some(p) => stack.remove(p).1,
                    None => first_ts.get_or_insert_with(first).get(&key).copied().unwrap_or(e.ts),
                };
                spans[s].polls.push(Poll { tid: e.tid, start, end: e.ts, unfinished: false });
            }
            "_record" => {
                let s = span_of(&mut spans, &mut live, None, None);
                spans[s].field_events.push(i);
            }
            "_follows_from" => {
                let s = span_of(&mut spans, &mut live, None, None);
                if let Some(f) = id_field(&e.fields, FOLLOWS_ID) {
                    spans[s].follows.push(f);
                }
            }
            _ => {
                // `_close`.
                if let Some(s) = live.remove(&(e.pid, id)) {
                    spans[s].closed = Some(e.ts);
                }
            }
        }
    }
    let mut still_open: Vec<((i32, i32), Vec<Entered>)> = open.into_iter().collect();
    still_open.sort_by_key(|(k, _)| *k);
    for ((_, tid), stack) in still_open {
        for (s, start) in stack {
            spans[s].polls.push(Poll { tid, start, end: last_ts, unfinished: true });
        }
    }
    Spans { spans }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, tid: i32, name: &str, fields: &[(&str, Value)]) -> Event {
        let fields = fields.iter().map(|(n, v)| ((*n).into(), v.clone())).collect();
        Event { ts, cpu: 0, name: name.into(), tid, pid: 10, domain: Domain::Ust, fields }
    }

    fn id(n: u64) -> (&'static str, Value) {
        ("id", Value::Unsigned(n))
    }

    #[test]
    fn polls_parents_ids_reused_and_the_trace_edges() {
        let l = Loaded {
            events: vec![
                // The trace starts inside span 5 on thread 11: its exit has no enter.
                ev(100, 11, "app:old_exit", &[id(5)]),
                ev(110, 11, "app:req_new", &[id(1), ("parent", Value::Unsigned(0))]),
                ev(115, 11, "app:db_new", &[id(2), ("parent", Value::Unsigned(1))]),
                ev(120, 11, "app:req_enter", &[id(1)]),
                ev(130, 11, "app:req_exit", &[id(1)]),
                // Polled again on thread 12.
                ev(150, 12, "app:req_enter", &[id(1)]),
                ev(160, 12, "app:req_exit", &[id(1)]),
                ev(170, 11, "app:req_record", &[id(1), ("bytes", Value::Unsigned(9))]),
                ev(175, 11, "app:req_follows_from", &[id(1), ("follows", Value::Unsigned(3))]),
                ev(180, 11, "app:req_close", &[id(1)]),
                // Id 1 reused by a new span (the newer naming), entered and never exited.
                ev(190, 11, "app:req_new", &[("_span_id", Value::Unsigned(1)), ("_parent_id", Value::Unsigned(0)), id(77)]),
                ev(200, 11, "app:req_enter", &[("_span_id", Value::Unsigned(1)), id(77)]),
                ev(220, 12, "app:tick", &[]),
            ],
            ..Default::default()
        };
        let s = pair(&l).spans;
        type Summary<'a> = (&'a str, u64, Option<usize>, Option<u64>, Option<u64>, Vec<Poll>);
        let summary: Vec<Summary> = s.iter().map(|x| (x.name.as_str(), x.id, x.parent, x.created, x.closed, x.polls.clone())).collect();
        let p = |tid, start, end, unfinished| Poll { tid, start, end, unfinished };
        assert_eq!(
            summary,
            vec![
                ("old", 5, None, None, None, vec![p(11, 100, 100, false)]),
                ("req", 1, None, Some(110), Some(180), vec![p(11, 120, 130, false), p(12, 150, 160, false)]),
                ("db", 2, Some(1), Some(115), None, vec![]),
                ("req", 1, None, Some(190), None, vec![p(11, 200, 220, true)]),
            ]
        );
        assert_eq!(s[1].field_events, [1, 7]);
        assert_eq!(s[1].follows, [3]);
        assert_eq!((s[1].busy_ns(), s[1].duration_ns()), (20, Some(70)));
        assert_eq!(s[3].duration_ns(), None);
    }

    #[test]
    fn span_event_names_split() {
        assert_eq!(span_parts("app:conn_enter"), Some(("app", "conn", "_enter")));
        assert_eq!(span_parts("app:batch_follows_from"), Some(("app", "batch", "_follows_from")));
        assert_eq!(span_parts("app:_exit"), None);
        assert_eq!(span_parts("app:event"), None);
    }
}
