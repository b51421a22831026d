//! The daemon's file-descriptor budget: every traced process costs it descriptors (its
//! socket, a pidfd, a stream and an index file per buffer), so it checks what is left
//! before it takes on more, and says so in its messages.

/// Descriptors open in this process and its `RLIMIT_NOFILE` soft limit; `None` when
/// they cannot be read (no descriptor left to list `/proc/self/fd` with, counts as full).
pub fn fd_counts() -> Option<(u64, u64)> {
    let open = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    Some((open, lim.current.unwrap_or(u64::MAX)))
}

/// Descriptors still free below the limit (0 when unknown).
pub fn fd_headroom() -> u64 {
    fd_counts().map_or(0, |(open, lim)| lim.saturating_sub(open))
}

/// `N of L descriptors in use`, for messages.
pub fn fd_usage() -> String {
    match fd_counts() {
        Some((open, lim)) => format!("{open} of {lim} descriptors in use"),
        None => "all descriptors in use".into(),
    }
}

/// Descriptors the daemon keeps free for control connections, metadata files and the
/// like: a process is not traced when attaching it would leave fewer.
pub const FD_MARGIN: u64 = 16;
