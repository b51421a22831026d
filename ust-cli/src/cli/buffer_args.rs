//! A channel's buffers as `ust enable-channel` and `ust trace` take them ([`BufferArgs`]),
//! and the parser of sizes (`4k`, `1M`) that their options and others use.

use clap::Args;

/// A channel's buffers, as `ust enable-channel` and `ust trace` take them.
#[derive(Debug, Args, Clone, Default)]
pub struct BufferArgs {
    /// Sub-buffer size in bytes, a power of two of at least 4k (k, M, G suffixes; default
    /// 512k).
    #[arg(long, value_name = "N", value_parser = parse_subbuf_size)]
    pub subbuf_size: Option<u64>,
    /// Number of sub-buffers per CPU, a power of two (at least 2; default 16).
    #[arg(long, value_name = "N", value_parser = parse_num_subbuf)]
    pub num_subbuf: Option<u32>,
    /// Overwrite the oldest packets when full (flight recorder) instead of discarding new
    /// events; the overwritten packets are lost packets in the trace.
    #[arg(long)]
    pub overwrite: bool,
    /// Switch-timer period in µs (0 = off): a partly filled sub-buffer is closed and
    /// delivered every period.
    #[arg(long, value_name = "US")]
    pub switch_timer: Option<u64>,
}

impl BufferArgs {
    /// True when any option was given.
    pub fn any(&self) -> bool {
        self.subbuf_size.is_some() || self.num_subbuf.is_some() || self.overwrite || self.switch_timer.is_some()
    }

    /// `base` with the options given.
    pub fn apply(&self, base: ust_ctl::config::ChannelConfig) -> ust_ctl::config::ChannelConfig {
        ust_ctl::config::ChannelConfig {
            subbuf_size: self.subbuf_size.unwrap_or(base.subbuf_size),
            num_subbuf: self.num_subbuf.unwrap_or(base.num_subbuf),
            overwrite: self.overwrite || base.overwrite,
            switch_timer_us: self.switch_timer.unwrap_or(base.switch_timer_us),
            ..base
        }
    }
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
    if !n.is_power_of_two() || n < ust_ctl::config::MIN_SUBBUF_SIZE {
        return Err(format!("{n} is not a power of two of at least {}", ust_ctl::config::MIN_SUBBUF_SIZE));
    }
    Ok(n)
}

fn parse_num_subbuf(s: &str) -> Result<u32, String> {
    let n: u32 = s.trim().parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !n.is_power_of_two() || !(2..=ust_ctl::config::MAX_NUM_SUBBUF).contains(&n) {
        return Err(format!("{n} is not a power of two between 2 and {}", ust_ctl::config::MAX_NUM_SUBBUF));
    }
    Ok(n)
}

/// `--buffer-ownership=MODEL` (lttng-enable-channel(1) of LTTng 2.14 and later): `user` is
/// `--buffers-uid`, `process` is `--buffers-pid`, as the man page makes the deprecated
/// flags equivalents of these. `system` (one set of buffers for the whole system, LTTng's
/// `--buffers-global`) exists for the Linux kernel domain only, as in LTTng.
///
/// # Errors
/// Another model, named in the message.
pub fn parse_ownership(s: &str) -> Result<ust_ctl::config::BufferOwnership, String> {
    use ust_ctl::config::BufferOwnership;
    match s {
        "user" => Ok(BufferOwnership::Uid),
        "process" => Ok(BufferOwnership::Pid),
        "system" => Err("buffer ownership `system` is the Linux kernel domain's (LTTng's --buffers-global); user space channels are `user` (--buffers-uid) or `process` (--buffers-pid); kernel events come with `ust trace --kernel`".into()),
        other => Err(format!("unknown buffer ownership model {other:?}: use user (--buffers-uid) or process (--buffers-pid)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn buffer_options_override_the_base_config() {
        let b = BufferArgs { subbuf_size: Some(4096), num_subbuf: None, overwrite: true, switch_timer: Some(100) };
        let c = b.apply(ust_ctl::config::ChannelConfig::default());
        assert_eq!((c.subbuf_size, c.num_subbuf, c.overwrite, c.switch_timer_us), (4096, ust_ctl::config::DEFAULT_NUM_SUBBUF, true, 100));
        assert!(b.any() && !BufferArgs::default().any());
        assert!(parse_subbuf_size("5000").is_err() && parse_subbuf_size("2k").is_err() && parse_num_subbuf("3").is_err());
    }

    #[test]
    fn buffer_ownership_names_lttng_214s_models() {
        use crate::cli::args::Cli;
        use clap::Parser;
        use ust_ctl::config::BufferOwnership;
        let own = |args: &[&str]| match Cli::try_parse_from(args).map(|c| c.command) {
            Ok(crate::cli::args::Cmd::EnableChannel(a)) => Ok(a.buffers.get()),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(own(&["ust", "enable-channel", "ch", "--buffer-ownership=user"]), Ok(Some(BufferOwnership::Uid)));
        assert_eq!(own(&["ust", "enable-channel", "ch", "--buffer-ownership", "process"]), Ok(Some(BufferOwnership::Pid)));
        assert_eq!(own(&["ust", "enable-channel", "ch"]), Ok(None));
        let system = own(&["ust", "enable-channel", "ch", "--buffer-ownership=system"]).unwrap_err();
        assert!(system.contains("Linux kernel domain's"), "{system}");
        let both = own(&["ust", "enable-channel", "ch", "--buffer-ownership=user", "--buffers-pid"]).unwrap_err();
        assert!(both.contains("cannot be used with"), "{both}");
    }
}
