//! Triggers (`ust add-trigger`, `list-triggers`, `remove-trigger`), end to end: a
//! flight-recorder session with a trigger on `myapp:error` snapshots itself when the
//! error occurs, and the snapshot holds the events before it (read back by babeltrace2,
//! event by event). The delay from the event to the snapshot on disk is measured and
//! printed (`cargo test -p ust-consumerd --test triggers -- --nocapture`), not asserted.

use system_tests as common;

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;

fn triggers(d: &TestDaemon) -> Vec<serde_json::Value> {
    d.ust_json(&["list-triggers", "--json"]).as_array().cloned().unwrap_or_default()
}

fn by_name<'a>(list: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    list.iter().find(|t| t["spec"]["name"] == name).unwrap_or_else(|| panic!("no trigger {name} in {list:?}"))
}

#[test]
fn error_event_snapshots_the_flight_recorder() {
    let d = TestDaemon::start();
    let out = d.output("fr");
    d.ust_ok(&["create", "fr", "--snapshot", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-s", "fr", "myapp:*"]);
    d.ust_ok(&["start", "-s", "fr"]);
    let added = d.ust_ok(&[
        "add-trigger",
        "--name",
        "on-error",
        "--condition",
        "event-rule-matches",
        "--type",
        "user",
        "--name",
        "myapp:error",
        "--action",
        "snapshot-session",
        "fr",
        "--action",
        "notify",
    ]);
    assert!(added.contains("Added trigger `on-error`"), "{added}");
    // Same event, a filter that never matches: must never fire.
    d.ust_ok(&[
        "add-trigger",
        "--name",
        "never",
        "--condition",
        "event-rule-matches",
        "--type=user",
        "--name=myapp:error",
        "--filter",
        "code == 7",
        "--action",
        "notify",
    ]);
    // No event of any process matches: no process gets a notifier for it.
    d.ust_ok(&["add-trigger", "--condition", "event-rule-matches", "--type", "user", "--name", "other:*", "--action", "notify"]);
    let dup = d.ust(&["add-trigger", "--name", "never", "--condition", "event-rule-matches", "--type", "user", "--action", "notify"]);
    assert!(!dup.status.success() && String::from_utf8_lossy(&dup.stderr).contains("exists already"));
    let nosession = d.ust(&["add-trigger", "--condition", "event-rule-matches", "--type", "user", "--action", "snapshot-session", "nope"]);
    assert!(!nosession.status.success() && String::from_utf8_lossy(&nosession.stderr).contains("no session named"));

    let n = 500u64;
    let mut child = KillOnDrop(
        Command::new(program_here("flightrec")).arg(n.to_string()).env("UST_RUNDIR", &d.rundir).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap(),
    );
    let mut lines = std::io::BufReader::new(child.0.stdout.take().unwrap()).lines();
    let emitted_ns: u128 = lines.next().unwrap().unwrap().parse().unwrap();
    // Poll for the snapshot's metadata (written first) to measure the delay.
    let deadline = Instant::now() + Duration::from_secs(20);
    let snap = loop {
        let found = std::fs::read_dir(&out)
            .ok()
            .and_then(|rd| rd.filter_map(Result::ok).map(|e| e.path()).find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("snapshot-1-"))));
        if let Some(dir) = found {
            let seen_ns = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
            eprintln!("trigger latency: snapshot directory seen {:.2} ms after myapp:error was emitted", (seen_ns.saturating_sub(emitted_ns)) as f64 / 1e6);
            break dir;
        }
        assert!(Instant::now() < deadline, "no snapshot after the error event; log:\n{}", d.log());
        std::thread::sleep(Duration::from_micros(200));
    };
    // The firing is complete once list-triggers counts it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let list = loop {
        let list = triggers(&d);
        if by_name(&list, "on-error")["fired"].as_u64() >= Some(1) {
            break list;
        }
        assert!(Instant::now() < deadline, "on-error never counted as fired: {list:?}\nlog:\n{}", d.log());
        std::thread::sleep(Duration::from_millis(5));
    };
    let t = by_name(&list, "on-error");
    assert_eq!(t["fired"], 1, "{t}");
    assert_eq!(t["processes"], 1, "{t}");
    let result = t["last_result"].as_str().unwrap();
    assert!(result.contains(&format!("snapshot written to {}", snap.display())) && result.contains("notified"), "{result}");
    assert_eq!(by_name(&list, "never")["fired"], 0);
    assert_eq!(by_name(&list, "never")["processes"], 1, "watching, filter evaluated in the process");
    assert_eq!(by_name(&list, "trigger2")["processes"], 0, "no matching event: no notifier");
    assert!(d.log().contains("trigger on-error fired: snapshot written to"), "{}", d.log());

    // Every event before the error, in order, then the error.
    let text = babeltrace(&snap);
    let evs = bt_events(&text);
    let infos: Vec<u64> = evs.iter().filter(|e| e.name == "myapp:info").map(|e| fields_map(&e.fields)["i"].parse().unwrap()).collect();
    assert_eq!(infos, (0..n).collect::<Vec<_>>(), "{text}");
    let errors: Vec<_> = evs.iter().filter(|e| e.name == "myapp:error").collect();
    assert_eq!(errors.len(), 1, "{text}");
    assert_eq!(fields_map(&errors[0].fields)["code"], "42");
    assert_eq!(evs.last().map(|e| e.name.as_str()), Some("myapp:error"));

    // Human listing, then removal.
    let human = d.ust_ok(&["list-triggers"]);
    assert!(human.contains("- name: on-error") && human.contains("rule: myapp:error") && human.contains("snapshot session `fr`"), "{human}");
    assert!(human.contains("filter: code == 7"), "{human}");
    d.ust_ok(&["remove-trigger", "on-error"]);
    let list = triggers(&d);
    assert_eq!(list.len(), 2, "{list:?}");
    assert!(!list.iter().any(|t| t["spec"]["name"] == "on-error"));
    let gone = d.ust(&["remove-trigger", "on-error"]);
    assert!(!gone.status.success() && String::from_utf8_lossy(&gone.stderr).contains("no trigger named"));
    drop(child.0.stdin.take());
    let _ = child.0.wait();
    // One snapshot only: nothing else fired it (not the process's exit).
    let snaps = std::fs::read_dir(&out).unwrap().filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with("snapshot-")).count();
    assert_eq!(snaps, 1);
    d.ust_ok(&["destroy", "-s", "fr"]);
}

/// Sends a batch size to `steady` (examples/testprogs/src/bin/steady.rs) and waits for
/// its answer: the events `steadyprov:ev { seq }` of the batch are written.
fn batch(stdin: &mut impl std::io::Write, stdout: &mut impl BufRead, n: u64) {
    writeln!(stdin, "{n}").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.trim().parse::<f64>().is_ok(), "steady said {line:?}");
}

/// The `seq` fields of the `steadyprov:ev` events of the trace in `dir`, read back by
/// babeltrace2.
fn steady_seqs(dir: &std::path::Path) -> Vec<u64> {
    let (text, _) = babeltrace_allowing_warnings(dir);
    bt_events(&text).iter().filter(|e| e.name == "steadyprov:ev").map(|e| fields_map(&e.fields)["seq"].parse().unwrap()).collect()
}

/// Bytes of the stream files (everything but `metadata`) under `dir`.
fn stream_bytes(dir: &std::path::Path) -> u64 {
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

/// Waits until trigger `name` has fired at least `n` times; returns it.
fn wait_fired(d: &TestDaemon, name: &str, n: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let list = triggers(d);
        let t = by_name(&list, name);
        if t["fired"].as_u64() >= Some(n) {
            return t.clone();
        }
        assert!(Instant::now() < deadline, "{name} never fired {n} time(s): {list:?}\nlog:\n{}", d.log());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// LTTng 2.15's `session-consumed-size-ge` with a `stop-session` action: the session
/// stops once the daemon has written at least the threshold, and nothing emitted after
/// that is in the trace.
#[test]
fn consumed_size_stops_the_session() {
    let d = TestDaemon::start();
    let out = d.output("big");
    d.session_with_events("big", &out, &["--subbuf-size", "4k", "--num-subbuf", "8"], "steadyprov:*");
    let threshold = 32 * 1024u64;
    let added = d.ust_ok(&[
        "add-trigger",
        "--name",
        "full",
        "--condition=session-consumed-size-ge",
        "--session",
        "big",
        "--threshold-size",
        "32k",
        "--action",
        "stop-session",
        "big",
        "--action",
        "notify",
    ]);
    assert!(added.contains("Added trigger `full`"), "{added}");
    let nosession = d.ust(&["add-trigger", "--condition", "session-consumed-size-ge", "-s", "nope", "-t", "1k", "--action", "notify"]);
    assert!(!nosession.status.success() && String::from_utf8_lossy(&nosession.stderr).contains("no session named"));

    let (mut child, mut stdout) = spawn_ready(Command::new(program_here("steady")).env("UST_RUNDIR", &d.rundir));
    let mut stdin = child.0.stdin.take().unwrap();
    let mut sent = 0u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    let t = loop {
        batch(&mut stdin, &mut stdout, 100);
        sent += 100;
        std::thread::sleep(Duration::from_millis(2));
        if sent.is_multiple_of(1000) {
            let list = triggers(&d);
            let t = by_name(&list, "full");
            if t["fired"].as_u64() >= Some(1) {
                break t.clone();
            }
        }
        assert!(Instant::now() < deadline, "full never fired after {sent} events\nlog:\n{}", d.log());
    };
    let at_stop = sent;
    // Emitted after the session stopped: not recorded.
    for _ in 0..5 {
        batch(&mut stdin, &mut stdout, 100);
        sent += 100;
    }
    assert!(t["last_result"].as_str().unwrap().contains("session big stopped"), "{t}");
    let human = d.ust_ok(&["list-triggers"]);
    assert!(
        human.contains("- name: full")
            && human.contains("condition: session consumed size")
            && human.contains("session name: big")
            && human.contains(&format!("threshold: {threshold} bytes"))
            && human.contains("stop session `big`"),
        "{human}"
    );
    let status = d.ust_json(&["list", "big", "--json"]);
    assert_eq!(status["summary"]["active"], false, "{status}");
    drop(stdin);
    let _ = child.0.wait();
    d.ust_ok(&["destroy", "-s", "big"]);
    // Fired once: the consumed size only grows, it never crosses again.
    assert!(d.log().matches("trigger full fired: session big stopped").count() == 1, "{}", d.log());

    assert!(stream_bytes(&out) >= threshold, "{} bytes written", stream_bytes(&out));
    let seqs = steady_seqs(&out);
    assert!(!seqs.is_empty());
    assert_eq!(seqs[0], 0);
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order, each once: {seqs:?}");
    let last = *seqs.last().unwrap();
    assert!(last < at_stop, "event {last} recorded, emitted after the stop (stopped at {at_stop} of {sent})");
}

/// LTTng 2.15's `session-rotation-starts` and `session-rotation-finishes`: `ust rotate`
/// fires both, once per rotation; the finishing one snapshots a flight-recorder session,
/// and both the archive and the snapshot hold the events of the chunk.
#[test]
fn rotation_conditions_fire_once_per_rotation() {
    let d = TestDaemon::start();
    let out = d.output("rot");
    d.session_with_events("rot", &out, &[], "steadyprov:*");
    let fr_out = d.output("fr");
    d.ust_ok(&["create", "fr", "--snapshot", "--output", fr_out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-s", "fr", "steadyprov:*"]);
    d.ust_ok(&["start", "-s", "fr"]);
    d.ust_ok(&["add-trigger", "--name", "begins", "--condition", "session-rotation-starts", "--session", "rot", "--action", "notify"]);
    d.ust_ok(&["add-trigger", "--name", "ends", "--condition=session-rotation-finishes", "-s", "rot", "--action", "snapshot-session", "fr"]);
    // A rotation refused before it begins (a session never started) fires nothing.
    d.ust_ok(&["create", "idle", "--output", d.output("idle").to_str().unwrap()]);
    d.ust_ok(&["add-trigger", "--name", "idle-begins", "--condition", "session-rotation-starts", "--session", "idle", "--action", "notify"]);
    let refused = d.ust(&["rotate", "-s", "idle"]);
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("not been started"));
    // A rotation of another session fires neither.
    let other = d.output("other");
    d.session_with_events("other", &other, &[], "steadyprov:*");

    let (mut child, mut stdout) = spawn_ready(Command::new(program_here("steady")).env("UST_RUNDIR", &d.rundir));
    let mut stdin = child.0.stdin.take().unwrap();
    batch(&mut stdin, &mut stdout, 200);
    d.ust_ok(&["rotate", "-s", "other"]);
    let said = d.ust_ok(&["rotate", "-s", "rot"]);
    let archive = std::path::PathBuf::from(said.trim().rsplit(' ').next().unwrap());
    let ends = wait_fired(&d, "ends", 1);
    let begins = wait_fired(&d, "begins", 1);
    assert_eq!(begins["last_result"], "notified", "{begins}");
    let result = ends["last_result"].as_str().unwrap();
    let snap = std::path::PathBuf::from(result.strip_prefix("snapshot written to ").unwrap_or_else(|| panic!("{result}")));
    let human = d.ust_ok(&["list-triggers"]);
    assert!(
        human.contains("condition: session rotation ongoing") && human.contains("condition: session rotation completed") && human.contains("session name: rot"),
        "{human}"
    );

    // A second rotation fires each once more.
    batch(&mut stdin, &mut stdout, 100);
    d.ust_ok(&["rotate", "-s", "rot"]);
    wait_fired(&d, "ends", 2);
    wait_fired(&d, "begins", 2);
    std::thread::sleep(Duration::from_millis(200));
    let list = triggers(&d);
    assert_eq!(by_name(&list, "begins")["fired"], 2, "{list:?}");
    assert_eq!(by_name(&list, "ends")["fired"], 2, "{list:?}");
    assert_eq!(by_name(&list, "idle-begins")["fired"], 0, "{list:?}");
    drop(stdin);
    let _ = child.0.wait();

    assert_eq!(steady_seqs(&archive), (0..200).collect::<Vec<_>>(), "the first archive holds the first chunk");
    assert_eq!(steady_seqs(&snap), (0..200).collect::<Vec<_>>(), "the snapshot taken when the rotation finished");
    d.ust_ok(&["destroy", "-s", "rot"]);
    d.ust_ok(&["destroy", "-s", "fr"]);
    d.ust_ok(&["destroy", "-s", "other"]);
}
