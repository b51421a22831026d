//! The daemon's threads: they take requests and run timers, and call down into
//! [`crate::ops`] and [`crate::model`].
//!
//! - [`control`]: the daemon's handling of each control request.
//! - [`apps`]: application connections: registration, death watch, messages to the app.
//! - [`drain`]: the read and switch timers that move packets from buffers to stream files.
//! - [`kview`]: root's daemon as the kernel broker of ordinary users (the `kview` socket).
//! - [`peers`]: who may use the `app` and `ctl` sockets.
//! - [`trigger_watch`]: the thread that fires triggers.

pub mod apps;
pub mod control;
pub mod drain;
pub mod kview;
pub mod peers;
pub mod trigger_watch;
