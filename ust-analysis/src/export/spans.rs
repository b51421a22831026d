//! User-space events as slices, instants and counters.
//!
//! The `tracing` layer's spans, paired by [`crate::spans`]: each poll (`_enter` … `_exit`
//! of one span on one thread) becomes a slice on that thread's track, named `<span>`, with
//! the span's fields as arguments (those of `_new`, updated by every `_record`, as they
//! stand when the span closes), its id, parent id, and the ids it follows from
//! (`follows_from`); a poll the trace ends inside has the argument `unfinished`.
//!
//! Any other event is an instant on its thread's track with its payload fields as
//! arguments; `lttng_ust_statedump:*` (which libraries the process mapped) is left out. A
//! `--counter provider:event:field` makes that field of that event a counter track of the
//! event's process as well.
//!
//! A thread is the event's `vtid` context; without it, the process (one track per process).

use std::collections::HashMap;

use serde_json::Value as Json;

use super::fields::{self, Contexts};
use super::timeline::{Args, CounterValue, Instant, Slice, Timeline, Track};
use crate::report::load::{Domain, Loaded, Name};
use crate::spans::{pair, span_event, Span, SPAN_ID};

crate::report::event::shared_names! {
    FOLLOWS_FROM = "follows_from";
    UNFINISHED = "unfinished";
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

/// The arguments of every slice of span `s`: its fields as they stand at its end (`_new`'s,
/// updated by each `_record`, whose id field is not a field of the span), and the ids it
/// follows from.
fn span_args(l: &Loaded, ctx: &Contexts, s: &Span) -> Args {
    let mut args = Args::new();
    for &i in &s.field_events {
        let e = &l.events[i];
        let payload = ctx.payload(e);
        // The `_record`'s own id field (the first of the namings it has; a user's field
        // named `id` beside `_span_id` stays).
        let id = SPAN_ID.into_iter().find(|n| payload.iter().any(|(f, _)| f == n)).filter(|_| e.name.ends_with("_record"));
        for (n, v) in fields::args(payload, id.as_slice()) {
            set(&mut args, n, v);
        }
    }
    if !s.follows.is_empty() {
        set(&mut args, *FOLLOWS_FROM, Json::from(s.follows.clone()));
    }
    args
}

/// Sets argument `n` of `args` to `v`: a `_record` updates a field, it does not add one.
fn set(args: &mut Args, n: Name, v: Json) {
    match args.iter_mut().find(|(k, _)| *k == n) {
        Some(a) => a.1 = v,
        None => args.push((n, v)),
    }
}

/// Adds the user-space events of `l` to `t`.
pub fn add(l: &Loaded, counters: &[Counter], t: &mut Timeline) {
    let ctx = Contexts::of(l);
    for (pid, name, _) in &l.processes {
        t.name_process(*pid, name);
    }
    for s in &pair(l).spans {
        let args = span_args(l, &ctx, s);
        for p in &s.polls {
            let mut a = args.clone();
            if p.unfinished {
                set(&mut a, *UNFINISHED, Json::Bool(true));
            }
            t.slices.push(Slice {
                track: Track::Thread(s.pid, p.tid),
                ts: p.start,
                dur: p.end.saturating_sub(p.start),
                name: Name::from(s.name.as_str()),
                cat: Name::from(s.provider.as_str()),
                args: a,
            });
        }
    }
    // An event name's provider and the rest, once per name.
    let mut split: HashMap<Name, (Name, Name)> = HashMap::new();
    for e in l.events.iter().filter(|e| e.domain == Domain::Ust) {
        let thread_name = e.text("procname").unwrap_or_default();
        t.name_thread(e.pid, e.tid, &thread_name);
        let payload = ctx.payload(e);
        for c in counters.iter().filter(|c| e.name == c.event.as_str()) {
            if let Some(v) = fields::number(payload, &c.field) {
                t.counters.push(CounterValue { pid: e.pid, ts: e.ts, name: format!("{}:{}", c.event, c.field), value: v });
            }
        }
        if span_event(e).is_some() || e.name.starts_with("lttng_ust_statedump:") {
            continue;
        }
        let (cat, name) = *split.entry(e.name).or_insert_with(|| {
            let (cat, name) = e.name.split_once(':').unwrap_or(("", &e.name));
            (Name::from(cat), Name::from(name))
        });
        t.instants.push(Instant { track: Track::Thread(e.pid, e.tid), ts: e.ts, name, cat, args: fields::args(payload, &[]) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::load::Event;
    use ust_ctf::reader::Value;

    fn ev(ts: u64, tid: i32, name: &str, fields: &[(&str, Value)]) -> Event {
        let fields = fields.iter().map(|(n, v)| ((*n).into(), v.clone())).collect();
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
            t.slices.iter().map(|s| (s.track, s.ts, s.dur, s.name.to_string(), Json::Object(super::super::timeline::arg_map(&s.args)))).collect();
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
        let s: Vec<(u64, String, Json)> = t.slices.iter().map(|s| (s.ts, s.name.to_string(), Json::Object(super::super::timeline::arg_map(&s.args)))).collect();
        assert_eq!(
            s,
            [
                (110, "f".to_string(), serde_json::json!({"_span_id": 7, "_parent_id": 0, "id": 43, "name": "n"})),
                (220, "g".to_string(), serde_json::json!({"id": 1, "parent": 0, "follows_from": [7]})),
            ]
        );
    }

    #[test]
    fn counter_specs_parse() {
        assert_eq!("app:tick:n".parse::<Counter>(), Ok(Counter { event: "app:tick".into(), field: "n".into() }));
        assert!("tick:n".parse::<Counter>().is_err());
        assert!("app:tick:".parse::<Counter>().is_err());
    }
}
