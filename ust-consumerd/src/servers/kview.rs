//! Root's daemon as the kernel broker: the `kview` socket, on which any user's
//! `ust trace --kernel` asks for the kernel side of one command ([`ust_ctl::kview`] has the
//! protocol, [`ust_kernel::filter`] the rule: the events of the tasks the requester could
//! ptrace, everything else reduced to its kind).
//!
//! Why a socket of its own, 0666, rather than a request on `ctl` (0660, group `tracing`):
//! `ctl` gives its peers the whole daemon (every session, every user's buffers), so it stays
//! closed; `kview` accepts exactly these requests and nothing else, from anyone, and the
//! answer depends only on the peer's `SO_PEERCRED` identity. Every peer is hostile:
//!
//! - the policy (`--kernel-view all|group NAME|none`) is checked first;
//! - the pid must be the requester's own child (its parent is the peer's pid) and ptraceable
//!   by them now ([`ust_kernel::filter::may_see`]); another user's pid is refused;
//! - exactly one descriptor, a directory owned by the requester; the daemon writes in it
//!   only through that descriptor, from a thread whose file-system identity is the
//!   requester's, so it can create nothing the user could not;
//! - a recording belongs to the connection that started it: there is no session token to
//!   forge or replay, a `Finish` on any other connection is refused, and a `Start` for a
//!   child that has already exited is refused as stale;
//! - at most [`Limits::per_user`] recordings per user and [`Limits::total`] in all (each is
//!   two tracefs instances with their buffers: `2 x 4 MiB` of kernel memory per CPU), at
//!   most `total +` [`SPARE_CONNECTIONS`] connections at once; requests time out after
//!   [`REQUEST_TIMEOUT`];
//! - dynamic probes (`user_probes`): only on regular files the requester owns, given by
//!   descriptor, not set-user-ID/set-group-ID/capability programs, at a function's entry
//!   or return as the daemon itself resolves it, fetching argument registers only; their
//!   hits pass the same view filter (another user's process running the file is not in
//!   the trace);
//! - a session's probes (`StartProbes`, from the user's own daemon at `ust start`): the
//!   same checks of the directory and the probe files, no pid; the hits of the tasks the
//!   requester could ptrace only ([`ViewFilter::owner`]), the probes' events alone;
//! - a daemon that cannot use tracefs says so at `Hello`, so the user's `ust trace` goes
//!   to tier 1 at once.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ust_core::protocol::{recv, send};
use ust_ctl::kview::{KviewReply, KviewRequest, ProbeRequest};
use ust_kernel::filter::{may_see, parent_of, ViewFilter};
use ust_kernel::uprobe::{self, FetchArg, Probe};
use ust_kernel::view_recorder::ViewRecorder;

/// Recordings one user may have at once, unless `--kernel-view-max-per-user` says otherwise.
pub const MAX_PER_USER: usize = 16;
/// Recordings the daemon makes at once, unless `--kernel-view-max-total` says otherwise.
pub const MAX_TOTAL: usize = 64;
/// Connections served at once beyond [`Limits::total`] (each is a thread; a recording holds
/// its connection); more are answered `Refused` at once.
pub const SPARE_CONNECTIONS: usize = 16;

/// How many kernel views the broker makes at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Per user (`--kernel-view-max-per-user`, default [`MAX_PER_USER`]).
    pub per_user: usize,
    /// In all (`--kernel-view-max-total`, default [`MAX_TOTAL`]).
    pub total: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { per_user: MAX_PER_USER, total: MAX_TOTAL }
    }
}
/// How long a peer has to send `Hello` and `Start`.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Who may have a kernel view (`--kernel-view`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Every user (the default).
    All,
    /// Members of the group (name, gid).
    Group(String, u32),
    /// No one: the broker is off.
    None,
}

impl Policy {
    /// Parses `all`, `none` or `group NAME`.
    ///
    /// # Errors
    /// An unknown word, or a group that does not exist.
    pub fn parse(words: &[String]) -> Result<Policy, String> {
        match words.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
            [] | ["all"] => Ok(Policy::All),
            ["none"] => Ok(Policy::None),
            ["group", name] => crate::servers::peers::group_id(name)
                .map(|g| Policy::Group(name.to_string(), g))
                .ok_or_else(|| format!("--kernel-view group {name}: no such group")),
            other => Err(format!("--kernel-view takes all, none or group NAME, not {other:?}")),
        }
    }

    /// Why peer `uid`/`gid`/`pid` may not have a view, or `None` when it may.
    pub fn refusal(&self, uid: u32, gid: u32, pid: i32) -> Option<String> {
        match self {
            Policy::All => None,
            Policy::None => Some("root's ust-consumerd does not offer kernel views to users (it runs with --kernel-view none)".into()),
            Policy::Group(name, g) => (uid != 0 && !crate::servers::peers::in_group(*g, gid, pid))
                .then(|| format!("root's ust-consumerd offers kernel views to members of group {name} only (--kernel-view group {name})")),
        }
    }
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_user: HashMap<u32, usize>,
}

/// A slot of the recording limits, given back on drop.
struct Slot(Arc<Mutex<Counts>>, u32);

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.0.lock().unwrap_or_else(|p| p.into_inner());
        c.total = c.total.saturating_sub(1);
        if let Some(n) = c.per_user.get_mut(&self.1) {
            *n = n.saturating_sub(1);
        }
    }
}

/// One open connection, counted against [`MAX_CONNECTIONS`] until dropped.
struct Open(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

fn take_slot(counts: &Arc<Mutex<Counts>>, uid: u32, limits: Limits) -> Option<Slot> {
    let mut c = counts.lock().unwrap_or_else(|p| p.into_inner());
    let mine = c.per_user.get(&uid).copied().unwrap_or(0);
    if c.total >= limits.total || mine >= limits.per_user {
        return None;
    }
    c.total += 1;
    *c.per_user.entry(uid).or_default() += 1;
    Some(Slot(counts.clone(), uid))
}

/// Accepts on `kview` until the process ends, one thread per connection, making at most
/// `limits` recordings at once.
pub fn spawn_acceptor(listener: UnixListener, policy: Policy, limits: Limits) {
    let max_connections = limits.total.saturating_add(SPARE_CONNECTIONS);
    let policy = Arc::new(policy);
    let counts = Arc::new(Mutex::new(Counts::default()));
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let r = std::thread::Builder::new().name("accept-kview".into()).spawn(move || {
        for conn in listener.incoming() {
            let Ok(sock) = conn else {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            let Ok((pid, uid, gid)) = ust_core::protocol::peer_credentials(&sock) else { continue };
            if open.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= max_connections {
                open.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                let _ = sock.set_write_timeout(Some(Duration::from_millis(100)));
                let _ = send(&sock, &KviewReply::Refused { reason: format!("too many kernel-view connections at once (at most {max_connections})") }, &[]);
                continue;
            }
            // Given back when the thread ends, or when it cannot start (the closure drops).
            let guard = Open(open.clone());
            let (p, c) = (policy.clone(), counts.clone());
            let r = std::thread::Builder::new().name(format!("kview-{pid}")).spawn(move || {
                let _open = guard;
                if let Err(e) = serve(&sock, pid, uid, gid, &p, &c, limits) {
                    crate::log!("kview: uid {uid} (pid {pid}): {e}");
                    let _ = send(&sock, &KviewReply::Refused { reason: e }, &[]);
                }
            });
            if let Err(e) = r {
                crate::log!("kview: cannot start a thread: {e}");
            }
        }
    });
    if let Err(e) = r {
        crate::log!("cannot start accept-kview: {e}");
    }
}

/// The checked directory descriptor of a `Start` (the first; the rest are the probes').
fn output_dir(fds: &mut Vec<OwnedFd>, probes: usize, uid: u32) -> Result<OwnedFd, String> {
    if fds.len() != 1 + probes {
        return Err(format!("Start needs exactly one descriptor for the output directory and one per probe ({}), not {}", 1 + probes, fds.len()));
    }
    let fd = fds.remove(0);
    let st = rustix::fs::fstat(&fd).map_err(|e| format!("fstat of the output descriptor: {e}"))?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Directory {
        return Err("the output descriptor is not a directory".into());
    }
    if st.st_uid != uid {
        return Err(format!("the output directory belongs to uid {}, not to you (uid {uid})", st.st_uid));
    }
    Ok(fd)
}

/// Why a request that is not the expected one is refused.
fn unexpected(req: &KviewRequest, expected: &str) -> String {
    match req {
        KviewRequest::Finish { .. } => format!(
            "Finish without a recording on this connection: refused (a kernel view belongs to the connection that started it; there is no session to name from another) — expected {expected}"
        ),
        other => format!("expected {expected}, got {other:?}"),
    }
}

fn serve(sock: &UnixStream, peer: i32, uid: u32, gid: u32, policy: &Policy, counts: &Arc<Mutex<Counts>>, limits: Limits) -> Result<(), String> {
    let _ = sock.set_read_timeout(Some(REQUEST_TIMEOUT));
    let req = recv::<KviewRequest>(sock).map_err(|e| e.to_string())?.0;
    if req != KviewRequest::Hello {
        return Err(unexpected(&req, "Hello"));
    }
    if let Some(reason) = policy.refusal(uid, gid, peer) {
        crate::log!("kview: uid {uid} (pid {peer}) refused by policy");
        return send(sock, &KviewReply::Refused { reason }, &[]).map_err(|e| e.to_string());
    }
    if let Err(e) = ust_kernel::tracefs::root() {
        crate::log!("kview: uid {uid} (pid {peer}) refused: no tracefs ({e})");
        let reason = format!("root's ust-consumerd cannot record the kernel: {e}");
        return send(sock, &KviewReply::Refused { reason }, &[]).map_err(|e| e.to_string());
    }
    send(sock, &KviewReply::Ready, &[]).map_err(|e| e.to_string())?;
    let (req, fds) = recv::<KviewRequest>(sock).map_err(|e| e.to_string())?;
    let (req, mut fds) = (req, fds);
    let (pid, probes) = match req {
        KviewRequest::Start { pid, probes } => (pid, probes),
        KviewRequest::StartProbes { probes } => return serve_probes(sock, uid, gid, probes, fds, counts, limits),
        other => return Err(unexpected(&other, "Start")),
    };
    if parent_of(pid) != Some(peer) {
        return Err(format!("pid {pid} is not a child of yours that you could ptrace: refused"));
    }
    if !ust_kernel::filter::is_running(pid) {
        return Err(format!("pid {pid} has already exited: a stale request, refused (nothing of it can be recorded)"));
    }
    if !may_see(pid, uid, gid) {
        return Err(format!("pid {pid} is a child of yours that you could not ptrace (set-user-ID, set-group-ID or not dumpable): refused"));
    }
    let dir = output_dir(&mut fds, probes.len(), uid)?;
    let probes = user_probes(probes, fds, uid)?;
    let Some(_slot) = take_slot(counts, uid, limits) else {
        return Err(format!(
            "too many kernel views at once (at most {} per user, {} in all: root's ust-consumerd --kernel-view-max-per-user, --kernel-view-max-total)",
            limits.per_user, limits.total
        ));
    };
    let path = std::path::PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    let rec = ViewRecorder::start_with_probes(path, ViewFilter::new(uid, gid, pid), &probes).map_err(|e| format!("kernel recording failed to start: {e}"))?;
    drop(probes);
    crate::log!("kview: recording for uid {uid}, pid {pid}");
    send(sock, &KviewReply::Started, &[]).map_err(|e| e.to_string())?;
    let _ = sock.set_read_timeout(None);
    let (traced_pid, offset) = match recv::<KviewRequest>(sock) {
        Ok((KviewRequest::Finish { traced_pid, clock_offset_ns }, _)) => (traced_pid, clock_offset_ns),
        _ => (pid, None),
    };
    let offset = offset.unwrap_or_else(ust_core::clock::realtime_offset_ns);
    let reply = match rec.finish(traced_pid, offset) {
        Ok(s) => KviewReply::Finished { counts: s.counts, lost: s.lost, error: None },
        Err(e) => KviewReply::Finished { counts: Vec::new(), lost: 0, error: Some(e) },
    };
    drop(dir);
    crate::log!("kview: done for uid {uid}, pid {pid}");
    let _ = send(sock, &reply, &[]);
    Ok(())
}

/// A user's session's probes (`StartProbes`): the same checks of the directory and of
/// each probe as `Start`'s, no pid; the view is [`ViewFilter::owner`] (every task the user
/// could ptrace), the probes' events alone, until `Finish` or the connection's close.
fn serve_probes(
    sock: &UnixStream,
    uid: u32,
    gid: u32,
    probes: Vec<ProbeRequest>,
    mut fds: Vec<OwnedFd>,
    counts: &Arc<Mutex<Counts>>,
    limits: Limits,
) -> Result<(), String> {
    if probes.is_empty() {
        return Err("StartProbes without a probe: nothing to record".into());
    }
    let dir = output_dir(&mut fds, probes.len(), uid)?;
    let probes = user_probes(probes, fds, uid)?;
    let Some(_slot) = take_slot(counts, uid, limits) else {
        return Err(format!(
            "too many kernel views at once (at most {} per user, {} in all: root's ust-consumerd --kernel-view-max-per-user, --kernel-view-max-total)",
            limits.per_user, limits.total
        ));
    };
    let path = std::path::PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    // Written through the descriptor, by the writing thread as the requester.
    let out = ust_ctf::outdir::TraceDir::from_fd(dir, path, None);
    let rec = ViewRecorder::start_probes(out, ViewFilter::owner(uid, gid), &probes).map_err(|e| format!("the probes' recording failed to start: {e}"))?;
    drop(probes);
    crate::log!("kview: recording the userspace probes of a session of uid {uid}");
    send(sock, &KviewReply::Started, &[]).map_err(|e| e.to_string())?;
    let _ = sock.set_read_timeout(None);
    let offset = match recv::<KviewRequest>(sock) {
        Ok((KviewRequest::Finish { clock_offset_ns, .. }, _)) => clock_offset_ns,
        _ => None,
    };
    let offset = offset.unwrap_or_else(ust_core::clock::realtime_offset_ns);
    let reply = match rec.finish(0, offset) {
        Ok(s) => KviewReply::Finished { counts: s.counts, lost: s.lost, error: None },
        Err(e) => KviewReply::Finished { counts: Vec::new(), lost: 0, error: Some(e) },
    };
    crate::log!("kview: userspace probes done for uid {uid}");
    let _ = send(sock, &reply, &[]);
    Ok(())
}

/// The probes of a `Start`, each checked against the rules of [`ust_kernel::uprobe`]: a
/// regular file the requester owns (by its descriptor, never a path: no link or rename
/// can swap it), not set-user-ID, set-group-ID or with file capabilities; the symbol
/// resolved by the daemon itself, so the probe is at a function's first instruction (or
/// its return); fetch arguments from the argument registers (`$retval`) only, and at an
/// entry the content of a `&str`/`&[u8]`, `+0(%REG):u8[N]` with N at most
/// [`uprobe::dwarf::CONTENT_BYTES`] ([`uprobe::validate`]). An SDT
/// probe goes at its notes' `nop`s, with the notes' operands (registers, memory at a
/// register plus a constant, constants): the user wrote the notes into their own file,
/// and its hits in other users' processes are not in their view.
fn user_probes(reqs: Vec<ProbeRequest>, fds: Vec<OwnedFd>, uid: u32) -> Result<Vec<Probe>, String> {
    if reqs.len() > uprobe::MAX_PROBES {
        return Err(format!("at most {} probes per recording", uprobe::MAX_PROBES));
    }
    let mut out = Vec::new();
    for (r, fd) in reqs.into_iter().zip(fds) {
        let refuse = |why: String| format!("probe {} on {} in {}: {why}", r.event, r.symbol, r.path);
        let file = std::fs::File::from(fd);
        uprobe::check_user_file(&file, uid).map_err(refuse)?;
        uprobe::validate_name(&r.event).map_err(refuse)?;
        if r.sdt {
            // The notes' own locations and operands, read by the daemon: the user's
            // `args` are not taken.
            let (provider, name) = r.symbol.split_once(':').ok_or_else(|| refuse("an SDT probe is PROVIDER:PROBE".into()))?;
            out.extend(uprobe::sdt::resolve_file(file, std::path::Path::new(&r.path), provider, name, &r.event).map_err(refuse)?);
            if out.len() > uprobe::MAX_PROBES {
                return Err(format!("at most {} probe locations per recording", uprobe::MAX_PROBES));
            }
            continue;
        }
        let args: Vec<FetchArg> = r.args.iter().map(|(name, fetch, ty)| FetchArg { name: name.clone(), fetch: fetch.clone(), ty: ty.clone() }).collect();
        uprobe::validate(&args, r.ret).map_err(refuse)?;
        if uprobe::split_offset(&r.symbol).is_ok_and(|(_, off)| off.is_some()) {
            return Err(refuse(uprobe::OFFSET_ROOT_ONLY.into()));
        }
        // Never at an offset: the function's entry or its return only.
        let mut p = uprobe::resolve_file(file, std::path::Path::new(&r.path), &r.symbol, None, r.ret, &r.event, false).map_err(refuse)?;
        p.args = args;
        p.note = None;
        out.push(p);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_refuse() {
        let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(Policy::parse(&w("all")), Ok(Policy::All));
        assert_eq!(Policy::parse(&w("none")), Ok(Policy::None));
        assert_eq!(Policy::parse(&w("group root")), Ok(Policy::Group("root".into(), 0)));
        assert!(Policy::parse(&w("group no-such-group-ust")).is_err());
        assert!(Policy::parse(&w("some")).is_err());
        assert!(Policy::None.refusal(1000, 1000, 1).unwrap().contains("--kernel-view none"));
        assert_eq!(Policy::All.refusal(1000, 1000, 1), None);
        assert_eq!(Policy::Group("root".into(), 0).refusal(1000, 0, 1), None);
    }

    #[test]
    fn a_users_probe_is_never_placed_at_an_offset() {
        use std::os::unix::fs::MetadataExt;
        let exe = std::fs::File::open("/proc/self/exe").unwrap();
        let owner = exe.metadata().unwrap().uid();
        let req =
            |symbol: &str| ProbeRequest { event: "m".into(), path: "/proc/self/exe".into(), symbol: symbol.into(), ret: false, args: Vec::new(), sdt: false };
        let fd = || OwnedFd::from(std::fs::File::open("/proc/self/exe").unwrap());
        let entry = user_probes(vec![req("main")], vec![fd()], owner).unwrap();
        assert_eq!(entry.len(), 1);
        for symbol in ["main+0", "main+4", "main+0x10"] {
            let e = user_probes(vec![req(symbol)], vec![fd()], owner).unwrap_err();
            assert!(e.contains("root's only") && e.contains("entry"), "{symbol}: {e}");
        }
    }
}
