//! Checks that a session can keep what it is given, made where the user looks (the reply to
//! `create` and `start`) rather than discovered later in the daemon's log: the output
//! directory must take files, and a `--shm-path` file system must have room to back every
//! buffer of a process (buffers are allocated in full, `ringbuffer::shm`).
//!
//! The output directory is opened here, once ([`open_output`]), by the user it belongs to:
//! every file of the session is then created through that descriptor, as them
//! ([`TraceDir`]).

use std::path::Path;

use ust_ctf::outdir::{Owner, TraceDir};

use crate::model::session::Session;
use crate::ops::trace::buffer_config;

/// Makes `dir` (and its parents) and opens it as `owner` (`None`: as
/// [`TraceDir::create`] finds whose it is), then proves it takes files
/// ([`check_writable`]).
///
/// # Errors
/// A message naming the directory and the system's error (`Read-only file system`,
/// `Permission denied`, `No space left on device`, …) or the refusal.
pub fn open_output(dir: &Path, owner: Option<Owner>) -> Result<TraceDir, String> {
    let out = TraceDir::create(dir, owner).map_err(|e| format!("cannot create output directory {}: {e}", dir.display()))?;
    check_writable(&out)?;
    Ok(out)
}

/// Proves that `out` takes files: a probe file is created, written and removed, as the
/// daemon will do for every stream file.
///
/// # Errors
/// A message naming the directory and the system's error.
pub fn check_writable(out: &TraceDir) -> Result<(), String> {
    use std::io::Write as _;
    let probe = format!(".ust-write-check-{}", std::process::id());
    let written = out.create_file(&probe, 0o600).and_then(|mut f| f.write_all(b"ust"));
    let _ = out.remove(&probe);
    written.map_err(|e| format!("cannot write into output directory {}: {e}; nothing would be recorded (choose another --output)", out.path().display()))
}

/// Bytes of shared memory one process with `ncpus` CPUs needs for the channels of
/// `session` (a per-channel channel, `--buffer-allocation=per-channel`, has one buffer).
pub fn buffer_bytes_per_process(session: &Session, ncpus: u32) -> u64 {
    session
        .channels
        .iter()
        .map(|c| buffer_config(&c.config, Default::default()).file_size().unwrap_or(0) as u64 * u64::from(c.config.allocation.buffers(ncpus)))
        .sum()
}

/// Refuses to start a `--shm-path` session whose file system cannot back one process's
/// buffers (`statvfs`: blocks available to the daemon's user).
///
/// # Errors
/// A message with the sizes and what to change.
pub fn check_shm_room(session: &Session) -> Result<(), String> {
    let Some(dir) = &session.shm_dir else { return Ok(()) };
    let need = buffer_bytes_per_process(session, ust_core::cpus::possible_cpu_count());
    let st = rustix::fs::statvfs(dir).map_err(|e| format!("cannot inspect --shm-path {}: {e}", dir.display()))?;
    let free = st.f_bavail.saturating_mul(st.f_frsize);
    if free < need {
        return Err(format!(
            "--shm-path {}: {free} bytes free, but one process's buffers need {need} bytes (every sub-buffer of every CPU is allocated at start); use smaller or fewer sub-buffers, or a larger file system",
            dir.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writable_directory_passes_and_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("a/b");
        open_output(&out, None).unwrap();
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
    }

    #[test]
    fn a_file_in_the_way_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        let e = open_output(&f.join("sub"), None).unwrap_err();
        assert!(e.contains("cannot create output directory"), "{e}");
    }
}
