//! `ust`, the command line (lttng's verbs for `ust-consumerd`), and its offline tools.
//!
//! - [`cli`]: the `ust` command: arguments, connection to the daemon, printing, `ust trace`.
//! - [`crash_dump`]: `ust crash-dump`: traces from the buffer files a crashed daemon left.
//! - [`export`]: `ust export`: a trace as a file Perfetto UI opens.
//! - [`kernel`]: kernel events for `ust trace --kernel`, written as CTF.
//! - [`out`]: standard output that a closed pipe ends quietly (exit 141), not in a panic.
//! - [`report`]: `ust report`: what the traced program waited for and what woke it.

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod cli;
pub mod crash_dump;
pub mod export;
pub mod kernel;
pub mod out;
pub mod report;
