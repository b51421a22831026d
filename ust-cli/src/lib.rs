//! `ust`, the command line (lttng's verbs for `ust-consumerd`), and its offline tools. The
//! report and the exporters it runs are the `ust-analysis` crate; the kernel recorders,
//! `ust-kernel`.
//!
//! - [`cli`]: the `ust` command: arguments, connection to the daemon, printing, `ust trace`.
//! - [`crash_dump`]: `ust crash-dump`: traces from the buffer files a crashed daemon left.
//! - [`heap`]: the command's allocator (glibc's malloc on transparent huge pages).
//! - [`kernel`]: kernel events for `ust trace --kernel`, written as CTF.
//! - [`out`]: standard output that a closed pipe ends quietly (exit 141), not in a panic.

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod cli;
pub mod crash_dump;
pub mod descriptors;
pub mod heap;
pub mod kernel;
pub mod out;
