//! `tracef!` and `tracelog!`: printf-style events formatted into a bounded stack buffer.
//!
//! The message is formatted with `core::fmt` straight into a 4 KiB buffer on the stack
//! ([`MSG_CAPACITY`]); nothing is allocated. A longer message is cut at a UTF-8 character
//! boundary and ends with [`TRUNCATION_MARKER`], so the text says it was truncated and the
//! whole message, marker included, is at most 4096 bytes.

use core::fmt::{self, Write};
use core::mem::MaybeUninit;

use ust_core::Level;

use crate::emit::emit;
use crate::field::{Field, Text};
use crate::site::{TRACEF, TRACELOG};

/// Largest message `tracef!`/`tracelog!` record, in bytes of UTF-8, marker included.
pub const MSG_CAPACITY: usize = 4096;

/// Appended to a message cut at [`MSG_CAPACITY`] bytes.
pub const TRUNCATION_MARKER: &str = "...[truncated]";

/// Uninitialized stack storage for one message (`StackMsg::new` borrows it).
pub(crate) type MsgStorage = MaybeUninit<[u8; MSG_CAPACITY]>;

/// A `fmt::Write` into an uninitialized stack array: no zeroing, no heap.
///
/// The array is borrowed, not owned: owning it made `new` return a 4 KiB value that the
/// compiler filled with a `memset` on every call (82 % of a `tracef!`, measured with
/// callgrind); a borrowed local is left alone.
pub(crate) struct StackMsg<'a> {
    buf: &'a mut MsgStorage,
    len: usize,
    truncated: bool,
}

impl<'a> StackMsg<'a> {
    #[inline(always)]
    pub(crate) fn new(buf: &'a mut MsgStorage) -> StackMsg<'a> {
        StackMsg { buf, len: 0, truncated: false }
    }

    fn push(&mut self, bytes: &[u8]) {
        debug_assert!(self.len + bytes.len() <= MSG_CAPACITY);
        // SAFETY: `len + bytes.len() <= MSG_CAPACITY` (checked by every caller), so the
        // destination range lies inside the array; source and destination do not overlap.
        unsafe {
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.buf.as_mut_ptr().cast::<u8>().add(self.len), bytes.len());
        }
        self.len += bytes.len();
    }

    fn written(&self) -> &[u8] {
        // SAFETY: the first `len` bytes were initialized by `push`.
        unsafe { core::slice::from_raw_parts(self.buf.as_ptr().cast::<u8>(), self.len) }
    }

    /// The message: valid UTF-8 of at most [`MSG_CAPACITY`] bytes, ending with the marker
    /// when it was cut.
    pub(crate) fn finish(&mut self) -> &[u8] {
        if self.truncated {
            let mut end = self.len.min(MSG_CAPACITY - TRUNCATION_MARKER.len());
            let w = self.written();
            while end > 0 && end < w.len() && is_continuation(w[end]) {
                end -= 1;
            }
            self.len = end;
            self.push(TRUNCATION_MARKER.as_bytes());
        }
        self.written()
    }
}

#[inline(always)]
fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

impl Write for StackMsg<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = MSG_CAPACITY - self.len;
        if s.len() <= room {
            self.push(s.as_bytes());
            Ok(())
        } else {
            let mut n = room;
            while n > 0 && !s.is_char_boundary(n) {
                n -= 1;
            }
            self.push(&s.as_bytes()[..n]);
            self.truncated = true;
            // Stop formatting: the rest would be thrown away.
            Err(fmt::Error)
        }
    }
}

/// Formats `args` and records `lttng_ust_tracef:event` from call site `ip`. Called by
/// `tracef!` once it has seen the event enabled.
#[inline(never)]
pub fn tracef(ip: u64, args: fmt::Arguments<'_>) {
    let mut storage = MsgStorage::uninit();
    let mut m = StackMsg::new(&mut storage);
    let msg = match args.as_str() {
        Some(s) => {
            let _ = m.write_str(s);
            m.finish()
        }
        None => {
            let _ = m.write_fmt(args);
            m.finish()
        }
    };
    let msg = Text(msg);
    emit(&TRACEF, ip, msg.encoded_len(), |out| msg.encode(out));
}

/// Formats `args` and records `lttng_ust_tracelog:TRACE_<level>` with the call site's
/// line, file and function (module path) and its address `ip`. Called by `tracelog!`.
#[inline(never)]
pub fn tracelog(ip: u64, level: Level, line: u32, file: &str, func: &str, args: fmt::Arguments<'_>) {
    let mut storage = MsgStorage::uninit();
    let mut m = StackMsg::new(&mut storage);
    let _ = m.write_fmt(args);
    let msg = Text(m.finish());
    let line = line as i32;
    let (ll, fl, gl, ml) = (line.encoded_len(), file.encoded_len(), func.encoded_len(), msg.encoded_len());
    emit(&TRACELOG[level as usize], ip, ll + fl + gl + ml, |out| {
        let (a, out) = out.split_at_mut(ll);
        line.encode(a);
        let (a, out) = out.split_at_mut(fl);
        file.encode(a);
        let (a, out) = out.split_at_mut(gl);
        func.encode(a);
        msg.encode(out);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(args: fmt::Arguments<'_>) -> Vec<u8> {
        let mut storage = MsgStorage::uninit();
        let mut m = StackMsg::new(&mut storage);
        let _ = m.write_fmt(args);
        m.finish().to_vec()
    }

    #[test]
    fn short_messages_are_kept_whole() {
        assert_eq!(format(format_args!("n={} s={:?}", 5, "x")), b"n=5 s=\"x\"");
        assert_eq!(format(format_args!("")), b"");
        assert_eq!(format(format_args!("héllo {}", '☃')), "héllo ☃".as_bytes());
        let exact = "a".repeat(MSG_CAPACITY);
        assert_eq!(format(format_args!("{exact}")), exact.as_bytes());
    }

    #[test]
    fn long_messages_are_truncated_with_a_marker() {
        let long = "b".repeat(10_000);
        let out = format(format_args!("x{long}"));
        assert_eq!(out.len(), MSG_CAPACITY);
        assert!(out.ends_with(TRUNCATION_MARKER.as_bytes()));
        assert!(out.starts_with(b"xbbb"));
        // Many small pieces, one over the limit.
        let pieces = [1u64; 3000];
        let out = format(format_args!("{pieces:?}"));
        assert!(out.len() <= MSG_CAPACITY);
        assert!(out.ends_with(TRUNCATION_MARKER.as_bytes()));
    }

    #[test]
    fn truncation_keeps_utf8_valid() {
        for pad in 0..4 {
            let s = format!("{}{}", "a".repeat(pad), "€".repeat(3000));
            let out = format(format_args!("{s}"));
            assert!(out.len() <= MSG_CAPACITY);
            let text = std::str::from_utf8(&out).expect("valid UTF-8");
            assert!(text.ends_with(TRUNCATION_MARKER));
        }
    }

    #[test]
    fn formatting_does_not_allocate() {
        let before = crate::test_alloc::allocations();
        let long = "z".repeat(9000);
        let n = crate::test_alloc::allocations();
        let out_len = {
            let mut storage = MsgStorage::uninit();
            let mut m = StackMsg::new(&mut storage);
            let _ = m.write_fmt(format_args!("{} {} {long}", 1, 2.5));
            m.finish().len()
        };
        assert_eq!(crate::test_alloc::allocations(), n, "formatting allocated");
        assert_eq!(out_len, MSG_CAPACITY);
        assert!(n > before);
    }
}
