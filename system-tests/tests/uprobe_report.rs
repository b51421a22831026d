//! `ust report`'s probe view (`ust_analysis::report::probes`) on a real trace of dynamic
//! probes: `probetree` (no tracer) recurses in two threads and exits from inside
//! `stop_here`. The calls, returns and unfinished calls the report counts, and the
//! durations it pairs, equal those computed here from babeltrace2's reading of the same
//! trace (`--clock-cycles`: the raw CLOCK_MONOTONIC ns the report reads); each hit's
//! callers (root's side trace of user stacks, `kernel-stacks/`) are those the program's
//! call structure implies, and `--probe-flamegraph` draws them.
//!
//! Needs root, tracefs and uprobes (CI runs as root); otherwise skipped with the reason.

use system_tests as common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use common::{program_here, KillOnDrop, TestDaemon};

/// Per function, the durations of its calls paired here from babeltrace2's text (a stack
/// per thread, as a debugger would pair them), and the calls left open at the end.
#[derive(Debug, Default)]
struct Paired {
    calls: BTreeMap<String, u64>,
    durations: BTreeMap<String, Vec<u64>>,
    open: BTreeMap<String, u64>,
    threads: BTreeMap<String, std::collections::BTreeSet<u64>>,
}

fn pair(text: &str, functions: &[&str]) -> Paired {
    let mut p = Paired::default();
    let mut stacks: BTreeMap<u64, Vec<(String, u64)>> = BTreeMap::new();
    for l in text.lines() {
        let Some(e) = common::bt_events(l).pop() else { continue };
        let (name, ret) = match e.name.strip_suffix("_return") {
            Some(n) => (n.to_string(), true),
            None => (e.name.clone(), false),
        };
        if !functions.contains(&name.as_str()) {
            continue;
        }
        let ts: u64 = l[1..l.find(']').unwrap()].parse().unwrap();
        let tid: u64 = l.split("tid = ").nth(1).unwrap().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap();
        let stack = stacks.entry(tid).or_default();
        if ret {
            let (n, start) = stack.pop().expect("a return after its call");
            assert_eq!(n, name, "returns come in call order in {l}");
            p.durations.entry(name).or_default().push(ts - start);
        } else {
            *p.calls.entry(name.clone()).or_default() += 1;
            p.threads.entry(name.clone()).or_default().insert(tid);
            stack.push((name, ts));
        }
    }
    for (n, _) in stacks.values().flatten() {
        *p.open.entry(n.clone()).or_default() += 1;
    }
    p
}

#[test]
fn report_counts_calls_and_pairs_recursive_and_nested_returns_per_thread() {
    common::require_uprobes!();
    let _one = common::uprobe::one();
    let d = TestDaemon::without_daemon();
    let out = d.home.path().join("tree");
    let bin = program_here("probetree");
    let b = bin.to_str().unwrap();
    let fns = ["descend", "leaf", "stop_here"];
    let mut c = d.ust_cmd();
    c.args(["trace", "-o", out.to_str().unwrap()]);
    for f in fns {
        c.args(["--userspace-probe", &format!("elf:{b}:{f}"), "--userspace-probe", &format!("elf:{b}:{f}%return")]);
    }
    // Two threads, three rounds each, recursion four calls deep.
    c.args(["--", b, "2", "3", "3"]);
    let o = common::output_within(c, Duration::from_secs(90));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "18", "the program's result is unchanged by the probes");

    let bt = Command::new("babeltrace2").arg("--clock-cycles").arg(out.join("kernel")).output().unwrap();
    assert!(bt.status.success(), "{}", String::from_utf8_lossy(&bt.stderr));
    let p = pair(&String::from_utf8(bt.stdout).unwrap(), &fns);
    // What the program did.
    assert_eq!((p.calls["descend"], p.calls["leaf"], p.calls["stop_here"]), (24, 6, 1), "{p:?}");
    assert_eq!((p.durations["descend"].len(), p.durations["leaf"].len(), p.durations.get("stop_here")), (24, 6, None), "{p:?}");
    assert_eq!((p.open.get("descend"), p.open["stop_here"]), (None, 1), "{p:?}");
    assert_eq!(p.threads["descend"].len(), 2);

    let json = d.ust_ok(&["report", out.to_str().unwrap(), "--format", "json"]);
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rows = r["probes"].as_array().unwrap();
    assert_eq!(rows.iter().map(|x| x["name"].as_str().unwrap()).collect::<Vec<_>>(), fns, "{rows:#?}");
    for row in rows {
        let name = row["name"].as_str().unwrap();
        let n = |k: &str| row[k].as_u64().unwrap_or_else(|| panic!("{k} in {row}"));
        let mut d = p.durations.get(name).cloned().unwrap_or_default();
        d.sort_unstable();
        assert_eq!(row["return_event"].as_str(), Some(format!("{name}_return").as_str()));
        assert_eq!(
            (n("calls"), n("threads"), n("returned"), n("unfinished"), n("unwound"), n("returns_without_entry")),
            (p.calls[name], p.threads[name].len() as u64, d.len() as u64, p.open.get(name).copied().unwrap_or(0), 0, 0),
            "{row}"
        );
        if d.is_empty() {
            assert!(row.get("latency").is_none(), "{row}");
            continue;
        }
        let lat = &row["latency"];
        let l = |k: &str| lat[k].as_u64().unwrap();
        assert_eq!((l("max_ns"), l("total_ns")), (*d.last().unwrap(), d.iter().sum::<u64>()), "{row}");
        for k in ["p50_ns", "p90_ns", "p99_ns"] {
            assert!(d.contains(&l(k)), "{k} is one of the durations: {row}");
        }
    }
    // Nesting: the outermost descend of a round holds the whole recursion and its leaf.
    assert!(p.durations["descend"].iter().max() > p.durations["leaf"].iter().max());

    // The callers (root's side trace of user stacks): one sampled stack per hit, as many as
    // babeltrace2 reads there, symbolized.
    let side = common::babeltrace(&out.join("kernel-stacks"));
    for row in rows {
        let name = row["name"].as_str().unwrap();
        let sampled = side.lines().filter(|l| l.contains(" perf_probe_stack: ") && l.contains(&format!("probe = \"{name}\""))).count() as u64;
        let want = p.calls[name];
        assert_eq!((row["stacks"].as_u64().unwrap_or(0), sampled), (want, want), "{row}");
        let callers = row["callers"].as_array().map_or(&[][..], |c| c.as_slice());
        assert_eq!(callers.iter().map(|c| c["hits"].as_u64().unwrap()).sum::<u64>(), want, "{row}");
        for c in callers {
            let st: Vec<&str> = c["stack"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
            assert_eq!(st.last().copied(), Some(format!("probetree::{name}").as_str()), "the probed function on top: {c}");
        }
    }
    let chains = |name: &str| -> Vec<(Vec<String>, u64)> {
        let row = rows.iter().find(|r| r["name"] == name).unwrap();
        row["callers"]
            .as_array()
            .map_or(&[][..], |c| c.as_slice())
            .iter()
            .map(|c| (serde_json::from_value(c["stack"].clone()).unwrap(), c["hits"].as_u64().unwrap()))
            .collect()
    };
    let cut = ust_analysis::report::probe_stacks::TRAMPOLINE.to_string();
    let (dn, ln) = ("probetree::descend".to_string(), "probetree::leaf".to_string());
    // Inside a call of descend (whose %return is pending) the stack stops at the
    // uretprobe trampoline, after the innermost caller.
    assert_eq!(chains("leaf"), vec![(vec![cut.clone(), dn.clone(), ln], 6)]);
    let dc = chains("descend");
    assert_eq!(dc[0], (vec![cut, dn.clone(), dn], 18), "{dc:?}");
    assert_eq!(dc.iter().skip(1).map(|c| c.1).sum::<u64>(), 6, "{dc:?}");
    assert!(dc.iter().skip(1).all(|(st, _)| st.iter().any(|f| f.starts_with("probetree::main"))), "the outermost calls, from the threads' closures: {dc:?}");
    let sh = chains("stop_here");
    assert!(sh.len() == 1 && sh[0].1 == 1 && sh[0].0.iter().any(|f| f == "probetree::main"), "{sh:?}");
    let svg = d.home.path().join("callers.svg");
    let o = d.ust_cmd().args(["report", out.to_str().unwrap(), "--probe-flamegraph", svg.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let titles = common::svg_titles(&std::fs::read_to_string(&svg).unwrap());
    assert!(titles.iter().any(|t| t.starts_with("probe leaf ")) && titles.iter().any(|t| t.starts_with("probetree::leaf ")), "{titles:?}");

    let text = d.ust_ok(&["report", out.to_str().unwrap()]);
    let table: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("Probed functions")).take_while(|l| !l.is_empty()).collect();
    assert!(table.len() >= 5 && table[1].contains("CALLS") && table[1].contains("UNFINISHED") && table[1].contains("P99"), "{text}");
    let cols = |f: &str| table.iter().find(|l| l.split_whitespace().next() == Some(f)).map(|l| l.split_whitespace().take(5).collect::<Vec<_>>());
    assert_eq!(cols("descend"), Some(vec!["descend", "24", "2", "24", "0"]), "{text}");
    assert_eq!(cols("stop_here"), Some(vec!["stop_here", "1", "1", "0", "1"]), "{text}");
    assert!(text.contains("the thread exited inside them"), "{text}");
    assert!(text.contains("callers (6 hits with a user stack), innermost first:"), "{text}");
    let _ = d.ust_cmd().args(["daemon", "stop"]).output();
}

/// Root's probe stacks are sampled by CPU-wide events (per-task ones lost hits: see
/// `ust_kernel::perf::attr::tracepoint`): another process running the same file while the
/// trace runs is not in `kernel-stacks/`, and each of the tree's hits has its stack.
#[test]
fn probe_stacks_are_the_traced_trees_only() {
    common::require_uprobes!();
    let _one = common::uprobe::one();
    let d = TestDaemon::without_daemon();
    let out = d.home.path().join("tree");
    let bin = program_here("probetree");
    let b = bin.to_str().unwrap();
    // Outside the trace, the same program over and over, a line per run in `runs`.
    let runs = d.home.path().join("runs");
    let r = runs.to_str().unwrap();
    // Killed when the test ends, whatever happens (the loop ends with its shell).
    let _other = KillOnDrop(Command::new("sh").args(["-c", &format!(": > {r}; while :; do {b} 2 3 3 >/dev/null; echo >> {r}; done")]).spawn().unwrap());
    // The traced command waits until the other program has run twice more, so it runs
    // while the trace records (and the probes are placed).
    let wait_two = format!("n=$(wc -l < {r}); while [ $(wc -l < {r}) -lt $((n + 2)) ]; do sleep 0.01; done; {b} 1 2 1");
    let mut c = d.ust_cmd();
    c.args(["trace", "-o", out.to_str().unwrap(), "--userspace-probe", &format!("elf:{b}:leaf"), "--", "sh", "-c", &wait_two]);
    let o = common::output_within(c, Duration::from_secs(90));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // The tree's hits: one thread, two rounds, one leaf each.
    let kernel = common::babeltrace(&out.join("kernel"));
    assert_eq!(kernel.lines().filter(|l| l.contains(" leaf: ")).count(), 2, "{kernel}");
    let side = common::babeltrace(&out.join("kernel-stacks"));
    let stacks: Vec<&str> = side.lines().filter(|l| l.contains(" perf_probe_stack: ")).collect();
    assert_eq!(stacks.len(), 2, "one stack per hit of the tree, none of the other program's: {side}");
    // Both of the one process the tree exec'd probetree as.
    let execs: Vec<&str> = side.lines().filter(|l| l.contains(" perf_comm: ") && l.contains("comm = \"probetree\"") && l.contains("exec = 1")).collect();
    assert_eq!(execs.len(), 1, "{side}");
    let pid = |l: &str| l.split("{ pid = ").nth(1).and_then(|x| x.split(',').next()).map(str::to_string);
    assert!(stacks.iter().all(|s| pid(s).is_some() && pid(s) == pid(execs[0])), "{side}");
}
