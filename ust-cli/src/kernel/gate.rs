//! A command's process started stopped before its `exec`, so that a kernel view can be
//! set on its pid before it runs its first instruction: root's tracefs view (the traced
//! tree's instance follows the pid, `set_event_pid`) and root's broker (tier 2, which
//! checks the pid is the requester's child). `ust trace` forks the process, which writes
//! its pid to a pipe and waits on another for one byte, in a `pre_exec` step; released, it
//! execs the command in place (same pid). If `ust trace` dies or cancels first, the pipe
//! closes without the byte, and the process exits without running the command.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

/// A command's process, forked and stopped before its `exec` (its pid is the command's).
#[derive(Debug)]
pub struct Gated {
    /// The process id.
    pub pid: i32,
    release: OwnedFd,
    spawner: std::thread::JoinHandle<io::Result<Child>>,
}

impl Gated {
    /// Forks `cmd`'s process, which tells its pid and waits for the release in a
    /// `pre_exec` step (after any other the caller added, such as dropping to another
    /// user): reads of a pipe, async-signal-safe. The spawn runs on a thread of its own
    /// (`Command::spawn` returns only once the child has exec'd).
    ///
    /// # Errors
    /// The pipe, thread or fork error.
    pub fn spawn(mut cmd: Command) -> io::Result<Gated> {
        let (gate_r, gate_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let (pid_r, pid_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let (gr, gw, pw) = (gate_r.as_raw_fd(), gate_w.as_raw_fd(), pid_w.as_raw_fd());
        // SAFETY: the closure makes async-signal-safe calls only (close, getpid, write,
        // read) on the raw descriptor numbers it captured, and allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                // The parent's end, so that its close is an end of file here.
                libc::close(gw);
                let pid = libc::getpid().to_ne_bytes();
                let told = libc::write(pw, pid.as_ptr().cast(), pid.len()) == pid.len() as isize;
                libc::close(pw);
                let mut b = 0u8;
                loop {
                    let n = libc::read(gr, (&mut b as *mut u8).cast(), 1);
                    if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                        continue;
                    }
                    libc::close(gr);
                    if told && n == 1 && b == b'g' {
                        return Ok(());
                    }
                    return Err(io::Error::from_raw_os_error(libc::ECANCELED));
                }
            });
        }
        let spawner = std::thread::Builder::new().name("ust-gate".into()).spawn(move || {
            let child = cmd.spawn();
            drop((gate_r, pid_w));
            child
        })?;
        let mut pid = [0u8; 4];
        let mut got = 0;
        while got < pid.len() {
            match rustix::io::read(&pid_r, &mut pid[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if got < pid.len() {
            // It never forked: the spawn's error says why.
            drop(gate_w);
            return Err(spawner
                .join()
                .map_or_else(|_| io::Error::other("the spawning thread panicked"), |r| r.err().unwrap_or_else(|| io::Error::other("no pid"))));
        }
        Ok(Gated { pid: i32::from_ne_bytes(pid), release: gate_w, spawner })
    }

    /// Lets the process exec its command.
    ///
    /// # Errors
    /// The exec error (command not found, not executable).
    pub fn release(self) -> io::Result<Child> {
        let _ = rustix::io::write(self.release.as_fd(), b"g");
        drop(self.release);
        self.spawner.join().unwrap_or_else(|_| Err(io::Error::other("the spawning thread panicked")))
    }

    /// Ends the process without running its command, and reaps it.
    pub fn cancel(self) {
        drop(self.release);
        let _ = self.spawner.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &std::path::Path) -> Command {
        let mut c = Command::new("touch");
        c.arg(path);
        c
    }

    /// Released, the process execs its command in place (same pid); cancelled, it exits
    /// without running it; a command that cannot be run fails at the release.
    #[test]
    fn runs_only_once_released() {
        let dir = tempfile::tempdir().unwrap();
        let ran = dir.path().join("ran");
        let g = Gated::spawn(touch(&ran)).unwrap();
        assert!(g.pid > 0 && !ran.exists(), "stopped before its exec");
        let pid = g.pid;
        let mut child = g.release().unwrap();
        assert_eq!(child.id() as i32, pid);
        assert!(child.wait().unwrap().success() && ran.exists());
        let never = dir.path().join("never");
        let g = Gated::spawn(touch(&never)).unwrap();
        assert!(std::path::Path::new(&format!("/proc/{}", g.pid)).exists());
        g.cancel();
        assert!(!never.exists(), "cancelled: the command never ran");
        let g = Gated::spawn(Command::new("/no/such/program")).unwrap();
        assert_eq!(g.release().unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
