//! Where the daemon's sockets live (docs/DESIGN.md#interfaces: a contract).
//!
//! `$UST_RUNDIR` when set, for everyone including root; else `/run/ust` for root,
//! `$XDG_RUNTIME_DIR/ust` or `$HOME/.ust` for other users. The directory is created with
//! mode 0700 and must belong to the caller. Socket names are short so that paths fit the
//! 108 bytes of `sockaddr_un`.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Socket on which applications register ([`crate::protocol`]).
pub const APP_SOCKET: &str = "app";
/// Socket on which the `ust` command talks to the daemon.
pub const CTL_SOCKET: &str = "ctl";
/// File holding the daemon's pid while it runs.
pub const PID_FILE: &str = "pid";
/// Environment variable that overrides the directory.
pub const ENV_RUNDIR: &str = "UST_RUNDIR";
/// Environment variable naming root's (the system-wide daemon's) socket directory as other
/// users' programs and commands see it (docs/DESIGN.md#interfaces).
pub const ENV_SYSTEM_RUNDIR: &str = "UST_SYSTEM_RUNDIR";
/// Root's socket directory when neither variable says otherwise.
pub const SYSTEM_RUNDIR: &str = "/run/ust";

/// Errors about the socket directory.
#[derive(Debug, thiserror::Error)]
pub enum RundirError {
    /// Neither `$UST_RUNDIR`, `$XDG_RUNTIME_DIR` nor `$HOME` is set (and not root).
    #[error("no socket directory: set UST_RUNDIR, XDG_RUNTIME_DIR or HOME")]
    NoDirectory,
    /// The directory exists but belongs to someone else or is open to others.
    #[error("{path}: {why}")]
    Unsafe {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// Creating or inspecting it failed.
    #[error("{path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A socket path would not fit in `sockaddr_un`.
    #[error("socket path {0} is longer than 107 bytes; choose a shorter UST_RUNDIR")]
    TooLong(PathBuf),
}

/// The socket directory for this process, by the rules above. Does not create it.
///
/// # Errors
/// [`RundirError::NoDirectory`] when no variable gives a place.
pub fn rundir() -> Result<PathBuf, RundirError> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = env(ENV_RUNDIR) {
        return Ok(p);
    }
    if rustix::process::geteuid().is_root() {
        return Ok(PathBuf::from("/run/ust"));
    }
    if let Some(p) = env("XDG_RUNTIME_DIR") {
        return Ok(p.join("ust"));
    }
    env("HOME").map(|h| h.join(".ust")).ok_or(RundirError::NoDirectory)
}

/// The socket directory of root's system-wide daemon, which a program registers with as
/// well as with its own user's daemon (as LTTng-UST registers with root's session daemon,
/// `/var/run/lttng`, and with the user's, `$HOME/.lttng`): `$UST_SYSTEM_RUNDIR` when set;
/// else, when `$UST_RUNDIR` is set, none (that variable overrides every default, this one
/// included: a program run in a private socket directory, as every test does, registers
/// with no daemon outside it unless `$UST_SYSTEM_RUNDIR` names one); else `/run/ust`.
///
/// `None` also when it is the directory [`rundir`] gives (root's own programs, by
/// default): a program registers once with each daemon.
pub fn system_rundir() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let sys = match env(ENV_SYSTEM_RUNDIR) {
        Some(p) => p,
        None if env(ENV_RUNDIR).is_some() => return None,
        None => PathBuf::from(SYSTEM_RUNDIR),
    };
    match rundir() {
        Ok(own) if own == sys => None,
        _ => Some(sys),
    }
}

/// Path of socket `name` in `dir`, checked against the `sockaddr_un` limit.
///
/// # Errors
/// [`RundirError::TooLong`] when the path has 108 bytes or more.
pub fn socket_path(dir: &Path, name: &str) -> Result<PathBuf, RundirError> {
    let p = dir.join(name);
    if p.as_os_str().len() >= 108 {
        return Err(RundirError::TooLong(p));
    }
    Ok(p)
}

/// Creates `dir` (and parents) if missing, then checks that it is a directory owned by the
/// effective user that no one else can change. A user's directory is 0700 and must stay
/// closed to group and others. Root's daemon is system-wide (as LTTng's): its directory
/// is 0755 so that every user's applications and the `tracing` group can reach its
/// sockets (whose own modes and `SO_PEERCRED` decide who may use them); it must not be
/// writable by group or others.
///
/// # Errors
/// [`RundirError::Io`] when it cannot be created or inspected, [`RundirError::Unsafe`] when
/// it belongs to another user or is open to others (the daemon refuses to use it).
pub fn ensure(dir: &Path) -> Result<(), RundirError> {
    let io = |source| RundirError::Io { path: dir.to_path_buf(), source };
    let root = rustix::process::geteuid().is_root();
    let want = if root { 0o755 } else { 0o700 };
    if !dir.exists() {
        fs::DirBuilder::new().recursive(true).mode(want).create(dir).map_err(io)?;
        fs::set_permissions(dir, fs::Permissions::from_mode(want)).map_err(io)?;
    }
    let md = fs::metadata(dir).map_err(io)?;
    let unsafe_ = |why: String| Err(RundirError::Unsafe { path: dir.to_path_buf(), why });
    if !md.is_dir() {
        return unsafe_("not a directory".into());
    }
    let euid = rustix::process::geteuid().as_raw();
    if md.uid() != euid {
        return unsafe_(format!("owned by uid {}, not by this user (uid {euid})", md.uid()));
    }
    if root && md.mode() & 0o022 != 0 {
        return unsafe_(format!("mode {:o} lets other users change it; root's must be 0755", md.mode() & 0o777));
    }
    if !root && md.mode() & 0o077 != 0 {
        return unsafe_(format!("mode {:o} lets other users in; it must be 0700", md.mode() & 0o777));
    }
    Ok(())
}
