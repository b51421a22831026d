//! Recording `tracing` values as ust events: each field of a callsite is a
//! [`ust_core::FieldType::Dynamic`] value (a tag byte, then the value), every field of the
//! callsite in its order, `none` for those not recorded.
//!
//! `tracing` hands the values to a visitor one by one, in the order they were given
//! (almost always the callsite's field order), and only then is the payload's length
//! known: the values are encoded into a reused per-thread buffer as they come, in field
//! order with `none` tags filling the gaps, and that buffer is copied once into the
//! reserved record. Values out of field order (a hand-built `ValueSet`) are encoded by a
//! second visit that keeps each value's range and lays them out in field order.

use std::cell::RefCell;
use std::fmt::Write as _;

use ::tracing_core::field::{Field as TField, Visit};
use ust_core::DynamicTag;

use super::sites::{Sites, MAX_FIELDS};
use crate::site::Site;

/// Longest string recorded for one value (a `Debug` rendering is cut there).
pub const MAX_STR: usize = 4096;

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Appends `tag` and the 8 bytes of a number.
#[inline]
fn put8(buf: &mut Vec<u8>, tag: DynamicTag, bytes: [u8; 8]) {
    let mut v = [tag as u8; 9];
    v[1..].copy_from_slice(&bytes);
    buf.extend_from_slice(&v);
}

/// Appends a `str` value: cut at [`MAX_STR`] bytes (on a character boundary), then at its
/// first NUL (as `&str` fields of `tracepoint!` are), NUL-terminated.
#[inline]
fn put_str(buf: &mut Vec<u8>, s: &str) {
    buf.push(DynamicTag::Str as u8);
    let mut end = s.len().min(MAX_STR);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let s = &s.as_bytes()[..end];
    let s = match s.iter().position(|&b| b == 0) {
        Some(n) => &s[..n],
        None => s,
    };
    buf.extend_from_slice(s);
    buf.push(0);
}

/// Appends a `Debug` rendering as a `str` value: at most [`MAX_STR`] bytes, NULs dropped.
fn put_debug(buf: &mut Vec<u8>, v: &dyn std::fmt::Debug) {
    buf.push(DynamicTag::Str as u8);
    let start = buf.len();
    let _ = write!(Bounded { buf: &mut *buf, start }, "{v:?}");
    buf.push(0);
}

/// A `fmt::Write` into a byte buffer that stops at [`MAX_STR`] bytes past `start` (at a
/// character boundary) and drops NULs.
struct Bounded<'a> {
    buf: &'a mut Vec<u8>,
    start: usize,
}

impl std::fmt::Write for Bounded<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = MAX_STR - (self.buf.len() - self.start);
        if s.len() <= room && !s.as_bytes().contains(&0) {
            self.buf.extend_from_slice(s.as_bytes());
            return Ok(());
        }
        // Near the bound, or with NULs to drop: a character at a time.
        for c in s.chars() {
            if self.buf.len() - self.start + c.len_utf8() > MAX_STR {
                return Err(std::fmt::Error);
            }
            if c != '\0' {
                let mut b = [0u8; 4];
                self.buf.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
        Ok(())
    }
}

/// Encodes values that come in field order straight after each other, a `none` tag for
/// each field skipped. Gives up (`ordered = false`) at the first value whose field comes
/// before one already encoded.
struct InOrder<'a> {
    buf: &'a mut Vec<u8>,
    /// The index of the next field to encode.
    next: usize,
    nfields: usize,
    ordered: bool,
}

impl InOrder<'_> {
    /// Whether the value of `f` is to be appended now (after `none`s for the fields it skips).
    #[inline]
    fn at(&mut self, f: &TField) -> bool {
        let i = f.index();
        if i < self.next {
            self.ordered = false;
        }
        if !self.ordered || i >= self.nfields {
            return false;
        }
        while self.next < i {
            self.buf.push(DynamicTag::None as u8);
            self.next += 1;
        }
        self.next = i + 1;
        true
    }

    /// `none` for every field after the last one encoded.
    fn finish(&mut self) {
        while self.next < self.nfields {
            self.buf.push(DynamicTag::None as u8);
            self.next += 1;
        }
    }
}

impl Visit for InOrder<'_> {
    fn record_i64(&mut self, f: &TField, v: i64) {
        if self.at(f) {
            put8(self.buf, DynamicTag::I64, v.to_le_bytes());
        }
    }
    fn record_u64(&mut self, f: &TField, v: u64) {
        if self.at(f) {
            put8(self.buf, DynamicTag::U64, v.to_le_bytes());
        }
    }
    fn record_f64(&mut self, f: &TField, v: f64) {
        if self.at(f) {
            put8(self.buf, DynamicTag::F64, v.to_le_bytes());
        }
    }
    fn record_bool(&mut self, f: &TField, v: bool) {
        if self.at(f) {
            self.buf.extend_from_slice(&[DynamicTag::Bool as u8, v as u8]);
        }
    }
    fn record_str(&mut self, f: &TField, v: &str) {
        if self.at(f) {
            put_str(self.buf, v);
        }
    }
    fn record_debug(&mut self, f: &TField, v: &dyn std::fmt::Debug) {
        if self.at(f) {
            put_debug(self.buf, v);
        }
    }
}

/// Encodes values in any order: each appended to `buf`, its range kept by field index
/// (the last value of a field given twice wins).
struct AnyOrder<'a> {
    buf: &'a mut Vec<u8>,
    ranges: [(u32, u32); MAX_FIELDS],
}

impl AnyOrder<'_> {
    fn with(&mut self, f: &TField, encode: impl FnOnce(&mut Vec<u8>)) {
        let i = f.index();
        if i >= MAX_FIELDS {
            return;
        }
        let start = self.buf.len();
        encode(self.buf);
        self.ranges[i] = (start as u32, self.buf.len() as u32);
    }

    /// Rewrites `buf` as the values in field order, `none` for the fields not recorded.
    fn lay_out(self, nfields: usize) {
        let end = self.buf.len();
        for &(a, b) in &self.ranges[..nfields] {
            if b > a {
                self.buf.extend_from_within(a as usize..b as usize);
            } else {
                self.buf.push(DynamicTag::None as u8);
            }
        }
        self.buf.drain(..end);
    }
}

impl Visit for AnyOrder<'_> {
    fn record_i64(&mut self, f: &TField, v: i64) {
        self.with(f, |b| put8(b, DynamicTag::I64, v.to_le_bytes()));
    }
    fn record_u64(&mut self, f: &TField, v: u64) {
        self.with(f, |b| put8(b, DynamicTag::U64, v.to_le_bytes()));
    }
    fn record_f64(&mut self, f: &TField, v: f64) {
        self.with(f, |b| put8(b, DynamicTag::F64, v.to_le_bytes()));
    }
    fn record_bool(&mut self, f: &TField, v: bool) {
        self.with(f, |b| b.extend_from_slice(&[DynamicTag::Bool as u8, v as u8]));
    }
    fn record_str(&mut self, f: &TField, v: &str) {
        self.with(f, |b| put_str(b, v));
    }
    fn record_debug(&mut self, f: &TField, v: &dyn std::fmt::Debug) {
        self.with(f, |b| put_debug(b, v));
    }
}

/// Encodes the `nfields` values `visit` records into `buf` (cleared first), in field order.
/// `visit` runs once, or twice when the values come out of field order.
fn encode(buf: &mut Vec<u8>, nfields: usize, visit: impl Fn(&mut dyn Visit)) {
    buf.clear();
    let mut e = InOrder { buf, next: 0, nfields, ordered: true };
    visit(&mut e);
    if e.ordered {
        e.finish();
        return;
    }
    buf.clear();
    let mut a = AnyOrder { buf, ranges: [(0, 0); MAX_FIELDS] };
    visit(&mut a);
    a.lay_out(nfields);
}

/// Records `site` (from the callsite of `sites`) with the fixed bytes `prefix` (an array:
/// its copy is a few moves, not a `memcpy` call), then the callsite's values that `visit`
/// records.
pub(super) fn record<const N: usize>(site: &Site, sites: &Sites, prefix: [u8; N], visit: impl Fn(&mut dyn Visit)) {
    let run = |buf: &mut Vec<u8>| {
        encode(buf, sites.nfields, &visit);
        let buf: &[u8] = buf;
        crate::emit::emit(site, sites.ip, N + buf.len(), |out: &mut [u8]| {
            let (p, rest) = out.split_at_mut(N);
            p.copy_from_slice(&prefix);
            rest.copy_from_slice(buf);
        });
    };
    // A nested call (a value's `Debug` that records a `tracing` event) finds the buffer
    // borrowed, and a thread being torn down finds it gone: both get a buffer of their own.
    let done = SCRATCH.try_with(|s| match s.try_borrow_mut() {
        Ok(mut b) => {
            run(&mut b);
            true
        }
        Err(_) => false,
    });
    if done != Ok(true) {
        run(&mut Vec::new());
    }
}

/// Records `site` (when enabled) with the fixed `u64` fields `ids`.
#[inline]
pub(super) fn id_event<const N: usize>(site: Option<&'static Site>, ip: u64, ids: [u64; N]) {
    if let Some(s) = site.filter(|s| s.is_enabled()) {
        crate::emit::emit_fixed(s, ip, 8 * N, |out: &mut [u8]| {
            for (o, id) in out.chunks_exact_mut(8).zip(ids) {
                o.copy_from_slice(&id.to_le_bytes());
            }
        });
    }
}

/// `<span>_new { _span_id, _parent_id, <fields> }` for a new span of the callsite of
/// `sites`, when enabled.
pub(super) fn new_span(sites: &Sites, id: u64, parent: u64, attrs: &::tracing_core::span::Attributes<'_>) {
    if let Some(site) = sites.main.filter(|s| s.is_enabled()) {
        let mut prefix = [0u8; 16];
        prefix[..8].copy_from_slice(&id.to_le_bytes());
        prefix[8..].copy_from_slice(&parent.to_le_bytes());
        record(site, sites, prefix, |v| attrs.record(v));
    }
}

/// `<span>_record { _span_id, <fields> }` (the values given, `none` for the others), when
/// enabled.
pub(super) fn span_record(sites: &Sites, id: u64, values: &::tracing_core::span::Record<'_>) {
    if let Some(site) = sites.record.filter(|s| s.is_enabled()) {
        record(site, sites, id.to_le_bytes(), |v| values.record(v));
    }
}

/// A `tracing` event of the callsite of `sites`, when enabled.
pub(super) fn event(sites: &Sites, event: &::tracing_core::Event<'_>) {
    if let Some(site) = sites.main.filter(|s| s.is_enabled()) {
        record(site, sites, [], |v| event.record(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fields `a`, `b`, `c`, `d` of one callsite.
    fn fields() -> &'static ::tracing_core::field::FieldSet {
        super::super::sites::test_meta(&["a", "b", "c", "d"]).fields()
    }

    fn encoded(nfields: usize, visit: impl Fn(&mut dyn Visit)) -> Vec<u8> {
        let mut buf = vec![0xee; 3];
        encode(&mut buf, nfields, visit);
        buf
    }

    const NONE: u8 = DynamicTag::None as u8;
    const U64: u8 = DynamicTag::U64 as u8;
    const STR: u8 = DynamicTag::Str as u8;

    #[test]
    fn values_in_field_order_with_none_for_the_gaps() {
        let fs = fields();
        let f = |n| fs.field(n).unwrap();
        let got = encoded(4, |v| {
            v.record_u64(&f("b"), 7);
            v.record_str(&f("d"), "x\0y");
        });
        let mut want = vec![NONE, U64];
        want.extend_from_slice(&7u64.to_le_bytes());
        want.extend_from_slice(&[NONE, STR, b'x', 0]);
        assert_eq!(got, want);
        assert_eq!(encoded(4, |_| {}), [NONE; 4], "no value: every field none");
    }

    #[test]
    fn values_out_of_field_order_are_laid_out_in_field_order() {
        let fs = fields();
        let f = |n| fs.field(n).unwrap();
        let got = encoded(3, |v| {
            v.record_debug(&f("c"), &format_args!("z{}", 1));
            v.record_bool(&f("a"), true);
            v.record_debug(&f("d"), &"past nfields");
        });
        assert_eq!(got, [DynamicTag::Bool as u8, 1, NONE, STR, b'z', b'1', 0]);
    }

    #[test]
    fn debug_values_are_cut_at_max_str_and_lose_their_nuls() {
        let fs = fields();
        let f = |n| fs.field(n).unwrap();
        let long = "é".repeat(MAX_STR);
        let got = encoded(1, |v| v.record_debug(&f("a"), &format_args!("{long}")));
        assert_eq!(got.len(), 1 + MAX_STR + 1);
        assert_eq!(&got[1..MAX_STR + 1], &long.as_bytes()[..MAX_STR]);
        let got = encoded(1, |v| v.record_debug(&f("a"), &format_args!("{}", "a\0b")));
        assert_eq!(got, [STR, b'a', b'b', 0]);
        let got = encoded(1, |v| v.record_str(&f("a"), &long[..MAX_STR + 2]));
        assert_eq!(got.len(), 1 + MAX_STR + 1, "a str cut on a character boundary");
    }
}
