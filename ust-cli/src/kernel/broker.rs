//! Tier 2 of the kernel view: root's `ust-consumerd` records the kernel side for an
//! ordinary user and keeps the events of the tasks that user could ptrace
//! ([`ust_ctl::kview`] has the protocol, `ust_kernel::filter` the rule).
//!
//! The traced command must be in the view from its first instruction, so it starts gated
//! ([`super::gate::Gated`]): the broker gets the pid, checks it is the requester's child,
//! turns recording on and acks; only then does `ust trace` release it.

use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;
use ust_ctf::outdir::TraceDir;

use ust_core::protocol::{recv, send};
use ust_ctl::kview::{system_rundir, KviewReply, KviewRequest, ProbeRequest, KVIEW_SOCKET};

use super::uprobe::Probe;
use super::{KernelError, KernelSummary};

/// How long the CLI waits for the broker's answer to `Hello` and `Start`.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// descriptor and `pid` to the broker, with `probes` (each with the descriptor of its
    /// file: the broker checks and probes that very file), and waits until it records.
    ///
    /// # Errors
    /// The refusal or failure, to print.
    pub fn start(self, output: &TraceDir, pid: i32, probes: &[Probe]) -> Result<Broker, String> {
        let kernel = output.dir(super::KERNEL_DIR, 0o750).map_err(|e| format!("making {}: {e}", output.path().join(super::KERNEL_DIR).display()))?;
        let dir = kernel.path();
        let fd = kernel.open_fd().map_err(|e| format!("{}: {e}", dir.display()))?;
        // One request per probe: the locations of an SDT probe after its first are found
        // again by the daemon, which reads the notes itself.
        let firsts: Vec<&Probe> =
            probes.iter().enumerate().filter(|(i, p)| !(p.sdt && probes[..*i].iter().any(|q| q.event == p.event))).map(|(_, p)| p).collect();
        let specs: Vec<ProbeRequest> = firsts
            .iter()
            .map(|p| ProbeRequest {
                event: p.event.clone(),
                path: p.path.display().to_string(),
                symbol: p.function.clone(),
                ret: p.ret,
                args: p.args.iter().map(|a| (a.name.clone(), a.fetch.clone(), a.ty.clone())).collect(),
                sdt: p.sdt,
            })
            .collect();
        let fds: Vec<_> = std::iter::once(fd.as_fd()).chain(firsts.iter().map(|p| p.file.as_fd())).collect();
        match ask(&self.sock, &KviewRequest::Start { pid, probes: specs }, &fds)? {
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
