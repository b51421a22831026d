//! The `ust` command against a real daemon: argument errors, no daemon, session round
//! trips with `--json`, and a malformed control message.

use system_tests as common;

use std::io::Write;
use std::os::unix::net::UnixStream;

use common::TestDaemon;
use ust_ctl::protocol::{Command, Payload, Reply};

#[test]
fn argument_errors_exit_2() {
    let d = TestDaemon::without_daemon();
    for args in [
        &[][..],
        &["bogus"],
        &["enable-channel"],
        &["enable-event"],
        &["enable-event", "--loglevel", "nope", "a:b"],
        &["enable-event", "-a", "--loglevel", "1", "--loglevel-only", "2"],
        &["enable-channel", "c", "--subbuf-size", "5000"],
        &["enable-channel", "c", "--num-subbuf", "3"],
        &["enable-channel", "c", "--overwrite", "--discard"],
        &["trace"],
        &["list", "--nope"],
    ] {
        let o = d.ust(args);
        assert_eq!(o.status.code(), Some(2), "ust {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("Usage") || err.contains("--help"), "ust {args:?} prints usage: {err}");
    }
}

#[test]
fn commands_without_a_daemon_say_how_to_start_one() {
    let d = TestDaemon::without_daemon();
    for args in [&["list"][..], &["start"], &["status"], &["enable-event", "-a"], &["list", "--apps"], &["destroy", "x"]] {
        let o = d.ust(args);
        assert_eq!(o.status.code(), Some(1), "ust {args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("no ust-consumerd is running"), "ust {args:?}: {err}");
        assert!(err.contains("ust-consumerd --daemonize"), "ust {args:?}: {err}");
    }
    assert!(!d.socket("ctl").exists(), "no daemon was started");
}

#[test]
fn create_starts_the_daemon_and_not_supported_options_fail() {
    let d = TestDaemon::without_daemon();
    let out = d.output("o");
    let stdout = d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    assert!(stdout.contains("Session s created"), "{stdout}");
    d.wait_ready();
    assert!(d.rundir.as_path().join("pid").exists());
    let list = d.ust_json(&["list", "--json"]);
    assert_eq!(list[0]["name"], "s");
    // Default name and output.
    let stdout = d.ust_ok(&["create"]);
    assert!(stdout.contains("Session auto-"), "{stdout}");
    assert!(stdout.contains(&format!("{}/ust-traces/auto-", d.home.path().display())), "{stdout}");
}

#[test]
fn session_round_trip() {
    let d = TestDaemon::start();
    let out = d.output("trace");
    d.ust_ok(&["create", "s1", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "c1", "--subbuf-size", "8k", "--num-subbuf", "4", "--read-timer", "5000", "-u"]);
    d.ust_ok(&["enable-event", "-u", "-a"]);
    d.ust_ok(&["enable-event", "-c", "c1", "app:*,lib:x", "--loglevel", "TRACE_WARNING"]);

    let sessions = d.ust_json(&["list", "--json"]);
    assert_eq!(sessions.as_array().unwrap().len(), 1);
    assert_eq!(sessions[0]["name"], "s1");
    assert_eq!(sessions[0]["current"], true);
    assert_eq!(sessions[0]["active"], false);

    let detail = d.ust_json(&["list", "s1", "--json"]);
    let chans = detail["channels"].as_array().unwrap();
    assert_eq!(chans.len(), 2);
    assert_eq!(chans[0]["name"], "c1");
    assert_eq!(chans[0]["config"]["subbuf_size"], 8192);
    assert_eq!(chans[0]["config"]["num_subbuf"], 4);
    assert_eq!(chans[0]["enablers"].as_array().unwrap().len(), 2);
    assert_eq!(chans[0]["enablers"][0]["pattern"], "app:*");
    assert_eq!(chans[1]["name"], "channel0");
    assert_eq!(chans[1]["enablers"][0]["pattern"], "*");
    assert_eq!(chans[1]["discarded"], 0);

    d.ust_ok(&["start"]);
    let st = d.ust_json(&["status", "--json"]);
    assert_eq!(st["current"], "s1");
    assert_eq!(st["session"]["summary"]["active"], true);
    let o = d.ust(&["enable-channel", "late"]);
    assert_eq!(o.status.code(), Some(1), "no channel after start");
    let o = d.ust(&["start"]);
    assert_eq!(o.status.code(), Some(1), "already started");

    d.ust_ok(&["disable-event", "-c", "c1", "lib:x"]);
    let o = d.ust(&["disable-event", "-c", "c1", "nope:nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not enabled"));
    let detail = d.ust_json(&["list", "s1", "--json"]);
    assert_eq!(detail["channels"][0]["enablers"][1]["enabled"], false);

    d.ust_ok(&["stop", "s1"]);
    assert_eq!(d.ust_json(&["status", "--json"])["session"]["summary"]["active"], false);
    let text = d.ust_ok(&["list", "s1"]);
    assert!(text.contains("Tracing session s1: [inactive]"), "{text}");
    d.ust_ok(&["destroy"]);
    assert_eq!(d.ust_json(&["list", "--json"]).as_array().unwrap().len(), 0);
    assert!(d.ust_json(&["status", "--json"])["current"].is_null());

    for (args, needle) in [(&["start", "-s", "nope"][..], "no session named"), (&["start"], "no current session"), (&["list", "nope"], "no session named")] {
        let o = d.ust(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(needle), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    d.ust_ok(&["create", "s2", "--output", out.to_str().unwrap()]);
    let o = d.ust(&["enable-event", "-c", "nochan", "a:b"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no channel"));
    let o = d.ust(&["create", "s2"]);
    assert_eq!(o.status.code(), Some(1), "duplicate session name");
    let apps = d.ust_json(&["list", "--apps", "--json"]);
    assert_eq!(apps.as_array().unwrap().len(), 0);
}

#[test]
fn malformed_control_messages_get_an_error_and_the_daemon_goes_on() {
    let d = TestDaemon::start();
    let mut s = UnixStream::connect(d.socket("ctl")).unwrap();
    s.write_all(&5u32.to_le_bytes()).unwrap();
    s.write_all(b"{bad}").unwrap();
    let r: Reply = ust_core::protocol::read_frame(&s).unwrap();
    assert!(matches!(r, Reply::Error { ref message } if message.contains("malformed")), "{r:?}");
    // Oversized frame.
    let mut s = UnixStream::connect(d.socket("ctl")).unwrap();
    s.write_all(&u32::MAX.to_le_bytes()).unwrap();
    let r: Reply = ust_core::protocol::read_frame(&s).unwrap();
    assert!(matches!(r, Reply::Error { .. }));
    // Wrong version.
    let s = UnixStream::connect(d.socket("ctl")).unwrap();
    ust_core::protocol::write_frame(&s, &ust_ctl::protocol::Request { version: 99, command: Command::Ping }).unwrap();
    let r: Reply = ust_core::protocol::read_frame(&s).unwrap();
    assert!(matches!(r, Reply::Error { ref message } if message.contains("version")), "{r:?}");
    // Still serving.
    assert!(matches!(d.client().call(Command::Ping), Ok(Payload::Pong { version: 1, .. })));
    d.ust_ok(&["list"]);
}
