//! The session verbs (`create`, `enable-channel`, `enable-event`, `add-context`,
//! `disable-event`, `track`/`untrack`, `start`, `stop`, `destroy`, `rotate`, `list`,
//! `status`, `snapshot record`) and the offline ones (`view`, `report`, `crash-dump`): one
//! function per verb, each one request to the daemon and what it prints.

use std::process::ExitCode;

use ust_ctf::recover::StreamState;
use ust_ctl::config::{ChannelConfig, LevelFilter, DEFAULT_READ_TIMER_US};
use ust_ctl::protocol::{Command, CreateOptions, Payload};

use super::args::{
    AddContextArgs, CrashDumpArgs, CreateArgs, DisableEventArgs, EnableChannelArgs, EnableEventArgs, ExportArgs, ListArgs, ReportArgs, SessionCmdArgs,
    SnapshotAddOutputArgs, SnapshotRecordArgs, StatusArgs, TrackArgs, ViewArgs,
};
use super::connect::{absolute, call, connect, connect_or_start, home, unexpected, Failure};
use super::print::{print_apps, print_json, print_map_channels, print_session, print_sessions, print_status, summary_lines};
use super::rule_check;
use super::trace::exit_code_of;
use crate::out::{out, outln};

type CliResult = Result<ExitCode, Failure>;

/// `ust add-context`.
pub fn add_context(a: AddContextArgs) -> CliResult {
    let what: Vec<String> = a.types.iter().map(|t| t.to_string()).collect();
    call(Command::AddContext { session: a.target.session.session, channel: a.target.channel.clone(), contexts: a.types })?;
    let chan = a.target.channel.map_or_else(|| "every channel".to_string(), |c| format!("channel {c}"));
    for w in what {
        outln!("UST context {w} added to {chan}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `ust start`; then warns about rules whose level excludes every registered tracepoint
/// they name ([`rule_check`]).
pub fn start(a: SessionCmdArgs) -> CliResult {
    let mut c = connect()?;
    let Payload::Session(d) = c.call(Command::ListSession { session: a.target() })? else { return Err(unexpected()) };
    let name = d.summary.name.clone();
    c.call(Command::Start { session: Some(name.clone()) })?;
    outln!("Tracing started for session {name}");
    if let Ok(Payload::Apps(apps)) = c.call(Command::ListApps) {
        rule_check::warn_levels(&rule_check::rules_of(&d), &rule_check::of_apps(&apps));
    }
    Ok(ExitCode::SUCCESS)
}

/// `ust stop`: stops, then prints what the session's traces hold so far, as `ust trace`
/// does, and the rules that recorded nothing because of their level.
pub fn stop(a: SessionCmdArgs) -> CliResult {
    let mut c = connect()?;
    let r = c.call(Command::Stop { session: a.target() })?;
    let Payload::Stopped(r) = r else {
        // A daemon of an earlier version answers `Done`, without the report.
        outln!("Tracing stopped for session {}", a.target().unwrap_or_else(|| "(current)".into()));
        return Ok(ExitCode::SUCCESS);
    };
    outln!("Tracing stopped for session {}", r.name);
    print_holdings(&r, "So far: ");
    if let Ok(Payload::Session(d)) = c.call(Command::ListSession { session: Some(r.name.clone()) }) {
        warn_after_recording(&mut c, &rule_check::rules_of(&d), &r);
    }
    Ok(ExitCode::SUCCESS)
}

/// Warns about `rules` whose level excluded every tracepoint they name, among those of the
/// session's traced processes (`r`) and of the processes registered now.
fn warn_after_recording(c: &mut ust_ctl::Client, rules: &[ust_ctl::config::Enabler], r: &ust_ctl::protocol::DestroyReport) {
    let mut registered = rule_check::of_report(r);
    if let Ok(Payload::Apps(apps)) = c.call(Command::ListApps) {
        registered.extend(rule_check::of_apps(&apps));
    }
    rule_check::warn_levels(rules, &registered);
}

/// Prints what the traces of a stopped or destroyed session hold ([`summary_lines`]), the
/// first line after `first`, every line that starts a sentence capitalized (`ust trace`
/// prints the same lines after `ust: `); a snapshot session's, which are written only by
/// `ust snapshot record`, are not counted.
fn print_holdings(r: &ust_ctl::protocol::DestroyReport, first: &str) {
    print_probes(r);
    if r.snapshot {
        outln!(
            "Snapshot session: {} process{} traced; buffers are written only by `ust snapshot record`, under {}/snapshot-<N>-<stamp>/",
            r.traces.len(),
            if r.traces.len() == 1 { "" } else { "es" },
            r.output.display()
        );
        return;
    }
    for (i, l) in summary_lines(r).into_iter().enumerate() {
        if i == 0 && !first.is_empty() {
            outln!("{first}{l}");
        } else {
            let mut c = l.chars();
            let head: String = c.next().map(|h| h.to_uppercase().collect()).unwrap_or_default();
            outln!("{head}{}", c.as_str());
        }
    }
}

/// The userspace probes' recordings of a report: per recording, its directory and each
/// probe event's count (the state dump left out), or why it is incomplete.
fn print_probes(r: &ust_ctl::protocol::DestroyReport) {
    for p in &r.probes {
        let counts: Vec<String> = p.counts.iter().filter(|(e, _)| !e.starts_with("lttng_statedump")).map(|(e, n)| format!("{e} {n}")).collect();
        outln!("Userspace probes in {}: {}", p.dir.display(), if counts.is_empty() { "no event".into() } else { counts.join(", ") });
        if let Some(e) = &p.error {
            outln!("  incomplete: {e}");
        }
    }
}

/// `ust destroy`: prints where the trace is and what it holds, as `ust trace` does.
pub fn destroy(a: SessionCmdArgs) -> CliResult {
    let mut c = connect()?;
    // The rules, for the warnings after the report (the session is gone then).
    let rules = match c.call(Command::ListSession { session: a.target() }) {
        Ok(Payload::Session(d)) => rule_check::rules_of(&d),
        _ => Vec::new(),
    };
    let Payload::Destroyed(r) = c.call(Command::Destroy { session: a.target() })? else { return Err(unexpected()) };
    outln!("Session {} destroyed", r.name);
    if let Some((url, path)) = &r.relay {
        if r.traces.is_empty() {
            outln!("No trace streamed: no process was traced in session {}", r.name);
        } else {
            outln!("Trace streamed to {url}: the relay daemon wrote it in {path} under its output directory");
        }
    } else if r.snapshot {
        let snapshots = snapshot_dirs(&r.output);
        if snapshots.is_empty() {
            outln!("No trace written: session {} is a snapshot session and no snapshot was recorded (`ust snapshot record`)", r.name);
        } else {
            outln!("Snapshots of session {} in {}: {}", r.name, r.output.display(), snapshots.join(", "));
        }
    } else if r.traces.is_empty() && r.probes.is_empty() {
        // Nothing claims a trace that was not written.
        outln!("No trace written: no process was traced in session {} (output {})", r.name, r.output.display());
    } else {
        outln!("Trace written to {}", r.output.display());
    }
    if r.archives.is_empty() && !r.snapshot && !r.traces.is_empty() {
        print_holdings(&r, "");
    } else {
        print_probes(&r);
        if let Some(e) = &r.output_error {
            outln!("The trace is incomplete: its output stopped early ({e})");
        }
    }
    for a in &r.archives {
        outln!("Trace chunk archive: {}", a.display());
    }
    warn_after_recording(&mut c, &rules, &r);
    Ok(ExitCode::SUCCESS)
}

/// The `snapshot-*` directories under a snapshot session's output, sorted.
fn snapshot_dirs(output: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(output)
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().into_string().ok()).filter(|n| n.starts_with("snapshot-")).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// `ust rotate`.
pub fn rotate(a: SessionCmdArgs) -> CliResult {
    let mut c = connect()?;
    let name = session_name(&mut c, a.target())?;
    let Payload::Rotated { archive } = c.call(Command::Rotate { session: Some(name.clone()) })? else { return Err(unexpected()) };
    outln!("Trace chunk archive for session {name} is now readable at {}", archive.display());
    Ok(ExitCode::SUCCESS)
}

/// `ust crash-dump`.
pub fn crash_dump(a: CrashDumpArgs) -> CliResult {
    crate::crash_dump::run(&a.shm_dir, &a.out_dir).map_err(|e| Failure::new(e.to_string()))
}

/// The name of session `target` (`None`: the current session).
///
/// # Errors
/// The daemon's, when there is no such session.
fn session_name(c: &mut ust_ctl::Client, target: Option<String>) -> Result<String, Failure> {
    match c.call(Command::ListSession { session: target })? {
        Payload::Session(d) => Ok(d.summary.name),
        _ => Err(unexpected()),
    }
}

/// `ust snapshot record`.
pub fn snapshot_record(a: SnapshotRecordArgs) -> CliResult {
    let cmd = match a.url.as_deref().map(network_url).transpose()? {
        None => Command::SnapshotRecord { session: a.session.session, max_size: a.max_size },
        Some(url) => Command::SnapshotRecordTo { session: a.session.session, max_size: a.max_size, url },
    };
    let Payload::Snapshot(r) = call(cmd)? else {
        return Err(unexpected());
    };
    outln!("Snapshot recorded successfully");
    outln!("Snapshot written to {} ({} process(es), {} packets, {} bytes)", r.dir.display(), r.processes, r.packets, r.bytes);
    Ok(ExitCode::SUCCESS)
}

/// `ust snapshot add-output`.
pub fn snapshot_add_output(a: SnapshotAddOutputArgs) -> CliResult {
    let url = network_url(&a.url)?;
    let shown = url.to_string();
    call(Command::SnapshotAddOutput { session: a.session.session, url: Some(url) })?;
    outln!("Snapshot output set to {shown}");
    Ok(ExitCode::SUCCESS)
}

/// A `net://` or `net6://` URL for a snapshot output.
fn network_url(u: &str) -> Result<ust_ctl::url::NetworkUrl, Failure> {
    match ust_ctl::url::parse(u).map_err(|e| Failure::new(e.to_string()))? {
        ust_ctl::url::OutputUrl::Net(n) => Ok(n),
        _ => Err(Failure::new(format!("{u}: a snapshot output is a relay daemon's net:// or net6:// URL"))),
    }
}

/// `ust create`.
pub fn create(a: CreateArgs) -> CliResult {
    let shm_path = a.shm_path.map(absolute).transpose()?;
    let stamp = ust_ctf::datetime::stamp();
    let name = a.name.unwrap_or_else(|| format!("auto-{stamp}"));
    ust_ctl::config::check_name("session", &name).map_err(Failure::new)?;
    let (url_output, relay) = a.net.destination()?;
    let output = match a.output.or(url_output) {
        Some(o) => absolute(o)?,
        None => home()?.join("ust-traces").join(format!("{name}-{stamp}")),
    };
    let streaming = relay.is_some();
    let options = CreateOptions {
        snapshot: a.snapshot,
        shm_path,
        clock: a.clock,
        relay,
        live_timer_us: a.net.live,
        buffers: a.buffers.get(),
        ..CreateOptions::default()
    };
    let mut c = connect_or_start()?;
    let Payload::Created { name, output } = c.call(Command::CreateSessionWith { name, output, options })? else { return Err(unexpected()) };
    let kind = match (a.snapshot, a.net.live) {
        (true, _) => "Snapshot session ",
        (false, Some(_)) => "Live session ",
        _ => "Session ",
    };
    outln!("{kind}{name} created.");
    if streaming && a.snapshot {
        outln!("Snapshots will be sent to {}", output.display());
    } else if streaming {
        outln!("Traces will be streamed to {}", output.display());
    } else {
        outln!("Traces will be written in {}", output.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `ust enable-channel`.
pub fn enable_channel(a: EnableChannelArgs) -> CliResult {
    let mut config = a.alloc.apply(a.buffer.apply(ChannelConfig {
        read_timer_us: a.read_timer.unwrap_or(DEFAULT_READ_TIMER_US),
        tracefile_size: a.tracefile_size.unwrap_or(0),
        tracefile_count: a.tracefile_count.unwrap_or(0),
        buffers: a.buffers.get(),
        blocking_timeout_us: a.blocking_timeout.unwrap_or(0),
        auto_reclaim: a.auto_reclaim_memory.and_then(|p| p.0).or(a.auto_reclaim_memory_older_than),
        ..ChannelConfig::default()
    }));
    config.validate().map_err(Failure::new)?;
    let mut c = connect()?;
    if !a.buffer.overwrite && !a.discard {
        // Neither mode given: the session's default (overwrite in a snapshot session, as
        // LTTng's snapshot sessions).
        if let Payload::Session(d) = c.call(Command::ListSession { session: a.session.session.clone() })? {
            config.overwrite = d.summary.snapshot;
        }
    }
    c.call(Command::EnableChannel { session: a.session.session, name: a.name.clone(), config })?;
    outln!("UST channel {} enabled", a.name);
    Ok(ExitCode::SUCCESS)
}

/// `ust enable-event`.
pub fn enable_event(a: EnableEventArgs) -> CliResult {
    if let Some(spec) = &a.userspace_probe {
        return super::session_probes::enable(a.target.session.session.clone(), spec, &a.names);
    }
    let patterns = if a.all { vec!["*".to_string()] } else { a.names.clone() };
    // The daemon runs the same check on what it receives.
    ust_ctl::config::check_enable_event(&patterns, &a.exclude, a.filter.as_deref()).map_err(Failure::usage)?;
    let level = match (a.loglevel, a.loglevel_only) {
        (Some(l), _) => LevelFilter::UpTo(l),
        (None, Some(l)) => LevelFilter::Only(l),
        _ => LevelFilter::Any,
    };
    let channel = a.target.channel.clone();
    let mut c = connect()?;
    c.call(Command::EnableEvent {
        session: a.target.session.session,
        channel: a.target.channel,
        patterns: patterns.clone(),
        level,
        exclusions: a.exclude.clone(),
        filter: a.filter.clone(),
    })?;
    let chan = channel.unwrap_or_else(|| ust_ctl::config::DEFAULT_CHANNEL.into());
    let mut lv = if level == LevelFilter::Any { String::new() } else { format!(" ({})", level.describe()) };
    if !a.exclude.is_empty() {
        lv.push_str(&format!(" excluding {}", a.exclude.join(",")));
    }
    if let Some(f) = &a.filter {
        lv.push_str(&format!(" with filter \"{f}\""));
    }
    if a.all {
        outln!("All UST events are enabled in channel {chan}{lv}");
    } else {
        for p in &patterns {
            outln!("UST event {p} created in channel {chan}{lv}");
        }
    }
    if let Ok(Payload::Apps(apps)) = c.call(Command::ListApps) {
        let rules: Vec<_> =
            patterns.iter().map(|p| ust_ctl::config::Enabler { exclusions: a.exclude.clone(), ..ust_ctl::config::Enabler::new(p.clone(), level) }).collect();
        rule_check::warn_new_rules(&rules, &rule_check::of_apps(&apps));
    }
    Ok(ExitCode::SUCCESS)
}

/// `ust disable-event`.
pub fn disable_event(a: DisableEventArgs) -> CliResult {
    if a.kernel {
        return super::session_probes::disable(a.target.session.session.clone(), &a.names, a.all);
    }
    let chan = a.target.channel.clone().unwrap_or_else(|| ust_ctl::config::DEFAULT_CHANNEL.into());
    call(Command::DisableEvent { session: a.target.session.session, channel: a.target.channel, patterns: a.names.clone(), all: a.all })?;
    if a.all {
        outln!("All UST events are disabled in channel {chan}");
    } else {
        for p in a.names {
            outln!("UST event {p} disabled in channel {chan}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `ust track` (`track`) and `ust untrack`.
pub fn track(a: TrackArgs, track: bool) -> CliResult {
    let verb = if track { "track" } else { "untrack" };
    if a.vuid.is_some() || a.vgid.is_some() {
        super::id_track::track_ids(&a, track)?;
        if a.vpid.is_none() {
            return Ok(ExitCode::SUCCESS);
        }
    }
    let pids = a.vpid.unwrap_or_default();
    if a.all && !pids.is_empty() {
        return Err(Failure { message: format!("{verb}: give process IDs (--vpid PID,...) or --vpid --all, not both"), code: 2 });
    }
    if !a.all && pids.is_empty() {
        return Err(Failure { message: format!("{verb}: --vpid needs process IDs (--vpid 1234,5678) or --all"), code: 2 });
    }
    let session = a.session.session;
    let cmd =
        if track { Command::TrackVpid { session, pids: pids.clone(), all: a.all } } else { Command::UntrackVpid { session, pids: pids.clone(), all: a.all } };
    let Payload::Tracker { session, tracker, unchanged } = call(cmd)? else { return Err(unexpected()) };
    if a.all {
        if track {
            outln!("All process IDs are tracked in session {session}");
        } else {
            outln!("No process ID is tracked in session {session}: nothing is recorded until `ust track`");
        }
    }
    for p in &pids {
        match (unchanged.contains(p), track) {
            (false, true) => outln!("Process ID {p} tracked in session {session}"),
            (false, false) => outln!("Process ID {p} untracked in session {session}"),
            (true, true) => eprintln!("ust: warning: process ID {p} is already tracked in session {session}"),
            (true, false) => eprintln!("ust: warning: process ID {p} is not tracked in session {session}"),
        }
    }
    outln!("Tracked process IDs: {}", tracker.describe());
    Ok(ExitCode::SUCCESS)
}

/// `ust list`.
pub fn list(a: ListArgs) -> CliResult {
    if let Some(path) = a.userspace_probes.first() {
        return super::probes::list(std::path::Path::new(path), a.userspace_probes.get(1).map(String::as_str), a.json);
    }
    let mut c = connect()?;
    if a.apps {
        let Payload::Apps(apps) = c.call(Command::ListApps)? else { return Err(unexpected()) };
        if a.json {
            print_json(&apps);
        } else {
            print_apps(&apps);
        }
    } else if let Some(name) = a.name {
        let Payload::Session(d) = c.call(Command::ListSession { session: Some(name.clone()) })? else { return Err(unexpected()) };
        if let Some(m) = a.map_channel {
            let Some(info) = d.map_channels.iter().find(|c| c.name == m) else {
                return Err(Failure::new(format!("session {name} has no map channel named {m:?} (see `ust list {name}`)")));
            };
            if a.json {
                print_json(info);
            } else {
                print_map_channels(std::slice::from_ref(info));
            }
        } else if a.json {
            print_json(&d);
        } else {
            print_session(&d);
        }
    } else {
        let Payload::Sessions(s) = c.call(Command::ListSessions)? else { return Err(unexpected()) };
        if a.json {
            print_json(&s);
        } else {
            print_sessions(&s);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `ust status`.
pub fn status(a: StatusArgs) -> CliResult {
    let Payload::Status(s) = call(Command::Status { session: a.session.session })? else { return Err(unexpected()) };
    if a.json {
        print_json(&s);
    } else {
        print_status(&s);
    }
    Ok(ExitCode::SUCCESS)
}

/// `ust view`.
pub fn view(a: ViewArgs) -> CliResult {
    let dir = match a.dir {
        Some(d) => d,
        None => {
            let Payload::Status(s) = call(Command::Status { session: a.session.session })? else { return Err(unexpected()) };
            match s.session {
                Some(d) => d.summary.output,
                None => return Err(Failure::new("no current session: give a trace directory or -s SESSION")),
            }
        }
    };
    // A daemon killed while writing may have left a packet cut short: read up to it, or
    // with --repair cut it off (keeping the bytes aside). Anything else unreadable is an
    // error, and nothing is changed. The trace is read and repaired through one
    // descriptor, as its owner (run by root in a user's directory: as that user), never
    // through a link.
    let trace = ust_ctf::outdir::TraceDir::open(&dir, None).map_err(|e| Failure::new(format!("cannot open the trace {}: {e}", dir.display())))?;
    let checks = ust_ctf::recover::check(&trace).map_err(|e| Failure::new(format!("cannot read the trace {}: {e}", dir.display())))?;
    let mut unreadable = 0;
    for c in &checks {
        if let StreamState::Unreadable { offset, reason } = &c.state {
            eprintln!("ust: {}: not a readable CTF stream: {reason} at byte {offset}", c.path.display());
            unreadable += 1;
        }
    }
    if unreadable > 0 {
        return Err(Failure::new(format!(
            "{unreadable} stream file(s) of {} cannot be read; nothing was changed (move them out of the trace to read the others)",
            dir.display()
        )));
    }
    let tails: Vec<_> = checks.iter().filter(|c| matches!(c.state, StreamState::Tail { .. })).collect();
    if a.repair {
        if let Some(o) = trace.owner() {
            eprintln!("ust: {} belongs to uid {}: repaired as that user (gid {})", dir.display(), o.uid, o.gid);
        }
        let r = ust_ctf::recover::repair(&trace).map_err(|e| Failure::new(format!("repairing {}: {e}", dir.display())))?;
        for c in &r.changes {
            eprintln!("ust: repaired {c}");
        }
        return babeltrace(&dir, &dir);
    }
    if tails.is_empty() {
        return babeltrace(&dir, &dir);
    }
    for c in &tails {
        if let StreamState::Tail { whole, tail } = c.state {
            eprintln!(
                "ust: warning: {}: its last packet is cut off ({tail} bytes after byte {whole}, as a killed daemon leaves it); reading up to it (`ust view --repair` cuts it off, keeping the bytes)",
                c.path.display()
            );
        }
    }
    let view = std::env::temp_dir().join(format!("ust-view-{}-{}", std::process::id(), ust_ctf::datetime::stamp()));
    let built = ust_ctf::recover::readable_view(&dir, &checks, &view).map_err(|e| Failure::new(format!("preparing a view of {}: {e}", dir.display())));
    let r = built.and_then(|()| babeltrace(&view, &dir));
    let _ = std::fs::remove_dir_all(&view);
    r
}

/// Runs babeltrace2 on `dir` (a view of the trace `trace`); its exit status is the
/// command's.
fn babeltrace(dir: &std::path::Path, trace: &std::path::Path) -> CliResult {
    match std::process::Command::new("babeltrace2").arg(dir).status() {
        Ok(st) => Ok(exit_code_of(st)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Failure::new(format!(
            "babeltrace2 is not installed (not found in PATH); install it (Debian: apt install babeltrace2) or read {} with another CTF 1.8 reader",
            trace.display()
        ))),
        Err(e) => Err(Failure::new(format!("cannot run babeltrace2: {e}"))),
    }
}

/// `ust report`: the report on stdout in `--format` (text by default); with
/// `--flamegraph` (or `--probe-flamegraph`) and no `--format`, only the flame graph, whose
/// file is written only when there is something to draw.
pub fn report(a: ReportArgs) -> CliResult {
    check_trace_dir(&a.dir)?;
    let format = a.format.as_deref().or(if a.flamegraph.is_some() || a.probe_flamegraph.is_some() { None } else { Some("text") });
    let pictures = format == Some("folded") || a.flamegraph.is_some();
    let opt = ust_analysis::report::Options {
        wakeups: a.wakeups || pictures,
        faults: a.faults,
        fault_file: a.fault_file,
        min_block_ns: a.min_block,
        pid: a.pid,
        procname: a.procname,
        tracer: a.tracer,
        ..Default::default()
    };
    let r = ust_analysis::report::report(&a.dir, &opt).map_err(Failure::new)?;
    if let Some(svg) = &a.flamegraph {
        if let Some(why) = ust_analysis::report::pictures::nothing_to_draw(&r) {
            return Err(Failure::new(format!("no flame graph written to {}: {why}", svg.display())));
        }
        let mut drawn = Vec::new();
        ust_analysis::report::pictures::flamegraph(&r, &mut drawn).map_err(|e| Failure::new(format!("{}: the flame graph: {e}", svg.display())))?;
        write_output(svg, &drawn)?;
        eprintln!("ust: flame graph written to {}", svg.display());
    }
    if let Some(svg) = &a.probe_flamegraph {
        use ust_analysis::report::probe_stacks;
        if let Some(why) = probe_stacks::nothing_to_draw(&r) {
            return Err(Failure::new(format!("no flame graph written to {}: {why}", svg.display())));
        }
        let mut drawn = Vec::new();
        probe_stacks::flamegraph(&r, &mut drawn).map_err(|e| Failure::new(format!("{}: the flame graph: {e}", svg.display())))?;
        write_output(svg, &drawn)?;
        eprintln!("ust: flame graph of the probes' callers written to {}", svg.display());
    }
    match format {
        Some("folded") => {
            for l in ust_analysis::report::pictures::folded(&r) {
                outln!("{l}");
            }
        }
        Some("json") => outln!("{}", ust_analysis::report::render_json(&r)),
        Some(_) => out!("{}", ust_analysis::report::render_text(&r)),
        None => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// `dir`, given to `ust report` or `ust export`, must be a directory.
fn check_trace_dir(dir: &std::path::Path) -> Result<(), Failure> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Failure::new(format!("{} is not a directory: give the trace directory (the output of `ust trace`)", dir.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Failure::new(format!("the directory {} does not exist", dir.display()))),
        Err(e) => Err(Failure::new(format!("{}: {e}", dir.display()))),
    }
}

/// Writes `bytes` as the file `path` named on the command line, named when complete
/// ([`ust_ctf::outdir::create_output_file`]).
fn write_output(path: &std::path::Path, bytes: &[u8]) -> Result<(), Failure> {
    let mut f = ust_ctf::outdir::create_output_file(path, 0o644).map_err(|e| Failure::new(format!("{}: {e}", path.display())))?;
    std::io::Write::write_all(&mut f, bytes).and_then(|()| f.commit()).map_err(|e| Failure::new(format!("{}: {e}", path.display())))
}

/// `; the first: <what>` for a problem the reader described, else nothing.
fn first_problem(p: &Option<String>) -> String {
    p.as_deref().map(|p| format!("; the first: {p}")).unwrap_or_default()
}

/// `ust export`.
pub fn export(a: ExportArgs) -> CliResult {
    check_trace_dir(&a.dir)?;
    if a.format == "parquet" {
        let out = a.output.as_ref().ok_or_else(|| Failure::new("--format parquet writes a directory: give it with -o OUTDIR"))?;
        let s = ust_analysis::export::parquet::export(&a.dir, out).map_err(Failure::new)?;
        eprintln!("ust: parquet written to {}: {} files (one per event class), {} rows", out.display(), s.files, s.rows);
        if s.problems > 0 {
            eprintln!("ust: {} streams stopped early on data that could not be read{}", s.problems, first_problem(&s.first_problem));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let format = if a.format == "chrome-json" { ust_analysis::export::Format::ChromeJson } else { ust_analysis::export::Format::Perfetto };
    let opt = ust_analysis::export::Options { format, counters: a.counter, kernel_events: a.kernel_events };
    let s = match &a.output {
        Some(path) => {
            // Named when complete: a failed export leaves an earlier file as it was.
            let mut f = ust_ctf::outdir::create_output_file(path, 0o644).map_err(|e| Failure::new(format!("{}: {e}", path.display())))?;
            let s =
                ust_analysis::export::export(&a.dir, &opt, std::io::BufWriter::new(&mut f)).map_err(|e| Failure::new(format!("{}: {e}", path.display())))?;
            f.commit().map_err(|e| Failure::new(format!("{}: {e}", path.display())))?;
            s
        }
        None => ust_analysis::export::export(&a.dir, &opt, std::io::BufWriter::new(std::io::stdout().lock())).map_err(Failure::new)?,
    };
    let to = a.output.as_ref().map_or_else(|| "standard output".to_string(), |p| p.display().to_string());
    eprintln!("ust: {} written to {to}: {} threads, {} slices, {} instants, {} counter values", a.format, s.threads, s.slices, s.instants, s.counter_values);
    if s.problems > 0 {
        eprintln!("ust: {} packets or records could not be read{}", s.problems, first_problem(&s.first_problem));
    }
    Ok(ExitCode::SUCCESS)
}
