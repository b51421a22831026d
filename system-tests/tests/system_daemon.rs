//! Root's daemon traces every user's programs, as LTTng's root session
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

use system_tests as common;

use std::io::Write;
use std::process::{ChildStdin, Command, Stdio};

use common::users::{id_of, World};
use common::*;

const USERS: [&str; 2] = ["ustuid-a", "ustuid-b"];
/// Events `holder N` emits before and after its pause (2N in all).
const N: u64 = 40;

fn skip_reason() -> Option<&'static str> {
    (!rustix::process::geteuid().is_root()).then_some("not root: cannot run programs as other users")
}

/// Root's daemon in a temporary directory and the two users' homes beside it
/// ([`World`]), ready once its `ctl` socket answers.
fn world() -> World {
    World::start(USERS, ust_core::rundir::CTL_SOCKET, &[], &[])
}

/// `holder N` running as a user: pid, and its stdin (closing it lets it finish).
struct Holder {
    child: KillOnDrop,
    stdin: Option<ChildStdin>,
}

impl Holder {
    /// Starts `cmd` (a `holder N`) and waits for its `ready`.
    fn start(mut cmd: Command) -> Holder {
        let (mut child, _) = spawn_ready(cmd.stderr(Stdio::inherit()));
        let stdin = child.stdin.take();
        Holder { child, stdin }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Lets it emit its second half and exit; asserts it succeeded.
    fn finish(mut self) {
        let mut stdin = self.stdin.take().unwrap();
        let _ = stdin.flush();
        drop(stdin);
        let st = self.child.wait().unwrap();
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
    let w = world();
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
    let users: Vec<String> =
        std::fs::read_dir(root_out.join("ust").join("uid")).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
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
        let procs: Vec<String> =
            std::fs::read_dir(out.join("ust").join("pid")).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
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
    c.arg(N.to_string()).env("UST_RUNDIR", &d.rundir).env("HOME", d.home.path()).env("UST_SYSTEM_RUNDIR", &stuck).env("UST_REGISTER_TIMEOUT", "300");
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
