//! The runtime thread: finds the daemon, registers, and applies what the daemon says.
//!
//! Every daemon message is checked before it is applied (slot in range, one descriptor per
//! CPU buffer, one mask per registered event, buffers whose header validates); a bad one is
//! ignored and explained under `UST_DEBUG`, never a panic.

use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use ust_core::clock::TraceClock;
use ust_core::protocol::{self, AppMessage, ChannelGrant, DaemonMessage, EventFilter, ProtocolError, Registration, MAX_CHANNELS};

use super::statedump::StateDump;
use super::fd::{Conn, Received};
use super::{debug, tracing_off, Generation, POLL_INTERVAL};
use crate::channel::{self, Channel};
use crate::site::SiteFilter;
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

/// Body of the runtime thread; never returns.
pub(super) fn run(g: &'static Generation, path: PathBuf) {
    g.alive();
    let mut refused_by: Option<(u64, u64)> = None;
    let mut said_missing = false;
    let mut said_connect = false;
    loop {
        let id = match std::fs::metadata(&path) {
            Ok(md) => (md.dev(), md.ino()),
            Err(_) => {
                g.settle();
                if !said_missing && said_connect {
                    debug!("daemon socket {} is gone; waiting for a daemon", path.display());
                }
                said_missing = true;
                std::thread::sleep(POLL_INTERVAL);
                continue;
            }
        };
        if refused_by == Some(id) {
            g.settle();
            std::thread::sleep(POLL_INTERVAL);
            continue;
        }
        let stream = match Conn::connect(&path) {
            Ok(Some(s)) => s,
            Ok(None) => {
                g.settle();
                std::thread::sleep(POLL_INTERVAL);
                continue;
            }
            Err(e) => {
                if !said_connect {
                    debug!("cannot connect to {}: {e}; retrying every {} ms", path.display(), POLL_INTERVAL.as_millis());
                    said_connect = true;
                }
                g.settle();
                std::thread::sleep(POLL_INTERVAL);
                continue;
            }
        };
        said_missing = false;
        said_connect = false;
        // A new daemon hands out new buffers: retire what a previous one (which died
        // without removing its channels) left installed.
        site::disable_all();
        let stale = channel::remove_all();
        if stale > 0 {
            debug!("{stale} channel(s) of a previous daemon retired before registering again");
        }
        match serve(g, &path, stream) {
            Outcome::Refused => {
                refused_by = Some(id);
                tracing_off();
            }
            // The daemon is gone without removing its channels (it died: a daemon that
            // shuts down removes them first). Keep writing into the buffers, as LTTng-UST
            // does: they are shared memory that outlives the daemon (a flight recorder keeps
            // its content for `ust crash-dump`, a discard-mode buffer fills and counts its
            // events as lost), the emit path makes no system call either way, and the
            // channels are retired when a daemon is back.
            Outcome::Closed => {}
        }
        for c in &g.fds {
            c.clear();
        }
        *g.writer.lock().unwrap_or_else(|e| e.into_inner()) = None;
        g.settle();
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// The registration this process sends.
pub(crate) fn registration() -> Registration {
    let procname = super::fd::read_to_string(Path::new("/proc/self/comm")).map(|s| s.trim_end().to_string()).unwrap_or_default();
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

fn send(g: &Generation, msg: &AppMessage) -> Result<(), ProtocolError> {
    let w = g.writer.lock().unwrap_or_else(|e| e.into_inner());
    match w.as_ref().and_then(Conn::get) {
        Some(sock) => protocol::send(sock, msg, &[]),
        None => Err(ProtocolError::Eof),
    }
}

fn serve(g: &'static Generation, path: &Path, conn: Conn) -> Outcome {
    let Some(writer) = conn.try_clone() else {
        debug!("cannot use the daemon connection: no second descriptor");
        return Outcome::Closed;
    };
    if let Some(w) = writer.get() {
        let _ = w.set_write_timeout(Some(SEND_TIMEOUT));
    }
    g.fds[0].set(conn.raw());
    g.fds[1].set(writer.raw());
    // The writer is installed and the registration sent under one hold of its lock: a site
    // made meanwhile ([`site::register_dynamic`], or a `dlopen`ed object's) is either in
    // this registration or announced after it, never both, never neither, and never
    // announced before the registration on the new connection.
    let nevents = {
        let mut w = g.writer.lock().unwrap_or_else(|e| e.into_inner());
        *w = Some(writer);
        let reg = registration();
        let n = reg.events.len();
        let r = match w.as_ref().and_then(Conn::get) {
            Some(sock) => protocol::send(sock, &AppMessage::Register(reg), &[]),
            None => Err(ProtocolError::Eof),
        };
        if let Err(e) = r {
            debug!("registration with {} failed: {e}", path.display());
            return Outcome::Closed;
        }
        g.announced.store(n, Ordering::Relaxed);
        n
    };
    debug!("registered with the daemon at {} with {nevents} tracepoints", path.display());
    let mut dump = StateDump::new();
    // Between messages the daemon may stay silent for ever (the loop polls first); within
    // one, a pause longer than FRAME_TIMEOUT means a stuck or broken daemon: the connection
    // is given up rather than leaving this thread blocked, with tracing in whatever state
    // it was, until the daemon finishes the frame.
    if let Some(s) = conn.get() {
        let _ = s.set_read_timeout(Some(FRAME_TIMEOUT));
    }
    loop {
        super::announce_pending();
        let wait = dump.until_poll();
        if wait == Some(Duration::ZERO) {
            dump.poll();
            continue;
        }
        // Checked before every use: a descriptor the program closed is never read again
        // (whatever it names now is the program's).
        let Some(stream) = conn.get() else {
            debug!("the daemon connection's descriptor was closed by the program: reconnecting");
            return Outcome::Closed;
        };
        // An announcement left to this thread (the writer was busy) is made within 100 ms.
        let wait = if super::announce_is_pending() { Some(wait.map_or(PENDING_POLL, |w| w.min(PENDING_POLL))) } else { wait };
        if !readable_within(stream, wait) {
            continue;
        }
        let Some(stream) = conn.get() else { continue };
        let (msg, fds) = match protocol::recv::<DaemonMessage>(stream) {
            // Identities are taken at once: a descriptor is never closed later unless it
            // still names what the daemon sent.
            Ok((m, fds)) => (m, Received::take_all(fds)),
            Err(ProtocolError::Eof) => {
                debug!("the daemon closed the connection: its channels stay until a daemon is back");
                return Outcome::Closed;
            }
            Err(ProtocolError::Io(e)) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                debug!("the daemon left a message unfinished for {} ms: tracing off until a daemon is back", FRAME_TIMEOUT.as_millis());
                return Outcome::Closed;
            }
            Err(e) => {
                debug!("daemon connection failed ({e}): its channels stay until a daemon is back");
                return Outcome::Closed;
            }
        };
        match msg {
            DaemonMessage::Refused { reason } => {
                debug!("refused by the daemon: {reason}; running untraced");
                return Outcome::Refused;
            }
            DaemonMessage::AddChannel(grant) => {
                let slot = grant.slot;
                if add_channel(grant, fds) {
                    dump.channel_added(slot);
                }
            }
            DaemonMessage::RemoveChannel { slot } => {
                remove_channel(slot);
                dump.channel_removed(slot);
            }
            DaemonMessage::SetEnabled { masks, filters, max_level } => {
                super::set_enabled_max_level(max_level);
                set_enabled(&masks, filters);
                dump.masks_applied();
            }
            DaemonMessage::Ready => {
                // Before the constructor may return: the dump precedes main's events.
                dump.masks_applied();
                debug!(
                    "ready: {} channel(s), {} of {nevents} tracepoints enabled",
                    (0..MAX_CHANNELS).filter(|s| channel::get(*s).is_some()).count(),
                    site::all().filter(|s| s.mask() != 0).count()
                );
                g.settle();
            }
            DaemonMessage::Statedump { slots } => {
                let n = super::statedump::dump(slots);
                debug!("state dump regenerated: {n} objects into channel slots {slots:#x}");
            }
            DaemonMessage::Sync { seq } => {
                if let Err(e) = send(g, &AppMessage::SyncDone { seq }) {
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

/// Maps the buffers of a granted channel and installs it in its slot. True when installed.
fn add_channel(grant: ChannelGrant, fds: Vec<Option<Received>>) -> bool {
    let what = format!("channel {}/{} (slot {})", grant.session, grant.channel, grant.slot);
    if grant.slot >= MAX_CHANNELS {
        debug!("{what} ignored: slot out of range 0..{MAX_CHANNELS}");
        return false;
    }
    if let Err(e) = ust_core::context::validate(&grant.contexts) {
        debug!("{what} ignored: bad context list: {e}");
        return false;
    }
    if grant.ncpus == 0 || grant.ncpus > MAX_BUFFERS || fds.len() != grant.ncpus as usize {
        debug!("{what} ignored: {} descriptors for {} buffers", fds.len(), grant.ncpus);
        return false;
    }
    let mut buffers = Vec::with_capacity(fds.len());
    for (cpu, fd) in fds.into_iter().enumerate() {
        // The descriptor is closed when `fd` drops at the end of this iteration (if it
        // still names the memfd received): the mapping keeps the memory.
        let Some((held, raw)) = fd.and_then(|fd| fd.raw().map(|raw| (fd, raw))) else {
            debug!("{what} ignored: descriptor of buffer {cpu} closed under the runtime");
            return false;
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
                return false;
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
    let old = channel::install(
        grant.slot,
        Channel::new(buffers.into_boxed_slice(), grant.session, grant.channel, grant.contexts).with_clock(clock).with_blocking(grant.blocking_timeout_us),
    );
    if let Some(old) = old {
        debug!("slot {} reused: previous channel {}/{} retired", grant.slot, old.session, old.name);
        channel::retire(old);
    }
    debug!("{what} granted: {n} buffer(s) of {num} x {subbuf} bytes");
    true
}

fn remove_channel(slot: u32) {
    if slot >= MAX_CHANNELS {
        debug!("remove of slot {slot} ignored: out of range");
        return;
    }
    for s in site::all() {
        s.clear_bits(1u64 << slot);
    }
    if let Some(ch) = channel::take(slot) {
        // Let emitters that loaded the channel just before finish into the real buffer.
        std::thread::sleep(Duration::from_millis(20));
        channel::retire(ch);
        debug!("channel {}/{} (slot {slot}) removed", ch.session, ch.name);
    }
}

fn set_enabled(masks: &[u64], filters: Vec<EventFilter>) {
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
    // Group the filters by event; a bad one is never run: its channel bit is cleared (the
    // event is not recorded there) and UST_DEBUG says why.
    let mut masks = masks.to_vec();
    let mut per_event: std::collections::BTreeMap<u32, Vec<(u32, Vec<ust_core::filter::Expr>)>> = Default::default();
    for f in filters {
        if (f.event as usize) >= n || f.slot >= MAX_CHANNELS {
            debug!("filter for event #{} slot {} ignored: out of range", f.event, f.slot);
            continue;
        }
        per_event.entry(f.event).or_default().push((f.slot, f.any_of));
    }
    let mut built: Vec<Option<SiteFilter>> = (0..n).map(|_| None).collect();
    for (ev, list) in per_event {
        let s = site::all().nth(ev as usize).expect("checked above");
        let bits: u64 = list.iter().fold(0, |m, (slot, _)| m | (1u64 << slot));
        match SiteFilter::build(s.desc(), list) {
            Ok(f) => built[ev as usize] = f,
            Err(e) => {
                debug!("filter of {} rejected ({e}): not recorded in the filtered channel(s)", s.desc().full_name());
                masks[ev as usize] &= !bits;
            }
        }
    }
    let nfiltered = built.iter().filter(|f| f.is_some()).count();
    for ((s, m), f) in site::all().zip(&masks).zip(built) {
        s.set_mask_and_filter(*m, f);
    }
    super::MASKS_LEN.store(n, Ordering::Release);
    super::masks_changed();
    debug!("{} of {n} tracepoints enabled, {nfiltered} with filters", masks.iter().filter(|m| **m != 0).count());
}
