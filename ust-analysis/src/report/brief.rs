//! A user-space event reduced to what the report's user-space view counts: its process
//! (`vpid` context), its thread (`vtid` context) and its process's name (`procname`
//! context), read straight from the decoded slots of its stream's event context, with no
//! field list built ([`super::user_view::load_counted`]: the events of a trace without kernel
//! events that the report does not keep).
//!
//! The three contexts are found where [`super::values::push_members`] would name them:
//! members of the stream's event context, at the top level, not referenced by another
//! field; an integer `vpid` or `vtid` is its value, a string or a text array or sequence
//! `procname` is its text (a text array's cut at its first NUL, made UTF-8 as the field
//! list makes it). Their slot indices are known ahead when every member before them takes a
//! fixed number of slots ([`Plan::of`]); otherwise (and when one of the three names is of
//! another type, or a structure without a name lends its members top-level names), and for
//! an event class with a context of its own, events are built whole.

use ctf_reader::{EventRef, FieldType, Scope, Slot, StreamClass};

use crate::report::fast_hash::HashSet;

/// Where the three contexts lie among a stream class's event-context slots (`None`: the
/// context has no such member).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    vpid: Option<usize>,
    vtid: Option<usize>,
    procname: Option<(usize, bool)>,
}

/// What an event's contexts say: its process and thread ids, and its process's name (only
/// for the first event of a process in its stream: the name the report keeps is the one of
/// the process's first event, the first of some stream). Compact: each event's is handed
/// from its decoding thread to the merging one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ids {
    vpid: i64,
    vtid: i64,
    procname: Option<Box<str>>,
    /// Bit 0: `vpid` read; bit 1: `vtid` read.
    known: u8,
}

impl Ids {
    /// The `vpid` context.
    pub fn vpid(&self) -> Option<i64> {
        (self.known & 1 != 0).then_some(self.vpid)
    }

    /// The `vtid` context.
    pub fn vtid(&self) -> Option<i64> {
        (self.known & 2 != 0).then_some(self.vtid)
    }

    /// The `procname` context, for the first event of its `vpid` in the stream.
    pub fn into_procname(self) -> Option<String> {
        self.procname.map(String::from)
    }
}

/// Slots a value of `ty` always takes ([`ctf_reader::EventRef::slots`]), if fixed.
fn fixed_slots(ty: &FieldType) -> Option<usize> {
    match ty {
        FieldType::Int(_) | FieldType::Enum { .. } | FieldType::Float { .. } | FieldType::String { .. } => Some(1),
        FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } if elem.is_text_element() => Some(1),
        FieldType::Struct { fields, .. } => fields.iter().map(|f| fixed_slots(&f.ty)).sum(),
        _ => None,
    }
}

impl Plan {
    /// The plan of stream class `s`'s event context; `None` when a context is not at a
    /// fixed slot.
    pub fn of(s: &StreamClass) -> Option<Plan> {
        let mut plan = Plan::default();
        let Some(FieldType::Struct { fields, .. }) = &s.event_context else { return Some(plan) };
        let mut at = Some(0usize);
        for f in fields {
            let name = f.name.as_str();
            // A structure without a name: its members take top-level names in the field
            // list (`push_members`), a `vpid` among them too. Built whole.
            if name.is_empty() && matches!(f.ty, FieldType::Struct { .. }) {
                return None;
            }
            if matches!(name, "vpid" | "vtid" | "procname") {
                let referenced = f.ty.as_int().is_some_and(|i| i.referenced);
                let wanted = match name {
                    "vpid" => plan.vpid.is_none(),
                    "vtid" => plan.vtid.is_none(),
                    _ => plan.procname.is_none(),
                };
                if wanted && !referenced {
                    let k = at?;
                    match (name, &f.ty) {
                        ("vpid", FieldType::Int(_)) => plan.vpid = Some(k),
                        ("vtid", FieldType::Int(_)) => plan.vtid = Some(k),
                        ("procname", FieldType::String { .. }) => plan.procname = Some((k, false)),
                        ("procname", FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. }) if elem.is_text_element() => {
                            plan.procname = Some((k, true))
                        }
                        // Named so but of another type (the report reads no id or name
                        // from it): built whole, as any unusual context.
                        _ => return None,
                    }
                }
            }
            at = at.zip(fixed_slots(&f.ty)).map(|(a, n)| a + n);
        }
        Some(plan)
    }

    /// The contexts of `e`, an event of the stream class planned; `named`: the `vpid`s
    /// whose name this stream gave already (the name is read for a `vpid` not in it, which
    /// is added).
    pub fn ids(&self, e: &EventRef<'_>, named: &mut HashSet<i64>) -> Ids {
        let slots = e.slots(Scope::EventCommonContext);
        let int_at = |i: Option<usize>| match slots.get(i?)? {
            Slot::U(u) => Some(*u as i64),
            Slot::I(v) => Some(*v),
            _ => None,
        };
        let (vpid, vtid) = (int_at(self.vpid), int_at(self.vtid));
        let procname = match (vpid, self.procname) {
            (Some(p), Some((k, cut))) if !named.contains(&p) => {
                named.insert(p);
                slots.get(k).and_then(|s| e.text(*s)).map(|b| super::values::text(b, cut).into_boxed_str())
            }
            _ => None,
        };
        let known = u8::from(vpid.is_some()) | u8::from(vtid.is_some()) << 1;
        Ids { vpid: vpid.unwrap_or(0), vtid: vtid.unwrap_or(0), procname, known }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan of a stream class whose event context holds `members` (TSDL).
    fn plan(members: &str) -> Option<Plan> {
        let tsdl = format!(
            "/* CTF 1.8 */
            typealias integer {{ size = 32; align = 8; signed = true; }} := int32_t;
            typealias integer {{ size = 32; align = 8; signed = false; }} := uint32_t;
            typealias integer {{ size = 8; align = 8; signed = false; encoding = UTF8; }} := char_t;
            trace {{ major = 1; minor = 8; byte_order = le; }};
            stream {{ event.context := struct {{ {members} }}; }};
            event {{ name = \"p:e\"; fields := struct {{ int32_t _x; }}; }};"
        );
        let t = ctf_reader::parse_metadata(tsdl.as_bytes(), std::path::Path::new("metadata")).unwrap();
        Plan::of(&t.streams[0])
    }

    #[test]
    fn contexts_at_fixed_slots_are_found() {
        let p = plan("int32_t _vpid; int32_t _vtid; string _procname;").unwrap();
        assert_eq!((p.vpid, p.vtid, p.procname), (Some(0), Some(1), Some((2, false))));
        // A text array, after an integer and a float; the first `vpid` of two wins.
        let p = plan("uint32_t _cpu_id; floating_point { exp_dig = 8; mant_dig = 24; align = 8; } _f; char_t _procname[17]; int32_t _vpid; int32_t _vpid2;")
            .unwrap();
        assert_eq!((p.vpid, p.vtid, p.procname), (Some(3), None, Some((2, true))));
        // A structure's members take their slots; a referenced integer named `vtid` is a
        // length, not the thread (the field list leaves it out), and takes a slot.
        let p = plan("struct { int32_t _a; string _b; } _s; uint32_t _vtid; char_t _name[_vtid]; int32_t _vpid;").unwrap();
        assert_eq!((p.vpid, p.vtid), (Some(4), None), "a text sequence is one slot");
        let p = plan("uint32_t _n; int32_t _seq[_n]; int32_t _vpid;");
        assert_eq!(p, None, "after a sequence of integers no slot is known");
        // None of the three: an empty plan (every event's ids absent).
        assert_eq!(plan("int32_t _a;"), Some(Plan::default()));
    }

    #[test]
    fn unusual_contexts_are_built_whole() {
        // Of another type than the report reads.
        assert_eq!(plan("enum : int32_t { A = 0 } _vpid;"), None);
        assert_eq!(plan("string _vtid;"), None);
        assert_eq!(plan("int32_t _procname;"), None);
        // After an array of integers (not text): no fixed slot.
        assert_eq!(plan("int32_t _arr[2]; int32_t _vpid;"), None);
        // A structure without a name lends its members top-level names.
        assert_eq!(plan("struct { int32_t _vpid; } _;"), None);
    }
}
