//! The daemon's handling of each control request ([`ust_ctl::protocol`]): [`handle`]
//! dispatches to the session settings ([`configure`]), the session's life ([`lifecycle`]:
//! start, stop, rotate, destroy), the listings ([`query`]), and [`server`] runs one `ctl`
//! connection.
//!
//! `stop` follows LTTng's order: clear the enable masks (`SetEnabled`), `Sync` every
//! process of the session and wait for `SyncDone` (at most [`SYNC_TIMEOUT`]: a dead or
//! stuck writer never blocks it), flush every buffer from the reader side, drain.
//! `destroy` is `stop`, then `RemoveChannel`, a final drain, and closing the files.

pub mod configure;
pub mod id_trackers;
pub mod lifecycle;
pub mod query;
pub mod server;

pub use lifecycle::{destroy, destroy_all, rotate, stop, SYNC_TIMEOUT};
pub use query::detail;
pub use server::{reply_error, serve};

use ust_ctl::protocol::*;

use crate::ops::state::{Daemon, State};
use configure::*;
use lifecycle::*;
use query::*;

type Res<T> = Result<T, String>;

fn resolve(st: &State, session: &Option<String>) -> Res<String> {
    match session {
        Some(n) => {
            if st.sessions.contains_key(n) {
                Ok(n.clone())
            } else {
                Err(format!("no session named {n:?} (see `ust list`)"))
            }
        }
        None => match &st.current {
            Some(n) if st.sessions.contains_key(n) => Ok(n.clone()),
            _ => Err("no current session: create one with `ust create`, or name one with -s/--session".into()),
        },
    }
}

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
        Command::AddContext { session, channel, contexts } => add_context(daemon, session, channel, contexts),
        Command::DisableEvent { session, channel, patterns, all } => disable_event(daemon, session, channel, patterns, all),
        Command::Start { session } => start(daemon, session),
        Command::Rotate { session } => {
            let name = resolve(&daemon.lock(), &session);
            name.and_then(|n| rotate(daemon, &n)).map(|archive| Payload::Rotated { archive })
        }
        Command::Stop { session } => stop_cmd(daemon, session),
        Command::Destroy { session } => {
            let name = resolve(&daemon.lock(), &session);
            name.and_then(|n| destroy(daemon, &n)).map(Payload::Destroyed)
        }
        Command::ListSessions => Ok(Payload::Sessions(list_sessions(daemon))),
        Command::ListSession { session } => {
            let name = resolve(&daemon.lock(), &session);
            name.and_then(|n| detail(daemon, &n).ok_or_else(|| format!("no session named {n:?}"))).map(Payload::Session)
        }
        Command::ListApps => Ok(Payload::Apps(list_apps(daemon))),
        Command::Status { session } => status(daemon, session),
        Command::TrackVpid { session, pids, all } => track_vpids(daemon, session, pids, all, true),
        Command::UntrackVpid { session, pids, all } => track_vpids(daemon, session, pids, all, false),
        Command::SnapshotRecord { session, max_size } => {
            let name = resolve(&daemon.lock(), &session);
            name.and_then(|n| crate::ops::snapshot::record(daemon, &n, max_size)).map(Payload::Snapshot)
        }
        Command::SnapshotRecordTo { session, max_size, url } => {
            let name = resolve(&daemon.lock(), &session);
            name.and_then(|n| crate::ops::relay::snapshot::record(daemon, &n, max_size, Some(url))).map(Payload::Snapshot)
        }
        Command::SnapshotAddOutput { session, url } => {
            let name = resolve(&daemon.lock(), &session);
            name.and_then(|n| crate::ops::relay::snapshot::set_output(daemon, &n, url)).map(|()| Payload::Done)
        }
        Command::Clear { session } => {
            let name = resolve(&daemon.lock(), &session);
            name.and_then(|n| crate::ops::clear::clear(daemon, &n)).map(|()| Payload::Done)
        }
        Command::RegenerateMetadata { session } => {
            let name = resolve(&daemon.lock(), &session);
            name.and_then(|n| crate::ops::regenerate::metadata(daemon, &n)).map(|()| Payload::Done)
        }
        Command::RegenerateStatedump { session } => {
            let name = resolve(&daemon.lock(), &session);
            name.and_then(|n| crate::ops::regenerate::statedump(daemon, &n)).map(|()| Payload::Done)
        }
        Command::TrackIds { session, kind, ids, all, track } => id_trackers::track_ids(daemon, session, kind, ids, all, track),
        Command::AddTrigger { spec } => crate::ops::triggers::add(daemon, spec),
        Command::ListTriggers => Ok(crate::ops::triggers::list(daemon)),
        Command::RemoveTrigger { name } => crate::ops::triggers::remove(daemon, &name),
    };
    match r {
        Ok(p) => Reply::Ok(Box::new(p)),
        Err(message) => Reply::Error { message },
    }
}
