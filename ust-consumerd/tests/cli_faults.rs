//! "The tracer never harms the program it traces", for the `ust` command: every command
//! ends (a stopped daemon is an error naming its pid, a closed stdout a quiet exit 141).

mod common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{output_within, program, TestDaemon};

/// `ust trace --output OUT -- allfields`: a small trace with every field type.
fn small_trace(d: &TestDaemon, name: &str) -> PathBuf {
    let out = d.output(name);
    let o = d.ust_cmd().arg("trace").arg("--output").arg(&out).arg("--").arg(program("debug", "allfields")).output().unwrap();
    assert!(o.status.success(), "ust trace: {}\n{}", String::from_utf8_lossy(&o.stderr), d.log());
    out
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
        let t0 = Instant::now();
        let o = output_within(cmd, Duration::from_secs(10));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "ust {args:?}: {err}");
        assert!(t0.elapsed() < Duration::from_secs(5), "ust {args:?} took {:?}", t0.elapsed());
        assert!(err.contains(&format!("ust-consumerd (pid {pid}) did not answer within 500 ms")), "ust {args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    drop(resume);
    // Resumed, it answers again (the stop above never reached it, or did: either way).
    let st = d.ust_json(&["status", "--json"]);
    assert_eq!(st["current"], "s");
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
