//! Which kernel view `ust trace --kernel` gets, and the client side of root's broker. The
//! recorders themselves live in the `ust-kernel` crate (shared with `ust-consumerd`, whose
//! root daemon records for ordinary users as a broker) and are re-exported here; this
//! module adds [`broker`] (tier 2: root's `ust-consumerd` records and filters for the
//! user), [`gate`] (the command started stopped until its view records), [`view`] (which tier `ust trace --kernel` gets)
//! and [`syscall_view`] (tier 1's system calls: the command launched by the ptrace recorder).

pub use ust_kernel::*;

pub mod broker;
pub mod gate;
pub mod syscall_view;
pub mod view;
