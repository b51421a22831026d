//! What the user asked for and what registered, as data: no socket, no file, no thread.
//!
//! - [`session`]: sessions and channels.
//! - [`app`]: a registered process: identity, events, mask slots, its message queue.
//! - [`masks`]: a process's enable masks, a pure function of its slots and their owners.
//! - [`enabler`]: enablers with their parsed filters, and the decisions they yield.
//! - [`registry`]: the event registry of a per-UID trace (ids assigned by the daemon).

pub mod app;
pub mod enabler;
pub mod maps;
pub mod masks;
pub mod registry;
pub mod session;
