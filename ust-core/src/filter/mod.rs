//! Filter expressions (`ust enable-event --filter EXPR`): the form that travels from the
//! CLI through the daemon to the process, its validation, and its evaluation on an event's
//! packed payload before anything is reserved in a buffer.
//!
//! The language is LTTng 2.13's: comparisons (`==`, `!=`, `<`, `<=`, `>`, `>=`) between
//! event fields, elements of array and sequence fields (`arr[1]`), `$ctx.<context>` values
//! and literals (integers, floats, strings); the integer operators `&`, `|`, `^`, `<<`,
//! `>>`, `~` and unary `-`; combined with `&&`, `||`, `!` and parentheses. A comparison is
//! itself a value (1 or 0), so `1 >= (1 >= 1)` holds. A bare numeric operand is true when
//! non-zero. String literals may hold `*` wildcards (`msg == "conn*"`, also between two
//! literals: `"abc" == "a*"`); `\*` is a literal star. The `ust` CLI parses the text (the
//! `ust-ctl` crate's `filter` module) into an [`Expr`] whose fields are named
//! ([`Operand::Named`], [`Operand::NamedElem`]); the daemon resolves the names against each
//! event's description ([`resolve`]), giving [`Operand::Field`] and [`Operand::Elem`]
//! indexes (an event that lacks a field, or whose field has a type the expression cannot
//! take, gets no filter that could match: the filter is false for it); the process
//! receives the resolved form and checks it again ([`validate`]) before it would ever run
//! it: bounded size and depth, field indexes in range, types that match. Evaluation
//! ([`fn@eval`], in [`mod@eval`]) reads the payload bytes written by the tracepoint and never
//! allocates.
//!
//! ```text
//! CLI: parse + check ──Expr{Named}──> daemon: resolve per event ──Expr{Field}──>
//!      process: validate ──> emit: serialize payload, eval, reserve only on a match
//! ```
//!
//! Integer arithmetic is LTTng's: values are 64-bit, bitwise operators and shifts work on
//! the unsigned bits, comparisons are signed (`(1 << 63) < 0`); a shift by a count outside
//! `0..64`, an index past the end of an array, or a payload cut short makes the whole
//! filter false for that event (LTTng's interpreter discards the event on such errors).

use serde::{Deserialize, Serialize};

use crate::context::ContextType;
use crate::event::{EventDesc, FieldType};

pub mod eval;

pub use eval::{eval, field_size, field_value, pattern_match, ContextSource, Value};

/// Most nodes (operators and operands) in one expression. The text of a filter is at most
/// 4 KiB, so this bounds nothing a user could write short of that; LTTng's own bound is
/// 64 KiB of bytecode.
pub const MAX_NODES: usize = 2048;
/// Deepest nesting of operators (parentheses, unary operators, operands of operators). The
/// terms of a chain `a && b && c ...` (or `||`) are one level, however many there are.
pub const MAX_DEPTH: usize = 32;
/// Longest string literal, in bytes.
pub const MAX_STRING: usize = 1024;
/// Most filters attached to one (event, channel) pair: the filters of the enablers that
/// match the event OR together.
pub const MAX_FILTERS_PER_EVENT: usize = 64;

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CmpOp {
    /// The operator's text.
    pub const fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    /// True when ordering `o` satisfies the operator.
    pub(crate) fn holds(self, o: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            CmpOp::Eq => o == Equal,
            CmpOp::Ne => o != Equal,
            CmpOp::Lt => o == Less,
            CmpOp::Le => o != Greater,
            CmpOp::Gt => o == Greater,
            CmpOp::Ge => o != Less,
        }
    }
}

/// An integer (bitwise) operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BitOp {
    /// `&`
    And,
    /// `|`
    Or,
    /// `^`
    Xor,
    /// `<<`
    Shl,
    /// `>>` (logical: the bits are unsigned)
    Shr,
}

impl BitOp {
    /// The operator's text.
    pub const fn symbol(self) -> &'static str {
        match self {
            BitOp::And => "&",
            BitOp::Or => "|",
            BitOp::Xor => "^",
            BitOp::Shl => "<<",
            BitOp::Shr => ">>",
        }
    }
}

/// A value in an expression.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Operand {
    /// An event field by name (the CLI's and the daemon's form; a process refuses it). A
    /// name no field can have (`a.b`, `$ctx.vtid.x`) makes the filter false for every
    /// event.
    Named(String),
    /// An event field by index into the event's fields (the form a process runs).
    Field(u32),
    /// A context value: `$ctx.vtid`, ...
    Context(ContextType),
    /// An integer literal.
    Int(i64),
    /// A float literal.
    Float(f64),
    /// A string literal in pattern syntax: `*` matches any run of bytes, `\*` is a star,
    /// `\\` a backslash.
    Str(String),
    /// Element `.1` of the array or sequence field named `.0` (`arrfield1[1]`).
    NamedElem(String, u32),
    /// Element `.1` of the array or sequence field of index `.0` (the resolved form).
    Elem(u32, u32),
}

/// A filter expression. Every node has a value: an operand its own, a comparison or a
/// logical operator 1 or 0; as a condition, a value is true when non-zero.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    /// `a || b`
    Or(Box<Expr>, Box<Expr>),
    /// `a && b`
    And(Box<Expr>, Box<Expr>),
    /// `!a`
    Not(Box<Expr>),
    /// `a OP b` between two operands (strings among them).
    Cmp(CmpOp, Operand, Operand),
    /// An operand: as a condition, a bare numeric operand, true when non-zero.
    Truthy(Operand),
    /// `a || b || c ...`: true when a term is, tried in order.
    Any(Vec<Expr>),
    /// `a && b && c ...`: true when every term is, tried in order.
    All(Vec<Expr>),
    /// `a OP b` between two numeric values computed by sub-expressions.
    Compare(CmpOp, Box<Expr>, Box<Expr>),
    /// `a OP b` on integers.
    Bits(BitOp, Box<Expr>, Box<Expr>),
    /// `-a`
    Neg(Box<Expr>),
    /// `~a` (integers)
    BitNot(Box<Expr>),
}

/// The kind of value an operand yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Integers (also enums, `bool`, `char`).
    Int,
    /// Floats.
    Float,
    /// Strings (also text sequences such as `tracef!`'s `msg`).
    Str,
}

/// Why a filter was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// More than [`MAX_NODES`] nodes.
    #[error("filter too large (more than {MAX_NODES} nodes)")]
    TooLarge,
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("filter nested deeper than {MAX_DEPTH}")]
    TooDeep,
    /// A string literal over [`MAX_STRING`] bytes.
    #[error("string literal longer than {MAX_STRING} bytes")]
    LongString,
    /// A field named, not resolved (a process runs only resolved filters).
    #[error("unresolved field name {0:?}")]
    Unresolved(String),
    /// A field index out of range for the event.
    #[error("field index {0} out of range")]
    FieldIndex(u32),
    /// A field whose type cannot be compared (arrays, non-text sequences), or indexed
    /// when it is not an array or sequence.
    #[error("field {0:?} cannot be compared")]
    Uncomparable(String),
    /// Operands of kinds that cannot be compared, or an ordering on strings.
    #[error("cannot compare {0} with {1} using {2}")]
    Mismatch(&'static str, &'static str, &'static str),
    /// A string used as a truth value or as the operand of an arithmetic operator.
    #[error("a string is not a truth value")]
    StringTruth,
    /// A float operand of an integer operator.
    #[error("`{0}` takes integers, not a float")]
    FloatBits(&'static str),
    /// Two literals that both hold wildcards where one has a star before its end.
    #[error("cannot compare two globbing patterns")]
    TwoGlobs,
}

pub(crate) fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Int => "an integer",
        Kind::Float => "a float",
        Kind::Str => "a string",
    }
}

/// The kind of a field type, if it can be compared.
pub fn field_kind(ty: &FieldType) -> Option<Kind> {
    match ty {
        FieldType::Integer(_) | FieldType::Enum { .. } => Some(Kind::Int),
        FieldType::Float { .. } => Some(Kind::Float),
        FieldType::String => Some(Kind::Str),
        FieldType::Sequence { text: true, .. } => Some(Kind::Str),
        // A BLOB is opaque bytes: never compared as a whole (its bytes are, `blob[0]`).
        FieldType::Sequence { .. } | FieldType::Array { .. } | FieldType::Dynamic | FieldType::Blob { .. } => None,
    }
}

/// The kind of an element of a field type (`field[i]`), if it has elements.
pub fn elem_kind(ty: &FieldType) -> Option<Kind> {
    match ty {
        FieldType::Sequence { .. } | FieldType::Array { .. } | FieldType::Blob { .. } => Some(Kind::Int),
        _ => None,
    }
}

/// The kind of a context value.
pub const fn context_kind(c: ContextType) -> Kind {
    match c {
        ContextType::Procname => Kind::Str,
        _ => Kind::Int,
    }
}

/// How a string literal matches: LTTng tells a plain string, a pattern whose only stars
/// end it (`"conn*"`, the legacy form) and a full star-glob (`"*ccd"`, `"a*b"`) apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GlobClass {
    /// No unescaped `*`.
    Plain,
    /// Every unescaped `*` is in the run that ends the literal.
    StarEnd,
    /// An unescaped `*` before the end.
    Full,
}

/// Classifies a string literal in pattern syntax.
pub fn glob_class(lit: &[u8]) -> GlobClass {
    let mut i = 0;
    let mut first_star = None;
    let mut last_non_star = None;
    while i < lit.len() {
        match lit[i] {
            b'\\' if i + 1 < lit.len() => {
                last_non_star = Some(i + 1);
                i += 2;
                continue;
            }
            b'*' => {
                first_star.get_or_insert(i);
            }
            _ => last_non_star = Some(i),
        }
        i += 1;
    }
    match first_star {
        None => GlobClass::Plain,
        Some(s) if last_non_star.is_none_or(|n| n < s) => GlobClass::StarEnd,
        Some(_) => GlobClass::Full,
    }
}

/// Checks that two kinds may be compared with `op`.
///
/// # Errors
/// [`FilterError::Mismatch`].
pub fn check_cmp(op: CmpOp, a: Kind, b: Kind) -> Result<(), FilterError> {
    let ok = match (a, b) {
        (Kind::Str, Kind::Str) => matches!(op, CmpOp::Eq | CmpOp::Ne),
        (Kind::Str, _) | (_, Kind::Str) => false,
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(FilterError::Mismatch(kind_name(a), kind_name(b), op.symbol()))
    }
}

/// Checks two string literals compared with each other: a full star-glob may meet only a
/// plain string (LTTng's rule; two patterns that end with a star compare by prefix).
///
/// # Errors
/// [`FilterError::TwoGlobs`].
pub fn check_literals(a: &str, b: &str) -> Result<(), FilterError> {
    let (ca, cb) = (glob_class(a.as_bytes()), glob_class(b.as_bytes()));
    let full_vs_pattern = (ca == GlobClass::Full && cb != GlobClass::Plain) || (cb == GlobClass::Full && ca != GlobClass::Plain);
    if full_vs_pattern {
        Err(FilterError::TwoGlobs)
    } else {
        Ok(())
    }
}

/// Calls `f` on each direct sub-expression of `e`, in order, stopping at the first error.
fn for_each_child<E>(e: &Expr, mut f: impl FnMut(&Expr) -> Result<(), E>) -> Result<(), E> {
    match e {
        Expr::Or(a, b) | Expr::And(a, b) | Expr::Compare(_, a, b) | Expr::Bits(_, a, b) => {
            f(a)?;
            f(b)
        }
        Expr::Not(a) | Expr::Neg(a) | Expr::BitNot(a) => f(a),
        Expr::Any(v) | Expr::All(v) => v.iter().try_for_each(f),
        Expr::Cmp(..) | Expr::Truthy(_) => Ok(()),
    }
}

/// The first BLOB field of `desc` that `e` names as a whole (`image == "x"`, `image`
/// alone), not by one of its bytes (`image[0]`): such a filter can never be evaluated, and
/// the daemon refuses it at `enable-event` with the field's name. `None` when there is
/// none (unknown names included).
pub fn whole_blob_field<'d>(e: &Expr, desc: &'d EventDesc) -> Option<&'d crate::event::FieldDesc> {
    fn walk<'d>(e: &Expr, desc: &'d EventDesc, depth: usize) -> Result<(), &'d crate::event::FieldDesc> {
        if depth > MAX_DEPTH + 2 {
            return Ok(());
        }
        let (a, b) = operands(e);
        for o in [a, b].into_iter().flatten() {
            let f = match o {
                Operand::Named(n) => desc.fields.iter().find(|f| f.name == *n),
                Operand::Field(i) => desc.fields.get(*i as usize),
                _ => None,
            };
            if let Some(f) = f.filter(|f| matches!(f.ty, FieldType::Blob { .. })) {
                return Err(f);
            }
        }
        for_each_child(e, |c| walk(c, desc, depth + 1))
    }
    walk(e, desc, 0).err()
}

/// The operands held directly by `e`.
fn operands(e: &Expr) -> (Option<&Operand>, Option<&Operand>) {
    match e {
        Expr::Cmp(_, a, b) => (Some(a), Some(b)),
        Expr::Truthy(a) => (Some(a), None),
        _ => (None, None),
    }
}

/// Checks the shape of an expression: node count, depth, string lengths.
///
/// # Errors
/// [`FilterError::TooLarge`], [`FilterError::TooDeep`], [`FilterError::LongString`].
pub fn check_shape(e: &Expr) -> Result<(), FilterError> {
    fn walk(e: &Expr, depth: usize, nodes: &mut usize) -> Result<(), FilterError> {
        if depth > MAX_DEPTH {
            return Err(FilterError::TooDeep);
        }
        *nodes += 1;
        if *nodes > MAX_NODES {
            return Err(FilterError::TooLarge);
        }
        let (a, b) = operands(e);
        for o in [a, b].into_iter().flatten() {
            *nodes += 1;
            if *nodes > MAX_NODES {
                return Err(FilterError::TooLarge);
            }
            if let Operand::Str(s) | Operand::Named(s) | Operand::NamedElem(s, _) = o {
                if s.len() > MAX_STRING {
                    return Err(FilterError::LongString);
                }
            }
        }
        for_each_child(e, |c| walk(c, depth + 1, nodes))
    }
    walk(e, 0, &mut 0)
}

/// The kind of `o` in events of `desc`.
fn operand_kind(o: &Operand, desc: &EventDesc) -> Result<Kind, FilterError> {
    let field = |i: u32| desc.fields.get(i as usize).ok_or(FilterError::FieldIndex(i));
    match o {
        Operand::Named(n) | Operand::NamedElem(n, _) => Err(FilterError::Unresolved(n.clone())),
        Operand::Field(i) => {
            let f = field(*i)?;
            field_kind(&f.ty).ok_or_else(|| FilterError::Uncomparable(f.name.to_string()))
        }
        Operand::Elem(i, _) => {
            let f = field(*i)?;
            elem_kind(&f.ty).ok_or_else(|| FilterError::Uncomparable(f.name.to_string()))
        }
        Operand::Context(c) => Ok(context_kind(*c)),
        Operand::Int(_) => Ok(Kind::Int),
        Operand::Float(_) => Ok(Kind::Float),
        Operand::Str(_) => Ok(Kind::Str),
    }
}

/// The kind of the value of `e` (after checking its sub-expressions).
fn expr_kind(e: &Expr, desc: &EventDesc) -> Result<Kind, FilterError> {
    let numeric = |k: Kind| if k == Kind::Str { Err(FilterError::StringTruth) } else { Ok(k) };
    let int = |k: Kind, sym: &'static str| match k {
        Kind::Int => Ok(Kind::Int),
        Kind::Float => Err(FilterError::FloatBits(sym)),
        Kind::Str => Err(FilterError::StringTruth),
    };
    match e {
        Expr::Truthy(a) => operand_kind(a, desc),
        Expr::Cmp(op, a, b) => {
            check_cmp(*op, operand_kind(a, desc)?, operand_kind(b, desc)?)?;
            if let (Operand::Str(x), Operand::Str(y)) = (a, b) {
                check_literals(x, y)?;
            }
            if matches!(op, CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge) {
                for o in [a, b] {
                    if matches!(o, Operand::Str(s) if glob_class(s.as_bytes()) == GlobClass::Full) {
                        return Err(FilterError::Mismatch("a globbing pattern", "a string", op.symbol()));
                    }
                }
            }
            Ok(Kind::Int)
        }
        Expr::Compare(op, a, b) => {
            check_cmp(*op, numeric(expr_kind(a, desc)?)?, numeric(expr_kind(b, desc)?)?)?;
            Ok(Kind::Int)
        }
        Expr::Or(..) | Expr::And(..) | Expr::Not(_) | Expr::Any(_) | Expr::All(_) => {
            for_each_child(e, |c| expr_kind(c, desc).and_then(numeric).map(|_| ()))?;
            Ok(Kind::Int)
        }
        Expr::Bits(op, a, b) => {
            int(expr_kind(a, desc)?, op.symbol())?;
            int(expr_kind(b, desc)?, op.symbol())
        }
        Expr::BitNot(a) => int(expr_kind(a, desc)?, "~"),
        Expr::Neg(a) => numeric(expr_kind(a, desc)?),
    }
}

/// Validates a resolved expression against the description of the event it filters: the
/// check a process makes on everything it receives before it would run it.
///
/// # Errors
/// The first problem found.
pub fn validate(e: &Expr, desc: &EventDesc) -> Result<(), FilterError> {
    check_shape(e)?;
    match expr_kind(e, desc)? {
        Kind::Str => Err(FilterError::StringTruth),
        _ => Ok(()),
    }
}

/// Resolves the field names of `e` against `desc` (the daemon's step, per event). `None`
/// when the event lacks a named field or a field's type does not fit its comparison: the
/// filter is then false for that event.
pub fn resolve(e: &Expr, desc: &EventDesc) -> Option<Expr> {
    fn op(o: &Operand, desc: &EventDesc) -> Option<Operand> {
        let index = |n: &str| desc.fields.iter().position(|f| f.name == n).map(|i| i as u32);
        Some(match o {
            Operand::Named(n) => Operand::Field(index(n)?),
            Operand::NamedElem(n, k) => Operand::Elem(index(n)?, *k),
            other => other.clone(),
        })
    }
    fn walk(e: &Expr, desc: &EventDesc) -> Option<Expr> {
        let b = |x: &Expr| walk(x, desc).map(Box::new);
        Some(match e {
            Expr::Or(x, y) => Expr::Or(b(x)?, b(y)?),
            Expr::And(x, y) => Expr::And(b(x)?, b(y)?),
            Expr::Not(x) => Expr::Not(b(x)?),
            Expr::Cmp(o, x, y) => Expr::Cmp(*o, op(x, desc)?, op(y, desc)?),
            Expr::Truthy(x) => Expr::Truthy(op(x, desc)?),
            Expr::Any(v) => Expr::Any(v.iter().map(|x| walk(x, desc)).collect::<Option<_>>()?),
            Expr::All(v) => Expr::All(v.iter().map(|x| walk(x, desc)).collect::<Option<_>>()?),
            Expr::Compare(o, x, y) => Expr::Compare(*o, b(x)?, b(y)?),
            Expr::Bits(o, x, y) => Expr::Bits(*o, b(x)?, b(y)?),
            Expr::Neg(x) => Expr::Neg(b(x)?),
            Expr::BitNot(x) => Expr::BitNot(b(x)?),
        })
    }
    let r = walk(e, desc)?;
    validate(&r, desc).ok()?;
    Some(r)
}

#[cfg(test)]
mod tests;
