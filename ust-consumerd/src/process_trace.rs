//! Every stream of one process in one session, and the directory they live in: creating
//! them when a process is attached to a session (trace directory, metadata, one buffer per
//! CPU per channel, stream and index files), and rewriting the metadata when the process
//! registers more events.
//!
//! The daemon creates every buffer (docs/DESIGN.md#buffers), with [`ringbuffer::shm`]:
//! a sealed, fully backed `memfd`, or with `--shm-path` a backed file under the session's
//! shm directory next to the plain-text metadata, [`EVENTS_FILE`] and [`CONTEXTS_FILE`], for
//! `ust crash-dump`.
//! The descriptor goes to the application; the daemon keeps its own mapping so that it can
//! flush and drain after the application died.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ringbuffer::{BufferConfig, Mode, StreamIdentity};
use ust_core::clock::TraceClock;
use ust_core::packet::HEADER_SIZE;
use ust_core::EventDesc;
use ust_ctf::held::{CONTEXTS_FILE, EVENTS_FILE};
use ust_ctf::outdir::TraceDir;

use crate::session::ChannelConfig;
use crate::stream::{Stream, StreamSetup, StreamShm, TraceFiles};

/// Errors while setting up buffers and files.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A system call or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The ring buffer refused the geometry.
    #[error("buffer layout: {0}")]
    Layout(String),
    /// A buffer's shared memory could not be created or backed.
    #[error(transparent)]
    Shm(#[from] ringbuffer::shm::ShmError),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SetupError {
    let what = what.into();
    move |source| SetupError::Io { what, source }
}

/// Every stream of one process in one session.
#[derive(Debug)]
pub struct ProcessTrace {
    /// Process id.
    pub pid: i32,
    /// Process name.
    pub procname: String,
    /// The trace directory (`<output>/ust/pid/<procname>-<pid>-<stamp>`), as named
    /// (messages, reports); in a snapshot session it is not created, and its last
    /// component names the process's directory in each snapshot.
    pub dir: PathBuf,
    /// The trace directory, where its files are created (through the session's output
    /// directory, as its owner: [`TraceDir`]); `None` when nothing is written there as the
    /// session runs (a snapshot or network session).
    pub out: Option<TraceDir>,
    /// The trace's metadata text (written again into every snapshot).
    pub metadata: String,
    /// Post-mortem trace written when the process died abnormally (snapshot sessions).
    pub post_mortem: Option<PathBuf>,
    /// The process is gone but its buffers are kept (it died abnormally in a snapshot
    /// session): snapshots include it until the session is destroyed.
    pub retained: bool,
    /// Trace UUID.
    pub uuid: [u8; 16],
    /// Mask slot of each channel in the process (index = channel index).
    pub slots: Vec<Option<u32>>,
    /// Streams, channel-major then CPU.
    pub streams: Vec<Arc<Mutex<Stream>>>,
    /// The process's events (for the record walker of `ust trace`).
    pub events: Arc<[EventDesc]>,
    /// Size of each channel's event context block in bytes (index = stream class id).
    pub context_sizes: Vec<usize>,
    /// TSC parameters of the trace clock (`None`: `CLOCK_MONOTONIC`), sent with every
    /// channel grant.
    pub tsc: Option<ust_core::clock::TscParams>,
    /// The process is gone and its streams are finished.
    pub gone: bool,
    /// Gone, and every file moved into an archive by `ust rotate`: nothing left here.
    pub archived: bool,
    /// Its `--shm-path` directory (buffer files, metadata, event list), if any.
    pub shm_dir: Option<PathBuf>,
    /// A network session's metadata stream of this trace on the relay daemon (then
    /// [`ProcessTrace::dir`] is not created: the relay daemon writes the trace).
    pub relay: Option<crate::relay::RelayMetadata>,
    /// What a per-UID trace has besides ([`crate::uid_trace`]); `None` for a process's.
    pub shared: Option<Box<crate::uid_trace::Shared>>,
}

/// The event lists of the daemon's process traces, shared: processes of one program
/// register the same descriptions, and a session keeps the traces of gone processes until
/// it is destroyed, so a thousand short-lived processes keep one list, not a thousand
/// (the daemon's memory stays bounded by what is live plus a few hundred bytes per gone
/// process).
#[derive(Debug, Default)]
pub struct EventTables {
    by_hash: std::collections::HashMap<u64, Vec<std::sync::Weak<[EventDesc]>>>,
}

impl EventTables {
    /// Most tables kept: beyond it, lists that no trace holds any more are dropped.
    const PRUNE_AT: usize = 1024;

    /// The shared copy of `events` (made now if no trace holds an equal list).
    pub fn share(&mut self, events: &[EventDesc]) -> Arc<[EventDesc]> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for e in events {
            e.provider.hash(&mut h);
            e.name.hash(&mut h);
            e.fields.len().hash(&mut h);
        }
        let key = h.finish();
        if self.by_hash.len() >= Self::PRUNE_AT {
            self.by_hash.retain(|_, v| {
                v.retain(|w| w.strong_count() > 0);
                !v.is_empty()
            });
        }
        let bucket = self.by_hash.entry(key).or_default();
        if let Some(found) = bucket.iter().filter_map(|w| w.upgrade()).find(|a| **a == *events) {
            return found;
        }
        bucket.retain(|w| w.strong_count() > 0);
        let fresh: Arc<[EventDesc]> = events.to_vec().into();
        bucket.push(Arc::downgrade(&fresh));
        fresh
    }
}

/// What [`create_process_trace`] needs to know about the process.
#[derive(Debug, Clone)]
pub struct ProcessInfo<'a> {
    /// Process id.
    pub pid: i32,
    /// Process name.
    pub procname: &'a str,
    /// Possible CPUs (buffers per channel).
    pub ncpus: u32,
    /// Registration time (seconds since the Epoch), for the directory name.
    pub registered: i64,
    /// Registered events.
    pub events: &'a [EventDesc],
    /// The trace clock's TSC parameters, `None` for `CLOCK_MONOTONIC`.
    pub tsc: Option<ust_core::clock::TscParams>,
}

/// Creates the trace directory, writes the metadata (complete before any packet), and
/// allocates one buffer per CPU per channel of `session` with its stream and index files.
/// `next_instance` hands out stream instance ids. Returns the trace and, per channel, the
/// buffer descriptors to send (CPU 0 first).
///
/// # Errors
/// [`SetupError`] for the first failure; the trace directory is then removed.
pub fn create_process_trace(
    session: &crate::session::Session,
    p: &ProcessInfo<'_>,
    next_instance: &mut u64,
    tables: &mut EventTables,
) -> Result<(ProcessTrace, Vec<Vec<OwnedFd>>), SetupError> {
    let want = ust_ctf::process_dir(&session.output, p.procname, p.pid, &ust_ctf::datetime::stamp_at(p.registered));
    // A snapshot session writes nothing as it runs: its trace directories are made by
    // each snapshot (`crate::snapshot`); a network session's are made by the relay daemon.
    let live = !session.snapshot && session.relay.is_none();
    let (dir, out) = if live {
        let (d, out) = new_trace_dir(session, &want)?;
        (d, Some(out))
    } else {
        (want, None)
    };
    let r = fill_process_trace(session, p, next_instance, tables, dir, out.clone());
    if r.is_err() {
        // No half-made trace left behind for readers to trip on (metadata without streams,
        // a stream file without its index): the directory is new and ours. The same for
        // the buffer files made before the failure (backed files hold real memory).
        if let Some(out) = &out {
            let _ = out.remove_dir_all();
        }
        if let Some(base) = &session.shm_dir {
            let _ = std::fs::remove_dir_all(ust_ctf::process_dir(base, p.procname, p.pid, &ust_ctf::datetime::stamp_at(p.registered)));
        }
    }
    r
}

fn fill_process_trace(
    session: &crate::session::Session,
    p: &ProcessInfo<'_>,
    next_instance: &mut u64,
    tables: &mut EventTables,
    dir: PathBuf,
    out: Option<TraceDir>,
) -> Result<(ProcessTrace, Vec<Vec<OwnedFd>>), SetupError> {
    let live = !session.snapshot;
    let uuid = *uuid::Uuid::new_v4().as_bytes();
    let text = render_metadata(session, p, uuid);
    let clock = p.tsc.map_or(TraceClock::Monotonic, TraceClock::Tsc);
    let (relay_meta, mut relay_streams) = announce_to_relay(session, p.ncpus, &relay_trace_path(&dir), &text)?;
    if let (true, None, Some(out)) = (live, &relay_meta, &out) {
        ust_ctf::metadata::write_atomically(out, &text).map_err(io(format!("writing {}/metadata", dir.display())))?;
    }
    let shm_dir = match &session.shm_dir {
        None => None,
        Some(base) => {
            use std::os::unix::fs::DirBuilderExt;
            let d = ust_ctf::process_dir(base, p.procname, p.pid, &ust_ctf::datetime::stamp_at(p.registered));
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&d).map_err(io(format!("creating {}", d.display())))?;
            let sizes: Vec<usize> = session.channels.iter().map(|c| ust_core::context::block_size(&c.contexts)).collect();
            write_shm_set(&d, &text, p.events, &sizes)?;
            Some(d)
        }
    };
    let mut streams = Vec::new();
    let mut fds = Vec::new();
    let events = tables.share(p.events);
    for (ci, ch) in session.channels.iter().enumerate() {
        let mut chan_fds = Vec::new();
        for cpu in 0..p.ncpus {
            let identity = StreamIdentity { uuid, stream_id: ci as u32, cpu, stream_instance_id: *next_instance };
            *next_instance += 1;
            let cfg = buffer_config(&ch.config, identity);
            let name = ust_ctf::stream_file_name(&ch.name, cpu);
            let (buffer, fd, shm_file, shm_guard) = match &shm_dir {
                Some(d) => {
                    let (b, fd, f) = ringbuffer::shm::create_file(&cfg, &d.join(&name))?;
                    let size = b.config().file_size().unwrap_or(0) as u64;
                    let guard = crate::sigbus::register(b.map().as_ptr(), b.map().len());
                    (b, fd, Some((f, size)), guard)
                }
                None => {
                    let (b, fd) = ringbuffer::shm::create_memfd(&cfg, &format!("ust-{}-{}-{}", p.pid, ch.name, cpu))?;
                    (b, fd, None, None)
                }
            };
            let files = TraceFiles {
                dir: out.clone(),
                base: name.clone(),
                max_size: ch.config.tracefile_size,
                max_count: ch.config.tracefile_count,
                current: 0,
                oldest: 0,
            };
            let shm = StreamShm { file: shm_file, guard: shm_guard };
            let relay = relay_streams.pop();
            let setup =
                StreamSetup { session: &session.name, channel: &ch.name, config: &ch.config, identity, events: events.clone(), files, live, clock, relay };
            let mut stream = Stream::new(setup, buffer, session.output_error.clone(), shm).map_err(io("creating stream files"))?;
            stream.context_size = ust_core::context::block_size(&ch.contexts);
            streams.push(Arc::new(Mutex::new(stream)));
            chan_fds.push(fd);
        }
        fds.push(chan_fds);
    }
    let trace = ProcessTrace {
        pid: p.pid,
        procname: p.procname.to_string(),
        dir,
        out,
        metadata: text,
        post_mortem: None,
        retained: false,
        uuid,
        slots: vec![None; session.channels.len()],
        streams,
        events: events.clone(),
        context_sizes: session.channels.iter().map(|c| ust_core::context::block_size(&c.contexts)).collect(),
        tsc: p.tsc,
        gone: false,
        archived: false,
        shm_dir,
        relay: relay_meta,
        shared: None,
    };
    Ok((trace, fds))
}

/// Writes (or rewrites) what `ust crash-dump` needs beside the buffer files of a
/// `--shm-path` buffer set `d`: the trace's `metadata`, [`EVENTS_FILE`] (`events`, in id
/// order) and [`CONTEXTS_FILE`] (`context_sizes`, bytes per stream class), each as a
/// temporary file renamed into place, so a crash at any moment leaves the old or the new
/// version, never half of one. Called when a trace is made and, for a per-UID trace, each
/// time its registry grows (before the new ids are used).
///
/// # Errors
/// [`SetupError::Io`] naming the file.
pub(crate) fn write_shm_set(d: &std::path::Path, metadata: &str, events: &[EventDesc], context_sizes: &[usize]) -> Result<(), SetupError> {
    let dir = TraceDir::open(d, None).map_err(io(format!("opening {}", d.display())))?;
    let write = |name: &str, bytes: &[u8]| dir.write_atomically(name, bytes, 0o600).map_err(io(format!("writing {}/{name}", d.display())));
    write(EVENTS_FILE, &serde_json::to_vec(events).map_err(|e| SetupError::Layout(e.to_string()))?)?;
    write(CONTEXTS_FILE, &serde_json::to_vec(context_sizes).map_err(|e| SetupError::Layout(e.to_string()))?)?;
    write("metadata", metadata.as_bytes())
}

/// The relay stream path of the trace whose local directory would be `dir`:
/// `ust/pid/<procname>-<pid>-<stamp>`, relative to the session on the relay daemon.
/// A network session's announcement of one trace to the relay daemon: its metadata stream
/// (sent `metadata`) and one stream per CPU (`0..ncpus`) per channel, under `rel`, before
/// any buffer exists, so no packet can precede its metadata (as lttng-sessiond announces a
/// registry's streams). `(None, [])` for a local session. The data streams come back in
/// reverse order, channel by channel and CPU by CPU, for the caller to `pop` as it makes
/// the streams in order.
///
/// # Errors
/// [`SetupError::Io`] naming `rel` when the relay connection fails.
pub(crate) fn announce_to_relay(
    session: &crate::session::Session,
    ncpus: u32,
    rel: &str,
    metadata: &str,
) -> Result<(Option<crate::relay::RelayMetadata>, Vec<crate::relay::RelayStream>), SetupError> {
    let Some(out) = &session.relay else { return Ok((None, Vec::new())) };
    let names: Vec<(String, u64, u64)> = session
        .channels
        .iter()
        .flat_map(|ch| (0..ncpus).map(move |cpu| (ust_ctf::stream_file_name(&ch.name, cpu), ch.config.tracefile_size, ch.config.tracefile_count)))
        .collect();
    let (m, s) = out.add_trace(rel, metadata, &names).map_err(|e| SetupError::Io { what: format!("streaming {rel}"), source: std::io::Error::other(e) })?;
    Ok((Some(m), s.into_iter().rev().collect()))
}

fn relay_trace_path(dir: &std::path::Path) -> String {
    let leaf = dir.file_name().map(|l| l.to_string_lossy().into_owned()).unwrap_or_default();
    format!("ust/pid/{leaf}")
}

/// Creates the directory of a new process trace at `want` (under the session's output
/// directory, through it: [`TraceDir`]), or, when it exists (the same process registered
/// again within the same second: a reconnection, or a reused pid), at `want-1`, `want-2`,
/// …, so that a trace never truncates another's files.
fn new_trace_dir(session: &crate::session::Session, want: &std::path::Path) -> Result<(PathBuf, TraceDir), SetupError> {
    let parent = want.parent().unwrap_or(want);
    let creating = |what: &std::path::Path| io(format!("creating {}", what.display()));
    let parent_dir = session_dir(session, parent).map_err(creating(parent))?;
    let leaf = want.file_name().unwrap_or_default().to_string_lossy();
    for n in 0u32..1000 {
        let name = if n == 0 { leaf.to_string() } else { format!("{leaf}-{n}") };
        let dir = parent.join(&name);
        match parent_dir.new_dir(&name, 0o750) {
            Ok(out) => return Ok((dir, out)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(creating(&dir)(e)),
        }
    }
    Err(SetupError::Io { what: format!("creating {}", want.display()), source: std::io::ErrorKind::AlreadyExists.into() })
}

/// The directory `path` (the session's output directory or below it), made where missing,
/// through the session's output directory ([`TraceDir::dir`]: as its owner, never
/// through a link).
///
/// # Errors
/// `path` is not below the output, the session has none (a network session), or the
/// directory cannot be made (or is refused).
pub(crate) fn session_dir(session: &crate::session::Session, path: &std::path::Path) -> std::io::Result<TraceDir> {
    let out = session.out.as_ref().ok_or_else(|| std::io::Error::other(format!("session {} writes no local trace", session.name)))?;
    match path.strip_prefix(&session.output).ok().and_then(|r| r.to_str()) {
        Some("") => Ok(out.clone()),
        Some(rel) => out.dir(rel, 0o750),
        None => Err(std::io::Error::other(format!("{} is not in the output directory {}", path.display(), session.output.display()))),
    }
}

/// The TSDL metadata of process `p`'s trace (UUID `uuid`) in `session`: its channels and
/// contexts, its events, the session's clock offset and the process's trace clock (a
/// network session sends the same text to the relay daemon).
pub fn render_metadata(session: &crate::session::Session, p: &ProcessInfo<'_>, uuid: [u8; 16]) -> String {
    render_trace_metadata(session, uuid, (p.procname, p.pid), None, p.events, p.tsc)
}

/// The TSDL metadata of one trace of `session` (UUID `uuid`): per process (`owner` is its
/// procname and pid, `uid` `None`) or per user (`owner` `("", 0)`, `uid` the user's), with
/// `events` declared and the trace clock of `tsc` (`None`: `CLOCK_MONOTONIC`).
pub fn render_trace_metadata(
    session: &crate::session::Session,
    uuid: [u8; 16],
    owner: (&str, i32),
    uid: Option<u32>,
    events: &[EventDesc],
    tsc: Option<ust_core::clock::TscParams>,
) -> String {
    let channels: Vec<String> = session.channels.iter().map(|c| c.name.clone()).collect();
    let contexts: Vec<Vec<ust_core::context::ContextType>> = session.channels.iter().map(|c| c.contexts.clone()).collect();
    ust_ctf::metadata::render(&ust_ctf::metadata::TraceMetadata {
        uuid,
        clock_offset_ns: session.clock_offset_ns,
        clock_uuid: &ust_core::clock::boot_id(),
        hostname: &ust_ctf::metadata::hostname(),
        procname: owner.0,
        vpid: owner.1,
        trace_name: &session.name,
        creation_datetime: &ust_ctf::datetime::iso_at(session.created),
        channels: &channels,
        contexts: &contexts,
        events,
        clock_description: &tsc.map_or(TraceClock::Monotonic, TraceClock::Tsc).description(),
        uid,
    })
}

/// Writes (or rewrites) the metadata of process `p`'s trace in `dir` for `session`: temporary
/// file, then rename, so a reader never sees half of it. Rewritten when the process
/// registers tracepoints late ([`ust_core::protocol::AppMessage::RegisterEvents`]), before
/// any of them is enabled.
///
/// # Errors
/// The I/O error.
pub fn write_metadata(session: &crate::session::Session, p: &ProcessInfo<'_>, dir: &TraceDir, uuid: [u8; 16]) -> std::io::Result<()> {
    ust_ctf::metadata::write_atomically(dir, &render_metadata(session, p, uuid))
}

/// The ring-buffer configuration of a channel for one stream.
pub fn buffer_config(c: &ChannelConfig, stream: StreamIdentity) -> BufferConfig {
    BufferConfig {
        subbuf_size: c.subbuf_size,
        num_subbuf: c.num_subbuf,
        mode: if c.overwrite { Mode::Overwrite } else { Mode::Discard },
        header_size: HEADER_SIZE as u32,
        stream,
    }
}
