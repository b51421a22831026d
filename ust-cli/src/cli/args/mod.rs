//! The `ust` command's arguments: clap definitions, which are also the `--help` texts
//! (and, with docs/DESIGN.md#interfaces, the contract scripts rely on), and the parsers of
//! sizes, durations, levels and process IDs. `ust trace`'s are in [`TraceArgs`] (module
//! `trace`), `ust report`'s in [`ReportArgs`] (module `report`).

// The argument docs below are also the `--help` texts, written for a terminal:
// `<name>` there is a placeholder, not HTML.
#![allow(rustdoc::invalid_html_tags)]

use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand};
use ust_core::Level;

mod channel;
mod report;
#[cfg(test)]
mod tests;
mod trace;

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

/// The channel, session and domain options of `enable-event`, `add-context` and
/// `disable-event` (each command gives `--channel` its own help: what it defaults to).
#[derive(Debug, Args, Clone, Default)]
pub struct ChannelTarget {
    /// Channel (default: channel0).
    #[arg(short = 'c', long, value_name = "CHANNEL")]
    pub channel: Option<String>,
    /// Session.
    #[command(flatten)]
    pub session: SessionOpt,
    /// User-space domain (accepted; the only domain).
    #[arg(short = 'u', long = "userspace")]
    pub userspace: bool,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Create a session; it becomes the current session.
    #[command(after_help = "Examples:
  ust create                                  # auto-YYYYmmdd-HHMMSS, output under ~/ust-traces/
  ust create web --output /tmp/web-trace      # named session, chosen output directory
  ust create web --set-url net://collector    # stream to lttng-relayd (ports 5342, 5343)
  ust create web --live --set-url net://collector   # live: babeltrace2 -i lttng-live net://collector/host/$(hostname)/web

The new session becomes the current one: later commands act on it unless given -s NAME.
Starts ust-consumerd when none runs.")]
    Create(CreateArgs),
    /// Create a channel (per-CPU buffers) in a session.
    #[command(after_help = "Examples:
  ust enable-channel big --subbuf-size 1M --num-subbuf 8
  ust enable-channel ring --overwrite --switch-timer 100000      # flight recorder
  ust enable-channel chunked --subbuf-size 64k --tracefile-size 1M --tracefile-count 4
  ust enable-channel nolose --blocking-timeout 100000   # writers wait up to 100 ms for room

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

Filter language (LTTng 2.13's): comparisons == != < <= > >= between event fields, elements
of array and sequence fields (arr[2]), $ctx.vpid, $ctx.vtid, $ctx.procname, $ctx.pthread_id,
$ctx.cpu_id, $ctx.ip and literals (integers: decimal, 0x hexadecimal, 0 octal; floats;
\"strings\" where * matches anything and \\* is a star, also between two literals); the
integer operators & | ^ << >> ~ and unary - (& | ^ bind tighter than comparisons, which are
values: 1 >= (1 >= 1)); combined with && || ! and parentheses; a bare number or field is
true when non-zero. * / % and binary + - are not supported. Strings compare with == and !=
only. A filter naming a field an event lacks (or a dotted name: a.b) is false for
that event. Several enable-event rules that match an event OR together.")]
    EnableEvent(EnableEventArgs),
    /// Add context fields (vpid, vtid, procname, pthread_id, cpu_id, ip, span_id) to a channel's events.
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
  ust track --vuid 1000,alice         # only processes of these users (also --vgid GID,...)

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
  ust list --apps --json
  ust list --userspace-probes ./app 'app::db::*'   # functions a uprobe can go on")]
    List(ListArgs),
    /// Show the current session (or -s) and the daemon.
    #[command(after_help = "Examples:
  ust status
  ust status -s web --json")]
    Status(StatusArgs),
    /// Print a trace with babeltrace2 (default: the current session's output).
    #[command(after_help = "Examples:
  ust view                       # the current session's output
  ust view ~/ust-traces/web-20260101-120000
  ust view --repair /tmp/t       # cut off a packet a killed daemon left unfinished

ust view never changes a trace unless given --repair; a stream file it cannot read is an
error (exit 1), and a last packet cut off is skipped with a warning.")]
    View(ViewArgs),
    /// Trace one command and its children, then print a summary.
    #[command(after_help = "Examples:
  ust trace -- ./server --port 8080
  ust trace --output /tmp/t --event 'myapp:*' -- cargo run --release
  sudo ust trace --kernel --as-user -- ./server   # kernel as root, the server as you

Only CMD and its children are traced; prints `ust: trace written to DIR` and a summary of
the events recorded, and exits with CMD's status (128+N if it died of signal N).")]
    Trace(TraceArgs),
    /// Report on a trace: tasks, system calls, waits and wake-ups, page faults.
    #[command(after_help = "Examples:
  ust report /tmp/t                         # tasks, system calls, blocked time
  ust report /tmp/t --wakeups --min-block 5ms
  ust report /tmp/t --faults --format json
  ust report /tmp/t --faults /data/big.db   # FILE after DIR: its faults in time order
  ust report /tmp/t --format folded > t.folded
  ust report /tmp/t --flamegraph t.svg
  ust report ~/lttng-traces/s-20240101-120000 --procname nginx --wakeups

DIR is the output of `ust trace` (with --kernel for the kernel part), or any CTF trace:
LTTng's (kernel, with --pid or --procname to choose the process). On a trace without
kernel events it reports the program's own events per name and per thread.")]
    Report(ReportArgs),
    /// Snapshot sessions: `ust snapshot record` writes the buffers' content.
    #[command(
        subcommand,
        after_help = "Examples:
  ust create fr --snapshot && ust enable-event -a && ust start
  ust snapshot record                      # <output>/snapshot-<N>-<YYYYmmdd-HHMMSS>/ust/pid/...
  ust snapshot record -s fr --max-size 64M # newest packets, 64 MiB in all"
    )]
    Snapshot(SnapshotCmd),
    /// Rebuild CTF traces from the buffer files a `--shm-path` session left behind, after
    /// both the application and the daemon are gone (LTTng's `lttng-crash`).
    #[command(after_help = "Examples:
  ust create c --shm-path /dev/shm/ust && ust enable-event -a && ust start
  ust crash-dump /dev/shm/ust /tmp/recovered   # after the program and the daemon died
  babeltrace2 /tmp/recovered")]
    CrashDump(CrashDumpArgs),
    /// Add a trigger: when an event matching its event rule occurs, the daemon runs its
    /// actions within milliseconds (LTTng's `lttng add-trigger`).
    #[command(after_help = "Examples:
  ust add-trigger --name on-error --condition event-rule-matches --type user \\
      --name 'myapp:error' --action snapshot-session fr     # flight recorder dumps itself
  ust add-trigger --condition event-rule-matches --type user --name 'db:*' \\
      --log-level TRACE_WARNING.. --filter 'latency_us > 1000' --action notify
  ust add-trigger --condition channel-buffer-usage-ge --session fr --channel channel0 \
      --domain user --threshold-ratio 0.75 --action snapshot-session fr --path /var/snaps

Syntax as lttng-add-trigger(1): [--name NAME] --condition event-rule-matches --type user
[--name PATTERN] [--exclude-name GLOB]... [--log-level LEVEL.. | LEVEL | ..] [--filter EXPR]
(or session-consumed-size-ge, session-rotation-starts/finishes, channel-buffer-usage-ge/le)
then one or more --action: notify, snapshot-session SESSION [--path DIR | --url URL |
--ctrl-url URL --data-url URL] [--name NAME] [--max-size SIZE], start-session SESSION,
stop-session SESSION, rotate-session SESSION (run in order), each with an optional
--rate-policy every:N | once-after:N. The rule applies to every
process of the daemon (those that start later too); a process with no matching event
pays nothing, and a matching event costs one more record in a small per-CPU buffer.
`ust list-triggers` shows how often each fired and what its last firing did.")]
    AddTrigger(super::triggers::AddTriggerArgs),
    /// List the triggers, with how often each fired (LTTng's `lttng list-triggers`).
    #[command(after_help = "Examples:
  ust list-triggers
  ust list-triggers --json")]
    ListTriggers(super::triggers::ListTriggersArgs),
    /// Remove a trigger (LTTng's `lttng remove-trigger`).
    #[command(after_help = "Examples:
  ust remove-trigger on-error")]
    RemoveTrigger(super::triggers::RemoveTriggerArgs),
    /// Save session configurations as LTTng session XML files (LTTng's `lttng save`).
    #[command(after_help = "Examples:
  ust save                       # the current session -> ~/.lttng/sessions/NAME.lttng
  ust save web -o /tmp/cfg -f    # into /tmp/cfg/web.lttng, overwriting it
  ust save --all

The file is LTTng's format (session.xsd of lttng-tools): `lttng load` reads it, and
`ust load` reads what `lttng save` writes. Default directory: $LTTNG_HOME/.lttng/sessions,
else $HOME/.lttng/sessions, as lttng.")]
    Save(super::save_load::SaveArgs),
    /// Load session configurations from LTTng session XML files (LTTng's `lttng load`).
    #[command(after_help = "Examples:
  ust load                              # every session in ~/.lttng/sessions/*.lttng
  ust load web -i /tmp/cfg/web.lttng    # one session of one file
  ust load -i /tmp/cfg -f               # replace sessions of the same names

A loaded session is created as `ust create`, `enable-channel`, `enable-event`,
`add-context` and `track --vpid|--vuid|--vgid` would make it, and started if it was saved started.
Kernel, JUL, LOG4J and Python domains are skipped; per-user (PER_UID) buffers are
loaded as per-UID buffers (`--buffers-uid`).")]
    Load(super::save_load::LoadArgs),
    /// Discard what a session recorded so far, in its buffers and trace files; it goes on
    /// recording (LTTng's `lttng clear`).
    #[command(after_help = "Examples:
  ust clear                 # the current session
  ust clear web             # or: ust clear -s web
  ust clear --all

The stream files start again empty (the metadata stays); a snapshot session's buffers are
emptied; archives of earlier `ust rotate` are kept.")]
    Clear(super::clear::ClearArgs),
    /// Give the memory of a session's sub-buffers back now (LTTng 2.15's `lttng
    /// reclaim-memory`): discard mode, those delivered and consumed; overwrite mode, any
    /// delivered one (a snapshot session's flight recorder forgets them).
    #[command(after_help = "Examples:
  ust reclaim-memory --userspace my-channel
  ust reclaim-memory --userspace --older-than=2s mon-canal mein-Kanal
  ust reclaim-memory --userspace --session=my-session --no-wait --all

Prints, per channel, the sub-buffers reclaimed (and those pending: delivered, not consumed
yet). `ust list SESSION` shows each channel's resident and allocated memory.")]
    ReclaimMemory(super::reclaim::ReclaimMemoryArgs),
    /// Regenerate a session's metadata or state dump (LTTng's `lttng regenerate`).
    #[command(
        subcommand,
        after_help = "Examples:
  ust regenerate metadata
  ust regenerate statedump -s fr"
    )]
    Regenerate(super::clear::RegenerateCmd),
    /// Export a trace as a file Perfetto UI opens: one track per thread with the `tracing`
    /// spans as slices, events as instants, counters, and with the kernel part the threads'
    /// scheduling states and the CPUs.
    #[command(after_help = "Examples:
  ust trace -t vtid -t procname --output /tmp/t -- ./server
  ust export /tmp/t -o /tmp/t.pftrace           # open it in Perfetto UI
  ust export /tmp/t --format chrome-json -o /tmp/t.json
  ust export /tmp/t --counter myapp:queue:depth -o /tmp/t.pftrace

DIR is the output of `ust trace` (with --kernel for the thread states and CPU tracks).
Events carry their thread with the vtid context (`ust trace -t vtid`); without it, each
process is one track.")]
    Export(ExportArgs),
    /// Start, stop or show the per-user ust-consumerd (`ust create` and `ust trace` start
    /// it when none runs; it then stays for later commands).
    #[command(
        subcommand,
        after_help = "Examples:
  ust daemon status
  ust daemon stop            # refused while it holds sessions (--force destroys them)
  ust daemon start"
    )]
    Daemon(super::daemon::DaemonCmd),
}

pub use super::export_args::ExportArgs;

/// `ust snapshot ...`.
#[derive(Debug, Subcommand)]
pub enum SnapshotCmd {
    /// Write the current content of every buffer of a snapshot session as a CTF trace
    /// under `<output>/snapshot-<N>-<YYYYmmdd-HHMMSS>/`, without stopping tracing (as
    /// `lttng snapshot record`).
    #[command(after_help = "Examples:
  ust snapshot record
  ust snapshot record -s fr --max-size 64M     # the total, split between the per-CPU streams
  ust snapshot record net://collector.example  # to an lttng-relayd")]
    Record(SnapshotRecordArgs),
    /// Send later snapshots of a snapshot session to a relay daemon (net://HOST…), or
    /// back to its output directory (file://DIR is not supported: use the session's
    /// --output), as `lttng snapshot add-output`.
    #[command(after_help = "Examples:
  ust snapshot add-output net://collector.example
  ust snapshot add-output -s fr net://10.0.0.5:5342:5343")]
    AddOutput(SnapshotAddOutputArgs),
}

/// `ust snapshot add-output`.
#[derive(Debug, Args)]
pub struct SnapshotAddOutputArgs {
    /// Session.
    #[command(flatten)]
    pub session: SessionOpt,
    /// The relay daemon: `net://HOST[:CTRL_PORT[:DATA_PORT]][/PATH]` or `net6://…`.
    pub url: String,
}

/// `ust snapshot record`.
#[derive(Debug, Args)]
pub struct SnapshotRecordArgs {
    /// Session.
    #[command(flatten)]
    pub session: SessionOpt,
    /// Write at most this many bytes in total (k, M, G suffixes), split evenly between
    /// the streams, keeping the newest packets of each.
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub max_size: Option<u64>,
    /// Send this snapshot to a relay daemon (net://HOST…) instead of the session's
    /// snapshot output.
    #[arg(value_name = "URL")]
    pub url: Option<String>,
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
    /// Network and live options (`--set-url`, `--ctrl-url`, `--data-url`, `--live`).
    #[command(flatten)]
    pub net: NetArgs,
    /// Default buffer ownership of the session's channels.
    #[command(flatten)]
    pub buffers: BuffersOpt,
}

/// Where a session streams, in LTTng's URL syntax (`ust create`, `ust trace`).
#[derive(Debug, Args, Default)]
pub struct NetArgs {
    /// Output URL: `net://HOST[:CTRL_PORT[:DATA_PORT]][/PATH]` (a relay daemon, ports 5342
    /// and 5343 by default), net6://…, or file://PATH (the same as --output PATH).
    #[arg(short = 'U', long, value_name = "URL", conflicts_with = "output")]
    pub set_url: Option<String>,
    /// The relay daemon's control URL (tcp://HOST:PORT or net://…), with --data-url.
    #[arg(short = 'C', long, value_name = "URL", requires = "data_url")]
    pub ctrl_url: Option<String>,
    /// The relay daemon's data URL (tcp://HOST:PORT or net://…), with --ctrl-url.
    #[arg(short = 'D', long, value_name = "URL", requires = "ctrl_url")]
    pub data_url: Option<String>,
    /// Live session: every PERIOD µs (default 1000000) partly filled sub-buffers are sent,
    /// so that `babeltrace2 -i lttng-live` shows events while the programs run. Needs a
    /// network URL.
    #[arg(long, value_name = "PERIOD_US", num_args = 0..=1, require_equals = true, default_missing_value = "1000000")]
    pub live: Option<u32>,
}

fn parse_clock(s: &str) -> Result<ust_core::clock::ClockKind, String> {
    ust_core::clock::ClockKind::parse(s).ok_or_else(|| format!("unknown clock {s:?}: use monotonic or tsc"))
}

/// `ust enable-event`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).args(["all", "names"])))]
#[command(mut_arg("channel", |a| a.help("Channel (default: channel0, created with defaults if missing)")))]
pub struct EnableEventArgs {
    /// Event names or globs (`provider:name`, `*` anywhere), comma-separated or repeated.
    #[arg(value_delimiter = ',', value_name = "GLOB")]
    pub names: Vec<String>,
    /// Every event.
    #[arg(short = 'a', long)]
    pub all: bool,
    /// Channel, session and domain.
    #[command(flatten)]
    pub target: ChannelTarget,
    /// Events of level L or more severe (number <= L). A tracepoint declared without
    /// `level =` is TRACE_DEBUG_LINE (13), as in LTTng: `--loglevel INFO` leaves it out.
    /// `ust list --apps` shows each tracepoint's level.
    #[arg(long, value_name = "L", value_parser = parse_level, conflicts_with = "loglevel_only")]
    pub loglevel: Option<Level>,
    /// Events of level L only (a tracepoint without `level =` is TRACE_DEBUG_LINE, 13).
    #[arg(long, value_name = "L", value_parser = parse_level)]
    pub loglevel_only: Option<Level>,
    /// Do not enable these events (names or globs, comma-separated); needs a glob event
    /// name.
    #[arg(short = 'x', long, value_name = "NAME,...", value_delimiter = ',')]
    pub exclude: Vec<String>,
    /// Record only events for which EXPR is true (LTTng's filter language; see below).
    #[arg(short = 'f', long, value_name = "EXPR", allow_hyphen_values = true)]
    pub filter: Option<String>,
    /// A dynamic probe named after the one GLOB given (the event's name, as LTTng's
    /// `--userspace-probe`): `elf:PATH:SYMBOL` (a function's entry, with its integer, bool,
    /// char and pointer arguments read from DWARF) or `elf:PATH:SYMBOL%return` (its return
    /// value). Placed at `ust start`, recorded in OUTPUT/kernel/ with the session's clock,
    /// removed at `ust stop`. Root probes any file; other users, through root's
    /// ust-consumerd, only regular files they own, and see only their own processes' hits.
    #[arg(long = "userspace-probe", value_name = "SPEC", conflicts_with_all = ["all", "loglevel", "loglevel_only", "exclude", "filter", "channel"])]
    pub userspace_probe: Option<String>,
    /// Kernel domain (LTTng's `-k`): accepted with --userspace-probe, ust's only kernel
    /// events.
    #[arg(short = 'k', long = "kernel", requires = "userspace_probe")]
    pub kernel: bool,
}

/// `ust add-context`.
#[derive(Debug, Args)]
#[command(mut_arg("channel", |a| a.help("Channel (default: every channel of the session; channel0 is created if there is none)")))]
pub struct AddContextArgs {
    /// Channel, session and domain.
    #[command(flatten)]
    pub target: ChannelTarget,
    /// Context type: vpid, vtid, procname, pthread_id, cpu_id or ip (repeatable).
    #[arg(short = 't', long = "type", value_name = "TYPE", required = true, value_parser = parse_context)]
    pub types: Vec<ust_core::context::ContextType>,
}

fn parse_context(s: &str) -> Result<ust_core::context::ContextType, String> {
    ust_core::context::ContextType::parse(s).ok_or_else(|| format!("{s:?} is not a context type (vpid, vtid, procname, pthread_id, cpu_id, ip, span_id)"))
}

/// `ust disable-event`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).args(["all", "names"])))]
#[command(mut_arg("channel", |a| a.help("Channel (default: channel0)")))]
pub struct DisableEventArgs {
    /// Event names or globs as given to enable-event, comma-separated or repeated.
    #[arg(value_delimiter = ',', value_name = "GLOB")]
    pub names: Vec<String>,
    /// Every enabled event of the channel.
    #[arg(short = 'a', long)]
    pub all: bool,
    /// Channel, session and domain.
    #[command(flatten)]
    pub target: ChannelTarget,
    /// Kernel domain (LTTng's `-k`): disable the session's userspace probes named (made by
    /// `enable-event --userspace-probe`); with -a, every one. They stay in the session,
    /// disabled, and are not placed at the next start.
    #[arg(short = 'k', long = "kernel", conflicts_with = "channel")]
    pub kernel: bool,
}

/// `ust track` and `ust untrack`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("tracker").required(true).multiple(true).args(["vpid", "vuid", "vgid"])))]
pub struct TrackArgs {
    /// Process IDs (comma-separated or repeated); give `--vpid` alone with `--all`.
    #[arg(long, value_name = "PID[,PID...]", num_args = 0..=1, value_delimiter = ',', value_parser = parse_pid)]
    pub vpid: Option<Vec<i32>>,
    /// User IDs or names (the processes' effective user, as the daemon sees it);
    /// `--vuid` alone with `--all`.
    #[arg(long, value_name = "UID[,UID...]", num_args = 0..=1, value_delimiter = ',')]
    pub vuid: Option<Vec<String>>,
    /// Group IDs or names (the processes' effective group); `--vgid` alone with `--all`.
    #[arg(long, value_name = "GID[,GID...]", num_args = 0..=1, value_delimiter = ',')]
    pub vgid: Option<Vec<String>>,
    /// Every process: `track --vpid --all` records every process (the default),
    /// `untrack --vpid --all` none.
    #[arg(short = 'a', long)]
    pub all: bool,
    /// Session.
    #[command(flatten)]
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
    /// Session.
    #[command(flatten)]
    pub session: SessionOpt,
}

impl SessionCmdArgs {
    /// The session named, positionally or with `-s` (`None`: the current session).
    pub fn target(&self) -> Option<String> {
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
    /// List the functions of the ELF file PATH a `--userspace-probe elf:PATH:SYMBOL` can
    /// probe (demangled, with their file offsets), then its SDT probes
    /// (`sdt:PROVIDER:PROBE`, for `--userspace-probe sdt:PATH:PROVIDER:PROBE`), those
    /// matching GLOB only if given (`*`, `?`). Needs no daemon.
    #[arg(long = "userspace-probes", value_names = ["PATH", "GLOB"], num_args = 1..=2, conflicts_with_all = ["apps", "name"])]
    pub userspace_probes: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `ust status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Session.
    #[command(flatten)]
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
    /// Cut off the unfinished last packet a killed daemon may leave in a stream file
    /// (keeping the bytes in removed/<stream>.removed-<offset> next to it) and bring the
    /// index in line, before reading. Without it the trace is read as it is, up to such
    /// a packet, and not changed.
    #[arg(long)]
    pub repair: bool,
    /// Session.
    #[command(flatten)]
    pub session: SessionOpt,
}

pub use super::buffer_args::{parse_size, BufferArgs};
pub use channel::{BuffersOpt, EnableChannelArgs};
pub use report::{parse_duration, ReportArgs};
pub use trace::TraceArgs;
pub use ust_ctl::config::check_event_name;

fn parse_level(s: &str) -> Result<Level, String> {
    Level::parse(s).ok_or_else(|| format!("{s:?} is not a log level (0-14, or a name such as TRACE_WARNING, warning, debug_line)"))
}
