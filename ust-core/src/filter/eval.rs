//! Evaluation of a validated [`Expr`] on the packed payload of one event, in the traced
//! process, before anything is reserved: reads fields in place, matches string patterns
//! without unescaping them into a copy, and never allocates.
//!
//! Every node is evaluated to a value (a number, or a string for a leaf). An
//! error (a field that cannot be read, an index past the end, a shift by a count outside
//! `0..64`) ends the evaluation: the filter is false for that event, whatever operators
//! surround the error, as LTTng's interpreter discards the event.

use super::{glob_class, BitOp, CmpOp, Expr, GlobClass, Operand};
use crate::context::ContextType;
use crate::event::{EventDesc, FieldType, IntegerType};

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
        FieldType::Sequence { .. } | FieldType::Blob { .. } => {
            let (length, elem, _) = ty.as_sequence()?;
            let n = usize::try_from(read_int(b, length)?).ok()?;
            let total = length.size_bytes().checked_add(n.checked_mul(elem.size_bytes())?)?;
            (total <= b.len()).then_some(total)
        }
        other => {
            let n = other.fixed_size()?;
            (n <= b.len()).then_some(n)
        }
    }
}

/// The type of field `index` of `desc` and the payload bytes from its start.
fn field_at<'d, 'a>(desc: &'d EventDesc, payload: &'a [u8], index: u32) -> Option<(&'d FieldType, &'a [u8])> {
    let mut off = 0usize;
    for (i, f) in desc.fields.iter().enumerate() {
        let b = payload.get(off..)?;
        if i == index as usize {
            return Some((&f.ty, b));
        }
        off += field_size(&f.ty, b)?;
    }
    None
}

/// The value of field `index` of `desc` in `payload`.
pub fn field_value<'a>(desc: &EventDesc, payload: &'a [u8], index: u32) -> Option<Value<'a>> {
    let (ty, b) = field_at(desc, payload, index)?;
    match ty {
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
    }
}

/// Element `k` of the array or sequence field `index` (`None` past its end).
pub fn elem_value(desc: &EventDesc, payload: &[u8], index: u32, k: u32) -> Option<i128> {
    let (ty, b) = field_at(desc, payload, index)?;
    let (elem, count, start) = match ty {
        FieldType::Array { elem, len } => (*elem, *len as usize, 0),
        FieldType::Sequence { .. } | FieldType::Blob { .. } => {
            let (length, elem, _) = ty.as_sequence()?;
            (elem, usize::try_from(read_int(b, length)?).ok()?, length.size_bytes())
        }
        _ => return None,
    };
    let k = k as usize;
    if k >= count {
        return None;
    }
    read_int(b.get(start.checked_add(k.checked_mul(elem.size_bytes())?)?..)?, elem)
}

/// The byte at `i` of `s` and how many bytes it takes: with `escaped`, `\x` is `x`.
fn unit(s: &[u8], i: usize, escaped: bool) -> (u8, usize) {
    if escaped && s[i] == b'\\' && i + 1 < s.len() {
        (s[i + 1], 2)
    } else {
        (s[i], 1)
    }
}

/// Star-glob matching of `text` (raw, or in pattern syntax with `text_escaped`) against
/// `pattern` (pattern syntax). Iterative, backtracking to the last star only.
fn glob(pattern: &[u8], text: &[u8], text_escaped: bool) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pattern.len() && pattern[p] == b'*' {
            p += 1;
            star = Some((p, t));
            continue;
        }
        if t == text.len() {
            while p < pattern.len() && pattern[p] == b'*' {
                p += 1;
            }
            if p == pattern.len() {
                return true;
            }
        } else if p < pattern.len() {
            let (pc, pl) = unit(pattern, p, true);
            let (tc, tl) = unit(text, t, text_escaped);
            if pc == tc {
                p += pl;
                t += tl;
                continue;
            }
        }
        match star {
            Some((sp, st)) if st < text.len() => {
                p = sp;
                t = st + unit(text, st, text_escaped).1;
                star = Some((sp, t));
            }
            _ => return false,
        }
    }
}

/// Matches `text` against `pattern` in pattern syntax: `*` matches any run of bytes (also
/// none), `\*` a star, `\\` a backslash, anything else itself.
pub fn pattern_match(pattern: &[u8], text: &[u8]) -> bool {
    glob(pattern, text, false)
}

/// Two patterns that end with stars (LTTng's legacy form) match when one's text before
/// the stars is a prefix of the other's.
fn prefixes_match(a: &[u8], b: &[u8]) -> bool {
    let strip = |s: &[u8]| {
        let mut n = s.len();
        while n > 0 && s[n - 1] == b'*' && !(n >= 2 && s[n - 2] == b'\\') {
            n -= 1;
        }
        n
    };
    let (na, nb) = (strip(a), strip(b));
    let (mut i, mut j) = (0, 0);
    while i < na && j < nb {
        let (x, xl) = unit(a, i, true);
        let (y, yl) = unit(b, j, true);
        if x != y {
            return false;
        }
        i += xl;
        j += yl;
    }
    true
}

/// `==` between two string literals, as LTTng compares them.
fn literals_equal(a: &[u8], b: &[u8]) -> bool {
    match (glob_class(a), glob_class(b)) {
        (GlobClass::StarEnd, GlobClass::StarEnd) => prefixes_match(a, b),
        (_, GlobClass::Plain) => glob(a, b, true),
        (GlobClass::Plain, _) => glob(b, a, true),
        _ => false,
    }
}

/// What [`eval`] reads from.
struct Env<'a> {
    desc: &'a EventDesc,
    payload: &'a [u8],
    ctx: &'a dyn ContextSource,
}

fn operand<'a>(o: &'a Operand, env: &Env<'a>) -> Option<Value<'a>> {
    match o {
        Operand::Field(i) => field_value(env.desc, env.payload, *i),
        Operand::Elem(i, k) => elem_value(env.desc, env.payload, *i, *k).map(Value::Int),
        Operand::Context(ContextType::Procname) => Some(Value::Str(env.ctx.procname())),
        Operand::Context(c) => Some(Value::Int(env.ctx.int(*c))),
        Operand::Int(v) => Some(Value::Int(*v as i128)),
        Operand::Float(v) => Some(Value::Float(*v)),
        Operand::Str(s) => Some(Value::Str(s.as_bytes())),
        Operand::Named(_) | Operand::NamedElem(..) => None,
    }
}

/// A numeric value.
#[derive(Clone, Copy, Debug)]
enum Num {
    Int(i128),
    Float(f64),
}

fn order(op: CmpOp, x: Num, y: Num) -> bool {
    match (x, y) {
        (Num::Int(x), Num::Int(y)) => op.holds(x.cmp(&y)),
        (Num::Int(x), Num::Float(y)) => (x as f64).partial_cmp(&y).is_some_and(|o| op.holds(o)),
        (Num::Float(x), Num::Int(y)) => x.partial_cmp(&(y as f64)).is_some_and(|o| op.holds(o)),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y).is_some_and(|o| op.holds(o)),
    }
}

fn to_num(v: Value<'_>) -> Option<Num> {
    match v {
        Value::Int(x) => Some(Num::Int(x)),
        Value::Float(x) => Some(Num::Float(x)),
        Value::Str(_) => None,
    }
}

fn compare(op: CmpOp, a: &Operand, va: Value<'_>, b: &Operand, vb: Value<'_>) -> Option<bool> {
    if let (Value::Str(x), Value::Str(y)) = (va, vb) {
        // A literal is a pattern; two non-literals compare byte for byte.
        let eq = match (a, b) {
            (Operand::Str(_), Operand::Str(_)) => literals_equal(x, y),
            (Operand::Str(_), _) => glob(x, y, false),
            (_, Operand::Str(_)) => glob(y, x, false),
            _ => x == y,
        };
        return match op {
            CmpOp::Eq => Some(eq),
            CmpOp::Ne => Some(!eq),
            _ => None,
        };
    }
    Some(order(op, to_num(va)?, to_num(vb)?))
}

/// The 64 bits of an integer value, as LTTng's interpreter holds them.
fn bits(n: Num) -> Option<u64> {
    match n {
        Num::Int(x) => Some(x as u64),
        Num::Float(_) => None,
    }
}

fn from_bits(b: u64) -> Num {
    Num::Int(b as i64 as i128)
}

fn truth(e: &Expr, env: &Env<'_>) -> Option<bool> {
    Some(match e {
        Expr::Or(a, b) => truth(a, env)? || truth(b, env)?,
        Expr::And(a, b) => truth(a, env)? && truth(b, env)?,
        Expr::Any(v) => {
            for x in v {
                if truth(x, env)? {
                    return Some(true);
                }
            }
            false
        }
        Expr::All(v) => {
            for x in v {
                if !truth(x, env)? {
                    return Some(false);
                }
            }
            true
        }
        Expr::Not(a) => !truth(a, env)?,
        Expr::Cmp(op, a, b) => compare(*op, a, operand(a, env)?, b, operand(b, env)?)?,
        _ => match num(e, env)? {
            Num::Int(v) => v != 0,
            Num::Float(v) => v != 0.0,
        },
    })
}

fn num(e: &Expr, env: &Env<'_>) -> Option<Num> {
    Some(match e {
        Expr::Truthy(o) => to_num(operand(o, env)?)?,
        Expr::Compare(op, a, b) => Num::Int(order(*op, num(a, env)?, num(b, env)?) as i128),
        Expr::Bits(op, a, b) => {
            let (x, y) = (bits(num(a, env)?)?, num(b, env)?);
            let shift = || match y {
                Num::Int(s) if (0..64).contains(&s) => Some(s as u32),
                _ => None,
            };
            from_bits(match op {
                BitOp::And => x & bits(y)?,
                BitOp::Or => x | bits(y)?,
                BitOp::Xor => x ^ bits(y)?,
                BitOp::Shl => x << shift()?,
                BitOp::Shr => x >> shift()?,
            })
        }
        Expr::Neg(a) => match num(a, env)? {
            Num::Int(x) => Num::Int((x as i64).wrapping_neg() as i128),
            Num::Float(x) => Num::Float(-x),
        },
        Expr::BitNot(a) => from_bits(!bits(num(a, env)?)?),
        Expr::Or(..) | Expr::And(..) | Expr::Any(_) | Expr::All(_) | Expr::Not(_) | Expr::Cmp(..) => Num::Int(truth(e, env)? as i128),
    })
}

/// Evaluates a [`super::validate`]d expression on the payload of an event of `desc`. A
/// value that cannot be read (a payload cut short, an index past the end) or a shift out
/// of range makes the filter false. No allocation.
pub fn eval(e: &Expr, desc: &EventDesc, payload: &[u8], ctx: &dyn ContextSource) -> bool {
    truth(e, &Env { desc, payload, ctx }).unwrap_or(false)
}
