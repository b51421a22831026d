//! The filter language of `ust enable-event --filter EXPR` (LTTng's): a hand-written
//! recursive-descent parser and type check that turn the text into a
//! [`ust_core::filter::Expr`] with named fields, or an error that names the column of the
//! fault. The CLI runs it to reject a bad filter before it reaches the daemon; the daemon
//! runs it again on what it receives (it trusts no client).
//!
//! ```text
//! expr    := and ( "||" and )*
//! and     := unary ( "&&" unary )*
//! unary   := "!" unary | "(" expr ")" | compare
//! compare := operand ( ("==" | "!=" | "<" | "<=" | ">" | ">=") operand )?
//! operand := FIELD | "$ctx." CONTEXT | ["-"] INTEGER | ["-"] FLOAT | STRING
//! ```
//!
//! `FIELD` is an event field name (`[A-Za-z_][A-Za-z0-9_]*`); `CONTEXT` one of `vpid`,
//! `vtid`, `procname`, `pthread_id`, `cpu_id`, `ip`; integers are decimal, `0x` hexadecimal or
//! `0` octal; floats have a `.` or an exponent; strings are double-quoted with `\"`, `\\`,
//! `\n`, `\t` escapes, and `*` in them is a wildcard (`\*` a star). A bare operand is true
//! when non-zero. Strings compare with `==` and `!=` only. Whether a field exists, and its
//! type, is known per event: the daemon resolves it, and a filter naming a field an event
//! lacks is false for that event.

use ust_core::context::ContextType;
use ust_core::filter::{check_cmp, check_shape, context_kind, CmpOp, Expr, Kind, Operand};

/// A syntax or type error, at a byte offset of the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {}: {message}", .offset + 1)]
pub struct ParseError {
    /// Byte offset of the fault (0-based).
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

impl ParseError {
    /// The error with the text and a caret under the fault, for a terminal:
    ///
    /// ```text
    /// column 5: expected an operand after `>`
    ///   v > && w
    ///       ^
    /// ```
    pub fn render(&self, text: &str) -> String {
        let col = text.get(..self.offset.min(text.len())).map_or(self.offset, |s| s.chars().count());
        format!("{self}\n  {text}\n  {}^", " ".repeat(col))
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Ctx(String),
    Int(i64),
    Float(f64),
    Str(String),
    Op(&'static str),
    LParen,
    RParen,
    End,
}

struct Lexer<'a> {
    s: &'a [u8],
    text: &'a str,
    pos: usize,
}

fn err<T>(offset: usize, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError { offset, message: message.into() })
}

impl<'a> Lexer<'a> {
    fn next(&mut self) -> Result<(usize, Tok), ParseError> {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        let start = self.pos;
        let Some(&c) = self.s.get(self.pos) else { return Ok((start, Tok::End)) };
        let two = self.s.get(self.pos..self.pos + 2);
        for op in ["==", "!=", "<=", ">=", "&&", "||"] {
            if two == Some(op.as_bytes()) {
                self.pos += 2;
                return Ok((start, Tok::Op(op)));
            }
        }
        let tok = match c {
            b'<' => Tok::Op("<"),
            b'>' => Tok::Op(">"),
            b'!' => Tok::Op("!"),
            b'-' => Tok::Op("-"),
            b'(' => Tok::LParen,
            b')' => Tok::RParen,
            b'=' => return err(start, "`=` is not an operator; compare with `==`"),
            b'&' | b'|' => return err(start, format!("bitwise `{}` is not supported; use `{0}{0}`", c as char)),
            b'"' => return self.string(start),
            b'$' => {
                let rest = &self.text[start..];
                let Some(name) = rest.strip_prefix("$ctx.") else {
                    return err(start, "expected `$ctx.<context>` (vpid, vtid, procname, pthread_id, cpu_id, ip, span_id)");
                };
                let len = name.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_').count();
                self.pos = start + 5 + len;
                return Ok((start, Tok::Ctx(name[..len].to_string())));
            }
            c if c.is_ascii_digit() || c == b'.' => return self.number(start),
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let len = self.s[start..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
                self.pos = start + len;
                return Ok((start, Tok::Ident(self.text[start..start + len].to_string())));
            }
            _ => {
                let ch = self.text[start..].chars().next().unwrap_or('?');
                return err(start, format!("unexpected character {ch:?}"));
            }
        };
        self.pos += 1;
        Ok((start, tok))
    }

    fn string(&mut self, start: usize) -> Result<(usize, Tok), ParseError> {
        let mut out = String::new();
        let i = start + 1;
        let mut chars = self.text[i..].char_indices();
        loop {
            let Some((off, c)) = chars.next() else { return err(start, "string not closed (missing `\"`)") };
            match c {
                '"' => {
                    self.pos = i + off + 1;
                    return Ok((start, Tok::Str(out)));
                }
                '\\' => match chars.next() {
                    Some((_, '"')) => out.push('"'),
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    // Kept escaped: the pattern syntax of ust_core::filter reads them.
                    Some((_, '\\')) => out.push_str("\\\\"),
                    Some((_, '*')) => out.push_str("\\*"),
                    Some((o, other)) => return err(i + o, format!("unknown escape `\\{other}` (use \\\" \\\\ \\* \\n \\t)")),
                    None => return err(i + off, "string not closed (missing `\"`)"),
                },
                c => out.push(c),
            }
            if out.len() > ust_core::filter::MAX_STRING {
                return err(start, format!("string literal longer than {} bytes", ust_core::filter::MAX_STRING));
            }
        }
    }

    fn number(&mut self, start: usize) -> Result<(usize, Tok), ParseError> {
        let s = &self.s[start..];
        let len = s
            .iter()
            .enumerate()
            .take_while(|(k, b)| b.is_ascii_alphanumeric() || **b == b'.' || ((**b == b'-' || **b == b'+') && *k > 0 && matches!(s[k - 1], b'e' | b'E') && !s.starts_with(b"0x")))
            .count();
        let t = &self.text[start..start + len];
        self.pos = start + len;
        let lower = t.to_ascii_lowercase();
        let bad = || err(start, format!("{t:?} is not a number"));
        if let Some(hex) = lower.strip_prefix("0x") {
            return match u64::from_str_radix(hex, 16) {
                Ok(v) => Ok((start, Tok::Int(v as i64))),
                Err(_) => bad(),
            };
        }
        if lower.contains(['.', 'e']) {
            return match t.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok((start, Tok::Float(v))),
                _ => bad(),
            };
        }
        let (digits, radix) = if lower.len() > 1 && lower.starts_with('0') { (&lower[1..], 8) } else { (&lower[..], 10) };
        match i64::from_str_radix(digits, radix) {
            Ok(v) => Ok((start, Tok::Int(v))),
            Err(_) if radix == 10 && digits.bytes().all(|b| b.is_ascii_digit()) => err(start, format!("{t} does not fit in a 64-bit signed integer")),
            Err(_) => bad(),
        }
    }
}

struct Parser<'a> {
    lex: Lexer<'a>,
    tok: Tok,
    at: usize,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Ctx(s) => format!("`$ctx.{s}`"),
        Tok::Int(v) => format!("`{v}`"),
        Tok::Float(v) => format!("`{v}`"),
        Tok::Str(_) => "a string".into(),
        Tok::Op(o) => format!("`{o}`"),
        Tok::LParen => "`(`".into(),
        Tok::RParen => "`)`".into(),
        Tok::End => "the end of the filter".into(),
    }
}

impl<'a> Parser<'a> {
    fn bump(&mut self) -> Result<(usize, Tok), ParseError> {
        let (at, tok) = self.lex.next()?;
        let old = (self.at, std::mem::replace(&mut self.tok, tok));
        self.at = at;
        Ok(old)
    }

    fn or(&mut self, depth: usize) -> Result<Expr, ParseError> {
        let mut left = self.and(depth)?;
        while self.tok == Tok::Op("||") {
            self.bump()?;
            let right = self.and(depth)?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self, depth: usize) -> Result<Expr, ParseError> {
        let mut left = self.unary(depth)?;
        while self.tok == Tok::Op("&&") {
            self.bump()?;
            let right = self.unary(depth)?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self, depth: usize) -> Result<Expr, ParseError> {
        if depth > ust_core::filter::MAX_DEPTH {
            return err(self.at, format!("nested deeper than {}", ust_core::filter::MAX_DEPTH));
        }
        match self.tok {
            Tok::Op("!") => {
                self.bump()?;
                Ok(Expr::Not(Box::new(self.unary(depth + 1)?)))
            }
            Tok::LParen => {
                let open = self.at;
                self.bump()?;
                let e = self.or(depth + 1)?;
                if self.tok != Tok::RParen {
                    return err(self.at, format!("expected `)` (to close the `(` at column {}), found {}", open + 1, describe(&self.tok)));
                }
                self.bump()?;
                Ok(e)
            }
            _ => self.compare(),
        }
    }

    fn operand(&mut self) -> Result<(usize, Operand), ParseError> {
        let (at, tok) = self.bump()?;
        let op = match tok {
            Tok::Ident(n) => Operand::Named(n),
            Tok::Ctx(n) => match ContextType::parse(&n) {
                Some(c) if c.name() == n => Operand::Context(c),
                _ => return err(at, format!("unknown context `$ctx.{n}` (vpid, vtid, procname, pthread_id, cpu_id, ip, span_id)")),
            },
            Tok::Int(v) => Operand::Int(v),
            Tok::Float(v) => Operand::Float(v),
            Tok::Str(s) => Operand::Str(s),
            Tok::Op("-") => match self.bump()? {
                (_, Tok::Int(v)) => Operand::Int(v.checked_neg().ok_or(ParseError { offset: at, message: "integer out of range".into() })?),
                (_, Tok::Float(v)) => Operand::Float(-v),
                (a, t) => return err(a, format!("expected a number after `-`, found {}", describe(&t))),
            },
            t => return err(at, format!("expected a field, `$ctx.<name>`, a number or a string, found {}", describe(&t))),
        };
        Ok((at, op))
    }

    fn compare(&mut self) -> Result<Expr, ParseError> {
        let (at, a) = self.operand()?;
        let op = match self.tok {
            Tok::Op("==") => CmpOp::Eq,
            Tok::Op("!=") => CmpOp::Ne,
            Tok::Op("<") => CmpOp::Lt,
            Tok::Op("<=") => CmpOp::Le,
            Tok::Op(">") => CmpOp::Gt,
            Tok::Op(">=") => CmpOp::Ge,
            _ => {
                if known_kind(&a) == Some(Kind::Str) {
                    return err(at, "a string is not a condition: compare it with `==` or `!=`");
                }
                return Ok(Expr::Truthy(a));
            }
        };
        let op_at = self.at;
        self.bump()?;
        if matches!(self.tok, Tok::End | Tok::RParen | Tok::Op("&&") | Tok::Op("||")) {
            return err(self.at, format!("expected an operand after `{}`", op.symbol()));
        }
        let (_, b) = self.operand()?;
        if let (Some(ka), Some(kb)) = (known_kind(&a), known_kind(&b)) {
            if check_cmp(op, ka, kb).is_err() {
                let what = if ka == Kind::Str && kb == Kind::Str { "strings compare with `==` and `!=` only".to_string() } else { format!("cannot compare {} with {}", kind_word(ka), kind_word(kb)) };
                return err(op_at, what);
            }
        }
        Ok(Expr::Cmp(op, a, b))
    }
}

fn kind_word(k: Kind) -> &'static str {
    match k {
        Kind::Int => "an integer",
        Kind::Float => "a float",
        Kind::Str => "a string",
    }
}

/// The kind of an operand when known without an event (literals and contexts).
fn known_kind(o: &Operand) -> Option<Kind> {
    match o {
        Operand::Int(_) => Some(Kind::Int),
        Operand::Float(_) => Some(Kind::Float),
        Operand::Str(_) => Some(Kind::Str),
        Operand::Context(c) => Some(context_kind(*c)),
        Operand::Named(_) | Operand::Field(_) => None,
    }
}

/// Longest filter text accepted, in bytes.
pub const MAX_TEXT: usize = 4096;

/// Parses and checks a filter expression.
///
/// # Errors
/// A [`ParseError`] at the first fault: an unknown character or context, a missing
/// operand or parenthesis, a comparison of kinds that cannot be compared (a string with a
/// number, `<` on strings), or an expression over the size limits.
///
/// ```
/// let e = ust_ctl::filter::parse(r#"intfield > 500 && (msg == "conn*" || $ctx.vtid == 1234)"#).unwrap();
/// let err = ust_ctl::filter::parse("x >").unwrap_err();
/// assert_eq!(err.offset, 3);
/// assert_eq!(err.to_string(), "column 4: expected an operand after `>`");
/// # let _ = e;
/// ```
pub fn parse(text: &str) -> Result<Expr, ParseError> {
    if text.len() > MAX_TEXT {
        return err(0, format!("filter longer than {MAX_TEXT} bytes"));
    }
    if text.trim().is_empty() {
        return err(0, "empty filter");
    }
    let mut p = Parser { lex: Lexer { s: text.as_bytes(), text, pos: 0 }, tok: Tok::End, at: 0 };
    p.bump()?;
    let e = p.or(0)?;
    if p.tok != Tok::End {
        return err(p.at, format!("unexpected {} (missing `&&` or `||`?)", describe(&p.tok)));
    }
    check_shape(&e).map_err(|e| ParseError { offset: 0, message: e.to_string() })?;
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;
    use ust_core::filter::{eval, resolve, ContextSource};
    use ust_core::{EventDesc, FieldDesc, FieldType, IntegerType, Level};

    struct Ctx;
    impl ContextSource for Ctx {
        fn int(&self, c: ContextType) -> i128 {
            if c == ContextType::Vtid {
                1234
            } else {
                1
            }
        }
        fn procname(&self) -> &[u8] {
            b"server"
        }
    }

    fn desc() -> EventDesc {
        EventDesc {
            provider: Cow::Borrowed("p"),
            name: Cow::Borrowed("e"),
            level: Level::Info,
            fields: Cow::Owned(vec![
                FieldDesc { name: Cow::Borrowed("n"), ty: FieldType::Integer(IntegerType::I64) },
                FieldDesc { name: Cow::Borrowed("msg"), ty: FieldType::String },
                FieldDesc { name: Cow::Borrowed("x"), ty: FieldType::Float { exp_dig: 11, mant_dig: 53 } },
            ]),
            location: Cow::Borrowed(""),
        }
    }

    fn run(text: &str, n: i64, msg: &str, x: f64) -> bool {
        let d = desc();
        let e = parse(text).unwrap_or_else(|e| panic!("{}", e.render(text)));
        let Some(r) = resolve(&e, &d) else { return false };
        let mut p = n.to_le_bytes().to_vec();
        p.extend_from_slice(msg.as_bytes());
        p.push(0);
        p.extend_from_slice(&x.to_le_bytes());
        eval(&r, &d, &p, &Ctx)
    }

    #[test]
    fn each_operator() {
        assert!(run("n == 5", 5, "", 0.0));
        assert!(run("n != 5", 4, "", 0.0));
        assert!(run("n < 5", 4, "", 0.0) && !run("n < 5", 5, "", 0.0));
        assert!(run("n <= 5", 5, "", 0.0) && !run("n <= 5", 6, "", 0.0));
        assert!(run("n > 5", 6, "", 0.0) && !run("n > 5", 5, "", 0.0));
        assert!(run("n >= 5", 5, "", 0.0) && !run("n >= 5", 4, "", 0.0));
        assert!(run("n == -5", -5, "", 0.0));
        assert!(run("n == 0x10", 16, "", 0.0) && run("n == 010", 8, "", 0.0));
        assert!(run("x > 1.5", 0, "", 2.0) && run("x < 1e3", 0, "", 2.0) && run("n < 2.5", 2, "", 0.0));
        assert!(run(r#"msg == "conn*""#, 0, "connect", 0.0) && !run(r#"msg == "conn*""#, 0, "accept", 0.0));
        assert!(run(r#"msg != "a""#, 0, "b", 0.0));
        assert!(run(r#"msg == "a\*""#, 0, "a*", 0.0) && !run(r#"msg == "a\*""#, 0, "ab", 0.0));
        assert!(run("n == 1 && x == 2", 1, "", 2.0) && !run("n == 1 && x == 2", 1, "", 3.0));
        assert!(run("n == 1 || x == 2", 0, "", 2.0) && !run("n == 1 || x == 2", 0, "", 3.0));
        assert!(run("!(n == 1)", 0, "", 0.0) && !run("!(n == 1)", 1, "", 0.0));
        assert!(run("n", 3, "", 0.0) && !run("n", 0, "", 0.0));
        assert!(run("n == 1 || n == 2 && x == 9", 1, "", 0.0), "&& binds tighter than ||");
        assert!(!run("(n == 1 || n == 2) && x == 9", 1, "", 0.0));
        assert!(run("$ctx.vtid == 1234 && $ctx.procname == \"serv*\"", 0, "", 0.0));
        assert!(!run("missing == 1", 0, "", 0.0), "a field the event lacks makes the filter false");
        assert!(!run("!(missing == 1)", 0, "", 0.0), "even under a negation");
        assert!(!run("msg == 1", 0, "1", 0.0), "a type mismatch with a field is false");
    }

    #[test]
    fn malformed_expressions_name_the_column() {
        let at = |t: &str| parse(t).unwrap_err().offset;
        assert_eq!(at(""), 0);
        assert_eq!(at("n >"), 3);
        assert_eq!(at("n > && x"), 4);
        assert_eq!(at("(n == 1"), 7);
        assert_eq!(at("n == 1)"), 6);
        assert_eq!(at("n = 1"), 2);
        assert_eq!(at("n & 1"), 2);
        assert_eq!(at("n == \"abc"), 5);
        assert_eq!(at("n == 1 x"), 7);
        assert_eq!(at("$ctx.bogus == 1"), 0);
        assert_eq!(at("$foo == 1"), 0);
        assert_eq!(at("n == 12a"), 5);
        assert_eq!(at("n == 99999999999999999999"), 5);
        assert_eq!(at("\"a\" < \"b\""), 4, "ordering on strings");
        assert_eq!(at("$ctx.procname == 3"), 14, "string with a number");
        assert_eq!(at("\"abc\""), 0, "a string is not a condition");
        assert_eq!(at("n == #"), 5);
        assert_eq!(at(&format!("{}1{}", "(".repeat(40), ")".repeat(40))), 33);
        let e = parse("n > && x").unwrap_err();
        assert_eq!(e.render("n > && x"), "column 5: expected an operand after `>`\n  n > && x\n      ^");
    }
}
