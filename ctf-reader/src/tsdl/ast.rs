//! The TSDL syntax tree (CTF 1.8 §7 and appendix C grammar), before type resolution.

/// A type specifier.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TypeSpec {
    /// A type name: C base-type words (`unsigned long`) or a typealias/typedef name.
    Named(String),
    /// `integer { ... }`.
    Integer(Vec<Attr>),
    /// `floating_point { ... }`.
    Float(Vec<Attr>),
    /// `string` or `string { encoding = ...; }`.
    String(Vec<Attr>),
    /// `struct [name] [{ ... }] [align(n)]`.
    Struct { name: Option<String>, body: Option<Vec<Decl>>, align: Option<u64> },
    /// `variant [name] [<tag>] [{ ... }]`.
    Variant { name: Option<String>, tag: Option<String>, body: Option<Vec<Decl>> },
    /// `enum [name] [: container] [{ ... }]`.
    Enum { name: Option<String>, container: Option<Box<TypeSpec>>, body: Option<Vec<EnumEntry>> },
}

/// An array or sequence dimension of a declarator.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Dim {
    /// `[N]`.
    Len(u64),
    /// `[path]`: a sequence whose length is the field at `path` (dotted, as written).
    Path(String),
}

/// A declarator: a name with dimensions (`name[3][len]`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Declarator {
    pub name: String,
    pub dims: Vec<Dim>,
}

/// One enumerator: a label and its range (single value when `lo == hi`); `None` when the
/// value is implicit (the previous upper bound plus one).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EnumEntry {
    pub label: String,
    pub range: Option<(i128, i128)>,
}

/// The value of an attribute.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    /// Integer (signed when written with a minus).
    Int(i128),
    /// String literal.
    Str(String),
    /// Identifier or dotted path (`be`, `true`, `clock.monotonic.value`).
    Ident(String),
    /// Type (after `:=`).
    Type(Box<TypeSpec>),
}

/// `key = value;` or `key := type;`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Attr {
    pub key: String,
    pub value: Value,
    pub line: u32,
}

/// Kinds of top-level blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockKind {
    Trace,
    Env,
    Clock,
    Stream,
    Event,
    Callsite,
}

/// A declaration in a block, structure or variant body, or at the top level.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Decl {
    /// `type a, b[3];`; `blob`: the media type of an LTTng 2.16 BLOB comment before it.
    Field { spec: TypeSpec, decls: Vec<Declarator>, line: u32, blob: Option<String> },
    /// `typealias type [dims] := name;`
    Typealias { spec: TypeSpec, dims: Vec<Dim>, alias: String, line: u32 },
    /// `typedef type a, b[3];`
    Typedef { spec: TypeSpec, decls: Vec<Declarator>, line: u32 },
    /// `struct name { ... };` and friends: declares a named type.
    TypeOnly { spec: TypeSpec, line: u32 },
    /// `key = value;`
    Attr(Attr),
    /// `trace { ... };` and the other blocks.
    Block { kind: BlockKind, body: Vec<Decl>, line: u32 },
}
