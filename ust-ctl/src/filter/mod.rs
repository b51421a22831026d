//! The filter language of `ust enable-event --filter EXPR`, as LTTng 2.13 defines it: a
//! hand-written lexer ([`lexer`](self)), a precedence-climbing parser that type-checks what
//! literals reveal as it builds (`parser`), turning the text into a
//! [`ust_core::filter::Expr`] with named fields, or an error that names the column of the
//! fault. The CLI runs it to reject a bad filter before it reaches the daemon; the daemon
//! runs it again on what it receives (it trusts no client). Neither ever panics on the text.
//!
//! ```text
//! expr     := and ( "||" and )*
//! and      := equality ( "&&" equality )*
//! equality := relation ( ("==" | "!=") relation )*
//! relation := bitor ( ("<" | "<=" | ">" | ">=") bitor )*
//! bitor    := bitxor ( "|" bitxor )*
//! bitxor   := bitand ( "^" bitand )*
//! bitand   := shift ( "&" shift )*
//! shift    := unary ( ("<<" | ">>") unary )*
//! unary    := ("!" | "-" | "+" | "~") unary | "(" expr ")" | primary
//! primary  := NAME ( "[" INTEGER "]" | ("." | "->") NAME )* | "$ctx." CONTEXT
//!           | INTEGER | FLOAT | STRING
//! ```
//!
//! As in LTTng, `&`, `|` and `^` bind tighter than comparisons (`1 & 3 == 1` is
//! `(1 & 3) == 1`), and a comparison is a value (`1 >= (1 >= 1)`). `*`, `/`, `%` and binary
//! `+`, `-` are parsed and refused as not supported. `NAME` is an event field name
//! (`[A-Za-z_][A-Za-z0-9_]*`); `arr[2]` is an element of an array or sequence field; a
//! dotted name (`a.b`, `$ctx.vtid.x`) is accepted and matches no event, as no field or
//! context has members. `CONTEXT` is one of `vpid`, `vtid`, `procname`, `pthread_id`,
//! `cpu_id`, `ip`. Integers are decimal (up to 64 bits), `0x` hexadecimal or `0` octal;
//! floats have a `.` or an exponent; strings are double-quoted with `\"`, `\\`, `\n`, `\t`
//! escapes, and `*` in them is a wildcard (`\*` a star), also when two literals are
//! compared (`"abc" == "a*"`); two patterns with a star before their end cannot be compared
//! with each other, and a pattern takes only `==` and `!=`. A bare operand is true when
//! non-zero; a string is never a condition. Comparing a string with a number is an error
//! when both are known here (literals, contexts); whether a field exists, and its type, is
//! known per event: the daemon resolves it, and a filter naming a field an event lacks, or
//! using it with a value of another kind, is false for that event.

mod lexer;
mod parser;

use ust_core::filter::{check_shape, Expr, FilterError};

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

fn err<T>(offset: usize, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError { offset, message: message.into() })
}

/// Longest filter text accepted, in bytes.
pub const MAX_TEXT: usize = 4096;

/// Parses and checks a filter expression.
///
/// # Errors
/// A [`ParseError`] at the first fault: an unknown character or context, a missing
/// operand or parenthesis, an operator LTTng does not support (`*`, `/`, `%`, binary `+`
/// and `-`: the message says "not supported"), a comparison of kinds that cannot be
/// compared (a string literal with a number, `<` on strings, two globbing patterns), a
/// string used as a condition, or an expression over the size limits.
///
/// ```
/// let e = ust_ctl::filter::parse(r#"intfield > 500 && (msg == "conn*" || $ctx.vtid == 1234)"#).unwrap();
/// assert!(ust_ctl::filter::parse("(arrfield1[2] & 1) == 1 && -intfield < 0").is_ok());
/// let err = ust_ctl::filter::parse("x >").unwrap_err();
/// assert_eq!(err.offset, 3);
/// assert_eq!(err.to_string(), "column 4: expected an operand after `>`");
/// assert!(ust_ctl::filter::parse("intfield * 2").unwrap_err().message.contains("not supported"));
/// # let _ = e;
/// ```
pub fn parse(text: &str) -> Result<Expr, ParseError> {
    if text.len() > MAX_TEXT {
        return err(0, format!("filter longer than {MAX_TEXT} bytes"));
    }
    if text.trim().is_empty() {
        return err(0, "empty filter");
    }
    let mut p = parser::Parser { lex: lexer::Lexer { text, pos: 0 }, tok: lexer::Tok::End, at: 0 };
    p.bump()?;
    let n = p.level(0, 0)?;
    if p.tok != lexer::Tok::End {
        let what = match &p.tok {
            lexer::Tok::RParen => "unmatched `)`".to_string(),
            _ => "unexpected token (missing `&&` or `||`?)".to_string(),
        };
        return err(p.at, what);
    }
    parser::condition(&n)?;
    check_shape(&n.e).map_err(|e| ParseError {
        offset: 0,
        message: match e {
            FilterError::TooDeep => {
                format!("nested deeper than {} (a chain of `|`, `&`, `^` or comparisons counts one level per operator)", ust_core::filter::MAX_DEPTH)
            }
            other => other.to_string(),
        },
    })?;
    Ok(n.e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;
    use ust_core::context::ContextType;
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
        assert_eq!(at("n && "), 5, "a missing operand (`&` alone is bitwise and, LTTng accepts it)");
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

    proptest::proptest! {
        /// Text made of the language's own pieces, in any order: the parser answers, never
        /// panics, and what it accepts is within the limits a process checks.
        #[test]
        fn any_text_parses_or_is_refused_without_panicking(parts in proptest::collection::vec(proptest::sample::select(vec![
            "a", "arr", "[", "]", "[1]", ".", "->", "$ctx", "$ctx.vtid", "$ctx.procname", "$x", "(", ")", "!", "~", "-", "+", "*", "/", "%",
            "&", "|", "^", "<<", ">>", "&&", "||", "==", "!=", "<", "<=", ">", ">=", "=", "0", "1", "0x", "0xff", "07", "08", "1.5", "1e", ".5",
            "99999999999999999999", "\"", "\"a*\"", "\"*b*\"", "\"\\*\"", "\\", " ", "é", "#",
        ]), 0..40)) {
            let text: String = parts.concat();
            if let Ok(e) = parse(&text) {
                proptest::prop_assert!(check_shape(&e).is_ok(), "{text}");
            }
        }

        /// Deep nesting of every kind is refused or accepted without exhausting the stack.
        #[test]
        fn deep_nesting_is_bounded(open in proptest::sample::select(vec!["(", "!(", "-(", "~(", "!", "-", "~", "+", "a[0] | ", "1 == ", "1 && "]), n in 0usize..3000) {
            let text = format!("{}1{}", open.repeat(n), ")".repeat(if open.contains('(') { n } else { 0 }));
            let _ = parse(&text);
        }
    }
}
