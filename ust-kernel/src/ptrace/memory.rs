//! Reading a stopped tracee's memory: the strings, `argv` arrays and socket addresses a
//! system call's arguments point to, with `process_vm_readv` (no `PTRACE_PEEKDATA` word
//! loop, no `/proc/<pid>/mem` descriptor to keep).
//!
//! The tracee's memory is hostile input: a pointer may be NULL, unmapped, or point to a
//! string without a terminator. Reads go page by page (a read that starts in a mapped page
//! and runs into an unmapped one returns what it got), every length is bounded, and an
//! unreadable pointer gives [`fault_marker`], never an error: the event is recorded anyway.

use super::sys;

/// The longest string read (`PATH_MAX`, the kernel's own limit on a path argument). A
/// longer one is cut there and ends with [`TRUNCATED`].
pub const MAX_STRING: usize = 4096;
/// The most `argv` elements rendered; the rest is [`TRUNCATED`].
pub const MAX_ARGS: usize = 256;
/// The most bytes of one `argv` rendering.
pub const MAX_ARGV_BYTES: usize = 16 * 1024;
/// Appended to a string or `argv` cut at a limit (strace's convention).
pub const TRUNCATED: &str = "...";

const PAGE: u64 = 4096;

/// What a string argument records when its pointer cannot be read: `<fault 0x…>` with the
/// pointer (strace prints the bare pointer; lttng-modules an empty string).
pub fn fault_marker(addr: u64) -> Vec<u8> {
    format!("<fault {addr:#x}>").into_bytes()
}

/// The NUL-terminated string at `addr` in `tid` (without the NUL), at most [`MAX_STRING`]
/// bytes (then ending with [`TRUNCATED`]); [`fault_marker`] when its first byte or the
/// rest up to the terminator is unreadable.
pub fn string(tid: i32, addr: u64) -> Vec<u8> {
    string_bounded(tid, addr, MAX_STRING).unwrap_or_else(|| fault_marker(addr))
}

/// The string at `addr`, at most `max` bytes (then with [`TRUNCATED`]); `None` when
/// unreadable before its terminator.
fn string_bounded(tid: i32, addr: u64, max: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = addr;
    let mut page = [0u8; PAGE as usize];
    while out.len() < max {
        let room = (PAGE - at % PAGE) as usize;
        let want = room.min(max - out.len());
        let n = sys::read_memory(tid, at, &mut page[..want]).ok()?;
        if n == 0 {
            return None;
        }
        if let Some(end) = page[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&page[..end]);
            return Some(out);
        }
        out.extend_from_slice(&page[..n]);
        if n < want {
            // The string runs into unmapped memory: the call itself gets EFAULT.
            return None;
        }
        at = at.checked_add(n as u64)?;
    }
    out.extend_from_slice(TRUNCATED.as_bytes());
    Some(out)
}

/// The NULL-terminated array of string pointers at `addr` (`execve`'s `argv`), rendered as
/// strace prints it: `["sh", "-c", "echo hi"]`, each string C-escaped ([`escape`]); at most
/// [`MAX_ARGS`] elements and [`MAX_ARGV_BYTES`] bytes, then `...`; [`fault_marker`] when
/// the array itself is unreadable, an element's marker in its place when one string is.
pub fn argv(tid: i32, addr: u64) -> Vec<u8> {
    let mut out = b"[".to_vec();
    for i in 0..MAX_ARGS {
        let mut word = [0u8; 8];
        let at = addr.wrapping_add(8 * i as u64);
        if sys::read_memory(tid, at, &mut word).ok() != Some(8) {
            return if i == 0 { fault_marker(addr) } else { close(out, true) };
        }
        let ptr = u64::from_ne_bytes(word);
        if ptr == 0 {
            return close(out, false);
        }
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        match string_bounded(tid, ptr, MAX_STRING) {
            Some(s) => {
                out.push(b'"');
                escape(&s, &mut out);
                out.push(b'"');
            }
            None => out.extend_from_slice(&fault_marker(ptr)),
        }
        if out.len() >= MAX_ARGV_BYTES {
            out.truncate(MAX_ARGV_BYTES);
            return close(out, true);
        }
    }
    close(out, true)
}

fn close(mut out: Vec<u8>, cut: bool) -> Vec<u8> {
    if cut {
        if out.len() > 1 {
            out.extend_from_slice(b", ");
        }
        out.extend_from_slice(TRUNCATED.as_bytes());
    }
    out.push(b']');
    out
}

/// Appends `s` C-escaped as strace does: `\"`, `\\`, `\n`, `\t`, `\r`, other bytes below
/// 0x20 and 0x7f as `\xNN`; everything else (UTF-8 included) as it is.
pub fn escape(s: &[u8], out: &mut Vec<u8>) {
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
            _ => out.push(b),
        }
    }
}

/// The largest socket address read (`sizeof(struct sockaddr_storage)`).
pub const MAX_SOCKADDR: usize = 128;

/// What a `struct sockaddr` holds, decoded as lttng-modules' `connect` override does
/// (`family`, port, IPv4 or IPv6 address), plus the path of an `AF_UNIX` address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SockAddr {
    /// `sa_family` (0 when unreadable or `addrlen` is too short).
    pub family: u16,
    /// The port, in host order (0 outside `AF_INET`/`AF_INET6`).
    pub port: u16,
    /// The IPv4 address bytes (empty outside `AF_INET`).
    pub v4: Vec<u64>,
    /// The IPv6 address as eight 16-bit groups in host order (empty outside `AF_INET6`).
    pub v6: Vec<u64>,
    /// An `AF_UNIX` path (an abstract name starts with `@`, as `ss` prints it); empty
    /// otherwise.
    pub unix_path: Vec<u8>,
}

/// Decodes the `addrlen` bytes of a socket address at `addr` (at most [`MAX_SOCKADDR`]).
pub fn sockaddr(tid: i32, addr: u64, addrlen: u64) -> SockAddr {
    let len = (addrlen as usize).min(MAX_SOCKADDR);
    let mut b = [0u8; MAX_SOCKADDR];
    let n = if addr == 0 || len < 2 { 0 } else { sys::read_memory(tid, addr, &mut b[..len]).unwrap_or(0) };
    parse_sockaddr(&b[..n])
}

/// [`sockaddr`] on bytes already read.
pub fn parse_sockaddr(b: &[u8]) -> SockAddr {
    let mut s = SockAddr::default();
    let Some(family) = b.get(0..2).map(|f| u16::from_ne_bytes([f[0], f[1]])) else { return s };
    s.family = family;
    let port = |b: &[u8]| b.get(2..4).map(|p| u16::from_be_bytes([p[0], p[1]])).unwrap_or(0);
    match i32::from(family) {
        libc::AF_INET if b.len() >= 16 => {
            s.port = port(b);
            s.v4 = b[4..8].iter().map(|&x| u64::from(x)).collect();
        }
        libc::AF_INET6 if b.len() >= 28 => {
            s.port = port(b);
            s.v6 = b[8..24].chunks(2).map(|g| u64::from(u16::from_be_bytes([g[0], g[1]]))).collect();
        }
        libc::AF_UNIX => {
            let path = &b[2..];
            s.unix_path = match path.first() {
                Some(0) if path.len() > 1 => [b"@".as_slice(), &path[1..]].concat(),
                _ => path.iter().copied().take_while(|&c| c != 0).collect(),
            };
        }
        _ => {}
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> i32 {
        sys::gettid()
    }

    #[test]
    fn strings_faults_and_limits() {
        let s = b"/etc/hostname\0";
        assert_eq!(string(me(), s.as_ptr() as u64), b"/etc/hostname");
        assert_eq!(string(me(), 0), b"<fault 0x0>");
        assert_eq!(string(me(), 1), b"<fault 0x1>");
        let long = vec![b'a'; MAX_STRING + 10];
        let got = string(me(), long.as_ptr() as u64);
        assert_eq!(got.len(), MAX_STRING + TRUNCATED.len());
        assert!(got.ends_with(TRUNCATED.as_bytes()));
    }

    #[test]
    fn a_string_running_into_an_unmapped_page_is_a_fault() {
        // Two pages, the second unmapped: a string filling the first has no terminator.
        // SAFETY: a fresh anonymous mapping, written and unmapped only here.
        unsafe {
            let p = libc::mmap(std::ptr::null_mut(), 8192, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
            assert_ne!(p, libc::MAP_FAILED);
            std::ptr::write_bytes(p.cast::<u8>(), b'x', 4096);
            libc::munmap(p.cast::<u8>().add(4096).cast(), 4096);
            let at = p as u64 + 4000;
            assert_eq!(string(me(), at), fault_marker(at));
            libc::munmap(p, 4096);
        }
    }

    #[test]
    fn argv_renders_as_strace_does() {
        let a = b"sh\0";
        let b = b"echo \"hi\"\n\0";
        let ptrs: [u64; 4] = [a.as_ptr() as u64, b.as_ptr() as u64, 1, 0];
        assert_eq!(String::from_utf8(argv(me(), ptrs.as_ptr() as u64)).unwrap(), r#"["sh", "echo \"hi\"\n", <fault 0x1>]"#);
        let none: [u64; 1] = [0];
        assert_eq!(argv(me(), none.as_ptr() as u64), b"[]");
        assert_eq!(argv(me(), 0), b"<fault 0x0>");
    }

    #[test]
    fn socket_addresses() {
        let mut inet = vec![0u8; 16];
        inet[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        inet[2..4].copy_from_slice(&8080u16.to_be_bytes());
        inet[4..8].copy_from_slice(&[127, 0, 0, 1]);
        let s = parse_sockaddr(&inet);
        assert_eq!((s.family, s.port, s.v4.clone()), (libc::AF_INET as u16, 8080, vec![127, 0, 0, 1]));
        let mut unix = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        unix.extend_from_slice(b"/run/x.sock\0\0\0");
        assert_eq!(parse_sockaddr(&unix).unix_path, b"/run/x.sock");
        let mut abs = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        abs.extend_from_slice(b"\0name");
        assert_eq!(parse_sockaddr(&abs).unix_path, b"@name");
        assert_eq!(parse_sockaddr(&[1]), SockAddr::default());
        assert_eq!(sockaddr(me(), 1, 16), SockAddr::default());
    }
}
