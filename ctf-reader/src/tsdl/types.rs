//! TSDL type resolution (CTF 1.8 §4 and §7.3): type specifiers to [`Ty`], with lexical
//! scopes of typealiases, typedefs and named structures, variants and enumerations.
//! Sequence lengths and variant tags stay as written here; [`super::paths`] resolves them
//! where the type is used. Every type records its depth and node count, so alias chains
//! cannot build types deeper than [`MAX_TYPE_DEPTH`] or larger than [`MAX_TYPE_NODES`].

use std::collections::HashMap;

use super::ast::{Attr, Decl, Dim, TypeSpec, Value};
use crate::model::{ByteOrder, Encoding, EnumMapping, IntType};

/// Deepest type accepted (structures in structures, arrays, variants).
pub(crate) const MAX_TYPE_DEPTH: u32 = 64;
/// Largest type accepted, in nodes (a guard against alias fan-out blowing up memory).
pub(crate) const MAX_TYPE_NODES: u32 = 1 << 18;
/// Most type nodes the whole metadata may build (members summed over all compounds).
pub(crate) const MAX_TOTAL_NODES: u64 = 1 << 23;

/// A resolved type whose paths are still as written, with its size bounds.
#[derive(Clone, Debug)]
pub(crate) struct Ty {
    pub kind: TyKind,
    pub depth: u32,
    pub nodes: u32,
    /// As a structure member: the media type of the LTTng 2.16 BLOB field it is.
    pub blob: Option<String>,
}

#[derive(Clone, Debug)]
pub(crate) enum TyKind {
    Int(IntType),
    Enum(IntType, Vec<EnumMapping>),
    Float {
        size: u8,
        align: u32,
        byte_order: ByteOrder,
    },
    String(Encoding),
    /// Members by raw (unstripped) name.
    Struct {
        align: u32,
        fields: Vec<(String, Ty)>,
    },
    Variant {
        tag: Option<String>,
        options: Vec<(String, Ty)>,
    },
    Array(Box<Ty>, u64),
    Sequence(Box<Ty>, String),
}

impl Ty {
    pub(crate) fn leaf(kind: TyKind) -> Ty {
        Ty { kind, depth: 1, nodes: 1, blob: None }
    }

    fn bounded(kind: TyKind, depth: u32, nodes: u64) -> Result<Ty, String> {
        if depth > MAX_TYPE_DEPTH {
            return Err(format!("type nests deeper than {MAX_TYPE_DEPTH} levels"));
        }
        if nodes > MAX_TYPE_NODES as u64 {
            return Err(format!("type has more than {MAX_TYPE_NODES} nodes"));
        }
        Ok(Ty { kind, depth, nodes: nodes as u32, blob: None })
    }

    fn bounds(children: &[(String, Ty)]) -> (u32, u64) {
        let depth = 1 + children.iter().map(|c| c.1.depth).max().unwrap_or(0);
        (depth, 1 + children.iter().map(|c| c.1.nodes as u64).sum::<u64>())
    }

    pub(crate) fn structure(align: u32, fields: Vec<(String, Ty)>) -> Result<Ty, String> {
        let (d, n) = Ty::bounds(&fields);
        Ty::bounded(TyKind::Struct { align, fields }, d, n)
    }

    pub(crate) fn variant(tag: Option<String>, options: Vec<(String, Ty)>) -> Result<Ty, String> {
        let (d, n) = Ty::bounds(&options);
        Ty::bounded(TyKind::Variant { tag, options }, d, n)
    }

    pub(crate) fn wrap_dims(mut self, dims: &[Dim]) -> Result<Ty, String> {
        // `int x[2][3]` is an array of 2 arrays of 3: wrap from the innermost dimension.
        for d in dims.iter().rev() {
            let kind = match d {
                Dim::Len(n) => TyKind::Array(Box::new(self.clone()), *n),
                Dim::Path(p) => TyKind::Sequence(Box::new(self.clone()), p.clone()),
            };
            let (d, n) = (self.depth + 1, self.nodes as u64 + 1);
            self = Ty::bounded(kind, d, n)?;
        }
        Ok(self)
    }
}

/// One lexical scope of type names.
#[derive(Default)]
struct Frame {
    aliases: HashMap<String, Ty>,
    structs: HashMap<String, Ty>,
    variants: HashMap<String, Ty>,
    enums: HashMap<String, Ty>,
}

/// The stack of lexical scopes while walking the metadata.
pub(crate) struct Scopes {
    frames: Vec<Frame>,
    /// Byte order that `native` stands for.
    pub native: ByteOrder,
    /// Clock names, in declaration order (for `map = clock.NAME.value`).
    pub clocks: Vec<String>,
    /// Type nodes built so far (bounded by [`MAX_TOTAL_NODES`]).
    built: u64,
}

type RResult<T> = Result<T, (u32, String)>;

impl Scopes {
    pub(crate) fn new(native: ByteOrder, clocks: Vec<String>) -> Self {
        Scopes { frames: vec![Frame::default()], native, clocks, built: 0 }
    }

    pub(crate) fn push(&mut self) {
        self.frames.push(Frame::default());
    }

    pub(crate) fn pop(&mut self) {
        self.frames.pop();
    }

    fn lookup<'a>(&'a self, pick: impl Fn(&'a Frame) -> &'a HashMap<String, Ty>, name: &str) -> Option<&'a Ty> {
        self.frames.iter().rev().find_map(|f| pick(f).get(name))
    }

    fn top(&mut self) -> &mut Frame {
        self.frames.last_mut().expect("the root frame is never popped")
    }

    /// Handles a declaration that only declares types (typealias, typedef, named compound);
    /// returns `Ok(false)` for anything else.
    pub(crate) fn declare(&mut self, d: &Decl) -> RResult<bool> {
        match d {
            Decl::Typealias { spec, dims, alias, line } => {
                let t = self.resolve(spec, *line)?.wrap_dims(dims).map_err(|m| (*line, m))?;
                self.top().aliases.insert(alias.clone(), t);
                Ok(true)
            }
            Decl::Typedef { spec, decls, line } => {
                let t = self.resolve(spec, *line)?;
                for dcl in decls {
                    let t = t.clone().wrap_dims(&dcl.dims).map_err(|m| (*line, m))?;
                    self.top().aliases.insert(dcl.name.clone(), t);
                }
                Ok(true)
            }
            Decl::TypeOnly { spec, line } => {
                self.resolve(spec, *line)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Resolves a type specifier; named compounds with a body are declared in the current
    /// scope as a side effect.
    pub(crate) fn resolve(&mut self, spec: &TypeSpec, line: u32) -> RResult<Ty> {
        match spec {
            TypeSpec::Named(n) => self.lookup(|f| &f.aliases, n).cloned().ok_or((line, format!("unknown type `{n}`"))),
            TypeSpec::Integer(attrs) => Ok(Ty::leaf(TyKind::Int(self.integer(attrs)?))),
            TypeSpec::Float(attrs) => self.float(attrs),
            TypeSpec::String(attrs) => {
                let mut enc = Encoding::Utf8;
                for a in attrs {
                    match a.key.as_str() {
                        "encoding" => enc = encoding(a)?,
                        k => return Err((a.line, format!("unknown string attribute `{k}`"))),
                    }
                }
                Ok(Ty::leaf(TyKind::String(enc)))
            }
            TypeSpec::Struct { name, body, align } => {
                let min_align = match align {
                    Some(a) if a.is_power_of_two() && *a <= 1 << 16 => *a as u32,
                    Some(a) => return Err((line, format!("struct alignment {a} is not a power of two up to 65536 bits"))),
                    None => 1,
                };
                let Some(body) = body else {
                    let n = name.as_deref().unwrap_or_default();
                    return self.lookup(|f| &f.structs, n).cloned().ok_or((line, format!("unknown struct `{n}`")));
                };
                let fields = self.members(body)?;
                let t = Ty::structure(min_align, fields).map_err(|m| (line, m))?;
                if let Some(n) = name {
                    self.top().structs.insert(n.clone(), t.clone());
                }
                Ok(t)
            }
            TypeSpec::Variant { name, tag, body } => {
                let Some(body) = body else {
                    let n = name.as_deref().unwrap_or_default();
                    let mut t = self.lookup(|f| &f.variants, n).cloned().ok_or((line, format!("unknown variant `{n}`")))?;
                    if let (TyKind::Variant { tag: t_tag, .. }, Some(tag)) = (&mut t.kind, tag) {
                        *t_tag = Some(tag.clone());
                    }
                    return Ok(t);
                };
                let options = self.members(body)?;
                let t = Ty::variant(tag.clone(), options).map_err(|m| (line, m))?;
                if let Some(n) = name {
                    let mut untagged = t.clone();
                    if let TyKind::Variant { tag, .. } = &mut untagged.kind {
                        *tag = None;
                    }
                    self.top().variants.insert(n.clone(), untagged);
                }
                Ok(t)
            }
            TypeSpec::Enum { name, container, body } => {
                let Some(body) = body else {
                    let n = name.as_deref().unwrap_or_default();
                    return self.lookup(|f| &f.enums, n).cloned().ok_or((line, format!("unknown enum `{n}`")));
                };
                let int = match container {
                    Some(c) => self.resolve(c, line)?,
                    None => self.lookup(|f| &f.aliases, "int").cloned().ok_or((line, "enum without container type and no `int` alias".to_string()))?,
                };
                let TyKind::Int(int) = int.kind else { return Err((line, "enum container is not an integer".into())) };
                let mut mappings = Vec::with_capacity(body.len());
                let mut next: i128 = 0;
                for e in body {
                    let (lo, hi) = e.range.unwrap_or((next, next));
                    if lo > hi {
                        return Err((line, format!("enum label `{}` has an empty range {lo}...{hi}", e.label)));
                    }
                    let (min, max) = int_range(&int);
                    if lo < min || hi > max {
                        return Err((line, format!("enum label `{}` range {lo}...{hi} exceeds its {}-bit container", e.label, int.size)));
                    }
                    next = hi + 1;
                    mappings.push(EnumMapping { label: e.label.clone(), lo, hi });
                }
                let t = Ty::leaf(TyKind::Enum(int, mappings));
                if let Some(n) = name {
                    self.top().enums.insert(n.clone(), t.clone());
                }
                Ok(t)
            }
        }
    }

    /// Members of a structure or options of a variant body, in a scope of their own.
    fn members(&mut self, body: &[Decl]) -> RResult<Vec<(String, Ty)>> {
        self.push();
        let r = self.members_inner(body);
        self.pop();
        r
    }

    fn members_inner(&mut self, body: &[Decl]) -> RResult<Vec<(String, Ty)>> {
        let mut out: Vec<(String, Ty)> = Vec::new();
        let mut nodes = 0u64;
        // A BLOB comment's media type, waiting for its field: LTTng may write an empty
        // `struct { } align(N) x_padding;` between the comment and the field.
        let mut blob: Option<String> = None;
        for d in body {
            if self.declare(d)? {
                continue;
            }
            match d {
                Decl::Field { spec, decls, line, blob: b } => {
                    if b.is_some() {
                        blob = b.clone();
                    }
                    let t = self.resolve(spec, *line)?;
                    for dcl in decls {
                        if out.iter().any(|(n, _)| *n == dcl.name) {
                            return Err((*line, format!("duplicate member `{}`", dcl.name)));
                        }
                        nodes += t.nodes as u64 + dcl.dims.len() as u64;
                        self.built += t.nodes as u64;
                        if nodes > MAX_TYPE_NODES as u64 || self.built > MAX_TOTAL_NODES {
                            return Err((*line, format!("types larger than {MAX_TYPE_NODES} nodes (or {MAX_TOTAL_NODES} in all)")));
                        }
                        let mut member = t.clone().wrap_dims(&dcl.dims).map_err(|m| (*line, m))?;
                        let padding = matches!(&member.kind, TyKind::Struct { fields, .. } if fields.is_empty());
                        member.blob = if padding { None } else { blob.take() };
                        out.push((dcl.name.clone(), member));
                    }
                }
                Decl::Attr(a) => return Err((a.line, format!("attribute `{}` inside a compound type", a.key))),
                Decl::Block { line, .. } => return Err((*line, "block inside a compound type".into())),
                _ => {}
            }
        }
        Ok(out)
    }

    fn integer(&self, attrs: &[Attr]) -> RResult<IntType> {
        let mut size = None;
        let mut align = None;
        let mut it = IntType {
            size: 0,
            align: 0,
            signed: false,
            byte_order: self.native,
            base: 10,
            encoding: Encoding::None,
            clock: None,
            role: None,
            referenced: false,
        };
        let line = attrs.first().map(|a| a.line).unwrap_or(0);
        for a in attrs {
            match a.key.as_str() {
                "size" => size = Some(int_value(a)?),
                "align" => align = Some(int_value(a)?),
                "signed" => it.signed = bool_value(a)?,
                "byte_order" => it.byte_order = byte_order(a, self.native)?,
                "base" => {
                    it.base = match &a.value {
                        Value::Int(2) => 2,
                        Value::Int(8) => 8,
                        Value::Int(10) => 10,
                        Value::Int(16) => 16,
                        Value::Ident(s) => match s.as_str() {
                            "decimal" | "dec" | "d" | "i" | "u" => 10,
                            "hexadecimal" | "hex" | "x" | "X" | "p" => 16,
                            "octal" | "oct" | "o" => 8,
                            "binary" | "b" => 2,
                            _ => return Err((a.line, format!("unknown base `{s}`"))),
                        },
                        _ => return Err((a.line, "bad integer base".into())),
                    }
                }
                "encoding" => it.encoding = encoding(a)?,
                "map" => {
                    let Value::Ident(p) = &a.value else { return Err((a.line, "bad `map` value".into())) };
                    let name = p.strip_prefix("clock.").and_then(|r| r.strip_suffix(".value")).ok_or((a.line, format!("unsupported map `{p}`")))?;
                    it.clock = Some(self.clocks.iter().position(|c| c == name).ok_or((a.line, format!("map to unknown clock `{name}`")))?);
                }
                k => return Err((a.line, format!("unknown integer attribute `{k}`"))),
            }
        }
        let size = size.ok_or((line, "integer without size".to_string()))?;
        if !(1..=64).contains(&size) {
            return Err((line, format!("integer size {size} is not in 1..=64")));
        }
        it.size = size as u8;
        let align = align.unwrap_or(if size % 8 == 0 { 8 } else { 1 });
        if !align.is_power_of_two() || align > 1 << 16 {
            return Err((line, format!("integer alignment {align} is not a power of two up to 65536 bits")));
        }
        it.align = align as u32;
        Ok(it)
    }

    fn float(&self, attrs: &[Attr]) -> RResult<Ty> {
        let (mut exp, mut mant, mut align, mut bo) = (0, 0, None, self.native);
        let line = attrs.first().map(|a| a.line).unwrap_or(0);
        for a in attrs {
            match a.key.as_str() {
                "exp_dig" => exp = int_value(a)?,
                "mant_dig" => mant = int_value(a)?,
                "align" => align = Some(int_value(a)?),
                "byte_order" => bo = byte_order(a, self.native)?,
                k => return Err((a.line, format!("unknown floating_point attribute `{k}`"))),
            }
        }
        let size = match (exp, mant) {
            (8, 24) => 32,
            (11, 53) => 64,
            _ => return Err((line, format!("floating point exp_dig {exp} mant_dig {mant} is neither binary32 (8/24) nor binary64 (11/53)"))),
        };
        let align = align.unwrap_or(8);
        if !align.is_power_of_two() || align > 1 << 16 {
            return Err((line, format!("float alignment {align} is not a power of two up to 65536 bits")));
        }
        Ok(Ty::leaf(TyKind::Float { size, align: align as u32, byte_order: bo }))
    }
}

/// Value range of an integer type.
pub(crate) fn int_range(i: &IntType) -> (i128, i128) {
    if i.signed {
        (-(1i128 << (i.size - 1)), (1i128 << (i.size - 1)) - 1)
    } else {
        (0, (1i128 << i.size) - 1)
    }
}

pub(crate) fn int_value(a: &Attr) -> RResult<u64> {
    match a.value {
        Value::Int(v) if (0..=u64::MAX as i128).contains(&v) => Ok(v as u64),
        _ => Err((a.line, format!("`{}` needs a non-negative integer", a.key))),
    }
}

fn bool_value(a: &Attr) -> RResult<bool> {
    match &a.value {
        Value::Int(0) => Ok(false),
        Value::Int(1) => Ok(true),
        Value::Ident(s) if matches!(s.as_str(), "true" | "TRUE") => Ok(true),
        Value::Ident(s) if matches!(s.as_str(), "false" | "FALSE") => Ok(false),
        _ => Err((a.line, format!("`{}` needs a boolean", a.key))),
    }
}

/// Reads a `byte_order` attribute.
pub(crate) fn byte_order(a: &Attr, native: ByteOrder) -> RResult<ByteOrder> {
    match &a.value {
        Value::Ident(s) => match s.as_str() {
            "le" | "little" | "little_endian" => Ok(ByteOrder::Little),
            "be" | "big" | "big_endian" | "network" => Ok(ByteOrder::Big),
            "native" => Ok(native),
            _ => Err((a.line, format!("unknown byte order `{s}`"))),
        },
        _ => Err((a.line, "bad byte order".into())),
    }
}

fn encoding(a: &Attr) -> RResult<Encoding> {
    match &a.value {
        Value::Ident(s) => match s.as_str() {
            "none" => Ok(Encoding::None),
            "UTF8" | "utf8" => Ok(Encoding::Utf8),
            "ASCII" | "ascii" => Ok(Encoding::Ascii),
            _ => Err((a.line, format!("unknown encoding `{s}`"))),
        },
        _ => Err((a.line, "bad encoding".into())),
    }
}
