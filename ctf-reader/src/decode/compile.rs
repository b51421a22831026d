//! Compiled decoders: a [`FieldType`] becomes a [`Node`] tree with everything a decoder needs
//! precomputed (byte order as a flag, alignment, register to store a length or selector
//! into, variant ranges sorted, text arrays recognised, minimum sizes for bounds checks), so
//! decoding an event never looks at names or paths.
//!
//! Registers play the role of babeltrace2's "stored values": every field that a sequence
//! length or a variant selector refers to stores its value in a register when decoded; the
//! user reads the register. One register table serves a stream class and all its event
//! classes (only one event decodes at a time).

use std::collections::HashMap;

use crate::model::{ByteOrder, FieldPath, FieldType, Role, Scope};

/// No register.
pub(crate) const NO_REG: u16 = u16::MAX;
/// No option, in a variant's table.
pub(crate) const NO_OPTION: u32 = u32::MAX;

/// Where an array's element count comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Len {
    Fixed(u64),
    Reg(u16),
}

/// A compiled field decoder.
#[derive(Debug)]
pub(crate) enum Node {
    Int {
        size: u32,
        align: u32,
        be: bool,
        signed: bool,
        clock: bool,
        reg: u16,
        role: Option<Role>,
    },
    Float {
        size: u32,
        align: u32,
        be: bool,
    },
    CStr,
    /// Array or sequence of byte-aligned 8-bit encoded integers: one text slot.
    Text {
        align: u32,
        len: Len,
    },
    Struct {
        align: u32,
        fields: Box<[Node]>,
    },
    Array {
        align: u32,
        len: Len,
        elem: Box<Node>,
        elem_min_bits: u64,
    },
    Variant {
        reg: u16,
        signed: bool,
        ranges: Box<[(i128, i128, u32)]>,
        /// The option of each selector value below its length ([`NO_OPTION`]: none), when
        /// every range lies in `0..=255` (event headers: `compact = 0 ... 30, extended =
        /// 31`): one load instead of a search.
        table: Box<[u32]>,
        options: Box<[Node]>,
    },
}

impl Node {
    /// The fewest bits this node can take (for rejecting absurd lengths early).
    pub(crate) fn min_bits(&self) -> u64 {
        match self {
            Node::Int { size, .. } | Node::Float { size, .. } => *size as u64,
            Node::CStr => 8,
            Node::Text { len: Len::Fixed(n), .. } => n.saturating_mul(8),
            Node::Text { .. } => 0,
            Node::Struct { fields, .. } => fields.iter().fold(0u64, |a, f| a.saturating_add(f.min_bits())),
            Node::Array { len: Len::Fixed(n), elem_min_bits, .. } => n.saturating_mul(*elem_min_bits),
            Node::Array { .. } => 0,
            Node::Variant { options, .. } => options.iter().map(|o| o.min_bits()).min().unwrap_or(0),
        }
    }
}

/// Register assignment for one stream class: every length/selector target gets one.
#[derive(Default, Debug)]
pub(crate) struct Registers {
    map: HashMap<FieldPath, u16>,
}

impl Registers {
    /// Collects the targets of every sequence and variant in `types`.
    pub(crate) fn collect<'a>(types: impl IntoIterator<Item = &'a FieldType>) -> Result<Self, String> {
        let mut r = Registers::default();
        for t in types {
            crate::roles::visit(t, &mut |t| {
                let p = match t {
                    FieldType::Sequence { len, .. } => len,
                    FieldType::Variant { tag, .. } => tag,
                    _ => return Ok(()),
                };
                let n = r.map.len();
                if n >= NO_REG as usize {
                    return Err("too many length and selector fields".into());
                }
                r.map.entry(p.clone()).or_insert(n as u16);
                Ok(())
            })?;
        }
        Ok(r)
    }

    /// Number of registers.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    fn get(&self, p: &FieldPath) -> Result<u16, String> {
        self.map.get(p).copied().ok_or_else(|| format!("no register for {p:?}"))
    }
}

/// Compiles the root type of `scope`.
pub(crate) fn compile(ty: &FieldType, scope: Scope, regs: &Registers) -> Result<Node, String> {
    let mut path = FieldPath { scope, indices: Vec::new() };
    node(ty, &mut path, regs)
}

fn node(ty: &FieldType, path: &mut FieldPath, regs: &Registers) -> Result<Node, String> {
    Ok(match ty {
        FieldType::Int(i) | FieldType::Enum { int: i, .. } => Node::Int {
            size: i.size as u32,
            align: i.align,
            be: i.byte_order == ByteOrder::Big,
            signed: i.signed,
            // `timestamp_end` keeps its clock in the model but never moves the stream clock.
            clock: i.clock.is_some() && i.role != Some(Role::PacketEndTime),
            reg: regs.map.get(path).copied().unwrap_or(NO_REG),
            role: i.role,
        },
        FieldType::Float { size, align, byte_order } => Node::Float { size: *size as u32, align: *align, be: *byte_order == ByteOrder::Big },
        FieldType::String { .. } => Node::CStr,
        FieldType::Struct { align, fields } => {
            let mut out = Vec::with_capacity(fields.len());
            for (i, f) in fields.iter().enumerate() {
                path.indices.push(i as u32);
                let n = node(&f.ty, path, regs);
                path.indices.pop();
                out.push(n?);
            }
            Node::Struct { align: ty.align().max(*align), fields: out.into_boxed_slice() }
        }
        FieldType::Array { elem, len } => array(elem, Len::Fixed(*len), path, regs)?,
        FieldType::Sequence { elem, len } => array(elem, Len::Reg(regs.get(len)?), path, regs)?,
        FieldType::Variant { tag, options, ranges } => {
            let signed = tag_signed(ty);
            let mut out = Vec::with_capacity(options.len());
            for (i, o) in options.iter().enumerate() {
                path.indices.push(i as u32);
                let n = node(&o.ty, path, regs);
                path.indices.pop();
                out.push(n?);
            }
            let mut rs: Vec<(i128, i128, u32)> = ranges.iter().enumerate().flat_map(|(i, r)| r.iter().map(move |&(lo, hi)| (lo, hi, i as u32))).collect();
            rs.sort_by_key(|r| (r.0, r.1));
            let table = if rs.iter().all(|r| r.0 >= 0 && r.1 <= 255) {
                let mut t = vec![NO_OPTION; rs.iter().map(|r| r.1 as usize + 1).max().unwrap_or(0)];
                // The first range holding a value wins, as in the search.
                for &(lo, hi, o) in rs.iter().rev() {
                    t[lo as usize..=hi as usize].fill(o);
                }
                t
            } else {
                Vec::new()
            };
            Node::Variant { reg: regs.get(tag)?, signed, ranges: rs.into_boxed_slice(), table: table.into_boxed_slice(), options: out.into_boxed_slice() }
        }
    })
}

/// Whether the selector of a variant is signed: the model's ranges are already in the
/// selector's value space, so only the sign of negative bounds matters.
fn tag_signed(ty: &FieldType) -> bool {
    match ty {
        FieldType::Variant { ranges, .. } => ranges.iter().flatten().any(|r| r.0 < 0),
        _ => false,
    }
}

fn array(elem: &FieldType, len: Len, path: &mut FieldPath, regs: &Registers) -> Result<Node, String> {
    if elem.is_text_element() {
        return Ok(Node::Text { align: elem.align(), len });
    }
    path.indices.push(0);
    let e = node(elem, path, regs);
    path.indices.pop();
    let e = e?;
    Ok(Node::Array { align: elem.align(), len, elem_min_bits: e.min_bits(), elem: Box::new(e) })
}
