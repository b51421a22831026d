//! One `ctl` connection: read a request, answer it with [`super::dispatch::handle`], until the peer
//! closes, misbehaves, or stays silent too long.

use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ust_core::protocol::{read_frame, write_frame, ProtocolError};
use ust_ctl::protocol::*;

use crate::ops::state::Daemon;

/// How long a new `ctl` connection has to send its first request: a peer that connects
/// and never speaks gets an error and is closed instead of holding a thread forever.
/// (Later requests may come after any pause: `ust trace` keeps its connection while the
/// command runs.)
pub const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the rest of a request may take once its first byte arrived: a frame cut
/// short by a stuck or malicious peer does not pin the thread.
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(2);

/// Sends `Reply::Error{message}` (best effort).
pub fn reply_error(sock: &UnixStream, message: &str) {
    let _ = write_frame(sock, &Reply::Error { message: message.to_string() });
}

/// Sends `reply`; one too large for a frame (a dump of millions of counters, say) is
/// replaced by an error reply that says so, rather than a connection closed without a
/// word. False when the connection is unusable.
pub fn send_reply(sock: &UnixStream, reply: &Reply) -> bool {
    match write_frame(sock, reply) {
        Ok(()) => true,
        Err(ProtocolError::TooLarge(n)) => {
            crate::log!("ctl: a reply of {n} bytes exceeds the {}-byte frame; an error sent instead", ust_core::protocol::MAX_FRAME);
            let message = format!(
                "the daemon's answer ({n} bytes) exceeds the {}-byte limit of a reply: ask for less (e.g. `show-maps --channel C`)",
                ust_core::protocol::MAX_FRAME
            );
            write_frame(sock, &Reply::Error { message }).is_ok()
        }
        Err(_) => false,
    }
}

/// Waits until `sock` is readable (or closed). The first wait is bounded by
/// [`FIRST_REQUEST_TIMEOUT`]; later ones are not, but end when the daemon shuts down.
/// False on timeout or shutdown.
pub fn wait_readable(daemon: &Daemon, sock: &UnixStream, first: bool) -> bool {
    use rustix::event::{PollFd, PollFlags};
    let start = Instant::now();
    loop {
        if daemon.shutting_down() {
            return false;
        }
        let left = if first { FIRST_REQUEST_TIMEOUT.saturating_sub(start.elapsed()) } else { Duration::from_millis(500) };
        if first && left.is_zero() {
            return false;
        }
        let slice = left.min(Duration::from_millis(500));
        let ts = rustix::time::Timespec { tv_sec: 0, tv_nsec: slice.subsec_nanos() as _ };
        let mut fds = [PollFd::new(sock, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => return true,
            Err(_) => return true, // let the read report it
        }
    }
}

/// Serves one `ctl` connection: one reply per request, until the client closes it, sends
/// something that is not a request (an error reply, then the connection closes), sends
/// nothing within [`FIRST_REQUEST_TIMEOUT`] of connecting, or leaves a request unfinished
/// for [`FRAME_TIMEOUT`].
pub fn serve(daemon: Arc<Daemon>, sock: UnixStream) {
    let peer = ust_core::protocol::peer_credentials(&sock).ok().map(|(_, uid, gid)| (uid, gid));
    let _ = sock.set_read_timeout(Some(FRAME_TIMEOUT));
    let _ = sock.set_write_timeout(Some(FRAME_TIMEOUT));
    let mut first = true;
    loop {
        if !wait_readable(&daemon, &sock, first) {
            if first && !daemon.shutting_down() {
                crate::log!("ctl: no request within {} ms of connecting; connection closed", FIRST_REQUEST_TIMEOUT.as_millis());
                reply_error(&sock, &format!("no request within {} ms of connecting; connection closed", FIRST_REQUEST_TIMEOUT.as_millis()));
            }
            return;
        }
        first = false;
        let req: Request = match read_frame(&sock) {
            Ok(r) => r,
            Err(ProtocolError::Eof) => return,
            Err(ProtocolError::Io(e)) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                crate::log!("ctl: request not finished within {} ms; connection closed", FRAME_TIMEOUT.as_millis());
                reply_error(&sock, &format!("request not finished within {} ms; connection closed", FRAME_TIMEOUT.as_millis()));
                return;
            }
            Err(e) => {
                crate::log!("ctl: malformed request: {e}; connection closed");
                reply_error(&sock, &format!("malformed request: {e}"));
                return;
            }
        };
        if req.version != CTL_VERSION {
            reply_error(
                &sock,
                &format!("control protocol version {} is not supported (this daemon speaks {CTL_VERSION}); use matching ust and ust-consumerd", req.version),
            );
            return;
        }
        let reply = match owned_by(req.command, daemon.uid, peer) {
            Ok(command) => super::dispatch::handle(&daemon, command),
            Err(message) => Reply::Error { message },
        };
        if !send_reply(&sock, &reply) {
            return;
        }
    }
}

/// A create request with its owner ([`CreateOptions::owner`]) as this peer may set it: a
/// root peer names the owner (`ust trace --as-user`) or leaves it to the daemon; any other
/// peer of root's daemon (a member of group `tracing`) creates sessions that are its own
/// (its `SO_PEERCRED` uid and gid), so that root's daemon never writes for it with root's
/// rights; in a user's own daemon, nobody names one. Other requests pass unchanged.
///
/// # Errors
/// An owner named by a peer that may not name it; a peer whose credentials are unknown.
pub(super) fn owned_by(command: Command, daemon_uid: u32, peer: Option<(u32, u32)>) -> Result<Command, String> {
    let (name, output, mut options) = match command {
        Command::CreateSession { name, output, token } => (name, output, CreateOptions { token, ..CreateOptions::default() }),
        Command::CreateSessionWith { name, output, options } => (name, output, options),
        other => return Ok(other),
    };
    let Some((uid, gid)) = peer else { return Err("the credentials of this connection are unknown: no session is created".into()) };
    let foreign = options.owner.is_some_and(|o| o.uid != uid);
    match (daemon_uid, uid) {
        (0, 0) => options.owner = options.owner.filter(|o| o.uid != 0),
        _ if foreign => return Err("only root names the user a session's output belongs to".into()),
        (0, _) => options.owner = Some(SessionOwner { uid, gid }),
        _ => options.owner = None,
    }
    Ok(Command::CreateSessionWith { name, output, options })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_too_large_for_a_frame_becomes_an_error_that_says_so() {
        let (a, b) = UnixStream::pair().unwrap();
        let huge = Reply::Error { message: "x".repeat(ust_core::protocol::MAX_FRAME + 1) };
        let reader = std::thread::spawn(move || read_frame::<Reply>(&b));
        assert!(send_reply(&a, &huge), "the connection stays usable");
        drop(a);
        match reader.join().unwrap() {
            Ok(Reply::Error { message }) => assert!(message.contains("exceeds the 16777216-byte limit of a reply"), "{message}"),
            other => panic!("{other:?}"),
        }
    }

    fn create(owner: Option<(u32, u32)>) -> Command {
        let owner = owner.map(|(uid, gid)| SessionOwner { uid, gid });
        Command::CreateSessionWith { name: "s".into(), output: "/o".into(), options: CreateOptions { owner, ..CreateOptions::default() } }
    }

    fn owner_of(c: Result<Command, String>) -> Option<(u32, u32)> {
        match c.unwrap() {
            Command::CreateSessionWith { options, .. } => options.owner.map(|o| (o.uid, o.gid)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn only_root_names_an_owner_and_others_own_their_sessions() {
        // Root's daemon: root names one, or none.
        assert_eq!(owner_of(owned_by(create(Some((1000, 100))), 0, Some((0, 0)))), Some((1000, 100)));
        assert_eq!(owner_of(owned_by(create(None), 0, Some((0, 0)))), None);
        assert_eq!(owner_of(owned_by(create(Some((0, 0))), 0, Some((0, 0)))), None);
        // A member of `tracing`: its own, whatever it says; never another user.
        assert_eq!(owner_of(owned_by(create(None), 0, Some((1001, 101)))), Some((1001, 101)));
        let plain = Command::CreateSession { name: "s".into(), output: "/o".into(), token: Some("t".into()) };
        match owned_by(plain, 0, Some((1001, 101))).unwrap() {
            Command::CreateSessionWith { options, .. } => {
                assert_eq!((options.owner, options.token.as_deref()), (Some(SessionOwner { uid: 1001, gid: 101 }), Some("t")));
            }
            other => panic!("{other:?}"),
        }
        assert!(owned_by(create(Some((1000, 100))), 0, Some((1001, 101))).unwrap_err().contains("only root names"));
        assert!(owned_by(create(None), 0, None).is_err(), "unknown credentials create nothing");
        // A user's own daemon: the user writes as themself.
        assert_eq!(owner_of(owned_by(create(Some((1000, 100))), 1000, Some((1000, 100)))), None);
        assert!(owned_by(create(Some((0, 0))), 1000, Some((1000, 100))).is_err());
        // Other requests pass.
        assert!(matches!(owned_by(Command::Ping, 0, None), Ok(Command::Ping)));
    }
}
