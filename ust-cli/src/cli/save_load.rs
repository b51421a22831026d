//! `ust save` and `ust load` (LTTng's `lttng save`/`lttng load`): session configurations
//! as LTTng session XML files ([`ust_ctl::session_xml`]), `NAME.lttng` in
//! `$LTTNG_HOME/.lttng/sessions/` (else `$HOME/.lttng/sessions/`, as lttng) unless a
//! path is given. Saving reads the session from the daemon (`ust list NAME`); loading
//! replays it as the requests `ust create`, `enable-channel`, `enable-event`,
//! `disable-event`, `add-context`, `track` and `start` would send. A session's userspace
//! probes are the kernel domain's `USERSPACE_PROBE` events, checked again at load as
//! `enable-event --userspace-probe` checks them.
//!
//! Triggers, as LTTng 2.16: every file `ust save` writes holds every trigger of the
//! daemon (`--no-triggers`: none); `ust load` registers the triggers of the files it read
//! once their sessions are loaded (`--no-triggers`: none). A trigger whose name exists
//! already must be identical (then it is left alone), else the load fails before any
//! session is made. A trigger ust cannot honour (a kernel event rule, captures, …) or
//! naming a session that does not exist is skipped with a warning.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use ust_ctl::config::{check_name, BufferOwnership, VpidTracker};
use ust_ctl::protocol::{Command, CreateOptions, Payload, SessionDetail};
use ust_ctl::session_xml::triggers::{to_xml_with_triggers, triggers_from_xml};
use ust_ctl::session_xml::{from_xml, BufferType, SavedChannel, SavedSession};
use ust_ctl::trackers::{IdKind, IdTracker};
use ust_ctl::trigger::TriggerSpec;
use ust_ctl::Client;

use super::connect::{absolute, connect, connect_or_start, home, unexpected, Failure};
use super::CliResult;
use crate::out::outln;

/// `ust save`.
#[derive(Debug, Args)]
pub struct SaveArgs {
    /// Session to save (default: the current session).
    pub session: Option<String>,
    /// Directory to write `NAME.lttng` into (default: ~/.lttng/sessions/).
    #[arg(short = 'o', long = "output-path", value_name = "DIR")]
    pub output_path: Option<PathBuf>,
    /// Save every session (but `ust trace` ones).
    #[arg(short = 'a', long, conflicts_with = "session")]
    pub all: bool,
    /// Overwrite an existing file.
    #[arg(short = 'f', long)]
    pub force: bool,
    /// Save no trigger (LTTng 2.15 and earlier's files; by default every trigger of the
    /// daemon is saved in each file).
    #[arg(long)]
    pub no_triggers: bool,
}

/// `ust load`.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Session to load from the file(s) (default: every session they hold).
    pub session: Option<String>,
    /// A `.lttng` file, or a directory whose `*.lttng` files are read (default:
    /// ~/.lttng/sessions/).
    #[arg(short = 'i', long = "input-path", value_name = "PATH")]
    pub input_path: Option<PathBuf>,
    /// Load every session of the file(s) (the default without SESSION).
    #[arg(short = 'a', long, conflicts_with = "session")]
    pub all: bool,
    /// Replace a session of the same name (destroyed first).
    #[arg(short = 'f', long)]
    pub force: bool,
    /// Load no trigger from the file(s).
    #[arg(long)]
    pub no_triggers: bool,
}

/// `$LTTNG_HOME/.lttng/sessions`, else `$HOME/.lttng/sessions` (lttng's default).
fn default_dir() -> Result<PathBuf, Failure> {
    let base = std::env::var_os("LTTNG_HOME").filter(|h| !h.is_empty()).map(PathBuf::from).map_or_else(home, Ok)?;
    Ok(base.join(".lttng").join("sessions"))
}

fn ids(t: &IdTracker) -> Option<Vec<u32>> {
    match t {
        IdTracker::All => None,
        IdTracker::Only(s) => Some(s.iter().copied().collect()),
    }
}

/// The daemon's view of a session as LTTng's configuration model.
pub fn saved_from_detail(d: &SessionDetail) -> SavedSession {
    SavedSession {
        name: d.summary.name.clone(),
        output: Some(d.summary.output.clone()),
        snapshot: d.summary.snapshot,
        started: d.summary.active,
        buffers: match d.summary.buffers {
            BufferOwnership::Uid => BufferType::PerUid,
            BufferOwnership::Pid => BufferType::PerPid,
        },
        channels: d
            .channels
            .iter()
            .map(|c| SavedChannel {
                name: c.name.clone(),
                enabled: true,
                config: c.config.clone(),
                events: c.enablers.clone(),
                contexts: c.contexts.clone(),
                unsupported_contexts: Vec::new(),
            })
            .collect(),
        vpid: d.vpid_tracker.clone(),
        vuid: ids(&d.vuid_tracker),
        vgid: ids(&d.vgid_tracker),
        probes: d.userspace_probes.clone(),
        ..SavedSession::default()
    }
}

/// `ust save`.
pub fn save(a: SaveArgs) -> CliResult {
    let mut c = connect()?;
    let names: Vec<Option<String>> = if a.all {
        let Payload::Sessions(list) = c.call(Command::ListSessions)? else { return Err(unexpected()) };
        list.into_iter().filter(|s| !s.trace).map(|s| Some(s.name)).collect()
    } else {
        vec![a.session.clone()]
    };
    if names.is_empty() {
        return Err(Failure::new("no session to save (see `ust list`)"));
    }
    let dir = match a.output_path {
        Some(p) => absolute(p)?,
        None => default_dir()?,
    };
    // Made and written as `ust_ctf::outdir` does (by root in a user's directory: as them,
    // never through a link).
    let out = ust_ctf::outdir::TraceDir::create(&dir, None).map_err(|e| Failure::new(format!("creating {}: {e}", dir.display())))?;
    let triggers: Option<Vec<TriggerSpec>> = if a.no_triggers {
        None
    } else {
        let Payload::Triggers(t) = c.call(Command::ListTriggers)? else { return Err(unexpected()) };
        Some(t.into_iter().map(|t| t.spec).collect())
    };
    for n in names {
        let Payload::Session(d) = c.call(Command::ListSession { session: n })? else { return Err(unexpected()) };
        let saved = saved_from_detail(&d);
        let name = format!("{}.lttng", saved.name);
        let file = dir.join(&name);
        if out.entries().is_ok_and(|e| e.iter().any(|(n, _)| *n == name)) && !a.force {
            return Err(Failure::new(format!("{} exists already: give -f/--force to overwrite it", file.display())));
        }
        out.write_atomically(&name, to_xml_with_triggers(std::slice::from_ref(&saved), triggers.as_deref()).as_bytes(), 0o644).map_err(|e| {
            let _ = out.remove(&format!(".{name}.tmp"));
            Failure::new(format!("writing {}: {e}", file.display()))
        })?;
        outln!("Session {} saved successfully in {}", saved.name, dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The sessions of one file, and its triggers (those ust cannot honour are reported).
type FileContent = (Vec<SavedSession>, Vec<TriggerSpec>);

fn read_sessions(path: &Path) -> Result<Vec<FileContent>, Failure> {
    let read = |f: &Path| -> Result<FileContent, Failure> {
        let text =
            ust_ctf::files::read_trace_text(f, ust_ctl::session_xml::MAX_FILE as u64).map_err(|e| Failure::new(format!("reading {}: {e}", f.display())))?;
        let sessions = from_xml(&text).map_err(|e| Failure::new(format!("{}: {e}", f.display())))?;
        let t = triggers_from_xml(&text).map_err(|e| Failure::new(format!("{}: {e}", f.display())))?;
        for (name, why) in &t.skipped {
            eprintln!("ust: {}: trigger {name} skipped: {why}", f.display());
        }
        Ok((sessions, t.triggers))
    };
    let meta = std::fs::metadata(path).map_err(|e| Failure::new(format!("{}: {e}", path.display())))?;
    if !meta.is_dir() {
        return Ok(vec![read(path)?]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| Failure::new(format!("{}: {e}", path.display())))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "lttng") && p.is_file())
        .collect();
    files.sort();
    files.iter().map(|f| read(f)).collect()
}

fn ok(c: &mut Client, cmd: Command) -> Result<Payload, Failure> {
    Ok(c.call(cmd)?)
}

fn load_one(c: &mut Client, s: &SavedSession, force: bool) -> Result<(), Failure> {
    let name = &s.name;
    check_name("session", name).map_err(Failure::new)?;
    if let Some((ctrl, data)) = &s.net_output {
        return Err(Failure::new(format!("session {name}: network output ({ctrl}, {data}) cannot be loaded: give the session a local output")));
    }
    // LTTng's PER_UID is ust's `--buffers-uid` (with a shm path too: per-UID buffer files).
    let buffers = match s.buffers {
        BufferType::PerUid => BufferOwnership::Uid,
        BufferType::PerPid => BufferOwnership::Pid,
    };
    if !s.other_domains.is_empty() {
        eprintln!("ust: session {name}: {} domain(s) skipped: ust traces user space only", s.other_domains.join(", "));
    }
    let Payload::Sessions(existing) = ok(c, Command::ListSessions)? else { return Err(unexpected()) };
    if existing.iter().any(|e| &e.name == name) {
        if !force {
            return Err(Failure::new(format!("session {name} exists already: give -f/--force to replace it")));
        }
        ok(c, Command::Destroy { session: Some(name.clone()) })?;
    }
    let output = match &s.output {
        Some(o) => o.clone(),
        None => home()?.join("ust-traces").join(format!("{name}-{}", ust_ctf::datetime::stamp())),
    };
    let options = CreateOptions { snapshot: s.snapshot, shm_path: s.shm_path.clone(), clock: None, buffers: Some(buffers), ..CreateOptions::default() };
    ok(c, Command::CreateSessionWith { name: name.clone(), output, options })?;
    let session = Some(name.clone());
    for ch in &s.channels {
        if !ch.enabled {
            eprintln!("ust: session {name}: channel {} was disabled; ust channels are always enabled", ch.name);
        }
        for u in &ch.unsupported_contexts {
            eprintln!("ust: session {name}, channel {}: context {u} is not supported; not added", ch.name);
        }
        ok(c, Command::EnableChannel { session: session.clone(), name: ch.name.clone(), config: ch.config.clone() })?;
        for e in &ch.events {
            ok(
                c,
                Command::EnableEvent {
                    session: session.clone(),
                    channel: Some(ch.name.clone()),
                    patterns: vec![e.pattern.clone()],
                    level: e.level,
                    exclusions: e.exclusions.clone(),
                    filter: e.filter.clone(),
                },
            )?;
            if !e.enabled {
                ok(c, Command::DisableEvent { session: session.clone(), channel: Some(ch.name.clone()), patterns: vec![e.pattern.clone()], all: false })?;
            }
        }
        if !ch.contexts.is_empty() {
            ok(c, Command::AddContext { session: session.clone(), channel: Some(ch.name.clone()), contexts: ch.contexts.clone() })?;
        }
    }
    for p in &s.probes {
        // Checked as `enable-event --userspace-probe` checks it, as the user loading.
        let probe = super::session_probes::rule(&p.location.spec(), &p.name)
            .map_err(|e| Failure::new(format!("session {name}: userspace probe {}: {}", p.name, e.message)))?;
        ok(c, Command::EnableUserspaceProbe { session: session.clone(), probe })?;
        if !p.enabled {
            ok(c, Command::DisableUserspaceProbe { session: session.clone(), names: vec![p.name.clone()], all: false })?;
        }
    }
    match &s.vpid {
        VpidTracker::All => {}
        VpidTracker::Only(set) if set.is_empty() => {
            ok(c, Command::UntrackVpid { session: session.clone(), pids: Vec::new(), all: true })?;
        }
        VpidTracker::Only(set) => {
            ok(c, Command::TrackVpid { session: session.clone(), pids: set.iter().copied().collect(), all: false })?;
        }
    }
    for (kind, t) in [(IdKind::Vuid, &s.vuid), (IdKind::Vgid, &s.vgid)] {
        let Some(ids) = t else { continue };
        ok(c, Command::TrackIds { session: session.clone(), kind, ids: ids.clone(), all: ids.is_empty(), track: !ids.is_empty() })?;
    }
    if s.started {
        ok(c, Command::Start { session })?;
    }
    Ok(())
}

/// The triggers to register: those of `files` (deduplicated by name; one name with two
/// definitions is an error), less those that exist identically in the daemon.
///
/// # Errors
/// A trigger of the files whose name exists with another definition (in the files or the
/// daemon): nothing has been loaded yet.
fn triggers_to_add(c: &mut Client, files: Vec<Vec<TriggerSpec>>) -> Result<Vec<TriggerSpec>, Failure> {
    let mut want: Vec<TriggerSpec> = Vec::new();
    for t in files.into_iter().flatten() {
        match want.iter().find(|w| w.name == t.name) {
            Some(w) if *w != t => return Err(Failure::new(format!("trigger {}: two different definitions in the files", t.name.as_deref().unwrap_or("")))),
            Some(_) => {}
            None => want.push(t),
        }
    }
    let Payload::Triggers(existing) = ok(c, Command::ListTriggers)? else { return Err(unexpected()) };
    let mut out = Vec::new();
    for t in want {
        match existing.iter().find(|e| e.spec.name == t.name) {
            Some(e) if e.spec == t => {}
            Some(_) => {
                return Err(Failure::new(format!(
                "trigger {} exists already with another condition or action: remove it (`ust remove-trigger`) or load with --no-triggers; nothing was loaded",
                t.name.as_deref().unwrap_or("")
            )))
            }
            None => out.push(t),
        }
    }
    Ok(out)
}

/// `ust load`.
pub fn load(a: LoadArgs) -> CliResult {
    let path = match a.input_path {
        Some(p) => absolute(p)?,
        None => default_dir()?,
    };
    let mut files = read_sessions(&path)?;
    if let Some(n) = &a.session {
        // The file that holds the session, that session only, and that file's triggers.
        let Some(i) = files.iter().position(|(s, _)| s.iter().any(|s| &s.name == n)) else {
            return Err(Failure::new(format!("no session named {n:?} in {}", path.display())));
        };
        let (mut s, t) = files.swap_remove(i);
        s.retain(|s| &s.name == n);
        s.truncate(1);
        files = vec![(s, t)];
    }
    let (sessions, triggers): (Vec<Vec<SavedSession>>, Vec<Vec<TriggerSpec>>) = files.into_iter().unzip();
    let sessions: Vec<SavedSession> = sessions.into_iter().flatten().collect();
    if sessions.is_empty() {
        return Err(Failure::new(format!("no session configuration found in {}", path.display())));
    }
    let mut c = connect_or_start()?;
    let triggers = if a.no_triggers { Vec::new() } else { triggers_to_add(&mut c, triggers)? };
    for s in &sessions {
        load_one(&mut c, s, a.force)?;
        outln!("Session {} has been loaded successfully", s.name);
    }
    for t in triggers {
        let name = t.name.clone().unwrap_or_default();
        match c.call(Command::AddTrigger { spec: t }) {
            Ok(_) => outln!("Trigger {name} has been loaded successfully"),
            Err(e) => eprintln!("ust: trigger {name} not loaded: {e}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
