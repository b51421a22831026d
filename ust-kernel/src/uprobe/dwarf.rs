//! A function's arguments as tracefs fetch arguments, read from its DWARF
//! (`DW_TAG_subprogram` whose `DW_AT_low_pc` is the symbol's address): on x86-64 the
//! first six integer-class arguments arrive in `%rdi`, `%rsi`, `%rdx`, `%rcx`, `%r8`, `%r9`
//! (System V AMD64 ABI §3.2.3; rustc passes scalars and scalar pairs the same way), and
//! the return value in `%rax` (`$retval` of a return probe).
//!
//! Only what is certain is fetched: integers, `bool`, `char`, enums of integer size, raw
//! pointers and references (as their address), and `&str` / `&[T]` (two registers:
//! `NAME_ptr`, `NAME_len`; for `&str` and `&[u8]` also `NAME_bytes`, the first
//! [`CONTENT_BYTES`] bytes at the pointer, through tracefs' memory fetch
//! `+0(%REG):u8[N]`, which the converter turns into the text field `NAME`:
//! [`crate::format::EventFormat::join_probe_text`]). Floating-point arguments arrive in SSE registers, which tracefs
//! cannot fetch: they are skipped without using an integer register. At the first
//! argument of any other type (a struct passed by value, whose register use depends on
//! its layout) the list stops: what follows would be guesses.

use gimli::{AttributeValue, EndianSlice, RunTimeEndian};
use object::{Object, ObjectSection};

use super::FetchArg;

/// The System V integer argument registers, in order, as tracefs names them.
pub const ARG_REGISTERS: [&str; 6] = ["%di", "%si", "%dx", "%cx", "%r8", "%r9"];

/// How many bytes of a `&str` or `&[u8]` argument's content a probe fetches: tracefs
/// copies exactly this many from the traced process's memory at the pointer
/// (`+0(%REG):u8[32]`, Documentation/trace/uprobetracer.rst "Types": arrays of a basic
/// type; each byte is read on its own, a byte that faults reads as 0), and the trace shows
/// the first min(`len`, 32) of them. Every record holds all 32, whatever the length.
pub const CONTENT_BYTES: usize = 32;

/// The fetch and type of the content of a fat pointer whose address is in register `reg`:
/// (`+0(REG)`, `u8[CONTENT_BYTES]`).
pub fn content_fetch(reg: &str) -> (String, String) {
    (format!("+0({reg})"), format!("u8[{CONTENT_BYTES}]"))
}

/// Whether `fetch:ty` is a content fetch as [`content_fetch`] makes it: exactly
/// `+0(%REG)` with an argument register and `u8[N]` with 1 <= N <= [`CONTENT_BYTES`]. The
/// only memory form root's daemon lets an ordinary user ask for.
pub fn is_content_fetch(fetch: &str, ty: &str) -> bool {
    let reg_ok = fetch.strip_prefix("+0(").and_then(|r| r.strip_suffix(')')).is_some_and(|r| ARG_REGISTERS.contains(&r));
    let n = ty.strip_prefix("u8[").and_then(|n| n.strip_suffix(']')).filter(|n| n.bytes().all(|c| c.is_ascii_digit())).and_then(|n| n.parse::<usize>().ok());
    reg_ok && n.is_some_and(|n| (1..=CONTENT_BYTES).contains(&n))
}

type R<'a> = EndianSlice<'a, RunTimeEndian>;

/// How one DWARF type is fetched.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Class {
    /// One register, with this tracefs type (`u32`, `s64`, `x64`).
    Scalar(&'static str),
    /// A fat pointer: two registers (address, length); `bytes`: its elements are bytes
    /// (`&str`, `&[u8]`), whose content is fetched too.
    Pair {
        /// `&str` or `&[u8]`.
        bytes: bool,
    },
    /// Passed in an SSE register: not fetched, no integer register used.
    Float,
    /// Not certain: stop here.
    Unknown,
}

fn int_type(size: u64, signed: bool) -> Option<&'static str> {
    Some(match (size, signed) {
        (1, false) => "u8",
        (2, false) => "u16",
        (4, false) => "u32",
        (8, false) => "u64",
        (1, true) => "s8",
        (2, true) => "s16",
        (4, true) => "s32",
        (8, true) => "s64",
        _ => return None,
    })
}

fn udata(v: Option<AttributeValue<R<'_>>>) -> Option<u64> {
    v.and_then(|v| v.udata_value())
}

fn classify(unit: &gimli::Unit<R<'_>>, dwarf: &gimli::Dwarf<R<'_>>, ty: Option<AttributeValue<R<'_>>>) -> Class {
    let mut at = match ty {
        Some(AttributeValue::UnitRef(o)) => o,
        _ => return Class::Unknown,
    };
    for _ in 0..16 {
        let Ok(e) = unit.entry(at) else { return Class::Unknown };
        let size = udata(e.attr_value(gimli::DW_AT_byte_size));
        match e.tag() {
            gimli::DW_TAG_typedef | gimli::DW_TAG_const_type | gimli::DW_TAG_volatile_type | gimli::DW_TAG_restrict_type => {
                match e.attr_value(gimli::DW_AT_type) {
                    Some(AttributeValue::UnitRef(o)) => at = o,
                    _ => return Class::Unknown,
                }
            }
            gimli::DW_TAG_pointer_type | gimli::DW_TAG_reference_type | gimli::DW_TAG_rvalue_reference_type => return Class::Scalar("x64"),
            gimli::DW_TAG_base_type => {
                let enc = match e.attr_value(gimli::DW_AT_encoding) {
                    Some(AttributeValue::Encoding(enc)) => enc,
                    _ => return Class::Unknown,
                };
                let Some(size) = size else { return Class::Unknown };
                let signed = match enc {
                    gimli::DW_ATE_float => return Class::Float,
                    gimli::DW_ATE_signed | gimli::DW_ATE_signed_char => true,
                    gimli::DW_ATE_unsigned | gimli::DW_ATE_unsigned_char | gimli::DW_ATE_boolean | gimli::DW_ATE_UTF => false,
                    _ => return Class::Unknown,
                };
                return int_type(size, signed).map_or(Class::Unknown, Class::Scalar);
            }
            gimli::DW_TAG_enumeration_type => return size.and_then(|s| int_type(s, false)).map_or(Class::Unknown, Class::Scalar),
            gimli::DW_TAG_structure_type => {
                let name = e.attr_value(gimli::DW_AT_name).and_then(|v| dwarf.attr_string(unit, v).ok()).map(|s| s.to_string_lossy().into_owned());
                let fat = name.as_deref().is_some_and(|n| n == "&str" || n == "&mut str" || n.starts_with("&[") || n.starts_with("&mut ["));
                let bytes = name.as_deref().is_some_and(|n| matches!(n, "&str" | "&mut str" | "&[u8]" | "&mut [u8]"));
                return if fat && size == Some(16) { Class::Pair { bytes } } else { Class::Unknown };
            }
            _ => return Class::Unknown,
        }
    }
    Class::Unknown
}

/// A name tracefs and CTF both take: `[A-Za-z0-9_]`, not starting with a digit, at most
/// 32 bytes, never a `common_` or `__probe` name the format itself has.
pub fn field_name(raw: &str) -> String {
    let mut s: String = raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).take(32).collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) || s.starts_with("common_") || s.starts_with("__") {
        s.insert_str(0, "a_");
    }
    s
}

/// What the DWARF of a function says: its fetchable arguments and its return value's type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Signature {
    /// Entry arguments, in order.
    pub args: Vec<FetchArg>,
    /// The tracefs type of the return value, when it is a scalar (`None`: unit, or not
    /// certain).
    pub ret: Option<&'static str>,
    /// Why the argument list stopped early, if it did.
    pub truncated: Option<String>,
}

/// The signature of the function at link-time address `address` of the ELF image `data`,
/// or `None` when the file has no DWARF entry for it.
pub fn signature(data: &[u8], address: u64) -> Option<Signature> {
    let file = object::File::parse(data).ok()?;
    let endian = if file.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
    let load = |id: gimli::SectionId| -> Result<R<'_>, gimli::Error> {
        let bytes = file.section_by_name(id.name()).and_then(|s| s.data().ok()).unwrap_or(&[]);
        Ok(EndianSlice::new(bytes, endian))
    };
    let dwarf = gimli::Dwarf::load(load).ok()?;
    let mut headers = dwarf.units();
    while let Ok(Some(h)) = headers.next() {
        let Ok(unit) = dwarf.unit(h) else { continue };
        let mut cursor = unit.entries();
        let mut found: Option<(isize, Signature, usize, bool)> = None;
        while let Ok(Some(e)) = cursor.next_dfs() {
            if let Some((depth, sig, next_reg, stopped)) = found.as_mut() {
                if e.depth() <= *depth {
                    break;
                }
                if e.depth() != *depth + 1 || e.tag() != gimli::DW_TAG_formal_parameter || *stopped {
                    continue;
                }
                let origin = match e.attr_value(gimli::DW_AT_abstract_origin) {
                    Some(AttributeValue::UnitRef(o)) => unit.entry(o).ok(),
                    _ => None,
                };
                let get = |at| e.attr_value(at).or_else(|| origin.as_ref().and_then(|o| o.attr_value(at)));
                let raw = get(gimli::DW_AT_name).and_then(|v| dwarf.attr_string(&unit, v).ok()).map(|s| s.to_string_lossy().into_owned());
                let name = field_name(&raw.unwrap_or_else(|| format!("arg{}", sig.args.len())));
                match classify(&unit, &dwarf, get(gimli::DW_AT_type)) {
                    Class::Scalar(ty) if *next_reg < ARG_REGISTERS.len() => {
                        sig.args.push(FetchArg { name, fetch: ARG_REGISTERS[*next_reg].into(), ty: ty.into() });
                        *next_reg += 1;
                    }
                    Class::Pair { bytes } if *next_reg + 1 < ARG_REGISTERS.len() => {
                        // Room for the longest suffix: the three names keep one base.
                        let base: String = name.chars().take(32 - "_bytes".len()).collect();
                        let reg = ARG_REGISTERS[*next_reg];
                        sig.args.push(FetchArg { name: format!("{base}_ptr"), fetch: reg.into(), ty: "x64".into() });
                        sig.args.push(FetchArg { name: format!("{base}_len"), fetch: ARG_REGISTERS[*next_reg + 1].into(), ty: "u64".into() });
                        if bytes {
                            let (fetch, ty) = content_fetch(reg);
                            sig.args.push(FetchArg { name: format!("{base}_bytes"), fetch, ty });
                        }
                        *next_reg += 2;
                    }
                    Class::Float => {}
                    Class::Unknown => {
                        sig.truncated =
                            Some(format!("argument {name} has a type whose registers are not certain: it and the arguments after it are not recorded"));
                        *stopped = true;
                    }
                    _ => {
                        sig.truncated = Some(format!("argument {name} is passed on the stack: it and the arguments after it are not recorded"));
                        *stopped = true;
                    }
                }
                continue;
            }
            if e.tag() != gimli::DW_TAG_subprogram {
                continue;
            }
            let low = match e.attr_value(gimli::DW_AT_low_pc) {
                Some(v) => dwarf.attr_address(&unit, v).ok().flatten(),
                None => None,
            };
            if low != Some(address) {
                continue;
            }
            let mut ty = e.attr_value(gimli::DW_AT_type);
            for link in [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification] {
                if ty.is_none() {
                    if let Some(AttributeValue::UnitRef(o)) = e.attr_value(link) {
                        ty = unit.entry(o).ok().and_then(|o| o.attr_value(gimli::DW_AT_type));
                    }
                }
            }
            let ret = match ty {
                None => None,
                t => match classify(&unit, &dwarf, t) {
                    Class::Scalar(s) => Some(s),
                    _ => None,
                },
            };
            found = Some((e.depth(), Signature { ret, ..Default::default() }, 0, false));
        }
        if let Some((_, sig, _, _)) = found {
            return Some(sig);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe() {
        assert_eq!(field_name("count"), "count");
        assert_eq!(field_name("0x"), "a_0x");
        assert_eq!(field_name("__probe_ip"), "a___probe_ip");
        assert_eq!(field_name("common_pid"), "a_common_pid");
        assert_eq!(field_name("a-b"), "a_b");
        assert_eq!(field_name(""), "a_");
    }

    #[test]
    fn the_test_binary_has_its_own_signature() {
        // This test binary is built with DWARF: its own function below has two integers.
        #[inline(never)]
        fn probed(a: u32, b: i64, s: &str) -> u64 {
            u64::from(a) + b as u64 + s.len() as u64
        }
        let call: fn(u32, i64, &str) -> u64 = std::hint::black_box(probed);
        std::hint::black_box(call(std::hint::black_box(1), 2, "x"));
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let funcs = super::super::elf::functions(exe.as_slice()).unwrap();
        let f = super::super::elf::resolve(&funcs, "probed").expect("the function's symbol");
        let sig = signature(&exe, f.address).expect("DWARF of a test binary");
        let got: Vec<_> = sig.args.iter().map(|a| (a.name.as_str(), a.fetch.as_str(), a.ty.as_str())).collect();
        assert_eq!(got, vec![("a", "%di", "u32"), ("b", "%si", "s64"), ("s_ptr", "%dx", "x64"), ("s_len", "%cx", "u64"), ("s_bytes", "+0(%dx)", "u8[32]")]);
        assert_eq!(sig.ret, Some("u64"));
    }

    #[test]
    fn only_the_content_form_is_a_content_fetch() {
        let (f, t) = content_fetch("%si");
        assert!(is_content_fetch(&f, &t), "{f}:{t}");
        assert!(is_content_fetch("+0(%r9)", "u8[1]"));
        for (f, t) in [
            ("+0(%si)", "u8[33]"),
            ("+0(%si)", "u8[0]"),
            ("+0(%si)", "u8[+4]"),
            ("+0(%si)", "u16[4]"),
            ("+0(%si)", "string"),
            ("+0(%si)", "ustring"),
            ("+8(%si)", "u8[32]"),
            ("-8(%si)", "u8[32]"),
            ("+0(%ax)", "u8[32]"),
            ("+0(%sp)", "u8[32]"),
            ("+0(+0(%si))", "u8[32]"),
            ("%si", "u8[32]"),
            ("@0x1000", "u8[32]"),
        ] {
            assert!(!is_content_fetch(f, t), "{f}:{t}");
        }
    }
}
