//! Precedence climbing over LTTng's grammar, one loop per level, so a chain of any length
//! (`a && b && c ...`) costs no stack; only parentheses and unary operators nest, up to
//! [`MAX_DEPTH`]. Each node carries the static type the literals give it ([`Ty`]), checked
//! as the node is built.

use super::lexer::{Lexer, Tok};
use super::{err, ParseError};
use ust_core::context::ContextType;
use ust_core::filter::{check_literals, glob_class, BitOp, CmpOp, Expr, GlobClass, Operand, MAX_DEPTH};

/// What is known of a value without an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ty {
    /// An integer (literals, comparisons, bitwise results, integer contexts).
    Int,
    /// A float literal, or arithmetic on one.
    Float,
    /// A string literal of this class.
    Lit(GlobClass),
    /// A string that is not a literal (`$ctx.procname`).
    Str,
    /// A field: its type is known per event.
    Unknown,
}

impl Ty {
    fn is_str(self) -> bool {
        matches!(self, Ty::Lit(_) | Ty::Str)
    }
    fn word(self) -> &'static str {
        match self {
            Ty::Int => "an integer",
            Ty::Float => "a float",
            Ty::Lit(_) | Ty::Str => "a string",
            Ty::Unknown => "a field",
        }
    }
}

/// A parsed node: the expression, its static type, and where it starts.
pub(super) struct Node {
    pub(super) e: Expr,
    pub(super) ty: Ty,
    pub(super) at: usize,
}

pub(super) struct Parser<'a> {
    pub(super) lex: Lexer<'a>,
    pub(super) tok: Tok,
    pub(super) at: usize,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Global(s) => format!("`${s}`"),
        Tok::Int(v) => format!("`{v}`"),
        Tok::Float(v) => format!("`{v}`"),
        Tok::Str(_) => "a string".into(),
        Tok::Op(o) => format!("`{o}`"),
        Tok::LParen => "`(`".into(),
        Tok::RParen => "`)`".into(),
        Tok::End => "the end of the filter".into(),
    }
}

/// Binary levels, loosest first, with their operators.
const LEVELS: [&[&str]; 8] = [&["||"], &["&&"], &["==", "!="], &["<", "<=", ">", ">="], &["|"], &["^"], &["&"], &["<<", ">>"]];

fn cmp_op(s: &str) -> Option<CmpOp> {
    Some(match s {
        "==" => CmpOp::Eq,
        "!=" => CmpOp::Ne,
        "<" => CmpOp::Lt,
        "<=" => CmpOp::Le,
        ">" => CmpOp::Gt,
        ">=" => CmpOp::Ge,
        _ => return None,
    })
}

fn bit_op(s: &str) -> Option<BitOp> {
    Some(match s {
        "&" => BitOp::And,
        "|" => BitOp::Or,
        "^" => BitOp::Xor,
        "<<" => BitOp::Shl,
        ">>" => BitOp::Shr,
        _ => return None,
    })
}

/// A condition: an operand of `&&`, `||`, `!`, or the whole filter.
pub(super) fn condition(n: &Node) -> Result<(), ParseError> {
    if n.ty.is_str() {
        return err(n.at, "a string is not a condition: compare it with `==` or `!=`");
    }
    Ok(())
}

impl Parser<'_> {
    pub(super) fn bump(&mut self) -> Result<(usize, Tok), ParseError> {
        let (at, tok) = self.lex.next()?;
        let old = (self.at, std::mem::replace(&mut self.tok, tok));
        self.at = at;
        Ok(old)
    }

    fn at_op(&self, ops: &[&str]) -> Option<&'static str> {
        match self.tok {
            Tok::Op(o) if ops.contains(&o) => Some(o),
            _ => None,
        }
    }

    /// Parses binary level `level` (0 = `||`) and everything tighter.
    pub(super) fn level(&mut self, level: usize, depth: usize) -> Result<Node, ParseError> {
        if level == LEVELS.len() {
            return self.unsupported(depth);
        }
        let first = self.level(level + 1, depth)?;
        if level <= 1 {
            return self.chain(level, first, depth);
        }
        let mut left = first;
        while let Some(op) = self.at_op(LEVELS[level]) {
            let op_at = self.at;
            self.bump()?;
            self.operand_follows(op)?;
            let right = self.level(level + 1, depth)?;
            left = binary(op, op_at, left, right)?;
        }
        Ok(left)
    }

    /// `a && b && ...` or `a || b || ...`, gathered into one n-ary node.
    fn chain(&mut self, level: usize, first: Node, depth: usize) -> Result<Node, ParseError> {
        let op = LEVELS[level][0];
        if self.at_op(&[op]).is_none() {
            return Ok(first);
        }
        condition(&first)?;
        let at = first.at;
        let mut terms = vec![first.e];
        while self.at_op(&[op]).is_some() {
            self.bump()?;
            self.operand_follows(op)?;
            let n = self.level(level + 1, depth)?;
            condition(&n)?;
            terms.push(n.e);
            if terms.len() > ust_core::filter::MAX_NODES {
                return err(at, format!("filter too large (more than {} nodes)", ust_core::filter::MAX_NODES));
            }
        }
        // Two terms keep the binary form older peers know; more become one n-ary node.
        let e = match <[Expr; 2]>::try_from(terms) {
            Ok([a, b]) if op == "||" => Expr::Or(Box::new(a), Box::new(b)),
            Ok([a, b]) => Expr::And(Box::new(a), Box::new(b)),
            Err(terms) if op == "||" => Expr::Any(terms),
            Err(terms) => Expr::All(terms),
        };
        Ok(Node { e, ty: Ty::Int, at })
    }

    fn operand_follows(&self, op: &str) -> Result<(), ParseError> {
        if matches!(self.tok, Tok::End | Tok::RParen) || matches!(self.tok, Tok::Op(o) if LEVELS.iter().any(|l| l.contains(&o))) {
            return err(self.at, format!("expected an operand after `{op}`"));
        }
        Ok(())
    }

    /// The arithmetic levels LTTng parses and refuses: `*`, `/`, `%`, binary `+`, `-`.
    fn unsupported(&mut self, depth: usize) -> Result<Node, ParseError> {
        let n = self.unary(depth)?;
        if let Some(op) = self.at_op(&["*", "/", "%", "+", "-"]) {
            let what = match op {
                "*" => "multiplication",
                "/" => "division",
                "%" => "modulo",
                "+" => "binary addition",
                _ => "binary subtraction",
            };
            return err(self.at, format!("`{op}` ({what}) is not supported in filters"));
        }
        Ok(n)
    }

    fn unary(&mut self, depth: usize) -> Result<Node, ParseError> {
        if depth > MAX_DEPTH {
            return err(self.at, format!("nested deeper than {MAX_DEPTH}"));
        }
        // A run of prefix operators, read in a loop and reduced as it is read: `+` is
        // nothing, `--` and `~~` cancel, `!!!` is `!` (LTTng accepts runs of any length).
        let mut ops: Vec<(&'static str, usize)> = Vec::new();
        let mut first_op = None;
        while let Tok::Op(op @ ("!" | "-" | "+" | "~")) = self.tok {
            first_op.get_or_insert(self.at);
            let at = self.at;
            self.bump()?;
            let top = |k: usize| ops.len().checked_sub(k).and_then(|i| ops.get(i)).map(|o| o.0);
            match op {
                "+" => {}
                "!" if top(1) == Some("!") && top(2) == Some("!") => {
                    ops.pop();
                }
                "-" | "~" if top(1) == Some(op) => {
                    ops.pop();
                }
                _ => ops.push((op, at)),
            }
        }
        if let Some(at) = first_op {
            if depth + ops.len() > MAX_DEPTH {
                return err(at, format!("nested deeper than {MAX_DEPTH}"));
            }
            let mut n = self.unary(depth + ops.len())?;
            if n.ty.is_str() {
                return err(at, "a unary operator does not apply to a string");
            }
            while let Some((op, at)) = ops.pop() {
                n = unary(op, at, n)?;
            }
            n.at = at;
            return Ok(n);
        }
        let at = self.at;
        match self.tok {
            Tok::LParen => {
                self.bump()?;
                let mut n = self.level(0, depth + 1)?;
                if self.tok != Tok::RParen {
                    return err(self.at, format!("expected `)` (to close the `(` at column {}), found {}", at + 1, describe(&self.tok)));
                }
                self.bump()?;
                n.at = at;
                Ok(n)
            }
            _ => self.primary(),
        }
    }

    /// A name's trailing `[N]`, `.name` and `->name` parts, as text.
    fn postfix(&mut self, mut name: String) -> Result<(String, Vec<u32>), ParseError> {
        let mut index = Vec::new();
        loop {
            match self.tok {
                Tok::Op("[") => {
                    self.bump()?;
                    let (at, t) = self.bump()?;
                    let Tok::Int(k) = t else { return err(at, "an array index must be a constant integer") };
                    let Ok(k) = u32::try_from(k) else { return err(at, "array index out of range") };
                    if self.tok != Tok::Op("]") {
                        return err(self.at, format!("expected `]`, found {}", describe(&self.tok)));
                    }
                    self.bump()?;
                    index.push(k);
                }
                Tok::Op(sep @ ("." | "->")) => {
                    self.bump()?;
                    let (at, t) = self.bump()?;
                    let Tok::Ident(part) = t else { return err(at, format!("expected a name after `{sep}`, found {}", describe(&t))) };
                    for k in index.drain(..) {
                        name.push_str(&format!("[{k}]"));
                    }
                    name.push_str(sep);
                    name.push_str(&part);
                }
                _ => return Ok((name, index)),
            }
        }
    }

    fn primary(&mut self) -> Result<Node, ParseError> {
        let (at, tok) = self.bump()?;
        let (op, ty) = match tok {
            Tok::Ident(n) => {
                let (name, index) = self.postfix(n)?;
                let op = match index[..] {
                    [] => Operand::Named(name),
                    [k] => Operand::NamedElem(name, k),
                    // No field of ours has elements that are arrays: matches nothing.
                    _ => Operand::Named(format!("{name}{index:?}")),
                };
                (op, Ty::Unknown)
            }
            Tok::Global(g) if g == "ctx" => {
                if self.tok != Tok::Op(".") {
                    return err(at, "expected `$ctx.<context>` (vpid, vtid, procname, pthread_id, cpu_id, ip, span_id)");
                }
                self.bump()?;
                let (cat, t) = self.bump()?;
                let Tok::Ident(n) = t else { return err(cat, format!("expected a context name after `$ctx.`, found {}", describe(&t))) };
                let (name, index) = self.postfix(n.clone())?;
                if name != n || !index.is_empty() {
                    // A member of a context value: none has members, matches nothing.
                    (Operand::Named(format!("$ctx.{name}{index:?}")), Ty::Unknown)
                } else {
                    match ContextType::parse(&n) {
                        Some(c) if c.name() == n => {
                            let ty = if c == ContextType::Procname { Ty::Str } else { Ty::Int };
                            (Operand::Context(c), ty)
                        }
                        _ => return err(at, format!("unknown context `$ctx.{n}` (vpid, vtid, procname, pthread_id, cpu_id, ip, span_id)")),
                    }
                }
            }
            Tok::Global(g) => return err(at, format!("`${g}` is not supported: only `$ctx.<context>` is")),
            Tok::Int(v) => (Operand::Int(v), Ty::Int),
            Tok::Float(v) => (Operand::Float(v), Ty::Float),
            Tok::Str(s) => {
                let c = glob_class(s.as_bytes());
                (Operand::Str(s), Ty::Lit(c))
            }
            t => return err(at, format!("expected a field, `$ctx.<name>`, a number or a string, found {}", describe(&t))),
        };
        Ok(Node { e: Expr::Truthy(op), ty, at })
    }
}

fn unary(op: &str, at: usize, n: Node) -> Result<Node, ParseError> {
    if n.ty.is_str() {
        return err(at, format!("`{op}` does not apply to a string"));
    }
    let e = match (op, n.e) {
        ("+", e) => e,
        ("!", e) => {
            return Ok(Node { e: Expr::Not(Box::new(e)), ty: Ty::Int, at });
        }
        ("-", Expr::Truthy(Operand::Int(v))) => Expr::Truthy(Operand::Int(v.wrapping_neg())),
        ("-", Expr::Truthy(Operand::Float(v))) => Expr::Truthy(Operand::Float(-v)),
        ("-", e) => Expr::Neg(Box::new(e)),
        (_, _) if n.ty == Ty::Float => return err(at, "`~` takes integers, not a float"),
        (_, Expr::Truthy(Operand::Int(v))) => Expr::Truthy(Operand::Int(!v)),
        (_, e) => Expr::BitNot(Box::new(e)),
    };
    let ty = if op == "~" { Ty::Int } else { n.ty };
    Ok(Node { e, ty, at })
}

fn binary(op: &'static str, op_at: usize, a: Node, b: Node) -> Result<Node, ParseError> {
    let at = a.at;
    if let Some(bop) = bit_op(op) {
        for n in [&a, &b] {
            if n.ty.is_str() || n.ty == Ty::Float {
                return err(op_at, format!("`{op}` takes integers, not {}", n.ty.word()));
            }
        }
        return Ok(Node { e: Expr::Bits(bop, Box::new(a.e), Box::new(b.e)), ty: Ty::Int, at });
    }
    let Some(cop) = cmp_op(op) else { return err(op_at, format!("`{op}` is not supported")) };
    let ordering = !matches!(cop, CmpOp::Eq | CmpOp::Ne);
    for n in [&a, &b] {
        if ordering && n.ty == Ty::Lit(GlobClass::Full) {
            return err(op_at, "only `==` and `!=` compare with a globbing pattern");
        }
    }
    match (a.ty, b.ty) {
        (x, y) if x.is_str() && y.is_str() && ordering => return err(op_at, "strings compare with `==` and `!=` only"),
        (x, y) if x.is_str() != y.is_str() && x != Ty::Unknown && y != Ty::Unknown => {
            return err(op_at, format!("cannot compare {} with {}", x.word(), y.word()));
        }
        _ => {}
    }
    let e = match (a.e, b.e) {
        (Expr::Truthy(x), Expr::Truthy(y)) => {
            if let (Operand::Str(s), Operand::Str(t)) = (&x, &y) {
                if check_literals(s, t).is_err() {
                    return err(op_at, "cannot compare two globbing patterns");
                }
            }
            Expr::Cmp(cop, x, y)
        }
        (x, y) => {
            for n in [a.ty, b.ty] {
                if n.is_str() {
                    return err(op_at, "a string compares only with a field or another string");
                }
            }
            Expr::Compare(cop, Box::new(x), Box::new(y))
        }
    };
    Ok(Node { e, ty: Ty::Int, at })
}
