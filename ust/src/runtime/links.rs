//! The daemons a process registers with, and how their channels share the process's one
//! slot table.
//!
//! As LTTng-UST (`liblttng-ust-comm.c` keeps two `sock_info`s, the "global" one for
//! root's session daemon in `/var/run/lttng` and the "local" one for the user's in
//! `$HOME/.lttng`, each served by its own listener thread and registered independently), a
//! process registers with its own user's daemon ([`OWN`], `ust_core::rundir::rundir`) and
//! with root's system-wide one ([`SYSTEM`], `ust_core::rundir::system_rundir`) when its
//! socket is reachable. Each link has its own runtime thread, connection and timeouts;
//! a link whose daemon is absent, slow or dead costs the other nothing.
//!
//! Both daemons number their channels `0..MAX_CHANNELS` for this process, but the process
//! has one table of 64 slots, one per bit of a call site's mask. So each daemon's slot
//! (its *local* slot) is mapped to a *global* one when its channel is granted:
//!
//! ```text
//! own daemon:   local 0 1 2 ...  ──> global 0 1 2 ...   (same number while free)
//! root's:       local 0 1 ...    ──> global 63 62 ...   (from the top while free)
//! site mask  =  translate(own's mask) | translate(root's mask)   (recomputed on every
//! site filter = both daemons' filters, slots translated            change of either)
//! ```
//!
//! Every daemon message is applied to that daemon's part of the [`State`] only (its masks,
//! filters, level, channels), and the call sites' masks are then recomputed from both
//! parts, so one daemon's `SetEnabled` never clears what the other enabled, and a daemon
//! that goes away takes only its own channels with it. The state lives in the
//! [`super::Generation`] (a fork child starts from an empty one, never touching a lock a
//! parent thread may have held) and only runtime threads take its lock, never the emit
//! path. Masks are also narrowed for a state dump ([`super::statedump`]) under that lock,
//! so a recomputation never interleaves with one.

use std::collections::BTreeMap;

use ust_core::protocol::{EventFilter, MAX_CHANNELS, NO_LEVEL};

use super::debug;
use crate::channel;
use crate::site::{self, SiteFilter};

/// The link to the process's own user's daemon.
pub(crate) const OWN: usize = 0;
/// The link to root's system-wide daemon.
pub(crate) const SYSTEM: usize = 1;
/// Number of links.
pub(crate) const NLINKS: usize = 2;

/// The name of link `link` in messages.
pub(crate) fn name(link: usize) -> &'static str {
    if link == SYSTEM {
        "root's daemon"
    } else {
        "the daemon"
    }
}

/// What one daemon last enabled, in its own slot numbers.
#[derive(Default)]
struct Enablement {
    /// One mask per registered site (local slot bits).
    masks: Vec<u64>,
    /// Filters, local slots (checked for range by the caller).
    filters: Vec<EventFilter>,
    /// `SetEnabled`'s `max_level`; `None` until one arrived.
    max_level: Option<Option<u8>>,
}

/// The slot map and each daemon's enablement (see the module doc).
pub(crate) struct State {
    /// Global slot -> `(link, local slot)`.
    owner: [Option<(u8, u8)>; MAX_CHANNELS as usize],
    en: [Enablement; NLINKS],
}

impl State {
    /// Nothing mapped, nothing enabled.
    pub(crate) fn new() -> State {
        State { owner: [None; MAX_CHANNELS as usize], en: Default::default() }
    }

    /// The global slot of `link`'s local slot `local`, if it has one.
    pub(crate) fn global(&self, link: usize, local: u32) -> Option<u32> {
        self.owner.iter().position(|o| *o == Some((link as u8, local as u8))).map(|g| g as u32)
    }

    /// The global slot for `link`'s newly granted local slot `local` (the one it had, if
    /// the daemon reuses a slot), or `None` when all 64 are taken.
    pub(crate) fn claim(&mut self, link: usize, local: u32) -> Option<u32> {
        if local >= MAX_CHANNELS {
            return None;
        }
        if let Some(g) = self.global(link, local) {
            return Some(g);
        }
        let top = MAX_CHANNELS - 1;
        let preferred = if link == OWN { local } else { top - local };
        let g = if self.owner[preferred as usize].is_none() {
            Some(preferred)
        } else if link == OWN {
            (0..MAX_CHANNELS).find(|g| self.owner[*g as usize].is_none())
        } else {
            (0..MAX_CHANNELS).rev().find(|g| self.owner[*g as usize].is_none())
        }?;
        self.owner[g as usize] = Some((link as u8, local as u8));
        Some(g)
    }

    /// Unmaps `link`'s local slot `local`; its former global slot.
    pub(crate) fn release(&mut self, link: usize, local: u32) -> Option<u32> {
        let g = self.global(link, local)?;
        self.owner[g as usize] = None;
        Some(g)
    }

    /// The global slots of `link`'s channels, as mask bits.
    pub(crate) fn slots_of(&self, link: usize) -> u64 {
        self.owner.iter().enumerate().filter(|(_, o)| o.is_some_and(|(l, _)| l as usize == link)).fold(0, |m, (g, _)| m | 1u64 << g)
    }

    /// `link`'s local slot bits `local` as global ones (bits without a channel dropped).
    pub(crate) fn translate(&self, link: usize, local: u64) -> u64 {
        if local == 0 {
            return 0;
        }
        self.owner.iter().enumerate().fold(0, |m, (g, o)| match o {
            Some((l, s)) if *l as usize == link && local & (1u64 << s) != 0 => m | 1u64 << g,
            _ => m,
        })
    }

    /// Records what `link`'s daemon enabled (already checked for ranges).
    pub(crate) fn set_enabled(&mut self, link: usize, masks: Vec<u64>, filters: Vec<EventFilter>, max_level: Option<u8>) {
        self.en[link] = Enablement { masks, filters, max_level: Some(max_level) };
    }

    /// Forgets `link`'s daemon: its enablement, and its channels, unlinked and retired.
    /// Returns how many channels it had. Call [`State::apply`] after.
    pub(crate) fn forget(&mut self, link: usize) -> usize {
        self.en[link] = Enablement::default();
        let mut n = 0;
        for g in 0..MAX_CHANNELS {
            if self.owner[g as usize].is_some_and(|(l, _)| l as usize == link) {
                self.owner[g as usize] = None;
                for s in site::all() {
                    s.clear_bits(1u64 << g);
                }
                if let Some(ch) = channel::take(g) {
                    channel::retire(ch);
                    n += 1;
                }
            }
        }
        n
    }

    /// Sets every call site's mask and filter from both daemons' enablement, and the level
    /// summary the `tracing` layer reads. Returns `(enabled sites, filtered sites)`.
    pub(crate) fn apply(&self) -> (usize, usize) {
        let n = self.en.iter().map(|e| e.masks.len()).max().unwrap_or(0);
        let mut masks = vec![0u64; n];
        let mut per_event: BTreeMap<u32, Vec<(u32, Vec<ust_core::filter::Expr>)>> = BTreeMap::new();
        for (link, en) in self.en.iter().enumerate() {
            for (m, local) in masks.iter_mut().zip(&en.masks) {
                *m |= self.translate(link, *local);
            }
            for f in &en.filters {
                let Some(g) = self.global(link, f.slot) else { continue };
                if (f.event as usize) < en.masks.len() {
                    per_event.entry(f.event).or_default().push((g, f.any_of.clone()));
                }
            }
        }
        // A bad filter is never run: its channel bits are cleared (the event is not
        // recorded there) and UST_DEBUG says why.
        let mut built: Vec<Option<SiteFilter>> = (0..n).map(|_| None).collect();
        for (ev, list) in per_event {
            let Some(s) = site::all().nth(ev as usize) else { continue };
            let bits: u64 = list.iter().fold(0, |m, (slot, _)| m | (1u64 << slot));
            match SiteFilter::build(s.desc(), list) {
                Ok(f) => built[ev as usize] = f,
                Err(e) => {
                    debug!("filter of {} rejected ({e}): not recorded in the filtered channel(s)", s.desc().full_name());
                    masks[ev as usize] &= !bits;
                }
            }
        }
        let nfiltered = built.iter().filter(|f| f.is_some()).count();
        let mut built = built.into_iter();
        for (i, s) in site::all().enumerate() {
            // Sites past every daemon's masks (made at run time, not yet registered) stay
            // disabled until a daemon sends longer ones.
            let (m, f) = if i < n { (masks[i], built.next().flatten()) } else { (0, None) };
            if m != s.mask() || f.is_some() || s.filter().is_some() {
                s.set_mask_and_filter(m, f);
            }
        }
        super::set_enabled_max_level(self.max_level());
        super::masks_changed();
        (masks.iter().filter(|m| **m != 0).count(), nfiltered)
    }

    /// Both daemons' level summaries as one: unknown if one that spoke did not say (or none
    /// spoke), else the most verbose level either enables ([`NO_LEVEL`] if neither enables
    /// any).
    fn max_level(&self) -> Option<u8> {
        let said: Vec<Option<u8>> = self.en.iter().filter_map(|e| e.max_level).collect();
        if said.is_empty() || said.iter().any(Option::is_none) {
            return None;
        }
        let levels = said.into_iter().flatten().filter(|l| *l != NO_LEVEL);
        Some(levels.max().unwrap_or(NO_LEVEL))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_daemon_gets_its_own_global_slots() {
        let mut st = State::new();
        assert_eq!(st.claim(OWN, 0), Some(0));
        assert_eq!(st.claim(SYSTEM, 0), Some(63));
        assert_eq!(st.claim(SYSTEM, 1), Some(62));
        // The own daemon's slot 63 is taken by root's slot 0: the first free one instead.
        assert_eq!(st.claim(OWN, 63), Some(1));
        // A reused local slot keeps its global one.
        assert_eq!(st.claim(SYSTEM, 1), Some(62));
        assert_eq!(st.global(OWN, 63), Some(1));
        assert_eq!(st.slots_of(SYSTEM), (1 << 63) | (1 << 62));
        assert_eq!(st.slots_of(OWN), 0b11);
        // Bits of one daemon's mask map to its own channels only.
        assert_eq!(st.translate(SYSTEM, 0b11), (1 << 63) | (1 << 62));
        assert_eq!(st.translate(OWN, 1 | 1 << 63), 0b11);
        assert_eq!(st.translate(OWN, 0b100), 0, "a bit with no channel is dropped");
        assert_eq!(st.release(SYSTEM, 0), Some(63));
        assert_eq!(st.translate(SYSTEM, 0b11), 1 << 62);
        assert_eq!(st.claim(OWN, 64), None, "out of range");
    }

    #[test]
    fn the_table_fills_up_without_overlap() {
        let mut st = State::new();
        for s in 0..32 {
            assert!(st.claim(OWN, s).is_some());
            assert!(st.claim(SYSTEM, s).is_some());
        }
        assert_eq!(st.slots_of(OWN) & st.slots_of(SYSTEM), 0);
        assert_eq!(st.slots_of(OWN) | st.slots_of(SYSTEM), u64::MAX);
        assert_eq!(st.claim(SYSTEM, 40), None, "all 64 taken");
    }

    #[test]
    fn levels_of_both_daemons_combine() {
        let mut st = State::new();
        assert_eq!(st.max_level(), None, "nobody spoke");
        st.set_enabled(OWN, vec![], vec![], Some(NO_LEVEL));
        assert_eq!(st.max_level(), Some(NO_LEVEL));
        st.set_enabled(SYSTEM, vec![], vec![], Some(6));
        assert_eq!(st.max_level(), Some(6));
        st.set_enabled(OWN, vec![], vec![], Some(13));
        assert_eq!(st.max_level(), Some(13));
        st.set_enabled(SYSTEM, vec![], vec![], None);
        assert_eq!(st.max_level(), None, "a daemon that does not say makes it unknown");
    }
}
