//! `--buffer-allocation` (LTTng 2.14) and `--buffer-preallocation` (LTTng 2.15) of
//! `ust enable-channel`, as lttng-enable-channel(1) names them ([`AllocArgs`]).

use clap::Args;
use ust_ctl::config::{BufferAllocation, BufferPreallocation, ChannelConfig};

/// A channel's allocation and preallocation policies.
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct AllocArgs {
    /// One ring buffer per CPU (per-cpu, the default) or one per channel shared by the
    /// writers of every CPU (per-channel: a single `<channel>_0` stream per process, or
    /// per user with --buffer-ownership=user).
    #[arg(long, value_name = "per-cpu|per-channel", value_parser = BufferAllocation::parse_cli)]
    pub buffer_allocation: Option<BufferAllocation>,
    /// Allocate every buffer page when the buffers are made (preallocate, the default), or
    /// when a writer first uses it (on-demand: a CPU no writer runs on costs one page).
    #[arg(long, value_name = "preallocate|on-demand", value_parser = BufferPreallocation::parse_cli)]
    pub buffer_preallocation: Option<BufferPreallocation>,
}

impl AllocArgs {
    /// `config` with the policies given.
    pub fn apply(self, config: ChannelConfig) -> ChannelConfig {
        ChannelConfig {
            allocation: self.buffer_allocation.unwrap_or(config.allocation),
            preallocation: self.buffer_preallocation.unwrap_or(config.preallocation),
            ..config
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::{Cli, Cmd};
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<ChannelConfig, String> {
        match Cli::try_parse_from(args).map(|c| c.command) {
            Ok(Cmd::EnableChannel(a)) => Ok(a.alloc.apply(ChannelConfig::default())),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn lttng_names_are_taken() {
        let c = parse(&["ust", "enable-channel", "-u", "ch", "--buffer-allocation=per-channel", "--buffer-preallocation", "on-demand"]).unwrap();
        assert_eq!((c.allocation, c.preallocation), (BufferAllocation::PerChannel, BufferPreallocation::OnDemand));
        let d = parse(&["ust", "enable-channel", "ch"]).unwrap();
        assert_eq!((d.allocation, d.preallocation), (BufferAllocation::PerCpu, BufferPreallocation::Preallocate));
        let bad = parse(&["ust", "enable-channel", "ch", "--buffer-allocation=global"]).unwrap_err();
        assert!(bad.contains("per-cpu or per-channel"), "{bad}");
        assert!(parse(&["ust", "enable-channel", "ch", "--buffer-preallocation=lazy"]).is_err());
    }
}
