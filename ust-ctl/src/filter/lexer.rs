//! Tokens of the filter language. The lexer never panics: every byte it cannot take is a
//! [`ParseError`] at its offset.

use super::{err, ParseError};

/// A token.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    /// A field name (`[A-Za-z_][A-Za-z0-9_]*`).
    Ident(String),
    /// `$name`.
    Global(String),
    /// An integer literal (a decimal above `i64::MAX` keeps its 64 bits, as LTTng's).
    Int(i64),
    /// A float literal.
    Float(f64),
    /// A string literal, in pattern syntax (`\*` and `\\` kept escaped).
    Str(String),
    /// An operator or punctuation.
    Op(&'static str),
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// The end of the text.
    End,
}

/// Operators of two bytes, tried before those of one.
const TWO: [&str; 9] = ["==", "!=", "<=", ">=", "&&", "||", "<<", ">>", "->"];
/// Operators of one byte.
const ONE: [&str; 15] = ["<", ">", "!", "~", "&", "|", "^", "+", "-", "*", "/", "%", ".", "[", "]"];

/// Splits filter text into tokens.
pub(super) struct Lexer<'a> {
    pub(super) text: &'a str,
    pub(super) pos: usize,
}

impl Lexer<'_> {
    fn bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }

    /// The next token and its offset.
    pub(super) fn next(&mut self) -> Result<(usize, Tok), ParseError> {
        let s = self.text.as_bytes();
        while self.pos < s.len() && s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        let start = self.pos;
        let Some(&c) = s.get(start) else { return Ok((start, Tok::End)) };
        let two = s.get(start..start + 2);
        if let Some(op) = TWO.iter().find(|op| two == Some(op.as_bytes())) {
            self.pos += 2;
            return Ok((start, Tok::Op(op)));
        }
        let tok = match c {
            b'(' => Tok::LParen,
            b')' => Tok::RParen,
            b'=' => return err(start, "`=` is not an operator; compare with `==`"),
            b'"' => return self.string(start),
            b'$' => {
                let len = self.ident_len(start + 1);
                if len == 0 {
                    return err(start, "expected `$ctx.<context>` (vpid, vtid, procname, pthread_id, cpu_id, ip, span_id)");
                }
                self.pos = start + 1 + len;
                return Ok((start, Tok::Global(self.text[start + 1..start + 1 + len].to_string())));
            }
            b'.' if s.get(start + 1).is_some_and(u8::is_ascii_digit) => return self.number(start),
            c if c.is_ascii_digit() => return self.number(start),
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let len = self.ident_len(start);
                self.pos = start + len;
                return Ok((start, Tok::Ident(self.text[start..start + len].to_string())));
            }
            _ => match ONE.iter().find(|op| op.as_bytes()[0] == c) {
                Some(op) => Tok::Op(op),
                None => {
                    let ch = self.text[start..].chars().next().unwrap_or('?');
                    return err(start, format!("unexpected character {ch:?}"));
                }
            },
        };
        self.pos += 1;
        Ok((start, tok))
    }

    fn ident_len(&self, from: usize) -> usize {
        let s = self.bytes().get(from..).unwrap_or_default();
        if s.first().is_some_and(u8::is_ascii_digit) {
            return 0;
        }
        s.iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count()
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
        let s = &self.bytes()[start..];
        let hex = s.len() > 1 && s[0] == b'0' && matches!(s[1], b'x' | b'X');
        let len = s
            .iter()
            .enumerate()
            .take_while(|(k, b)| {
                b.is_ascii_alphanumeric() || **b == b'.' || ((**b == b'-' || **b == b'+') && *k > 0 && matches!(s[k - 1], b'e' | b'E') && !hex)
            })
            .count();
        let t = &self.text[start..start + len];
        self.pos = start + len;
        let lower = t.to_ascii_lowercase();
        let bad = || err(start, format!("{t:?} is not a number"));
        if let Some(digits) = lower.strip_prefix("0x") {
            return match u64::from_str_radix(digits, 16) {
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
        match u64::from_str_radix(digits, radix) {
            Ok(v) => Ok((start, Tok::Int(v as i64))),
            Err(_) if radix == 10 && digits.bytes().all(|b| b.is_ascii_digit()) => err(start, format!("{t} does not fit in 64 bits")),
            Err(_) => bad(),
        }
    }
}
