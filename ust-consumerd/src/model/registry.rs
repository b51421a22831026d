//! The event registry of one per-UID trace (LTTng's per-UID `ust_registry_session`
//! channel registry): every event any process of that user declared in the session, in
//! id order, and the one rule that keeps a shared trace readable: an event name has one
//! layout.
//!
//! Ids are assigned here, once, in the order processes declare events (`id = index +
//! FIRST_EVENT_ID`, as a per-PID trace numbers its events), and never change: the metadata
//! lists every registered event ([`Registry::events`]), and each process records with the
//! ids of its own events looked up here ([`Registry::ids_of`]). Processes of one program
//! declare the same events, so a thousand of them add nothing after the first.
//!
//! An event is known by its name *and* its layout (fields and level), as LTTng's
//! registry matches events by name and signature: two processes (or two `tracing`
//! callsites of one process, which share the name `<target>:event`) that declare one
//! name with different fields get two ids, two event classes of that name in the
//! metadata, and neither can be decoded with the other's layout.

use std::collections::HashMap;
use std::sync::Arc;

use ust_core::event_header::FIRST_EVENT_ID;
use ust_core::EventDesc;

/// Most events one per-UID trace declares (the same bound as a process's,
/// [`crate::model::app::MAX_EVENTS`]).
pub const MAX_SHARED_EVENTS: usize = crate::model::app::MAX_EVENTS;

/// The events of one per-UID trace.
#[derive(Debug, Default)]
pub struct Registry {
    /// In id order: `events[i]` has id `i + FIRST_EVENT_ID`.
    events: Vec<EventDesc>,
    /// Full name (`provider:name`) → indexes in `events` of its layouts.
    by_name: HashMap<String, Vec<u32>>,
    /// The shared copy of `events` the streams size records with, remade when it grows.
    shared: Option<Arc<[EventDesc]>>,
}

/// What [`Registry::add`] did with a process's events.
#[derive(Debug, Default)]
pub struct Added {
    /// Events new to the trace (the metadata must be rewritten before they are used).
    pub new: usize,
    /// One message per event refused (the trace declares [`MAX_SHARED_EVENTS`] already).
    pub refused: Vec<String>,
}

impl Registry {
    /// Every registered event, in id order (shared; the same `Arc` until the next one is
    /// added).
    pub fn events(&mut self) -> Arc<[EventDesc]> {
        self.shared.get_or_insert_with(|| self.events.clone().into()).clone()
    }

    /// Number of registered events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// True when no event is registered.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Registers every event of `events` (a process's list) that the trace does not know
    /// yet. `who` names the process in the refusal messages.
    pub fn add(&mut self, events: &[EventDesc], who: &str) -> Added {
        let mut out = Added::default();
        for e in events {
            if self.find(e).is_some() {
                continue;
            }
            let name = e.full_name();
            if self.events.len() >= MAX_SHARED_EVENTS {
                out.refused.push(format!("event `{name}` of {who} not recorded: the per-UID trace already declares {MAX_SHARED_EVENTS} events"));
                continue;
            }
            self.by_name.entry(name).or_default().push(self.events.len() as u32);
            self.events.push(e.clone());
            self.shared = None;
            out.new += 1;
        }
        out
    }

    /// Index of the event of `e`'s name and layout.
    fn find(&self, e: &EventDesc) -> Option<u32> {
        self.by_name.get(&e.full_name())?.iter().copied().find(|&i| same_layout(&self.events[i as usize], e))
    }

    /// The id each event of `events` (a process's list, registration order) records with
    /// in this trace: 0 for one not registered here or registered with another layout.
    pub fn ids_of(&self, events: &[EventDesc]) -> Vec<u32> {
        events.iter().map(|e| self.find(e).map_or(0, |i| i + FIRST_EVENT_ID)).collect()
    }
}

/// Same fields (names and types, in order) and level: records of one are records of the
/// other. The source location may differ (two programs built from one library).
fn same_layout(a: &EventDesc, b: &EventDesc) -> bool {
    a.fields == b.fields && a.level == b.level
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;
    use ust_core::{FieldDesc, FieldType, IntegerType, Level};

    fn ev(name: &'static str, ty: IntegerType) -> EventDesc {
        EventDesc {
            provider: Cow::Borrowed("p"),
            name: Cow::Borrowed(name),
            level: Level::Info,
            fields: Cow::Owned(vec![FieldDesc { name: Cow::Borrowed("x"), ty: FieldType::Integer(ty) }]),
            location: Cow::Borrowed(""),
        }
    }

    #[test]
    fn ids_are_shared_by_name_and_layout() {
        let mut r = Registry::default();
        let a = [ev("a", IntegerType::U32), ev("b", IntegerType::U64)];
        assert_eq!(r.add(&a, "process 1").new, 2);
        assert_eq!(r.ids_of(&a), vec![1, 2]);
        // Another process: its own order, one known event, one new, one of a known name
        // with another layout (its own id: neither is decoded with the other's fields).
        let b = [ev("c", IntegerType::I8), ev("b", IntegerType::U64), ev("a", IntegerType::I64)];
        let added = r.add(&b, "process 2 (x)");
        assert_eq!((added.new, added.refused.len()), (2, 0));
        assert_eq!(r.ids_of(&b), vec![3, 2, 4]);
        assert_eq!(r.ids_of(&a), vec![1, 2], "the first layout keeps its id");
        assert_eq!(r.len(), 4);
        let names: Vec<String> = r.events().iter().map(|e| e.full_name()).collect();
        assert_eq!(names, ["p:a", "p:b", "p:c", "p:a"]);
        assert_eq!(r.add(&a, "process 3").new, 0, "a known program adds nothing");
        assert_eq!(r.ids_of(&[ev("z", IntegerType::U8)]), vec![0], "unknown: no id");
    }
}
