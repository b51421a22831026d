//! Looking faults up in time order ([`Cursor`]): the changes applied as time goes on to
//! each space's current ranges.

use crate::report::fast_hash::HashMap;
use std::collections::BTreeMap;

use super::*;

impl AddressSpaces {
    /// A [`Cursor`] over these address spaces.
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor { a: self, next: 0, maps: HashMap::default(), last: 0 }
    }
}

/// What one address space holds now: `start -> (end, region)` (`None`: unmapped), ranges
/// apart, each region seen from its own start.
type Current = BTreeMap<u64, (u64, Option<Region>)>;

/// `[start, end)` holds `region` from now on: the ranges it overlaps are cut around it.
fn apply(m: &mut Current, start: u64, end: u64, region: Option<Region>) {
    // Ranges are apart and sorted: those over [start, end) are the last ones that start
    // before `end`, as long as they end after `start`.
    let over: Vec<u64> = m.range(..end).rev().take_while(|(_, (e, _))| *e > start).map(|(s, _)| *s).collect();
    for s in over {
        let Some((e, r)) = m.remove(&s) else { continue };
        if s < start {
            m.insert(s, (start, r.clone()));
        }
        if e > end {
            m.insert(end, (e, r.map(|r| r.shifted(end - s))));
        }
    }
    m.insert(start, (end, region));
}

/// Lookups in time order ([`AddressSpaces::lookup`]'s answers), each in `O(log n)` of the
/// mappings: the changes are applied as time goes on to each space's current ranges (a
/// fork copies them), and only an address no change covered goes to the samples. A lookup
/// earlier than the one before it is answered by [`AddressSpaces::lookup`].
#[derive(Debug)]
pub struct Cursor<'a> {
    a: &'a AddressSpaces,
    /// The next entry of the log to apply.
    next: usize,
    maps: HashMap<usize, Current>,
    last: u64,
}

impl Cursor<'_> {
    /// What address `addr` of thread `tid` (of process `pid`) held at `ts`.
    pub fn lookup(&mut self, tid: i32, pid: i32, ts: u64, addr: u64) -> Found {
        if ts < self.last {
            return self.a.lookup(tid, pid, ts, addr);
        }
        self.last = ts;
        while let Some(&item) = self.a.log.get(self.next) {
            match item {
                Logged::Change(i, k) => {
                    let c = &self.a.spaces[i].changes[k];
                    if c.ts > ts {
                        break;
                    }
                    apply(self.maps.entry(i).or_default(), c.start, c.end, c.region.clone());
                }
                Logged::Copy(child, parent, at) => {
                    if at > ts {
                        break;
                    }
                    let copy = self.maps.get(&parent).cloned().unwrap_or_default();
                    self.maps.insert(child, copy);
                }
            }
            self.next += 1;
        }
        let Some(i) = self.a.current(tid, ts).or_else(|| self.a.current(pid, ts)) else { return self.a.lookup(tid, pid, ts, addr) };
        if self.a.spaces[i].parent.is_some_and(|(_, at)| at > ts) {
            // A copy asked about before it was made.
            return self.a.lookup_space(i, ts, addr);
        }
        if let Some((&start, (end, region))) = self.maps.get(&i).and_then(|m| m.range(..=addr).next_back()) {
            if addr < *end {
                return match region {
                    Some(r) => Found::Mapped { region: r.clone(), start },
                    None => Found::Unmapped,
                };
            }
        }
        self.a.base(i, ts, addr)
    }
}
