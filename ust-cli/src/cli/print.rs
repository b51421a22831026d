//! What the commands print: sessions, one session's detail, registered applications, the
//! daemon's status (text as `lttng list` lays it out, or JSON), and `ust trace`'s summary.

use std::collections::BTreeMap;

use ust_ctl::config::LevelFilter;
use ust_ctl::maps::{DeadProcessPolicy, MapChannelInfo, MapOwnership, UpdatePolicy, ValueType};

use crate::out::outln;
use ust_ctl::protocol::{AppInfo, DestroyReport, SessionDetail, SessionSummary, StatusReport};

pub use crate::out::print_json;

fn state_word(active: bool) -> &'static str {
    if active {
        "active"
    } else {
        "inactive"
    }
}

/// The sessions, numbered, the current one starred.
pub fn print_sessions(s: &[SessionSummary]) {
    if s.is_empty() {
        outln!("Currently no available tracing session");
        return;
    }
    outln!("Available tracing sessions:");
    for (i, x) in s.iter().enumerate() {
        outln!(
            "  {}) {}{} ({}) [{}]{}",
            i + 1,
            x.name,
            if x.current { " *" } else { "" },
            x.url.clone().unwrap_or_else(|| x.output.display().to_string()),
            state_word(x.active),
            if x.trace { " (ust trace)" } else { "" }
        );
        if let Some(e) = &x.output_error {
            outln!("     output stopped: {e}");
        }
    }
    outln!("\nUse ust list <session_name> for more details");
}

/// One session: its channels, their settings, statistics and rules, its processes.
pub fn print_session(d: &SessionDetail) {
    outln!("Tracing session {}: [{}{}]", d.summary.name, state_word(d.summary.active), if d.summary.snapshot { " snapshot" } else { "" });
    match &d.summary.url {
        Some(u) => outln!("    Trace output: {u} (streamed to lttng-relayd)"),
        None if d.summary.snapshot => outln!("    Snapshot output: {}/snapshot-<N>-<stamp>/ (`ust snapshot record`)", d.summary.output.display()),
        None => outln!("    Trace output: {}", d.summary.output.display()),
    }
    if let Some(e) = &d.summary.output_error {
        outln!("    Output STOPPED: {e} (packets written before are kept)");
    }
    if !d.userspace_probes.is_empty() {
        outln!("\n=== Domain: Linux kernel ===\n");
        for l in super::session_probes::list_lines(&d.userspace_probes) {
            outln!("{l}");
        }
    }
    outln!("\n=== Domain: User space ===\n");
    outln!("Tracked process IDs: {}", d.vpid_tracker.describe());
    outln!("Tracked user IDs: {}", d.vuid_tracker.describe());
    outln!("Tracked group IDs: {}\n", d.vgid_tracker.describe());
    if d.channels.is_empty() {
        outln!("No channel.");
    } else {
        outln!("Channels:\n-------------");
    }
    for c in &d.channels {
        outln!("- {}:\n", c.name);
        outln!("    Attributes:");
        outln!("      Allocation policy: {}", c.config.allocation.cli_name());
        outln!("      Preallocation policy: {}", c.config.preallocation.cli_name());
        outln!("      Event-loss mode:  {}", if c.config.overwrite { "overwrite" } else { "discard" });
        outln!("      Sub-buffer size:  {} bytes", c.config.subbuf_size);
        outln!("      Sub-buffer count: {}", c.config.num_subbuf);
        outln!("      Switch timer:     {}", if c.config.switch_timer_us == 0 { "inactive".into() } else { format!("{} us", c.config.switch_timer_us) });
        outln!("      Read timer:       {} us", c.config.read_timer_us);
        if c.config.tracefile_size > 0 {
            outln!("      Trace file size:  {} bytes", c.config.tracefile_size);
            outln!("      Trace file count: {}", if c.config.tracefile_count == 0 { "unlimited".into() } else { c.config.tracefile_count.to_string() });
        }
        if !c.contexts.is_empty() {
            let names: Vec<String> = c.contexts.iter().map(|t| t.to_string()).collect();
            outln!("      Contexts:         {}", names.join(", "));
        }
        outln!("{}", super::reclaim::policy_line(c));
        super::reclaim::print_memory(c);
        outln!("\n    Statistics:");
        outln!("      Discarded events: {}", c.discarded);
        outln!("      Packets written:  {} ({} bytes)", c.packets, c.bytes);
        if c.lost_packets > 0 || c.overwritten > 0 {
            outln!("      Lost packets:     {} ({} overwritten)", c.lost_packets, c.overwritten);
        }
        if c.bad_packets > 0 {
            outln!("      Invalid packets skipped: {}", c.bad_packets);
        }
        outln!("\n    Event rules:");
        if c.enablers.is_empty() {
            outln!("      None");
        }
        for e in &c.enablers {
            let lv = if e.level == LevelFilter::Any { String::new() } else { format!(" ({})", e.level.describe()) };
            let mut extra = String::new();
            if !e.exclusions.is_empty() {
                extra.push_str(&format!(" [exclusions: {}]", e.exclusions.join(",")));
            }
            if let Some(f) = &e.filter {
                extra.push_str(&format!(" [filter: {f}]"));
            }
            outln!("      {}{} [{}]{extra}", e.pattern, lv, if e.enabled { "enabled" } else { "disabled" });
        }
        outln!();
    }
    print_map_channels(&d.map_channels);
    if !d.processes.is_empty() {
        outln!("Traced processes:");
        for p in &d.processes {
            // A snapshot session writes a process's trace only into its snapshots.
            let dir = if d.summary.snapshot { String::new() } else { format!(" {}", p.dir.display()) };
            outln!("  PID {} ({}) [{}]{dir}", p.pid, p.procname, if p.alive { "alive" } else { "gone" });
            if let Some(pm) = &p.post_mortem {
                outln!("    died abnormally; post-mortem trace: {}", pm.display());
            }
        }
    }
    if !d.untraced.is_empty() {
        outln!("Processes not traced (latest {}):", d.untraced.len());
        for u in &d.untraced {
            outln!("  PID {} ({}): {}", u.pid, u.procname, u.reason);
        }
    }
}

/// A session's map channels, their attributes in lttng list 2.16's words (its
/// `node_from_map_channel`); `ust show-maps` shows their counters.
pub fn print_map_channels(m: &[MapChannelInfo]) {
    if m.is_empty() {
        return;
    }
    outln!("Map channels:\n-------------");
    for c in m {
        let cfg = &c.config;
        outln!("- {}:\n", c.name);
        outln!("    Key type: String");
        let value = match cfg.value_type {
            ValueType::SignedInt32 => "32-bit signed integer",
            ValueType::SignedInt64 => "64-bit signed integer",
            ValueType::SignedIntMax => "Widest signed integer",
        };
        outln!("    Value type: {value}");
        outln!("    Max. key count: {}", cfg.max_key_count);
        outln!("    Update policy: {}", if cfg.update_policy == UpdatePolicy::PerEvent { "Per matching event" } else { "Per event rule match" });
        let owner = if cfg.ownership == MapOwnership::User { "per Unix user" } else { "per process" };
        outln!("    Buffer configuration: One map of counters per CPU, {owner}");
        if let Some(p) = cfg.dead_process_policy {
            outln!("    Dead process policy: {}", if p == DeadProcessPolicy::Drop { "Discard" } else { "Sum into shared map group" });
        }
        outln!();
    }
}

/// The registered applications and their tracepoints.
pub fn print_apps(apps: &[AppInfo]) {
    outln!("UST events:\n-------------");
    if apps.is_empty() {
        outln!("\nNone");
    }
    for a in apps {
        // The uid (SO_PEERCRED) tells users apart on root's system-wide daemon.
        outln!("\nPID: {} - Name: {} - UID: {}{}", a.pid, a.procname, a.uid, if a.traced_by_token { " (ust trace)" } else { "" });
        for e in &a.events {
            outln!("      {} (loglevel: {} ({})) (type: tracepoint)", e.name, e.level_name, e.level);
            for f in &e.fields {
                outln!("        field: {} ({})", f.name, f.ty);
            }
        }
    }
}

/// The daemon and the current (or chosen) session.
pub fn print_status(s: &StatusReport) {
    outln!("ust-consumerd: running (pid {}, socket directory {})", s.daemon_pid, s.rundir.display());
    outln!("Registered applications: {}", s.apps);
    match &s.session {
        Some(d) => {
            outln!();
            print_session(d);
        }
        None => outln!("No current session: create one with `ust create`"),
    }
}

/// `ust trace`'s summary, on stderr: processes, events per name, discarded events
/// ([`summary_lines`], each line after `ust: `).
pub fn print_summary(report: &DestroyReport) {
    for l in summary_lines(report) {
        eprintln!("ust: {l}");
    }
}

/// What a session's traces hold, as `ust trace`, `ust stop` and `ust destroy` print it:
/// whether the output stopped early; processes, events recorded and discarded; the events
/// per name, counted by walking every record written ([`count_events`]); unreadable
/// packets. A streamed session's files are on the relay daemon's machine: its packets are
/// counted instead.
pub fn summary_lines(report: &DestroyReport) -> Vec<String> {
    let mut lines = Vec::new();
    if report.relay.is_some() {
        if let Some(e) = &report.output_error {
            lines.push(format!("the trace is incomplete: its output stopped early ({e}); the packets sent before are whole"));
        }
        lines.push(streamed_summary_line(report));
        return lines;
    }
    if let Some(e) = &report.output_error {
        lines.push(format!("the trace is incomplete: its output stopped early ({e}); the packets written before are whole"));
    }
    let c = count(report);
    let total: u64 = c.per_event.values().sum();
    let discarded: u64 = report.traces.iter().map(|t| t.discarded).sum();
    lines.push(format!(
        "{} process{} traced, {total} event{} recorded, {discarded} discarded{}",
        report.traces.len(),
        if report.traces.len() == 1 { "" } else { "es" },
        if total == 1 { "" } else { "s" },
        match c.lost_packets {
            0 => String::new(),
            n => format!(", {n} packet{} lost (overwritten before they were read, in overwrite mode)", if n == 1 { "" } else { "s" }),
        }
    ));
    let width = c.per_event.keys().map(|k| k.len()).max().unwrap_or(0);
    for (name, n) in &c.per_event {
        lines.push(format!("  {name:<width$}  {n}"));
    }
    if c.problems > 0 {
        lines.push(format!("{} packet(s) or record(s) could not be read back", c.problems));
    }
    lines
}

/// One line: processes, packets sent and events discarded of a streamed session.
fn streamed_summary_line(report: &DestroyReport) -> String {
    let packets: u64 = report.traces.iter().map(|t| t.packets).sum();
    let discarded: u64 = report.traces.iter().map(|t| t.discarded).sum();
    format!(
        "{} process{} traced, {packets} packet{} sent, {discarded} event{} discarded",
        report.traces.len(),
        if report.traces.len() == 1 { "" } else { "es" },
        if packets == 1 { "" } else { "s" },
        if discarded == 1 { "" } else { "s" }
    )
}

/// Per-event-name counts of the trace `report` describes, found by walking every packet of
/// every stream file with the record walker: `(counts, unreadable packets or records)`
/// (see [`ust_ctf::count`]).
pub fn count_events(report: &DestroyReport) -> (BTreeMap<String, u64>, u64) {
    let c = count(report);
    (c.per_event, c.problems)
}

/// [`ust_ctf::count::count_events`] over the traces of `report`.
fn count(report: &DestroyReport) -> ust_ctf::count::Counts {
    let traces: Vec<ust_ctf::count::TraceToCount<'_>> =
        report.traces.iter().map(|t| ust_ctf::count::TraceToCount { dir: &t.dir, events: &t.events, context_sizes: &t.context_sizes }).collect();
    ust_ctf::count::count_events(&traces)
}
