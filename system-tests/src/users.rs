//! Root's `ust-consumerd` serving two ordinary users: the world of the tests in which root's
//! daemon is the system daemon of other users' programs (`system_daemon.rs`: root's per-UID
//! session traces both users' programs; `kernel_broker.rs`: root's daemon as the kernel
//! broker of tier 2).
//!
//! Layout of the temporary directory (0755, so that the users can reach their homes):
//!
//! ```text
//! <tmp>/sys/              root's UST_RUNDIR, the users' UST_SYSTEM_RUNDIR
//! <tmp>/root/             root's HOME
//! <tmp>/root-daemon.log   root's daemon's stderr
//! <tmp>/<user>/           the user's HOME (0700, theirs); <tmp>/<user>/run/ its UST_RUNDIR
//! ```
//!
//! The users are made with `useradd -M` when missing (`scripts/test.sh` makes them too, as
//! root); the callers run only as root.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{consumerd_bin, ust_bin, KillOnDrop};

/// The numeric id `id FLAG USER` prints (`-u`: the uid, `-g`: the primary gid); panics when
/// `id` fails (no such user).
pub fn id_of(user: &str, flag: &str) -> u32 {
    let o = Command::new("id").args([flag, user]).output().unwrap();
    assert!(o.status.success(), "id {flag} {user}");
    String::from_utf8(o.stdout).unwrap().trim().parse().unwrap()
}

/// Makes each of `users` that does not exist yet (`useradd -M`, no login shell). The tests
/// of a file run in parallel threads: one at a time looks and adds, so that two never add
/// the same user.
pub fn ensure_users(users: &[&str]) {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for u in users {
        if !Command::new("id").arg(u).output().unwrap().status.success() {
            let o = Command::new("useradd").args(["-M", "--shell", "/usr/sbin/nologin", u]).output().unwrap();
            assert!(o.status.success(), "useradd {u}: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
}

/// Root's daemon in a temporary directory, and a home for each of two users beside it.
/// Dropping it kills the users' own daemons (those their `ust create` started), then
/// root's.
pub struct World {
    /// The temporary directory (layout in the module docs).
    pub tmp: tempfile::TempDir,
    /// Root's socket directory (`UST_RUNDIR` of root's daemon, `UST_SYSTEM_RUNDIR` of the
    /// users).
    pub sys: PathBuf,
    /// Root's daemon; `None` once a test has taken it (to kill it itself).
    pub daemon: Option<KillOnDrop>,
    users: [&'static str; 2],
}

impl World {
    /// Makes `users` if missing, starts root's daemon `WRAPPER... ust-consumerd
    /// --foreground ARGS...` (`wrapper`: a command that execs its arguments, e.g. in a mount
    /// namespace of its own; empty for none) and waits (5 s at most) until its socket
    /// `ready_socket` (`ctl`, `kview`, …) accepts a connection; then makes each user's home.
    pub fn start(users: [&'static str; 2], ready_socket: &str, args: &[&str], wrapper: &[&str]) -> World {
        ensure_users(&users);
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let sys = tmp.path().join("sys");
        std::fs::create_dir_all(tmp.path().join("root")).unwrap();
        let log = std::fs::File::create(tmp.path().join("root-daemon.log")).unwrap();
        let mut cmd = match wrapper.split_first() {
            Some((w, rest)) => {
                let mut c = Command::new(w);
                c.args(rest).arg(consumerd_bin());
                c
            }
            None => Command::new(consumerd_bin()),
        };
        let child = cmd
            .arg("--foreground")
            .args(args)
            .env("UST_RUNDIR", &sys)
            .env("HOME", tmp.path().join("root"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let w = World { tmp, sys, daemon: Some(KillOnDrop(child)), users };
        let deadline = Instant::now() + Duration::from_secs(5);
        while UnixStream::connect(w.sys.join(ready_socket)).is_err() {
            assert!(Instant::now() < deadline, "root's daemon did not start: {}", w.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        for u in users {
            let home = w.home(u);
            std::fs::create_dir_all(&home).unwrap();
            std::os::unix::fs::chown(&home, Some(id_of(u, "-u")), Some(id_of(u, "-g"))).unwrap();
            std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        w
    }

    /// Root's daemon's log (its stderr) so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("root-daemon.log")).unwrap_or_default()
    }

    /// `user`'s home (its `HOME`).
    pub fn home(&self, user: &str) -> PathBuf {
        self.tmp.path().join(user)
    }

    /// `ust ARGS` as root on root's daemon; asserts success, returns stdout.
    pub fn root_ust(&self, args: &[&str]) -> String {
        let o = Command::new(ust_bin()).args(args).env("UST_RUNDIR", &self.sys).env("HOME", self.tmp.path().join("root")).output().unwrap();
        assert!(o.status.success(), "root: ust {args:?}: {}\nroot's daemon:\n{}", String::from_utf8_lossy(&o.stderr), self.log());
        String::from_utf8(o.stdout).unwrap()
    }

    /// `prog` as `user` (through `setpriv`, with the user's groups), with its own `HOME` and
    /// `UST_RUNDIR`, and root's daemon as the system one; working directory `/`, standard
    /// input null.
    pub fn as_user(&self, user: &str, prog: &Path) -> Command {
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

    /// `ust ARGS` as `user` (its own daemon, which `create` starts); asserts success,
    /// returns stdout.
    pub fn user_ust(&self, user: &str, args: &[&str]) -> String {
        let o = self.as_user(user, Path::new(ust_bin())).args(args).output().unwrap();
        assert!(o.status.success(), "{user}: ust {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    }

    /// Kills the users' own daemons (by the pid files of their `UST_RUNDIR`s, when that
    /// process is still an `ust-consumerd`), then root's daemon, if still there. What
    /// dropping does; for a wrapper whose own clean-up must come after.
    pub fn stop_daemons(&mut self) {
        for u in self.users {
            let run = self.home(u).join("run");
            let pid = std::fs::read_to_string(run.join("pid")).ok().and_then(|p| p.trim().parse::<i32>().ok()).filter(|&p| p > 0);
            let Some(pid) = pid else { continue };
            if std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "ust-consumerd") {
                // SAFETY: kill(2) of the daemon this user's `ust create` started for the
                // test (its pid file, and still an ust-consumerd).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        drop(self.daemon.take());
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.stop_daemons();
    }
}
