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

use super::event::Name;
use ust_ctf::reader::Value;

/// A string's or a text array's bytes as text (a text array cut at its first NUL), lossy
/// UTF-8.
pub(super) fn text(b: &[u8], cut_at_nul: bool) -> String {
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

/// Where the names of an event's fields come from: made from its class's types (the first
/// event of a class), or taken in order from the names made then (every later event of the
/// class: a class's types give the same names in the same order, whatever the values).
pub enum Names<'n> {
    /// Made from the types.
    Make,
    /// Taken in order from an earlier event of the same class.
    Reuse(std::slice::Iter<'n, Name>),
}

impl Names<'_> {
    /// The next name: the earlier event's, or `make()`'s.
    fn next(&mut self, make: impl FnOnce() -> String) -> Name {
        match self {
            Names::Reuse(it) => it.next().cloned().unwrap_or_else(|| {
                debug_assert!(false, "an event of a class has more fields than its first");
                Name::from(make())
            }),
            Names::Make => Name::from(make()),
        }
    }
}

/// Appends the members of the structure `ty` (a root scope, or a nested structure with
/// `prefix` its dotted path) to `out`, consuming their slots, their names from `names`;
/// `None` on slots that do not follow the type.
pub fn push_members(
    ty: &FieldType,
    prefix: &str,
    slots: &mut std::slice::Iter<'_, Slot>,
    e: &EventRef<'_>,
    out: &mut Vec<(Name, Value)>,
    names: &mut Names<'_>,
) -> Option<()> {
    let FieldType::Struct { fields, .. } = ty else {
        let name = names.next(|| prefix.to_string());
        out.push((name, value(ty, slots, e)?));
        return Some(());
    };
    let dotted = |f: &str| if prefix.is_empty() { f.to_string() } else { format!("{prefix}.{f}") };
    for f in fields {
        match &f.ty {
            t if referenced(t) => {
                slots.next()?;
            }
            FieldType::Struct { fields: inner, .. } if !inner.is_empty() => {
                // The path is needed only to make the names.
                let p = if matches!(names, Names::Make) { dotted(&f.name) } else { String::new() };
                push_members(&f.ty, &p, slots, e, out, names)?;
            }
            t => {
                let name = names.next(|| dotted(&f.name));
                out.push((name, value(t, slots, e)?));
            }
        }
    }
    Some(())
}
