//! User-space events as slices, instants and counters.
//!
//! The ust `tracing` layer and subscriber ([`ust::tracing`](../../../ust/tracing/index.html))
//! write six events per span callsite: `<provider>:<span>_new { _span_id, _parent_id,
//! <fields> }`, `_enter { _span_id }`, `_exit { _span_id }`, `_record { _span_id, <fields> }`,
//! `_follows_from { _span_id, _follows_id }` and `_close { _span_id }` (traces of ust
//! before the id fields had names of their own call them `id`, `parent` and `follows`:
//! read too). Each `_enter` … `_exit` of one id on one thread becomes a slice on that
//! thread's track, named `<span>`, with the span's fields as arguments (those of `_new`,
//! updated by every `_record`, as they stand when the span closes), its `_span_id`,
//! `_parent_id`, and the ids it follows from (`follows_from`). An `#[instrument]`ed future is entered and exited
//! around each poll, so each poll is a slice, on the thread that polled it. Ids are
//! `tracing`'s, reused after a close: a span is `(process, id)` from its `_new` to its
//! `_close`. An `_exit` without its `_enter` (the trace began inside the span) starts at
//! the thread's first event; an `_enter` without its `_exit` ends at the trace's last event
//! (argument `unfinished`).
//!
//! Any other event is an instant on its thread's track with its payload fields as
//! arguments; `lttng_ust_statedump:*` (which libraries the process mapped) is left out. A
//! `--counter provider:event:field` makes that field of that event a counter track of the
//! event's process as well.
//!
//! A thread is the event's `vtid` context; without it, the process (one track per process).

use std::collections::HashMap;

use serde_json::{Map, Value as Json};

use super::fields::{self, Contexts};
use super::timeline::{CounterValue, Instant, Slice, Timeline, Track};
use crate::report::load::{Domain, Loaded};

/// The field of every span event that holds the span's id (`ust::tracing::SPAN_ID`), and
/// its name in older traces.
const SPAN_ID: [&str; 2] = ["_span_id", "id"];
/// The field of `_follows_from` that holds the other span's id (`ust::tracing::FOLLOWS_ID`),
/// and its name in older traces.
const FOLLOWS_ID: [&str; 2] = ["_follows_id", "follows"];

/// The first of `names` that `payload` has, as an unsigned integer.
fn id_field(payload: &[(String, ust_ctf::reader::Value)], names: [&str; 2]) -> Option<u64> {
    let v = names.iter().find_map(|n| payload.iter().find(|(f, _)| f == n))?;
    if let ust_ctf::reader::Value::Unsigned(u) = v.1 {
        Some(u)
    } else {
        None
    }
}

/// The suffixes of the span events, in the layer's naming.
const SUFFIXES: [&str; 6] = ["_new", "_enter", "_exit", "_close", "_record", "_follows_from"];

/// Splits `provider:<span><suffix>` into `(provider, span, suffix)` when the name ends
/// with a span suffix.
fn span_parts(name: &str) -> Option<(&str, &str, &str)> {
    let (prov, ev) = name.split_once(':')?;
    SUFFIXES.iter().find_map(|s| ev.strip_suffix(s).filter(|b| !b.is_empty()).map(|b| (prov, b, *s)))
}

#[derive(Debug)]
struct Span {
    name: String,
    cat: String,
    args: Map<String, Json>,
    follows: Vec<u64>,
}

/// A counter request: `provider:event` and the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counter {
    /// `provider:event`.
    pub event: String,
    /// The field.
    pub field: String,
}

impl std::str::FromStr for Counter {
    type Err = String;
    /// Parses `provider:event:field`.
    fn from_str(s: &str) -> Result<Counter, String> {
        match s.rsplit_once(':') {
            Some((ev, f)) if ev.contains(':') && !f.is_empty() && !ev.starts_with(':') => Ok(Counter { event: ev.to_string(), field: f.to_string() }),
            _ => Err(format!("{s:?} is not provider:event:field")),
        }
    }
}

/// Adds the user-space events of `l` to `t`.
pub fn add(l: &Loaded, counters: &[Counter], t: &mut Timeline) {
    let ctx = Contexts::of(l);
    for (pid, name, _) in &l.processes {
        t.name_process(*pid, name);
    }
    let last_ts = l.events.last().map_or(0, |e| e.ts);
    // (pid, id) -> index into `spans` of the live span with that id.
    let mut live: HashMap<(i32, u64), usize> = HashMap::new();
    let mut spans: Vec<Span> = Vec::new();
    // Open enters per (pid, tid): (span index, id, enter ts).
    let mut open: HashMap<(i32, i32), Vec<(usize, u64)>> = HashMap::new();
    let mut first_ts: HashMap<(i32, i32), u64> = HashMap::new();
    // Slices waiting for their span's final arguments: (slice, span index).
    let mut pending: Vec<(Slice, usize)> = Vec::new();
    for e in l.events.iter().filter(|e| e.domain == Domain::Ust) {
        let key = (e.pid, e.tid);
        first_ts.entry(key).or_insert(e.ts);
        let thread_name = e.text("procname").unwrap_or_default();
        t.name_thread(e.pid, e.tid, &thread_name);
        let payload = ctx.payload(e);
        let id = span_parts(&e.name).and_then(|_| id_field(payload, SPAN_ID));
        let track = Track::Thread(e.pid, e.tid);
        for c in counters.iter().filter(|c| c.event == e.name) {
            if let Some(v) = fields::number(payload, &c.field) {
                t.counters.push(CounterValue { pid: e.pid, ts: e.ts, name: format!("{}:{}", c.event, c.field), value: v });
            }
        }
        let span_of = |live: &mut HashMap<(i32, u64), usize>, spans: &mut Vec<Span>, prov: &str, base: &str, id: u64| {
            *live.entry((e.pid, id)).or_insert_with(|| {
                spans.push(Span { name: base.to_string(), cat: prov.to_string(), args: Map::new(), follows: Vec::new() });
                spans.len() - 1
            })
        };
        match (span_parts(&e.name), id) {
            (Some((prov, base, "_new")), Some(id)) => {
                // A `_new` for a live id means its `_close` was lost: a new span all the same.
                live.remove(&(e.pid, id));
                let i = span_of(&mut live, &mut spans, prov, base, id);
                spans[i].args = fields::args(payload, &[]);
            }
            (Some((prov, base, "_enter")), Some(id)) => {
                let i = span_of(&mut live, &mut spans, prov, base, id);
                open.entry(key).or_default().push((i, e.ts));
            }
            (Some((prov, base, "_exit")), Some(id)) => {
                let i = span_of(&mut live, &mut spans, prov, base, id);
                let stack = open.entry(key).or_default();
                let start = match stack.iter().rposition(|(s, _)| *s == i) {
                    Some(p) => stack.remove(p).1,
                    None => first_ts[&key],
                };
                pending.push((
                    Slice { track, ts: start, dur: e.ts.saturating_sub(start), name: spans[i].name.clone(), cat: spans[i].cat.clone(), args: Map::new() },
                    i,
                ));
            }
            (Some((prov, base, "_record")), Some(id)) => {
                let i = span_of(&mut live, &mut spans, prov, base, id);
                spans[i].args.extend(fields::args(payload, &SPAN_ID[..1]));
            }
            (Some((prov, base, "_follows_from")), Some(id)) => {
                let i = span_of(&mut live, &mut spans, prov, base, id);
                if let Some(f) = id_field(payload, FOLLOWS_ID) {
                    spans[i].follows.push(f);
                }
            }
            (Some((_, _, "_close")), Some(id)) => {
                live.remove(&(e.pid, id));
            }
            _ if e.name.starts_with("lttng_ust_statedump:") => {}
            _ => {
                let (cat, name) = e.name.split_once(':').unwrap_or(("", &e.name));
                t.instants.push(Instant { track, ts: e.ts, name: name.to_string(), cat: cat.to_string(), args: fields::args(payload, &[]) });
            }
        }
    }
    for ((pid, tid), stack) in open {
        for (i, start) in stack {
            let mut s = Slice {
                track: Track::Thread(pid, tid),
                ts: start,
                dur: last_ts.saturating_sub(start),
                name: spans[i].name.clone(),
                cat: spans[i].cat.clone(),
                args: Map::new(),
            };
            s.args.insert("unfinished".into(), Json::Bool(true));
            pending.push((s, i));
        }
    }
    for (mut s, i) in pending {
        let sp = &spans[i];
        let mut args = sp.args.clone();
        if !sp.follows.is_empty() {
            args.insert("follows_from".into(), Json::from(sp.follows.clone()));
        }
        args.append(&mut s.args);
        s.args = args;
        t.slices.push(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::load::Event;
    use ust_ctf::reader::Value;

    fn ev(ts: u64, tid: i32, name: &str, fields: &[(&str, Value)]) -> Event {
        let fields = fields.iter().map(|(n, v)| (n.to_string(), v.clone())).collect();
        Event { ts, cpu: 0, name: name.into(), tid, pid: 10, domain: Domain::Ust, fields }
    }

    #[test]
    fn spans_become_slices_per_thread_with_their_final_fields() {
        let id = |n| ("_span_id", Value::Unsigned(n));
        let parent = || ("_parent_id", Value::Unsigned(0));
        let l = Loaded {
            events: vec![
                // The trace starts inside span 5 on thread 11: its exit has no enter.
                ev(100, 11, "app:old_exit", &[id(5)]),
                ev(110, 11, "app:conn_new", &[id(1), parent(), ("peer", Value::Str("a".into())), ("bytes", Value::List(vec![]))]),
                ev(120, 11, "app:conn_enter", &[id(1)]),
                ev(130, 11, "app:event", &[("message", Value::Str("in".into()))]),
                ev(140, 11, "app:conn_exit", &[id(1)]),
                // Polled again on thread 12.
                ev(150, 12, "app:conn_enter", &[id(1)]),
                ev(160, 12, "app:conn_exit", &[id(1)]),
                ev(170, 11, "app:conn_record", &[id(1), ("peer", Value::List(vec![])), ("bytes", Value::Unsigned(9))]),
                ev(175, 11, "app:conn_follows_from", &[id(1), ("_follows_id", Value::Unsigned(3))]),
                ev(180, 11, "app:conn_close", &[id(1)]),
                // Id 1 reused by a new span, entered and never exited.
                ev(190, 11, "app:conn_new", &[id(1), parent(), ("peer", Value::Str("b".into())), ("bytes", Value::List(vec![]))]),
                ev(200, 11, "app:conn_enter", &[id(1)]),
                ev(210, 12, "app:tick", &[("n", Value::Signed(4))]),
                ev(220, 12, "lttng_ust_statedump:end", &[]),
            ],
            ..Default::default()
        };
        let mut t = Timeline::default();
        add(&l, &[Counter { event: "app:tick".into(), field: "n".into() }], &mut t);
        let mut s: Vec<(Track, u64, u64, String, Json)> =
            t.slices.iter().map(|s| (s.track, s.ts, s.dur, s.name.clone(), Json::Object(s.args.clone()))).collect();
        s.sort_by_key(|x| (x.0, x.1));
        let done = serde_json::json!({"_span_id": 1, "_parent_id": 0, "peer": "a", "bytes": 9, "follows_from": [3]});
        assert_eq!(
            s,
            vec![
                (Track::Thread(10, 11), 100, 0, "old".to_string(), serde_json::json!({})),
                (Track::Thread(10, 11), 120, 20, "conn".to_string(), done.clone()),
                (Track::Thread(10, 11), 200, 20, "conn".to_string(), serde_json::json!({"_span_id": 1, "_parent_id": 0, "peer": "b", "unfinished": true})),
                (Track::Thread(10, 12), 150, 10, "conn".to_string(), done),
            ]
        );
        let i: Vec<(Track, &str, &str)> = t.instants.iter().map(|i| (i.track, i.cat.as_str(), i.name.as_str())).collect();
        assert_eq!(i, [(Track::Thread(10, 11), "app", "event"), (Track::Thread(10, 12), "app", "tick")]);
        assert_eq!(t.counters, [CounterValue { pid: 10, ts: 210, name: "app:tick:n".into(), value: 4.0 }]);
    }

    #[test]
    fn user_fields_named_id_stay_arguments_and_older_traces_read() {
        let l = Loaded {
            events: vec![
                // `#[instrument] fn f(id: u64, name: &str)`: the user's `id` is a field like any other.
                ev(
                    100,
                    11,
                    "app:f_new",
                    &[("_span_id", Value::Unsigned(7)), ("_parent_id", Value::Unsigned(0)), ("id", Value::Unsigned(42)), ("name", Value::Str("n".into()))],
                ),
                ev(110, 11, "app:f_enter", &[("_span_id", Value::Unsigned(7))]),
                ev(120, 11, "app:f_record", &[("_span_id", Value::Unsigned(7)), ("id", Value::Unsigned(43)), ("name", Value::List(vec![]))]),
                ev(130, 11, "app:f_exit", &[("_span_id", Value::Unsigned(7))]),
                ev(140, 11, "app:f_close", &[("_span_id", Value::Unsigned(7))]),
                // A trace of an older ust: `id`, `parent`, `follows`.
                ev(200, 11, "app:g_new", &[("id", Value::Unsigned(1)), ("parent", Value::Unsigned(0))]),
                ev(210, 11, "app:g_follows_from", &[("id", Value::Unsigned(1)), ("follows", Value::Unsigned(7))]),
                ev(220, 11, "app:g_enter", &[("id", Value::Unsigned(1))]),
                ev(230, 11, "app:g_exit", &[("id", Value::Unsigned(1))]),
            ],
            ..Default::default()
        };
        let mut t = Timeline::default();
        add(&l, &[], &mut t);
        let s: Vec<(u64, String, Json)> = t.slices.iter().map(|s| (s.ts, s.name.clone(), Json::Object(s.args.clone()))).collect();
        assert_eq!(
            s,
            [
                (110, "f".to_string(), serde_json::json!({"_span_id": 7, "_parent_id": 0, "id": 43, "name": "n"})),
                (220, "g".to_string(), serde_json::json!({"id": 1, "parent": 0, "follows_from": [7]})),
            ]
        );
    }

    #[test]
    fn span_event_names_and_counter_specs_parse() {
        assert_eq!(span_parts("app:conn_enter"), Some(("app", "conn", "_enter")));
        assert_eq!(span_parts("app:batch_follows_from"), Some(("app", "batch", "_follows_from")));
        assert_eq!(span_parts("app:_exit"), None);
        assert_eq!(span_parts("app:event"), None);
        assert_eq!("app:tick:n".parse::<Counter>(), Ok(Counter { event: "app:tick".into(), field: "n".into() }));
        assert!("tick:n".parse::<Counter>().is_err());
        assert!("app:tick:".parse::<Counter>().is_err());
    }
}
