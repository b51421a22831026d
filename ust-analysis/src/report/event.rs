//! The report's event: one event of any trace, as the `load` module reads it and
//! `layout::normalize` names it.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use ust_ctf::reader::Value;

use crate::traces::Domain;

/// A name shared by many events: an event's name or a field's, made once per event class
/// by [`super::load`] and cloned into each of its events (a reference count's increment,
/// not an allocation and a copy: the report keeps every event of the trace). Reads as a
/// `&str` (`Deref`) and compares with `str` and `&str`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Name(Arc<str>);

impl Name {
    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name(s.into())
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name(s.into())
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// One event of any trace.
#[derive(Clone, Debug)]
pub struct Event {
    /// CLOCK_MONOTONIC ns.
    pub ts: u64,
    /// CPU (the packet's `cpu_id`).
    pub cpu: u32,
    /// Event name as babeltrace2 prints it.
    pub name: Name,
    /// Kernel events: the thread (`tid` context). User-space events: the `vtid` context when
    /// the channel has it, else the process id.
    pub tid: i32,
    /// User-space events: the process (`env.vpid`); kernel events: -1.
    pub pid: i32,
    /// Kernel or user space.
    pub domain: Domain,
    /// Fields (context fields first), names without the leading `_`.
    pub fields: Vec<(Name, Value)>,
}

impl Event {
    /// An integer field.
    pub fn int(&self, name: &str) -> Option<i64> {
        self.fields.iter().find(|(n, _)| n == name).and_then(|(_, v)| int_value(v))
    }

    /// A text field (a string, borrowed; or a byte array cut at its first NUL, made).
    pub fn text(&self, name: &str) -> Option<Cow<'_, str>> {
        self.fields.iter().find(|(n, _)| n == name).and_then(|(_, v)| match v {
            Value::Str(s) => Some(Cow::Borrowed(s.as_str())),
            Value::List(l) => {
                let b: Vec<u8> = l.iter().map_while(|x| if let Value::Unsigned(u) = x { Some(*u as u8) } else { None }).take_while(|&c| c != 0).collect();
                Some(Cow::Owned(String::from_utf8_lossy(&b).into_owned()))
            }
            _ => None,
        })
    }
}

/// A value as an integer: a signed or unsigned integer's bits (`u64` above `i64::MAX`
/// wraps), an enumeration's value; `None` for text, floats and lists.
pub fn int_value(v: &Value) -> Option<i64> {
    match v {
        Value::Signed(s) => Some(*s),
        Value::Unsigned(u) => Some(*u as i64),
        Value::Enum(_, v) => Some(*v),
        _ => None,
    }
}
