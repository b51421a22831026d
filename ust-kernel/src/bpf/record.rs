//! The record the capture program writes to the ring buffer for one captured argument, and
//! its decoding. The program ([`super::program`]) writes these offsets; [`ArgRecord::parse`]
//! reads them back from bytes it treats as hostile (every length checked).
//!
//! ```text
//!  0  u64  ktime      bpf_ktime_get_ns() at the sys_enter hit (CLOCK_MONOTONIC, ns)
//!  8  u32  tid
//! 12  u32  tgid
//! 16  u32  nr         system call number (x86-64)
//! 20  u8   arg        argument index, 0..6
//! 21  u8   kind       1 string, 2 sockaddr, 3 argv element
//! 22  u8   status     0 ok, 1 cut, 2 fault, 3 null pointer
//! 23  u8   elem       argv: element index (ARGV_MAX with status cut: more elements follow)
//! 24  u32  len        bytes that follow (a string without its NUL)
//! 28  u32  aux        sockaddr: the length the caller passed; else 0
//! 32  u64  ptr        the argument's value: the user pointer (argv: the array's)
//! 40  ...  bytes
//! ```

/// Size of the record header.
pub const HEADER: usize = 40;
/// Offsets in the header.
pub const OFF_KTIME: i16 = 0;
/// `tid`.
pub const OFF_TID: i16 = 8;
/// `tgid`.
pub const OFF_TGID: i16 = 12;
/// `nr`.
pub const OFF_NR: i16 = 16;
/// `arg`.
pub const OFF_ARG: i16 = 20;
/// `kind`.
pub const OFF_KIND: i16 = 21;
/// `status`.
pub const OFF_STATUS: i16 = 22;
/// `elem`.
pub const OFF_ELEM: i16 = 23;
/// `len`.
pub const OFF_LEN: i16 = 24;
/// `aux`.
pub const OFF_AUX: i16 = 28;
/// `ptr`.
pub const OFF_PTR: i16 = 32;

/// Longest string copied, in bytes without the NUL (PATH_MAX less its NUL is 4095: a
/// string of 4096 or more bytes is cut at 4096 and marked [`Status::Cut`]).
pub const STRING_MAX: usize = 4096;
/// Longest `execve` argument string copied (bytes without the NUL).
pub const ARGV_STRING_MAX: usize = 1024;
/// Arguments of `execve`'s `argv` copied; a record with `elem == ARGV_MAX` and
/// [`Status::Cut`] says more followed.
pub const ARGV_MAX: usize = 16;
/// Longest `struct sockaddr` copied (`sizeof(struct sockaddr_storage)`).
pub const SOCKADDR_MAX: usize = 128;

/// What was captured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A NUL-terminated user string (a path).
    String = 1,
    /// A `struct sockaddr` of the length the next argument gives.
    Sockaddr = 2,
    /// One string of an `argv` array (`const char *const *`).
    Argv = 3,
}

/// How the copy went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// Copied whole.
    Ok = 0,
    /// Longer than the limit: the bytes are its beginning (for argv: more elements).
    Cut = 1,
    /// The pointer was unreadable: unmapped, or not resident (the program cannot fault
    /// pages in).
    Fault = 2,
    /// The pointer was NULL.
    Null = 3,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::String,
            2 => Kind::Sockaddr,
            3 => Kind::Argv,
            _ => return None,
        })
    }
}

impl Status {
    fn from_u8(v: u8) -> Option<Status> {
        Some(match v {
            0 => Status::Ok,
            1 => Status::Cut,
            2 => Status::Fault,
            3 => Status::Null,
            _ => return None,
        })
    }

    /// Lower-case name (`ok`, `cut`, `fault`, `null`).
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Cut => "cut",
            Status::Fault => "fault",
            Status::Null => "null",
        }
    }
}

/// One captured argument (or one `argv` element) of one system call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgRecord {
    /// `CLOCK_MONOTONIC` ns at the `sys_enter` hit (every record of one call has the same).
    pub ktime: u64,
    /// Thread id.
    pub tid: i32,
    /// Thread-group (process) id.
    pub tgid: i32,
    /// System call number.
    pub nr: u32,
    /// Argument index, 0..6.
    pub arg: u8,
    /// What it is.
    pub kind: Kind,
    /// How the copy went.
    pub status: Status,
    /// `argv` element index (0 otherwise).
    pub elem: u8,
    /// Sockaddr: the length the caller passed (may exceed what was copied).
    pub aux: u32,
    /// The argument's value (the user pointer; argv: the array's), which the joiner
    /// compares with the `sys_enter` record's `args[arg]`.
    pub ptr: u64,
    /// The bytes (a string without its NUL; a sockaddr as copied).
    pub bytes: Vec<u8>,
}

/// Why a ring-buffer record was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadRecord {
    /// Shorter than the header.
    Short,
    /// `len` runs past the record.
    Length,
    /// Unknown `kind` or `status`, or `arg` ≥ 6.
    Value,
}

fn u32_at(b: &[u8], off: i16) -> u32 {
    let o = off as usize;
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

impl ArgRecord {
    /// Decodes one record's bytes.
    ///
    /// # Errors
    /// [`BadRecord`] when the bytes are not a record this program writes.
    pub fn parse(b: &[u8]) -> Result<ArgRecord, BadRecord> {
        if b.len() < HEADER {
            return Err(BadRecord::Short);
        }
        let len = u32_at(b, OFF_LEN) as usize;
        let bytes = b.get(HEADER..HEADER.checked_add(len).ok_or(BadRecord::Length)?).ok_or(BadRecord::Length)?;
        let kind = Kind::from_u8(b[OFF_KIND as usize]).ok_or(BadRecord::Value)?;
        let status = Status::from_u8(b[OFF_STATUS as usize]).ok_or(BadRecord::Value)?;
        let arg = b[OFF_ARG as usize];
        if arg >= 6 {
            return Err(BadRecord::Value);
        }
        let u64_at = |o: usize| {
            let mut t = [0u8; 8];
            t.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(t)
        };
        Ok(ArgRecord {
            ktime: u64_at(OFF_KTIME as usize),
            ptr: u64_at(OFF_PTR as usize),
            tid: u32_at(b, OFF_TID) as i32,
            tgid: u32_at(b, OFF_TGID) as i32,
            nr: u32_at(b, OFF_NR),
            arg,
            kind,
            status,
            elem: b[OFF_ELEM as usize],
            aux: u32_at(b, OFF_AUX),
            bytes: bytes.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(len: u32, kind: u8, status: u8, arg: u8, payload: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; HEADER];
        b[..8].copy_from_slice(&77u64.to_le_bytes());
        b[8..12].copy_from_slice(&5u32.to_le_bytes());
        b[12..16].copy_from_slice(&4u32.to_le_bytes());
        b[16..20].copy_from_slice(&257u32.to_le_bytes());
        b[20] = arg;
        b[21] = kind;
        b[22] = status;
        b[24..28].copy_from_slice(&len.to_le_bytes());
        b[32..40].copy_from_slice(&0x1234u64.to_le_bytes());
        b.extend_from_slice(payload);
        b
    }

    #[test]
    fn parses_and_bounds_checks() {
        let r = ArgRecord::parse(&raw(3, 1, 0, 1, b"/ab\0\0")).unwrap();
        assert_eq!((r.ktime, r.tid, r.tgid, r.nr, r.arg, r.kind, r.status), (77, 5, 4, 257, 1, Kind::String, Status::Ok));
        assert_eq!((r.bytes.as_slice(), r.ptr), (&b"/ab"[..], 0x1234));
        assert_eq!(ArgRecord::parse(&raw(6, 1, 0, 1, b"/ab")), Err(BadRecord::Length));
        assert_eq!(ArgRecord::parse(&raw(u32::MAX, 1, 0, 1, b"")), Err(BadRecord::Length));
        assert_eq!(ArgRecord::parse(&raw(0, 9, 0, 1, b"")), Err(BadRecord::Value));
        assert_eq!(ArgRecord::parse(&raw(0, 1, 7, 1, b"")), Err(BadRecord::Value));
        assert_eq!(ArgRecord::parse(&raw(0, 1, 0, 6, b"")), Err(BadRecord::Value));
        assert_eq!(ArgRecord::parse(&[0u8; HEADER - 1]), Err(BadRecord::Short));
    }
}
