//! Map channels at work (LTTng 2.16): `ust add-map-channel`, the map slots that
//! `incr-map-value` actions of `event-rule-matches` triggers take in each matching process,
//! the fate of a dead process's counters, and the dump `show-maps` and `export-maps` read.
//!
//! ```text
//! daemon                                              process (ABI minor >= 8)
//!  add-map-channel S/C, trigger T: rule R → incr-map-value S/C key K
//!  for each live process P with an event matching R:
//!    group = maps of P's owner (uid, or P itself)     (created on first use: a sealed memfd)
//!    keys[i] = intern(K expanded for event i) + 1     (channel-wide table; 0: none / full)
//!  ── AddChannel{slot s, map: {map_id, per_event}} + memfd ──>  maps the counters
//!  ── SetEnabled: bit s on events with a key, while S is started;
//!                 ids[s] = keys ─────────────────────────────>  an event in slot s adds 1
//!                                                               to counters[cpu][key]
//! ```
//!
//! One slot per action per process: the rule's filter is the slot's filter (evaluated in
//! the process, as for a channel); the `per-event` update policy is the process's
//! business (one increment per map and key per event, across slots), `per-rule-match`
//! one per slot. A trigger with a session condition counts in the channel's shared
//! counters, in the daemon, when it fires ([`Maps::incr_shared`]).
//!
//! A process that dies: its per-process group is dropped or summed into the shared
//! counters (`--dead-process-policy`); per-user groups outlive their processes.

use std::collections::BTreeMap;

use ringbuffer::counters::{create_memfd, CounterConfig};
use ust_core::protocol::{ChannelGrant, DaemonMessage, MapGrant};
use ust_ctl::maps::{expand_key, parse_key_template, DeadProcessPolicy, GroupType, MapChannelConfig, MapOwnership, MapsDump, UpdatePolicy};

use crate::model::app::App;
use crate::model::enabler::{Decision, Rule};
use crate::model::maps::{Group, MapChannel};

/// Owner of a map slot in [`App::slots`], in place of a session name (its index is the
/// slot's key in [`Maps::slots`]'s per-process entries): no session can have this name.
pub const MAP_SLOT_OWNER: &str = "\u{0}map";

// The bound the clients check is the counter maps' own.
const _: () = assert!(ust_ctl::maps::MAX_MAX_KEY_COUNT == ringbuffer::counters::MAX_KEYS);

/// Most map channels one daemon keeps.
pub const MAX_MAP_CHANNELS: usize = 64;

/// One map slot of one process.
#[derive(Debug)]
pub struct MapSlot {
    /// The trigger whose action it serves.
    pub trigger: usize,
    /// Index of the action in the trigger's list.
    pub action: usize,
    /// Session and map channel of the action.
    pub session: String,
    /// Map channel.
    pub channel: String,
    /// Key index + 1 of each of the process's events (0: not counted).
    pub keys: Vec<u32>,
}

/// The daemon's map channels and map slots (a field of [`crate::ops::state::State`]).
#[derive(Debug, Default)]
pub struct Maps {
    /// (session, channel) → the channel.
    pub channels: BTreeMap<(String, String), MapChannel>,
    /// (app id, slot) → what the slot counts.
    pub slots: BTreeMap<(u64, u32), MapSlot>,
    next_map_id: u32,
}

pub use crate::ops::triggers::MapAction;

impl Maps {
    /// True when session `session` has a map channel.
    pub fn has_session(&self, session: &str) -> bool {
        self.channels.keys().any(|(s, _)| s == session)
    }

    /// True when process `app` has a map slot counting for session `session`.
    pub fn app_counts_for(&self, app: u64, session: &str) -> bool {
        self.slots.range((app, 0)..=(app, u32::MAX)).any(|(_, s)| s.session == session)
    }

    /// Adds map channel `name` (or `map-channel<N>`) to `session`; returns its name.
    ///
    /// # Errors
    /// A name in use in that session, a bad name, too many channels, a bad attribute.
    pub fn add_channel(&mut self, session: &str, name: Option<String>, config: MapChannelConfig) -> Result<String, String> {
        if self.channels.len() >= MAX_MAP_CHANNELS {
            return Err(format!("at most {MAX_MAP_CHANNELS} map channels"));
        }
        config.check()?;
        let name = match name {
            Some(n) => n,
            None => (0..).map(|n| format!("map-channel{n}")).find(|n| !self.channels.contains_key(&(session.to_string(), n.clone()))).unwrap_or_default(),
        };
        ust_ctl::maps::check_map_channel_name(&name)?;
        let k = (session.to_string(), name.clone());
        if self.channels.contains_key(&k) {
            return Err(format!("session {session} already has a map channel named {name:?}"));
        }
        self.channels.insert(k, MapChannel::new(name.clone(), config));
        Ok(name)
    }

    /// The key index + 1 of each of `app`'s events for one action (0: the rule does not
    /// take it, or the channel's key table is full).
    fn keys_for(ch: &mut MapChannel, app: &App, rule: &Rule, template: &str) -> Vec<u32> {
        let Ok(parts) = parse_key_template(template) else { return vec![0; app.events.len()] };
        let max = ch.config.max_key_count;
        let mut too_long = 0;
        let keys = app
            .events
            .iter()
            .map(|e| {
                if rule.decide(e) == Decision::Off {
                    return 0;
                }
                let key = expand_key(&parts, &e.provider, &e.name);
                if key.len() > ust_ctl::maps::MAX_KEY_LEN {
                    // LTTng-UST creates no counter for such a key: not counted.
                    too_long += 1;
                    return 0;
                }
                ch.keys.intern(&key, max).map_or(0, |k| k + 1)
            })
            .collect();
        if too_long > 0 {
            crate::log!("map channel {}: {too_long} event(s) of process {} not counted: key over {} bytes", ch.name, app.pid, ust_ctl::maps::MAX_KEY_LEN);
        }
        keys
    }

    /// Gives process `app` a map slot for every `incr-map-value` action of `actions` whose
    /// map channel exists and that has a key for one of its events, and updates the keys
    /// of the slots it has (its events may have grown). The caller pushes the masks.
    pub fn attach_app(&mut self, app: &mut App, actions: &[MapAction<'_>]) {
        if !app.alive || app.abi_minor < ust_core::MAPS_SINCE_MINOR {
            return;
        }
        for &(trigger, action, rule, session, channel, template) in actions {
            let Some(ch) = self.channels.get_mut(&(session.to_string(), channel.to_string())) else { continue };
            let keys = Self::keys_for(ch, app, rule, template);
            if let Some(s) = self.slots.range_mut((app.id, 0)..=(app.id, u32::MAX)).find(|(_, s)| s.trigger == trigger && s.action == action).map(|(_, s)| s) {
                s.keys = keys;
                continue;
            }
            if keys.iter().all(|&k| k == 0) {
                continue;
            }
            let (kind, owner_id, owner_app) = match ch.config.ownership {
                MapOwnership::User => (GroupType::UserPerUser, i64::from(app.uid), None),
                MapOwnership::Process => (GroupType::UserPerProcess, i64::from(app.pid), Some(app.id)),
            };
            let gi = match ch.groups.iter().position(|g| g.kind == kind && g.owner_id == owner_id && g.app == owner_app) {
                Some(i) => i,
                None => {
                    let cfg = CounterConfig { ncpus: app.ncpus, max_keys: ch.config.max_key_count, bits: ch.bits() };
                    // A memfd name is at most 249 bytes: the channel name is cut (it is only shown in
                    // /proc/PID/maps).
                    let short: String = channel.chars().take(64).collect();
                    match create_memfd(cfg, &format!("ust-map-{short}-{owner_id}")) {
                        Ok((counters, fd)) => {
                            self.next_map_id += 1;
                            let owner_name = if kind == GroupType::UserPerUser { user_name(app.uid) } else { app.procname.clone() };
                            ch.groups.push(Group { kind, owner_id, owner_name, map_id: self.next_map_id, counters, fd, app: owner_app });
                            ch.groups.len() - 1
                        }
                        Err(e) => {
                            crate::log!("map channel {session}/{channel}: no counters for process {}: {e}", app.pid);
                            continue;
                        }
                    }
                }
            };
            let g = &ch.groups[gi];
            if g.counters.config().ncpus != app.ncpus {
                crate::log!(
                    "map channel {session}/{channel}: process {} has {} CPUs, its user's maps {}; not counted",
                    app.pid,
                    app.ncpus,
                    g.counters.config().ncpus
                );
                continue;
            }
            let Some(slot) = app.free_slot() else {
                crate::log!("map channel {session}/{channel}: process {} has no free channel slot; not counted", app.pid);
                continue;
            };
            let Ok(fd) = g.fd.try_clone() else { continue };
            app.slots.insert(slot, (MAP_SLOT_OWNER.to_string(), slot as usize));
            let map = MapGrant { map_id: g.map_id, per_event: ch.config.update_policy == UpdatePolicy::PerEvent };
            let grant = ChannelGrant {
                slot,
                session: session.to_string(),
                channel: channel.to_string(),
                ncpus: 1,
                contexts: Vec::new(),
                tsc: None,
                shared_ids: false,
                blocking_timeout_us: 0,
                map: Some(map),
            };
            app.send(DaemonMessage::AddChannel(grant), vec![fd]);
            self.slots.insert((app.id, slot), MapSlot { trigger, action, session: session.to_string(), channel: channel.to_string(), keys });
        }
    }

    /// Forgets the map slots of trigger `trigger` (removed); returns (app, slot) of each,
    /// for the caller to free and remove in the processes.
    pub fn trigger_removed(&mut self, trigger: usize) -> Vec<(u64, u32)> {
        let gone: Vec<(u64, u32)> = self.slots.iter().filter(|(_, s)| s.trigger == trigger).map(|(k, _)| *k).collect();
        gone.iter().for_each(|k| {
            self.slots.remove(k);
        });
        gone
    }

    /// Session `session` is destroyed: its map channels go; returns the (app, slot) of
    /// every slot that counted for them.
    pub fn session_destroyed(&mut self, session: &str) -> Vec<(u64, u32)> {
        self.channels.retain(|(s, _), _| s != session);
        let gone: Vec<(u64, u32)> = self.slots.iter().filter(|(_, s)| s.session == session).map(|(k, _)| *k).collect();
        gone.iter().for_each(|k| {
            self.slots.remove(k);
        });
        gone
    }

    /// Process `app` is gone: its slots are forgotten and its per-process groups dropped or
    /// summed into the shared counters, as each channel's policy says.
    pub fn process_gone(&mut self, app: u64) {
        self.slots.retain(|(a, _), _| *a != app);
        for ch in self.channels.values_mut() {
            let sum = ch.config.dead_process_policy != Some(DeadProcessPolicy::Drop);
            while let Some(i) = ch.groups.iter().position(|g| g.app == Some(app)) {
                ch.remove_group(i, sum);
            }
        }
    }

    /// `ust clear`: the counters of `session`'s map channels go back to 0 (keys kept).
    pub fn clear(&mut self, session: &str) {
        self.channels.iter_mut().filter(|((s, _), _)| s == session).for_each(|(_, c)| c.clear());
    }

    /// A trigger with a session condition fired an `incr-map-value` action: 1 added to the
    /// shared counter of `key` in `session`/`channel` (which must exist; the session must be
    /// started, `started` says).
    ///
    /// # Errors
    /// No such map channel (LTTng does nothing then: the message says why).
    pub fn incr_shared(&mut self, session: &str, channel: &str, key: &str, started: bool) -> Result<String, String> {
        let ch =
            self.channels.get_mut(&(session.to_string(), channel.to_string())).ok_or_else(|| format!("session {session} has no map channel {channel:?}"))?;
        if !started {
            return Ok(format!("session {session} stopped: map value `{key}` not incremented"));
        }
        match ch.keys.intern(key, ch.config.max_key_count) {
            Some(k) => {
                ch.add_shared(k, 1);
                Ok(format!("map value `{key}` of {session}/{channel} incremented"))
            }
            None => Ok(format!("map channel {session}/{channel} is full: key `{key}` dropped")),
        }
    }

    /// Every counter of `session`'s map channels.
    pub fn dump(&self, session: &str) -> MapsDump {
        MapsDump { session: session.to_string(), channels: self.channels.iter().filter(|((s, _), _)| s == session).map(|(_, c)| c.dump()).collect() }
    }
}

/// The name of user `uid` (`/etc/passwd`), or its number.
fn user_name(uid: u32) -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 2 && f[2] == uid.to_string()).then(|| f[0].to_string())
        })
        .unwrap_or_else(|| uid.to_string())
}
