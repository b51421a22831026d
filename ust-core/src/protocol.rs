//! The application ↔ daemon protocol, on the daemon's `app` socket
//! (docs/DESIGN.md#registration-protocol, #processes and #security).
//!
//! Frames on a `SOCK_STREAM` Unix socket: a little-endian `u32` body length, then a JSON body
//! of at most [`MAX_FRAME`] bytes. File descriptors travel with a frame as `SCM_RIGHTS`
//! (at most [`MAX_FDS`]), received with `MSG_CMSG_CLOEXEC`; a truncated control message
//! (`MSG_CTRUNC`) is an error. Every frame is length-checked before it is read; a malformed one
//! is an error that ends the connection, never a panic.
//!
//! The conversation:
//!
//! ```text
//! app                                      daemon
//!  ── AppMessage::Register ─────────────────>   validates ABI and descriptions
//!  <─ DaemonMessage::AddChannel + 1 fd/CPU ──   for each session channel that takes this process
//!  <─ DaemonMessage::MoreFds{slot} + fds ───   (past 253 buffers: the rest, 253 a frame)
//!  <─ DaemonMessage::SetEnabled ─────────────   channel mask of every event
//!  <─ DaemonMessage::Ready ──────────────────   the constructor may return
//!        … later, at any time …
//!  <─ AddChannel / RemoveChannel / SetEnabled / Sync{seq}
//!  ── SyncDone{seq} ────────────────────────>   every earlier command is applied
//!  ── RegisterEvents{first, events} ────────>   late tracepoints: metadata rewritten,
//!                                               then SetEnabled with the longer masks
//!  ── Exiting ──────────────────────────────>   normal exit (`exit`, return from `main`)
//! ```
//!
//! Event ids: the `i`-th event of [`Registration::events`] (from 0) has CTF event id
//! [`event_id`]`(i)` in every per-PID stream of that process. A per-UID channel
//! ([`ChannelGrant::shared_ids`]) is shared by every process of a user: there the daemon's
//! registry of that trace assigns the ids and sends each process its table
//! ([`ChannelIds`], with `SetEnabled`), as LTTng's session daemon answers each
//! application's event registration with the id of its per-UID registry.

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::context::ContextType;
use crate::event::EventDesc;
use crate::event_header::FIRST_EVENT_ID;
use crate::filter::Expr;

/// Largest frame body, in bytes.
pub const MAX_FRAME: usize = 16 << 20;
/// Most descriptors in one frame (the kernel's `SCM_MAX_FD` is 253).
pub const MAX_FDS: usize = 253;
/// Most channels (of all sessions) one process can write at once: the width of the enable
/// mask.
pub const MAX_CHANNELS: u32 = 64;
/// Environment variable through which `ust trace` hands its session token to the traced
/// command and its children.
pub const ENV_SESSION_TOKEN: &str = "UST_SESSION_TOKEN";

/// CTF event id of the `index`-th registered event of a process.
pub const fn event_id(index: u32) -> u32 {
    index + FIRST_EVENT_ID
}

/// What a process says about itself when it registers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    /// [`crate::ABI_MAJOR`] of the runtime.
    pub abi_major: u16,
    /// [`crate::ABI_MINOR`] of the runtime.
    pub abi_minor: u16,
    /// Process id.
    pub pid: i32,
    /// Parent process id.
    pub ppid: i32,
    /// Real user id (the daemon trusts `SO_PEERCRED`, not this).
    pub uid: u32,
    /// Process name (`/proc/self/comm`).
    pub procname: String,
    /// Token from `UST_SESSION_TOKEN`, set by `ust trace` for the command it runs.
    pub session_token: Option<String>,
    /// Number of possible CPUs: one buffer per CPU per channel.
    pub ncpus: u32,
    /// Every tracepoint of the process, in id order ([`event_id`]).
    pub events: Vec<EventDesc>,
    /// Trace clock the process asks for (`UST_CLOCK`); a session's own choice wins.
    /// Absent from older runtimes: `None`, the session's clock (monotonic by default).
    #[serde(default)]
    pub clock: Option<crate::clock::ClockKind>,
}

/// Messages from an application to the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AppMessage {
    /// First message on a connection.
    Register(Registration),
    /// Answer to [`DaemonMessage::Sync`].
    SyncDone {
        /// The sequence number received.
        seq: u64,
    },
    /// The process is exiting normally; no more events will come.
    Exiting,
    /// Tracepoints created after registration (ABI minor 1; `tracing` callsites met at run
    /// time): they take the next event ids, `first` being the index of the first of them
    /// (the number of events the daemon knows). The daemon rewrites the metadata of every
    /// trace of the process (temporary file + rename) before it enables any of them.
    RegisterEvents {
        /// Index of the first new event: the count of events registered so far.
        first: u32,
        /// Their descriptions, in id order.
        events: Vec<EventDesc>,
    },
}

/// A channel the daemon hands to a process: the frame carries one buffer descriptor per CPU,
/// CPU 0 first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelGrant {
    /// Slot (0..[`MAX_CHANNELS`]) this channel takes in the process's enable masks.
    pub slot: u32,
    /// Session name, for messages.
    pub session: String,
    /// Channel name, for messages.
    pub channel: String,
    /// Number of per-CPU buffers (and of descriptors in the frame).
    pub ncpus: u32,
    /// Context fields written after the event header of every record of this channel, in
    /// this order (`ust add-context`; ABI minor 1, absent = none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contexts: Vec<ContextType>,
    /// The trace clock of this channel: `None` for `CLOCK_MONOTONIC`, else the TSC with
    /// these conversion parameters (the daemon switches the buffers with the same clock).
    #[serde(default)]
    pub tsc: Option<crate::clock::TscParams>,
    /// A per-UID channel (ABI minor 5, absent = false): its buffers are shared with the
    /// user's other processes, so records take the ids of the channel's own event registry
    /// ([`DaemonMessage::SetEnabled`]'s `ids`), not the process's registration order; an
    /// event with no id there is not recorded into this channel.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_ids: bool,
    /// Blocking mode (`--blocking-timeout`): 0 (absent, and for older runtimes, which
    /// ignore the field) discards when full; else a writer waits up to this many µs for
    /// room, `u64::MAX` without limit.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub blocking_timeout_us: u64,
    /// A map slot instead of a ring buffer channel (ABI minor 8, granted only to runtimes
    /// of minor [`crate::MAPS_SINCE_MINOR`] or later): the frame carries one descriptor, a
    /// counter map (`ringbuffer::counters`), and an event whose mask bit names this slot
    /// is counted there, not recorded: it adds 1 to the counter whose index + 1 is the
    /// event's entry in this slot's [`ChannelIds`] (0: no key, nothing counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<MapGrant>,
}

/// What makes a [`ChannelGrant`] a map slot (LTTng 2.16's `incr-map-value` action
/// targeting a map channel): one action of one trigger in one process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapGrant {
    /// The daemon's id of the counter map (one per map channel and owner): slots with
    /// the same id increment the same counters.
    pub map_id: u32,
    /// The map channel's update policy is `per-event`: when several slots of one map
    /// produce the same key for one event, the counter is incremented once (else once per
    /// slot: `per-rule-match`).
    pub per_event: bool,
}

/// The CTF event ids of one per-UID channel ([`ChannelGrant::shared_ids`]) for this
/// process's events: `ids[i]` is the id event `i` (registration order) records with in the
/// channel in `slot`, 0 when it has none (the trace's registry is full). Ids are assigned
/// by the daemon, once per event name and layout of the per-UID trace, and never change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelIds {
    /// Channel slot.
    pub slot: u32,
    /// One id per registered event (a prefix: events past its end have none yet).
    pub ids: Vec<u32>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The filters of one event in one channel: the event is recorded into the channel in
/// `slot` only when one of `any_of` matches (the filters of the enablers that match the
/// event OR together). Every expression is resolved ([`crate::filter::Operand::Field`]
/// indexes) and is validated again by the process before use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventFilter {
    /// Index of the event in registration order.
    pub event: u32,
    /// Channel slot.
    pub slot: u32,
    /// Alternatives; at least one.
    pub any_of: Vec<Expr>,
}

/// Messages from the daemon to an application.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum DaemonMessage {
    /// Registration refused (ABI major mismatch, bad description); the process runs untraced.
    Refused {
        /// Why, for `UST_DEBUG=1`.
        reason: String,
    },
    /// Map these buffers and write enabled events into them.
    AddChannel(ChannelGrant),
    /// Stop writing into this slot's buffers (its mask bits are already cleared).
    RemoveChannel {
        /// The slot.
        slot: u32,
    },
    /// Channel masks of every event, index = registration order: bit `s` of `masks[i]` set
    /// means event `i` is recorded into the channel in slot `s`.
    SetEnabled {
        /// One mask per registered event.
        masks: Vec<u64>,
        /// Conditions on some of the mask bits (ABI minor 1, absent = none): a bit named by
        /// an entry is recorded only when the entry's filter matches.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        filters: Vec<EventFilter>,
        /// The most verbose level (highest [`crate::Level`] number) that an enabler of a
        /// started session tracing this process accepts, whatever its pattern, or
        /// [`NO_LEVEL`] when none does (absent: not known, from a daemon before this
        /// field). A `tracing` layer tells `tracing` its maximum level from it: a callsite
        /// of a more verbose level could not be enabled by any session yet.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_level: Option<u8>,
        /// Event ids of the per-UID channels among the slots (ABI minor 5, absent =
        /// none): applied before the masks, so a bit set in `masks` for such a slot always
        /// finds its id.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ids: Vec<ChannelIds>,
    },
    /// Registration is complete.
    Ready,
    /// Answer with [`AppMessage::SyncDone`] once every earlier message is applied.
    Sync {
        /// Echoed back.
        seq: u64,
    },
    /// More buffer descriptors of the [`DaemonMessage::AddChannel`] just sent for `slot`
    /// (ABI minor 7, sent only to runtimes of minor 7 or later): a channel of more than
    /// [`MAX_FDS`] buffers (more than 253 possible CPUs) comes as the `AddChannel` frame
    /// with the first [`MAX_FDS`] descriptors, then frames of this message with the next
    /// ones, back to back, until the grant's `ncpus` are there.
    MoreFds {
        /// The slot of the grant these descriptors complete.
        slot: u32,
    },
    /// Emit the state dump again into the channels of these slots (bit `s` = slot `s`;
    /// `ust regenerate statedump`, ABI minor 4: never sent to an older runtime).
    Statedump {
        /// Channel slots.
        slots: u64,
    },
}

/// [`DaemonMessage::SetEnabled`]'s `max_level` when no enabler accepts any level.
pub const NO_LEVEL: u8 = u8::MAX;

/// Errors of the framing layer.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The peer closed the connection between frames.
    #[error("connection closed")]
    Eof,
    /// A system call failed.
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
    /// A length above [`MAX_FRAME`].
    #[error("frame of {0} bytes exceeds the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    /// More descriptors than [`MAX_FDS`], or a truncated control message.
    #[error("bad descriptors: {0}")]
    Fds(&'static str),
    /// The body is not a valid message.
    #[error("malformed message: {0}")]
    Malformed(#[from] serde_json::Error),
}

/// Sends `msg` as one frame, with `fds` attached.
///
/// # Errors
/// [`ProtocolError::Io`] when the socket fails (a peer that went away gives `EPIPE`; the
/// runtime ignores `SIGPIPE` through `MSG_NOSIGNAL`), [`ProtocolError::Fds`] for more than
/// [`MAX_FDS`] descriptors, [`ProtocolError::TooLarge`] for a body over [`MAX_FRAME`].
pub fn send<T: Serialize>(sock: &UnixStream, msg: &T, fds: &[BorrowedFd<'_>]) -> Result<(), ProtocolError> {
    if fds.len() > MAX_FDS {
        return Err(ProtocolError::Fds("more than 253 descriptors in one message"));
    }
    let body = serde_json::to_vec(msg)?;
    if body.len() > MAX_FRAME {
        return Err(ProtocolError::TooLarge(body.len()));
    }
    let len = (body.len() as u32).to_le_bytes();
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len);
    frame.extend_from_slice(&body);
    let mut space = vec![MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(ProtocolError::Fds("control buffer too small"));
    }
    let flags = SendFlags::NOSIGNAL;
    let mut sent = rustix::net::sendmsg(sock.as_fd(), &[IoSlice::new(&frame)], &mut control, flags).map_err(std::io::Error::from)?;
    while sent < frame.len() {
        let n = rustix::net::send(sock.as_fd(), &frame[sent..], flags).map_err(std::io::Error::from)?;
        if n == 0 {
            return Err(ProtocolError::Eof);
        }
        sent += n;
    }
    Ok(())
}

/// Receives one frame: the message and the descriptors that came with it (close-on-exec).
///
/// # Errors
/// [`ProtocolError::Eof`] when the peer closed the connection before a frame,
/// [`ProtocolError::TooLarge`], [`ProtocolError::Fds`] on `MSG_CTRUNC` or too many
/// descriptors, [`ProtocolError::Malformed`] when the body is not a `T`, and
/// [`ProtocolError::Io`] otherwise (a frame cut short is `UnexpectedEof`).
pub fn recv<T: DeserializeOwned>(sock: &UnixStream) -> Result<(T, Vec<OwnedFd>), ProtocolError> {
    let mut len = [0u8; 4];
    let mut space = vec![MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = loop {
        match rustix::net::recvmsg(sock.as_fd(), &mut [IoSliceMut::new(&mut len)], &mut control, RecvFlags::CMSG_CLOEXEC) {
            Ok(r) => break r,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(std::io::Error::from(e).into()),
        }
    };
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(iter) = m {
            fds.extend(iter);
        }
    }
    if got.flags.contains(ReturnFlags::CTRUNC) {
        return Err(ProtocolError::Fds("control message truncated (MSG_CTRUNC)"));
    }
    if fds.len() > MAX_FDS {
        return Err(ProtocolError::Fds("more than 253 descriptors in one message"));
    }
    if got.bytes == 0 {
        return Err(ProtocolError::Eof);
    }
    let mut rd = sock;
    if got.bytes < 4 {
        rd.read_exact(&mut len[got.bytes..])?;
    }
    let n = u32::from_le_bytes(len) as usize;
    if n > MAX_FRAME {
        return Err(ProtocolError::TooLarge(n));
    }
    let mut body = vec![0u8; n];
    rd.read_exact(&mut body)?;
    Ok((serde_json::from_slice(&body)?, fds))
}

/// Writes one frame with no descriptors to any writer (the control socket, a pipe).
///
/// # Errors
/// As [`send`].
pub fn write_frame<T: Serialize>(mut w: impl Write, msg: &T) -> Result<(), ProtocolError> {
    let body = serde_json::to_vec(msg)?;
    if body.len() > MAX_FRAME {
        return Err(ProtocolError::TooLarge(body.len()));
    }
    w.write_all(&(body.len() as u32).to_le_bytes())?;
    w.write_all(&body)?;
    w.flush()?;
    Ok(())
}

/// Reads one frame with no descriptors from any reader.
///
/// # Errors
/// As [`recv`].
pub fn read_frame<T: DeserializeOwned>(mut r: impl Read) -> Result<T, ProtocolError> {
    let mut len = [0u8; 4];
    match r.read(&mut len[..1]) {
        Ok(0) => return Err(ProtocolError::Eof),
        Ok(_) => r.read_exact(&mut len[1..])?,
        Err(e) => return Err(e.into()),
    }
    let n = u32::from_le_bytes(len) as usize;
    if n > MAX_FRAME {
        return Err(ProtocolError::TooLarge(n));
    }
    let mut body = vec![0u8; n];
    r.read_exact(&mut body)?;
    Ok(serde_json::from_slice(&body)?)
}

/// Credentials of the peer of a connected Unix socket (`SO_PEERCRED`): `(pid, uid, gid)`.
///
/// # Errors
/// The `getsockopt` error.
pub fn peer_credentials(sock: &UnixStream) -> std::io::Result<(i32, u32, u32)> {
    let c = rustix::net::sockopt::socket_peercred(sock.as_fd())?;
    Ok((c.pid.as_raw_nonzero().get(), c.uid.as_raw(), c.gid.as_raw()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_enabled_max_level_is_optional_on_the_wire() {
        // From a daemon before the field: no level known.
        let old: DaemonMessage = serde_json::from_str(r#"{"SetEnabled":{"masks":[1,0]}}"#).unwrap();
        assert_eq!(old, DaemonMessage::SetEnabled { masks: vec![1, 0], filters: vec![], max_level: None, ids: vec![] });
        for l in [Some(6), Some(NO_LEVEL)] {
            let m = DaemonMessage::SetEnabled { masks: vec![3], filters: vec![], max_level: l, ids: vec![] };
            let text = serde_json::to_string(&m).unwrap();
            assert!(text.contains("\"max_level\""), "{text}");
            assert_eq!(serde_json::from_str::<DaemonMessage>(&text).unwrap(), m);
        }
        let none = serde_json::to_string(&DaemonMessage::SetEnabled { masks: vec![], filters: vec![], max_level: None, ids: vec![] }).unwrap();
        assert!(!none.contains("max_level"), "{none}");
    }

    #[test]
    fn frames_carry_messages_and_descriptors() {
        let (a, b) = UnixStream::pair().unwrap();
        let f = tempfile_fd();
        send(&a, &DaemonMessage::Sync { seq: 7 }, &[f.as_fd(), f.as_fd()]).unwrap();
        send(&a, &DaemonMessage::Ready, &[]).unwrap();
        let (m, fds): (DaemonMessage, _) = recv(&b).unwrap();
        assert_eq!(m, DaemonMessage::Sync { seq: 7 });
        assert_eq!(fds.len(), 2);
        let (m, fds): (DaemonMessage, _) = recv(&b).unwrap();
        assert_eq!(m, DaemonMessage::Ready);
        assert!(fds.is_empty());
        drop(a);
        assert!(matches!(recv::<DaemonMessage>(&b), Err(ProtocolError::Eof)));
    }

    #[test]
    fn malformed_and_oversized_frames_are_errors() {
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(&5u32.to_le_bytes()).unwrap();
        a.write_all(b"{bad}").unwrap();
        assert!(matches!(recv::<AppMessage>(&b), Err(ProtocolError::Malformed(_))));
        a.write_all(&u32::MAX.to_le_bytes()).unwrap();
        assert!(matches!(recv::<AppMessage>(&b), Err(ProtocolError::TooLarge(_))));
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(&10u32.to_le_bytes()).unwrap();
        a.write_all(b"{}").unwrap();
        drop(a);
        assert!(matches!(recv::<AppMessage>(&b), Err(ProtocolError::Io(_))));
    }

    #[test]
    fn peer_credentials_name_this_process() {
        let (a, _b) = UnixStream::pair().unwrap();
        let (pid, uid, _) = peer_credentials(&a).unwrap();
        assert_eq!(pid as u32, std::process::id());
        assert_eq!(uid, rustix::process::getuid().as_raw());
    }

    fn tempfile_fd() -> OwnedFd {
        rustix::fs::memfd_create("t", rustix::fs::MemfdFlags::CLOEXEC).unwrap()
    }
}
