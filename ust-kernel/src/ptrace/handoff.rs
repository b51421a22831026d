//! A traced program that is itself a debugger, or being debugged: which `ptrace` calls of a
//! task of the tree need one of its tasks to leave the syscall view first, and the words
//! that say so.
//!
//! A task can have one tracer. When a task of the tree calls `ptrace(PTRACE_TRACEME)`
//! (gdb's inferior, strace's child without `PTRACE_SEIZE`, an anti-debugging check), or
//! `PTRACE_ATTACH`/`PTRACE_SEIZE` on a task the recorder traces (strace and gdb on the
//! child they forked, `gdb -p`), the call would fail with `EPERM` under the recorder as it
//! does under strace. The recorder instead detaches from the task concerned while the
//! caller is held at the call's entry, then lets the call proceed
//! ([`super::tracer`]): the debugger works as without `ust trace`, and the task's later
//! calls are not recorded (a `ptrace_detach` event and a line on stderr say so).

use std::fmt;

/// A `ptrace` call that needs a task of the tree to be let go first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handoff {
    /// `ptrace(PTRACE_TRACEME)`: the caller wants its parent to trace it.
    TraceMe,
    /// `ptrace(PTRACE_ATTACH or PTRACE_SEIZE, target)`.
    Attach {
        /// The task to be traced (a thread id, in the caller's pid namespace: a tree in a
        /// nested pid namespace is not recognized).
        target: i32,
        /// `PTRACE_ATTACH` or `PTRACE_SEIZE`.
        request: &'static str,
    },
}

/// `PTRACE_SEIZE` (`linux/ptrace.h`).
const PTRACE_SEIZE: u64 = 0x4206;

/// The hand-off a system call entry asks for: a native `ptrace` call with request
/// `PTRACE_TRACEME`, `PTRACE_ATTACH` or `PTRACE_SEIZE`.
pub fn request(nr: u64, args: &[u64; 6], arch: u32) -> Option<Handoff> {
    if arch != super::sys::NATIVE_ARCH || nr != libc::SYS_ptrace as u64 {
        return None;
    }
    match args[0] {
        r if r == libc::PTRACE_TRACEME as u64 => Some(Handoff::TraceMe),
        r if r == libc::PTRACE_ATTACH as u64 => Some(Handoff::Attach { target: args[1] as i32, request: "PTRACE_ATTACH" }),
        PTRACE_SEIZE => Some(Handoff::Attach { target: args[1] as i32, request: "PTRACE_SEIZE" }),
        _ => None,
    }
}

/// A task's name for messages: `1234 (gdb)`.
pub struct Task(pub i32);

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let comm = crate::procfs::task(self.0).map(|t| t.comm).unwrap_or_default();
        write!(f, "{} ({comm})", self.0)
    }
}

/// The parent process of task `tid`, 0 when unknown.
pub fn parent_of(tid: i32) -> i32 {
    crate::procfs::task(tid).map_or(0, |t| t.ppid)
}

/// Why a task left the syscall view, as the `ptrace_detach` event's `reason` says it.
pub fn reason(h: Handoff, caller: i32) -> String {
    match h {
        Handoff::TraceMe => format!("it called ptrace(PTRACE_TRACEME): its parent {} traces it", Task(parent_of(caller))),
        Handoff::Attach { request, .. } => format!("task {} attaches to it with ptrace({request})", Task(caller)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptrace_requests_are_recognized() {
        let nr = libc::SYS_ptrace as u64;
        let arch = super::super::sys::NATIVE_ARCH;
        assert_eq!(request(nr, &[0, 0, 0, 0, 0, 0], arch), Some(Handoff::TraceMe));
        assert_eq!(request(nr, &[16, 42, 0, 0, 0, 0], arch), Some(Handoff::Attach { target: 42, request: "PTRACE_ATTACH" }));
        assert_eq!(request(nr, &[0x4206, 43, 0, 0, 0, 0], arch), Some(Handoff::Attach { target: 43, request: "PTRACE_SEIZE" }));
        // PTRACE_CONT, another call, another architecture.
        assert_eq!(request(nr, &[7, 42, 0, 0, 0, 0], arch), None);
        assert_eq!(request(nr + 1, &[0; 6], arch), None);
        assert_eq!(request(nr, &[0; 6], 0x4000_0003), None);
    }

    #[test]
    fn parents_are_read_from_proc() {
        assert_eq!(parent_of(std::process::id() as i32), std::os::unix::process::parent_id() as i32);
        assert_eq!(parent_of(-1), 0);
    }
}
