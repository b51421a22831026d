//! `ust reclaim-memory` (LTTng 2.15's `lttng reclaim-memory`), `enable-channel
//! --auto-reclaim-memory`, and the memory lines of `ust list SESSION` (LTTng 2.15's
//! "Memory usage" and "Auto. memory reclaim policy").

use std::process::ExitCode;

use clap::Args;
use ust_ctl::protocol::{ChannelDetail, Command, Payload, ReclaimRequest};
use ust_ctl::reclaim::{age_text, parse_age_us, AutoReclaim, ChannelReclaimed};

use super::connect::{connect, unexpected, Failure};
use super::{CliResult, SessionOpt};
use crate::out::outln;

/// `ust reclaim-memory`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["all", "channels"])))]
pub struct ReclaimMemoryArgs {
    /// Channels of the session.
    #[arg(value_name = "CHANNEL")]
    pub channels: Vec<String>,
    /// Every channel of the session.
    #[arg(short = 'a', long, conflicts_with = "channels")]
    pub all: bool,
    /// User-space domain (mandatory, as in LTTng 2.15: the only domain with reclaim).
    #[arg(short = 'u', long = "userspace")]
    pub userspace: bool,
    /// Only sub-buffers closed more than AGE ago (µs, or with a suffix us, ms, s, m, h).
    /// If the channel has been idle for longer than AGE, its open sub-buffer is closed and
    /// every sub-buffer is eligible.
    #[arg(long, value_name = "AGE", value_parser = parse_age_us)]
    pub older_than: Option<u64>,
    /// Do not wait for what is being consumed: reclaim what is eligible now, and the
    /// sub-buffers still pending once they are consumed.
    #[arg(long)]
    pub no_wait: bool,
    /// Session.
    #[command(flatten)]
    pub session: SessionOpt,
    /// The result as JSON (LTTng's `--mi xml` `channels` element: name,
    /// reclaimed_subbuffers, pending_subbuffers).
    #[arg(long)]
    pub json: bool,
}

/// `ust reclaim-memory`: one request to the daemon; prints what each channel gave back.
pub fn reclaim_memory(a: ReclaimMemoryArgs) -> CliResult {
    if !a.userspace {
        return Err(Failure::usage("reclaim-memory: one domain must be specified (--userspace)"));
    }
    let mut c = connect()?;
    let req = ReclaimRequest { session: a.session.session, channels: a.channels, older_than_us: a.older_than, wait: !a.no_wait };
    let Payload::Reclaimed(list) = c.call(Command::ReclaimMemory(req))? else { return Err(unexpected()) };
    if a.json {
        #[derive(serde::Serialize)]
        struct Mi<'a> {
            name: &'a str,
            reclaimed_subbuffers: u64,
            pending_subbuffers: u64,
            dropped_packets: u64,
        }
        let mi: Vec<Mi> =
            list.iter().map(|c| Mi { name: &c.name, reclaimed_subbuffers: c.reclaimed, pending_subbuffers: c.pending, dropped_packets: c.dropped }).collect();
        crate::out::print_json(&serde_json::json!({ "channels": mi }));
        return Ok(ExitCode::SUCCESS);
    }
    for l in result_lines(&list) {
        outln!("{l}");
    }
    Ok(ExitCode::SUCCESS)
}

/// LTTng's lines: "Channel `c`: N sub-buffers reclaimed[, M pending]", and a total when
/// several channels were reclaimed.
pub fn result_lines(list: &[ChannelReclaimed]) -> Vec<String> {
    let sb = |n: u64| if n == 1 { "sub-buffer" } else { "sub-buffers" };
    let line = |head: String, n: u64, pending: u64| {
        if pending > 0 {
            format!("{head}: {n} {} reclaimed, {pending} pending", sb(n))
        } else {
            format!("{head}: {n} {} reclaimed", sb(n))
        }
    };
    if list.is_empty() {
        return vec!["No channels to reclaim.".into()];
    }
    let mut out: Vec<String> = list.iter().map(|c| line(format!("Channel `{}`", c.name), c.reclaimed, c.pending)).collect();
    for c in list.iter().filter(|c| c.dropped > 0) {
        out.push(format!("Channel `{}`: {} unread packet(s) dropped (overwrite mode)", c.name, c.dropped));
    }
    if list.len() > 1 {
        out.push(line("Total".into(), list.iter().map(|c| c.reclaimed).sum(), list.iter().map(|c| c.pending).sum()));
    }
    out
}

/// The value of `--auto-reclaim-memory`: a policy, or `None` for `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyArg(pub Option<AutoReclaim>);

/// Parses `--auto-reclaim-memory` (`off`, `consumed`, `older-than:AGE`).
///
/// # Errors
/// A message for clap.
pub fn parse_policy(s: &str) -> Result<PolicyArg, String> {
    AutoReclaim::parse(s).map(PolicyArg)
}

/// Parses `--auto-reclaim-memory-older-than` (an age above 0).
///
/// # Errors
/// A message for clap.
pub fn parse_older_than_policy(s: &str) -> Result<AutoReclaim, String> {
    match parse_age_us(s)? {
        0 => Err("an age of 0 reclaims nothing: use --auto-reclaim-memory=consumed".into()),
        us => Ok(AutoReclaim::OlderThan(us)),
    }
}

/// `bytes` as LTTng's `utils_value_unit_from_size` shows them (`31.45 KiB`).
pub fn size_text(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2} {}", units[u])
}

/// The channel's "Auto. memory reclaim policy" attribute line (LTTng 2.15's words).
pub fn policy_line(c: &ChannelDetail) -> String {
    let p = match c.config.auto_reclaim {
        None => "None".to_string(),
        Some(AutoReclaim::Consumed) => "When consumed".into(),
        Some(AutoReclaim::OlderThan(us)) => format!("When older than {}", age_text(us)),
    };
    format!("      Auto. memory reclaim policy: {p}")
}

/// The "Memory usage" block of a channel: resident / allocated, in total and per buffer
/// owner ("For PID n", "For UID n", as LTTng 2.15's `--mem-usage=compact`), then each CPU.
pub fn print_memory(c: &ChannelDetail) {
    let Some(m) = &c.memory else { return };
    let pair = |r: u64, a: u64| format!("{:>11} / {:>11}", size_text(r), size_text(a));
    outln!("\n    Memory usage: {} (resident / allocated)", pair(m.resident, m.allocated));
    for o in &m.owners {
        let (r, a) = o.cpus.iter().fold((0u64, 0u64), |(r, a), c| (r.saturating_add(c.2), a.saturating_add(c.1)));
        outln!("      For {}: {}", o.owner, pair(r, a));
        for (cpu, a, r) in &o.cpus {
            match cpu {
                // A per-channel buffer (`--buffer-allocation=per-channel`): every CPU's.
                &u32::MAX => outln!("        All CPUs: {}", pair(*r, *a)),
                c => outln!("        CPU {c:>3}: {}", pair(*r, *a)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lttng_result_lines() {
        let one = vec![ChannelReclaimed { name: "c".into(), reclaimed: 1, pending: 0, dropped: 0 }];
        assert_eq!(result_lines(&one), vec!["Channel `c`: 1 sub-buffer reclaimed"]);
        let two = vec![
            ChannelReclaimed { name: "a".into(), reclaimed: 3, pending: 2, dropped: 0 },
            ChannelReclaimed { name: "b".into(), reclaimed: 0, pending: 0, dropped: 0 },
        ];
        assert_eq!(
            result_lines(&two),
            vec!["Channel `a`: 3 sub-buffers reclaimed, 2 pending", "Channel `b`: 0 sub-buffers reclaimed", "Total: 3 sub-buffers reclaimed, 2 pending"]
        );
        assert_eq!(result_lines(&[]), vec!["No channels to reclaim."]);
        assert_eq!(size_text(32 << 20), "32.00 MiB");
        assert_eq!(size_text(100), "100.00 B");
    }
}
