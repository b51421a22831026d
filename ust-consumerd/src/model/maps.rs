//! A map channel as the daemon holds it (LTTng 2.16's `add-map-channel`): its attributes,
//! its key table, its groups of per-CPU counter maps (one per owner: a Unix user, or a
//! process) and its shared counters, and the dump `show-maps`/`export-maps` present.
//!
//! ```text
//! key table (channel-wide, at most --max-key-count keys, first come first kept)
//!   "count/tp:tptest" → 0, "prov/tp" → 1, …          (a key past the limit: dropped, counted)
//! groups: uid 1000 → counter map (CPU × key) in a sealed memfd, mapped here and in
//!                    every process of that user
//!         pid 4242 → …                               (--buffer-ownership=process)
//! shared: key → (value, overflow)                    (the daemon's own counters)
//! ```
//!
//! A process only ever sees key indexes: the daemon interns the expanded key of each of
//! its events when it grants a map slot ([`crate::ops::maps`]), so counting never touches a
//! string and never allocates.

use std::collections::HashMap;
use std::os::fd::OwnedFd;

use ringbuffer::counters::{Counters, ValueBits};
use ust_ctl::maps::{Entry, GroupDump, GroupType, MapChannelConfig, MapChannelDump, PartDump};

/// The channel-wide key table: key → index, bounded.
#[derive(Debug, Default)]
pub struct KeyTable {
    keys: Vec<String>,
    index: HashMap<String, u32>,
    /// Allocations refused because the table was full.
    pub dropped: u64,
}

impl KeyTable {
    /// The index of `key`, allocated if new and there is room (`max` keys); `None` when the
    /// table is full (counted in [`KeyTable::dropped`]).
    pub fn intern(&mut self, key: &str, max: u32) -> Option<u32> {
        if let Some(&i) = self.index.get(key) {
            return Some(i);
        }
        if self.keys.len() >= max as usize {
            self.dropped += 1;
            return None;
        }
        let i = self.keys.len() as u32;
        self.keys.push(key.to_string());
        self.index.insert(key.to_string(), i);
        Some(i)
    }

    /// Keys allocated, in index order.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }
}

/// One owner's per-CPU counter maps.
#[derive(Debug)]
pub struct Group {
    /// `user-per-user` or `user-per-process`.
    pub kind: GroupType,
    /// uid, or pid.
    pub owner_id: i64,
    /// User or process name (informational).
    pub owner_name: String,
    /// The daemon's id of this map ([`ust_core::protocol::MapGrant::map_id`]).
    pub map_id: u32,
    /// The counters (the daemon's mapping).
    pub counters: Counters,
    /// The memfd, duplicated for each process granted a slot on it.
    pub fd: OwnedFd,
    /// For `user-per-process`: the owner's daemon-local app id.
    pub app: Option<u64>,
}

/// A map channel of a session.
#[derive(Debug)]
pub struct MapChannel {
    /// Its name.
    pub name: String,
    /// Its attributes.
    pub config: MapChannelConfig,
    /// Its key table.
    pub keys: KeyTable,
    /// Its owners' maps.
    pub groups: Vec<Group>,
    /// The shared counters, by key index (grown as keys are counted there).
    pub shared: Vec<(i64, bool)>,
}

impl MapChannel {
    /// A new, empty map channel.
    pub fn new(name: String, config: MapChannelConfig) -> MapChannel {
        MapChannel { name, config, keys: KeyTable::default(), groups: Vec::new(), shared: Vec::new() }
    }

    /// The value width of its maps.
    pub fn bits(&self) -> ValueBits {
        if self.config.value_type.bits() == 32 {
            ValueBits::I32
        } else {
            ValueBits::I64
        }
    }

    /// Adds `delta` to shared counter `key`, wrapping within the value type and setting the
    /// overflow flag when it wraps.
    pub fn add_shared(&mut self, key: u32, delta: i64) {
        let k = key as usize;
        if self.shared.len() <= k {
            self.shared.resize(k + 1, (0, false));
        }
        let bits = self.bits();
        let (v, o) = &mut self.shared[k];
        let wrapped = match bits {
            ValueBits::I32 => {
                let (n, w) = (*v as i32).overflowing_add(delta as i32);
                *v = i64::from(n);
                w || i64::from(delta as i32) != delta
            }
            ValueBits::I64 => {
                let (n, w) = v.overflowing_add(delta);
                *v = n;
                w
            }
        };
        *o |= wrapped;
    }

    /// Removes group `i`: with `sum` (`sum-into-shared`), each of its counters (summed over
    /// its CPUs, wrapping) is added to the shared one first, its overflow flags carried (and
    /// set when the sum over its CPUs wraps).
    pub fn remove_group(&mut self, i: usize, sum: bool) {
        if i >= self.groups.len() {
            return;
        }
        let g = self.groups.remove(i);
        if !sum {
            return;
        }
        let cfg = g.counters.config();
        for key in 0..self.keys.keys().len() as u32 {
            let mut over = false;
            let mut total = 0i64;
            for cpu in 0..cfg.ncpus {
                if let Some((v, o)) = g.counters.get(cpu, key) {
                    let (t, wrapped) = total.overflowing_add(v);
                    total = t;
                    over |= o || wrapped;
                }
            }
            if total != 0 || over {
                self.add_shared(key, total);
                if over {
                    self.shared[key as usize].1 = true;
                }
            }
        }
    }

    /// `ust clear`: every counter 0, overflow flags cleared, keys kept.
    pub fn clear(&mut self) {
        for g in &self.groups {
            g.counters.clear();
        }
        self.shared.iter_mut().for_each(|e| *e = (0, false));
    }

    /// Every counter, for `show-maps`/`export-maps`: the shared group first (one part, no
    /// CPU), with every allocated key; then each owner's, one part per CPU with the counters
    /// that are not 0 (or overflowed): a 384-CPU machine's thousands of keys would otherwise
    /// make a dump of millions of zeros, and a zero adds nothing to any sum.
    pub fn dump(&self) -> MapChannelDump {
        let keys = self.keys.keys();
        let vt = self.config.value_type.effective_name().to_string();
        let mut groups = vec![GroupDump {
            kind: GroupType::Shared,
            owner_id: None,
            owner_name: None,
            value_type: vt.clone(),
            parts: vec![PartDump {
                part: None,
                entries: keys
                    .iter()
                    .enumerate()
                    .map(|(i, k)| {
                        let (value, overflow) = self.shared.get(i).copied().unwrap_or((0, false));
                        Entry { key: k.clone(), value, overflow }
                    })
                    .collect(),
            }],
        }];
        let mut owners: Vec<&Group> = self.groups.iter().collect();
        owners.sort_by_key(|g| (g.kind, g.owner_id));
        for g in owners {
            let cfg = g.counters.config();
            let parts = (0..cfg.ncpus)
                .map(|cpu| PartDump {
                    part: Some(cpu),
                    entries: keys
                        .iter()
                        .enumerate()
                        .filter_map(|(i, k)| {
                            let (value, overflow) = g.counters.get(cpu, i as u32).unwrap_or((0, false));
                            (value != 0 || overflow).then(|| Entry { key: k.clone(), value, overflow })
                        })
                        .collect(),
                })
                .collect();
            groups.push(GroupDump { kind: g.kind, owner_id: Some(g.owner_id), owner_name: Some(g.owner_name.clone()), value_type: vt.clone(), parts });
        }
        MapChannelDump { name: self.name.clone(), config: self.config.clone(), keys: keys.len() as u32, keys_dropped: self.keys.dropped, groups }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringbuffer::counters::{create_memfd, CounterConfig};
    use ust_ctl::maps::ValueType;

    #[test]
    fn keys_are_first_come_and_bounded() {
        let mut t = KeyTable::default();
        assert_eq!((t.intern("a", 2), t.intern("b", 2), t.intern("a", 2)), (Some(0), Some(1), Some(0)));
        assert_eq!((t.intern("c", 2), t.intern("d", 2)), (None, None));
        assert_eq!((t.keys(), t.dropped), (&["a".to_string(), "b".to_string()][..], 2));
    }

    #[test]
    fn a_dead_group_sums_into_shared_with_overflow() {
        let config = MapChannelConfig { value_type: ValueType::SignedInt32, ..MapChannelConfig::default() };
        let mut m = MapChannel::new("m".into(), config);
        m.keys.intern("k0", 8);
        m.keys.intern("k1", 8);
        let (counters, fd) = create_memfd(CounterConfig { ncpus: 2, max_keys: 8, bits: ValueBits::I32 }, "t").unwrap();
        counters.add(0, 0, 5);
        counters.add(1, 0, 7);
        counters.add(1, 1, i64::from(i32::MAX));
        m.groups.push(Group { kind: GroupType::UserPerProcess, owner_id: 42, owner_name: "p".into(), map_id: 1, counters, fd, app: Some(1) });
        m.add_shared(1, 1);
        let d = m.dump();
        assert_eq!(d.groups.len(), 2);
        assert_eq!(d.groups[1].parts[1].entries[0], Entry { key: "k0".into(), value: 7, overflow: false });
        assert_eq!(d.groups[1].parts[0].entries, [Entry { key: "k0".into(), value: 5, overflow: false }], "zeros left out of a CPU's part");
        assert_eq!(d.groups[0].parts[0].entries.len(), 2, "the shared group lists every key");
        m.remove_group(0, true);
        assert!(m.groups.is_empty());
        assert_eq!(m.shared, vec![(12, false), (i64::from(i32::MIN), true)]);
        m.clear();
        assert_eq!(m.shared, vec![(0, false), (0, false)]);
        assert_eq!(m.dump().keys, 2, "clear keeps the keys");
    }

    #[test]
    fn a_sum_over_cpus_that_wraps_is_flagged() {
        let mut m = MapChannel::new("m".into(), MapChannelConfig::default());
        m.keys.intern("k", 8);
        let (counters, fd) = create_memfd(CounterConfig { ncpus: 2, max_keys: 8, bits: ValueBits::I64 }, "t").unwrap();
        // Each CPU's counter is in range, flag clear; their sum is not.
        counters.add(0, 0, i64::MAX);
        counters.add(1, 0, 2);
        assert_eq!((counters.get(0, 0), counters.get(1, 0)), (Some((i64::MAX, false)), Some((2, false))));
        m.groups.push(Group { kind: GroupType::UserPerProcess, owner_id: 42, owner_name: "p".into(), map_id: 1, counters, fd, app: Some(1) });
        m.remove_group(0, true);
        assert_eq!(m.shared, vec![(i64::MIN + 1, true)], "wrapped, and said so");
    }
}
