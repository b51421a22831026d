//! The enable masks of a process (what `SetEnabled` carries), as a pure function of its
//! mask slots and of what each slot's owner records: bit `s` of `masks[i]` is set when the
//! channel (or trigger notifier) in slot `s` records event `i` now, conditioned by the
//! filters that apply to it; the most verbose level any owner accepts (what the process's
//! `tracing` layer may rule out beyond); and, per per-UID channel, the ids its events carry
//! in the shared trace.
//!
//! The daemon's state gathers the owners ([`crate::ops::state::State::enabled`]); nothing
//! here reads more than it is given.

use ust_core::protocol::{ChannelIds, EventFilter};

use crate::model::app::App;
use crate::model::enabler::{Decision, Rule};
use crate::model::session::{LevelFilter, Session};

/// What occupies one mask slot of a process.
#[derive(Debug)]
pub enum SlotOwner<'a> {
    /// Channel `channel` of `session`.
    Channel {
        /// The session.
        session: &'a Session,
        /// Index of the channel in [`Session::channels`].
        channel: usize,
        /// The session's trackers take the process (`ust track`): else its bits are all
        /// clear (its buffers stay mapped in the process, and nothing is written to them
        /// until it is tracked again).
        tracked: bool,
        /// A per-UID channel: the id of each of the process's events in the user's trace
        /// (0: none; such an event is not recorded).
        ids: Option<Vec<u32>>,
    },
    /// A trigger's notifier ([`crate::ops::triggers`]), with the trigger's rule.
    Trigger(&'a Rule),
    /// A map slot ([`crate::ops::maps`]): the trigger's rule, the key index + 1 of each
    /// event (0: not counted), and whether the action's session is started (else no bit).
    Map {
        /// The rule.
        rule: &'a Rule,
        /// Keys by event.
        keys: &'a [u32],
        /// The session is started.
        active: bool,
    },
}

/// A process's `SetEnabled`.
#[derive(Debug, Default, PartialEq)]
pub struct Enabled {
    /// One mask per registered event: bit `s` set when slot `s` records it.
    pub masks: Vec<u64>,
    /// The filters that condition some of those bits (resolved per event: field indexes
    /// of that event); the sessions' first, then the triggers'.
    pub filters: Vec<EventFilter>,
    /// The most verbose level number an owner accepts; `None`: none accepts any.
    pub max_level: Option<u8>,
    /// The ids of the process's events in each per-UID channel, by slot.
    pub ids: Vec<ChannelIds>,
}

/// The `SetEnabled` of process `app`, whose slots hold `owners` (in slot order).
pub fn enabled(app: &App, owners: &[(u32, SlotOwner<'_>)]) -> Enabled {
    let events = &app.events;
    let mut out = Enabled { masks: vec![0u64; events.len()], ..Enabled::default() };
    for (slot, owner) in owners {
        let SlotOwner::Channel { session, channel, tracked: true, ids } = owner else { continue };
        for (i, d) in session.decisions(*channel, events).into_iter().enumerate() {
            // A per-UID channel records only the events that have an id in its trace.
            if ids.as_ref().is_some_and(|v| v.get(i).copied().unwrap_or(0) == 0) {
                continue;
            }
            set(&mut out, i, *slot, d);
        }
    }
    for (slot, owner) in owners {
        let SlotOwner::Trigger(rule) = owner else { continue };
        for (i, e) in events.iter().enumerate() {
            set(&mut out, i, *slot, rule.decide(e));
        }
    }
    for (slot, owner) in owners {
        let SlotOwner::Map { rule, keys, active: true } = owner else { continue };
        for (i, e) in events.iter().enumerate() {
            if keys.get(i).copied().unwrap_or(0) != 0 {
                set(&mut out, i, *slot, rule.decide(e));
            }
        }
    }
    out.max_level = owners
        .iter()
        .filter_map(|(_, owner)| match owner {
            SlotOwner::Channel { session, channel, tracked: true, .. } => session.max_level(*channel),
            SlotOwner::Channel { .. } => None,
            SlotOwner::Map { active: false, .. } => None,
            SlotOwner::Trigger(rule) | SlotOwner::Map { rule, .. } => Some(match rule.enabler.level {
                LevelFilter::Any => ust_core::Level::Debug.number(),
                LevelFilter::UpTo(l) | LevelFilter::Only(l) => l.number(),
            }),
        })
        .max();
    out.ids = owners
        .iter()
        .filter_map(|(slot, owner)| match owner {
            SlotOwner::Channel { ids: Some(ids), .. } => Some(ChannelIds { slot: *slot, ids: ids.clone() }),
            SlotOwner::Map { keys, .. } => Some(ChannelIds { slot: *slot, ids: keys.to_vec() }),
            _ => None,
        })
        .collect();
    out
}

/// Applies decision `d` of slot `slot` to event `i`.
fn set(out: &mut Enabled, i: usize, slot: u32, d: Decision) {
    match d {
        Decision::Off => {}
        Decision::On => out.masks[i] |= 1u64 << slot,
        Decision::Filtered(any_of) => {
            out.masks[i] |= 1u64 << slot;
            out.filters.push(EventFilter { event: i as u32, slot, any_of });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;
    use std::collections::BTreeMap;
    use ust_core::{EventDesc, Level};
    use ust_ctl::config::{ChannelConfig, Enabler};

    use crate::model::session::Channel;

    fn ev(p: &'static str, n: &'static str) -> EventDesc {
        EventDesc { provider: Cow::Borrowed(p), name: Cow::Borrowed(n), level: Level::Info, fields: Cow::Borrowed(&[]), location: Cow::Borrowed("") }
    }

    fn app(events: Vec<EventDesc>) -> App {
        App {
            id: 1,
            pid: 10,
            uid: 1000,
            gid: 1000,
            procname: "p".into(),
            token: None,
            clock: None,
            abi_minor: ust_core::ABI_MINOR,
            ncpus: 1,
            events,
            registered: 0,
            alive: true,
            exiting: false,
            slots: BTreeMap::new(),
            out: None,
            sync: Default::default(),
        }
    }

    /// A tracked channel sets its bits, an untracked one none (its per-UID ids are still
    /// sent), a per-UID channel only those of events with an id, a trigger its own; the
    /// level is the most verbose of the owners that record.
    #[test]
    fn masks_follow_the_owners_of_the_slots() {
        let mut s = Session::new("s".into(), "/tmp/x".into(), None);
        s.started = true;
        let mut c = Channel::new("c", ChannelConfig::default());
        c.enablers.push(Rule::parse(Enabler::new("a:*", LevelFilter::UpTo(Level::Info))).unwrap());
        s.channels.push(c);
        let trigger = Rule::parse(Enabler::new("b:x", LevelFilter::Any)).unwrap();
        let a = app(vec![ev("a", "x"), ev("a", "y"), ev("b", "x")]);
        let owners = [
            (0, SlotOwner::Channel { session: &s, channel: 0, tracked: true, ids: None }),
            (1, SlotOwner::Channel { session: &s, channel: 0, tracked: true, ids: Some(vec![5, 0, 0]) }),
            (2, SlotOwner::Channel { session: &s, channel: 0, tracked: false, ids: Some(vec![7, 8, 0]) }),
            (3, SlotOwner::Trigger(&trigger)),
        ];
        let e = enabled(&a, &owners);
        assert_eq!(e.masks, vec![0b0011, 0b0001, 0b1000]);
        assert!(e.filters.is_empty());
        assert_eq!(e.max_level, Some(Level::Debug.number()), "the trigger's rule takes every level");
        assert_eq!(e.ids, vec![ChannelIds { slot: 1, ids: vec![5, 0, 0] }, ChannelIds { slot: 2, ids: vec![7, 8, 0] }]);
        let e = enabled(&a, &owners[..3]);
        assert_eq!(e.max_level, Some(Level::Info.number()));
        let stopped = Session { started: false, ..s.clone() };
        let e = enabled(&a, &[(0, SlotOwner::Channel { session: &stopped, channel: 0, tracked: true, ids: None })]);
        assert_eq!((e.masks, e.max_level), (vec![0; 3], None), "a stopped session records nothing");
    }
}
