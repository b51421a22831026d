//! How a Rust value becomes the bytes of a tracepoint field.
//!
//! Every field type implements [`Field`]: a CTF type known at compile time
//! ([`Field::TYPE`], written into the event description and from there into the TSDL
//! metadata by the daemon), the number of bytes a value takes, and the encoder. The layout
//! is the one `ust_core::event` describes (LTTng-UST on x86-64): packed, byte-aligned,
//! little-endian, no padding, so an event whose fields are all fixed-size has a constant
//! size that the compiler folds.
//!
//! | Rust type | CTF type | bytes |
//! |---|---|---|
//! | `u8` … `u64`, `i8` … `i64` | integer of that size, base 10 | 1, 2, 4, 8 |
//! | `usize`, `isize` | 64-bit integer | 8 |
//! | `f32`, `f64` | floating point (IEEE 754) | 4, 8 |
//! | `bool` | 8-bit unsigned integer (0 or 1) | 1 |
//! | `char` | 32-bit unsigned integer, base 16 | 4 |
//! | `&str` | string: UTF-8 up to the first NUL, then a NUL | up to first NUL + 1 |
//! | `&[u8]` | sequence: `u64` length `_<name>_length`, then bytes (base 16) | 8 + n |
//! | `&[T]`, `T` an integer, `bool` or `char` | sequence: `u64` length, then elements | 8 + n·size |
//! | `[T; N]`, same `T` | array of N elements | N·size |
//! | enum with `#[derive(ust::Enum)]` | enumeration over its `repr` integer | 1 … 8 |
//!
//! The length of a sequence is a `u64` named `_<name>_length`, written just before the
//! elements (LTTng's `ctf_sequence`); `ust_core::FieldType::tsdl` names it.

use std::borrow::Cow;

use ust_core::{EnumMapping, FieldType, IntegerType};

/// A type that can be recorded in a tracepoint field.
///
/// Implemented for the types in the [module table](self); `#[derive(ust::Enum)]` implements
/// it for fieldless enums. Prefer those: an implementation by hand is an `unsafe impl`.
///
/// # Safety
///
/// [`encode`](Field::encode) runs between the reservation of the event's slot in a shared
/// ring buffer and its commit. An implementation must guarantee that:
///
/// * [`encoded_len`](Field::encoded_len) is exact: `encode` is given a slice of exactly
///   that many bytes and must fill all of them;
/// * `encode` never panics (no indexing that can fail, no `unwrap`, no arithmetic that can
///   overflow in debug builds, no call that can panic). A panic unwinds out of the emit path
///   with the slot reserved and never committed: the sub-buffer never completes, and every
///   later event in that buffer (that CPU, that channel) is lost for the rest of the
///   session;
/// * `encoded_len` and `encode` see the same value (no interior mutability changing the
///   length in between) and the bytes match [`TYPE`](Field::TYPE), or readers of the trace
///   decode garbage.
///
/// ```
/// struct Port(u16);
/// // SAFETY: always 2 bytes, written by a `copy_from_slice` of 2 bytes into the 2-byte
/// // slice `encode` receives: exact, cannot panic.
/// unsafe impl ust::Field for Port {
///     const TYPE: ust::__private::FieldType = <u16 as ust::Field>::TYPE;
///     fn encoded_len(&self) -> usize {
///         2
///     }
///     fn encode(&self, out: &mut [u8]) {
///         out.copy_from_slice(&self.0.to_le_bytes());
///     }
/// }
/// ust::tracepoint!(myapp, listen, port: Port = Port(8080));
/// ```
///
/// A safe `impl` is refused:
///
/// ```compile_fail,E0200
/// struct Port(u16);
/// impl ust::Field for Port {
///     const TYPE: ust::__private::FieldType = <u16 as ust::Field>::TYPE;
///     fn encoded_len(&self) -> usize {
///         2
///     }
///     fn encode(&self, out: &mut [u8]) {
///         out.copy_from_slice(&self.0.to_le_bytes());
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be recorded in a tracepoint field",
    label = "unsupported tracepoint field type",
    note = "supported: u8..u64, i8..i64, usize, isize, f32, f64, bool, char, &str, &[integer], [integer; N], ust::Blob<M>, and enums with #[derive(ust::Enum)]"
)]
pub unsafe trait Field {
    /// The CTF type of the field, as described to the daemon.
    const TYPE: FieldType;
    /// Bytes this value takes in a record (a constant for fixed-size types).
    fn encoded_len(&self) -> usize;
    /// Writes the value into `out`, which is exactly [`encoded_len`](Field::encoded_len)
    /// bytes long, filling all of it; never panics (see the trait's safety contract).
    fn encode(&self, out: &mut [u8]);
    /// The value as an SDT probe operand (cargo feature `sdt`): a fixed-size value of at
    /// most 8 bytes zero-extended from its encoding, else the value's address. Types
    /// recorded from borrowed memory (text, slices) give that memory's address.
    #[doc(hidden)]
    #[inline(always)]
    fn sdt_arg(&self) -> u64 {
        crate::sdt::by_value(self)
    }
}

/// Element types of sequences (`&[T]`) and arrays (`[T; N]`): the integers, `bool` and
/// `char`. Sealed.
pub trait Element: Copy + sealed::Sealed {
    /// CTF type of one element.
    const ELEM: IntegerType;
    /// Bytes of one element.
    const SIZE: usize;
    /// Writes the elements of `items` one after another into `out` (`items.len() * SIZE`
    /// bytes).
    fn put_all(items: &[Self], out: &mut [u8]);
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! integer_field {
    ($($t:ty => $wire:ty, $ity:expr, $elem:expr;)*) => {$(
        // SAFETY: fixed size, one `copy_from_slice` of exactly that size: cannot panic.
        unsafe impl Field for $t {
            const TYPE: FieldType = FieldType::Integer($ity);
            #[inline(always)]
            fn encoded_len(&self) -> usize {
                core::mem::size_of::<$wire>()
            }
            #[inline(always)]
            fn encode(&self, out: &mut [u8]) {
                out.copy_from_slice(&(*self as $wire).to_le_bytes());
            }
        }
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const ELEM: IntegerType = $elem;
            const SIZE: usize = core::mem::size_of::<$wire>();
            #[inline]
            fn put_all(items: &[Self], out: &mut [u8]) {
                for (o, v) in out.chunks_exact_mut(Self::SIZE).zip(items) {
                    o.copy_from_slice(&(*v as $wire).to_le_bytes());
                }
            }
        }
    )*};
}

integer_field! {
    u16 => u16, IntegerType::U16, IntegerType::U16;
    u32 => u32, IntegerType::U32, IntegerType::U32;
    u64 => u64, IntegerType::U64, IntegerType::U64;
    usize => u64, IntegerType::U64, IntegerType::U64;
    i8 => i8, IntegerType::I8, IntegerType::I8;
    i16 => i16, IntegerType::I16, IntegerType::I16;
    i32 => i32, IntegerType::I32, IntegerType::I32;
    i64 => i64, IntegerType::I64, IntegerType::I64;
    isize => i64, IntegerType::I64, IntegerType::I64;
}

// SAFETY: `encode` writes exactly `encoded_len()` bytes into a slice of that length, and
// nothing in it can panic.
unsafe impl Field for u8 {
    const TYPE: FieldType = FieldType::Integer(IntegerType::U8);
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        1
    }
    #[inline(always)]
    fn encode(&self, out: &mut [u8]) {
        out[0] = *self;
    }
}
impl sealed::Sealed for u8 {}
/// Bytes in sequences and arrays print in base 16 (`&[u8]` is raw data).
impl Element for u8 {
    const ELEM: IntegerType = IntegerType::U8.with_base(16);
    const SIZE: usize = 1;
    #[inline(always)]
    fn put_all(items: &[Self], out: &mut [u8]) {
        out.copy_from_slice(items);
    }
}

// SAFETY: `encode` writes exactly `encoded_len()` bytes into a slice of that length, and
// nothing in it can panic.
unsafe impl Field for bool {
    const TYPE: FieldType = FieldType::Integer(IntegerType::U8);
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        1
    }
    #[inline(always)]
    fn encode(&self, out: &mut [u8]) {
        out[0] = *self as u8;
    }
}
impl sealed::Sealed for bool {}
impl Element for bool {
    const ELEM: IntegerType = IntegerType::U8;
    const SIZE: usize = 1;
    #[inline]
    fn put_all(items: &[Self], out: &mut [u8]) {
        for (o, v) in out.iter_mut().zip(items) {
            *o = *v as u8;
        }
    }
}

const CHAR: IntegerType = IntegerType::U32.with_base(16);

// SAFETY: `encode` writes exactly `encoded_len()` bytes into a slice of that length, and
// nothing in it can panic.
unsafe impl Field for char {
    const TYPE: FieldType = FieldType::Integer(CHAR);
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        4
    }
    #[inline(always)]
    fn encode(&self, out: &mut [u8]) {
        out.copy_from_slice(&(*self as u32).to_le_bytes());
    }
}
impl sealed::Sealed for char {}
impl Element for char {
    const ELEM: IntegerType = CHAR;
    const SIZE: usize = 4;
    #[inline]
    fn put_all(items: &[Self], out: &mut [u8]) {
        for (o, v) in out.chunks_exact_mut(4).zip(items) {
            o.copy_from_slice(&(*v as u32).to_le_bytes());
        }
    }
}

// SAFETY: `encode` writes exactly `encoded_len()` bytes into a slice of that length, and
// nothing in it can panic.
unsafe impl Field for f32 {
    const TYPE: FieldType = FieldType::Float { exp_dig: 8, mant_dig: 24 };
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        4
    }
    #[inline(always)]
    fn encode(&self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
}

// SAFETY: `encode` writes exactly `encoded_len()` bytes into a slice of that length, and
// nothing in it can panic.
unsafe impl Field for f64 {
    const TYPE: FieldType = FieldType::Float { exp_dig: 11, mant_dig: 53 };
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        8
    }
    #[inline(always)]
    fn encode(&self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
}

/// A CTF string: the bytes up to the first NUL (the whole string when it has none), then
/// one NUL. LTTng's `ctf_string` records C strings the same way.
// SAFETY: `encode` writes exactly `encoded_len()` bytes into a slice of that length, and
// nothing in it can panic.
unsafe impl Field for &str {
    const TYPE: FieldType = FieldType::String;
    #[inline]
    fn encoded_len(&self) -> usize {
        nul_or_len(self.as_bytes()) + 1
    }
    #[inline]
    fn encode(&self, out: &mut [u8]) {
        let n = out.len() - 1;
        out[..n].copy_from_slice(&self.as_bytes()[..n]);
        out[n] = 0;
    }
    #[inline(always)]
    fn sdt_arg(&self) -> u64 {
        self.as_ptr() as usize as u64
    }
}

/// The index of the first NUL of `b`, or its length: libc's `memchr` (vectorized, a few
/// instructions whatever the length), where `str::find` is a byte loop on the unaligned
/// head and tail (callgrind: a `log` record's four strings, 390 instructions of NUL search
/// with `str::find`).
#[inline]
pub(crate) fn nul_or_len(b: &[u8]) -> usize {
    // SAFETY: `b` is `b.len()` readable bytes; `memchr` reads at most that many and
    // returns null or a pointer into them.
    let p = unsafe { libc::memchr(b.as_ptr().cast(), 0, b.len()) };
    if p.is_null() {
        b.len()
    } else {
        p as usize - b.as_ptr() as usize
    }
}

/// A CTF sequence: the `u64` element count (`_<name>_length`), then the elements.
// SAFETY: `encode` writes exactly `encoded_len()` bytes into a slice of that length, and
// nothing in it can panic.
unsafe impl<T: Element> Field for &[T] {
    const TYPE: FieldType = FieldType::Sequence { length: IntegerType::U64, elem: T::ELEM, text: false };
    #[inline]
    fn encoded_len(&self) -> usize {
        8 + self.len() * T::SIZE
    }
    #[inline]
    fn encode(&self, out: &mut [u8]) {
        let (len, rest) = out.split_at_mut(8);
        len.copy_from_slice(&(self.len() as u64).to_le_bytes());
        T::put_all(self, rest);
    }
    #[inline(always)]
    fn sdt_arg(&self) -> u64 {
        self.as_ptr() as usize as u64
    }
}

/// A CTF array of `N` elements.
// SAFETY: `encode` writes exactly `encoded_len()` bytes into a slice of that length, and
// nothing in it can panic.
unsafe impl<T: Element, const N: usize> Field for [T; N] {
    const TYPE: FieldType = FieldType::Array { elem: T::ELEM, len: N as u32 };
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        N * T::SIZE
    }
    #[inline]
    fn encode(&self, out: &mut [u8]) {
        T::put_all(self, out);
    }
}

/// UTF-8 text recorded as a CTF sequence of bytes with a `u32` length and
/// `encoding = UTF8`: the `msg` field of `lttng_ust_tracef:event` and
/// `lttng_ust_tracelog:*` (LTTng's `ctf_sequence_text(char, msg, msg, unsigned int, len)`).
/// Unlike a `&str` field it may contain NUL bytes and has no terminator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Text<'a>(pub &'a [u8]);

// SAFETY: `encode` writes exactly `encoded_len()` bytes into a slice of that length, and
// nothing in it can panic.
unsafe impl Field for Text<'_> {
    const TYPE: FieldType = FieldType::Sequence { length: IntegerType::U32, elem: IntegerType::U8, text: true };
    #[inline]
    fn encoded_len(&self) -> usize {
        4 + self.0.len()
    }
    #[inline]
    fn encode(&self, out: &mut [u8]) {
        let (len, rest) = out.split_at_mut(4);
        len.copy_from_slice(&(self.0.len() as u32).to_le_bytes());
        rest.copy_from_slice(self.0);
    }
    #[inline(always)]
    fn sdt_arg(&self) -> u64 {
        self.0.as_ptr() as usize as u64
    }
}

/// [`Field`] seen through a marker type named after the tracepoint field, so that an
/// unsupported type is reported with the field's name: the macros generate a type
/// `__ust_fields::<name>` per field and use `<Type as FieldNamed<__ust_fields::<name>>>`
/// wherever the field's type matters. Implemented for every [`Field`].
#[diagnostic::on_unimplemented(
    message = "tracepoint field `{Name}`: type `{Self}` cannot be recorded",
    label = "unsupported type for field `{Name}`",
    note = "supported: u8..u64, i8..i64, usize, isize, f32, f64, bool, char, &str, &[integer], [integer; N], ust::Blob<M>, and enums with #[derive(ust::Enum)]"
)]
///
/// # Safety
/// The contract of [`Field`].
pub unsafe trait FieldNamed<Name> {
    /// [`Field::TYPE`].
    const TYPE: FieldType;
    /// [`Field::encoded_len`].
    fn encoded_len(&self) -> usize;
    /// [`Field::encode`].
    fn encode(&self, out: &mut [u8]);
    /// `Field::sdt_arg` (hidden).
    fn sdt_arg(&self) -> u64;
    /// The field's SDT operand size (`ust::__private::sdt_arg_size`).
    const SDT_SIZE: i32;
}

// SAFETY: forwards to `Field`, whose implementations uphold the same contract.
unsafe impl<T: Field + ?Sized, Name> FieldNamed<Name> for T {
    const TYPE: FieldType = T::TYPE;
    #[inline(always)]
    fn encoded_len(&self) -> usize {
        Field::encoded_len(self)
    }
    #[inline(always)]
    fn encode(&self, out: &mut [u8]) {
        Field::encode(self, out)
    }
    #[inline(always)]
    fn sdt_arg(&self) -> u64 {
        Field::sdt_arg(self)
    }
    const SDT_SIZE: i32 = crate::sdt::arg_size_of::<T>();
}

/// The container of a `#[derive(ust::Enum)]` enum without an integer `#[repr]`: `u32` when
/// every value is non-negative and fits, `i32` when some value is negative and all fit,
/// else `i64`.
#[doc(hidden)]
pub const fn default_enum_container(values: &[i64]) -> IntegerType {
    let mut neg = false;
    let mut fits_u32 = true;
    let mut fits_i32 = true;
    let mut i = 0;
    while i < values.len() {
        let v = values[i];
        if v < 0 {
            neg = true;
        }
        if v < 0 || v > u32::MAX as i64 {
            fits_u32 = false;
        }
        if v < i32::MIN as i64 || v > i32::MAX as i64 {
            fits_i32 = false;
        }
        i += 1;
    }
    if !neg && fits_u32 {
        IntegerType::U32
    } else if fits_i32 {
        IntegerType::I32
    } else {
        IntegerType::I64
    }
}

/// Size in bytes of an enumeration's container (used by `#[derive(ust::Enum)]`; folds to a
/// constant).
#[doc(hidden)]
#[inline(always)]
pub const fn enum_size(ty: &FieldType) -> usize {
    match ty {
        FieldType::Enum { container, .. } | FieldType::Integer(container) => container.size_bytes(),
        _ => 0,
    }
}

/// Builds an enumeration mapping; for hand-written [`Field`] impls.
pub const fn mapping(label: &'static str, value: i64) -> EnumMapping {
    EnumMapping { label: Cow::Borrowed(label), value }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc<T: Field>(v: T) -> Vec<u8> {
        let mut out = vec![0xAAu8; v.encoded_len()];
        v.encode(&mut out);
        out
    }

    #[test]
    fn integers_are_little_endian_and_sized() {
        assert_eq!(enc(0x12u8), [0x12]);
        assert_eq!(enc(0x1234u16), [0x34, 0x12]);
        assert_eq!(enc(0x12345678u32), [0x78, 0x56, 0x34, 0x12]);
        assert_eq!(enc(0x0102030405060708u64), [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(enc(-1i8), [0xff]);
        assert_eq!(enc(-2i16), [0xfe, 0xff]);
        assert_eq!(enc(-3i32), (-3i32).to_le_bytes());
        assert_eq!(enc(i64::MIN), i64::MIN.to_le_bytes());
        assert_eq!(enc(usize::MAX), u64::MAX.to_le_bytes());
        assert_eq!(enc(-5isize), (-5i64).to_le_bytes());
        assert_eq!(<usize as Field>::TYPE, FieldType::Integer(IntegerType::U64));
        assert_eq!(<isize as Field>::TYPE, FieldType::Integer(IntegerType::I64));
        assert_eq!(<i16 as Field>::TYPE, FieldType::Integer(IntegerType::I16));
    }

    #[test]
    fn bool_char_and_floats() {
        assert_eq!(enc(true), [1]);
        assert_eq!(enc(false), [0]);
        assert_eq!(<bool as Field>::TYPE, FieldType::Integer(IntegerType::U8));
        assert_eq!(enc('é'), 0xe9u32.to_le_bytes());
        assert_eq!(enc('\u{1F600}'), 0x1F600u32.to_le_bytes());
        assert_eq!(<char as Field>::TYPE, FieldType::Integer(IntegerType::new(32, false, 16)));
        assert_eq!(enc(1.5f32), 1.5f32.to_le_bytes());
        assert_eq!(enc(-0.0f64), (-0.0f64).to_le_bytes());
        let nan = f64::from_bits(0x7ff8_0000_dead_beef);
        assert_eq!(enc(nan), 0x7ff8_0000_dead_beefu64.to_le_bytes(), "NaN payload kept");
        assert_eq!(enc(f32::NAN), f32::NAN.to_bits().to_le_bytes());
        assert_eq!(enc(f64::NEG_INFINITY), f64::NEG_INFINITY.to_le_bytes());
        assert_eq!(<f32 as Field>::TYPE, FieldType::Float { exp_dig: 8, mant_dig: 24 });
        assert_eq!(<f64 as Field>::TYPE, FieldType::Float { exp_dig: 11, mant_dig: 53 });
    }

    #[test]
    fn strings_stop_at_first_nul() {
        assert_eq!(enc(""), [0]);
        assert_eq!(enc("abc"), *b"abc\0");
        assert_eq!(enc("ab\0cd"), *b"ab\0");
        assert_eq!(enc("\0"), [0]);
        assert_eq!(enc("héllo ☃"), *"héllo ☃\0".as_bytes());
        assert_eq!(<&str as Field>::TYPE, FieldType::String);
    }

    #[test]
    fn sequences_carry_u64_length() {
        let empty: &[u8] = &[];
        assert_eq!(enc(empty), [0u8; 8]);
        let b: &[u8] = &[1, 2, 0, 3];
        assert_eq!(enc(b), [4, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 3]);
        let w: &[i16] = &[-1, 2];
        assert_eq!(enc(w), [2, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 2, 0]);
        let e: &[u64] = &[];
        assert_eq!(enc(e), [0u8; 8]);
        let bs: &[bool] = &[true, false];
        assert_eq!(enc(bs), [2, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
        let cs: &[char] = &['a'];
        assert_eq!(enc(cs), [1, 0, 0, 0, 0, 0, 0, 0, 0x61, 0, 0, 0]);
        assert_eq!(<&[u8] as Field>::TYPE, FieldType::Sequence { length: IntegerType::U64, elem: IntegerType::new(8, false, 16), text: false });
        assert_eq!(<&[i32] as Field>::TYPE, FieldType::Sequence { length: IntegerType::U64, elem: IntegerType::I32, text: false });
    }

    #[test]
    fn arrays_are_fixed() {
        assert_eq!(enc([1u16, 2, 3]), [1, 0, 2, 0, 3, 0]);
        assert_eq!(enc([0u8; 0]), [0u8; 0]);
        assert_eq!(enc([-1i32]), [0xff; 4]);
        assert_eq!(<[u32; 3] as Field>::TYPE, FieldType::Array { elem: IntegerType::U32, len: 3 });
        assert_eq!(<[u32; 3] as Field>::TYPE.fixed_size(), Some(12));
    }

    #[test]
    fn text_is_u32_length_then_bytes() {
        assert_eq!(enc(Text(b"hi")), [2, 0, 0, 0, b'h', b'i']);
        assert_eq!(enc(Text(b"")), [0, 0, 0, 0]);
        assert_eq!(enc(Text(b"a\0b")), [3, 0, 0, 0, b'a', 0, b'b']);
        assert_eq!(<Text as Field>::TYPE, FieldType::Sequence { length: IntegerType::U32, elem: IntegerType::U8, text: true });
    }

    #[test]
    fn default_enum_containers() {
        assert_eq!(default_enum_container(&[0, 1, 2]), IntegerType::U32);
        assert_eq!(default_enum_container(&[-1, 1]), IntegerType::I32);
        assert_eq!(default_enum_container(&[u32::MAX as i64]), IntegerType::U32);
        assert_eq!(default_enum_container(&[-1, u32::MAX as i64]), IntegerType::I64);
    }

    #[test]
    fn types_match_tsdl_sizes() {
        // Every fixed-size type's encoded length equals the size ust-core derives from its
        // CTF type (what the TSDL tells readers).
        fn check<T: Field>(v: T) {
            assert_eq!(T::TYPE.fixed_size(), Some(v.encoded_len()), "{:?}", T::TYPE);
        }
        check(1u8);
        check(1u16);
        check(1u32);
        check(1u64);
        check(1usize);
        check(1i8);
        check(1i16);
        check(1i32);
        check(1i64);
        check(1isize);
        check(1f32);
        check(1f64);
        check(true);
        check('x');
        check([1u64; 5]);
    }
}
