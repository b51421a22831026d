//! Per-UID buffers (`--buffers-uid`, LTTng's default for user space): one set of per-CPU
//! buffers per user per channel, shared by every process of that user in the session, and
//! one trace, `<output>/ust/uid/<UID>/64-bit/`.
//!
//! ```text
//! first process of uid U ──> create trace: dir, metadata, buffers (memfds, or files
//!                              under --shm-path), streams
//! every process of uid U ──> registry.add(its events) ─ new? ─> metadata rewritten (tmp+rename)
//!                        ──> AddChannel{shared_ids} + a duplicate of each buffer descriptor
//!                        ──> SetEnabled{masks, ids}: its events' ids in this trace
//! process gone           ──> forgotten (nothing of it is kept: the trace is the user's)
//! ```
//!
//! The trace lives in [`crate::ops::state::SessionState::traces`] like a process's, under the
//! key [`trace_key`]`(uid)` (above every process id), so the drain, `stop`, `rotate`,
//! snapshots and `destroy` handle it as they handle a process's trace; what only a per-UID
//! trace has (its event [`Registry`], the descriptors handed to each new process, its
//! live members) is in [`Shared`]. Attaching a process to it is
//! [`crate::ops::attach`]'s.
//!
//! Event ids: a record in a shared buffer must carry an id every process agrees on, so the
//! daemon assigns them ([`Registry`]) and sends each process the table of its events' ids
//! in that channel with every `SetEnabled` ([`ust_core::protocol::ChannelIds`]). The
//! runtime keeps the table beside the channel and the emit path loads the id from it (two
//! loads more than a per-PID record, no lock, no round trip), as LTTng-UST keeps the id
//! its session daemon returned for each event in each channel.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ust_core::clock::TraceClock;
use ust_core::EventDesc;

use crate::model::registry::Registry;
use crate::model::session::{BufferOwnership, Session};
use crate::ops::relay::RelayOutput;
use crate::ops::trace::{
    announce_to_relay, io, make_streams, render_trace_metadata, session_dir, shm_set_dir, write_shm_set, ProcessTrace, SetupError, Shared, StreamsOf,
};
use ust_ctf::outdir::TraceDir;

/// First [`ust_core::ABI_MINOR`] whose runtimes can write per-UID channels.
pub const SINCE_MINOR: u16 = 5;

/// The key of the per-UID trace of `uid` in a session's traces: above every process id.
pub const fn trace_key(uid: u32) -> u64 {
    (1 << 63) | uid as u64
}

/// True for a key made by [`trace_key`].
pub const fn is_uid_key(key: u64) -> bool {
    key >> 63 == 1
}

/// `<output>/ust/uid/<uid>/64-bit` (LTTng's layout; `64-bit` is the word size of the
/// processes that write it).
pub fn uid_dir(output: &Path, uid: u32) -> PathBuf {
    output.join("ust").join("uid").join(uid.to_string()).join(format!("{}-bit", usize::BITS))
}

/// The path of the per-UID trace of `uid` relative to the session on a relay daemon:
/// `ust/uid/<uid>/64-bit`, as lttng-sessiond names a per-UID trace to lttng-relayd.
pub fn relay_path(uid: u32) -> String {
    format!("ust/uid/{uid}/{}-bit", usize::BITS)
}

/// Applies `--buffers-uid/--buffers-pid` of `enable-channel NAME`: the first channel of a
/// session sets the session's kind, a later one must agree.
///
/// # Errors
/// LTTng's "Buffer ownership mismatch for session" when it does not.
pub fn set_ownership(s: &mut Session, channel: &str, want: Option<BufferOwnership>) -> Result<(), String> {
    let Some(want) = want else { return Ok(()) };
    let others = s.channels.iter().any(|c| c.name != channel);
    if want == s.buffers {
        return Ok(());
    }
    if others || s.ever_started {
        return Err(format!(
            "Buffer ownership mismatch for session {}: its channels are {} ({}); a session's channels all have one kind",
            s.name,
            s.buffers,
            if s.buffers == BufferOwnership::Uid { "--buffers-uid" } else { "--buffers-pid" }
        ));
    }
    s.buffers = want;
    Ok(())
}

/// Registers `events` of one process in trace `t`; when some are new, rewrites the
/// metadata (temporary file + rename) and gives the streams the longer list, before any
/// mask can enable them. Refusals are logged.
pub(crate) fn add_events(session: &Session, t: &mut ProcessTrace, events: &[EventDesc], who: &str) {
    let Some(shared) = t.shared.as_mut() else { return };
    let added = shared.registry.add(events, who);
    for m in &added.refused {
        crate::log!("session {}: {m}", session.name);
    }
    if added.new == 0 {
        return;
    }
    let all = shared.registry.events();
    t.metadata = render(session, shared.uid, t.uuid, t.tsc, &all);
    if let Some(m) = t.relay.as_mut() {
        // A network session: what the new events add goes on the trace's metadata stream
        // (events are declared last, so the text only grows).
        m.update(&t.metadata);
    } else if let Some(out) = &t.out {
        if let Err(e) = ust_ctf::metadata::write_atomically(out, &t.metadata) {
            crate::log!("session {}: rewriting {}/metadata failed: {e}", session.name, t.dir.display());
        }
    }
    // `--shm-path`: the buffer set keeps up with the registry, so `ust crash-dump` can
    // decode every id a writer may use (written before any mask enables them).
    if let Some(d) = &t.shm_dir {
        let written =
            TraceDir::open(d, None).map_err(io(format!("opening {}", d.display()))).and_then(|set| write_shm_set(&set, &t.metadata, &all, &t.context_sizes));
        if let Err(e) = written {
            crate::log!("session {}: rewriting the buffer set in {} failed: {e}", session.name, d.display());
        }
    }
    // A brief hold of each stream (the drain holds one only while it copies packets).
    for s in &t.streams {
        s.lock().unwrap_or_else(|e| e.into_inner()).set_events(all.clone());
    }
    t.events = all;
}

/// The TSDL metadata of the per-UID trace of `uid`.
fn render(session: &Session, uid: u32, uuid: [u8; 16], tsc: Option<ust_core::clock::TscParams>, events: &[EventDesc]) -> String {
    render_trace_metadata(session, uuid, ("", 0), Some(uid), events, tsc)
}

/// Creates the per-UID trace of `uid`: its directory (not in a snapshot session), its
/// metadata (no event yet), one buffer per CPU per channel and its stream. A buffer is a
/// sealed memfd, or with `--shm-path` a backed file in `<shm dir>/ust/uid/<uid>/64-bit/`
/// (LTTng's per-UID shm layout) beside the set's metadata, events and context sizes
/// ([`crate::ops::trace::write_shm_set`]), for `ust crash-dump`.
pub(crate) fn create(
    session: &Session,
    relay: Option<&Arc<RelayOutput>>,
    uid: u32,
    ncpus: u32,
    tsc: Option<ust_core::clock::TscParams>,
    next_instance: &mut u64,
) -> Result<ProcessTrace, SetupError> {
    let dir = uid_dir(&session.output, uid);
    // Nothing is written locally by a snapshot session (its snapshots are) or a network
    // one (the relay daemon writes the trace, as `ust/uid/<uid>/64-bit` of the session).
    let local = !session.snapshot && relay.is_none();
    let uuid = *uuid::Uuid::new_v4().as_bytes();
    let metadata = render(session, uid, uuid, tsc, &[]);
    let context_sizes: Vec<usize> = session.channels.iter().map(|c| ust_core::context::block_size(&c.contexts)).collect();
    let shm_dir = session.shm_dir.as_ref().map(|base| uid_dir(base, uid));
    // A network session: its streams are announced before any buffer exists.
    let (relay_meta, mut relay_streams) = announce_to_relay(session, relay, ncpus, &relay_path(uid), &metadata)?;
    let mut out = None;
    let made = (|| {
        if local {
            let d = session_dir(session, &dir).map_err(io(format!("creating {}", dir.display())))?;
            out = Some(d.clone());
            ust_ctf::metadata::write_atomically(&d, &metadata).map_err(io(format!("writing {}/metadata", dir.display())))?;
        }
        if let (Some(base), Some(d)) = (&session.shm_dir, &shm_dir) {
            write_shm_set(&shm_set_dir(base, d)?, &metadata, &[], &context_sizes)?;
        }
        Ok::<(), SetupError>(())
    })();
    if let Err(e) = made {
        remove_made(out.as_ref(), shm_dir.as_deref());
        return Err(e);
    }
    let clock = tsc.map_or(TraceClock::Monotonic, TraceClock::Tsc);
    let events: Arc<[EventDesc]> = Vec::new().into();
    let deaths = Arc::new(crate::ops::dead_writers::Deaths::default());
    let of = StreamsOf {
        session,
        out: out.as_ref(),
        uuid,
        ncpus,
        events: events.clone(),
        clock,
        shm_dir: shm_dir.as_deref(),
        memfd_prefix: format!("ust-uid{uid}"),
        deaths: Some(deaths.clone()),
    };
    let made = make_streams(&of, next_instance, &mut relay_streams);
    let (streams, fds) = match made {
        Ok(x) => x,
        Err(e) => {
            remove_made(out.as_ref(), shm_dir.as_deref());
            return Err(e);
        }
    };
    Ok(ProcessTrace {
        relay: relay_meta,
        pid: 0,
        procname: format!("uid-{uid}"),
        dir,
        out,
        metadata,
        post_mortem: None,
        retained: false,
        uuid,
        slots: vec![None; session.channels.len()],
        streams,
        events,
        context_sizes,
        tsc,
        gone: false,
        archived: false,
        shm_dir,
        shared: Some(Box::new(Shared { uid, registry: Registry::default(), fds, members: BTreeSet::new(), deaths })),
    })
}

/// Removes what a failed [`create`] made: no half-made trace for readers to trip on, no
/// backed buffer file holding memory (both directories are the trace's own).
fn remove_made(out: Option<&TraceDir>, shm_dir: Option<&Path>) {
    if let Some(out) = out {
        let _ = out.remove_dir_all();
    }
    if let Some(d) = shm_dir {
        let _ = std::fs::remove_dir_all(d);
    }
}
