//! The process-id tracker (`ust track/untrack --vpid`, LTTng 2.13's `lttng track/untrack
//! --userspace --vpid`), end to end: two or three `examples/testprogs` `steady` processes
//! in one session, the tracker changed before and during tracing, every trace read back by
//! babeltrace2 event by event (process id and `seq` of each event).
//!
//! `steady` emits `steadyprov:ev { seq }` in batches it is asked for on standard input and
//! answers each batch with a line once it is emitted, so every tracker change happens
//! between batches. The programs are built by `scripts/test.sh` (`cargo build --workspace
//! --bins`) before `cargo test`.

use system_tests as common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ChildStdin, ChildStdout, Command, Stdio};

use common::{babeltrace, bt_events, program, KillOnDrop, TestDaemon};

/// A running `steady` registered with the test daemon.
struct Steady {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pid: i32,
}

impl Steady {
    /// Starts `steady` and waits for its `ready` (it is registered by then: the runtime's
    /// constructor waits for the registration before `main`).
    fn spawn(d: &TestDaemon) -> Steady {
        let mut child =
            KillOnDrop(Command::new(program("debug", "steady")).env("UST_RUNDIR", &d.rundir).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap());
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "steady did not start:\n{}", d.log());
        let pid = child.id() as i32;
        Steady { child, stdin, stdout, pid }
    }

    /// Emits `n` events (seq counting on) and waits until they are emitted.
    fn batch(&mut self, n: u64) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{n}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(line.trim().parse::<f64>().is_ok(), "steady said {line:?}");
    }

    /// Closes its standard input and waits for a clean exit.
    fn finish(mut self) {
        drop(self.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }
}

/// The `seq` values of the `steadyprov:ev` events of the trace in `out`, per process id,
/// in trace order (state dump events left out).
fn seqs_by_pid(out: &Path) -> BTreeMap<i32, Vec<u64>> {
    let mut m: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
    if !out.join("ust").exists() {
        return m; // nothing was traced at all: no trace to read
    }
    for e in bt_events(&babeltrace(out)) {
        assert_eq!(e.name, "steadyprov:ev", "{e:?}");
        let seq = e.fields.strip_prefix("seq = ").and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{e:?}"));
        m.entry(e.pid).or_default().push(seq);
    }
    m
}

fn create(d: &TestDaemon, name: &str) -> std::path::PathBuf {
    let out = d.output(name);
    d.ust_ok(&["create", name, "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-s", name, "steadyprov:*"]);
    out
}

fn tracker_json(d: &TestDaemon, name: &str) -> serde_json::Value {
    d.ust_json(&["list", name, "--json"])["vpid_tracker"].clone()
}

/// `track --vpid A` before `start`: only A's events are recorded; B, registered before,
/// and C, registered after `start`, are not traced at all (no buffers, no trace
/// directory). `ust list` shows the tracker, in text and JSON.
#[test]
fn tracking_one_process_records_only_its_events() {
    let d = TestDaemon::start();
    let mut a = Steady::spawn(&d);
    let mut b = Steady::spawn(&d);
    let out = create(&d, "one");
    assert!(d.ust_ok(&["list", "one"]).contains("Tracked process IDs: all"));
    assert_eq!(tracker_json(&d, "one"), serde_json::json!("all"));
    let said = d.ust_ok(&["track", "-u", "--vpid", &a.pid.to_string()]);
    assert!(said.contains(&format!("Process ID {} tracked in session one", a.pid)), "{said}");
    assert!(said.contains(&format!("Tracked process IDs: {}", a.pid)), "{said}");
    assert!(d.ust_ok(&["list", "one"]).contains(&format!("Tracked process IDs: {}\n", a.pid)));
    assert_eq!(tracker_json(&d, "one"), serde_json::json!({ "only": [a.pid] }));
    d.ust_ok(&["start", "one"]);
    let mut c = Steady::spawn(&d);
    a.batch(100);
    b.batch(100);
    c.batch(100);
    d.ust_ok(&["stop", "one"]);
    let detail = d.ust_json(&["list", "one", "--json"]);
    let traced: Vec<i64> = detail["processes"].as_array().unwrap().iter().map(|p| p["pid"].as_i64().unwrap()).collect();
    assert_eq!(traced, [i64::from(a.pid)], "only the tracked process has a trace");
    d.ust_ok(&["destroy", "one"]);
    let seqs = seqs_by_pid(&out);
    assert_eq!(seqs.keys().copied().collect::<Vec<_>>(), [a.pid], "{seqs:?}");
    assert_eq!(seqs[&a.pid], (0..100).collect::<Vec<u64>>());
    for s in [a, b, c] {
        s.finish();
    }
}

/// `untrack --vpid B` while the session records: B's later events are not recorded, A's
/// all are; `track --vpid B` again brings B's events back (same buffers, same trace).
#[test]
fn untracking_during_tracing_stops_a_process_events() {
    let d = TestDaemon::start();
    let mut a = Steady::spawn(&d);
    let mut b = Steady::spawn(&d);
    let out = create(&d, "during");
    d.ust_ok(&["track", "-s", "during", "--vpid", &format!("{},{}", a.pid, b.pid)]);
    d.ust_ok(&["start", "during"]);
    a.batch(50);
    b.batch(50);
    let said = d.ust_ok(&["untrack", "-s", "during", "--vpid", &b.pid.to_string()]);
    assert!(said.contains(&format!("Process ID {} untracked in session during", b.pid)), "{said}");
    assert!(d.ust_ok(&["list", "during"]).contains(&format!("Tracked process IDs: {}\n", a.pid)));
    a.batch(50);
    b.batch(50);
    // Untracking a process that is not in the list: a warning, as LTTng's, and success.
    let o = d.ust(&["untrack", "-s", "during", "--vpid", &b.pid.to_string()]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("process ID {} is not tracked", b.pid)), "{o:?}");
    d.ust_ok(&["track", "-s", "during", "--vpid", &b.pid.to_string()]);
    let o = d.ust(&["track", "-s", "during", "--vpid", &b.pid.to_string()]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("process ID {} is already tracked", b.pid)), "{o:?}");
    a.batch(50);
    b.batch(50);
    d.stop_and_destroy("during");
    let seqs = seqs_by_pid(&out);
    assert_eq!(seqs[&a.pid], (0..150).collect::<Vec<u64>>(), "every event of the tracked process");
    assert_eq!(seqs[&b.pid], (0..50).chain(100..150).collect::<Vec<u64>>(), "none while untracked");
    a.finish();
    b.finish();
}

/// `untrack --vpid --all` records nothing, from running processes or from one that
/// registers afterwards; `track --vpid --all` records every process again, including the
/// one that registered while nothing was tracked.
#[test]
fn all_both_ways() {
    let d = TestDaemon::start();
    let mut a = Steady::spawn(&d);
    let out = create(&d, "all");
    d.ust_ok(&["start", "all"]);
    a.batch(10);
    // No list to remove a single process from while every process is tracked.
    let o = d.ust(&["untrack", "-s", "all", "--vpid", &a.pid.to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("every process is tracked"), "{o:?}");
    let said = d.ust_ok(&["untrack", "-s", "all", "--vpid", "--all"]);
    assert!(said.contains("No process ID is tracked in session all"), "{said}");
    assert!(d.ust_ok(&["list", "all"]).contains("Tracked process IDs: none\n"));
    assert_eq!(tracker_json(&d, "all"), serde_json::json!({ "only": [] }));
    let mut b = Steady::spawn(&d);
    a.batch(10);
    b.batch(10);
    let said = d.ust_ok(&["track", "-s", "all", "--all", "--vpid"]);
    assert!(said.contains("All process IDs are tracked in session all"), "{said}");
    assert!(d.ust_ok(&["list", "all"]).contains("Tracked process IDs: all\n"));
    a.batch(10);
    b.batch(10);
    d.stop_and_destroy("all");
    let seqs = seqs_by_pid(&out);
    assert_eq!(seqs[&a.pid], (0..10).chain(20..30).collect::<Vec<u64>>());
    assert_eq!(seqs[&b.pid], (10..20).collect::<Vec<u64>>(), "registered while none was tracked, traced once all are");
    a.finish();
    b.finish();
}

/// Bad input: clear messages, usage errors exit 2, daemon errors 1, and the daemon goes on.
#[test]
fn tracker_errors_are_clear() {
    let d = TestDaemon::start();
    let err = |args: &[&str], code: i32, what: &str| {
        let o = d.ust(args);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {e}");
        assert!(e.contains(what), "{args:?}: {e}");
    };
    err(&["track", "--vpid", "1"], 1, "no current session");
    create(&d, "e");
    err(&["track", "-s", "nope", "--vpid", "1"], 1, "no session named \"nope\"");
    err(&["untrack", "-s", "nope", "--vpid", "--all"], 1, "no session named \"nope\"");
    err(&["track", "--vpid", "abc"], 2, "\"abc\" is not a process ID");
    err(&["track", "--vpid", "0"], 2, "\"0\" is not a process ID");
    err(&["track", "--vpid", "99999999999"], 2, "is not a process ID");
    err(&["track", "--vpid"], 2, "--vpid needs process IDs");
    err(&["track", "--vpid", "5", "--all"], 2, "not both");
    err(&["untrack", "--all"], 2, "--vpid");
    // The daemon checks too (another client may send anything).
    let mut c = d.client();
    for (pids, all) in [(vec![-1], false), (vec![], false), (vec![3], true)] {
        let r = c.call(ust_ctl::protocol::Command::TrackVpid { session: None, pids, all });
        assert!(r.is_err(), "{r:?}");
    }
    assert!(d.ust_ok(&["list", "e"]).contains("Tracked process IDs: all"), "unchanged by the errors");
    let help = d.ust_ok(&["track", "--help"]);
    assert!(help.contains("Examples:\n  ust track --vpid"), "{help}");
    assert!(d.ust_ok(&["untrack", "--help"]).contains("ust untrack --vpid --all"));
}
