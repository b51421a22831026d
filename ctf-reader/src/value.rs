//! Field values as a tree, built on demand from an event's flat [`Slot`]s and its field
//! types: integers with their display base, floats, strings (also arrays and sequences of
//! encoded 8-bit integers, cut at the first NUL as babeltrace2 shows them), enumerations
//! (value and every label whose range holds it), arrays, structures, variants.

use crate::decode::Slot;
use crate::model::FieldType;

/// A decoded field value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Unsigned integer and its preferred display base (2, 8, 10, 16).
    Unsigned {
        /// Value.
        value: u64,
        /// Display base.
        base: u8,
    },
    /// Signed integer and its preferred display base.
    Signed {
        /// Value.
        value: i64,
        /// Display base.
        base: u8,
    },
    /// Float (binary32 widened exactly to binary64).
    Float(f64),
    /// Text (invalid UTF-8 replaced by U+FFFD).
    String(String),
    /// Enumeration: the integer value and the labels of every mapping holding it (may be
    /// empty, or several when ranges overlap).
    Enum {
        /// Value (an unsigned 64-bit or signed 64-bit value).
        value: i128,
        /// Labels, in declaration order.
        labels: Vec<String>,
    },
    /// Array or sequence elements.
    Array(Vec<Value>),
    /// Structure members, in order.
    Struct(Vec<(String, Value)>),
    /// The chosen option of a variant.
    Variant {
        /// Option name.
        option: String,
        /// Option index.
        index: u32,
        /// Option value.
        value: Box<Value>,
    },
}

impl Value {
    /// The member named `name` of a structure value.
    pub fn get(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Struct(m) => m.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            Value::Variant { value, .. } => value.get(name),
            _ => None,
        }
    }

    /// An integer or enumeration value as `i128`.
    pub fn as_i128(&self) -> Option<i128> {
        match self {
            Value::Unsigned { value, .. } => Some(*value as i128),
            Value::Signed { value, .. } => Some(*value as i128),
            Value::Enum { value, .. } => Some(*value),
            _ => None,
        }
    }

    /// A string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
}

/// Builds the value of `ty` from `slots` (consumed from the front) and the text arena.
/// Returns `None` if the slots do not match the type (a bug, never bad input: slots are
/// produced by the decoder compiled from the same type).
pub(crate) fn build(ty: &FieldType, slots: &mut std::slice::Iter<'_, Slot>, text: &[u8]) -> Option<Value> {
    Some(match ty {
        FieldType::Int(i) => match *slots.next()? {
            Slot::U(v) => Value::Unsigned { value: v, base: i.base },
            Slot::I(v) => Value::Signed { value: v, base: i.base },
            _ => return None,
        },
        FieldType::Enum { mappings, .. } => {
            let value = match *slots.next()? {
                Slot::U(v) => v as i128,
                Slot::I(v) => v as i128,
                _ => return None,
            };
            Value::Enum { value, labels: mappings.iter().filter(|m| m.lo <= value && value <= m.hi).map(|m| m.label.clone()).collect() }
        }
        FieldType::Float { .. } => match *slots.next()? {
            Slot::F(v) => Value::Float(v),
            _ => return None,
        },
        FieldType::String { .. } => Value::String(text_of(*slots.next()?, text, false)?),
        FieldType::Struct { fields, .. } => {
            let mut out = Vec::with_capacity(fields.len());
            for f in fields {
                out.push((f.name.clone(), build(&f.ty, slots, text)?));
            }
            Value::Struct(out)
        }
        FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } => {
            if elem.is_text_element() {
                return Some(Value::String(text_of(*slots.next()?, text, true)?));
            }
            let Slot::Len(n) = *slots.next()? else { return None };
            let mut out = Vec::with_capacity(n.min(1 << 16) as usize);
            for _ in 0..n {
                out.push(build(elem, slots, text)?);
            }
            Value::Array(out)
        }
        FieldType::Variant { options, .. } => {
            let Slot::Opt(i) = *slots.next()? else { return None };
            let o = options.get(i as usize)?;
            Value::Variant { option: o.name.clone(), index: i, value: Box::new(build(&o.ty, slots, text)?) }
        }
    })
}

fn text_of(s: Slot, text: &[u8], cut_at_nul: bool) -> Option<String> {
    let Slot::Str { off, len } = s else { return None };
    let mut b = text.get(off as usize..off as usize + len as usize)?;
    if cut_at_nul {
        if let Some(n) = b.iter().position(|&c| c == 0) {
            b = &b[..n];
        }
    }
    Some(String::from_utf8_lossy(b).into_owned())
}
