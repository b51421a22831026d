//! A [`Timeline`] as a Chrome JSON trace (the Trace Event Format that `chrome://tracing`,
//! Perfetto UI and Perfetto's trace processor open).
//!
//! The file is the format's "JSON object" form: `{"displayTimeUnit": "ns", "traceEvents":
//! [...], "otherData": {...}}`. Times (`ts`, `dur`) are µs, written with the
//! trace's ns as three decimals. Events used:
//!
//! * `ph: "M"` metadata: `process_name` and `thread_name` (`args.name`), and
//!   `thread_sort_index` (`args.sort_index`) so that a thread's state track sits below it;
//! * `ph: "X"` complete events (slices: spans, thread states, CPU intervals) with `dur`,
//!   `cat` and `args`;
//! * `ph: "i"` instant events with `s: "t"` (thread scope);
//! * `ph: "C"` counter events, one series per `provider:event`, the field the argument.
//!
//! The format has threads and processes only, so the other tracks are threads of their
//! own, with ids no Linux task can have (a pid or tid is below 2^22, `PID_MAX_LIMIT`):
//! a thread's state track is thread [`STATE_TID_BASE`]` + tid` of its process, and the CPU
//! tracks are the threads [`CPU_TID_BASE`]` + cpu` of the process [`CPU_PID`] named `CPUs`.

use std::io::Write;

use serde_json::{json, Map, Value as Json};

use super::timeline::{arg_map, Timeline, Track};

/// One above the largest Linux pid (`PID_MAX_LIMIT`, 2^22 on 64-bit).
pub const PID_LIMIT: i64 = 1 << 22;
/// The pseudo-process holding the CPU tracks.
pub const CPU_PID: i64 = PID_LIMIT;
/// CPU `n`'s track is this thread id plus `n` in [`CPU_PID`].
pub const CPU_TID_BASE: i64 = PID_LIMIT + 1;
/// Thread `tid`'s scheduling-state track is this thread id plus `tid`, in its process.
pub const STATE_TID_BASE: i64 = 2 * PID_LIMIT;

/// `(pid, tid)` of a track in the file.
fn ids(track: Track) -> (i64, i64) {
    match track {
        Track::Thread(p, t) => (p as i64, t as i64),
        Track::ThreadState(p, t) => (p as i64, STATE_TID_BASE + t as i64),
        Track::Cpu(c) => (CPU_PID, CPU_TID_BASE + c as i64),
    }
}

/// ns as µs, exactly (ns below 2^53 divide by 1000 to the nearest double of the decimal).
fn us(ns: u64) -> Json {
    serde_json::Number::from_f64(ns as f64 / 1000.0).map_or(Json::Null, Json::Number)
}

fn meta(name: &str, pid: i64, tid: i64, args: Json) -> Json {
    json!({"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args})
}

/// The metadata events of the file: process and thread names, the threads' order.
fn metadata(t: &Timeline) -> Vec<Json> {
    let mut out = Vec::new();
    for (pid, name) in &t.processes {
        out.push(meta("process_name", *pid as i64, *pid as i64, json!({"name": name})));
    }
    let mut state_threads: Vec<(i32, i32)> = t.slices.iter().filter_map(|s| if let Track::ThreadState(p, t) = s.track { Some((p, t)) } else { None }).collect();
    state_threads.sort();
    state_threads.dedup();
    let mut threads: Vec<(i32, i32)> = t.threads.keys().copied().chain(state_threads.iter().copied()).collect();
    threads.sort();
    threads.dedup();
    for (pid, tid) in threads {
        let name = t.threads.get(&(pid, tid)).filter(|n| !n.is_empty()).cloned().unwrap_or_else(|| format!("tid {tid}"));
        out.push(meta("thread_name", pid as i64, tid as i64, json!({"name": name})));
        out.push(meta("thread_sort_index", pid as i64, tid as i64, json!({"sort_index": 2 * tid as i64})));
        if state_threads.binary_search(&(pid, tid)).is_ok() {
            let (_, st) = ids(Track::ThreadState(pid, tid));
            out.push(meta("thread_name", pid as i64, st, json!({"name": format!("{name} {tid} (scheduling)")})));
            out.push(meta("thread_sort_index", pid as i64, st, json!({"sort_index": 2 * tid as i64 + 1})));
        }
    }
    if !t.cpus.is_empty() {
        out.push(meta("process_name", CPU_PID, CPU_PID, json!({"name": "CPUs"})));
        for c in &t.cpus {
            let (_, tid) = ids(Track::Cpu(*c));
            out.push(meta("thread_name", CPU_PID, tid, json!({"name": format!("CPU {c}")})));
            out.push(meta("thread_sort_index", CPU_PID, tid, json!({"sort_index": *c})));
        }
    }
    out
}

/// A timed event of the timeline: a slice, an instant or a counter value, by index.
#[derive(Clone, Copy)]
enum Timed {
    Slice(usize),
    Instant(usize),
    Counter(usize),
}

/// The timed events in the file's order: by time, and at one time the longer slice first,
/// so slices that start together nest (a stable sort: else in the timeline's order).
fn timed(t: &Timeline) -> Vec<(u64, u64, Timed)> {
    let mut timed: Vec<(u64, u64, Timed)> = Vec::with_capacity(t.slices.len() + t.instants.len() + t.counters.len());
    timed.extend(t.slices.iter().enumerate().map(|(k, s)| (s.ts, s.dur, Timed::Slice(k))));
    timed.extend(t.instants.iter().enumerate().map(|(k, i)| (i.ts, 0, Timed::Instant(k))));
    timed.extend(t.counters.iter().enumerate().map(|(k, c)| (c.ts, 0, Timed::Counter(k))));
    timed.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    timed
}

/// The JSON of one timed event.
fn timed_json(t: &Timeline, x: Timed) -> Json {
    match x {
        Timed::Slice(k) => {
            let s = &t.slices[k];
            let (pid, tid) = ids(s.track);
            json!({"ph": "X", "name": s.name.as_str(), "cat": s.cat.as_str(), "ts": us(s.ts), "dur": us(s.dur), "pid": pid, "tid": tid, "args": arg_map(&s.args)})
        }
        Timed::Instant(k) => {
            let i = &t.instants[k];
            let (pid, tid) = ids(i.track);
            json!({"ph": "i", "s": "t", "name": i.name.as_str(), "cat": i.cat.as_str(), "ts": us(i.ts), "pid": pid, "tid": tid, "args": arg_map(&i.args)})
        }
        Timed::Counter(k) => {
            let c = &t.counters[k];
            let (event, field) = c.name.rsplit_once(':').unwrap_or((&c.name, "value"));
            let mut args = Map::new();
            args.insert(field.to_string(), serde_json::Number::from_f64(c.value).map_or(Json::Null, Json::Number));
            json!({"ph": "C", "name": event, "ts": us(c.ts), "pid": c.pid as i64, "tid": c.pid as i64, "args": args})
        }
    }
}

/// The events of the file, metadata first, then the rest by time (at one time, the
/// longer slice first, so slices that start together nest): what [`write()`] writes, one
/// at a time.
pub fn events(t: &Timeline) -> Vec<Json> {
    records(t).collect()
}

/// The events of the file in its order, each made when asked for.
fn records(t: &Timeline) -> impl Iterator<Item = Json> + '_ {
    metadata(t).into_iter().chain(timed(t).into_iter().map(move |(_, _, x)| timed_json(t, x)))
}

/// Writes `t` as a JSON trace; `source` (the trace directory) goes in `otherData`. Each
/// event is made as it is written: what the export holds beside the timeline is an index
/// of it.
///
/// # Errors
/// The writer's.
pub fn write(t: &Timeline, source: &str, mut w: impl Write) -> std::io::Result<()> {
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"otherData\":")?;
    serde_json::to_writer(&mut w, &json!({"producer": "ust export", "source": source}))?;
    w.write_all(b",\"traceEvents\":[\n")?;
    for (i, e) in records(t).enumerate() {
        if i > 0 {
            w.write_all(b",\n")?;
        }
        serde_json::to_writer(&mut w, &e)?;
    }
    w.write_all(b"\n]}\n")?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::super::timeline::{Instant, Slice};
    use super::*;

    #[test]
    fn slices_instants_and_tracks_are_written_in_the_format() {
        let mut t = Timeline::default();
        t.name_process(10, "app");
        t.name_thread(10, 11, "worker");
        t.cpus = vec![1];
        t.slices.push(Slice { track: Track::Thread(10, 11), ts: 2_000_500, dur: 1_001, name: "inner".into(), cat: "app".into(), args: Vec::new() });
        t.slices.push(Slice { track: Track::Thread(10, 11), ts: 2_000_500, dur: 5_000, name: "outer".into(), cat: "app".into(), args: Vec::new() });
        t.slices.push(Slice { track: Track::Cpu(1), ts: 2_000_000, dur: 9_000, name: "worker".into(), cat: "sched".into(), args: Vec::new() });
        t.slices.push(Slice { track: Track::ThreadState(10, 11), ts: 2_000_000, dur: 9_000, name: "Running".into(), cat: "sched".into(), args: Vec::new() });
        t.instants.push(Instant { track: Track::Thread(10, 11), ts: 2_000_600, name: "event".into(), cat: "app".into(), args: Vec::new() });
        let mut buf = Vec::new();
        write(&t, "/t", &mut buf).unwrap();
        let v: Json = serde_json::from_slice(&buf).unwrap();
        let evs = v["traceEvents"].as_array().unwrap();
        let x: Vec<&Json> = evs.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(x.len(), 4);
        let outer = x.iter().position(|e| e["name"] == "outer").unwrap();
        let inner = x.iter().position(|e| e["name"] == "inner").unwrap();
        assert!(outer < inner, "the longer slice first at one time");
        assert_eq!(x[inner]["ts"], json!(2000.5));
        assert_eq!(x[inner]["dur"], json!(1.001));
        let cpu = x.iter().find(|e| e["name"] == "worker").unwrap();
        assert_eq!((cpu["pid"].as_i64(), cpu["tid"].as_i64()), (Some(CPU_PID), Some(CPU_TID_BASE + 1)));
        let st = x.iter().find(|e| e["name"] == "Running").unwrap();
        assert_eq!(st["tid"].as_i64(), Some(STATE_TID_BASE + 11));
        let names: Vec<String> = evs.iter().filter(|e| e["name"] == "thread_name").map(|e| e["args"]["name"].as_str().unwrap().to_string()).collect();
        assert_eq!(names, ["worker", "worker 11 (scheduling)", "CPU 1"]);
        assert_eq!(evs.iter().filter(|e| e["ph"] == "i").count(), 1);
    }
}
