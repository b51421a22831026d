//! Walking an event's decoded slots ([`ctf_reader::EventRef::slots`]) into the columns of
//! its class's file, with no value tree: [`compile`] turns a scope's type into [`Op`]s
//! (structures vanish: their members' slots follow one another), each op takes its slots
//! in order and puts them in its leaf columns ([`super::schema`] names them).

use std::collections::HashMap;
use std::sync::Arc;

use ctf_reader::{EnumMapping, EventRef, FieldType, Slot};

use super::columns::{json_str, json_val, Column, Val};
use super::schema::{self, Kind};

/// How one field's slots reach its columns.
#[derive(Debug)]
pub enum Op {
    /// An integer or a float into a column.
    Scalar(usize),
    /// A string into a column.
    Str(usize),
    /// A text array or sequence (cut at the first NUL) into a column.
    Text(usize),
    /// An enumeration: its label, its value.
    Enum {
        /// Label column.
        label: usize,
        /// Value column.
        value: usize,
        /// The mappings.
        mappings: Arc<[EnumMapping]>,
    },
    /// An array or sequence into a list column (or a JSON one).
    List {
        /// The column.
        col: usize,
        /// Its element type.
        elem: Arc<FieldType>,
    },
    /// Anything else as JSON text.
    Json {
        /// The column.
        col: usize,
        /// Its type.
        ty: Arc<FieldType>,
    },
    /// A variant: per option, its ops and the columns of the other options (nulls).
    Variant(Vec<(Vec<Op>, Vec<usize>)>),
}

/// Column indices of a class's leaves by name.
pub type Index = HashMap<String, usize>;

/// Compiles the field `ty` named `name` against the columns `index` (which hold every leaf
/// of it, [`schema::leaves`]); `cols` gets the columns it fills.
pub fn compile(ty: &FieldType, name: &str, index: &Index, kinds: &[Kind], ops: &mut Vec<Op>, cols: &mut Vec<usize>) {
    let col = |n: &str| index[n];
    let join = |n: &str| if name.is_empty() { n.to_string() } else { format!("{name}.{n}") };
    let mut push = |op: Op, c: &[usize]| {
        cols.extend_from_slice(c);
        ops.push(op);
    };
    match ty {
        FieldType::Struct { fields, .. } => {
            for f in fields {
                compile(&f.ty, &join(&f.name), index, kinds, ops, cols);
            }
        }
        FieldType::Variant { options, .. } => {
            let mut per: Vec<(Vec<Op>, Vec<usize>)> = Vec::new();
            for o in options {
                let (mut o_ops, mut o_cols) = (Vec::new(), Vec::new());
                compile(&o.ty, &join(&o.name), index, kinds, &mut o_ops, &mut o_cols);
                per.push((o_ops, o_cols));
            }
            let all: Vec<usize> = per.iter().flat_map(|p| p.1.iter().copied()).collect();
            let per = per.into_iter().map(|(o, mine)| (o, all.iter().copied().filter(|c| !mine.contains(c)).collect())).collect();
            push(Op::Variant(per), &all);
        }
        _ => {
            let c = col(name);
            if kinds[c] == Kind::Json && !matches!(ty, FieldType::Int(_) | FieldType::Float { .. } | FieldType::String { .. } | FieldType::Enum { .. }) {
                return push(Op::Json { col: c, ty: Arc::new(ty.clone()) }, &[c]);
            }
            match ty {
                FieldType::Int(_) | FieldType::Float { .. } => push(Op::Scalar(c), &[c]),
                FieldType::String { .. } => push(Op::Str(c), &[c]),
                FieldType::Enum { mappings, .. } => {
                    let v = col(&format!("{name}.value"));
                    push(Op::Enum { label: c, value: v, mappings: mappings.clone().into() }, &[c, v]);
                }
                FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } if elem.is_text_element() => push(Op::Text(c), &[c]),
                FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } if matches!(kinds[c], Kind::List(_)) => {
                    push(Op::List { col: c, elem: Arc::new((**elem).clone()) }, &[c])
                }
                _ => push(Op::Json { col: c, ty: Arc::new(ty.clone()) }, &[c]),
            }
        }
    }
}

fn label(mappings: &[EnumMapping], v: i128) -> &[u8] {
    mappings.iter().find(|m| m.lo <= v && v <= m.hi).map_or(&[][..], |m| m.label.as_bytes())
}

fn scalar(s: Slot) -> Val<'static> {
    match s {
        Slot::U(u) => Val::U(u),
        Slot::I(i) => Val::I(i),
        Slot::F(f) => Val::F(f),
        _ => Val::B(&[]),
    }
}

fn int_of(s: Slot) -> i128 {
    match s {
        Slot::U(u) => u.into(),
        Slot::I(i) => i.into(),
        _ => 0,
    }
}

fn cut(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n])
}

/// Renders the value of `ty` from `slots` as JSON into `out` (structures as objects,
/// variants as `{option: value}`, enumerations as their label).
pub fn json(ty: &FieldType, slots: &mut std::slice::Iter<'_, Slot>, e: &EventRef<'_>, out: &mut Vec<u8>) {
    if let FieldType::Struct { fields, .. } = ty {
        out.push(b'{');
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json_str(out, f.name.as_bytes());
            out.push(b':');
            json(&f.ty, slots, e, out);
        }
        out.push(b'}');
        return;
    }
    let Some(&s) = slots.next() else { return };
    match ty {
        FieldType::Enum { mappings, .. } => json_str(out, label(mappings, int_of(s))),
        FieldType::String { .. } => json_str(out, e.text(s).unwrap_or_default()),
        FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } if elem.is_text_element() => json_str(out, cut(e.text(s).unwrap_or_default())),
        FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } => {
            let Slot::Len(n) = s else { return };
            out.push(b'[');
            for i in 0..n {
                if i > 0 {
                    out.push(b',');
                }
                json(elem, slots, e, out);
            }
            out.push(b']');
        }
        FieldType::Variant { options, .. } => {
            let Slot::Opt(i) = s else { return };
            let Some(o) = options.get(i as usize) else { return };
            out.push(b'{');
            json_str(out, o.name.as_bytes());
            out.push(b':');
            json(&o.ty, slots, e, out);
            out.push(b'}');
        }
        _ => json_val(out, scalar(s)),
    }
}

/// Runs `ops` over `slots` (the slots of the scope they were compiled from).
pub fn run(ops: &[Op], slots: &mut std::slice::Iter<'_, Slot>, e: &EventRef<'_>, cols: &mut [Column], scratch: &mut Vec<u8>) {
    for op in ops {
        match op {
            Op::Scalar(c) => cols[*c].put(slots.next().map_or(Val::B(&[]), |s| scalar(*s))),
            Op::Str(c) => cols[*c].put(Val::B(slots.next().and_then(|s| e.text(*s)).unwrap_or_default())),
            Op::Text(c) => cols[*c].put(Val::B(cut(slots.next().and_then(|s| e.text(*s)).unwrap_or_default()))),
            Op::Enum { label: l, value, mappings } => {
                let s = slots.next().copied().unwrap_or(Slot::U(0));
                cols[*l].put(Val::B(label(mappings, int_of(s))));
                cols[*value].put(scalar(s));
            }
            Op::List { col, elem } => {
                let Some(Slot::Len(n)) = slots.next().copied() else { return };
                if n == 0 {
                    cols[*col].empty_list();
                }
                for i in 0..n {
                    let Some(&s) = slots.next() else { return };
                    let v = match &**elem {
                        FieldType::Enum { mappings, .. } => Val::B(label(mappings, int_of(s))),
                        FieldType::String { .. } => Val::B(e.text(s).unwrap_or_default()),
                        t if t.is_text_element() => Val::B(cut(e.text(s).unwrap_or_default())),
                        _ => scalar(s),
                    };
                    cols[*col].element(i, v);
                }
            }
            Op::Json { col, ty } => {
                scratch.clear();
                json(ty, slots, e, scratch);
                cols[*col].put_json(scratch);
            }
            Op::Variant(options) => {
                let Some(Slot::Opt(i)) = slots.next().copied() else { return };
                let Some((o_ops, nulls)) = options.get(i as usize) else { return };
                for c in nulls {
                    cols[*c].null();
                }
                run(o_ops, slots, e, cols, scratch);
            }
        }
    }
}

/// Appends the leaves of a scope's root `ty` to `out` (its members' names at the top).
pub fn scope_leaves(ty: Option<&FieldType>, out: &mut Vec<schema::Leaf>) {
    if let Some(ty) = ty {
        schema::leaves(ty, "", out);
    }
}
