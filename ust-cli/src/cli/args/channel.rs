//! The arguments of `ust enable-channel` and the buffer ownership options it shares with
//! `create` and `trace`.

// The argument docs are also the `--help` texts.
#![allow(rustdoc::invalid_html_tags)]

use clap::Args;

use super::{parse_size, BufferArgs, SessionOpt};

/// `--buffers-uid | --buffers-pid` (LTTng's), on `create`, `enable-channel` and `trace`.
#[derive(Debug, Args, Default, Clone, Copy)]
pub struct BuffersOpt {
    /// One set of per-CPU buffers per user, shared by all of that user's processes:
    /// one trace in <output>/ust/uid/<UID>/64-bit/.
    #[arg(long, conflicts_with = "buffers_pid")]
    pub buffers_uid: bool,
    /// One set of per-CPU buffers per process (the default): one trace per process in
    /// <output>/ust/pid/<procname>-<pid>-<stamp>/.
    #[arg(long)]
    pub buffers_pid: bool,
    /// LTTng 2.14's name of the same choice: `user` is --buffers-uid, `process`
    /// --buffers-pid (`system`, the Linux kernel domain's, is refused).
    #[arg(long, value_name = "user|process", value_parser = crate::cli::buffer_args::parse_ownership, conflicts_with_all = ["buffers_uid", "buffers_pid"])]
    pub buffer_ownership: Option<ust_ctl::config::BufferOwnership>,
}

impl BuffersOpt {
    /// The ownership asked for; `None` when no flag was given.
    pub fn get(self) -> Option<ust_ctl::config::BufferOwnership> {
        use ust_ctl::config::BufferOwnership;
        match (self.buffers_uid, self.buffers_pid) {
            (true, _) => Some(BufferOwnership::Uid),
            (_, true) => Some(BufferOwnership::Pid),
            _ => self.buffer_ownership,
        }
    }
}

/// `ust enable-channel`.
#[derive(Debug, Args)]
pub struct EnableChannelArgs {
    /// Channel name.
    pub name: String,
    /// Session.
    #[command(flatten)]
    pub session: SessionOpt,
    /// User-space domain (accepted; the only domain).
    #[arg(short = 'u', long = "userspace")]
    pub userspace: bool,
    /// Sizes, event-loss mode and switch timer.
    #[command(flatten)]
    pub buffer: BufferArgs,
    /// Discard new events when full (the default).
    #[arg(long, conflicts_with = "overwrite")]
    pub discard: bool,
    /// Read-timer period in µs (default 20000). With the default, a discard-mode channel is
    /// also read as its writers fill it (a look every 2 ms while they are busy); with any
    /// other period it is read at that period only, as LTTng's read timer.
    #[arg(long, value_name = "US")]
    pub read_timer: Option<u64>,
    /// Start a new stream file (<channel>_<cpu>_<k>) before one would exceed B bytes
    /// (k, M, G suffixes; at least the sub-buffer size: files hold whole packets).
    #[arg(long, value_name = "B", value_parser = parse_size)]
    pub tracefile_size: Option<u64>,
    /// Keep at most N files per stream, removing the oldest (needs --tracefile-size).
    #[arg(long, value_name = "N")]
    pub tracefile_count: Option<u64>,
    /// Buffer ownership (default: the session's).
    #[command(flatten)]
    pub buffers: BuffersOpt,
    /// Blocking mode (discard mode only): a writer whose buffer is full waits up to US
    /// microseconds for room before discarding the event; `0` never waits (the default),
    /// `inf` waits without limit. The traced program must allow it (`UST_ALLOW_BLOCKING=1`
    /// in its environment, as LTTng's `LTTNG_UST_ALLOW_BLOCKING`); it never waits in a
    /// signal handler or a nested tracepoint.
    #[arg(long, value_name = "US|inf", value_parser = parse_blocking_timeout)]
    pub blocking_timeout: Option<u64>,
    /// Allocation and preallocation policies (LTTng 2.14, 2.15).
    #[command(flatten)]
    pub alloc: crate::cli::alloc_args::AllocArgs,
    /// Automatic memory reclaim (LTTng 2.15): `off` (the default); `consumed`, give a
    /// sub-buffer's memory back as soon as it is read (not in snapshot sessions);
    /// `older-than:AGE`, every half AGE give back the sub-buffers closed more than AGE ago
    /// (AGE in µs, or with a suffix us, ms, s, m, h).
    #[arg(long, value_name = "off|consumed|older-than:AGE", value_parser = crate::cli::reclaim::parse_policy)]
    pub auto_reclaim_memory: Option<crate::cli::reclaim::PolicyArg>,
    /// `--auto-reclaim-memory=older-than:AGE`, spelled as LTTng 2.15's release candidates
    /// did.
    #[arg(long, value_name = "AGE", value_parser = crate::cli::reclaim::parse_older_than_policy, conflicts_with = "auto_reclaim_memory")]
    pub auto_reclaim_memory_older_than: Option<ust_ctl::reclaim::AutoReclaim>,
}

fn parse_blocking_timeout(s: &str) -> Result<u64, String> {
    match s.trim() {
        "inf" => Ok(ust_ctl::config::BLOCKING_FOREVER),
        t => t.parse::<u64>().ok().filter(|n| *n != ust_ctl::config::BLOCKING_FOREVER).ok_or_else(|| format!("{s:?} is not a timeout: microseconds, or inf")),
    }
}
