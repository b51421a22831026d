//! Which kernel view recorded the trace, as the report's notes say it: tier 1
//! (`env.kernel_source = "perf_event_open"`, an ordinary user alone), with its system calls
//! recorded by ptrace beside it (`env.syscall_source = "ptrace"`,
//! [`ust_kernel::perf::SyscallView`]) or without them and why (`env.no_syscalls`), or the
//! system calls alone where perf_event_open is refused (`env.kernel_source = "ptrace"`),
//! and tier 2 (recorded by root's daemon for a user). Root's own view (tier 3) needs no note.

use super::load::Loaded;

/// The note of a tier-1 trace without system calls: what it lacks, and that root's daemon
/// alone (no recording as root) gives it (tier 2, docs/kernel-view.md).
pub const TIER1_NOTE: &str = "kernel view of tier 1 (perf_event_open, no privilege): the traced tasks' switches, faults and user stacks; no system calls, interrupts or wake-ups. With root's ust-consumerd running (`sudo ust-consumerd --daemonize`), the same `ust trace --kernel`, run as you, records them (tier 2)";

/// The note of a tier-1 trace with its system-call view: what it has, what it lacks, and
/// what ptrace does to the times.
pub const TIER1_PTRACE_NOTE: &str = "kernel view of tier 1 (perf_event_open and ptrace, no privilege): the traced tasks' system calls (recorded with ptrace, as strace records them), switches, faults and user stacks; no interrupts or wake-ups. Each system call stopped the task for the recorder (as under strace): blocked times include those stops (`ust trace --kernel --no-ptrace` records without them). With root's ust-consumerd running (`sudo ust-consumerd --daemonize`), the same `ust trace --kernel`, run as you, records wake-ups too (tier 2)";

/// The note of a tier-1 trace of the system calls alone (perf_event_open refused).
pub const TIER1_PTRACE_ONLY_NOTE: &str = "kernel view of tier 1, ptrace only (perf_event_open was refused): the traced tasks' system calls (recorded with ptrace, as strace records them), forks and execs; no switches, faults, stacks, interrupts or wake-ups. `sysctl kernel.perf_event_paranoid=2` (or root's ust-consumerd, tier 2) gives the rest";

/// The note of a trace of root's daemon for a user.
pub const TIER2_NOTE: &str = "kernel view of tier 2 (recorded by root's ust-consumerd for this user): the tasks this user could ptrace; any other task appears only as \"another user's task\" or \"kernel thread\"";

fn env<'a>(l: &'a Loaded, key: &str) -> Option<&'a str> {
    l.kernel_env.as_ref().and_then(|e| e.get(key)).map(String::as_str)
}

/// How the trace's system calls were recorded when not by the kernel's tracepoints: tier
/// 1's `ptrace`.
pub fn syscall_source(l: &Loaded) -> Option<String> {
    if env(l, "kernel_source") == Some(ust_kernel::ptrace::writer::SOURCE) {
        return Some(ust_kernel::ptrace::writer::SOURCE.to_string());
    }
    (super::stacks::is_tier1(l) && env(l, ust_kernel::perf::SYSCALL_SOURCE_KEY).is_some())
        .then(|| env(l, ust_kernel::perf::SYSCALL_SOURCE_KEY).unwrap_or_default().to_string())
}

/// The notes on the kernel view that recorded `l`.
pub fn notes(l: &Loaded) -> Vec<String> {
    let mut out = Vec::new();
    if super::stacks::is_tier1(l) {
        if syscall_source(l).is_some() {
            out.push(TIER1_PTRACE_NOTE.to_string());
        } else {
            out.push(TIER1_NOTE.to_string());
            if let Some(why) = env(l, ust_kernel::perf::NO_SYSCALLS_KEY) {
                out.push(format!("no system-call view in this trace: {why}"));
            }
        }
    }
    if env(l, "kernel_source") == Some(ust_kernel::ptrace::writer::SOURCE) {
        out.push(TIER1_PTRACE_ONLY_NOTE.to_string());
    }
    if env(l, "kernel_source") == Some(ust_kernel::view_recorder::SOURCE) {
        out.push(TIER2_NOTE.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(env: &[(&str, &str)]) -> Loaded {
        Loaded { kernel_env: Some(env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()), ..Default::default() }
    }

    #[test]
    fn tier_1_says_whether_it_has_system_calls_and_why_not() {
        let on = loaded(&[("kernel_source", "perf_event_open"), ("syscall_source", "ptrace")]);
        assert_eq!(syscall_source(&on).as_deref(), Some("ptrace"));
        assert_eq!(notes(&on), [TIER1_PTRACE_NOTE]);
        let off = loaded(&[("kernel_source", "perf_event_open"), ("no_syscalls", "--no-ptrace was given")]);
        assert_eq!(syscall_source(&off), None);
        assert_eq!(notes(&off), [TIER1_NOTE, "no system-call view in this trace: --no-ptrace was given"]);
        // A trace written before the system-call view: the plain note.
        assert_eq!(notes(&loaded(&[("kernel_source", "perf_event_open")])), [TIER1_NOTE]);
        // The system calls alone (perf_event_open refused).
        let alone = loaded(&[("kernel_source", "ptrace")]);
        assert_eq!((syscall_source(&alone).as_deref(), notes(&alone)), (Some("ptrace"), vec![TIER1_PTRACE_ONLY_NOTE.to_string()]));
        // Root's own tracefs view: no note, and its system calls are the kernel's.
        let root = loaded(&[("kernel_source", "tracefs"), ("syscall_source", "ptrace")]);
        assert!(notes(&root).is_empty() && syscall_source(&root).is_none());
    }
}
