//! Tier 2 of the kernel view: root's `ust-consumerd` records the kernel side for an
//! ordinary user and keeps the events of the tasks that user could ptrace
//! ([`ust_ctl::kview`] has the protocol, `ust_kernel::filter` the rule).
//!
//! The traced command must be in the view from its first instruction, so it starts gated:
//! `ust trace` spawns itself with [`GATE_ENV`] set and the read end of a pipe as fd 3; that
//! child ([`gate_if_asked`], the first thing `ust` does) waits for one byte, then execs the
//! command in place (same pid). The broker gets the pid, checks it is the requester's child,
//! turns recording on and acks; only then does `ust trace` write the byte
//! ([`Gated::release`]). If `ust trace` dies first, the pipe closes without the byte and the
//! child exits 125 without running the command.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use std::process::{Child, Command};
use std::time::Duration;
use ust_ctf::outdir::TraceDir;

use ust_core::protocol::{recv, send};
use ust_ctl::kview::{system_rundir, KviewReply, KviewRequest, KVIEW_SOCKET};

use super::{KernelError, KernelSummary};

/// Set (to `3`) in the environment of a gated child.
pub const GATE_ENV: &str = "UST_TRACE_GATE_FD";
/// How long the CLI waits for the broker's answer to `Hello` and `Start`.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// In a gated child (see the module docs): waits for the release, then execs the command
/// given as this process's arguments; never returns then. Does nothing in any other `ust`.
pub fn gate_if_asked() {
    if std::env::var_os(GATE_ENV).as_deref() != Some(std::ffi::OsStr::new("3")) {
        return;
    }
    std::env::remove_var(GATE_ENV);
    // SAFETY: fd 3 was set up by the parent for this process alone (dup2 in pre_exec); this
    // takes ownership of it once.
    let mut gate = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(3) });
    let mut b = [0u8; 1];
    let released = matches!(gate.read(&mut b), Ok(1)) && b[0] == b'g';
    drop(gate);
    if !released {
        std::process::exit(125);
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let Some((prog, rest)) = args.split_first() else { std::process::exit(125) };
    let e = Command::new(prog).args(rest).exec();
    eprintln!("ust: cannot run {}: {e}", prog.to_string_lossy());
    std::process::exit(if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 });
}

/// A child spawned stopped before its command.
#[derive(Debug)]
pub struct Gated {
    /// The child (its pid is the command's).
    pub child: Child,
    release: OwnedFd,
}

impl Gated {
    /// Spawns `ust` itself as the gate for `command`, with `envs` added.
    ///
    /// # Errors
    /// The pipe or spawn error.
    pub fn spawn(command: &[OsString], envs: &[(&str, &str)]) -> std::io::Result<Gated> {
        let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let exe = std::env::current_exe()?;
        let rfd = r.as_raw_fd();
        let mut c = Command::new(exe);
        c.args(command).env(GATE_ENV, "3");
        for (k, v) in envs {
            c.env(k, v);
        }
        // SAFETY: dup2 and fcntl are async-signal-safe; the closure touches only the raw fd
        // number captured by value.
        unsafe {
            c.pre_exec(move || {
                if rfd == 3 {
                    if libc::fcntl(3, libc::F_SETFD, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                } else if libc::dup2(rfd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = c.spawn()?;
        drop(r);
        Ok(Gated { child, release: w })
    }

    /// Lets the child exec its command.
    pub fn release(self) -> Child {
        let _ = rustix::io::write(self.release.as_fd(), b"g");
        self.child
    }

    /// Ends the child without running its command (it exits 125), and reaps it.
    pub fn cancel(mut self) {
        drop(self.release);
        let _ = self.child.wait();
    }
}

/// A connection to the broker that accepted `Hello`.
#[derive(Debug)]
pub struct Pending {
    sock: UnixStream,
    /// Root's socket directory.
    pub rundir: PathBuf,
}

/// A recording the broker makes for this user.
#[derive(Debug)]
pub struct Broker {
    sock: UnixStream,
    dir: PathBuf,
}

fn ask(sock: &UnixStream, req: &KviewRequest, fds: &[std::os::fd::BorrowedFd<'_>]) -> Result<KviewReply, String> {
    send(sock, req, fds).map_err(|e| e.to_string())?;
    recv::<KviewReply>(sock).map(|(r, _)| r).map_err(|e| e.to_string())
}

/// Asks root's daemon whether it offers this user a kernel view.
///
/// # Errors
/// Why not, to print: no daemon there, or its refusal (`--kernel-view`).
pub fn hello() -> Result<Pending, String> {
    let rundir = system_rundir();
    let path = rundir.join(KVIEW_SOCKET);
    let sock = UnixStream::connect(&path).map_err(|e| format!("no root's ust-consumerd at {} ({e})", path.display()))?;
    let _ = sock.set_read_timeout(Some(REPLY_TIMEOUT));
    match ask(&sock, &KviewRequest::Hello, &[])? {
        KviewReply::Ready => Ok(Pending { sock, rundir }),
        KviewReply::Refused { reason } => Err(reason),
        other => Err(format!("unexpected answer {other:?}")),
    }
}

impl Pending {
    /// Creates `<output>/kernel` (as this user, through `output`: never a link), hands its
    /// descriptor and `pid` to the broker, and waits until it records.
    ///
    /// # Errors
    /// The refusal or failure, to print.
    pub fn start(self, output: &TraceDir, pid: i32) -> Result<Broker, String> {
        let kernel = output.dir(super::KERNEL_DIR, 0o750).map_err(|e| format!("making {}: {e}", output.path().join(super::KERNEL_DIR).display()))?;
        let dir = kernel.path();
        let fd = kernel.open_fd().map_err(|e| format!("{}: {e}", dir.display()))?;
        match ask(&self.sock, &KviewRequest::Start { pid }, &[fd.as_fd()])? {
            KviewReply::Started => {
                let _ = self.sock.set_read_timeout(None);
                Ok(Broker { sock: self.sock, dir })
            }
            KviewReply::Refused { reason } => Err(reason),
            other => Err(format!("unexpected answer {other:?}")),
        }
    }
}

impl Broker {
    /// Ends the recording (after the user-space traces are written: the kernel metadata
    /// takes their clock offset).
    ///
    /// # Errors
    /// [`KernelError::Broker`] when the daemon went away or failed: the trace in
    /// `<output>/kernel` is then whole up to that moment.
    pub fn finish(self, output: &TraceDir, traced_pid: i32) -> Result<KernelSummary, KernelError> {
        let offset = super::session_clock_offset(output);
        let gone = |e: String| {
            KernelError::Broker(format!(
                "root's ust-consumerd went away during the trace ({e}): the kernel trace in {} is whole up to that moment, the rest was not recorded",
                self.dir.display()
            ))
        };
        let _ = self.sock.set_read_timeout(Some(Duration::from_secs(30)));
        match ask(&self.sock, &KviewRequest::Finish { traced_pid, clock_offset_ns: offset }, &[]) {
            Ok(KviewReply::Finished { counts, lost, error: None }) => Ok(KernelSummary { dir: self.dir.clone(), counts, lost, ..Default::default() }),
            Ok(KviewReply::Finished { error: Some(e), .. }) => {
                Err(KernelError::Broker(format!("writing the kernel trace failed: {e}; it is whole up to that point")))
            }
            Ok(other) => Err(gone(format!("unexpected answer {other:?}"))),
            Err(e) => Err(gone(e)),
        }
    }
}
