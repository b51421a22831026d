//! The seccomp-bpf filter of the seccomp design ([`super::Stops::Seccomp`]), as strace's
//! `--seccomp-bpf` installs one (`src/filter_seccomp.c`): the child sets
//! `PR_SET_NO_NEW_PRIVS` and installs it before its `execve`, every call it returns
//! `SECCOMP_RET_TRACE` for stops the tracee in a `PTRACE_EVENT_SECCOMP` stop (the entry;
//! the tracer resumes with `PTRACE_SYSCALL` to see the exit, then with `PTRACE_CONT`), and
//! the others run without stopping.
//!
//! strace's generator compares the call number against ranges of traced calls per
//! architecture; the recorder traces every call of every architecture, so the filter is one
//! instruction: return `SECCOMP_RET_TRACE`.

/// `BPF_RET | BPF_K` (`linux/bpf_common.h`).
const BPF_RET_K: u16 = 0x06;

/// The filter: `return SECCOMP_RET_TRACE;`.
pub const TRACE_ALL: [libc::sock_filter; 1] = [libc::sock_filter { code: BPF_RET_K, jt: 0, jf: 0, k: libc::SECCOMP_RET_TRACE }];
