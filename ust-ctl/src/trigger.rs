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
//! Grammar, from lttng-add-trigger(1) and lttng-event-rule(7) of LTTng 2.13 and later:
//! options take their value as the next argument or after `=`; `--type` is `user` or
//! `user:tracepoint` (user space is the only domain); `--log-level` is `LEVEL..` (this
//! level or more severe), `LEVEL` (exactly) or `..` (any); actions are `notify`,
//! `snapshot-session SESSION`, `start-session SESSION`, `stop-session SESSION` and
//! `rotate-session SESSION`, run in the order given. Options this daemon cannot honour
//! (`--capture`, `--rate-policy` other than `every:1`, `--owner-uid`, the
//! `channel-buffer-usage-ge/le` conditions, other rule types, a snapshot action's `--path`/`--url`) are refused by name, never ignored.

use serde::{Deserialize, Serialize};
use ust_core::Level;

use crate::config::{Enabler, LevelFilter};

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
    /// `incr-map-value --session S --channel C --type user --key TEMPLATE` (LTTng 2.16):
    /// increment the counter of key TEMPLATE (expanded for the event) in map channel C of
    /// session S, while S is started. With `event-rule-matches` the process counts the
    /// event in its own maps (no record, no notifier); with a session condition the daemon
    /// counts in the channel's shared counters (the template must then be literal).
    IncrMapValue {
        /// The session.
        session: String,
        /// The map channel.
        channel: String,
        /// The key template (`{event_name}`, `{provider_name}`, `{{`, `}}`).
        key: String,
    },
}

impl std::fmt::Display for TriggerAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TriggerAction::Notify => write!(f, "notify"),
            TriggerAction::SnapshotSession(s) => write!(f, "snapshot session `{s}`"),
            TriggerAction::StartSession(s) => write!(f, "start session `{s}`"),
            TriggerAction::StopSession(s) => write!(f, "stop session `{s}`"),
            TriggerAction::RotateSession(s) => write!(f, "rotate session `{s}`"),
            TriggerAction::IncrMapValue { session, channel, key } => write!(f, "increment map value: session `{session}`, channel `{channel}`, key `{key}`"),
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
            | SessionCondition::RotationFinishes { session } => session,
        }
    }

    /// LTTng's name of the condition type, as `lttng list-triggers` prints it
    /// (`lttng_condition_type_str`).
    pub fn lttng_name(&self) -> &'static str {
        match self {
            SessionCondition::ConsumedSizeGe { .. } => "session consumed size",
            SessionCondition::RotationStarts { .. } => "session rotation ongoing",
            SessionCondition::RotationFinishes { .. } => "session rotation completed",
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

/// The options of one `incr-map-value` action, from `args[*i + 1]` on (`--session/-s`,
/// `--channel/-c`, `--type/-t user`, `--key/-k`, in any order, up to the next `--action`
/// or the end); leaves `*i` at the last one read.
fn parse_incr_map_value(args: &[String], i: &mut usize) -> Result<TriggerAction, String> {
    let (mut session, mut channel, mut key, mut ty) = (None, None, None, None);
    while let Some(a) = args.get(*i + 1) {
        let (opt, inline) = match a.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o, Some(v)),
            _ => (a.as_str(), None),
        };
        if !matches!(opt, "--session" | "-s" | "--channel" | "-c" | "--type" | "-t" | "--key" | "-k") {
            break;
        }
        *i += 1;
        let v = value(args, i, opt, inline)?.to_string();
        match opt {
            "--session" | "-s" => session = Some(v),
            "--channel" | "-c" => channel = Some(v),
            "--type" | "-t" => ty = Some(v),
            _ => key = Some(v),
        }
    }
    match ty.as_deref() {
        Some("user") => {}
        Some("kernel") => return Err("incr-map-value --type kernel is not supported: ust has user space map channels only".into()),
        Some(t) => return Err(format!("incr-map-value --type {t:?}: kernel or user")),
        None => return Err("incr-map-value needs --type user".into()),
    }
    let session = session.ok_or("incr-map-value needs --session SESSION")?;
    crate::config::check_name("session", &session)?;
    let channel = channel.ok_or("incr-map-value needs --channel CHANNEL")?;
    crate::config::check_name("map channel", &channel)?;
    let key = key.ok_or("incr-map-value needs --key TEMPLATE")?;
    crate::maps::parse_key_template(&key)?;
    Ok(TriggerAction::IncrMapValue { session, channel, key })
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
    let mut cond_kind: Option<String> = None;
    let mut cond_session: Option<String> = None;
    let mut threshold: Option<u64> = None;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let (opt, inline) = match a.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o, Some(v)),
            _ => (a, None),
        };
        match (opt, &part) {
            ("--condition" | "-c", _) => {
                if part != Part::Trigger {
                    return Err("only one --condition may be given, before the actions".into());
                }
                let c = value(args, &mut i, opt, inline)?;
                match c {
                    "event-rule-matches" => part = Part::Condition,
                    "session-consumed-size-ge" | "session-rotation-starts" | "session-rotation-finishes" => {
                        cond_kind = Some(c.to_string());
                        part = Part::Session;
                    }
                    "channel-buffer-usage-ge" | "channel-buffer-usage-le" => {
                        return Err(format!("condition {c:?} is not supported yet: the daemon does not sample buffer usage"));
                    }
                    _ => {
                        return Err(format!(
                            "unknown condition {c:?} (event-rule-matches, session-consumed-size-ge, session-rotation-starts, session-rotation-finishes)"
                        ))
                    }
                }
            }
            ("--session" | "-s", Part::Session) => {
                let s = value(args, &mut i, opt, inline)?;
                crate::config::check_name("session", s)?;
                cond_session = Some(s.to_string());
            }
            ("--threshold-size" | "-t", Part::Session) if cond_kind.as_deref() == Some("session-consumed-size-ge") => {
                threshold = Some(parse_size(value(args, &mut i, opt, inline)?)?);
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
                let kind = value(args, &mut i, opt, inline)?;
                let act = match kind {
                    "notify" => TriggerAction::Notify,
                    "snapshot-session" | "start-session" | "stop-session" | "rotate-session" => {
                        let s = value(args, &mut i, kind, None)?.to_string();
                        crate::config::check_name("session", &s)?;
                        match kind {
                            "snapshot-session" => TriggerAction::SnapshotSession(s),
                            "start-session" => TriggerAction::StartSession(s),
                            "stop-session" => TriggerAction::StopSession(s),
                            _ => TriggerAction::RotateSession(s),
                        }
                    }
                    "incr-map-value" => {
                        let act = parse_incr_map_value(args, &mut i)?;
                        actions.push(act);
                        part = Part::Action;
                        i += 1;
                        continue;
                    }
                    other => {
                        return Err(format!("unknown action {other:?} (notify, snapshot-session, start-session, stop-session, rotate-session, incr-map-value)"))
                    }
                };
                actions.push(act);
                part = Part::Action;
            }
            ("--rate-policy", Part::Action) if matches!(actions.last(), Some(TriggerAction::IncrMapValue { .. })) => {
                return Err("--rate-policy does not apply to incr-map-value (its rate policy is every:1)".into());
            }
            ("--rate-policy", Part::Action) => {
                let p = value(args, &mut i, opt, inline)?;
                if p != "every:1" {
                    return Err(format!("--rate-policy {p:?} is not supported: ust fires every time (every:1)"));
                }
            }
            ("--path" | "--url" | "--ctrl-url" | "--data-url" | "--max-size" | "--name", Part::Action) => {
                return Err(format!("{opt} of a snapshot-session action is not supported: the snapshot goes to the session's output"))
            }
            _ => return Err(format!("unexpected argument {a:?} here (see `ust add-trigger --help`)")),
        }
        i += 1;
    }
    if part == Part::Trigger {
        return Err("missing --condition event-rule-matches".into());
    }
    if let Some(k) = cond_kind {
        let session = cond_session.ok_or_else(|| format!("condition {k} needs --session SESSION"))?;
        let condition = match k.as_str() {
            "session-consumed-size-ge" => {
                SessionCondition::ConsumedSizeGe { session, threshold: threshold.ok_or("condition session-consumed-size-ge needs --threshold-size SIZE")? }
            }
            "session-rotation-starts" => SessionCondition::RotationStarts { session },
            _ => SessionCondition::RotationFinishes { session },
        };
        if actions.is_empty() {
            return Err("missing --action (notify, snapshot-session SESSION, ...)".into());
        }
        for a in &actions {
            if let TriggerAction::IncrMapValue { key, .. } = a {
                if !crate::maps::is_literal(&crate::maps::parse_key_template(key)?) {
                    return Err(format!(
                        "--key {key:?}: with condition {k}, the key must be literal text ({{event_name}} and {{provider_name}} need event-rule-matches)"
                    ));
                }
            }
        }
        if let Some(n) = &name {
            crate::config::check_name("trigger", n)?;
        }
        return Ok(TriggerSpec { name, rule, condition: Some(condition), actions });
    }
    if rule_type.is_none() {
        return Err("the event rule needs --type user (user space tracepoints)".into());
    }
    if actions.is_empty() {
        return Err("missing --action (notify, snapshot-session SESSION, ...)".into());
    }
    if !pattern_set {
        rule.pattern = "*".into();
    }
    crate::config::check_exclusions(std::slice::from_ref(&rule.pattern), &rule.exclusions)?;
    if let Some(n) = &name {
        crate::config::check_name("trigger", n)?;
    }
    Ok(TriggerSpec { name, rule, condition: None, actions })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &[&str]) -> Result<TriggerSpec, String> {
        parse_add_trigger(&s.iter().map(|x| x.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn names_before_and_after_the_condition() {
        let t = p(&[
            "--name",
            "t1",
            "--condition",
            "event-rule-matches",
            "--type=user",
            "--name=myapp:error",
            "--filter",
            "code > 3",
            "--action",
            "snapshot-session",
            "fr",
            "--action=notify",
        ])
        .unwrap();
        assert_eq!(t.name.as_deref(), Some("t1"));
        assert_eq!(t.rule.pattern, "myapp:error");
        assert_eq!(t.rule.filter.as_deref(), Some("code > 3"));
        assert_eq!(t.actions, vec![TriggerAction::SnapshotSession("fr".into()), TriggerAction::Notify]);
    }

    #[test]
    fn levels_and_defaults() {
        let t = p(&["--condition", "event-rule-matches", "--type", "user:tracepoint", "--log-level", "TRACE_WARNING..", "--action", "notify"]).unwrap();
        assert_eq!(t.name, None);
        assert_eq!(t.rule.pattern, "*");
        assert_eq!(t.rule.level, LevelFilter::UpTo(Level::Warning));
        let t = p(&["--condition", "event-rule-matches", "--type", "user", "--log-level=INFO", "--action", "notify"]).unwrap();
        assert_eq!(t.rule.level, LevelFilter::Only(Level::Info));
        let t = p(&["--condition", "event-rule-matches", "--type", "user", "--log-level=..", "--action", "notify"]).unwrap();
        assert_eq!(t.rule.level, LevelFilter::Any);
    }

    #[test]
    fn session_conditions() {
        let t = p(&["--name", "big", "--condition=session-consumed-size-ge", "-s", "s1", "--threshold-size=64k", "--action", "stop-session", "s1"]).unwrap();
        assert_eq!(t.name.as_deref(), Some("big"));
        assert_eq!(t.condition, Some(SessionCondition::ConsumedSizeGe { session: "s1".into(), threshold: 65536 }));
        assert_eq!(t.actions, vec![TriggerAction::StopSession("s1".into())]);
        let t = p(&["--condition", "session-rotation-finishes", "--session", "s1", "--action", "notify"]).unwrap();
        assert_eq!(t.condition, Some(SessionCondition::RotationFinishes { session: "s1".into() }));
        let t = p(&["--condition", "session-rotation-starts", "--session=s2", "--action", "notify"]).unwrap();
        assert_eq!(t.condition, Some(SessionCondition::RotationStarts { session: "s2".into() }));
        assert_eq!(parse_size("2M"), Ok(2 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
    }

    #[test]
    fn incr_map_value_actions() {
        let t = p(&[
            "--condition=event-rule-matches",
            "--type=user",
            "--name=*",
            "--action=incr-map-value",
            "--session=my-session",
            "--type=user",
            "-c",
            "my-counters",
            "--key={event_name}_count",
            "--action",
            "notify",
        ])
        .unwrap();
        assert_eq!(
            t.actions,
            vec![
                TriggerAction::IncrMapValue { session: "my-session".into(), channel: "my-counters".into(), key: "{event_name}_count".into() },
                TriggerAction::Notify
            ]
        );
        let t =
            p(&["--condition", "session-rotation-finishes", "-s", "s", "--action", "incr-map-value", "-s", "s", "-t", "user", "-c", "m", "-k", "k1"]).unwrap();
        assert_eq!(t.actions.len(), 1);
        let e =
            p(&["--condition", "session-rotation-finishes", "-s", "s", "--action", "incr-map-value", "-s", "s", "-t", "user", "-c", "m", "-k", "{event_name}"])
                .unwrap_err();
        assert!(e.contains("literal"), "{e}");
        for (args, want) in [
            (&["-t", "kernel", "-s", "s", "-c", "m", "-k", "k"][..], "kernel"),
            (&["-s", "s", "-c", "m", "-k", "k"][..], "--type user"),
            (&["-t", "user", "-c", "m", "-k", "k"][..], "--session"),
            (&["-t", "user", "-s", "s", "-k", "k"][..], "--channel"),
            (&["-t", "user", "-s", "s", "-c", "m"][..], "--key"),
            (&["-t", "user", "-s", "s", "-c", "m", "-k", "{x}"][..], "placeholder"),
            (&["-t", "user", "-s", "s", "-c", "m", "-k", "k", "--rate-policy", "every:1"][..], "rate-policy"),
        ] {
            let mut v = vec!["--condition", "event-rule-matches", "--type", "user", "--action", "incr-map-value"];
            v.extend_from_slice(args);
            let e = p(&v).unwrap_err();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        let cases: &[(&[&str], &str)] = &[
            (&["--action", "notify"], "before --condition"),
            (&["--condition", "channel-buffer-usage-ge", "--action", "notify"], "not supported"),
            (&["--condition", "session-rotation-starts", "--action", "notify"], "--session"),
            (&["--condition", "session-consumed-size-ge", "--session", "s", "--action", "notify"], "--threshold-size"),
            (&["--condition", "session-consumed-size-ge", "--session", "s", "--threshold-size", "3x", "--action", "notify"], "not a size"),
            (&["--condition", "session-rotation-finishes", "--session", "s", "--threshold-size", "3", "--action", "notify"], "unexpected"),
            (&["--condition", "event-rule-matches", "--type", "kernel", "--action", "notify"], "user space"),
            (&["--condition", "event-rule-matches", "--action", "notify"], "--type user"),
            (&["--condition", "event-rule-matches", "--type", "user"], "missing --action"),
            (&["--condition", "event-rule-matches", "--type", "user", "--filter", "a *", "--action", "notify"], "--filter"),
            (&["--condition", "event-rule-matches", "--type", "user", "--action", "dance"], "unknown action"),
            (&["--condition", "event-rule-matches", "--type", "user", "--action", "notify", "--rate-policy", "once-after:3"], "rate-policy"),
            (&["--condition", "event-rule-matches", "--type", "user", "--action", "snapshot-session"], "needs a value"),
            (&["--condition", "event-rule-matches", "--type", "user", "--name", "a*", "--exclude-name", "a*", "--action", "notify"], "exclu"),
            (&["--condition", "event-rule-matches", "--type", "user", "--capture", "x", "--action", "notify"], "capture"),
        ];
        for (args, want) in cases {
            let e = p(args).unwrap_err();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }
}
