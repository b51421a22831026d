//! Reaching the daemon: the socket directory, a connection (starting `ust-consumerd` when
//! asked), one request, and [`Failure`], what every command returns when it fails.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ust_ctl::protocol::{Command, Payload};
use ust_ctl::{Client, ClientError};

/// A failure to report: the message and the exit code.
#[derive(Debug)]
pub struct Failure {
    /// Printed after `ust: `.
    pub message: String,
    /// Exit code.
    pub code: u8,
}

impl Failure {
    /// A failure with exit code 1.
    pub fn new(message: impl Into<String>) -> Failure {
        Failure { message: message.into(), code: 1 }
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        Failure::new(e.to_string())
    }
}

impl Failure {
    /// A usage error: exit code 2, as clap's.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure { message: message.into(), code: 2 }
    }
}

/// The daemon answered with a payload of the wrong kind.
pub fn unexpected() -> Failure {
    Failure::new("unexpected answer from ust-consumerd (mismatched versions?)")
}

/// The socket directory (`$UST_RUNDIR`, else the per-user default).
pub fn rundir() -> Result<PathBuf, Failure> {
    ust_core::rundir::rundir().map_err(|e| Failure::new(e.to_string()))
}

/// Connects to the running daemon, or fails with the "none runs, start one" message.
pub fn connect() -> Result<Client, Failure> {
    let dir = rundir()?;
    Client::connect(&dir).map_err(|e| {
        if let ClientError::Denied { .. } = e {
            return Failure::new(e.to_string());
        }
        Failure::new(format!(
            "no ust-consumerd is running for this user (no answer on {}).\n\
             ust: start one with `ust daemon start` (or `ust-consumerd --daemonize`), or run `ust create`, which starts it",
            dir.join(ust_core::rundir::CTL_SOCKET).display()
        ))
    })
}

/// Connects and sends one request.
pub fn call(cmd: Command) -> Result<Payload, Failure> {
    Ok(connect()?.call(cmd)?)
}

/// Path of `ust-consumerd`: next to the running executable, else found in `PATH`.
pub fn consumerd_path() -> PathBuf {
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            let p = dir.join("ust-consumerd");
            if p.is_file() {
                return p;
            }
        }
    }
    PathBuf::from("ust-consumerd")
}

/// Connects to the daemon, starting `ust-consumerd --daemonize` first when none runs.
pub fn connect_or_start() -> Result<Client, Failure> {
    let dir = rundir()?;
    match Client::connect(&dir) {
        Ok(c) => return Ok(c),
        Err(e @ ClientError::Denied { .. }) => return Err(Failure::new(e.to_string())),
        Err(_) => {}
    }
    let bin = consumerd_path();
    let status = std::process::Command::new(&bin)
        .arg("--daemonize")
        .stdin(std::process::Stdio::null())
        .status()
        .map_err(|e| Failure::new(format!("cannot start {}: {e}; install ust-consumerd or put it in PATH", bin.display())))?;
    // It fails when another `ust` started one at the same moment (that one holds the
    // directory's lock): then that daemon answers in a moment.
    let failed = (!status.success()).then(|| format!("{} --daemonize failed ({status})", bin.display()));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match Client::connect(&dir) {
            Ok(mut c) => {
                if failed.is_none() {
                    let pid = match c.call(Command::Ping) {
                        Ok(Payload::Pong { pid, .. }) => pid.to_string(),
                        _ => "?".into(),
                    };
                    eprintln!(
                        "ust: started ust-consumerd (pid {pid}, socket directory {}); it keeps running for later commands: `ust daemon stop` ends it",
                        dir.display()
                    );
                }
                return Ok(c);
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(Failure::new(failed.unwrap_or_else(|| format!("ust-consumerd started but does not answer: {e}"))));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// `$HOME`, for default output directories.
pub fn home() -> Result<PathBuf, Failure> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from).ok_or_else(|| Failure::new("HOME is not set; give --output"))
}

/// `p` made absolute against the current directory (the daemon has another one).
pub fn absolute(p: PathBuf) -> Result<PathBuf, Failure> {
    if p.is_absolute() {
        Ok(p)
    } else {
        let cwd = std::env::current_dir().map_err(|e| Failure::new(format!("current directory: {e}")))?;
        Ok(cwd.join(p))
    }
}
