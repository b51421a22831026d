//! The captured arguments of one system call ([`CallArgs`]: the ring-buffer records of one
//! `sys_enter` hit, [`super::bpf`]) and the bytes of the CTF fields that show them
//! ([`ArgPart`]), which [`super::ctf::CpuStream`] writes into `syscall_entry_<name>` and
//! whose types [`super::lttng::entry_fields`] declares.
//!
//! A value that is missing (the call was not captured: another process, the ring buffer
//! was full, capture was off) is written as an empty sequence or 0, and a string as the
//! marker `(missing)`, with the argument's `<name>_status` field saying `missing`; a fault
//! is the string `(fault)` (status `fault`), a NULL pointer `(null)` (status `null`,
//! lttng-modules' text for a NULL kernel string), a cut copy its first 4096 bytes (status
//! `cut`). The markers are not empty strings, which lttng-modules writes for a fault,
//! because babeltrace2 before 2.0.5 (Debian's 2.0.4 among them) shows an empty string
//! field as the value of the same field in an earlier event (babeltrace commit 0022a8781,
//! "clear_string_field(): set first character to 0"): a missing path would read as
//! another call's path. A string that really is empty (`newfstatat(fd, "",
//! AT_EMPTY_PATH)`) is written empty, status `ok`: those babeltrace2 versions show it
//! wrong, the status and the bytes are right.

use crate::bpf::record::{ArgRecord, Kind, Status};

/// Labels of the `<name>_status` enumeration, by value: a record's [`Status`] (0–3), then
/// `missing` (4).
pub const STATUS_LABELS: &[&str] = &["ok", "cut", "fault", "null", "missing"];
/// The `missing` value of `<name>_status`.
pub const STATUS_MISSING: u8 = 4;
/// The string written for an argument of a call that was not captured.
pub const TEXT_MISSING: &str = "(missing)";
/// The string written for an unreadable pointer.
pub const TEXT_FAULT: &str = "(fault)";
/// The string written for a NULL pointer.
pub const TEXT_NULL: &str = "(null)";

/// `AF_UNIX`.
const AF_UNIX: u16 = 1;
/// `AF_INET`.
const AF_INET: u16 = 2;
/// `AF_INET6`.
const AF_INET6: u16 = 10;

/// One CTF field made from a captured argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgPart {
    /// The string (CTF `string`), or a marker: [`TEXT_MISSING`], [`TEXT_FAULT`],
    /// [`TEXT_NULL`].
    Text,
    /// How the copy went: an 8-bit enumeration of [`STATUS_LABELS`].
    Status,
    /// Sockaddr `sa_family` (u16), 0 when missing.
    Family,
    /// Sockaddr port, network byte order (u16 big-endian), 0 when not AF_INET/AF_INET6.
    Dport,
    /// IPv4 address: a u32-length sequence of 4 u8 (network order), else empty.
    V4addr,
    /// IPv6 address: a u32-length sequence of 8 big-endian u16, else empty.
    V6addr,
    /// AF_UNIX path (CTF `string`; an abstract name as `@name`), empty for another
    /// family; the marker of a sockaddr that was not read (missing, fault, null).
    SunPath,
    /// `argv` as strace writes it (CTF `string`): [`CallArgs::argv_text`].
    ArgvText,
}

/// The captured arguments of one system call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallArgs {
    /// `CLOCK_MONOTONIC` ns of the `sys_enter` hit.
    pub ktime: u64,
    /// Thread id.
    pub tid: i32,
    /// System call number.
    pub nr: u32,
    /// Its records, in the order written (argument, then argv element).
    pub records: Vec<ArgRecord>,
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend(s.iter().copied().filter(|&c| c != 0));
    out.push(0);
}

impl CallArgs {
    fn first(&self, arg: u8) -> Option<&ArgRecord> {
        self.records.iter().find(|r| r.arg == arg)
    }

    /// The status of argument `arg` (an argv's is `cut` when a string or the array was cut,
    /// else that of its first failing element, else ok).
    pub fn status(&self, arg: u8) -> Option<Status> {
        let mut recs = self.records.iter().filter(|r| r.arg == arg);
        let first = recs.next()?;
        if first.kind != Kind::Argv {
            return Some(first.status);
        }
        Some(std::iter::once(first).chain(recs).map(|r| r.status).find(|s| *s != Status::Ok).unwrap_or(Status::Ok))
    }

    /// Argument `arg`'s string bytes (no NUL), or the marker of a fault or a NULL pointer.
    pub fn text(&self, arg: u8) -> Option<&[u8]> {
        self.first(arg).filter(|r| r.kind == Kind::String).map(|r| match r.status {
            Status::Fault => TEXT_FAULT.as_bytes(),
            Status::Null => TEXT_NULL.as_bytes(),
            Status::Ok | Status::Cut => r.bytes.as_slice(),
        })
    }

    /// Argument `arg`'s argv as strace writes it: `["ls", "-l"]`, C escapes in the
    /// strings (`\"`, `\\`, `\n`, `\xHH` for other control bytes and bytes that are not
    /// UTF-8), a cut string as `"…"...`, `...` after the last element when more were left
    /// out, `(fault)` for an element that could not be read; `(null)` for a NULL array;
    /// `None` when not captured. One string rather than a sequence of strings, which the
    /// project's TSDL reader (`ust report`) does not read.
    pub fn argv_text(&self, arg: u8) -> Option<String> {
        let mut v: Vec<&ArgRecord> = self.records.iter().filter(|r| r.arg == arg && r.kind == Kind::Argv).collect();
        v.sort_by_key(|r| r.elem);
        if v.first()?.status == Status::Null {
            return Some(TEXT_NULL.to_string());
        }
        let parts: Vec<String> = v
            .iter()
            .map(|r| match r.status {
                Status::Cut if r.bytes.is_empty() => "...".to_string(),
                Status::Cut => format!("{}...", quote(&r.bytes)),
                Status::Fault => TEXT_FAULT.to_string(),
                Status::Ok | Status::Null => quote(&r.bytes),
            })
            .collect();
        Some(format!("[{}]", parts.join(", ")))
    }

    /// Argument `arg`'s sockaddr bytes as copied.
    pub fn sockaddr(&self, arg: u8) -> Option<&[u8]> {
        self.first(arg).filter(|r| r.kind == Kind::Sockaddr && matches!(r.status, Status::Ok | Status::Cut)).map(|r| r.bytes.as_slice())
    }
}

/// `b` in double quotes with C escapes.
fn quote(b: &[u8]) -> String {
    let mut s = String::from("\"");
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => s.push_str("\\\""),
                '\\' => s.push_str("\\\\"),
                '\n' => s.push_str("\\n"),
                '\t' => s.push_str("\\t"),
                c if c.is_control() => s.push_str(&format!("\\x{:02x}", u32::from(c))),
                c => s.push(c),
            }
        }
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s.push('"');
    s
}

fn family(sa: &[u8]) -> Option<u16> {
    Some(u16::from_ne_bytes([*sa.first()?, *sa.get(1)?]))
}

/// Appends the CTF bytes of field `part` of argument `arg` (little-endian, packed, as the
/// types [`super::lttng::entry_fields`] declares) from `args` (`None`: missing).
pub fn encode(args: Option<&CallArgs>, arg: u8, part: ArgPart, out: &mut Vec<u8>) {
    let sa = args.and_then(|a| a.sockaddr(arg)).unwrap_or(&[]);
    let fam = family(sa);
    match part {
        ArgPart::Text => put_str(out, args.and_then(|a| a.text(arg)).unwrap_or(TEXT_MISSING.as_bytes())),
        ArgPart::Status => out.push(args.and_then(|a| a.status(arg)).map_or(STATUS_MISSING, |s| s as u8)),
        ArgPart::Family => out.extend_from_slice(&fam.unwrap_or(0).to_le_bytes()),
        ArgPart::Dport => {
            let port = match fam {
                Some(AF_INET | AF_INET6) => sa.get(2..4),
                _ => None,
            };
            out.extend_from_slice(port.unwrap_or(&[0, 0]));
        }
        ArgPart::V4addr => {
            let a = if fam == Some(AF_INET) { sa.get(4..8) } else { None };
            out.extend_from_slice(&(a.map_or(0u32, |a| a.len() as u32)).to_le_bytes());
            out.extend_from_slice(a.unwrap_or(&[]));
        }
        ArgPart::V6addr => {
            let a = if fam == Some(AF_INET6) { sa.get(8..24) } else { None };
            out.extend_from_slice(&(a.map_or(0u32, |a| (a.len() / 2) as u32)).to_le_bytes());
            out.extend_from_slice(a.unwrap_or(&[]));
        }
        ArgPart::SunPath => {
            let not_read = match args.and_then(|a| a.status(arg)) {
                None => Some(TEXT_MISSING),
                Some(Status::Fault) => Some(TEXT_FAULT),
                Some(Status::Null) => Some(TEXT_NULL),
                Some(Status::Ok | Status::Cut) => None,
            };
            if let Some(marker) = not_read {
                put_str(out, marker.as_bytes());
                return;
            }
            let path = if fam == Some(AF_UNIX) { sa.get(2..).unwrap_or(&[]) } else { &[] };
            match path.split_first() {
                // An abstract name: a leading NUL, the rest counted by the length.
                Some((0, rest)) if !rest.is_empty() => {
                    let mut s = b"@".to_vec();
                    s.extend_from_slice(rest);
                    put_str(out, &s);
                }
                _ => put_str(out, &path[..path.iter().position(|&c| c == 0).unwrap_or(path.len())]),
            }
        }
        ArgPart::ArgvText => put_str(out, args.and_then(|a| a.argv_text(arg)).as_deref().unwrap_or(TEXT_MISSING).as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(arg: u8, kind: Kind, status: Status, elem: u8, bytes: &[u8]) -> ArgRecord {
        ArgRecord { ktime: 1, tid: 2, tgid: 2, nr: 42, arg, kind, status, elem, aux: bytes.len() as u32, ptr: 0, bytes: bytes.to_vec() }
    }

    fn enc(a: Option<&CallArgs>, arg: u8, part: ArgPart) -> Vec<u8> {
        let mut v = Vec::new();
        encode(a, arg, part, &mut v);
        v
    }

    #[test]
    fn sockaddrs_decode_as_lttng_does() {
        let mut sin = vec![0u8; 16];
        sin[..2].copy_from_slice(&AF_INET.to_ne_bytes());
        sin[2..4].copy_from_slice(&8080u16.to_be_bytes());
        sin[4..8].copy_from_slice(&[127, 0, 0, 1]);
        let a = CallArgs { records: vec![rec(1, Kind::Sockaddr, Status::Ok, 0, &sin)], ..Default::default() };
        assert_eq!(enc(Some(&a), 1, ArgPart::Family), 2u16.to_le_bytes());
        assert_eq!(enc(Some(&a), 1, ArgPart::Dport), 8080u16.to_be_bytes());
        assert_eq!(enc(Some(&a), 1, ArgPart::V4addr), [4, 0, 0, 0, 127, 0, 0, 1]);
        assert_eq!(enc(Some(&a), 1, ArgPart::V6addr), [0, 0, 0, 0]);
        assert_eq!(enc(Some(&a), 1, ArgPart::SunPath), [0]);
        let mut sun = AF_UNIX.to_ne_bytes().to_vec();
        sun.extend_from_slice(b"/tmp/s\0junk");
        let u = CallArgs { records: vec![rec(1, Kind::Sockaddr, Status::Ok, 0, &sun)], ..Default::default() };
        assert_eq!(enc(Some(&u), 1, ArgPart::SunPath), b"/tmp/s\0");
        let mut abs = AF_UNIX.to_ne_bytes().to_vec();
        abs.extend_from_slice(b"\0name");
        let u = CallArgs { records: vec![rec(1, Kind::Sockaddr, Status::Ok, 0, &abs)], ..Default::default() };
        assert_eq!(enc(Some(&u), 1, ArgPart::SunPath), b"@name\0");
        // A truncated sockaddr decodes what it has and no more.
        let short = CallArgs { records: vec![rec(1, Kind::Sockaddr, Status::Cut, 0, &sin[..5])], ..Default::default() };
        assert_eq!(enc(Some(&short), 1, ArgPart::V4addr), [0, 0, 0, 0]);
        assert_eq!(enc(Some(&short), 1, ArgPart::Status), [1]);
    }

    #[test]
    fn missing_values_are_empty_and_say_so() {
        assert_eq!(enc(None, 1, ArgPart::Text), b"(missing)\0");
        assert_eq!(enc(None, 1, ArgPart::Status), [STATUS_MISSING]);
        assert_eq!(enc(None, 1, ArgPart::ArgvText), b"(missing)\0");
        assert_eq!(enc(None, 1, ArgPart::SunPath), b"(missing)\0");
        let f = CallArgs { records: vec![rec(1, Kind::Sockaddr, Status::Fault, 0, b"")], ..Default::default() };
        assert_eq!((enc(Some(&f), 1, ArgPart::SunPath), enc(Some(&f), 1, ArgPart::Family)), (b"(fault)\0".to_vec(), vec![0, 0]));
        let f = CallArgs { records: vec![rec(1, Kind::String, Status::Fault, 0, b"")], ..Default::default() };
        assert_eq!((enc(Some(&f), 1, ArgPart::Text), enc(Some(&f), 1, ArgPart::Status)), (b"(fault)\0".to_vec(), vec![Status::Fault as u8]));
        let n = CallArgs { records: vec![rec(1, Kind::String, Status::Null, 0, b"")], ..Default::default() };
        assert_eq!(enc(Some(&n), 1, ArgPart::Text), b"(null)\0");
    }

    #[test]
    fn argv_keeps_element_order_and_reports_a_cut() {
        let a = CallArgs {
            records: vec![
                rec(0, Kind::String, Status::Ok, 0, b"/bin/ls"),
                rec(1, Kind::Argv, Status::Ok, 1, b"-l"),
                rec(1, Kind::Argv, Status::Ok, 0, b"ls"),
                rec(1, Kind::Argv, Status::Ok, 2, b"a \"b\"\\\n\x01\xff"),
                rec(1, Kind::Argv, Status::Cut, 3, b"long"),
                rec(1, Kind::Argv, Status::Fault, 4, b""),
                rec(1, Kind::Argv, Status::Cut, 16, b""),
            ],
            ..Default::default()
        };
        assert_eq!(a.argv_text(1).unwrap(), r#"["ls", "-l", "a \"b\"\\\n\x01\xff", "long"..., (fault), ...]"#);
        let null = CallArgs { records: vec![rec(1, Kind::Argv, Status::Null, 0, b"")], ..Default::default() };
        assert_eq!(enc(Some(&null), 1, ArgPart::ArgvText), b"(null)\0");
        assert_eq!(a.status(1), Some(Status::Cut));
        assert_eq!(a.status(0), Some(Status::Ok));
    }
}
