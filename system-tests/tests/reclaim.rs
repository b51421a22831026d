//! Memory reclaim (LTTng 2.15's `lttng reclaim-memory`, `--auto-reclaim-memory`, memory in
//! `lttng list`), end to end: resident memory measured by the daemon with `mincore` (`ust
//! list SESSION --json`), every trace read back by babeltrace2 event by event. Memory, not
//! time, is asserted; waits are polls with generous bounds.
//!
//! Ports of lttng-tools 2.15's `tests/regression/tools/client/test_reclaim_memory.py` and
//! `tests/regression/tools/sparse-buffer/test_sparse_buffer.py` (the tests that apply: the
//! `reclaim-memory` command with `--all`, named channels, `--older-than`, `--no-wait`, an
//! unknown channel, `consumed` refused in a snapshot session, the reclaim policy through
//! save/load, the temporal backlog of a snapshot). One deviation: LTTng's buffers are
//! resident once preallocated, so its tests reclaim with no event emitted; ust backs its
//! buffers with `fallocate`, whose untouched pages `mincore` does not count, so these
//! ports emit events first.

use system_tests as common;

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const SUBBUF: u64 = 16384;

/// `holder N` under the daemon's socket directory, once it printed `ready`.
fn holder(d: &TestDaemon, n: u64) -> KillOnDrop {
    let mut c = KillOnDrop(
        Command::new(program_here("holder")).arg(n.to_string()).env("UST_RUNDIR", &d.rundir).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap(),
    );
    let mut lines = std::io::BufReader::new(c.0.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    c
}

/// Closes the holder's standard input (it emits its second N events) and waits for it.
fn finish(mut c: KillOnDrop) {
    let _ = c.0.stdin.take().map(|mut i| i.flush());
    assert!(c.0.wait().unwrap().success());
}

/// (resident, allocated) bytes of `channel` from `ust list SESSION --json`, and the
/// per-CPU entries (cpu, allocated, resident).
fn memory(d: &TestDaemon, session: &str, channel: &str) -> (u64, u64, Vec<(u64, u64, u64)>) {
    let j = d.ust_json(&["list", session, "--json"]);
    let c = j["channels"].as_array().unwrap().iter().find(|c| c["name"] == channel).unwrap_or_else(|| panic!("channel {channel}: {j}"));
    let m = &c["memory"];
    assert!(m.is_object(), "channel {channel} has buffers: {c}");
    let cpus = m["owners"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|o| o["cpus"].as_array().unwrap().iter())
        .map(|t| (t[0].as_u64().unwrap(), t[1].as_u64().unwrap(), t[2].as_u64().unwrap()))
        .collect();
    (m["resident"].as_u64().unwrap(), m["allocated"].as_u64().unwrap(), cpus)
}

/// `holder:ev` field `i` of every event of the trace under `dir`, in trace order.
fn ev_numbers(dir: &std::path::Path) -> Vec<u64> {
    bt_events(&babeltrace(dir)).iter().filter(|e| e.name == "holder:ev").map(|e| fields_map(&e.fields)["i"].parse().unwrap()).collect()
}

fn reclaimed_count(said: &str, channel: &str) -> u64 {
    let line = said.lines().find(|l| l.starts_with(&format!("Channel `{channel}`: "))).unwrap_or_else(|| panic!("{said}"));
    line.split(": ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap()
}

/// Reclaim frees the resident memory of the reclaimed sub-buffers (every CPU buffer keeps
/// at most the sub-buffer writers open next, plus its control pages) and the trace holds
/// every event, before and after, for each buffer kind.
fn reclaim_then_trace(create: &[&str], channel: &[&str], label: &str, shm: Option<&std::path::Path>) {
    let d = TestDaemon::start();
    let out = d.output(label);
    let mut args = vec!["create", "s", "--output", out.to_str().unwrap()];
    args.extend_from_slice(create);
    d.ust_ok(&args);
    let mut args = vec!["enable-channel", "ch", "--subbuf-size", "16k", "--num-subbuf", "8"];
    args.extend_from_slice(channel);
    d.ust_ok(&args);
    d.ust_ok(&["enable-event", "-c", "ch", "holder:*"]);
    d.ust_ok(&["start"]);
    let h = holder(&d, 2000);
    // Consumed first (the drain's own timer), so what is measured is the drain's pages.
    let (before, allocated, _) = memory(&d, "s", "ch");
    let said = d.ust_ok(&["reclaim-memory", "--userspace", "ch"]);
    let n = reclaimed_count(&said, "ch");
    assert!(n >= 2, "{label}: sub-buffers reclaimed: {said}");
    let (after, allocated_after, cpus) = memory(&d, "s", "ch");
    assert_eq!(allocated, allocated_after, "{label}: reclaim unmaps nothing");
    assert!(after < before, "{label}: resident {before} -> {after}");
    for (cpu, _, resident) in &cpus {
        assert!(*resident <= SUBBUF + 4096, "{label}: cpu {cpu} keeps at most one sub-buffer and its control page: {resident}");
    }
    eprintln!("{label}: resident {before} -> {after} of {allocated} allocated, {n} sub-buffers reclaimed");
    if let Some(dir) = shm.filter(|d| !on_tmpfs(d)) {
        // A disk file system: the punched blocks are reserved again (no hole a writer
        // could fail to fill), without their page cache.
        let files = buffer_files(dir);
        assert!(!files.is_empty(), "{label}: buffer files under {}", dir.display());
        for f in files {
            let m = std::fs::metadata(&f).unwrap();
            assert!(std::os::unix::fs::MetadataExt::blocks(&m) * 512 >= m.len(), "{label}: {} has holes", f.display());
        }
    }
    // The writers go through the reclaimed sub-buffers again (zero pages fault in).
    finish(h);
    d.ust_ok(&["stop"]);
    let detail = d.ust_json(&["list", "s", "--json"]);
    assert_eq!(detail["channels"][0]["discarded"], 0, "{label}: {detail}");
    d.ust_ok(&["destroy"]);
    let (_, warnings) = babeltrace_allowing_warnings(&out);
    assert_eq!(bt_discarded(&warnings), 0, "{label}: {warnings}");
    assert_eq!(ev_numbers(&out), (0..4000).collect::<Vec<_>>(), "{label}: no event lost, before or after the reclaim");
}

fn on_tmpfs(dir: &std::path::Path) -> bool {
    let o = Command::new("stat").args(["-f", "-c", "%T"]).arg(dir).output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim() == "tmpfs"
}

/// The ring-buffer files (the largest files) under `dir`.
fn buffer_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().filter_map(Result::ok) {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                todo.push(e.path());
            } else if m.len() >= 8 * SUBBUF {
                out.push(e.path());
            }
        }
    }
    out
}

#[test]
fn discard_per_pid() {
    reclaim_then_trace(&[], &[], "discard-pid", None);
}

#[test]
fn overwrite_per_pid_loses_nothing_the_consumer_had_not_read() {
    reclaim_then_trace(&[], &["--overwrite"], "overwrite-pid", None);
}

#[test]
fn discard_per_uid_with_shm_path() {
    let shm = tempfile::tempdir().unwrap();
    let p = shm.path().to_str().unwrap().to_string();
    reclaim_then_trace(&["--shm-path", &p, "--buffers-uid"], &[], "discard-uid-shm", Some(shm.path()));
}

#[test]
fn discard_per_channel_on_demand() {
    reclaim_then_trace(&[], &["--buffer-allocation=per-channel", "--buffer-preallocation=on-demand"], "discard-per-channel-on-demand", None);
}

#[test]
fn overwrite_per_uid() {
    reclaim_then_trace(&["--buffers-uid"], &["--overwrite"], "overwrite-uid", None);
}

/// A snapshot session's flight recorder forgets what it reclaimed (LTTng's rule for
/// overwrite mode, and `test_temporal_backlog`): a snapshot after the reclaim holds only
/// what was recorded after it.
#[test]
fn snapshot_after_reclaim_holds_only_what_came_after() {
    let d = TestDaemon::start();
    let out = d.output("snap");
    d.ust_ok(&["create", "fr", "--snapshot", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "ch", "--subbuf-size", "16k", "--num-subbuf", "8"]);
    d.ust_ok(&["enable-event", "-c", "ch", "holder:*"]);
    d.ust_ok(&["start"]);
    let h = holder(&d, 2000);
    let first = d.ust_ok(&["snapshot", "record"]);
    let dir = |said: &str| std::path::PathBuf::from(said.split("Snapshot written to ").nth(1).and_then(|r| r.split(" (").next()).unwrap());
    assert_eq!(ev_numbers(&dir(&first)), (0..2000).collect::<Vec<_>>());
    let (before, _, _) = memory(&d, "fr", "ch");
    let said = d.ust_ok(&["reclaim-memory", "-u", "--all"]);
    assert!(reclaimed_count(&said, "ch") >= 2 && said.contains("unread packet(s) dropped"), "{said}");
    let (after, _, _) = memory(&d, "fr", "ch");
    assert!(after < before, "resident {before} -> {after}");
    // A second process records after the reclaim (a snapshot session keeps the buffers of
    // live processes).
    let h2 = holder(&d, 500);
    let second = d.ust_ok(&["snapshot", "record"]);
    let evs: Vec<(i32, u64)> =
        bt_events(&babeltrace(&dir(&second))).iter().filter(|e| e.name == "holder:ev").map(|e| (e.pid, fields_map(&e.fields)["i"].parse().unwrap())).collect();
    let pid2 = h2.0.id() as i32;
    assert_eq!(evs, (0..500).map(|i| (pid2, i)).collect::<Vec<_>>(), "only what came after the reclaim");
    finish(h);
    finish(h2);
    d.ust_ok(&["destroy"]);
}

/// Polls `cond` every 50 ms for up to 30 s (a loaded machine); panics with `what`.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < end, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `--auto-reclaim-memory=older-than:AGE` and `=consumed`: the consumer reclaims on its own
/// (LTTng's `test_memory_reclamation_convergence` and `_consumed`), and the trace holds
/// every event. The `--auto-reclaim-memory-older-than` spelling of 2.15's release
/// candidates sets the same policy.
#[test]
fn auto_reclaim_older_than_and_consumed() {
    for policy in
        [&["--auto-reclaim-memory=older-than:200ms"] as &[&str], &["--auto-reclaim-memory-older-than", "200ms"], &["--auto-reclaim-memory", "consumed"]]
    {
        let d = TestDaemon::start();
        let out = d.output("auto");
        d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
        let mut args = vec!["enable-channel", "ch", "--subbuf-size", "16k", "--num-subbuf", "8"];
        args.extend_from_slice(policy);
        d.ust_ok(&args);
        d.ust_ok(&["enable-channel", "plain", "--subbuf-size", "16k", "--num-subbuf", "8"]);
        d.ust_ok(&["enable-event", "-c", "ch", "holder:*"]);
        d.ust_ok(&["enable-event", "-c", "plain", "holder:*"]);
        d.ust_ok(&["start"]);
        let text = d.ust_ok(&["list", "s"]);
        let want = if policy[0].contains("consumed") || policy.get(1) == Some(&"consumed") { "When consumed" } else { "When older than 200ms" };
        assert!(text.contains(&format!("Auto. memory reclaim policy: {want}")) && text.contains("Auto. memory reclaim policy: None"), "{text}");
        let h = holder(&d, 2000);
        // The same events in a channel without the policy: what the memory would be.
        wait_for("the plain channel's events consumed", || memory(&d, "s", "plain").0 >= 2 * SUBBUF);
        wait_for(&format!("{policy:?}: the channel's memory reclaimed on its own"), || {
            let (_, _, cpus) = memory(&d, "s", "ch");
            cpus.iter().all(|c| c.2 <= SUBBUF + 4096)
        });
        let (plain, _, _) = memory(&d, "s", "plain");
        let (auto, _, _) = memory(&d, "s", "ch");
        assert!(auto < plain, "{policy:?}: {auto} resident with the policy, {plain} without");
        finish(h);
        d.ust_ok(&["stop"]);
        d.ust_ok(&["destroy"]);
        let evs = ev_numbers(&out);
        let twice: Vec<u64> = (0..4000).flat_map(|i| [i, i]).collect();
        let mut sorted = evs.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, twice, "{policy:?}: every event in both channels");
    }
}

/// LTTng's `test_reclaim_memory_command_all` and `_specific_channels`: only the channels
/// named lose memory; `--all` reclaims every channel; the MI (here JSON) names each.
#[test]
fn named_channels_and_all() {
    let d = TestDaemon::start();
    let out = d.output("named");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    for c in ["c0", "c1", "c2", "c3"] {
        d.ust_ok(&["enable-channel", c, "--subbuf-size", "16k", "--num-subbuf", "8"]);
        d.ust_ok(&["enable-event", "-c", c, "holder:*"]);
    }
    d.ust_ok(&["start"]);
    let h = holder(&d, 2000);
    // Everything delivered consumed: a reclaim of nothing (1000 s) settles the drains.
    d.ust_ok(&["reclaim-memory", "-u", "--all", "--older-than", "1000s"]);
    let then: Vec<u64> = ["c0", "c1", "c2", "c3"].iter().map(|c| memory(&d, "s", c).0).collect();
    let said = d.ust_ok(&["reclaim-memory", "-u", "c2", "c3"]);
    assert!(said.contains("Channel `c2`: ") && said.contains("Channel `c3`: ") && said.contains("Total: ") && !said.contains("c0"), "{said}");
    let now: Vec<u64> = ["c0", "c1", "c2", "c3"].iter().map(|c| memory(&d, "s", c).0).collect();
    assert_eq!(then[..2], now[..2], "channels not named keep their memory");
    assert!(now[2] < then[2] && now[3] < then[3], "{then:?} -> {now:?}");
    let j = d.ust_json(&["reclaim-memory", "-u", "--all", "--json"]);
    let names: Vec<&str> = j["channels"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["c0", "c1", "c2", "c3"], "{j}");
    assert!(j["channels"].as_array().unwrap().iter().all(|c| c["reclaimed_subbuffers"].is_u64() && c["pending_subbuffers"].is_u64()), "{j}");
    let last: Vec<u64> = ["c0", "c1", "c2", "c3"].iter().map(|c| memory(&d, "s", c).0).collect();
    assert!(last[0] < now[0] && last[1] < now[1], "{now:?} -> {last:?}");
    finish(h);
    d.ust_ok(&["stop"]);
    d.ust_ok(&["destroy"]);
    let mut evs = ev_numbers(&out);
    evs.sort_unstable();
    assert_eq!(evs, (0..4000).flat_map(|i| [i, i, i, i]).collect::<Vec<_>>());
}

/// LTTng's `test_reclaim_memory_older_than` and `test_reclaim_memory_no_wait`.
#[test]
fn older_than_and_no_wait() {
    let d = TestDaemon::start();
    let out = d.output("older");
    d.session_with_events("s", &out, &["--subbuf-size", "16k", "--num-subbuf", "8"], "holder:*");
    let h = holder(&d, 2000);
    d.ust_ok(&["reclaim-memory", "-u", "--all", "--older-than", "1000s"]);
    let (then, _, _) = memory(&d, "s", "ch");
    let said = d.ust_ok(&["reclaim-memory", "-u", "--all", "--older-than", "1000000000"]);
    assert!(said.contains("Channel `ch`: 0 sub-buffers reclaimed"), "nothing is 1000 s old: {said}");
    assert_eq!(memory(&d, "s", "ch").0, then);
    // Idle longer than 100 ms (LTTng's test sleeps 2 s): everything is eligible.
    std::thread::sleep(Duration::from_millis(300));
    let said = d.ust_ok(&["reclaim-memory", "-u", "--all", "--older-than", "100ms"]);
    assert!(reclaimed_count(&said, "ch") >= 2, "{said}");
    let (now, _, _) = memory(&d, "s", "ch");
    assert!(now < then, "{then} -> {now}");
    finish(h);
    // --no-wait: returns at once; the memory goes down when what is pending is consumed.
    let h = holder(&d, 2000);
    let (then, _, _) = memory(&d, "s", "ch");
    let said = d.ust_ok(&["reclaim-memory", "-u", "--all", "--no-wait"]);
    assert!(said.starts_with("Channel `ch`: "), "{said}");
    wait_for("memory reclaimed after --no-wait", || memory(&d, "s", "ch").0 < then);
    finish(h);
    d.ust_ok(&["stop"]);
    d.ust_ok(&["destroy"]);
    let evs = ev_numbers(&out);
    assert_eq!(evs.len(), 8000, "two processes, 4000 events each");
}

/// Bad input gives clear errors: an unknown channel (LTTng's words), no session, an age
/// that is not one, no domain, no channel; `consumed` in a snapshot session (LTTng's
/// `test_auto_reclaim_memory_consumed_snapshot_mode`).
#[test]
fn bad_input() {
    let d = TestDaemon::start();
    let err = |args: &[&str]| {
        let o = d.ust(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    assert!(err(&["reclaim-memory", "-u", "--all"]).contains("no current session"));
    assert!(err(&["reclaim-memory", "-u", "-s", "nope", "--all"]).contains("no session named"));
    let out = d.output("bad");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "ch"]);
    assert!(err(&["reclaim-memory", "-u", "not-a-channel"]).contains("Channel `not-a-channel` does not exist in session `s`"));
    for garbage in ["garbage", "-1", "1.5s", "10x"] {
        let e = err(&["reclaim-memory", "-u", &format!("--older-than={garbage}"), "--all"]);
        assert!(e.contains("is not an age"), "{garbage}: {e}");
    }
    assert!(err(&["reclaim-memory", "--all"]).contains("one domain must be specified (--userspace)"));
    assert!(err(&["reclaim-memory", "-u"]).contains("--all"), "a channel or --all is required");
    assert!(err(&["reclaim-memory", "-u", "--all", "ch"]).contains("cannot be used with"));
    assert!(err(&["enable-channel", "c2", "--auto-reclaim-memory", "sometimes"]).contains("off, consumed, or older-than:AGE"));
    assert!(err(&["enable-channel", "c2", "--auto-reclaim-memory-older-than", "0"]).contains("reclaims nothing"));
    let snap = d.output("bad-snap");
    d.ust_ok(&["create", "fr", "--snapshot", "--output", snap.to_str().unwrap()]);
    let e = err(&["enable-channel", "-s", "fr", "channel_123", "--auto-reclaim-memory=consumed"]);
    assert!(e.contains("Failed to enable channel `channel_123` under session `fr`: Invalid reclamation policy for this channel"), "{e}");
    d.ust_ok(&["enable-channel", "-s", "fr", "channel_123", "--auto-reclaim-memory=older-than:1s"]);
}

/// LTTng's `test_load_save_reclaim_policy_{default,periodic,consumed}`: the policy survives
/// `ust save` / `ust load`, in 2.15's `<reclaim_policy>` element.
#[test]
fn save_load_round_trips_the_policy() {
    let d = TestDaemon::start();
    let out = d.output("saved-trace");
    let saved = d.output("saved");
    for (args, want, xml) in [
        (&[] as &[&str], serde_json::Value::Null, None),
        (
            &["--auto-reclaim-memory-older-than", "3141592653589793"],
            serde_json::json!({ "OlderThan": 3141592653589793u64 }),
            Some("<age_threshold>3141592653589793</age_threshold>"),
        ),
        (&["--auto-reclaim-memory=consumed"], serde_json::json!("Consumed"), Some("<consumed></consumed>")),
    ] {
        d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
        let mut a = vec!["enable-channel", "ch"];
        a.extend_from_slice(args);
        d.ust_ok(&a);
        d.ust_ok(&["save", "s", "-f", "-o", saved.to_str().unwrap()]);
        let text = std::fs::read_to_string(saved.join("s.lttng")).unwrap();
        match xml {
            Some(x) => assert!(text.contains("<reclaim_policy>") && text.contains(x), "{text}"),
            None => assert!(!text.contains("reclaim_policy"), "{text}"),
        }
        d.ust_ok(&["destroy", "s"]);
        d.ust_ok(&["load", "s", "-i", saved.to_str().unwrap()]);
        let j = d.ust_json(&["list", "s", "--json"]);
        assert_eq!(j["channels"][0]["config"]["auto_reclaim"], want, "{j}");
        d.ust_ok(&["destroy", "s"]);
    }
}

/// LTTng's `test_reclaim_memory.py`: `reclaim-memory -u CHANNEL` with and without
/// `--no-wait` on a per-UID channel, its machine-readable output naming the channel with a
/// numeric `reclaimed_subbuffers`.
#[test]
fn lttng_test_reclaim_memory_per_uid_mi() {
    for wait in [true, false] {
        let d = TestDaemon::start();
        let out = d.output("mi");
        d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
        d.ust_ok(&["enable-channel", "ch", "--buffers-uid"]);
        d.ust_ok(&["enable-event", "-c", "ch", "holder:*"]);
        d.ust_ok(&["start"]);
        let h = holder(&d, 10);
        let mut args = vec!["reclaim-memory", "-u", "ch", "--json"];
        if !wait {
            args.push("--no-wait");
        }
        let j = d.ust_json(&args);
        let c = &j["channels"][0];
        assert!(c["name"] == "ch" && c["reclaimed_subbuffers"].is_u64() && c["pending_subbuffers"].is_u64(), "wait={wait}: {j}");
        finish(h);
        d.ust_ok(&["stop"]);
        d.ust_ok(&["destroy"]);
        assert_eq!(ev_numbers(&out), (0..20).collect::<Vec<_>>(), "wait={wait}");
    }
}
