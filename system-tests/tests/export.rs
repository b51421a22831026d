//! `ust export DIR --format chrome-json`: a trace of examples/testprogs tracingspans
//! (`tracing` spans, an `#[instrument]`ed async function polled across an `.await`, events
//! inside spans, a ust tracepoint), recorded with `ust trace -t vtid -t procname` (and
//! `--kernel` as root), exported and checked against the trace itself as babeltrace2 reads
//! it.
//!
//! Perfetto's trace processor cannot run here (PyPI `perfetto` downloads its
//! `trace_processor_shell` at first use, and this machine reaches package registries only),
//! so the protobuf export (`--format perfetto`) is decoded with the Python classes that PyPI
//! `perfetto` ships, generated from Perfetto's own `perfetto_trace.proto`
//! (tests/data/export/check_perfetto.py: no unknown field, described tracks, balanced
//! slices) and must hold what the JSON export holds; the JSON file is checked against the
//! Trace Event Format by a strict reader: every
//! event one of the phases ust writes (`M`, `X`, `i`, `C`) with exactly the fields the
//! format gives that phase (an unknown field or a missing one fails), metadata names from
//! the format's list, every track named, and the `X` slices of each track properly nested
//! (Perfetto's JSON importer drops a slice that overlaps another partially). The expected
//! number of slices and instants per thread, and the CPU intervals of the traced thread,
//! are counted from babeltrace2's text of the same trace.

use system_tests as common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use common::{babeltrace, program, TestDaemon};
use serde::Deserialize;
use serde_json::{Map, Value as Json};

/// The JSON object form of the Trace Event Format, as ust writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TraceFile {
    #[serde(rename = "displayTimeUnit")]
    display_time_unit: String,
    #[serde(rename = "otherData")]
    other_data: Map<String, Json>,
    #[serde(rename = "traceEvents")]
    trace_events: Vec<Ev>,
}

/// The event phases ust writes, each with the fields the format gives it.
#[derive(Deserialize, Debug)]
#[serde(tag = "ph", deny_unknown_fields)]
enum Ev {
    #[serde(rename = "M")]
    Meta { name: String, pid: u32, tid: u32, args: Map<String, Json> },
    #[serde(rename = "X")]
    Complete { name: String, cat: String, ts: f64, dur: f64, pid: u32, tid: u32, args: Map<String, Json> },
    #[serde(rename = "i")]
    Instant { name: String, cat: String, ts: f64, s: String, pid: u32, tid: u32, args: Map<String, Json> },
    #[serde(rename = "C")]
    Counter { name: String, ts: f64, pid: u32, tid: u32, args: Map<String, Json> },
}

/// A slice in ns, as Perfetto's importer reads `ts` and `dur` (µs) into its ns.
#[derive(Debug, Clone)]
struct X {
    name: String,
    cat: String,
    start: i64,
    end: i64,
    args: Map<String, Json>,
}

/// An instant: category, name, arguments.
type Inst = (String, String, Map<String, Json>);

#[derive(Debug, Default)]
struct Parsed {
    thread_names: HashMap<(u32, u32), String>,
    process_names: HashMap<u32, String>,
    slices: BTreeMap<(u32, u32), Vec<X>>,
    instants: BTreeMap<(u32, u32), Vec<Inst>>,
    counters: Vec<(String, Map<String, Json>)>,
}

fn ns(us: f64) -> i64 {
    assert!(us.is_finite() && us >= 0.0, "time {us}");
    (us * 1000.0).round() as i64
}

/// Reads and checks the file (see the module docs).
fn check(path: &Path) -> Parsed {
    let text = std::fs::read_to_string(path).unwrap();
    let f: TraceFile = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not the trace event format as ust writes it: {e}"));
    assert_eq!(f.display_time_unit, "ns");
    assert_eq!(f.other_data.get("producer"), Some(&Json::from("ust export")));
    let mut p = Parsed::default();
    for e in f.trace_events {
        match e {
            Ev::Meta { name, pid, tid, args } => match name.as_str() {
                "process_name" => {
                    p.process_names.insert(pid, args["name"].as_str().expect("a name").to_string());
                }
                "thread_name" => {
                    p.thread_names.insert((pid, tid), args["name"].as_str().expect("a name").to_string());
                }
                "thread_sort_index" => assert!(args["sort_index"].is_i64(), "{args:?}"),
                other => panic!("metadata event {other:?} is not one of the format's"),
            },
            Ev::Complete { name, cat, ts, dur, pid, tid, args } => {
                let start = ns(ts);
                p.slices.entry((pid, tid)).or_default().push(X { name, cat, start, end: start + ns(dur), args });
            }
            Ev::Instant { name, cat, ts, s, pid, tid, args } => {
                ns(ts);
                assert_eq!(s, "t", "thread-scoped instants");
                p.instants.entry((pid, tid)).or_default().push((cat, name, args));
            }
            Ev::Counter { name, ts, pid, tid, args } => {
                ns(ts);
                assert_eq!(pid, tid);
                assert!(!args.is_empty() && args.values().all(Json::is_number), "{args:?}");
                p.counters.push((name, args));
            }
        }
    }
    for (track, xs) in &p.slices {
        assert!(p.thread_names.contains_key(track) && p.process_names.contains_key(&track.0), "track {track:?} unnamed");
        let mut xs: Vec<&X> = xs.iter().collect();
        xs.sort_by_key(|x| (x.start, std::cmp::Reverse(x.end)));
        let mut stack: Vec<&X> = Vec::new();
        for x in xs {
            assert!(x.end >= x.start);
            while stack.last().is_some_and(|top| top.end <= x.start) {
                stack.pop();
            }
            if let Some(top) = stack.last() {
                assert!(x.end <= top.end, "on track {track:?}, {x:?} overlaps {top:?} partially");
            }
            stack.push(x);
        }
    }
    for track in p.instants.keys() {
        assert!(p.thread_names.contains_key(track), "track {track:?} unnamed");
    }
    p
}

/// babeltrace2's view of the user-space events: per thread (`vtid`), the number of spans
/// entered (`*_enter`) and of other events (statedump aside), and the process id.
fn bt_user(text: &str) -> (BTreeMap<u32, (usize, usize)>, u32) {
    let mut per: BTreeMap<u32, (usize, usize)> = BTreeMap::new();
    let mut pid = 0;
    for l in text.lines().filter(|l| !common::is_statedump(l)) {
        let Some(tid) = field(l, "vtid") else { continue };
        let name = l.split_whitespace().nth(3).unwrap_or_default().trim_end_matches(':');
        pid = l.split_whitespace().nth(2).and_then(|o| o.rsplit(":(").next()).and_then(|p| p.strip_suffix(')')).and_then(|p| p.parse().ok()).unwrap_or(pid);
        let e = per.entry(tid as u32).or_default();
        let span = ["_new", "_enter", "_exit", "_close", "_record", "_follows_from"].iter().any(|s| name.ends_with(s));
        if name.ends_with("_enter") {
            e.0 += 1;
        } else if !span {
            e.1 += 1;
        }
    }
    (per, pid)
}

/// An integer field `name = N` of a babeltrace2 line.
fn field(line: &str, name: &str) -> Option<i64> {
    let pat = format!(" {name} = ");
    let i = line.find(&pat)? + pat.len();
    let v: String = line[i..].chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
    v.parse().ok()
}

/// Traces tracingspans with `extra` arguments to `ust trace`, exports it, checks the file
/// and the user-space tracks against babeltrace2; returns the trace directory, the parse,
/// and the traced pid.
fn trace_and_export(d: &TestDaemon, name: &str, extra: &[&str]) -> (std::path::PathBuf, Parsed, u32) {
    let out = d.output(name);
    let o = d
        .ust_cmd()
        .arg("trace")
        .args(extra)
        .args(["-t", "vtid", "-t", "procname", "--output"])
        .arg(&out)
        .arg("--")
        .arg(program("debug", "tracingspans"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stderr), d.log());
    let json = out.join("export.json");
    let o = d.ust_cmd().arg("export").arg(&out).args(["--format", "chrome-json", "--counter", "spanprobe:inside:step", "-o"]).arg(&json).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.contains("chrome-json written to"), "{err}");
    let p = check(&json);
    let user = out.join("ust");
    let (per, pid) = bt_user(&babeltrace(&user));
    assert_eq!(per.keys().copied().collect::<Vec<u32>>(), [pid], "tracingspans records on its main thread (the runtime's thread only its state dump)");
    for (tid, (spans, others)) in &per {
        let got = p.slices.get(&(pid, *tid)).map_or(0, |v| v.iter().filter(|x| x.cat != "sched").count());
        let instants = p.instants.get(&(pid, *tid)).map_or(0, Vec::len);
        assert_eq!((got, instants), (*spans, *others), "thread {tid}: slices (spans entered) and instants");
    }
    let main = p.slices.get(&(pid, pid)).expect("the main thread's track");
    let conn: Vec<&X> = main.iter().filter(|x| x.name == "conn").collect();
    assert_eq!(conn.len(), 1);
    // `_new`'s fields with `bytes` from `Span::record`.
    assert_eq!(Json::Object(conn[0].args.clone()), serde_json::json!({"_span_id": 1, "_parent_id": 0, "peer": "10.0.0.1", "bytes": 512}));
    assert_eq!(conn[0].cat, "tracingspans");
    let fetch: Vec<&X> = main.iter().filter(|x| x.name == "fetch").collect();
    assert!(fetch.len() >= 2, "one slice per poll: {fetch:?}");
    assert!(fetch.iter().all(|x| x.args["key"] == 21 && x.args["_parent_id"] == 0));
    let ev = &p.instants[&(pid, pid)];
    let opened = ev.iter().find(|e| e.2.get("message") == Some(&Json::from("opened"))).expect("the event inside conn");
    assert_eq!((opened.0.as_str(), opened.1.as_str(), &opened.2["step"]), ("tracingspans", "event", &Json::from(1)));
    let inside = ev.iter().find(|e| e.1 == "inside").expect("the ust tracepoint");
    assert_eq!((inside.0.as_str(), Json::Object(inside.2.clone())), ("spanprobe", serde_json::json!({"step": 1})));
    let slow = ev.iter().find(|e| e.2.get("message") == Some(&Json::from("slow"))).unwrap();
    assert_eq!(slow.2["polls"], 2);
    // The counter: one value per `spanprobe:inside`, as babeltrace2 counts them.
    let n = babeltrace(&user).lines().filter(|l| l.contains(" spanprobe:inside:")).count();
    assert_eq!(p.counters.len(), n);
    assert!(p.counters.iter().all(|(name, args)| name == "spanprobe:inside" && args["step"].as_f64() == Some(1.0)));
    assert_eq!(p.thread_names.get(&(pid, pid)).map(String::as_str), Some("tracingspans"), "named by procname");
    check_perfetto_against_json(d, &out, &p, pid);
    (out, p, pid)
}

/// Exports the same trace as Perfetto protobuf, reads it with Perfetto's own generated
/// classes (tests/data/export/check_perfetto.py), and finds in it what the JSON export
/// holds: the same slices and instants on every thread, the same arguments, the same
/// counters and CPU tracks.
fn check_perfetto_against_json(d: &TestDaemon, out: &Path, p: &Parsed, pid: u32) {
    let pf = out.join("export.pftrace");
    let o = d.ust_cmd().arg("export").arg(out).args(["--counter", "spanprobe:inside:step", "-o"]).arg(&pf).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.contains("perfetto written to"), "the default format is perfetto: {err}");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/export/check_perfetto.py");
    let o = std::process::Command::new("python3").arg(&script).arg(&pf).output().expect("python3");
    assert!(
        o.status.success(),
        "Perfetto's schema refused the trace (scripts/test.sh installs PyPI perfetto and protobuf):\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let sum: Json = serde_json::from_slice(&o.stdout).unwrap();
    let tracks = sum["tracks"].as_object().unwrap();
    let count = |k: &str, what: &str| tracks.get(k).map_or(0, |t| t[what].as_u64().unwrap() as usize);
    for ((tp, tid), name) in &p.thread_names {
        if *tp != pid || name.ends_with("(scheduling)") {
            continue;
        }
        let key = format!("{pid}/{tid}");
        let json_slices = p.slices.get(&(*tp, *tid)).map_or(0, Vec::len);
        let json_instants = p.instants.get(&(*tp, *tid)).map_or(0, Vec::len);
        assert_eq!((count(&key, "slices"), count(&key, "instants")), (json_slices, json_instants), "thread {key}");
    }
    let total = |what: &str| tracks.values().map(|t| t[what].as_u64().unwrap() as usize).sum::<usize>();
    assert_eq!(total("slices"), p.slices.values().map(Vec::len).sum::<usize>(), "every slice");
    assert_eq!(total("instants"), p.instants.values().map(Vec::len).sum::<usize>(), "every instant");
    let conn = &tracks[&format!("{pid}/{pid}")]["first"]["conn"];
    assert_eq!(conn["categories"], serde_json::json!(["tracingspans"]));
    assert_eq!(conn["args"], serde_json::json!({"_span_id": 1, "_parent_id": 0, "peer": "10.0.0.1", "bytes": 512}));
    let values: Vec<f64> = sum["counters"][format!("process {pid} spanprobe:inside:step")].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(values, p.counters.iter().map(|c| c.1["step"].as_f64().unwrap()).collect::<Vec<f64>>());
    let cpu_json = p.process_names.iter().find(|(_, n)| *n == "CPUs").map_or(0, |(c, _)| p.thread_names.keys().filter(|(q, _)| q == c).count());
    let cpu_pf = tracks.keys().filter(|k| k.starts_with("CPUs CPU ")).count();
    assert!(cpu_pf <= cpu_json, "CPU tracks: {cpu_pf} (with slices) of {cpu_json}");
    if cpu_json > 0 {
        assert!(cpu_pf > 0);
    }
}

#[test]
fn user_space_export_has_a_track_per_thread_with_spans_instants_and_counters() {
    let d = TestDaemon::start();
    let (_, p, _) = trace_and_export(&d, "user", &[]);
    assert!(!p.process_names.values().any(|n| n == "CPUs"), "no kernel part, no CPU tracks");
    assert!(p.slices.values().flatten().all(|x| x.cat != "sched"));
}

/// CPU intervals of `tid` as babeltrace2's `sched_switch` lines give them: one per switch
/// away from it, when the previous switch on that CPU put it there (or it is the CPU's
/// first switch), plus one when the last switch of a CPU put it there.
fn bt_cpu_intervals(kernel_text: &str, tid: i64) -> usize {
    let mut on: HashMap<i64, i64> = HashMap::new();
    let mut n = 0;
    for l in kernel_text.lines().filter(|l| l.contains(" sched_switch: ")) {
        let cpu = field(l, "cpu_id").unwrap();
        let prev = field(l, "prev_tid").or_else(|| field(l, "prev_pid")).unwrap();
        let next = field(l, "next_tid").or_else(|| field(l, "next_pid")).unwrap();
        if prev == tid && on.get(&cpu).is_none_or(|&t| t == prev) {
            n += 1;
        }
        on.insert(cpu, next);
    }
    n + on.values().filter(|&&t| t == tid).count()
}

#[test]
fn mixed_user_and_kernel_export_adds_thread_states_and_cpu_tracks() {
    if !rustix::process::geteuid().is_root() || ust_kernel::tracefs::root().is_err() {
        eprintln!("skipped: kernel tracing needs root and tracefs");
        return;
    }
    let d = TestDaemon::start();
    let (out, p, pid) = trace_and_export(&d, "mixed", &["--kernel"]);
    let cpu_pid = p.process_names.iter().find(|(_, n)| *n == "CPUs").map(|(p, _)| *p).expect("the CPUs process");
    let kernel = babeltrace(&out.join("kernel"));
    let cpus: std::collections::BTreeSet<i64> = kernel.lines().filter_map(|l| field(l, "cpu_id")).collect();
    let cpu_tracks: Vec<&String> = p.thread_names.iter().filter(|((p, _), _)| *p == cpu_pid).map(|(_, n)| n).collect();
    assert_eq!(cpu_tracks.len(), cpus.len(), "one track per CPU: {cpu_tracks:?}");
    let on_cpus: Vec<&X> = p.slices.iter().filter(|((p, _), _)| *p == cpu_pid).flat_map(|(_, v)| v).filter(|x| x.args["tid"] == pid).collect();
    assert_eq!(on_cpus.len(), bt_cpu_intervals(&kernel, pid as i64), "the traced thread's intervals on the CPUs");
    assert!(on_cpus.iter().all(|x| x.args["pid"] == pid && x.cat == "sched"));
    // Its state track: Running exactly when it is on a CPU, Blocked and Runnable between.
    let (state_tid, state_name) = p
        .thread_names
        .iter()
        .find(|((p, _), n)| *p == pid && n.ends_with(&format!(" {pid} (scheduling)")))
        .map(|((_, t), n)| (*t, n))
        .expect("the state track");
    assert!(state_name.starts_with("tracingspans"), "{state_name}");
    let states = &p.slices[&(pid, state_tid)];
    let running: Vec<(i64, i64)> = states.iter().filter(|x| x.name == "Running").map(|x| (x.start, x.end)).collect();
    let mut cpu_times: Vec<(i64, i64)> = on_cpus.iter().map(|x| (x.start, x.end)).collect();
    cpu_times.sort();
    let mut running_sorted = running.clone();
    running_sorted.sort();
    assert_eq!(running_sorted, cpu_times);
    let names: std::collections::BTreeSet<&str> = states.iter().map(|x| x.name.as_str()).collect();
    assert!(names.iter().all(|n| ["Running", "Runnable", "Runnable (preempted)", "Blocked"].contains(n)), "{names:?}");
    let all_states: Vec<&X> = p
        .slices
        .iter()
        .filter(|((q, t), _)| *q == pid && *t != pid && p.thread_names.get(&(*q, *t)).is_some_and(|n| n.ends_with("(scheduling)")))
        .flat_map(|(_, v)| v)
        .collect();
    let blocked: Vec<&&X> = all_states.iter().filter(|x| x.name == "Blocked").collect();
    assert!(!blocked.is_empty(), "the runtime's thread waits for the daemon at least");
    assert!(blocked.iter().all(|x| x.args["state"].as_str().is_some_and(|s| s.len() == 1 && "SDTtXZPI".contains(s))), "{blocked:?}");
    // A Runnable slice (a wake-up seen) follows its Blocked slice, which says what the
    // thread was blocked in, and names the waker.
    let runnable: Vec<&&X> = all_states.iter().filter(|x| x.name == "Runnable").collect();
    assert!(!runnable.is_empty());
    for r in &runnable {
        assert!(r.args["woken_by"]["kind"].is_string(), "{r:?}");
        let b = blocked.iter().find(|b| b.end == r.start).unwrap_or_else(|| panic!("{r:?} follows a Blocked slice"));
        assert!(b.args["blocked_in"].is_string(), "{b:?}");
    }
}

/// tracingthreads: three threads of `job` spans and the main thread's `batch`, each on its
/// own track, as many slices and instants on each as babeltrace2 shows for its `vtid`.
#[test]
fn each_thread_gets_its_own_track() {
    let d = TestDaemon::start();
    let out = d.output("threads");
    let o = d
        .ust_cmd()
        .args(["trace", "-t", "vtid", "-t", "procname", "--output"])
        .arg(&out)
        .arg("--")
        .arg(program("debug", "tracingthreads"))
        .args(["3", "5"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stderr), d.log());
    assert_eq!(String::from_utf8_lossy(&o.stdout), "done 3 5\n");
    let json = out.join("t.json");
    let o = d.ust_cmd().arg("export").arg(&out).args(["--format", "chrome-json", "-o"]).arg(&json).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let p = check(&json);
    let (per, pid) = bt_user(&babeltrace(&out));
    assert_eq!(per.len(), 4, "main and three workers: {per:?}");
    let mut workers = Vec::new();
    for (tid, (spans, others)) in &per {
        let slices = p.slices.get(&(pid, *tid)).map_or(&[][..], Vec::as_slice);
        let instants = p.instants.get(&(pid, *tid)).map_or(0, Vec::len);
        assert_eq!((slices.len(), instants), (*spans, *others), "thread {tid}");
        if *tid == pid {
            assert_eq!(slices.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(), ["batch"]);
            continue;
        }
        assert_eq!(slices.len(), 5);
        let w = slices[0].args["worker"].as_u64().unwrap();
        let mut ns: Vec<u64> = slices
            .iter()
            .map(|x| {
                assert_eq!((x.name.as_str(), x.args["worker"].as_u64()), ("job", Some(w)), "one worker's jobs on its track");
                x.args["n"].as_u64().unwrap()
            })
            .collect();
        ns.sort();
        assert_eq!(ns, [0, 1, 2, 3, 4]);
        workers.push(w);
    }
    workers.sort();
    assert_eq!(workers, [0, 1, 2]);
}

#[test]
fn export_of_a_directory_without_a_trace_fails_clearly() {
    let d = TestDaemon::without_daemon();
    let empty = tempfile::tempdir().unwrap();
    let o = d.ust_cmd().arg("export").arg(empty.path()).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no CTF trace"), "{err}");
}
