//! The daemon's handling of each control request ([`ust_ctl::protocol`]):
//! [`dispatch::handle`] hands each to the session settings ([`configure`], [`id_trackers`]),
//! the session's life ([`lifecycle`]: start, stop, destroy), the listings ([`query`]), the
//! triggers ([`triggers`]) or an operation of [`crate::ops`] (rotate, snapshot, clear,
//! regenerate), and [`server`] runs one `ctl` connection.
//!
//! `stop` follows LTTng's order: clear the enable masks (`SetEnabled`), `Sync` every
//! process of the session and wait for `SyncDone` (at most [`crate::ops::sync::SYNC_TIMEOUT`]: a dead
//! or stuck writer never blocks it), flush every buffer from the reader side, drain.
//! `destroy` is `stop`, then `RemoveChannel`, a final drain, and closing the files.

pub mod configure;
pub mod dispatch;
pub mod id_trackers;
pub mod lifecycle;
pub mod query;
pub mod server;
pub mod triggers;
