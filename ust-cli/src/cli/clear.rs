//! `ust clear` and `ust regenerate metadata|statedump` (LTTng's `lttng clear`,
//! `lttng regenerate`): verbs that discard or rewrite what a session recorded, while it
//! goes on.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use ust_ctl::protocol::{Command, Payload};

use super::connect::{connect, unexpected, Failure};
use super::{CliResult, SessionOpt};
use crate::out::outln;

/// `ust clear`.
#[derive(Debug, Args)]
pub struct ClearArgs {
    /// Session to clear (default: the current session; also `-s NAME`).
    pub name: Option<String>,
    /// Session.
    #[command(flatten)]
    pub session: SessionOpt,
    /// Clear every session (but `ust trace` ones).
    #[arg(short = 'a', long, conflicts_with_all = ["name", "session"])]
    pub all: bool,
}

/// `ust regenerate`.
#[derive(Debug, Subcommand)]
pub enum RegenerateCmd {
    /// Resample the clock offset (realtime − monotonic) and rewrite every trace's metadata.
    #[command(after_help = "Examples:
  ust regenerate metadata            # after an NTP step: wall-clock times right again
  ust regenerate metadata -s web")]
    Metadata(SessionOpt),
    /// Have every traced process of the session emit its state dump again.
    #[command(after_help = "Examples:
  ust regenerate statedump           # e.g. in a snapshot session, before `ust snapshot record`
  ust regenerate statedump -s fr")]
    Statedump(SessionOpt),
}

/// `ust clear`.
pub fn clear(a: ClearArgs) -> CliResult {
    if a.name.is_some() && a.session.session.is_some() && a.name != a.session.session {
        return Err(Failure::usage("clear: give the session once (NAME or -s NAME)"));
    }
    let mut c = connect()?;
    let names: Vec<Option<String>> = if a.all {
        let Payload::Sessions(list) = c.call(Command::ListSessions)? else { return Err(unexpected()) };
        list.into_iter().filter(|s| !s.trace).map(|s| Some(s.name)).collect()
    } else {
        vec![a.name.or(a.session.session)]
    };
    for n in names {
        c.call(Command::Clear { session: n.clone() })?;
        outln!("Session {} cleared", n.unwrap_or_else(|| "(current)".into()));
    }
    Ok(ExitCode::SUCCESS)
}

/// `ust regenerate`.
pub fn regenerate(r: RegenerateCmd) -> CliResult {
    let mut c = connect()?;
    match r {
        RegenerateCmd::Metadata(s) => {
            c.call(Command::RegenerateMetadata { session: s.session })?;
            outln!("Metadata successfully regenerated");
        }
        RegenerateCmd::Statedump(s) => {
            c.call(Command::RegenerateStatedump { session: s.session })?;
            outln!("State dump successfully regenerated");
        }
    }
    Ok(ExitCode::SUCCESS)
}
