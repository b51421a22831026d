//! The report and the exports on traces other tracers recorded (`/work/shared/field-traces`,
//! or `$UST_FIELD_TRACES`: lttng-modules and LTTng-UST traces, see its README) and on a
//! kept trace of ust (`tests/data/pingpong`), each checked against an independent reader:
//!
//! - Parquet: DuckDB (PyPI `duckdb`, `tests/data/parquet_sums.py`) reads the export; per
//!   event class its rows and the sums of its integer columns (timestamps included) equal
//!   what babeltrace2 reads from the trace (`ctf-reader/tests/bt2_dump.py`, the `bt2`
//!   Python bindings).
//! - Perfetto: Perfetto's own protos (PyPI `perfetto`,
//!   `system-tests/tests/data/export/check_perfetto.py`) decode one instant per event
//!   babeltrace2 reads, on its thread's track.
//! - The report of one process of `many-threads` (lttng-modules 2.8): its system calls per
//!   name and per thread equal `lttng-syscallstats`', its main thread's wake-ups (latency
//!   and waker) `lttng-schedlog`'s, its CPU time `lttng-cputop`'s share (lttng-analyses 0.6.1 in `target/lttng-analyses`, which
//!   scripts/test.sh installs, or `$UST_LTTNG_ANALYSES_PYTHON`).
//!
//! Each test says why it is skipped when a trace or a tool is missing.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn field_trace(name: &str) -> Option<PathBuf> {
    let root = std::env::var_os("UST_FIELD_TRACES").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/work/shared/field-traces"));
    let dir = root.join(name);
    if dir.join("metadata").exists() {
        Some(dir)
    } else {
        eprintln!("SKIP: {} is absent", dir.display());
        None
    }
}

fn python_has(python: &str, module: &str) -> bool {
    let ok = Command::new(python).args(["-c", &format!("import {module}")]).output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIP: {python} has no {module} (scripts/test.sh installs it)");
    }
    ok
}

/// babeltrace2's events of every trace under `dir`, as `bt2_dump.py` writes them.
fn bt2_events(dir: &Path) -> Vec<Json> {
    let script = workspace().join("ctf-reader/tests/bt2_dump.py");
    let mut out = Vec::new();
    for d in ust_analysis::traces::trace_dirs(dir).unwrap() {
        let o = Command::new("/usr/bin/python3").arg(&script).arg(&d).output().expect("bt2_dump.py runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        for l in String::from_utf8(o.stdout).unwrap().lines() {
            let v: Json = serde_json::from_str(l).unwrap();
            assert_ne!(v["type"], "error", "babeltrace2 stopped: {v}");
            if v["type"] == "event" {
                out.push(v);
            }
        }
    }
    out
}

/// Per event class: events, and the sums of the integer fields of its contexts and payload
/// (enumerations by value) and of its timestamps, by the export's column names.
fn bt2_sums(events: &[Json]) -> BTreeMap<String, (u64, BTreeMap<String, i128>)> {
    let mut out: BTreeMap<String, (u64, BTreeMap<String, i128>)> = BTreeMap::new();
    for e in events {
        let entry = out.entry(e["name"].as_str().unwrap().to_string()).or_default();
        entry.0 += 1;
        *entry.1.entry("timestamp".into()).or_default() += e["ts"].as_i64().unwrap() as i128;
        let payload = e["payload"].as_object();
        let fixed = ["timestamp", "hostname", "session", "trace", "stream", "cpu"];
        for scope in ["sctx", "ectx", "payload"] {
            let Some(m) = e[scope].as_object() else { continue };
            for (k, v) in m {
                let in_payload = payload.is_some_and(|p| p.contains_key(k));
                let fixed_name = fixed.contains(&k.as_str());
                let col = match scope {
                    "payload" if fixed_name => format!("payload.{k}"),
                    "payload" => k.clone(),
                    _ if in_payload || fixed_name => format!("context.{k}"),
                    _ => k.clone(),
                };
                let (col, n) = match v {
                    Json::Number(n) => (col, n.as_i64().map(i128::from).or(n.as_u64().map(i128::from))),
                    Json::Object(o) if o.contains_key("enum") => {
                        (format!("{col}.value"), o["enum"].as_i64().map(i128::from).or(o["enum"].as_u64().map(i128::from)))
                    }
                    _ => continue,
                };
                *entry.1.entry(col).or_default() += n.unwrap();
            }
        }
    }
    out
}

fn parquet_matches_babeltrace2(dir: &Path) {
    let tmp = tempfile::tempdir().unwrap();
    let s = ust_analysis::export::parquet::export(dir, tmp.path()).unwrap();
    let o = Command::new("python3").arg(workspace().join("ust-analysis/tests/data/parquet_sums.py")).arg(tmp.path()).output().unwrap();
    assert!(o.status.success(), "DuckDB could not read the export: {}", String::from_utf8_lossy(&o.stderr));
    let got: BTreeMap<String, Json> = serde_json::from_slice(&o.stdout).unwrap();
    let want = bt2_sums(&bt2_events(dir));
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "one file per event class that has events");
    assert_eq!(s.rows, want.values().map(|w| w.0).sum::<u64>());
    for (name, (count, sums)) in &want {
        let g = &got[name];
        assert_eq!(g["count"].as_u64(), Some(*count), "{name}: rows");
        for (col, sum) in sums {
            let v = g["sums"][col].as_str().unwrap_or_else(|| panic!("{name}: no integer column {col}: {}", g["columns"]));
            assert_eq!(v.parse::<i128>().unwrap(), *sum, "{name}.{col}: sum");
        }
    }
}

#[test]
fn parquet_of_lttng_kernel_user_space_and_ust_traces_reads_in_duckdb_as_babeltrace2_reads_them() {
    if !python_has("/usr/bin/python3", "bt2") || !python_has("python3", "duckdb") {
        return;
    }
    parquet_matches_babeltrace2(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pingpong"));
    for name in ["many-threads", "ros2", "bug446190", "flipping-endianness", "debuginfo-test-app4"] {
        if let Some(dir) = field_trace(name) {
            parquet_matches_babeltrace2(&dir);
        }
    }
}

#[test]
fn a_failed_export_names_no_file_and_a_killed_ones_leftovers_go() {
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pingpong");
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good");
    let s = ust_analysis::export::parquet::export(&trace, &good).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&good).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names.len(), s.files, "{names:?}");
    assert!(names.iter().all(|n| n.ends_with(".parquet") && !n.starts_with('.')), "{names:?}");

    // One export at a time into a directory.
    let lock = ust_ctf::outdir::TraceDir::open(&good, None).unwrap().try_lock().unwrap();
    let err = ust_analysis::export::parquet::export(&trace, &good).unwrap_err();
    assert!(err.contains("another export"), "{err}");
    drop(lock);
    ust_analysis::export::parquet::export(&trace, &good).unwrap();

    // A file that cannot be named (a directory where its temporary name goes): the export
    // fails, and the other classes' complete files are neither named nor left.
    let bad = tmp.path().join("bad");
    let blocker = bad.join(format!(".{}.tmp", names[0]));
    std::fs::create_dir_all(&blocker).unwrap();
    let err = ust_analysis::export::parquet::export(&trace, &bad).unwrap_err();
    assert!(err.contains(&names[0]) && err.contains("directory"), "{err}");
    let left: Vec<String> = std::fs::read_dir(&bad).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(left, [blocker.file_name().unwrap().to_str().unwrap()], "only what was there before");

    // A link (or anything but a regular file) where a file's final name goes is refused
    // before the export, not replaced; nothing else is named, and the link's target is
    // untouched.
    let linked = tmp.path().join("linked");
    std::fs::create_dir(&linked).unwrap();
    let target = tmp.path().join("target");
    std::fs::write(&target, b"someone else's").unwrap();
    std::os::unix::fs::symlink(&target, linked.join(&names[1])).unwrap();
    let err = ust_analysis::export::parquet::export(&trace, &linked).unwrap_err();
    assert!(err.contains(&names[1]) && err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read(&target).unwrap(), b"someone else's");
    let left: Vec<String> = std::fs::read_dir(&linked).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(left, [names[1].clone()], "the link, and nothing named");
    assert!(std::fs::symlink_metadata(linked.join(&names[1])).unwrap().file_type().is_symlink());

    // What a killed export leaves (hidden temporary files) goes with the next export;
    // a user's file of another name stays.
    std::fs::remove_dir(&blocker).unwrap();
    std::fs::write(bad.join(".stale.parquet.tmp"), b"PAR1 no footer").unwrap();
    std::fs::write(bad.join("notes.txt"), b"mine").unwrap();
    ust_analysis::export::parquet::export(&trace, &bad).unwrap();
    let mut after: Vec<String> = std::fs::read_dir(&bad).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    after.sort();
    let mut want = names.clone();
    want.push("notes.txt".into());
    want.sort();
    assert_eq!(after, want);
}

#[test]
fn a_relay_tree_of_two_hosts_is_one_dataset() {
    let (Some(k), Some(u)) = (field_trace("many-threads"), field_trace("ros2")) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("relayd");
    for (host, trace, sub) in [("wilbrod", &k, "kernel"), ("chrisnux", &u, "ust/uid/1000/64-bit"), ("other", &k, "kernel")] {
        let d = root.join(host).join("s-20240101-120000").join(sub);
        std::fs::create_dir_all(d.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(trace, &d).unwrap();
    }
    let out = tmp.path().join("out");
    let s = ust_analysis::export::parquet::export(&root, &out).unwrap();
    assert_eq!(s.rows, 2 * 240_644 + 99_338);
    if !python_has("python3", "duckdb") {
        return;
    }
    let q = format!(
        "import duckdb; print(duckdb.sql(\"SELECT hostname, session, trace, count(*) FROM read_parquet('{}/sched_switch.parquet') GROUP BY ALL ORDER BY ALL\").fetchall())",
        out.display()
    );
    let o = Command::new("python3").args(["-c", &q]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // many-threads' own env names its host: the second copy keeps it (the env wins over
    // the tree); the session comes from the tree.
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "[('wilbrod', 's', 'other/s-20240101-120000/kernel', 28325), ('wilbrod', 's', 'wilbrod/s-20240101-120000/kernel', 28325)]"
    );
}

/// One instant per event, on the track of its thread.
fn perfetto_matches_babeltrace2(dir: &Path, mut thread_of: impl FnMut(&Json) -> Option<String>) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("t.pftrace");
    let opt = ust_analysis::export::Options { format: ust_analysis::export::Format::Perfetto, counters: Vec::new(), kernel_events: false };
    let s = ust_analysis::export::export(dir, &opt, std::fs::File::create(&file).unwrap()).unwrap();
    let o = Command::new("python3").arg(workspace().join("system-tests/tests/data/export/check_perfetto.py")).arg(&file).output().unwrap();
    assert!(o.status.success(), "Perfetto's protos refused the export: {}", String::from_utf8_lossy(&o.stderr));
    let sum: Json = serde_json::from_slice(&o.stdout).unwrap();
    let tracks = sum["tracks"].as_object().unwrap();
    let events = bt2_events(dir);
    let instants: u64 = tracks.values().map(|t| t["instants"].as_u64().unwrap()).sum();
    assert_eq!((instants, s.instants), (events.len() as u64, events.len()), "one instant per event");
    let mut per: HashMap<String, u64> = HashMap::new();
    for e in &events {
        if let Some(t) = thread_of(e) {
            *per.entry(t).or_default() += 1;
        }
    }
    assert!(!per.is_empty());
    for (track, n) in per {
        assert_eq!(tracks.get(&track).map(|t| t["instants"].as_u64().unwrap()), Some(n), "track {track}");
    }
}

#[test]
fn perfetto_of_lttng_ust_and_lttng_kernel_traces_has_every_event_on_its_thread() {
    if !python_has("/usr/bin/python3", "bt2") || !python_has("python3", "perfetto.protos.perfetto.trace.perfetto_trace_pb2") {
        return;
    }
    if let Some(dir) = field_trace("ros2") {
        perfetto_matches_babeltrace2(&dir, |e| Some(format!("{}/{}", e["sctx"]["vpid"], e["sctx"]["vtid"])));
    }
    // A kernel trace has no thread context: the tracks of threads whose process the state
    // dump gives are checked through what babeltrace2 says runs on each CPU.
    if let Some(dir) = field_trace("flipping-endianness") {
        let mut on_cpu: HashMap<i64, i64> = HashMap::new();
        let mut pid_of: HashMap<i64, i64> = HashMap::new();
        for e in bt2_events(&dir).iter().filter(|e| e["name"] == "lttng_statedump_process_state") {
            pid_of.insert(e["payload"]["tid"].as_i64().unwrap(), e["payload"]["pid"].as_i64().unwrap());
        }
        perfetto_matches_babeltrace2(&dir, |e| {
            let cpu = e["cpu"].as_i64().unwrap();
            let tid = if e["name"] == "sched_switch" {
                let prev = e["payload"]["prev_tid"].as_i64().unwrap();
                on_cpu.insert(cpu, e["payload"]["next_tid"].as_i64().unwrap());
                prev
            } else {
                *on_cpu.get(&cpu)?
            };
            Some(format!("{}/{tid}", pid_of.get(&tid)?))
        });
    }
}

/// lttng-analyses' interpreter, or why it cannot run.
fn lttng_analyses() -> Option<PathBuf> {
    let py = std::env::var_os("UST_LTTNG_ANALYSES_PYTHON").map(PathBuf::from).unwrap_or_else(|| workspace().join("target/lttng-analyses/bin/python"));
    if !py.exists() {
        eprintln!("SKIP: no lttng-analyses interpreter at {} (scripts/test.sh installs it)", py.display());
        return None;
    }
    Some(py)
}

/// One lttng-analyses command on `trace` (which it wants in a directory named `kernel`).
fn analyses(py: &Path, command: &str, trace: &Path, args: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let k = tmp.path().join("kernel");
    std::os::unix::fs::symlink(trace, &k).unwrap();
    let o = Command::new(py).arg(workspace().join("scripts/lttng-analyses.py")).arg(command).arg("--no-progress").args(args).arg(&k).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success() && !out.contains("Error"), "{command}: {out}\n{}", String::from_utf8_lossy(&o.stderr));
    out
}

#[test]
fn report_of_one_process_of_an_lttng_kernel_trace_equals_lttng_analyses() {
    let Some(dir) = field_trace("many-threads") else { return };
    let opt = ust_analysis::report::Options { procname: Some("multithread".into()), wakeups: true, min_block_ns: 0, ..Default::default() };
    let r = ust_analysis::report::report(&dir, &opt).unwrap();
    assert_eq!(r.traced_pid, 2673, "{:?}", r.notes);
    assert!(r.tasks.len() > 8000, "the main thread and the 8000 it forked");
    let Some(py) = lttng_analyses() else { return };
    // lttng-schedlog: each wake-up of the main thread, its latency to running and its
    // waker: the same as the report's blocked intervals (the waker of a wake-up from an
    // interrupt is the task it interrupted there, not a task in the report).
    let log = analyses(&py, "lttng-schedlog", &dir, &["--tid", "2673"]);
    let theirs: Vec<(String, i32)> = log
        .lines()
        .filter(|l| l.starts_with('['))
        .map(|l| {
            let after = &l[l.find(']').unwrap() + 1..];
            let lat = after.split_whitespace().next().unwrap().to_string();
            let waker = l.rsplit('(').next().unwrap().trim_end().trim_end_matches(')').parse().unwrap();
            (lat, waker)
        })
        .collect();
    let ours: Vec<(String, i32)> = r
        .wakeups
        .as_ref()
        .unwrap()
        .iter()
        .filter(|w| w.tid == 2673)
        .filter_map(|w| {
            let lat = format!("{:.3}", w.wakeup_latency_ns? as f64 / 1000.0);
            Some((lat, if let ust_analysis::report::analysis::Waker::Task { tid, .. } = w.woken_by { tid } else { -1 }))
        })
        .collect();
    assert_eq!(ours.len(), theirs.len(), "wake-ups of 2673");
    assert!(ours.len() > 1000);
    for (o, t) in ours.iter().zip(&theirs) {
        assert_eq!(o.0, t.0, "latency");
        if o.1 != -1 {
            assert_eq!(o.1, t.1, "waker");
        }
    }
    // lttng-syscallstats: per thread, "- name  count ..." lines under "comm (pid, TID: tid)".
    let text = analyses(&py, "lttng-syscallstats", &dir, &[]);
    let tree: std::collections::HashSet<i32> = r.tasks.iter().map(|t| t.tid).collect();
    let (mut per_call, mut per_thread): (BTreeMap<String, u64>, BTreeMap<i32, u64>) = Default::default();
    let mut current = None;
    for l in text.lines() {
        if let Some(i) = l.find(", TID: ") {
            current = l[i + 7..].trim_end().split(')').next().and_then(|t| t.parse::<i32>().ok()).filter(|t| tree.contains(t));
        } else if let (Some(tid), Some(rest)) = (current, l.strip_prefix(" - ")) {
            let mut w = rest.split_whitespace();
            let (name, n) = (w.next().unwrap().to_string(), w.next().unwrap().parse::<u64>().unwrap());
            *per_call.entry(name).or_default() += n;
            *per_thread.entry(tid).or_default() += n;
        }
    }
    let ours: BTreeMap<String, u64> = r.syscalls.iter().map(|c| (c.name.clone(), c.count)).collect();
    assert_eq!(ours, per_call, "calls per system call");
    let ours: BTreeMap<i32, u64> = r.syscall_threads.iter().map(|t| (t.tid, t.calls)).collect();
    assert_eq!(ours, per_thread, "calls per thread");
    // lttng-cputop: the main thread's share of the trace's time, two decimals.
    let text = analyses(&py, "lttng-cputop", &dir, &[]);
    let line = text.lines().find(|l| l.contains("(2673)")).expect("2673 in cputop");
    let pct: f64 = line.split('%').next().unwrap().split_whitespace().last().unwrap().parse().unwrap();
    let main = r.tasks.iter().find(|t| t.tid == 2673).unwrap();
    let ours = main.runtime_ns as f64 * 100.0 / r.span_ns as f64;
    assert!((ours - pct).abs() <= 0.005 + 1e-9, "CPU share: ours {ours:.4} %, lttng-cputop {pct} %");
}

#[test]
fn report_reads_the_pre_2_7_syscall_names() {
    let Some(dir) = field_trace("bug446190") else { return };
    let l = ust_analysis::report::load::load(&dir).unwrap();
    let exits = l.events.iter().filter(|e| e.name == "syscall_exit").count();
    // babeltrace2: 1,811 exit_syscall (README); each named after its thread's entry.
    assert_eq!(exits, 1811);
    let named = l.events.iter().filter(|e| e.name == "syscall_exit" && e.text("name").is_some_and(|n| n != "unknown")).count();
    assert!(named * 10 > exits * 9, "{named} of {exits} exits named by their entry");
    let (pid, _) = ust_analysis::report::select::by_name(&l, "lttng-consumerd").unwrap();
    let r = ust_analysis::report::report(&dir, &ust_analysis::report::Options { pid: Some(pid), ..Default::default() }).unwrap();
    assert!(r.syscalls.iter().any(|c| c.name == "ioctl" && c.count > 0), "{:?}", r.syscalls);
}

/// The report of `dir` through the counted path and loaded whole: `None` when the counts
/// refused (the report then reads whole, so it is the second either way).
fn counted_and_whole(dir: &Path) -> (Option<ust_analysis::report::Report>, ust_analysis::report::Report) {
    use ust_analysis::report::{analysis, load, user_view};
    let set = ust_analysis::traces::TraceSet::open(dir).unwrap();
    let opt = analysis::Options { wakeups: true, ..analysis::Options::default() };
    let counted = analysis::analyze_user(&user_view::load_counted(&set), &opt);
    (counted, analysis::analyze(&load::load_set(&set), dir, &opt))
}

#[test]
fn a_user_space_report_from_counts_equals_the_report_of_every_event() {
    for name in ["ros2", "debuginfo-test-app4", "ctf-sequence-empty", "hello-lost", "ctf2/CTF2-7.0-trace-with-index", "ctf2/CTF2-7.0-lttng-crash"] {
        let Some(dir) = field_trace(name) else { continue };
        let (counted, whole) = counted_and_whole(&dir);
        assert_eq!(counted.as_ref(), Some(&whole), "{name}");
        assert!(!whole.user.events.is_empty(), "{name}: no user-space event counted");
        // What the command prints is the same report.
        assert_eq!(
            ust_analysis::report::report(&dir, &ust_analysis::report::analysis::Options { wakeups: true, ..Default::default() }).unwrap(),
            whole,
            "{name}"
        );
    }
    // Two copies of a trace in a relay tree: the same processes and threads in two traces
    // at once, which counts cannot tell apart; the report reads the events whole.
    let Some(u) = field_trace("ros2") else { return };
    let tmp = tempfile::tempdir().unwrap();
    for host in ["a", "b"] {
        let d = tmp.path().join(host).join("s-20240101-120000").join("ust/uid/1000/64-bit");
        std::fs::create_dir_all(d.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&u, &d).unwrap();
    }
    // (Both copies name their host `chrisnux`, in their env: one host to the counts.)
    let (counted, whole) = counted_and_whole(tmp.path());
    assert_eq!(counted, None);
    assert_eq!(whole.user.events.iter().map(|e| e.count).sum::<u64>(), 2 * 99_338);
    assert_eq!(ust_analysis::report::report(tmp.path(), &ust_analysis::report::analysis::Options { wakeups: true, ..Default::default() }).unwrap(), whole);
    // Traces of two hosts (process ids are per host) are not counted at all.
    let Some(d) = field_trace("debuginfo-test-app4") else { return };
    let tmp = tempfile::tempdir().unwrap();
    for (host, trace) in [("chrisnux", &u), ("simark", &d)] {
        let at = tmp.path().join(host).join("s-20240101-120000").join("ust/uid/1000/64-bit");
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(trace, &at).unwrap();
    }
    let set = ust_analysis::traces::TraceSet::open(tmp.path()).unwrap();
    assert!(!ust_analysis::report::user_view::countable(&set));
    assert!(ust_analysis::report::user_view::countable(&ust_analysis::traces::TraceSet::open(&u).unwrap()));
}
