//! Triggers in session configuration files, as LTTng 2.16 saves them (`lttng save` writes
//! every trigger of the daemon into each file, `lttng load` registers them once the
//! sessions exist; lttng-save(1), lttng-load(1)). The elements are `session.xsd` 2.16's,
//! written by lttng-tools' trigger MI serialization (`lttng_triggers_mi_serialize`, in
//! `src/common/trigger.cpp` and the condition and action files beside it): one
//! `<triggers>` element after the last `<session>`, triggers sorted by name.
//!
//! ```text
//! <triggers><trigger><name>T</name>
//!   <condition>  <condition_event_rule_matches><event_rule><event_rule_user_tracepoint>
//!                  <name_pattern>P</name_pattern> [<filter_expression>F</filter_expression>]
//!                  [<log_level_rule><log_level_rule_exactly | _at_least_as_severe_as>
//!                     <level>N</level></…></log_level_rule>]
//!                  [<name_pattern_exclusions><name_pattern_exclusion>X</…>…</…>]
//!                </event_rule_user_tracepoint></event_rule><capture_descriptors/></…>
//!              | <condition_session_consumed_size><session_name/><threshold_bytes/></…>
//!              | <condition_session_rotation_ongoing | _completed><session_name/></…>
//!              | <condition_buffer_usage_high | _low><session_name/><channel_name/>
//!                  <domain>UST</domain> <threshold_bytes/> | <threshold_ratio/></…>
//!   </condition>
//!   <action><action_list><action>
//!       <action_notify | action_start_session | action_stop_session | action_rotate_session
//!        | action_snapshot_session> [<session_name>S</session_name>]
//!         [<output><name/><ctrl_url/><data_url/><max_size/></output>]   (snapshot only)
//!         <rate_policy><rate_policy_every_n><interval>N</interval></…>
//!                    | <rate_policy_once_after_n><threshold>N</threshold></…></rate_policy>
//!   </…></action>…</action_list></action>
//! </trigger>…</triggers>
//! ```
//!
//! On load, a trigger ust cannot honour (a kernel, JUL, log4j or Python event rule,
//! capture descriptors, a domain other than `UST`, an `incr-map-value` action) is skipped
//! with the reason, never half loaded.

use ust_core::Level;

use super::{esc, parse_tree, Node, SavedSession};
use crate::config::{Enabler, LevelFilter};
use crate::trigger::options::{ActionOptions, RatePolicy, SnapshotOutput};
use crate::trigger::{Ratio, SessionCondition, TriggerAction, TriggerSpec, UsageThreshold};

/// Lines with their nesting depth (one tab per level, from `<trigger>`'s parent at 1).
struct Out {
    s: String,
}

impl Out {
    fn open(&mut self, d: usize, name: &str) {
        self.s.push_str(&format!("{}<{name}>\n", "\t".repeat(d)));
    }
    fn close(&mut self, d: usize, name: &str) {
        self.s.push_str(&format!("{}</{name}>\n", "\t".repeat(d)));
    }
    fn leaf(&mut self, d: usize, name: &str, text: &str) {
        self.s.push_str(&format!("{}<{name}>{}</{name}>\n", "\t".repeat(d), esc(text)));
    }
}

fn rule_xml(o: &mut Out, d: usize, r: &Enabler) {
    o.open(d, "event_rule");
    o.open(d + 1, "event_rule_user_tracepoint");
    o.leaf(d + 2, "name_pattern", &r.pattern);
    if let Some(f) = &r.filter {
        o.leaf(d + 2, "filter_expression", f);
    }
    let level = match r.level {
        LevelFilter::Any => None,
        LevelFilter::UpTo(l) => Some(("log_level_rule_at_least_as_severe_as", l)),
        LevelFilter::Only(l) => Some(("log_level_rule_exactly", l)),
    };
    if let Some((kind, l)) = level {
        o.open(d + 2, "log_level_rule");
        o.open(d + 3, kind);
        o.leaf(d + 4, "level", &l.number().to_string());
        o.close(d + 3, kind);
        o.close(d + 2, "log_level_rule");
    }
    if !r.exclusions.is_empty() {
        o.open(d + 2, "name_pattern_exclusions");
        for x in &r.exclusions {
            o.leaf(d + 3, "name_pattern_exclusion", x);
        }
        o.close(d + 2, "name_pattern_exclusions");
    }
    o.close(d + 1, "event_rule_user_tracepoint");
    o.close(d, "event_rule");
}

fn condition_xml(o: &mut Out, d: usize, t: &TriggerSpec) {
    o.open(d, "condition");
    match &t.condition {
        None => {
            o.open(d + 1, "condition_event_rule_matches");
            rule_xml(o, d + 2, &t.rule);
            o.s.push_str(&format!("{}<capture_descriptors/>\n", "\t".repeat(d + 2)));
            o.close(d + 1, "condition_event_rule_matches");
        }
        Some(SessionCondition::ConsumedSizeGe { session, threshold }) => {
            o.open(d + 1, "condition_session_consumed_size");
            o.leaf(d + 2, "session_name", session);
            o.leaf(d + 2, "threshold_bytes", &threshold.to_string());
            o.close(d + 1, "condition_session_consumed_size");
        }
        Some(c @ (SessionCondition::RotationStarts { session } | SessionCondition::RotationFinishes { session })) => {
            let kind = if matches!(c, SessionCondition::RotationStarts { .. }) {
                "condition_session_rotation_ongoing"
            } else {
                "condition_session_rotation_completed"
            };
            o.open(d + 1, kind);
            o.leaf(d + 2, "session_name", session);
            o.close(d + 1, kind);
        }
        Some(c @ (SessionCondition::BufferUsageGe { session, channel, threshold } | SessionCondition::BufferUsageLe { session, channel, threshold })) => {
            let kind = if matches!(c, SessionCondition::BufferUsageGe { .. }) { "condition_buffer_usage_high" } else { "condition_buffer_usage_low" };
            o.open(d + 1, kind);
            o.leaf(d + 2, "session_name", session);
            o.leaf(d + 2, "channel_name", channel);
            o.leaf(d + 2, "domain", "UST");
            match threshold {
                UsageThreshold::Bytes(b) => o.leaf(d + 2, "threshold_bytes", &b.to_string()),
                UsageThreshold::Ratio(Ratio(r)) => o.leaf(d + 2, "threshold_ratio", &r.to_string()),
            }
            o.close(d + 1, kind);
        }
    }
    o.close(d, "condition");
}

fn action_xml(o: &mut Out, d: usize, a: &TriggerAction, opts: &ActionOptions) {
    let (kind, session) = match a {
        TriggerAction::Notify => ("action_notify", None),
        TriggerAction::StartSession(s) => ("action_start_session", Some(s)),
        TriggerAction::StopSession(s) => ("action_stop_session", Some(s)),
        TriggerAction::RotateSession(s) => ("action_rotate_session", Some(s)),
        TriggerAction::SnapshotSession(s) => ("action_snapshot_session", Some(s)),
    };
    o.open(d, "action");
    o.open(d + 1, kind);
    if let Some(s) = session {
        o.leaf(d + 2, "session_name", s);
    }
    if let Some(out) = &opts.snapshot_output {
        o.open(d + 2, "output");
        if let Some(n) = &out.name {
            o.leaf(d + 3, "name", n);
        }
        o.leaf(d + 3, "ctrl_url", &out.ctrl_url);
        if let Some(u) = &out.data_url {
            o.leaf(d + 3, "data_url", u);
        }
        if let Some(m) = out.max_size {
            o.leaf(d + 3, "max_size", &m.to_string());
        }
        o.close(d + 2, "output");
    }
    o.open(d + 2, "rate_policy");
    let (kind_p, field, n) = match opts.rate_policy {
        RatePolicy::EveryN(n) => ("rate_policy_every_n", "interval", n),
        RatePolicy::OnceAfterN(n) => ("rate_policy_once_after_n", "threshold", n),
    };
    o.open(d + 3, kind_p);
    o.leaf(d + 4, field, &n.to_string());
    o.close(d + 3, kind_p);
    o.close(d + 2, "rate_policy");
    o.close(d + 1, kind);
    o.close(d, "action");
}

/// The `<triggers>` element holding `triggers` (sorted by name, as LTTng), one tab deep.
pub fn triggers_xml(triggers: &[TriggerSpec]) -> String {
    let mut sorted: Vec<&TriggerSpec> = triggers.iter().filter(|t| t.name.is_some()).collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut o = Out { s: String::new() };
    o.open(1, "triggers");
    for t in sorted {
        o.open(2, "trigger");
        o.leaf(3, "name", t.name.as_deref().unwrap_or_default());
        condition_xml(&mut o, 3, t);
        // `lttng add-trigger` makes every trigger's action a list.
        o.open(3, "action");
        o.open(4, "action_list");
        for (i, a) in t.actions.iter().enumerate() {
            action_xml(&mut o, 5, a, &t.options(i));
        }
        o.close(4, "action_list");
        o.close(3, "action");
        o.close(2, "trigger");
    }
    o.close(1, "triggers");
    o.s
}

/// A session configuration file holding `sessions` and, unless `None` (`--no-triggers`),
/// `triggers`. No trigger, no `<triggers>` element (LTTng 2.16 writes an empty one; without
/// it the file also validates against 2.13's schema, so `lttng load` 2.13 still reads it).
pub fn to_xml_with_triggers(sessions: &[SavedSession], triggers: Option<&[TriggerSpec]>) -> String {
    let mut o = super::to_xml(sessions);
    if let Some(t) = triggers.filter(|t| !t.is_empty()) {
        let end = o.rfind("</sessions>").unwrap_or(o.len());
        o.insert_str(end, &triggers_xml(t));
    }
    o
}

/// The triggers of a session configuration file.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LoadedTriggers {
    /// Those ust can register, in file order.
    pub triggers: Vec<TriggerSpec>,
    /// Those skipped: name and why.
    pub skipped: Vec<(String, String)>,
}

fn text<'a>(n: &'a Node, name: &str, what: &str) -> Result<&'a str, String> {
    n.text_of(name).ok_or_else(|| format!("{what} without <{name}>"))
}

fn num(n: &Node, name: &str, what: &str) -> Result<u64, String> {
    n.num::<u64>(name)?.ok_or_else(|| format!("{what} without <{name}>"))
}

/// The only element child of `n` (LTTng's "sub type" elements).
fn sub(n: &Node) -> Result<&Node, String> {
    n.children.first().ok_or_else(|| format!("<{}> is empty", n.name))
}

/// `Err(Ok(reason))`: a trigger ust cannot honour; `Err(Err(msg))`: a malformed file.
type Parsed<T> = Result<T, Result<String, String>>;

fn skip<T>(why: impl Into<String>) -> Parsed<T> {
    Err(Ok(why.into()))
}

fn bad<T>(e: String) -> Result<T, String> {
    Err(e)
}

fn rule_from(er: &Node) -> Parsed<Enabler> {
    let r = sub(er).map_err(Err)?;
    if r.name != "event_rule_user_tracepoint" {
        return skip(format!("event rule <{}>: ust traces user space tracepoints", r.name));
    }
    let pattern = text(r, "name_pattern", "<event_rule_user_tracepoint>").map_err(Err)?.to_string();
    crate::config::check_event_name(&pattern).map_err(Err)?;
    let mut e = Enabler::new(&pattern, LevelFilter::Any);
    e.filter = r.text_of("filter_expression").map(str::to_string);
    if let Some(f) = &e.filter {
        crate::filter::parse(f).map_err(|x| Err(format!("filter {f:?}: {x}")))?;
    }
    if let Some(l) = r.child("log_level_rule") {
        let k = sub(l).map_err(Err)?;
        let n: i64 = k.num("level").map_err(Err)?.ok_or_else(|| Err("<log_level_rule> without <level>".to_string()))?;
        let level = u8::try_from(n).ok().and_then(Level::from_number).ok_or_else(|| Err(format!("<level> {n} is not a log level (0-14)")))?;
        e.level = match k.name.as_str() {
            "log_level_rule_exactly" => LevelFilter::Only(level),
            "log_level_rule_at_least_as_severe_as" => LevelFilter::UpTo(level),
            other => return Err(Err(format!("unknown log level rule <{other}>"))),
        };
    }
    e.exclusions = r.child("name_pattern_exclusions").map(|x| x.all("name_pattern_exclusion").map(|x| x.text.trim().to_string()).collect()).unwrap_or_default();
    Ok(e)
}

fn condition_from(c: &Node) -> Parsed<(Enabler, Option<SessionCondition>)> {
    let k = sub(c).map_err(Err)?;
    let what = format!("<{}>", k.name);
    let session = || text(k, "session_name", &what).map(str::to_string).map_err(Err);
    let any = || Enabler::new("*", LevelFilter::Any);
    let cond = match k.name.as_str() {
        "condition_event_rule_matches" => {
            if k.child("capture_descriptors").is_some_and(|x| !x.children.is_empty()) {
                return skip("capture descriptors: ust's notifications carry no captured fields");
            }
            let er = k.child("event_rule").ok_or_else(|| Err(format!("{what} without <event_rule>")))?;
            return Ok((rule_from(er)?, None));
        }
        "condition_session_consumed_size" => {
            SessionCondition::ConsumedSizeGe { session: session()?, threshold: num(k, "threshold_bytes", &what).map_err(Err)? }
        }
        "condition_session_rotation_ongoing" => SessionCondition::RotationStarts { session: session()? },
        "condition_session_rotation_completed" => SessionCondition::RotationFinishes { session: session()? },
        "condition_buffer_usage_high" | "condition_buffer_usage_low" => {
            let domain = text(k, "domain", &what).map_err(Err)?;
            if domain != "UST" {
                return skip(format!("buffer usage of a {domain} channel: ust's channels are user space"));
            }
            let channel = text(k, "channel_name", &what).map_err(Err)?.to_string();
            let threshold = match (k.num::<u64>("threshold_bytes").map_err(Err)?, k.num::<f64>("threshold_ratio").map_err(Err)?) {
                (Some(b), None) => UsageThreshold::Bytes(b),
                (None, Some(r)) => UsageThreshold::Ratio(Ratio::new(r).ok_or_else(|| Err(format!("<threshold_ratio> {r} is not from 0 to 1")))?),
                _ => return Err(Err(format!("{what} needs one of <threshold_bytes> and <threshold_ratio>"))),
            };
            let session = session()?;
            if k.name == "condition_buffer_usage_high" {
                SessionCondition::BufferUsageGe { session, channel, threshold }
            } else {
                SessionCondition::BufferUsageLe { session, channel, threshold }
            }
        }
        other => return Err(Err(format!("unknown condition <{other}>"))),
    };
    Ok((any(), Some(cond)))
}

fn rate_from(a: &Node) -> Result<RatePolicy, String> {
    let Some(r) = a.child("rate_policy") else { return Ok(RatePolicy::default()) };
    let k = sub(r)?;
    let p = match k.name.as_str() {
        "rate_policy_every_n" => RatePolicy::EveryN(num(k, "interval", "<rate_policy_every_n>")?),
        "rate_policy_once_after_n" => RatePolicy::OnceAfterN(num(k, "threshold", "<rate_policy_once_after_n>")?),
        other => return bad(format!("unknown rate policy <{other}>")),
    };
    if matches!(p, RatePolicy::EveryN(0) | RatePolicy::OnceAfterN(0)) {
        return bad("a rate policy's count must be > 0".into());
    }
    Ok(p)
}

fn action_from(a: &Node, out: &mut Vec<(TriggerAction, ActionOptions)>) -> Parsed<()> {
    let k = sub(a).map_err(Err)?;
    if k.name == "action_list" {
        for x in k.all("action") {
            action_from(x, out)?;
        }
        return Ok(());
    }
    let what = format!("<{}>", k.name);
    let session = || -> Result<String, Result<String, String>> {
        let s = text(k, "session_name", &what).map_err(Err)?;
        crate::config::check_name("session", s).map_err(Err)?;
        Ok(s.to_string())
    };
    let mut opts = ActionOptions { rate_policy: rate_from(k).map_err(Err)?, snapshot_output: None };
    let act = match k.name.as_str() {
        "action_notify" => TriggerAction::Notify,
        "action_start_session" => TriggerAction::StartSession(session()?),
        "action_stop_session" => TriggerAction::StopSession(session()?),
        "action_rotate_session" => TriggerAction::RotateSession(session()?),
        "action_snapshot_session" => {
            if let Some(o) = k.child("output") {
                let ctrl = text(o, "ctrl_url", "<output>").map_err(Err)?;
                let ctrl = ctrl.strip_prefix("file://").unwrap_or(ctrl).to_string();
                let s = SnapshotOutput {
                    name: o.text_of("name").filter(|n| !n.is_empty()).map(str::to_string),
                    max_size: o.num::<u64>("max_size").map_err(Err)?.filter(|m| *m != 0 && *m != u64::MAX),
                    ctrl_url: ctrl,
                    data_url: o.text_of("data_url").filter(|u| !u.is_empty()).map(str::to_string),
                };
                s.check().map_err(|e| Err(format!("snapshot output: {e}")))?;
                opts.snapshot_output = Some(s);
            }
            TriggerAction::SnapshotSession(session()?)
        }
        "action_increment_map_value" => return skip("action incr-map-value: not supported by this ust"),
        other => return Err(Err(format!("unknown action <{other}>"))),
    };
    out.push((act, opts));
    Ok(())
}

fn trigger_from(t: &Node) -> Parsed<TriggerSpec> {
    let name = text(t, "name", "<trigger>").map_err(Err)?.to_string();
    crate::config::check_name("trigger", &name).map_err(Err)?;
    let c = t.child("condition").ok_or_else(|| Err(format!("trigger {name}: no <condition>")))?;
    let (rule, condition) = condition_from(c)?;
    let a = t.child("action").ok_or_else(|| Err(format!("trigger {name}: no <action>")))?;
    let mut acts = Vec::new();
    action_from(a, &mut acts)?;
    if acts.is_empty() {
        return Err(Err(format!("trigger {name}: no action")));
    }
    let (actions, action_options) = acts.into_iter().unzip();
    let mut spec = TriggerSpec { name: Some(name), rule, condition, actions, action_options };
    spec.normalize();
    Ok(spec)
}

/// Reads the `<triggers>` of a session configuration file (none: an empty list).
///
/// # Errors
/// Malformed XML, or a trigger element that is malformed (a missing name, condition or
/// action, a bad number, filter or name), named in the message.
pub fn triggers_from_xml(xml: &str) -> Result<LoadedTriggers, String> {
    let root = parse_tree(xml)?;
    let mut out = LoadedTriggers::default();
    for ts in root.all("triggers") {
        for t in ts.all("trigger") {
            let name = t.text_of("name").unwrap_or("?").to_string();
            match trigger_from(t) {
                Ok(s) => out.triggers.push(s),
                Err(Ok(why)) => out.skipped.push((name, why)),
                Err(Err(e)) => return Err(format!("trigger {name}: {e}")),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
