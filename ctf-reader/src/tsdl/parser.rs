//! Recursive-descent parser of TSDL tokens into [`super::ast`] (CTF 1.8 §7 and appendix C).
//! Nesting is bounded by [`MAX_DEPTH`] so hostile metadata cannot exhaust the stack.

use super::ast::*;
use super::lexer::{Tok, Token, Tokens};

/// Deepest nesting of blocks, structures, variants and enums accepted.
pub(crate) const MAX_DEPTH: usize = 64;

/// C base-type words that make up a type name (`unsigned long int`).
const C_TYPE_WORDS: &[&str] = &["const", "signed", "unsigned", "char", "short", "int", "long", "float", "double", "void", "_Bool", "_Complex", "_Imaginary"];

pub(crate) struct Parser<'a> {
    toks: &'a [Token<'a>],
    all: &'a Tokens<'a>,
    pos: usize,
    depth: usize,
}

type PResult<T> = Result<T, (u32, String)>;

impl<'a> Parser<'a> {
    pub(crate) fn new(all: &'a Tokens<'a>) -> Self {
        Parser { toks: &all.toks, all, pos: 0, depth: 0 }
    }

    fn peek(&self) -> &Tok<'a> {
        &self.toks[self.pos.min(self.toks.len() - 1)].kind
    }

    fn peek_at(&self, k: usize) -> &Tok<'a> {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].kind
    }

    fn line(&self) -> u32 {
        self.toks[self.pos.min(self.toks.len() - 1)].line
    }

    fn bump(&mut self) -> Tok<'a> {
        let t = self.peek().clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn err<T>(&self, msg: impl Into<String>) -> PResult<T> {
        Err((self.line(), format!("{} (at {:?})", msg.into(), self.peek())))
    }

    fn eat(&mut self, c: char) -> bool {
        if *self.peek() == Tok::Punct(c) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> PResult<()> {
        if self.eat(c) {
            Ok(())
        } else {
            self.err(format!("expected `{c}`"))
        }
    }

    fn ident(&mut self) -> PResult<String> {
        match self.bump() {
            Tok::Ident(s) => Ok(s.to_string()),
            _ => {
                self.pos -= 1;
                self.err("expected an identifier")
            }
        }
    }

    fn is_ident(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Ident(i) if *i == s)
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err(format!("nesting deeper than {MAX_DEPTH}"));
        }
        Ok(())
    }

    /// Parses the whole metadata.
    pub(crate) fn parse_top(&mut self) -> PResult<Vec<Decl>> {
        let mut out = Vec::new();
        while *self.peek() != Tok::Eof {
            if self.eat(';') {
                continue;
            }
            out.push(self.parse_decl(true)?);
        }
        Ok(out)
    }

    /// Parses one declaration; `blocks` allows `key = value` attributes and top-level blocks.
    fn parse_decl(&mut self, blocks: bool) -> PResult<Decl> {
        let line = self.line();
        let blob = self.all.blob(self.pos).map(str::to_string);
        if let Tok::Ident(w) = self.peek().clone() {
            let kind = match w {
                "trace" => Some(BlockKind::Trace),
                "env" => Some(BlockKind::Env),
                "clock" => Some(BlockKind::Clock),
                "stream" => Some(BlockKind::Stream),
                "event" => Some(BlockKind::Event),
                "callsite" => Some(BlockKind::Callsite),
                _ => None,
            };
            if let (Some(kind), true, Tok::Punct('{')) = (kind, blocks, self.peek_at(1)) {
                self.bump();
                self.bump();
                self.enter()?;
                let mut body = Vec::new();
                while !self.eat('}') {
                    if self.eat(';') {
                        continue;
                    }
                    if *self.peek() == Tok::Eof {
                        return self.err("unterminated block");
                    }
                    body.push(self.parse_decl(true)?);
                }
                self.depth -= 1;
                self.expect(';')?;
                return Ok(Decl::Block { kind, body, line });
            }
            if w == "typealias" {
                self.bump();
                let spec = self.parse_type_spec(false)?;
                let dims = self.parse_dims()?;
                if self.bump() != Tok::Assign {
                    self.pos -= 1;
                    return self.err("expected `:=` in typealias");
                }
                let mut words = Vec::new();
                while let Tok::Ident(_) = self.peek() {
                    words.push(self.ident()?);
                }
                while self.eat('*') {}
                if words.is_empty() {
                    return self.err("typealias without a name");
                }
                self.expect(';')?;
                return Ok(Decl::Typealias { spec, dims, alias: words.join(" "), line });
            }
            if w == "typedef" {
                self.bump();
                let spec = self.parse_type_spec(true)?;
                let decls = self.parse_declarators()?;
                return Ok(Decl::Typedef { spec, decls, line });
            }
            if blocks && !is_type_keyword(w) && !C_TYPE_WORDS.contains(&w) {
                // `key = value;` or `a.b := type;`?
                let save = self.pos;
                let key = self.dotted()?;
                match self.peek() {
                    Tok::Punct('=') => {
                        self.bump();
                        let value = self.parse_value()?;
                        self.expect(';')?;
                        return Ok(Decl::Attr(Attr { key, value, line }));
                    }
                    Tok::Assign => {
                        self.bump();
                        let spec = self.parse_type_spec(false)?;
                        self.expect(';')?;
                        return Ok(Decl::Attr(Attr { key, value: Value::Type(Box::new(spec)), line }));
                    }
                    _ => self.pos = save,
                }
            }
        }
        let spec = self.parse_type_spec(true)?;
        if self.eat(';') {
            return Ok(Decl::TypeOnly { spec, line });
        }
        let decls = self.parse_declarators()?;
        Ok(Decl::Field { spec, decls, line, blob })
    }

    fn dotted(&mut self) -> PResult<String> {
        let mut s = self.ident()?;
        while *self.peek() == Tok::Punct('.') || *self.peek() == Tok::Arrow {
            self.bump();
            s.push('.');
            s.push_str(&self.ident()?);
        }
        Ok(s)
    }

    fn parse_value(&mut self) -> PResult<Value> {
        match self.peek().clone() {
            Tok::Punct('-') => {
                self.bump();
                match self.bump() {
                    Tok::Int(v) => Ok(Value::Int(-(v as i128))),
                    _ => self.err("expected an integer after `-`"),
                }
            }
            Tok::Punct('+') => {
                self.bump();
                match self.bump() {
                    Tok::Int(v) => Ok(Value::Int(v as i128)),
                    _ => self.err("expected an integer after `+`"),
                }
            }
            Tok::Int(v) => {
                self.bump();
                Ok(Value::Int(v as i128))
            }
            Tok::Str(s) => {
                self.bump();
                Ok(Value::Str(s.into()))
            }
            Tok::Ident(w) if is_type_keyword(w) => Ok(Value::Type(Box::new(self.parse_type_spec(false)?))),
            Tok::Ident(_) => Ok(Value::Ident(self.dotted()?)),
            _ => self.err("expected a value"),
        }
    }

    fn parse_attrs(&mut self) -> PResult<Vec<Attr>> {
        self.expect('{')?;
        let mut out = Vec::new();
        while !self.eat('}') {
            if self.eat(';') {
                continue;
            }
            let line = self.line();
            let key = self.dotted()?;
            self.expect('=')?;
            let value = self.parse_value()?;
            out.push(Attr { key, value, line });
            if !self.eat(';') && *self.peek() != Tok::Punct('}') {
                return self.err("expected `;` after attribute");
            }
        }
        Ok(out)
    }

    /// Parses a type specifier. With `declarator_follows`, a trailing identifier after a
    /// type name made of several words is left as the declarator (`unsigned long x`).
    fn parse_type_spec(&mut self, declarator_follows: bool) -> PResult<TypeSpec> {
        while self.is_ident("const") {
            self.bump();
        }
        let Tok::Ident(w) = self.peek().clone() else { return self.err("expected a type") };
        match w {
            "integer" => {
                self.bump();
                Ok(TypeSpec::Integer(self.parse_attrs()?))
            }
            "floating_point" => {
                self.bump();
                Ok(TypeSpec::Float(self.parse_attrs()?))
            }
            "string" => {
                self.bump();
                let attrs = if *self.peek() == Tok::Punct('{') { self.parse_attrs()? } else { Vec::new() };
                Ok(TypeSpec::String(attrs))
            }
            "struct" => {
                self.bump();
                let name = self.opt_name();
                let body = if *self.peek() == Tok::Punct('{') { Some(self.parse_body()?) } else { None };
                let align = if self.is_ident("align") {
                    self.bump();
                    self.expect('(')?;
                    let a = match self.bump() {
                        Tok::Int(v) => v,
                        _ => return self.err("expected an alignment"),
                    };
                    self.expect(')')?;
                    Some(a)
                } else {
                    None
                };
                if name.is_none() && body.is_none() {
                    return self.err("struct without name or body");
                }
                Ok(TypeSpec::Struct { name, body, align })
            }
            "variant" => {
                self.bump();
                let name = self.opt_name();
                let tag = if self.eat('<') {
                    let t = self.dotted()?;
                    self.expect('>')?;
                    Some(t)
                } else {
                    None
                };
                let body = if *self.peek() == Tok::Punct('{') { Some(self.parse_body()?) } else { None };
                if name.is_none() && body.is_none() {
                    return self.err("variant without name or body");
                }
                Ok(TypeSpec::Variant { name, tag, body })
            }
            "enum" => {
                self.bump();
                let name = self.opt_name();
                let container = if self.eat(':') { Some(Box::new(self.parse_type_spec(false)?)) } else { None };
                let body = if *self.peek() == Tok::Punct('{') { Some(self.parse_enum_body()?) } else { None };
                if name.is_none() && body.is_none() {
                    return self.err("enum without name or body");
                }
                Ok(TypeSpec::Enum { name, container, body })
            }
            _ => {
                let mut words = vec![self.ident()?];
                while let Tok::Ident(next) = self.peek().clone() {
                    let continues = C_TYPE_WORDS.contains(&next) && C_TYPE_WORDS.contains(&words[0].as_str());
                    if declarator_follows && !continues {
                        break;
                    }
                    if !declarator_follows && is_type_keyword(next) {
                        break;
                    }
                    words.push(self.ident()?);
                }
                words.retain(|w| w != "const");
                Ok(TypeSpec::Named(words.join(" ")))
            }
        }
    }

    fn opt_name(&mut self) -> Option<String> {
        match self.peek().clone() {
            Tok::Ident(n) if n != "align" => {
                self.bump();
                Some(n.to_string())
            }
            _ => None,
        }
    }

    fn parse_body(&mut self) -> PResult<Vec<Decl>> {
        self.expect('{')?;
        self.enter()?;
        let mut out = Vec::new();
        while !self.eat('}') {
            if self.eat(';') {
                continue;
            }
            if *self.peek() == Tok::Eof {
                return self.err("unterminated body");
            }
            out.push(self.parse_decl(false)?);
        }
        self.depth -= 1;
        Ok(out)
    }

    fn parse_enum_value(&mut self) -> PResult<i128> {
        match self.parse_value()? {
            Value::Int(v) => Ok(v),
            _ => self.err("expected an integer enumerator value"),
        }
    }

    fn parse_enum_body(&mut self) -> PResult<Vec<EnumEntry>> {
        self.expect('{')?;
        let mut out = Vec::new();
        while !self.eat('}') {
            let label = match self.bump() {
                Tok::Ident(s) => s.to_string(),
                Tok::Str(s) => s.into(),
                _ => {
                    self.pos -= 1;
                    return self.err("expected an enumerator label");
                }
            };
            let range = if self.eat('=') {
                let lo = self.parse_enum_value()?;
                let hi = if *self.peek() == Tok::Ellipsis {
                    self.bump();
                    self.parse_enum_value()?
                } else {
                    lo
                };
                Some((lo, hi))
            } else {
                None
            };
            out.push(EnumEntry { label, range });
            if !self.eat(',') && *self.peek() != Tok::Punct('}') {
                return self.err("expected `,` or `}` in enum");
            }
        }
        Ok(out)
    }

    fn parse_dims(&mut self) -> PResult<Vec<Dim>> {
        let mut dims = Vec::new();
        while self.eat('[') {
            match self.peek().clone() {
                Tok::Int(v) => {
                    self.bump();
                    dims.push(Dim::Len(v));
                }
                Tok::Ident(_) => dims.push(Dim::Path(self.dotted()?)),
                _ => return self.err("expected a length"),
            }
            self.expect(']')?;
        }
        Ok(dims)
    }

    fn parse_declarators(&mut self) -> PResult<Vec<Declarator>> {
        let mut out = Vec::new();
        loop {
            while self.eat('*') {}
            let name = self.ident()?;
            let dims = self.parse_dims()?;
            if self.eat(':') {
                // C bit-field width: not part of CTF, skip its value.
                self.bump();
            }
            out.push(Declarator { name, dims });
            if self.eat(';') {
                return Ok(out);
            }
            self.expect(',')?;
        }
    }
}

fn is_type_keyword(w: &str) -> bool {
    matches!(w, "integer" | "floating_point" | "string" | "struct" | "variant" | "enum")
}
