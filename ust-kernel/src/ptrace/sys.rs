//! The kernel interfaces the system-call recorder uses, as small safe functions: the
//! `ptrace(2)` requests (Linux 5.3+ for `PTRACE_GET_SYSCALL_INFO`), `waitpid(2)` with its
//! status decoded into a [`Wait`], `process_vm_readv(2)` and `tgkill(2)`.
//!
//! Every ptrace request names a tracee by thread id; `ESRCH` means the tracee is gone or
//! not in a ptrace-stop (killed meanwhile), which the callers take as "its exit is coming".

use std::io;

/// `PTRACE_O_*` options the recorder seizes with: the tree dies with the tracer
/// (`EXITKILL`: a task left stopped forever is worse), syscall stops are told from `SIGTRAP`
/// (`TRACESYSGOOD`), new tasks are traced from their first instruction (`TRACEFORK`,
/// `TRACEVFORK`, `TRACECLONE`), an exec stops with the former thread id (`TRACEEXEC`), and a
/// tracee's own `SECCOMP_RET_TRACE` filter stops it (`TRACESECCOMP`: without a tracer that
/// set it, such a filter fails the calls with `ENOSYS`).
pub const OPTIONS: libc::c_int = libc::PTRACE_O_EXITKILL
    | libc::PTRACE_O_TRACESYSGOOD
    | libc::PTRACE_O_TRACEFORK
    | libc::PTRACE_O_TRACEVFORK
    | libc::PTRACE_O_TRACECLONE
    | libc::PTRACE_O_TRACEEXEC
    | libc::PTRACE_O_TRACESECCOMP;

/// `WSTOPSIG` of a syscall-stop with `PTRACE_O_TRACESYSGOOD`.
pub const SYSCALL_TRAP: i32 = libc::SIGTRAP | 0x80;

/// `AUDIT_ARCH_X86_64` (`linux/audit.h`): the `arch` of a native x86-64 system call.
pub const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
/// `AUDIT_ARCH_AARCH64`.
pub const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;

/// The `arch` of this build's native system calls.
pub const NATIVE_ARCH: u32 = if cfg!(target_arch = "aarch64") { AUDIT_ARCH_AARCH64 } else { AUDIT_ARCH_X86_64 };

fn check(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn request(req: libc::c_uint, tid: i32, addr: usize, data: usize) -> io::Result<libc::c_long> {
    // SAFETY: every request made through this function passes integers only (no pointer
    // the kernel writes through): SEIZE, INTERRUPT, SYSCALL, CONT, LISTEN, DETACH.
    check(unsafe { libc::ptrace(req, tid, addr, data) })
}

/// `PTRACE_SEIZE` with [`OPTIONS`] (the tracee keeps running).
///
/// # Errors
/// `EPERM` when the task is already traced, ptrace is forbidden (Yama, a seccomp profile, an
/// LSM) or the task is not ours to trace.
pub fn seize(tid: i32) -> io::Result<()> {
    request(libc::PTRACE_SEIZE, tid, 0, OPTIONS as usize).map(drop)
}

/// `PTRACE_INTERRUPT`: makes a seized tracee report a ptrace-stop soon.
///
/// # Errors
/// `ESRCH` when the tracee is gone.
pub fn interrupt(tid: i32) -> io::Result<()> {
    request(libc::PTRACE_INTERRUPT, tid, 0, 0).map(drop)
}

/// How a tracee in a ptrace-stop is let go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// `PTRACE_SYSCALL`: run to the next syscall-entry or syscall-exit stop.
    Syscall,
    /// `PTRACE_CONT`: run to the next signal or event (no syscall stops).
    Cont,
    /// `PTRACE_LISTEN`: stay in the group-stop, but report the next event (`SIGCONT`).
    Listen,
    /// `PTRACE_DETACH`: no longer traced.
    Detach,
}

/// Resumes `tid` the `how` way, delivering `sig` (0: none; [`Resume::Listen`] takes none).
///
/// # Errors
/// `ESRCH` when the tracee is gone or was not in a ptrace-stop.
pub fn resume(tid: i32, how: Resume, sig: i32) -> io::Result<()> {
    let req = match how {
        Resume::Syscall => libc::PTRACE_SYSCALL,
        Resume::Cont => libc::PTRACE_CONT,
        Resume::Listen => libc::PTRACE_LISTEN,
        Resume::Detach => libc::PTRACE_DETACH,
    };
    request(req, tid, 0, sig.max(0) as usize).map(drop)
}

/// `PTRACE_GETEVENTMSG`: the new task's id after a fork event, the former thread id after
/// an exec event.
///
/// # Errors
/// `ESRCH`.
pub fn event_msg(tid: i32) -> io::Result<u64> {
    let mut msg: libc::c_ulong = 0;
    // SAFETY: the kernel writes one unsigned long to `msg`, which lives across the call.
    check(unsafe { libc::ptrace(libc::PTRACE_GETEVENTMSG, tid, 0usize, &mut msg as *mut libc::c_ulong) })?;
    Ok(msg)
}

/// What a signal-delivery-stop delivers (`PTRACE_GETSIGINFO`): `(signo, errno, code)`.
///
/// # Errors
/// `ESRCH`; `EINVAL` in a group-stop of a tracee attached without `PTRACE_SEIZE`.
pub fn siginfo(tid: i32) -> io::Result<(i32, i32, i32)> {
    // SAFETY: siginfo_t is plain data; all zeroes is a valid value.
    let mut si: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes one siginfo_t to `si`, which lives across the call.
    check(unsafe { libc::ptrace(libc::PTRACE_GETSIGINFO, tid, 0usize, &mut si as *mut libc::siginfo_t) })?;
    Ok((si.si_signo, si.si_errno, si.si_code))
}

/// What `PTRACE_GET_SYSCALL_INFO` says of a tracee in a syscall-stop or seccomp stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyscallInfo {
    /// A syscall-entry stop, or a seccomp stop (`PTRACE_EVENT_SECCOMP`, an entry too, of a
    /// filter the tracee installed itself): the call's number, its six arguments, and its
    /// `AUDIT_ARCH_*`.
    Entry {
        /// System call number (of `arch`'s table).
        nr: u64,
        /// The six argument registers.
        args: [u64; 6],
        /// `AUDIT_ARCH_*`.
        arch: u32,
    },
    /// A syscall-exit stop: the return value (a negated errno when `is_error`).
    Exit {
        /// Return value.
        ret: i64,
        /// The value is `-errno`.
        is_error: bool,
    },
    /// Not in a syscall (`PTRACE_SYSCALL_INFO_NONE`).
    None,
}

/// `PTRACE_GET_SYSCALL_INFO` (Linux 5.3).
///
/// # Errors
/// `ESRCH`; `EIO`/`EINVAL` on kernels before 5.3.
pub fn syscall_info(tid: i32) -> io::Result<SyscallInfo> {
    // SAFETY: ptrace_syscall_info is plain data; all zeroes is a valid value.
    let mut si: libc::ptrace_syscall_info = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::ptrace_syscall_info>();
    // SAFETY: the kernel writes at most `size` bytes to `si`, which lives across the call.
    check(unsafe { libc::ptrace(libc::PTRACE_GET_SYSCALL_INFO, tid, size, &mut si as *mut libc::ptrace_syscall_info) })?;
    Ok(match si.op {
        // SAFETY: `op` says which member of the union the kernel filled.
        libc::PTRACE_SYSCALL_INFO_ENTRY => unsafe { SyscallInfo::Entry { nr: si.u.entry.nr, args: si.u.entry.args, arch: si.arch } },
        // SAFETY: as above (the seccomp member starts with the entry member's fields).
        libc::PTRACE_SYSCALL_INFO_SECCOMP => unsafe { SyscallInfo::Entry { nr: si.u.seccomp.nr, args: si.u.seccomp.args, arch: si.arch } },
        // SAFETY: as above.
        libc::PTRACE_SYSCALL_INFO_EXIT => unsafe { SyscallInfo::Exit { ret: si.u.exit.sval, is_error: si.u.exit.is_error != 0 } },
        _ => SyscallInfo::None,
    })
}

/// One `waitpid` result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// The task exited (`WIFEXITED`) or was killed (`WIFSIGNALED`): the raw wait status.
    Gone(i32),
    /// A ptrace-stop: `WSTOPSIG` and the `PTRACE_EVENT_*` in bits 16..24 (0: none).
    Stopped {
        /// `WSTOPSIG(status)`.
        sig: i32,
        /// `status >> 16`.
        event: i32,
    },
}

/// Decodes a wait status.
pub fn decode(status: i32) -> Wait {
    if libc::WIFSTOPPED(status) {
        Wait::Stopped { sig: libc::WSTOPSIG(status), event: (status >> 16) & 0xff }
    } else {
        Wait::Gone(status)
    }
}

/// `waitpid(pid, __WALL | __WNOTHREAD)`: the next event of a tracee of this thread or of a
/// child it forked (never of another thread's children), blocking.
///
/// # Errors
/// `EINTR` (a signal to this thread: see [`wake`]), `ECHILD` (nothing left to wait for).
pub fn wait(pid: i32) -> io::Result<(i32, Wait)> {
    let mut status = 0;
    // SAFETY: `status` is a valid int the kernel writes.
    let tid = unsafe { libc::waitpid(pid, &mut status, libc::__WALL | libc::__WNOTHREAD) };
    if tid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((tid, decode(status)))
}

/// The signal [`wake`] sends: the highest real-time signal (glibc keeps the lowest ones).
pub fn wake_signal() -> i32 {
    libc::SIGRTMAX()
}

extern "C" fn on_wake(_: libc::c_int) {}

/// Installs, once per process, a handler that does nothing for [`wake_signal`], without
/// `SA_RESTART`: sent to the tracer thread, it makes a blocking [`wait`] return `EINTR`.
pub fn install_wake_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: the handler does nothing (async-signal-safe); `sa` is fully initialized.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_wake as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(wake_signal(), &sa, std::ptr::null_mut());
        }
    });
}

/// Interrupts a blocking [`wait`] in thread `tid` of this process ([`install_wake_handler`]
/// first).
pub fn wake(tid: i32) {
    // SAFETY: tgkill with integers; the handler is installed before the thread exists.
    unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, wake_signal()) };
}

/// Blocks every signal in the calling thread but [`wake_signal`], `SIGCHLD` and the
/// synchronous ones (the process's signals go to its other threads).
///
/// `SIGCHLD` stays open: every ptrace-stop sends it to the tracer thread, where, left at its
/// default action, the kernel drops it at once; blocked, it would be queued for the process
/// and wake another thread to discard it, at every stop (measured: a third more CPU time).
pub fn block_signals_but_wake() {
    // SAFETY: sigset_t is plain data, initialized by sigfillset; pthread_sigmask on the
    // calling thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        for s in [wake_signal(), libc::SIGCHLD, libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL, libc::SIGTRAP] {
            libc::sigdelset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// The calling thread's id.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// Copies tracee memory at `addr` into `buf` with `process_vm_readv`: the number of bytes
/// read, fewer than asked when the range runs into unmapped memory.
///
/// # Errors
/// `EFAULT` when nothing at `addr` is readable; `ESRCH` when the task is gone.
pub fn read_memory(tid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    if buf.is_empty() {
        return Ok(0);
    }
    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let remote = libc::iovec { iov_base: addr as usize as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: `local` describes `buf`, writable for its length; the kernel checks `remote`
    // against the tracee's address space and never touches ours through it.
    let n = unsafe { libc::process_vm_readv(tid, &local, 1, &remote, 1, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_statuses_decode() {
        // A syscall-stop: 0x7f | (SIGTRAP|0x80) << 8.
        assert_eq!(decode(0x7f | (SYSCALL_TRAP << 8)), Wait::Stopped { sig: SYSCALL_TRAP, event: 0 });
        // PTRACE_EVENT_EXEC (4) with SIGTRAP.
        assert_eq!(decode(0x7f | (libc::SIGTRAP << 8) | (4 << 16)), Wait::Stopped { sig: libc::SIGTRAP, event: 4 });
        // A group-stop of a seized tracee: PTRACE_EVENT_STOP (128) with SIGTSTP.
        assert_eq!(decode(0x7f | (libc::SIGTSTP << 8) | (128 << 16)), Wait::Stopped { sig: libc::SIGTSTP, event: 128 });
        assert_eq!(decode(3 << 8), Wait::Gone(3 << 8));
        assert_eq!(decode(libc::SIGKILL), Wait::Gone(libc::SIGKILL));
    }

    #[test]
    fn reading_our_own_memory_and_a_hole() {
        let me = gettid();
        let text = b"hello\0";
        let mut buf = [0u8; 6];
        assert_eq!(read_memory(me, text.as_ptr() as u64, &mut buf).unwrap(), 6);
        assert_eq!(&buf, text);
        assert_eq!(read_memory(me, 8, &mut buf).unwrap_err().raw_os_error(), Some(libc::EFAULT));
    }
}
