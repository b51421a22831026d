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
