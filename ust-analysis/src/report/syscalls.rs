//! System calls as `strace -f -c` counts them: per system call the calls, the errors (a
//! return value in `-4095..=-1`, as strace decides) by errno name, and the time; per thread
//! and per process totals; the slowest calls.
//!
//! Only calls of the traced command count, from its `execve` on: the launcher (`ust
//! trace`'s child between fork and exec: signal resets, the `PATH` search with its failed
//! `execve`s) is left out. The cut is the entry of the first `execve` of the traced pid that
//! returned 0 (the `execve` strace shows); a trace without one counts everything and says so.

use crate::report::fast_hash::{HashMap, HashSet};
use std::collections::BTreeMap;

use serde::Serialize;

use super::load::{Domain, Event, Loaded};
use super::stats::percentile;

pub use super::errno::{errno_name, error_of};

/// Per-system-call row (traced threads only).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct SyscallRow {
    /// System call name.
    pub name: String,
    /// Completed calls.
    pub count: u64,
    /// Calls that failed (returned `-4095..=-1`, strace's rule).
    pub errors: u64,
    /// The failures per errno name (`ENOENT`).
    pub errnos: BTreeMap<String, u64>,
    /// Sum of durations (ns).
    pub total_ns: u64,
    /// Median (ns).
    pub p50_ns: u64,
    /// 90th percentile (ns).
    pub p90_ns: u64,
    /// 99th percentile (ns).
    pub p99_ns: u64,
    /// Longest (ns).
    pub max_ns: u64,
}

/// System call totals of one thread.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ThreadCalls {
    /// Process (thread group) id.
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// Thread name.
    pub name: String,
    /// Completed calls.
    pub calls: u64,
    /// Of which failed.
    pub errors: u64,
    /// Time in system calls (ns).
    pub total_ns: u64,
}

/// System call totals of one process (all its threads).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ProcessCalls {
    /// Process id.
    pub pid: i32,
    /// Name of its main thread (or of the first thread seen).
    pub name: String,
    /// Threads that made calls.
    pub threads: u64,
    /// Completed calls.
    pub calls: u64,
    /// Of which failed.
    pub errors: u64,
    /// Time in system calls (ns).
    pub total_ns: u64,
}

/// One of the slowest calls.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct SlowCall {
    /// Entry (ns).
    pub ts_ns: u64,
    /// Thread id.
    pub tid: i32,
    /// Thread name.
    pub thread: String,
    /// The call as strace writes it, descriptors named by what they held then
    /// (`read(3</tmp/fifo>, 0x7ffc8a9e0f37, 1)`, [`super::call_text`]).
    pub call: String,
    /// Entry to exit (ns).
    pub duration_ns: u64,
    /// Return value.
    pub ret: i64,
    /// Errno name when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Everything this module computes.
#[derive(Clone, Debug, Default)]
pub struct Calls {
    /// Per system call, by total time.
    pub rows: Vec<SyscallRow>,
    /// Per thread.
    pub threads: Vec<ThreadCalls>,
    /// Per process.
    pub processes: Vec<ProcessCalls>,
    /// The slowest calls, longest first.
    pub slowest: Vec<SlowCall>,
    /// When the traced command's exec began (ns), if seen.
    pub exec_ns: Option<u64>,
}

/// How many of the slowest calls are kept.
pub const SLOWEST: usize = 10;

/// Whether system call `name` takes a descriptor as its first argument.
pub fn takes_fd(name: &str) -> bool {
    const FD_FIRST: &[&str] = &[
        "read",
        "write",
        "pread64",
        "pwrite64",
        "readv",
        "writev",
        "preadv",
        "pwritev",
        "preadv2",
        "pwritev2",
        "recvfrom",
        "sendto",
        "recvmsg",
        "sendmsg",
        "recvmmsg",
        "sendmmsg",
        "accept",
        "accept4",
        "connect",
        "fsync",
        "fdatasync",
        "ioctl",
        "fcntl",
        "flock",
        "epoll_wait",
        "epoll_pwait",
        "epoll_pwait2",
        "lseek",
        "getdents64",
        "ftruncate",
        "fstat",
        "sendfile",
        "splice",
        "tee",
        "copy_file_range",
        "close",
        "fallocate",
        "sync_file_range",
        "fadvise64",
    ];
    FD_FIRST.contains(&name)
}

/// The calls of one side (the program's, or ust's) as they complete.
#[derive(Default)]
struct Tally {
    /// Per call name: its durations and its errors by errno name (rows are sorted at the end).
    per: HashMap<String, (Vec<u64>, BTreeMap<String, u64>)>,
    /// Per thread (listed by tid at the end).
    threads: HashMap<i32, ThreadCalls>,
    slow: Vec<SlowCall>,
    /// The shortest of the [`SLOWEST`] calls kept at the last cut of `slow` (0 before):
    /// every call kept since is as long or longer, so a shorter call has [`SLOWEST`]
    /// longer ones already.
    floor: u64,
}

impl Tally {
    /// Whether a call of `duration_ns` may be among the [`SLOWEST`] that [`Tally::finish`]
    /// keeps: not when [`SLOWEST`] calls already kept are longer, as they (or longer ones)
    /// stay kept to the end. Such a call is still added, without its texts, so that the
    /// calls kept are the same.
    fn may_be_slowest(&self, duration_ns: u64) -> bool {
        duration_ns >= self.floor && self.slow.iter().filter(|c| c.duration_ns > duration_ns).count() < SLOWEST
    }

    fn add(&mut self, call: SlowCall, pid: i32, name: &str, name_of: &dyn Fn(i32) -> String) {
        let err = error_of(call.ret);
        let row = match self.per.get_mut(name) {
            Some(r) => r,
            None => self.per.entry(name.to_string()).or_default(),
        };
        row.0.push(call.duration_ns);
        if let Some(n) = err {
            *row.1.entry(errno_name(n)).or_default() += 1;
        }
        let t = self.threads.entry(call.tid).or_insert_with(|| ThreadCalls { pid, tid: call.tid, name: name_of(call.tid), calls: 0, errors: 0, total_ns: 0 });
        t.calls += 1;
        t.errors += u64::from(err.is_some());
        t.total_ns += call.duration_ns;
        // Shorter than the floor: [`SLOWEST`] longer calls are kept already.
        if call.duration_ns < self.floor {
            return;
        }
        self.slow.push(call);
        if self.slow.len() > 4 * SLOWEST {
            self.slow.sort_by_key(|c| std::cmp::Reverse(c.duration_ns));
            self.slow.truncate(SLOWEST);
            self.floor = self.slow.last().map_or(0, |c| c.duration_ns);
        }
    }

    fn finish(mut self, comm: &HashMap<i32, String>, exec_ns: Option<u64>) -> Calls {
        self.slow.sort_by(|a, b| b.duration_ns.cmp(&a.duration_ns).then(a.ts_ns.cmp(&b.ts_ns)));
        self.slow.truncate(SLOWEST);
        let mut rows: Vec<SyscallRow> = self
            .per
            .into_iter()
            .map(|(name, (mut d, errnos))| {
                d.sort_unstable();
                SyscallRow {
                    name,
                    count: d.len() as u64,
                    errors: errnos.values().sum(),
                    errnos,
                    total_ns: d.iter().sum(),
                    p50_ns: percentile(&d, 0.5),
                    p90_ns: percentile(&d, 0.9),
                    p99_ns: percentile(&d, 0.99),
                    max_ns: d.last().copied().unwrap_or(0),
                }
            })
            .collect();
        rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        // In tid order: a process unnamed in `comm` takes its lowest thread's name.
        let mut threads: Vec<ThreadCalls> = self.threads.into_values().collect();
        threads.sort_unstable_by_key(|t| t.tid);
        let mut procs: BTreeMap<i32, ProcessCalls> = BTreeMap::new();
        for t in &threads {
            let p = procs.entry(t.pid).or_insert_with(|| ProcessCalls {
                pid: t.pid,
                name: comm.get(&t.pid).cloned().unwrap_or_else(|| t.name.clone()),
                threads: 0,
                calls: 0,
                errors: 0,
                total_ns: 0,
            });
            p.threads += 1;
            p.calls += t.calls;
            p.errors += t.errors;
            p.total_ns += t.total_ns;
        }
        Calls { rows, threads, processes: procs.into_values().collect(), slowest: self.slow, exec_ns }
    }
}

/// The entry time of the first successful `execve` of `pid` among `events` (its thread's
/// events in time order); `None` without one, and at once for pid 0 (no cut: a process
/// chosen with `--pid`, or no traced process known), the idle task, which never execs.
fn exec_entry<'e>(events: impl Iterator<Item = &'e Event>, pid: i32) -> Option<u64> {
    if pid == 0 {
        return None;
    }
    let mut entry = None;
    for e in events.filter(|e| e.tid == pid) {
        match e.name.as_str() {
            "syscall_entry" => entry = Some(e.ts),
            "syscall_exit" if e.text("name").as_deref() == Some("execve") && e.int("ret") == Some(0) => return entry,
            _ => {}
        }
    }
    None
}

/// Counts the system calls of the threads in `tree` (`tgid`: thread to process, `comm`:
/// thread names) from the exec of `traced_pid` on; the calls `is_ust(tid, entry ns, name,
/// ret)` says are ust's are counted apart: `(the program's, ust's)`.
pub fn count(
    l: &Loaded,
    tree: &HashSet<i32>,
    (tgid, comm): (&HashMap<i32, i32>, &HashMap<i32, String>),
    traced_pid: i32,
    is_ust: &dyn Fn(i32, u64, &str, i64) -> bool,
) -> (Calls, Calls) {
    let kernel = || l.events.iter().filter(|e| e.domain == Domain::Kernel && tree.contains(&e.tid));
    // The cut: the entry of the traced pid's first successful execve.
    let exec_ns = exec_entry(kernel(), traced_pid);
    let from = exec_ns.unwrap_or(0);
    let mut open: HashMap<i32, (u64, std::borrow::Cow<'_, str>, &Event)> = HashMap::default();
    // The descriptors as each call saw them (the tree's events from the start).
    let mut fdt = super::fdtable::FdTable::new(None);
    let (mut program, mut ust) = (Tally::default(), Tally::default());
    let name_of = |t: i32| comm.get(&t).cloned().unwrap_or_else(|| "?".into());
    for e in kernel() {
        let pid = *tgid.get(&e.tid).unwrap_or(&e.tid);
        if e.ts < from || !e.name.starts_with("syscall_") {
            fdt.observe(e, pid);
            continue;
        }
        match e.name.as_str() {
            "syscall_entry" => {
                open.insert(e.tid, (e.ts, e.text("name").unwrap_or_default(), e));
            }
            "syscall_exit" => {
                let Some((start, name, entry)) = open.remove(&e.tid) else {
                    fdt.observe(e, pid);
                    continue;
                };
                let ret = e.int("ret").unwrap_or(0);
                let duration_ns = e.ts.saturating_sub(start);
                let side = if is_ust(e.tid, start, &name, ret) { &mut ust } else { &mut program };
                // Only a call that may end among the slowest is written out (strace's
                // text, the thread's name): the others are counted, then dropped unread.
                let shown = side.may_be_slowest(duration_ns);
                let call = SlowCall {
                    ts_ns: start,
                    tid: e.tid,
                    thread: if shown { name_of(e.tid) } else { String::new() },
                    call: if shown { super::call_text::render(entry, pid, &mut fdt) } else { String::new() },
                    duration_ns,
                    ret,
                    error: if shown { error_of(ret).map(errno_name) } else { None },
                };
                side.add(call, pid, &name, &name_of);
            }
            _ => {}
        }
        fdt.observe(e, pid);
    }
    (program.finish(comm, exec_ns), ust.finish(comm, exec_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(ts_ns: u64, tid: i32, duration_ns: u64) -> SlowCall {
        SlowCall { ts_ns, tid, thread: String::new(), call: String::new(), duration_ns, ret: 0, error: None }
    }

    /// The slowest calls kept as they complete (cut at 4 x SLOWEST, the shorter ones
    /// dropped at once below the floor) are those a sort of every call keeps: longest
    /// first, the earlier entry first among equals (many ties here; calls of one duration
    /// complete in the order they began).
    #[test]
    fn the_slowest_calls_are_those_a_full_sort_keeps() {
        let mut all: Vec<(u64, u64)> = (0..2_000u64).map(|i| (100 + (i * 31) % 7, (i * 7919) % 2_000)).collect();
        // In the order they complete: entry + duration.
        all.sort_by_key(|&(d, ts)| (ts + d, ts));
        let mut t = Tally::default();
        for &(d, ts) in &all {
            t.add(call(ts, 1, d), 1, "read", &|_| String::new());
        }
        all.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let kept: Vec<(u64, u64)> = t.finish(&HashMap::default(), None).slowest.iter().map(|c| (c.duration_ns, c.ts_ns)).collect();
        assert_eq!(kept, all[..SLOWEST]);
    }

    /// A process that `comm` does not name takes its lowest thread's name, whatever the
    /// order its threads' calls came in.
    #[test]
    fn an_unnamed_process_takes_its_lowest_thread_s_name() {
        let name_of = |t: i32| format!("thread{t}");
        for order in [[13, 11, 12], [12, 13, 11], [11, 12, 13]] {
            let mut t = Tally::default();
            for tid in order {
                t.add(call(1, tid, 5), 10, "read", &name_of);
            }
            let c = t.finish(&HashMap::default(), None);
            assert_eq!(c.processes.iter().map(|p| (p.pid, p.name.as_str(), p.threads)).collect::<Vec<_>>(), [(10, "thread11", 3)]);
            assert_eq!(c.threads.iter().map(|t| t.tid).collect::<Vec<_>>(), [11, 12, 13]);
        }
    }

    #[test]
    fn errno_names_and_the_error_rule() {
        for (n, name) in [
            (libc::ENOENT, "ENOENT"),
            (libc::ENOTTY, "ENOTTY"),
            (libc::ENOSYS, "ENOSYS"),
            (libc::ENOMSG, "ENOMSG"),
            (libc::EBFONT, "EBFONT"),
            (libc::EBADMSG, "EBADMSG"),
            (libc::EILSEQ, "EILSEQ"),
            (libc::EOPNOTSUPP, "EOPNOTSUPP"),
            (libc::ECONNREFUSED, "ECONNREFUSED"),
            (libc::EDQUOT, "EDQUOT"),
            (libc::ECANCELED, "ECANCELED"),
            (libc::EOWNERDEAD, "EOWNERDEAD"),
            (libc::EHWPOISON, "EHWPOISON"),
        ] {
            assert_eq!(errno_name(n.into()), name, "libc's {name} is {n}");
        }
        assert_eq!(errno_name(2), "ENOENT");
        assert_eq!(errno_name(13), "EACCES");
        assert_eq!(errno_name(110), "ETIMEDOUT");
        assert_eq!(errno_name(133), "EHWPOISON");
        assert_eq!(errno_name(512), "ERESTARTSYS");
        assert_eq!(errno_name(41), "E41");
        assert_eq!(errno_name(9999), "E9999");
        assert_eq!(errno_name(-3), "E-3");
        assert_eq!(error_of(-2), Some(2));
        assert_eq!(error_of(-4095), Some(4095));
        assert_eq!(error_of(-4096), None);
        assert_eq!(error_of(0), None);
        assert_eq!(error_of(3), None);
    }
}
