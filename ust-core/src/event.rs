//! Static descriptions of events: provider, name, level and the CTF type of every field.
//!
//! One set of types serves both sides. In an application they are `static` data built by the
//! `ust::tracepoint!` macro (every string a `Cow::Borrowed`) and collected at link time; the
//! runtime sends them to the daemon at registration, which receives owned copies and writes
//! them into the CTF metadata.
//!
//! Field layout follows LTTng-UST on x86-64: packed, every field byte-aligned (`align = 8`
//! bits in TSDL), little-endian, so a fixed-size event has a constant size. Sequences carry
//! their length in a separate field named `_<name>_length` written just before the elements,
//! as LTTng's `ctf_sequence` does (CTF 1.8 section 4.2.5, "Sequences").

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::level::Level;

/// A CTF integer type (CTF 1.8 section 4.1.5): size in bits (8, 16, 32 or 64), signedness,
/// and the base babeltrace2 prints it in (2, 8, 10 or 16). Byte-aligned, little-endian.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IntegerType {
    /// Size in bits: 8, 16, 32 or 64.
    pub size_bits: u8,
    /// Two's complement when true.
    pub signed: bool,
    /// Display base: 2, 8, 10 or 16.
    pub base: u8,
}

impl IntegerType {
    /// `u8`, base 10.
    pub const U8: IntegerType = IntegerType::new(8, false, 10);
    /// `u16`, base 10.
    pub const U16: IntegerType = IntegerType::new(16, false, 10);
    /// `u32`, base 10.
    pub const U32: IntegerType = IntegerType::new(32, false, 10);
    /// `u64`, base 10 (also `usize`, 64-bit on the supported targets).
    pub const U64: IntegerType = IntegerType::new(64, false, 10);
    /// `i8`, base 10.
    pub const I8: IntegerType = IntegerType::new(8, true, 10);
    /// `i16`, base 10.
    pub const I16: IntegerType = IntegerType::new(16, true, 10);
    /// `i32`, base 10.
    pub const I32: IntegerType = IntegerType::new(32, true, 10);
    /// `i64`, base 10 (also `isize`).
    pub const I64: IntegerType = IntegerType::new(64, true, 10);

    /// An integer type of `size_bits` bits.
    pub const fn new(size_bits: u8, signed: bool, base: u8) -> IntegerType {
        IntegerType { size_bits, signed, base }
    }

    /// The same type printed in another base.
    pub const fn with_base(self, base: u8) -> IntegerType {
        IntegerType { base, ..self }
    }

    /// Size in bytes (1, 2, 4 or 8).
    pub const fn size_bytes(self) -> usize {
        self.size_bits as usize / 8
    }

    /// True for the sizes and bases this crate can encode.
    pub fn is_valid(self) -> bool {
        matches!(self.size_bits, 8 | 16 | 32 | 64) && matches!(self.base, 2 | 8 | 10 | 16)
    }

    /// TSDL text of the type (CTF 1.8 section 4.1.5), for example
    /// `integer { size = 32; align = 8; signed = 1; encoding = none; base = 10; }`.
    pub fn tsdl(self) -> String {
        self.tsdl_with_encoding("none")
    }

    fn tsdl_with_encoding(self, encoding: &str) -> String {
        format!("integer {{ size = {}; align = 8; signed = {}; encoding = {}; base = {}; }}", self.size_bits, self.signed as u8, encoding, self.base)
    }
}

/// One label of a CTF enumeration (CTF 1.8 section 4.2.4): a name for one value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnumMapping {
    /// The label babeltrace2 prints.
    pub label: Cow<'static, str>,
    /// The integer value of the label.
    pub value: i64,
}

/// The CTF type of one event field and how its bytes are laid out in a record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FieldType {
    /// A fixed-size integer. `bool` is an unsigned 8-bit integer; `char` an unsigned 32-bit
    /// integer printed in base 16 (docs/DESIGN.md#field-types).
    Integer(IntegerType),
    /// An IEEE 754 float (CTF 1.8 section 4.1.7): `f32` is `exp_dig = 8, mant_dig = 24`,
    /// `f64` is `exp_dig = 11, mant_dig = 53`.
    Float {
        /// Exponent digits.
        exp_dig: u8,
        /// Mantissa digits, including the implicit bit.
        mant_dig: u8,
    },
    /// A NUL-terminated UTF-8 string (CTF 1.8 section 4.2.5). A Rust `&str` is recorded up to
    /// its first NUL.
    String,
    /// A length field (`_<name>_length`, type `length`) followed by that many elements.
    /// With `text`, elements are UTF-8 bytes and babeltrace2 prints the sequence as a string
    /// (`lttng_ust_tracef:event`'s `msg` is such a sequence).
    Sequence {
        /// Type of the length field written before the elements.
        length: IntegerType,
        /// Type of each element.
        elem: IntegerType,
        /// Elements are UTF-8 text (`encoding = UTF8`).
        text: bool,
    },
    /// `len` elements of type `elem` (CTF 1.8 section 4.2.3).
    Array {
        /// Type of each element.
        elem: IntegerType,
        /// Number of elements.
        len: u32,
    },
    /// A CTF enumeration over an integer container (a fieldless Rust enum with
    /// `#[derive(ust::Enum)]`).
    Enum {
        /// The integer that holds the value.
        container: IntegerType,
        /// The Rust type name, for humans.
        name: Cow<'static, str>,
        /// Labels and their values.
        mappings: Cow<'static, [EnumMapping]>,
    },
    /// A value whose type is known only when it is recorded (a `tracing` field): a tag
    /// byte ([`DynamicTag`]) followed by the value, declared in TSDL as an enumeration
    /// `__<name>_tag` and a variant `_<name>` selected by it (CTF 1.8 section 4.2.2), so
    /// an integer stays an integer in the trace. babeltrace2 prints
    /// `name = { i64 = -3 }`, `name = { str = "text" }`.
    Dynamic,
    /// Opaque bytes tagged with a media type (LTTng 2.16's dynamic-length BLOB field, a
    /// `ust::Blob<M>` field): in CTF 1.8 a sequence of unsigned 8-bit integers printed in
    /// base 16 after a `u64` length field `_<name>_length`, preceded by the comment
    /// ``// dynamic length BLOB field with `<media type>` media type`` that lttng-sessiond
    /// 2.16 writes (`tsdl-trace-class-visitor.cpp`), so readers that know the convention
    /// (ust's ctf-reader, LTTng's tests) find the media type and babeltrace2 2.0 reads a
    /// plain sequence. Registered by runtimes of ABI minor 6 or later.
    Blob {
        /// RFC 6838 media type, `type/subtype[; parameters]` ([`valid_media_type`]).
        media_type: Cow<'static, str>,
    },
}

/// Longest media type a [`FieldType::Blob`] may carry, in bytes (LTTng-UST's
/// `LTTNG_UST_ABI_SYM_NAME_LEN` is 256 with its NUL).
pub const MEDIA_TYPE_MAX: usize = 255;

/// Whether `s` is a media type a [`FieldType::Blob`] may carry: `type/subtype`, each an
/// RFC 6838 `restricted-name` (a letter or digit, then up to 126 of letters, digits and
/// ``!#$&^_.+-``), optionally followed by `;` and parameters of printable ASCII other
/// than `` ` `` and `\`; at most [`MEDIA_TYPE_MAX`] bytes. Nothing that could end the
/// TSDL comment or the CTF 2 JSON string the media type is written into. A `const fn`:
/// `ust::media_type!` checks its argument at compile time.
pub const fn valid_media_type(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > MEDIA_TYPE_MAX {
        return false;
    }
    // 0: in the type, 1: in the subtype, 2: in the parameters.
    let mut part = 0;
    let mut run = 0usize;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if part == 2 {
            if c < 0x20 || c > 0x7e || c == b'`' || c == b'\\' {
                return false;
            }
        } else if c == b'/' && part == 0 {
            if run == 0 {
                return false;
            }
            part = 1;
            run = 0;
        } else if c == b';' && part == 1 {
            if run == 0 {
                return false;
            }
            part = 2;
        } else {
            let first = run == 0;
            let ok = c.is_ascii_alphanumeric() || (!first && matches!(c, b'!' | b'#' | b'$' | b'&' | b'^' | b'_' | b'.' | b'+' | b'-'));
            if !ok || run >= 127 {
                return false;
            }
            run += 1;
        }
        i += 1;
    }
    part == 2 || (part == 1 && run > 0)
}

/// The kinds of value a [`FieldType::Dynamic`] field holds, and their tag bytes.
///
/// | tag | kind   | bytes after the tag        |
/// |-----|--------|----------------------------|
/// | 0   | `none` | 0 (the field was not set)  |
/// | 1   | `i64`  | 8, little-endian           |
/// | 2   | `u64`  | 8, little-endian           |
/// | 3   | `f64`  | 8, IEEE 754 little-endian  |
/// | 4   | `bool` | 1 (0 or 1)                 |
/// | 5   | `str`  | UTF-8 up to and with a NUL |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum DynamicTag {
    /// Not recorded.
    None = 0,
    /// A signed integer.
    I64 = 1,
    /// An unsigned integer.
    U64 = 2,
    /// A float.
    F64 = 3,
    /// A boolean.
    Bool = 4,
    /// A string (also `Debug`-formatted values).
    Str = 5,
}

impl DynamicTag {
    /// The tag of byte `b`.
    pub fn from_byte(b: u8) -> Option<DynamicTag> {
        Some(match b {
            0 => DynamicTag::None,
            1 => DynamicTag::I64,
            2 => DynamicTag::U64,
            3 => DynamicTag::F64,
            4 => DynamicTag::Bool,
            5 => DynamicTag::Str,
            _ => return None,
        })
    }
}

/// Size of a [`FieldType::Dynamic`] value at the start of `b` (tag included), or `None`
/// when the tag is unknown or `b` is too short.
pub fn dynamic_size(b: &[u8]) -> Option<usize> {
    let n = match DynamicTag::from_byte(*b.first()?)? {
        DynamicTag::None => 1,
        DynamicTag::I64 | DynamicTag::U64 | DynamicTag::F64 => 9,
        DynamicTag::Bool => 2,
        DynamicTag::Str => 1 + b[1..].iter().position(|&c| c == 0)? + 1,
    };
    (n <= b.len()).then_some(n)
}

/// Errors in an event description, found by [`EventDesc::validate`]. The daemon validates
/// every description it receives: an application is not trusted to send sane ones.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DescError {
    /// A provider, event or field name is empty, too long, or not an identifier.
    #[error("invalid name {0:?}: names are 1 to 128 characters of [A-Za-z0-9_], not starting with a digit")]
    BadName(String),
    /// An integer type has a size or base this format does not support.
    #[error("field {field:?}: unsupported integer type {ty:?}")]
    BadInteger {
        /// The field.
        field: String,
        /// Its type.
        ty: IntegerType,
    },
    /// A float type other than f32 or f64.
    #[error("field {0:?}: unsupported float type")]
    BadFloat(String),
    /// Two fields have the same name (or a field is named like another's length field).
    #[error("duplicate field name {0:?}")]
    DuplicateField(String),
    /// An enumeration with no label, or a label value that does not fit the container.
    #[error("field {0:?}: bad enumeration")]
    BadEnum(String),
    /// Too many fields.
    #[error("too many fields ({0}, at most 256)")]
    TooManyFields(usize),
    /// A BLOB field whose media type is not `type/subtype[; parameters]`
    /// ([`valid_media_type`]).
    #[error("field {0:?}: bad media type (expected type/subtype, printable ASCII, at most 255 bytes)")]
    BadMediaType(String),
}

impl FieldType {
    /// Size in bytes of a value of this type when it does not depend on the value
    /// (integers, floats, arrays, enums); `None` for strings and sequences.
    /// A `const fn`: the tracepoint macros lay out fixed-size payloads at compile time.
    pub const fn fixed_size(&self) -> Option<usize> {
        match self {
            FieldType::Integer(i) => Some(i.size_bytes()),
            FieldType::Float { exp_dig, .. } => Some(if *exp_dig == 8 { 4 } else { 8 }),
            FieldType::String | FieldType::Sequence { .. } | FieldType::Dynamic | FieldType::Blob { .. } => None,
            FieldType::Array { elem, len } => Some(elem.size_bytes() * *len as usize),
            FieldType::Enum { container, .. } => Some(container.size_bytes()),
        }
    }

    /// TSDL declaration of a field named `name` of this type (CTF 1.8 section 7.3), with the
    /// leading `_` that LTTng puts before field names (CTF readers strip one). A sequence
    /// yields two declarations, its length field first. Each declaration ends with `;\n`.
    pub fn tsdl(&self, name: &str) -> String {
        match self {
            FieldType::Integer(i) => format!("{} _{};\n", i.tsdl(), name),
            FieldType::Float { exp_dig, mant_dig } => format!(
                "floating_point {{ exp_dig = {exp_dig}; mant_dig = {mant_dig}; byte_order = le; align = 8; }} _{name};\n"
            ),
            FieldType::String => format!("string {{ encoding = UTF8; }} _{name};\n"),
            FieldType::Sequence { length, elem, text } => {
                let enc = if *text { "UTF8" } else { "none" };
                format!(
                    "{} __{name}_length;\n{} _{name}[ __{name}_length ];\n",
                    length.tsdl(),
                    elem.tsdl_with_encoding(enc)
                )
            }
            FieldType::Array { elem, len } => format!("{} _{name}[{len}];\n", elem.tsdl()),
            FieldType::Blob { media_type } => format!(
                "{} __{name}_length;\n// dynamic length BLOB field with `{}` media type\n{} _{name}[ __{name}_length ];\n",
                IntegerType::U64.tsdl(),
                media_type.replace('\n', "\\n"),
                BLOB_ELEM.tsdl()
            ),
            FieldType::Dynamic => format!(
                "enum : integer {{ size = 8; align = 8; signed = 0; encoding = none; base = 10; }} {{ \"none\" = 0, \"i64\" = 1, \"u64\" = 2, \"f64\" = 3, \"bool\" = 4, \"str\" = 5 }} __{name}_tag;\n\
                 variant <__{name}_tag> {{ struct {{ }} none; {} i64; {} u64; floating_point {{ exp_dig = 11; mant_dig = 53; byte_order = le; align = 8; }} f64; {} bool; string {{ encoding = UTF8; }} str; }} _{name};\n",
                IntegerType::I64.tsdl(),
                IntegerType::U64.tsdl(),
                IntegerType::U8.tsdl()
            ),
            FieldType::Enum { container, mappings, .. } => {
                let mut s = format!("enum : {} {{\n", container.tsdl());
                for m in mappings.iter() {
                    s.push_str(&format!("\t\t\t\"{}\" = {},\n", escape_tsdl(&m.label), m.value));
                }
                s.push_str(&format!("\t\t}} _{name};\n"));
                s
            }
        }
    }

    fn validate(&self, field: &str) -> Result<(), DescError> {
        let int = |ty: IntegerType| {
            if ty.is_valid() {
                Ok(())
            } else {
                Err(DescError::BadInteger { field: field.to_string(), ty })
            }
        };
        match self {
            FieldType::Integer(i) => int(*i),
            FieldType::Float { exp_dig, mant_dig } => match (exp_dig, mant_dig) {
                (8, 24) | (11, 53) => Ok(()),
                _ => Err(DescError::BadFloat(field.to_string())),
            },
            FieldType::String | FieldType::Dynamic => Ok(()),
            FieldType::Blob { media_type } => {
                if valid_media_type(media_type) {
                    Ok(())
                } else {
                    Err(DescError::BadMediaType(field.to_string()))
                }
            }
            FieldType::Sequence { length, elem, .. } => {
                int(*length)?;
                if length.signed {
                    return Err(DescError::BadInteger { field: field.to_string(), ty: *length });
                }
                int(*elem)
            }
            FieldType::Array { elem, .. } => int(*elem),
            FieldType::Enum { container, mappings, .. } => {
                int(*container)?;
                let bits = container.size_bits as u32;
                let fits = |v: i64| {
                    if bits == 64 {
                        true
                    } else if container.signed {
                        v >= -(1i64 << (bits - 1)) && v < (1i64 << (bits - 1))
                    } else {
                        v >= 0 && v < (1i64 << bits)
                    }
                };
                if mappings.is_empty() || mappings.iter().any(|m| !fits(m.value) || m.label.is_empty()) {
                    return Err(DescError::BadEnum(field.to_string()));
                }
                Ok(())
            }
        }
    }
}

/// Element type of a [`FieldType::Blob`]: an unsigned byte printed in base 16, as
/// lttng-sessiond 2.16 writes a BLOB's elements in CTF 1.8.
pub const BLOB_ELEM: IntegerType = IntegerType::U8.with_base(16);

impl FieldType {
    /// Whether a record of this type starts with a `u64` length field named
    /// `_<name>_length` (sequences and BLOBs).
    pub const fn has_length_field(&self) -> bool {
        matches!(self, FieldType::Sequence { .. } | FieldType::Blob { .. })
    }

    /// The sequence this type is written as: itself for a sequence, `u64` length and
    /// [`BLOB_ELEM`] elements for a BLOB (how filters, readers and decoders see it).
    pub fn as_sequence(&self) -> Option<(IntegerType, IntegerType, bool)> {
        match self {
            FieldType::Sequence { length, elem, text } => Some((*length, *elem, *text)),
            FieldType::Blob { .. } => Some((IntegerType::U64, BLOB_ELEM, false)),
            _ => None,
        }
    }
}

/// Escapes a string for a TSDL string literal.
pub fn escape_tsdl(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// One field of an event: its name (an identifier) and its type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldDesc {
    /// Field name as written in the tracepoint (without LTTng's leading `_`).
    pub name: Cow<'static, str>,
    /// Its CTF type.
    pub ty: FieldType,
}

/// Where each field of a payload whose fields are all fixed-size starts, and the payload
/// size: `(offsets, size)` with `offsets[i]` the byte offset of `fields[i]` (fields are
/// packed, byte-aligned, in order: docs/DESIGN.md, "Field types"); `None` when a field is
/// a string, a sequence or dynamic, or there are more than `N` fields. A `const fn`, for
/// the tracepoint macros (`N` is their field count).
pub const fn fixed_layout<const N: usize>(fields: &[FieldDesc]) -> Option<([usize; N], usize)> {
    if fields.len() != N {
        return None;
    }
    let mut offsets = [0usize; N];
    let mut at = 0usize;
    let mut i = 0;
    while i < N {
        offsets[i] = at;
        match fields[i].ty.fixed_size() {
            Some(n) => at += n,
            None => return None,
        }
        i += 1;
    }
    Some((offsets, at))
}

/// Everything known about an event before it fires: provider, name, level, fields, and the
/// source location of the call site. `provider:name` is the event name in the trace
/// (LTTng's convention).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventDesc {
    /// Provider (LTTng's tracepoint provider), an identifier.
    pub provider: Cow<'static, str>,
    /// Event name within the provider, an identifier.
    pub name: Cow<'static, str>,
    /// Log level.
    pub level: Level,
    /// Fields in record order.
    pub fields: Cow<'static, [FieldDesc]>,
    /// `file:line` of the call site (LTTng's `model.emf.uri` is the closest TSDL attribute).
    pub location: Cow<'static, str>,
}

impl EventDesc {
    /// `provider:name`, the name babeltrace2 prints.
    pub fn full_name(&self) -> String {
        format!("{}:{}", self.provider, self.name)
    }

    /// Size in bytes of the payload when every field has a fixed size.
    pub fn fixed_payload_size(&self) -> Option<usize> {
        self.fields.iter().map(|f| f.ty.fixed_size()).sum()
    }

    /// Checks names and types. The daemon calls it on every description it receives.
    ///
    /// # Errors
    /// The first problem found, as a [`DescError`].
    pub fn validate(&self) -> Result<(), DescError> {
        check_ident(&self.provider)?;
        check_ident(&self.name)?;
        if self.fields.len() > 256 {
            return Err(DescError::TooManyFields(self.fields.len()));
        }
        let mut names: Vec<String> = Vec::new();
        for f in self.fields.iter() {
            check_ident(&f.name)?;
            f.ty.validate(&f.name)?;
            let mut own = vec![f.name.to_string()];
            if f.ty.has_length_field() {
                own.push(format!("_{}_length", f.name));
            }
            if matches!(f.ty, FieldType::Dynamic) {
                own.push(format!("_{}_tag", f.name));
            }
            for n in own {
                if names.contains(&n) {
                    return Err(DescError::DuplicateField(n));
                }
                names.push(n);
            }
        }
        Ok(())
    }
}

fn check_ident(s: &str) -> Result<(), DescError> {
    let ok = !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') && !s.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(())
    } else {
        Err(DescError::BadName(s.chars().take(140).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIELDS: &[FieldDesc] = &[
        FieldDesc { name: Cow::Borrowed("a"), ty: FieldType::Integer(IntegerType::U8) },
        FieldDesc { name: Cow::Borrowed("raw"), ty: FieldType::Sequence { length: IntegerType::U64, elem: IntegerType::U8.with_base(16), text: false } },
        FieldDesc { name: Cow::Borrowed("f"), ty: FieldType::Float { exp_dig: 11, mant_dig: 53 } },
    ];

    static DESC: EventDesc = EventDesc {
        provider: Cow::Borrowed("prov"),
        name: Cow::Borrowed("ev"),
        level: Level::Info,
        fields: Cow::Borrowed(FIELDS),
        location: Cow::Borrowed("x.rs:1"),
    };

    #[test]
    fn static_desc_round_trips_through_json() {
        let json = serde_json::to_string(&DESC).unwrap();
        let back: EventDesc = serde_json::from_str(&json).unwrap();
        assert_eq!(back, DESC);
        assert_eq!(back.full_name(), "prov:ev");
        assert!(back.validate().is_ok());
    }

    #[test]
    fn sizes() {
        assert_eq!(DESC.fixed_payload_size(), None);
        assert_eq!(FieldType::Array { elem: IntegerType::I32, len: 3 }.fixed_size(), Some(12));
        assert_eq!(FieldType::Float { exp_dig: 8, mant_dig: 24 }.fixed_size(), Some(4));
    }

    #[test]
    fn fixed_layout_packs_fields_in_order_or_answers_none() {
        // A string, a sequence or a field count other than N: no fixed layout.
        assert_eq!(fixed_layout::<3>(FIELDS), None);
        assert_eq!(fixed_layout::<2>(FIELDS), None);
        const PACKED: &[FieldDesc] = &[
            FieldDesc { name: Cow::Borrowed("a"), ty: FieldType::Integer(IntegerType::U8) },
            FieldDesc { name: Cow::Borrowed("f"), ty: FieldType::Float { exp_dig: 11, mant_dig: 53 } },
            FieldDesc { name: Cow::Borrowed("r"), ty: FieldType::Array { elem: IntegerType::U16, len: 3 } },
            FieldDesc { name: Cow::Borrowed("i"), ty: FieldType::Integer(IntegerType::I32) },
        ];
        // Evaluated at compile time, as the macros do.
        const LAYOUT: Option<([usize; 4], usize)> = fixed_layout::<4>(PACKED);
        assert_eq!(LAYOUT, Some(([0, 1, 9, 15], 19)));
        assert_eq!(fixed_layout::<0>(&[]), Some(([], 0)));
        let strings = [FieldDesc { name: Cow::Borrowed("s"), ty: FieldType::String }];
        assert_eq!(fixed_layout::<1>(&strings), None);
    }

    #[test]
    fn tsdl_of_sequence_names_length_field() {
        let t = FIELDS[1].ty.tsdl("raw");
        assert!(t.contains("__raw_length;"), "{t}");
        assert!(t.contains("_raw[ __raw_length ];"), "{t}");
    }

    #[test]
    fn blob_is_a_hex_byte_sequence_with_lttng_216_comment() {
        let ty = FieldType::Blob { media_type: Cow::Borrowed("image/png") };
        let t = ty.tsdl("image");
        assert_eq!(
            t,
            "integer { size = 64; align = 8; signed = 0; encoding = none; base = 10; } __image_length;\n\
             // dynamic length BLOB field with `image/png` media type\n\
             integer { size = 8; align = 8; signed = 0; encoding = none; base = 16; } _image[ __image_length ];\n"
        );
        assert_eq!(ty.fixed_size(), None);
        assert_eq!(ty.as_sequence(), Some((IntegerType::U64, IntegerType::U8.with_base(16), false)));
        let mut d = DESC.clone();
        d.fields = Cow::Owned(vec![
            FieldDesc { name: Cow::Borrowed("image"), ty: ty.clone() },
            FieldDesc { name: Cow::Borrowed("_image_length"), ty: FieldType::String },
        ]);
        assert_eq!(d.validate(), Err(DescError::DuplicateField("_image_length".into())));
        d.fields = Cow::Owned(vec![FieldDesc { name: Cow::Borrowed("image"), ty: FieldType::Blob { media_type: Cow::Borrowed("image/png\n} x;") } }]);
        assert_eq!(d.validate(), Err(DescError::BadMediaType("image".into())));
        // The wire form an ABI-6 runtime sends, and an older runtime's descriptions still read.
        let json = serde_json::to_string(&ty).unwrap();
        assert_eq!(json, r#"{"Blob":{"media_type":"image/png"}}"#);
        assert_eq!(serde_json::from_str::<FieldType>(&json).unwrap(), ty);
    }

    #[test]
    fn media_types_follow_rfc_6838_names() {
        for ok in ["image/png", "application/octet-stream", "application/vnd.ms-excel", "text/plain; charset=utf-8", "a/b", "application/x.foo+json"] {
            assert!(valid_media_type(ok), "{ok}");
        }
        let long_sub = format!("a/{}", "b".repeat(128));
        let too_long = format!("text/plain; {}", "x".repeat(250));
        for bad in [
            "",
            "png",
            "/png",
            "image/",
            "image/png/x",
            "-a/b",
            "a/-b",
            "im age/png",
            "a/b; `x`",
            "a/b;\n",
            "a/b; \\",
            "é/b",
            long_sub.as_str(),
            too_long.as_str(),
        ] {
            assert!(!valid_media_type(bad), "{bad:?}");
        }
    }

    #[test]
    fn validation_rejects_bad_descriptions() {
        let mut d = DESC.clone();
        d.name = Cow::Owned("9bad".into());
        assert!(matches!(d.validate(), Err(DescError::BadName(_))));
        let mut d = DESC.clone();
        d.fields =
            Cow::Owned(vec![FieldDesc { name: Cow::Borrowed("x"), ty: FieldType::String }, FieldDesc { name: Cow::Borrowed("x"), ty: FieldType::String }]);
        assert!(matches!(d.validate(), Err(DescError::DuplicateField(_))));
        let mut d = DESC.clone();
        d.fields = Cow::Owned(vec![FieldDesc { name: Cow::Borrowed("x"), ty: FieldType::Integer(IntegerType::new(12, false, 10)) }]);
        assert!(matches!(d.validate(), Err(DescError::BadInteger { .. })));
    }
}
