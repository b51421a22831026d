//! The JSON lines of `tests/bt2_dump.py`, written from this crate's reader: same keys, same
//! value encoding, same choice of fields (babeltrace2's trace IR drops fields that have a
//! meaning or map to a clock unless a length or selector refers to them, and the event
//! header and packet header altogether).

#![allow(dead_code)]

use std::fmt::Write;

use ctf_reader::{FieldType, Message, Scope, Value};

/// Appends `s` as a JSON string the way Python's `json.dumps(ensure_ascii=True)` does.
pub fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e && (c as u32) != 0x7f => {
                let mut buf = [0u16; 2];
                for u in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{:04x}", u);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn in_ir(ty: &FieldType) -> bool {
    match ty {
        FieldType::Int(i) | FieldType::Enum { int: i, .. } => i.referenced || (i.role.is_none() && i.clock.is_none()),
        FieldType::Struct { fields, .. } => fields.is_empty() || fields.iter().any(|f| in_ir(&f.ty)),
        FieldType::Variant { options, .. } => options.iter().any(|f| in_ir(&f.ty)),
        FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } => in_ir(elem),
        _ => true,
    }
}

/// Appends `v` (of type `ty`) in the dump's value encoding.
pub fn json_value(out: &mut String, ty: &FieldType, v: &Value) {
    match (ty, v) {
        (_, Value::Unsigned { value, .. }) => {
            let _ = write!(out, "{value}");
        }
        (_, Value::Signed { value, .. }) => {
            let _ = write!(out, "{value}");
        }
        (_, Value::Float(f)) => {
            let _ = write!(out, "\"f:{:016x}\"", f.to_bits());
        }
        (_, Value::String(s)) => json_str(out, s),
        (_, Value::Enum { value, labels }) => {
            let mut l = labels.clone();
            l.sort();
            let _ = write!(out, "{{\"enum\":{value},\"labels\":[");
            for (i, s) in l.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_str(out, s);
            }
            out.push_str("]}");
        }
        (FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. }, Value::Array(a)) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_value(out, elem, x);
            }
            out.push(']');
        }
        (FieldType::Struct { fields, .. }, Value::Struct(m)) => {
            out.push('{');
            let mut first = true;
            for (f, (name, x)) in fields.iter().zip(m) {
                if !in_ir(&f.ty) {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                json_str(out, name);
                out.push(':');
                json_value(out, &f.ty, x);
            }
            out.push('}');
        }
        (FieldType::Variant { options, .. }, Value::Variant { option, index, value }) => {
            out.push_str("{\"variant\":");
            json_str(out, option);
            out.push_str(",\"value\":");
            json_value(out, &options[*index as usize].ty, value);
            out.push('}');
        }
        _ => out.push_str("\"<mismatch>\""),
    }
}

fn scope(out: &mut String, ty: Option<&FieldType>, v: Option<Value>) {
    match (ty, v) {
        (Some(t), Some(v)) if in_ir(t) => json_value(out, t, &v),
        _ => out.push_str("null"),
    }
}

fn opt<T: std::fmt::Display>(out: &mut String, v: Option<T>) {
    match v {
        Some(v) => {
            let _ = write!(out, "{v}");
        }
        None => out.push_str("null"),
    }
}

/// One dump line for `m`.
pub fn line(m: &Message<'_>) -> String {
    let mut out = String::with_capacity(256);
    match m {
        Message::Event(e) => {
            out.push_str("{\"type\":\"event\",\"stream\":");
            json_str(&mut out, &e.stream.name);
            let _ = write!(out, ",\"sc\":{},\"ec\":{},\"name\":", e.stream_class.id, e.class.id);
            json_str(&mut out, e.name());
            out.push_str(",\"ts\":");
            opt(&mut out, e.ns);
            out.push_str(",\"cpu\":");
            opt(&mut out, e.cpu());
            out.push_str(",\"pctx\":");
            scope(&mut out, e.stream_class.packet_context.as_ref(), e.packet.context.clone());
            out.push_str(",\"sctx\":");
            scope(&mut out, e.stream_class.event_context.as_ref(), e.scope(Scope::EventCommonContext));
            out.push_str(",\"ectx\":");
            scope(&mut out, e.class.context.as_ref(), e.scope(Scope::EventSpecificContext));
            out.push_str(",\"payload\":");
            scope(&mut out, e.class.payload.as_ref(), e.scope(Scope::EventPayload));
            out.push('}');
        }
        Message::DiscardedEvents(d) | Message::DiscardedPackets(d) => {
            let kind = if matches!(m, Message::DiscardedEvents(_)) { "discarded_events" } else { "discarded_packets" };
            let _ = write!(out, "{{\"type\":\"{kind}\",\"stream\":");
            json_str(&mut out, &d.stream.name);
            out.push_str(",\"count\":");
            opt(&mut out, d.count);
            out.push_str(",\"begin\":");
            opt(&mut out, d.ns.map(|n| n.0));
            out.push_str(",\"end\":");
            opt(&mut out, d.ns.map(|n| n.1));
            out.push('}');
        }
    }
    out
}

/// The error line both dumps write when reading stops.
pub fn error_line(msg: &str) -> String {
    let mut out = String::from("{\"type\":\"error\",\"msg\":");
    json_str(&mut out, msg);
    out.push('}');
    out
}
