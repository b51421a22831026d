//! Filter expressions (`ust enable-event --filter EXPR`): the form that travels from the
//! CLI through the daemon to the process, its validation, and its evaluation on an event's
//! packed payload before anything is reserved in a buffer.
//!
//! The language is LTTng's: comparisons (`==`, `!=`, `<`, `<=`, `>`, `>=`) between event
//! fields, `$ctx.<context>` values and literals (integers, floats, strings), combined with
//! `&&`, `||`, `!` and parentheses. A bare numeric operand is true when non-zero. String
//! literals may hold `*` wildcards (`msg == "conn*"`); `\*` is a literal star. The `ust`
//! CLI parses the text (the `consumer` crate's `filter` module) into an [`Expr`] whose
//! fields are named ([`Operand::Named`]); the daemon resolves the names against each
//! event's description ([`resolve`]), giving [`Operand::Field`] indexes (an event that
//! lacks a field, or whose field has a type the comparison cannot take, gets no filter that
//! could match: the filter is false for it); the process receives the resolved form and
//! checks it again ([`validate`]) before it would ever run it: bounded size and depth,
//! field indexes in range, types that match. Evaluation ([`eval`]) reads the payload bytes
//! written by the tracepoint and never allocates.
//!
//! ```text
//! CLI: parse + check ──Expr{Named}──> daemon: resolve per event ──Expr{Field}──>
//!      process: validate ──> emit: serialize payload, eval, reserve only on a match
//! ```

use serde::{Deserialize, Serialize};

use crate::context::ContextType;
use crate::event::{EventDesc, FieldType, IntegerType};

/// Most nodes (operators and operands) in one expression.
pub const MAX_NODES: usize = 256;
/// Deepest nesting of operators.
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

    fn holds(self, o: std::cmp::Ordering) -> bool {
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

/// A value in an expression.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Operand {
    /// An event field by name (the CLI's and the daemon's form; a process refuses it).
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
}

/// A filter expression.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    /// `a || b`
    Or(Box<Expr>, Box<Expr>),
    /// `a && b`
    And(Box<Expr>, Box<Expr>),
    /// `!a`
    Not(Box<Expr>),
    /// `a OP b`
    Cmp(CmpOp, Operand, Operand),
    /// A bare numeric operand: true when non-zero.
    Truthy(Operand),
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
    /// A field whose type cannot be compared (arrays, non-text sequences).
    #[error("field {0:?} cannot be compared")]
    Uncomparable(String),
    /// Operands of kinds that cannot be compared, or an ordering on strings.
    #[error("cannot compare {0} with {1} using {2}")]
    Mismatch(&'static str, &'static str, &'static str),
    /// A string used as a truth value.
    #[error("a string is not a truth value")]
    StringTruth,
}

fn kind_name(k: Kind) -> &'static str {
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
        FieldType::Sequence { .. } | FieldType::Array { .. } | FieldType::Dynamic => None,
    }
}

/// The kind of a context value.
pub const fn context_kind(c: ContextType) -> Kind {
    match c {
        ContextType::Procname => Kind::Str,
        _ => Kind::Int,
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
        let mut op = |o: &Operand| -> Result<(), FilterError> {
            *nodes += 1;
            if *nodes > MAX_NODES {
                return Err(FilterError::TooLarge);
            }
            match o {
                Operand::Str(s) | Operand::Named(s) if s.len() > MAX_STRING => Err(FilterError::LongString),
                _ => Ok(()),
            }
        };
        match e {
            Expr::Or(a, b) | Expr::And(a, b) => {
                walk(a, depth + 1, nodes)?;
                walk(b, depth + 1, nodes)
            }
            Expr::Not(a) => walk(a, depth + 1, nodes),
            Expr::Cmp(_, a, b) => {
                op(a)?;
                op(b)
            }
            Expr::Truthy(a) => op(a),
        }
    }
    walk(e, 0, &mut 0)
}

/// Validates a resolved expression against the description of the event it filters: the
/// check a process makes on everything it receives before it would run it.
///
/// # Errors
/// The first problem found.
pub fn validate(e: &Expr, desc: &EventDesc) -> Result<(), FilterError> {
    check_shape(e)?;
    fn kind(o: &Operand, desc: &EventDesc) -> Result<Kind, FilterError> {
        match o {
            Operand::Named(n) => Err(FilterError::Unresolved(n.clone())),
            Operand::Field(i) => {
                let f = desc.fields.get(*i as usize).ok_or(FilterError::FieldIndex(*i))?;
                field_kind(&f.ty).ok_or_else(|| FilterError::Uncomparable(f.name.to_string()))
            }
            Operand::Context(c) => Ok(context_kind(*c)),
            Operand::Int(_) => Ok(Kind::Int),
            Operand::Float(_) => Ok(Kind::Float),
            Operand::Str(_) => Ok(Kind::Str),
        }
    }
    fn walk(e: &Expr, desc: &EventDesc) -> Result<(), FilterError> {
        match e {
            Expr::Or(a, b) | Expr::And(a, b) => {
                walk(a, desc)?;
                walk(b, desc)
            }
            Expr::Not(a) => walk(a, desc),
            Expr::Cmp(op, a, b) => check_cmp(*op, kind(a, desc)?, kind(b, desc)?),
            Expr::Truthy(a) => match kind(a, desc)? {
                Kind::Str => Err(FilterError::StringTruth),
                _ => Ok(()),
            },
        }
    }
    walk(e, desc)
}

/// Resolves the field names of `e` against `desc` (the daemon's step, per event). `None`
/// when the event lacks a named field or a field's type does not fit its comparison: the
/// filter is then false for that event.
pub fn resolve(e: &Expr, desc: &EventDesc) -> Option<Expr> {
    fn op(o: &Operand, desc: &EventDesc) -> Option<Operand> {
        Some(match o {
            Operand::Named(n) => {
                let i = desc.fields.iter().position(|f| f.name == n.as_str())?;
                Operand::Field(i as u32)
            }
            other => other.clone(),
        })
    }
    fn walk(e: &Expr, desc: &EventDesc) -> Option<Expr> {
        Some(match e {
            Expr::Or(a, b) => Expr::Or(Box::new(walk(a, desc)?), Box::new(walk(b, desc)?)),
            Expr::And(a, b) => Expr::And(Box::new(walk(a, desc)?), Box::new(walk(b, desc)?)),
            Expr::Not(a) => Expr::Not(Box::new(walk(a, desc)?)),
            Expr::Cmp(o, a, b) => Expr::Cmp(*o, op(a, desc)?, op(b, desc)?),
            Expr::Truthy(a) => Expr::Truthy(op(a, desc)?),
        })
    }
    let r = walk(e, desc)?;
    validate(&r, desc).ok()?;
    Some(r)
}

/// A value met during evaluation.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    /// An integer (wide enough for every `u64` and `i64`).
    Int(i128),
    /// A float.
    Float(f64),
    /// String bytes (without NUL).
    Str(&'a [u8]),
}

/// Where [`eval`] finds `$ctx.*` values. Implementations compute them lazily.
pub trait ContextSource {
    /// The value of context `c`: an integer, or for `procname` the name's bytes.
    fn int(&self, c: ContextType) -> i128;
    /// The process name.
    fn procname(&self) -> &[u8];
}

fn read_int(b: &[u8], t: IntegerType) -> Option<i128> {
    let n = t.size_bytes();
    let b = b.get(..n)?;
    let mut raw = [0u8; 8];
    raw[..n].copy_from_slice(b);
    let u = u64::from_le_bytes(raw);
    Some(if t.signed {
        let shift = 64 - 8 * n as u32;
        (((u << shift) as i64) >> shift) as i128
    } else {
        u as i128
    })
}

/// Size of field type `ty` at the start of `b` (`None` when `b` is too short).
pub fn field_size(ty: &FieldType, b: &[u8]) -> Option<usize> {
    match ty {
        FieldType::String => b.iter().position(|&c| c == 0).map(|p| p + 1),
        FieldType::Dynamic => crate::event::dynamic_size(b),
        FieldType::Sequence { length, elem, .. } => {
            let n = usize::try_from(read_int(b, *length)?).ok()?;
            let total = length.size_bytes().checked_add(n.checked_mul(elem.size_bytes())?)?;
            (total <= b.len()).then_some(total)
        }
        other => {
            let n = other.fixed_size()?;
            (n <= b.len()).then_some(n)
        }
    }
}

/// The value of field `index` of `desc` in `payload`.
pub fn field_value<'a>(desc: &EventDesc, payload: &'a [u8], index: u32) -> Option<Value<'a>> {
    let mut off = 0usize;
    for (i, f) in desc.fields.iter().enumerate() {
        let b = payload.get(off..)?;
        if i == index as usize {
            return match &f.ty {
                FieldType::Integer(t) | FieldType::Enum { container: t, .. } => read_int(b, *t).map(Value::Int),
                FieldType::Float { exp_dig, .. } => {
                    if *exp_dig == 8 {
                        Some(Value::Float(f32::from_le_bytes(b.get(..4)?.try_into().ok()?) as f64))
                    } else {
                        Some(Value::Float(f64::from_le_bytes(b.get(..8)?.try_into().ok()?)))
                    }
                }
                FieldType::String => {
                    let end = b.iter().position(|&c| c == 0)?;
                    Some(Value::Str(&b[..end]))
                }
                FieldType::Sequence { length, text: true, .. } => {
                    let n = usize::try_from(read_int(b, *length)?).ok()?;
                    let s = b.get(length.size_bytes()..length.size_bytes().checked_add(n)?)?;
                    // A text sequence may carry a trailing NUL; strings compare without it.
                    let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
                    Some(Value::Str(&s[..end]))
                }
                _ => None,
            };
        }
        off += field_size(&f.ty, b)?;
    }
    None
}

/// Matches `text` against `pattern` in pattern syntax: `*` matches any run of bytes (also
/// none), `\*` a star, `\\` a backslash, anything else itself.
pub fn pattern_match(pattern: &[u8], text: &[u8]) -> bool {
    // Iterative star-glob with backtracking to the last star.
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p + 1, t));
            p += 1;
            continue;
        }
        if t == text.len() {
            // Only stars may remain.
            while p < pattern.len() && pattern[p] == b'*' {
                p += 1;
            }
            if p == pattern.len() {
                return true;
            }
        } else if p < pattern.len() {
            let (lit, len) = if pattern[p] == b'\\' && p + 1 < pattern.len() { (pattern[p + 1], 2) } else { (pattern[p], 1) };
            if lit == text[t] {
                p += len;
                t += 1;
                continue;
            }
        }
        match star {
            Some((sp, st)) if st < text.len() => {
                p = sp;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            _ => return false,
        }
    }
}

fn operand<'a>(o: &'a Operand, desc: &EventDesc, payload: &'a [u8], ctx: &'a dyn ContextSource) -> Option<Value<'a>> {
    match o {
        Operand::Field(i) => field_value(desc, payload, *i),
        Operand::Context(ContextType::Procname) => Some(Value::Str(ctx.procname())),
        Operand::Context(c) => Some(Value::Int(ctx.int(*c))),
        Operand::Int(v) => Some(Value::Int(*v as i128)),
        Operand::Float(v) => Some(Value::Float(*v)),
        Operand::Str(s) => Some(Value::Str(s.as_bytes())),
        Operand::Named(_) => None,
    }
}

fn unescape_eq(pattern: &[u8], text: &[u8]) -> bool {
    pattern_match(pattern, text)
}

fn compare(op: CmpOp, a: &Operand, va: Value<'_>, b: &Operand, vb: Value<'_>) -> bool {
    match (va, vb) {
        (Value::Int(x), Value::Int(y)) => op.holds(x.cmp(&y)),
        (Value::Int(x), Value::Float(y)) => (x as f64).partial_cmp(&y).is_some_and(|o| op.holds(o)),
        (Value::Float(x), Value::Int(y)) => x.partial_cmp(&(y as f64)).is_some_and(|o| op.holds(o)),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(&y).is_some_and(|o| op.holds(o)),
        (Value::Str(x), Value::Str(y)) => {
            // A literal is a pattern; two non-literals compare byte for byte.
            let eq = match (a, b) {
                (Operand::Str(_), Operand::Str(_)) => x == y,
                (Operand::Str(_), _) => unescape_eq(x, y),
                (_, Operand::Str(_)) => unescape_eq(y, x),
                _ => x == y,
            };
            match op {
                CmpOp::Eq => eq,
                CmpOp::Ne => !eq,
                _ => false,
            }
        }
        _ => false,
    }
}

/// Evaluates a [`validate`]d expression on the payload of an event of `desc`. A value that
/// cannot be read (a payload cut short) makes its comparison false. No allocation.
pub fn eval(e: &Expr, desc: &EventDesc, payload: &[u8], ctx: &dyn ContextSource) -> bool {
    match e {
        Expr::Or(a, b) => eval(a, desc, payload, ctx) || eval(b, desc, payload, ctx),
        Expr::And(a, b) => eval(a, desc, payload, ctx) && eval(b, desc, payload, ctx),
        Expr::Not(a) => !eval(a, desc, payload, ctx),
        Expr::Cmp(op, a, b) => match (operand(a, desc, payload, ctx), operand(b, desc, payload, ctx)) {
            (Some(va), Some(vb)) => compare(*op, a, va, b, vb),
            _ => false,
        },
        Expr::Truthy(a) => match operand(a, desc, payload, ctx) {
            Some(Value::Int(v)) => v != 0,
            Some(Value::Float(v)) => v != 0.0,
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::FieldDesc;
    use crate::Level;
    use std::borrow::Cow;

    struct Ctx;
    impl ContextSource for Ctx {
        fn int(&self, c: ContextType) -> i128 {
            match c {
                ContextType::Vtid => 42,
                _ => 7,
            }
        }
        fn procname(&self) -> &[u8] {
            b"myapp"
        }
    }

    fn desc() -> EventDesc {
        EventDesc {
            provider: Cow::Borrowed("p"),
            name: Cow::Borrowed("e"),
            level: Level::Info,
            fields: Cow::Owned(vec![
                FieldDesc { name: Cow::Borrowed("n"), ty: FieldType::Integer(IntegerType::I32) },
                FieldDesc { name: Cow::Borrowed("s"), ty: FieldType::String },
                FieldDesc { name: Cow::Borrowed("f"), ty: FieldType::Float { exp_dig: 11, mant_dig: 53 } },
                FieldDesc { name: Cow::Borrowed("u"), ty: FieldType::Integer(IntegerType::U64) },
                FieldDesc { name: Cow::Borrowed("raw"), ty: FieldType::Array { elem: IntegerType::U8, len: 2 } },
            ]),
            location: Cow::Borrowed(""),
        }
    }

    fn payload(n: i32, s: &str, f: f64, u: u64) -> Vec<u8> {
        let mut p = n.to_le_bytes().to_vec();
        p.extend_from_slice(s.as_bytes());
        p.push(0);
        p.extend_from_slice(&f.to_le_bytes());
        p.extend_from_slice(&u.to_le_bytes());
        p.extend_from_slice(&[1, 2]);
        p
    }

    fn cmp(op: CmpOp, a: Operand, b: Operand) -> Expr {
        Expr::Cmp(op, a, b)
    }

    #[test]
    fn fields_are_read_from_the_payload() {
        let d = desc();
        let p = payload(-5, "hello", 2.5, u64::MAX);
        assert!(matches!(field_value(&d, &p, 0), Some(Value::Int(-5))));
        assert!(matches!(field_value(&d, &p, 1), Some(Value::Str(b"hello"))));
        assert!(matches!(field_value(&d, &p, 2), Some(Value::Float(v)) if v == 2.5));
        assert!(matches!(field_value(&d, &p, 3), Some(Value::Int(v)) if v == u64::MAX as i128));
        assert!(field_value(&d, &p, 4).is_none());
        assert!(field_value(&d, &p[..6], 2).is_none(), "cut payload");
    }

    #[test]
    fn every_operator() {
        let d = desc();
        let p = payload(-5, "hello", 2.5, u64::MAX);
        let t = |e: Expr| {
            validate(&e, &d).unwrap();
            eval(&e, &d, &p, &Ctx)
        };
        let n = || Operand::Field(0);
        assert!(t(cmp(CmpOp::Eq, n(), Operand::Int(-5))));
        assert!(t(cmp(CmpOp::Ne, n(), Operand::Int(5))));
        assert!(t(cmp(CmpOp::Lt, n(), Operand::Int(0))));
        assert!(t(cmp(CmpOp::Le, n(), Operand::Int(-5))));
        assert!(!t(cmp(CmpOp::Gt, n(), Operand::Int(-5))));
        assert!(t(cmp(CmpOp::Ge, n(), Operand::Int(-5))));
        assert!(t(cmp(CmpOp::Gt, Operand::Field(3), Operand::Int(i64::MAX))), "u64 above i64");
        assert!(t(cmp(CmpOp::Gt, Operand::Field(2), Operand::Int(2))), "float vs int");
        assert!(t(cmp(CmpOp::Lt, Operand::Field(2), Operand::Float(2.75))));
        assert!(t(cmp(CmpOp::Eq, Operand::Field(1), Operand::Str("hello".into()))));
        assert!(t(cmp(CmpOp::Eq, Operand::Str("he*".into()), Operand::Field(1))), "glob on the left");
        assert!(t(cmp(CmpOp::Ne, Operand::Field(1), Operand::Str("x*".into()))));
        assert!(t(cmp(CmpOp::Eq, Operand::Context(ContextType::Vtid), Operand::Int(42))));
        assert!(t(cmp(CmpOp::Eq, Operand::Context(ContextType::Procname), Operand::Str("my*".into()))));
        let yes = || Box::new(cmp(CmpOp::Eq, n(), Operand::Int(-5)));
        let no = || Box::new(cmp(CmpOp::Eq, n(), Operand::Int(6)));
        assert!(t(Expr::Or(no(), yes())));
        assert!(!t(Expr::Or(no(), no())));
        assert!(t(Expr::And(yes(), yes())));
        assert!(!t(Expr::And(yes(), no())));
        assert!(t(Expr::Not(no())));
        assert!(t(Expr::Truthy(n())));
        assert!(!t(Expr::Truthy(Operand::Int(0))));
    }

    #[test]
    fn patterns() {
        assert!(pattern_match(b"*", b""));
        assert!(pattern_match(b"a*c", b"abbbc"));
        assert!(pattern_match(b"*b*", b"abc"));
        assert!(!pattern_match(b"a*d", b"abc"));
        assert!(pattern_match(b"a\\*", b"a*"));
        assert!(!pattern_match(b"a\\*", b"ab"));
        assert!(pattern_match(b"a\\\\", b"a\\"));
        assert!(pattern_match(b"abc", b"abc") && !pattern_match(b"abc", b"abcd"));
    }

    #[test]
    fn validation_rejects_what_cannot_run() {
        let d = desc();
        assert_eq!(validate(&Expr::Truthy(Operand::Named("n".into())), &d), Err(FilterError::Unresolved("n".into())));
        assert_eq!(validate(&Expr::Truthy(Operand::Field(9)), &d), Err(FilterError::FieldIndex(9)));
        assert!(matches!(validate(&Expr::Truthy(Operand::Field(4)), &d), Err(FilterError::Uncomparable(_))));
        assert!(matches!(validate(&cmp(CmpOp::Lt, Operand::Field(1), Operand::Str("a".into())), &d), Err(FilterError::Mismatch(..))));
        assert!(matches!(validate(&cmp(CmpOp::Eq, Operand::Field(0), Operand::Str("a".into())), &d), Err(FilterError::Mismatch(..))));
        assert_eq!(validate(&Expr::Truthy(Operand::Field(1)), &d), Err(FilterError::StringTruth));
        let mut deep = Expr::Truthy(Operand::Int(1));
        for _ in 0..40 {
            deep = Expr::Not(Box::new(deep));
        }
        assert_eq!(validate(&deep, &d), Err(FilterError::TooDeep));
        let mut wide = Expr::Truthy(Operand::Int(1));
        for _ in 0..20 {
            wide = Expr::Or(Box::new(wide.clone()), Box::new(wide));
            if check_shape(&wide).is_err() {
                break;
            }
        }
        assert!(check_shape(&wide).is_err());
        assert_eq!(validate(&Expr::Truthy(Operand::Str("x".repeat(2000))), &d), Err(FilterError::LongString));
    }

    #[test]
    fn resolution_names_fields_or_gives_up() {
        let d = desc();
        let e = cmp(CmpOp::Eq, Operand::Named("s".into()), Operand::Str("a".into()));
        assert_eq!(resolve(&e, &d), Some(cmp(CmpOp::Eq, Operand::Field(1), Operand::Str("a".into()))));
        assert_eq!(resolve(&cmp(CmpOp::Eq, Operand::Named("missing".into()), Operand::Int(1)), &d), None);
        assert_eq!(resolve(&cmp(CmpOp::Eq, Operand::Named("s".into()), Operand::Int(1)), &d), None, "type mismatch");
    }
}
