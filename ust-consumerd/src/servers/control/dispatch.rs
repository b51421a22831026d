//! [`handle`]: one control request to the handler of its kind.

use ust_ctl::protocol::*;

use super::configure::{add_context, create, disable_event, enable_channel, enable_event, track_vpids};
use super::lifecycle::{destroy, start, stop_cmd};
use super::query::{detail, list_apps, list_sessions, status};
use crate::ops::state::Daemon;

/// Handles one command. Never panics on its input; errors are messages for the user.
pub fn handle(daemon: &Daemon, cmd: Command) -> Reply {
    let r = match cmd {
        Command::Ping => Ok(Payload::Pong { version: CTL_VERSION, pid: std::process::id(), rundir: daemon.rundir.clone() }),
        Command::CreateSession { name, output, token } => create(daemon, name, output, token, CreateOptions::default()),
        Command::CreateSessionWith { name, output, options } => create(daemon, name, output, None, options),
        Command::EnableChannel { session, name, config } => enable_channel(daemon, session, name, config),
        Command::EnableEvent { session, channel, patterns, level, exclusions, filter } => {
            enable_event(daemon, session, channel, patterns, level, exclusions, filter)
        }
        Command::EnableUserspaceProbe { session, probe } => super::configure::enable_userspace_probe(daemon, session, probe),
        Command::DisableUserspaceProbe { session, names, all } => super::configure::disable_userspace_probes(daemon, session, names, all),
        Command::AddContext { session, channel, contexts } => add_context(daemon, session, channel, contexts),
        Command::DisableEvent { session, channel, patterns, all } => disable_event(daemon, session, channel, patterns, all),
        Command::Start { session } => start(daemon, session),
        Command::Rotate { session } => {
            let name = daemon.lock().resolve(&session);
            name.and_then(|n| crate::ops::rotate::rotate(daemon, &n)).map(|archive| Payload::Rotated { archive })
        }
        Command::Stop { session } => stop_cmd(daemon, session),
        Command::Destroy { session } => {
            let name = daemon.lock().resolve(&session);
            name.and_then(|n| destroy(daemon, &n)).map(Payload::Destroyed)
        }
        Command::ListSessions => Ok(Payload::Sessions(list_sessions(daemon))),
        Command::ListSession { session } => {
            let name = daemon.lock().resolve(&session);
            name.and_then(|n| detail(daemon, &n).ok_or_else(|| format!("no session named {n:?}"))).map(Payload::Session)
        }
        Command::ListApps => Ok(Payload::Apps(list_apps(daemon))),
        Command::Status { session } => status(daemon, session),
        Command::TrackVpid { session, pids, all } => track_vpids(daemon, session, pids, all, true),
        Command::UntrackVpid { session, pids, all } => track_vpids(daemon, session, pids, all, false),
        Command::SnapshotRecord { session, max_size } => {
            let name = daemon.lock().resolve(&session);
            name.and_then(|n| crate::ops::snapshot::dump::record(daemon, &n, max_size)).map(Payload::Snapshot)
        }
        Command::SnapshotRecordTo { session, max_size, url } => {
            let name = daemon.lock().resolve(&session);
            name.and_then(|n| crate::ops::snapshot::relay::record(daemon, &n, max_size, Some(url), None)).map(Payload::Snapshot)
        }
        Command::SnapshotAddOutput { session, url } => {
            let name = daemon.lock().resolve(&session);
            name.and_then(|n| crate::ops::snapshot::relay::set_output(daemon, &n, url)).map(|()| Payload::Done)
        }
        Command::ReclaimMemory(req) => crate::ops::reclaim::reclaim(daemon, req).map(Payload::Reclaimed),
        Command::Clear { session } => {
            let name = daemon.lock().resolve(&session);
            name.and_then(|n| crate::ops::clear::clear(daemon, &n)).map(|()| Payload::Done)
        }
        Command::RegenerateMetadata { session } => {
            let name = daemon.lock().resolve(&session);
            name.and_then(|n| crate::ops::regenerate::metadata(daemon, &n)).map(|()| Payload::Done)
        }
        Command::RegenerateStatedump { session } => {
            let name = daemon.lock().resolve(&session);
            name.and_then(|n| crate::ops::regenerate::statedump(daemon, &n)).map(|()| Payload::Done)
        }
        Command::TrackIds { session, kind, ids, all, track } => super::id_trackers::track_ids(daemon, session, kind, ids, all, track),
        Command::AddTrigger { spec } => super::triggers::add(daemon, spec),
        Command::ListTriggers => Ok(super::triggers::list(daemon)),
        Command::RemoveTrigger { name } => super::triggers::remove(daemon, &name),
    };
    match r {
        Ok(p) => Reply::Ok(Box::new(p)),
        Err(message) => Reply::Error { message },
    }
}
