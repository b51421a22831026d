//! Kernel events for `ust trace --kernel`. The tracefs recording, its decoder and the kernel
//! CTF writer live in the `ust-kernel` crate (shared with `ust-consumerd`, whose root daemon
//! records for ordinary users as a broker) and are re-exported here; this module adds
//! [`perf`] (tier 1: the traced tasks through perf_event_open, for users without tracefs
//! access), [`broker`] (tier 2: root's `ust-consumerd` records and filters for the user) and
//! [`view`] (which one `ust trace --kernel` gets).

pub use ust_kernel::*;

pub mod broker;
pub mod perf;
pub mod view;
