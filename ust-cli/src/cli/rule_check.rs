//! Warnings about `enable-event` rules that can record nothing: a rule whose level filter
//! excludes every registered tracepoint it names (`ust enable-event 'app:*' --loglevel
//! INFO` when `app`'s tracepoints have no `level =`, so are `TRACE_DEBUG_LINE`, as in
//! LTTng-UST), and, at `enable-event`, a rule that names no registered tracepoint yet (not
//! an error: programs register when they start).
//!
//! The registered tracepoints are those of the daemon's live processes (`ust list --apps`)
//! and, at `stop` and `destroy`, those of the session's traced processes (gone ones too),
//! each with its level. A rule is judged by name (its glob and exclusions,
//! [`Enabler::names`]) and level only; its filter expression is not evaluated.

use std::collections::BTreeSet;

use ust_core::Level;
use ust_ctl::config::Enabler;
use ust_ctl::protocol::{AppInfo, DestroyReport, SessionDetail};

/// The registered tracepoints: `(provider:name, level)`, each once.
pub type Registered = BTreeSet<(String, Level)>;

/// What the registered tracepoints say about one rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The rule is disabled, or records at least one registered tracepoint.
    Records,
    /// No registered tracepoint has a name the rule matches (yet).
    NoneRegistered,
    /// Every registered tracepoint the rule names has a level it excludes: these.
    LevelExcludesAll(Vec<(String, Level)>),
}

/// Judges `rule` against `registered`.
pub fn verdict(rule: &Enabler, registered: &Registered) -> Verdict {
    if !rule.enabled {
        return Verdict::Records;
    }
    let named: Vec<&(String, Level)> = registered.iter().filter(|(n, _)| rule.names(n)).collect();
    if named.is_empty() {
        return Verdict::NoneRegistered;
    }
    if named.iter().any(|(_, l)| rule.level.accepts(*l)) {
        return Verdict::Records;
    }
    Verdict::LevelExcludesAll(named.into_iter().cloned().collect())
}

/// The tracepoints of the daemon's registered processes.
pub fn of_apps(apps: &[AppInfo]) -> Registered {
    apps.iter().flat_map(|a| &a.events).filter_map(|e| Some((e.name.clone(), Level::from_number(e.level)?))).collect()
}

/// The tracepoints the traced processes of a stopped or destroyed session registered.
pub fn of_report(r: &DestroyReport) -> Registered {
    r.traces.iter().flat_map(|t| &t.events).map(|e| (e.full_name(), e.level)).collect()
}

/// The enabled rules of every channel of a session, each once.
pub fn rules_of(d: &SessionDetail) -> Vec<Enabler> {
    let mut rules: Vec<Enabler> = Vec::new();
    for e in d.channels.iter().flat_map(|c| &c.enablers) {
        if !rules.contains(e) {
            rules.push(e.clone());
        }
    }
    rules
}

/// The warning for a rule whose level excludes every tracepoint it names, or `None`.
pub fn level_warning(rule: &Enabler, registered: &Registered) -> Option<String> {
    let Verdict::LevelExcludesAll(named) = verdict(rule, registered) else { return None };
    const SHOWN: usize = 4;
    let mut list: Vec<String> = named.iter().take(SHOWN).map(|(n, l)| format!("{n} is {l}")).collect();
    if named.len() > SHOWN {
        list.push(format!("and {} more", named.len() - SHOWN));
    }
    let untagged = named.iter().any(|(_, l)| *l == Level::default());
    let what = match named.len() {
        1 => "the one registered tracepoint it names".to_string(),
        n => format!("all {n} registered tracepoints it names"),
    };
    Some(format!(
        "warning: rule {} ({}) excludes {what}: {}{}",
        rule.pattern,
        rule.level.describe(),
        list.join(", "),
        if untagged {
            "; a tracepoint without `level =` is TRACE_DEBUG_LINE, as in LTTng: enable it without --loglevel, or with --loglevel debug_line"
        } else {
            ""
        }
    ))
}

/// Prints, on stderr, the level warning of each rule of `rules` that has one.
pub fn warn_levels<'a>(rules: impl IntoIterator<Item = &'a Enabler>, registered: &Registered) {
    for r in rules {
        if let Some(w) = level_warning(r, registered) {
            eprintln!("ust: {w}");
        }
    }
}

/// Prints, on stderr, what `ust enable-event` should say about its new `rules`: the level
/// warnings, and which rules name no registered tracepoint yet.
pub fn warn_new_rules(rules: &[Enabler], registered: &Registered) {
    warn_levels(rules, registered);
    let unmatched: Vec<&str> = rules.iter().filter(|r| verdict(r, registered) == Verdict::NoneRegistered).map(|r| r.pattern.as_str()).collect();
    if !unmatched.is_empty() {
        eprintln!(
            "ust: no registered tracepoint matches {} yet (the rule applies to programs that register later; `ust list --apps` shows the registered ones)",
            unmatched.join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ust_ctl::config::LevelFilter;

    fn reg(list: &[(&str, Level)]) -> Registered {
        list.iter().map(|(n, l)| (n.to_string(), *l)).collect()
    }

    #[test]
    fn a_level_that_excludes_every_named_tracepoint_is_reported_with_them() {
        let r = reg(&[("demo:work", Level::DebugLine), ("demo:tick", Level::DebugLine), ("other:x", Level::Info)]);
        let rule = Enabler::new("demo:*", LevelFilter::UpTo(Level::Info));
        assert_eq!(verdict(&rule, &r), Verdict::LevelExcludesAll(vec![("demo:tick".into(), Level::DebugLine), ("demo:work".into(), Level::DebugLine)]));
        let w = level_warning(&rule, &r).unwrap();
        assert!(w.contains("demo:* (level <= TRACE_INFO (6))") && w.contains("demo:work is TRACE_DEBUG_LINE (13)"), "{w}");
        assert!(w.contains("without `level =` is TRACE_DEBUG_LINE"), "{w}");
        // One named tracepoint at an accepted level: the rule records.
        let r2 = reg(&[("demo:work", Level::DebugLine), ("demo:err", Level::Err)]);
        assert_eq!(verdict(&rule, &r2), Verdict::Records);
        assert_eq!(level_warning(&rule, &r2), None);
        // `--loglevel-only` too; a disabled rule says nothing.
        assert!(matches!(verdict(&Enabler::new("demo:*", LevelFilter::Only(Level::Err)), &r), Verdict::LevelExcludesAll(_)));
        assert_eq!(verdict(&Enabler { enabled: false, ..rule.clone() }, &r), Verdict::Records);
    }

    #[test]
    fn a_rule_that_names_nothing_registered_is_not_a_level_problem() {
        let r = reg(&[("demo:work", Level::DebugLine)]);
        assert_eq!(verdict(&Enabler::new("web:*", LevelFilter::UpTo(Level::Info)), &r), Verdict::NoneRegistered);
        assert_eq!(verdict(&Enabler::new("web:*", LevelFilter::Any), &Registered::new()), Verdict::NoneRegistered);
        // Exclusions take names out of what the rule names.
        let excluded = Enabler { exclusions: vec!["demo:w*".into()], ..Enabler::new("demo:*", LevelFilter::UpTo(Level::Info)) };
        assert_eq!(verdict(&excluded, &r), Verdict::NoneRegistered);
        assert_eq!(level_warning(&excluded, &r), None);
    }
}
