//! A registered process as the daemon knows it: its identity, its events, the mask slots
//! its channels (and trigger notifiers) occupy, and the queue of messages to it; and the
//! checks its registration must pass.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use ust_core::clock::ClockKind;
use ust_core::protocol::{self, DaemonMessage, Registration, MAX_CHANNELS};
use ust_core::EventDesc;

/// Most events one process may register.
pub const MAX_EVENTS: usize = 1 << 16;
/// Owner of a trigger's notifier slot in [`App::slots`], in place of a session name (the
/// slot's channel index is the trigger's id): no session has that name, so slot
/// allocation, process death and mask computation need no second table.
pub const SLOT_OWNER: &str = "";

/// Most buffers one channel grant carries (the runtime's own bound is 16384).
pub const MAX_GRANT_BUFFERS: u32 = 4096;

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
    // have would make the daemon allocate (and keep files for) buffers no CPU writes. A
    // runtime before ABI minor 7 takes at most 253 descriptors per channel (one frame).
    let per_grant = if r.abi_minor >= ust_core::MORE_FDS_SINCE_MINOR { MAX_GRANT_BUFFERS } else { protocol::MAX_FDS as u32 };
    let max_cpus = ust_core::cpus::possible_cpu_count().min(per_grant);
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

/// A message queued for an application's writer thread, with the descriptors it carries
/// (closed once sent).
#[derive(Debug)]
pub struct Outgoing {
    /// The message.
    pub msg: DaemonMessage,
    /// Descriptors sent with it as `SCM_RIGHTS`.
    pub fds: Vec<OwnedFd>,
}

/// Progress of `Sync` round trips with one application.
#[derive(Debug, Default)]
pub struct SyncState {
    inner: Mutex<(u64, bool)>,
    cv: Condvar,
}

impl SyncState {
    pub(crate) fn ack(&self, seq: u64) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.0 = g.0.max(seq);
        self.cv.notify_all();
    }

    pub(crate) fn close(&self) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.1 = true;
        self.cv.notify_all();
    }

    /// Waits until `SyncDone{seq}` (or a later one) arrived, the connection closed, or
    /// `deadline` passed. True only in the first case.
    pub fn wait(&self, seq: u64, deadline: Instant) -> bool {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if g.0 >= seq {
                return true;
            }
            if g.1 {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            g = self.cv.wait_timeout(g, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

/// A registered process, alive or gone.
#[derive(Debug)]
pub struct App {
    /// Daemon-local id.
    pub id: u64,
    /// Process id (from `SO_PEERCRED`).
    pub pid: i32,
    /// User id (from `SO_PEERCRED`).
    pub uid: u32,
    /// Group id (from `SO_PEERCRED`), for the `--vgid` tracker.
    pub gid: u32,
    /// Process name, as registered.
    pub procname: String,
    /// `ust trace` token, if any.
    pub token: Option<String>,
    /// Trace clock the process asked for (`UST_CLOCK`).
    pub clock: Option<ClockKind>,
    /// [`ust_core::ABI_MINOR`] of its runtime: what it can be granted.
    pub abi_minor: u16,
    /// Buffers per channel.
    pub ncpus: u32,
    /// Registered events; index `i` has CTF id `event_id(i)`.
    pub events: Vec<EventDesc>,
    /// Registration time (seconds since the Epoch).
    pub registered: i64,
    /// False once the process died or its connection closed.
    pub alive: bool,
    /// Said `Exiting` (a normal exit).
    pub exiting: bool,
    /// Mask slot → (session name, channel index).
    pub slots: BTreeMap<u32, (String, usize)>,
    pub(crate) out: Option<mpsc::Sender<Outgoing>>,
    /// `Sync` round trips.
    pub sync: Arc<SyncState>,
}

impl App {
    /// Queues a message for the writer thread (dropped if the process is gone).
    pub fn send(&self, msg: DaemonMessage, fds: Vec<OwnedFd>) {
        if let Some(out) = &self.out {
            let _ = out.send(Outgoing { msg, fds });
        }
    }

    /// Queues a channel grant with its buffer descriptors: one `AddChannel` frame when
    /// they fit in one ([`protocol::MAX_FDS`]), else `AddChannel` with the first 253 and
    /// [`DaemonMessage::MoreFds`] frames with the rest, in order on the one queue, so
    /// nothing comes between them (a runtime of ABI minor 7 or later: registrations of
    /// older ones with that many CPUs are refused, [`check_registration`]).
    pub fn send_channel(&self, grant: protocol::ChannelGrant, mut fds: Vec<OwnedFd>) {
        let slot = grant.slot;
        let rest = if fds.len() > protocol::MAX_FDS { fds.split_off(protocol::MAX_FDS) } else { Vec::new() };
        self.send(DaemonMessage::AddChannel(grant), fds);
        let mut rest = rest.into_iter();
        loop {
            let chunk: Vec<OwnedFd> = rest.by_ref().take(protocol::MAX_FDS).collect();
            if chunk.is_empty() {
                break;
            }
            self.send(DaemonMessage::MoreFds { slot }, chunk);
        }
    }

    /// The lowest mask slot not in use.
    pub fn free_slot(&self) -> Option<u32> {
        (0..MAX_CHANNELS).find(|s| !self.slots.contains_key(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(out: mpsc::Sender<Outgoing>) -> App {
        App {
            id: 1,
            pid: 1,
            uid: 0,
            gid: 0,
            procname: "p".into(),
            token: None,
            clock: None,
            abi_minor: ust_core::ABI_MINOR,
            ncpus: 600,
            events: Vec::new(),
            registered: 0,
            alive: true,
            exiting: false,
            slots: BTreeMap::new(),
            out: Some(out),
            sync: Arc::default(),
        }
    }

    #[test]
    fn grants_past_253_buffers_go_in_frames_of_253() {
        let (tx, rx) = mpsc::channel();
        let fds: Vec<OwnedFd> = (0..600).map(|_| std::fs::File::open("/dev/null").unwrap().into()).collect();
        let grant = protocol::ChannelGrant {
            slot: 5,
            session: "s".into(),
            channel: "c".into(),
            ncpus: 600,
            contexts: Vec::new(),
            tsc: None,
            shared_ids: false,
            blocking_timeout_us: 0,
            map: None,
        };
        app(tx).send_channel(grant, fds);
        let frames: Vec<Outgoing> = rx.try_iter().collect();
        let sizes: Vec<usize> = frames.iter().map(|f| f.fds.len()).collect();
        assert_eq!(sizes, vec![253, 253, 94]);
        assert!(matches!(frames[0].msg, DaemonMessage::AddChannel(ref g) if g.ncpus == 600));
        assert!(frames[1..].iter().all(|f| f.msg == DaemonMessage::MoreFds { slot: 5 }));
    }

    #[test]
    fn only_runtimes_that_take_more_fds_may_register_more_than_253_cpus() {
        let reg = |abi_minor, ncpus| Registration {
            abi_major: ust_core::ABI_MAJOR,
            abi_minor,
            pid: 1,
            ppid: 0,
            uid: 0,
            procname: "p".into(),
            session_token: None,
            ncpus,
            events: Vec::new(),
            clock: None,
        };
        let possible = ust_core::cpus::possible_cpu_count();
        assert!(check_registration(&reg(ust_core::ABI_MINOR, possible)).is_ok());
        assert!(check_registration(&reg(ust_core::ABI_MINOR, possible + 1)).is_err(), "more CPUs than this machine has");
        if possible > protocol::MAX_FDS as u32 {
            assert!(check_registration(&reg(ust_core::MORE_FDS_SINCE_MINOR - 1, possible)).is_err());
        }
    }
}
