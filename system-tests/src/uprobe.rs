//! What the dynamic-probe tests share (uprobes.rs, session_uprobes.rs, sdt.rs,
//! uprobe_faults.rs, uprobe_report.rs): whether this machine can place uprobes, and one
//! lock so that a test binary's tests place their machine-wide probes one at a time.

use std::sync::{Mutex, MutexGuard};

/// Why the uprobe tests cannot run here (not root, no tracefs, a kernel without
/// `CONFIG_UPROBE_EVENTS`), or `None` when they can. `tracefs_root` finds (or mounts)
/// tracefs: `ust_kernel::tracefs::root`, a dependency of the tests, not of this library.
pub fn skip_reason<E>(tracefs_root: impl FnOnce() -> Result<std::path::PathBuf, E>) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    match tracefs_root() {
        Err(_) => Some("no tracefs".into()),
        Ok(r) if !r.join("uprobe_events").exists() => Some("no uprobes in this kernel (CONFIG_UPROBE_EVENTS)".into()),
        Ok(_) => None,
    }
}

/// The tests place machine-wide probes and read `uprobe_events`: one at a time (the
/// guard of this process's one lock; a test that panicked while holding it does not
/// poison the others).
pub fn one() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Returns from the test, saying why on stderr, when [`skip_reason`] gives a reason (for
/// test crates that depend on `ust_kernel`).
#[macro_export]
macro_rules! require_uprobes {
    () => {
        if let Some(r) = $crate::uprobe::skip_reason(ust_kernel::tracefs::root) {
            eprintln!("skipped: {r}");
            return;
        }
    };
}
