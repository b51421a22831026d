//! TSDL tokens (CTF 1.8 §7.1, C99-like): identifiers and keywords, integer literals
//! (decimal, octal, hexadecimal, with `u`/`l` suffixes), string and character literals
//! with C escapes, punctuators, `//` and `/* */` comments.

/// A token with the 1-based line it starts on; `'a` is the metadata text's lifetime
/// (identifiers are slices of it, so moving through the tokens never allocates). 32 bytes:
/// LTTng's kernel metadata makes ~80 k of them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Token<'a> {
    pub kind: Tok<'a>,
    pub line: u32,
}

/// The tokens of a metadata text, and the media types of the LTTng 2.16 BLOB comments
/// ([`blob_comment`]) among them: `(index of the token just after the comment, media
/// type)`, in token order (the declaration starting at that token is a BLOB field; rare,
/// so kept apart from the tokens).
#[derive(Debug, Default)]
pub(crate) struct Tokens<'a> {
    pub toks: Vec<Token<'a>>,
    pub blobs: Vec<(usize, String)>,
}

impl Tokens<'_> {
    /// The media type of the BLOB comment just before token `i`, if there is one.
    pub(crate) fn blob(&self, i: usize) -> Option<&str> {
        self.blobs.binary_search_by_key(&i, |b| b.0).ok().map(|k| self.blobs[k].1.as_str())
    }
}

/// Token kinds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok<'a> {
    /// Identifier or keyword (ASCII letters, digits and `_`).
    Ident(&'a str),
    /// Integer literal (magnitude; a minus sign is a separate token).
    Int(u64),
    /// String literal, escapes decoded.
    Str(Box<str>),
    /// Punctuator: one of `{ } [ ] ( ) < > ; , = : . + - *`, or `:=` (as `=` with `:`
    /// folded in: [`Tok::Assign`]), `...` ([`Tok::Ellipsis`]), `->` (arrow).
    Punct(char),
    /// `:=`.
    Assign,
    /// `...`.
    Ellipsis,
    /// `->`.
    Arrow,
    /// End of input.
    Eof,
}

/// The media type a `//` comment's text announces when it is one of the comments
/// lttng-sessiond 2.16 writes before a BLOB field, which CTF 1.8 lacks
/// (`tsdl-trace-class-visitor.cpp`): ``static length BLOB field`` or ``dynamic length
/// BLOB field``, optionally followed by `` with `<media type>` media type``. Without one,
/// the media type is CTF 2's default for a BLOB, `application/octet-stream`.
pub(crate) fn blob_comment(comment: &[u8]) -> Option<String> {
    let c = std::str::from_utf8(comment).ok()?.trim();
    let rest = c.strip_prefix("dynamic length BLOB field").or_else(|| c.strip_prefix("static length BLOB field"))?;
    if rest.is_empty() {
        return Some(DEFAULT_MEDIA_TYPE.to_string());
    }
    let m = rest.strip_prefix(" with `")?.strip_suffix("` media type")?;
    Some(m.replace("\\n", "\n"))
}

/// CTF 2's media type of a BLOB that names none (CTF 2 §5.3.10, `media-type`).
pub(crate) const DEFAULT_MEDIA_TYPE: &str = "application/octet-stream";

/// Splits `text` into tokens; an error names the line and what is wrong.
pub(crate) fn tokenize(text: &[u8]) -> Result<Tokens<'_>, (u32, String)> {
    // About one token per 3.8 bytes of LTTng's metadata (81 k tokens in 311 KiB): room for
    // them at once (one per 3 bytes) rather than a doubling copy of megabytes (up to 1 Mi
    // tokens: metadata that is mostly comments reserves no more than that; the pages
    // reserved past the last token are never touched).
    let mut out = Tokens { toks: Vec::with_capacity((text.len() / 3 + 1).min(1 << 20)), blobs: Vec::new() };
    let mut i = 0usize;
    let mut line = 1u32;
    let n = text.len();
    while i < n {
        let c = text[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            b' ' | b'\t' | b'\r' | 0x0b | 0x0c | 0 => i += 1,
            b'/' if text.get(i + 1) == Some(&b'/') => {
                let start = i + 2;
                while i < n && text[i] != b'\n' {
                    i += 1;
                }
                // For the next token (the last of several such comments before it).
                if let Some(m) = blob_comment(&text[start..i]) {
                    let next = out.toks.len();
                    match out.blobs.last_mut() {
                        Some(b) if b.0 == next => b.1 = m,
                        _ => out.blobs.push((next, m)),
                    }
                }
            }
            b'/' if text.get(i + 1) == Some(&b'*') => {
                let start = line;
                i += 2;
                loop {
                    if i + 1 >= n {
                        return Err((start, "unterminated comment".into()));
                    }
                    if text[i] == b'*' && text[i + 1] == b'/' {
                        i += 2;
                        break;
                    }
                    if text[i] == b'\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
            b'"' | b'\'' => {
                let (s, next, lines) = string_literal(text, i).map_err(|m| (line, m))?;
                // A character literal is an integer in C; TSDL uses none, keep it as text.
                out.toks.push(Token { kind: Tok::Str(s.into()), line });
                line += lines;
                i = next;
            }
            b'0'..=b'9' => {
                let (v, next) = int_literal(text, i).map_err(|m| (line, m))?;
                out.toks.push(Token { kind: Tok::Int(v), line });
                i = next;
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let start = i;
                while i < n && (text[i].is_ascii_alphanumeric() || text[i] == b'_') {
                    i += 1;
                }
                // ASCII by construction, so never an error.
                let s = std::str::from_utf8(&text[start..i]).map_err(|_| (line, "identifier not ASCII".to_string()))?;
                out.toks.push(Token { kind: Tok::Ident(s), line });
            }
            b':' if text.get(i + 1) == Some(&b'=') => {
                out.toks.push(Token { kind: Tok::Assign, line });
                i += 2;
            }
            b'.' if text.get(i + 1) == Some(&b'.') && text.get(i + 2) == Some(&b'.') => {
                out.toks.push(Token { kind: Tok::Ellipsis, line });
                i += 3;
            }
            b'-' if text.get(i + 1) == Some(&b'>') => {
                out.toks.push(Token { kind: Tok::Arrow, line });
                i += 2;
            }
            b'{' | b'}' | b'[' | b']' | b'(' | b')' | b'<' | b'>' | b';' | b',' | b'=' | b':' | b'.' | b'+' | b'-' | b'*' => {
                out.toks.push(Token { kind: Tok::Punct(c as char), line });
                i += 1;
            }
            _ => return Err((line, format!("unexpected character 0x{c:02x}"))),
        }
    }
    out.toks.push(Token { kind: Tok::Eof, line });
    Ok(out)
}

fn int_literal(text: &[u8], mut i: usize) -> Result<(u64, usize), String> {
    let (radix, mut j) = if text[i] == b'0' && matches!(text.get(i + 1), Some(b'x' | b'X')) {
        (16, i + 2)
    } else if text[i] == b'0' && text.get(i + 1).is_some_and(|d| d.is_ascii_digit()) {
        (8, i + 1)
    } else {
        (10, i)
    };
    let start = j;
    let mut v: u64 = 0;
    while j < text.len() {
        let d = match text[j] {
            c @ b'0'..=b'9' => (c - b'0') as u32,
            c @ b'a'..=b'f' if radix == 16 => (c - b'a' + 10) as u32,
            c @ b'A'..=b'F' if radix == 16 => (c - b'A' + 10) as u32,
            _ => break,
        };
        if d >= radix {
            return Err(format!("digit {d} in a base-{radix} literal"));
        }
        v = v.checked_mul(radix as u64).and_then(|v| v.checked_add(d as u64)).ok_or("integer literal over 64 bits")?;
        j += 1;
    }
    if j == start {
        return Err("empty integer literal".into());
    }
    while j < text.len() && matches!(text[j], b'u' | b'U' | b'l' | b'L') {
        j += 1;
    }
    if j < text.len() && (text[j].is_ascii_alphanumeric() || text[j] == b'_') {
        return Err("bad integer literal suffix".into());
    }
    i = j;
    Ok((v, i))
}

/// Decodes a quoted literal starting at `text[i]` (the quote); returns the text, the index
/// after the closing quote and the newlines inside.
fn string_literal(text: &[u8], i: usize) -> Result<(String, usize, u32), String> {
    let quote = text[i];
    let mut j = i + 1;
    let mut bytes = Vec::new();
    let mut lines = 0;
    loop {
        let Some(&c) = text.get(j) else { return Err("unterminated literal".into()) };
        j += 1;
        match c {
            c if c == quote => break,
            b'\n' => {
                lines += 1;
                bytes.push(c);
            }
            b'\\' => {
                let Some(&e) = text.get(j) else { return Err("unterminated literal".into()) };
                j += 1;
                match e {
                    b'n' => bytes.push(b'\n'),
                    b't' => bytes.push(b'\t'),
                    b'r' => bytes.push(b'\r'),
                    b'a' => bytes.push(7),
                    b'b' => bytes.push(8),
                    b'f' => bytes.push(12),
                    b'v' => bytes.push(11),
                    b'x' => {
                        let mut v = 0u32;
                        let mut k = 0;
                        while k < 2 && text.get(j).is_some_and(|d| d.is_ascii_hexdigit()) {
                            v = v * 16 + (text[j] as char).to_digit(16).unwrap_or(0);
                            j += 1;
                            k += 1;
                        }
                        if k == 0 {
                            return Err("\\x without digits".into());
                        }
                        bytes.push(v as u8);
                    }
                    b'0'..=b'7' => {
                        let mut v = (e - b'0') as u32;
                        let mut k = 1;
                        while k < 3 && matches!(text.get(j), Some(b'0'..=b'7')) {
                            v = v * 8 + (text[j] - b'0') as u32;
                            j += 1;
                            k += 1;
                        }
                        bytes.push(v as u8);
                    }
                    b'\n' => lines += 1,
                    other => bytes.push(other),
                }
            }
            c => bytes.push(c),
        }
    }
    Ok((String::from_utf8_lossy(&bytes).into_owned(), j, lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<Tok<'_>> {
        tokenize(s.as_bytes()).unwrap().toks.into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn literals_and_punctuators() {
        assert_eq!(
            kinds("a := 0x1F; b = 017UL; \"e\\\"s\\tc\" ... -> -3"),
            vec![
                Tok::Ident("a"),
                Tok::Assign,
                Tok::Int(31),
                Tok::Punct(';'),
                Tok::Ident("b"),
                Tok::Punct('='),
                Tok::Int(15),
                Tok::Punct(';'),
                Tok::Str("e\"s\tc".into()),
                Tok::Ellipsis,
                Tok::Arrow,
                Tok::Punct('-'),
                Tok::Int(3),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn blob_comments_mark_the_next_token() {
        let t = tokenize(b"a;\n\t// dynamic length BLOB field with `image/png` media type\n\tinteger x;\n// static length BLOB field\ny; // plain\nz").unwrap();
        let blobs: Vec<_> = (0..t.toks.len()).map(|i| t.blob(i)).collect();
        assert_eq!(blobs[2], Some("image/png"), "{t:?}");
        assert_eq!(blobs[5], Some("application/octet-stream"));
        assert_eq!(blobs.iter().flatten().count(), 2, "other comments mark nothing");
        assert_eq!(blob_comment(b" dynamic length BLOB field with `a/b` media"), None);
    }

    #[test]
    fn comments_and_lines() {
        let t = tokenize(b"/* x\n y */ a // z\n b").unwrap().toks;
        assert_eq!(t[0].line, 2);
        assert_eq!(t[1].line, 3);
        assert!(tokenize(b"/* open").is_err());
        assert!(tokenize(b"\"open").is_err());
        assert!(tokenize(b"99999999999999999999999").is_err());
    }
}
