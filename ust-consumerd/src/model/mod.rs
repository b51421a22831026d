//! What the user asked for and what registered, as data: no socket, no file, no thread.
//!
//! - [`session`]: sessions and channels.
//! - [`enabler`]: enablers with their parsed filters, and the decisions they yield.
//! - [`registry`]: the event registry of a per-UID trace (ids assigned by the daemon).

pub mod enabler;
pub mod registry;
pub mod session;
