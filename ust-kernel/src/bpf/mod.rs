//! System-call arguments as strace shows them (paths, socket addresses, `execve`'s argv),
//! copied at `raw_syscalls:sys_enter` by a BPF program written as bytecode here, for one
//! tree of processes. ftrace's syscall events carry only the pointers; this is what perf
//! trace's augmentation (tools/perf/util/bpf_skel/augmented_raw_syscalls.bpf.c) does, with
//! no compiler: [`insn`] encodes the instructions, [`program`] writes the programs, [`sys`]
//! makes the `bpf(2)` and `perf_event_open(2)` calls, [`ringbuf`] reads the ring buffer,
//! [`record`] decodes its records and [`join`] attaches them to ftrace's `sys_enter`
//! records. Which arguments to copy comes from tracefs' format files ([`crate::argspec`]);
//! [`crate::captured`] and [`crate::lttng::entry_fields`] write them in LTTng's layout.
//!
//! ```text
//! raw_syscalls:sys_enter ─┐                       ┌─ traced   hash  tgid → 1   (root pid, then forks)
//! sched_process_fork ─────┼─ perf event + prog ───┼─ specs    array nr → arg kinds
//! sched_process_exit ─────┘  (PERF_TYPE_TRACEPOINT)├─ scratch  per-CPU record being built
//!                                                  ├─ ring     ring buffer ──> Capture::drain
//!                                                  └─ lost     per-CPU [ring full, map full]
//! ```
//!
//! The program runs on every CPU for every system call of the machine (a tracepoint's
//! programs are per tracepoint, not per CPU): an untraced process costs a hash lookup.
//! Strings are read with `bpf_probe_read_user_str`, which cannot fault pages in: a path in
//! a page not resident (rare: the caller just wrote it) is a `fault` record, as in perf
//! trace.

pub mod insn;
pub mod join;
pub mod program;
pub mod record;
pub mod ringbuf;
pub mod sys;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::argspec;
use crate::format::EventFormat;
use record::ArgRecord;

/// Size of the ring buffer's data area: 8 MiB. One `openat` record is 40 bytes of header and
/// its path (rounded to 8, plus 8 of ring-buffer header): about 100 bytes for a usual path,
/// so 8 MiB holds some 80 000 calls, 80 ms of a loop that does nothing but `openat` and
/// `close` (about 1 µs each here), read every 10 ms by the recorder; a burst of 4-KiB
/// paths fills it after 2 000.
pub const RING_SIZE: u32 = 8 << 20;
/// Entries of the traced-processes map (processes and threads of the tree alive at once).
pub const TRACED_MAX: u32 = 65_536;

/// Why the capture could not start. The text says what is missing; the recorder then
/// writes pointers as before.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// The kernel has no `bpf(2)` (`CONFIG_BPF_SYSCALL` off).
    #[error("this kernel has no bpf(2) system call (CONFIG_BPF_SYSCALL is off)")]
    NoBpf,
    /// Not privileged enough.
    #[error("{what} needs root (CAP_BPF and CAP_PERFMON){sysctl}: {err}")]
    Permission {
        /// What was refused.
        what: &'static str,
        /// A note on `kernel.unprivileged_bpf_disabled` when it is set.
        sysctl: String,
        /// The kernel's error.
        err: io::Error,
    },
    /// The kernel lacks the BPF ring buffer (Linux 5.8).
    #[error("this kernel has no BPF ring buffer (BPF_MAP_TYPE_RINGBUF, Linux 5.8): {0}")]
    NoRingbuf(io::Error),
    /// The verifier refused a program.
    #[error("the kernel's verifier refused the {program} program ({err}); its log ends:\n{}", log_tail(.log))]
    Verifier {
        /// Which program.
        program: &'static str,
        /// The kernel's error.
        err: io::Error,
        /// The whole verifier log.
        log: String,
    },
    /// A tracefs format or id file could not be read.
    #[error("tracefs: {path}: {err}")]
    Tracefs {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        err: String,
    },
    /// Attaching to a tracepoint failed (`ENOENT`/`EINVAL`: a kernel without
    /// `CONFIG_BPF_EVENTS`).
    #[error("attaching to {tracepoint} failed (is CONFIG_BPF_EVENTS on?): {err}")]
    Attach {
        /// `system:event`.
        tracepoint: &'static str,
        /// The kernel's error.
        err: io::Error,
    },
    /// Another `bpf(2)` or mmap call failed.
    #[error("{what}: {err}")]
    Sys {
        /// What was being done.
        what: &'static str,
        /// The error.
        err: io::Error,
    },
    /// The program generator failed (a bug).
    #[error("generating the {0} program: {1}")]
    Asm(&'static str, insn::AsmError),
}

fn log_tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

fn sys_error(what: &'static str, err: io::Error) -> BpfError {
    match err.raw_os_error() {
        Some(libc::ENOSYS) => BpfError::NoBpf,
        Some(libc::EPERM) | Some(libc::EACCES) => {
            let v = std::fs::read_to_string("/proc/sys/kernel/unprivileged_bpf_disabled").unwrap_or_default();
            let sysctl = match v.trim() {
                "" | "0" => String::new(),
                v => format!("; kernel.unprivileged_bpf_disabled = {v} keeps it from other users"),
            };
            BpfError::Permission { what, sysctl, err }
        }
        _ => BpfError::Sys { what, err },
    }
}

/// Losses the programs counted, summed over the CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    /// Records the ring buffer had no room for.
    pub records: u64,
    /// Children not followed because the traced map was full.
    pub children: u64,
}

/// What [`Capture::drain`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// Records handed over.
    pub records: u64,
    /// Records that did not decode (skipped).
    pub bad: u64,
}

/// A running capture: the maps, the three programs attached to their tracepoints, and the
/// ring buffer's reader. Dropping it detaches everything (closing the perf events' and
/// programs' descriptors).
#[derive(Debug)]
pub struct Capture {
    // Field order is drop order: detach (events) before the programs and maps go.
    _events: Vec<OwnedFd>,
    _progs: Vec<OwnedFd>,
    ring: ringbuf::RingBuf,
    traced: OwnedFd,
    lost: OwnedFd,
    _maps: Vec<OwnedFd>,
}

/// One program and the tracepoint it goes on.
struct Plan<'a> {
    tracepoint: &'static str,
    name: &'static str,
    what: &'static str,
    code: Result<Vec<u64>, insn::AsmError>,
    format: &'a EventFormat,
}

fn format_of(events: &Path, sys: &str, ev: &str) -> Result<EventFormat, BpfError> {
    EventFormat::read(events, sys, ev).map_err(|err| BpfError::Tracefs { path: events.join(sys).join(ev).join("format"), err })
}

fn offset(f: &EventFormat, name: &str, size: usize) -> Result<i16, BpfError> {
    f.field(name)
        .filter(|x| x.size == size)
        .and_then(|x| i16::try_from(x.offset).ok())
        .ok_or_else(|| BpfError::Tracefs { path: PathBuf::from(format!("{}/{}/format", f.system, f.name)), err: format!("no {size}-byte field {name}") })
}

impl Capture {
    /// Starts capturing the arguments of the system calls of process `root_pid` and of
    /// every process it forks from now on: reads the formats under `tracefs_root/events`,
    /// creates the maps, puts `root_pid` in the traced set, loads the programs and attaches
    /// them. Start it before the traced command execs, to see it from its first instruction;
    /// and before ftrace's `raw_syscalls:sys_enter` is enabled, so that on the tracepoint the
    /// program runs first (probes of one priority run in the order they were registered,
    /// kernel/tracepoint.c) and a call's records are in the ring buffer before its ftrace
    /// record can be read. `root_pid` 0 starts with no process (the idle tasks make no
    /// system calls): add the command with [`Capture::add_process`] once its pid is known,
    /// before it execs.
    ///
    /// # Errors
    /// [`BpfError`], saying what is missing: not root, no BPF, no ring buffer, a verifier
    /// refusal with its log, a missing tracepoint.
    pub fn start(root_pid: i32, tracefs_root: &Path) -> Result<Capture, BpfError> {
        // The first bpf(2) call first: without privilege or BPF, that is what the error says.
        let map = |t, k, v, n, name| sys::map_create(t, k, v, n, name).map_err(|e| sys_error("creating a BPF map", e));
        let traced = map(sys::MAP_HASH, 4, 4, TRACED_MAX, "ust_traced")?;
        let events = tracefs_root.join("events");
        let enter = format_of(&events, "raw_syscalls", "sys_enter")?;
        let fork = format_of(&events, "sched", "sched_process_fork")?;
        let exit = format_of(&events, "sched", "sched_process_exit")?;
        let offsets = program::Offsets {
            id: offset(&enter, "id", 8)?,
            args: offset(&enter, "args", 48)?,
            child_pid: offset(&fork, "child_pid", 4)?,
            group_dead: offset(&exit, "group_dead", 1).ok(),
        };
        let specs = argspec::spec_table(&crate::lttng::read_syscall_args(&events));
        let spec_map = map(sys::MAP_ARRAY, 4, 8, program::SPEC_ENTRIES, "ust_specs")?;
        let scratch = map(sys::MAP_PERCPU_ARRAY, 4, program::SCRATCH_SIZE, 1, "ust_scratch")?;
        let lost = map(sys::MAP_PERCPU_ARRAY, 4, 8, 2, "ust_lost")?;
        let ring = sys::map_create(sys::MAP_RINGBUF, 0, 0, RING_SIZE, "ust_args").map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL) => BpfError::NoRingbuf(e),
            _ => sys_error("creating the BPF ring buffer", e),
        })?;
        for (nr, s) in &specs {
            sys::map_update(&spec_map, &nr.to_ne_bytes(), &s.to_bytes()).map_err(|err| BpfError::Sys { what: "filling the spec map", err })?;
        }
        sys::map_update(&traced, &(root_pid as u32).to_ne_bytes(), &1u32.to_ne_bytes())
            .map_err(|err| BpfError::Sys { what: "adding the root process", err })?;
        let maps = program::Maps {
            traced: traced.as_raw_fd(),
            specs: spec_map.as_raw_fd(),
            scratch: scratch.as_raw_fd(),
            ring: ring.as_raw_fd(),
            lost: lost.as_raw_fd(),
        };
        let reader = ringbuf::RingBuf::new(&ring, RING_SIZE).map_err(|err| BpfError::Sys { what: "mapping the BPF ring buffer", err })?;
        let license = c"Dual MIT/GPL";
        let mut progs = Vec::new();
        let mut evs = Vec::new();
        // Children are followed before the first system call is captured.
        let plan = [
            Plan { tracepoint: "sched:sched_process_fork", name: "ust_fork", what: "fork", code: program::fork(&maps, &offsets), format: &fork },
            Plan { tracepoint: "sched:sched_process_exit", name: "ust_exit", what: "exit", code: program::exit(&maps, &offsets), format: &exit },
            Plan {
                tracepoint: "raw_syscalls:sys_enter",
                name: "ust_sys_enter",
                what: "sys_enter",
                code: program::sys_enter(&maps, &offsets, &specs),
                format: &enter,
            },
        ];
        let cpu = ust_core::cpus::possible_cpus().into_iter().find(|&c| Path::new(&format!("/sys/devices/system/cpu/cpu{c}")).exists()).unwrap_or(0);
        for Plan { tracepoint: tp, name, what, code, format: fmt } in plan {
            let code = code.map_err(|e| BpfError::Asm(what, e))?;
            let prog = sys::prog_load(sys::PROG_TRACEPOINT, &code, license, name).map_err(|(err, log)| match err.raw_os_error() {
                Some(libc::EPERM) | Some(libc::ENOSYS) => sys_error("loading a BPF program", err),
                _ => BpfError::Verifier { program: what, err, log },
            })?;
            let ev = Self::open_event(&events, fmt, cpu).map_err(|err| match err.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => sys_error("perf_event_open of a tracepoint", err),
                _ => BpfError::Attach { tracepoint: tp, err },
            })?;
            sys::attach(&ev, &prog).map_err(|err| BpfError::Attach { tracepoint: tp, err })?;
            progs.push(prog);
            evs.push(ev);
        }
        Ok(Capture { _events: evs, _progs: progs, ring: reader, traced, lost, _maps: vec![spec_map, scratch, ring] })
    }

    fn open_event(events: &Path, fmt: &EventFormat, cpu: u32) -> io::Result<OwnedFd> {
        let id_path = events.join(&fmt.system).join(&fmt.name).join("id");
        let id = std::fs::read_to_string(&id_path)?.trim().parse::<u64>().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        sys::tracepoint_event(id, cpu as i32)
    }

    /// Adds process `pid` to the traced set (its later children follow).
    ///
    /// # Errors
    /// The map update's error (`E2BIG`: the map is full).
    pub fn add_process(&self, pid: i32) -> io::Result<()> {
        sys::map_update(&self.traced, &(pid as u32).to_ne_bytes(), &1u32.to_ne_bytes())
    }

    /// Hands every record in the ring buffer to `f`, in ring-buffer order (per thread, time
    /// order), and frees the space. Never blocks.
    ///
    /// # Errors
    /// A ring-buffer header that cannot be right ([`ringbuf::RingBuf::drain`]); the records
    /// before it were delivered.
    pub fn drain(&mut self, mut f: impl FnMut(ArgRecord)) -> io::Result<Drained> {
        let mut d = Drained::default();
        self.ring.drain(|b| match ArgRecord::parse(b) {
            Ok(r) => {
                d.records += 1;
                f(r)
            }
            Err(_) => d.bad += 1,
        })?;
        Ok(d)
    }

    /// Bytes in the ring buffer not drained yet.
    pub fn pending(&self) -> u64 {
        self.ring.pending()
    }

    /// The losses counted so far.
    ///
    /// # Errors
    /// The map lookup's error.
    pub fn lost(&self) -> io::Result<Lost> {
        // A per-CPU value is one 8-byte slot per possible CPU (num_possible_cpus()).
        let n = ust_core::cpus::possible_cpus().len().max(1);
        let mut sum = [0u64; 2];
        for (slot, total) in sum.iter_mut().enumerate() {
            let mut v = vec![0u8; 8 * n];
            sys::map_lookup(&self.lost, &(slot as u32).to_ne_bytes(), &mut v)?;
            *total = v.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]))).sum();
        }
        Ok(Lost { records: sum[program::LOST_RINGBUF as usize], children: sum[program::LOST_TRACED_FULL as usize] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's refusals become errors that say what is missing.
    #[test]
    fn refusals_say_what_is_missing() {
        let e = sys_error("creating a BPF map", io::Error::from_raw_os_error(libc::EPERM));
        assert!(matches!(e, BpfError::Permission { .. }) && e.to_string().starts_with("creating a BPF map needs root (CAP_BPF and CAP_PERFMON)"), "{e}");
        assert_eq!(sys_error("x", io::Error::from_raw_os_error(libc::ENOSYS)).to_string(), "this kernel has no bpf(2) system call (CONFIG_BPF_SYSCALL is off)");
        let v = BpfError::Verifier {
            program: "sys_enter",
            err: io::Error::from_raw_os_error(libc::EACCES),
            log: (0..100).map(|i| format!("line {i}\n")).collect(),
        };
        let t = v.to_string();
        assert!(t.contains("refused the sys_enter program") && t.ends_with("line 99") && !t.contains("line 69\n"), "{t}");
    }
}
