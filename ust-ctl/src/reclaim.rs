//! Memory reclaim's vocabulary (LTTng 2.15): the automatic reclaim policy of a channel
//! (`enable-channel --auto-reclaim-memory=off|consumed|older-than:AGE`), the ages of
//! `reclaim-memory --older-than`, and what the daemon answers.

use serde::{Deserialize, Serialize};

/// A channel's automatic memory reclaim policy (`--auto-reclaim-memory`, LTTng 2.15's
/// `lttng_channel_set_automatic_memory_reclamation_policy`; saved as `<reclaim_policy>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AutoReclaim {
    /// `consumed`: the daemon gives a sub-buffer's memory back as soon as it has consumed
    /// (read) it. Not for snapshot sessions (nothing is consumed there).
    Consumed,
    /// `older-than:AGE`: every half AGE (at least every [`MIN_PERIOD_US`]), the daemon
    /// reclaims the sub-buffers closed more than AGE µs ago, as `ust reclaim-memory
    /// --older-than AGE` would. Saved as `<periodic><age_threshold>`.
    OlderThan(u64),
}

/// Shortest period of the automatic reclaim timer, µs (LTTng's "at least a period defined
/// at build time").
pub const MIN_PERIOD_US: u64 = 10_000;

impl AutoReclaim {
    /// Parses `off` (`None`), `consumed`, or `older-than:AGE` ([`parse_age_us`]).
    ///
    /// # Errors
    /// A message naming the bad value.
    pub fn parse(s: &str) -> Result<Option<AutoReclaim>, String> {
        match s.trim() {
            "off" => Ok(None),
            "consumed" => Ok(Some(AutoReclaim::Consumed)),
            t => match t.strip_prefix("older-than:") {
                Some(age) => match parse_age_us(age)? {
                    0 => Err("older-than:0 reclaims nothing older than now: use consumed, or an age above 0".into()),
                    us => Ok(Some(AutoReclaim::OlderThan(us))),
                },
                None => Err(format!("{s:?} is not an automatic memory reclaim policy: off, consumed, or older-than:AGE (e.g. older-than:30s)")),
            },
        }
    }

    /// The form [`AutoReclaim::parse`] reads.
    pub fn text(&self) -> String {
        match self {
            AutoReclaim::Consumed => "consumed".into(),
            AutoReclaim::OlderThan(us) => format!("older-than:{}", age_text(*us)),
        }
    }
}

/// Parses an age in µs as LTTng's `utils_parse_time_suffix`: a whole number with an
/// optional suffix `us` (the default), `ms`, `s`, `m` (minutes) or `h`.
///
/// # Errors
/// A message naming the bad value.
pub fn parse_age_us(s: &str) -> Result<u64, String> {
    let bad = || format!("{s:?} is not an age: a whole number of µs, or with a suffix us, ms, s, m or h (e.g. 500ms, 2s)");
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit {
        "" | "us" => 1,
        "ms" => 1_000,
        "s" => 1_000_000,
        "m" => 60_000_000,
        "h" => 3_600_000_000,
        _ => return Err(bad()),
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    n.checked_mul(mult).ok_or_else(|| format!("{s:?} is too long an age"))
}

/// An age in µs in the largest unit that divides it (`30s`, `1500ms`, `7us`).
pub fn age_text(us: u64) -> String {
    for (mult, unit) in [(3_600_000_000, "h"), (60_000_000, "m"), (1_000_000, "s"), (1_000, "ms")] {
        if us != 0 && us.is_multiple_of(mult) {
            return format!("{}{unit}", us / mult);
        }
    }
    format!("{us}us")
}

/// What `reclaim-memory` did to one channel.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ChannelReclaimed {
    /// The channel.
    pub name: String,
    /// Sub-buffers whose memory was given back.
    pub reclaimed: u64,
    /// Sub-buffers delivered and not consumed yet (discard mode): given back once consumed.
    pub pending: u64,
    /// Overwrite mode: packets that were delivered and not read, dropped by the reclaim.
    pub dropped: u64,
}

/// The memory of one buffer owner's streams of a channel (`ust list SESSION`; LTTng's
/// `data_stream_info_set`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct OwnerMemory {
    /// `PID n` or `UID n`.
    pub owner: String,
    /// Process id (per-process buffers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// User id (per-user buffers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// One entry per CPU buffer: (CPU, allocated bytes, resident bytes).
    pub cpus: Vec<(u32, u64, u64)>,
}

/// A channel's memory (`ust list SESSION`): its buffers' mappings in the daemon, allocated
/// and resident (`mincore(2)`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ChannelMemory {
    /// Bytes allocated: the buffer files' sizes.
    pub allocated: u64,
    /// Bytes resident now.
    pub resident: u64,
    /// Per owner (process or user), per CPU.
    pub owners: Vec<OwnerMemory>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_as_lttng_reads_them() {
        assert_eq!(parse_age_us("250").unwrap(), 250);
        assert_eq!(parse_age_us("250us").unwrap(), 250);
        assert_eq!(parse_age_us("5ms").unwrap(), 5_000);
        assert_eq!(parse_age_us("2s").unwrap(), 2_000_000);
        assert_eq!(parse_age_us("3m").unwrap(), 180_000_000);
        assert_eq!(parse_age_us("1h").unwrap(), 3_600_000_000);
        for bad in ["", "-1", "2x", "1.5s", "s", "99999999999999999999"] {
            assert!(parse_age_us(bad).is_err(), "{bad:?}");
        }
        assert_eq!(age_text(30_000_000), "30s");
        assert_eq!(age_text(1_500), "1500us");
    }

    #[test]
    fn policies() {
        assert_eq!(AutoReclaim::parse("off").unwrap(), None);
        assert_eq!(AutoReclaim::parse("consumed").unwrap(), Some(AutoReclaim::Consumed));
        assert_eq!(AutoReclaim::parse("older-than:30s").unwrap(), Some(AutoReclaim::OlderThan(30_000_000)));
        assert!(AutoReclaim::parse("older-than:0").is_err());
        assert!(AutoReclaim::parse("sometimes").is_err());
        let p = AutoReclaim::OlderThan(1_500);
        assert_eq!(AutoReclaim::parse(&p.text()).unwrap(), Some(p));
    }
}
