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
use std::sync::Arc;
use std::time::Duration;

use ust_core::protocol::{self, AppMessage, DaemonMessage, ProtocolError};

use crate::model::app::{check_registration, App, Outgoing, SyncState};
use crate::ops::process_life::{process_gone, register_events};
use crate::ops::state::Daemon;

/// How long a new connection has to send `Register`.
pub const REGISTER_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends a `Refused` and logs why.
fn refuse(sock: &UnixStream, pid: i32, reason: String) {
    crate::log!("app connection from pid {pid} refused: {reason}");
    let _ = protocol::send(sock, &DaemonMessage::Refused { reason }, &[]);
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
    if crate::ops::fds::fd_headroom() < 2 + crate::ops::fds::FD_MARGIN / 2 {
        return refuse(
            &sock,
            pid,
            format!(
                "ust-consumerd is out of file descriptors ({}); not traced: raise its limit (ulimit -n) or trace fewer processes",
                crate::ops::fds::fd_usage()
            ),
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
            if crate::ops::attach::attach(&mut st, &n, id) {
                daemon.wake_drain();
            }
        }
        let st = &mut *st;
        if let Some(app) = st.apps.get_mut(&id) {
            st.triggers.attach_app(app);
        }
        st.attach_maps(id);
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
        DaemonMessage::MoreFds { .. } => "MoreFds",
        DaemonMessage::RemoveChannel { .. } => "RemoveChannel",
        DaemonMessage::SetEnabled { .. } => "SetEnabled",
        DaemonMessage::Ready => "Ready",
        DaemonMessage::Sync { .. } => "Sync",
        DaemonMessage::Statedump { .. } => "Statedump",
    }
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
