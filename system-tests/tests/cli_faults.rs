//! "The tracer never harms the program it traces", for the `ust` command: every command
//! ends (a stopped daemon is an error naming its pid, a closed stdout a quiet exit 141),
//! `ust trace` refuses options it does not know, event names are checked as LTTng checks
//! them, and `ust view` / `ust report` never change a trace unless asked.

use system_tests as common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{babeltrace, output_within, program, TestDaemon};

/// `ust trace --output OUT -- allfields`: a small trace with every field type.
fn small_trace(d: &TestDaemon, name: &str) -> PathBuf {
    let out = d.output(name);
    let o = d.ust_cmd().arg("trace").arg("--output").arg(&out).arg("--").arg(program("debug", "allfields")).output().unwrap();
    assert!(o.status.success(), "ust trace: {}\n{}", String::from_utf8_lossy(&o.stderr), d.log());
    out
}

/// The largest stream file of the one process trace under `out`.
fn largest_stream(out: &Path) -> PathBuf {
    let dir = std::fs::read_dir(out.join("ust/pid")).unwrap().next().unwrap().unwrap().path();
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.file_name().unwrap() != "metadata")
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap()
}

/// Sends SIGCONT to the daemon when dropped, so a failing test does not leave it stopped.
struct Resume(i32);

impl Drop for Resume {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.0) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::CONT);
        }
    }
}

#[test]
fn a_stopped_daemon_makes_commands_fail_naming_its_pid() {
    let d = TestDaemon::start();
    d.ust_ok(&["create", "s", "--output", d.output("o").to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-a"]);
    d.ust_ok(&["start"]);
    let pid = d.pid();
    let resume = Resume(pid);
    rustix::process::kill_process(rustix::process::Pid::from_raw(pid).unwrap(), rustix::process::Signal::STOP).unwrap();
    for args in [&["list"][..], &["status"], &["stop"], &["list", "--apps", "--json"]] {
        let mut cmd = d.ust_cmd();
        cmd.args(args).env("UST_CTL_TIMEOUT_MS", "500");
        // The daemon stays stopped: only the reply timeout can end the command (the
        // message below says it did); the limit is a hang guard.
        let o = output_within(cmd, Duration::from_secs(120));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "ust {args:?}: {err}");
        assert!(err.contains(&format!("ust-consumerd (pid {pid}) did not answer within 500 ms")), "ust {args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    drop(resume);
    // Resumed, it answers again (the stop above never reached it, or did: either way).
    let st = d.ust_json(&["status", "--json"]);
    assert_eq!(st["current"], "s");
}

#[test]
fn trace_keeps_its_connection_while_the_command_runs_longer_than_the_timeout() {
    let d = TestDaemon::start();
    let out = d.output("t");
    // The reply timeout bounds each reply, not the time the command takes.
    let script = format!("sleep 1; exec {}", program("debug", "allfields").display());
    let mut cmd = d.ust_cmd();
    cmd.args(["trace", "--output", out.to_str().unwrap(), "--", "sh", "-c", &script]).env("UST_CTL_TIMEOUT_MS", "200");
    let o = output_within(cmd, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("ust: trace written to") && !err.contains("did not answer"), "{err}");
    assert!(babeltrace(&out).contains("allprov:ints"));
}

/// Runs `cmd` with its stdout a pipe whose read end is already closed.
fn with_closed_stdout(mut cmd: Command) -> Output {
    let (r, w) = rustix::pipe::pipe().unwrap();
    drop(r);
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::from(w)).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            let _ = rustix::process::kill_process(rustix::process::Pid::from_raw(pid).unwrap(), rustix::process::Signal::KILL);
            panic!("{cmd:?} did not end");
        }
    }
}

#[test]
fn a_closed_stdout_ends_every_printing_command_quietly() {
    let d = TestDaemon::start();
    let trace = small_trace(&d, "t");
    d.ust_ok(&["create", "s", "--output", d.output("o").to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-a"]);
    let t = trace.to_str().unwrap();
    for args in [
        &["list"][..],
        &["list", "--json"],
        &["list", "s"],
        &["list", "--apps"],
        &["list", "--apps", "--json"],
        &["status"],
        &["status", "--json"],
        &["view", t],
        &["report", t],
        &["report", t, "--format", "json"],
        &["--help"],
    ] {
        let mut cmd = d.ust_cmd();
        cmd.args(args);
        let o = with_closed_stdout(cmd);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("panicked"), "ust {args:?} panicked: {err}");
        if args != ["--help"] {
            assert_eq!(o.status.code(), Some(141), "ust {args:?}: 128 + SIGPIPE, as a shell reports a tool SIGPIPE ended: {:?} {err}", o.status);
            assert!(err.is_empty(), "ust {args:?} ends quietly: {err}");
        }
    }
}

#[test]
fn trace_refuses_options_it_does_not_know() {
    let d = TestDaemon::start();
    for bad in ["--buffers-uidd", "--kernal", "-z"] {
        let o = d.ust(&["trace", bad, "--", "true"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "ust trace {bad}: {err}");
        assert!(err.contains(bad) && err.contains("Usage"), "ust trace {bad}: {err}");
        assert!(!err.contains("cannot run"), "{err}");
    }
    // The command starts at `--`, or at the first word that is not an option of trace:
    // what follows is the command's, hyphens and all.
    let out = d.output("a");
    let o = d.ust(&["trace", "-o", out.to_str().unwrap(), "--", "sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(3), "{}", String::from_utf8_lossy(&o.stderr));
    let out = d.output("b");
    let o = d.ust(&["trace", "-o", out.to_str().unwrap(), "sh", "-c", "exit 4", "--kernal"]);
    assert_eq!(o.status.code(), Some(4), "{}", String::from_utf8_lossy(&o.stderr));
    let out = d.output("c");
    let o = d.ust(&["trace", "--output", out.to_str().unwrap(), "--event", "allprov:*", program("debug", "allfields").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(babeltrace(&out).contains("allprov:ints"));
}

#[test]
fn event_names_are_checked_as_lttng_checks_them() {
    let d = TestDaemon::start();
    d.ust_ok(&["create", "s", "--output", d.output("o").to_str().unwrap()]);
    for bad in [":", "a:b:c", "a:", ":b", "app:*:x", "a,:b"] {
        let o = d.ust(&["enable-event", bad]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "ust enable-event {bad:?}: {err}");
        assert!(err.contains("invalid event name"), "ust enable-event {bad:?}: {err}");
    }
    let o = d.ust(&["enable-event", "app:*", "--exclude", "app:x:y"]);
    assert_eq!(o.status.code(), Some(2), "an exclusion is an event name too: {}", String::from_utf8_lossy(&o.stderr));
    for good in ["*", "app:*", "*:x", "app:name", "lib*", r"a\:b:c"] {
        d.ust_ok(&["enable-event", good]);
    }
    let detail = d.ust_json(&["list", "s", "--json"]);
    let patterns: Vec<&str> = detail["channels"][0]["enablers"].as_array().unwrap().iter().map(|e| e["pattern"].as_str().unwrap()).collect();
    assert_eq!(patterns, ["*", "app:*", "*:x", "app:name", "lib*", r"a\:b:c"]);
    // The daemon checks the same way, whatever the client.
    for bad in [":", "a:b:c", "a:", ":b"] {
        let r = d.client().call(ust_ctl::protocol::Command::EnableEvent {
            session: None,
            channel: None,
            patterns: vec![bad.into()],
            level: ust_ctl::config::LevelFilter::Any,
            exclusions: Vec::new(),
            filter: None,
        });
        assert!(matches!(&r, Err(ust_ctl::ClientError::Daemon(m)) if m.contains("invalid event name")), "{bad:?}: {r:?}");
    }
}

#[test]
fn view_of_random_bytes_is_an_error_and_changes_nothing() {
    let d = TestDaemon::start();
    let out = small_trace(&d, "t");
    let stream = largest_stream(&out);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..8192)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&stream, &noise).unwrap();
    for args in [&["view"][..], &["view", "--repair"]] {
        let o = d.ust_cmd().args(args).arg(&out).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "ust {args:?}: {err}");
        assert!(err.contains(&stream.display().to_string()) && err.contains("not a readable CTF stream"), "ust {args:?}: {err}");
        assert_eq!(std::fs::read(&stream).unwrap(), noise, "ust {args:?} changed the file");
    }
}

#[test]
fn view_reads_up_to_a_cut_off_tail_and_cuts_it_only_with_repair() {
    let d = TestDaemon::start();
    let out = small_trace(&d, "t");
    let before = babeltrace(&out);
    let stream = largest_stream(&out);
    let whole = std::fs::read(&stream).unwrap();
    assert!(whole.len() >= 1500, "{}: {} bytes", stream.display(), whole.len());
    // What a kill in the middle of a packet's write leaves: the start of a packet.
    let cut: Vec<u8> = [&whole[..], &whole[..1500]].concat();
    std::fs::write(&stream, &cut).unwrap();

    let o = d.ust_cmd().arg("view").arg(&out).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("warning") && err.contains("cut off") && err.contains(&stream.display().to_string()), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), before, "every whole packet is read");
    assert_eq!(std::fs::read(&stream).unwrap(), cut, "ust view without --repair changes nothing");

    let o = d.ust_cmd().arg("view").arg("--repair").arg(&out).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), before);
    let side = stream.parent().unwrap().join("removed").join(format!("{}.removed-{}", stream.file_name().unwrap().to_str().unwrap(), whole.len()));
    assert!(err.contains("cut 1500 bytes of an unfinished packet") && err.contains(&side.display().to_string()), "{err}");
    assert_eq!(std::fs::read(&stream).unwrap(), whole, "only the tail is cut");
    assert_eq!(std::fs::read(&side).unwrap(), &whole[..1500], "the bytes cut are kept");
    assert_eq!(babeltrace(&out), before, "babeltrace2 reads the repaired trace without a warning");
}

#[test]
fn report_on_empty_or_unparsable_metadata_fails() {
    let d = TestDaemon::start();
    let out = small_trace(&d, "t");
    let ok = d.ust(&["report", out.to_str().unwrap()]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let meta = largest_stream(&out).with_file_name("metadata");
    for (what, text) in [("empty", ""), ("unparsable", "this is not TSDL\n\u{1}\u{2}")] {
        std::fs::write(&meta, text).unwrap();
        let o = d.ust(&["report", out.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{what} metadata: {err}\n{}", String::from_utf8_lossy(&o.stdout));
        assert!(err.contains(&meta.display().to_string()) && err.contains("metadata"), "{what}: {err}");
        assert!(!String::from_utf8_lossy(&o.stdout).contains("traced pid -1"), "{what}");
    }
}

/// A signal sent to `ust trace` itself (kill, SI_USER) is forwarded to the command once;
/// (one the terminal sends to the whole foreground group, SI_KERNEL, reaches the command
/// directly and is not sent twice).
#[test]
fn trace_forwards_a_killed_signal_once() {
    let d = TestDaemon::start();
    let out = d.output("sig");
    let mut cmd = d.ust_cmd();
    cmd.args([
        "trace",
        "--output",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "n=0; trap 'n=$((n+1)); echo TERM $n' TERM; sleep 3 & wait; sleep 0.3 & wait; echo done $n",
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let o = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("TERM 1") && stdout.contains("done 1"), "the command got the signal exactly once: {stdout} {}", String::from_utf8_lossy(&o.stderr));
}
