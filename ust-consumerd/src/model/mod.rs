//! What the user asked for and what registered, as data: no socket, no file, no thread.
//!
//! - [`session`]: sessions, channels, enablers and the enable decisions they yield.
//! - [`registry`]: the event registry of a per-UID trace (ids assigned by the daemon).

pub mod registry;
pub mod session;
