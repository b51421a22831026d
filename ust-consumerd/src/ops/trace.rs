//! A trace of a session as the daemon keeps it, per process or per user
//! ([`ProcessTrace`]), and what making one takes whichever its kind: the buffers'
//! configuration, the TSDL metadata, the `--shm-path` buffer set for `ust crash-dump`, the
//! announcement to a relay daemon. Made by [`crate::ops::process_trace`] (per PID) and
//! [`crate::ops::uid_trace`] (per UID).

use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ringbuffer::{BufferConfig, Mode, StreamIdentity};
use ust_core::clock::TraceClock;
use ust_core::packet::HEADER_SIZE;
use ust_core::EventDesc;
use ust_ctf::held::{CONTEXTS_FILE, EVENTS_FILE};
use ust_ctf::outdir::TraceDir;

use crate::model::registry::Registry;
use crate::model::session::{ChannelConfig, Session};
use crate::ops::relay::{RelayMetadata, RelayOutput, RelayStream};
use crate::ops::stream::{SharedStream, Stream, StreamSetup, StreamShm, TraceFiles};

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

/// The [`SetupError::Io`] of `what`.
pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SetupError {
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
    pub relay: Option<RelayMetadata>,
    /// What a per-UID trace has besides ([`crate::ops::uid_trace`]); `None` for a process's.
    pub shared: Option<Box<Shared>>,
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

/// The trace's directory relative to the session's output (`ust/pid/<proc dir>` or
/// `ust/uid/<uid>/64-bit`): where a snapshot or an archive puts its copy.
pub fn rel_dir(t: &ProcessTrace, output: &Path) -> PathBuf {
    match t.dir.strip_prefix(output) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.to_path_buf(),
        _ => Path::new("ust").join("pid").join(t.dir.file_name().unwrap_or_default()),
    }
}

/// What only a per-UID trace has.
#[derive(Debug)]
pub struct Shared {
    /// The user.
    pub uid: u32,
    /// Its events, ids assigned here.
    pub registry: Registry,
    /// The daemon's descriptor of every buffer, channel-major then CPU: a duplicate of
    /// each goes to every process that joins.
    pub fds: Vec<Vec<OwnedFd>>,
    /// Live processes writing the buffers (daemon app ids).
    pub members: BTreeSet<u64>,
    /// Deaths of members, watched by every stream ([`crate::ops::dead_writers`]).
    pub deaths: Arc<crate::ops::dead_writers::Deaths>,
}

/// The `--shm-path` buffer set directory `d`, below the session's shm directory `base`,
/// made where missing (mode 0700, as its parents below `base`) through `base`'s
/// [`TraceDir`], never through a symbolic link.
///
/// # Errors
/// [`SetupError::Io`] naming `d`.
pub fn shm_set_dir(base: &Path, d: &Path) -> Result<TraceDir, SetupError> {
    let creating = io(format!("creating {}", d.display()));
    let rel = d.strip_prefix(base).ok().and_then(|r| r.to_str()).filter(|r| !r.is_empty());
    let Some(rel) = rel else { return Err(creating(std::io::Error::other(format!("not below {}", base.display())))) };
    TraceDir::open(base, None).and_then(|b| b.dir(rel, 0o700)).map_err(creating)
}

/// Writes (or rewrites) what `ust crash-dump` needs beside the buffer files of a
/// `--shm-path` buffer set `d`: the trace's `metadata`, [`EVENTS_FILE`] (`events`, in id
/// order) and [`CONTEXTS_FILE`] (`context_sizes`, bytes per stream class), each as a
/// temporary file renamed into place ([`TraceDir::write_atomically`]), so a crash at any
/// moment leaves the old or the new version, never half of one. Called when a trace is
/// made and, for a per-UID trace, each time its registry grows (before the new ids are
/// used).
///
/// # Errors
/// [`SetupError::Io`] naming the file.
pub fn write_shm_set(d: &TraceDir, metadata: &str, events: &[EventDesc], context_sizes: &[usize]) -> Result<(), SetupError> {
    let write = |name: &str, bytes: &[u8]| d.write_atomically(name, bytes, 0o600).map_err(io(format!("writing {}/{name}", d.path().display())));
    write(EVENTS_FILE, &serde_json::to_vec(events).map_err(|e| SetupError::Layout(e.to_string()))?)?;
    write(CONTEXTS_FILE, &serde_json::to_vec(context_sizes).map_err(|e| SetupError::Layout(e.to_string()))?)?;
    write("metadata", metadata.as_bytes())
}

/// The directory `path` (the session's output directory or below it), made where missing
/// (mode 0750), through the session's output directory ([`TraceDir::dir`]: as its owner,
/// never through a link).
///
/// # Errors
/// `path` is not below the output, the session has none (a network session), or the
/// directory cannot be made (or is refused).
pub fn session_dir(session: &Session, path: &Path) -> std::io::Result<TraceDir> {
    let out = session.out.as_ref().ok_or_else(|| std::io::Error::other(format!("session {} writes no local trace", session.name)))?;
    match path.strip_prefix(&session.output).ok().and_then(|r| r.to_str()) {
        Some("") => Ok(out.clone()),
        Some(rel) => out.dir(rel, 0o750),
        None => Err(std::io::Error::other(format!("{} is not in the output directory {}", path.display(), session.output.display()))),
    }
}

/// A network session's announcement of one trace to the relay daemon: its metadata stream
/// (sent `metadata`) and one stream per CPU (`0..ncpus`) per channel, under `rel`, before
/// any buffer exists, so no packet can precede its metadata (as lttng-sessiond announces a
/// registry's streams). `(None, [])` for a local session. The data streams come back in
/// reverse order, channel by channel and CPU by CPU, for the caller to `pop` as it makes
/// the streams in order.
///
/// # Errors
/// [`SetupError::Io`] naming `rel` when the relay connection fails.
pub fn announce_to_relay(
    session: &Session,
    relay: Option<&Arc<RelayOutput>>,
    ncpus: u32,
    rel: &str,
    metadata: &str,
) -> Result<(Option<RelayMetadata>, Vec<RelayStream>), SetupError> {
    let Some(out) = relay else { return Ok((None, Vec::new())) };
    let names: Vec<(String, u64, u64)> = session
        .channels
        .iter()
        .flat_map(|ch| {
            stream_cpus(&ch.config, ncpus)
                .into_iter()
                .map(move |cpu| (ust_ctf::stream_file_name(&ch.name, cpu), ch.config.tracefile_size, ch.config.tracefile_count))
        })
        .collect();
    let (m, s) = out.add_trace(rel, metadata, &names).map_err(|e| SetupError::Io { what: format!("streaming {rel}"), source: std::io::Error::other(e) })?;
    Ok((Some(m), s.into_iter().rev().collect()))
}

/// The TSDL metadata of one trace of `session` (UUID `uuid`): per process (`owner` is its
/// procname and pid, `uid` `None`) or per user (`owner` `("", 0)`, `uid` the user's), with
/// `events` declared and the trace clock of `tsc` (`None`: `CLOCK_MONOTONIC`).
pub fn render_trace_metadata(
    session: &Session,
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

/// The CPU numbers of a channel's streams for an owner of `ncpus` possible CPUs: `0..ncpus`
/// per CPU; with `--buffer-allocation=per-channel` the one [`ust_ctf::CHANNEL_WIDE_CPU`]
/// (LTTng-UST's `-1`, file `<channel>_0`).
pub fn stream_cpus(c: &ChannelConfig, ncpus: u32) -> Vec<u32> {
    match c.allocation {
        ust_ctl::config::BufferAllocation::PerCpu => (0..ncpus).collect(),
        ust_ctl::config::BufferAllocation::PerChannel => vec![ust_ctf::CHANNEL_WIDE_CPU],
    }
}

/// How `--buffer-preallocation` backs a channel's buffers.
pub fn backing_of(c: &ChannelConfig) -> ringbuffer::shm::Backing {
    match c.preallocation {
        ust_ctl::config::BufferPreallocation::Preallocate => ringbuffer::shm::Backing::Preallocate,
        ust_ctl::config::BufferPreallocation::OnDemand => ringbuffer::shm::Backing::OnDemand,
    }
}

/// Per channel, the descriptors of its buffers, CPU 0 first: what the processes get.
pub type ChannelFds = Vec<Vec<OwnedFd>>;

/// What [`make_streams`] makes the streams of a trace from.
#[derive(Debug)]
pub struct StreamsOf<'a> {
    /// The trace's session.
    pub session: &'a Session,
    /// The trace directory, where its stream files go; `None` when it writes none as the
    /// session runs (a snapshot or network session).
    pub out: Option<&'a TraceDir>,
    /// The trace's UUID.
    pub uuid: [u8; 16],
    /// Buffers per channel.
    pub ncpus: u32,
    /// The events its records carry.
    pub events: Arc<[EventDesc]>,
    /// The trace clock.
    pub clock: TraceClock,
    /// `--shm-path`: the directory of the buffer files; `None`: sealed memfds.
    pub shm_dir: Option<&'a Path>,
    /// Names the memfd of channel `name`'s buffer on a CPU (`ust-<pid>-…`, `ust-uid<uid>-…`).
    pub memfd_prefix: String,
    /// A per-UID trace: the deaths of its members, watched by every stream.
    pub deaths: Option<Arc<crate::ops::dead_writers::Deaths>>,
}

/// Allocates one buffer per CPU per channel of `of.session` (a memfd, or a backed file
/// under `of.shm_dir`, its mapping registered with [`crate::ops::sigbus`]) and its stream,
/// taking stream instance ids from `next_instance` and, for a network session, the relay
/// streams from `relay_streams` (popped in order). Returns the streams, channel-major then
/// CPU, and per channel the buffer descriptors to hand out (CPU 0 first).
///
/// # Errors
/// [`SetupError`] for the first failure.
pub fn make_streams(of: &StreamsOf<'_>, next_instance: &mut u64, relay_streams: &mut Vec<RelayStream>) -> Result<(Vec<SharedStream>, ChannelFds), SetupError> {
    let session = of.session;
    let mut streams = Vec::new();
    let mut fds = Vec::new();
    for (ci, ch) in session.channels.iter().enumerate() {
        let mut chan_fds = Vec::new();
        let context_size = ust_core::context::block_size(&ch.contexts);
        let backing = backing_of(&ch.config);
        for cpu in stream_cpus(&ch.config, of.ncpus) {
            let identity = StreamIdentity { uuid: of.uuid, stream_id: ci as u32, cpu, stream_instance_id: *next_instance };
            *next_instance += 1;
            let cfg = buffer_config(&ch.config, identity);
            let name = ust_ctf::stream_file_name(&ch.name, cpu);
            let (buffer, fd, shm) = match of.shm_dir {
                Some(d) => {
                    let (b, fd, f) = ringbuffer::shm::create_file_as(&cfg, &d.join(&name), backing)?;
                    let size = b.config().file_size().unwrap_or(0) as u64;
                    let guard = crate::ops::sigbus::register(b.map().as_ptr(), b.map().len());
                    (b, fd, StreamShm { file: Some((f, size)), guard })
                }
                None => {
                    let (b, fd) = ringbuffer::shm::create_memfd_as(&cfg, &format!("{}-{}-{cpu}", of.memfd_prefix, ch.name), backing)?;
                    (b, fd, StreamShm::default())
                }
            };
            let files = of.out.map(|dir| TraceFiles {
                dir: dir.clone(),
                base: name,
                max_size: ch.config.tracefile_size,
                max_count: ch.config.tracefile_count,
                current: 0,
                oldest: 0,
            });
            let setup = StreamSetup {
                session: &session.name,
                channel: &ch.name,
                config: &ch.config,
                identity,
                events: of.events.clone(),
                files,
                clock: of.clock,
                relay: relay_streams.pop(),
                context_size,
                dead_watch: of.deaths.as_ref().map(|d| crate::ops::dead_writers::Watch::new(d.clone(), context_size)),
            };
            let stream = Stream::new(setup, buffer, session.output_error.clone(), shm).map_err(io("creating stream files"))?;
            streams.push(Arc::new(Mutex::new(stream)));
            chan_fds.push(fd);
        }
        fds.push(chan_fds);
    }
    Ok((streams, fds))
}
