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
        let reply = super::dispatch::handle(&daemon, req.command);
        if write_frame(&sock, &reply).is_err() {
            return;
        }
    }
}
