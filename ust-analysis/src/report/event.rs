//! The report's event: one event of any trace, as the `load` module reads it and
//! `layout::normalize` names it.

use ust_ctf::reader::Value;

use crate::traces::Domain;

/// One event of any trace.
#[derive(Clone, Debug)]
pub struct Event {
    /// CLOCK_MONOTONIC ns.
    pub ts: u64,
    /// CPU (the packet's `cpu_id`).
    pub cpu: u32,
    /// Event name as babeltrace2 prints it.
    pub name: String,
    /// Kernel events: the thread (`tid` context). User-space events: the `vtid` context when
    /// the channel has it, else the process id.
    pub tid: i32,
    /// User-space events: the process (`env.vpid`); kernel events: -1.
    pub pid: i32,
    /// Kernel or user space.
    pub domain: Domain,
    /// Fields (context fields first), names without the leading `_`.
    pub fields: Vec<(String, Value)>,
}

impl Event {
    /// An integer field.
    pub fn int(&self, name: &str) -> Option<i64> {
        self.fields.iter().find(|(n, _)| n == name).and_then(|(_, v)| match v {
            Value::Signed(s) => Some(*s),
            Value::Unsigned(u) => Some(*u as i64),
            Value::Enum(_, v) => Some(*v),
            _ => None,
        })
    }

    /// A text field (a string, or a byte array cut at its first NUL).
    pub fn text(&self, name: &str) -> Option<String> {
        self.fields.iter().find(|(n, _)| n == name).and_then(|(_, v)| match v {
            Value::Str(s) => Some(s.clone()),
            Value::List(l) => {
                let b: Vec<u8> = l.iter().map_while(|x| if let Value::Unsigned(u) = x { Some(*u as u8) } else { None }).take_while(|&c| c != 0).collect();
                Some(String::from_utf8_lossy(&b).into_owned())
            }
            _ => None,
        })
    }
}
