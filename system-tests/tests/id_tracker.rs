//! `ust track/untrack --vuid|--vgid` (LTTng's user-id and group-id trackers): a session
//! records a process only when its user and group are tracked; ids or names; the
//! trackers show in `ust list SESSION` and its JSON.

use system_tests as common;

use std::process::{Command, Stdio};

use common::*;

fn run_threeevents(d: &TestDaemon) -> i32 {
    let c = Command::new(program_here("threeevents")).env("UST_RUNDIR", &d.rundir).stdin(Stdio::null()).spawn().unwrap();
    let pid = c.id() as i32;
    assert!(c.wait_with_output().unwrap().status.success());
    pid
}

#[test]
fn user_and_group_trackers_choose_the_processes() {
    let d = TestDaemon::start();
    let out = d.output("ids");
    d.ust_ok(&["create", "ids", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "short:*"]);
    d.ust_ok(&["start"]);
    let (uid, gid) = (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw());
    let said = d.ust_ok(&["track", "--vuid", "4242"]);
    assert!(said.contains("User ID 4242 tracked in session ids") && said.contains("Tracked user IDs: 4242"), "{said}");
    let p1 = run_threeevents(&d);
    let me = if uid == 0 { "root".to_string() } else { uid.to_string() };
    d.ust_ok(&["track", "--vuid", &me]);
    let p2 = run_threeevents(&d);
    d.ust_ok(&["untrack", "--vgid", "--all"]);
    let p3 = run_threeevents(&d);
    d.ust_ok(&["track", "--vgid", &gid.to_string()]);
    let p4 = run_threeevents(&d);
    let j = d.ust_json(&["list", "ids", "--json"]);
    let mut want_uids = vec![4242, uid];
    want_uids.sort();
    assert_eq!(j["vuid_tracker"], serde_json::json!({ "only": want_uids }));
    assert_eq!(j["vgid_tracker"], serde_json::json!({ "only": [gid] }));
    let human = d.ust_ok(&["list", "ids"]);
    assert!(human.contains(&format!("Tracked group IDs: {gid}")), "{human}");
    let bad = d.ust(&["untrack", "--vuid", "no-such-user-here"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("no such user"));
    let all = d.ust(&["untrack", "--vuid", "1", "--all"]);
    assert!(!all.status.success());
    d.ust_ok(&["stop"]);
    d.ust_ok(&["destroy"]);
    let evs = bt_events(&babeltrace(&out));
    for p in [p1, p3] {
        assert!(!evs.iter().any(|e| e.pid == p), "process {p} was not tracked");
    }
    for p in [p2, p4] {
        assert_eq!(evs.iter().filter(|e| e.pid == p && e.name == "short:ev").count(), 3, "process {p}");
    }
}
