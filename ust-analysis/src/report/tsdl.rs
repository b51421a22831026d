//! A reader for the TSDL metadata this project writes (CTF 1.8 section 7): the `env`
//! block, `stream` blocks (their `event.context`) and `event` blocks (name, id, stream id,
//! fields), with field types mapped back to [`ust_core::FieldType`] so the record walker of
//! [`ust_ctf::reader`] reads the packets. Only what the writers here emit is understood:
//! byte-aligned integers, floats, strings, arrays, sequences with a preceding
//! `__<name>_length` field, enumerations. Not a general TSDL parser.

use std::borrow::Cow;
use std::collections::BTreeMap;

use ust_core::{EnumMapping, EventDesc, FieldDesc, FieldType, IntegerType, Level};

/// What a metadata file declares.
#[derive(Clone, Debug, Default)]
pub struct Metadata {
    /// `env` entries, values without quotes.
    pub env: BTreeMap<String, String>,
    /// Event context fields per stream class id.
    pub contexts: BTreeMap<u32, Vec<FieldDesc>>,
    /// Per stream class id: event descriptions indexed by `id - 1` (with the stream's event
    /// context fields prepended, so a record's context and payload read as one payload),
    /// and the event names (`None` for ids never declared).
    pub events: BTreeMap<u32, (Vec<EventDesc>, Vec<Option<String>>)>,
}

fn block_body(text: &str, open: usize) -> Option<(&str, usize)> {
    let mut depth = 0usize;
    let mut in_str = false;
    for (i, c) in text[open..].char_indices() {
        match c {
            '"' => in_str = !in_str,
            '{' if !in_str => depth += 1,
            '}' if !in_str => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some((&text[open + 1..open + i], open + i + 1));
                }
            }
            _ => {}
        }
    }
    None
}

/// Splits a struct body into declarations at `;` outside braces and quotes.
fn declarations(body: &str) -> Vec<&str> {
    let (mut out, mut depth, mut in_str, mut start) = (Vec::new(), 0i32, false, 0);
    for (i, c) in body.char_indices() {
        match c {
            '"' => in_str = !in_str,
            '{' if !in_str => depth += 1,
            '}' if !in_str => depth -= 1,
            ';' if !in_str && depth == 0 => {
                let d = body[start..i].trim();
                if !d.is_empty() {
                    out.push(d);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    out
}

fn attr<'a>(attrs: &'a str, key: &str) -> Option<&'a str> {
    attrs.split(';').find_map(|a| {
        let (k, v) = a.split_once('=')?;
        (k.trim() == key).then(|| v.trim())
    })
}

fn integer(attrs: &str) -> Option<(IntegerType, bool)> {
    let size: u8 = attr(attrs, "size")?.parse().ok()?;
    let signed = matches!(attr(attrs, "signed"), Some("1") | Some("true"));
    let base = match attr(attrs, "base") {
        Some("16") | Some("x") | Some("hex") => 16,
        Some("8") => 8,
        Some("2") => 2,
        _ => 10,
    };
    let text = attr(attrs, "encoding").is_some_and(|e| e.eq_ignore_ascii_case("UTF8") || e.eq_ignore_ascii_case("ASCII"));
    let t = IntegerType::new(size, signed, base);
    t.is_valid().then_some((t, text))
}

fn strip_name(n: &str) -> String {
    n.strip_prefix('_').unwrap_or(n).to_string()
}

/// Parses the fields of a `struct { ... }` body.
fn fields(body: &str) -> Option<Vec<FieldDesc>> {
    let mut out: Vec<FieldDesc> = Vec::new();
    let mut pending_len: Option<(String, IntegerType)> = None;
    for d in declarations(body) {
        let (ty, rest) = if let Some(r) = d.strip_prefix("integer") {
            let open = r.find('{')?;
            let (attrs, end) = block_body(r, open)?;
            let (t, text) = integer(attrs)?;
            (Some((t, text)), r[end..].trim())
        } else if let Some(r) = d.strip_prefix("string") {
            let r = r.trim();
            let r = if r.starts_with('{') { r[block_body(r, 0)?.1..].trim() } else { r };
            out.push(FieldDesc { name: Cow::Owned(strip_name(r)), ty: FieldType::String });
            continue;
        } else if let Some(r) = d.strip_prefix("floating_point") {
            let open = r.find('{')?;
            let (attrs, end) = block_body(r, open)?;
            let exp: u8 = attr(attrs, "exp_dig")?.parse().ok()?;
            let mant: u8 = attr(attrs, "mant_dig")?.parse().ok()?;
            out.push(FieldDesc { name: Cow::Owned(strip_name(r[end..].trim())), ty: FieldType::Float { exp_dig: exp, mant_dig: mant } });
            continue;
        } else if let Some(r) = d.strip_prefix("enum") {
            let r = r.trim().strip_prefix(':')?.trim().strip_prefix("integer")?;
            let open = r.find('{')?;
            let (attrs, end) = block_body(r, open)?;
            let (container, _) = integer(attrs)?;
            let r2 = &r[end..];
            let open2 = r2.find('{')?;
            let (labels, end2) = block_body(r2, open2)?;
            let mut mappings = Vec::new();
            for l in labels.split(',') {
                if let Some((k, v)) = l.split_once('=') {
                    let k = k.trim().trim_matches('"').to_string();
                    if let Ok(v) = v.trim().parse::<i64>() {
                        mappings.push(EnumMapping { label: Cow::Owned(k), value: v });
                    }
                }
            }
            out.push(FieldDesc {
                name: Cow::Owned(strip_name(r2[end2..].trim())),
                ty: FieldType::Enum { container, name: Cow::Borrowed(""), mappings: Cow::Owned(mappings) },
            });
            continue;
        } else if let Some(r) = d.strip_prefix("variant") {
            // A `tracing` field (FieldType::Dynamic): `variant <__x_tag> { ... } _x`, right
            // after its tag enumeration `__x_tag`, which it replaces.
            let r = r.trim();
            let end = r.find('>')?;
            let tag = r.get(1..end)?.trim();
            let body_open = r.find('{')?;
            let (_, after) = block_body(r, body_open)?;
            let name = strip_name(r[after..].trim());
            let last = out.pop()?;
            if last.name != tag.strip_prefix('_').unwrap_or(tag) || format!("__{name}_tag") != tag {
                return None;
            }
            out.push(FieldDesc { name: Cow::Owned(name), ty: FieldType::Dynamic });
            continue;
        } else {
            // A type alias or struct this reader does not know: the alias names used by
            // this project's writers are resolved by the caller; others are unreadable.
            return None;
        };
        let (t, text) = ty?;
        match rest.find('[') {
            None => {
                let name = rest.to_string();
                if let Some(base) = name.strip_prefix("__").and_then(|n| n.strip_suffix("_length")) {
                    pending_len = Some((base.to_string(), t));
                } else {
                    out.push(FieldDesc { name: Cow::Owned(strip_name(&name)), ty: FieldType::Integer(t) });
                }
            }
            Some(i) => {
                let name = strip_name(rest[..i].trim());
                let inner = rest[i + 1..].trim_end_matches(']').trim();
                if let Ok(n) = inner.parse::<u32>() {
                    out.push(FieldDesc { name: Cow::Owned(name), ty: FieldType::Array { elem: t, len: n } });
                } else {
                    let (base, length) = pending_len.take()?;
                    if base != name {
                        return None;
                    }
                    out.push(FieldDesc { name: Cow::Owned(name), ty: FieldType::Sequence { length, elem: t, text } });
                }
            }
        }
    }
    Some(out)
}

fn top_blocks(text: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(i) = text[pos..].find('{') {
        let open = pos + i;
        let head = text[pos..open].trim();
        let head = head.rsplit([';', '/', '\n']).next().unwrap_or("").trim();
        match block_body(text, open) {
            Some((body, end)) => {
                out.push((head, body));
                pos = end;
            }
            None => break,
        }
    }
    out
}

fn sub_struct<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    let i = body.find(key)?;
    let open = i + body[i..].find('{')?;
    block_body(body, open).map(|(b, _)| b)
}

fn value<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    body.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_end_matches(';').trim().trim_matches('"'))
    })
}

impl Metadata {
    /// Parses a metadata text. Events whose fields this reader does not understand are left
    /// out (their records then stop the walk of their packet).
    pub fn parse(text: &str) -> Metadata {
        let mut m = Metadata::default();
        let text = text.replace("uint64_clock_monotonic_t", "integer { size = 64; align = 8; signed = false; }");
        let mut decls: Vec<(u32, u32, String, Vec<FieldDesc>)> = Vec::new();
        for (head, body) in top_blocks(&text) {
            match head {
                "env" => {
                    for l in body.lines() {
                        if let Some((k, v)) = l.split_once('=') {
                            m.env.insert(k.trim().to_string(), v.trim().trim_end_matches(';').trim().trim_matches('"').to_string());
                        }
                    }
                }
                "stream" => {
                    let id = value(body, "id").and_then(|v| v.parse().ok()).unwrap_or(0);
                    let ctx = sub_struct(body, "event.context").and_then(fields).unwrap_or_default();
                    m.contexts.insert(id, ctx);
                }
                "event" => {
                    let (Some(name), Some(id)) = (value(body, "name"), value(body, "id").and_then(|v| v.parse::<u32>().ok())) else { continue };
                    let sid = value(body, "stream_id").and_then(|v| v.parse().ok()).unwrap_or(0);
                    if let Some(f) = sub_struct(body, "fields :=").and_then(fields) {
                        decls.push((sid, id, name.to_string(), f));
                    }
                }
                _ => {}
            }
        }
        for (sid, id, name, f) in decls {
            if id == 0 || id > 1 << 16 {
                continue;
            }
            let mut all = m.contexts.get(&sid).cloned().unwrap_or_default();
            all.extend(f);
            let entry = m.events.entry(sid).or_default();
            let i = (id - 1) as usize;
            if entry.0.len() <= i {
                entry.0.resize_with(i + 1, || EventDesc {
                    provider: Cow::Borrowed(""),
                    name: Cow::Borrowed(""),
                    level: Level::DebugLine,
                    fields: Cow::Owned(Vec::new()),
                    location: Cow::Borrowed(""),
                });
                entry.1.resize(i + 1, None);
            }
            entry.0[i].fields = Cow::Owned(all);
            entry.1[i] = Some(name);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_what_the_writers_write() {
        let events = vec![EventDesc {
            provider: Cow::Borrowed("p"),
            name: Cow::Borrowed("e"),
            level: Level::Info,
            fields: Cow::Owned(vec![
                FieldDesc { name: Cow::Borrowed("x"), ty: FieldType::Integer(IntegerType::U32) },
                FieldDesc { name: Cow::Borrowed("s"), ty: FieldType::String },
                FieldDesc { name: Cow::Borrowed("q"), ty: FieldType::Sequence { length: IntegerType::U32, elem: IntegerType::U8, text: true } },
                FieldDesc { name: Cow::Borrowed("a"), ty: FieldType::Array { elem: IntegerType::I16, len: 3 } },
                FieldDesc { name: Cow::Borrowed("f"), ty: FieldType::Float { exp_dig: 11, mant_dig: 53 } },
                FieldDesc {
                    name: Cow::Borrowed("en"),
                    ty: FieldType::Enum {
                        container: IntegerType::U8,
                        name: Cow::Borrowed(""),
                        mappings: Cow::Owned(vec![EnumMapping { label: Cow::Borrowed("A"), value: 0 }, EnumMapping { label: Cow::Borrowed("B"), value: 1 }]),
                    },
                },
                FieldDesc { name: Cow::Borrowed("dy"), ty: FieldType::Dynamic },
            ]),
            location: Cow::Borrowed(""),
        }];
        let channels = vec!["channel0".to_string()];
        let text = ust_ctf::metadata::render(&ust_ctf::metadata::TraceMetadata {
            uuid: [1; 16],
            clock_offset_ns: 5,
            clock_uuid: "x",
            hostname: "h",
            procname: "app",
            vpid: 42,
            trace_name: "s",
            creation_datetime: "d",
            channels: &channels,
            contexts: &[],
            events: &events,
            clock_description: "Monotonic Clock",
            uid: None,
        });
        let m = Metadata::parse(&text);
        assert_eq!(m.env.get("vpid").map(String::as_str), Some("42"));
        assert_eq!(m.env.get("domain").map(String::as_str), Some("ust"));
        let (descs, names) = &m.events[&0];
        assert_eq!(names[0].as_deref(), Some("p:e"));
        assert_eq!(descs[0].fields.as_ref(), events[0].fields.as_ref());
    }

    /// The kernel layout with captured system-call arguments (`ust_kernel::bpf`) reads
    /// back with the sizes the writer uses: strings, the status enumeration, the sockaddr
    /// fields (the big-endian port reads as a u16: the walker needs its size only).
    #[test]
    fn reads_the_captured_syscall_arguments() {
        use ust_kernel::ctf::{render_metadata, EventTable, KernelMetadata};
        let head = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n";
        let fmt = format!(
            "name: sys_enter\nID: 21\nformat:\n{head}\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n"
        );
        let enter = ust_kernel::format::EventFormat::parse("raw_syscalls", &fmt).unwrap();
        let s = |v: &[(&str, &str)]| v.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect::<Vec<_>>();
        let mut args = ust_kernel::lttng::SyscallArgs::new();
        args.insert("connect".into(), s(&[("fd", "int"), ("uservaddr", "struct sockaddr *"), ("addrlen", "int")]));
        args.insert("execve".into(), s(&[("filename", "const char *"), ("argv", "const char *const *"), ("envp", "const char *const *")]));
        let table = EventTable::with_captured_args(vec![("syscall_entry".into(), enter)], &args, true);
        let meta = KernelMetadata {
            uuid: [1; 16],
            clock_offset_ns: 0,
            clock_uuid: "x",
            hostname: "h",
            kernel_release: "r",
            kernel_version: "v",
            traced_pid: 1,
            creation_datetime: "d",
            source: "tracefs",
        };
        let m = Metadata::parse(&render_metadata(&meta, &table));
        let (descs, names) = &m.events[&0];
        let fields = |name: &str| {
            let i = names.iter().position(|n| n.as_deref() == Some(name)).unwrap();
            descs[i].fields.iter().map(|f| (f.name.to_string(), f.ty.clone())).collect::<Vec<_>>()
        };
        let u = |t| FieldType::Integer(t);
        let status = |f: &(String, FieldType)| matches!(&f.1, FieldType::Enum { container: IntegerType::U8, mappings, .. } if mappings.len() == 5);
        let connect = fields("syscall_entry_connect");
        let names_types: Vec<(&str, Option<FieldType>)> =
            connect.iter().map(|(n, t)| (n.as_str(), (!matches!(t, FieldType::Enum { .. })).then(|| t.clone()))).collect();
        assert_eq!(
            names_types,
            vec![
                ("tid", Some(u(IntegerType::I32))),
                ("fd", Some(u(IntegerType::I32))),
                ("uservaddr", Some(u(IntegerType::new(64, false, 16)))),
                ("addrlen", Some(u(IntegerType::I32))),
                ("family", Some(u(IntegerType::U16))),
                ("dport", Some(u(IntegerType::U16))),
                ("v4addr", Some(FieldType::Sequence { length: IntegerType::U32, elem: IntegerType::U8, text: false })),
                ("v6addr", Some(FieldType::Sequence { length: IntegerType::U32, elem: IntegerType::U16, text: false })),
                ("sun_path", Some(FieldType::String)),
                ("uservaddr_status", None),
            ]
        );
        assert!(status(&connect[9]));
        let execve = fields("syscall_entry_execve");
        let n: Vec<&str> = execve.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(n, ["tid", "filename", "filename_ptr", "filename_status", "argv", "argv_text", "argv_status", "envp"]);
        assert_eq!((&execve[1].1, &execve[5].1), (&FieldType::String, &FieldType::String));
        assert!(status(&execve[3]) && status(&execve[6]));
    }
}
