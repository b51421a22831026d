//! Registered applications: the `app` socket conversation of [`ust_core::protocol`], the
//! daemon's state that ties processes to sessions, and what happens when a process dies.
//!
//! One thread per connection reads the application's messages and watches its pidfd; one
//! more thread per connection writes to it from a queue, so that the state lock is never
//! held across blocking I/O to a peer (a process that stops reading its socket stalls only
//! its own writer thread).
//!
//! ```text
//! accept ─> peer uid check ─> Register? ─ no ─> Refused{reason}, close
//!                                │ yes: validate ABI major and every EventDesc
//!                                v
//!            lock state: for every started session that takes the process:
//!              create trace dir + metadata + per-CPU buffers, queue AddChannel(fds)
//!            queue SetEnabled{masks}, Ready; unlock
//!                                v
//!            poll(socket, pidfd): SyncDone → wake waiters; Exiting → noted;
//!            EOF, pidfd readable, or a bad message → process gone:
//!              flush every buffer, drain, close files, mark gone
//! ```

use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ust_core::protocol::{self, AppMessage, DaemonMessage, ProtocolError, Registration};
use ust_core::EventDesc;

use crate::process_trace::ProcessInfo;
use crate::state::{App, Daemon, Outgoing, SyncState};
use crate::stream::Stream;

/// Most events one process may register.
pub const MAX_EVENTS: usize = 1 << 16;
/// How long a new connection has to send `Register`.
pub const REGISTER_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends a `Refused` and logs why.
fn refuse(sock: &UnixStream, pid: i32, reason: String) {
    crate::log!("app connection from pid {pid} refused: {reason}");
    let _ = protocol::send(sock, &DaemonMessage::Refused { reason }, &[]);
}

/// Checks a registration before anything is allocated for it: ABI major, CPU count (at
/// most this machine's possible CPUs), sizes of every list and string, and every event
/// description ([`EventDesc::validate`]).
///
/// # Errors
/// The reason sent back in `Refused`.
pub fn check_registration(r: &Registration) -> Result<(), String> {
    if r.abi_major != ust_core::ABI_MAJOR {
        return Err(format!(
            "ABI major version {} is not supported by this ust-consumerd (major {}, minor {}); upgrade the older side",
            r.abi_major,
            ust_core::ABI_MAJOR,
            ust_core::ABI_MINOR
        ));
    }
    // Buffers are allocated per CPU: a process claiming more CPUs than this machine can
    // have would make the daemon allocate (and keep files for) buffers no CPU writes.
    let max_cpus = ust_core::cpus::possible_cpu_count().min(protocol::MAX_FDS as u32);
    if r.ncpus == 0 || r.ncpus > max_cpus {
        return Err(format!("ncpus {} out of range 1..={max_cpus} (the CPUs this machine can have)", r.ncpus));
    }
    if r.events.len() > MAX_EVENTS {
        return Err(format!("{} events registered, at most {MAX_EVENTS}", r.events.len()));
    }
    if r.procname.len() > 256 {
        return Err("procname longer than 256 bytes".into());
    }
    if r.session_token.as_ref().is_some_and(|t| t.len() > 256) {
        return Err("session token longer than 256 bytes".into());
    }
    for (i, e) in r.events.iter().enumerate() {
        e.validate().map_err(|err| format!("event #{i} ({}): {err}", e.full_name()))?;
    }
    Ok(())
}

/// Serves one connection on the `app` socket until the process is gone. `pid` and `uid`
/// come from `SO_PEERCRED` (already checked by the caller).
pub fn serve(daemon: Arc<Daemon>, sock: UnixStream, pid: i32, uid: u32) {
    let _ = sock.set_read_timeout(Some(REGISTER_TIMEOUT));
    let reg = match protocol::recv::<AppMessage>(&sock) {
        Ok((AppMessage::Register(r), _fds)) => r,
        Ok((other, _)) => return refuse(&sock, pid, format!("expected Register first, got {}", msg_name(&other))),
        Err(ProtocolError::Eof) => return,
        Err(ProtocolError::Io(e)) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            return refuse(&sock, pid, format!("no complete registration within {} ms of connecting", REGISTER_TIMEOUT.as_millis()))
        }
        Err(e) => return refuse(&sock, pid, format!("bad registration: {e}")),
    };
    if let Err(reason) = check_registration(&reg) {
        return refuse(&sock, pid, reason);
    }
    // This connection needs two more descriptors (a pidfd, the writer's socket clone).
    if crate::fds::fd_headroom() < 2 + crate::fds::FD_MARGIN / 2 {
        return refuse(
            &sock,
            pid,
            format!("ust-consumerd is out of file descriptors ({}); not traced: raise its limit (ulimit -n) or trace fewer processes", crate::fds::fd_usage()),
        );
    }
    // From here on the socket is read only when poll says it is readable; the timeout
    // bounds a frame that a peer starts and never finishes, and a peer that never reads
    // stalls only its writer thread, for as long.
    let _ = sock.set_read_timeout(Some(REGISTER_TIMEOUT));
    let _ = sock.set_write_timeout(Some(REGISTER_TIMEOUT));
    let pidfd = match rustix::process::Pid::from_raw(pid).map(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty())) {
        Some(Ok(fd)) => Some(fd),
        _ => {
            crate::log!("pidfd_open({pid}) failed; death is detected by socket EOF only");
            None
        }
    };
    let writer_sock = match sock.try_clone() {
        Ok(s) => s,
        Err(e) => return refuse(&sock, pid, format!("daemon error: {e}")),
    };
    let (tx, rx) = mpsc::channel::<Outgoing>();
    let writer = std::thread::Builder::new().name(format!("app-{pid}-tx")).spawn(move || {
        for o in rx {
            let fds: Vec<_> = o.fds.iter().map(|f| f.as_fd()).collect();
            if let Err(e) = protocol::send(&writer_sock, &o.msg, &fds) {
                crate::log!("process {pid}: sending {} failed: {e}; connection closed", msg_name_d(&o.msg));
                // Without this the app stays registered with nobody sending to it: the
                // reader thread now sees the connection end and takes the process-gone path.
                let _ = writer_sock.shutdown(std::net::Shutdown::Both);
                break;
            }
        }
    });
    if writer.is_err() {
        return refuse(&sock, pid, "daemon cannot start a thread".into());
    }
    let sync = Arc::new(SyncState::default());
    let app_id = {
        let mut st = daemon.lock();
        let id = st.next_app_id();
        daemon.trim.note();
        if reg.pid != pid {
            crate::log!("process {pid} registered as pid {} (another pid namespace?); using {pid}", reg.pid);
        }
        st.apps.insert(
            id,
            App {
                id,
                pid,
                uid,
                // SO_PEERCRED again for the gid (the acceptor passed pid and uid).
                gid: protocol::peer_credentials(&sock).map_or(u32::MAX, |c| c.2),
                procname: reg.procname.clone(),
                token: reg.session_token.clone(),
                clock: reg.clock,
                abi_minor: reg.abi_minor,
                ncpus: reg.ncpus,
                events: reg.events,
                registered: ust_ctf::datetime::now(),
                alive: true,
                exiting: false,
                slots: BTreeMap::new(),
                out: Some(tx),
                sync: sync.clone(),
            },
        );
        let names: Vec<String> = st.sessions.keys().cloned().collect();
        for n in names {
            if st.attach(&n, id) {
                daemon.wake_drain();
            }
        }
        crate::triggers::attach_app(&mut st, id);
        st.push_masks(id);
        st.apps[&id].send(DaemonMessage::Ready, Vec::new());
        crate::log!("process {pid} ({}) registered with {} events", reg.procname, st.apps[&id].events.len());
        id
    };
    watch(&daemon, &sock, pidfd.as_ref(), app_id, &sync, pid);
    sync.close();
    process_gone(&daemon, app_id);
}

fn msg_name(m: &AppMessage) -> &'static str {
    match m {
        AppMessage::Register(_) => "Register",
        AppMessage::SyncDone { .. } => "SyncDone",
        AppMessage::Exiting => "Exiting",
        AppMessage::RegisterEvents { .. } => "RegisterEvents",
    }
}

fn msg_name_d(m: &DaemonMessage) -> &'static str {
    match m {
        DaemonMessage::Refused { .. } => "Refused",
        DaemonMessage::AddChannel(_) => "AddChannel",
        DaemonMessage::RemoveChannel { .. } => "RemoveChannel",
        DaemonMessage::SetEnabled { .. } => "SetEnabled",
        DaemonMessage::Ready => "Ready",
        DaemonMessage::Sync { .. } => "Sync",
        DaemonMessage::Statedump { .. } => "Statedump",
    }
}

/// Late tracepoints of process `app_id`: validated, appended to its events, every trace's
/// metadata rewritten (before anything enables them), then the masks pushed again.
///
/// # Errors
/// A reason to refuse the process: `first` is not the number of events known, too many
/// events, or a bad description.
pub fn register_events(daemon: &Daemon, app_id: u64, first: u32, events: Vec<EventDesc>) -> Result<(), String> {
    let mut st = daemon.lock();
    let Some(app) = st.apps.get_mut(&app_id) else { return Ok(()) };
    if first as usize != app.events.len() {
        return Err(format!("RegisterEvents from index {first}, but {} events are registered", app.events.len()));
    }
    if app.events.len() + events.len() > MAX_EVENTS {
        return Err(format!("more than {MAX_EVENTS} events registered"));
    }
    for (i, e) in events.iter().enumerate() {
        e.validate().map_err(|err| format!("event #{} ({}): {err}", first as usize + i, e.full_name()))?;
    }
    app.events.extend(events);
    let (pid, procname, ncpus, registered) = (app.pid, app.procname.clone(), app.ncpus, app.registered);
    let full = app.events.clone();
    let all = st.share_events(&full);
    let mut streams = Vec::new();
    for ss in st.sessions.values_mut() {
        let Some(t) = ss.traces.get_mut(&app_id) else { continue };
        let info = ProcessInfo { pid, procname: &procname, ncpus, registered, events: &all, tsc: t.tsc };
        if let Some(m) = t.relay.as_mut() {
            m.update(&crate::process_trace::render_metadata(&ss.session, &info, t.uuid));
        } else if let Some(Err(e)) = t.out.as_ref().map(|out| crate::process_trace::write_metadata(&ss.session, &info, out, t.uuid)) {
            crate::log!("session {}: rewriting {}/metadata failed: {e}", ss.session.name, t.dir.display());
        }
        t.events = all.clone();
        streams.extend(t.streams.iter().cloned());
    }
    crate::uid_trace::register_events(&mut st, app_id);
    crate::log!("process {pid} registered {} more events ({} in all)", all.len() - first as usize, all.len());
    // The streams learn the new descriptions (torn-event recovery sizes records with them)
    // before any mask enables the new events; stream locks are taken outside the state lock.
    drop(st);
    for s in &streams {
        s.lock().unwrap_or_else(|e| e.into_inner()).events = all.clone();
    }
    let mut st = daemon.lock();
    crate::triggers::attach_app(&mut st, app_id);
    st.push_masks(app_id);
    Ok(())
}

/// Reads messages and watches the pidfd until the process is gone.
fn watch(daemon: &Daemon, sock: &UnixStream, pidfd: Option<&OwnedFd>, app_id: u64, sync: &SyncState, pid: i32) {
    use rustix::event::{PollFd, PollFlags};
    loop {
        if daemon.shutting_down() {
            return;
        }
        let mut fds = vec![PollFd::new(sock, PollFlags::IN)];
        if let Some(p) = pidfd {
            fds.push(PollFd::new(p, PollFlags::IN));
        }
        let timeout = rustix::time::Timespec { tv_sec: 0, tv_nsec: 500_000_000 };
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => {
                crate::log!("process {pid}: poll failed: {e}");
                return;
            }
        }
        let sock_ready = !fds[0].revents().is_empty();
        let died = fds.get(1).is_some_and(|f| !f.revents().is_empty());
        if sock_ready {
            match protocol::recv::<AppMessage>(sock) {
                Ok((AppMessage::SyncDone { seq }, _)) => sync.ack(seq),
                Ok((AppMessage::Exiting, _)) => {
                    if let Some(a) = daemon.lock().apps.get_mut(&app_id) {
                        a.exiting = true;
                    }
                    crate::log!("process {pid} is exiting");
                }
                Ok((AppMessage::RegisterEvents { first, events }, _)) => {
                    if let Err(reason) = register_events(daemon, app_id, first, events) {
                        refuse(sock, pid, reason);
                        return;
                    }
                }
                Ok((AppMessage::Register(_), _)) => {
                    refuse(sock, pid, "Register sent twice on one connection".into());
                    return;
                }
                Err(ProtocolError::Eof) => {
                    crate::log!("process {pid}: connection closed");
                    return;
                }
                Err(e) => {
                    refuse(sock, pid, format!("bad message: {e}"));
                    return;
                }
            }
        } else if died {
            crate::log!("process {pid} died");
            return;
        }
    }
}

/// The process behind `app_id` is gone: flush every buffer it had (a reader-side switch),
/// drain what was delivered, keep the committed prefix of sub-buffers its dead writers
/// left incomplete (torn-event recovery), close its stream files, free its slots and mark
/// it gone. In a snapshot session, a process that did not say `Exiting` (it died
/// abnormally) gets a post-mortem trace ([`crate::snapshot::post_mortem`]) and its buffers
/// are kept for later snapshots until the session is destroyed (in a `ust trace --snapshot`
/// session, every process's buffers are).
pub fn process_gone(daemon: &Daemon, app_id: u64) {
    let death = ust_ctf::datetime::stamp();
    let (abnormal, pid, procname) = {
        let st = daemon.lock();
        let Some(app) = st.apps.get(&app_id) else { return };
        (!app.exiting, app.pid, app.procname.clone())
    };
    {
        let mut st = daemon.lock();
        let Some(app) = st.apps.get_mut(&app_id) else { return };
        app.alive = false;
        app.out = None;
        app.slots.clear();
        crate::uid_trace::forget(&mut st, app_id);
        let Some(app) = st.apps.get_mut(&app_id) else { return };
        // A gone process's descriptions live on in its traces (one shared copy each).
        app.events = Vec::new();
        for ss in st.sessions.values_mut() {
            if let Some(t) = ss.traces.get_mut(&app_id) {
                t.slots.iter_mut().for_each(|s| *s = None);
                // Its metadata is on disk; only snapshots and post-mortem dumps, which
                // retained traces are kept for, write it again.
                if !ss.session.snapshot {
                    t.metadata = String::new();
                }
            }
        }
    }
    // The traces are marked gone only once their content is on disk, so that a client
    // that sees "gone" can read them.
    if abnormal {
        let written = crate::snapshot::post_mortem(daemon, app_id, &death);
        let mut st = daemon.lock();
        for (session, dir) in written {
            if let Some(t) = st.sessions.get_mut(&session).and_then(|ss| ss.traces.get_mut(&app_id)) {
                t.post_mortem = Some(dir);
            }
        }
    }
    {
        // Kept for later snapshots: the buffers of a process that died abnormally, and in a
        // `ust trace --snapshot` session (which lives as long as its command) every
        // process's, for the snapshot taken when the command ends.
        let mut st = daemon.lock();
        for ss in st.sessions.values_mut().filter(|ss| ss.session.snapshot && (abnormal || ss.session.token.is_some())) {
            if let Some(t) = ss.traces.get_mut(&app_id) {
                t.retained = true;
            }
        }
    }
    let streams: Vec<Arc<Mutex<Stream>>> = {
        let st = daemon.lock();
        st.sessions.values().filter_map(|ss| ss.traces.get(&app_id)).filter(|t| !t.retained).flat_map(|t| t.streams.iter().cloned()).collect()
    };
    for s in &streams {
        s.lock().unwrap_or_else(|e| e.into_inner()).finish_dead();
    }
    let mut st = daemon.lock();
    for ss in st.sessions.values_mut() {
        if let Some(t) = ss.traces.get_mut(&app_id) {
            // Everything its buffer files held is in the trace now (its streams are
            // finished): the crash-recovery copies go, as they would at destroy, so that a
            // long --shm-path session does not fill the file system with dead processes.
            if !t.retained {
                if let Some(d) = t.shm_dir.take() {
                    let _ = std::fs::remove_dir_all(&d);
                }
            }
            t.gone = true;
        }
    }
    crate::log!("process {pid} ({procname}) gone{}; {} streams finished", if abnormal { " without a normal exit" } else { "" }, streams.len());
    st.forget_gone_apps();
    drop(st);
}
