//! The layer's spans by id, on the thread that made them: [`super::UstLayer`] notes each
//! span's sites when it is made ([`made`]) and finds them again on enter, record and
//! close ([`find`], [`closed`]) without asking the registry (a slab lookup, a reference
//! taken and dropped: about 160 instructions, twice per span).
//!
//! ```text
//! entry (per thread, direct-mapped by id) = (layer, id, epoch, sites)
//! valid  <=>  layer and id match, and epoch == EPOCH
//! EPOCH  += 1 whenever a span is closed on a thread with no valid entry for it
//! ```
//!
//! Registry ids are reused after a close, and a span made on one thread may be closed on
//! another, whose close cannot reach this thread's entry. So an entry is trusted only
//! while no span has been closed without its own entry since the entry was made: the
//! invariant is "a valid entry names a live span that this thread made, with that span's
//! sites". An entry is only ever made by the thread that made the span, for a span that is
//! live, so only that thread holds one for it. A close on that thread with its valid
//! entry clears the entry; any other close (another thread, an entry evicted by an id that
//! shares its slot, a thread being torn down) advances [`EPOCH`], which invalidates every
//! entry of every thread. A span that reuses the id is made after the registry frees the
//! old one's slot, which happens after the old span's `on_close` (the layer's, where the
//! epoch moved) and before anyone can learn the new id: whoever looks it up next sees the
//! new epoch. Ids of different registries (two `tracing` dispatchers on one thread) are
//! told apart by `layer`, a number given to each ust layer as it joins a subscriber (0,
//! a layer that never joined one through `on_layer`: no entries, always the registry).
//!
//! Two ust layers on one registry (a layer added twice) share each id's entry: the second
//! layer's evicts the first's, so the first finds its spans through the registry and each
//! close advances the epoch, dropping every thread's entries (correct, at the registry's
//! cost).
//!
//! In a program whose spans are closed on the threads that made them (synchronous code),
//! every enter and close is found here; where spans move between threads (an async
//! runtime), each such close sends every thread back to the registry until its next spans.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use super::sites::Sites;

/// Entries per thread (a power of two): indexed by the id's low bits, which the registry's
/// ids vary first (the index of the span's slot in its thread's shard).
const ENTRIES: usize = 64;

#[derive(Clone, Copy)]
struct Entry {
    /// The span's id; 0 (no registry id is 0) for no entry.
    id: u64,
    /// The layer's number ([`next_layer`]).
    layer: u64,
    /// [`EPOCH`] when the entry was made.
    epoch: u64,
    sites: Option<&'static Sites>,
}

const EMPTY: Entry = Entry { id: 0, layer: 0, epoch: 0, sites: None };

/// Advanced by each close that could leave a stale entry on some thread (see the module
/// docs).
///
/// Orderings: a thread that looks up a reused id learnt it through whatever made the new
/// span visible to it (the registry frees the old span's slot after `on_close`, where
/// the epoch moved, and the id reaches this thread through a channel, a lock, a spawn),
/// so the advance happens before the lookup and coherence alone makes the lookup see it:
/// `Relaxed` would do; `Acquire`/`Release` cost nothing more on x86 and say the intent.
/// An advance that races with [`made`] (another span's close) only makes the new entry
/// untrusted. Wrapping takes 2^64 advances.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// The next layer number; 0 is never handed out.
static LAYERS: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static KNOWN: [Cell<Entry>; ENTRIES] = const { [const { Cell::new(EMPTY) }; ENTRIES] };
}

/// A number of its own for a layer joining a subscriber (never 0).
pub(super) fn next_layer() -> u64 {
    LAYERS.fetch_add(1, Ordering::Relaxed)
}

#[inline]
fn slot(id: u64) -> usize {
    id as usize & (ENTRIES - 1)
}

/// Span `id` of layer `layer` was made on this thread, with `sites`.
#[inline]
pub(super) fn made(layer: u64, id: u64, sites: &'static Sites) {
    if layer == 0 {
        return;
    }
    let epoch = EPOCH.load(Ordering::Acquire);
    let _ = KNOWN.try_with(|k| k[slot(id)].set(Entry { id, layer, epoch, sites: Some(sites) }));
}

/// The sites of span `id` of layer `layer`, if this thread holds a valid entry for it.
#[inline]
pub(super) fn find(layer: u64, id: u64) -> Option<&'static Sites> {
    if layer == 0 {
        return None;
    }
    KNOWN
        .try_with(|k| {
            let e = k[slot(id)].get();
            if e.id == id && e.layer == layer && e.epoch == EPOCH.load(Ordering::Acquire) {
                e.sites
            } else {
                None
            }
        })
        .ok()
        .flatten()
}

/// Span `id` of layer `layer` is being closed on this thread: its sites if this thread
/// holds a valid entry for it (the entry is cleared); else `None`, and every entry of
/// every thread is made invalid.
#[inline]
pub(super) fn closed(layer: u64, id: u64) -> Option<&'static Sites> {
    if layer == 0 {
        return None;
    }
    let found = find(layer, id);
    let _ = KNOWN.try_with(|k| {
        let c = &k[slot(id)];
        if c.get().id == id {
            c.set(EMPTY);
        }
    });
    if found.is_none() {
        EPOCH.fetch_add(1, Ordering::Release);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sites(ip: u64) -> &'static Sites {
        super::super::sites::test_sites(super::super::sites::test_meta(&[]), ip)
    }

    fn ip(s: Option<&'static Sites>) -> Option<u64> {
        s.map(|s| s.ip)
    }

    /// `f`'s answer from a run during which no other test moved [`EPOCH`] (tests run in
    /// parallel, and a close elsewhere rightly invalidates this thread's entries).
    fn settled<T>(f: impl Fn() -> T) -> T {
        loop {
            let e = EPOCH.load(Ordering::SeqCst);
            let r = f();
            if EPOCH.load(Ordering::SeqCst) == e {
                return r;
            }
        }
    }

    #[test]
    fn a_span_made_and_closed_here_is_found_until_its_close() {
        let (l, other) = (next_layer(), next_layer());
        let got = settled(|| {
            made(l, 7, sites(1));
            (ip(find(l, 7)), ip(find(other, 7)), ip(closed(l, 7)), ip(find(l, 7)), ip(find(0, 7)))
        });
        // Found; not as another layer's span 7; found by its close, then gone; layer 0 never.
        assert_eq!(got, (Some(1), None, Some(1), None, None));
    }

    #[test]
    fn a_close_without_an_entry_invalidates_every_thread_s_entries() {
        let l = next_layer();
        let far = 3 + ENTRIES as u64;
        let got = settled(|| {
            made(l, 3, sites(3));
            made(l, far, sites(4));
            (ip(find(l, 3)), ip(find(l, far)))
        });
        assert_eq!(got, (None, Some(4)), "3 evicted by an id of the same slot");
        made(l, 5, sites(5));
        // Span 6 was made on another thread and is closed there: no entry there.
        std::thread::spawn(move || assert_eq!(ip(closed(l, 6)), None)).join().unwrap();
        assert_eq!(ip(find(l, 5)), None, "an entry older than a close elsewhere is not trusted");
        assert_eq!(ip(find(l, far)), None);
        let got = settled(|| {
            made(l, 5, sites(6));
            ip(find(l, 5))
        });
        assert_eq!(got, Some(6), "made again after the close: trusted");
    }

    #[test]
    fn an_id_closed_and_made_again_elsewhere_is_not_taken_for_the_old_span() {
        // Thread 1 (this one) made span A, id 1; thread 2 closes A (it holds no entry for
        // it), the registry hands id 1 to span B, made on thread 2 and entered here.
        let l = next_layer();
        made(l, 1, sites(10));
        let got = std::thread::spawn(move || {
            let closed_there = ip(closed(l, 1));
            let b = settled(|| {
                made(l, 1, sites(11));
                ip(find(l, 1))
            });
            (closed_there, b)
        })
        .join()
        .unwrap();
        assert_eq!(got, (None, Some(11)), "B found on the thread that made it");
        assert_eq!(ip(find(l, 1)), None, "not A's entry: B's sites come from the registry here");
        assert_eq!(ip(closed(l, 1)), None);
    }
}
