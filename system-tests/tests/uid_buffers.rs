//! Per-UID buffers (`--buffers-uid`): one trace per user in `ust/uid/<UID>/64-bit/`,
//! shared by every process of that user, read back by babeltrace2 event by event.
//!
//! - a thousand short processes under `ust trace --buffers-uid`,
//!   with the daemon's descriptors and memory back to their baseline afterwards;
//! - one event name with two layouts, late (`tracing`) callsites, the ownership mismatch;
//! - writers SIGKILLed between reserve and commit while two steady writers go on;
//! - LTTng's per-UID snapshot cases (tests/regression/tools/snapshots/ust_test:
//!   `test_ust_per_uid_local_snapshot`, `..._post_mortem`);
//! - `--shm-path`: the daemon and every writer SIGKILLed, `ust crash-dump` rebuilds the
//!   per-UID trace from the shared buffer files.

use system_tests as common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// One babeltrace2 line of a per-UID trace: event name, `vpid` context, payload.
#[derive(Debug)]
struct Line {
    name: String,
    vpid: i32,
    fields: String,
}

fn lines(text: &str) -> Vec<Line> {
    text.lines()
        .map(|l| {
            let name = l.split_whitespace().nth(3).unwrap_or_default().trim_end_matches(':').to_string();
            let vpid = l.split("vpid = ").nth(1).and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()).and_then(|v| v.parse().ok()).unwrap_or(-1);
            let fields = l.rfind("}, { ").map(|i| l[i + 5..].trim_end_matches(" }").to_string()).unwrap_or_default();
            Line { name, vpid, fields }
        })
        .collect()
}

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// The one per-UID trace directory under `out`, checking nothing else is there.
fn uid_trace(out: &Path) -> PathBuf {
    let dir = out.join("ust").join("uid").join(uid().to_string()).join("64-bit");
    assert!(dir.join("metadata").is_file(), "no per-UID trace in {}", out.display());
    assert!(!out.join("ust").join("pid").exists(), "per-UID: no per-process trace");
    let users: Vec<_> = std::fs::read_dir(out.join("ust").join("uid")).unwrap().flatten().collect();
    assert_eq!(users.len(), 1, "one user");
    dir
}

/// Descriptors the daemon holds and its resident anonymous memory (kB, `RssAnon`), from
/// /proc: the memory state kept per process would take. (`VmRSS` also counts the pages of
/// the daemon's own binary and libraries that the first thousand-process run pages in —
/// code paths the warm-up did not take — which is not state and was seen 28–244 kB over
/// the slack on a loaded machine.)
fn daemon_usage(pid: i32) -> (usize, u64) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status.lines().find_map(|l| l.strip_prefix("RssAnon:")).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap();
    (fds, rss)
}

fn ust_trace_uid(d: &TestDaemon, out: &Path, script: &str) -> String {
    let mut cmd = d.ust_cmd();
    // A thousand processes registering at once on a loaded 2-core machine: some wait for
    // their channels longer than the default 3 s bound (after which a program runs
    // untraced rather than wait); this test is about completeness, not that bound.
    cmd.env("UST_REGISTER_TIMEOUT", "60000");
    cmd.args(["trace", "--buffers-uid", "--output", out.to_str().unwrap(), "--", "sh", "-c", script]);
    let o = output_within(cmd, Duration::from_secs(240));
    assert!(o.status.success(), "ust trace failed: {}\n{}\nlog:\n{}", o.status, String::from_utf8_lossy(&o.stderr), d.log());
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_thousand_short_processes_give_one_trace_told_apart_by_vpid() {
    let d = TestDaemon::start();
    let prog = program_here("threeevents");
    // Warm-up (threads, the first session's state, and the allocator's arenas at their
    // size for a thousand processes: a 5-process warm-up left the idle daemon 4 MiB above
    // its baseline once under load, its arenas not trimmed), then the baseline: a leak
    // shows as growth over the second thousand.
    let warm = d.output("warm");
    ust_trace_uid(&d, &warm, &format!("for i in $(seq 1000); do {} & done; wait", prog.display()));
    std::thread::sleep(Duration::from_millis(300));
    let (fds0, rss0) = daemon_usage(d.pid());

    let out = d.output("thousand");
    let said = ust_trace_uid(&d, &out, &format!("for i in $(seq 1000); do {} & done; wait", prog.display()));
    let dir = uid_trace(&out);
    let text = babeltrace(&dir);
    let all = lines(&text);
    let mut by_vpid: BTreeMap<i32, Vec<u32>> = BTreeMap::new();
    let mut dumps: BTreeSet<i32> = BTreeSet::new();
    for l in &all {
        match l.name.as_str() {
            "short:ev" => by_vpid.entry(l.vpid).or_default().push(fields_map(&l.fields)["i"].parse().unwrap()),
            "lttng_ust_statedump:start" => {
                dumps.insert(l.vpid);
            }
            _ => {}
        }
    }
    assert_eq!(by_vpid.values().map(Vec::len).sum::<usize>(), 3000, "all 3000 events; ust trace said:\n{said}\ndaemon log:\n{}", d.log());
    assert_eq!(by_vpid.len(), 1000, "1000 processes told apart by vpid");
    assert!(!by_vpid.contains_key(&-1), "every record has its vpid context");
    for (vpid, mut seq) in by_vpid.clone() {
        seq.sort();
        assert_eq!(seq, [0, 1, 2], "process {vpid}");
    }
    assert_eq!(dumps, by_vpid.keys().copied().collect(), "each process's state dump is in the shared trace");
    let files: Vec<String> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    let streams = files.iter().filter(|f| f.starts_with("channel0_")).count();
    assert_eq!(streams, ust_core::cpus::possible_cpu_count() as usize, "one set of per-CPU buffers for 1000 processes: {files:?}");

    // Nothing of the processes stays in the daemon: descriptors back to the baseline, and
    // memory too (with a little slack for the allocator; its idle trim returns the rest).
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut fds, mut rss) = daemon_usage(d.pid());
    while (fds > fds0 || rss > rss0 + 2048) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        (fds, rss) = daemon_usage(d.pid());
    }
    eprintln!("daemon: {fds0} fds / {rss0} kB anonymous RSS before, {fds} fds / {rss} kB after 1000 processes");
    assert!(fds <= fds0, "descriptors back to the baseline: {fds} > {fds0}");
    assert!(rss <= rss0 + 2048, "anonymous RSS back to the baseline: {rss} kB > {rss0} kB + 2 MiB");
    let apps = d.ust_json(&["list", "--apps", "--json"]);
    assert_eq!(apps.as_array().map_or(0, Vec::len), 0, "no process kept: {apps}");
}

/// 300 short processes at once beside two CPU hogs (`yes`), with the default registration
/// timeout: every process registers (past the 3 s bound while the CPUs are contended) and
/// all 900 events are in the trace, three per process, in order.
#[test]
fn a_burst_of_short_processes_beside_two_cpu_hogs_loses_no_process() {
    const N: usize = 300;
    let d = TestDaemon::start();
    let prog = program_here("threeevents");
    let _hogs: Vec<KillOnDrop> = (0..2).map(|_| KillOnDrop(Command::new("yes").stdout(Stdio::null()).stdin(Stdio::null()).spawn().expect("run yes"))).collect();
    let out = d.output("burst");
    let mut cmd = d.ust_cmd();
    cmd.env_remove("UST_REGISTER_TIMEOUT");
    cmd.args([
        "trace",
        "--buffers-uid",
        "--output",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &format!("for i in $(seq {N}); do {} & done; wait", prog.display()),
    ]);
    let o = output_within(cmd, Duration::from_secs(240));
    assert!(o.status.success(), "ust trace failed: {}\n{}\nlog:\n{}", o.status, String::from_utf8_lossy(&o.stderr), d.log());
    let text = babeltrace(&uid_trace(&out));
    let mut by_vpid: BTreeMap<i32, Vec<u32>> = BTreeMap::new();
    for l in lines(&text).iter().filter(|l| l.name == "short:ev") {
        by_vpid.entry(l.vpid).or_default().push(fields_map(&l.fields)["i"].parse().unwrap());
    }
    let events: usize = by_vpid.values().map(Vec::len).sum();
    assert_eq!((by_vpid.len(), events), (N, 3 * N), "every process and event; daemon log:\n{}", d.log());
    for (vpid, seq) in &by_vpid {
        assert_eq!(seq, &[0, 1, 2], "process {vpid}");
    }
}

#[test]
fn same_name_other_layout_and_late_callsites() {
    let d = TestDaemon::start();
    let out = d.output("layouts");
    d.ust_ok(&["create", "lay", "--output", out.to_str().unwrap(), "--buffers-uid"]);
    d.ust_ok(&["enable-channel", "-s", "lay", "ch"]);
    // A per-PID channel in a per-UID session is refused, as LTTng refuses the mismatch.
    let o = d.ust(&["enable-channel", "-s", "lay", "other", "--buffers-pid"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("Buffer ownership mismatch"), "{}", String::from_utf8_lossy(&o.stderr));
    d.ust_ok(&["add-context", "-s", "lay", "-t", "vpid", "-t", "procname"]);
    d.ust_ok(&["enable-event", "-s", "lay", "-c", "ch", "-a"]);
    d.ust_ok(&["start", "-s", "lay"]);
    let run = |name: &str| {
        let st = Command::new(program_here(name)).env("UST_RUNDIR", &d.rundir).status().unwrap();
        assert!(st.success(), "{name}");
    };
    run("threeevents");
    run("otherlayout");
    run("tracingprog");
    run("threeevents");
    d.stop_and_destroy("lay");
    let dir = uid_trace(&out);
    let all = lines(&babeltrace(&dir));
    let count = |n: &str| all.iter().filter(|l| l.name == n).count();
    // One name, two layouts: two event classes, each record decoded with its own.
    let ev: Vec<&Line> = all.iter().filter(|l| l.name == "short:ev").collect();
    assert_eq!(ev.len(), 8, "threeevents twice, otherlayout once");
    assert_eq!(ev.iter().filter(|l| l.fields.contains("tag = \"other\"")).count(), 2, "{ev:?}");
    assert_eq!(ev.iter().filter(|l| !l.fields.contains("tag")).count(), 6, "{ev:?}");
    assert_eq!(count("short:mine"), 2, "otherlayout's own event is recorded");
    // tracing callsites, registered at run time, with different fields under one name.
    assert_eq!(count("tracingprog:event"), 5, "tracing callsites registered at run time: {all:?}");
    let vpids: BTreeSet<i32> = all.iter().filter(|l| !l.name.starts_with("lttng_ust")).map(|l| l.vpid).collect();
    assert_eq!(vpids.len(), 4, "four processes");
    let metadata = std::fs::read_to_string(dir.join("metadata")).unwrap();
    assert!(metadata.contains("tracer_buffering_scheme = \"uid\";") && metadata.contains(&format!("tracer_buffering_id = {};", uid())));
    assert_eq!(metadata.matches("name = \"short:ev\";").count(), 2, "one event class per layout");
}

/// Reads a child's stdout until `word` (or EOF, which fails the test).
fn wait_for(child: &mut std::process::Child, word: &str) {
    let out = child.stdout.take().expect("piped stdout");
    let mut r = BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "child ended before saying {word}");
        if line.trim() == word {
            break;
        }
    }
    child.stdout = Some(r.into_inner());
}

#[test]
fn writers_killed_between_reserve_and_commit_never_stall_the_others() {
    let d = TestDaemon::start();
    let out = d.output("kills");
    d.ust_ok(&["create", "k", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "-s", "k", "ch", "--buffers-uid", "--subbuf-size", "16k", "--num-subbuf", "64"]);
    d.ust_ok(&["add-context", "-s", "k", "-t", "vpid"]);
    d.ust_ok(&["enable-event", "-s", "k", "-c", "ch", "-a"]);
    d.ust_ok(&["start", "-s", "k"]);
    const STEADY: u64 = 40_000;
    let steady: Vec<KillOnDrop> = (0..2)
        .map(|_| {
            // Registered before main runs, however loaded the machine (see ust_trace_uid).
            KillOnDrop(
                Command::new(program_here("paced"))
                    .arg(STEADY.to_string())
                    .env("UST_RUNDIR", &d.rundir)
                    .env("UST_REGISTER_TIMEOUT", "60000")
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    // 100 writers, each SIGKILLed at a random moment after its first event: it spends
    // nearly all its time between reserve and commit (deadwriter's slow field).
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..100 {
        let mut w = KillOnDrop(Command::new(program_here("deadwriter")).env("UST_RUNDIR", &d.rundir).stdout(Stdio::piped()).spawn().unwrap());
        wait_for(&mut w, "writing");
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_micros(rng % 5000));
        w.kill().unwrap();
        w.wait().unwrap();
    }
    let steady_pids: Vec<i32> = steady.iter().map(|c| c.id() as i32).collect();
    for mut s in steady {
        let st = s.wait().unwrap();
        assert!(st.success());
    }
    // The completions of the last kills happen STUCK_AFTER after them.
    std::thread::sleep(Duration::from_millis(800));
    let detail = d.stop_and_destroy("k");
    let dir = uid_trace(&out);
    let (text, stderr) = babeltrace_allowing_warnings(&dir);
    let all = lines(&text);
    // The channel never stalls and the steady writers' sequences are complete: the daemon
    // found every dead slot of every packet (however many kills one packet holds) and
    // removed them, keeping every committed record.
    let discarded = bt_discarded(&stderr);
    let log = d.log();
    let cut: Vec<&str> = log.lines().filter(|l| l.contains("content cut")).collect();
    for pid in steady_pids {
        let seq: Vec<u64> = all.iter().filter(|l| l.name == "pacedprov:ev" && l.vpid == pid).map(|l| fields_map(&l.fields)["seq"].parse().unwrap()).collect();
        if seq != (0..STEADY).collect::<Vec<_>>() {
            // Busy runs saw a 20-event burst 2^27 ns late (a compact timestamp misread):
            // the lines around the first break, with their times and streams, and the trace.
            let at = seq.iter().enumerate().position(|(i, &s)| s != i as u64).unwrap_or(seq.len());
            let text_lines: Vec<&str> = text.lines().collect();
            let key = format!("seq = {}", seq.get(at).copied().unwrap_or(0));
            let near = text_lines.iter().position(|l| l.contains(&format!("vpid = {pid}")) && l.contains(&key)).unwrap_or(0);
            let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("uid-kills-{}", std::process::id()));
            copy_dir(&out, &kept);
            panic!(
                "steady writer {pid}: {} events, the sequence breaks at index {at} ({:?}); {discarded} discarded; packets cut: {cut:#?}\n{}\ntrace kept at {}\n{log}",
                seq.len(),
                &seq[at.saturating_sub(3)..(at + 3).min(seq.len())],
                text_lines[near.saturating_sub(30)..(near + 30).min(text_lines.len())].join("\n"),
                kept.display()
            );
        }
    }
    eprintln!("steady writers: all {} events kept; {discarded} dead records counted as discarded", 2 * STEADY);
    assert!(cut.is_empty(), "no packet cut: {cut:#?}");
    let dead_vpids: BTreeSet<i32> = all.iter().filter(|l| l.name == "deadprov:slow").map(|l| l.vpid).collect();
    // Each was killed after its first event was committed (it said `writing`): kept.
    assert!(dead_vpids.len() >= 50, "the killed writers' committed events are kept: {} processes", dead_vpids.len());
    for l in all.iter().filter(|l| l.name == "deadprov:slow") {
        let f = fields_map(&l.fields);
        assert_eq!(f["seq"], f["v"], "no torn record: {l:?}");
    }
    // Each completion names the dead slots it removed (a packet holds several kills).
    let slots: u64 = log.lines().filter_map(|l| l.split(" dead slot(s) removed").next()?.rsplit(", ").next()?.parse::<u64>().ok()).sum();
    assert!(slots >= 50, "most kills landed between reserve and commit, and their slots were removed: {slots}\n{log}");
    assert!(discarded >= slots, "the dead writers' records are counted as lost: {discarded} < {slots}");
    assert!(detail.to_string().contains("discarded"), "{detail}");
}

fn snapshot_dirs(out: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(out).unwrap().flatten().map(|e| e.path()).filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("snapshot-")).collect();
    v.sort();
    v
}

/// LTTng's `test_ust_per_uid_local_snapshot`: a per-UID overwrite channel, an application
/// running, a snapshot: `snapshot-1/ust/uid/<uid>/64-bit/` with its events.
#[test]
fn per_uid_local_snapshot() {
    let d = TestDaemon::start();
    let out = d.output("snap");
    d.ust_ok(&["create", "s", "--snapshot", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "-s", "s", "ch", "--buffers-uid", "--overwrite"]);
    d.ust_ok(&["enable-event", "-s", "s", "-c", "ch", "-a"]);
    d.ust_ok(&["start", "-s", "s"]);
    let (mut app, mut r) = spawn_ready(Command::new(program_here("steady")).env("UST_RUNDIR", &d.rundir));
    use std::io::Write;
    writeln!(app.stdin.as_mut().unwrap(), "1000").unwrap();
    let mut cost = String::new();
    r.read_line(&mut cost).unwrap();
    d.ust_ok(&["snapshot", "record", "-s", "s"]);
    d.stop_and_destroy("s");
    let snaps = snapshot_dirs(&out);
    assert_eq!(snaps.len(), 1);
    let dir = uid_trace(&snaps[0]);
    let seq: Vec<u64> = lines(&babeltrace(&dir)).iter().filter(|l| l.name == "steadyprov:ev").map(|l| fields_map(&l.fields)["seq"].parse().unwrap()).collect();
    assert_eq!(seq, (0..1000).collect::<Vec<_>>(), "the application's events, in order");
}

/// LTTng's `test_ust_per_uid_local_snapshot_post_mortem`: the application is gone when the
/// snapshot is taken; its events are still in the per-UID buffers.
#[test]
fn per_uid_local_snapshot_post_mortem() {
    let d = TestDaemon::start();
    let out = d.output("pm");
    d.ust_ok(&["create", "s", "--snapshot", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "-s", "s", "ch", "--buffers-uid", "--overwrite"]);
    d.ust_ok(&["enable-event", "-s", "s", "-c", "ch", "-a"]);
    d.ust_ok(&["start", "-s", "s"]);
    for _ in 0..2 {
        assert!(Command::new(program_here("threeevents")).env("UST_RUNDIR", &d.rundir).status().unwrap().success());
    }
    d.ust_ok(&["snapshot", "record", "-s", "s"]);
    d.ust_ok(&["snapshot", "record", "-s", "s"]);
    d.stop_and_destroy("s");
    let snaps = snapshot_dirs(&out);
    assert_eq!(snaps.len(), 2, "two snapshots");
    for s in snaps {
        let dir = uid_trace(&s);
        let n = lines(&babeltrace(&dir)).iter().filter(|l| l.name == "short:ev").count();
        assert_eq!(n, 6, "both gone processes' events in {}", dir.display());
    }
    assert!(!out.join("post-mortem").exists(), "per-UID buffers outlive the process: no per-process dump");
}

/// SIGKILLs the daemon `d` started and waits until it is gone.
fn kill_daemon(d: &TestDaemon) {
    let pid = d.pid();
    // SAFETY: kill(2) on the daemon this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(format!("/proc/{pid}")).is_ok_and(|_| !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z "))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Per-UID buffers with `--shm-path` (LTTng's `<shm-path>/<session>-<stamp>/ust/uid/<uid>/
/// 64-bit/`, as lttng-tools' tests/regression/ust/crash does with per-UID buffers): three
/// processes of one user write into one per-UID channel at once, the daemon is SIGKILLed
/// before any of it is drained, then every process; `ust crash-dump` rebuilds the per-UID
/// trace from the shared buffer files, and babeltrace2 reads every event of every process
/// (each process's whole sequence, told apart by `vpid`), nothing discarded.
#[test]
fn crash_dump_rebuilds_a_per_uid_trace_written_by_several_processes() {
    use std::io::Write;
    const N: u64 = 5_000;
    let d = TestDaemon::start();
    let shm = d.output("shm");
    let out = d.output("live");
    d.ust_ok(&["create", "cd", "--buffers-uid", "--output", out.to_str().unwrap(), "--shm-path", shm.to_str().unwrap()]);
    // Room for every event of the three processes on one CPU: the whole buffer is kept.
    d.ust_ok(&["enable-channel", "-s", "cd", "ch", "--subbuf-size", "64k", "--num-subbuf", "16"]);
    d.ust_ok(&["add-context", "-s", "cd", "-t", "vpid"]);
    d.ust_ok(&["enable-event", "-s", "cd", "-c", "ch", "steadyprov:*"]);
    d.ust_ok(&["start", "-s", "cd"]);
    let mut apps: Vec<(KillOnDrop, BufReader<std::process::ChildStdout>)> =
        (0..3).map(|_| spawn_ready(Command::new(program_here("steady")).env("UST_RUNDIR", &d.rundir).env("UST_REGISTER_TIMEOUT", "60000"))).collect();
    let pids: BTreeSet<i32> = apps.iter().map(|(c, _)| c.id() as i32).collect();
    // One buffer set for the user, in LTTng's per-UID layout, its metadata and events
    // written by the registry (the three processes' one event).
    let sets = ust_cli::crash_dump::find_sets(&shm);
    assert_eq!(sets.len(), 1, "one per-UID buffer set: {sets:?}");
    let rel = sets[0].strip_prefix(&shm).unwrap().to_string_lossy().into_owned();
    assert!(rel.starts_with("cd-") && rel.ends_with(&format!("/ust/uid/{}/64-bit", uid())), "{rel}");
    let meta = std::fs::read_to_string(sets[0].join("metadata")).unwrap();
    assert!(meta.starts_with("/* CTF 1.8 */") && meta.contains("steadyprov:ev"), "{meta}");
    assert!(std::fs::read_to_string(sets[0].join("events.json")).unwrap().contains("steadyprov"));
    assert!(!shm.join(rel.split('/').next().unwrap()).join("ust").join("pid").exists(), "no per-process buffer set");
    kill_daemon(&d);
    // The three write at once into the shared buffers, then all die.
    for (c, _) in &mut apps {
        writeln!(c.stdin.as_mut().unwrap(), "{N}").unwrap();
    }
    for (c, r) in &mut apps {
        let mut cost = String::new();
        r.read_line(&mut cost).unwrap();
        assert!(cost.trim().parse::<f64>().is_ok(), "steady said {cost:?}");
        c.kill().unwrap();
        c.wait().unwrap();
    }
    let dump = d.output("dump");
    let o = d.ust(&["crash-dump", shm.to_str().unwrap(), dump.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    // The packets the writers were filling were never closed: rebuilt from the records
    // committed in them (walked with the vpid context's size, from the set's
    // contexts.json).
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    eprintln!("{said}");
    let rebuilt: u64 = said.split(" rebuilt from incomplete").next().and_then(|s| s.rsplit(", ").next()).and_then(|n| n.parse().ok()).expect(&said);
    assert!(rebuilt > 0, "{said}");
    let dir = uid_trace(&dump);
    let (text, stderr) = babeltrace_allowing_warnings(&dir);
    assert_eq!(bt_discarded(&stderr), 0, "{stderr}");
    let all = lines(&text);
    assert_eq!(all.len() as u64, 3 * N, "every event of the three processes, nothing else");
    let mut by_vpid: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
    for l in &all {
        assert_eq!(l.name, "steadyprov:ev", "{l:?}");
        by_vpid.entry(l.vpid).or_default().push(fields_map(&l.fields)["seq"].parse().unwrap());
    }
    assert_eq!(by_vpid.keys().copied().collect::<BTreeSet<_>>(), pids, "each process told apart by its vpid");
    for (vpid, mut seq) in by_vpid {
        seq.sort_unstable();
        assert_eq!(seq, (0..N).collect::<Vec<_>>(), "process {vpid}: its whole sequence, once each");
    }
}

/// lttng-tools' tests/regression/tools/crash `test_shm_path_per_uid` and
/// `test_lttng_crash_extraction_sigkill` (per-UID channel): one uid folder under the
/// session's shm directory once a program registered, still there after it exited; a
/// program that emitted its events and exited normally, then the daemon SIGKILLed:
/// `ust crash-dump` gives exactly its events. Destroy (on a second daemon's session)
/// removes the session's shm directory.
#[test]
fn per_uid_shm_path_after_the_programs_exited() {
    let d = TestDaemon::start();
    let shm = d.output("shm");
    let out = d.output("live");
    d.ust_ok(&["create", "x", "--output", out.to_str().unwrap(), "--shm-path", shm.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "-s", "x", "ch", "--buffers-uid"]);
    d.ust_ok(&["enable-event", "-s", "x", "-c", "ch", "short:*"]);
    d.ust_ok(&["start", "-s", "x"]);
    let session_dirs = || -> Vec<PathBuf> { std::fs::read_dir(&shm).unwrap().flatten().map(|e| e.path()).collect() };
    assert!(Command::new(program_here("threeevents")).env("UST_RUNDIR", &d.rundir).status().unwrap().success());
    let sessions = session_dirs();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let users: Vec<_> = std::fs::read_dir(sessions[0].join("ust/uid")).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(users, [std::ffi::OsString::from(uid().to_string())], "one uid folder, kept after the program exited");
    kill_daemon(&d);
    let dump = d.output("dump");
    let o = d.ust(&["crash-dump", shm.to_str().unwrap(), dump.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    let got: Vec<String> =
        lines(&babeltrace(&uid_trace(&dump))).into_iter().filter(|l| !l.name.starts_with("lttng_ust_")).map(|l| format!("{} {}", l.name, l.fields)).collect();
    assert_eq!(got, ["short:ev i = 0", "short:ev i = 1", "short:ev i = 2"], "exactly the program's events");
    // Full cleanup at destroy.
    let d2 = TestDaemon::start();
    let shm2 = d2.output("shm");
    let out2 = d2.output("o");
    d2.ust_ok(&["create", "y", "--output", out2.to_str().unwrap(), "--shm-path", shm2.to_str().unwrap(), "--buffers-uid"]);
    d2.ust_ok(&["enable-event", "-s", "y", "-a"]);
    d2.ust_ok(&["start", "-s", "y"]);
    assert!(Command::new(program_here("threeevents")).env("UST_RUNDIR", &d2.rundir).status().unwrap().success());
    assert_eq!(ust_cli::crash_dump::find_sets(&shm2).len(), 1);
    d2.stop_and_destroy("y");
    assert_eq!(std::fs::read_dir(&shm2).unwrap().count(), 0, "the session's shm directory is removed at destroy");
    // What the buffer files held is in the session's trace.
    let got: Vec<String> =
        lines(&babeltrace(&uid_trace(&out2))).into_iter().filter(|l| !l.name.starts_with("lttng_ust_")).map(|l| format!("{} {}", l.name, l.fields)).collect();
    assert_eq!(got, ["short:ev i = 0", "short:ev i = 1", "short:ev i = 2"], "the session's trace");
}
