//! The `perf_event_attr`s of tier 1 and opening them, perf_event_open(2).
//!
//! Two kinds of event, opened on `ust trace` itself per CPU (`pid = 0, cpu = N`) with
//! `inherit` and `enable_on_exec`, so they are off in `ust` (which never execs), copied into
//! the command at fork, and switched on by its `execve` (and followed into its children):
//!
//! - a **side-band** event (`PERF_COUNT_SW_DUMMY`, counts nothing) that asks for the
//!   records of the traced tasks: `context_switch` (`PERF_RECORD_SWITCH`, with
//!   `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT` on preemptions), `task` (`FORK`/`EXIT`), `comm`
//!   with `comm_exec`, `mmap2` with `mmap_data` (every file mapping, so fault addresses map
//!   to files); its ring is the CPU's one ring;
//! - two **page-fault** events (`PERF_COUNT_SW_PAGE_FAULTS_MIN` and `_MAJ`), sampling every
//!   fault (`sample_period = 1`) with the faulting address (`PERF_SAMPLE_ADDR`), the IP, and
//!   the user registers IP/SP/BP plus [`STACK_BYTES`] of user stack for DWARF unwinding;
//!   the major-fault event writes into the minor-fault event's ring
//!   (`PERF_EVENT_IOC_SET_OUTPUT`), a ring of its own per CPU, so that a fault storm that
//!   fills it costs fault samples, not switch records.
//!
//! And for root's side trace of dynamic probes, a third kind, CPU-wide (`pid = -1`), on at
//! once and not inherited: a **tracepoint** event per probe ([`tracepoint`], which says why
//! not per task), sampling each hit as the faults are, into a ring of its own per CPU.
//!
//! All share one `sample_type` ([`SAMPLE_TYPE`]), so every record ends with the same
//! `sample_id` trailer (tid, time, cpu, identifier; `sample_id_all`), and time is
//! `CLOCK_MONOTONIC` (`use_clockid`), the clock of the user-space traces.
//!
//! What `kernel.perf_event_paranoid = 2` (the default) allows an unprivileged user,
//! measured on Linux 6.18 (see the module docs of [`super`]): `exclude_kernel = 1` is
//! required; switch, fork/exit/comm and mmap records come; page-fault samples come (they are
//! taken with the user registers of the fault); context-switch and migration *samples*
//! never come (`PERF_COUNT_SW_CONTEXT_SWITCHES` / `CPU_MIGRATIONS` fire with kernel
//! registers and `exclude_kernel` drops them), hence the switch records and the derived
//! migrations.

use std::os::fd::{FromRawFd, OwnedFd};

use perf_event_open_sys as sys;
use sys::bindings as b;

/// Bytes of user stack copied with each page-fault sample (`sample_stack_user`): enough
/// for the frames of ordinary programs; a deeper stack is unwound as far as these bytes
/// go. Each sample costs this much ring space, so a larger value loses more samples in a
/// fault storm (touching 64 MiB: 16 k faults in ~50 ms).
pub const STACK_BYTES: u32 = 4096;
/// User registers sampled: BP, SP, IP (x86-64 `perf_regs.h` bit numbers), in that order in
/// the record.
pub const REGS_MASK: u64 = (1 << b::PERF_REG_X86_BP) | (1 << b::PERF_REG_X86_SP) | (1 << b::PERF_REG_X86_IP);
/// The `sample_type` of every event.
pub const SAMPLE_TYPE: u64 = (b::PERF_SAMPLE_IDENTIFIER
    | b::PERF_SAMPLE_IP
    | b::PERF_SAMPLE_TID
    | b::PERF_SAMPLE_TIME
    | b::PERF_SAMPLE_ADDR
    | b::PERF_SAMPLE_CPU
    | b::PERF_SAMPLE_REGS_USER
    | b::PERF_SAMPLE_STACK_USER) as u64;

/// Which event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The side-band event (switch, task, comm, mmap records).
    SideBand,
    /// Minor page faults.
    MinorFaults,
    /// Major page faults.
    MajorFaults,
}

/// The attribute of `kind`.
pub fn attr(kind: Kind) -> b::perf_event_attr {
    // SAFETY: perf_event_attr is plain old data; all-zero is its documented "nothing set".
    let mut a: b::perf_event_attr = unsafe { std::mem::zeroed() };
    a.size = std::mem::size_of::<b::perf_event_attr>() as u32;
    a.type_ = b::PERF_TYPE_SOFTWARE;
    a.sample_type = SAMPLE_TYPE;
    a.set_disabled(1);
    a.set_inherit(1);
    a.set_enable_on_exec(1);
    a.set_exclude_kernel(1);
    a.set_exclude_hv(1);
    a.set_sample_id_all(1);
    a.set_use_clockid(1);
    a.clockid = libc::CLOCK_MONOTONIC;
    a.sample_regs_user = REGS_MASK;
    a.sample_stack_user = STACK_BYTES;
    // Wake the reader as soon as a record is there (a blocked task's stack is read while
    // it is still blocked).
    a.set_watermark(1);
    a.__bindgen_anon_2.wakeup_watermark = 1;
    match kind {
        Kind::SideBand => {
            a.config = u64::from(b::PERF_COUNT_SW_DUMMY);
            a.set_context_switch(1);
            a.set_task(1);
            a.set_comm(1);
            a.set_comm_exec(1);
            a.set_mmap(1);
            a.set_mmap2(1);
            a.set_mmap_data(1);
        }
        Kind::MinorFaults | Kind::MajorFaults => {
            a.config = u64::from(if kind == Kind::MinorFaults { b::PERF_COUNT_SW_PAGE_FAULTS_MIN } else { b::PERF_COUNT_SW_PAGE_FAULTS_MAJ });
            a.__bindgen_anon_1.sample_period = 1;
        }
    }
    a
}

/// The attribute sampling every hit of the tracefs event with tracepoint id `id` (a
/// dynamic probe's, `events/<group>/<event>/id`) with the user registers and stack, as
/// the page-fault events sample (a uprobe's hit is taken with the user registers), on a
/// whole CPU ([`open_system_wide`]): enabled at once, not inherited. Opening a tracepoint
/// needs root's (or `CAP_PERFMON`'s) access to its id.
///
/// Not a per-task event inherited by the command, as the others: the kernel's uprobe
/// filter for perf (`trace_uprobe.c`, `__uprobe_perf_filter`) takes a hit only if some
/// per-task event of the probe has a target (`hw.target`) whose `mm` is the hitting
/// process's, but perf swaps the contexts of tasks whose contexts are clones of one parent
/// (`perf_event_context_sched_out`, `context_equiv`) instead of switching their events
/// out and in. The gated command, before its exec, and the threads of `ust trace` that
/// inherited the events are such clones: after a swap the command runs with events whose
/// target is a thread of `ust trace`, and when that thread exits it takes the events
/// whose target is the command with it, so the filter refuses the command's later hits
/// (they count nothing: seen as the last hit of a process missing one run in three).
/// A CPU-wide event has no target: the filter takes every hit, and the converter keeps
/// those of the traced tree ([`super::to_ctf`]).
pub fn tracepoint(id: u64) -> b::perf_event_attr {
    let mut a = attr(Kind::MinorFaults);
    a.type_ = b::PERF_TYPE_TRACEPOINT;
    a.config = id;
    a.set_disabled(0);
    a.set_inherit(0);
    a.set_enable_on_exec(0);
    a
}

/// Opens `attr` for every task on `cpu` (`pid = -1`), which needs root (or
/// `CAP_PERFMON`, or `perf_event_paranoid` 0 or less).
///
/// # Errors
/// The errno of perf_event_open(2) (`EACCES`: not allowed; `ENOENT`: no such event).
pub fn open_system_wide(attr: &mut b::perf_event_attr, cpu: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: attr points to a valid perf_event_attr whose size field is its size.
    let fd = unsafe { sys::perf_event_open(attr, -1, cpu, -1, u64::from(b::PERF_FLAG_FD_CLOEXEC) as _) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens `attr` for this process (`pid = 0`) on `cpu`.
///
/// # Errors
/// The errno of perf_event_open(2) (`EACCES`/`EPERM`: paranoid or seccomp, `ENOENT`: no
/// such event, `ENOSYS`: no perf support).
pub fn open(attr: &mut b::perf_event_attr, cpu: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: attr points to a valid perf_event_attr whose size field is its size.
    let fd = unsafe { sys::perf_event_open(attr, 0, cpu, -1, u64::from(b::PERF_FLAG_FD_CLOEXEC) as _) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sends the output of `fd` to the ring of `target` (same CPU).
///
/// # Errors
/// The ioctl's errno.
pub fn set_output(fd: &OwnedFd, target: &OwnedFd) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: both are perf event descriptors we own.
    if unsafe { sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), target.as_raw_fd()) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The kernel's id of the event behind `fd` (what `PERF_SAMPLE_IDENTIFIER` carries).
///
/// # Errors
/// The ioctl's errno.
pub fn id(fd: &OwnedFd) -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    let mut id = 0u64;
    // SAFETY: fd is a perf event descriptor; id is a valid u64 to write.
    if unsafe { sys::ioctls::ID(fd.as_raw_fd(), &mut id) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(id)
}

/// `/proc/sys/kernel/perf_event_paranoid`, if readable.
pub fn paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").ok()?.trim().parse().ok()
}

/// What to tell the user when tier 1 cannot record: `level` is `perf_event_paranoid`
/// (`None`: unreadable), `err` the errno of a refused perf_event_open (`None`: not tried).
/// Returns `None` when nothing stands in the way (level <= 2 and no refusal).
///
/// The levels are those of the kernel's `Documentation/admin-guide/sysctl/kernel.rst`:
/// 2 allows user-space-only measurement of one's own processes, 3 and above (a Debian and
/// Android patch) allows nothing without `CAP_PERFMON`.
pub fn paranoid_advice(level: Option<i32>, err: Option<i32>) -> Option<String> {
    let fix = "sudo sysctl kernel.perf_event_paranoid=2";
    match (level, err) {
        (Some(l), _) if l >= 3 => Some(format!(
            "perf_event_open is closed to unprivileged users here (kernel.perf_event_paranoid = {l}); \
             allow user-space-only measurement of your own processes with `{fix}` \
             (or run as root, or give ust CAP_PERFMON)"
        )),
        (_, None) => None,
        (l, Some(e)) if e == libc::EACCES || e == libc::EPERM => Some(format!(
            "perf_event_open was refused ({}; kernel.perf_event_paranoid = {}): it needs kernel.perf_event_paranoid <= 2 (`{fix}`), \
             and a container or seccomp profile that allows the perf_event_open system call",
            std::io::Error::from_raw_os_error(e),
            l.map(|l| l.to_string()).unwrap_or_else(|| "unreadable".into())
        )),
        (_, Some(e)) if e == libc::ENOSYS || e == libc::ENOENT || e == libc::EOPNOTSUPP => {
            Some(format!("this kernel has no software perf events ({}): it needs CONFIG_PERF_EVENTS", std::io::Error::from_raw_os_error(e)))
        }
        (_, Some(e)) => Some(format!("perf_event_open failed: {}", std::io::Error::from_raw_os_error(e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_names_the_sysctl() {
        assert_eq!(paranoid_advice(Some(2), None), None);
        assert_eq!(paranoid_advice(Some(-1), None), None);
        let three = paranoid_advice(Some(3), None).unwrap();
        assert!(three.contains("kernel.perf_event_paranoid = 3") && three.contains("sysctl kernel.perf_event_paranoid=2"), "{three}");
        let four = paranoid_advice(Some(4), Some(libc::EACCES)).unwrap();
        assert!(four.contains("= 4") && four.contains("paranoid=2"), "{four}");
        let refused = paranoid_advice(Some(2), Some(libc::EACCES)).unwrap();
        assert!(refused.contains("refused") && refused.contains("paranoid = 2") && refused.contains("seccomp"), "{refused}");
        let eperm = paranoid_advice(None, Some(libc::EPERM)).unwrap();
        assert!(eperm.contains("unreadable") && eperm.contains("paranoid=2"), "{eperm}");
        assert!(paranoid_advice(Some(1), Some(libc::ENOSYS)).unwrap().contains("CONFIG_PERF_EVENTS"));
        assert!(paranoid_advice(Some(1), Some(libc::EINVAL)).unwrap().starts_with("perf_event_open failed"));
    }

    #[test]
    fn attrs_are_user_only_and_monotonic() {
        for k in [Kind::SideBand, Kind::MinorFaults, Kind::MajorFaults] {
            let a = attr(k);
            assert_eq!((a.exclude_kernel(), a.use_clockid(), a.clockid, a.inherit(), a.enable_on_exec()), (1, 1, libc::CLOCK_MONOTONIC, 1, 1));
            assert_eq!(a.sample_type, SAMPLE_TYPE);
        }
        assert_eq!(attr(Kind::SideBand).context_switch(), 1);
        // The probes' events: every task's hits on a CPU, from the start.
        let t = tracepoint(42);
        assert_eq!((t.type_, t.config, t.inherit(), t.enable_on_exec(), t.disabled(), t.sample_type), (b::PERF_TYPE_TRACEPOINT, 42, 0, 0, 0, SAMPLE_TYPE));
        // SAFETY: reading the union member this module sets.
        assert_eq!(unsafe { attr(Kind::MajorFaults).__bindgen_anon_1.sample_period }, 1);
    }
}
