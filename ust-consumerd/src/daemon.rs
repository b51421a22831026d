//! The `ust-consumerd` process: socket directory, pid file, the `ctl` and `app` listeners,
//! peer checks, daemonizing, and shutdown. The work itself lives in [`crate::servers::apps`],
//! [`crate::servers::control`] and [`crate::servers::drain`].
//!
//! Start-up: resolve the socket directory ([`ust_core::rundir`], `$UST_RUNDIR` first),
//! create it 0700 and check it; refuse to start when a daemon already answers on `ctl`;
//! with `--daemonize`, fork, `setsid`, log to `consumerd.log` in the directory, and let the
//! parent exit 0 only once the sockets listen; bind `ctl` and `app` (0600), write `pid`.
//! Threads: one accept loop per socket, one thread per connection (two per application),
//! and the drain loop on the main thread. `SIGTERM`/`SIGINT` stop it: every session is
//! destroyed (stopped, drained, files closed), then sockets and pid file are removed. The
//! daemon also stops when its socket file disappears (its directory was removed), since no
//! client can reach it any more.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use ust_core::rundir;

use crate::ops::fds::fd_usage;
use crate::ops::state::{on_signal, Daemon};
use crate::servers::peers::{peer_allowed, socket_mode, tracing_group, Kind};

/// Name of the log file in the socket directory once daemonized.
pub const LOG_FILE: &str = "consumerd.log";

/// Command-line options of `ust-consumerd`.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "ust-consumerd", version, about = "Per-user ust tracing daemon: owns sessions and buffers, writes CTF traces")]
pub struct Options {
    /// Detach from the terminal; the log goes to consumerd.log in the socket directory.
    #[arg(short = 'd', long, conflicts_with = "foreground")]
    pub daemonize: bool,
    /// Stay in the foreground, logging to stderr (the default).
    #[arg(short = 'f', long)]
    pub foreground: bool,
    /// Socket directory (default: $UST_RUNDIR, else /run/ust for root, else
    /// $XDG_RUNTIME_DIR/ust or $HOME/.ust).
    #[arg(long, value_name = "DIR")]
    pub rundir: Option<PathBuf>,
    /// Log to this file instead of stderr (or of consumerd.log when daemonized).
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    /// Root's daemon only: who may have the kernel view of their commands through it
    /// (`all`, `group NAME`, or `none` to turn the broker off).
    #[arg(long = "kernel-view", value_name = "all|group NAME|none", num_args = 1..=2, default_values_t = vec!["all".to_string()])]
    pub kernel_view: Vec<String>,
    /// Root's daemon only: kernel views one user may have at once (each costs two tracefs
    /// instances, 2 x 4 MiB of kernel memory per CPU).
    #[arg(long, value_name = "N", default_value_t = crate::servers::kview::MAX_PER_USER as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub kernel_view_max_per_user: u64,
    /// Root's daemon only: kernel views it makes at once, all users together.
    #[arg(long, value_name = "N", default_value_t = crate::servers::kview::MAX_TOTAL as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub kernel_view_max_total: u64,
}

/// True when a daemon answers on `dir/ctl`.
pub fn is_running(dir: &Path) -> bool {
    rundir::socket_path(dir, rundir::CTL_SOCKET).map(|p| UnixStream::connect(p).is_ok()).unwrap_or(false)
}

/// Runs the daemon until a signal or the loss of its socket directory.
///
/// # Errors
/// When the socket directory is unsafe or unusable, a daemon already runs there, or the
/// sockets cannot be bound. Once running it does not fail: errors are logged.
pub fn run(opts: Options) -> anyhow::Result<()> {
    let policy = crate::servers::kview::Policy::parse(&opts.kernel_view).map_err(anyhow::Error::msg)?;
    let dir = match &opts.rundir {
        Some(d) => d.clone(),
        None => rundir::rundir()?,
    };
    rundir::ensure(&dir)?;
    crate::ops::memory::limit_arenas();
    // First sample of the TSC calibration: sessions that use the TSC later get a ratio
    // measured over the daemon's lifetime.
    crate::model::session::tsc_calibrator();
    let dir = dir.canonicalize().with_context(|| format!("{}", dir.display()))?;
    let ctl_path = rundir::socket_path(&dir, rundir::CTL_SOCKET)?;
    let app_path = rundir::socket_path(&dir, rundir::APP_SOCKET)?;
    // One daemon per directory, also when two start at once (two `ust trace` of one user):
    // the second would otherwise replace the first's sockets. Held until the process ends
    // (the daemonized child inherits it).
    let lock = lock_dir(&dir)?;
    if is_running(&dir) {
        bail!("a ust-consumerd already runs for {} (socket {})", dir.display(), ctl_path.display());
    }
    let ready = if opts.daemonize { Some(daemonize(&dir, opts.log_file.as_deref())?) } else { None };
    std::mem::forget(lock);
    if !opts.daemonize {
        if let Some(f) = &opts.log_file {
            crate::log::to_file(f).with_context(|| format!("log file {}", f.display()))?;
        }
    }
    install_signal_handlers();
    raise_fd_limit();
    let root = rustix::process::geteuid().is_root();
    let tracing_gid = if root { tracing_group() } else { None };
    let bind = |p: &Path, kind: Kind| -> anyhow::Result<UnixListener> {
        let _ = std::fs::remove_file(p);
        let l = UnixListener::bind(p).with_context(|| format!("binding {}", p.display()))?;
        let (mode, group) = socket_mode(kind, root, tracing_gid);
        if let Some(g) = group {
            std::os::unix::fs::chown(p, Some(0), Some(g)).with_context(|| format!("chown {}", p.display()))?;
        }
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))?;
        Ok(l)
    };
    let app_listener = bind(&app_path, Kind::App)?;
    let ctl_listener = bind(&ctl_path, Kind::Ctl)?;
    // Root's daemon is the kernel broker: any user may ask on `kview` (its own socket;
    // refused there with the reason when the policy says so).
    let kview_path = rundir::socket_path(&dir, ust_ctl::kview::KVIEW_SOCKET)?;
    let kview_listener = if root {
        let _ = std::fs::remove_file(&kview_path);
        let l = UnixListener::bind(&kview_path).with_context(|| format!("binding {}", kview_path.display()))?;
        std::fs::set_permissions(&kview_path, std::fs::Permissions::from_mode(crate::servers::peers::KVIEW_MODE))?;
        Some(l)
    } else {
        None
    };
    let pid_path = dir.join(rundir::PID_FILE);
    std::fs::write(&pid_path, format!("{}\n", std::process::id())).with_context(|| format!("{}", pid_path.display()))?;
    let ctl_ino = inode(&ctl_path);
    let daemon = Arc::new(Daemon::new(dir.clone()));
    spawn_acceptor(daemon.clone(), app_listener, Kind::App);
    spawn_acceptor(daemon.clone(), ctl_listener, Kind::Ctl);
    crate::servers::trigger_watch::spawn_watch(daemon.clone());
    if let Some(l) = kview_listener {
        let limits = crate::servers::kview::Limits { per_user: opts.kernel_view_max_per_user as usize, total: opts.kernel_view_max_total as usize };
        crate::log!("kernel view for users: {policy:?}, at most {} per user and {} in all", limits.per_user, limits.total);
        crate::servers::kview::spawn_acceptor(l, policy, limits);
    }
    crate::log!("listening in {} (uid {})", dir.display(), daemon.uid);
    if let Some(mut w) = ready {
        let _ = w.write_all(b"ok\n");
    }
    crate::servers::drain::run(&daemon, || {
        if inode(&ctl_path) != ctl_ino {
            crate::log!("socket {} is gone; shutting down", ctl_path.display());
            return true;
        }
        false
    });
    daemon.request_shutdown();
    crate::log!("shutting down");
    crate::servers::control::lifecycle::destroy_all(&daemon);
    if inode(&ctl_path) == ctl_ino {
        let _ = std::fs::remove_file(&ctl_path);
        let _ = std::fs::remove_file(&app_path);
        let _ = std::fs::remove_file(&kview_path);
        let _ = std::fs::remove_file(&pid_path);
    }
    crate::log!("stopped");
    Ok(())
}

fn inode(p: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(p).ok().map(|m| m.ino())
}

fn install_signal_handlers() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
}

/// Forks. The parent waits for the child to report that its sockets listen and exits 0
/// (1 if the child failed first); the child starts a new session, moves stdio to
/// `/dev/null`, logs to a file, and returns the pipe end to report readiness on.
/// Name of the lock file in the socket directory, held by the running daemon.
pub const LOCK_FILE: &str = "consumerd.lock";

/// Takes the exclusive `flock` on [`LOCK_FILE`] in `dir`.
///
/// # Errors
/// When another daemon holds it (it runs, or is starting), or the file cannot be opened.
fn lock_dir(dir: &Path) -> anyhow::Result<std::fs::File> {
    let path = dir.join(LOCK_FILE);
    let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(&path).with_context(|| format!("{}", path.display()))?;
    match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(f),
        Err(rustix::io::Errno::WOULDBLOCK) => bail!("a ust-consumerd already runs or is starting for {} (it holds {})", dir.display(), path.display()),
        Err(e) => bail!("flock {}: {e}", path.display()),
    }
}

fn daemonize(dir: &Path, log_file: Option<&Path>) -> anyhow::Result<std::fs::File> {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    // SAFETY: called before any thread is spawned, so the child may run arbitrary code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        bail!("fork: {}", std::io::Error::last_os_error());
    }
    if pid > 0 {
        drop(w);
        let mut f = std::fs::File::from(r);
        let mut buf = String::new();
        let _ = f.read_to_string(&mut buf);
        if buf.starts_with("ok") {
            std::process::exit(0);
        }
        eprintln!("ust-consumerd: the daemon failed to start; see {}", dir.join(LOG_FILE).display());
        std::process::exit(1);
    }
    drop(r);
    // SAFETY: plain system calls in the single-threaded child.
    unsafe {
        libc::setsid();
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::dup2(null, 2);
            if null > 2 {
                libc::close(null);
            }
        }
    }
    let log = log_file.map(Path::to_path_buf).unwrap_or_else(|| dir.join(LOG_FILE));
    let _ = crate::log::to_file(&log);
    Ok(std::fs::File::from(w))
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit: every traced process costs the
/// daemon descriptors (its socket, a pidfd, two files per buffer).
fn raise_fd_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut l = getrlimit(Resource::Nofile);
    if l.current != l.maximum {
        l.current = l.maximum;
        let _ = setrlimit(Resource::Nofile, l);
    }
}

fn spawn_acceptor(daemon: Arc<Daemon>, listener: UnixListener, kind: Kind) {
    let name = match kind {
        Kind::App => "accept-app",
        Kind::Ctl => "accept-ctl",
    };
    let spawned = std::thread::Builder::new().name(name.into()).spawn(move || {
        // A descriptor held in reserve: when accept fails for want of descriptors, it is
        // closed to accept the waiting peer, tell it why, and close it again, so that a
        // peer never waits in the backlog without an answer and the loop never spins.
        let mut spare = std::fs::File::open("/dev/null").ok();
        let mut said_full = false;
        for conn in listener.incoming() {
            if daemon.shutting_down() {
                return;
            }
            let sock = match conn {
                Ok(s) => s,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) => {
                    if !said_full {
                        crate::log!("{name}: out of descriptors ({e}); new peers are refused until some are freed");
                        said_full = true;
                    }
                    drop(spare.take());
                    if let Ok((s, _)) = listener.accept() {
                        let reason = format!(
                            "ust-consumerd is out of file descriptors ({}); not traced: raise its limit (ulimit -n) or trace fewer processes",
                            fd_usage()
                        );
                        let who = ust_core::protocol::peer_credentials(&s).map_or(-1, |c| c.0);
                        crate::log!("{name}: connection from pid {who} refused: {reason}");
                        if kind == Kind::App {
                            let _ = ust_core::protocol::send(&s, &ust_core::protocol::DaemonMessage::Refused { reason }, &[]);
                        } else {
                            crate::servers::control::server::reply_error(&s, &reason);
                        }
                    }
                    spare = std::fs::File::open("/dev/null").ok();
                    if spare.is_none() {
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                    continue;
                }
                Err(e) => {
                    crate::log!("{name}: accept failed: {e}");
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    continue;
                }
            };
            said_full = false;
            let (pid, uid, gid) = match ust_core::protocol::peer_credentials(&sock) {
                Ok(c) => c,
                Err(e) => {
                    crate::log!("{name}: SO_PEERCRED failed: {e}; connection closed");
                    continue;
                }
            };
            if !peer_allowed(kind, daemon.uid, uid, gid, pid) {
                crate::log!("{name}: refused connection from uid {uid} (pid {pid})");
                if kind == Kind::App {
                    let reason = format!("uid {uid} may not register with the daemon of uid {}", daemon.uid);
                    let _ = ust_core::protocol::send(&sock, &ust_core::protocol::DaemonMessage::Refused { reason }, &[]);
                } else if daemon.uid == 0 {
                    crate::servers::control::server::reply_error(
                        &sock,
                        "permission denied: root's daemon takes control commands from root and members of group tracing only",
                    );
                } else {
                    crate::servers::control::server::reply_error(&sock, "permission denied: this daemon accepts only its own user");
                }
                continue;
            }
            let d = daemon.clone();
            let r = std::thread::Builder::new().name(format!("{name}-{pid}")).spawn(move || match kind {
                Kind::App => crate::servers::apps::serve(d, sock, pid, uid),
                Kind::Ctl => crate::servers::control::server::serve(d, sock),
            });
            if let Err(e) = r {
                crate::log!("{name}: cannot start a thread: {e}");
            }
        }
    });
    if let Err(e) = spawned {
        crate::log!("cannot start {name}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers() {
        assert!(peer_allowed(Kind::Ctl, 1000, 1000, 1000, 1));
        assert!(!peer_allowed(Kind::Ctl, 1000, 1001, 1000, 1));
        assert!(!peer_allowed(Kind::App, 1000, 0, 0, 1));
        assert!(peer_allowed(Kind::App, 0, 1000, 1000, 1));
        assert!(peer_allowed(Kind::Ctl, 0, 0, 0, 1));
    }
}
