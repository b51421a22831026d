//! tracefs: finding (or mounting) it, and the private instance `instances/ust-<pid>` that
//! `ust trace --kernel` records in, so that other tracing on the machine (the top-level
//! buffer, other instances) is never disturbed (Documentation/trace/ftrace.rst, "Instances").
//!
//! An instance is a directory: `mkdir` creates a full set of buffers and event switches,
//! `rmdir` frees them (it fails with `EBUSY` while a `trace_pipe_raw` is open). An instance
//! whose owner died (killed with SIGKILL) stays behind; [`remove_stale`] removes every
//! `ust-<pid>` instance whose `pid` is no longer alive.

use std::io;
use std::path::{Path, PathBuf};

/// Where tracefs is normally mounted.
pub const TRACEFS: &str = "/sys/kernel/tracing";
/// The old location, under debugfs.
pub const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";
/// Prefix of the instances this tool creates.
pub const INSTANCE_PREFIX: &str = "ust-";

/// Why kernel tracing cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TracefsError {
    /// No tracefs is mounted and mounting it failed (typically: not root).
    #[error("tracefs is not mounted at {TRACEFS} and mounting it failed: {0}")]
    NotMounted(io::Error),
    /// tracefs is there but this user may not create an instance (not root, no write access).
    #[error("cannot create a tracefs instance in {0}: {1}")]
    Instance(PathBuf, io::Error),
    /// A control file could not be written.
    #[error("cannot write {value:?} to {path}: {err}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What was written.
        value: String,
        /// The error.
        err: io::Error,
    },
}

/// The tracefs mount point: `/sys/kernel/tracing` (mounted there with `mount -t tracefs`
/// when it is not, which needs root), else debugfs's `tracing` directory.
///
/// # Errors
/// [`TracefsError::NotMounted`] when neither exists and the mount fails.
pub fn root() -> Result<PathBuf, TracefsError> {
    for p in [TRACEFS, DEBUGFS_TRACING] {
        if Path::new(p).join("instances").is_dir() {
            return Ok(PathBuf::from(p));
        }
    }
    rustix::mount::mount("nodev", TRACEFS, "tracefs", rustix::mount::MountFlags::empty(), None).map_err(|e| TracefsError::NotMounted(e.into()))?;
    Ok(PathBuf::from(TRACEFS))
}

/// Writes `value` to the control file `path`.
///
/// # Errors
/// [`TracefsError::Write`].
pub fn write(path: &Path, value: &str) -> Result<(), TracefsError> {
    std::fs::write(path, value).map_err(|err| TracefsError::Write { path: path.to_path_buf(), value: value.to_string(), err })
}

/// True when process `pid` exists (a zombie counts as dead).
pub fn pid_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s.rsplit_once(')').map(|(_, r)| !r.trim_start().starts_with('Z')).unwrap_or(true),
        Err(_) => false,
    }
}

/// Removes the instances `ust-<pid>` under `root` whose `pid` is dead (left by a run that was
/// killed); returns their names. Errors on single instances are ignored (reported by name
/// missing from the result).
pub fn remove_stale(root: &Path) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(dir) = std::fs::read_dir(root.join("instances")) else { return removed };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // `ust-<pid>` (ust trace) or `ust-<pid>-<n>` (root's daemon, one per request).
        let Some(pid) = name.strip_prefix(INSTANCE_PREFIX).and_then(|p| p.split('-').next()).and_then(|p| p.parse::<i32>().ok()) else { continue };
        if pid_alive(pid) {
            continue;
        }
        let _ = std::fs::write(e.path().join("tracing_on"), "0");
        if std::fs::remove_dir(e.path()).is_ok() {
            removed.push(name);
        }
    }
    removed
}

/// A tracefs instance this process created; removed on [`Instance::remove`] or drop.
#[derive(Debug)]
pub struct Instance {
    dir: PathBuf,
    removed: bool,
}

impl Instance {
    /// Creates `<root>/instances/ust-<pid of this process>` (after removing one of that name
    /// left by an earlier process with the same pid).
    ///
    /// # Errors
    /// [`TracefsError::Instance`] when `mkdir` fails (no permission, tracefs without
    /// instances).
    pub fn create(root: &Path) -> Result<Instance, TracefsError> {
        Instance::create_named(root, &format!("{INSTANCE_PREFIX}{}", std::process::id()))
    }

    /// Creates `<root>/instances/<name>`, as [`Instance::create`] (the daemon names its
    /// instances `ust-<pid>-<n>`, one per kernel-view request, which [`remove_stale`] knows).
    ///
    /// # Errors
    /// As [`Instance::create`].
    pub fn create_named(root: &Path, name: &str) -> Result<Instance, TracefsError> {
        let dir = root.join("instances").join(name);
        if dir.exists() {
            let _ = std::fs::remove_dir(&dir);
        }
        std::fs::create_dir(&dir).map_err(|e| TracefsError::Instance(root.join("instances"), e))?;
        let inst = Instance { dir, removed: false };
        // A new instance records at once: keep it quiet until the events are chosen.
        write(&inst.dir.join("tracing_on"), "0")?;
        Ok(inst)
    }

    /// The instance directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Sets the trace clock (`mono` = `CLOCK_MONOTONIC`, as the user-space traces).
    ///
    /// # Errors
    /// [`TracefsError::Write`] when the kernel does not know the clock.
    pub fn set_clock(&self, clock: &str) -> Result<(), TracefsError> {
        write(&self.dir.join("trace_clock"), clock)
    }

    /// Sets the per-CPU buffer size in KiB.
    ///
    /// # Errors
    /// [`TracefsError::Write`].
    pub fn set_buffer_kb(&self, kb: u64) -> Result<(), TracefsError> {
        write(&self.dir.join("buffer_size_kb"), &kb.to_string())
    }

    /// Enables `system/event`.
    ///
    /// # Errors
    /// [`TracefsError::Write`] (for example when the kernel lacks the event).
    pub fn enable(&self, system: &str, event: &str) -> Result<(), TracefsError> {
        write(&self.dir.join("events").join(system).join(event).join("enable"), "1")
    }

    /// Starts or stops recording (`tracing_on`).
    ///
    /// # Errors
    /// [`TracefsError::Write`].
    pub fn set_on(&self, on: bool) -> Result<(), TracefsError> {
        write(&self.dir.join("tracing_on"), if on { "1" } else { "0" })
    }

    /// `per_cpu/cpu<N>/trace_pipe_raw` of this instance.
    pub fn pipe_raw(&self, cpu: u32) -> PathBuf {
        self.dir.join("per_cpu").join(format!("cpu{cpu}")).join("trace_pipe_raw")
    }

    /// Stops recording and removes the instance (every reader must be closed first).
    ///
    /// # Errors
    /// The `rmdir` error.
    pub fn remove(mut self) -> io::Result<()> {
        self.removed = true;
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
        std::fs::remove_dir(&self.dir)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if !self.removed {
            let _ = std::fs::write(self.dir.join("tracing_on"), "0");
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}
