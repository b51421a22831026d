//! A runtime thread: finds its daemon (the user's own, or root's: [`super::links`]),
//! registers, and applies what the daemon says to that daemon's part of the process's
//! state.
//!
//! Every daemon message is checked before it is applied (slot in range, one descriptor per
//! CPU buffer, one mask per registered event, buffers whose header validates); a bad one is
//! ignored and explained under `UST_DEBUG`, never a panic.

use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ust_core::clock::TraceClock;
use ust_core::protocol::{self, AppMessage, ChannelGrant, DaemonMessage, EventFilter, ProtocolError, Registration, MAX_CHANNELS};

use super::fd::{Conn, Received};
use super::links;
use super::statedump::StateDump;
use super::{debug, Generation, POLL_INTERVAL};
use crate::channel::{self, Channel};
use crate::site;

/// How long a send to the daemon may block before the connection is given up.
const SEND_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the rest of a daemon message may take once its first byte arrived.
const FRAME_TIMEOUT: Duration = Duration::from_secs(2);
/// Most per-CPU buffers one channel may have (a sanity bound on daemon input).
const MAX_BUFFERS: u32 = 1 << 14;

enum Outcome {
    /// The daemon refused this process; do not retry with the same daemon.
    Refused,
    /// The connection ended.
    Closed,
}

/// `(st_dev, st_ino)` of `path`, `None` when it does not exist.
fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|md| (md.dev(), md.ino()))
}

/// True when `link`'s socket `id` is the one another link serves: the same daemon,
/// registered with once (root's daemon seen through both directories, say).
fn served_by_other_link(link: usize, id: (u64, u64)) -> bool {
    let Some(paths) = super::SOCKET_PATHS.get() else { return false };
    paths.iter().enumerate().any(|(l, p)| l < link && p.as_deref().and_then(identity) == Some(id))
}

/// Forgets `link`'s daemon: its masks cleared, its channels unlinked and their memory
/// released (the other daemon's stay). How many channels it had.
fn forget(g: &Generation, link: usize) -> usize {
    let mut st = g.state();
    let n = st.forget(link);
    st.apply();
    g.links[link].masks_len.store(0, Ordering::Release);
    n
}

/// Body of `link`'s runtime thread, which serves the daemon at `path`; never returns.
pub(super) fn run(g: &'static Generation, link: usize, path: PathBuf) {
    g.alive(link);
    let who = links::name(link);
    let mut refused_by: Option<(u64, u64)> = None;
    let mut said_missing = false;
    let mut said_connect = false;
    let mut said_limit = None;
    loop {
        let Some(id) = identity(&path) else {
            g.settle(link);
            if !said_missing && said_connect {
                debug!("socket {} of {who} is gone; waiting for it", path.display());
            }
            said_missing = true;
            std::thread::sleep(POLL_INTERVAL);
            continue;
        };
        if refused_by == Some(id) || served_by_other_link(link, id) {
            g.settle(link);
            std::thread::sleep(POLL_INTERVAL);
            continue;
        }
        // Too few descriptors for the runtime to take one: untraced until the program
        // raises its limit (looked at again on every turn, as the socket is).
        if let Some(soft) = super::fd::too_few_descriptors() {
            if said_limit != Some(soft) {
                debug!(
                    "not connecting to {who}: RLIMIT_NOFILE's soft limit is {soft}, under {}: running untraced so that the program keeps all its descriptors (raise it with `ulimit -n` to be traced)",
                    super::fd::MIN_NOFILE
                );
                said_limit = Some(soft);
            }
            g.settle(link);
            std::thread::sleep(POLL_INTERVAL);
            continue;
        }
        said_limit = None;
        let procname = procname();
        let stream = match Conn::connect(&path) {
            Ok(Some(s)) => s,
            Ok(None) => {
                g.settle(link);
                std::thread::sleep(POLL_INTERVAL);
                continue;
            }
            Err(e) => {
                if !said_connect {
                    debug!("cannot connect to {who} at {}: {e}; retrying every {} ms", path.display(), POLL_INTERVAL.as_millis());
                    said_connect = true;
                }
                g.settle(link);
                std::thread::sleep(POLL_INTERVAL);
                continue;
            }
        };
        said_missing = false;
        said_connect = false;
        // A new daemon hands out new buffers: retire what a previous one (which died
        // without removing its channels) left installed.
        let stale = forget(g, link);
        if stale > 0 {
            debug!("{stale} channel(s) of a previous instance of {who} retired before registering again");
        }
        match serve(g, link, &path, stream, procname) {
            Outcome::Refused => {
                refused_by = Some(id);
                forget(g, link);
            }
            // The daemon is gone without removing its channels (it died: a daemon that
            // shuts down removes them first). Keep writing into the buffers, as LTTng-UST
            // does: they are shared memory that outlives the daemon (a flight recorder keeps
            // its content for `ust crash-dump`, a discard-mode buffer fills and counts its
            // events as lost), the emit path makes no system call either way, and the
            // channels are retired when a daemon is back.
            Outcome::Closed => {}
        }
        g.links[link].fd.clear();
        g.connected(link, 0);
        *g.links[link].writer.lock().unwrap_or_else(|e| e.into_inner()) = None;
        g.settle(link);
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// The process name, read from `/proc/self/comm` before connecting: the runtime never
/// holds a second descriptor beside the connection ([`super::fd`]).
fn procname() -> String {
    super::fd::read_to_string(Path::new("/proc/self/comm")).map(|s| s.trim_end().to_string()).unwrap_or_default()
}

/// The registration this process sends, with `procname` ([`procname`]).
pub(crate) fn registration(procname: String) -> Registration {
    Registration {
        abi_major: ust_core::ABI_MAJOR,
        abi_minor: ust_core::ABI_MINOR,
        pid: rustix::process::getpid().as_raw_nonzero().get(),
        ppid: rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get()),
        uid: rustix::process::getuid().as_raw(),
        procname,
        // Read by the constructor: the runtime thread never reads the environment (the
        // program may be changing it).
        session_token: super::SESSION_TOKEN.get().cloned().flatten(),
        ncpus: super::possible_cpus(),
        events: site::all().map(|s| s.desc().clone()).collect(),
        clock: super::CLOCK_REQUEST.get().copied().flatten(),
    }
}

fn send(g: &Generation, link: usize, msg: &AppMessage) -> Result<(), ProtocolError> {
    let w = g.links[link].writer.lock().unwrap_or_else(|e| e.into_inner());
    match w.as_deref().and_then(Conn::get) {
        Some(sock) => protocol::send(sock, msg, &[]),
        None => Err(ProtocolError::Eof),
    }
}

fn serve(g: &'static Generation, link: usize, path: &Path, conn: Conn, procname: String) -> Outcome {
    let who = links::name(link);
    let l = &g.links[link];
    // One descriptor serves both directions: this thread reads it, senders take the
    // writer lock. The timeouts are options of the socket.
    let conn = Arc::new(conn);
    if let Some(s) = conn.get() {
        let _ = s.set_write_timeout(Some(SEND_TIMEOUT));
    }
    l.fd.set(conn.raw());
    g.connected(link, conn.get().and_then(|s| protocol::peer_credentials(s).ok()).map_or(0, |(pid, _, _)| pid));
    // The writer is installed and the registration sent under one hold of its lock: a site
    // made meanwhile ([`site::register_dynamic`], or a `dlopen`ed object's) is either in
    // this registration or announced after it, never both, never neither, and never
    // announced before the registration on the new connection.
    let nevents = {
        let mut w = l.writer.lock().unwrap_or_else(|e| e.into_inner());
        *w = Some(conn.clone());
        let reg = registration(procname);
        let n = reg.events.len();
        let r = match w.as_deref().and_then(Conn::get) {
            Some(sock) => protocol::send(sock, &AppMessage::Register(reg), &[]),
            None => Err(ProtocolError::Eof),
        };
        if let Err(e) = r {
            debug!("registration with {who} at {} failed: {e}", path.display());
            return Outcome::Closed;
        }
        l.announced.store(n, Ordering::Relaxed);
        n
    };
    debug!("registered with {who} at {} with {nevents} tracepoints", path.display());
    let mut dump = StateDump::new();
    // Between messages the daemon may stay silent for ever (the loop polls first); within
    // one, a pause longer than FRAME_TIMEOUT means a stuck or broken daemon: the connection
    // is given up rather than leaving this thread blocked, with tracing in whatever state
    // it was, until the daemon finishes the frame.
    if let Some(s) = conn.get() {
        let _ = s.set_read_timeout(Some(FRAME_TIMEOUT));
    }
    loop {
        super::announce_pending(link);
        let wait = dump.until_poll();
        if wait == Some(Duration::ZERO) {
            // The library events go to this daemon's channels only (the other daemon's
            // runtime thread polls for its own), under the state lock (masks narrowed).
            let st = g.state();
            dump.poll(st.slots_of(link));
            drop(st);
            continue;
        }
        // Checked before every use: a descriptor the program closed is never read again
        // (whatever it names now is the program's).
        let Some(stream) = conn.get() else {
            debug!("the daemon connection's descriptor was closed by the program: reconnecting");
            return Outcome::Closed;
        };
        // An announcement left to this thread (the writer was busy) is made within 100 ms.
        let wait = if super::announce_is_pending(link) { Some(wait.map_or(PENDING_POLL, |w| w.min(PENDING_POLL))) } else { wait };
        if !readable_within(stream, wait) {
            continue;
        }
        let Some(stream) = conn.get() else { continue };
        let (msg, fds) = match protocol::recv::<DaemonMessage>(stream) {
            // Identities are taken at once: a descriptor is never closed later unless it
            // still names what the daemon sent.
            Ok((m, fds)) => (m, Received::take_all(fds)),
            Err(ProtocolError::Eof) => {
                debug!("{who} closed the connection: its channels stay until it is back");
                return Outcome::Closed;
            }
            Err(ProtocolError::Io(e)) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                debug!("{who} left a message unfinished for {} ms: its tracing off until it is back", FRAME_TIMEOUT.as_millis());
                return Outcome::Closed;
            }
            Err(e) => {
                debug!("connection to {who} failed ({e}): its channels stay until it is back");
                return Outcome::Closed;
            }
        };
        match msg {
            DaemonMessage::Refused { reason } => {
                debug!("refused by {who}: {reason}; not traced by it");
                return Outcome::Refused;
            }
            DaemonMessage::AddChannel(grant) => {
                let Some(fds) = rest_of_grant(stream, &grant, fds) else {
                    debug!("{who} broke off a channel grant of {} buffers: reconnecting", grant.ncpus);
                    return Outcome::Closed;
                };
                if let Some(slot) = add_channel(g, link, grant, fds) {
                    dump.channel_added(slot);
                }
            }
            DaemonMessage::MoreFds { slot } => {
                debug!("descriptors for slot {slot} outside a channel grant ignored");
            }
            DaemonMessage::RemoveChannel { slot } => {
                if let Some(slot) = remove_channel(g, link, slot) {
                    dump.channel_removed(slot);
                }
            }
            DaemonMessage::SetEnabled { masks, filters, max_level, ids } => {
                set_shared_ids(g, link, &ids);
                set_enabled(g, link, masks, filters, max_level);
                let _st = g.state();
                dump.masks_applied();
            }
            DaemonMessage::Ready => {
                // Before the constructor may return: the dump precedes main's events.
                let st = g.state();
                dump.masks_applied();
                let mine = st.slots_of(link);
                drop(st);
                debug!(
                    "ready ({who}): {} channel(s), {} of {nevents} tracepoints enabled",
                    mine.count_ones(),
                    site::all().filter(|s| s.mask() & mine != 0).count()
                );
                g.settle(link);
            }
            DaemonMessage::Statedump { slots } => {
                let st = g.state();
                let global = st.translate(link, slots);
                let n = super::statedump::dump(global);
                drop(st);
                debug!("state dump regenerated for {who}: {n} objects into channel slots {global:#x}");
            }
            DaemonMessage::Sync { seq } => {
                if let Err(e) = send(g, link, &AppMessage::SyncDone { seq }) {
                    debug!("cannot answer sync {seq}: {e}");
                    return Outcome::Closed;
                }
            }
        }
    }
}

/// Waits until `stream` is readable (or closed), for at most `timeout` (`None`: no limit).
/// False on timeout.
fn readable_within(stream: &UnixStream, timeout: Option<Duration>) -> bool {
    use rustix::event::{PollFd, PollFlags};
    let mut fds = [PollFd::new(stream, PollFlags::IN)];
    let ts = timeout.map(|t| rustix::time::Timespec { tv_sec: t.as_secs() as _, tv_nsec: t.subsec_nanos() as _ });
    match rustix::event::poll(&mut fds, ts.as_ref()) {
        Ok(0) | Err(rustix::io::Errno::INTR) => false,
        // Readable, hung up, or a poll error: the read that follows tells which.
        _ => true,
    }
}

/// Longest wait between two looks at a pending announcement ([`super::announce_pending`]).
const PENDING_POLL: Duration = Duration::from_millis(100);

/// The descriptors of a grant of more than [`protocol::MAX_FDS`] buffers: `fds` (from the
/// `AddChannel` frame) and those of the [`DaemonMessage::MoreFds`] frames that follow it
/// at once. `None` when another frame comes first or the connection fails (the caller
/// reconnects); a grant whose count is out of range is left to [`add_channel`] to refuse.
fn rest_of_grant(stream: &UnixStream, grant: &ChannelGrant, mut fds: Vec<Option<Received>>) -> Option<Vec<Option<Received>>> {
    let want = grant.ncpus as usize;
    if grant.ncpus > MAX_BUFFERS || fds.len() >= want || fds.len() < protocol::MAX_FDS {
        return Some(fds);
    }
    while fds.len() < want {
        match protocol::recv::<DaemonMessage>(stream) {
            Ok((DaemonMessage::MoreFds { slot }, more)) if slot == grant.slot && !more.is_empty() => fds.extend(Received::take_all(more)),
            _ => return None,
        }
    }
    Some(fds)
}

/// Maps the buffers of a channel `link`'s daemon granted and installs it in a global slot
/// of the process's table ([`links`]). The slot, when installed.
fn add_channel(g: &Generation, link: usize, grant: ChannelGrant, fds: Vec<Option<Received>>) -> Option<u32> {
    let what = format!("channel {}/{} (slot {} of {})", grant.session, grant.channel, grant.slot, links::name(link));
    if grant.slot >= MAX_CHANNELS {
        debug!("{what} ignored: slot out of range 0..{MAX_CHANNELS}");
        return None;
    }
    if let Err(e) = ust_core::context::validate(&grant.contexts) {
        debug!("{what} ignored: bad context list: {e}");
        return None;
    }
    if let Some(m) = grant.map.clone() {
        let local = grant.slot;
        let ch = map_slot(&what, grant, m, fds)?;
        return install(g, link, &what, local, ch, "a counter map".into());
    }
    if grant.ncpus == 0 || grant.ncpus > MAX_BUFFERS || fds.len() != grant.ncpus as usize {
        debug!("{what} ignored: {} descriptors for {} buffers", fds.len(), grant.ncpus);
        return None;
    }
    let mut buffers = Vec::with_capacity(fds.len());
    for (cpu, fd) in fds.into_iter().enumerate() {
        // The descriptor is closed when `fd` drops at the end of this iteration (if it
        // still names the memfd received): the mapping keeps the memory.
        let Some((held, raw)) = fd.and_then(|fd| fd.raw().map(|raw| (fd, raw))) else {
            debug!("{what} ignored: descriptor of buffer {cpu} closed under the runtime");
            return None;
        };
        // SAFETY: `raw` was just checked to name the memory the daemon sent, and `held`
        // keeps the number open (it is closed only when `held` drops, after the mapping).
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(raw) };
        match ringbuffer::shm::open_received(fd) {
            Ok(b) => buffers.push(b),
            Err(e) => {
                match e {
                    ringbuffer::shm::ShmError::Layout(e) => debug!("{what} ignored: buffer {cpu} is not a valid ring buffer: {e}"),
                    e => debug!("{what} ignored: cannot map buffer {cpu}: {e}"),
                }
                held.abandon();
                return None;
            }
        }
    }
    let (subbuf, num) = (buffers[0].config().subbuf_size, buffers[0].config().num_subbuf);
    let n = buffers.len();
    let clock = match grant.tsc {
        // The daemon measured the TSC; it is usable here too unless this process runs
        // somewhere else (it cannot: the buffers are shared memory on one machine), but
        // check rather than execute `rdtscp` on a CPU without it.
        Some(p) if ust_core::clock::tsc::usable() => TraceClock::Tsc(p),
        Some(_) => {
            debug!("{what}: the daemon chose the TSC clock but this CPU has no usable TSC; CLOCK_MONOTONIC instead");
            TraceClock::Monotonic
        }
        None => TraceClock::Monotonic,
    };
    let shared = grant.shared_ids;
    let local = grant.slot;
    let mut ch = Channel::new(buffers.into_boxed_slice(), grant.session, grant.channel, grant.contexts, clock).with_blocking(grant.blocking_timeout_us);
    if shared {
        ch = ch.with_shared_ids();
    }
    install(g, link, &what, local, ch, format!("{n} buffer(s) of {num} x {subbuf} bytes"))
}

/// The map slot of a grant with [`ChannelGrant::map`]: its one descriptor mapped as a
/// counter map (header checked), or `None` (explained under `UST_DEBUG`).
fn map_slot(what: &str, grant: ChannelGrant, m: ust_core::protocol::MapGrant, fds: Vec<Option<Received>>) -> Option<Channel> {
    if fds.len() != 1 {
        debug!("{what} ignored: {} descriptors for one counter map", fds.len());
        return None;
    }
    let fd = fds.into_iter().next().flatten();
    let Some((held, raw)) = fd.and_then(|fd| fd.raw().map(|raw| (fd, raw))) else {
        debug!("{what} ignored: its counter map descriptor is missing or was closed under the runtime");
        return None;
    };
    // SAFETY: `raw` names the memory the daemon sent and `held` keeps it open until after
    // the mapping is made.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(raw) };
    match ringbuffer::counters::open_received(fd) {
        Ok(c) => Some(Channel::new_map(c, grant.session, grant.channel, m.map_id, m.per_event)),
        Err(e) => {
            debug!("{what} ignored: not a valid counter map: {e}");
            held.abandon();
            None
        }
    }
}

/// Installs channel (or map slot) `ch` in a global slot for `link`'s local slot.
fn install(g: &Generation, link: usize, what: &str, local: u32, ch: Channel, detail: String) -> Option<u32> {
    let mut st = g.state();
    let Some(slot) = st.claim(link, local) else {
        debug!("{what} ignored: all {MAX_CHANNELS} channel slots of the process are taken");
        return None;
    };
    let old = channel::install(slot, ch);
    // Sites already enabled in the slot (a reused slot, or one the daemon enabled before
    // granting it) must not keep the old channel as their plan.
    site::refresh_plans(1u64 << slot);
    if let Some(old) = old {
        debug!("slot {slot} reused: previous channel {}/{} retired", old.session, old.name);
        channel::retire(old);
    }
    // The daemon may have enabled the slot before granting it.
    st.apply();
    drop(st);
    debug!("{what} granted in slot {slot}: {detail}");
    Some(slot)
}

/// Removes the channel `link`'s daemon had in its slot `local`; the global slot it had.
fn remove_channel(g: &Generation, link: usize, local: u32) -> Option<u32> {
    if local >= MAX_CHANNELS {
        debug!("remove of slot {local} ignored: out of range");
        return None;
    }
    let mut st = g.state();
    let Some(slot) = st.release(link, local) else {
        debug!("remove of slot {local} of {} ignored: no channel there", links::name(link));
        return None;
    };
    for s in site::all() {
        s.clear_bits(1u64 << slot);
    }
    st.apply();
    drop(st);
    if let Some(ch) = channel::take(slot) {
        // Let emitters that loaded the channel just before finish into the real buffer.
        std::thread::sleep(Duration::from_millis(20));
        channel::retire(ch);
        debug!("channel {}/{} (slot {slot}) removed", ch.session, ch.name);
    }
    Some(slot)
}

/// Stores the event ids of `link`'s per-UID channels (before the masks that use them are
/// set).
fn set_shared_ids(g: &Generation, link: usize, ids: &[ust_core::protocol::ChannelIds]) {
    for c in ids {
        let slot = (c.slot < MAX_CHANNELS).then(|| g.state().global(link, c.slot)).flatten();
        let Some(table) = slot.and_then(channel::get).and_then(|ch| ch.shared_ids.as_deref()) else {
            debug!("event ids for slot {} ignored: no per-UID channel there", c.slot);
            continue;
        };
        if c.ids.len() > site::count() {
            debug!("event ids for slot {} ignored: {} ids for {} tracepoints", c.slot, c.ids.len(), site::count());
            continue;
        }
        table.set(&c.ids);
    }
}

/// Applies `link`'s daemon's `SetEnabled` (checked first: a bad one is ignored whole).
fn set_enabled(g: &Generation, link: usize, masks: Vec<u64>, filters: Vec<EventFilter>, max_level: Option<u8>) {
    // Sites made at run time and not yet known to the daemon are not in `masks`: they keep
    // their (zero) masks until the daemon, having registered them, sends longer ones.
    let n = masks.len();
    if n > site::count() || n < site::static_count() {
        debug!("enable masks ignored: {} masks for {} tracepoints", masks.len(), site::count());
        return;
    }
    if filters.len() > n.saturating_mul(MAX_CHANNELS as usize) {
        debug!("enable masks ignored: {} filter entries for {n} tracepoints", filters.len());
        return;
    }
    let filters: Vec<EventFilter> = filters
        .into_iter()
        .filter(|f| {
            let ok = (f.event as usize) < n && f.slot < MAX_CHANNELS;
            if !ok {
                debug!("filter for event #{} slot {} ignored: out of range", f.event, f.slot);
            }
            ok
        })
        .collect();
    let mut st = g.state();
    st.set_enabled(link, masks, filters, max_level);
    let (enabled, nfiltered) = st.apply();
    drop(st);
    g.links[link].masks_len.store(n, Ordering::Release);
    debug!("{} enables {n} tracepoints; {enabled} enabled in all, {nfiltered} with filters", links::name(link));
}
