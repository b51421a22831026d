//! CTF 2 metadata (CTF2-SPEC-2.0): a JSON text sequence (RFC 7464: each fragment preceded
//! by 0x1E) of a preamble, a trace class, clock classes, field class aliases, data stream
//! classes and event record classes, read into the same [`Trace`] model as TSDL.
//!
//! Also accepted, as written by the pre-2.0 drafts that babeltrace's CTF 2 test traces use:
//! `default-clock-class-name` (2.0: `default-clock-class-id`), a clock class `name` (2.0:
//! `id`), `fixed-length-(un)signed-enumeration` with `mappings` (2.0: integer classes with
//! `mappings`), and field locations as arrays whose first element names the scope (2.0: an
//! object with `origin` and `path`).
//!
//! Supported field classes: fixed-length bit arrays, booleans, integers and enumerations
//! (1 to 64 bits), fixed-length floats (32/64), null-terminated, static- and dynamic-length
//! strings, static- and dynamic-length blobs, structures, static- and dynamic-length arrays,
//! variants. Variable-length integers and optionals are refused with an error naming them.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::Value as J;

use crate::error::MetadataError;
use crate::model::*;

/// Most field-class nodes the metadata may expand to (aliases are copied where used).
const MAX_NODES: usize = 1 << 22;

/// Parses CTF 2 metadata bytes.
pub(crate) fn parse(bytes: &[u8], path: &Path) -> Result<Trace, MetadataError> {
    let sem = |msg: String| MetadataError::Semantic { path: path.to_owned(), msg };
    let mut frags = Vec::new();
    let mut off = 0usize;
    for rec in bytes.split(|&b| b == 0x1e) {
        let at = off;
        off += rec.len() + 1;
        if rec.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let v: J = serde_json::from_slice(rec).map_err(|e| MetadataError::Packet {
            path: path.to_owned(),
            offset: at.saturating_sub(1) as u64,
            msg: format!("bad JSON fragment: {e}"),
        })?;
        frags.push(v);
    }
    let mut b = Builder { aliases: HashMap::new(), nodes: 0, clocks: Vec::new(), clock_keys: Vec::new() };
    let mut trace = Trace {
        version: CtfVersion::Ctf2,
        uuid: None,
        byte_order: ByteOrder::Little,
        packet_header: None,
        env: BTreeMap::new(),
        clocks: Vec::new(),
        streams: Vec::new(),
    };
    let mut header_json: Option<J> = None;
    let mut streams: Vec<(StreamClass, [Option<J>; 3])> = Vec::new();
    let mut events = Vec::new();
    let mut seen_preamble = false;
    for f in &frags {
        let ty = f.get("type").and_then(J::as_str).ok_or_else(|| sem("fragment without a type".into()))?;
        match ty {
            "preamble" => {
                if f.get("version").and_then(J::as_u64) != Some(2) {
                    return Err(sem("preamble version is not 2".into()));
                }
                trace.uuid = f.get("uuid").and_then(uuid);
                seen_preamble = true;
            }
            "trace-class" => {
                if let Some(env) = f.get("environment").and_then(J::as_object) {
                    for (k, v) in env {
                        let v = match v {
                            J::String(s) => EnvValue::Str(s.clone()),
                            J::Number(n) => EnvValue::Int(n.as_i64().ok_or_else(|| sem(format!("environment `{k}` out of range")))?),
                            _ => return Err(sem(format!("environment `{k}` is neither a string nor an integer"))),
                        };
                        trace.env.insert(k.clone(), v);
                    }
                }
                if trace.uuid.is_none() {
                    trace.uuid = f.get("uuid").and_then(uuid);
                }
                if let Some(h) = f.get("packet-header-field-class").filter(|h| !h.is_null()) {
                    header_json = Some(b.expand(h).map_err(sem)?);
                }
            }
            "clock-class" => {
                let key = f.get("id").or_else(|| f.get("name")).and_then(J::as_str).ok_or_else(|| sem("clock class without id or name".into()))?;
                let freq = f.get("frequency").and_then(J::as_u64).filter(|f| *f > 0).ok_or_else(|| sem(format!("clock `{key}`: bad frequency")))?;
                let off = f.get("offset-from-origin");
                let mut c = ClockClass {
                    name: f.get("name").and_then(J::as_str).unwrap_or(key).to_string(),
                    freq,
                    offset_s: off.and_then(|o| o.get("seconds")).and_then(J::as_i64).unwrap_or(0),
                    offset_cycles: off.and_then(|o| o.get("cycles")).and_then(J::as_u64).unwrap_or(0),
                    origin_is_unix_epoch: f.get("origin").is_some_and(|o| o.as_str() == Some("unix-epoch")),
                    description: f.get("description").and_then(J::as_str).map(str::to_owned),
                    uuid: f.get("uuid").and_then(uuid),
                    precision: f.get("precision").and_then(J::as_u64).unwrap_or(0),
                };
                let secs = c.offset_cycles / c.freq;
                c.offset_s = c.offset_s.saturating_add(secs as i64);
                c.offset_cycles -= secs * c.freq;
                b.clock_keys.push(key.to_string());
                b.clocks.push(c);
            }
            "field-class-alias" => {
                let name = f.get("name").and_then(J::as_str).ok_or_else(|| sem("field class alias without a name".into()))?;
                let fc = f.get("field-class").ok_or_else(|| sem(format!("alias `{name}` without a field class")))?;
                let fc = b.expand(fc).map_err(sem)?;
                b.aliases.insert(name.to_string(), fc);
            }
            "data-stream-class" => {
                let id = f.get("id").and_then(J::as_u64).unwrap_or(0);
                let clock_key = f.get("default-clock-class-id").or_else(|| f.get("default-clock-class-name")).and_then(J::as_str);
                let clock = match clock_key {
                    Some(k) => Some(b.clock_keys.iter().position(|c| c == k).ok_or_else(|| sem(format!("data stream class {id}: unknown clock `{k}`")))?),
                    None => None,
                };
                let mut roots: [Option<J>; 3] = [None, None, None];
                for (i, k) in ["packet-context-field-class", "event-record-header-field-class", "event-record-common-context-field-class"].iter().enumerate() {
                    if let Some(j) = f.get(*k).filter(|j| !j.is_null()) {
                        roots[i] = Some(b.expand(j).map_err(sem)?);
                    }
                }
                let sc = StreamClass { id, packet_context: None, event_header: None, event_context: None, events: Vec::new(), default_clock: clock };
                streams.push((sc, roots));
            }
            "event-record-class" => events.push(f.clone()),
            other => return Err(sem(format!("unknown fragment type `{other}`"))),
        }
    }
    if !seen_preamble {
        return Err(sem("no preamble fragment".into()));
    }
    trace.clocks = std::mem::take(&mut b.clocks);
    if let Some(h) = &header_json {
        let cx = Cx { clock: None, scope: Scope::PacketHeader, roots: vec![(Scope::PacketHeader, h)] };
        trace.packet_header = Some(b.field_type(h, &cx).map_err(|m| sem(format!("packet header: {m}")))?);
    }
    if streams.is_empty() {
        streams.push((
            StreamClass { id: 0, packet_context: None, event_header: None, event_context: None, events: Vec::new(), default_clock: None },
            [None, None, None],
        ));
    }
    for (sc, roots) in &mut streams {
        let mut all: Vec<(Scope, &J)> = header_json.iter().map(|h| (Scope::PacketHeader, h)).collect();
        for (scope, j) in [Scope::PacketContext, Scope::EventHeader, Scope::EventCommonContext].into_iter().zip(roots.iter()) {
            let Some(j) = j else { continue };
            all.push((scope, j));
            let cx = Cx { clock: sc.default_clock, scope, roots: all.clone() };
            let t = Some(b.field_type(j, &cx).map_err(|m| sem(format!("data stream class {}: {scope:?}: {m}", sc.id)))?);
            match scope {
                Scope::PacketContext => sc.packet_context = t,
                Scope::EventHeader => sc.event_header = t,
                _ => sc.event_context = t,
            }
        }
    }
    for e in &events {
        let id = e.get("id").and_then(J::as_u64).unwrap_or(0);
        let sid = e.get("data-stream-class-id").and_then(J::as_u64).unwrap_or(0);
        let name = e.get("name").and_then(J::as_str).unwrap_or_default().to_string();
        let si = streams.iter().position(|s| s.0.id == sid).ok_or_else(|| sem(format!("event record class `{name}`: unknown data stream class {sid}")))?;
        let (sc, roots) = &streams[si];
        let mut all: Vec<(Scope, &J)> = header_json.iter().map(|h| (Scope::PacketHeader, h)).collect();
        for (scope, j) in [Scope::PacketContext, Scope::EventHeader, Scope::EventCommonContext].into_iter().zip(roots.iter()) {
            if let Some(j) = j {
                all.push((scope, j));
            }
        }
        let mut types = [None, None];
        let mut own = Vec::new();
        for (i, (scope, k)) in
            [(Scope::EventSpecificContext, "specific-context-field-class"), (Scope::EventPayload, "payload-field-class")].into_iter().enumerate()
        {
            if let Some(j) = e.get(k).filter(|j| !j.is_null()) {
                own.push((scope, i, b.expand(j).map_err(sem)?));
            }
        }
        for (scope, _, j) in &own {
            all.push((*scope, j));
        }
        for (scope, i, j) in &own {
            let cx = Cx { clock: sc.default_clock, scope: *scope, roots: all.clone() };
            types[*i] = Some(b.field_type(j, &cx).map_err(|m| sem(format!("event record class `{name}`: {m}")))?);
        }
        let [context, payload] = types;
        let sc = &mut streams[si].0;
        if sc.events.iter().any(|x| x.id == id) {
            return Err(sem(format!("duplicate event record class id {id}")));
        }
        sc.events.push(EventClass { id, name, loglevel: None, emf_uri: None, context, payload });
    }
    trace.streams = streams.into_iter().map(|s| s.0).collect();
    crate::roles::finish(&mut trace).map_err(sem)?;
    Ok(trace)
}

/// What a field class is converted in: the stream's default clock, the root scope, and
/// the JSON of every root scope a location may name.
struct Cx<'a> {
    clock: Option<usize>,
    scope: Scope,
    roots: Vec<(Scope, &'a J)>,
}

impl Cx<'_> {
    /// A field location (2.0 `{"origin", "path"}` or draft `[scope, names...]`) as member
    /// indices through structures of the named root scope.
    fn locate(&self, j: &J, key: &str) -> Result<FieldPath, String> {
        let loc = j.get(key).ok_or_else(|| format!("missing `{key}`"))?;
        let (origin, names): (Option<&str>, Vec<&J>) = match loc {
            J::Array(a) => (a.first().and_then(J::as_str), a.iter().skip(1).collect()),
            J::Object(o) => (o.get("origin").and_then(J::as_str), o.get("path").and_then(J::as_array).map(|p| p.iter().collect()).unwrap_or_default()),
            _ => return Err(format!("bad `{key}`")),
        };
        let scope = match origin {
            None => self.scope,
            Some("packet-header") => Scope::PacketHeader,
            Some("packet-context") => Scope::PacketContext,
            Some("event-record-header") => Scope::EventHeader,
            Some("event-record-common-context") => Scope::EventCommonContext,
            Some("event-record-specific-context") => Scope::EventSpecificContext,
            Some("event-record-payload") => Scope::EventPayload,
            Some(o) => return Err(format!("unknown location origin `{o}`")),
        };
        if scope > self.scope {
            return Err(format!("`{key}` names a later scope"));
        }
        let mut t = self.roots.iter().find(|r| r.0 == scope).map(|r| r.1).ok_or_else(|| format!("`{key}` names an absent scope"))?;
        let mut indices = Vec::new();
        for n in names {
            let n = n.as_str().ok_or_else(|| format!("`{key}`: relative (parent) steps are not supported"))?;
            let members = t.get("member-classes").and_then(J::as_array).ok_or_else(|| format!("`{key}`: `{n}` is not inside a structure"))?;
            let i = members.iter().position(|m| m.get("name").and_then(J::as_str) == Some(n)).ok_or_else(|| format!("`{key}`: no member `{n}`"))?;
            indices.push(i as u32);
            t = members[i].get("field-class").ok_or("member without a field class")?;
        }
        Ok(FieldPath { scope, indices })
    }
}

fn uuid(v: &J) -> Option<[u8; 16]> {
    let a = v.as_array()?;
    if a.len() != 16 {
        return None;
    }
    let mut out = [0u8; 16];
    for (o, x) in out.iter_mut().zip(a) {
        *o = u8::try_from(x.as_u64()?).ok()?;
    }
    Some(out)
}

struct Builder {
    aliases: HashMap<String, J>,
    nodes: usize,
    clocks: Vec<ClockClass>,
    clock_keys: Vec<String>,
}

impl Builder {
    /// Replaces alias names by their field classes (recursively), bounded in size.
    fn expand(&mut self, j: &J) -> Result<J, String> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(format!("field classes expand to more than {MAX_NODES} nodes"));
        }
        Ok(match j {
            J::String(name) => self.aliases.get(name).cloned().ok_or_else(|| format!("unknown field class alias `{name}`"))?,
            J::Object(m) => {
                let mut out = serde_json::Map::new();
                for (k, v) in m {
                    let v = match k.as_str() {
                        "field-class" | "element-field-class" => self.expand(v)?,
                        "member-classes" | "options" => {
                            J::Array(v.as_array().ok_or("member-classes/options must be an array")?.iter().map(|x| self.expand(x)).collect::<Result<_, _>>()?)
                        }
                        _ => v.clone(),
                    };
                    out.insert(k.clone(), v);
                }
                J::Object(out)
            }
            other => other.clone(),
        })
    }

    /// A field class (aliases expanded) as a model type; `default-clock-timestamp`
    /// integers map to the stream's default clock.
    fn field_type(&self, j: &J, cx: &Cx<'_>) -> Result<FieldType, String> {
        let clock = cx.clock;
        let ty = j.get("type").and_then(J::as_str).ok_or("field class without a type")?;
        let align = |j: &J, key: &str, dflt: u64| -> Result<u32, String> {
            let a = j.get(key).and_then(J::as_u64).unwrap_or(dflt);
            if !a.is_power_of_two() || a > 1 << 16 {
                return Err(format!("alignment {a} is not a power of two up to 65536 bits"));
            }
            Ok(a as u32)
        };
        let bo = match j.get("byte-order").and_then(J::as_str) {
            Some("big-endian") | Some("be") => ByteOrder::Big,
            _ => ByteOrder::Little,
        };
        Ok(match ty {
            "fixed-length-bit-array"
            | "fixed-length-boolean"
            | "fixed-length-unsigned-integer"
            | "fixed-length-signed-integer"
            | "fixed-length-unsigned-enumeration"
            | "fixed-length-signed-enumeration" => {
                let size = j.get("length").and_then(J::as_u64).filter(|l| (1..=64).contains(l)).ok_or("integer length not in 1..=64")?;
                let mut int = IntType {
                    size: size as u8,
                    align: align(j, "alignment", 1)?,
                    signed: ty.contains("signed") && !ty.contains("unsigned"),
                    byte_order: bo,
                    base: j.get("preferred-display-base").and_then(J::as_u64).filter(|b| matches!(b, 2 | 8 | 10 | 16)).unwrap_or(10) as u8,
                    encoding: Encoding::None,
                    clock: None,
                    role: None,
                    referenced: false,
                };
                for r in j.get("roles").and_then(J::as_array).into_iter().flatten().filter_map(J::as_str) {
                    int.role = match r {
                        "packet-magic-number" => Some(Role::Magic),
                        "data-stream-class-id" => Some(Role::StreamClassId),
                        "data-stream-id" => Some(Role::StreamInstanceId),
                        "packet-total-length" => Some(Role::PacketSize),
                        "packet-content-length" => Some(Role::ContentSize),
                        "default-clock-timestamp" => {
                            int.clock = Some(clock.ok_or("default-clock-timestamp role without a default clock class")?);
                            if cx.scope == Scope::PacketContext {
                                Some(Role::PacketBeginTime)
                            } else {
                                int.role
                            }
                        }
                        "packet-end-default-clock-timestamp" => {
                            int.clock = clock;
                            Some(Role::PacketEndTime)
                        }
                        "discarded-event-record-counter-snapshot" => Some(Role::DiscardedEvents),
                        "packet-sequence-number" => Some(Role::PacketSeqNum),
                        "event-record-class-id" => Some(Role::EventClassId),
                        _ => int.role,
                    };
                }
                match j.get("mappings").and_then(J::as_object) {
                    Some(m) => {
                        let mut mappings = Vec::new();
                        for (label, ranges) in m {
                            for r in ranges.as_array().ok_or("mapping ranges must be an array")? {
                                let (lo, hi) = range(r)?;
                                mappings.push(EnumMapping { label: label.clone(), lo, hi });
                            }
                        }
                        FieldType::Enum { int, mappings }
                    }
                    None => FieldType::Int(int),
                }
            }
            "fixed-length-floating-point-number" => {
                let size = j.get("length").and_then(J::as_u64).filter(|l| *l == 32 || *l == 64).ok_or("float length is neither 32 nor 64")?;
                FieldType::Float { size: size as u8, align: align(j, "alignment", 1)?, byte_order: bo }
            }
            "null-terminated-string" => FieldType::String { encoding: Encoding::Utf8 },
            "static-length-string" | "static-length-blob" => {
                let len = j.get("length").and_then(J::as_u64).ok_or("static length without `length`")?;
                FieldType::Array { elem: Box::new(byte(ty.ends_with("string"))), len }
            }
            "dynamic-length-string" | "dynamic-length-blob" => {
                FieldType::Sequence { elem: Box::new(byte(ty.ends_with("string"))), len: cx.locate(j, "length-field-location")? }
            }
            "structure" => {
                let mut fields = Vec::new();
                for m in j.get("member-classes").and_then(J::as_array).into_iter().flatten() {
                    let name = m.get("name").and_then(J::as_str).ok_or("structure member without a name")?;
                    let fc = m.get("field-class").ok_or("structure member without a field class")?;
                    let media_type = match fc.get("type").and_then(J::as_str) {
                        Some("static-length-blob" | "dynamic-length-blob") => {
                            Some(fc.get("media-type").and_then(J::as_str).unwrap_or(crate::tsdl::DEFAULT_MEDIA_TYPE).to_string())
                        }
                        _ => None,
                    };
                    fields.push(Field { name: name.to_string(), ty: self.field_type(fc, cx)?, media_type });
                }
                FieldType::Struct { align: align(j, "minimum-alignment", 1)?, fields }
            }
            "static-length-array" | "dynamic-length-array" => {
                let elem = Box::new(self.field_type(j.get("element-field-class").ok_or("array without element-field-class")?, cx)?);
                if ty.starts_with("static") {
                    FieldType::Array { elem, len: j.get("length").and_then(J::as_u64).ok_or("static-length array without `length`")? }
                } else {
                    FieldType::Sequence { elem, len: cx.locate(j, "length-field-location")? }
                }
            }
            "variant" => {
                let mut options = Vec::new();
                let mut ranges = Vec::new();
                for o in j.get("options").and_then(J::as_array).into_iter().flatten() {
                    let name = o.get("name").and_then(J::as_str).unwrap_or_default();
                    options.push(Field {
                        name: name.to_string(),
                        ty: self.field_type(o.get("field-class").ok_or("variant option without a field class")?, cx)?,
                        media_type: None,
                    });
                    let rs = o.get("selector-field-ranges").and_then(J::as_array).ok_or("variant option without selector-field-ranges")?;
                    ranges.push(rs.iter().map(range).collect::<Result<Vec<_>, _>>()?);
                }
                FieldType::Variant { tag: cx.locate(j, "selector-field-location")?, options, ranges }
            }
            other => return Err(format!("unsupported field class type `{other}`")),
        })
    }
}

fn byte(text: bool) -> FieldType {
    FieldType::Int(IntType {
        size: 8,
        align: 8,
        signed: false,
        byte_order: ByteOrder::Little,
        base: 16,
        encoding: if text { Encoding::Utf8 } else { Encoding::None },
        clock: None,
        role: None,
        referenced: false,
    })
}

fn range(r: &J) -> Result<(i128, i128), String> {
    let a = r.as_array().filter(|a| a.len() == 2).ok_or("a range is not a pair")?;
    let n = |x: &J| x.as_i64().map(i128::from).or_else(|| x.as_u64().map(i128::from)).ok_or("range bound is not an integer".to_string());
    let (lo, hi) = (n(&a[0])?, n(&a[1])?);
    if lo > hi {
        return Err(format!("empty range [{lo}, {hi}]"));
    }
    Ok((lo, hi))
}
