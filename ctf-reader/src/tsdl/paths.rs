//! Turns a resolved [`Ty`] into a model [`FieldType`] where it is used as a root scope:
//! sequence lengths and variant tags become [`FieldPath`]s (CTF 1.8 §7.3.2: absolute paths
//! start with `trace.packet.header`, `stream.packet.context`, `stream.event.header`,
//! `stream.event.context`, `event.context` or `event.fields`; relative paths name a member
//! declared before, in the current structure or an enclosing one), and member names lose
//! one leading underscore.
//!
//! A [`FieldPath`]'s indices are child indices: structure member, variant option, or 0 for
//! an array or sequence element.

use super::types::{Ty, TyKind};
use crate::model::{Field, FieldPath, FieldType, Scope};

/// Root scope types already converted, by scope, for absolute paths (raw names).
pub(crate) struct Roots<'a> {
    pub prev: Vec<(Scope, &'a Ty)>,
}

struct Frame<'a> {
    members: &'a [(String, Ty)],
    upto: usize,
    prefix: Vec<u32>,
}

/// Converts `ty`, the root type of `scope`.
pub(crate) fn convert<'a>(ty: &'a Ty, scope: Scope, roots: &'a Roots<'a>) -> Result<FieldType, String> {
    let mut cx = Cx { scope, root: ty, roots, stack: Vec::new(), path: Vec::new() };
    cx.conv(ty)
}

/// Strips one leading underscore, as babeltrace2 shows TSDL names.
pub(crate) fn display_name(raw: &str) -> String {
    raw.strip_prefix('_').unwrap_or(raw).to_string()
}

struct Cx<'a> {
    scope: Scope,
    root: &'a Ty,
    roots: &'a Roots<'a>,
    stack: Vec<Frame<'a>>,
    path: Vec<u32>,
}

const ABSOLUTE: &[(&str, Scope)] = &[
    ("trace.packet.header.", Scope::PacketHeader),
    ("stream.packet.context.", Scope::PacketContext),
    ("stream.event.header.", Scope::EventHeader),
    ("stream.event.context.", Scope::EventCommonContext),
    ("event.context.", Scope::EventSpecificContext),
    ("event.fields.", Scope::EventPayload),
];

impl<'a> Cx<'a> {
    fn conv(&mut self, ty: &'a Ty) -> Result<FieldType, String> {
        Ok(match &ty.kind {
            TyKind::Int(i) => FieldType::Int(i.clone()),
            TyKind::Enum(i, m) => FieldType::Enum { int: i.clone(), mappings: m.clone() },
            TyKind::Float { size, align, byte_order } => FieldType::Float { size: *size, align: *align, byte_order: *byte_order },
            TyKind::String(e) => FieldType::String { encoding: *e },
            TyKind::Struct { align, fields } => {
                self.stack.push(Frame { members: fields, upto: 0, prefix: self.path.clone() });
                let mut out = Vec::with_capacity(fields.len());
                for (i, (name, t)) in fields.iter().enumerate() {
                    if let Some(f) = self.stack.last_mut() {
                        f.upto = i;
                    }
                    self.path.push(i as u32);
                    let r = self.conv(t);
                    self.path.pop();
                    out.push(Field { name: display_name(name), ty: r?, media_type: t.blob.clone() });
                }
                self.stack.pop();
                FieldType::Struct { align: *align, fields: out }
            }
            TyKind::Variant { tag, options } => {
                let tag = tag.as_deref().ok_or("variant without a tag")?;
                let tag_path = self.resolve(tag)?;
                let tag_ty = self.type_at(&tag_path).ok_or_else(|| format!("variant tag `{tag}` not found"))?;
                let TyKind::Enum(_, mappings) = &tag_ty.kind else { return Err(format!("variant tag `{tag}` is not an enumeration")) };
                let mut out = Vec::with_capacity(options.len());
                let mut ranges = Vec::with_capacity(options.len());
                for (i, (name, t)) in options.iter().enumerate() {
                    self.path.push(i as u32);
                    let r = self.conv(t);
                    self.path.pop();
                    out.push(Field { name: display_name(name), ty: r?, media_type: None });
                    let stripped = display_name(name);
                    ranges.push(
                        mappings.iter().filter(|m| m.label == *name || m.label == stripped || display_name(&m.label) == *name).map(|m| (m.lo, m.hi)).collect(),
                    );
                }
                FieldType::Variant { tag: tag_path, options: out, ranges }
            }
            TyKind::Array(e, n) => {
                self.path.push(0);
                let r = self.conv(e);
                self.path.pop();
                FieldType::Array { elem: Box::new(r?), len: *n }
            }
            TyKind::Sequence(e, len) => {
                let len_path = self.resolve(len)?;
                let t = self.type_at(&len_path).ok_or_else(|| format!("sequence length `{len}` not found"))?;
                match &t.kind {
                    TyKind::Int(i) | TyKind::Enum(i, _) if !i.signed => {}
                    _ => return Err(format!("sequence length `{len}` is not an unsigned integer")),
                }
                self.path.push(0);
                let r = self.conv(e);
                self.path.pop();
                FieldType::Sequence { elem: Box::new(r?), len: len_path }
            }
        })
    }

    /// The raw type at `p`.
    fn type_at(&self, p: &FieldPath) -> Option<&'a Ty> {
        let root: &Ty = if p.scope == self.scope { self.root } else { self.roots.prev.iter().find(|(s, _)| *s == p.scope)?.1 };
        let mut t: &Ty = root;
        for &i in &p.indices {
            t = match &t.kind {
                TyKind::Struct { fields, .. } => &fields.get(i as usize)?.1,
                TyKind::Variant { options, .. } => &options.get(i as usize)?.1,
                TyKind::Array(e, _) | TyKind::Sequence(e, _) => e,
                _ => return None,
            };
        }
        Some(t)
    }

    /// Resolves a path as written to an absolute [`FieldPath`] that precedes the user.
    fn resolve(&self, written: &str) -> Result<FieldPath, String> {
        for (prefix, scope) in ABSOLUTE {
            if let Some(rest) = written.strip_prefix(prefix) {
                if *scope > self.scope {
                    return Err(format!("path `{written}` refers to a later scope"));
                }
                let root = if *scope == self.scope {
                    self.root
                } else {
                    self.roots.prev.iter().find(|(s, _)| s == scope).map(|r| r.1).ok_or_else(|| format!("path `{written}`: scope is absent"))?
                };
                let indices = descend(root, &rest.split('.').collect::<Vec<_>>()).ok_or_else(|| format!("path `{written}` not found"))?;
                let p = FieldPath { scope: *scope, indices };
                if *scope == self.scope && !precedes(&p.indices, &self.path) {
                    return Err(format!("path `{written}` does not precede its user"));
                }
                return Ok(p);
            }
        }
        let tokens: Vec<&str> = written.split('.').collect();
        for f in self.stack.iter().rev() {
            if let Some(i) = f.members[..f.upto].iter().position(|(n, _)| n == tokens[0]) {
                let mut indices = f.prefix.clone();
                indices.push(i as u32);
                let below = descend(&f.members[i].1, &tokens[1..]).ok_or_else(|| format!("path `{written}` not found"))?;
                indices.extend(below);
                return Ok(FieldPath { scope: self.scope, indices });
            }
        }
        // Not in the current scope: look at the top level of the earlier scopes.
        for (scope, root) in self.roots.prev.iter().rev() {
            if let Some(indices) = descend(root, &tokens) {
                return Ok(FieldPath { scope: *scope, indices });
            }
        }
        Err(format!("path `{written}` names no earlier field"))
    }
}

/// Member indices of `tokens` below `t` through structures.
fn descend(t: &Ty, tokens: &[&str]) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    let mut t = t;
    for tok in tokens {
        let TyKind::Struct { fields, .. } = &t.kind else { return None };
        let i = fields.iter().position(|(n, _)| n == tok)?;
        out.push(i as u32);
        t = &fields[i].1;
    }
    Some(out)
}

/// Whether the field at `a` is decoded before the field at `b` (same root).
fn precedes(a: &[u32], b: &[u32]) -> bool {
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return x < y;
        }
    }
    false
}
