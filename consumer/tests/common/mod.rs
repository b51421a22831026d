//! The one helper for starting `ust-consumerd` in a temporary `$UST_RUNDIR` (killed on
//! drop, with any daemon a test made `ust` start there) and running `ust` against it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use consumer::control::Client;

/// A socket directory, a home directory, and maybe a daemon serving them.
pub struct TestDaemon {
    /// Holds `$UST_RUNDIR` (its `run/` subdirectory, which the daemon creates 0700).
    pub tmp: tempfile::TempDir,
    /// `$UST_RUNDIR`.
    pub rundir: PathBuf,
    /// `$HOME` for the commands (default outputs land here).
    pub home: tempfile::TempDir,
    child: Option<Child>,
}

pub fn ust_bin() -> &'static str {
    env!("CARGO_BIN_EXE_ust")
}

pub fn consumerd_bin() -> &'static str {
    env!("CARGO_BIN_EXE_ust-consumerd")
}

impl TestDaemon {
    /// Directories only; no daemon (for "none runs" tests and for `create` starting one).
    pub fn without_daemon() -> TestDaemon {
        let tmp = tempfile::tempdir().unwrap();
        let rundir = tmp.path().join("run");
        TestDaemon { tmp, rundir, home: tempfile::tempdir().unwrap(), child: None }
    }

    /// Starts `ust-consumerd --foreground` and waits until its `ctl` socket answers.
    pub fn start() -> TestDaemon {
        let mut d = TestDaemon::without_daemon();
        let log = std::fs::File::create(d.home.path().join("consumerd.log")).unwrap();
        let child = Command::new(consumerd_bin())
            .arg("--foreground")
            .env("UST_RUNDIR", d.rundir.as_path())
            .env("HOME", d.home.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn ust-consumerd");
        d.child = Some(child);
        d.wait_ready();
        d
    }

    /// Waits (5 s at most) until a daemon answers.
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Client::connect(self.rundir.as_path()).is_err() {
            assert!(Instant::now() < deadline, "ust-consumerd did not come up; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The daemon's log so far (foreground: its stderr; daemonized: consumerd.log).
    pub fn log(&self) -> String {
        let a = std::fs::read_to_string(self.home.path().join("consumerd.log")).unwrap_or_default();
        let b = std::fs::read_to_string(self.rundir.as_path().join("consumerd.log")).unwrap_or_default();
        a + &b
    }

    /// A control connection.
    pub fn client(&self) -> Client {
        Client::connect(self.rundir.as_path()).expect("connect to ctl")
    }

    /// A `ust` command with this directory's environment.
    pub fn ust_cmd(&self) -> Command {
        let mut c = Command::new(ust_bin());
        c.env("UST_RUNDIR", self.rundir.as_path()).env("HOME", self.home.path()).stdin(Stdio::null());
        c
    }

    /// Runs `ust ARGS` and returns its output.
    pub fn ust(&self, args: &[&str]) -> Output {
        self.ust_cmd().args(args).output().expect("run ust")
    }

    /// Runs `ust ARGS`, asserts success, returns stdout.
    pub fn ust_ok(&self, args: &[&str]) -> String {
        let o = self.ust(args);
        assert!(o.status.success(), "ust {args:?} failed: {}\n{}\nlog:\n{}", o.status, String::from_utf8_lossy(&o.stderr), self.log());
        String::from_utf8(o.stdout).unwrap()
    }

    /// Runs `ust ARGS --json`-style commands and parses stdout.
    pub fn ust_json(&self, args: &[&str]) -> serde_json::Value {
        serde_json::from_str(&self.ust_ok(args)).expect("JSON output")
    }

    /// Path of socket `name`.
    pub fn socket(&self, name: &str) -> PathBuf {
        self.rundir.as_path().join(name)
    }

    /// A fresh output directory under the temporary home.
    pub fn output(&self, name: &str) -> PathBuf {
        self.home.path().join(name)
    }
}

/// True while `pid` exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

fn kill_and_wait(pid: i32) {
    // SAFETY: kill(2) with a pid we started (directly or through `ust create`).
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        // Reap if it is our child (a zombie still answers kill(pid, 0)).
        // SAFETY: waitpid with WNOHANG on a pid; harmless if it is not our child.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
    }
    if alive(pid) {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            kill_and_wait(c.id() as i32);
            let _ = c.wait();
        }
        if let Ok(s) = std::fs::read_to_string(self.rundir.as_path().join("pid")) {
            if let Ok(pid) = s.trim().parse::<i32>() {
                if pid > 0 {
                    kill_and_wait(pid);
                }
            }
        }
    }
}

/// Runs babeltrace2 on `dir`; returns stdout, panicking with stderr on failure.
pub fn babeltrace(dir: &Path) -> String {
    let o = Command::new("babeltrace2").arg(dir).output().expect("babeltrace2 is installed");
    assert!(o.status.success(), "babeltrace2 {} failed:\n{}", dir.display(), String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("ERROR") && !err.contains("WARN"), "babeltrace2 complained:\n{err}");
    String::from_utf8(o.stdout).unwrap()
}
