//! CTF 1.8 TSDL metadata (CTF 1.8 §7 grammar, §4 types, §8 clocks) to the [`Trace`] model:
//! [`lexer`] tokens, [`parser`] syntax tree, [`types`] scoped type resolution, [`paths`]
//! dynamic-scope paths; this module walks the blocks (`trace`, `env`, `clock`, `stream`,
//! `event`; `callsite` ignored) and assigns the babeltrace2 meanings ([`crate::model::Role`]).

mod ast;
mod lexer;
mod parser;
mod paths;
mod types;

pub(crate) use lexer::DEFAULT_MEDIA_TYPE;

use std::collections::BTreeMap;
use std::path::Path;

use ast::{Attr, BlockKind, Decl, Value};
use types::{Scopes, Ty};

use crate::error::MetadataError;
use crate::model::*;
use crate::roles;

/// Parses TSDL text (already depacketized) into a trace model.
///
/// Errors: [`MetadataError::Syntax`] with the line for grammar and type errors,
/// [`MetadataError::Semantic`] for inconsistent blocks (unknown stream id, clock...).
pub fn parse(text: &[u8], path: &Path) -> Result<Trace, MetadataError> {
    let syn = |(line, msg): (u32, String)| MetadataError::Syntax { path: path.to_owned(), line, msg };
    let sem = |msg: String| MetadataError::Semantic { path: path.to_owned(), msg };
    let toks = lexer::tokenize(text).map_err(syn)?;
    let decls = parser::Parser::new(&toks).parse_top().map_err(syn)?;

    // Pre-pass, as babeltrace2 does: the trace byte order gives `native` to every integer,
    // and clock names let typealiases declared early map to clocks declared later.
    let mut byte_order = ByteOrder::Little;
    let mut clock_names = Vec::new();
    for d in &decls {
        if let Decl::Block { kind, body, .. } = d {
            for a in body.iter().filter_map(|d| if let Decl::Attr(a) = d { Some(a) } else { None }) {
                match (kind, a.key.as_str()) {
                    (BlockKind::Trace, "byte_order") => byte_order = types::byte_order(a, ByteOrder::Little).map_err(syn)?,
                    (BlockKind::Clock, "name") => clock_names.push(ident_or_str(a).map_err(syn)?),
                    _ => {}
                }
            }
        }
    }

    let mut scopes = Scopes::new(byte_order, clock_names);
    let mut b = Builder::default();
    for d in &decls {
        if scopes.declare(d).map_err(syn)? {
            continue;
        }
        match d {
            Decl::Block { kind, body, line } => {
                scopes.push();
                let r = b.block(*kind, body, &mut scopes);
                scopes.pop();
                r.map_err(|m| syn((*line, m.1)))?;
            }
            Decl::Field { line, .. } => return Err(syn((*line, "field declaration outside a compound type".into()))),
            Decl::Attr(a) => return Err(syn((a.line, format!("attribute `{}` outside a block", a.key)))),
            _ => {}
        }
    }
    b.finish(byte_order).map_err(sem)
}

fn ident_or_str(a: &Attr) -> Result<String, (u32, String)> {
    match &a.value {
        Value::Ident(s) | Value::Str(s) => Ok(s.clone()),
        Value::Int(v) => Ok(v.to_string()),
        _ => Err((a.line, format!("`{}` needs a name", a.key))),
    }
}

fn int_attr(a: &Attr) -> Result<i128, (u32, String)> {
    match &a.value {
        Value::Int(v) => Ok(*v),
        _ => Err((a.line, format!("`{}` needs an integer", a.key))),
    }
}

fn type_attr(a: &Attr, scopes: &mut Scopes) -> Result<Ty, (u32, String)> {
    match &a.value {
        Value::Type(spec) => scopes.resolve(spec, a.line),
        _ => Err((a.line, format!("`{}` needs a type (`:=`)", a.key))),
    }
}

/// Parses a UUID written as 8-4-4-4-12 hexadecimal digits.
pub(crate) fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = s.bytes().filter(|c| *c != b'-').collect();
    if hex.len() != 32 || s.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        let h = std::str::from_utf8(&hex[2 * i..2 * i + 2]).ok()?;
        *o = u8::from_str_radix(h, 16).ok()?;
    }
    Some(out)
}

struct RawStream {
    id: Option<u64>,
    packet_context: Option<Ty>,
    event_header: Option<Ty>,
    event_context: Option<Ty>,
}

struct RawEvent {
    id: u64,
    name: String,
    stream_id: Option<u64>,
    loglevel: Option<i64>,
    emf_uri: Option<String>,
    context: Option<Ty>,
    payload: Option<Ty>,
}

#[derive(Default)]
struct Builder {
    uuid: Option<[u8; 16]>,
    packet_header: Option<Ty>,
    env: BTreeMap<String, EnvValue>,
    clocks: Vec<ClockClass>,
    streams: Vec<RawStream>,
    events: Vec<RawEvent>,
}

impl Builder {
    fn block(&mut self, kind: BlockKind, body: &[Decl], scopes: &mut Scopes) -> Result<(), (u32, String)> {
        let mut attrs = Vec::new();
        for d in body {
            if scopes.declare(d)? {
                continue;
            }
            match d {
                Decl::Attr(a) => attrs.push(a),
                Decl::Field { line, .. } | Decl::Block { line, .. } => return Err((*line, "unexpected declaration in a block".into())),
                _ => {}
            }
        }
        match kind {
            BlockKind::Trace => {
                for a in attrs {
                    match a.key.as_str() {
                        "uuid" => self.uuid = Some(parse_uuid(&ident_or_str(a)?).ok_or((a.line, "bad trace uuid".to_string()))?),
                        "packet.header" => self.packet_header = Some(type_attr(a, scopes)?),
                        _ => {}
                    }
                }
            }
            BlockKind::Env => {
                for a in attrs {
                    let v = match &a.value {
                        Value::Int(v) => EnvValue::Int(i64::try_from(*v).map_err(|_| (a.line, "env integer out of range".to_string()))?),
                        Value::Str(s) | Value::Ident(s) => EnvValue::Str(s.clone()),
                        Value::Type(_) => return Err((a.line, "type in env".into())),
                    };
                    self.env.insert(a.key.clone(), v);
                }
            }
            BlockKind::Clock => {
                let mut c = ClockClass {
                    name: String::new(),
                    freq: 1_000_000_000,
                    offset_s: 0,
                    offset_cycles: 0,
                    origin_is_unix_epoch: false,
                    description: None,
                    uuid: None,
                    precision: 0,
                };
                for a in attrs {
                    match a.key.as_str() {
                        "name" => c.name = ident_or_str(a)?,
                        "freq" => c.freq = u64::try_from(int_attr(a)?).ok().filter(|f| *f > 0).ok_or((a.line, "clock freq must be in 1..2^64".to_string()))?,
                        "offset_s" => c.offset_s = i64::try_from(int_attr(a)?).map_err(|_| (a.line, "clock offset_s out of range".to_string()))?,
                        "offset" => c.offset_cycles = u64::try_from(int_attr(a)?).map_err(|_| (a.line, "clock offset out of range".to_string()))?,
                        "precision" => c.precision = u64::try_from(int_attr(a)?).unwrap_or(0),
                        "absolute" => {
                            c.origin_is_unix_epoch = matches!(&a.value, Value::Int(1)) || matches!(&a.value, Value::Ident(s) if s.eq_ignore_ascii_case("true"))
                        }
                        "description" => c.description = Some(ident_or_str(a)?),
                        "uuid" => c.uuid = parse_uuid(&ident_or_str(a)?),
                        _ => {}
                    }
                }
                if self.clocks.iter().any(|k| k.name == c.name) {
                    return Err((0, format!("duplicate clock `{}`", c.name)));
                }
                // babeltrace2 moves whole seconds out of the cycles offset.
                let secs = c.offset_cycles / c.freq;
                c.offset_s = c.offset_s.saturating_add(secs as i64);
                c.offset_cycles -= secs * c.freq;
                self.clocks.push(c);
            }
            BlockKind::Stream => {
                let mut s = RawStream { id: None, packet_context: None, event_header: None, event_context: None };
                for a in attrs {
                    match a.key.as_str() {
                        "id" => s.id = Some(u64::try_from(int_attr(a)?).map_err(|_| (a.line, "negative stream id".to_string()))?),
                        "packet.context" => s.packet_context = Some(type_attr(a, scopes)?),
                        "event.header" => s.event_header = Some(type_attr(a, scopes)?),
                        "event.context" => s.event_context = Some(type_attr(a, scopes)?),
                        _ => {}
                    }
                }
                self.streams.push(s);
            }
            BlockKind::Event => {
                let mut e = RawEvent { id: 0, name: String::new(), stream_id: None, loglevel: None, emf_uri: None, context: None, payload: None };
                for a in attrs {
                    match a.key.as_str() {
                        "id" => e.id = u64::try_from(int_attr(a)?).map_err(|_| (a.line, "negative event id".to_string()))?,
                        "name" => e.name = ident_or_str(a)?,
                        "stream_id" => e.stream_id = Some(u64::try_from(int_attr(a)?).map_err(|_| (a.line, "negative stream id".to_string()))?),
                        "loglevel" => e.loglevel = i64::try_from(int_attr(a)?).ok(),
                        "model.emf.uri" => e.emf_uri = Some(ident_or_str(a)?),
                        "context" => e.context = Some(type_attr(a, scopes)?),
                        "fields" => e.payload = Some(type_attr(a, scopes)?),
                        _ => {}
                    }
                }
                self.events.push(e);
            }
            BlockKind::Callsite => {}
        }
        Ok(())
    }

    fn finish(mut self, byte_order: ByteOrder) -> Result<Trace, String> {
        if self.streams.is_empty() {
            self.streams.push(RawStream { id: None, packet_context: None, event_header: None, event_context: None });
        }
        if self.streams.len() > 1 && self.streams.iter().any(|s| s.id.is_none()) {
            return Err("several stream classes, not all with an id".into());
        }
        let conv = |t: &Option<Ty>, scope: Scope, prev: &[(Scope, &Option<Ty>)]| -> Result<Option<FieldType>, String> {
            let Some(t) = t else { return Ok(None) };
            let roots = paths::Roots { prev: prev.iter().filter_map(|(s, t)| t.as_ref().map(|t| (*s, t))).collect() };
            paths::convert(t, scope, &roots).map(Some).map_err(|m| format!("{scope:?}: {m}"))
        };
        let packet_header = conv(&self.packet_header, Scope::PacketHeader, &[])?;
        let mut streams = Vec::with_capacity(self.streams.len());
        for rs in &self.streams {
            let id = rs.id.unwrap_or(0);
            if streams.iter().any(|s: &StreamClass| s.id == id) {
                return Err(format!("duplicate stream class id {id}"));
            }
            let mut prev = vec![(Scope::PacketHeader, &self.packet_header)];
            let packet_context = conv(&rs.packet_context, Scope::PacketContext, &prev)?;
            prev.push((Scope::PacketContext, &rs.packet_context));
            let event_header = conv(&rs.event_header, Scope::EventHeader, &prev)?;
            prev.push((Scope::EventHeader, &rs.event_header));
            let event_context = conv(&rs.event_context, Scope::EventCommonContext, &prev)?;
            prev.push((Scope::EventCommonContext, &rs.event_context));
            let mut events = Vec::new();
            for re in &self.events {
                let sid = match re.stream_id {
                    Some(s) => s,
                    None if self.streams.len() == 1 => id,
                    None => return Err(format!("event `{}` has no stream_id and there are several stream classes", re.name)),
                };
                if sid != id {
                    continue;
                }
                if events.iter().any(|e: &EventClass| e.id == re.id) {
                    return Err(format!("duplicate event class id {} in stream class {id}", re.id));
                }
                let in_class = |m: String| format!("event class `{}` (id {}): {m}", re.name, re.id);
                let context = conv(&re.context, Scope::EventSpecificContext, &prev).map_err(in_class)?;
                let mut prev2 = prev.clone();
                prev2.push((Scope::EventSpecificContext, &re.context));
                let payload = conv(&re.payload, Scope::EventPayload, &prev2).map_err(in_class)?;
                events.push(EventClass { id: re.id, name: re.name.clone(), loglevel: re.loglevel, emf_uri: re.emf_uri.clone(), context, payload });
            }
            streams.push(StreamClass { id, packet_context, event_header, event_context, events, default_clock: None });
        }
        for re in &self.events {
            if let Some(sid) = re.stream_id {
                if !self.streams.iter().any(|s| s.id.unwrap_or(0) == sid) {
                    return Err(format!("event `{}` names unknown stream class {sid}", re.name));
                }
            }
        }
        let mut trace = Trace { version: CtfVersion::Ctf1, uuid: self.uuid, byte_order, packet_header, env: self.env, clocks: self.clocks, streams };
        roles::assign_ctf1(&mut trace);
        roles::finish(&mut trace)?;
        Ok(trace)
    }
}

#[cfg(test)]
mod tests;
