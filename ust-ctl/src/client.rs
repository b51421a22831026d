//! The client end of the `ctl` socket, for the `ust` command and tests.
//!
//! Every request waits for its reply at most [`Client::timeout`] (default
//! [`DEFAULT_TIMEOUT`], or `UST_CTL_TIMEOUT_MS` milliseconds from the environment; `0`
//! waits forever): a daemon that is stopped (SIGSTOP) or stuck makes the request fail with
//! [`ClientError::Timeout`], which names the daemon's pid (from the socket directory's
//! pid file), instead of hanging the command. `stop`, `destroy`, rotations and snapshots,
//! whose work grows with the data, time out only while the daemon is stopped or gone
//! (at most [`PATIENT_LIMIT`] otherwise). The timeout bounds each reply, not the
//! connection: a connection may stay idle as long as its owner likes (`ust trace` keeps
//! one open while the traced command runs).

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ust_core::protocol::{read_frame, write_frame, ProtocolError};

use crate::protocol::{Command, Payload, Reply, Request, CTL_VERSION};

/// How long a request waits for its reply when `UST_CTL_TIMEOUT_MS` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The environment variable overriding [`DEFAULT_TIMEOUT`], in milliseconds (`0`: no
/// timeout).
pub const TIMEOUT_ENV: &str = "UST_CTL_TIMEOUT_MS";

/// A connection to the daemon's `ctl` socket, for the CLI and tests.
#[derive(Debug)]
pub struct Client {
    sock: UnixStream,
    dir: PathBuf,
    timeout: Option<Duration>,
}

/// Errors of [`Client`].
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No daemon answers on the socket.
    #[error("no ust-consumerd is running ({path}: {source})")]
    NotRunning {
        /// The socket path.
        path: PathBuf,
        /// The connect error.
        source: std::io::Error,
    },
    /// The socket exists but this user may not connect to it (another user's daemon, or
    /// root's daemon for a user outside group `tracing`).
    #[error("permission denied connecting to {path}: the daemon there belongs to another user (root's daemon takes control commands from root and members of group tracing only)")]
    Denied {
        /// The socket path.
        path: PathBuf,
    },
    /// The daemon refused the request.
    #[error("{0}")]
    Daemon(String),
    /// The daemon did not answer in time (stopped, stuck or overloaded).
    #[error("{}", timeout_message(*.pid, .after, .pid_file))]
    Timeout {
        /// The daemon's pid, from its pid file (`None`: no readable pid file).
        pid: Option<i32>,
        /// How long the request waited.
        after: Duration,
        /// The pid file read.
        pid_file: PathBuf,
    },
    /// The conversation failed.
    #[error("talking to ust-consumerd: {0}")]
    Protocol(#[from] ProtocolError),
}

fn timeout_message(pid: Option<i32>, after: &Duration, pid_file: &Path) -> String {
    let who = match pid {
        Some(p) => format!("ust-consumerd (pid {p})"),
        None => format!("ust-consumerd (pid unknown: {} is missing or unreadable)", pid_file.display()),
    };
    let check = match pid {
        Some(p) => format!(": is it stopped or stuck? (`ps -o pid,stat,cmd -p {p}`; resume a stopped one with `kill -CONT {p}`)"),
        None => String::new(),
    };
    format!("{who} did not answer within {} ms{check}; set {TIMEOUT_ENV} to wait longer", after.as_millis())
}

/// The reply timeout from the environment: `UST_CTL_TIMEOUT_MS` milliseconds (`0`: none),
/// else [`DEFAULT_TIMEOUT`] (also when the variable is not a number).
pub fn timeout_from_env() -> Option<Duration> {
    match std::env::var(TIMEOUT_ENV).ok().and_then(|v| v.trim().parse::<u64>().ok()) {
        Some(0) => None,
        Some(ms) => Some(Duration::from_millis(ms)),
        None => Some(DEFAULT_TIMEOUT),
    }
}

/// The pid in the pid file of socket directory `dir`, if it holds one.
pub fn daemon_pid(dir: &Path) -> Option<i32> {
    std::fs::read_to_string(dir.join(ust_core::rundir::PID_FILE)).ok()?.trim().parse().ok().filter(|&p| p > 0)
}

/// Longest a `stop`, `destroy`, rotation or snapshot waits for a daemon that is working.
pub const PATIENT_LIMIT: Duration = Duration::from_secs(30 * 60);

/// True when `sock` has something to read (or was closed) within `t`.
fn readable_within(sock: &UnixStream, t: Duration) -> std::io::Result<bool> {
    use rustix::event::{PollFd, PollFlags};
    let ts = rustix::time::Timespec { tv_sec: t.as_secs() as _, tv_nsec: t.subsec_nanos() as _ };
    let mut fds = [PollFd::new(sock, PollFlags::IN)];
    loop {
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(n) => return Ok(n > 0),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// True when the daemon of `dir` (by its pid file) exists and is not stopped (`T`/`t`)
/// nor a zombie, per `/proc/PID/stat`.
fn daemon_is_working(dir: &Path) -> bool {
    let Some(pid) = daemon_pid(dir) else { return false };
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // The state follows the command name, which is in parentheses and may contain spaces.
    let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next());
    matches!(state, Some('R' | 'S' | 'D' | 'I' | 'W'))
}

impl Client {
    /// Connects to the daemon of socket directory `dir`, with the reply timeout of
    /// [`timeout_from_env`].
    ///
    /// # Errors
    /// [`ClientError::NotRunning`] when nothing listens, [`ClientError::Denied`].
    pub fn connect(dir: &Path) -> Result<Client, ClientError> {
        let path = dir.join(ust_core::rundir::CTL_SOCKET);
        match UnixStream::connect(&path) {
            Ok(sock) => Ok(Client { sock, dir: dir.to_path_buf(), timeout: timeout_from_env() }),
            Err(source) if source.kind() == std::io::ErrorKind::PermissionDenied => Err(ClientError::Denied { path }),
            Err(source) => Err(ClientError::NotRunning { path, source }),
        }
    }

    /// The reply timeout of each request (`None`: wait forever).
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Sets the reply timeout of the following requests (`None`: wait forever).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) {
        self.timeout = timeout;
    }

    /// Sends `command` and waits for the reply (at most [`Client::timeout`]).
    ///
    /// # Errors
    /// [`ClientError::Daemon`] with the daemon's message, [`ClientError::Timeout`] when no
    /// reply came in time, or [`ClientError::Protocol`].
    pub fn call(&mut self, command: Command) -> Result<Payload, ClientError> {
        // Zero is not a valid socket timeout; `None` disables it.
        let t = self.timeout.filter(|d| !d.is_zero());
        // Requests whose work grows with the data (the last drain of a large session, a
        // snapshot, a rotation) may take longer than the timeout on a daemon that is
        // working: for them, time runs out only while the daemon is stopped or gone.
        let patient = matches!(command, Command::Stop { .. } | Command::Destroy { .. } | Command::Rotate { .. } | Command::SnapshotRecord { .. });
        self.sock.set_write_timeout(t).map_err(ProtocolError::Io)?;
        // A daemon that refuses this peer answers and closes at once, possibly before the
        // request is written: the write then fails (EPIPE), but its answer is waiting to
        // be read, and says more than "broken pipe".
        let written = write_frame(&self.sock, &Request { version: CTL_VERSION, command });
        let timed_out =
            || ClientError::Timeout { pid: daemon_pid(&self.dir), after: t.unwrap_or_default(), pid_file: self.dir.join(ust_core::rundir::PID_FILE) };
        if let Some(t) = t {
            // Wait for the first byte of the reply by polling, so that no partial frame
            // is ever given up on; then the frame itself must arrive within `t`.
            let start = std::time::Instant::now();
            loop {
                match readable_within(&self.sock, t) {
                    Ok(true) => break,
                    Ok(false) if patient && daemon_is_working(&self.dir) && start.elapsed() < PATIENT_LIMIT => continue,
                    Ok(false) => return Err(timed_out()),
                    Err(e) => return Err(ClientError::Protocol(ProtocolError::Io(e))),
                }
            }
        }
        self.sock.set_read_timeout(t).map_err(ProtocolError::Io)?;
        let result = match (read_frame::<Reply>(&self.sock), written) {
            (Ok(Reply::Error { message }), _) => Err(ClientError::Daemon(message)),
            (Ok(Reply::Ok(p)), Ok(())) => Ok(*p),
            (_, Err(e)) | (Err(e), Ok(())) => Err(ClientError::from(e)),
        };
        result.map_err(|e| match e {
            ClientError::Protocol(ProtocolError::Io(io)) if matches!(io.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => timed_out(),
            e => e,
        })
    }
}
