//! An event's fields as the arguments of a slice or an instant: the payload fields (the
//! channel's context fields, which the loader puts first, left out), each value as JSON:
//! integers as numbers, strings as strings, arrays as arrays, an enumeration as its label
//! (else its value), and a `tracing` value not recorded (a dynamic field tagged `none`)
//! left out.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use serde_json::Value as Json;
use ust_ctf::reader::Value;

use crate::report::load::{Event, Loaded, Name};

/// The context field names of each user-space trace, by process id (from each trace's
/// metadata: its streams' `event.context`).
#[derive(Debug, Default)]
pub struct Contexts {
    by_pid: HashMap<i32, BTreeSet<String>>,
}

impl Contexts {
    /// Reads the metadata of every process of `l` (a trace whose metadata cannot be read
    /// again has no known contexts: its context fields then show as arguments).
    pub fn of(l: &Loaded) -> Contexts {
        let mut by_pid = HashMap::new();
        let mut by_dir: HashMap<&Path, BTreeSet<String>> = HashMap::new();
        for (pid, _, dir) in &l.processes {
            let n = by_dir.entry(dir.as_path()).or_insert_with(|| names(dir));
            by_pid.insert(*pid, n.clone());
        }
        Contexts { by_pid }
    }

    /// The payload fields of `e` (its leading context fields skipped).
    pub fn payload<'e>(&self, e: &'e Event) -> &'e [(Name, Value)] {
        let Some(ctx) = self.by_pid.get(&e.pid) else { return &e.fields };
        let n = e.fields.iter().take_while(|(n, _)| ctx.contains(n.as_str())).count();
        &e.fields[n..]
    }
}

/// The names of the context fields of the trace in `dir`: its stream classes' event
/// contexts and its event classes' own.
fn names(dir: &Path) -> BTreeSet<String> {
    let Ok(t) = ctf_reader::read_metadata(&dir.join("metadata")) else { return BTreeSet::new() };
    let members = |ty: &Option<ctf_reader::FieldType>| match ty {
        Some(ctf_reader::FieldType::Struct { fields, .. }) => fields.iter().map(|f| f.name.clone()).collect::<Vec<String>>(),
        _ => Vec::new(),
    };
    t.streams.iter().flat_map(|s| members(&s.event_context).into_iter().chain(s.events.iter().flat_map(|e| members(&e.context)))).collect()
}

/// A value as JSON; `None` for a `tracing` value that was not recorded.
pub fn json(v: &Value) -> Option<Json> {
    Some(match v {
        Value::Unsigned(u) => Json::from(*u),
        Value::Signed(s) => Json::from(*s),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or_else(|| Json::String(f.to_string()), Json::Number),
        Value::Str(s) => Json::String(s.clone()),
        Value::List(l) if l.is_empty() => return None,
        Value::List(l) => Json::Array(l.iter().map(|x| json(x).unwrap_or(Json::Null)).collect()),
        Value::Enum(Some(label), _) => Json::String(label.clone()),
        Value::Enum(None, v) => Json::from(*v),
    })
}

/// Fields as arguments, in order, leaving out those named in `skip` and those not
/// recorded.
pub fn args(fields: &[(Name, Value)], skip: &[&str]) -> super::timeline::Args {
    fields.iter().filter(|(n, _)| !skip.contains(&n.as_str())).filter_map(|(n, v)| Some((*n, json(v)?))).collect()
}

/// A numeric field as `f64` (for counters).
pub fn number(fields: &[(Name, Value)], name: &str) -> Option<f64> {
    fields.iter().find(|(n, _)| n == name).and_then(|(_, v)| match v {
        Value::Unsigned(u) => Some(*u as f64),
        Value::Signed(s) => Some(*s as f64),
        Value::Float(f) => Some(*f),
        Value::Enum(_, v) => Some(*v as f64),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_map_to_json_and_unrecorded_ones_are_left_out() {
        let f = vec![
            ("a".into(), Value::Unsigned(7)),
            ("b".into(), Value::List(Vec::new())),
            ("c".into(), Value::Str("x".into())),
            ("d".into(), Value::Enum(Some("ON".into()), 1)),
            ("e".into(), Value::Signed(-2)),
        ];
        let m = args(&f, &["e"]);
        assert_eq!(Json::Object(super::super::timeline::arg_map(&m)), serde_json::json!({"a": 7, "c": "x", "d": "ON"}));
        assert_eq!(number(&f, "e"), Some(-2.0));
        assert_eq!(number(&f, "c"), None);
    }
}
