//! Permissions, with real users: two unprivileged
//! users each run their own daemon and a traced program, and neither can connect to,
//! list, or read the other's daemon, sessions or traces, nor get events into the other's
//! session; the daemon's `SO_PEERCRED` check refuses a peer that gets past the file
//! modes. Root's daemon is system-wide: it traces an ordinary user's program, takes
//! control commands from a member of group `tracing`, and refuses a user outside it.
//!
//! Needs root (to create users and switch to them). The test creates users
//! `ustperm-a`, `ustperm-b`, `ustperm-c` and `ustperm-t` and group `tracing`
//! (idempotently; `scripts/test.sh` runs as root in CI). Not root: skipped with a printed
//! reason. Any other missing precondition fails.

use system_tests as common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{babeltrace, bt_events, consumerd_bin, program, ust_bin};

fn sh(cmd: &str, args: &[&str]) -> Output {
    let o = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(o.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o
}

fn id_of(user: &str, flag: &str) -> u32 {
    String::from_utf8(sh("id", &[flag, user]).stdout).unwrap().trim().parse().unwrap()
}

/// Creates `user` (no home, no login) if missing; adds it to `tracing` when asked.
fn ensure_user(user: &str, tracing: bool) {
    if !Command::new("id").arg(user).output().unwrap().status.success() {
        sh("useradd", &["--no-create-home", "--shell", "/usr/sbin/nologin", user]);
    }
    if tracing {
        sh("usermod", &["-aG", "tracing", user]);
    }
}

/// A command run as `user` (its uid, primary gid and supplementary groups) with `HOME`
/// and `UST_RUNDIR` set.
fn as_user(user: &str, home: &Path, rundir: &Path, prog: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--reuid", &id_of(user, "-u").to_string(), "--regid", &id_of(user, "-g").to_string(), "--init-groups", "--"])
        .arg(prog)
        .env("HOME", home)
        .env("UST_RUNDIR", rundir)
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(Stdio::null());
    c
}

/// One user's world: a home (0700, theirs), a socket directory inside it, an output dir.
struct Place {
    user: String,
    home: PathBuf,
    rundir: PathBuf,
    out: PathBuf,
    daemon: Option<Child>,
}

impl Place {
    fn new(base: &Path, user: &str) -> Place {
        let home = base.join(user);
        std::fs::create_dir_all(&home).unwrap();
        if user != "root" {
            let (uid, gid) = (id_of(user, "-u"), id_of(user, "-g"));
            std::os::unix::fs::chown(&home, Some(uid), Some(gid)).unwrap();
            std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        Place { user: user.into(), rundir: home.join("run"), out: home.join("out"), home, daemon: None }
    }

    fn cmd(&self, prog: &Path) -> Command {
        if self.user == "root" {
            let mut c = Command::new(prog);
            c.env("HOME", &self.home).env("UST_RUNDIR", &self.rundir).stdin(Stdio::null());
            c
        } else {
            as_user(&self.user, &self.home, &self.rundir, prog)
        }
    }

    fn ust(&self, args: &[&str]) -> Output {
        self.cmd(Path::new(ust_bin())).args(args).output().unwrap()
    }

    fn ust_ok(&self, args: &[&str]) -> String {
        let o = self.ust(args);
        assert!(o.status.success(), "{} ust {args:?}: {}", self.user, String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    }

    fn start_daemon(&mut self) {
        let log = std::fs::File::create(self.home.join("consumerd.log")).unwrap();
        let child = self.cmd(Path::new(consumerd_bin())).arg("--foreground").stdout(Stdio::null()).stderr(log).spawn().unwrap();
        self.daemon = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while UnixStream::connect(self.rundir.join("ctl")).is_err() {
            assert!(
                Instant::now() < deadline,
                "{}'s daemon did not start: {}",
                self.user,
                std::fs::read_to_string(self.home.join("consumerd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A started session `name` with every event enabled, writing to `self.out`.
    fn session(&self, name: &str) {
        self.ust_ok(&["create", name, "--output", self.out.to_str().unwrap()]);
        self.ust_ok(&["enable-event", "-a"]);
        self.ust_ok(&["start"]);
    }

    /// Runs `threeevents` as this user against the daemon of `target`; returns its pid.
    fn run_program(&self, target: &Path) -> u32 {
        let mut c = self.cmd(&program("debug", "threeevents"));
        c.env("UST_RUNDIR", target).env("UST_REGISTER_TIMEOUT", "2000");
        let child = c.spawn().unwrap();
        let pid = child.id();
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}'s program failed", self.user);
        pid
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            // SAFETY: kill(2) on a child this test started.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().mode() & 0o777
}

/// Pids of the processes in the trace at `out` (from babeltrace2's `host:procname:(pid)`).
fn traced_pids(out: &Path) -> Vec<i32> {
    let mut v: Vec<i32> = bt_events(&babeltrace(out)).iter().map(|e| e.pid).collect();
    v.dedup();
    v
}

fn can_read(user: &str, home: &Path, path: &Path) -> bool {
    as_user(user, home, home, Path::new("/bin/ls")).arg(path).output().unwrap().status.success()
        || as_user(user, home, home, Path::new("/bin/cat")).arg(path).output().unwrap().status.success()
}

#[test]
fn users_are_isolated_and_roots_daemon_obeys_the_tracing_group() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED users_are_isolated_and_roots_daemon_obeys_the_tracing_group: needs root to create users (CI runs as root)");
        return;
    }
    sh("groupadd", &["-f", "tracing"]);
    for (u, t) in [("ustperm-a", false), ("ustperm-b", false), ("ustperm-c", false), ("ustperm-t", true)] {
        ensure_user(u, t);
    }
    let base = PathBuf::from(format!("/tmp/ust-perm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();

    let mut a = Place::new(&base, "ustperm-a");
    let mut b = Place::new(&base, "ustperm-b");
    a.start_daemon();
    b.start_daemon();
    for (me, other) in [(&a, &b), (&b, &a)] {
        // Modes: directory 0700, sockets 0600, all the user's.
        let uid = id_of(&me.user, "-u");
        assert_eq!(mode(&me.rundir), 0o700);
        for s in ["ctl", "app"] {
            let p = me.rundir.join(s);
            assert_eq!((mode(&p), std::fs::metadata(&p).unwrap().uid()), (0o600, uid), "{}", p.display());
        }
        me.session("mine");
        let mine = me.run_program(&me.rundir);
        // The other user's program aims at my daemon: it cannot reach it and runs untraced.
        let theirs = other.run_program(&me.rundir);
        // The other user cannot connect to, list, or read my daemon, sessions or traces.
        let o = other.cmd(Path::new(ust_bin())).env("UST_RUNDIR", &me.rundir).args(["list"]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("permission denied"), "{} listed {}'s sessions: {err}", other.user, me.user);
        me.ust_ok(&["stop"]);
        let dirs: Vec<PathBuf> = std::fs::read_dir(me.out.join("ust/pid")).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(dirs.len(), 1, "only my process is traced in my session");
        for f in std::fs::read_dir(&dirs[0]).unwrap() {
            let f = f.unwrap().path();
            let md = std::fs::metadata(&f).unwrap();
            assert_eq!(md.uid(), uid, "{} is mine", f.display());
            if md.is_file() {
                assert_eq!(mode(&f), 0o600, "{}", f.display());
                assert!(!can_read(&other.user, &other.home, &f), "{} read {}", other.user, f.display());
            }
        }
        assert!(!can_read(&other.user, &other.home, &me.out), "{} listed {}", other.user, me.out.display());
        assert_eq!(traced_pids(&me.out), vec![mine as i32], "{}'s pid {theirs} must not be in {}'s trace", other.user, me.user);
        me.ust_ok(&["destroy"]);
    }
    // Past the file modes (root can connect anywhere), SO_PEERCRED still refuses.
    let s = UnixStream::connect(a.rundir.join("ctl")).unwrap();
    // The daemon may refuse (reply and close) before the request is written: a failed
    // write is fine, the reply is what counts.
    let _ = ust_core::protocol::write_frame(&s, &ust_ctl::protocol::Request { version: 1, command: ust_ctl::protocol::Command::Ping });
    match ust_core::protocol::read_frame::<ust_ctl::protocol::Reply>(&s).unwrap() {
        ust_ctl::protocol::Reply::Error { message } => assert!(message.contains("permission denied"), "{message}"),
        r => panic!("root was let into ustperm-a's daemon: {r:?}"),
    }

    // Root's daemon: system-wide.
    let mut root = Place::new(&base, "root");
    root.start_daemon();
    let tracing = ust_consumerd::servers::peers::tracing_group().expect("group tracing");
    assert_eq!(mode(&root.rundir), 0o755);
    assert_eq!(mode(&root.rundir.join("app")), 0o666);
    let ctl = root.rundir.join("ctl");
    assert_eq!((mode(&ctl), std::fs::metadata(&ctl).unwrap().gid()), (0o660, tracing));
    root.session("sys");
    // An ordinary user's program is traced by root's daemon.
    let c = Place::new(&base, "ustperm-c");
    let cpid = c.run_program(&root.rundir);
    // A member of tracing controls it; a user outside cannot, by file mode or, past it,
    // by SO_PEERCRED.
    let t = Place::new(&base, "ustperm-t");
    let listed = t.cmd(Path::new(ust_bin())).env("UST_RUNDIR", &root.rundir).args(["list"]).output().unwrap();
    assert!(listed.status.success(), "a tracing member cannot list: {}", String::from_utf8_lossy(&listed.stderr));
    assert!(String::from_utf8_lossy(&listed.stdout).contains("sys"));
    let denied = |what: &str| {
        let o = c.cmd(Path::new(ust_bin())).env("UST_RUNDIR", &root.rundir).args(["list"]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(!o.status.success() && err.contains("permission denied"), "{what}: a user outside tracing listed root's sessions: {err}");
        err
    };
    denied("by file mode");
    std::fs::set_permissions(&ctl, std::fs::Permissions::from_mode(0o666)).unwrap();
    let err = denied("by SO_PEERCRED");
    assert!(err.contains("members of group tracing"), "{err}");
    std::fs::set_permissions(&ctl, std::fs::Permissions::from_mode(0o660)).unwrap();
    root.ust_ok(&["stop"]);
    assert_eq!(traced_pids(&root.out), vec![cpid as i32]);
    root.ust_ok(&["destroy"]);
    drop((a, b, root));
    let _ = std::fs::remove_dir_all(&base);
}
