//! What each descriptor of each process held, followed through the trace in time order:
//! the table a call saw when it was made, not the one left at the end of the run.
//!
//! ```text
//! lttng_statedump_file_descriptor { pid, fd, filename }   the table at the start (root's view)
//! syscall_entry_* ... syscall_exit_* (ret)                 its changes, applied at the exit:
//!   open, openat, openat2, creat      ret  = the path as passed (`filename`)
//!   close                             fd   = gone
//!   dup, dup2, dup3, fcntl(F_DUPFD*)  ret  = what the old one held
//!   pipe, pipe2, socketpair           the two lowest free numbers (the kernel's rule) = pipe / socket
//!   socket, accept, accept4           ret  = socket:[AF_…]
//!   eventfd2, epoll_create1, …        ret  = anon_inode:[…]
//!   execve (ret 0)                    the close-on-exec ones gone
//! sched_process_fork                  a new process starts with a copy of its parent's table
//! ```
//!
//! A descriptor the trace never saw opened or closed in its process (a tier-2 trace has no
//! state dump of descriptors) is named by the end-of-run table (`<output>/proc/<pid>/fds`)
//! as before: it held the same file all along. One whose opening the trace saw without its
//! path (the capture was off, or missed the call) has no name: never another file's.

use crate::report::fast_hash::{HashMap, HashSet};
use std::collections::BTreeMap;

use super::load::Event;

/// `O_CLOEXEC` (x86-64).
pub const O_CLOEXEC: i64 = 0o2000000;
/// `fcntl` commands that duplicate: `F_DUPFD`, `F_DUPFD_CLOEXEC`.
const F_DUPFD: i64 = 0;
const F_DUPFD_CLOEXEC: i64 = 1030;
/// `F_SETFD`.
const F_SETFD: i64 = 2;

/// One descriptor: what it holds (`None`: opened, but the trace has not its name) and its
/// close-on-exec flag.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Slot {
    name: Option<String>,
    cloexec: bool,
}

/// The descriptor tables of every process of a trace, as of the last event fed.
#[derive(Debug, Default)]
pub struct FdTable<'a> {
    /// Per process: fd → slot.
    tables: HashMap<i32, BTreeMap<i32, Slot>>,
    /// Per process: the descriptors the trace saw change (their end-of-run names are not theirs).
    touched: HashMap<i32, HashSet<i32>>,
    /// Per thread: the entry of the call in progress.
    pending: HashMap<i32, &'a Event>,
    /// Per process: the end-of-run table, read on first use.
    end_of_run: HashMap<i32, BTreeMap<i32, String>>,
    dir: Option<&'a std::path::Path>,
}

/// The socket family name of `socket(2)`'s `family`.
fn family_name(f: i64) -> String {
    match f {
        1 => "AF_UNIX".into(),
        2 => "AF_INET".into(),
        10 => "AF_INET6".into(),
        16 => "AF_NETLINK".into(),
        17 => "AF_PACKET".into(),
        _ => format!("AF_{f}"),
    }
}

impl<'a> FdTable<'a> {
    /// An empty table; `dir`: the trace directory whose `proc/<pid>/fds` name the
    /// descriptors the trace never saw change.
    pub fn new(dir: Option<&'a std::path::Path>) -> FdTable<'a> {
        FdTable { dir, ..Default::default() }
    }

    fn set(&mut self, pid: i32, fd: i64, name: Option<String>, cloexec: bool) {
        let Ok(fd) = i32::try_from(fd) else { return };
        self.tables.entry(pid).or_default().insert(fd, Slot { name, cloexec });
        self.touched.entry(pid).or_default().insert(fd);
    }

    fn remove(&mut self, pid: i32, fd: i64) {
        let Ok(fd) = i32::try_from(fd) else { return };
        if let Some(t) = self.tables.get_mut(&pid) {
            t.remove(&fd);
        }
        self.touched.entry(pid).or_default().insert(fd);
    }

    fn slot(&self, pid: i32, fd: i64) -> Option<&Slot> {
        self.tables.get(&pid)?.get(&i32::try_from(fd).ok()?)
    }

    /// The `n` lowest numbers free in `pid`'s table (counting the end-of-run table's
    /// descriptors the trace never saw change as open).
    fn lowest_free(&mut self, pid: i32, n: usize) -> Vec<i32> {
        let known: Vec<i32> = self.end_of_run(pid).keys().copied().collect();
        let untouched: Vec<i32> = known.into_iter().filter(|fd| !self.touched.get(&pid).is_some_and(|t| t.contains(fd))).collect();
        let table = self.tables.get(&pid);
        (0..i32::MAX).filter(|fd| !table.is_some_and(|t| t.contains_key(fd)) && !untouched.contains(fd)).take(n).collect()
    }

    fn end_of_run(&mut self, pid: i32) -> &BTreeMap<i32, String> {
        let dir = self.dir;
        self.end_of_run.entry(pid).or_insert_with(|| dir.map(|d| ust_kernel::procfs::read_fds(d, pid)).unwrap_or_default())
    }

    /// What descriptor `fd` of process `pid` holds now: its path (or `pipe`, `socket:[…]`,
    /// `anon_inode:[…]`); `None` when the trace does not tell.
    pub fn name(&mut self, pid: i32, fd: i64) -> Option<String> {
        if let Some(s) = self.slot(pid, fd) {
            return s.name.clone();
        }
        let fd32 = i32::try_from(fd).ok()?;
        if self.touched.get(&pid).is_some_and(|t| t.contains(&fd32)) {
            return None;
        }
        self.end_of_run(pid).get(&fd32).cloned()
    }

    /// Feeds one kernel event (in time order; `pid`: the process of its thread).
    pub fn observe(&mut self, e: &'a Event, pid: i32) {
        match e.name.as_str() {
            "lttng_statedump_file_descriptor" => {
                if let (Some(p), Some(fd)) = (e.int("pid"), e.int("fd")) {
                    let cloexec = e.int("flags").is_some_and(|f| f & O_CLOEXEC != 0);
                    self.set(p as i32, fd, e.text("filename").map(|s| s.into_owned()), cloexec);
                }
            }
            "sched_process_fork" => {
                // A new process (not a thread: its thread-group id, when the trace has it,
                // is its own) starts with a copy of its parent's table.
                let (Some(parent), Some(child)) = (e.int("parent_pid"), e.int("child_pid")) else { return };
                let child_tgid = e.int("child_tgid").unwrap_or(child);
                if child_tgid != child {
                    return;
                }
                let from = e.int("parent_tgid").map_or(if pid > 0 { pid } else { parent as i32 }, |g| g as i32);
                if let Some(t) = self.tables.get(&from).cloned() {
                    self.tables.insert(child as i32, t);
                }
                if let Some(t) = self.touched.get(&from).cloned() {
                    self.touched.insert(child as i32, t);
                }
            }
            "syscall_entry" => {
                self.pending.insert(e.tid, e);
            }
            "syscall_exit" => {
                if let Some(entry) = self.pending.remove(&e.tid) {
                    self.apply(entry, e.int("ret").unwrap_or(-1), pid);
                }
            }
            _ => {}
        }
    }

    /// Applies the completed call `entry` that returned `ret` in process `pid`.
    fn apply(&mut self, entry: &Event, ret: i64, pid: i32) {
        let name = entry.text("name").unwrap_or_default();
        let ok = ret >= 0;
        let int = |n: &str| entry.int(n);
        match &*name {
            "open" | "openat" | "openat2" | "creat" if ok => {
                // The path as passed; a string the capture did not read has a status.
                // lttng-modules' traces have the string alone; ust's a status beside it.
                let path = match entry.int("filename_status") {
                    None | Some(0) | Some(1) => entry.text("filename").map(|s| s.into_owned()),
                    _ => None,
                };
                let flags = if name == "creat" { 0 } else { int("flags").unwrap_or(0) };
                self.set(pid, ret, path, flags & O_CLOEXEC != 0);
            }
            "close" => {
                if let Some(fd) = int("fd") {
                    self.remove(pid, fd);
                }
            }
            "dup" | "dup2" | "dup3" if ok => {
                let old = int("fildes").or(int("oldfd")).unwrap_or(-1);
                let held = self.name(pid, old);
                let cloexec = name == "dup3" && int("flags").is_some_and(|f| f & O_CLOEXEC != 0);
                if ret != old {
                    self.set(pid, ret, held, cloexec);
                }
            }
            "fcntl" if ok => {
                let (fd, cmd) = (int("fd").unwrap_or(-1), int("cmd").unwrap_or(-1));
                match cmd {
                    F_DUPFD | F_DUPFD_CLOEXEC => {
                        let held = self.name(pid, fd);
                        self.set(pid, ret, held, cmd == F_DUPFD_CLOEXEC);
                    }
                    F_SETFD => {
                        let on = int("arg").is_some_and(|a| a & 1 != 0);
                        let held = self.name(pid, fd);
                        self.set(pid, fd, held, on);
                    }
                    _ => {}
                }
            }
            "pipe" | "pipe2" | "socketpair" if ok => {
                let what = if name == "socketpair" { "socket" } else { "pipe" };
                let cloexec = int("flags").or(int("type")).is_some_and(|f| f & O_CLOEXEC != 0);
                for fd in self.lowest_free(pid, 2) {
                    self.set(pid, fd.into(), Some(what.into()), cloexec);
                }
            }
            "socket" if ok => {
                let cloexec = int("type").is_some_and(|t| t & O_CLOEXEC != 0);
                self.set(pid, ret, Some(format!("socket:[{}]", family_name(int("family").unwrap_or(-1)))), cloexec);
            }
            "accept" | "accept4" if ok => {
                let cloexec = int("flags").is_some_and(|f| f & O_CLOEXEC != 0);
                self.set(pid, ret, Some("socket".into()), cloexec);
            }
            "eventfd" | "eventfd2" | "epoll_create" | "epoll_create1" | "timerfd_create" | "signalfd" | "signalfd4" | "inotify_init" | "inotify_init1"
            | "userfaultfd" | "perf_event_open" | "bpf" | "pidfd_open"
                if ok && !(name == "signalfd4" && int("ufd").is_some_and(|u| u >= 0)) =>
            {
                let kind = name.trim_end_matches(['1', '2', '4']).trim_end_matches("_create").trim_end_matches("_init").trim_end_matches("_open");
                self.set(pid, ret, Some(format!("anon_inode:[{kind}]")), false);
            }
            "memfd_create" if ok => {
                let n = entry.text("uname").unwrap_or_default();
                self.set(pid, ret, Some(format!("/memfd:{n}")), int("flags").is_some_and(|f| f & 1 != 0));
            }
            "execve" | "execveat" if ret == 0 => {
                if let Some(t) = self.tables.get_mut(&pid) {
                    let gone: Vec<i32> = t.iter().filter(|(_, s)| s.cloexec).map(|(fd, _)| *fd).collect();
                    for fd in gone {
                        t.remove(&fd);
                        self.touched.entry(pid).or_default().insert(fd);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ust_ctf::reader::Value;

    fn ev(tid: i32, name: &str, fields: Vec<(&str, Value)>) -> Event {
        let mut f: Vec<(super::super::load::Name, Value)> = fields.into_iter().map(|(n, v)| (n.into(), v)).collect();
        if let Some(call) = name.strip_prefix("syscall_entry_").or(name.strip_prefix("syscall_exit_")) {
            f.push(("name".into(), Value::Str(call.into())));
        }
        let n = if name.starts_with("syscall_entry_") {
            "syscall_entry"
        } else if name.starts_with("syscall_exit_") {
            "syscall_exit"
        } else {
            name
        };
        Event { ts: 0, cpu: 0, name: n.into(), tid, pid: -1, domain: super::super::load::Domain::Kernel, fields: f }
    }

    fn s(v: &str) -> Value {
        Value::Str(v.into())
    }

    fn i(v: i64) -> Value {
        Value::Signed(v)
    }

    /// The FIFO scene of issue 34: fd 3 is FIFO A, closed, then FIFO B: each read in
    /// between sees its own; a dup names the copy; exec closes the close-on-exec ones.
    #[test]
    fn a_descriptor_is_named_by_what_it_held_then() {
        let open =
            |p: &str, flags: i64| ev(10, "syscall_entry_openat", vec![("dfd", i(-100)), ("filename", s(p)), ("filename_status", i(0)), ("flags", i(flags))]);
        let exit = |ret: i64| ev(10, "syscall_exit_openat", vec![("ret", i(ret))]);
        let close = ev(10, "syscall_entry_close", vec![("fd", i(3))]);
        let close_exit = ev(10, "syscall_exit_close", vec![("ret", i(0))]);
        let dump = ev(0, "lttng_statedump_file_descriptor", vec![("pid", i(10)), ("fd", i(0)), ("flags", i(0)), ("filename", s("/dev/null"))]);
        let (oa, ea, ob, eb) = (open("/t/fifoA", 0), exit(3), open("/t/fifoB", O_CLOEXEC), exit(3));
        let dup = ev(10, "syscall_entry_fcntl", vec![("fd", i(3)), ("cmd", i(F_DUPFD)), ("arg", i(10))]);
        let dup_exit = ev(10, "syscall_exit_fcntl", vec![("ret", i(10))]);
        let exec = ev(10, "syscall_entry_execve", vec![]);
        let exec_exit = ev(10, "syscall_exit_execve", vec![("ret", i(0))]);
        let mut t = FdTable::new(None);
        t.observe(&dump, 10);
        assert_eq!(t.name(10, 0).as_deref(), Some("/dev/null"));
        t.observe(&oa, 10);
        assert_eq!(t.name(10, 3), None, "not open until the call returns");
        t.observe(&ea, 10);
        assert_eq!(t.name(10, 3).as_deref(), Some("/t/fifoA"));
        t.observe(&close, 10);
        t.observe(&close_exit, 10);
        assert_eq!(t.name(10, 3), None);
        t.observe(&ob, 10);
        t.observe(&eb, 10);
        assert_eq!(t.name(10, 3).as_deref(), Some("/t/fifoB"));
        t.observe(&dup, 10);
        t.observe(&dup_exit, 10);
        assert_eq!(t.name(10, 10).as_deref(), Some("/t/fifoB"));
        t.observe(&exec, 10);
        t.observe(&exec_exit, 10);
        assert_eq!((t.name(10, 3), t.name(10, 10).as_deref(), t.name(10, 0).as_deref()), (None, Some("/t/fifoB"), Some("/dev/null")));
    }

    /// A pipe takes the two lowest free numbers; a fork copies the table; an open whose
    /// path the capture missed has no name (never an older file's).
    #[test]
    fn pipes_forks_and_missing_paths() {
        let mut t = FdTable::new(None);
        let dump: Vec<Event> =
            (0..3).map(|fd| ev(0, "lttng_statedump_file_descriptor", vec![("pid", i(5)), ("fd", i(fd)), ("filename", s("/dev/tty"))])).collect();
        for d in &dump {
            t.observe(d, 5);
        }
        let (p, pe) = (ev(5, "syscall_entry_pipe2", vec![("fildes", i(0x1000)), ("flags", i(0))]), ev(5, "syscall_exit_pipe2", vec![("ret", i(0))]));
        t.observe(&p, 5);
        t.observe(&pe, 5);
        assert_eq!((t.name(5, 3).as_deref(), t.name(5, 4).as_deref()), (Some("pipe"), Some("pipe")));
        let fork = ev(5, "sched_process_fork", vec![("parent_pid", i(5)), ("child_pid", i(6))]);
        t.observe(&fork, 5);
        assert_eq!(t.name(6, 4).as_deref(), Some("pipe"));
        let o = ev(6, "syscall_entry_openat", vec![("dfd", i(-100)), ("filename", s("(missing)")), ("filename_status", i(4)), ("flags", i(0))]);
        let oe = ev(6, "syscall_exit_openat", vec![("ret", i(4))]);
        t.observe(&o, 6);
        t.observe(&oe, 6);
        assert_eq!(t.name(6, 4), None);
        assert_eq!(t.name(5, 4).as_deref(), Some("pipe"), "the parent's own table is apart");
    }
}
