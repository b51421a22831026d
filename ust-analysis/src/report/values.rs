//! An event's fields as the report's `(name, value)` list ([`ust_ctf::reader::Value`]),
//! walked straight from the reader's decoded slots ([`ctf_reader::EventRef::slots`]) and
//! the scope's type, with no intermediate value tree.
//!
//! - Top-level members keep their names (CTF 1.8 readers strip one leading `_`); the
//!   members of a nested structure are flattened with dotted names (`addr.port`).
//! - Sequence lengths and variant selectors (integers another field refers to) are left
//!   out, as the array or the chosen option carries them: ust's own `tracing` fields
//!   (`__x_tag` enumeration and `x` variant) read as the one value of the chosen option,
//!   `none` (an empty structure) as an empty list.
//! - Arrays and sequences of encoded bytes are text cut at the first NUL, as babeltrace2
//!   shows them; other arrays are lists; an enumeration is its first label holding the
//!   value, and the value; a structure inside an array is the list of its members' values.

use ctf_reader::{EventRef, FieldType, Slot};
use ust_ctf::reader::Value;

fn text(b: &[u8], cut_at_nul: bool) -> String {
    let b = if cut_at_nul { b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n]) } else { b };
    String::from_utf8_lossy(b).into_owned()
}

/// The value of one field of type `ty`, consuming its slots from `slots`; `None` when the
/// slots do not follow the type (never for slots the reader decoded with it).
pub fn value(ty: &FieldType, slots: &mut std::slice::Iter<'_, Slot>, e: &EventRef<'_>) -> Option<Value> {
    Some(match ty {
        FieldType::Int(_) => match *slots.next()? {
            Slot::U(v) => Value::Unsigned(v),
            Slot::I(v) => Value::Signed(v),
            _ => return None,
        },
        FieldType::Enum { mappings, .. } => {
            let v: i128 = match *slots.next()? {
                Slot::U(v) => v.into(),
                Slot::I(v) => v.into(),
                _ => return None,
            };
            Value::Enum(mappings.iter().find(|m| m.lo <= v && v <= m.hi).map(|m| m.label.clone()), v as i64)
        }
        FieldType::Float { .. } => match *slots.next()? {
            Slot::F(v) => Value::Float(v),
            _ => return None,
        },
        FieldType::String { .. } => Value::Str(text(e.text(*slots.next()?)?, false)),
        FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } if elem.is_text_element() => Value::Str(text(e.text(*slots.next()?)?, true)),
        FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } => {
            let Slot::Len(n) = *slots.next()? else { return None };
            let mut out = Vec::with_capacity(n.min(slots.len() as u64) as usize);
            for _ in 0..n {
                out.push(value(elem, slots, e)?);
            }
            Value::List(out)
        }
        FieldType::Struct { fields, .. } => {
            let mut out = Vec::with_capacity(fields.len());
            for f in fields {
                out.push(value(&f.ty, slots, e)?);
            }
            Value::List(out)
        }
        FieldType::Variant { options, .. } => {
            let Slot::Opt(i) = *slots.next()? else { return None };
            value(&options.get(i as usize)?.ty, slots, e)?
        }
    })
}

/// Whether a member is a length or selector that another field refers to.
fn referenced(ty: &FieldType) -> bool {
    ty.as_int().is_some_and(|i| i.referenced)
}

/// Appends the members of the structure `ty` (a root scope, or a nested structure with
/// `prefix` its dotted path) to `out`, consuming their slots; `None` on slots that do not
/// follow the type.
pub fn push_members(ty: &FieldType, prefix: &str, slots: &mut std::slice::Iter<'_, Slot>, e: &EventRef<'_>, out: &mut Vec<(String, Value)>) -> Option<()> {
    let FieldType::Struct { fields, .. } = ty else {
        out.push((prefix.to_string(), value(ty, slots, e)?));
        return Some(());
    };
    for f in fields {
        match &f.ty {
            t if referenced(t) => {
                slots.next()?;
            }
            FieldType::Struct { fields: inner, .. } if !inner.is_empty() => {
                let p = if prefix.is_empty() { f.name.clone() } else { format!("{prefix}.{}", f.name) };
                push_members(&f.ty, &p, slots, e, out)?;
            }
            t => {
                let name = if prefix.is_empty() { f.name.clone() } else { format!("{prefix}.{}", f.name) };
                out.push((name, value(t, slots, e)?));
            }
        }
    }
    Some(())
}
