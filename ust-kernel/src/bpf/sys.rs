//! The `bpf(2)` and `perf_event_open(2)` calls the capture makes, through `libc::syscall`
//! (libc has no wrappers): map create, update and lookup, program load (with the verifier's
//! log on refusal), and attaching a program to a tracepoint: `perf_event_open` of
//! `PERF_TYPE_TRACEPOINT` with the tracepoint's id, `PERF_EVENT_IOC_SET_BPF`,
//! `PERF_EVENT_IOC_ENABLE` (include/uapi/linux/bpf.h, include/uapi/linux/perf_event.h).
//!
//! The attribute structures are the leading parts of `union bpf_attr` and
//! `struct perf_event_attr` (`PERF_ATTR_SIZE_VER5`); the kernel zero-fills the rest.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `BPF_MAP_CREATE`.
const MAP_CREATE: libc::c_long = 0;
/// `BPF_MAP_LOOKUP_ELEM`.
const MAP_LOOKUP_ELEM: libc::c_long = 1;
/// `BPF_MAP_UPDATE_ELEM`.
const MAP_UPDATE_ELEM: libc::c_long = 2;
/// `BPF_PROG_LOAD`.
const PROG_LOAD: libc::c_long = 5;

/// `BPF_MAP_TYPE_HASH`.
pub const MAP_HASH: u32 = 1;
/// `BPF_MAP_TYPE_ARRAY`.
pub const MAP_ARRAY: u32 = 2;
/// `BPF_MAP_TYPE_PERCPU_ARRAY`.
pub const MAP_PERCPU_ARRAY: u32 = 6;
/// `BPF_MAP_TYPE_RINGBUF` (Linux 5.8).
pub const MAP_RINGBUF: u32 = 27;
/// `BPF_PROG_TYPE_TRACEPOINT`.
pub const PROG_TRACEPOINT: u32 = 5;

/// `PERF_TYPE_TRACEPOINT`.
const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `PERF_SAMPLE_RAW`.
const PERF_SAMPLE_RAW: u64 = 1 << 10;
/// `PERF_FLAG_FD_CLOEXEC`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// `PERF_EVENT_IOC_ENABLE` = `_IO('$', 0)`.
const IOC_ENABLE: libc::c_ulong = 0x2400;
/// `PERF_EVENT_IOC_SET_BPF` = `_IOW('$', 8, __u32)`.
const IOC_SET_BPF: libc::c_ulong = 0x4004_2408;

/// The `BPF_MAP_CREATE` part of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// The `BPF_MAP_*_ELEM` part of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// The `BPF_PROG_LOAD` part of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
}

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER5` (112 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// Bit 0: `disabled`.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    _reserved: u16,
}

fn name16(name: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    for (d, s) in n.iter_mut().zip(name.bytes().filter(|b| b.is_ascii_alphanumeric() || *b == b'_').take(15)) {
        *d = s;
    }
    n
}

/// Calls `bpf(cmd, attr, size_of::<T>())`; the result as a descriptor or a count.
fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialized `repr(C)` prefix of `union bpf_attr` of the size
    // passed; the kernel reads (and for some commands writes) at most that many bytes.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn owned(fd: libc::c_long) -> io::Result<OwnedFd> {
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("descriptor out of range"))?;
    // SAFETY: the kernel just returned `fd` as a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Creates a map (`BPF_MAP_CREATE`; the descriptor is close-on-exec).
///
/// # Errors
/// The kernel's error: `EPERM` without privilege, `EINVAL` for a map type it lacks.
pub fn map_create(map_type: u32, key_size: u32, value_size: u32, max_entries: u32, name: &str) -> io::Result<OwnedFd> {
    let mut a = MapCreateAttr { map_type, key_size, value_size, max_entries, map_name: name16(name), ..Default::default() };
    owned(bpf(MAP_CREATE, &mut a)?)
}

/// Sets `key` to `value` in map `fd` (`BPF_ANY`). `key` and `value` must have the map's
/// sizes (a per-CPU map's value is one slot per possible CPU, each rounded up to 8 bytes).
///
/// # Errors
/// The kernel's error (`E2BIG` when a hash map is full).
pub fn map_update(fd: &OwnedFd, key: &[u8], value: &[u8]) -> io::Result<()> {
    let mut a = MapElemAttr { map_fd: fd.as_raw_fd() as u32, key: key.as_ptr() as u64, value: value.as_ptr() as u64, ..Default::default() };
    bpf(MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// Reads the value of `key` of map `fd` into `value` (which must have the map's value size,
/// for a per-CPU map one 8-byte-rounded slot per possible CPU).
///
/// # Errors
/// The kernel's error (`ENOENT` for a missing key).
pub fn map_lookup(fd: &OwnedFd, key: &[u8], value: &mut [u8]) -> io::Result<()> {
    let mut a = MapElemAttr { map_fd: fd.as_raw_fd() as u32, key: key.as_ptr() as u64, value: value.as_mut_ptr() as u64, ..Default::default() };
    bpf(MAP_LOOKUP_ELEM, &mut a).map(|_| ())
}

/// Size of the verifier log buffer asked for after a refusal. The kernel keeps the log's
/// end when it is longer (the rotating log of Linux 6.4+), which is where the reason is.
const LOG_SIZE: usize = 1 << 20;

/// Loads a program of type `prog_type` (`BPF_PROG_LOAD`). A refused program is loaded a
/// second time with the verifier log on (level 1) so that the error can say why.
///
/// # Errors
/// `(error, verifier log)`: the log is empty when the kernel wrote none.
pub fn prog_load(prog_type: u32, insns: &[u64], license: &CStr, name: &str) -> Result<OwnedFd, (io::Error, String)> {
    let attr = |log: &mut Vec<u8>, level: u32| ProgLoadAttr {
        prog_type,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: level,
        log_size: if level > 0 { log.len() as u32 } else { 0 },
        log_buf: if level > 0 { log.as_mut_ptr() as u64 } else { 0 },
        prog_name: name16(name),
        ..Default::default()
    };
    let mut none = Vec::new();
    let first = bpf(PROG_LOAD, &mut attr(&mut none, 0));
    match first {
        Ok(fd) => owned(fd).map_err(|e| (e, String::new())),
        Err(e) => {
            let mut log = vec![0u8; LOG_SIZE];
            let second = bpf(PROG_LOAD, &mut attr(&mut log, 1));
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]).into_owned();
            match second {
                // Loaded with the log on: take it (the first refusal was transient).
                Ok(fd) => owned(fd).map_err(|e| (e, text)),
                Err(_) => Err((e, text)),
            }
        }
    }
}

/// Opens a disabled perf event on tracepoint `id` (tracefs `events/<sys>/<ev>/id`) for all
/// tasks on `cpu` (`perf_event_open(2)`, pid −1).
///
/// # Errors
/// The kernel's error (`ENOENT`/`EINVAL` for an unknown id, `EACCES` without privilege).
pub fn tracepoint_event(id: u64, cpu: i32) -> io::Result<OwnedFd> {
    let mut a = PerfEventAttr {
        type_: PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: id,
        sample_period: 1,
        sample_type: PERF_SAMPLE_RAW,
        flags: 1, // disabled
        wakeup_events: 1,
        ..Default::default()
    };
    // SAFETY: `a` is a live `perf_event_attr` of the size its `size` field says; the other
    // arguments are plain integers.
    let r = unsafe { libc::syscall(libc::SYS_perf_event_open, &mut a as *mut PerfEventAttr, -1 as libc::pid_t, cpu, -1 as libc::c_int, PERF_FLAG_FD_CLOEXEC) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    owned(r)
}

fn ioctl(fd: &OwnedFd, req: libc::c_ulong, arg: libc::c_ulong) -> io::Result<()> {
    // SAFETY: `fd` is an open perf event; both requests take an integer argument.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, arg) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Attaches program `prog` to the tracepoint of perf event `event`
/// (`PERF_EVENT_IOC_SET_BPF`) and enables the event. The program then runs on every hit of
/// the tracepoint, on every CPU (it joins the tracepoint's program array), until the
/// event's descriptor is closed.
///
/// # Errors
/// The ioctl's error (`EEXIST`: the program is already attached there).
pub fn attach(event: &OwnedFd, prog: &OwnedFd) -> io::Result<()> {
    ioctl(event, IOC_SET_BPF, prog.as_raw_fd() as libc::c_ulong)?;
    ioctl(event, IOC_ENABLE, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_layouts_match_the_uapi() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 112, "PERF_ATTR_SIZE_VER5");
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 64);
        assert_eq!(std::mem::size_of::<MapElemAttr>(), 32);
        assert_eq!(std::mem::size_of::<MapCreateAttr>(), 44);
        assert_eq!(&name16("ust-args_1")[..9], b"ustargs_1");
    }
}
