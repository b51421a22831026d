//! Event format files of tracefs: `events/<system>/<event>/format`, the kernel's own
//! description of the binary layout of each event's record in the ftrace ring buffer
//! (Documentation/trace/events.rst, "Event formats"). One line per field:
//!
//! ```text
//! name: sched_switch
//! ID: 372
//! format:
//!     field:unsigned short common_type;    offset:0;    size:2;    signed:0;
//!     ...
//!     field:char prev_comm[16];    offset:8;    size:16;    signed:0;
//!     field:__data_loc char[] name;    offset:12;    size:4;    signed:0;
//! ```
//!
//! Offsets are bytes from the start of the record's payload (the `common_*` fields of
//! `struct trace_entry` come first). A `__data_loc` field is a `u32` holding
//! `(length << 16) | offset` of a string stored later in the same record; `__rel_loc` is the
//! same with the offset counted from the end of the field itself. A uprobe's array fetch
//! (`NAME=+0(%dx):u8[32]`) appears as `field:u8 NAME[];` with `size:32`: the count is
//! the size over the element type's.

use std::path::Path;

/// How a field's bytes are to be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// A little-endian integer of `size` bytes (1, 2, 4 or 8); `hex` for pointers.
    Int {
        /// Print in base 16 (pointers, `void *`).
        hex: bool,
    },
    /// `char x[N]`: N bytes of text, NUL-padded (`comm` fields).
    CharArray(u32),
    /// `T x[N]` with integer elements of `size / N` bytes.
    IntArray(u32),
    /// `__data_loc char[]` or `__rel_loc char[]`: a string stored elsewhere in the record.
    DynString {
        /// `__rel_loc`: the offset counts from the end of this field.
        relative: bool,
    },
    /// The content of a `&str`/`&[u8]` argument of a uprobe: the first `len` bytes of
    /// this `u8` array, `len` being the integer field at `len_offset` (of `len_size`
    /// bytes); text ([`EventFormat::join_probe_text`], [`probe_text`]).
    ProbeText {
        /// Offset of the length field in the payload.
        len_offset: usize,
        /// Its size in bytes (1, 2, 4 or 8).
        len_size: usize,
    },
    /// Anything else (other dynamic arrays, odd sizes): kept as raw bytes, not exported.
    Other,
}

/// One field line of a format file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldFormat {
    /// Field name (`prev_comm`).
    pub name: String,
    /// The C declaration's type (`char`, `pid_t`, `__data_loc char[]`).
    pub c_type: String,
    /// Byte offset in the payload.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
    /// `signed:1`.
    pub signed: bool,
    /// How to read it.
    pub kind: FieldKind,
}

/// A parsed format file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    /// Subsystem (`sched`), the directory above the event's.
    pub system: String,
    /// Event name (`sched_switch`).
    pub name: String,
    /// The `common_type` value that identifies the event's records.
    pub id: u16,
    /// Fields after the `common_*` ones, in order.
    pub fields: Vec<FieldFormat>,
}

/// The element count of an array field declared `TY NAME[COUNT]`: COUNT, or for the
/// kernel's probe arrays (`u8 NAME[]`) the size over the size of the fixed-size type
/// `TY` (`u8`…`u64`, `s8`…`s64`, `x8`…`x64`).
fn array_count(count: &str, ty: &str, size: usize) -> Option<u32> {
    if !count.is_empty() {
        return count.parse().ok();
    }
    let bits: usize = ty.strip_prefix(['u', 's', 'x'])?.parse().ok()?;
    let elem = match bits {
        8 | 16 | 32 | 64 => bits / 8,
        _ => return None,
    };
    u32::try_from(size / elem).ok().filter(|_| size.is_multiple_of(elem))
}

impl FieldFormat {
    fn parse(line: &str) -> Option<FieldFormat> {
        let mut decl = None;
        let (mut offset, mut size, mut signed) = (None, None, false);
        for part in line.split(';') {
            let part = part.trim();
            if let Some(d) = part.strip_prefix("field:") {
                decl = Some(d.trim().to_string());
            } else if let Some(v) = part.strip_prefix("offset:") {
                offset = v.trim().parse().ok();
            } else if let Some(v) = part.strip_prefix("size:") {
                size = v.trim().parse().ok();
            } else if let Some(v) = part.strip_prefix("signed:") {
                signed = v.trim() == "1";
            }
        }
        let decl = decl?;
        let (offset, size): (usize, usize) = (offset?, size?);
        let split = decl.rfind(|c: char| c.is_whitespace() || c == '*')?;
        let (ty, name) = (decl[..=split].trim().to_string(), decl[split + 1..].trim());
        let (name, array) = match name.find('[') {
            Some(i) => (&name[..i], name[i + 1..].strip_suffix(']').map(|n| array_count(n.trim(), &ty, size))),
            None => (name, None),
        };
        let kind = if ty.contains("__data_loc") || ty.contains("__rel_loc") {
            if ty.contains("char") && size == 4 {
                FieldKind::DynString { relative: ty.contains("__rel_loc") }
            } else {
                FieldKind::Other
            }
        } else if let Some(n) = array {
            match n {
                Some(n) if n > 0 && (ty == "char" || ty == "unsigned char") && size == n as usize => FieldKind::CharArray(n),
                Some(n) if n > 0 && size % n as usize == 0 && matches!(size / n as usize, 1 | 2 | 4 | 8) => FieldKind::IntArray(n),
                _ => FieldKind::Other,
            }
        } else if matches!(size, 1 | 2 | 4 | 8) {
            FieldKind::Int { hex: ty.contains('*') }
        } else {
            FieldKind::Other
        };
        Some(FieldFormat { name: name.to_string(), c_type: ty, offset, size, signed, kind })
    }

    /// The element type of an integer or integer array field: (bytes, signed).
    pub fn elem_size(&self) -> usize {
        match self.kind {
            FieldKind::IntArray(n) => self.size / n as usize,
            FieldKind::CharArray(_) => 1,
            _ => self.size,
        }
    }
}

impl EventFormat {
    /// Parses the text of a format file of event `system/name`.
    ///
    /// # Errors
    /// A message when the `ID:` line is missing or not a 16-bit number.
    pub fn parse(system: &str, text: &str) -> Result<EventFormat, String> {
        let mut name = String::new();
        let mut id = None;
        let mut fields = Vec::new();
        for line in text.lines() {
            let t = line.trim();
            if let Some(n) = t.strip_prefix("name:") {
                name = n.trim().to_string();
            } else if let Some(n) = t.strip_prefix("ID:") {
                id = n.trim().parse::<u16>().ok();
            } else if t.starts_with("field:") {
                if let Some(f) = FieldFormat::parse(t) {
                    if !f.name.starts_with("common_") {
                        fields.push(f);
                    }
                }
            }
        }
        let id = id.ok_or_else(|| format!("format of {system}/{name}: no valid ID line"))?;
        Ok(EventFormat { system: system.to_string(), name, id, fields })
    }

    /// Reads and parses `<events_dir>/<system>/<name>/format`.
    ///
    /// # Errors
    /// The read error or the parse error, as text.
    pub fn read(events_dir: &Path, system: &str, name: &str) -> Result<EventFormat, String> {
        let p = events_dir.join(system).join(name).join("format");
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        EventFormat::parse(system, &text)
    }

    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&FieldFormat> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Turns each uprobe content field `X_bytes` (a `u8` array, as
    /// [`crate::uprobe::dwarf::content_fetch`] asks for) that has an integer field `X_len`
    /// beside it, and no field `X`, into the text field `X` ([`FieldKind::ProbeText`]):
    /// what the trace shows of a `&str`/`&[u8]` argument.
    pub fn join_probe_text(&mut self) {
        for i in 0..self.fields.len() {
            let f = &self.fields[i];
            let Some(base) = f.name.strip_suffix("_bytes") else { continue };
            if !matches!(f.kind, FieldKind::IntArray(_)) || f.elem_size() != 1 || self.field(base).is_some() {
                continue;
            }
            let Some(len) = self.field(&format!("{base}_len")).filter(|l| matches!(l.kind, FieldKind::Int { .. })) else { continue };
            let kind = FieldKind::ProbeText { len_offset: len.offset, len_size: len.size };
            let base = base.to_string();
            self.fields[i].kind = kind;
            self.fields[i].name = base;
        }
    }
}

/// Reads the unsigned little-endian integer of `size` bytes at `off` of `b`.
pub fn read_uint(b: &[u8], off: usize, size: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(size)?)?;
    let mut v = [0u8; 8];
    v.get_mut(..size)?.copy_from_slice(s);
    Some(u64::from_le_bytes(v))
}

/// The bytes of a dynamic string field (without its NUL) in `payload`, bounds-checked.
pub fn dyn_string<'a>(payload: &'a [u8], f: &FieldFormat) -> Option<&'a [u8]> {
    let v = read_uint(payload, f.offset, 4)? as u32;
    let (len, mut off) = ((v >> 16) as usize, (v & 0xffff) as usize);
    if let FieldKind::DynString { relative: true } = f.kind {
        off += f.offset + 4;
    }
    let s = payload.get(off..off.checked_add(len)?)?;
    Some(&s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())])
}

/// The text of a [`FieldKind::ProbeText`] field in `payload`: the first min(len, size)
/// bytes of the array, as lossy UTF-8 (a cut character or bytes that are not text become
/// U+FFFD), without NULs (a CTF string ends at one); bounds-checked.
pub fn probe_text(payload: &[u8], f: &FieldFormat) -> Option<String> {
    let FieldKind::ProbeText { len_offset, len_size } = f.kind else { return None };
    let len = read_uint(payload, len_offset, len_size)?;
    let bytes = payload.get(f.offset..f.offset.checked_add(f.size)?)?;
    let n = usize::try_from(len).unwrap_or(usize::MAX).min(bytes.len());
    let mut s = String::from_utf8_lossy(&bytes[..n]).into_owned();
    s.retain(|c| c != '\0');
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = "name: sched_switch\nID: 372\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:__data_loc char[] name;\toffset:28;\tsize:4;\tsigned:0;\n\tfield:unsigned long args[6];\toffset:32;\tsize:48;\tsigned:0;\n\tfield:void * hrtimer;\toffset:80;\tsize:8;\tsigned:0;\n\nprint fmt: \"x\"\n";

    #[test]
    fn parses_fields() {
        let f = EventFormat::parse("sched", SWITCH).unwrap();
        assert_eq!((f.name.as_str(), f.id), ("sched_switch", 372));
        let kinds: Vec<_> = f.fields.iter().map(|x| (x.name.as_str(), x.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                ("prev_comm", FieldKind::CharArray(16)),
                ("prev_pid", FieldKind::Int { hex: false }),
                ("name", FieldKind::DynString { relative: false }),
                ("args", FieldKind::IntArray(6)),
                ("hrtimer", FieldKind::Int { hex: true }),
            ]
        );
        assert!(f.fields[1].signed);
        assert_eq!(f.fields[3].elem_size(), 8);
        assert!(EventFormat::parse("x", "name: y\n").is_err());
    }

    /// The format of a probe `p:g/label ... name_ptr=%di:x64 name_len=%si:u64
    /// name_bytes=+0(%di):u8[32] c=%dx:u32`, as kernel 6.18 writes it.
    const LABEL: &str = "name: label\nID: 2326\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\n\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:x64 name_ptr;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:u64 name_len;\toffset:24;\tsize:8;\tsigned:0;\n\tfield:u8 name_bytes[];\toffset:32;\tsize:32;\tsigned:0;\n\tfield:u32 c;\toffset:64;\tsize:4;\tsigned:0;\n";

    #[test]
    fn probe_content_becomes_text_of_its_length() {
        let mut f = EventFormat::parse("ustp_1_0", LABEL).unwrap();
        assert_eq!(f.field("name_bytes").map(|x| x.kind), Some(FieldKind::IntArray(32)));
        f.join_probe_text();
        let names: Vec<_> = f.fields.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["__probe_ip", "name_ptr", "name_len", "name", "c"]);
        let text = f.field("name").unwrap();
        assert_eq!(text.kind, FieldKind::ProbeText { len_offset: 24, len_size: 8 });
        let mut p = vec![0u8; 68];
        let mut with = |len: u64, bytes: &[u8]| {
            p[24..32].copy_from_slice(&len.to_le_bytes());
            p[32..64].fill(0xee);
            p[32..32 + bytes.len()].copy_from_slice(bytes);
            probe_text(&p, text)
        };
        assert_eq!(with(5, b"hello").as_deref(), Some("hello"), "no byte beyond the length");
        assert_eq!(with(0, b"").as_deref(), Some(""));
        assert_eq!(with(1 << 40, &[b'a'; 32]).as_deref(), Some("a".repeat(32).as_str()), "at most the array");
        assert_eq!(with(4, b"a\0\xffb").as_deref(), Some("a\u{fffd}b"), "lossy, without NULs");
        // A cut two-byte character.
        let mut cut = [b'x'; 32];
        cut[31] = 0xc3;
        assert_eq!(with(40, &cut).map(|s| s.ends_with('\u{fffd}')), Some(true));
        assert_eq!(probe_text(&p[..40], text), None, "bounds-checked");
        // No join without the length, or when the name is taken.
        let mut g = EventFormat::parse("g", &LABEL.replace("name_len", "name_size")).unwrap();
        g.join_probe_text();
        assert!(g.field("name").is_none() && g.field("name_bytes").is_some());
        let mut h = EventFormat::parse("g", &LABEL.replace("field:u32 c;", "field:u32 name;")).unwrap();
        h.join_probe_text();
        assert!(h.field("name_bytes").is_some());
    }

    #[test]
    fn dyn_strings_are_bounds_checked() {
        let f = EventFormat::parse("sched", SWITCH).unwrap();
        let field = f.field("name").unwrap();
        let mut p = vec![0u8; 40];
        p[28..32].copy_from_slice(&((4u32 << 16) | 32).to_le_bytes());
        p[32..36].copy_from_slice(b"ab\0\0");
        assert_eq!(dyn_string(&p, field), Some(&b"ab"[..]));
        p[28..32].copy_from_slice(&((400u32 << 16) | 32).to_le_bytes());
        assert_eq!(dyn_string(&p, field), None);
        assert_eq!(dyn_string(&p[..10], field), None);
    }
}
