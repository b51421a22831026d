//! The report's event: one event of any trace, as the `load` module reads it and
//! `layout::normalize` names it.

use std::borrow::Cow;
use std::fmt;

use ust_ctf::reader::Value;

use crate::traces::Domain;

/// A name shared by many events: an event's name or a field's, interned for the whole
/// process (one copy of each distinct text, never freed: bounded by the distinct event and
/// field names of the traces the process reads, which their metadata declares, and by the
/// task names (`comm`) of the scheduling events an export draws, at most one per event). A `Name` is
/// one pointer: copying it into each of a trace's events, as [`super::load`] does for
/// every field of every event, is a copy, with no reference count that the decoding threads
/// would share, and two names are equal exactly when they are the same pointer. Reads as a
/// `&str` (`Deref`), compares with `str` and `&str`, and orders as its text.
#[derive(Clone, Copy)]
pub struct Name(&'static Interned);

/// The text of a [`Name`], leaked once by [`intern`].
struct Interned(Box<str>);

/// The one [`Interned`] of `s`, made on first use.
fn intern(s: &str) -> &'static Interned {
    static NAMES: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<&'static str, &'static Interned>>> =
        std::sync::LazyLock::new(Default::default);
    // A panic while the lock was held cannot leave the map inconsistent (one insert).
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&i) = names.get(s) {
        return i;
    }
    let i: &'static Interned = Box::leak(Box::new(Interned(s.into())));
    names.insert(&i.0, i);
    i
}

impl Name {
    /// The name as a string slice.
    pub fn as_str(&self) -> &'static str {
        &self.0 .0
    }
}

impl Default for Name {
    fn default() -> Name {
        Name::from("")
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Name {}

impl std::hash::Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        std::ptr::hash(self.0, h)
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

/// `static ID: LazyLock<Name>` for each `ID = "text";`: names made once, each use then a
/// reference to one, with no lookup.
macro_rules! shared_names {
    ($($id:ident = $s:expr;)*) => {
        $(static $id: std::sync::LazyLock<$crate::report::event::Name> = std::sync::LazyLock::new(|| $crate::report::event::Name::from($s));)*
    };
}
pub(crate) use shared_names;

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name(intern(s))
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name(intern(&s))
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
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
