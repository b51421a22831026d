//! The `ust` command, in the spirit of `lttng` (DESIGN.md, "Interfaces": a contract).
//!
//! Every session command talks to the per-user daemon over the `ctl` socket
//! ([`crate::control::Client`]); `create` and `trace` start the daemon when none runs
//! (`ust-consumerd --daemonize`, found next to this executable, else in `PATH`), other
//! commands say that none runs and how to start one (exit 1). Argument errors print usage
//! and exit 2 (clap's convention); other errors print `ust: <message>` and exit 1.

// The argument docs below are also the `--help` texts, written for a terminal:
// `<name>` there is a placeholder, not HTML.
#![allow(rustdoc::invalid_html_tags)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{ArgGroup, Args, Parser, Subcommand};
use ust_core::Level;

use crate::control::{AppInfo, Client, ClientError, Command, CreateOptions, DestroyReport, Payload, SessionDetail, SessionSummary, StatusReport};
use crate::session::{ChannelConfig, LevelFilter, DEFAULT_NUM_SUBBUF, DEFAULT_READ_TIMER_US, DEFAULT_SUBBUF_SIZE, DEFAULT_SWITCH_TIMER_US};

/// `ust`: control user-space tracing of Rust programs.
#[derive(Debug, Parser)]
#[command(
    name = "ust",
    version,
    about = "Trace Rust programs: sessions, channels, events (in the spirit of lttng)",
    arg_required_else_help = true,
    after_help = "Examples:\n  ust trace -- ./myprog args          # one shot: trace a command, print a summary\n  ust create s && ust enable-event -a && ust start   # step by step, as with lttng\n  ust stop && ust view && ust destroy\n\nRun `ust <command> --help` for each command's options and examples."
)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Cmd,
}

/// Session selection shared by session commands.
#[derive(Debug, Args, Clone, Default)]
pub struct SessionOpt {
    /// Session to act on (default: the current session).
    #[arg(short = 's', long = "session", value_name = "NAME")]
    pub session: Option<String>,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Create a session; it becomes the current session.
    #[command(after_help = "Examples:
  ust create                                  # auto-YYYYmmdd-HHMMSS, output under ~/ust-traces/
  ust create web --output /tmp/web-trace      # named session, chosen output directory

The new session becomes the current one: later commands act on it unless given -s NAME.
Starts ust-consumerd when none runs.")]
    Create(CreateArgs),
    /// Create a channel (per-CPU buffers) in a session.
    #[command(after_help = "Examples:
  ust enable-channel big --subbuf-size 1M --num-subbuf 8
  ust enable-channel ring --overwrite --switch-timer 100000      # flight recorder
  ust enable-channel chunked --subbuf-size 64k --tracefile-size 1M --tracefile-count 4

With --tracefile-size, stream files are <channel>_<cpu>_<k> (k from 0), each holding whole
packets and its own index; --tracefile-count keeps the newest N and removes older ones.
Channels cannot be added or changed after the session starts (as in LTTng).")]
    EnableChannel(EnableChannelArgs),
    /// Enable events (globs on provider:name) in a channel.
    #[command(after_help = "Examples:
  ust enable-event -a                                   # every event, channel channel0
  ust enable-event 'myapp:*' --loglevel WARNING         # WARNING and more severe
  ust enable-event 'myapp:*' --exclude 'myapp:noisy*,myapp:tick'
  ust enable-event myapp:request --filter 'status >= 500 && path == \"/api/*\"'
  ust enable-event -c big 'db:*' --filter '$ctx.vtid == 1234 || latency_us > 1.5e3'

Filter language (LTTng's): comparisons == != < <= > >= between event fields, $ctx.vpid,
$ctx.vtid, $ctx.procname, $ctx.pthread_id, $ctx.cpu_id, $ctx.ip and literals (integers: decimal,
0x hexadecimal, 0 octal; floats; \"strings\" where * matches anything and \\* is a star),
combined with && || ! and parentheses; a bare number or field is true when non-zero.
Strings compare with == and != only. A filter naming a field an event lacks is false for
that event. Several enable-event rules that match an event OR together.")]
    EnableEvent(EnableEventArgs),
    /// Add context fields (vpid, vtid, procname, pthread_id, cpu_id, ip) to a channel's events.
    #[command(after_help = "Examples:
  ust add-context -t vtid -t procname              # every channel of the session
  ust add-context -c big -t vpid -t pthread_id -t cpu_id
  ust add-context -t ip -t vpid                    # then: babeltrace2 --debug-info DIR

The values are written after the event header of every record of the channel (a CTF
event context); babeltrace2 prints them between the packet context and the payload.
`ip` is the address of the tracepoint's call site (hex); with `vpid` and the state dump
(`ust enable-event -a`, or 'lttng_ust_statedump:*'), `babeltrace2 --debug-info` shows the
binary, function and source line of every event, as for LTTng traces.
Contexts cannot be added after the session starts.")]
    AddContext(AddContextArgs),
    /// Disable events enabled earlier.
    #[command(after_help = "Examples:
  ust disable-event 'myapp:*'        # the rule made by `ust enable-event 'myapp:*'`
  ust disable-event -c big -a        # every rule of channel big")]
    DisableEvent(DisableEventArgs),
    /// Record only some processes, by process ID (LTTng's `lttng track --userspace --vpid`).
    #[command(after_help = "Examples:
  ust track --vpid 1234               # record process 1234 only (until now: every process)
  ust track --vpid 1234,5678 -s web   # add processes to the list of session web
  ust track --vpid --all              # record every process again (the default)

A session records every process until the first `ust track --vpid PID`; from then on only
the processes listed. `ust untrack --vpid PID` removes one from the list, `ust untrack
--vpid --all` empties it (nothing recorded). Changes apply at once, before or after
`ust start`, to processes running now and to those that start later; an untracked process
gets no events recorded for the session. `ust list SESSION` shows the tracked process IDs.")]
    Track(TrackArgs),
    /// Stop recording some processes, by process ID (LTTng's `lttng untrack --userspace
    /// --vpid`).
    #[command(after_help = "Examples:
  ust untrack --vpid 1234             # stop recording process 1234 (tracked with ust track)
  ust untrack --vpid 1234,5678 -s web
  ust untrack --vpid --all            # record no process at all (until ust track)

Removes processes from the list made by `ust track --vpid`; when `ust untrack` returns,
they record nothing more for the session (what they recorded before stays in the trace).
A session that records every process has no list to remove from: make one with
`ust track --vpid PID,...`, or use `--all`.")]
    Untrack(TrackArgs),
    /// Start recording.
    #[command(after_help = "Examples:
  ust start              # the current session
  ust start web          # or: ust start -s web")]
    Start(SessionCmdArgs),
    /// Stop recording; what was recorded is on disk when it returns.
    #[command(after_help = "Examples:
  ust stop
  ust stop -s web

Every process of the session confirms the stop, then every buffer is flushed and drained.")]
    Stop(SessionCmdArgs),
    /// Stop (if needed) and forget a session; its trace stays on disk.
    #[command(after_help = "Examples:
  ust destroy
  ust destroy web

The trace stays on disk; read it with `ust view DIR` or `babeltrace2 DIR`.")]
    Destroy(SessionCmdArgs),
    /// Archive the trace so far as a complete trace under <output>/archives/; tracing goes on.
    #[command(after_help = "Examples:
  ust rotate                 # archive the current session's trace so far
  ust rotate -s web

Each rotation moves the trace recorded since the previous one (or since start) to
<output>/archives/<begin>-<end>-<n>/, a complete trace that babeltrace2 reads, while
recording goes on. Destroying a rotated session archives the last chunk too.")]
    Rotate(SessionCmdArgs),
    /// List sessions, one session's channels and events, or registered applications.
    #[command(after_help = "Examples:
  ust list                   # sessions
  ust list web               # channels, rules, contexts, counts of session web
  ust list --apps            # registered processes, their tracepoints and fields
  ust list --apps --json")]
    List(ListArgs),
    /// Show the current session (or -s) and the daemon.
    #[command(after_help = "Examples:
  ust status
  ust status -s web --json")]
    Status(StatusArgs),
    /// Print a trace with babeltrace2 (default: the current session's output).
    #[command(after_help = "Examples:
  ust view                       # the current session's output
  ust view ~/ust-traces/web-20260101-120000")]
    View(ViewArgs),
    /// Trace one command and its children, then print a summary.
    #[command(after_help = "Examples:
  ust trace -- ./server --port 8080
  ust trace --output /tmp/t --event 'myapp:*' -- cargo run --release

Only CMD and its children are traced; prints `ust: trace written to DIR` and a summary of
the events recorded, and exits with CMD's status (128+N if it died of signal N).")]
    Trace(TraceArgs),
    /// Report on a trace: tasks, system calls, waits and wake-ups, page faults.
    #[command(after_help = "Examples:
  ust report /tmp/t                         # tasks, system calls, blocked time
  ust report /tmp/t --wakeups --min-block 5ms
  ust report /tmp/t --faults --format json

DIR is the output of `ust trace` (with --kernel for the kernel part); on a trace without
kernel events it reports the program's own events per name and per thread.")]
    Report(ReportArgs),
    /// Snapshot sessions: `ust snapshot record` writes the buffers' content.
    #[command(subcommand, after_help = "Examples:
  ust create fr --snapshot && ust enable-event -a && ust start
  ust snapshot record                      # <output>/snapshot-<N>-<YYYYmmdd-HHMMSS>/ust/pid/...
  ust snapshot record -s fr --max-size 64M # newest packets, 64 MiB in all")]
    Snapshot(SnapshotCmd),
    /// Rebuild CTF traces from the buffer files a `--shm-path` session left behind, after
    /// both the application and the daemon are gone (LTTng's `lttng-crash`).
    #[command(after_help = "Examples:
  ust create c --shm-path /dev/shm/ust && ust enable-event -a && ust start
  ust crash-dump /dev/shm/ust /tmp/recovered   # after the program and the daemon died
  babeltrace2 /tmp/recovered")]
    CrashDump(CrashDumpArgs),
}

/// `ust snapshot ...`.
#[derive(Debug, Subcommand)]
pub enum SnapshotCmd {
    /// Write the current content of every buffer of a snapshot session as a CTF trace
    /// under `<output>/snapshot-<N>-<YYYYmmdd-HHMMSS>/`, without stopping tracing (as
    /// `lttng snapshot record`).
    #[command(after_help = "Examples:
  ust snapshot record
  ust snapshot record -s fr --max-size 64M     # the total, split between the per-CPU streams")]
    Record(SnapshotRecordArgs),
}

/// `ust snapshot record`.
#[derive(Debug, Args)]
pub struct SnapshotRecordArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub session: SessionOpt,
    /// Write at most this many bytes in total (k, M, G suffixes), split evenly between
    /// the streams, keeping the newest packets of each.
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub max_size: Option<u64>,
}

/// `ust crash-dump`.
#[derive(Debug, Args)]
pub struct CrashDumpArgs {
    /// The `--shm-path` directory (searched recursively for buffer sets).
    pub shm_dir: PathBuf,
    /// Where to write `ust/pid/<procname>-<pid>-<stamp>/` for every buffer set found.
    pub out_dir: PathBuf,
}

/// `ust create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Session name (default: auto-YYYYmmdd-HHMMSS).
    pub name: Option<String>,
    /// Output directory (default: $HOME/ust-traces/<name>-<YYYYmmdd-HHMMSS>/).
    #[arg(short = 'o', long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Snapshot (flight-recorder) session: channels default to overwrite mode, nothing is
    /// written until `ust snapshot record`, and a process that dies abnormally leaves a
    /// post-mortem trace under `<output>/post-mortem/`.
    #[arg(long)]
    pub snapshot: bool,
    /// Keep the buffers as files (and a plain-text metadata file per process) under
    /// DIR/<session>-<YYYYmmdd-HHMMSS>/ so that `ust crash-dump` can rebuild the trace
    /// after both the application and the daemon died.
    #[arg(long, value_name = "DIR")]
    pub shm_path: Option<PathBuf>,
    /// Trace clock: `monotonic`, or `tsc` (invariant TSC, calibrated against
    /// CLOCK_MONOTONIC; falls back to monotonic without one). Default: each process's
    /// UST_CLOCK, else monotonic.
    #[arg(long, value_name = "CLOCK", value_parser = parse_clock)]
    pub clock: Option<ust_core::clock::ClockKind>,
}

fn parse_clock(s: &str) -> Result<ust_core::clock::ClockKind, String> {
    ust_core::clock::ClockKind::parse(s).ok_or_else(|| format!("unknown clock {s:?}: use monotonic or tsc"))
}

/// `ust enable-channel`.
#[derive(Debug, Args)]
pub struct EnableChannelArgs {
    /// Channel name.
    pub name: String,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub session: SessionOpt,
    /// User-space domain (accepted; the only domain).
    #[arg(short = 'u', long = "userspace")]
    pub userspace: bool,
    /// Sub-buffer size in bytes, a power of two (k, M, G suffixes).
    #[arg(long, value_name = "N", value_parser = parse_subbuf_size)]
    pub subbuf_size: Option<u64>,
    /// Number of sub-buffers per CPU, a power of two (at least 2).
    #[arg(long, value_name = "N", value_parser = parse_num_subbuf)]
    pub num_subbuf: Option<u32>,
    /// Overwrite the oldest packets when full (flight recorder).
    #[arg(long, conflicts_with = "discard")]
    pub overwrite: bool,
    /// Discard new events when full (the default).
    #[arg(long)]
    pub discard: bool,
    /// Switch-timer period in µs (0 = off).
    #[arg(long, value_name = "US")]
    pub switch_timer: Option<u64>,
    /// Read-timer period in µs.
    #[arg(long, value_name = "US")]
    pub read_timer: Option<u64>,
    /// Start a new stream file (<channel>_<cpu>_<k>) before one would exceed B bytes
    /// (k, M, G suffixes; at least the sub-buffer size: files hold whole packets).
    #[arg(long, value_name = "B", value_parser = parse_size)]
    pub tracefile_size: Option<u64>,
    /// Keep at most N files per stream, removing the oldest (needs --tracefile-size).
    #[arg(long, value_name = "N")]
    pub tracefile_count: Option<u64>,
}

/// `ust enable-event`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).args(["all", "names"])))]
pub struct EnableEventArgs {
    /// Event names or globs (`provider:name`, `*` anywhere), comma-separated or repeated.
    #[arg(value_delimiter = ',', value_name = "GLOB")]
    pub names: Vec<String>,
    /// Every event.
    #[arg(short = 'a', long)]
    pub all: bool,
    /// Channel (default: channel0, created with defaults if missing).
    #[arg(short = 'c', long, value_name = "CHANNEL")]
    pub channel: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub session: SessionOpt,
    /// User-space domain (accepted; the only domain).
    #[arg(short = 'u', long = "userspace")]
    pub userspace: bool,
    /// Events of level L or more severe (number <= L).
    #[arg(long, value_name = "L", value_parser = parse_level, conflicts_with = "loglevel_only")]
    pub loglevel: Option<Level>,
    /// Events of level L only.
    #[arg(long, value_name = "L", value_parser = parse_level)]
    pub loglevel_only: Option<Level>,
    /// Do not enable these events (names or globs, comma-separated); needs a glob event
    /// name.
    #[arg(short = 'x', long, value_name = "NAME,...", value_delimiter = ',')]
    pub exclude: Vec<String>,
    /// Record only events for which EXPR is true (LTTng's filter language; see below).
    #[arg(short = 'f', long, value_name = "EXPR")]
    pub filter: Option<String>,
}

/// `ust add-context`.
#[derive(Debug, Args)]
pub struct AddContextArgs {
    /// Channel (default: every channel of the session; channel0 is created if there is none).
    #[arg(short = 'c', long, value_name = "CHANNEL")]
    pub channel: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub session: SessionOpt,
    /// User-space domain (accepted; the only domain).
    #[arg(short = 'u', long = "userspace")]
    pub userspace: bool,
    /// Context type: vpid, vtid, procname, pthread_id, cpu_id or ip (repeatable).
    #[arg(short = 't', long = "type", value_name = "TYPE", required = true, value_parser = parse_context)]
    pub types: Vec<ust_core::context::ContextType>,
}

fn parse_context(s: &str) -> Result<ust_core::context::ContextType, String> {
    ust_core::context::ContextType::parse(s).ok_or_else(|| format!("{s:?} is not a context type (vpid, vtid, procname, pthread_id, cpu_id, ip)"))
}

/// `ust disable-event`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).args(["all", "names"])))]
pub struct DisableEventArgs {
    /// Event names or globs as given to enable-event, comma-separated or repeated.
    #[arg(value_delimiter = ',', value_name = "GLOB")]
    pub names: Vec<String>,
    /// Every enabled event of the channel.
    #[arg(short = 'a', long)]
    pub all: bool,
    /// Channel (default: channel0).
    #[arg(short = 'c', long, value_name = "CHANNEL")]
    pub channel: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub session: SessionOpt,
    /// User-space domain (accepted; the only domain).
    #[arg(short = 'u', long = "userspace")]
    pub userspace: bool,
}

/// `ust track` and `ust untrack`.
#[derive(Debug, Args)]
pub struct TrackArgs {
    /// Process IDs (comma-separated or repeated); give `--vpid` alone with `--all`.
    #[arg(long, value_name = "PID[,PID...]", num_args = 0..=1, value_delimiter = ',', value_parser = parse_pid, required = true)]
    pub vpid: Option<Vec<i32>>,
    /// Every process: `track --vpid --all` records every process (the default),
    /// `untrack --vpid --all` none.
    #[arg(short = 'a', long)]
    pub all: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub session: SessionOpt,
    /// User-space domain (accepted; the only domain).
    #[arg(short = 'u', long = "userspace")]
    pub userspace: bool,
}

fn parse_pid(s: &str) -> Result<i32, String> {
    match s.trim().parse::<i32>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("{s:?} is not a process ID (a positive integer, at most {})", i32::MAX)),
    }
}

/// `ust start|stop|destroy`.
#[derive(Debug, Args)]
pub struct SessionCmdArgs {
    /// Session (default: the current session).
    #[arg(value_name = "SESSION", conflicts_with = "session")]
    pub name: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub session: SessionOpt,
}

impl SessionCmdArgs {
    fn target(&self) -> Option<String> {
        self.name.clone().or_else(|| self.session.session.clone())
    }
}

/// `ust list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Show this session's channels, events and counts.
    #[arg(value_name = "SESSION", conflicts_with = "apps")]
    pub name: Option<String>,
    /// List registered applications, their tracepoints and fields.
    #[arg(long, short = 'u', alias = "userspace")]
    pub apps: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `ust status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub session: SessionOpt,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `ust view`.
#[derive(Debug, Args)]
pub struct ViewArgs {
    /// Trace directory (default: the current session's output).
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub session: SessionOpt,
}

/// `ust trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Output directory (default: $HOME/ust-traces/trace-<pid>-<YYYYmmdd-HHMMSS>/).
    #[arg(short = 'o', long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Enable only events matching GLOB (repeatable; default: every event).
    #[arg(short = 'e', long = "event", value_name = "GLOB")]
    pub events: Vec<String>,
    /// Also record kernel events (scheduling, interrupts, system calls, page faults) in
    /// DIR/kernel: system-wide with root or tracefs access; otherwise the traced tasks'
    /// switches, faults and user stacks through perf_event_open (no privilege needed).
    #[arg(long)]
    pub kernel: bool,
    /// The command to trace, after `--`.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// Parses a size with an optional `k`, `M` or `G` suffix (powers of 1024; `KiB`/`kB` forms
/// accepted): `4096`, `4k`, `1M`.
///
/// # Errors
/// A message for clap when it is not a size.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower.trim_end_matches("ib").trim_end_matches('b');
    let (num, mult) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1u64 << 10),
        Some('m') => (&body[..body.len() - 1], 1 << 20),
        Some('g') => (&body[..body.len() - 1], 1 << 30),
        _ => (body, 1),
    };
    let n: u64 = num.trim().parse().map_err(|_| format!("{s:?} is not a size (examples: 4096, 64k, 1M)"))?;
    n.checked_mul(mult).ok_or_else(|| format!("{s:?} is too large"))
}

fn parse_subbuf_size(s: &str) -> Result<u64, String> {
    let n = parse_size(s)?;
    if !n.is_power_of_two() || n < crate::session::MIN_SUBBUF_SIZE {
        return Err(format!("{n} is not a power of two of at least {}", crate::session::MIN_SUBBUF_SIZE));
    }
    Ok(n)
}

fn parse_num_subbuf(s: &str) -> Result<u32, String> {
    let n: u32 = s.trim().parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !n.is_power_of_two() || !(2..=crate::session::MAX_NUM_SUBBUF).contains(&n) {
        return Err(format!("{n} is not a power of two between 2 and {}", crate::session::MAX_NUM_SUBBUF));
    }
    Ok(n)
}

fn parse_level(s: &str) -> Result<Level, String> {
    Level::parse(s).ok_or_else(|| format!("{s:?} is not a log level (0-14, or a name such as TRACE_WARNING, warning, debug_line)"))
}

/// A failure to report: the message and the exit code.
#[derive(Debug)]
pub struct Failure {
    /// Printed after `ust: `.
    pub message: String,
    /// Exit code.
    pub code: u8,
}

impl Failure {
    fn new(message: impl Into<String>) -> Failure {
        Failure { message: message.into(), code: 1 }
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        Failure::new(e.to_string())
    }
}

type CliResult = Result<ExitCode, Failure>;

/// Parses the arguments and runs the command; returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(c) => c,
        Err(f) => {
            eprintln!("ust: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// Runs a parsed command.
///
/// # Errors
/// A [`Failure`] to print.
pub fn run(cli: Cli) -> CliResult {
    match cli.command {
        Cmd::Create(a) => create(a),
        Cmd::EnableChannel(a) => enable_channel(a),
        Cmd::EnableEvent(a) => enable_event(a),
        Cmd::AddContext(a) => {
            let what: Vec<String> = a.types.iter().map(|t| t.to_string()).collect();
            call(Command::AddContext { session: a.session.session, channel: a.channel.clone(), contexts: a.types })?;
            let chan = a.channel.map_or_else(|| "every channel".to_string(), |c| format!("channel {c}"));
            for w in what {
                println!("UST context {w} added to {chan}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::DisableEvent(a) => disable_event(a),
        Cmd::Track(a) => track(a, true),
        Cmd::Untrack(a) => track(a, false),
        Cmd::Start(a) => {
            call(Command::Start { session: a.target() })?;
            println!("Tracing started for session {}", display_session(&a.target()));
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Stop(a) => {
            call(Command::Stop { session: a.target() })?;
            println!("Tracing stopped for session {}", display_session(&a.target()));
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Destroy(a) => {
            let Payload::Destroyed(r) = call(Command::Destroy { session: a.target() })? else { return Err(unexpected()) };
            println!("Session {} destroyed", r.name);
            println!("Trace written to {}", r.output.display());
            if let Some(e) = &r.output_error {
                println!("The trace is incomplete: its output stopped early ({e})");
            }
            for a in &r.archives {
                println!("Trace chunk archive: {}", a.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Rotate(a) => {
            let Payload::Rotated { archive } = call(Command::Rotate { session: a.target() })? else { return Err(unexpected()) };
            println!("Trace chunk archive for session {} is now readable at {}", display_session(&a.target()), archive.display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::List(a) => list(a),
        Cmd::Status(a) => status(a),
        Cmd::View(a) => view(a),
        Cmd::Trace(a) => trace(a),
        Cmd::Report(a) => report(a),
        Cmd::Snapshot(SnapshotCmd::Record(a)) => snapshot_record(a),
        Cmd::CrashDump(a) => crate::crash::run(&a.shm_dir, &a.out_dir),
    }
}

fn display_session(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "(current)".into())
}

fn unexpected() -> Failure {
    Failure::new("unexpected answer from ust-consumerd (mismatched versions?)")
}

fn rundir() -> Result<PathBuf, Failure> {
    ust_core::rundir::rundir().map_err(|e| Failure::new(e.to_string()))
}

/// Connects to the running daemon, or fails with the "none runs, start one" message.
fn connect() -> Result<Client, Failure> {
    let dir = rundir()?;
    Client::connect(&dir).map_err(|e| {
        if let ClientError::Denied { .. } = e {
            return Failure::new(e.to_string());
        }
        Failure::new(format!(
            "no ust-consumerd is running for this user (no answer on {}).\n\
             ust: start one with `ust-consumerd --daemonize`, or run `ust create`, which starts it",
            dir.join(ust_core::rundir::CTL_SOCKET).display()
        ))
    })
}

fn call(cmd: Command) -> Result<Payload, Failure> {
    Ok(connect()?.call(cmd)?)
}

/// Path of `ust-consumerd`: next to the running executable, else found in `PATH`.
pub fn consumerd_path() -> PathBuf {
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            let p = dir.join("ust-consumerd");
            if p.is_file() {
                return p;
            }
        }
    }
    PathBuf::from("ust-consumerd")
}

/// Connects to the daemon, starting `ust-consumerd --daemonize` first when none runs.
fn connect_or_start() -> Result<Client, Failure> {
    let dir = rundir()?;
    match Client::connect(&dir) {
        Ok(c) => return Ok(c),
        Err(e @ ClientError::Denied { .. }) => return Err(Failure::new(e.to_string())),
        Err(_) => {}
    }
    let bin = consumerd_path();
    let status = std::process::Command::new(&bin)
        .arg("--daemonize")
        .stdin(std::process::Stdio::null())
        .status()
        .map_err(|e| Failure::new(format!("cannot start {}: {e}; install ust-consumerd or put it in PATH", bin.display())))?;
    if !status.success() {
        return Err(Failure::new(format!("{} --daemonize failed ({status})", bin.display())));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match Client::connect(&dir) {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() >= deadline => return Err(Failure::new(format!("ust-consumerd started but does not answer: {e}"))),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn home() -> Result<PathBuf, Failure> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from).ok_or_else(|| Failure::new("HOME is not set; give --output"))
}

fn absolute(p: PathBuf) -> Result<PathBuf, Failure> {
    if p.is_absolute() {
        Ok(p)
    } else {
        let cwd = std::env::current_dir().map_err(|e| Failure::new(format!("current directory: {e}")))?;
        Ok(cwd.join(p))
    }
}

fn snapshot_record(a: SnapshotRecordArgs) -> CliResult {
    let Payload::Snapshot(r) = call(Command::SnapshotRecord { session: a.session.session, max_size: a.max_size })? else {
        return Err(unexpected());
    };
    println!("Snapshot recorded successfully");
    println!("Snapshot written to {} ({} process(es), {} packets, {} bytes)", r.dir.display(), r.processes, r.packets, r.bytes);
    Ok(ExitCode::SUCCESS)
}

fn create(a: CreateArgs) -> CliResult {
    let shm_path = a.shm_path.map(absolute).transpose()?;
    let stamp = crate::datetime::stamp();
    let name = a.name.unwrap_or_else(|| format!("auto-{stamp}"));
    crate::session::check_name("session", &name).map_err(Failure::new)?;
    let output = match a.output {
        Some(o) => absolute(o)?,
        None => home()?.join("ust-traces").join(format!("{name}-{stamp}")),
    };
    let mut c = connect_or_start()?;
    let Payload::Created { name, output } = c.call(Command::CreateSessionWith { name, output, options: CreateOptions { snapshot: a.snapshot, shm_path, clock: a.clock } })? else { return Err(unexpected()) };
    println!("{}{name} created.", if a.snapshot { "Snapshot session " } else { "Session " });
    println!("Traces will be written in {}", output.display());
    Ok(ExitCode::SUCCESS)
}

fn enable_channel(a: EnableChannelArgs) -> CliResult {
    let mut config = ChannelConfig {
        subbuf_size: a.subbuf_size.unwrap_or(DEFAULT_SUBBUF_SIZE),
        num_subbuf: a.num_subbuf.unwrap_or(DEFAULT_NUM_SUBBUF),
        overwrite: a.overwrite,
        switch_timer_us: a.switch_timer.unwrap_or(DEFAULT_SWITCH_TIMER_US),
        read_timer_us: a.read_timer.unwrap_or(DEFAULT_READ_TIMER_US),
        tracefile_size: a.tracefile_size.unwrap_or(0),
        tracefile_count: a.tracefile_count.unwrap_or(0),
    };
    config.validate().map_err(Failure::new)?;
    let mut c = connect()?;
    if !a.overwrite && !a.discard {
        // Neither mode given: the session's default (overwrite in a snapshot session, as
        // LTTng's snapshot sessions).
        if let Payload::Session(d) = c.call(Command::ListSession { session: a.session.session.clone() })? {
            config.overwrite = d.summary.snapshot;
        }
    }
    c.call(Command::EnableChannel { session: a.session.session, name: a.name.clone(), config })?;
    println!("UST channel {} enabled", a.name);
    Ok(ExitCode::SUCCESS)
}

fn enable_event(a: EnableEventArgs) -> CliResult {
    if let Some(f) = &a.filter {
        crate::filter::parse(f).map_err(|e| Failure { message: format!("invalid filter: {}", e.render(f)), code: 2 })?;
    }
    if !a.exclude.is_empty() && !a.all && !a.names.iter().any(|n| n.contains('*')) {
        return Err(Failure { message: "--exclude needs a glob event name (with `*`) or -a".into(), code: 2 });
    }
    let level = match (a.loglevel, a.loglevel_only) {
        (Some(l), _) => LevelFilter::UpTo(l),
        (None, Some(l)) => LevelFilter::Only(l),
        _ => LevelFilter::Any,
    };
    let patterns = if a.all { vec!["*".to_string()] } else { a.names.clone() };
    let channel = a.channel.clone();
    call(Command::EnableEvent {
        session: a.session.session,
        channel: a.channel,
        patterns: patterns.clone(),
        level,
        exclusions: a.exclude.clone(),
        filter: a.filter.clone(),
    })?;
    let chan = channel.unwrap_or_else(|| crate::session::DEFAULT_CHANNEL.into());
    let mut lv = if level == LevelFilter::Any { String::new() } else { format!(" ({})", level.describe()) };
    if !a.exclude.is_empty() {
        lv.push_str(&format!(" excluding {}", a.exclude.join(",")));
    }
    if let Some(f) = &a.filter {
        lv.push_str(&format!(" with filter \"{f}\""));
    }
    if a.all {
        println!("All UST events are enabled in channel {chan}{lv}");
    } else {
        for p in patterns {
            println!("UST event {p} created in channel {chan}{lv}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn disable_event(a: DisableEventArgs) -> CliResult {
    let chan = a.channel.clone().unwrap_or_else(|| crate::session::DEFAULT_CHANNEL.into());
    call(Command::DisableEvent { session: a.session.session, channel: a.channel, patterns: a.names.clone(), all: a.all })?;
    if a.all {
        println!("All UST events are disabled in channel {chan}");
    } else {
        for p in a.names {
            println!("UST event {p} disabled in channel {chan}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `ust track` (`track`) and `ust untrack`.
fn track(a: TrackArgs, track: bool) -> CliResult {
    let verb = if track { "track" } else { "untrack" };
    let pids = a.vpid.unwrap_or_default();
    if a.all && !pids.is_empty() {
        return Err(Failure { message: format!("{verb}: give process IDs (--vpid PID,...) or --vpid --all, not both"), code: 2 });
    }
    if !a.all && pids.is_empty() {
        return Err(Failure { message: format!("{verb}: --vpid needs process IDs (--vpid 1234,5678) or --all"), code: 2 });
    }
    let session = a.session.session;
    let cmd = if track {
        Command::TrackVpid { session, pids: pids.clone(), all: a.all }
    } else {
        Command::UntrackVpid { session, pids: pids.clone(), all: a.all }
    };
    let Payload::Tracker { session, tracker, unchanged } = call(cmd)? else { return Err(unexpected()) };
    if a.all {
        if track {
            println!("All process IDs are tracked in session {session}");
        } else {
            println!("No process ID is tracked in session {session}: nothing is recorded until `ust track`");
        }
    }
    for p in &pids {
        match (unchanged.contains(p), track) {
            (false, true) => println!("Process ID {p} tracked in session {session}"),
            (false, false) => println!("Process ID {p} untracked in session {session}"),
            (true, true) => eprintln!("ust: warning: process ID {p} is already tracked in session {session}"),
            (true, false) => eprintln!("ust: warning: process ID {p} is not tracked in session {session}"),
        }
    }
    println!("Tracked process IDs: {}", tracker.describe());
    Ok(ExitCode::SUCCESS)
}

fn print_json<T: serde::Serialize>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_else(|_| "null".into()));
}

fn list(a: ListArgs) -> CliResult {
    let mut c = connect()?;
    if a.apps {
        let Payload::Apps(apps) = c.call(Command::ListApps)? else { return Err(unexpected()) };
        if a.json {
            print_json(&apps);
        } else {
            print_apps(&apps);
        }
    } else if let Some(name) = a.name {
        let Payload::Session(d) = c.call(Command::ListSession { session: Some(name) })? else { return Err(unexpected()) };
        if a.json {
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

fn state_word(active: bool) -> &'static str {
    if active {
        "active"
    } else {
        "inactive"
    }
}

fn print_sessions(s: &[SessionSummary]) {
    if s.is_empty() {
        println!("Currently no available tracing session");
        return;
    }
    println!("Available tracing sessions:");
    for (i, x) in s.iter().enumerate() {
        println!(
            "  {}) {}{} ({}) [{}]{}",
            i + 1,
            x.name,
            if x.current { " *" } else { "" },
            x.output.display(),
            state_word(x.active),
            if x.trace { " (ust trace)" } else { "" }
        );
    }
    println!("\nUse ust list <session_name> for more details");
}

fn print_session(d: &SessionDetail) {
    println!(
        "Tracing session {}: [{}{}]",
        d.summary.name,
        state_word(d.summary.active),
        if d.summary.snapshot { " snapshot" } else { "" }
    );
    println!("    Trace output: {}", d.summary.output.display());
    if let Some(e) = &d.summary.output_error {
        println!("    Output STOPPED: {e} (packets written before are kept)");
    }
    println!("\n=== Domain: User space ===\n");
    println!("Tracked process IDs: {}\n", d.vpid_tracker.describe());
    if d.channels.is_empty() {
        println!("No channel.");
    } else {
        println!("Channels:\n-------------");
    }
    for c in &d.channels {
        println!("- {}:\n", c.name);
        println!("    Attributes:");
        println!("      Event-loss mode:  {}", if c.config.overwrite { "overwrite" } else { "discard" });
        println!("      Sub-buffer size:  {} bytes", c.config.subbuf_size);
        println!("      Sub-buffer count: {}", c.config.num_subbuf);
        println!("      Switch timer:     {}", if c.config.switch_timer_us == 0 { "inactive".into() } else { format!("{} us", c.config.switch_timer_us) });
        println!("      Read timer:       {} us", c.config.read_timer_us);
        if c.config.tracefile_size > 0 {
            println!("      Trace file size:  {} bytes", c.config.tracefile_size);
            println!("      Trace file count: {}", if c.config.tracefile_count == 0 { "unlimited".into() } else { c.config.tracefile_count.to_string() });
        }
        if !c.contexts.is_empty() {
            let names: Vec<String> = c.contexts.iter().map(|t| t.to_string()).collect();
            println!("      Contexts:         {}", names.join(", "));
        }
        println!("\n    Statistics:");
        println!("      Discarded events: {}", c.discarded);
        println!("      Packets written:  {} ({} bytes)", c.packets, c.bytes);
        if c.lost_packets > 0 || c.overwritten > 0 {
            println!("      Lost packets:     {} ({} overwritten)", c.lost_packets, c.overwritten);
        }
        if c.bad_packets > 0 {
            println!("      Invalid packets skipped: {}", c.bad_packets);
        }
        println!("\n    Event rules:");
        if c.enablers.is_empty() {
            println!("      None");
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
            println!("      {}{} [{}]{extra}", e.pattern, lv, if e.enabled { "enabled" } else { "disabled" });
        }
        println!();
    }
    if !d.processes.is_empty() {
        println!("Traced processes:");
        for p in &d.processes {
            println!("  PID {} ({}) [{}] {}", p.pid, p.procname, if p.alive { "alive" } else { "gone" }, p.dir.display());
            if let Some(pm) = &p.post_mortem {
                println!("    died abnormally; post-mortem trace: {}", pm.display());
            }
        }
    }
}

fn print_apps(apps: &[AppInfo]) {
    println!("UST events:\n-------------");
    if apps.is_empty() {
        println!("\nNone");
    }
    for a in apps {
        println!("\nPID: {} - Name: {}{}", a.pid, a.procname, if a.traced_by_token { " (ust trace)" } else { "" });
        for e in &a.events {
            println!("      {} (loglevel: {} ({})) (type: tracepoint)", e.name, e.level_name, e.level);
            for f in &e.fields {
                println!("        field: {} ({})", f.name, f.ty);
            }
        }
    }
}

fn status(a: StatusArgs) -> CliResult {
    let Payload::Status(s) = call(Command::Status { session: a.session.session })? else { return Err(unexpected()) };
    if a.json {
        print_json(&s);
    } else {
        print_status(&s);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_status(s: &StatusReport) {
    println!("ust-consumerd: running (pid {}, socket directory {})", s.daemon_pid, s.rundir.display());
    println!("Registered applications: {}", s.apps);
    match &s.session {
        Some(d) => {
            println!();
            print_session(d);
        }
        None => println!("No current session: create one with `ust create`"),
    }
}

fn view(a: ViewArgs) -> CliResult {
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
    // A daemon killed while writing may have left a packet cut short: cut it off (and
    // bring the index in line) before reading.
    match crate::ctf::recover::repair(&dir) {
        Ok(r) => {
            for c in &r.changes {
                eprintln!("ust: repaired {c}");
            }
        }
        Err(e) => eprintln!("ust: could not check {} for unfinished packets: {e}", dir.display()),
    }
    match std::process::Command::new("babeltrace2").arg(&dir).status() {
        Ok(st) => Ok(exit_code_of(st)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Failure::new(format!(
            "babeltrace2 is not installed (not found in PATH); install it (Debian: apt install babeltrace2) or read {} with another CTF 1.8 reader",
            dir.display()
        ))),
        Err(e) => Err(Failure::new(format!("cannot run babeltrace2: {e}"))),
    }
}

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

extern "C" fn trace_on_signal(sig: libc::c_int) {
    TRACE_SIGNAL.store(sig, std::sync::atomic::Ordering::SeqCst);
}

fn trace(a: TraceArgs) -> CliResult {
    for e in &a.events {
        if e.is_empty() {
            return Err(Failure::new("--event needs a glob"));
        }
    }
    let stamp = crate::datetime::stamp();
    let name = format!("trace-{}", std::process::id());
    let output = match a.output {
        Some(o) => absolute(o)?,
        None => home()?.join("ust-traces").join(format!("{name}-{stamp}")),
    };
    let token = uuid::Uuid::new_v4().simple().to_string();
    let mut c = connect_or_start()?;
    let name = format!("{name}-{stamp}");
    c.call(Command::CreateSession { name: name.clone(), output: output.clone(), token: Some(token.clone()) })?;
    let session = Some(name.clone());
    let patterns = if a.events.is_empty() { vec!["*".to_string()] } else { a.events.clone() };
    let setup = c
        .call(Command::EnableEvent {
            session: session.clone(),
            channel: None,
            patterns,
            level: LevelFilter::Any,
            exclusions: Vec::new(),
            filter: None,
        })
        .and_then(|_| c.call(Command::Start { session: session.clone() }));
    if let Err(e) = setup {
        let _ = c.call(Command::Destroy { session });
        return Err(e.into());
    }
    // From here on, a signal to `ust trace` is forwarded to the command, and the session is
    // destroyed whatever happens.
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = trace_on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    let mut kernel = None;
    if a.kernel {
        kernel = crate::kernel::view::KernelView::start(&output);
    }
    let (prog, args) = a.command.split_first().expect("clap requires a command");
    let child = std::process::Command::new(prog).args(args).env(ust_core::protocol::ENV_SESSION_TOKEN, &token).spawn();
    let mut traced_pid = 0;
    let mut maps = None;
    let code = match child {
        Err(e) => {
            eprintln!("ust: cannot run {}: {e}", prog.to_string_lossy());
            ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 })
        }
        Ok(mut child) => {
            traced_pid = child.id() as i32;
            maps = Some(crate::kernel::procfs::MapsSampler::start(traced_pid, Duration::from_millis(10)));
            wait_forwarding(&mut child)
        }
    };
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
    let Some(report) = report else {
        finish_kernel(kernel, maps, &output, traced_pid);
        // Still exit with the command's status: the trace may be incomplete, the run is not.
        eprintln!("ust: the trace in {} may be incomplete", output.display());
        return Ok(code);
    };
    finish_kernel(kernel, maps, &output, traced_pid);
    eprintln!("ust: trace written to {}", output.display());
    print_summary(&report);
    Ok(code)
}

/// Ends the kernel recording (after the user-space traces are written, so the kernel
/// metadata takes their clock offset) and saves the sampled memory maps.
fn finish_kernel(kernel: Option<crate::kernel::view::KernelView>, maps: Option<crate::kernel::procfs::MapsSampler>, output: &std::path::Path, pid: i32) {
    if let Some(m) = maps {
        m.finish(output);
    }
    if let Some(k) = kernel {
        match k.finish(output, pid) {
            Ok(s) => {
                let total: u64 = s.counts.iter().map(|c| c.1).sum();
                eprintln!("ust: {total} kernel events recorded in {}, {} lost", s.dir.display(), s.lost);
                if !s.missing_events.is_empty() {
                    eprintln!("ust: kernel events this kernel lacks: {}", s.missing_events.join(", "));
                }
            }
            Err(e) => eprintln!("ust: kernel trace: {e}"),
        }
    }
}

/// `ust report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Trace directory (the output of `ust trace`).
    pub dir: PathBuf,
    /// Show each blocked interval and what woke it, up the wake-up chain.
    #[arg(long)]
    pub wakeups: bool,
    /// Show user page faults with the mapped file and offset.
    #[arg(long)]
    pub faults: bool,
    /// Shortest blocked interval shown by --wakeups (e.g. 1ms, 500us, 2s, or ns).
    #[arg(long, value_name = "DUR", default_value = "1ms", value_parser = parse_duration)]
    pub min_block: u64,
    /// Output format.
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
}

/// Parses a duration into ns: a number with an optional `ns`, `us`, `ms` or `s` suffix
/// (no suffix: ns).
///
/// # Errors
/// A message for clap.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(format!("{s:?} is not a duration (examples: 1ms, 500us, 2s)")),
    };
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a duration (examples: 1ms, 500us, 2s)"))?;
    Ok((n * mult) as u64)
}

fn report(a: ReportArgs) -> CliResult {
    let opt = crate::report::Options { wakeups: a.wakeups, faults: a.faults, min_block_ns: a.min_block, ..Default::default() };
    let r = crate::report::report(&a.dir, &opt).map_err(Failure::new)?;
    if a.format == "json" {
        println!("{}", crate::report::render_json(&r));
    } else {
        print!("{}", crate::report::render_text(&r));
    }
    Ok(ExitCode::SUCCESS)
}

fn wait_forwarding(child: &mut std::process::Child) -> ExitCode {
    let mut forwarded = 0;
    loop {
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
            let s = if forwarded >= 3 { libc::SIGKILL } else { sig };
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as libc::pid_t, s) };
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Per-event-name counts of a written trace, found by walking every packet of every stream
/// file with the record walker: `(counts, unreadable packets or records)`.
pub fn count_events(report: &DestroyReport) -> (BTreeMap<String, u64>, u64) {
    let mut counts = BTreeMap::new();
    let mut problems = 0;
    for t in &report.traces {
        let Ok(entries) = std::fs::read_dir(&t.dir) else { continue };
        for ent in entries.flatten() {
            let name = ent.file_name().to_string_lossy().into_owned();
            if name == "metadata" || name.starts_with('.') || !ent.path().is_file() {
                continue;
            }
            let Ok(bytes) = std::fs::read(ent.path()) else {
                problems += 1;
                continue;
            };
            count_file(&bytes, &t.events, &t.context_sizes, &mut counts, &mut problems);
        }
    }
    (counts, problems)
}

fn count_file(bytes: &[u8], events: &[ust_core::EventDesc], context_sizes: &[usize], counts: &mut BTreeMap<String, u64>, problems: &mut u64) {
    for p in crate::ctf::reader::packets(bytes) {
        let Ok(p) = p else {
            *problems += 1;
            continue;
        };
        match crate::ctf::reader::RecordWalker::new(events, p) {
            Ok((info, w)) => {
                let w = w.with_context_size(context_sizes.get(info.stream_id as usize).copied().unwrap_or(0));
                for r in w {
                    match r {
                        Ok(r) => *counts.entry(events[r.index].full_name()).or_insert(0) += 1,
                        Err(_) => *problems += 1,
                    }
                }
            }
            Err(_) => *problems += 1,
        }
    }
}

fn print_summary(report: &DestroyReport) {
    if let Some(e) = &report.output_error {
        eprintln!("ust: the trace is incomplete: its output stopped early ({e}); the packets written before are whole");
    }
    let (counts, problems) = count_events(report);
    let total: u64 = counts.values().sum();
    let discarded: u64 = report.traces.iter().map(|t| t.discarded).sum();
    eprintln!(
        "ust: {} process{} traced, {total} event{} recorded, {discarded} discarded",
        report.traces.len(),
        if report.traces.len() == 1 { "" } else { "es" },
        if total == 1 { "" } else { "s" }
    );
    let width = counts.keys().map(|k| k.len()).max().unwrap_or(0);
    for (name, n) in &counts {
        eprintln!("ust:   {name:<width$}  {n}");
    }
    if problems > 0 {
        eprintln!("ust: {problems} packet(s) or record(s) could not be read back");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_subcommand_has_examples() {
        let cmd = Cli::command();
        for sub in cmd.get_subcommands().chain(cmd.get_subcommands().flat_map(|s| s.get_subcommands())) {
            let h = sub.get_after_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(h.starts_with("Examples:\n  ust "), "{} has no examples", sub.get_name());
        }
    }

    #[test]
    fn help_examples_parse() {
        for f in [r#"status >= 500 && path == "/api/*""#, "$ctx.vtid == 1234 || latency_us > 1.5e3"] {
            crate::filter::parse(f).unwrap();
        }
        for args in [
            &["ust", "enable-event", "myapp:*", "--exclude", "myapp:noisy*,myapp:tick"][..],
            &["ust", "add-context", "-c", "big", "-t", "vpid", "-t", "pthread_id", "-t", "cpu_id"],
            &["ust", "add-context", "-t", "ip", "-t", "vpid"],
            &["ust", "enable-channel", "chunked", "--subbuf-size", "64k", "--tracefile-size", "1M", "--tracefile-count", "4"],
            &["ust", "rotate", "-s", "web"],
            &["ust", "enable-event", "myapp:*", "--loglevel", "WARNING"],
            &["ust", "track", "--vpid", "1234,5678", "-s", "web"],
            &["ust", "untrack", "--vpid", "--all"],
        ] {
            Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64k"), Ok(65536));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("2MiB"), Ok(2 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert!(parse_size("x").is_err());
    }

    #[test]
    fn track_takes_pids_or_all() {
        let vpids = |args: &[&str]| {
            let c = Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let (Cmd::Track(t) | Cmd::Untrack(t)) = c.command else { panic!() };
            (t.vpid, t.all)
        };
        assert_eq!(vpids(&["ust", "track", "--vpid", "12,34", "--vpid", "5"]), (Some(vec![12, 34, 5]), false));
        assert_eq!(vpids(&["ust", "untrack", "-u", "--vpid", "--all"]), (Some(vec![]), true));
        assert_eq!(vpids(&["ust", "track", "--all", "--vpid"]), (Some(vec![]), true));
        assert_eq!(vpids(&["ust", "track", "--vpid=7"]), (Some(vec![7]), false));
        for bad in [&["ust", "track", "--vpid", "abc"][..], &["ust", "track", "--vpid", "0"], &["ust", "track", "--vpid", "-3"], &["ust", "track", "--all"], &["ust", "track"]] {
            assert!(Cli::try_parse_from(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn trace_takes_the_command_after_dashes() {
        let c = Cli::try_parse_from(["ust", "trace", "--event", "a:*", "--", "prog", "-x", "--y"]).unwrap();
        let Cmd::Trace(t) = c.command else { panic!() };
        assert_eq!(t.events, vec!["a:*"]);
        assert_eq!(t.command, vec![OsString::from("prog"), "-x".into(), "--y".into()]);
        assert!(Cli::try_parse_from(["ust", "trace"]).is_err());
        assert!(Cli::try_parse_from(["ust", "enable-event"]).is_err());
        assert!(Cli::try_parse_from(["ust", "enable-event", "-a", "x"]).is_err(), "-a or names, not both");
    }
}
