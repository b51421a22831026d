//! A system call as strace writes it, from its `syscall_entry` event (LTTng's layout, after
//! [`super::layout::normalize`]) and the descriptor table of its time ([`super::fdtable`]):
//!
//! ```text
//! openat(AT_FDCWD, "/tmp/fifoA", O_RDONLY|O_CLOEXEC)
//! read(3</tmp/fifoA>, 0x7ffc8a9e0f37, 1)
//! execve("/bin/sh", ["sh", "-c", "exec 3<fifoA"], 0x7ffd5e1c3a08)
//! connect(3<socket:[AF_UNIX]>, {sa_family=AF_UNIX, sun_path="/run/s"}, 110)
//! openat(AT_FDCWD, 0x10 (fault), O_RDONLY)
//! ```
//!
//! Strings come from the capture's fields (`filename`, with `filename_status`: `ok`,
//! `cut` (shown with `...` after it), `fault` (the pointer, then `(fault)`: the memory was
//! not readable), `null` (`NULL`), `missing` (the pointer alone: not captured)); a trace
//! recorded by lttng-modules has the string alone. Descriptors are `N<what it held>`
//! when the table knows; `open` flags are decoded (`O_WRONLY|O_CREAT|O_TRUNC`, the mode
//! in octal after them when a file may be created), `AT_FDCWD` named; other numbers are
//! decimal, or hexadecimal past 2^31 (pointers). The result is [`result_text`].

use std::fmt::Write as _;

use ust_ctf::reader::Value;

use super::event::int_value;
use super::fdtable::FdTable;
use super::load::{Event, Name};

/// Argument names that hold a descriptor (tracefs' and lttng-modules' names).
const FD_ARGS: &[&str] = &["fd", "fildes", "oldfd", "newfd", "ufd", "epfd", "out_fd", "in_fd", "fd_in", "fd_out", "dfd", "olddfd", "newdfd", "fdin", "fdout"];
/// The sockaddr fields after a call's arguments ([`ust_kernel::lttng::entry_fields`]).
const SOCKADDR_TAIL: [&str; 5] = ["family", "dport", "v4addr", "v6addr", "sun_path"];
/// `AT_FDCWD`.
const AT_FDCWD: i64 = -100;

/// `open(2)` flags after the access mode, x86-64 values (`O_SYNC` includes `O_DSYNC`,
/// `O_TMPFILE` includes `O_DIRECTORY`: the longer first).
const OPEN_FLAGS: &[(i64, &str)] = &[
    (0o20200000, "O_TMPFILE"),
    (0o4010000, "O_SYNC"),
    (0o100, "O_CREAT"),
    (0o200, "O_EXCL"),
    (0o400, "O_NOCTTY"),
    (0o1000, "O_TRUNC"),
    (0o2000, "O_APPEND"),
    (0o4000, "O_NONBLOCK"),
    (0o10000, "O_DSYNC"),
    (0o20000, "O_ASYNC"),
    (0o40000, "O_DIRECT"),
    (0o100000, "O_LARGEFILE"),
    (0o200000, "O_DIRECTORY"),
    (0o400000, "O_NOFOLLOW"),
    (0o1000000, "O_NOATIME"),
    (0o2000000, "O_CLOEXEC"),
    (0o10000000, "O_PATH"),
];

/// `open(2)` flags as strace writes them: `O_RDONLY|O_CLOEXEC` (unknown bits in hex last).
pub fn open_flags(flags: i64) -> String {
    let mut parts = vec![match flags & 3 {
        0 => "O_RDONLY".to_string(),
        1 => "O_WRONLY".to_string(),
        2 => "O_RDWR".to_string(),
        _ => "O_ACCMODE".to_string(),
    }];
    let mut rest = flags & !3;
    for &(bit, name) in OPEN_FLAGS {
        if rest & bit == bit {
            parts.push(name.into());
            rest &= !bit;
        }
    }
    if rest != 0 {
        parts.push(format!("{rest:#x}"));
    }
    parts.join("|")
}

/// The C library's text of errno `e` (`No such file or directory`), without Rust's
/// ` (os error N)`.
pub fn strerror(e: i64) -> String {
    let t = std::io::Error::from_raw_os_error(e as i32).to_string();
    t.rsplit_once(" (os error").map_or(t.clone(), |(a, _)| a.to_string())
}

/// A call's result as strace writes it: `3`, or `-1 ENOENT (No such file or directory)`.
pub fn result_text(ret: i64) -> String {
    match super::errno::error_of(ret) {
        Some(e) => format!("-1 {} ({})", super::errno::errno_name(e), strerror(e)),
        None => ret.to_string(),
    }
}

/// What the trace's metadata says of its argument capture, when the call texts lack
/// something (ust's kernel traces: `env.args_capture`, [`ust_kernel::arg_capture`]): the
/// capture was off, and why; or some calls' copies were lost.
pub fn capture_note(env: &std::collections::BTreeMap<String, String>) -> Option<String> {
    let n = |k: &str| env.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    match env.get("args_capture").map(String::as_str) {
        Some(ust_kernel::arg_capture::ENV_OFF) => Some(format!(
            "system-call arguments are pointers only (no paths, argv or socket addresses): {}",
            env.get("args_capture_note").map_or("the capture was off", String::as_str)
        )),
        Some(_) if n("args_lost") + n("args_unmatched") > 0 => Some(format!(
            "system-call arguments: the copies of {} call(s) were lost (BPF ring buffer full) and {} had no system-call record to join; those calls show their pointers",
            n("args_lost"),
            n("args_unmatched")
        )),
        _ => None,
    }
}

/// [`capture_note`] of the kernel trace under `output` (a `ust trace` output directory),
/// for `ust trace` to print when it ends; `None` without such a trace or note.
pub fn trace_capture_note(output: &std::path::Path) -> Option<String> {
    let set = crate::traces::TraceSet::open(&output.join(ust_kernel::KERNEL_DIR)).ok()?;
    set.members.iter().find(|m| m.origin.env.contains_key("args_capture")).and_then(|m| capture_note(&m.origin.env))
}

/// `s` in double quotes with C escapes.
fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            '\t' => q.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(q, "\\x{:02x}", u32::from(c));
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// A number as strace shows one it does not decode: decimal, hexadecimal past 2^31.
fn number(v: i64) -> String {
    if (-(1 << 31)..1 << 31).contains(&v) {
        v.to_string()
    } else {
        format!("{:#x}", v as u64)
    }
}

/// Where a call's descriptors get their names: the table as it is now ([`FdTable`]), or
/// what it said of them at an earlier time ([`HeldFds`]).
pub trait FdNames {
    /// What descriptor `fd` of process `pid` holds; `None` when the trace does not tell.
    fn name(&mut self, pid: i32, fd: i64) -> Option<String>;
}

impl FdNames for FdTable<'_> {
    fn name(&mut self, pid: i32, fd: i64) -> Option<String> {
        FdTable::name(self, pid, fd)
    }
}

/// What the descriptors a call names held at one time, kept to write the call later
/// ([`held_fds`], then [`render`] with it): the report writes a blocked task's call only
/// for the waits it shows, after the pass that found them, and the table has moved on by
/// then. Empty (no allocation) for a call without descriptors.
#[derive(Clone, Debug, Default)]
pub struct HeldFds(Vec<(i64, Option<String>)>);

impl FdNames for &HeldFds {
    fn name(&mut self, _pid: i32, fd: i64) -> Option<String> {
        self.0.iter().find(|(f, _)| *f == fd).and_then(|(_, n)| n.clone())
    }
}

/// The payload of a normalized entry event whose arguments are named (from `payload_at`
/// to where normalize's own fields begin); `None` for ust's earliest layout.
fn named_payload(entry: &Event) -> Option<&[(Name, Value)]> {
    let at = usize::try_from(entry.int(super::layout::PAYLOAD_AT)?).ok()?;
    let end = entry.fields.iter().position(|(n, _)| n == super::layout::PAYLOAD_AT || n == "args").unwrap_or(entry.fields.len());
    Some(entry.fields.get(at..end).unwrap_or_default())
}

/// What `fds` says now of every descriptor argument of entry event `entry` (process `pid`):
/// all that [`render`] asks of it.
pub fn held_fds(entry: &Event, pid: i32, fds: &mut FdTable<'_>) -> HeldFds {
    let mut held = Vec::new();
    for (n, v) in named_payload(entry).unwrap_or_default() {
        if let Some(fd) = int_value(v).and_then(|x| descriptor(n, x)) {
            held.push((fd, fds.name(pid, fd)));
        }
    }
    HeldFds(held)
}

/// The descriptor an integer argument named `n` holding `x` names ([`FD_ARGS`]; the
/// number as the kernel reads it, an `int`); `None` for another argument and for
/// `AT_FDCWD` in a directory descriptor's place.
fn descriptor(n: &str, x: i64) -> Option<i64> {
    (FD_ARGS.contains(&n) && !(x == AT_FDCWD && n.contains("dfd"))).then(|| i64::from(x as i32))
}

/// The call of entry event `entry` (of process `pid`), its descriptors named by `fds`: a
/// table as it is at the entry's time (feed it up to the entry first), or what
/// [`held_fds`] kept of it then.
pub fn render(entry: &Event, pid: i32, fds: &mut dyn FdNames) -> String {
    let name = entry.text("name").unwrap_or_default();
    let args: Vec<String> = match named_payload(entry) {
        Some(payload) => named_args(&name, payload, pid, fds),
        // ust's earliest layout: the numbers alone.
        None => match entry.fields.iter().find(|(n, _)| n == "args") {
            Some((_, Value::List(l))) => l.iter().filter_map(int_value).map(number).collect(),
            _ => Vec::new(),
        },
    };
    format!("{name}({})", args.join(", "))
}

fn named_args(call: &str, payload: &[(Name, Value)], pid: i32, fds: &mut dyn FdNames) -> Vec<String> {
    let get = |n: &str| payload.iter().find(|(m, _)| m == n).map(|(_, v)| v);
    let has = |n: &str| get(n).is_some();
    // The field recorded beside argument `n` (`filename_status` beside `filename`), found
    // without making its name.
    let beside = |n: &str, suffix: &str| payload.iter().find(|(m, _)| m.strip_suffix(suffix) == Some(n)).map(|(_, v)| v);
    let captured = payload.iter().any(|(n, _)| n.ends_with("_status"));
    let flags = get("flags").and_then(int_value).unwrap_or(0);
    let opens = matches!(call, "open" | "openat" | "creat");
    let mut out = Vec::new();
    for (n, v) in payload {
        if captured && (n.ends_with("_status") || n.ends_with("_ptr") || n.ends_with("_text") || SOCKADDR_TAIL.contains(&n.as_str())) {
            continue;
        }
        // The text of an argument recorded beside it (tier 1's ptrace `argv_text`) is shown
        // in its place, below.
        if n.strip_suffix("_text").is_some_and(has) {
            continue;
        }
        let status = beside(n, "_status").and_then(int_value);
        let text_beside = beside(n, "_text");
        // An argument read with ptrace (no status: it was read whole), its text beside it.
        if let (None, Some(Value::Str(t))) = (status, text_beside) {
            out.push(t.clone());
            continue;
        }
        let ptr = || beside(n, "_ptr").or(Some(v)).and_then(int_value).map_or_else(|| "?".into(), |p| format!("{:#x}", p as u64));
        let text = match (v, status) {
            // A captured string.
            (Value::Str(s), Some(0)) => quote(s),
            (Value::Str(s), Some(1)) => format!("{}...", quote(s)),
            (Value::Str(_), Some(2)) => format!("{} (fault)", ptr()),
            (Value::Str(_), Some(3)) => "NULL".into(),
            (Value::Str(_), Some(_)) => ptr(),
            (Value::Str(s), None) => quote(s),
            // An argv: its text beside it.
            (_, Some(st)) if text_beside.is_some() => match (st, text_beside) {
                (0 | 1, Some(Value::Str(t))) => t.clone(),
                (2, _) => format!("{} (fault)", ptr()),
                (3, _) => "NULL".into(),
                _ => ptr(),
            },
            // A sockaddr: the fields after the arguments.
            (_, Some(st)) => sockaddr(st, &get, ptr),

            _ => {
                let Some(x) = int_value(v) else {
                    out.push("?".into());
                    continue;
                };
                if FD_ARGS.contains(&n.as_str()) {
                    match descriptor(n, x) {
                        None => "AT_FDCWD".into(),
                        Some(fd) => match fds.name(pid, fd) {
                            Some(held) => format!("{fd}<{held}>"),
                            None => fd.to_string(),
                        },
                    }
                } else if opens && n == "flags" {
                    open_flags(x)
                } else if opens && n == "mode" {
                    if flags & 0o20200100 == 0 {
                        continue;
                    }
                    format!("0{x:o}")
                } else if matches!(call, "mkdir" | "mkdirat" | "chmod" | "fchmodat" | "fchmod") && n == "mode" {
                    format!("0{x:o}")
                } else {
                    number(x)
                }
            }
        };
        out.push(text);
    }
    out
}

/// A captured sockaddr of status `st` as strace writes it.
fn sockaddr<'v>(st: i64, get: &dyn Fn(&str) -> Option<&'v Value>, ptr: impl Fn() -> String) -> String {
    match st {
        2 => return format!("{} (fault)", ptr()),
        3 => return "NULL".into(),
        0 | 1 => {}
        _ => return ptr(),
    }
    let fam = get("family").and_then(int_value).unwrap_or(0);
    let bytes = |n: &str| match get(n) {
        Some(Value::List(l)) => l.iter().filter_map(int_value).collect::<Vec<i64>>(),
        _ => Vec::new(),
    };
    let port = get("dport").and_then(int_value).map(|p| u16::from_be(p as u16));
    match fam {
        1 => format!(
            "{{sa_family=AF_UNIX, sun_path={}}}",
            quote(&get("sun_path").and_then(|v| if let Value::Str(s) = v { Some(s.clone()) } else { None }).unwrap_or_default())
        ),
        2 => {
            let a: Vec<String> = bytes("v4addr").iter().map(|b| b.to_string()).collect();
            format!("{{sa_family=AF_INET, sin_port=htons({}), sin_addr=inet_addr(\"{}\")}}", port.unwrap_or(0), a.join("."))
        }
        10 => {
            let a: Vec<String> = bytes("v6addr").iter().map(|w| format!("{:x}", u16::from_be(*w as u16))).collect();
            format!("{{sa_family=AF_INET6, sin6_port=htons({}), sin6_addr={}}}", port.unwrap_or(0), a.join(":"))
        }
        f => format!("{{sa_family={f}, ...}}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::load::Domain;

    fn entry(call: &str, payload: Vec<(&str, Value)>) -> Event {
        let mut fields: Vec<(Name, Value)> = vec![("tid".into(), Value::Signed(7))];
        fields.extend(payload.into_iter().map(|(n, v)| (n.into(), v)));
        fields.push((super::super::layout::PAYLOAD_AT.into(), Value::Unsigned(1)));
        fields.push(("name".into(), Value::Str(call.into())));
        Event { ts: 0, cpu: 0, name: "syscall_entry".into(), tid: 7, pid: -1, domain: Domain::Kernel, fields }
    }

    fn s(v: &str) -> Value {
        Value::Str(v.into())
    }

    #[test]
    fn calls_read_as_strace_writes_them() {
        let mut fds = FdTable::new(None);
        let o = entry(
            "openat",
            vec![
                ("dfd", Value::Signed(-100)),
                ("filename", s("/tmp/a\"b")),
                ("filename_ptr", Value::Unsigned(0x1000)),
                ("filename_status", Value::Enum(Some("ok".into()), 0)),
                ("flags", Value::Signed(0o2000000)),
                ("mode", Value::Unsigned(0)),
            ],
        );
        assert_eq!(render(&o, 7, &mut fds), r#"openat(AT_FDCWD, "/tmp/a\"b", O_RDONLY|O_CLOEXEC)"#);
        let f = entry(
            "openat",
            vec![
                ("dfd", Value::Signed(-100)),
                ("filename", s("(fault)")),
                ("filename_ptr", Value::Unsigned(0x10)),
                ("filename_status", Value::Enum(Some("fault".into()), 2)),
                ("flags", Value::Signed(0o1101)),
                ("mode", Value::Unsigned(0o644)),
            ],
        );
        assert_eq!(render(&f, 7, &mut fds), "openat(AT_FDCWD, 0x10 (fault), O_WRONLY|O_CREAT|O_TRUNC, 0644)");
        let e = entry(
            "execve",
            vec![
                ("filename", s("/bin/sh")),
                ("filename_ptr", Value::Unsigned(0x2000)),
                ("filename_status", Value::Enum(None, 0)),
                ("argv", Value::Unsigned(0x3000)),
                ("argv_text", s(r#"["sh", "-c", "true"]"#)),
                ("argv_status", Value::Enum(None, 0)),
                ("envp", Value::Unsigned(0x7ffd_0000_0000)),
            ],
        );
        assert_eq!(render(&e, 7, &mut fds), r#"execve("/bin/sh", ["sh", "-c", "true"], 0x7ffd00000000)"#);
        // Tier 1's ptrace layout: the strings read whole (no status), argv's text after envp.
        let p = entry(
            "execve",
            vec![
                ("filename", s("/usr/bin/sh")),
                ("argv", Value::Unsigned(0x3000)),
                ("envp", Value::Unsigned(0x7ffd_0000_0000)),
                ("argv_text", s(r#"["sh", "-c", "true"]"#)),
            ],
        );
        assert_eq!(render(&p, 7, &mut fds), r#"execve("/usr/bin/sh", ["sh", "-c", "true"], 0x7ffd00000000)"#);
        let c = entry(
            "connect",
            vec![
                ("fd", Value::Signed(3)),
                ("uservaddr", Value::Unsigned(0x4000)),
                ("addrlen", Value::Signed(16)),
                ("family", Value::Unsigned(2)),
                ("dport", Value::Unsigned(u64::from(8080u16.to_be()))),
                ("v4addr", Value::List(vec![Value::Unsigned(127), Value::Unsigned(0), Value::Unsigned(0), Value::Unsigned(1)])),
                ("v6addr", Value::List(vec![])),
                ("sun_path", s("")),
                ("uservaddr_status", Value::Enum(None, 0)),
            ],
        );
        assert_eq!(render(&c, 7, &mut fds), r#"connect(3, {sa_family=AF_INET, sin_port=htons(8080), sin_addr=inet_addr("127.0.0.1")}, 16)"#);
        // Not captured: the pointer.
        let m = entry(
            "mkdir",
            vec![
                ("pathname", s("(missing)")),
                ("pathname_ptr", Value::Unsigned(0x5000)),
                ("pathname_status", Value::Enum(None, 4)),
                ("mode", Value::Unsigned(0o755)),
            ],
        );
        assert_eq!(render(&m, 7, &mut fds), "mkdir(0x5000, 0755)");
    }

    #[test]
    fn results_and_flags() {
        assert_eq!(result_text(-2), "-1 ENOENT (No such file or directory)");
        assert_eq!(result_text(3), "3");
        assert_eq!(open_flags(0o4302), "O_RDWR|O_CREAT|O_EXCL|O_NONBLOCK");
        assert_eq!(open_flags(0o20200000 | 2), "O_RDWR|O_TMPFILE");
        assert_eq!(open_flags(0o40000000), "O_RDONLY|0x800000");
    }
}
