//! `ust report`'s span view on a real `#[instrument]`ed program (`spantimes`): the span
//! durations, busy and idle times and counts it reports equal those computed here from
//! babeltrace2's reading of the same trace (`--clock-cycles`: the raw CLOCK_MONOTONIC ns
//! the report reads), and respect what the program did (sleeps of 20 ms, two 30 ms timers
//! awaited per `fetch`: lower bounds only, the machine being loaded).

use system_tests as common;

use std::collections::BTreeMap;
use std::process::Command;

use common::{program_here, TestDaemon};

/// One span's life as babeltrace2 shows it: `_new`, `_close`, and its enter/exit times.
#[derive(Default, Debug)]
struct Life {
    name: String,
    new: u64,
    close: u64,
    enters: Vec<u64>,
    exits: Vec<u64>,
}

/// The spans of `spantimes:*` in babeltrace2's `--clock-cycles` text, by id (ids are not
/// reused in this program's life: every span is closed before the next is created, and
/// each `_new` starts a new life).
fn lives(text: &str) -> Vec<Life> {
    let mut done = Vec::new();
    let mut live: BTreeMap<u64, Life> = BTreeMap::new();
    for l in text.lines().filter(|l| l.contains(" spantimes:")) {
        let ts: u64 = l[1..l.find(']').unwrap()].parse().unwrap();
        let e = &common::bt_events(l)[0];
        let (span, suffix) = e.name.strip_prefix("spantimes:").unwrap().rsplit_once('_').unwrap();
        // The payload after the `{ cpu_id = N }` context; the span's id is its first field.
        let payload = &l[l.find("}, { ").unwrap() + 5..];
        let first = payload.split(',').next().unwrap().trim_end_matches(" }");
        let id: u64 = match first.split_once(" = ") {
            Some(("id" | "_span_id", v)) => v.parse().unwrap(),
            _ => panic!("no span id first in {l}"),
        };
        match suffix {
            "new" => {
                live.insert(id, Life { name: span.to_string(), new: ts, ..Default::default() });
            }
            "enter" => live.get_mut(&id).unwrap().enters.push(ts),
            "exit" => live.get_mut(&id).unwrap().exits.push(ts),
            "close" => {
                let mut s = live.remove(&id).unwrap();
                s.close = ts;
                done.push(s);
            }
            other => panic!("unexpected span event {other} in {l}"),
        }
    }
    assert!(live.is_empty(), "every span closed: {live:?}");
    done
}

#[test]
fn span_durations_busy_idle_and_tree_of_an_instrumented_program() {
    let d = TestDaemon::start();
    let out = d.output("spans");
    let o = d.ust_cmd().args(["trace", "-o", out.to_str().unwrap(), "--"]).arg(program_here("spantimes")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bt = Command::new("babeltrace2").arg("--clock-cycles").arg(&out).output().unwrap();
    assert!(bt.status.success() && bt.stderr.is_empty(), "{}", String::from_utf8_lossy(&bt.stderr));
    let lives = lives(&String::from_utf8(bt.stdout).unwrap());
    let count = |n: &str| lives.iter().filter(|s| s.name == n).count();
    assert_eq!((count("request"), count("step"), count("fetch")), (1, 3, 2), "{lives:?}");

    // A trace without kernel events is reported from counts, keeping only the span
    // events: the report of every event loaded, spans and all.
    {
        use ust_analysis::report::{analysis, load, user_view};
        let set = ust_analysis::traces::TraceSet::open(&out).unwrap();
        let opt = analysis::Options::default();
        let whole = analysis::analyze(&load::load_set(&set), &out, &opt);
        assert!(!whole.spans.spans.is_empty());
        assert_eq!(analysis::analyze_user(&user_view::load_counted(&set), &opt), Some(whole));
    }
    let json = d.ust_ok(&["report", out.to_str().unwrap(), "--format", "json"]);
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rows = r["spans"]["spans"].as_array().unwrap();
    assert_eq!(rows.iter().map(|x| x["name"].as_str().unwrap()).collect::<Vec<_>>(), ["spantimes:fetch", "spantimes:request", "spantimes:step"]);
    for row in rows {
        let name = row["name"].as_str().unwrap().strip_prefix("spantimes:").unwrap();
        let mine: Vec<&Life> = lives.iter().filter(|s| s.name == name).collect();
        let mut durations: Vec<u64> = mine.iter().map(|s| s.close - s.new).collect();
        durations.sort_unstable();
        let busy: u64 = mine.iter().flat_map(|s| s.enters.iter().zip(&s.exits).map(|(a, b)| b - a)).sum();
        let idle: u64 = mine.iter().map(|s| (s.close - s.new) - s.enters.iter().zip(&s.exits).map(|(a, b)| b - a).sum::<u64>()).sum();
        let entered: usize = mine.iter().map(|s| s.enters.len()).sum();
        let n = |k: &str| row[k].as_u64().unwrap();
        assert_eq!((n("calls"), n("incomplete"), n("entered")), (mine.len() as u64, 0, entered as u64), "{row}");
        assert_eq!((n("max_ns"), n("busy_ns"), n("idle_ns")), (*durations.last().unwrap(), busy, idle), "{row}");
        assert!(durations.contains(&n("p50_ns")), "{row}");
        // What the program did: lower bounds.
        const MS: u64 = 1_000_000;
        match name {
            "step" => assert!(durations[0] >= 20 * MS && n("busy_ns") >= 60 * MS, "{row}"),
            "request" => assert!(n("busy_ns") >= 60 * MS, "{row}"),
            _ => {
                assert!(durations[0] >= 60 * MS, "two 30 ms timers per fetch: {row}");
                assert!(mine.iter().all(|s| s.enters.len() >= 3), "entered on each of at least 3 polls: {mine:?}");
                // Idle while each timer ran: each poll's exit comes before the next enter.
                // No lower bound on the gap: the timer's thread starts inside the poll and
                // counts from there, so a poll preempted before its exit (a busy machine)
                // leaves less than 30 ms of the timer after it.
                for s in &mine {
                    assert!(s.exits.iter().zip(&s.enters[1..]).all(|(x, e)| e > x), "{s:?}");
                }
                assert!(n("idle_ns") > 0, "{row}");
            }
        }
    }
    let tree = &r["spans"]["tree"];
    assert_eq!(
        *tree,
        serde_json::json!([
            {"name": "spantimes:fetch", "calls": 2, "children": []},
            {"name": "spantimes:request", "calls": 1, "children": [{"name": "spantimes:step", "calls": 3, "children": []}]},
        ])
    );
    let text = d.ust_ok(&["report", out.to_str().unwrap()]);
    assert!(
        text.contains("Spans (tracing)") && text.contains("Span tree (calls):\n  spantimes:fetch  2\n  spantimes:request  1\n    spantimes:step  3\n"),
        "{text}"
    );
}
