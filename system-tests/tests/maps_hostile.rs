//! Map channels under bad input and abuse (the adversarial round after LTTng 2.16's maps
//! were merged): keys the daemon must refuse or not count whoever sends them, hostile
//! saved sessions, and processes killed at random points while they count, under both
//! dead-process policies. The counters are read back as maps.rs reads them (`export-maps`
//! into sqlite3).
//!
//! - `tptest`: 100 `tp:tptest`, then 7 `tp:the_string`;
//! - `mapkill FILE THREADS`: `mapkill:ev` without end from THREADS threads, each thread's
//!   count of emitted events in FILE (the count, or one more, when killed).

use system_tests as common;

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::maps::{count_trigger, session, sql, values};
use common::*;
use ust_ctl::protocol::Command as Ctl;

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// A client need not be ust's CLI: the daemon checks an `incr-map-value` action's key
/// template, names and literal-ness itself (it accepted every one of these before), and
/// refuses a key longer than LTTng-UST's 255 bytes from either.
#[test]
fn the_daemon_checks_incr_map_value_actions_itself() {
    let d = TestDaemon::start();
    session(&d, "s", &[]);
    let erm = ust_ctl::trigger::parse_add_trigger(&args(&[
        "--condition=event-rule-matches",
        "--type=user",
        "--name=tp:tptest",
        "--action=incr-map-value",
        "-s",
        "s",
        "-t",
        "user",
        "-c",
        "m",
        "-k",
        "ok",
    ]))
    .unwrap();
    let rot = ust_ctl::trigger::parse_add_trigger(&args(&[
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
        "ok",
    ]))
    .unwrap();
    let long = "k".repeat(256);
    let with = |spec: &ust_ctl::trigger::TriggerSpec, session: &str, channel: &str, key: &str| {
        let mut s = spec.clone();
        s.actions = vec![ust_ctl::trigger::TriggerAction::IncrMapValue { session: session.into(), channel: channel.into(), key: key.into() }];
        s
    };
    let cases = [
        (with(&erm, "s", "m", "{nope}"), "unknown placeholder"),
        (with(&erm, "s", "m", "{event_name"), "without"),
        (with(&erm, "s", "m", "a}b"), "lone"),
        (with(&erm, "s", "m", ""), "empty"),
        (with(&erm, "s", "m", "a\nb"), "control"),
        (with(&erm, "s", "m", &long), "at most 255 bytes"),
        (with(&erm, "s", "m\nx", "k"), "invalid map channel name"),
        (with(&erm, "../s", "m", "k"), "session"),
        (with(&rot, "s", "m", "{event_name}"), "literal"),
        (with(&rot, "s", "m", &long), "at most 255 bytes"),
    ];
    for (spec, want) in cases {
        let what = format!("{:?}", spec.actions);
        match d.client().call(Ctl::AddTrigger { spec }) {
            Err(e) => assert!(e.to_string().contains(want), "{what}: {e}"),
            Ok(p) => panic!("{what}: accepted ({p:?})"),
        }
    }
    let listed = d.ust_ok(&["list-triggers"]);
    assert!(!listed.contains("incr-map-value"), "no bad trigger kept:\n{listed}");
    // The CLI says the same before sending anything.
    let o = d.ust(&[
        "add-trigger",
        "--condition=event-rule-matches",
        "--type=user",
        "--name=tp:tptest",
        "--action=incr-map-value",
        "-s",
        "s",
        "-t",
        "user",
        "-c",
        "m",
        "-k",
        &long,
    ]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("at most 255 bytes"), "{o:?}");
    // Still serving: a good trigger counts.
    d.client().call(Ctl::AddTrigger { spec: erm }).unwrap();
    d.ust_ok(&["start", "-s", "s"]);
    let o = Command::new(program_here("tptest")).env("UST_RUNDIR", &d.rundir).output().unwrap();
    assert!(o.status.success());
    assert_eq!(values(&d, "s"), ["ok|100"]);
}

/// An event whose expanded key would pass 255 bytes is not counted (LTTng-UST creates no
/// counter for it), and takes no key; one of exactly 255 bytes is counted.
#[test]
fn a_key_longer_than_255_bytes_is_not_counted() {
    let d = TestDaemon::start();
    session(&d, "s", &[]);
    // "tp:tptest" is 9 bytes.
    let fits = format!("{}{{event_name}}", "f".repeat(246));
    let over = format!("{}{{event_name}}", "o".repeat(247));
    count_trigger(&d, "s", "tp:tptest", &fits, &[]);
    count_trigger(&d, "s", "tp:tptest", &over, &[]);
    d.ust_ok(&["start", "-s", "s"]);
    let o = Command::new(program_here("tptest")).env("UST_RUNDIR", &d.rundir).output().unwrap();
    assert!(o.status.success());
    let key = format!("{}tp:tptest", "f".repeat(246));
    assert_eq!(key.len(), 255);
    assert_eq!(values(&d, "s"), [format!("{key}|100")]);
    assert!(d.log().contains("not counted: key over 255 bytes"), "{}", d.log());
}

/// A saved session whose `<map_channels>` the daemon would refuse halfway (two of one
/// name, a key count past the daemon's bound) is refused before anything is created: no
/// half-loaded session is left behind, and an existing one given to `--force` survives.
#[test]
fn a_hostile_map_channels_file_loads_nothing() {
    let d = TestDaemon::start();
    session(&d, "s", &["--max-key-count=7"]);
    d.ust_ok(&["enable-channel", "-s", "s", "chan"]);
    let dir = d.output("saved");
    d.ust_ok(&["save", "s", "-o", dir.to_str().unwrap()]);
    let good = std::fs::read_to_string(dir.join("s.lttng")).unwrap();
    assert!(good.contains("<max_entry_count>7</max_entry_count>"), "{good}");
    let start = good.find("<map_channel>").unwrap();
    let end = good.find("</map_channel>").unwrap() + "</map_channel>".len();
    let element = &good[start..end];
    let hostile = [
        ("duplicate", good.replace(element, &format!("{element}{element}")), "two map channels named"),
        ("absurd", good.replace("<max_entry_count>7<", "<max_entry_count>4294967295<"), "from 1 to 1048576"),
        ("past the bound", good.replace("<max_entry_count>7<", "<max_entry_count>1048577<"), "from 1 to 1048576"),
        ("truncated", good[..end - 5].to_string(), ""),
    ];
    for (label, text, want) in hostile {
        // With --force over an existing session: refused before that one is destroyed.
        let f = d.output(&format!("{}.lttng", label.replace(' ', "-")));
        std::fs::write(&f, &text).unwrap();
        let o = d.ust(&["load", "--force", "-i", f.to_str().unwrap()]);
        assert!(!o.status.success(), "{label}");
        let kept = d.ust_ok(&["list", "s"]);
        assert!(kept.contains("Max. key count: 7"), "{label}: the existing session was lost:\n{kept}");
        // Without it, into a daemon without the session: nothing is left.
        d.ust_ok(&["destroy", "-s", "s"]);
        let o = d.ust(&["load", "-i", f.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{label}: {o:?}");
        assert!(!session_names(&d).contains(&"s".to_string()), "{label}: a half-loaded session is left");
        d.ust_ok(&["load", "-i", dir.join("s.lttng").to_str().unwrap()]);
    }
    // One the parser cannot judge (the daemon's bound of 64 map channels): the daemon
    // refuses the 65th, and the half-made session is destroyed.
    let many: String = (0..65).map(|i| element.replace("<name>m</name>", &format!("<name>m{i}</name>"))).collect();
    let f = d.output("many.lttng");
    std::fs::write(&f, good.replace(element, &many)).unwrap();
    d.ust_ok(&["destroy", "-s", "s"]);
    let o = d.ust(&["load", "-i", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("at most 64 map channels") && err.contains("session s not loaded"), "{o:?}");
    assert!(!session_names(&d).contains(&"s".to_string()), "a half-loaded session is left");
}

/// The names of the daemon's sessions.
fn session_names(d: &TestDaemon) -> Vec<String> {
    match d.client().call(Ctl::ListSessions).unwrap() {
        ust_ctl::protocol::Payload::Sessions(list) => list.into_iter().map(|s| s.name).collect(),
        other => panic!("{other:?}"),
    }
}

/// Processes SIGKILLed at random points while four threads each count: with
/// `sum-into-shared`, the shared counter holds exactly what they emitted (each thread's
/// count, or one more when it was killed between the event and noting it); with `drop`,
/// nothing. Several processes at once, killed one after another.
#[test]
fn processes_killed_while_counting_are_summed_or_dropped_exactly() {
    let threads = 4u64;
    let procs = 4;
    // A small pseudo-random sequence of kill delays (ms), different on every run.
    let mut seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as u64 | 1;
    let mut next_delay = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % 40
    };
    for policy in ["sum-into-shared", "drop"] {
        let d = TestDaemon::start();
        session(&d, "s", &["--buffer-ownership=process", &format!("--dead-process-policy={policy}")]);
        count_trigger(&d, "s", "mapkill:ev", "{event_name}", &[]);
        d.ust_ok(&["start", "-s", "s"]);
        let mut emitted = 0u64;
        let mut children = Vec::new();
        for i in 0..procs {
            let file = d.output(&format!("progress-{i}"));
            let mut c = KillOnDrop(
                Command::new(program_here("mapkill"))
                    .args([file.to_str().unwrap(), &threads.to_string()])
                    .env("UST_RUNDIR", &d.rundir)
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap(),
            );
            let mut line = String::new();
            std::io::BufReader::new(c.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
            assert_eq!(line.trim(), "emitting");
            children.push((c, file));
        }
        for (mut c, file) in children {
            std::thread::sleep(Duration::from_millis(next_delay()));
            c.0.kill().unwrap();
            c.0.wait().unwrap();
            let bytes = std::fs::read(&file).unwrap();
            emitted += bytes.chunks(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())).sum::<u64>();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while !sql(&d, "s", "SELECT COUNT(*) FROM groups WHERE type = 'user-per-process';").iter().all(|c| c == "0") {
            assert!(Instant::now() < deadline, "{policy}: a dead process's group is still there; log:\n{}", d.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        let shared: i64 = sql(&d, "s", "SELECT COALESCE(SUM(value), 0) FROM vmap WHERE group_type = 'shared' AND key = 'mapkill:ev';")[0].parse().unwrap();
        if policy == "drop" {
            assert_eq!(shared, 0, "drop");
        } else {
            let max_extra = threads * procs as u64;
            assert!(
                (emitted..=emitted + max_extra).contains(&(shared as u64)),
                "sum-into-shared: {shared} counted, {emitted} emitted (+ at most {max_extra} not yet noted)"
            );
        }
        assert_eq!(sql(&d, "s", "SELECT COUNT(*) FROM vmap WHERE has_overflow = 1;"), ["0"]);
        d.ust_ok(&["destroy", "-s", "s"]);
    }
}
