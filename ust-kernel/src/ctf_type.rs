//! The CTF 1.8 types of the kernel trace's fields ([`CtfType`]) and their TSDL
//! declarations (CTF 1.8 sections 4 and 7): integers, text arrays, strings, sequences
//! (with the `__<name>_length` field lttng-modules writes before them), network-order
//! integers and 8-bit enumerations, and the exported fields of these types with where
//! their bytes come from ([`CtfField`], [`Source`]). [`super::ctf`] writes values of these
//! types; [`super::lttng`] names the fields.

use crate::captured::ArgPart;
use crate::format::FieldFormat;

/// CTF type of one exported field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CtfType {
    /// Integer of `bytes` bytes.
    Int {
        /// 1, 2, 4 or 8.
        bytes: usize,
        /// Signed.
        signed: bool,
        /// Printed in base 16.
        hex: bool,
    },
    /// `n` bytes of UTF-8 text (NUL-padded).
    Text(u32),
    /// `n` integers of `bytes` bytes each.
    IntArray {
        /// Element size.
        bytes: usize,
        /// Signed elements.
        signed: bool,
        /// Count.
        n: u32,
    },
    /// NUL-terminated string.
    String,
    /// A sequence of u64 in base 16 (a user-space stack), after its u32 length field
    /// `__<name>_length` (CTF 1.8 section 4.2.4).
    U64Seq,
    /// A 16-bit unsigned integer in network byte order (`byte_order = be`: LTTng's
    /// `ctf_integer_network`).
    NetU16,
    /// A sequence of an [`Int`](CtfType::Int) or [`NetU16`](CtfType::NetU16) element type,
    /// after its u32 length field `__<name>_length` (LTTng's `ctf_sequence`). (A sequence
    /// of strings is valid CTF, but the project's TSDL reader, `ust report`'s, has none.)
    Seq(Box<CtfType>),
    /// An 8-bit unsigned enumeration whose labels, in order, have the values 0, 1, …
    Enum8(&'static [&'static str]),
}

impl CtfType {
    /// The TSDL declaration of a field `name` of this type (field names get a leading `_`).
    pub fn tsdl(&self, name: &str) -> String {
        let len = || int_tsdl(4, false, "none", 10, false);
        match self {
            CtfType::Text(n) => format!("{} _{name}[{n}];", int_tsdl(1, false, "UTF8", 10, false)),
            CtfType::IntArray { bytes, signed, n } => format!("{} _{name}[{n}];", int_tsdl(*bytes, *signed, "none", 10, false)),
            CtfType::U64Seq => format!("{} __{name}_length; {} _{name}[__{name}_length];", len(), int_tsdl(8, false, "none", 16, false)),
            CtfType::Seq(elem) => format!("{} __{name}_length; {} _{name}[__{name}_length];", len(), elem.scalar()),
            _ => format!("{} _{name};", self.scalar()),
        }
    }

    /// The TSDL type of an integer, string or enumeration, without a field name (a byte
    /// for the array types, which have no scalar form).
    fn scalar(&self) -> String {
        match self {
            CtfType::Int { bytes, signed, hex } => int_tsdl(*bytes, *signed, "none", if *hex { 16 } else { 10 }, false),
            CtfType::NetU16 => int_tsdl(2, false, "none", 10, true),
            CtfType::String => "string { encoding = UTF8; }".to_string(),
            CtfType::Enum8(labels) => {
                let values: Vec<String> = labels.iter().enumerate().map(|(i, l)| format!("\"{l}\" = {i}")).collect();
                format!("enum : {} {{ {} }}", int_tsdl(1, false, "none", 10, false), values.join(", "))
            }
            _ => int_tsdl(1, false, "none", 10, false),
        }
    }
}

fn int_tsdl(bytes: usize, signed: bool, enc: &str, base: u8, big_endian: bool) -> String {
    let order = if big_endian { " byte_order = be;" } else { "" };
    format!("integer {{ size = {}; align = 8; signed = {}; encoding = {enc}; base = {base};{order} }}", bytes * 8, signed as u8)
}

/// Where an exported field's bytes come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// A field of the ftrace record.
    Format(FieldFormat),
    /// The name of the system call whose number is the record's `id` field.
    SyscallName(FieldFormat),
    /// Filled by the writer (state dump).
    Given,
    /// Slot `index` of the `args` array of a `raw_syscalls:sys_enter` record (a system
    /// call argument, truncated to the field's size).
    RawArg {
        /// The `args` field.
        args: FieldFormat,
        /// 0 to 5.
        index: usize,
    },
    /// A value copied from user memory for argument `arg` of a `raw_syscalls:sys_enter`
    /// record ([`crate::captured`]): written from the call's [`CallArgs`](crate::captured::CallArgs) joined to the
    /// record, or as missing.
    Captured {
        /// 0 to 5.
        arg: u8,
        /// Which field of it.
        part: ArgPart,
    },
}

/// One exported field.
#[derive(Clone, Debug)]
pub struct CtfField {
    /// Name without the leading `_`.
    pub name: String,
    /// Its CTF type.
    pub ty: CtfType,
    /// Where it comes from.
    pub source: Source,
}
