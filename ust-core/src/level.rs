//! Log levels of tracepoints, with LTTng-UST's names and numbers (`lttng/ust-tracepoint-event.h`,
//! `enum lttng_ust_loglevel`: `TRACE_EMERG` = 0 … `TRACE_DEBUG` = 14).

use serde::{Deserialize, Serialize};

/// Severity of a tracepoint. A smaller number is more severe, as syslog and LTTng order them.
///
/// `ust enable-event --loglevel L` enables events whose level is `L` or more severe
/// (number `<= L`); `--loglevel-only L` enables level `L` only. The default level of a
/// tracepoint is [`Level::DebugLine`] (13), as in LTTng-UST.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum Level {
    /// 0: system is unusable.
    Emerg = 0,
    /// 1: action must be taken immediately.
    Alert = 1,
    /// 2: critical conditions.
    Crit = 2,
    /// 3: error conditions.
    Err = 3,
    /// 4: warning conditions.
    Warning = 4,
    /// 5: normal but significant condition.
    Notice = 5,
    /// 6: informational message.
    Info = 6,
    /// 7: debug information with system-level scope.
    DebugSystem = 7,
    /// 8: debug information with program-level scope.
    DebugProgram = 8,
    /// 9: debug information with process-level scope.
    DebugProcess = 9,
    /// 10: debug information with module-level scope.
    DebugModule = 10,
    /// 11: debug information with compilation-unit scope.
    DebugUnit = 11,
    /// 12: debug information with function-level scope.
    DebugFunction = 12,
    /// 13: debug information with line-level scope (the default).
    #[default]
    DebugLine = 13,
    /// 14: debug-level message.
    Debug = 14,
}

impl Level {
    /// Every level, most severe first (index = number).
    pub const ALL: [Level; 15] = [
        Level::Emerg,
        Level::Alert,
        Level::Crit,
        Level::Err,
        Level::Warning,
        Level::Notice,
        Level::Info,
        Level::DebugSystem,
        Level::DebugProgram,
        Level::DebugProcess,
        Level::DebugModule,
        Level::DebugUnit,
        Level::DebugFunction,
        Level::DebugLine,
        Level::Debug,
    ];

    /// The level's number, 0 (`Emerg`) to 14 (`Debug`).
    pub const fn number(self) -> u8 {
        self as u8
    }

    /// The level with number `n`, or `None` past 14.
    pub const fn from_number(n: u8) -> Option<Level> {
        if (n as usize) < Level::ALL.len() {
            Some(Level::ALL[n as usize])
        } else {
            None
        }
    }

    /// LTTng's name, as `lttng list` and `lttng_ust_tracelog:` event names print it:
    /// `TRACE_EMERG` … `TRACE_DEBUG_LINE`, `TRACE_DEBUG`.
    pub const fn lttng_name(self) -> &'static str {
        match self {
            Level::Emerg => "TRACE_EMERG",
            Level::Alert => "TRACE_ALERT",
            Level::Crit => "TRACE_CRIT",
            Level::Err => "TRACE_ERR",
            Level::Warning => "TRACE_WARNING",
            Level::Notice => "TRACE_NOTICE",
            Level::Info => "TRACE_INFO",
            Level::DebugSystem => "TRACE_DEBUG_SYSTEM",
            Level::DebugProgram => "TRACE_DEBUG_PROGRAM",
            Level::DebugProcess => "TRACE_DEBUG_PROCESS",
            Level::DebugModule => "TRACE_DEBUG_MODULE",
            Level::DebugUnit => "TRACE_DEBUG_UNIT",
            Level::DebugFunction => "TRACE_DEBUG_FUNCTION",
            Level::DebugLine => "TRACE_DEBUG_LINE",
            Level::Debug => "TRACE_DEBUG",
        }
    }

    /// Parses a level as a user writes it on the command line: the Rust name (`Warning`,
    /// `debug_line`, any case, `_` optional), LTTng's name (`TRACE_WARNING`), or the number.
    ///
    /// # Errors
    /// `None` when nothing matches.
    pub fn parse(s: &str) -> Option<Level> {
        if let Ok(n) = s.parse::<u8>() {
            return Level::from_number(n);
        }
        let norm: String = s.trim().to_ascii_lowercase().trim_start_matches("trace_").chars().filter(|c| *c != '_' && *c != '-').collect();
        Level::ALL.into_iter().find(|l| {
            let name = l.lttng_name()["TRACE_".len()..].to_ascii_lowercase().replace('_', "");
            name == norm || (norm == "error" && *l == Level::Err) || (norm == "warn" && *l == Level::Warning)
        })
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.lttng_name(), self.number())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_follow_lttng() {
        assert_eq!(Level::Emerg.number(), 0);
        assert_eq!(Level::Warning.number(), 4);
        assert_eq!(Level::DebugLine.number(), 13);
        assert_eq!(Level::Debug.number(), 14);
        assert_eq!(Level::default(), Level::DebugLine);
        for (i, l) in Level::ALL.iter().enumerate() {
            assert_eq!(l.number() as usize, i);
            assert_eq!(Level::from_number(i as u8), Some(*l));
        }
        assert_eq!(Level::from_number(15), None);
    }

    #[test]
    fn parses_user_spellings() {
        assert_eq!(Level::parse("Warning"), Some(Level::Warning));
        assert_eq!(Level::parse("TRACE_WARNING"), Some(Level::Warning));
        assert_eq!(Level::parse("debug_line"), Some(Level::DebugLine));
        assert_eq!(Level::parse("DebugLine"), Some(Level::DebugLine));
        assert_eq!(Level::parse("TRACE_DEBUG"), Some(Level::Debug));
        assert_eq!(Level::parse("err"), Some(Level::Err));
        assert_eq!(Level::parse("3"), Some(Level::Err));
        assert_eq!(Level::parse("nope"), None);
        assert_eq!(Level::parse("99"), None);
    }
}
