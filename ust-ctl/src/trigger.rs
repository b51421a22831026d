//! Triggers (LTTng's `lttng add-trigger`, `list-triggers`, `remove-trigger`): a
//! condition, "an event matching this event rule occurred", and the actions the daemon
//! runs when it is met. The types the `ctl` requests carry, and the parser of
//! `add-trigger`'s argument list, whose meaning depends on order as in lttng
//! (`--name` before `--condition` names the trigger, after it the event rule's
//! pattern), which is why it is parsed here rather than by clap.
//!
//! ```text
//! ust add-trigger --name on-error --condition event-rule-matches --type user \
//!     --name 'myapp:error' [--filter EXPR] [--exclude-name GLOB]... [--log-level L..]
//!     --action snapshot-session fr [--action notify]...
//! ```
//!
//! ```text
//! ust add-trigger --condition session-consumed-size-ge --session S --threshold-size 1M \
//!     --action stop-session S
//! ust add-trigger --condition session-rotation-finishes --session S --action notify
//! ```
//!
//! ```text
//! ust add-trigger --condition channel-buffer-usage-ge --session S --channel C --domain user \
//!     --threshold-ratio 0.75 --action snapshot-session S --path /var/snaps --name full
//! ```
//!
//! Grammar, from lttng-add-trigger(1) and lttng-event-rule(7) of LTTng 2.13 to 2.16:
//! options take their value as the next argument or after `=`; `--type` is `user` or
//! `user:tracepoint` (user space is the only domain); `--log-level` is `LEVEL..` (this
//! level or more severe), `LEVEL` (exactly) or `..` (any); actions are `notify`,
//! `snapshot-session SESSION [--name N] [--max-size S] [--path DIR | --url URL |
//! --ctrl-url URL --data-url URL]`, `start-session SESSION`, `stop-session SESSION` and
//! `rotate-session SESSION`, each with an optional `--rate-policy every:N|once-after:N`
//! ([`options`]), run in the order given. Options this daemon cannot honour
//! (`--capture`, `--owner-uid`, other rule types, a `--domain` other than `user`) are
//! refused by name, never ignored.

pub mod options;

use serde::{Deserialize, Serialize};
use ust_core::Level;

use crate::config::{Enabler, LevelFilter};
use options::{ActionOptions, PendingSnapshot, RatePolicy};

/// What a trigger does when its condition is met.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TriggerAction {
    /// Counts the firing and tells the daemon's log and `ust list-triggers` (LTTng sends
    /// a notification to liblttng-ctl clients; ust has no such client library).
    Notify,
    /// `ust snapshot record -s SESSION` (a snapshot session, started).
    SnapshotSession(String),
    /// `ust start SESSION`.
    StartSession(String),
    /// `ust stop SESSION`.
    StopSession(String),
    /// `ust rotate -s SESSION`.
    RotateSession(String),
}

impl std::fmt::Display for TriggerAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TriggerAction::Notify => write!(f, "notify"),
            TriggerAction::SnapshotSession(s) => write!(f, "snapshot session `{s}`"),
            TriggerAction::StartSession(s) => write!(f, "start session `{s}`"),
            TriggerAction::StopSession(s) => write!(f, "stop session `{s}`"),
            TriggerAction::RotateSession(s) => write!(f, "rotate session `{s}`"),
        }
    }
}

/// A session condition of LTTng 2.15's `add-trigger` (lttng-add-trigger(1)), evaluated by
/// the daemon where it knows the value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionCondition {
    /// `session-consumed-size-ge --session S --threshold-size T`: the bytes the daemon has
    /// written of session `session`'s event record channels (packets to files or to the
    /// relay daemon, summed over the session's life) reach `threshold` bytes. Sampled
    /// every [`CONSUMED_SIZE_SAMPLE_MS`] milliseconds (LTTng samples it at each channel's
    /// monitor timer); it fires once when a sample crosses the threshold, and again only
    /// after it fell below (never, as the size only grows).
    ConsumedSizeGe {
        /// The session.
        session: String,
        /// The threshold, bytes.
        threshold: u64,
    },
    /// `session-rotation-starts --session S`: a rotation of `session` (`ust rotate` or a
    /// trigger's `rotate-session`) begins.
    RotationStarts {
        /// The session.
        session: String,
    },
    /// `session-rotation-finishes --session S`: a rotation of `session` has archived its
    /// chunk (a failed rotation does not fire it).
    RotationFinishes {
        /// The session.
        session: String,
    },
    /// `channel-buffer-usage-ge --session S --channel C --domain user (--threshold-size T |
    /// --threshold-ratio R)`: the usage of a ring buffer of channel `channel` (bytes
    /// written and not yet consumed; the highest of the channel's per-CPU buffers, for
    /// each process, or each user with per-UID buffers, as LTTng evaluates each of its
    /// channel instances) becomes at least the threshold. Sampled every
    /// [`CONSUMED_SIZE_SAMPLE_MS`] milliseconds; fires when a sample is at or above and the
    /// previous one of that instance was not (on a crossing, not at every sample).
    BufferUsageGe {
        /// The session.
        session: String,
        /// The channel.
        channel: String,
        /// The threshold.
        threshold: UsageThreshold,
    },
    /// `channel-buffer-usage-le`: as [`SessionCondition::BufferUsageGe`], when the highest
    /// usage becomes at most the threshold (as LTTng, a channel instance's first sample
    /// below it fires too).
    BufferUsageLe {
        /// The session.
        session: String,
        /// The channel.
        channel: String,
        /// The threshold.
        threshold: UsageThreshold,
    },
}

/// A buffer-usage threshold: bytes, or a ratio of one ring buffer's size (sub-buffer size
/// × count), as LTTng's `--threshold-size` / `--threshold-ratio`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UsageThreshold {
    /// Bytes.
    Bytes(u64),
    /// A ratio from 0 to 1.
    Ratio(Ratio),
}

/// A ratio from 0 to 1 (never NaN: [`Ratio::new`] and [`UsageThreshold::check`] refuse
/// anything else, which is what makes `Eq` sound).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratio(pub f64);

impl Eq for Ratio {}

impl Ratio {
    /// `r` if it is a number from 0 to 1.
    pub fn new(r: f64) -> Option<Ratio> {
        (0.0..=1.0).contains(&r).then_some(Ratio(r))
    }
}

impl UsageThreshold {
    /// The threshold in bytes for a ring buffer of `capacity` bytes (a ratio is rounded
    /// down, as LTTng's notification thread does).
    pub fn bytes(self, capacity: u64) -> u64 {
        match self {
            UsageThreshold::Bytes(b) => b,
            UsageThreshold::Ratio(Ratio(r)) => (r * capacity as f64) as u64,
        }
    }

    /// Refuses a ratio outside 0..=1 (what a client sent is checked again).
    ///
    /// # Errors
    /// A message with the value.
    pub fn check(self) -> Result<(), String> {
        match self {
            UsageThreshold::Ratio(Ratio(r)) if Ratio::new(r).is_none() => Err(format!("threshold ratio {r} is not a number from 0 to 1")),
            _ => Ok(()),
        }
    }
}

impl std::fmt::Display for UsageThreshold {
    /// As lttng list-triggers prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UsageThreshold::Bytes(b) => write!(f, "threshold (bytes): {b}"),
            UsageThreshold::Ratio(Ratio(r)) => write!(f, "threshold (ratio): {r:.2}"),
        }
    }
}

/// How often the daemon samples a session's consumed size for `session-consumed-size-ge`,
/// milliseconds.
pub const CONSUMED_SIZE_SAMPLE_MS: u64 = 50;

impl SessionCondition {
    /// The session the condition is about.
    pub fn session(&self) -> &str {
        match self {
            SessionCondition::ConsumedSizeGe { session, .. }
            | SessionCondition::RotationStarts { session }
            | SessionCondition::RotationFinishes { session }
            | SessionCondition::BufferUsageGe { session, .. }
            | SessionCondition::BufferUsageLe { session, .. } => session,
        }
    }

    /// LTTng's name of the condition type, as `lttng list-triggers` prints it
    /// (`lttng_condition_type_str`).
    pub fn lttng_name(&self) -> &'static str {
        match self {
            SessionCondition::ConsumedSizeGe { .. } => "session consumed size",
            SessionCondition::RotationStarts { .. } => "session rotation ongoing",
            SessionCondition::RotationFinishes { .. } => "session rotation completed",
            SessionCondition::BufferUsageGe { .. } => "buffer usage high",
            SessionCondition::BufferUsageLe { .. } => "buffer usage low",
        }
    }
}

/// A trigger as the user defined it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerSpec {
    /// Its name (unique in the daemon); `None` in a request: the daemon names it
    /// `trigger<N>`.
    pub name: Option<String>,
    /// The event rule of the `event-rule-matches` condition: pattern, level, exclusions,
    /// filter, with the meaning they have in `enable-event` (unused, `*`, when
    /// `condition` is set).
    pub rule: Enabler,
    /// A session condition instead of `event-rule-matches`; `None`: the event rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<SessionCondition>,
    /// Actions, in the order they run.
    pub actions: Vec<TriggerAction>,
    /// The options of each action, by index in `actions` ([`TriggerSpec::options`]); may
    /// be shorter (missing ones are the defaults).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub action_options: Vec<ActionOptions>,
}

impl TriggerSpec {
    /// The options of action `i` (the defaults when none were given).
    pub fn options(&self, i: usize) -> ActionOptions {
        self.action_options.get(i).cloned().unwrap_or_default()
    }

    /// `action_options` with trailing defaults dropped, so that two specs that mean the
    /// same compare equal.
    pub fn normalize(&mut self) {
        self.action_options.truncate(self.actions.len());
        while self.action_options.last().is_some_and(|o| *o == ActionOptions::default()) {
            self.action_options.pop();
        }
    }
}

/// A trigger as `ust list-triggers` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerInfo {
    /// The trigger (with its name set).
    pub spec: TriggerSpec,
    /// Times its actions ran (events within one poll period of the daemon's trigger
    /// watch, 1 ms, fire it once).
    pub fired: u64,
    /// Processes whose events it watches now.
    pub processes: usize,
    /// What the last firing produced: a snapshot directory, or an action's error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_result: Option<String>,
}

fn value<'a>(args: &'a [String], i: &mut usize, opt: &str, inline: Option<&'a str>) -> Result<&'a str, String> {
    if let Some(v) = inline {
        return Ok(v);
    }
    *i += 1;
    args.get(*i).map(String::as_str).ok_or_else(|| format!("option {opt} needs a value"))
}

/// A size with an optional `k`, `M` or `G` suffix (powers of 1024), as
/// lttng-add-trigger(1)'s `--threshold-size`.
fn parse_size(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M') => (&s[..s.len() - 1], 1 << 20),
        Some('G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a size (examples: 4096, 64k, 1M, 2G)"))?;
    n.checked_mul(mult).ok_or_else(|| format!("{s:?} is too large"))
}

fn parse_level_range(s: &str) -> Result<LevelFilter, String> {
    let lv = |t: &str| Level::parse(t).ok_or_else(|| format!("{t:?} is not a log level (TRACE_EMERG .. TRACE_DEBUG, or 0-14)"));
    if s == ".." {
        return Ok(LevelFilter::Any);
    }
    match s.strip_suffix("..") {
        Some(l) => Ok(LevelFilter::UpTo(lv(l)?)),
        None if s.starts_with("..") => Err(format!("log level range {s:?}: `..LEVEL` is not supported (LTTng neither): use `LEVEL..`, `LEVEL` or `..`")),
        None => Ok(LevelFilter::Only(lv(s)?)),
    }
}

/// Parses the arguments of `add-trigger` (everything after the verb).
///
/// # Errors
/// A message naming the argument: a missing or second `--condition`, a condition other
/// than `event-rule-matches`, an event-rule type other than user space, no `--action`, an
/// unknown action, an option this daemon does not support, a bad filter (checked with
/// [`crate::filter::parse`]), a bad log level.
pub fn parse_add_trigger(args: &[String]) -> Result<TriggerSpec, String> {
    #[derive(PartialEq)]
    enum Part {
        Trigger,
        Condition,
        Session,
        Action,
    }
    let mut part = Part::Trigger;
    let mut name = None;
    let mut rule = Enabler::new("*", LevelFilter::Any);
    let mut rule_type = None;
    let mut pattern_set = false;
    let mut actions = Vec::new();
    let mut action_options: Vec<ActionOptions> = Vec::new();
    // The options of the last action, finished when the next `--action` or the end comes.
    let mut pending: Option<(RatePolicy, PendingSnapshot)> = None;
    let mut cond = CondArgs::default();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let (opt, inline) = match a.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o, Some(v)),
            _ => (a, None),
        };
        let usage = cond.kind.as_deref().is_some_and(|k| k.starts_with("channel-buffer-usage-"));
        match (opt, &part) {
            ("--channel" | "-c", Part::Session) if usage => cond.channel = Some(value(args, &mut i, opt, inline)?.to_string()),
            ("--domain" | "-d", Part::Session) if usage => {
                let d = value(args, &mut i, opt, inline)?;
                if !matches!(d, "user" | "ust" | "userspace") {
                    return Err(format!("--domain {d}: ust's channels are user space (--domain user)"));
                }
                cond.domain = true;
            }
            ("--threshold-ratio" | "-r", Part::Session) if usage => {
                let r = value(args, &mut i, opt, inline)?;
                let v = r.parse::<f64>().ok().and_then(Ratio::new).ok_or_else(|| format!("--threshold-ratio {r:?}: give a number from 0 to 1"))?;
                cond.set_threshold(UsageThreshold::Ratio(v))?;
            }
            ("--condition", _) | ("-c", Part::Trigger) => {
                if part != Part::Trigger {
                    return Err("only one --condition may be given, before the actions".into());
                }
                let c = value(args, &mut i, opt, inline)?;
                match c {
                    "event-rule-matches" => part = Part::Condition,
                    "session-consumed-size-ge" | "session-rotation-starts" | "session-rotation-finishes" | "channel-buffer-usage-ge" | "channel-buffer-usage-le" => {
                        cond.kind = Some(c.to_string());
                        part = Part::Session;
                    }
                    _ => {
                        return Err(format!(
                            "unknown condition {c:?} (channel-buffer-usage-ge, channel-buffer-usage-le, event-rule-matches, session-consumed-size-ge, session-rotation-finishes, session-rotation-starts)"
                        ))
                    }
                }
            }
            ("--session" | "-s", Part::Session) => {
                let s = value(args, &mut i, opt, inline)?;
                crate::config::check_name("session", s)?;
                cond.session = Some(s.to_string());
            }
            ("--threshold-size" | "-t", Part::Session) if usage || cond.kind.as_deref() == Some("session-consumed-size-ge") => {
                cond.set_threshold(UsageThreshold::Bytes(parse_size(value(args, &mut i, opt, inline)?)?))?;
            }
            ("--name" | "-n", Part::Trigger) => name = Some(value(args, &mut i, opt, inline)?.to_string()),
            ("--owner-uid", Part::Trigger) => return Err("--owner-uid is not supported: a trigger belongs to the daemon's user".into()),
            ("--type" | "-t", Part::Condition) => {
                let t = value(args, &mut i, opt, inline)?;
                if !matches!(t, "user" | "user:tracepoint") {
                    return Err(format!("event rule type {t:?} is not supported: ust traces user space (--type user or user:tracepoint)"));
                }
                rule_type = Some(t.to_string());
            }
            ("--userspace" | "-u", Part::Condition) => rule_type = Some("user".into()),
            ("--name" | "-n", Part::Condition) => {
                let p = value(args, &mut i, opt, inline)?;
                crate::config::check_event_name(p)?;
                rule.pattern = p.to_string();
                pattern_set = true;
            }
            ("--exclude-name" | "-x", Part::Condition) => rule.exclusions.push(value(args, &mut i, opt, inline)?.to_string()),
            ("--log-level" | "-l", Part::Condition) => rule.level = parse_level_range(value(args, &mut i, opt, inline)?)?,
            ("--filter" | "-f", Part::Condition) => {
                let f = value(args, &mut i, opt, inline)?;
                crate::filter::parse(f).map_err(|e| format!("--filter {f:?}: {e}"))?;
                rule.filter = Some(f.to_string());
            }
            ("--capture", Part::Condition) => return Err("--capture is not supported: notifications carry no captured fields".into()),
            ("--action" | "-a", _) => {
                if part == Part::Trigger {
                    return Err("--action before --condition: give the condition first".into());
                }
                if let Some(p) = pending.take() {
                    push_options(&mut action_options, actions.len(), finish_options(p)?);
                }
                let kind = value(args, &mut i, opt, inline)?;
                let act = match kind {
                    "notify" => TriggerAction::Notify,
                    "snapshot-session" | "start-session" | "stop-session" | "rotate-session" => {
                        let s = args.get(i + 1).filter(|s| !s.starts_with('-')).ok_or("Missing session name.")?.clone();
                        i += 1;
                        crate::config::check_name("session", &s)?;
                        match kind {
                            "snapshot-session" => TriggerAction::SnapshotSession(s),
                            "start-session" => TriggerAction::StartSession(s),
                            "stop-session" => TriggerAction::StopSession(s),
                            _ => TriggerAction::RotateSession(s),
                        }
                    }
                    "incr-map-value" => return Err("action incr-map-value is not supported: ust has no map channels".into()),
                    other => return Err(format!("unknown action {other:?} (notify, start-session, stop-session, rotate-session, snapshot-session)")),
                };
                actions.push(act);
                pending = Some((RatePolicy::default(), PendingSnapshot::default()));
                part = Part::Action;
            }
            ("--rate-policy", Part::Action) => {
                let p = RatePolicy::parse(value(args, &mut i, opt, inline)?)?;
                if let Some((r, _)) = pending.as_mut() {
                    *r = p;
                }
            }
            ("--path" | "--url" | "--ctrl-url" | "--data-url" | "--max-size" | "-m" | "--name" | "-n", Part::Action)
                if matches!(actions.last(), Some(TriggerAction::SnapshotSession(_))) =>
            {
                let v = value(args, &mut i, opt, inline)?.to_string();
                let Some((_, snap)) = pending.as_mut() else { return Err(format!("unexpected argument {a:?} here")) };
                let slot = match opt {
                    "--path" => &mut snap.path,
                    "--url" => &mut snap.url,
                    "--ctrl-url" => &mut snap.ctrl_url,
                    "--data-url" => &mut snap.data_url,
                    "--name" | "-n" => &mut snap.name,
                    _ => {
                        snap.max_size = Some(parse_size(&v)?);
                        i += 1;
                        continue;
                    }
                };
                if slot.replace(v).is_some() {
                    return Err(format!("{opt} given twice for one snapshot-session action"));
                }
            }
            _ => return Err(format!("unexpected argument {a:?} here (see `ust add-trigger --help`)")),
        }
        i += 1;
    }
    if let Some(p) = pending.take() {
        push_options(&mut action_options, actions.len(), finish_options(p)?);
    }
    if part == Part::Trigger {
        return Err("missing --condition event-rule-matches".into());
    }
    let condition = cond.finish()?;
    if condition.is_none() && rule_type.is_none() {
        return Err("the event rule needs --type user (user space tracepoints)".into());
    }
    if actions.is_empty() {
        return Err("missing --action (notify, snapshot-session SESSION, ...)".into());
    }
    if condition.is_none() {
        if !pattern_set {
            rule.pattern = "*".into();
        }
        if !rule.exclusions.is_empty() && !rule.pattern.contains('*') {
            return Err("Event name pattern must contain wildcard characters to use exclusions".into());
        }
        crate::config::check_exclusions(std::slice::from_ref(&rule.pattern), &rule.exclusions)?;
    }
    if let Some(n) = &name {
        crate::config::check_name("trigger", n)?;
    }
    let mut spec = TriggerSpec { name, rule, condition, actions, action_options };
    spec.normalize();
    Ok(spec)
}

/// Records `o` as the options of the last of `n_actions` actions (those before it that
/// recorded none, an action that takes no option, get the defaults), so that options stay
/// at their action's index.
fn push_options(options: &mut Vec<ActionOptions>, n_actions: usize, o: ActionOptions) {
    options.resize(n_actions.saturating_sub(1), ActionOptions::default());
    options.push(o);
}

fn finish_options((rate_policy, snap): (RatePolicy, PendingSnapshot)) -> Result<ActionOptions, String> {
    Ok(ActionOptions { rate_policy, snapshot_output: snap.finish()? })
}

/// The arguments of a condition other than `event-rule-matches`, while parsed.
#[derive(Default)]
struct CondArgs {
    kind: Option<String>,
    session: Option<String>,
    channel: Option<String>,
    domain: bool,
    threshold: Option<UsageThreshold>,
}

impl CondArgs {
    fn set_threshold(&mut self, t: UsageThreshold) -> Result<(), String> {
        if self.threshold.replace(t).is_some() {
            return Err("only one of `-r/--threshold-ratio` and `-t/--threshold-size` may be given".into());
        }
        Ok(())
    }

    /// The condition (`None`: `event-rule-matches`), with what each kind requires.
    fn finish(self) -> Result<Option<SessionCondition>, String> {
        let Some(k) = self.kind else { return Ok(None) };
        let session = self.session.ok_or_else(|| format!("condition {k} needs --session SESSION"))?;
        Ok(Some(match k.as_str() {
            "session-consumed-size-ge" => match self.threshold {
                Some(UsageThreshold::Bytes(threshold)) => SessionCondition::ConsumedSizeGe { session, threshold },
                _ => return Err("condition session-consumed-size-ge needs --threshold-size SIZE".into()),
            },
            "session-rotation-starts" => SessionCondition::RotationStarts { session },
            "session-rotation-finishes" => SessionCondition::RotationFinishes { session },
            _ => {
                let channel = self.channel.ok_or_else(|| format!("condition {k} needs --channel CHANNEL"))?;
                crate::config::check_name("channel", &channel)?;
                if !self.domain {
                    return Err(format!("condition {k}: `-d/--domain` is required (--domain user)"));
                }
                let threshold = self.threshold.ok_or_else(|| format!("condition {k}: One of `-r/--threshold-ratio` or `-t/--threshold-size` is required"))?;
                if k == "channel-buffer-usage-ge" {
                    SessionCondition::BufferUsageGe { session, channel, threshold }
                } else {
                    SessionCondition::BufferUsageLe { session, channel, threshold }
                }
            }
        }))
    }
}

#[cfg(test)]
mod tests;
