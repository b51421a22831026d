//! LTTng 2.15's `channel-buffer-usage-ge/le` conditions and the `snapshot-session` action's
//! options (`--path`, `--url`, `--name`, `--max-size`) and rate policies, end to end.
//!
//! Ported from lttng-tools' `tests/regression/tools/notification/`
//! (`test_notification_ust_buffer_usage.py`, `tests.py: test_multi_app`): LTTng pauses its
//! consumer daemon, lets an application fill the channel, waits for the high-usage
//! notification, resumes the consumer, stops the session and waits for the low-usage one,
//! several cycles. ust's daemon is its consumer, so the "paused consumer" is a channel
//! whose read timer does not come due during the test (`--read-timer` of 10 minutes), and
//! `ust stop` (which flushes and drains every buffer) empties it. Every trace is read back
//! by babeltrace2, event by event.

use system_tests as common;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

fn triggers(d: &TestDaemon) -> Vec<serde_json::Value> {
    d.ust_json(&["list-triggers", "--json"]).as_array().cloned().unwrap_or_default()
}

fn fired(d: &TestDaemon, name: &str) -> u64 {
    let list = triggers(d);
    list.iter().find(|t| t["spec"]["name"] == name).unwrap_or_else(|| panic!("no trigger {name} in {list:?}"))["fired"].as_u64().unwrap()
}

/// Waits until trigger `name` has fired `n` times; returns it.
fn wait_fired(d: &TestDaemon, name: &str, n: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let list = triggers(d);
        let t = list.iter().find(|t| t["spec"]["name"] == name).unwrap_or_else(|| panic!("no trigger {name}")).clone();
        if t["fired"].as_u64() >= Some(n) {
            return t;
        }
        assert!(Instant::now() < deadline, "{name} never fired {n} time(s): {list:?}\nlog:\n{}", d.log());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends a batch size to `steady` and waits until it has written the batch.
fn batch(stdin: &mut impl std::io::Write, stdout: &mut impl BufRead, n: u64) {
    writeln!(stdin, "{n}").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.trim().parse::<f64>().is_ok(), "steady said {line:?}");
}

/// The `seq` fields of the `steadyprov:ev` events of the trace in `dir`, read back by
/// babeltrace2 (discarded-event warnings allowed: discard mode drops what does not fit).
fn seqs(dir: &Path) -> Vec<u64> {
    let (text, _) = babeltrace_allowing_warnings(dir);
    bt_events(&text).iter().filter(|e| e.name == "steadyprov:ev").map(|e| fields_map(&e.fields)["seq"].parse().unwrap()).collect()
}

/// The directories directly under `dir` whose names start with `prefix`.
fn dirs_starting(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(prefix))).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Bytes of the stream files (all but `metadata`) under `dir`.
fn stream_bytes(dir: &Path) -> u64 {
    let mut sum = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sum += stream_bytes(&p);
        } else if p.file_name().is_some_and(|n| n != "metadata") {
            sum += p.metadata().unwrap().len();
        }
    }
    sum
}

/// High and low buffer usage, three cycles: the channel fills while its consumer does not
/// read (`ge` fires once per filling, not at every sample while full), `ust stop` drains
/// it (`le` fires once per emptying; also once at the channel's first sample, empty, as in
/// LTTng), and `ust start` begins the next cycle.
#[test]
fn buffer_usage_fires_on_each_crossing() {
    let d = TestDaemon::start();
    let out = d.output("bu");
    // 4 sub-buffers of 4 KiB per CPU; no read for 10 minutes: a stopped consumer.
    d.session_with_events("bu", &out, &["--subbuf-size", "4k", "--num-subbuf", "4", "--read-timer", "600000000"], "steadyprov:*");
    d.ust_ok(&[
        "add-trigger",
        "--name",
        "high",
        "--condition",
        "channel-buffer-usage-ge",
        "--session",
        "bu",
        "--channel",
        "ch",
        "--domain",
        "user",
        "--threshold-ratio",
        "0.5",
        "--action",
        "notify",
    ]);
    // At most one sub-buffer in use (a partly filled one may stay after the stop's drain).
    d.ust_ok(&["add-trigger", "--name", "low", "--condition=channel-buffer-usage-le", "-s", "bu", "-c", "ch", "-d", "user", "-t", "4k", "--action", "notify"]);
    // Another channel of the session never fills: its trigger never fires.
    d.ust_ok(&[
        "add-trigger",
        "--name",
        "other",
        "--condition",
        "channel-buffer-usage-ge",
        "-s",
        "bu",
        "-c",
        "nope",
        "-d",
        "user",
        "-r",
        "0.1",
        "--action",
        "notify",
    ]);
    let bad = d.ust(&["add-trigger", "--condition", "channel-buffer-usage-ge", "-s", "bu", "-c", "ch", "-d", "kernel", "-r", "0.1", "--action", "notify"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("user space"));
    let human = d.ust_ok(&["list-triggers"]);
    assert!(
        human.contains("condition: buffer usage high")
            && human.contains("condition: buffer usage low")
            && human.contains("event record channel name: ch")
            && human.contains("threshold (ratio): 0.50")
            && human.contains("threshold (bytes): 4096"),
        "{human}"
    );

    let (mut child, mut stdout) = spawn_ready(Command::new(program_here("steady")).env("UST_RUNDIR", &d.rundir));
    let mut stdin = child.0.stdin.take().unwrap();
    // The process's channel is sampled empty: `low` fires once, `high` not.
    wait_fired(&d, "low", 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!((fired(&d, "high"), fired(&d, "low")), (0, 1));
    let mut sent = 0u64;
    for cycle in 1..=3u64 {
        // 3000 events of about 20 bytes fill a 16 KiB ring (the rest is discarded).
        batch(&mut stdin, &mut stdout, 3000);
        sent += 3000;
        let t = wait_fired(&d, "high", cycle);
        assert_eq!(t["last_result"], "notified", "{t}");
        // Full for many samples: no second firing.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(fired(&d, "high"), cycle, "one firing per crossing");
        assert_eq!(fired(&d, "low"), cycle, "no low firing while full");
        d.ust_ok(&["stop", "-s", "bu"]);
        wait_fired(&d, "low", cycle + 1);
        d.ust_ok(&["start", "-s", "bu"]);
    }
    drop(stdin);
    let _ = child.0.wait();
    assert_eq!(fired(&d, "other"), 0);
    d.ust_ok(&["destroy", "-s", "bu"]);
    assert!(d.log().matches("trigger high fired: notified").count() == 3, "{}", d.log());

    // What fit of each cycle is in the trace, in order.
    let got = seqs(&out);
    assert_eq!(got.first(), Some(&0), "{got:?}");
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in order, each once");
    assert!(*got.last().unwrap() < sent);
    for c in 0..3u64 {
        assert!(got.contains(&(c * 3000)), "the first event of cycle {c} is in the trace");
    }
}

/// The `snapshot-session` action's own output: a `--path` with `--name` and `--max-size`,
/// fired by buffer usage of a flight recorder, and a `file://` `--url` behind a
/// `once-after:3` rate policy; each snapshot lands where its options say and is read back.
#[test]
fn snapshot_action_options_are_honoured() {
    let d = TestDaemon::start();
    let out = d.output("fr");
    let p1 = d.output("snaps-by-path");
    let p2 = d.output("snaps-by-url");
    d.ust_ok(&["create", "fr", "--snapshot", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "-s", "fr", "channel0", "--subbuf-size", "4k", "--num-subbuf", "16"]);
    d.ust_ok(&["enable-event", "-s", "fr", "-c", "channel0", "steadyprov:*"]);
    d.ust_ok(&["start", "-s", "fr"]);
    let cpus = ust_core::cpus::possible_cpu_count() as u64;
    // At most two 4 KiB packets per stream in all.
    let max = 2 * 4096 * cpus;
    d.ust_ok(&[
        "add-trigger",
        "--name",
        "full",
        "--condition",
        "channel-buffer-usage-ge",
        "-s",
        "fr",
        "-c",
        "channel0",
        "-d",
        "user",
        "-r",
        "0.5",
        "--action",
        "snapshot-session",
        "fr",
        "--path",
        p1.to_str().unwrap(),
        "--name",
        "full",
        "--max-size",
        &max.to_string(),
    ]);
    let url = format!("file://{}", p2.display());
    d.ust_ok(&[
        "add-trigger",
        "--name",
        "third",
        "--condition",
        "event-rule-matches",
        "--type",
        "user",
        "--name",
        "steadyprov:ev",
        "--action",
        "snapshot-session",
        "fr",
        "--url",
        &url,
        "--rate-policy",
        "once-after:3",
    ]);
    let human = d.ust_ok(&["list-triggers"]);
    assert!(human.contains(&format!("snapshot session `fr`, path: {}, name: full, max size: {max}", p1.display())), "{human}");
    assert!(human.contains(&format!("snapshot session `fr`, path: {}, rate policy: once after 3 occurrences", p2.display())), "{human}");

    let (mut child, mut stdout) = spawn_ready(Command::new(program_here("steady")).env("UST_RUNDIR", &d.rundir));
    let mut stdin = child.0.stdin.take().unwrap();
    // Three events, each a firing of `third` (one write each): only the third runs its
    // action.
    for n in 1..=3u64 {
        batch(&mut stdin, &mut stdout, 1);
        let t = wait_fired(&d, "third", n);
        if n < 3 {
            assert_eq!(t["last_result"], "no action ran (rate policy)", "{t}");
            assert!(dirs_starting(&p2, "snapshot-").is_empty());
        } else {
            assert!(t["last_result"].as_str().unwrap().starts_with(&format!("snapshot written to {}/snapshot-", p2.display())), "{t}");
        }
    }
    let by_url = dirs_starting(&p2, "snapshot-");
    assert_eq!(by_url.len(), 1, "{by_url:?}");
    assert_eq!(seqs(&by_url[0]), vec![0, 1, 2], "the flight recorder held every event so far");
    assert!(dirs_starting(&out, "snapshot-").is_empty(), "nothing in the session's own output");
    assert_eq!(fired(&d, "full"), 0);

    // Fill more than half of the ring: `full` fires once and writes at most `max` bytes.
    batch(&mut stdin, &mut stdout, 20000);
    let t = wait_fired(&d, "full", 1);
    let by_path = dirs_starting(&p1, "full-");
    assert_eq!(by_path.len(), 1, "{by_path:?} {t}");
    let name = by_path[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("full-2-"), "the session's second snapshot, named: {name}");
    assert!(t["last_result"].as_str().unwrap().contains(&by_path[0].display().to_string()), "{t}");
    let bytes = stream_bytes(&by_path[0]);
    assert!(bytes > 0 && bytes <= max, "{bytes} bytes, max {max}");
    let got = seqs(&by_path[0]);
    assert!(!got.is_empty() && got.windows(2).all(|w| w[0] < w[1]), "{got:?}");
    assert!(*got.last().unwrap() > 2, "events of the big batch: {got:?}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(fired(&d, "full"), 1, "a flight recorder stays full: one crossing");
    assert_eq!(dirs_starting(&p1, "full-").len(), 1);
    drop(stdin);
    let _ = child.0.wait();
    d.ust_ok(&["destroy", "-s", "fr"]);
}

/// A snapshot action with `--ctrl-url`/`--data-url` (a real lttng-relayd on loopback):
/// the relay daemon writes `<host>/<session>-<stamp>/NAME-<N>-<stamp>/ust/pid/...`, read
/// back by babeltrace2, and nothing is written locally.
#[test]
fn snapshot_action_sends_to_a_relay_daemon() {
    use std::net::{TcpListener, TcpStream};
    let ports: Vec<u16> = {
        let ls: Vec<TcpListener> = (0..3).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
        ls.iter().map(|l| l.local_addr().unwrap().port()).collect()
    };
    let relay_out = tempfile::tempdir().unwrap();
    let relay_home = tempfile::tempdir().unwrap();
    let _relayd = KillOnDrop(
        Command::new("lttng-relayd")
            .arg("-o")
            .arg(relay_out.path())
            .args(["-C", &format!("tcp://127.0.0.1:{}", ports[0]), "-D", &format!("tcp://127.0.0.1:{}", ports[1])])
            .args(["-L", &format!("tcp://127.0.0.1:{}", ports[2])])
            .env("LTTNG_HOME", relay_home.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("lttng-relayd is installed (scripts/test.sh installs lttng-tools)"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", ports[0])).is_err() {
        assert!(Instant::now() < deadline, "lttng-relayd did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let d = TestDaemon::start();
    let local = d.output("fr");
    d.ust_ok(&["create", "fr", "--snapshot", "--output", local.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-s", "fr", "steadyprov:*"]);
    d.ust_ok(&["start", "-s", "fr"]);
    let (ctrl, data) = (format!("tcp://127.0.0.1:{}", ports[0]), format!("tcp://127.0.0.1:{}", ports[1]));
    d.ust_ok(&[
        "add-trigger",
        "--name",
        "to-relay",
        "--condition",
        "event-rule-matches",
        "--type",
        "user",
        "--name",
        "steadyprov:ev",
        "--filter",
        "seq == 4",
        "--action",
        "snapshot-session",
        "fr",
        "--ctrl-url",
        &ctrl,
        "--data-url",
        &data,
        "--name",
        "relay-snap",
    ]);
    let (mut child, mut stdout) = spawn_ready(Command::new(program_here("steady")).env("UST_RUNDIR", &d.rundir));
    let mut stdin = child.0.stdin.take().unwrap();
    batch(&mut stdin, &mut stdout, 5);
    let t = wait_fired(&d, "to-relay", 1);
    assert!(t["last_result"].as_str().unwrap().contains("/relay-snap-1-"), "{t}");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
    let sessions = dirs_starting(&relay_out.path().join(&host), "fr-");
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let snaps = dirs_starting(&sessions[0], "relay-snap-1-");
    assert_eq!(snaps.len(), 1, "{:?}", std::fs::read_dir(&sessions[0]).map(|r| r.flatten().map(|e| e.path()).collect::<Vec<_>>()));
    assert_eq!(seqs(&snaps[0]), (0..5).collect::<Vec<_>>());
    assert!(dirs_starting(&local, "").is_empty(), "nothing written locally");
    drop(stdin);
    let _ = child.0.wait();
    d.ust_ok(&["destroy", "-s", "fr"]);
}
