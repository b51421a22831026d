//! The columns of one event class: its context and payload fields flattened into leaves
//! with dotted names, each of a [`Kind`], unified across the traces of a dataset (the same
//! event class recorded by several hosts or tracer versions), and the Parquet schema of
//! the file.
//!
//! Flattening (CTF 1.8 §4 types; names as babeltrace2 shows them):
//!
//! - an integer is one `INT64` column (logical type signed or unsigned 64-bit integer);
//!   a float one `DOUBLE`; a string, or an array or sequence of encoded bytes, one UTF-8
//!   `BYTE_ARRAY` (text cut at its first NUL, as babeltrace2 prints it);
//! - an enumeration `x` is its label (`x`, text: the first mapping holding the value) and
//!   its value (`x.value`);
//! - a structure's members are `s.a`, `s.b` (at the top level, `a`, `b`);
//! - a variant's options are `v.opt` (with their own members below), only the chosen
//!   option set;
//! - an array or sequence of integers, floats, strings or enumerations (labels) is a
//!   Parquet `LIST` of them; of anything else (structures, arrays, variants), the JSON text
//!   of the whole value.
//!
//! Every field column is optional (null where a variant chose another option, or where a
//! trace's version of the class lacks the field). A column whose kinds disagree across
//! traces widens: signed wins over unsigned, a float over integers, and any other mix
//! becomes JSON text.

use std::sync::Arc;

use ctf_reader::FieldType;
use parquet::basic::{IntType, LogicalType, Repetition, Type as Physical};
use parquet::schema::types::{Type, TypePtr};

/// What a leaf column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A 64-bit integer; unsigned when every source is.
    Int {
        /// Signed (some source is).
        signed: bool,
    },
    /// A double.
    Float,
    /// UTF-8 text.
    Text,
    /// A list of one of the scalar kinds.
    List(Elem),
    /// JSON text of a value with no column form.
    Json,
}

/// The element kind of a [`Kind::List`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    /// Integers.
    Int {
        /// Signed.
        signed: bool,
    },
    /// Doubles.
    Float,
    /// Text (strings, enumeration labels).
    Text,
}

impl Kind {
    /// The kind of a column two sources give different kinds.
    pub fn unify(self, other: Kind) -> Kind {
        use Kind::*;
        match (self, other) {
            (a, b) if a == b => a,
            (Int { signed: a }, Int { signed: b }) => Int { signed: a || b },
            (Int { .. } | Float, Int { .. } | Float) => Float,
            (List(Elem::Int { signed: a }), List(Elem::Int { signed: b })) => List(Elem::Int { signed: a || b }),
            (List(Elem::Int { .. } | Elem::Float), List(Elem::Int { .. } | Elem::Float)) => List(Elem::Float),
            _ => Json,
        }
    }
}

/// One leaf column of a class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// Dotted name.
    pub name: String,
    /// Its kind.
    pub kind: Kind,
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

fn scalar_elem(ty: &FieldType) -> Option<Elem> {
    match ty {
        FieldType::Int(i) => Some(Elem::Int { signed: i.signed }),
        FieldType::Float { .. } => Some(Elem::Float),
        FieldType::String { .. } | FieldType::Enum { .. } => Some(Elem::Text),
        FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } if elem.is_text_element() => Some(Elem::Text),
        _ => None,
    }
}

/// Appends the leaves of a field of type `ty` named `name` (dotted) to `out`.
pub fn leaves(ty: &FieldType, name: &str, out: &mut Vec<Leaf>) {
    let mut leaf = |n: String, kind| out.push(Leaf { name: n, kind });
    match ty {
        FieldType::Int(i) => leaf(name.to_string(), Kind::Int { signed: i.signed }),
        FieldType::Enum { int, .. } => {
            leaf(name.to_string(), Kind::Text);
            leaf(join(name, "value"), Kind::Int { signed: int.signed });
        }
        FieldType::Float { .. } => leaf(name.to_string(), Kind::Float),
        FieldType::String { .. } => leaf(name.to_string(), Kind::Text),
        FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } => {
            let kind = if elem.is_text_element() { Kind::Text } else { scalar_elem(elem).map_or(Kind::Json, Kind::List) };
            leaf(name.to_string(), kind);
        }
        FieldType::Struct { fields, .. } => {
            for f in fields {
                leaves(&f.ty, &join(name, &f.name), out);
            }
        }
        FieldType::Variant { options, .. } => {
            for o in options {
                leaves(&o.ty, &join(name, &o.name), out);
            }
        }
    }
}

/// The fixed columns every file starts with: the time in ns from the clock's origin (the
/// Unix epoch for LTTng and ust: babeltrace2's time), the host and session, the trace
/// directory under the exported one, the stream file, and the packet's CPU.
pub const FIXED: [&str; 6] = ["timestamp", "hostname", "session", "trace", "stream", "cpu"];

fn text_type(name: &str, rep: Repetition) -> TypePtr {
    Arc::new(
        Type::primitive_type_builder(name, Physical::BYTE_ARRAY)
            .with_repetition(rep)
            .with_logical_type(Some(LogicalType::String))
            .build()
            .expect("a valid UTF-8 column"),
    )
}

fn int_type(name: &str, rep: Repetition, signed: bool) -> TypePtr {
    let logical = LogicalType::Integer(IntType { bit_width: 64, is_signed: signed });
    Arc::new(Type::primitive_type_builder(name, Physical::INT64).with_repetition(rep).with_logical_type(Some(logical)).build().expect("a valid integer column"))
}

fn elem_type(e: Elem) -> TypePtr {
    match e {
        Elem::Int { signed } => int_type("element", Repetition::REQUIRED, signed),
        Elem::Float => {
            Arc::new(Type::primitive_type_builder("element", Physical::DOUBLE).with_repetition(Repetition::REQUIRED).build().expect("a valid double"))
        }
        Elem::Text => text_type("element", Repetition::REQUIRED),
    }
}

/// The Parquet type of a leaf column.
pub fn leaf_type(l: &Leaf) -> TypePtr {
    let opt = Repetition::OPTIONAL;
    match l.kind {
        Kind::Int { signed } => int_type(&l.name, opt, signed),
        Kind::Float => Arc::new(Type::primitive_type_builder(&l.name, Physical::DOUBLE).with_repetition(opt).build().expect("a valid double")),
        Kind::Text | Kind::Json => text_type(&l.name, opt),
        Kind::List(e) => {
            // The three-level list of the Parquet format's LogicalTypes.md.
            let list = Type::group_type_builder("list").with_repetition(Repetition::REPEATED).with_fields(vec![elem_type(e)]).build().expect("a valid list");
            Arc::new(
                Type::group_type_builder(&l.name)
                    .with_repetition(opt)
                    .with_logical_type(Some(LogicalType::List))
                    .with_fields(vec![Arc::new(list)])
                    .build()
                    .expect("a valid list column"),
            )
        }
    }
}

/// The schema of a file: the fixed columns, then `leaves`.
pub fn schema(leaves: &[Leaf]) -> TypePtr {
    let mut fields = vec![
        int_type(FIXED[0], Repetition::REQUIRED, true),
        text_type(FIXED[1], Repetition::OPTIONAL),
        text_type(FIXED[2], Repetition::OPTIONAL),
        text_type(FIXED[3], Repetition::REQUIRED),
        text_type(FIXED[4], Repetition::REQUIRED),
        int_type(FIXED[5], Repetition::OPTIONAL, false),
    ];
    fields.extend(leaves.iter().map(leaf_type));
    Arc::new(Type::group_type_builder("event").with_fields(fields).build().expect("a valid schema"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctf_reader::{ByteOrder, Encoding, EnumMapping, Field, IntType as CtfInt};

    fn int(signed: bool, size: u8, encoding: Encoding) -> FieldType {
        FieldType::Int(CtfInt { size, align: 8, signed, byte_order: ByteOrder::Little, base: 10, encoding, clock: None, role: None, referenced: false })
    }

    #[test]
    fn fields_flatten_with_dotted_names_and_kinds_widen() {
        let f = |name: &str, ty| Field { name: name.into(), ty, media_type: None };
        let ty = FieldType::Struct {
            align: 8,
            fields: vec![
                f("comm", FieldType::Array { elem: Box::new(int(false, 8, Encoding::Utf8)), len: 16 }),
                f(
                    "st",
                    FieldType::Enum {
                        int: match int(true, 32, Encoding::None) {
                            FieldType::Int(i) => i,
                            _ => unreachable!(),
                        },
                        mappings: vec![EnumMapping { label: "R".into(), lo: 0, hi: 0 }],
                    },
                ),
                f("addr", FieldType::Struct { align: 8, fields: vec![f("port", int(false, 16, Encoding::None))] }),
                f("args", FieldType::Array { elem: Box::new(int(false, 64, Encoding::None)), len: 6 }),
                f("nested", FieldType::Array { elem: Box::new(FieldType::Struct { align: 8, fields: vec![] }), len: 1 }),
            ],
        };
        let mut out = Vec::new();
        leaves(&ty, "", &mut out);
        let got: Vec<(&str, Kind)> = out.iter().map(|l| (l.name.as_str(), l.kind)).collect();
        assert_eq!(
            got,
            [
                ("comm", Kind::Text),
                ("st", Kind::Text),
                ("st.value", Kind::Int { signed: true }),
                ("addr.port", Kind::Int { signed: false }),
                ("args", Kind::List(Elem::Int { signed: false })),
                ("nested", Kind::Json),
            ]
        );
        assert_eq!(Kind::Int { signed: false }.unify(Kind::Int { signed: true }), Kind::Int { signed: true });
        assert_eq!(Kind::Int { signed: false }.unify(Kind::Float), Kind::Float);
        assert_eq!(Kind::Text.unify(Kind::Float), Kind::Json);
        let s = schema(&out);
        assert_eq!(s.get_fields().len(), FIXED.len() + out.len());
    }
}
