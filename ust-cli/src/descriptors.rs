//! The offline tools' descriptor limit: `ust export` keeps a file open per event class
//! until its footer (a kernel trace has hundreds of classes with events) and `ust report`
//! and `ust export` a descriptor per stream file, so the soft `RLIMIT_NOFILE` is raised to
//! the hard limit, as `systemd` advises programs that need many descriptors
//! (`systemd.exec(5)`, `LimitNOFILE=`) and as make, Go and Rust's cargo do for themselves.
//! With a soft limit of 64 the export of a trace of 181 classes failed ("Too many open
//! files"); the hard limit, which only root raises, still bounds it.

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; failures change nothing (the command
/// then meets the limit as it would have).
pub fn raise_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let l = getrlimit(Resource::Nofile);
    if let (Some(current), Some(maximum)) = (l.current, l.maximum) {
        if current < maximum {
            let _ = setrlimit(Resource::Nofile, Rlimit { current: Some(maximum), maximum: Some(maximum) });
        }
    }
}
