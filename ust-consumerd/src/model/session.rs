//! Sessions and channels: what the user asked to trace, independent of which processes are
//! registered (LTTng's `ltt_session` and `ltt_ust_channel`).
//!
//! An event is recorded into a channel when any enabled enabler of that channel matches it
//! (enablers OR together, [`crate::model::enabler`]), the channel's session is started, and
//! the session takes the process (a `trace` session takes only the processes that carry
//! its token). Enablers apply to processes that register later too: masks are recomputed
//! from them ([`Session::mask_bits`]) on every change.

use std::path::PathBuf;

use ust_core::clock::{ClockKind, TscParams};
use ust_core::EventDesc;
pub use ust_ctl::config::{check_name, check_pids, BufferOwnership, ChannelConfig, Enabler, LevelFilter, VpidTracker, DEFAULT_CHANNEL, MAX_TRACKED_VPIDS};

use crate::model::enabler::{Decision, Rule};

/// A channel of a session: its configuration and enablers. Its index in
/// [`Session::channels`] is its CTF stream class id.
#[derive(Clone, Debug, PartialEq)]
pub struct Channel {
    /// Name (also the stream files' prefix).
    pub name: String,
    /// Buffers and timers.
    pub config: ChannelConfig,
    /// Rules, in the order given.
    pub enablers: Vec<Rule>,
    /// Context fields (`ust add-context`), written after the event header of every record.
    pub contexts: Vec<ust_core::context::ContextType>,
}

impl Channel {
    /// A channel with no enabler and no context.
    pub fn new(name: impl Into<String>, config: ChannelConfig) -> Channel {
        Channel { name: name.into(), config, enablers: Vec::new(), contexts: Vec::new() }
    }

    /// True when an enabled enabler matches `e` (by name, level and exclusions).
    pub fn records(&self, e: &EventDesc) -> bool {
        self.enablers.iter().any(|en| en.matches(e))
    }

    /// What the channel's enablers, ORed, say about `e`.
    pub fn decide(&self, e: &EventDesc) -> Decision {
        self.enablers.iter().fold(Decision::Off, |d, en| if d == Decision::On { d } else { d.or(en.decide(e)) })
    }
}

/// A tracing session.
#[derive(Clone, Debug)]
pub struct Session {
    /// Name.
    pub name: String,
    /// Output directory (absolute), as named (messages, reports).
    pub output: PathBuf,
    /// The output directory, opened when the session is created (again at `start` if it
    /// was replaced meanwhile) by whoever it belongs to: every file of the session is
    /// created through it, as them, never through a link ([`ust_ctf::outdir::TraceDir`];
    /// `ops::output::open_output`). `None` for a network session.
    pub out: Option<ust_ctf::outdir::TraceDir>,
    /// Token of a `ust trace` session: it takes only processes registering with it.
    pub token: Option<String>,
    /// Recording.
    pub started: bool,
    /// Ever started (buffers exist).
    pub ever_started: bool,
    /// Channels; index = stream class id.
    pub channels: Vec<Channel>,
    /// Creation time (seconds since the Epoch).
    pub created: i64,
    /// Realtime − monotonic in ns, sampled once at creation and written in every trace of
    /// the session.
    pub clock_offset_ns: i64,
    /// Rotations done so far (`ust rotate`): the next archive's number.
    pub rotations: u64,
    /// When the current trace chunk began (seconds since the Epoch): the first start, then
    /// the last rotation.
    pub chunk_begin: i64,
    /// Set when writing the session's output failed (disk full, I/O error): every stream
    /// of the session stops writing, and no new process is attached. Shared with the
    /// session's streams.
    pub output_error: OutputError,
    /// Snapshot (flight-recorder) session, LTTng's `lttng create --snapshot`: channels
    /// default to overwrite mode, nothing is written while it runs, `ust snapshot record`
    /// writes the buffers' content, and a process that dies abnormally leaves a
    /// post-mortem trace.
    pub snapshot: bool,
    /// Snapshots recorded so far (`snapshot-<N>-…` directories count from 1).
    pub snapshots_taken: u32,
    /// `--shm-path`: where buffer files and plain-text metadata are kept for
    /// `ust crash-dump` (`<dir>/<session>-<YYYYmmdd-HHMMSS>/`), instead of memfds.
    pub shm_dir: Option<PathBuf>,
    /// Trace clock chosen for the session (`ust create --clock`); `None`: each process's
    /// `UST_CLOCK`, else `CLOCK_MONOTONIC`.
    pub clock: Option<ClockKind>,
    /// TSC parameters, measured the first time a trace of the session uses the TSC and
    /// shared by all of them (as `clock_offset_ns`).
    pub tsc: Option<TscParams>,
    /// Which processes the session records (`ust track/untrack --vpid`): every one by
    /// default.
    pub vpid_tracker: VpidTracker,
    /// A snapshot session's network output (`create --snapshot --set-url`, `snapshot
    /// add-output URL`): where `ust snapshot record` sends snapshots.
    pub snapshot_url: Option<ust_ctl::url::NetworkUrl>,
    /// Who owns the buffers of every channel (`--buffers-pid`, the default, or
    /// `--buffers-uid`): per-process traces, or one per user.
    pub buffers: BufferOwnership,
    /// Which users' processes it records (`ust track/untrack --vuid`): every one by default.
    pub vuid_tracker: ust_ctl::trackers::IdTracker,
    /// Which groups' processes it records (`ust track/untrack --vgid`): every one by default.
    pub vgid_tracker: ust_ctl::trackers::IdTracker,
    /// Userspace-probe rules (`ust enable-event --userspace-probe`), placed while the
    /// session records ([`crate::ops::session_probes`]).
    pub probes: Vec<ust_ctl::probes::UserspaceProbe>,
}

/// The daemon's TSC calibrator: its first sample is taken when the daemon starts
/// ([`tsc_calibrator`] is called from `daemon::run`), so sessions created a while later
/// get a ratio measured over a long window without waiting.
pub fn tsc_calibrator() -> &'static ust_core::clock::tsc::Calibrator {
    static CAL: std::sync::OnceLock<ust_core::clock::tsc::Calibrator> = std::sync::OnceLock::new();
    CAL.get_or_init(ust_core::clock::tsc::Calibrator::new)
}

/// The first output error of a session, shared by all its streams (see
/// [`Session::output_error`]).
#[derive(Clone, Debug, Default)]
pub struct OutputError(std::sync::Arc<std::sync::Mutex<Option<String>>>);

impl OutputError {
    /// The error, if the output stopped.
    pub fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Records `msg` unless an error is already recorded; true if this call recorded it.
    pub fn set(&self, msg: String) -> bool {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_some() {
            return false;
        }
        *g = Some(msg);
        true
    }
}

impl Session {
    /// A new, stopped session with no channel.
    pub fn new(name: String, output: PathBuf, token: Option<String>) -> Session {
        let created = ust_ctf::datetime::now();
        Session {
            name,
            output,
            out: None,
            token,
            started: false,
            ever_started: false,
            channels: Vec::new(),
            created,
            clock_offset_ns: ust_core::clock::realtime_offset_ns(),
            rotations: 0,
            chunk_begin: created,
            output_error: OutputError::default(),
            snapshot: false,
            snapshots_taken: 0,
            shm_dir: None,
            clock: None,
            tsc: None,
            vpid_tracker: VpidTracker::All,
            snapshot_url: None,
            buffers: BufferOwnership::Pid,
            vuid_tracker: Default::default(),
            vgid_tracker: Default::default(),
            probes: Vec::new(),
        }
    }

    /// The session's TSC parameters, measured on first use (this may wait until the
    /// daemon is [`ust_core::clock::tsc::MIN_WINDOW`] old). `None` without a usable TSC.
    pub fn tsc_params(&mut self) -> Option<TscParams> {
        if self.tsc.is_none() {
            self.tsc = tsc_calibrator().params();
        }
        self.tsc
    }

    /// True when the session traces a process registered with `token`.
    pub fn takes(&self, token: Option<&str>) -> bool {
        match &self.token {
            None => true,
            Some(t) => token == Some(t.as_str()),
        }
    }

    /// True when the session's process-id tracker takes process `pid`
    /// ([`Session::vpid_tracker`]).
    pub fn tracks(&self, pid: i32) -> bool {
        self.vpid_tracker.tracks(pid)
    }

    /// True when the user-id and group-id trackers take a process of user `uid` and
    /// group `gid` (with [`Session::tracks`], a process is recorded when all three do).
    pub fn tracks_ids(&self, uid: u32, gid: u32) -> bool {
        self.vuid_tracker.tracks(uid) && self.vgid_tracker.tracks(gid)
    }

    /// The most verbose level number an enabler of channel `channel` accepts while the
    /// session is started, whatever the enabler's pattern; `None` when none accepts any.
    pub fn max_level(&self, channel: usize) -> Option<u8> {
        let c = self.channels.get(channel).filter(|_| self.started)?;
        c.enablers
            .iter()
            .filter(|en| en.enabler.enabled)
            .map(|en| match en.enabler.level {
                LevelFilter::Any => ust_core::Level::Debug.number(),
                LevelFilter::UpTo(l) | LevelFilter::Only(l) => l.number(),
            })
            .max()
    }

    /// Index of channel `name`.
    pub fn channel_index(&self, name: &str) -> Option<usize> {
        self.channels.iter().position(|c| c.name == name)
    }

    /// For each event of `events`, whether channel `channel` records it now (false for
    /// every event while the session is stopped).
    pub fn mask_bits(&self, channel: usize, events: &[EventDesc]) -> Vec<bool> {
        self.decisions(channel, events).into_iter().map(|d| d != Decision::Off).collect()
    }

    /// For each event of `events`, what channel `channel` does with it now (off for every
    /// event while the session is stopped).
    pub fn decisions(&self, channel: usize, events: &[EventDesc]) -> Vec<Decision> {
        match self.channels.get(channel) {
            Some(c) if self.started => events.iter().map(|e| c.decide(e)).collect(),
            _ => vec![Decision::Off; events.len()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;
    use ust_core::Level;

    /// The rules of `enablers`, their filters parsed (as `enable-event` parses them).
    fn rules(enablers: Vec<Enabler>) -> Vec<Rule> {
        enablers.into_iter().map(|e| Rule::parse(e).unwrap()).collect()
    }

    fn ev(p: &'static str, n: &'static str, level: Level) -> EventDesc {
        EventDesc { provider: Cow::Borrowed(p), name: Cow::Borrowed(n), level, fields: Cow::Borrowed(&[]), location: Cow::Borrowed("") }
    }

    #[test]
    fn enablers_or_together_and_filter_levels() {
        let mut s = Session::new("s".into(), "/tmp/x".into(), None);
        let mut c = Channel::new("c", ChannelConfig::default());
        c.enablers = rules(vec![
            Enabler::new("app:*", LevelFilter::UpTo(Level::Warning)),
            Enabler::new("app:dbg", LevelFilter::Only(Level::Debug)),
            Enabler { enabled: false, ..Enabler::new("*", LevelFilter::Any) },
        ]);
        s.channels.push(c);
        let events = [ev("app", "err", Level::Err), ev("app", "info", Level::Info), ev("app", "dbg", Level::Debug), ev("lib", "x", Level::Emerg)];
        assert_eq!(s.mask_bits(0, &events), vec![false; 4]);
        s.started = true;
        assert_eq!(s.mask_bits(0, &events), vec![true, false, true, false]);
        assert!(s.takes(Some("t")) && s.takes(None));
        s.token = Some("t".into());
        assert!(s.takes(Some("t")) && !s.takes(None) && !s.takes(Some("u")));
    }

    #[test]
    fn max_level_is_the_most_verbose_an_enabled_enabler_accepts_while_started() {
        let mut s = Session::new("s".into(), "/tmp/x".into(), None);
        let mut c = Channel::new("c", ChannelConfig::default());
        c.enablers = rules(vec![
            Enabler::new("app:*", LevelFilter::UpTo(Level::Warning)),
            Enabler::new("other:x", LevelFilter::Only(Level::DebugLine)),
            Enabler { enabled: false, ..Enabler::new("*", LevelFilter::Any) },
        ]);
        s.channels.push(c);
        s.channels.push(Channel::new("empty", ChannelConfig::default()));
        assert_eq!(s.max_level(0), None, "stopped");
        s.started = true;
        assert_eq!(s.max_level(0), Some(Level::DebugLine.number()), "whatever the pattern; the disabled one ignored");
        assert_eq!(s.max_level(1), None, "no enabler");
        assert_eq!(s.max_level(2), None, "no such channel");
        s.channels[0].enablers[2].enabler.enabled = true;
        assert_eq!(s.max_level(0), Some(Level::Debug.number()));
    }

    #[test]
    fn exclusions_and_filters_combine_per_event() {
        let mut s = Session::new("s".into(), "/tmp/x".into(), None);
        s.started = true;
        let mut c = Channel::new("c", ChannelConfig::default());
        c.enablers = rules(vec![
            Enabler { exclusions: vec!["app:no*".into()], ..Enabler::new("app:*", LevelFilter::Any) },
            Enabler { filter: Some("a > 1".into()), ..Enabler::new("lib:*", LevelFilter::Any) },
            Enabler { filter: Some("a < 0".into()), ..Enabler::new("lib:x", LevelFilter::Any) },
            Enabler { filter: Some("missing == 1".into()), ..Enabler::new("lib:y", LevelFilter::Any) },
        ]);
        s.channels.push(c);
        let mut x = ev("lib", "x", Level::Info);
        x.fields = Cow::Owned(vec![ust_core::FieldDesc { name: Cow::Borrowed("a"), ty: ust_core::FieldType::Integer(ust_core::IntegerType::I32) }]);
        let events = [ev("app", "yes", Level::Info), ev("app", "nope", Level::Info), x, ev("lib", "y", Level::Info)];
        let d = s.decisions(0, &events);
        assert_eq!(d[0], Decision::On);
        assert_eq!(d[1], Decision::Off, "excluded");
        let Decision::Filtered(f) = &d[2] else { panic!("{:?}", d[2]) };
        assert_eq!(f.len(), 2, "filters of two enablers OR together");
        assert_eq!(d[3], Decision::Off, "fields the event lacks: false");
        s.channels[0].enablers.push(Rule::parse(Enabler::new("lib:x", LevelFilter::Any)).unwrap());
        assert_eq!(s.decisions(0, &events)[2], Decision::On, "an unfiltered enabler wins");
    }

    #[test]
    fn session_applies_its_vpid_tracker() {
        let mut s = Session::new("s".into(), "/tmp/x".into(), None);
        assert!(s.tracks(10));
        s.vpid_tracker = VpidTracker::Only([11].into());
        assert!(!s.tracks(10) && s.tracks(11));
    }
}
