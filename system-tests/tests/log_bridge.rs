//! The `log` bridge (`ust::log::init()`, cargo feature `log` of `ust`): the records of
//! examples/testprogs/src/bin/logprog.rs traced through the daemon and the CLI and read back
//! by babeltrace2 field by field, and `log`'s maximum level following the sessions.

use system_tests as common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{babeltrace, bt_events, fields_map, program, KillOnDrop, TestDaemon};

const SOURCE: &str = include_str!("../../examples/testprogs/src/bin/logprog.rs");
const FILE: &str = "examples/testprogs/src/bin/logprog.rs";

/// The line of logprog.rs holding `needle` (1-based).
fn line_of(needle: &str) -> usize {
    SOURCE.lines().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle:?} in logprog.rs")) + 1
}

/// One record as babeltrace2 prints it: `(event name, payload)`.
fn record(level: &str, needle: &str, msg: &str, target: &str, module: &str) -> (String, String) {
    (
        format!("ust_log:TRACE_{level}"),
        format!(
            "line = {}, file = \"{FILE}\", func = \"{module}\", _msg_length = {}, msg = \"{msg}\", target = \"{target}\", module_path = \"{module}\"",
            line_of(needle),
            msg.len()
        ),
    )
}

fn logged(out: &Path) -> Vec<(String, String)> {
    bt_events(&babeltrace(out)).into_iter().filter(|e| e.name.starts_with("ust_log:")).map(|e| (e.name, e.fields)).collect()
}

#[test]
fn every_log_record_reads_back_with_its_level_target_and_line() {
    let d = TestDaemon::start();
    let out = d.output("log");
    let o = d.ust_cmd().arg("trace").arg("--output").arg(&out).arg("--").arg(program("debug", "logprog")).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}\n{}", d.log());
    assert_eq!(String::from_utf8_lossy(&o.stdout), "max_level TRACE\n", "`ust trace` enables every level");
    let lib = "logprog::netlib";
    let want = [
        record("INFO", "connecting to", "connecting to db.local:5432", lib, lib),
        record("DEBUG_LINE", "handshake of", "handshake of 517 bytes", "netlib::wire", lib),
        record("DEBUG", "socket options set", "socket options set", lib, lib),
        record("WARNING", "retrying in", "retrying in 250 ms", "logprog", "logprog"),
        record("ERR", "connection refused", "connection refused (code 111)", lib, lib),
    ];
    let got = logged(&out);
    assert_eq!(got, want, "{}", babeltrace(&out));
    // Each field as its own value too, so a layout change names the field that moved.
    let f = fields_map(&got[1].1);
    assert_eq!(f["target"], "\"netlib::wire\"");
    assert_eq!(f["line"], line_of("handshake of").to_string());
}

#[test]
fn log_max_level_follows_the_enabled_levels() {
    let d = TestDaemon::start();
    let out = d.output("log-levels");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "ust_log:*", "--loglevel", "warning"]);
    d.ust_ok(&["start"]);
    let o = Command::new(program("debug", "logprog")).env("UST_RUNDIR", d.rundir.as_path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "max_level WARN\n");
    d.ust_ok(&["destroy"]);
    let lib = "logprog::netlib";
    let want = [
        record("WARNING", "retrying in", "retrying in 250 ms", "logprog", "logprog"),
        record("ERR", "connection refused", "connection refused (code 111)", lib, lib),
    ];
    assert_eq!(logged(&out), want, "info, debug and trace are below --loglevel warning\n{}", babeltrace(&out));
}

#[test]
fn with_no_session_log_is_switched_off() {
    let d = TestDaemon::start();
    let o = Command::new(program("debug", "logprog")).env("UST_RUNDIR", d.rundir.as_path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "max_level OFF\n", "no session enables a ust_log event");
}

#[test]
fn log_max_level_is_raised_when_a_session_starts_while_the_program_runs() {
    let d = TestDaemon::start();
    let out = d.output("log-late");
    let mut child = KillOnDrop(
        Command::new(program("debug", "logprog"))
            .arg("wait")
            .env("UST_RUNDIR", d.rundir.as_path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || lines.next().expect("a line").expect("stdout");
    assert_eq!(next(), "max_level OFF");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "ust_log:*", "--loglevel", "info"]);
    d.ust_ok(&["start"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        writeln!(stdin, "level").unwrap();
        let l = next();
        if l == "max_level INFO" {
            break;
        }
        assert_eq!(l, "max_level OFF", "only OFF until the session's masks arrive");
        assert!(Instant::now() < deadline, "log::max_level() never followed the session");
        std::thread::sleep(Duration::from_millis(20));
    }
    writeln!(stdin, "log").unwrap();
    assert_eq!(next(), "logged");
    d.ust_ok(&["stop"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        writeln!(stdin, "level").unwrap();
        let l = next();
        if l == "max_level OFF" {
            break;
        }
        assert_eq!(l, "max_level INFO");
        assert!(Instant::now() < deadline, "log::max_level() stayed up after the session stopped");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    d.ust_ok(&["destroy"]);
    let lib = "logprog::netlib";
    let want = [
        record("INFO", "connecting to", "connecting to db.local:5432", lib, lib),
        record("WARNING", "retrying in", "retrying in 250 ms", "logprog", "logprog"),
        record("ERR", "connection refused", "connection refused (code 111)", lib, lib),
    ];
    assert_eq!(logged(&out), want, "{}", babeltrace(&out));
}
