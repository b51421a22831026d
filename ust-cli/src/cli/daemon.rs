//! `ust daemon start|stop|status`: the per-user `ust-consumerd` as something a user can see
//! and end. `ust create` and `ust trace` start it when none runs (as `lttng create` spawns
//! `lttng-sessiond`) and it then stays, serving later commands and the programs that
//! register with it; `ust daemon stop` ends it (SIGTERM: it destroys its sessions, writing
//! their traces, and removes its sockets), refusing while it holds sessions unless
//! `--force`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use ust_ctl::protocol::{Command, Payload};

use super::connect::{connect_or_start, rundir, unexpected, Failure};
use crate::out::outln;

type CliResult = Result<ExitCode, Failure>;

/// The exit status of `ust daemon status` when no daemon runs (LSB's "program is not
/// running", as `systemctl status` exits).
pub const NOT_RUNNING: u8 = 3;

/// Longest wait for a stopped daemon to close its socket.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// `ust daemon ...`.
#[derive(Debug, Subcommand)]
pub enum DaemonCmd {
    /// Start ust-consumerd for this user (or root's system-wide one, as root) when none runs.
    #[command(after_help = "Examples:
  ust daemon start
  UST_RUNDIR=/tmp/ust ust daemon start      # a daemon of its own socket directory")]
    Start,
    /// Stop this user's ust-consumerd: it destroys its sessions (writing their traces) and
    /// exits; refused while it holds sessions, unless --force.
    #[command(after_help = "Examples:
  ust daemon stop
  ust daemon stop --force                   # even with sessions: they are destroyed")]
    Stop(StopArgs),
    /// Say whether ust-consumerd runs: its pid, socket directory, sessions and registered
    /// processes (exit status 3 when none runs).
    #[command(after_help = "Examples:
  ust daemon status
  ust daemon status && echo running")]
    Status,
}

/// `ust daemon stop`.
#[derive(Debug, Args)]
pub struct StopArgs {
    /// Stop it even while it holds sessions (they are destroyed, their traces written).
    #[arg(long)]
    pub force: bool,
}

/// Runs `ust daemon ...`.
///
/// # Errors
/// A [`Failure`]: the daemon cannot be started, reached or stopped.
pub fn daemon(cmd: DaemonCmd) -> CliResult {
    match cmd {
        DaemonCmd::Start => start(),
        DaemonCmd::Stop(a) => stop(a),
        DaemonCmd::Status => status(),
    }
}

/// What the running daemon says of itself: (pid, sessions, registered processes).
fn describe(c: &mut ust_ctl::Client) -> Result<(u32, Vec<String>, usize), Failure> {
    let Payload::Pong { pid, .. } = c.call(Command::Ping)? else { return Err(unexpected()) };
    let Payload::Sessions(s) = c.call(Command::ListSessions)? else { return Err(unexpected()) };
    let Payload::Apps(a) = c.call(Command::ListApps)? else { return Err(unexpected()) };
    Ok((pid, s.into_iter().map(|s| s.name).collect(), a.len()))
}

fn start() -> CliResult {
    let dir = rundir()?;
    let was = ust_ctl::Client::connect(&dir).is_ok();
    let mut c = connect_or_start()?;
    let (pid, sessions, apps) = describe(&mut c)?;
    let how = if was { "already running" } else { "started" };
    outln!("ust-consumerd {how} (pid {pid}, socket directory {}): {} session(s), {apps} registered process(es)", dir.display(), sessions.len());
    Ok(ExitCode::SUCCESS)
}

fn status() -> CliResult {
    let dir = rundir()?;
    let Ok(mut c) = ust_ctl::Client::connect(&dir) else {
        outln!("ust-consumerd is not running (socket directory {})", dir.display());
        return Ok(ExitCode::from(NOT_RUNNING));
    };
    let (pid, sessions, apps) = describe(&mut c)?;
    outln!("ust-consumerd is running (pid {pid}, socket directory {})", dir.display());
    outln!("Sessions: {}", if sessions.is_empty() { "none".to_string() } else { sessions.join(", ") });
    outln!("Registered processes: {apps}");
    Ok(ExitCode::SUCCESS)
}

/// True while process `p` exists and has not exited (a zombie, whose parent has not
/// reaped it yet, has exited).
fn alive(p: rustix::process::Pid) -> bool {
    match std::fs::read_to_string(format!("/proc/{}/stat", p.as_raw_nonzero())) {
        // The state follows the command name, which is in parentheses and may hold any byte.
        Ok(stat) => stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()) != Some("Z"),
        Err(_) => rustix::process::test_kill_process(p).is_ok(),
    }
}

fn stop(a: StopArgs) -> CliResult {
    let dir = rundir()?;
    let Ok(mut c) = ust_ctl::Client::connect(&dir) else {
        outln!("ust-consumerd is not running (socket directory {})", dir.display());
        return Ok(ExitCode::SUCCESS);
    };
    let (pid, sessions, _) = describe(&mut c)?;
    drop(c);
    if !sessions.is_empty() && !a.force {
        return Err(Failure::new(format!(
            "ust-consumerd (pid {pid}) holds {} session(s): {}; `ust destroy` them first, or `ust daemon stop --force` destroys them (their traces are written)",
            sessions.len(),
            sessions.join(", ")
        )));
    }
    let p = rustix::process::Pid::from_raw(pid as i32).ok_or_else(unexpected)?;
    rustix::process::kill_process(p, rustix::process::Signal::TERM).map_err(|e| Failure::new(format!("cannot stop ust-consumerd (pid {pid}): {e}")))?;
    // Gone when the process is: its sessions are destroyed and its sockets removed by then.
    let deadline = Instant::now() + STOP_WAIT;
    while alive(p) {
        if Instant::now() >= deadline {
            return Err(Failure::new(format!("ust-consumerd (pid {pid}) still runs {} s after SIGTERM", STOP_WAIT.as_secs())));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if sessions.is_empty() {
        outln!("ust-consumerd (pid {pid}) stopped");
    } else {
        outln!("ust-consumerd (pid {pid}) stopped; sessions destroyed: {}", sessions.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}
