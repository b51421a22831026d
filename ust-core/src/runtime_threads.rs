//! The names of the threads ust's in-process runtime starts in every traced process (set
//! with `pthread_setname_np`, so they are the threads' `comm`, which the kernel trace
//! records): `ust report` tells ust's own activity from the program's by them.

use std::ffi::CStr;

/// The thread that talks to the user's own daemon.
pub const RUNTIME: &CStr = c"ust-runtime";
/// The thread that talks to root's daemon (the system daemon).
pub const RUNTIME_SYSTEM: &CStr = c"ust-runtime-sys";
/// The thread that runs the hooks called after the enable masks changed (the `tracing`
/// layer's interest rebuild).
pub const INTEREST: &CStr = c"ust-interest";

/// Every name above.
pub const ALL: [&CStr; 3] = [RUNTIME, RUNTIME_SYSTEM, INTEREST];

/// Whether `comm` (a thread's name, at most 15 bytes) is one of the runtime's threads.
pub fn is_runtime_thread(comm: &str) -> bool {
    ALL.iter().any(|n| n.to_bytes() == comm.as_bytes())
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_fit_a_comm() {
        for n in super::ALL {
            assert!(n.to_bytes().len() <= 15, "{n:?} is cut in comm");
            assert!(super::is_runtime_thread(n.to_str().unwrap()));
        }
        assert!(!super::is_runtime_thread("ust-runtime-x") && !super::is_runtime_thread("main"));
    }
}
