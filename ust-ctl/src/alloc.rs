//! A channel's buffer allocation policy and preallocation policy, LTTng 2.14's
//! `--buffer-allocation=per-cpu|per-channel` and 2.15's
//! `--buffer-preallocation=preallocate|on-demand` (lttng-enable-channel(1)), with the
//! names LTTng's command line and its session XML (`session.xsd`:
//! `channel_allocation_policy_type`, `channel_preallocation_policy_type`) give them.

use serde::{Deserialize, Serialize};

/// How many ring buffers one owner (a process, or a user with per-UID buffers) gets for a
/// channel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BufferAllocation {
    /// One ring per possible CPU (the default, as in LTTng): `<channel>_<cpu>` streams.
    #[default]
    PerCpu,
    /// One ring for the whole channel, shared by the writers of every CPU (their
    /// reservation is a compare-and-swap): one `<channel>_0` stream whose packet context
    /// says `cpu_id` 4294967295, LTTng-UST's `-1` for a per-channel buffer.
    PerChannel,
}

impl BufferAllocation {
    /// The command-line name: `per-cpu` or `per-channel`.
    pub fn cli_name(self) -> &'static str {
        match self {
            BufferAllocation::PerCpu => "per-cpu",
            BufferAllocation::PerChannel => "per-channel",
        }
    }

    /// The session XML value (`PER_CPU`, `PER_CHANNEL`).
    pub fn xml_name(self) -> &'static str {
        match self {
            BufferAllocation::PerCpu => "PER_CPU",
            BufferAllocation::PerChannel => "PER_CHANNEL",
        }
    }

    /// Parses a command-line name.
    ///
    /// # Errors
    /// A message naming the accepted values.
    pub fn parse_cli(s: &str) -> Result<BufferAllocation, String> {
        match s {
            "per-cpu" => Ok(BufferAllocation::PerCpu),
            "per-channel" => Ok(BufferAllocation::PerChannel),
            other => Err(format!("unknown buffer allocation policy {other:?}: use per-cpu or per-channel")),
        }
    }

    /// Parses a session XML value; `None` for anything else.
    pub fn parse_xml(s: &str) -> Option<BufferAllocation> {
        match s.trim() {
            "PER_CPU" => Some(BufferAllocation::PerCpu),
            "PER_CHANNEL" => Some(BufferAllocation::PerChannel),
            _ => None,
        }
    }

    /// Ring buffers per owner on a machine of `ncpus` possible CPUs.
    pub fn buffers(self, ncpus: u32) -> u32 {
        match self {
            BufferAllocation::PerCpu => ncpus,
            BufferAllocation::PerChannel => 1,
        }
    }

    /// True for the default ([`BufferAllocation::PerCpu`]), which is not serialized.
    pub fn is_default(&self) -> bool {
        *self == BufferAllocation::PerCpu
    }
}

/// When a ring buffer's memory is allocated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BufferPreallocation {
    /// Every page of every ring is allocated when the buffers are made (`fallocate`): a
    /// buffer the memory cannot hold is refused then, and writers never fault a page in.
    /// The default, as in LTTng.
    #[default]
    Preallocate,
    /// A ring's pages are allocated when first written: a CPU no writer runs on costs
    /// only its buffer's control page. Writing a new page may fault (a little slower),
    /// and if the memory is exhausted then, the writing process gets `SIGBUS`, as with
    /// any sparse shared memory.
    OnDemand,
}

impl BufferPreallocation {
    /// The command-line name: `preallocate` or `on-demand`.
    pub fn cli_name(self) -> &'static str {
        match self {
            BufferPreallocation::Preallocate => "preallocate",
            BufferPreallocation::OnDemand => "on-demand",
        }
    }

    /// The session XML value (`PREALLOCATE`, `ON_DEMAND`).
    pub fn xml_name(self) -> &'static str {
        match self {
            BufferPreallocation::Preallocate => "PREALLOCATE",
            BufferPreallocation::OnDemand => "ON_DEMAND",
        }
    }

    /// Parses a command-line name.
    ///
    /// # Errors
    /// A message naming the accepted values.
    pub fn parse_cli(s: &str) -> Result<BufferPreallocation, String> {
        match s {
            "preallocate" => Ok(BufferPreallocation::Preallocate),
            "on-demand" => Ok(BufferPreallocation::OnDemand),
            other => Err(format!("unknown buffer preallocation policy {other:?}: use preallocate or on-demand")),
        }
    }

    /// Parses a session XML value; `None` for anything else.
    pub fn parse_xml(s: &str) -> Option<BufferPreallocation> {
        match s.trim() {
            "PREALLOCATE" => Some(BufferPreallocation::Preallocate),
            "ON_DEMAND" => Some(BufferPreallocation::OnDemand),
            _ => None,
        }
    }

    /// True for the default ([`BufferPreallocation::Preallocate`]), which is not
    /// serialized.
    pub fn is_default(&self) -> bool {
        *self == BufferPreallocation::Preallocate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for a in [BufferAllocation::PerCpu, BufferAllocation::PerChannel] {
            assert_eq!(BufferAllocation::parse_cli(a.cli_name()), Ok(a));
            assert_eq!(BufferAllocation::parse_xml(a.xml_name()), Some(a));
        }
        for p in [BufferPreallocation::Preallocate, BufferPreallocation::OnDemand] {
            assert_eq!(BufferPreallocation::parse_cli(p.cli_name()), Ok(p));
            assert_eq!(BufferPreallocation::parse_xml(p.xml_name()), Some(p));
        }
        assert!(BufferAllocation::parse_cli("global").is_err());
        assert_eq!((BufferAllocation::PerChannel.buffers(384), BufferAllocation::PerCpu.buffers(384)), (1, 384));
    }
}
