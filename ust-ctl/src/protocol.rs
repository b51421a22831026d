//! The requests and replies of the control protocol between the `ust` command and
//! `ust-consumerd`, on the `ctl` socket: its own types, which the daemon maps to and from its
//! session model.
//!
//! Frames are [`ust_core::protocol::write_frame`]/[`ust_core::protocol::read_frame`]
//! (little-endian `u32` length, JSON body). The client sends a [`Request`] carrying
//! [`CTL_VERSION`]; the daemon answers every request with exactly one [`Reply`]. A request
//! that cannot be read (bad JSON, oversized, wrong version) gets `Reply::Error` and the
//! connection closes; other connections and sessions go on.
//!
//! ```text
//! ust ── Request { version: 1, command: Start { session: None } } ──> daemon
//!     <── Reply::Ok(Payload::Done) ─────────────────────────────────
//! ```

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use ust_core::{EventDesc, FieldDesc};

use crate::config::{ChannelConfig, Enabler, LevelFilter, VpidTracker};

/// Version of the control protocol; a daemon answers another version with an error.
pub const CTL_VERSION: u32 = 1;

/// A request from the CLI.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Request {
    /// [`CTL_VERSION`].
    pub version: u32,
    /// What to do.
    pub command: Command,
}

/// The commands. `session: None` means the current session.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Command {
    /// Is the daemon there? Answered with [`Payload::Pong`].
    Ping,
    /// Create a session. With a `token` it is a `ust trace` session: it takes only the
    /// processes registering with that token and does not become the current session.
    CreateSession {
        /// Session name.
        name: String,
        /// Absolute output directory.
        output: PathBuf,
        /// `UST_SESSION_TOKEN` of a `ust trace` session.
        token: Option<String>,
    },
    /// [`Command::CreateSession`] with the options of `ust create --snapshot --shm-path`.
    CreateSessionWith {
        /// Session name.
        name: String,
        /// Absolute output directory.
        output: PathBuf,
        /// Snapshot session, `--shm-path`.
        options: CreateOptions,
    },
    /// Create a channel (or change one that was never started).
    EnableChannel {
        /// Session.
        session: Option<String>,
        /// Channel name.
        name: String,
        /// Its configuration.
        config: ChannelConfig,
    },
    /// Add enablers to a channel (`channel0` by default, created with defaults).
    EnableEvent {
        /// Session.
        session: Option<String>,
        /// Channel.
        channel: Option<String>,
        /// Globs on `provider:name`.
        patterns: Vec<String>,
        /// Level filter.
        level: LevelFilter,
        /// `--exclude`: globs the enablers do not match.
        #[serde(default)]
        exclusions: Vec<String>,
        /// `--filter`: expression text ([`crate::filter`]), checked again here.
        #[serde(default)]
        filter: Option<String>,
    },
    /// `ust enable-event --userspace-probe=SPEC NAME`: add a userspace-probe rule to the
    /// session (placed at `start`, removed at `stop`; [`crate::probes`]). The CLI has
    /// resolved the symbol and checked the file; the daemon checks the rule's shape and
    /// its name. Refused while the session records.
    EnableUserspaceProbe {
        /// Session.
        session: Option<String>,
        /// The rule.
        probe: crate::probes::UserspaceProbe,
    },
    /// `ust disable-event -k NAME…` (`-k -a`): disable userspace-probe rules by event
    /// name; they stay in the session (shown disabled, saved) and are not placed at the
    /// next `start`. Refused while the session records.
    DisableUserspaceProbe {
        /// Session.
        session: Option<String>,
        /// Event names.
        names: Vec<String>,
        /// Every probe of the session.
        all: bool,
    },
    /// Add context fields to one channel, or to every channel of the session (`channel0`
    /// is created when the session has none). Refused once the session has been started.
    AddContext {
        /// Session.
        session: Option<String>,
        /// Channel; `None` = every channel.
        channel: Option<String>,
        /// Context kinds, in order (one already present is not added twice).
        contexts: Vec<ust_core::context::ContextType>,
    },
    /// Disable enablers by their exact pattern, or all of the channel.
    DisableEvent {
        /// Session.
        session: Option<String>,
        /// Channel (`channel0` by default).
        channel: Option<String>,
        /// Patterns as given to enable-event.
        patterns: Vec<String>,
        /// Every enabler of the channel.
        all: bool,
    },
    /// Start recording.
    Start {
        /// Session.
        session: Option<String>,
    },
    /// Stop recording, flush and drain. Answered with [`Payload::Stopped`].
    Stop {
        /// Session.
        session: Option<String>,
    },
    /// Stop, drain, close files, forget the session. Answered with [`Payload::Destroyed`].
    Destroy {
        /// Session.
        session: Option<String>,
    },
    /// Archive the trace so far (`ust rotate`): every stream is switched and drained, and
    /// its files move to `<output>/archives/<begin>-<end>-<n>/ust/pid/<process dir>/`
    /// with the metadata, a complete trace; recording goes on into fresh files. Answered
    /// with [`Payload::Rotated`].
    Rotate {
        /// Session.
        session: Option<String>,
    },
    /// Every session. Answered with [`Payload::Sessions`].
    ListSessions,
    /// One session in detail. Answered with [`Payload::Session`].
    ListSession {
        /// Session.
        session: Option<String>,
    },
    /// Registered processes. Answered with [`Payload::Apps`].
    ListApps,
    /// The daemon and a session (the current one by default). Answered with
    /// [`Payload::Status`].
    Status {
        /// Session.
        session: Option<String>,
    },
    /// `ust track --vpid`: track process ids `pids` in the session's process-id tracker
    /// (a tracker that took every process then takes only those), or with `all` every
    /// process again ([`VpidTracker::track`], LTTng 2.13's `lttng track --userspace
    /// --vpid`). Processes already registered are given the session's buffers (when it is
    /// started) or their events enabled again before the answer, [`Payload::Tracker`].
    TrackVpid {
        /// Session.
        session: Option<String>,
        /// Process ids (empty with `all`).
        pids: Vec<i32>,
        /// `--all`: track every process.
        all: bool,
    },
    /// `ust untrack --vpid`: remove process ids `pids` from the session's inclusion set,
    /// or with `all` empty it (nothing is recorded) ([`VpidTracker::untrack`], LTTng
    /// 2.13's `lttng untrack --userspace --vpid`). The processes concerned have confirmed
    /// that their events are off for the session (or did not answer within
    /// `ust_consumerd::ops::sync::SYNC_TIMEOUT`) before the answer, [`Payload::Tracker`].
    UntrackVpid {
        /// Session.
        session: Option<String>,
        /// Process ids (empty with `all`).
        pids: Vec<i32>,
        /// `--all`: track no process.
        all: bool,
    },
    /// `ust snapshot record`: write a snapshot session's buffers. Answered with
    /// [`Payload::Snapshot`].
    SnapshotRecord {
        /// Session.
        session: Option<String>,
        /// Total bytes at most (split evenly between streams; newest packets kept).
        max_size: Option<u64>,
    },
    /// `ust snapshot record URL`: send a snapshot session's buffers to a relay daemon.
    /// Answered with [`Payload::Snapshot`].
    SnapshotRecordTo {
        /// Session.
        session: Option<String>,
        /// Total bytes at most, as for [`Command::SnapshotRecord`].
        max_size: Option<u64>,
        /// The relay daemon.
        url: crate::url::NetworkUrl,
    },
    /// `ust snapshot add-output URL`: later snapshots of the session go to this relay
    /// daemon (a local URL, `file://`, sets the directory back). Answered with `Done`.
    SnapshotAddOutput {
        /// Session.
        session: Option<String>,
        /// The relay daemon, or `None` for the session's output directory.
        url: Option<crate::url::NetworkUrl>,
    },
    /// `ust add-trigger`: add a trigger ([`crate::trigger`]); it watches every matching
    /// process from now on (those that register later too). Answered with
    /// [`Payload::Triggers`] holding the new trigger.
    AddTrigger {
        /// The trigger.
        spec: crate::trigger::TriggerSpec,
    },
    /// `ust clear`: discard what the session's buffers and trace files hold so far; it
    /// goes on recording (into fresh files). A snapshot session's buffers are emptied.
    /// Archives of earlier rotations are kept. Answered with [`Payload::Done`].
    Clear {
        /// Session.
        session: Option<String>,
    },
    /// `ust regenerate metadata`: resample the realtime − monotonic clock offset and
    /// rewrite the metadata of every trace of the session. Answered with
    /// [`Payload::Done`].
    RegenerateMetadata {
        /// Session.
        session: Option<String>,
    },
    /// `ust regenerate statedump`: every traced process of the session emits its state
    /// dump again into the session's channels. Answered with [`Payload::Done`].
    RegenerateStatedump {
        /// Session.
        session: Option<String>,
    },
    /// `ust track/untrack --vuid|--vgid`: change the session's user-id or group-id
    /// tracker ([`crate::trackers::IdTracker`]), as [`Command::TrackVpid`] does the
    /// process-id one (processes concerned confirm before the answer,
    /// [`Payload::IdTracker`]).
    TrackIds {
        /// Session.
        session: Option<String>,
        /// Which tracker.
        kind: crate::trackers::IdKind,
        /// Ids (empty with `all`).
        ids: Vec<u32>,
        /// `--all`: track every id (`track`), or none (`untrack`).
        all: bool,
        /// `track` (true) or `untrack`.
        track: bool,
    },
    /// `ust list-triggers`. Answered with [`Payload::Triggers`].
    ListTriggers,
    /// `ust remove-trigger NAME`: the processes stop watching for it before the answer,
    /// [`Payload::Done`].
    RemoveTrigger {
        /// The trigger's name.
        name: String,
    },
    /// Give the memory of eligible sub-buffers back (`ust reclaim-memory`, LTTng 2.15's
    /// rules). Answered with [`Payload::Reclaimed`].
    ReclaimMemory(ReclaimRequest),
    /// `ust add-map-channel`: answered with [`Payload::MapChannelAdded`].
    AddMapChannel(crate::maps::AddMapChannel),
    /// `ust show-maps`, `export-maps`: every counter, [`Payload::Maps`].
    DumpMaps {
        /// Session.
        session: Option<String>,
    },
}

/// Options of `ust create` beyond name and output.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CreateOptions {
    /// Snapshot (flight-recorder) session (`--snapshot`): channels default to overwrite
    /// mode, nothing is written until `ust snapshot record`, abnormal deaths leave
    /// post-mortem traces.
    pub snapshot: bool,
    /// Absolute `--shm-path` directory: buffers as files, kept for `ust crash-dump`.
    pub shm_path: Option<PathBuf>,
    /// Trace clock (`--clock`; `None`: each process's `UST_CLOCK`, else monotonic).
    #[serde(default)]
    pub clock: Option<ust_core::clock::ClockKind>,
    /// Stream to a relay daemon (`--set-url net://…`, `--ctrl-url`/`--data-url`) instead
    /// of writing the output directory.
    #[serde(default)]
    pub relay: Option<crate::url::NetworkUrl>,
    /// `--live[=US]`: a live session with this live timer period in µs (needs `relay`).
    #[serde(default)]
    pub live_timer_us: Option<u32>,
    /// `UST_SESSION_TOKEN` of a `ust trace` session created with these options (as
    /// [`Command::CreateSession`]'s `token`).
    #[serde(default)]
    pub token: Option<String>,
    /// `--buffers-uid`/`--buffers-pid`: the kind of the session's channels (absent: per
    /// PID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffers: Option<crate::config::BufferOwnership>,
    /// Whose output it is: root's daemon creates every file of the session as this user
    /// (their file-system uid and gid). Only a root client may name one (`ust trace
    /// --as-user`); the session of any other client is that client's own (its
    /// `SO_PEERCRED` uid and gid). Absent from a root client: the daemon finds the owner
    /// from the output path (the user whose directory or link it leads through), or writes
    /// as root where root alone controls the path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<SessionOwner>,
}

/// The user a session's output belongs to ([`CreateOptions::owner`]).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SessionOwner {
    /// User id.
    pub uid: u32,
    /// Group id files are created with.
    pub gid: u32,
}

/// The answer to a request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Reply {
    /// Done; what it yields (boxed: a session's details are large; the JSON is that of
    /// the payload itself).
    Ok(Box<Payload>),
    /// Refused or failed; the message says why, for a human.
    Error {
        /// Why.
        message: String,
    },
}

/// [`Command::ReclaimMemory`]'s request (`ust reclaim-memory`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReclaimRequest {
    /// Session.
    pub session: Option<String>,
    /// Channels; empty: every channel (`--all`).
    pub channels: Vec<String>,
    /// `--older-than`, µs: only sub-buffers closed longer ago than this.
    pub older_than_us: Option<u64>,
    /// Wait for the consumption in flight (the default); `false` is `--no-wait`.
    pub wait: bool,
}

/// Data returned by a successful request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Payload {
    /// Nothing more to say.
    Done,
    /// Answer to [`Command::Ping`].
    Pong {
        /// [`CTL_VERSION`].
        version: u32,
        /// Daemon pid.
        pid: u32,
        /// Socket directory.
        rundir: PathBuf,
    },
    /// A session was created.
    Created {
        /// Its name.
        name: String,
        /// Its output directory.
        output: PathBuf,
    },
    /// Session list.
    Sessions(Vec<SessionSummary>),
    /// One session.
    Session(SessionDetail),
    /// Registered processes.
    Apps(Vec<AppInfo>),
    /// Status.
    Status(StatusReport),
    /// A session was destroyed.
    Destroyed(DestroyReport),
    /// A session was stopped: what its traces hold so far (the report [`Command::Destroy`]
    /// gives, the stream files still open).
    Stopped(DestroyReport),
    /// A snapshot was written.
    Snapshot(SnapshotReport),
    /// A trace chunk was archived.
    Rotated {
        /// The archive directory (a complete trace).
        archive: PathBuf,
    },
    /// The process-id tracker after [`Command::TrackVpid`] or [`Command::UntrackVpid`].
    Tracker {
        /// The session's name.
        session: String,
        /// The tracker now.
        tracker: VpidTracker,
        /// Ids given that changed nothing: already tracked (`track`), or not in the set
        /// (`untrack`). LTTng warns about them and succeeds.
        unchanged: Vec<i32>,
    },
    /// A user-id or group-id tracker after [`Command::TrackIds`].
    IdTracker {
        /// The session's name.
        session: String,
        /// Which tracker.
        kind: crate::trackers::IdKind,
        /// The tracker now.
        tracker: crate::trackers::IdTracker,
        /// Ids given that changed nothing (LTTng warns about them).
        unchanged: Vec<u32>,
    },
    /// Triggers ([`Command::AddTrigger`], [`Command::ListTriggers`]), in creation order.
    Triggers(Vec<crate::trigger::TriggerInfo>),
    /// What [`Command::ReclaimMemory`] did, per channel.
    Reclaimed(Vec<crate::reclaim::ChannelReclaimed>),
    /// [`Command::AddMapChannel`]: the session and the channel's name.
    MapChannelAdded(String, String),
    /// [`Command::DumpMaps`].
    Maps(crate::maps::MapsDump),
}

/// A line of `ust list`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SessionSummary {
    /// Name.
    pub name: String,
    /// Output directory.
    pub output: PathBuf,
    /// Recording now.
    pub active: bool,
    /// The current session.
    pub current: bool,
    /// A `ust trace` session (takes only its token's processes).
    pub trace: bool,
    /// A snapshot (flight-recorder) session.
    #[serde(default)]
    pub snapshot: bool,
    /// Number of channels.
    pub channels: usize,
    /// Processes traced (alive or gone).
    pub processes: usize,
    /// Why the session's output stopped (disk full, write error), if it did.
    #[serde(default)]
    pub output_error: Option<String>,
    /// The relay daemon the session streams to (`net://…`), if it does.
    #[serde(default)]
    pub url: Option<String>,
    /// Who owns the buffers of the session's channels (`--buffers-pid`/`--buffers-uid`).
    #[serde(default)]
    pub buffers: crate::config::BufferOwnership,
}

/// A channel in `ust list SESSION`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ChannelDetail {
    /// Name.
    pub name: String,
    /// Configuration.
    pub config: ChannelConfig,
    /// Enablers.
    pub enablers: Vec<Enabler>,
    /// Context fields.
    #[serde(default)]
    pub contexts: Vec<ust_core::context::ContextType>,
    /// Events discarded by writers, summed over the channel's streams.
    pub discarded: u64,
    /// Packets written.
    pub packets: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Packets that failed validation and were skipped.
    pub bad_packets: u64,
    /// Overwrite mode: packets that writers overwrote before the daemon read them (each a
    /// gap in the stream's `packet_seq_num`).
    #[serde(default)]
    pub overwritten: u64,
    /// Packets missing from the stream files: gaps in `packet_seq_num` (before the first
    /// packet too, which a trace reader cannot see).
    #[serde(default)]
    pub lost_packets: u64,
    /// Memory of the channel's buffers (allocated, resident), when it has buffers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::reclaim::ChannelMemory>,
}

/// A traced process in `ust list SESSION` and `ust status`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProcessDetail {
    /// Process id.
    pub pid: i32,
    /// Process name.
    pub procname: String,
    /// Its trace directory.
    pub dir: PathBuf,
    /// Still running.
    pub alive: bool,
    /// Post-mortem trace written when it died abnormally (snapshot sessions).
    #[serde(default)]
    pub post_mortem: Option<PathBuf>,
}

/// `ust list SESSION`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct SessionDetail {
    /// The summary line.
    pub summary: SessionSummary,
    /// Channels.
    pub channels: Vec<ChannelDetail>,
    /// Traced processes.
    pub processes: Vec<ProcessDetail>,
    /// The process-id tracker (`ust track/untrack --vpid`).
    #[serde(default)]
    pub vpid_tracker: VpidTracker,
    /// The user-id tracker (`ust track/untrack --vuid`).
    #[serde(default)]
    pub vuid_tracker: crate::trackers::IdTracker,
    /// The group-id tracker (`ust track/untrack --vgid`).
    #[serde(default)]
    pub vgid_tracker: crate::trackers::IdTracker,
    /// The latest processes the session should have traced and could not (their buffers
    /// could not be backed, the daemon ran out of descriptors, …), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untraced: Vec<UntracedProcess>,
    /// The userspace-probe rules (`enable-event --userspace-probe`), in the order given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub userspace_probes: Vec<crate::probes::UserspaceProbe>,
    /// Its map channels (`ust add-map-channel`), by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub map_channels: Vec<crate::maps::MapChannelInfo>,
}

/// A process a session should have traced and could not: it runs untraced, and this says
/// why (`ust list SESSION`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct UntracedProcess {
    /// Process id.
    pub pid: i32,
    /// Process name.
    pub procname: String,
    /// Why it is not traced.
    pub reason: String,
}

/// A field in `ust list --apps`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FieldInfo {
    /// Name.
    pub name: String,
    /// Type, human form (`u32`, `string`, `sequence<u8>`, …).
    #[serde(rename = "type")]
    pub ty: String,
    /// The full CTF type as registered (enumerations with every `label` and `value`).
    pub ctf_type: ust_core::FieldType,
}

/// A tracepoint in `ust list --apps`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct EventInfo {
    /// `provider:name`.
    pub name: String,
    /// Level number.
    pub level: u8,
    /// LTTng level name.
    pub level_name: String,
    /// Fields.
    pub fields: Vec<FieldInfo>,
    /// Call site.
    pub location: String,
}

/// A registered process in `ust list --apps`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct AppInfo {
    /// Process id.
    pub pid: i32,
    /// Process name.
    pub procname: String,
    /// User id.
    pub uid: u32,
    /// Registered by a `ust trace` command (with a session token).
    pub traced_by_token: bool,
    /// Registration time, `YYYYmmdd-HHMMSS`.
    pub registered: String,
    /// Tracepoints.
    pub events: Vec<EventInfo>,
}

/// `ust status`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct StatusReport {
    /// Daemon pid.
    pub daemon_pid: u32,
    /// Socket directory.
    pub rundir: PathBuf,
    /// Name of the current session.
    pub current: Option<String>,
    /// The session asked for (or the current one).
    pub session: Option<SessionDetail>,
    /// Registered live processes.
    pub apps: usize,
}

/// One process's trace in a [`DestroyReport`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TraceReport {
    /// Process id.
    pub pid: i32,
    /// Process name.
    pub procname: String,
    /// Trace directory.
    pub dir: PathBuf,
    /// Registered events (the record walker needs them).
    pub events: Vec<EventDesc>,
    /// Event context size in bytes per stream class (the record walker skips it).
    #[serde(default)]
    pub context_sizes: Vec<usize>,
    /// Discarded events, summed over its streams.
    pub discarded: u64,
    /// Packets written.
    pub packets: u64,
    /// Packets skipped as invalid.
    pub bad_packets: u64,
}

/// What `destroy` leaves behind (and, for `stop`, what the traces hold so far).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DestroyReport {
    /// Session name.
    pub name: String,
    /// Output directory.
    pub output: PathBuf,
    /// A snapshot session: its processes' trace directories ([`TraceReport::dir`]) are
    /// written only by `ust snapshot record`, under `<output>/snapshot-<N>-<stamp>/`.
    #[serde(default)]
    pub snapshot: bool,
    /// One entry per traced process.
    pub traces: Vec<TraceReport>,
    /// Why the session's output stopped early (disk full, write error), if it did.
    #[serde(default)]
    pub output_error: Option<String>,
    /// Archives of a session that was rotated (the last chunk is archived at destroy, as
    /// LTTng does); empty otherwise.
    #[serde(default)]
    pub archives: Vec<PathBuf>,
    /// A network session: the relay daemon's URL, and the directory it wrote the trace
    /// in, relative to its output (`<hostname>/<session>-<stamp>`).
    #[serde(default)]
    pub relay: Option<(String, String)>,
    /// The session's userspace probes, one entry per recording (each `start`–`stop`), oldest
    /// first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbesReport>,
}

/// What one recording of a session's userspace probes wrote.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProbesReport {
    /// Its trace directory (`<output>/kernel`, `kernel-N`).
    pub dir: PathBuf,
    /// Events written, per name (the probes' and the state dump's).
    pub counts: Vec<(String, u64)>,
    /// Why it ended early or could not be written in full, if so.
    pub error: Option<String>,
}

/// Describes a field type for humans.
pub fn type_name(f: &FieldDesc) -> String {
    use ust_core::FieldType as T;
    let int = |i: ust_core::IntegerType| format!("{}{}", if i.signed { 'i' } else { 'u' }, i.size_bits);
    match &f.ty {
        T::Integer(i) => int(*i) + if i.base == 16 { " (hex)" } else { "" },
        T::Float { exp_dig, .. } => if *exp_dig == 8 { "f32" } else { "f64" }.into(),
        T::String => "string".into(),
        T::Dynamic => "dynamic (typed when recorded)".into(),
        T::Sequence { length, elem, text } => {
            format!("{}<{}> (length {})", if *text { "text" } else { "sequence" }, int(*elem), int(*length))
        }
        T::Array { elem, len } => format!("[{}; {len}]", int(*elem)),
        T::Blob { media_type } => format!("blob ({media_type})"),
        T::Enum { container, name, mappings } => {
            let labels: Vec<String> = mappings.iter().map(|m| format!("{} = {}", m.label, m.value)).collect();
            format!("enum {name} : {} {{ {} }}", int(*container), labels.join(", "))
        }
    }
}

/// What a snapshot or a post-mortem dump wrote.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SnapshotReport {
    /// The directory written (`…/snapshot-<N>-<stamp>` or `…/post-mortem/<process>`).
    pub dir: PathBuf,
    /// Processes written.
    pub processes: usize,
    /// Packets written.
    pub packets: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Packets rebuilt by torn-event recovery (dead writers only).
    pub recovered_packets: u64,
    /// Sub-buffers left out because a live writer had not completed them.
    pub incomplete: u64,
}
