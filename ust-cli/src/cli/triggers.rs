//! `ust add-trigger`, `ust list-triggers`, `ust remove-trigger` (LTTng's verbs of the same
//! names): their arguments and what they print. `add-trigger`'s arguments are positional
//! in meaning (`--name` before `--condition` names the trigger, after it the event rule),
//! so clap takes them as a list and [`ust_ctl::trigger::parse_add_trigger`] reads it.

use std::process::ExitCode;

use clap::Args;
use ust_ctl::protocol::{Command, Payload};
use ust_ctl::trigger::{parse_add_trigger, SessionCondition, TriggerInfo};

use super::connect::{call, unexpected, Failure};
use super::print::print_json;
use super::CliResult;
use crate::out::outln;

/// `ust add-trigger`.
#[derive(Debug, Args)]
pub struct AddTriggerArgs {
    /// `[--name NAME] --condition event-rule-matches --type user [--name PATTERN]
    /// [--exclude-name GLOB]... [--log-level LEVEL.. | LEVEL | ..] [--filter EXPR]
    /// --action ACTION [ARGS] [--action ...]`, or `--condition session-consumed-size-ge
    /// --session S --threshold-size SIZE`, or `--condition
    /// session-rotation-starts|session-rotation-finishes --session S`, or `--condition
    /// channel-buffer-usage-ge|channel-buffer-usage-le --session S --channel C --domain user
    /// (--threshold-size SIZE | --threshold-ratio R)`; actions: `notify`, `snapshot-session S
    /// [--path DIR | --url URL | --ctrl-url URL --data-url URL] [--name N] [--max-size SIZE]`,
    /// `start-session S`, `stop-session S`, `rotate-session S`, each with an optional
    /// `--rate-policy every:N|once-after:N`.
    #[arg(value_name = "SPEC", trailing_var_arg = true, allow_hyphen_values = true, required = true, num_args = 1..)]
    pub spec: Vec<String>,
}

/// `ust list-triggers`.
#[derive(Debug, Args)]
pub struct ListTriggersArgs {
    /// Print JSON (the daemon's trigger list).
    #[arg(long)]
    pub json: bool,
}

/// `ust remove-trigger`.
#[derive(Debug, Args)]
pub struct RemoveTriggerArgs {
    /// The trigger's name (`ust list-triggers`).
    pub name: String,
}

/// `ust add-trigger`.
pub fn add_trigger(a: AddTriggerArgs) -> CliResult {
    let spec = parse_add_trigger(&a.spec).map_err(Failure::usage)?;
    let Payload::Triggers(t) = call(Command::AddTrigger { spec })? else { return Err(unexpected()) };
    let name = t.first().and_then(|t| t.spec.name.clone()).unwrap_or_default();
    outln!("Added trigger `{name}`.");
    Ok(ExitCode::SUCCESS)
}

/// `ust list-triggers`.
pub fn list_triggers(a: ListTriggersArgs) -> CliResult {
    let Payload::Triggers(list) = call(Command::ListTriggers)? else { return Err(unexpected()) };
    if a.json {
        print_json(&list);
    } else {
        for t in &list {
            print_trigger(t);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_trigger(t: &TriggerInfo) {
    let r = &t.spec.rule;
    outln!("- name: {}", t.spec.name.as_deref().unwrap_or(""));
    if let Some(c) = &t.spec.condition {
        // lttng list-triggers' words (print_condition_session_consumed_size and
        // print_condition_session_rotation in its list_triggers.cpp).
        outln!("  condition: {}", c.lttng_name());
        outln!("    session name: {}", c.session());
        match c {
            SessionCondition::ConsumedSizeGe { threshold, .. } => outln!("    threshold: {threshold} bytes"),
            SessionCondition::BufferUsageGe { channel, threshold, .. } | SessionCondition::BufferUsageLe { channel, threshold, .. } => {
                // print_condition_buffer_usage's words.
                outln!("    event record channel name: {channel}");
                outln!("    domain: ust");
                outln!("    {threshold}");
            }
            _ => {}
        }
        print_actions(t);
        return;
    }
    outln!("  condition: event rule matches");
    outln!("    rule: {} (type: user tracepoint)", r.pattern);
    if !r.exclusions.is_empty() {
        outln!("    exclusions: {}", r.exclusions.join(", "));
    }
    outln!("    log level: {}", r.level.describe());
    if let Some(f) = &r.filter {
        outln!("    filter: {f}");
    }
    print_actions(t);
}

fn print_actions(t: &TriggerInfo) {
    outln!("  actions:");
    for (i, a) in t.spec.actions.iter().enumerate() {
        // lttng list-triggers' action line: the snapshot output, then the rate policy.
        let o = t.spec.options(i);
        let out = o.snapshot_output.as_ref().map(|s| s.describe()).unwrap_or_default();
        outln!("    {a}{out}{}", o.rate_policy.describe());
    }
    outln!("  fired: {} time(s); watching {} process(es)", t.fired, t.processes);
    if let Some(l) = &t.last_result {
        outln!("  last firing: {l}");
    }
}

/// `ust remove-trigger`.
pub fn remove_trigger(a: RemoveTriggerArgs) -> CliResult {
    call(Command::RemoveTrigger { name: a.name.clone() })?;
    outln!("Removed trigger `{}`.", a.name);
    Ok(ExitCode::SUCCESS)
}
