//! Root's daemon traces every user's programs (issue 17, part 3), as LTTng's root session
//! daemon does: a program registers with its own user's daemon and with root's
//! (`$UST_SYSTEM_RUNDIR`, here a temporary directory), each independently.
//!
//! - Root's per-UID session traces the programs of two ordinary users at once, each in
//!   its own `ust/uid/<uid>/64-bit/`, read back by babeltrace2 event by event; `ust list
//!   --apps` on root's daemon shows both with their uid, and neither user's own daemon
//!   (which traces its user's program at the same time) sees the other's program.
//! - A root daemon that accepts the connection and never answers, or that is killed while
//!   the program runs, costs the program's own tracing nothing.
//!
//! The users are made here if missing (`scripts/test.sh` makes them too, as root); the
//! tests skip, saying why, when not run as root.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const USERS: [&str; 2] = ["ustuid-a", "ustuid-b"];
/// Events `holder N` emits before and after its pause (2N in all).
const N: u64 = 40;

fn skip_reason() -> Option<&'static str> {
    (!rustix::process::geteuid().is_root()).then_some("not root: cannot run programs as other users")
}

fn id_of(user: &str, flag: &str) -> u32 {
    let o = Command::new("id").args([flag, user]).output().unwrap();
    assert!(o.status.success(), "id {flag} {user}");
    String::from_utf8(o.stdout).unwrap().trim().parse().unwrap()
}

fn ensure_users() {
    static MADE: std::sync::Once = std::sync::Once::new();
    MADE.call_once(|| {
        for u in USERS {
            if !Command::new("id").arg(u).output().unwrap().status.success() {
                let o = Command::new("useradd").args(["-M", "--shell", "/usr/sbin/nologin", u]).output().unwrap();
                assert!(o.status.success(), "useradd {u}: {}", String::from_utf8_lossy(&o.stderr));
            }
        }
    });
}

/// Root's daemon in a temporary directory, and a home for each user beside it.
struct World {
    tmp: tempfile::TempDir,
    /// Root's socket directory (`UST_RUNDIR` of root's daemon, `UST_SYSTEM_RUNDIR` of the
    /// users).
    sys: PathBuf,
    daemon: Option<KillOnDrop>,
}

impl World {
    fn start() -> World {
        ensure_users();
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let sys = tmp.path().join("sys");
        std::fs::create_dir_all(tmp.path().join("root")).unwrap();
        let log = std::fs::File::create(tmp.path().join("root-daemon.log")).unwrap();
        let child = Command::new(consumerd_bin())
            .arg("--foreground")
            .env("UST_RUNDIR", &sys)
            .env("HOME", tmp.path().join("root"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let w = World { tmp, sys, daemon: Some(KillOnDrop(child)) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while ust_ctl::Client::connect(&w.sys).is_err() {
            assert!(Instant::now() < deadline, "root's daemon did not start: {}", w.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        for u in USERS {
            let home = w.home(u);
            std::fs::create_dir_all(&home).unwrap();
            std::os::unix::fs::chown(&home, Some(id_of(u, "-u")), Some(id_of(u, "-g"))).unwrap();
            std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        w
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("root-daemon.log")).unwrap_or_default()
    }

    fn home(&self, user: &str) -> PathBuf {
        self.tmp.path().join(user)
    }

    /// `ust ARGS` as root on root's daemon.
    fn root_ust(&self, args: &[&str]) -> String {
        let o = Command::new(ust_bin()).args(args).env("UST_RUNDIR", &self.sys).env("HOME", self.tmp.path().join("root")).output().unwrap();
        assert!(o.status.success(), "root: ust {args:?}: {}\nroot's daemon:\n{}", String::from_utf8_lossy(&o.stderr), self.log());
        String::from_utf8(o.stdout).unwrap()
    }

    /// `prog` as `user`, with its own `HOME` and `UST_RUNDIR`, and root's daemon as the
    /// system one.
    fn as_user(&self, user: &str, prog: &Path) -> Command {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", &id_of(user, "-u").to_string(), "--regid", &id_of(user, "-g").to_string(), "--init-groups", "--"])
            .arg(prog)
            .env("HOME", self.home(user))
            .env("UST_RUNDIR", self.home(user).join("run"))
            .env("UST_SYSTEM_RUNDIR", &self.sys)
            .env_remove("XDG_RUNTIME_DIR")
            .current_dir("/")
            .stdin(Stdio::null());
        c
    }

    /// `ust ARGS` as `user` (its own daemon, which `create` starts).
    fn user_ust(&self, user: &str, args: &[&str]) -> String {
        let o = self.as_user(user, Path::new(ust_bin())).args(args).output().unwrap();
        assert!(o.status.success(), "{user}: ust {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // The users' own daemons (started by their `ust create`), then root's.
        for u in USERS {
            if let Some(pid) = std::fs::read_to_string(self.home(u).join("run").join("pid")).ok().and_then(|p| p.trim().parse::<i32>().ok()) {
                // SAFETY: kill(2) of a daemon this test had started (its pid file).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        drop(self.daemon.take());
    }
}

/// `holder N` running as a user: pid, and its stdin (closing it lets it finish).
struct Holder {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
}

impl Holder {
    /// Starts `cmd` (a `holder N`) and waits for its `ready`.
    fn start(mut cmd: Command) -> Holder {
        let mut child: Child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
        let stdin = child.stdin.take();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "holder did not start");
        Holder { child: KillOnDrop(child), stdin }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Lets it emit its second half and exit; asserts it succeeded.
    fn finish(mut self) {
        let mut stdin = self.stdin.take().unwrap();
        let _ = stdin.flush();
        drop(stdin);
        let st = self.child.0.wait().unwrap();
        assert!(st.success(), "holder {}: {st}", self.pid());
    }
}

/// The `holder:ev` events of babeltrace2's text: `(vpid context or -1, i)`.
fn holder_events(text: &str) -> Vec<(i32, u64)> {
    text.lines()
        .filter(|l| l.contains(" holder:ev: "))
        .map(|l| {
            let vpid = l.split("vpid = ").nth(1).and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()).and_then(|v| v.parse().ok()).unwrap_or(-1);
            let i = l.rsplit("i = ").next().and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()).and_then(|v| v.parse().ok());
            (vpid, i.unwrap_or_else(|| panic!("no i in {l}")))
        })
        .collect()
}

/// Pids listed by `ust list --apps --json` with their uid.
fn apps(json: &str) -> Vec<(i32, u32)> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    v.as_array().unwrap().iter().map(|a| (a["pid"].as_i64().unwrap() as i32, a["uid"].as_u64().unwrap() as u32)).collect()
}

#[test]
fn roots_session_traces_two_users_at_once_each_in_its_uid_directory() {
    if let Some(r) = skip_reason() {
        eprintln!("skipped: {r}");
        return;
    }
    let w = World::start();
    let root_out = w.tmp.path().join("root").join("out");
    for args in [
        &["create", "sysw", "--buffers-uid", "--output", root_out.to_str().unwrap()][..],
        &["enable-event", "-a"],
        &["add-context", "-t", "vpid", "-t", "procname"],
        &["start"],
    ] {
        w.root_ust(args);
    }
    // Each user traces its own program with its own daemon at the same time.
    for u in USERS {
        let out = w.home(u).join("out");
        w.user_ust(u, &["create", "own", "--output", out.to_str().unwrap()]);
        w.user_ust(u, &["enable-event", "-a"]);
        w.user_ust(u, &["start"]);
    }
    let holder = program_here("holder");
    let holders: Vec<Holder> = USERS
        .iter()
        .map(|u| {
            let mut c = w.as_user(u, &holder);
            c.arg(N.to_string());
            Holder::start(c)
        })
        .collect();
    let pids: Vec<i32> = holders.iter().map(Holder::pid).collect();
    let uids: Vec<u32> = USERS.iter().map(|u| id_of(u, "-u")).collect();

    // Root's daemon sees both programs, with their uids; each user's only its own.
    let listed = apps(&w.root_ust(&["list", "--apps", "--json"]));
    for (pid, uid) in pids.iter().zip(&uids) {
        assert!(listed.contains(&(*pid, *uid)), "root's daemon lists {listed:?}, not {pid} of uid {uid}\n{}", w.log());
    }
    let text = w.root_ust(&["list", "--apps"]);
    for (pid, uid) in pids.iter().zip(&uids) {
        assert!(text.contains(&format!("PID: {pid} - Name: holder - UID: {uid}")), "{text}");
    }
    for (k, u) in USERS.iter().enumerate() {
        let own = apps(&w.user_ust(u, &["list", "--apps", "--json"]));
        assert_eq!(own, vec![(pids[k], uids[k])], "{u}'s own daemon lists {own:?}");
    }

    for h in holders {
        h.finish();
    }
    w.root_ust(&["stop"]);
    for u in USERS {
        w.user_ust(u, &["stop"]);
    }

    // Root's trace: one per-UID directory per user, with exactly that user's program's
    // events, complete and in order.
    let users: Vec<String> = std::fs::read_dir(root_out.join("ust").join("uid")).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    let mut want: Vec<String> = uids.iter().map(u32::to_string).collect();
    want.sort();
    let mut got = users.clone();
    got.sort();
    assert_eq!(got, want, "one per-UID trace per user");
    assert!(!root_out.join("ust").join("pid").exists(), "per-UID: no per-process trace");
    let all: Vec<u64> = (0..2 * N).collect();
    for (k, uid) in uids.iter().enumerate() {
        let dir = root_out.join("ust").join("uid").join(uid.to_string()).join("64-bit");
        let text = babeltrace(&dir);
        let evs = holder_events(&text);
        assert!(evs.iter().all(|(vpid, _)| *vpid == pids[k]), "uid {uid}'s trace holds another process's events:\n{text}");
        assert_eq!(evs.iter().map(|e| e.1).collect::<Vec<_>>(), all, "uid {uid}'s trace: holder {}'s sequence", pids[k]);
        assert!(text.contains("procname = \"holder\""), "{text}");
    }

    // Each user's own trace: its program only (one per-process directory), complete.
    for (k, u) in USERS.iter().enumerate() {
        let out = w.home(u).join("out");
        let procs: Vec<String> = std::fs::read_dir(out.join("ust").join("pid")).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(procs.len(), 1, "{u}'s trace: {procs:?}");
        assert!(procs[0].starts_with(&format!("holder-{}-", pids[k])), "{u}'s trace is of {procs:?}");
        let text = babeltrace(&out);
        let evs: Vec<_> = bt_events(&text).into_iter().filter(|e| e.name == "holder:ev").collect();
        assert!(evs.iter().all(|e| e.pid == pids[k]), "{u}'s trace holds another process's events:\n{text}");
        let seq: Vec<u64> = evs.iter().map(|e| fields_map(&e.fields)["i"].parse().unwrap()).collect();
        assert_eq!(seq, all, "{u}'s own trace");
    }
}

/// A root daemon that takes the connection and never answers, then one killed while the
/// program runs: the program's own daemon traces every event anyway, and the program ends
/// normally.
#[test]
fn a_stuck_or_dying_root_daemon_costs_the_own_tracing_nothing() {
    let d = TestDaemon::start();
    let out = d.output("own");
    d.session("s", &out, &[]);
    let holder = program_here("holder");

    // Stuck: a listening socket nobody accepts on (the registration is sent into the
    // backlog; no answer ever comes).
    let stuck = d.tmp.path().join("stuck");
    std::fs::create_dir_all(&stuck).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(stuck.join("app")).unwrap();
    let mut c = Command::new(&holder);
    c.arg(N.to_string())
        .env("UST_RUNDIR", &d.rundir)
        .env("HOME", d.home.path())
        .env("UST_SYSTEM_RUNDIR", &stuck)
        .env("UST_REGISTER_TIMEOUT", "300");
    let h = Holder::start(c);
    let stuck_pid = h.pid();
    h.finish();

    // Dying: a real second daemon as "root's", killed while the program waits.
    let sys = TestDaemon::start();
    sys.session("sys", &sys.output("sys"), &["--buffers-uid"]);
    let mut c = Command::new(&holder);
    c.arg(N.to_string()).env("UST_RUNDIR", &d.rundir).env("HOME", d.home.path()).env("UST_SYSTEM_RUNDIR", &sys.rundir);
    let h = Holder::start(c);
    let dying_pid = h.pid();
    let listed = sys.ust_json(&["list", "--apps", "--json"]);
    assert!(listed.as_array().unwrap().iter().any(|a| a["pid"] == dying_pid), "the second daemon did not see the program: {listed}");
    // SAFETY: kill(2) of the daemon this test started.
    unsafe { libc::kill(sys.pid(), libc::SIGKILL) };
    h.finish();

    d.ust_ok(&["stop", "-s", "s"]);
    let text = babeltrace(&out);
    let all: Vec<u64> = (0..2 * N).collect();
    for pid in [stuck_pid, dying_pid] {
        let seq: Vec<u64> =
            bt_events(&text).into_iter().filter(|e| e.name == "holder:ev" && e.pid == pid).map(|e| fields_map(&e.fields)["i"].parse().unwrap()).collect();
        assert_eq!(seq, all, "process {pid}: its own daemon's trace\n{}", d.log());
    }
}
