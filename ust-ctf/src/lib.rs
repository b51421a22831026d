//! `ust-ctf`: CTF 1.8 files of ust traces. The writer lays out one directory per traced process,
//! `<output>/ust/pid/<procname>-<pid>-<YYYYmmdd-HHMMSS>/`, as LTTng's per-PID buffering
//! scheme lays it out:
//!
//! ```text
//! <procname>-<pid>-<stamp>/
//! ├── metadata              TSDL text, starts with "/* CTF 1.8 */"      (metadata)
//! ├── <channel>_<cpu>       whole packets, appended as they are drained (stream)
//! └── index/
//!     └── <channel>_<cpu>.idx   one entry per packet, big-endian        (index)
//! ```
//!
//! [`writer`] appends a packet and its index entry together (the one rule on a failed
//! append), and is the one place stream and index files are created.
//! [`reader`] walks the records of a packet; [`count`] counts events with it (for `ust trace`).
//! [`recover`] checks what a killed daemon left (`ust view` runs it first) and repairs it
//! when asked (`ust view --repair`).
//! [`datetime`] gives the timestamps used in directory names and in the metadata's `env`.
//! Every file is created through an [`outdir::TraceDir`]: as the trace's owner, beneath
//! the output directory's descriptor, never through a symbolic link.

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod count;
pub mod datetime;
pub mod files;
pub mod held;
pub mod index;
pub mod metadata;
pub mod outdir;
pub mod reader;
pub mod recover;
pub mod stream;
pub mod writer;

use std::path::{Path, PathBuf};

/// Directory of one process's trace inside a session's output directory:
/// `<output>/ust/pid/<procname>-<pid>-<stamp>` (LTTng's per-PID layout). Characters of
/// `procname` other than `[A-Za-z0-9_.-]` become `_`, so a name never escapes the directory.
pub fn process_dir(output: &Path, procname: &str, pid: i32, stamp: &str) -> PathBuf {
    let safe: String = procname.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '_' }).collect();
    let safe = if safe.is_empty() || safe.starts_with('.') { format!("_{safe}") } else { safe };
    output.join("ust").join("pid").join(format!("{safe}-{pid}-{stamp}"))
}

/// The CPU number of a per-channel buffer's stream (`--buffer-allocation=per-channel`):
/// LTTng-UST's `-1` (its `backend.cpu` of such a buffer), which its packet context
/// `cpu_id` (a 32-bit unsigned integer) shows as 4294967295.
pub const CHANNEL_WIDE_CPU: u32 = u32::MAX;

/// Name of the stream file of `channel` on `cpu`: `<channel>_<cpu>`; a per-channel
/// stream ([`CHANNEL_WIDE_CPU`]) is `<channel>_0`, as LTTng's consumer names it.
pub fn stream_file_name(channel: &str, cpu: u32) -> String {
    let n = if cpu == CHANNEL_WIDE_CPU { 0 } else { cpu };
    format!("{channel}_{n}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(process_dir(Path::new("/o"), "my app/x", 12, "20260101-000000"), PathBuf::from("/o/ust/pid/my_app_x-12-20260101-000000"));
        assert_eq!(process_dir(Path::new("/o"), "..", 1, "s"), PathBuf::from("/o/ust/pid/_..-1-s"));
        assert_eq!(stream_file_name("channel0", 3), "channel0_3");
    }
}
