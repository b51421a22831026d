//! The CTF event classes of the system-call recorder, and how each field of an event is
//! filled from a stop: the kernel trace's LTTng layout ([`crate::lttng`]), the same event
//! names and fields as the tracefs recording ([`crate::ctf::EventTable`]'s `raw_syscalls`
//! classes), so `ust report` counts both alike.
//!
//! | event | fields |
//! |---|---|
//! | `syscall_entry_<call>` | the call's arguments ([`super::args`]); a user string of lttng-modules' ([`super::args::USER_STRINGS`]) as a CTF string, read from the tracee ([`super::memory`]); `execve`/`execveat` then `argv_text` (the argument strings as strace prints them); `connect`/`bind` then lttng-modules' `connect` decoding: `family`, `dport` (`bind`: `sport`), `v4addr`, `v6addr`, and `unix_path` |
//! | `syscall_exit_<call>` | `ret` |
//! | `syscall_entry_unknown` | `id`, `args[6]`: a call the table does not name (also every call of a 32-bit task: `id` is then its i386 number plus [`FOREIGN_ARCH`]) |
//! | `syscall_exit_unknown` | `id`, `ret` |
//! | `sched_process_exec` | `filename`, `tid`, `old_tid`: an `execve` succeeded; `old_tid` is the thread that called it, `tid` the process's id it continues under (lttng-modules' and tracefs' event) |
//! | `signal_deliver` | `sig`, `errno`, `code` (lttng-modules' event, without the handler and flags ptrace cannot see) |
//! | `ptrace_detach` | `tid`, `tracer`, `reason`: task `tid` left the syscall view (see [`super`]) |
//!
//! A trace of this recorder alone (no perf_event_open recording beside it to say which
//! task forked which) also has `sched_process_fork` ([`process_classes`]: perf's and
//! lttng-modules' fields), written at each fork, vfork and clone event.
//!
//! `<call>` is the `asm/unistd_64.h` name ([`crate::syscalls`]); integer arguments have the
//! size and signedness of their C type ([`crate::lttng::arg_type`], pointers in base 16).

use super::memory;
use crate::ctf::{CtfField, CtfType, EventTable, Given, Source};
use crate::lttng::SyscallArgs;

/// `sched_process_fork`: a new task (only in a trace of this recorder alone).
pub const SCHED_PROCESS_FORK: &str = "sched_process_fork";
/// `sched_process_exec`: an exec, with the thread id change of a multithreaded one.
pub const SCHED_PROCESS_EXEC: &str = "sched_process_exec";
/// `signal_deliver`: a signal-delivery stop.
pub const SIGNAL_DELIVER: &str = "signal_deliver";
/// `ptrace_detach`: a task left the syscall view.
pub const PTRACE_DETACH: &str = "ptrace_detach";
/// Added to the `id` of a call of a task running another architecture than the native one
/// (an i386 program on x86-64), whose numbers are not those of the event names.
pub const FOREIGN_ARCH: i64 = 1 << 32;

/// The `asm/unistd_64.h` name of native call `nr`, if the table has one.
pub fn call_name(nr: u64) -> Option<&'static str> {
    if !cfg!(target_arch = "x86_64") {
        return None;
    }
    usize::try_from(nr).ok().and_then(|i| crate::syscalls::SYSCALLS_X86_64.get(i)).copied().filter(|n| !n.is_empty())
}

/// How one field of a `syscall_entry_<call>` event is filled.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Fill {
    /// Argument register `slot`, as an integer.
    Int(usize),
    /// The user string argument register `slot` points to.
    Str(usize),
    /// The `argv` array argument register `slot` points to, rendered.
    Argv(usize),
    /// Part of the socket address of registers `addr` and `len`.
    Sock(SockPart, usize, usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SockPart {
    Family,
    Port,
    V4,
    V6,
    UnixPath,
}

fn field(name: &str, ty: CtfType) -> CtfField {
    CtfField { name: name.into(), ty, source: Source::Given }
}

/// The entry fields of `call` and how each is filled.
fn entry_spec(call: &str, args: &SyscallArgs) -> Vec<(CtfField, Fill)> {
    let mut out = Vec::new();
    let list = crate::lttng::call_args(args, call).map(Vec::as_slice).unwrap_or_default();
    for (slot, (name, c_type)) in list.iter().take(6).enumerate() {
        if super::args::is_user_string(call, name) {
            out.push((field(name, CtfType::String), Fill::Str(slot)));
        } else {
            out.push((field(name, crate::lttng::arg_type(c_type)), Fill::Int(slot)));
        }
    }
    let slot_of = |n: &str| list.iter().position(|(a, _)| a == n);
    match call {
        "execve" | "execveat" => {
            if let Some(s) = slot_of("argv") {
                out.push((field("argv_text", CtfType::String), Fill::Argv(s)));
            }
        }
        "connect" | "bind" => {
            if let (Some(a), Some(l)) = (slot_of(if call == "connect" { "uservaddr" } else { "umyaddr" }), slot_of("addrlen")) {
                let port = if call == "connect" { "dport" } else { "sport" };
                out.push((field("family", CtfType::Int { bytes: 2, signed: false, hex: false }), Fill::Sock(SockPart::Family, a, l)));
                out.push((field(port, CtfType::Int { bytes: 2, signed: false, hex: false }), Fill::Sock(SockPart::Port, a, l)));
                out.push((field("v4addr", CtfType::Seq(Box::new(CtfType::Int { bytes: 1, signed: false, hex: false }))), Fill::Sock(SockPart::V4, a, l)));
                out.push((field("v6addr", CtfType::Seq(Box::new(CtfType::NetU16))), Fill::Sock(SockPart::V6, a, l)));
                out.push((field("unix_path", CtfType::String), Fill::Sock(SockPart::UnixPath, a, l)));
            }
        }
        _ => {}
    }
    out
}

fn i64t() -> CtfType {
    CtfType::Int { bytes: 8, signed: true, hex: false }
}

/// The classes of the recorder, `(name, fields)`, in the order their ids are given
/// ([`EventTable::given`]): per named call its entry and exit, then the unknown ones,
/// [`SCHED_PROCESS_EXEC`], [`SIGNAL_DELIVER`] and [`PTRACE_DETACH`]. `args`:
/// [`super::args::syscall_args`].
pub fn classes(args: &SyscallArgs) -> Vec<(String, Vec<CtfField>)> {
    let i32t = || CtfType::Int { bytes: 4, signed: true, hex: false };
    let mut out = Vec::new();
    for call in crate::syscalls::SYSCALLS_X86_64.iter().filter(|c| !c.is_empty()) {
        out.push((format!("syscall_entry_{call}"), entry_spec(call, args).into_iter().map(|(f, _)| f).collect()));
        out.push((format!("syscall_exit_{call}"), vec![field("ret", i64t())]));
    }
    out.push(("syscall_entry_unknown".into(), vec![field("id", i64t()), field("args", CtfType::IntArray { bytes: 8, signed: false, n: 6 })]));
    out.push(("syscall_exit_unknown".into(), vec![field("id", i64t()), field("ret", i64t())]));
    out.push((SCHED_PROCESS_EXEC.into(), vec![field("filename", CtfType::String), field("tid", i32t()), field("old_tid", i32t())]));
    out.push((SIGNAL_DELIVER.into(), vec![field("sig", i32t()), field("errno", i32t()), field("code", i32t())]));
    out.push((PTRACE_DETACH.into(), vec![field("tid", i32t()), field("tracer", i32t()), field("reason", CtfType::String)]));
    out
}

/// The classes a trace of this recorder alone adds to [`classes`]: [`SCHED_PROCESS_FORK`]
/// with the fields the perf_event_open recorder writes (lttng-modules' `sched_process_fork`:
/// the thread ids, then the thread-group ids as `parent_pid`, `child_pid`).
pub fn process_classes() -> Vec<(String, Vec<CtfField>)> {
    let i32t = || CtfType::Int { bytes: 4, signed: true, hex: false };
    let names = ["parent_comm", "parent_tid", "child_comm", "child_tid", "parent_pid", "child_pid"];
    vec![(SCHED_PROCESS_FORK.into(), names.iter().map(|n| field(n, if n.ends_with("comm") { CtfType::Text(16) } else { i32t() })).collect())]
}

/// A value of one field, owned (the strings read from the tracee).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// An integer.
    Int(i64),
    /// A string's bytes.
    Bytes(Vec<u8>),
    /// Sequence or array elements.
    U64s(Vec<u64>),
}

impl Value {
    /// The value as the CTF writer takes it.
    pub fn given(&self) -> Given<'_> {
        match self {
            Value::Int(x) => Given::Int(*x),
            Value::Bytes(b) => Given::Bytes(b),
            Value::U64s(v) => Given::U64s(v),
        }
    }
}

/// The recorder's classes in one [`EventTable`], found by call number.
#[derive(Clone, Debug)]
pub struct Calls {
    /// Per native call number: entry class, exit class, how the entry's fields are filled.
    by_nr: Vec<Option<(usize, usize, Vec<Fill>)>>,
    unknown: (usize, usize),
    /// [`SCHED_PROCESS_EXEC`]'s class.
    pub exec: usize,
    /// [`SIGNAL_DELIVER`]'s class.
    pub signal: usize,
    /// [`PTRACE_DETACH`]'s class.
    pub detach: usize,
    /// [`SCHED_PROCESS_FORK`]'s class, when this recorder writes the forks.
    pub fork: Option<usize>,
}

/// The table lacks a class of [`classes`], or has one with other fields.
#[derive(Debug, thiserror::Error)]
#[error("the kernel trace's event table has no class {0} as the system-call recorder writes it (build it with ptrace::classes)")]
pub struct MissingClass(pub String);

impl Calls {
    /// Finds the classes of [`classes`]`(args)` in `table` (which may hold others too: the
    /// perf_event_open recorder's), and with `forks` those of [`process_classes`].
    ///
    /// # Errors
    /// [`MissingClass`] when one is absent or has other field names.
    pub fn new(table: &EventTable, args: &SyscallArgs, forks: bool) -> Result<Calls, MissingClass> {
        let find = |name: &str, fields: &[CtfField]| -> Result<usize, MissingClass> {
            let i = table.index_of(name).ok_or_else(|| MissingClass(name.into()))?;
            let have: Vec<&str> = table.events[i].fields.iter().map(|f| f.name.as_str()).collect();
            let want: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
            if have != want {
                return Err(MissingClass(name.into()));
            }
            Ok(i)
        };
        let mut all = classes(args);
        all.extend(process_classes());
        let fields_of = |name: &str| all.iter().find(|(n, _)| n == name).map(|(_, f)| f.as_slice()).unwrap_or_default();
        let mut by_nr = Vec::new();
        for call in crate::syscalls::SYSCALLS_X86_64 {
            if call.is_empty() {
                by_nr.push(None);
                continue;
            }
            let (entry, exit) = (format!("syscall_entry_{call}"), format!("syscall_exit_{call}"));
            let fills = entry_spec(call, args).into_iter().map(|(_, f)| f).collect();
            by_nr.push(Some((find(&entry, fields_of(&entry))?, find(&exit, fields_of(&exit))?, fills)));
        }
        let unknown = (find("syscall_entry_unknown", fields_of("syscall_entry_unknown"))?, find("syscall_exit_unknown", fields_of("syscall_exit_unknown"))?);
        Ok(Calls {
            by_nr,
            unknown,
            exec: find(SCHED_PROCESS_EXEC, fields_of(SCHED_PROCESS_EXEC))?,
            signal: find(SIGNAL_DELIVER, fields_of(SIGNAL_DELIVER))?,
            detach: find(PTRACE_DETACH, fields_of(PTRACE_DETACH))?,
            fork: if forks { Some(find(SCHED_PROCESS_FORK, fields_of(SCHED_PROCESS_FORK))?) } else { None },
        })
    }

    fn named(&self, nr: u64, arch: u32) -> Option<&(usize, usize, Vec<Fill>)> {
        if arch != super::sys::NATIVE_ARCH {
            return None;
        }
        call_name(nr)?;
        self.by_nr.get(usize::try_from(nr).ok()?)?.as_ref()
    }

    /// The `id` of an unknown call (see [`FOREIGN_ARCH`]).
    fn id(nr: u64, arch: u32) -> i64 {
        nr as i64 + if arch == super::sys::NATIVE_ARCH { 0 } else { FOREIGN_ARCH }
    }

    /// The entry event of call `nr` of `arch` with `args`, made by task `tid` (whose memory
    /// the strings are read from): its class and field values.
    pub fn entry(&self, tid: i32, nr: u64, args: &[u64; 6], arch: u32) -> (usize, Vec<Value>) {
        let Some((class, _, fills)) = self.named(nr, arch) else {
            return (self.unknown.0, vec![Value::Int(Self::id(nr, arch)), Value::U64s(args.to_vec())]);
        };
        let mut sock = None;
        let values = fills
            .iter()
            .map(|f| match *f {
                Fill::Int(s) => Value::Int(args[s] as i64),
                Fill::Str(s) => Value::Bytes(memory::string(tid, args[s])),
                Fill::Argv(s) => Value::Bytes(memory::argv(tid, args[s])),
                Fill::Sock(part, a, l) => {
                    let sa = sock.get_or_insert_with(|| memory::sockaddr(tid, args[a], args[l]));
                    match part {
                        SockPart::Family => Value::Int(sa.family.into()),
                        SockPart::Port => Value::Int(sa.port.into()),
                        SockPart::V4 => Value::U64s(sa.v4.clone()),
                        SockPart::V6 => Value::U64s(sa.v6.clone()),
                        SockPart::UnixPath => Value::Bytes(sa.unix_path.clone()),
                    }
                }
            })
            .collect();
        (*class, values)
    }

    /// The exit event of call `nr` of `arch` returning `ret`: its class and field values.
    pub fn exit(&self, nr: u64, arch: u32, ret: i64) -> (usize, Vec<Value>) {
        match self.named(nr, arch) {
            Some((_, class, _)) => (*class, vec![Value::Int(ret)]),
            None => (self.unknown.1, vec![Value::Int(Self::id(nr, arch)), Value::Int(ret)]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_have_lttng_names_and_strings() {
        let args = super::super::args::builtin();
        let all = classes(&args);
        let get = |n: &str| all.iter().find(|(x, _)| x == n).unwrap_or_else(|| panic!("{n}")).1.clone();
        let openat: Vec<(String, CtfType)> = get("syscall_entry_openat").into_iter().map(|f| (f.name, f.ty)).collect();
        assert_eq!(openat[1], ("filename".into(), CtfType::String));
        assert_eq!(openat[0], ("dfd".into(), CtfType::Int { bytes: 4, signed: true, hex: false }));
        assert_eq!(get("syscall_entry_stat")[0].ty, CtfType::String, "found under newstat");
        let execve: Vec<String> = get("syscall_entry_execve").into_iter().map(|f| f.name).collect();
        assert_eq!(execve, ["filename", "argv", "envp", "argv_text"]);
        let connect: Vec<String> = get("syscall_entry_connect").into_iter().map(|f| f.name).collect();
        assert_eq!(connect, ["fd", "uservaddr", "addrlen", "family", "dport", "v4addr", "v6addr", "unix_path"]);
        assert_eq!(get("syscall_exit_read")[0].name, "ret");
        let names: std::collections::HashSet<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names.len(), all.len(), "no name twice");
    }

    #[test]
    fn calls_are_found_by_number_in_a_merged_table() {
        let args = super::super::args::builtin();
        let mut merged = vec![("sched_switch".to_string(), vec![field("prev_tid", CtfType::Int { bytes: 4, signed: true, hex: false })])];
        merged.extend(classes(&args));
        let table = EventTable::given(merged);
        let calls = Calls::new(&table, &args, false).unwrap();
        assert!(calls.fork.is_none());
        assert!(Calls::new(&table, &args, true).is_err(), "no sched_process_fork in that table");
        let path = b"/nonexistent\0";
        let (class, values) =
            calls.entry(super::super::sys::gettid(), 257, &[-100i64 as u64, path.as_ptr() as u64, 0, 0, 0, 0], super::super::sys::NATIVE_ARCH);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(table.events[class].name, "syscall_entry_openat");
            assert_eq!(values, [Value::Int(-100), Value::Bytes(b"/nonexistent".to_vec()), Value::Int(0), Value::Int(0)]);
            let (exit, v) = calls.exit(257, super::super::sys::NATIVE_ARCH, -2);
            assert_eq!((table.events[exit].name.as_str(), v), ("syscall_exit_openat", vec![Value::Int(-2)]));
        }
        let (class, values) = calls.entry(1, 5, &[1, 2, 3, 4, 5, 6], 0x4000_0003);
        assert_eq!(table.events[class].name, "syscall_entry_unknown");
        assert_eq!(values[0], Value::Int(5 + FOREIGN_ARCH));
        assert!(Calls::new(&EventTable::given(Vec::new()), &args, false).is_err());
    }
}
