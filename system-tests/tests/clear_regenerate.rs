//! `ust clear` and `ust regenerate metadata|statedump` (LTTng's `lttng clear`,
//! `lttng regenerate`), end to end, every trace read back by babeltrace2.

use system_tests as common;

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};

use common::*;

/// `holder N` under the daemon's socket directory, once it printed `ready`.
fn holder(d: &TestDaemon, n: u64) -> (KillOnDrop, std::io::Lines<std::io::BufReader<std::process::ChildStdout>>) {
    let mut c = KillOnDrop(
        Command::new(program_here("holder")).arg(n.to_string()).env("UST_RUNDIR", &d.rundir).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap(),
    );
    let mut lines = std::io::BufReader::new(c.0.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    (c, lines)
}

fn finish(mut c: KillOnDrop) {
    let _ = c.0.stdin.take().map(|mut i| i.flush());
    let st = c.0.wait().unwrap();
    assert!(st.success());
}

fn ev_numbers(out: &std::path::Path, name: &str) -> Vec<u64> {
    bt_events(&babeltrace(out)).iter().filter(|e| e.name == name).map(|e| fields_map(&e.fields)["i"].parse().unwrap()).collect()
}

#[test]
fn clear_discards_what_was_recorded_and_recording_goes_on() {
    let d = TestDaemon::start();
    let out = d.output("clear");
    d.session_with_events("c", &out, &["--subbuf-size", "4k", "--num-subbuf", "4"], "holder:*");
    // A process that is gone before the clear: its whole trace goes.
    let (gone, _) = holder(&d, 5);
    finish(gone);
    let (h, _) = holder(&d, 300);
    let before = std::fs::read_dir(out.join("ust/pid")).unwrap().count();
    assert_eq!(before, 2);
    let said = d.ust_ok(&["clear", "c"]);
    assert!(said.contains("Session c cleared"), "{said}");
    assert_eq!(std::fs::read_dir(out.join("ust/pid")).unwrap().count(), 1, "the gone process's trace is removed");
    finish(h);
    d.ust_ok(&["stop", "-s", "c"]);
    d.ust_ok(&["destroy", "-s", "c"]);
    assert_eq!(ev_numbers(&out, "holder:ev"), (300..600).collect::<Vec<_>>(), "only what came after the clear");
    let bad = d.ust(&["clear", "-s", "nope"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("no session named"));
}

#[test]
fn clear_empties_a_snapshot_sessions_buffers() {
    let d = TestDaemon::start();
    let out = d.output("snapclear");
    d.ust_ok(&["create", "fr", "--snapshot", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "holder:*"]);
    d.ust_ok(&["start"]);
    let (h, _) = holder(&d, 200);
    d.ust_ok(&["snapshot", "record"]);
    d.ust_ok(&["clear"]);
    // Recorded after the clear: a second process's events.
    let (h2, _) = holder(&d, 7);
    let said = d.ust_ok(&["snapshot", "record"]);
    let dir = said.split("Snapshot written to ").nth(1).and_then(|r| r.split(" (").next()).unwrap();
    let evs: Vec<(i32, u64)> = bt_events(&babeltrace(std::path::Path::new(dir))).iter().map(|e| (e.pid, fields_map(&e.fields)["i"].parse().unwrap())).collect();
    let pid2 = h2.0.id() as i32;
    assert_eq!(evs, (0..7).map(|i| (pid2, i)).collect::<Vec<_>>(), "the first process's events were cleared");
    let first = std::fs::read_dir(&out).unwrap().filter_map(Result::ok).find(|e| e.file_name().to_string_lossy().starts_with("snapshot-1-")).unwrap().path();
    assert_eq!(ev_numbers(&first, "holder:ev"), (0..200).collect::<Vec<_>>(), "the snapshot before the clear is kept");
    finish(h);
    finish(h2);
    d.ust_ok(&["destroy"]);
}

#[test]
fn regenerate_statedump_and_metadata() {
    let d = TestDaemon::start();
    let out = d.output("regen");
    d.ust_ok(&["create", "r", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-a"]);
    let stopped = d.ust(&["regenerate", "statedump"]);
    assert!(!stopped.status.success() && String::from_utf8_lossy(&stopped.stderr).contains("not started"));
    d.ust_ok(&["start"]);
    let (h, _) = holder(&d, 3);
    let pid = h.0.id() as i32;
    assert!(d.ust_ok(&["regenerate", "statedump"]).contains("State dump successfully regenerated"));
    let meta_dir = std::fs::read_dir(out.join("ust/pid")).unwrap().next().unwrap().unwrap().path();
    let before = std::fs::read_to_string(meta_dir.join("metadata")).unwrap();
    assert!(d.ust_ok(&["regenerate", "metadata"]).contains("Metadata successfully regenerated"));
    let after = std::fs::read_to_string(meta_dir.join("metadata")).unwrap();
    let offset = |m: &str| m.lines().find(|l| l.trim_start().starts_with("offset =")).map(str::to_string);
    assert!(offset(&after).is_some(), "{after}");
    assert_eq!(
        before.lines().filter(|l| !l.contains("offset =")).collect::<Vec<_>>(),
        after.lines().filter(|l| !l.contains("offset =")).collect::<Vec<_>>(),
        "only the clock offset may change"
    );
    finish(h);
    d.ust_ok(&["stop"]);
    d.ust_ok(&["destroy"]);
    let text = babeltrace(&out);
    let starts = text.lines().filter(|l| l.contains(&format!(":({pid})")) && l.contains("lttng_ust_statedump:start")).count();
    let ends = text.lines().filter(|l| l.contains(&format!(":({pid})")) && l.contains("lttng_ust_statedump:end")).count();
    assert_eq!((starts, ends), (2, 2), "the dump at registration and the regenerated one");
    assert_eq!(ev_numbers(&out, "holder:ev"), (0..6).collect::<Vec<_>>());
}
