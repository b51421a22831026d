//! A [`Timeline`] as a Perfetto protobuf trace (`perfetto.protos.Trace`, the format of
//! Perfetto's own traces), encoded here by hand: the subset written is small and its field
//! numbers are those of Perfetto's published `protos/perfetto/trace/perfetto_trace.proto`
//! (the tests decode the output with the Python classes Perfetto generates from it).
//!
//! ```text
//! Trace { packet = 1: TracePacket* }
//! TracePacket { timestamp = 8, trusted_packet_sequence_id = 10, sequence_flags = 13,
//!               interned_data = 12, track_descriptor = 60, track_event = 11 }
//! InternedData { event_categories = 1, event_names = 2, debug_annotation_names = 3:
//!                { iid = 1, name = 2 }* }
//! TrackDescriptor { uuid = 1, parent_uuid = 5, name = 2, process = 3 { pid = 1,
//!                   process_name = 6 }, thread = 4 { pid = 1, tid = 2, thread_name = 5 },
//!                   counter = 8 {} }
//! TrackEvent { type = 9 (1 slice begin, 2 slice end, 3 instant, 4 counter),
//!              track_uuid = 11, name_iid = 10, category_iids = 3,
//!              debug_annotations = 4, double_counter_value = 44 }
//! DebugAnnotation { name_iid = 1 (an event's own), name = 10 (a dictionary's entries),
//!                   bool_value = 2, uint_value = 3, int_value = 4, double_value = 5,
//!                   string_value = 6, dict_entries = 11, array_values = 12 }
//! ```
//!
//! Event names, categories and argument names are interned, as Perfetto's own SDK
//! interns them: each is written once, in the `interned_data` of the first packet that
//! uses it, and referred to by its id after (about half of the bytes otherwise: a name
//! and a dozen argument names repeated in every event). Packets that use interned data
//! say so (`SEQ_NEEDS_INCREMENTAL_STATE`).
//!
//! Tracks: a process track per process, a thread track per thread (its spans and
//! instants), under each thread a `scheduling` track (its states), a `CPUs` track with a
//! child per CPU, and a counter track per `--counter` series under its process. A slice is
//! a `begin` and an `end` event on its track; events are written in time order, at one time
//! ends before begins (the inner slice's end first), a longer slice's begin before a
//! shorter one's, and a zero-length slice's end after every begin, so slices nest as they
//! do in the timeline. One packet sequence; timestamps are the trace's `CLOCK_MONOTONIC`
//! ns, in the trace's default clock.

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::Value as Json;

use super::timeline::{sorted_args, Timeline, Track};
use crate::report::event::Name;

/// The one packet sequence's id.
const SEQUENCE: u64 = 1;
/// `TracePacket.sequence_flags`: `SEQ_INCREMENTAL_STATE_CLEARED`.
const SEQ_CLEARED: u64 = 1;
/// `TracePacket.sequence_flags`: `SEQ_NEEDS_INCREMENTAL_STATE` (the packet refers to
/// interned data).
const SEQ_NEEDS_STATE: u64 = 2;

/// The names written so far, by kind, with their ids (from 1, per kind), and the entries
/// of the next packet's `interned_data`.
#[derive(Default)]
struct Interned {
    ids: [std::collections::HashMap<&'static str, u64>; 3],
    fresh: Msg,
}

/// [`Interned`] kinds: their `InternedData` field numbers.
const CATEGORIES: u32 = 1;
const EVENT_NAMES: u32 = 2;
const ARG_NAMES: u32 = 3;

impl Interned {
    /// The id of `s` among the names of `kind`; a new one goes to the next packet.
    fn id(&mut self, kind: u32, s: &'static str) -> u64 {
        let ids = &mut self.ids[kind as usize - 1];
        if let Some(&i) = ids.get(s) {
            return i;
        }
        let i = ids.len() as u64 + 1;
        ids.insert(s, i);
        let mut entry = Msg::default();
        entry.uint(1, i).string(2, s);
        self.fresh.msg(kind, &entry);
        i
    }
}

/// A protobuf message being encoded.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn key(&mut self, field: u32, wire: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire));
    }
    /// A varint field (uint, int with its two's complement, bool, enum).
    fn uint(&mut self, field: u32, v: u64) -> &mut Self {
        self.key(field, 0);
        self.varint(v);
        self
    }
    fn double(&mut self, field: u32, v: f64) -> &mut Self {
        self.key(field, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    fn string(&mut self, field: u32, s: &str) -> &mut Self {
        self.bytes(field, s.as_bytes())
    }
    fn msg(&mut self, field: u32, m: &Msg) -> &mut Self {
        self.bytes(field, &m.0)
    }
}

/// Track uuids: a kind in the top byte, ids below.
fn uuid(track: Track) -> u64 {
    match track {
        Track::Thread(p, t) => (2 << 56) | ((p as u32 as u64) << 24) | (t as u32 as u64 & 0xff_ffff),
        Track::ThreadState(p, t) => (3 << 56) | ((p as u32 as u64) << 24) | (t as u32 as u64 & 0xff_ffff),
        Track::Cpu(c) => (5 << 56) | u64::from(c),
    }
}
fn process_uuid(pid: i32) -> u64 {
    (1 << 56) | pid as u32 as u64
}
const CPUS_UUID: u64 = 4 << 56;
fn counter_uuid(i: usize) -> u64 {
    (6 << 56) | i as u64
}

/// The name of a `DebugAnnotation`: an event's argument's, interned; a dictionary entry's,
/// written out; none inside an array.
enum ArgName<'a> {
    Interned(u64),
    Text(&'a str),
    None,
}

/// A JSON value as a `DebugAnnotation`.
fn annotation(name: ArgName<'_>, v: &Json) -> Msg {
    let mut a = Msg::default();
    match name {
        ArgName::Interned(i) => {
            a.uint(1, i);
        }
        ArgName::Text(n) => {
            a.string(10, n);
        }
        ArgName::None => {}
    }
    match v {
        Json::Bool(b) => {
            a.uint(2, u64::from(*b));
        }
        Json::Number(n) => {
            if let Some(u) = n.as_u64() {
                a.uint(3, u);
            } else if let Some(i) = n.as_i64() {
                a.uint(4, i as u64);
            } else {
                a.double(5, n.as_f64().unwrap_or(0.0));
            }
        }
        Json::String(s) => {
            a.string(6, s);
        }
        Json::Null => {
            a.string(6, "null");
        }
        Json::Array(items) => {
            for x in items {
                a.msg(12, &annotation(ArgName::None, x));
            }
        }
        Json::Object(m) => {
            for (k, x) in m {
                a.msg(11, &annotation(ArgName::Text(k), x));
            }
        }
    }
    a
}

/// A `TracePacket` with `body` as field `field`, and `interned` as its `interned_data`
/// when not empty.
fn packet(out: &mut Msg, ts: Option<u64>, flags: u64, field: u32, body: &Msg, interned: &Msg) {
    let mut p = Msg::default();
    if let Some(ts) = ts {
        p.uint(8, ts);
    }
    p.uint(10, SEQUENCE);
    if flags != 0 {
        p.uint(13, flags);
    }
    if !interned.0.is_empty() {
        p.msg(12, interned);
    }
    p.msg(field, body);
    out.msg(1, &p);
}

fn descriptor(out: &mut Msg, first: &mut bool, d: &Msg) {
    let flags = if std::mem::take(first) { SEQ_CLEARED } else { 0 };
    packet(out, None, flags, 60, d, &Msg::default());
}

/// The name, category and arguments of a `TrackEvent`, its names interned in `names`; the
/// arguments as [`sorted_args`] has them.
fn label(e: &mut Msg, names: &mut Interned, name: Name, cat: Name, args: &[(Name, Json)]) {
    if !cat.is_empty() {
        e.uint(3, names.id(CATEGORIES, cat.as_str()));
    }
    e.uint(10, names.id(EVENT_NAMES, name.as_str()));
    for (k, v) in sorted_args(args) {
        e.msg(4, &annotation(ArgName::Interned(names.id(ARG_NAMES, k)), v));
    }
}

/// A `TrackEvent` of `kind` on `track`.
fn track_event(kind: u64, track: u64) -> Msg {
    let mut e = Msg::default();
    e.uint(9, kind).uint(11, track);
    e
}

/// Writes the trace's bytes to `w`: the track descriptors, then the events in time order.
fn write_to(t: &Timeline, w: &mut impl Write) -> std::io::Result<()> {
    let mut out = Msg::default();
    let mut first = true;
    let mut pids: Vec<i32> = t.processes.keys().copied().collect();
    let mut threads: BTreeMap<(i32, i32), String> = t.threads.clone();
    let mut states: Vec<(i32, i32)> = Vec::new();
    for s in &t.slices {
        if let Track::ThreadState(p, tid) = s.track {
            states.push((p, tid));
            threads.entry((p, tid)).or_default();
        }
    }
    states.sort();
    states.dedup();
    pids.extend(threads.keys().map(|k| k.0));
    pids.sort();
    pids.dedup();
    for pid in &pids {
        let mut pd = Msg::default();
        pd.uint(1, *pid as u32 as u64);
        if let Some(n) = t.processes.get(pid).filter(|n| !n.is_empty()) {
            pd.string(6, n);
        }
        let mut d = Msg::default();
        d.uint(1, process_uuid(*pid)).msg(3, &pd);
        descriptor(&mut out, &mut first, &d);
    }
    for ((pid, tid), name) in &threads {
        let mut td = Msg::default();
        td.uint(1, *pid as u32 as u64).uint(2, *tid as u32 as u64);
        if !name.is_empty() {
            td.string(5, name);
        }
        let mut d = Msg::default();
        d.uint(1, uuid(Track::Thread(*pid, *tid))).uint(5, process_uuid(*pid)).msg(4, &td);
        descriptor(&mut out, &mut first, &d);
        if states.binary_search(&(*pid, *tid)).is_ok() {
            let mut d = Msg::default();
            d.uint(1, uuid(Track::ThreadState(*pid, *tid))).uint(5, uuid(Track::Thread(*pid, *tid))).string(2, "scheduling");
            descriptor(&mut out, &mut first, &d);
        }
    }
    if !t.cpus.is_empty() {
        let mut d = Msg::default();
        d.uint(1, CPUS_UUID).string(2, "CPUs");
        descriptor(&mut out, &mut first, &d);
        for c in &t.cpus {
            let mut d = Msg::default();
            d.uint(1, uuid(Track::Cpu(*c))).uint(5, CPUS_UUID).string(2, &format!("CPU {c}"));
            descriptor(&mut out, &mut first, &d);
        }
    }
    let mut series: BTreeMap<(i32, &str), usize> = BTreeMap::new();
    for c in &t.counters {
        let n = series.len();
        if let std::collections::btree_map::Entry::Vacant(v) = series.entry((c.pid, c.name.as_str())) {
            v.insert(n);
            let mut d = Msg::default();
            d.uint(1, counter_uuid(n)).uint(5, process_uuid(c.pid)).string(2, &c.name).msg(8, &Msg::default());
            descriptor(&mut out, &mut first, &d);
        }
    }
    // (ts, phase, tie-break, event): phase 0 ends, 1 begins and instants and counters, 2 the
    // ends of zero-length slices. Each event is encoded as it is written: what the export
    // holds beside the timeline is this index of it.
    let mut timed: Vec<(u64, u8, u64, Timed)> = Vec::with_capacity(2 * t.slices.len() + t.instants.len() + t.counters.len());
    for (k, s) in t.slices.iter().enumerate() {
        timed.push((s.ts, 1, u64::MAX - s.dur, Timed::Begin(k)));
        timed.push((s.ts + s.dur, if s.dur == 0 { 2 } else { 0 }, u64::MAX - s.ts, Timed::End(k)));
    }
    timed.extend(t.instants.iter().enumerate().map(|(k, i)| (i.ts, 1, 0, Timed::Instant(k))));
    timed.extend(t.counters.iter().enumerate().map(|(k, c)| (c.ts, 1, 0, Timed::Counter(k))));
    timed.sort_by_key(|a| (a.0, a.1, a.2));
    w.write_all(&out.0)?;
    let mut p = Msg::default();
    let mut names = Interned::default();
    for (ts, _, _, x) in timed {
        let (e, named) = match x {
            Timed::Begin(k) => {
                let s = &t.slices[k];
                let mut e = track_event(1, uuid(s.track));
                label(&mut e, &mut names, s.name, s.cat, &s.args);
                (e, true)
            }
            Timed::End(k) => (track_event(2, uuid(t.slices[k].track)), false),
            Timed::Instant(k) => {
                let i = &t.instants[k];
                let mut e = track_event(3, uuid(i.track));
                label(&mut e, &mut names, i.name, i.cat, &i.args);
                (e, true)
            }
            Timed::Counter(k) => {
                let c = &t.counters[k];
                let mut e = track_event(4, counter_uuid(series[&(c.pid, c.name.as_str())]));
                e.double(44, c.value);
                (e, false)
            }
        };
        let cleared = if std::mem::take(&mut first) { SEQ_CLEARED } else { 0 };
        let flags = cleared | if named { SEQ_NEEDS_STATE } else { 0 };
        p.0.clear();
        packet(&mut p, Some(ts), flags, 11, &e, &names.fresh);
        names.fresh.0.clear();
        w.write_all(&p.0)?;
    }
    Ok(())
}

/// A timed event of the timeline, by index: a slice's beginning or end, an instant, a
/// counter value.
#[derive(Clone, Copy)]
enum Timed {
    Begin(usize),
    End(usize),
    Instant(usize),
    Counter(usize),
}

/// The trace's bytes.
pub fn encode(t: &Timeline) -> Vec<u8> {
    let mut out = Vec::new();
    write_to(t, &mut out).expect("writing to memory");
    out
}

/// Writes `t` as a Perfetto protobuf trace.
///
/// # Errors
/// The writer's.
pub fn write(t: &Timeline, mut w: impl Write) -> std::io::Result<()> {
    write_to(t, &mut w)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_encode_as_protobuf_does() {
        let mut m = Msg::default();
        m.uint(1, 300).string(2, "hi").double(3, 1.0);
        assert_eq!(m.0, [0x08, 0xac, 0x02, 0x12, 2, b'h', b'i', 0x19, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f]);
        let mut n = Msg::default();
        n.uint(4, -1i64 as u64);
        assert_eq!(n.0, [0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    }
}
