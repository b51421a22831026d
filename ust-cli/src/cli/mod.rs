//! The `ust` command, in the spirit of `lttng` (docs/DESIGN.md#interfaces: a contract).
//!
//! Every session command talks to the per-user daemon over the `ctl` socket
//! ([`ust_ctl::Client`]); `create` and `trace` start the daemon when none runs
//! (`ust-consumerd --daemonize`, found next to this executable, else in `PATH`), other
//! commands say that none runs and how to start one (exit 1). Argument errors print usage
//! and exit 2 (clap's convention); other errors print `ust: <message>` and exit 1.
//!
//! A daemon that does not answer a request within `UST_CTL_TIMEOUT_MS` (default 10 s) is
//! an error naming its pid (exit 1). A command whose standard output is closed under it
//! (`ust list | head -1`) stops printing and exits with status 141 (128 + SIGPIPE, what
//! a shell reports for a Unix tool killed by SIGPIPE), without a message.
//!
//! The modules, each depending only on those listed before it:
//!
//! - [`export_args`]: the arguments of `ust export`;
//! - [`buffer_args`]: a channel's buffer options (`enable-channel`, `trace`), sizes;
//! - [`args`]: the clap definitions (also the `--help` texts);
//! - [`connect`]: the socket directory, connecting (and starting the daemon), [`Failure`];
//! - [`daemon`]: `ust daemon start|stop|status`;
//! - [`net`]: the network output options (`--set-url`, `--live`) checked and combined;
//! - [`session_probes`]: `enable-event --userspace-probe`, `disable-event -k` (a session's
//!   dynamic probes, checked at enable time) and their lines in `ust list SESSION`;
//! - [`print`](mod@print): what the commands print, as text or JSON;
//! - [`probes`]: `--userspace-probe` specs resolved, `ust list --userspace-probes`;
//! - [`rule_check`]: warnings about `enable-event` rules that can record nothing;
//! - [`trace`]: `ust trace`: the one-shot session around a command, and exit statuses;
//! - [`commands`]: the session verbs, `ust view`, `ust report`, `ust export` and `ust crash-dump`;
//! - [`id_track`]: `track/untrack --vuid|--vgid`;
//! - [`clear`]: `clear`, `regenerate metadata|statedump`;
//! - [`save_load`]: `save`, `load` (LTTng session XML);
//! - [`triggers`]: `add-trigger`, `list-triggers`, `remove-trigger`;
//! - [`maps`], [`maps_view`], [`maps_sql`]: `add-map-channel`, `show-maps`, `export-maps`.

pub mod alloc_args;
pub mod args;
pub mod as_user;
pub mod buffer_args;
pub mod clear;
pub mod commands;
pub mod connect;
pub mod daemon;
pub mod export_args;
pub mod id_track;
pub mod maps;
pub mod maps_sql;
pub mod maps_view;
pub mod net;
pub mod print;
pub mod probes;
pub mod reclaim;
pub mod rule_check;
pub mod save_load;
pub mod session_probes;
pub mod trace;
pub mod triggers;

use std::process::ExitCode;

use clap::Parser;

pub use args::*;
pub use connect::{consumerd_path, Failure};
pub use print::count_events;
pub use trace::exit_code_of;

/// What a command returns: its exit code, or a [`Failure`] to print.
pub type CliResult = Result<ExitCode, Failure>;

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
    use commands as c;
    match cli.command {
        Cmd::Create(a) => c::create(a),
        Cmd::EnableChannel(a) => c::enable_channel(a),
        Cmd::EnableEvent(a) => c::enable_event(a),
        Cmd::AddContext(a) => c::add_context(a),
        Cmd::DisableEvent(a) => c::disable_event(a),
        Cmd::Track(a) => c::track(a, true),
        Cmd::Untrack(a) => c::track(a, false),
        Cmd::Start(a) => c::start(a),
        Cmd::Stop(a) => c::stop(a),
        Cmd::Destroy(a) => c::destroy(a),
        Cmd::Rotate(a) => c::rotate(a),
        Cmd::List(a) => c::list(a),
        Cmd::Status(a) => c::status(a),
        Cmd::View(a) => c::view(a),
        Cmd::Trace(a) => trace::trace(a),
        Cmd::Report(a) => {
            crate::heap::enable();
            crate::descriptors::raise_limit();
            c::report(a)
        }
        Cmd::Snapshot(SnapshotCmd::Record(a)) => c::snapshot_record(a),
        Cmd::Snapshot(SnapshotCmd::AddOutput(a)) => c::snapshot_add_output(a),
        Cmd::CrashDump(a) => c::crash_dump(a),
        Cmd::Export(a) => {
            crate::heap::enable();
            crate::descriptors::raise_limit();
            c::export(a)
        }
        Cmd::AddTrigger(a) => triggers::add_trigger(a),
        Cmd::ListTriggers(a) => triggers::list_triggers(a),
        Cmd::RemoveTrigger(a) => triggers::remove_trigger(a),
        Cmd::Clear(a) => clear::clear(a),
        Cmd::ReclaimMemory(a) => reclaim::reclaim_memory(a),
        Cmd::AddMapChannel(a) => maps::add_map_channel(a),
        Cmd::ShowMaps(a) => maps::show_maps(a),
        Cmd::ExportMaps(a) => maps::export_maps(a),
        Cmd::Regenerate(r) => clear::regenerate(r),
        Cmd::Save(a) => save_load::save(a),
        Cmd::Load(a) => save_load::load(a),
        Cmd::Daemon(d) => daemon::daemon(d),
    }
}
