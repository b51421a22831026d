//! A session's userspace probes while it records (`ust enable-event
//! --userspace-probe=SPEC NAME`, [`ust_ctl::probes`]): placed at `ust start`, recorded into
//! `<output>/kernel/` on the trace clock (tracefs' `mono`, the sessions' default
//! `CLOCK_MONOTONIC`, with the session's clock offset in the metadata, so babeltrace2
//! merges them with the user-space traces), removed at `ust stop` and `ust destroy`.
//!
//! The recorder is the one-shot path's ([`ViewRecorder`], `ust trace --userspace-probe`),
//! in its probes-only form ([`ViewRecorder::start_probes`]); who runs it depends on who
//! this daemon is:
//!
//! ```text
//! root's daemon ── ViewRecorder::start_probes(<output>/kernel, everything) ── in this process
//! a user's daemon ── kview socket of root's daemon: Hello, StartProbes + fds ──> root's daemon
//!                    (the same checks as `ust trace`'s: files the user owns, hits of the
//!                     tasks the user could ptrace), Finish at stop
//! ```
//!
//! A later `start` of the same session records into `kernel-2/`, `kernel-3/`, … (each a
//! complete trace; babeltrace2 reads them all with the rest). Probes left placed by a
//! daemon that was killed are removed by the next recording's start
//! ([`ust_kernel::uprobe::remove_stale`]).

use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use ust_core::protocol::{recv, send};
use ust_ctf::outdir::TraceDir;
use ust_ctl::kview::{system_rundir, KviewReply, KviewRequest, ProbeRequest, KVIEW_SOCKET};
use ust_ctl::probes::{ProbeLocation, UserspaceProbe};
use ust_kernel::filter::ViewFilter;
use ust_kernel::uprobe::{self, Probe, Spec};
use ust_kernel::view_recorder::ViewRecorder;

/// How long the broker has to answer `Hello`, `StartProbes` and `Finish`.
const BROKER_TIMEOUT: Duration = Duration::from_secs(30);

/// Most `kernel-N` directories tried for one session.
const MAX_RUNS: u32 = 1000;

/// A session's probes being recorded.
#[derive(Debug)]
pub enum Recording {
    /// By this daemon, root's, in its own tracefs instance.
    Here(ViewRecorder, PathBuf),
    /// By root's daemon for this user: the connection that started it.
    Broker(UnixStream, PathBuf),
}

/// The probes of `rules` that are enabled, resolved as this daemon's user sees the files
/// (arguments from DWARF where the file has it; an SDT probe: one per location, with its
/// notes' operands).
///
/// # Errors
/// The first that cannot be resolved, and why.
pub fn resolve(rules: &[UserspaceProbe]) -> Result<Vec<Probe>, String> {
    let mut out = Vec::new();
    for r in rules.iter().filter(|r| r.enabled) {
        let why = |e: String| format!("userspace probe {}: {e}", r.name);
        match &r.location {
            ProbeLocation::Function { path, symbol, ret } => {
                let (symbol, offset) = uprobe::split_offset(symbol).map_err(why)?;
                let spec = Spec { path: path.clone(), symbol, offset, ret: *ret };
                out.push(uprobe::resolve(&spec, Some(&r.name)).map_err(why)?);
            }
            ProbeLocation::Sdt { path, provider, probe } => {
                let spec = uprobe::sdt::SdtSpec { path: path.clone(), provider: provider.clone(), name: probe.clone() };
                out.extend(uprobe::sdt::resolve(&spec, Some(&r.name)).map_err(why)?);
            }
        }
    }
    Ok(out)
}

/// The directory of this start's recording: `kernel/`, or for a session that recorded
/// before, the first free `kernel-N/` (N from 2).
fn new_kernel_dir(out: &TraceDir) -> Result<TraceDir, String> {
    for n in 1..=MAX_RUNS {
        let name = if n == 1 { ust_kernel::KERNEL_DIR.to_string() } else { format!("{}-{n}", ust_kernel::KERNEL_DIR) };
        match out.new_dir(&name, 0o750) {
            Ok(d) => return Ok(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("making {}: {e}", out.path().join(&name).display())),
        }
    }
    Err(format!("{} has {MAX_RUNS} kernel directories already", out.path().display()))
}

/// Starts recording `rules` (at least one enabled) into a new kernel directory of `out`:
/// here when this daemon is root's (`euid` 0), else through root's daemon.
///
/// # Errors
/// Why not, for `ust start` to print: a probe that no longer resolves, no root's daemon,
/// its refusal, tracefs' refusal.
pub fn start(out: &TraceDir, rules: &[UserspaceProbe], euid: u32) -> Result<Recording, String> {
    if euid != 0 {
        // A session file edited by hand: root's daemon would refuse it anyway.
        if let Some(r) = rules.iter().find(|r| matches!(&r.location, ProbeLocation::Function { symbol, .. } if symbol.contains('+'))) {
            return Err(format!("userspace probe {}: {}", r.name, uprobe::OFFSET_ROOT_ONLY));
        }
    }
    let probes = resolve(rules)?;
    if probes.is_empty() {
        return Err("no enabled userspace probe".into());
    }
    if euid != 0 {
        // Said before anything is made: the user's refusal is about the daemon.
        let sock = hello()?;
        let dir = new_kernel_dir(out)?;
        return start_broker(sock, dir, &probes);
    }
    let dir = new_kernel_dir(out)?;
    let path = dir.path();
    let rec = ViewRecorder::start_probes(dir, ViewFilter::everything(0), &probes).map_err(|e| format!("placing the userspace probes: {}", e.explain()))?;
    Ok(Recording::Here(rec, path))
}

/// Connects to root's daemon and says `Hello`.
fn hello() -> Result<UnixStream, String> {
    let path = system_rundir().join(KVIEW_SOCKET);
    let sock = UnixStream::connect(&path).map_err(|e| {
        format!(
            "userspace probes need root's ust-consumerd (the kernel broker) and there is none at {} ({e}): ask root to run `ust daemon start`",
            path.display()
        )
    })?;
    let _ = sock.set_read_timeout(Some(BROKER_TIMEOUT));
    send(&sock, &KviewRequest::Hello, &[]).map_err(|e| e.to_string())?;
    match recv::<KviewReply>(&sock).map_err(|e| e.to_string())?.0 {
        KviewReply::Ready => Ok(sock),
        KviewReply::Refused { reason } => Err(format!("root's ust-consumerd refused: {reason}")),
        other => Err(format!("root's ust-consumerd answered {other:?}")),
    }
}

/// `StartProbes` with the directory's descriptor and each probe file's.
fn start_broker(sock: UnixStream, dir: TraceDir, probes: &[Probe]) -> Result<Recording, String> {
    let path = dir.path();
    let fd = dir.open_fd().map_err(|e| format!("{}: {e}", path.display()))?;
    // One request per probe: root's daemon finds an SDT probe's other locations itself,
    // reading the notes of the file sent.
    let firsts: Vec<&Probe> = probes.iter().enumerate().filter(|(i, p)| !(p.sdt && probes[..*i].iter().any(|q| q.event == p.event))).map(|(_, p)| p).collect();
    let reqs: Vec<ProbeRequest> = firsts
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
    send(&sock, &KviewRequest::StartProbes { probes: reqs }, &fds).map_err(|e| e.to_string())?;
    match recv::<KviewReply>(&sock).map_err(|e| format!("root's ust-consumerd: {e}"))?.0 {
        KviewReply::Started => {
            let _ = sock.set_read_timeout(None);
            Ok(Recording::Broker(sock, path))
        }
        KviewReply::Refused { reason } => Err(format!("root's ust-consumerd refused the userspace probes: {reason}")),
        other => Err(format!("root's ust-consumerd answered {other:?}")),
    }
}

impl Recording {
    /// The trace directory (`<output>/kernel`, `kernel-N`).
    pub fn dir(&self) -> &std::path::Path {
        match self {
            Recording::Here(_, d) | Recording::Broker(_, d) => d,
        }
    }

    /// Removes the probes and writes the rest of the trace and its final metadata, with
    /// the session's clock offset `offset` (ns). Returns the directory and the count of
    /// each event written.
    ///
    /// # Errors
    /// The writing error, or root's daemon gone (the trace is then whole up to it).
    pub fn finish(self, offset: i64) -> Result<(PathBuf, Vec<(String, u64)>), String> {
        match self {
            Recording::Here(rec, dir) => rec.finish(0, offset).map(|s| (dir, s.counts)),
            Recording::Broker(sock, dir) => {
                let _ = sock.set_read_timeout(Some(BROKER_TIMEOUT));
                send(&sock, &KviewRequest::Finish { traced_pid: 0, clock_offset_ns: Some(offset) }, &[]).map_err(|e| e.to_string())?;
                match recv::<KviewReply>(&sock).map_err(|e| format!("root's ust-consumerd went away ({e}): {} is whole up to then", dir.display()))?.0 {
                    KviewReply::Finished { counts, error: None, .. } => Ok((dir, counts)),
                    KviewReply::Finished { error: Some(e), .. } => Err(format!("writing {}: {e}", dir.display())),
                    other => Err(format!("root's ust-consumerd answered {other:?}")),
                }
            }
        }
    }
}
