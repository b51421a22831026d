//! Map channels (LTTng 2.16's `add-map-channel`, `incr-map-value`, `show-maps`,
//! `export-maps`), end to end: a port of lttng-tools' `tests/regression/tools/map/`
//! (user space parts) to ust's CLI. Programs emit known numbers of events and the
//! counters must hold exactly those sums, across threads and CPUs, while the process lives
//! and after it exits, with each ownership model and dead-process policy. Counters are
//! read back as LTTng's tests read them: `export-maps` loaded into sqlite3 and queried
//! through the `vmap` view; and `show-maps`' tables are checked too.
//!
//! - `tptest` is LTTng's `gen-ust-events`: 100 `tp:tptest` (`intfield` 0..100), then 7
//!   `tp:the_string`;
//! - `fourthreads N`: 4 threads × N `myprov:myev`;
//! - `holder N`: N `holder:ev`, waits for its stdin to close, N more.

use system_tests as common;

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::maps::{count_trigger, session, sql, values};
use common::*;

/// LTTng's `read_map_value`: the sum of `key` over every group and CPU, `None` if absent.
fn value(d: &TestDaemon, session: &str, key: &str) -> Option<i64> {
    let q = format!("SELECT SUM(value) FROM vmap WHERE key = '{}';", key.replace('\'', "''"));
    sql(d, session, &q).first().and_then(|v| v.parse().ok())
}

/// LTTng's `sum_map_value_in_group_type`.
fn value_in(d: &TestDaemon, session: &str, group: &str, key: &str) -> Option<i64> {
    let q = format!("SELECT SUM(value) FROM vmap WHERE group_type = '{group}' AND key = '{key}';");
    sql(d, session, &q).first().and_then(|v| v.parse().ok())
}

fn run(d: &TestDaemon, prog: &str, args: &[&str]) {
    let o = Command::new(program_here(prog)).args(args).env("UST_RUNDIR", &d.rundir).output().unwrap();
    assert!(o.status.success(), "{prog}: {}", String::from_utf8_lossy(&o.stderr));
}

/// Waits until the daemon has reaped the per-process group of a dead process (LTTng's
/// tests rotate for this synchronization point).
fn wait_reaped(d: &TestDaemon, session: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sql(d, session, "SELECT COUNT(*) FROM groups WHERE type = 'user-per-process';").iter().all(|c| c == "0") {
        assert!(Instant::now() < deadline, "the dead process's group is still there");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn per_user_map_counts_every_event_exactly() {
    let d = TestDaemon::start();
    session(&d, "s", &[]);
    count_trigger(&d, "s", "tp:tptest", "count/{event_name}", &[]);
    d.ust_ok(&["start", "-s", "s"]);
    run(&d, "tptest", &[]);
    assert_eq!(value(&d, "s", "count/tp:tptest"), Some(100));
    assert_eq!(values(&d, "s"), ["count/tp:tptest|100"], "only the rule's event is counted");
    // The per-user group is the current user's (test_buffer_ownership_models).
    let uid = unsafe { libc::getuid() };
    assert_eq!(sql(&d, "s", "SELECT DISTINCT owner_id, value_type FROM vmap WHERE group_type = 'user-per-user';"), [format!("{uid}|signed-int-64")]);
    // A second run of the same user adds into the same maps.
    run(&d, "tptest", &[]);
    assert_eq!(value(&d, "s", "count/tp:tptest"), Some(200));
    let table = d.ust_ok(&["show-maps", "-s", "s", "--channel", "m"]);
    assert!(table.contains("Recording session `s`:\nUser space map channel `m`:\n"), "{table}");
    assert!(table.lines().any(|l| l.contains("count/tp:tptest") && l.contains(" 200 ")), "{table}");
    let per_owner = d.ust_ok(&["show-maps", "-s", "s", "--per=owner", &format!("--uid={uid}")]);
    assert!(per_owner.contains(&format!(", user ID {uid}")), "{per_owner}");
    assert_eq!(d.ust_ok(&["show-maps", "-s", "s", "--all-pids"]), "Nothing to show!\n");
    // No record was written: the session has no event channel (the daemon made no trace).
    assert!(!d.output("s").join("ust").exists());
}

#[test]
fn counts_are_exact_across_threads_and_cpus() {
    let d = TestDaemon::start();
    session(&d, "s", &[]);
    count_trigger(&d, "s", "myprov:*", "{event_name}", &[]);
    d.ust_ok(&["start", "-s", "s"]);
    run(&d, "fourthreads", &["25000"]);
    assert_eq!(value(&d, "s", "myprov:myev"), Some(100_000));
    // The per-CPU counters sum to it (show-maps --per=cpu: one table per CPU with counts).
    let per_cpu = sql(&d, "s", "SELECT SUM(value) FROM vmap WHERE part_id IS NOT NULL GROUP BY part_id;");
    assert_eq!(per_cpu.iter().map(|v| v.parse::<i64>().unwrap()).sum::<i64>(), 100_000);
    let t = d.ust_ok(&["show-maps", "-s", "s", "--per=cpu", "--non-init-values"]);
    assert!(t.contains(", CPU "), "{t}");
}

#[test]
fn dead_process_policies() {
    for (policy, shared_after) in [("drop", None), ("sum-into-shared", Some(200))] {
        let d = TestDaemon::start();
        session(&d, "s", &["--buffer-ownership=process", &format!("--dead-process-policy={policy}")]);
        count_trigger(&d, "s", "holder:ev", "count/{event_name}", &[]);
        d.ust_ok(&["start", "-s", "s"]);
        let mut child = KillOnDrop(
            Command::new(program_here("holder")).arg("100").env("UST_RUNDIR", &d.rundir).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap(),
        );
        let mut line = String::new();
        std::io::BufReader::new(child.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        // Alive: its own group, owned by its pid (test_buffer_ownership_models).
        let pid = child.0.id();
        assert_eq!(
            sql(&d, "s", "SELECT owner_id, owner_name, SUM(value) FROM vmap WHERE group_type = 'user-per-process' GROUP BY owner_id;"),
            [format!("{pid}|holder|100")]
        );
        let t = d.ust_ok(&["show-maps", "-s", "s", "--per=owner", "--pid", &pid.to_string()]);
        assert!(t.contains(&format!(", process ID {pid} (`holder`) (64-bit int. values):")) && t.contains(" 100 "), "{t}");
        drop(child.0.stdin.take());
        assert!(child.0.wait().unwrap().success());
        wait_reaped(&d, "s");
        let key = "count/holder:ev";
        assert_eq!(value_in(&d, "s", "user-per-process", key), None, "{policy}: the dead process's group is gone");
        let shared = value_in(&d, "s", "shared", key);
        match shared_after {
            None => assert!(shared.is_none() || shared == Some(0), "drop: {shared:?}"),
            Some(v) => assert_eq!(shared, Some(v), "sum-into-shared"),
        }
    }
}

#[test]
fn update_policies() {
    for (policy, want) in [("per-event", 100), ("per-rule-match", 200)] {
        let d = TestDaemon::start();
        session(&d, "s", &[&format!("--update-policy={policy}")]);
        count_trigger(&d, "s", "tp:tptest", "count/{event_name}", &[]);
        count_trigger(&d, "s", "tp:tptest", "count/{event_name}", &[]);
        d.ust_ok(&["start", "-s", "s"]);
        run(&d, "tptest", &[]);
        assert_eq!(value(&d, "s", "count/tp:tptest"), Some(want), "{policy}");
    }
}

#[test]
fn no_update_while_stopped() {
    let d = TestDaemon::start();
    session(&d, "s", &[]);
    count_trigger(&d, "s", "tp:tptest", "count/{event_name}", &[]);
    d.ust_ok(&["start", "-s", "s"]);
    run(&d, "tptest", &[]);
    assert_eq!(value(&d, "s", "count/tp:tptest"), Some(100));
    d.ust_ok(&["stop", "-s", "s"]);
    run(&d, "tptest", &[]);
    assert_eq!(value(&d, "s", "count/tp:tptest"), Some(100), "stopped: not counted");
    d.ust_ok(&["start", "-s", "s"]);
    run(&d, "tptest", &[]);
    assert_eq!(value(&d, "s", "count/tp:tptest"), Some(200));
}

#[test]
fn provider_and_event_name_placeholders_and_filters() {
    let d = TestDaemon::start();
    session(&d, "s", &[]);
    count_trigger(&d, "s", "tp:tptest", "prov/{provider_name}", &[]);
    count_trigger(&d, "s", "tp:tptest", "evt/{event_name}", &[]);
    // test_rule_filters_ust: the rule's filter is evaluated in the process.
    count_trigger(&d, "s", "tp:tptest", "low/{{{event_name}}}", &["--filter", "intfield < 10"]);
    d.ust_ok(&["start", "-s", "s"]);
    run(&d, "tptest", &[]);
    assert_eq!(values(&d, "s"), ["evt/tp:tptest|100", "low/{tp:tptest}|10", "prov/tp|100"]);
}

#[test]
fn a_full_map_drops_new_keys_and_says_so() {
    let d = TestDaemon::start();
    session(&d, "s", &["--max-key-count=1"]);
    count_trigger(&d, "s", "tp:*", "{event_name}", &[]);
    d.ust_ok(&["start", "-s", "s"]);
    run(&d, "tptest", &[]);
    let v = values(&d, "s");
    assert!(v == ["tp:tptest|100"] || v == ["tp:the_string|7"], "one key kept, counted exactly: {v:?}");
    let dump = d.ust_json(&["show-maps", "-s", "s", "--json"]);
    assert_eq!(dump["channels"][0]["keys"], 1);
    assert!(dump["channels"][0]["keys_dropped"].as_u64().unwrap() >= 1, "{dump}");
}

#[test]
fn late_binding_clear_and_an_event_channel_beside() {
    let d = TestDaemon::start();
    let out = d.output("s");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    // test_trigger_late_binding: the trigger names the map channel before it exists.
    count_trigger(&d, "s", "tp:tptest", "count/{event_name}", &[]);
    d.ust_ok(&["add-map-channel", "-s", "s", "--type=user", "m"]);
    let dup = d.ust(&["add-map-channel", "-s", "s", "--type=user", "m"]);
    assert!(!dup.status.success() && String::from_utf8_lossy(&dup.stderr).contains("already has a map channel"));
    let kernel = d.ust(&["add-map-channel", "-s", "s", "--type=kernel"]);
    assert!(!kernel.status.success());
    d.ust_ok(&["enable-event", "-s", "s", "tp:the_string"]);
    d.ust_ok(&["start", "-s", "s"]);
    run(&d, "tptest", &[]);
    assert_eq!(value(&d, "s", "count/tp:tptest"), Some(100));
    // test_clear_preserves_keys.
    d.ust_ok(&["clear", "-s", "s"]);
    assert_eq!(values(&d, "s"), ["count/tp:tptest|0"]);
    run(&d, "tptest", &[]);
    d.ust_ok(&["stop", "-s", "s"]);
    assert_eq!(value(&d, "s", "count/tp:tptest"), Some(100));
    // The event channel recorded its own event only: read back by babeltrace2.
    let text = babeltrace(&out);
    assert_eq!(text.lines().filter(|l| l.contains("tp:the_string:")).count(), 7, "{text}");
    assert!(!text.contains("tp:tptest"), "{text}");
    d.ust_ok(&["destroy", "-s", "s"]);
}

/// test_max_key_count: a `session-rotation-finishes` trigger with five `incr-map-value`
/// actions of literal keys, in a map channel of two keys: the daemon counts in the shared
/// counters, in the actions' order, and keeps the first two keys.
#[test]
fn a_session_condition_counts_in_the_shared_counters() {
    let d = TestDaemon::start();
    let out = d.output("s");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["add-map-channel", "-s", "s", "--type=user", "--max-key-count=2", "m"]);
    d.ust_ok(&["enable-event", "-s", "s", "tp:the_string"]);
    let mut a = vec!["add-trigger", "--condition=session-rotation-finishes", "--session=s"];
    let keys: Vec<String> = (0..5).map(|i| format!("--key=k{i}")).collect();
    for k in &keys {
        a.extend_from_slice(&["--action=incr-map-value", "-s", "s", "-t", "user", "-c", "m", k]);
    }
    d.ust_ok(&a);
    let literal = d.ust(&[
        "add-trigger",
        "--condition=session-rotation-finishes",
        "--session=s",
        "--action=incr-map-value",
        "-s",
        "s",
        "-t",
        "user",
        "-c",
        "m",
        "-k",
        "{event_name}",
    ]);
    assert!(!literal.status.success() && String::from_utf8_lossy(&literal.stderr).contains("literal"));
    d.ust_ok(&["start", "-s", "s"]);
    run(&d, "tptest", &[]);
    d.ust_ok(&["rotate", "-s", "s"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while values(&d, "s").is_empty() {
        assert!(Instant::now() < deadline, "the trigger did not count; log:\n{}", d.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(values(&d, "s"), ["k0|1", "k1|1"]);
    assert_eq!(sql(&d, "s", "SELECT DISTINCT group_type, part_id IS NULL FROM vmap WHERE value > 0;"), ["shared|1"]);
    d.ust_ok(&["destroy", "-s", "s"]);
    // The rotated chunk and the last one: the event channel's 7 events, read back.
    let text = babeltrace(&out);
    assert_eq!(text.lines().filter(|l| l.contains("tp:the_string:")).count(), 7, "{text}");
}

/// test_empty_map_channel_ust: a map channel no trigger targets, and one whose trigger
/// never fires (no program runs), are in `export-maps`' `channels` table with no key, no
/// entry and no `vmap` row; a key read back is absent (`None`), not 0.
#[test]
fn an_empty_map_channel_is_listed_without_rows() {
    let d = TestDaemon::start();
    for (label, trigger) in [("untouched", false), ("armed-but-idle", true)] {
        let out = d.output(label);
        d.ust_ok(&["create", label, "--output", out.to_str().unwrap()]);
        d.ust_ok(&["add-map-channel", "-s", label, "--type=user", "m"]);
        if trigger {
            count_trigger(&d, label, "tp:tptest", "count/{event_name}", &[]);
        }
        d.ust_ok(&["start", "-s", label]);
        assert_eq!(sql(&d, label, "SELECT name, type FROM channels WHERE name = 'm';"), ["m|user"], "{label}");
        let counts = "SELECT (SELECT COUNT(*) FROM keys), (SELECT COUNT(*) FROM entries), (SELECT COUNT(*) FROM vmap);";
        assert_eq!(sql(&d, label, counts), ["0|0|0"], "{label}");
        assert_eq!(value(&d, label, "count/tp:tptest"), None, "{label}");
        d.ust_ok(&["destroy", "-s", label]);
    }
}

/// test_incr_on_session_rotation: a `session-rotation-finishes` trigger increments the
/// literal key `rotations` once per rotation of a session that has only a map channel: 3
/// after three rotations, 5 after two more.
#[test]
fn each_rotation_increments_a_literal_key() {
    let d = TestDaemon::start();
    session(&d, "s", &[]);
    d.ust_ok(&[
        "add-trigger",
        "--condition=session-rotation-finishes",
        "--session=s",
        "--action=incr-map-value",
        "-s",
        "s",
        "-t",
        "user",
        "-c",
        "m",
        "-k",
        "rotations",
    ]);
    d.ust_ok(&["start", "-s", "s"]);
    let rotate = |n: i64| {
        d.ust_ok(&["rotate", "-s", "s"]);
        // The trigger runs on the daemon's watch thread: wait for this rotation's count.
        let deadline = Instant::now() + Duration::from_secs(10);
        while value(&d, "s", "rotations").unwrap_or(0) < n {
            assert!(Instant::now() < deadline, "rotation {n} did not count; log:\n{}", d.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    (1..=3).for_each(rotate);
    assert_eq!(value(&d, "s", "rotations"), Some(3));
    (4..=5).for_each(rotate);
    assert_eq!(value(&d, "s", "rotations"), Some(5));
    d.ust_ok(&["destroy", "-s", "s"]);
}

/// test_export_maps_schema_ust: every `vmap` column and the tables' references, with a
/// channel and keys whose names hold a quote and a backslash (SQLite's quoting, read back
/// exactly through sqlite3): a per-user channel (its user's group and the shared one, fed
/// by an event rule and by three rotations), then a per-process one.
#[test]
fn export_maps_schema_with_quoted_names() {
    const CHANNEL: &str = "ch'an\\nel";
    const EVENT_KEY: &str = "ev'ent\\key";
    const SHARED_KEY: &str = "sha'red\\key";
    let q = |s: &str| s.replace('\'', "''");
    let incr = |key: &'static str| ["--action=incr-map-value", "-s", "s", "-t", "user", "-c", CHANNEL, "-k", key];
    let d = TestDaemon::start();
    d.ust_ok(&["create", "s", "--output", d.output("s").to_str().unwrap()]);
    d.ust_ok(&["add-map-channel", "-s", "s", "--type=user", "--value-type=signed-int-32", "--buffer-ownership=user", CHANNEL]);
    let mut erm = vec!["add-trigger", "--condition=event-rule-matches", "--type=user", "--name=tp:tptest"];
    erm.extend(incr(EVENT_KEY));
    d.ust_ok(&erm);
    let mut rot = vec!["add-trigger", "--condition=session-rotation-finishes", "--session=s"];
    rot.extend(incr(SHARED_KEY));
    d.ust_ok(&rot);
    d.ust_ok(&["start", "-s", "s"]);
    for n in 1..=3 {
        d.ust_ok(&["rotate", "-s", "s"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while value(&d, "s", SHARED_KEY).unwrap_or(0) < n {
            assert!(Instant::now() < deadline, "rotation {n} did not count; log:\n{}", d.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    run(&d, "tptest", &[]);
    assert_eq!(sql(&d, "s", "SELECT name, type FROM channels;"), [format!("{CHANNEL}|user")]);
    let orphans = "SELECT (SELECT COUNT(*) FROM entries e LEFT JOIN groups g ON e.group_id = g.id WHERE g.id IS NULL)
        + (SELECT COUNT(*) FROM entries e LEFT JOIN keys k ON e.key_id = k.id WHERE k.id IS NULL)
        + (SELECT COUNT(*) FROM groups g LEFT JOIN channels c ON g.channel_id = c.id WHERE c.id IS NULL);";
    assert_eq!(sql(&d, "s", orphans), ["0"], "every foreign key resolves");
    assert_eq!(sql(&d, "s", "SELECT name FROM keys ORDER BY name;"), [EVENT_KEY, SHARED_KEY]);
    let uid = unsafe { libc::getuid() };
    let columns = "SELECT DISTINCT channel_name, channel_type, owner_id, owner_name IS NOT NULL, value_type, typeof(part_id), has_overflow FROM vmap";
    assert_eq!(
        sql(&d, "s", &format!("{columns} WHERE group_type = 'user-per-user' AND key = '{}';", q(EVENT_KEY))),
        [format!("{CHANNEL}|user|{uid}|1|signed-int-32|integer|0")]
    );
    assert_eq!(value_in(&d, "s", "user-per-user", &q(EVENT_KEY)), Some(100));
    let shared = "SELECT owner_id IS NULL, owner_name IS NULL, part_id IS NULL, value_type, value, has_overflow FROM vmap WHERE group_type = 'shared'";
    assert_eq!(sql(&d, "s", &format!("{shared} AND key = '{}';", q(SHARED_KEY))), ["1|1|1|signed-int-32|3|0"]);
    // Each key is in both groups, 0 in the one that did not count it.
    assert_eq!(value_in(&d, "s", "shared", &q(EVENT_KEY)), Some(0));
    assert_eq!(value_in(&d, "s", "user-per-user", &q(SHARED_KEY)), Some(0));
    d.ust_ok(&["destroy", "-s", "s"]);

    // Per process: the group is the process's, until it exits (policy drop).
    d.ust_ok(&["create", "s", "--output", d.output("p").to_str().unwrap()]);
    d.ust_ok(&["add-map-channel", "-s", "s", "--type=user", "--value-type=signed-int-32", "--buffer-ownership=process", "--dead-process-policy=drop", CHANNEL]);
    let mut erm = vec!["add-trigger", "--condition=event-rule-matches", "--type=user", "--name=holder:ev"];
    erm.extend(incr(EVENT_KEY));
    d.ust_ok(&erm);
    d.ust_ok(&["start", "-s", "s"]);
    let mut child =
        KillOnDrop(Command::new(program_here("holder")).arg("100").env("UST_RUNDIR", &d.rundir).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap());
    let mut line = String::new();
    std::io::BufReader::new(child.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let pid = child.0.id();
    assert_eq!(
        sql(&d, "s", &format!("{columns} WHERE group_type = 'user-per-process' AND key = '{}';", q(EVENT_KEY))),
        [format!("{CHANNEL}|user|{pid}|1|signed-int-32|integer|0")]
    );
    assert_eq!(value_in(&d, "s", "user-per-process", &q(EVENT_KEY)), Some(100));
    drop(child.0.stdin.take());
    assert!(child.0.wait().unwrap().success());
    d.ust_ok(&["destroy", "-s", "s"]);
}

/// test_list_map_channel: `ust list SESSION --map-channel=CHANNEL` shows that map
/// channel's attributes in lttng list 2.16's words (per user, per process, value types),
/// and nothing of the session's event channels.
#[test]
fn list_map_channel_shows_its_attributes() {
    let d = TestDaemon::start();
    let cases: [(&[&str], &[&str], &[&str]); 4] = [
        (
            &["--value-type=signed-int-max", "--max-key-count=64", "--update-policy=per-event", "--buffer-ownership=user"],
            &["Map channel", "- m:", "Key type: String", "Widest signed integer", "Max. key count: 64", "Per matching event", "per Unix user"],
            &["Dead process policy", "- chan:", "Event rules"],
        ),
        (
            &["--max-key-count=64", "--update-policy=per-rule-match", "--buffer-ownership=process", "--dead-process-policy=drop"],
            &["per process", "Per event rule match", "Dead process policy: Discard"],
            &[],
        ),
        (&["--value-type=signed-int-32"], &["32-bit signed integer"], &[]),
        (&["--value-type=signed-int-64"], &["64-bit signed integer"], &[]),
    ];
    for (opts, want, not) in cases {
        session(&d, "s", opts);
        d.ust_ok(&["enable-channel", "-s", "s", "chan"]);
        d.ust_ok(&["enable-event", "-s", "s", "-c", "chan", "tp:*"]);
        let out = d.ust_ok(&["list", "s", "--map-channel=m"]);
        for w in want {
            assert!(out.contains(w), "{opts:?}: {w:?} not in:\n{out}");
        }
        for n in not {
            assert!(!out.contains(n), "{opts:?}: {n:?} in:\n{out}");
        }
        assert_eq!(d.ust_json(&["list", "s", "--map-channel=m", "--json"])["name"], "m");
        let o = d.ust(&["list", "s", "--map-channel=nope"]);
        assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("no map channel named \"nope\""), "{o:?}");
        d.ust_ok(&["destroy", "-s", "s"]);
    }
}
