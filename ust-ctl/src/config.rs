//! The settings a request carries: channel configuration and its limits, log-level
//! filters, the process-id tracker, and the rules for session and channel names. The
//! daemon's session model (`ust_consumerd::model::session`) is built from them; the CLI checks
//! them before it sends a request.

use serde::{Deserialize, Serialize};
use ust_core::Level;

pub use crate::alloc::{BufferAllocation, BufferPreallocation};

/// Default sub-buffer size: 512 KiB (16 of them per CPU, read every 20 ms), sized for the
/// design target of 10 M events/s of `{u64, i32}` (16-byte records) from two threads:
///
/// * **Ring size.** The worst case for one buffer is both threads on one CPU: 160 MB/s.
///   The worst drain latency is about 45 ms: the read period (20 ms), the daemon's wake-up
///   delay on cores the writers keep busy (CFS's scheduling latency, 6–24 ms) and the pass
///   itself (about 1 ms for 3 MB). 160 MB/s × 45 ms = 7.2 MB ≤ 16 × 512 KiB = 8 MiB; at
///   80 MB/s per CPU the ring holds 105 ms, two periods of slack (8 sub-buffers would hold
///   only 26 ms at 160 MB/s). A pass that finds half a ring waiting reads that stream again
///   after 5 ms, halving the latency term during bursts; and in discard mode with this
///   default read timer (not another) the daemon looks at a busy stream's fill every 2 ms
///   and reads it once a quarter of the ring waits, so a writer at full speed (300–500
///   MB/s) keeps its events (the consumer's `ops::stream::timers::Watch`).
/// * **Sub-buffer size.** Only whole packets go back to the writer, so the ring has
///   `num_subbuf - 1` sub-buffers of slack while one is being written: 16 keeps that at
///   94 %. 512 KiB packets mean 3–7 whole-packet writes per stream per pass, a few hundred
///   system calls per second in all, none per event; writers never wake the daemon.
/// * **Memory.** 8 MiB per CPU per channel per process, in shared memory the daemon maps;
///   the daemon's own anonymous memory is one 512 KiB copy buffer per draining thread.
///
/// `cargo bench -p benches --bench consumer` measures it (BENCHMARKS.md).
pub const DEFAULT_SUBBUF_SIZE: u64 = 512 * 1024;
/// Default number of sub-buffers per CPU: 16 (see [`DEFAULT_SUBBUF_SIZE`]).
pub const DEFAULT_NUM_SUBBUF: u32 = 16;
/// Default read-timer period: 20 ms (the daemon polls delivered sub-buffers that often, and
/// the fill of a stream whose writers are active every 2 ms; see [`DEFAULT_SUBBUF_SIZE`]).
pub const DEFAULT_READ_TIMER_US: u64 = 20_000;
/// Default switch-timer period: 0, off (as LTTng's per-PID UST channels).
pub const DEFAULT_SWITCH_TIMER_US: u64 = 0;
/// Name of the channel `enable-event` creates when none is given (LTTng's `channel0`).
pub const DEFAULT_CHANNEL: &str = "channel0";
/// Smallest sub-buffer: one page, as LTTng.
pub const MIN_SUBBUF_SIZE: u64 = 4096;
/// Most sub-buffers per buffer.
pub const MAX_NUM_SUBBUF: u32 = 1 << 16;
/// Largest per-CPU buffer (sub-buffer size × count): 1 GiB.
pub const MAX_BUFFER_BYTES: u64 = 1 << 30;

/// Who owns a channel's buffers (LTTng's `--buffers-pid`/`--buffers-uid`): one set of
/// per-CPU buffers per process, or one per user shared by all of that user's processes in
/// the session. Every channel of a session has the session's kind (LTTng refuses a
/// mismatch too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BufferOwnership {
    /// Per process (`--buffers-pid`): `<output>/ust/pid/<procname>-<pid>-<stamp>/`. The
    /// default of ust (DESIGN.md Interfaces).
    #[default]
    Pid,
    /// Per user (`--buffers-uid`): `<output>/ust/uid/<uid>/64-bit/`.
    Uid,
}

impl std::fmt::Display for BufferOwnership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BufferOwnership::Pid => "per-PID",
            BufferOwnership::Uid => "per-UID",
        })
    }
}

/// Configuration of a channel (`ust enable-channel`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelConfig {
    /// Sub-buffer size in bytes, a power of two, at least [`MIN_SUBBUF_SIZE`].
    pub subbuf_size: u64,
    /// Number of sub-buffers per CPU, a power of two, at least 2.
    pub num_subbuf: u32,
    /// Overwrite (flight-recorder) mode instead of discard.
    pub overwrite: bool,
    /// Switch-timer period in µs; 0 = off.
    pub switch_timer_us: u64,
    /// Read-timer period in µs, at least 1.
    pub read_timer_us: u64,
    /// `--tracefile-size`: a stream file is closed and the next one (`<channel>_<cpu>_<k>`)
    /// opened before a packet would make it larger than this; 0 = one file per stream.
    #[serde(default)]
    pub tracefile_size: u64,
    /// `--tracefile-count`: most files kept per stream (the oldest is removed); 0 = all.
    #[serde(default)]
    pub tracefile_count: u64,
    /// `--buffers-uid`/`--buffers-pid`; `None`: the session's kind
    /// ([`crate::protocol::CreateOptions::buffers`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffers: Option<BufferOwnership>,
    /// `--blocking-timeout` in µs (LTTng's blocking mode, discard mode only): 0 = a full
    /// buffer discards at once; else a writer waits up to this long for room
    /// ([`BLOCKING_FOREVER`]: without limit), in processes that allow it
    /// (`UST_ALLOW_BLOCKING`).
    #[serde(default)]
    pub blocking_timeout_us: u64,
    /// `--buffer-allocation` (LTTng 2.14): a ring per CPU or one per channel, for each
    /// owner. Absent (older peers) is per-CPU.
    #[serde(default, skip_serializing_if = "BufferAllocation::is_default")]
    pub allocation: BufferAllocation,
    /// `--buffer-preallocation` (LTTng 2.15): every page allocated up front, or when first
    /// written. Absent (older peers) is preallocate.
    #[serde(default, skip_serializing_if = "BufferPreallocation::is_default")]
    pub preallocation: BufferPreallocation,
    /// `--auto-reclaim-memory` (LTTng 2.15): `None` is `off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_reclaim: Option<crate::reclaim::AutoReclaim>,
}

/// [`ChannelConfig::blocking_timeout_us`] of `--blocking-timeout inf`.
pub const BLOCKING_FOREVER: u64 = u64::MAX;

impl Default for ChannelConfig {
    fn default() -> Self {
        ChannelConfig {
            subbuf_size: DEFAULT_SUBBUF_SIZE,
            num_subbuf: DEFAULT_NUM_SUBBUF,
            overwrite: false,
            switch_timer_us: DEFAULT_SWITCH_TIMER_US,
            read_timer_us: DEFAULT_READ_TIMER_US,
            tracefile_size: 0,
            tracefile_count: 0,
            buffers: None,
            blocking_timeout_us: 0,
            allocation: BufferAllocation::PerCpu,
            preallocation: BufferPreallocation::Preallocate,
            auto_reclaim: None,
        }
    }
}

impl ChannelConfig {
    /// Checks sizes and timers.
    ///
    /// # Errors
    /// A message naming the bad value.
    pub fn validate(&self) -> Result<(), String> {
        if !self.subbuf_size.is_power_of_two() || self.subbuf_size < MIN_SUBBUF_SIZE {
            return Err(format!("sub-buffer size {} is not a power of two of at least {MIN_SUBBUF_SIZE}", self.subbuf_size));
        }
        if !self.num_subbuf.is_power_of_two() || self.num_subbuf < 2 || self.num_subbuf > MAX_NUM_SUBBUF {
            return Err(format!("sub-buffer count {} is not a power of two between 2 and {MAX_NUM_SUBBUF}", self.num_subbuf));
        }
        if self.subbuf_size.saturating_mul(self.num_subbuf as u64) > MAX_BUFFER_BYTES {
            return Err(format!("buffer of {} x {} bytes exceeds {MAX_BUFFER_BYTES} bytes per CPU", self.num_subbuf, self.subbuf_size));
        }
        if self.read_timer_us == 0 {
            return Err("read timer must be at least 1 us".into());
        }
        if self.tracefile_size != 0 && self.tracefile_size < self.subbuf_size {
            return Err(format!(
                "trace file size {} is smaller than a packet (sub-buffer size {}); each file holds whole packets",
                self.tracefile_size, self.subbuf_size
            ));
        }
        if self.blocking_timeout_us != 0 && self.overwrite {
            return Err("--blocking-timeout applies to discard mode: an overwrite-mode buffer is never full".into());
        }
        if self.tracefile_count != 0 && self.tracefile_size == 0 {
            return Err("--tracefile-count needs --tracefile-size".into());
        }
        Ok(())
    }
}

/// Log-level part of an enabler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LevelFilter {
    /// Any level.
    Any,
    /// `--loglevel L`: level number `<= L` (as severe as `L` or more).
    UpTo(Level),
    /// `--loglevel-only L`: exactly `L`.
    Only(Level),
}

impl LevelFilter {
    /// True when an event of level `l` passes.
    pub fn accepts(self, l: Level) -> bool {
        match self {
            LevelFilter::Any => true,
            LevelFilter::UpTo(max) => l.number() <= max.number(),
            LevelFilter::Only(x) => l == x,
        }
    }

    /// Human form: `any`, `<= TRACE_INFO (6)`, `== TRACE_INFO (6)`.
    pub fn describe(self) -> String {
        match self {
            LevelFilter::Any => "any level".into(),
            LevelFilter::UpTo(l) => format!("level <= {l}"),
            LevelFilter::Only(l) => format!("level == {l}"),
        }
    }
}

/// One `enable-event` rule of a channel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enabler {
    /// Glob on `provider:name`.
    pub pattern: String,
    /// Level filter.
    pub level: LevelFilter,
    /// False after `disable-event`.
    pub enabled: bool,
    /// `--exclude`: globs on `provider:name` that this enabler does not match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclusions: Vec<String>,
    /// `--filter`: the expression's text (checked by [`crate::filter::parse`] when the
    /// enabler is made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
}

impl Enabler {
    /// An enabled rule with no exclusion and no filter.
    pub fn new(pattern: impl Into<String>, level: LevelFilter) -> Enabler {
        Enabler { pattern: pattern.into(), level, enabled: true, exclusions: Vec::new(), filter: None }
    }

    /// True when this rule names the event `full_name` (`provider:name`): its pattern
    /// matches and no exclusion does (LTTng's star-glob, [`ust_core::filter::pattern_match`]).
    /// Whether the rule is enabled, its level filter and its filter expression are apart.
    pub fn names(&self, full_name: &str) -> bool {
        let m = |p: &str| ust_core::filter::pattern_match(p.as_bytes(), full_name.as_bytes());
        m(&self.pattern) && !self.exclusions.iter().any(|x| m(x))
    }
}

/// Most process ids a session's tracker may list.
pub const MAX_TRACKED_VPIDS: usize = 65536;

/// A session's process-id tracker (`ust track --vpid`, `ust untrack --vpid`), with
/// LTTng 2.13's semantics for `lttng track/untrack --userspace --vpid`: a tracker either
/// takes every process (the default, policy "all") or only those of an inclusion set
/// (possibly empty: nothing is recorded). The daemon applies it to processes already
/// registered and to those that register later, whether the session is started or not.
///
/// The ids are process ids as the daemon sees them (`SO_PEERCRED`, what `ust list --apps`
/// shows), which are the processes' own (virtual) pids unless they run in another pid
/// namespace.
///
/// JSON (`ust list SESSION --json`, field `vpid_tracker`): `"all"`, or
/// `{"only": [pid, ...]}` in increasing order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VpidTracker {
    /// Every process is tracked (`ust track --vpid --all`; the default).
    #[default]
    All,
    /// Only these process ids are tracked; empty after `ust untrack --vpid --all`.
    Only(std::collections::BTreeSet<i32>),
}

impl VpidTracker {
    /// True when a process with id `pid` is recorded by the session.
    pub fn tracks(&self, pid: i32) -> bool {
        match self {
            VpidTracker::All => true,
            VpidTracker::Only(set) => set.contains(&pid),
        }
    }

    /// `ust track --vpid PIDS`: switches a tracker that takes every process to the set
    /// `PIDS`, or adds `PIDS` to the set. Returns the ids that were tracked already
    /// (LTTng warns about those and goes on).
    ///
    /// # Errors
    /// A message when an id is not positive or the set would exceed
    /// [`MAX_TRACKED_VPIDS`]; the tracker is then unchanged.
    pub fn track(&mut self, pids: &[i32]) -> Result<Vec<i32>, String> {
        check_pids(pids)?;
        let mut set = match self {
            VpidTracker::All => std::collections::BTreeSet::new(),
            VpidTracker::Only(s) => s.clone(),
        };
        let was_all = *self == VpidTracker::All;
        let mut already = Vec::new();
        for &p in pids {
            if !set.insert(p) && !already.contains(&p) {
                already.push(p);
            }
        }
        if was_all {
            // Every process was tracked: the ones named were tracked already, but the
            // tracker now takes them only. LTTng reports no warning here.
            already.clear();
        }
        if set.len() > MAX_TRACKED_VPIDS {
            return Err(format!("a session tracks at most {MAX_TRACKED_VPIDS} process ids"));
        }
        *self = VpidTracker::Only(set);
        Ok(already)
    }

    /// `ust untrack --vpid PIDS`: removes `PIDS` from the inclusion set. Returns the ids
    /// that were not in it (LTTng warns about those and goes on).
    ///
    /// # Errors
    /// A message when an id is not positive, or when the tracker takes every process:
    /// LTTng has no exclusion set, so a single process cannot be untracked from "all"
    /// (the message says what to do instead). The tracker is then unchanged.
    pub fn untrack(&mut self, pids: &[i32]) -> Result<Vec<i32>, String> {
        check_pids(pids)?;
        match self {
            VpidTracker::All => Err("every process is tracked (policy \"all\"): there is no list to remove a process id from; \
                 track the processes to keep with `ust track --vpid PID,...`, or track none with `ust untrack --vpid --all`"
                .into()),
            VpidTracker::Only(set) => {
                let mut missing = Vec::new();
                for &p in pids {
                    if !set.remove(&p) && !missing.contains(&p) {
                        missing.push(p);
                    }
                }
                Ok(missing)
            }
        }
    }

    /// Human form for `ust list SESSION`: `all`, `none`, or the ids, comma-separated.
    pub fn describe(&self) -> String {
        match self {
            VpidTracker::All => "all".into(),
            VpidTracker::Only(s) if s.is_empty() => "none".into(),
            VpidTracker::Only(s) => s.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", "),
        }
    }
}

/// Checks process ids given to the tracker: each in `1..=i32::MAX`.
///
/// # Errors
/// A message naming the first bad id.
pub fn check_pids(pids: &[i32]) -> Result<(), String> {
    match pids.iter().find(|p| **p <= 0) {
        Some(p) => Err(format!("invalid process id {p}: a process id is a positive integer")),
        None => Ok(()),
    }
}

/// Checks an event name or glob as LTTng does: `provider:name` with both parts non-empty
/// and at most one `:` (a `:` escaped as `\:` does not count), or one word without `:`
/// (`*`, `lib*`). `*` matches anything anywhere.
///
/// ```
/// use ust_ctl::config::check_event_name;
/// assert!(check_event_name("app:*").is_ok() && check_event_name("*").is_ok() && check_event_name(r"a\:b:c").is_ok());
/// assert!(check_event_name(":").is_err() && check_event_name("a:b:c").is_err() && check_event_name("a:").is_err());
/// ```
///
/// # Errors
/// A message naming the name and the rule it breaks.
pub fn check_event_name(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err("invalid event name \"\": give provider:name, or a glob such as 'app:*'".into());
    }
    let mut colons = Vec::new();
    let mut escaped = false;
    for (i, c) in p.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ':' => colons.push(i),
            _ => {}
        }
    }
    match colons[..] {
        [] => Ok(()),
        [i] if i > 0 && i + 1 < p.len() => Ok(()),
        [_] => Err(format!("invalid event name {p:?}: the provider and the name (provider:name) must not be empty")),
        _ => Err(format!("invalid event name {p:?}: at most one `:`, between provider and name (write a `:` of a name as `\\:`)")),
    }
}

/// Checks the exclusions of an event rule as LTTng does: an exclusion that matches every
/// name a pattern can match (`enable-event 'allo*' --exclude 'all*'`) would leave the rule
/// nothing to enable, and is refused. Detected for patterns whose only stars end them (the
/// form LTTng checks): the exclusion is the pattern itself, `*`, or ends with its only
/// stars after a prefix of the pattern's prefix.
///
/// ```
/// use ust_ctl::config::check_exclusions;
/// assert!(check_exclusions(&["allo*".into()], &["all*".into()]).is_err());
/// assert!(check_exclusions(&["allo*".into()], &["ze".into(), "all*".into(), "yes".into()]).is_err());
/// assert!(check_exclusions(&["tp:tptest*".into()], &["tp:tptest1".into()]).is_ok());
/// ```
///
/// # Errors
/// A message naming the pattern and the exclusion that covers it.
pub fn check_exclusions(patterns: &[String], exclusions: &[String]) -> Result<(), String> {
    use ust_core::filter::{glob_class, GlobClass};
    let prefix = |s: &str| s.trim_end_matches('*').to_string();
    for p in patterns {
        if glob_class(p.as_bytes()) != GlobClass::StarEnd {
            continue;
        }
        for x in exclusions {
            let covers = x == p || (glob_class(x.as_bytes()) == GlobClass::StarEnd && prefix(p).starts_with(&prefix(x)));
            if covers {
                return Err(format!("exclusion {x:?} excludes every event {p:?} can match: nothing would be enabled"));
            }
        }
    }
    Ok(())
}

/// Most exclusions one `enable-event` request may carry.
pub const MAX_EXCLUSIONS: usize = 64;

/// Checks an event name or glob as an `enable-event` pattern or exclusion: 1 to 300
/// characters of `[A-Za-z0-9_:*.\-]` and the escapes of [`check_event_name`], whose rules
/// it applies too.
///
/// # Errors
/// A message naming the pattern and the rule it breaks.
pub fn check_pattern(p: &str) -> Result<(), String> {
    if p.is_empty() || p.len() > 300 || !p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '*' | '.' | '-' | '\\')) {
        return Err(format!("invalid event name or glob {p:?}: use provider:name with letters, digits, _ and * wildcards"));
    }
    check_event_name(p)
}

/// Checks what an `enable-event` request ([`crate::protocol::Command::EnableEvent`])
/// carries, and parses its filter: the one check, which the CLI runs before it sends the
/// request and the daemon runs again on what it receives (a client may skip the CLI).
/// `patterns` are the globs to enable (`-a` is `["*"]`), `exclusions` the `--exclude`
/// globs, `filter` the `--filter` text.
///
/// Returns the filter's expression ([`crate::filter::parse`]), which the daemon keeps
/// instead of the text, so that it is parsed once per request.
///
/// # Errors
/// A message for the user: no pattern; a pattern or exclusion that
/// [`check_pattern`] refuses; more than [`MAX_EXCLUSIONS`] exclusions; exclusions
/// without a glob pattern (an exact name has nothing to exclude); an exclusion that
/// covers a pattern whole ([`check_exclusions`]); a filter that does not parse (the
/// message shows the column, [`crate::filter::ParseError::render`]).
pub fn check_enable_event(patterns: &[String], exclusions: &[String], filter: Option<&str>) -> Result<Option<ust_core::filter::Expr>, String> {
    if patterns.is_empty() {
        return Err("no event name given".into());
    }
    for p in patterns.iter().chain(exclusions) {
        check_pattern(p)?;
    }
    if exclusions.len() > MAX_EXCLUSIONS {
        return Err(format!("too many exclusions (at most {MAX_EXCLUSIONS})"));
    }
    if !exclusions.is_empty() && !patterns.iter().any(|p| p.contains('*')) {
        return Err("--exclude needs a glob event name (with `*`) or -a: an exact name has nothing to exclude".into());
    }
    check_exclusions(patterns, exclusions)?;
    filter.map(|f| crate::filter::parse(f).map_err(|e| format!("invalid filter: {}", e.render(f)))).transpose()
}

/// Checks a session or channel name: 1 to 100 characters of `[A-Za-z0-9_.-]`, not starting
/// with `.` or `-` (it becomes part of paths).
///
/// # Errors
/// A message naming the bad name.
pub fn check_name(kind: &str, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        && !name.starts_with(['.', '-']);
    if ok {
        Ok(())
    } else {
        Err(format!("invalid {kind} name {name:?}: use 1 to 100 characters of A-Z a-z 0-9 _ . - (not first . or -)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vpid_tracker_follows_lttng() {
        let mut t = VpidTracker::default();
        assert!(t.tracks(1) && t.tracks(42));
        assert_eq!(t.describe(), "all");
        assert!(t.untrack(&[5]).is_err(), "no list to remove from");
        assert_eq!(t, VpidTracker::All, "unchanged on error");
        assert_eq!(t.track(&[7, 3]), Ok(vec![]));
        assert!(t.tracks(7) && t.tracks(3) && !t.tracks(42));
        assert_eq!(t.describe(), "3, 7");
        assert_eq!(t.track(&[3, 9]), Ok(vec![3]), "3 was tracked already");
        assert_eq!(t.untrack(&[7, 8]), Ok(vec![8]), "8 was not tracked");
        assert!(!t.tracks(7) && t.tracks(9));
        assert!(t.track(&[0]).is_err() && t.track(&[-4]).is_err());
        assert_eq!(t.describe(), "3, 9", "unchanged on error");
        t = VpidTracker::Only(Default::default());
        assert!(!t.tracks(3));
        assert_eq!(t.describe(), "none");
        assert_eq!(serde_json::to_string(&VpidTracker::All).unwrap(), r#""all""#);
        assert_eq!(serde_json::to_string(&VpidTracker::Only([2, 1].into())).unwrap(), r#"{"only":[1,2]}"#);
    }

    #[test]
    fn config_validation() {
        assert!(ChannelConfig::default().validate().is_ok());
        assert!(ChannelConfig { subbuf_size: 5000, ..Default::default() }.validate().is_err());
        assert!(ChannelConfig { num_subbuf: 3, ..Default::default() }.validate().is_err());
        assert!(ChannelConfig { tracefile_size: 4096, ..Default::default() }.validate().is_err(), "smaller than a packet");
        assert!(ChannelConfig { tracefile_count: 2, ..Default::default() }.validate().is_err());
        assert!(ChannelConfig { tracefile_size: 1 << 20, tracefile_count: 2, ..Default::default() }.validate().is_ok());
        assert!(check_name("session", "a-b_c.1").is_ok());
        assert!(check_name("session", "../x").is_err());
    }

    /// One check for both ends of `enable-event`: each refusal has its message, and an
    /// accepted request hands back its filter parsed.
    #[test]
    fn enable_event_requests_are_checked_once_and_the_filter_comes_back_parsed() {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let check = |p: &[&str], x: &[&str], f: Option<&str>| check_enable_event(&v(p), &v(x), f);
        assert_eq!(check(&[], &[], None).unwrap_err(), "no event name given");
        assert!(check(&["a:b:c"], &[], None).unwrap_err().contains("invalid event name"));
        assert!(check(&["a:*"], &["x/y"], None).unwrap_err().contains("invalid event name or glob"));
        let many: Vec<String> = (0..=MAX_EXCLUSIONS).map(|i| format!("a:x{i}")).collect();
        assert!(check_enable_event(&v(&["a:*"]), &many, None).unwrap_err().contains("too many exclusions"));
        assert!(check(&["a:b"], &["a:c"], None).unwrap_err().contains("needs a glob"));
        assert!(check(&["allo*"], &["all*"], None).unwrap_err().contains("excludes every event"));
        assert!(check(&["a:*"], &[], Some("n > && m")).unwrap_err().starts_with("invalid filter: column 5"));
        assert_eq!(check(&["a:*"], &["a:x*"], None), Ok(None));
        assert_eq!(check(&["a:*"], &[], Some("n > 1")), Ok(Some(crate::filter::parse("n > 1").unwrap())));
    }
}
