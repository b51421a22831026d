//! `ust trace -- CMD`: a one-shot session around one command. It creates a session whose
//! token only CMD (and its children) carry, enables events, starts, runs CMD forwarding
//! the signals `ust trace` receives (a third one is sent as SIGKILL), destroys the session
//! and prints a summary; it exits with CMD's status (128+N when CMD died of signal N).
//! With `--snapshot` the session is a snapshot session (flight recorder): nothing is
//! written while CMD runs, a snapshot is taken on SIGUSR1 and when CMD ends.
//! With `--as-user` (root), CMD runs as another user ([`super::as_user`]). With `--kernel`
//! in tier 1, CMD is launched by the ptrace system-call recorder
//! ([`crate::kernel::syscall_view`]) unless `--no-ptrace`.

use std::process::ExitCode;
use std::time::Duration;

use ust_ctf::outdir::TraceDir;
use ust_ctl::config::LevelFilter;
use ust_ctl::protocol::{Command, CreateOptions, Payload, SessionOwner};

use super::args::TraceArgs;
use super::connect::{absolute, connect, connect_or_start, home, Failure};
use super::print::print_summary;

type CliResult = Result<ExitCode, Failure>;

/// The exit code a shell would report for `st`: the code, or 128 + the signal number.
pub fn exit_code_of(st: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => ExitCode::from((c & 0xff) as u8),
        (None, Some(sig)) => ExitCode::from((128 + sig).min(255) as u8),
        _ => ExitCode::from(1),
    }
}

static TRACE_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// A SIGUSR1 asked `ust trace --snapshot` for a snapshot.
static SNAPSHOT_SIGNAL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn snapshot_on_signal(_sig: libc::c_int) {
    SNAPSHOT_SIGNAL.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// `si_code` of a signal the kernel sent itself, as the terminal's driver does for Ctrl-C,
/// Ctrl-\ and hang-up to the whole foreground process group (`SI_KERNEL`, Linux).
const SI_KERNEL: libc::c_int = 0x80;

/// Records a signal to forward. One the terminal sent to the foreground process group
/// reached the command too (it shares `ust trace`'s group): forwarding it again would make
/// one Ctrl-C two, which many programs take as "force quit".
extern "C" fn trace_on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler; reading si_code
    // is async-signal-safe.
    let code = if info.is_null() { 0 } else { unsafe { (*info).si_code } };
    if code != SI_KERNEL {
        TRACE_SIGNAL.store(sig, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The session's default channel, when `ust trace` was given buffer options, `--snapshot`
/// (overwrite mode) or `--buffers-uid` (then with the `vpid` and `procname` contexts: in a
/// trace shared by every process of the command they are what tells the processes apart;
/// LTTng leaves adding them to the user).
fn default_channel(c: &mut ust_ctl::client::Client, session: &Option<String>, a: &TraceArgs) -> Result<Payload, ust_ctl::client::ClientError> {
    let uid = a.buffers.get() == Some(ust_ctl::config::BufferOwnership::Uid);
    if !uid && !a.snapshot && !a.buffer.any() {
        return Ok(Payload::Done);
    }
    let base = ust_ctl::config::ChannelConfig { overwrite: a.snapshot, buffers: uid.then_some(ust_ctl::config::BufferOwnership::Uid), ..Default::default() };
    c.call(Command::EnableChannel { session: session.clone(), name: ust_ctl::config::DEFAULT_CHANNEL.into(), config: a.buffer.apply(base) })?;
    if !uid {
        return Ok(Payload::Done);
    }
    use ust_core::context::ContextType;
    c.call(Command::AddContext { session: session.clone(), channel: None, contexts: vec![ContextType::Vpid, ContextType::Procname] })
}

/// Runs `ust trace` (see the module docs).
///
/// # Errors
/// A [`Failure`] when the session cannot be set up.
pub fn trace(a: TraceArgs) -> CliResult {
    for e in &a.events {
        if e.is_empty() {
            return Err(Failure::new("--event needs a glob"));
        }
    }
    let (url_output, relay) = a.net.destination()?;
    let streaming = relay.is_some();
    // Dynamic probes are recorded with the kernel view: resolved now, before anything runs.
    let probes = super::probes::resolve_all(&a.userspace_probes)?;
    let with_kernel = a.kernel || !probes.is_empty();
    if relay.is_some() && with_kernel {
        return Err(Failure::new("--kernel and --userspace-probe record a local trace: they cannot be combined with a network URL"));
    }
    let identity = match &a.as_user {
        Some(u) => Some(super::as_user::resolve(u, (std::env::var("SUDO_UID").ok(), std::env::var("SUDO_GID").ok()), rustix::process::geteuid().as_raw())?),
        None => None,
    };
    let stamp = ust_ctf::datetime::stamp();
    let name = format!("trace-{}", std::process::id());
    let output = match (a.output.clone().or(url_output), &identity) {
        (Some(o), _) => absolute(o)?,
        (None, Some(id)) => id.traces_dir().join(format!("{name}-{stamp}")),
        (None, None) => home()?.join("ust-traces").join(format!("{name}-{stamp}")),
    };
    // The output directory, opened once by whoever the trace belongs to (USER of
    // --as-user; else, for root, the user whose directory the path leads into): every file
    // of the trace is created through it, as them, never through a link.
    let out = match streaming {
        true => None,
        false => Some(open_output(&output, identity.as_ref())?),
    };
    if let (None, Some(o)) = (&identity, out.as_ref().and_then(TraceDir::owner)) {
        eprintln!("ust: {} belongs to uid {}: the trace is written as that user (gid {})", output.display(), o.uid, o.gid);
    }
    let owner = out.as_ref().and_then(TraceDir::owner).map(|o| SessionOwner { uid: o.uid, gid: o.gid });
    let token = uuid::Uuid::new_v4().simple().to_string();
    let mut c = connect_or_start()?;
    let name = format!("{name}-{stamp}");
    if relay.is_some() || owner.is_some() || a.snapshot {
        let options = CreateOptions { relay, live_timer_us: a.net.live, token: Some(token.clone()), owner, snapshot: a.snapshot, ..CreateOptions::default() };
        c.call(Command::CreateSessionWith { name: name.clone(), output: output.clone(), options })?;
    } else {
        c.call(Command::CreateSession { name: name.clone(), output: output.clone(), token: Some(token.clone()) })?;
    }
    let session = Some(name.clone());
    let patterns = if a.events.is_empty() { vec!["*".to_string()] } else { a.events.clone() };
    let setup = default_channel(&mut c, &session, &a)
        .and_then(|_| {
            c.call(Command::EnableEvent { session: session.clone(), channel: None, patterns, level: LevelFilter::Any, exclusions: Vec::new(), filter: None })
        })
        .and_then(|_| match a.contexts.is_empty() {
            true => Ok(Payload::Done),
            false => c.call(Command::AddContext { session: session.clone(), channel: None, contexts: a.contexts.clone() }),
        })
        .and_then(|_| c.call(Command::Start { session: session.clone() }));
    if let Err(e) = setup {
        let _ = c.call(Command::Destroy { session });
        return Err(e.into());
    }
    // From here on, a signal to `ust trace` is forwarded to the command, and the session is
    // destroyed whatever happens. A signal `ust trace` inherited as ignored (a background
    // job's SIGINT and SIGQUIT, `nohup`'s SIGHUP) stays ignored, as shells keep it: the
    // command then inherits it ignored, as it would without `ust trace` (a handler would be
    // reset to the default action by its exec, and Ctrl-C would then kill a command that
    // was meant to ignore it).
    // SAFETY: the handlers only read their siginfo and store to an atomic; the query of the
    // old action writes only to `old`.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = trace_on_signal as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
        if a.snapshot {
            let mut usr1: libc::sigaction = std::mem::zeroed();
            usr1.sa_sigaction = snapshot_on_signal as *const () as usize;
            usr1.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut usr1.sa_mask);
            libc::sigaction(libc::SIGUSR1, &usr1, std::ptr::null_mut());
        }
    }
    use crate::kernel::syscall_view::{self, Running};
    use crate::kernel::view::{self, Plan};
    let opts = crate::kernel::view_recorder::Options { system_wide: a.system_wide, buffer_kb: a.kernel_buffer_kb, ..Default::default() };
    // Tier 1's system calls (ptrace), unless turned off.
    let syscalls = match (a.no_ptrace, &identity) {
        (true, _) => crate::kernel::perf::SyscallView::Off(syscall_view::OFF_BY_FLAG.into()),
        (false, Some(_)) => crate::kernel::perf::SyscallView::Off(syscall_view::OFF_AS_USER.into()),
        (false, None) => crate::kernel::perf::SyscallView::Ptrace,
    };
    let with_probes = !probes.is_empty();
    let probed_files = super::probes::watch(&probes);
    let plan = match (with_kernel, &out) {
        (true, Some(out)) => view::plan(out, opts, &syscalls, probes),
        _ => Plan::None,
    };
    if let Plan::Refused(reason) = plan {
        let _ = c.call(Command::Destroy { session });
        return Err(Failure::new(reason));
    }
    let (prog, args) = a.command.split_first().expect("clap requires a command");
    let command = || {
        let mut c = std::process::Command::new(prog);
        c.args(args).env(ust_core::protocol::ENV_SESSION_TOKEN, &token);
        if let Some(id) = &identity {
            id.apply(&mut c);
        }
        c
    };
    if let Some(id) = &identity {
        eprintln!("ust: running {} as {} (uid {}, gid {}); the kernel is recorded as root", prog.to_string_lossy(), id.name, id.uid, id.gid);
    }
    let mut kernel = None;
    // Tier 1 launches the command under its system-call recorder ([`syscall_view::spawn`]).
    let child = match (plan, out.as_ref()) {
        (Plan::Ready(k), _) => {
            kernel = Some(k);
            syscall_view::spawn(command(), kernel.as_mut())
        }
        // Tiers 3 and 2: the command starts gated until its view records.
        (Plan::Gated(gate), Some(out)) => match crate::kernel::gate::Gated::spawn(command()) {
            Err(e) => Err(e),
            Ok(g) => match gate.start(out, g.pid) {
                Ok(k) => {
                    kernel = Some(k);
                    g.release().map(Running::Plain)
                }
                Err(tracefs_err) => {
                    g.cancel();
                    if with_probes {
                        let _ = c.call(Command::Destroy { session });
                        return Err(Failure::new("the probes could not be placed (above): the command was not run"));
                    }
                    kernel = view::start_perf(out, &tracefs_err, &syscalls);
                    syscall_view::spawn(command(), kernel.as_mut())
                }
            },
        },
        _ => command().spawn().map(Running::Plain),
    };
    let mut traced_pid = 0;
    let mut maps = None;
    let ran = child.is_ok();
    let mut syscall_summary = None;
    let code = match child {
        Err(e) => {
            eprintln!("ust: cannot run {}: {e}", prog.to_string_lossy());
            ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 })
        }
        Ok(mut child) => {
            traced_pid = child.id();
            // The memory maps are kept beside a local trace for `ust report`; a streamed
            // trace is on the relay's machine.
            if out.is_some() {
                maps = Some(crate::kernel::procfs::MapsSampler::start(traced_pid, Duration::from_millis(10)));
            }
            if a.snapshot {
                eprintln!(
                    "ust: flight recorder: session {name} writes a snapshot when the command ends, on `kill -USR1 {}` and on `ust snapshot record -s {name}`",
                    std::process::id()
                );
            }
            let code = wait_forwarding(&mut child, &mut || {
                if let Some(r) = take_snapshot(&mut c, &session) {
                    eprintln!("ust: snapshot written to {} ({} process(es), {} packets)", r.dir.display(), r.processes, r.packets);
                }
            });
            syscall_summary = child.finish();
            code
        }
    };
    untraced(&mut c, &session);
    let last_snapshot = if a.snapshot && ran { take_snapshot(&mut c, &session) } else { None };
    let report = match c.call(Command::Destroy { session: session.clone() }) {
        Ok(Payload::Destroyed(r)) => Some(r),
        Ok(_) => None,
        // The first connection may have been closed under us; try a fresh one.
        Err(_) => match connect().and_then(|mut c| c.call(Command::Destroy { session }).map_err(Failure::from)) {
            Ok(Payload::Destroyed(r)) => Some(r),
            Ok(_) => None,
            Err(e) => {
                eprintln!("ust: destroying the trace session failed: {}", e.message);
                None
            }
        },
    };
    finish_kernel(kernel, syscall_summary, maps, out.as_ref(), traced_pid);
    for m in super::probes::changed(&probed_files) {
        eprintln!("ust: {m}");
    }
    if let Some(m) = out.as_ref().and_then(TraceDir::replaced) {
        eprintln!("ust: {m}");
    }
    let Some(mut report) = report else {
        // Still exit with the command's status: the trace may be incomplete, the run is not.
        eprintln!("ust: the trace in {} may be incomplete", output.display());
        return Ok(code);
    };
    if !ran {
        // The error said it all; an output directory of our choosing holds nothing (removed
        // as its owner: never as root by a path a user controls).
        if a.output.is_none() {
            let _ = ust_ctf::outdir::as_owner(out.as_ref().and_then(TraceDir::owner), || std::fs::remove_dir(&output));
        }
        return Ok(code);
    }
    if let Some((url, path)) = &report.relay {
        eprintln!("ust: trace streamed to {url}; the relay daemon wrote it in {path} under its output directory");
        print_summary(&report);
        return Ok(code);
    }
    if a.snapshot {
        match last_snapshot {
            Some(snap) => {
                eprintln!("ust: snapshot written to {}", snap.dir.display());
                print_summary(&in_snapshot(report, &snap.dir));
            }
            None => eprintln!("ust: no snapshot written to {}", output.display()),
        }
        return Ok(code);
    }
    // Where the trace is: the output directory, or the directory that was there if its
    // path was replaced meanwhile (said above).
    let now = out.as_ref().filter(|o| o.replaced().is_some()).and_then(TraceDir::now_at);
    let shown = now.as_deref().unwrap_or(&output);
    if report.traces.is_empty() && !out.as_ref().is_some_and(a_kernel_trace) {
        eprintln!("ust: no trace written to {}: the command ran no instrumented process", shown.display());
    } else {
        eprintln!("ust: trace written to {}", shown.display());
    }
    // The summary reads the trace back there, with the rights of whoever it belongs to.
    if let Some(now) = &now {
        for t in &mut report.traces {
            if let Ok(rel) = t.dir.strip_prefix(&output) {
                t.dir = now.join(rel);
            }
        }
    }
    let _ = ust_ctf::outdir::as_owner(out.as_ref().and_then(TraceDir::owner), || {
        print_summary(&report);
        Ok(())
    });
    Ok(code)
}

/// Makes and opens the output directory `output` as `identity` (`None`: as
/// [`TraceDir::create`] finds the owner).
fn open_output(output: &std::path::Path, identity: Option<&super::as_user::Identity>) -> Result<TraceDir, Failure> {
    TraceDir::create(output, identity.map(super::as_user::Identity::owner)).map_err(|e| {
        Failure::new(match identity {
            Some(id) => format!(
                "cannot make the output directory {} as {} (the trace is theirs, and written as them: choose an --output they may write): {e}",
                output.display(),
                id.name
            ),
            None => format!("cannot make the output directory {}: {e}", output.display()),
        })
    })
}

/// Says on stderr which processes the session could not trace, and why (a trace
/// directory refused, out of descriptors, …), before it is destroyed.
fn untraced(c: &mut ust_ctl::client::Client, session: &Option<String>) {
    if let Ok(Payload::Session(d)) = c.call(Command::ListSession { session: session.clone() }) {
        for u in &d.untraced {
            eprintln!("ust: process {} ({}) was not traced: {}", u.pid, u.procname, u.reason);
        }
    }
}

/// `ust snapshot record` of the trace session (on a fresh connection when the first one
/// was closed); a failure is printed.
fn take_snapshot(c: &mut ust_ctl::client::Client, session: &Option<String>) -> Option<ust_ctl::protocol::SnapshotReport> {
    let cmd = || Command::SnapshotRecord { session: session.clone(), max_size: None };
    let r = c.call(cmd()).map_err(Failure::from).or_else(|_| connect().and_then(|mut c| c.call(cmd()).map_err(Failure::from)));
    match r {
        Ok(Payload::Snapshot(s)) => Some(s),
        Ok(_) => None,
        Err(e) => {
            eprintln!("ust: the snapshot failed: {}", e.message);
            None
        }
    }
}

/// True when `kernel/metadata` exists in the output (a kernel trace was written).
fn a_kernel_trace(out: &TraceDir) -> bool {
    out.existing(crate::kernel::KERNEL_DIR).and_then(|k| k.open_file("metadata", false)).is_ok()
}

/// `report` with each trace's directory where the snapshot in `snapshot` holds it (the
/// same path relative to the session's output), to count the snapshot's events.
fn in_snapshot(mut report: ust_ctl::protocol::DestroyReport, snapshot: &std::path::Path) -> ust_ctl::protocol::DestroyReport {
    for t in &mut report.traces {
        if let Ok(rel) = t.dir.strip_prefix(&report.output) {
            t.dir = snapshot.join(rel);
        }
    }
    report.snapshot = false;
    report
}

/// Ends the kernel recording (after the user-space traces are written, so the kernel
/// metadata takes their clock offset), with what tier 1's system-call recorder wrote
/// (`syscalls`, already finished), and saves the sampled memory maps.
fn finish_kernel(
    kernel: Option<crate::kernel::view::KernelView>,
    syscalls: Option<crate::kernel::ptrace::SyscallSummary>,
    maps: Option<crate::kernel::procfs::MapsSampler>,
    out: Option<&TraceDir>,
    pid: i32,
) {
    let Some(out) = out else { return };
    if let Some(m) = maps {
        if let (_, Some(e)) = m.finish(out) {
            eprintln!("ust: the memory maps of the traced processes were not all saved: {e}");
        }
    }
    if let Some(k) = kernel {
        match k.finish(out, pid) {
            Ok(mut s) => {
                if let Some(sys) = &syscalls {
                    crate::kernel::syscall_view::add_to_summary(&mut s, sys);
                }
                let total: u64 = s.counts.iter().map(|c| c.1).sum();
                eprintln!("ust: {total} kernel events recorded in {}, {} lost", s.dir.display(), s.lost);
                if s.decoded > 0 {
                    let rate = s.decoded as f64 / (s.reader_cpu_ns.max(1) as f64 / 1e9);
                    eprintln!(
                        "ust: kernel reader: {} records decoded in {:.1} ms of CPU ({:.0}/s), system-wide tracefs buffers of {} KiB per CPU",
                        s.decoded,
                        s.reader_cpu_ns as f64 / 1e6,
                        rate,
                        s.buffer_kb
                    );
                }
                if !s.missing_events.is_empty() {
                    eprintln!("ust: kernel events this kernel lacks: {}", s.missing_events.join(", "));
                }
                // Said once, from the trace's metadata (tier 2's capture runs in root's daemon).
                if let Some(n) = ust_analysis::report::call_text::trace_capture_note(&out.path()) {
                    eprintln!("ust: {n}");
                }
                print_kernel_loss(&out.path(), s.lost);
            }
            Err(e) => eprintln!("ust: kernel trace: {e}"),
        }
    }
}

/// What the kernel trace lost and what of the traced tree that touches, as the report's
/// first lines say it ([`ust_analysis::report::loss`]); the trace is read only when the
/// recorder counted a loss.
fn print_kernel_loss(output: &std::path::Path, lost: u64) {
    use ust_analysis::report::{self, loss};
    let text = if lost == 0 {
        loss::text(&loss::KernelLoss::default(), 0)
    } else {
        match report::report(output, &report::Options::default()) {
            Ok(r) => r.kernel_loss.as_ref().map(|k| loss::text(k, r.start_ns)).unwrap_or_default(),
            Err(e) => format!("{lost} kernel events lost; the trace could not be read to say where: {e}\n"),
        }
    };
    for l in text.lines() {
        eprintln!("ust: {l}");
    }
}

/// Waits for `child`, forwarding the signals [`trace_on_signal`] recorded, and running
/// `on_usr1` for each SIGUSR1 [`snapshot_on_signal`] recorded.
fn wait_forwarding(child: &mut crate::kernel::syscall_view::Running, on_usr1: &mut dyn FnMut()) -> ExitCode {
    let mut forwarded = 0;
    loop {
        if SNAPSHOT_SIGNAL.swap(false, std::sync::atomic::Ordering::SeqCst) {
            on_usr1();
        }
        match child.try_wait() {
            Ok(Some(st)) => return exit_code_of(st),
            Ok(None) => {}
            Err(e) => {
                eprintln!("ust: waiting for the command failed: {e}");
                return ExitCode::from(1);
            }
        }
        let sig = TRACE_SIGNAL.swap(0, std::sync::atomic::Ordering::SeqCst);
        if sig != 0 {
            forwarded += 1;
            let named = rustix::process::Signal::from_named_raw(sig).unwrap_or(rustix::process::Signal::TERM);
            let sig = if forwarded >= 3 { rustix::process::Signal::KILL } else { named };
            if let Some(pid) = rustix::process::Pid::from_raw(child.id()) {
                // The child may have exited meanwhile (try_wait reaps it next round).
                let _ = rustix::process::kill_process(pid, sig);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
