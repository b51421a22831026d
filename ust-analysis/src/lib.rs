//! `ust-analysis`: what ust does with a recorded trace, apart from the `ust` command that
//! drives it.
//!
//! - [`report`]: `ust report`: per task, system call and blocked interval, what the
//!   traced program waited on, what woke it, and where in its code.
//! - [`export`]: `ust export`: a trace as a file Perfetto UI (protobuf) or Chrome's
//!   trace viewer (JSON) opens.
//! - [`spans`]: the `tracing` layer's span events paired into spans (for both).
//! - [`traces`]: the one model of a loaded trace both read: every CTF trace under a
//!   directory, opened with [`ctf_reader`], and where each comes from.

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod export;
pub mod report;
pub mod spans;
pub mod traces;
