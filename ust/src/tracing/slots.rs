//! The live spans of [`UstSubscriber`](super::UstSubscriber): a slot per span, holding its
//! reference count and its callsite's sites, found from the span's id with no lock and
//! no hashing.
//!
//! ```text
//! span id (u64) = generation (32 bits) << 32 | slot index + 1 (32 bits)
//! slot          = state: AtomicU64 (generation << 32 | references), sites: AtomicPtr
//! slots         = buckets of 64, 128, 256, ... slots (made when first needed, never freed)
//! ```
//!
//! A slot is live while its references are above 0. `new_span` takes a free slot, stores
//! the sites, then the state (generation, 1) with Release; `clone_span` adds a reference
//! and `try_close` drops one with a compare-and-swap that checks the generation, so an id
//! whose span has closed (no references, then its slot's generation moved on) matches
//! nothing: a stale id is ignored, never mistaken for the span that reuses its slot (until
//! the generation wraps, after 2^32 spans in that slot). After the last close has recorded
//! `_close`, the slot moves to the next generation and its index is freed.
//!
//! Free indices are kept per thread (a span is most often closed on the thread that made
//! it, which then reuses the slot while its line is in cache), spilled to a locked global
//! list past [`KEEP`] and given back there when the thread ends; a thread whose list is
//! empty takes [`REFILL`] from the global list, or a run of fresh indices. The ids of a
//! program's first spans are 1, 2, 3..., as `tracing_subscriber::Registry`'s are.

use std::cell::RefCell;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;

use super::sites::Sites;

/// Slots in the first bucket (a power of two); bucket `b` holds `BASE << b`.
const BASE: usize = 64;
/// Buckets: enough for every index below [`MAX_INDEX`].
const BUCKETS: usize = 27;
/// Indices handed out stay below this: the index part of [`INERT`] is this one.
const MAX_INDEX: u64 = u32::MAX as u64 - 1;
/// Indices moved at once between a thread's free list and the global one.
const REFILL: usize = 32;
/// Free indices a thread keeps; past this, half go to the global list.
const KEEP: usize = 256;

/// The id of a span that has no slot (the indices ran out): a live span the slots know
/// nothing of, whose hooks record nothing. Its index part (`u32::MAX - 1`) is never handed out.
pub(super) const INERT: u64 = u32::MAX as u64;

struct Slot {
    /// Generation (upper 32 bits) and references (lower 32 bits).
    state: AtomicU64,
    /// The span's sites while live (a `&'static Sites`; null in a slot never used).
    sites: AtomicPtr<Sites>,
}

static BUCKET: [AtomicPtr<Slot>; BUCKETS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; BUCKETS];
/// The next fresh index.
static NEXT: AtomicU64 = AtomicU64::new(0);
/// Free indices no thread keeps.
static FREE: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// A thread's free indices, given back to [`FREE`] when the thread ends.
struct Local(Vec<u32>);

impl Drop for Local {
    fn drop(&mut self) {
        FREE.lock().unwrap_or_else(|e| e.into_inner()).append(&mut self.0);
    }
}

thread_local! {
    static LOCAL: RefCell<Local> = const { RefCell::new(Local(Vec::new())) };
}

/// `(bucket, offset)` of index `i`.
#[inline]
fn place(i: u32) -> (usize, usize) {
    let j = i as usize + BASE;
    let b = (usize::BITS - 1 - j.leading_zeros()) as usize - BASE.trailing_zeros() as usize;
    (b, j - (BASE << b))
}

/// The slot of index `i`, if its bucket exists.
#[inline]
fn slot(i: u32) -> Option<&'static Slot> {
    let (b, off) = place(i);
    let p = BUCKET.get(b)?.load(Ordering::Acquire);
    // SAFETY: a non-null bucket pointer is a leaked `Box<[Slot]>` of `BASE << b` slots,
    // published with Release by `slot_made` and never freed; `off < BASE << b` by `place`.
    (!p.is_null()).then(|| unsafe { &*p.add(off) })
}

/// The slot of index `i`, its bucket made if needed (for an index just handed out).
fn slot_made(i: u32) -> &'static Slot {
    if let Some(s) = slot(i) {
        return s;
    }
    let (b, _) = place(i);
    let fresh: Box<[Slot]> = (0..BASE << b).map(|_| Slot { state: AtomicU64::new(0), sites: AtomicPtr::new(std::ptr::null_mut()) }).collect();
    let fresh = Box::into_raw(fresh) as *mut Slot;
    if let Err(_other) = BUCKET[b].compare_exchange(std::ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
        // Another thread made it first: ours was never shared.
        // SAFETY: `fresh` came from `Box::into_raw` of a slice of `BASE << b` slots just above.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(fresh, BASE << b)) });
    }
    slot(i).expect("bucket made above")
}

/// Fills `v` with free indices: from the global list, else a run of fresh ones (in
/// descending order, so that pops hand them out ascending).
fn refill(v: &mut Vec<u32>) {
    {
        let mut free = FREE.lock().unwrap_or_else(|e| e.into_inner());
        let n = free.len().min(REFILL);
        let at = free.len() - n;
        v.extend(free.drain(at..));
    }
    if v.is_empty() {
        let start = NEXT.fetch_add(REFILL as u64, Ordering::Relaxed);
        v.extend((start..(start + REFILL as u64).min(MAX_INDEX)).rev().map(|i| i as u32));
    }
}

/// A free index, if any is left.
fn take_index() -> Option<u32> {
    LOCAL
        .try_with(|l| {
            let mut l = l.try_borrow_mut().ok()?;
            if l.0.is_empty() {
                refill(&mut l.0);
            }
            l.0.pop()
        })
        .ok()
        .flatten()
        .or_else(|| {
            // The thread is ending (its list is gone) or busy: a list of our own.
            let mut v = Vec::new();
            refill(&mut v);
            let i = v.pop();
            FREE.lock().unwrap_or_else(|e| e.into_inner()).append(&mut v);
            i
        })
}

/// Gives index `i` back.
fn give_index(i: u32) {
    let kept = LOCAL.try_with(|l| {
        let Ok(mut l) = l.try_borrow_mut() else { return false };
        l.0.push(i);
        if l.0.len() > KEEP {
            let spill = l.0.split_off(KEEP / 2);
            FREE.lock().unwrap_or_else(|e| e.into_inner()).extend(spill);
        }
        true
    });
    if kept != Ok(true) {
        FREE.lock().unwrap_or_else(|e| e.into_inner()).push(i);
    }
}

/// `(slot, generation)` of a live span's id.
#[inline]
fn decode(id: u64) -> Option<(&'static Slot, u32)> {
    let i = (id as u32).wrapping_sub(1);
    if u64::from(i) >= MAX_INDEX {
        return None;
    }
    Some((slot(i)?, (id >> 32) as u32))
}

/// A new live span of the callsite of `sites` with one reference: its id.
pub(super) fn create(sites: &'static Sites) -> u64 {
    let Some(i) = take_index() else { return INERT };
    let s = slot_made(i);
    // The slot is free (no references) and ours alone until the store below publishes it.
    let generation = (s.state.load(Ordering::Relaxed) >> 32) as u32;
    s.sites.store(sites as *const Sites as *mut Sites, Ordering::Relaxed);
    s.state.store(u64::from(generation) << 32 | 1, Ordering::Release);
    u64::from(generation) << 32 | (u64::from(i) + 1)
}

/// The sites of live span `id`.
#[inline]
pub(super) fn get(id: u64) -> Option<&'static Sites> {
    let (s, generation) = decode(id)?;
    let st = s.state.load(Ordering::Acquire);
    if (st >> 32) as u32 != generation || st as u32 == 0 {
        return None;
    }
    // SAFETY: null or a `&'static Sites` stored by `create` before the Release store of
    // the state the Acquire load above read (sites are leaked, never freed).
    unsafe { s.sites.load(Ordering::Relaxed).as_ref() }
}

/// Whether `id` is a live span.
#[inline]
pub(super) fn is_live(id: u64) -> bool {
    get(id).is_some()
}

/// One more reference to live span `id` (nothing for an id that is not live).
pub(super) fn clone(id: u64) {
    let Some((s, generation)) = decode(id) else { return };
    let mut st = s.state.load(Ordering::Relaxed);
    loop {
        let refs = st as u32;
        if (st >> 32) as u32 != generation || refs == 0 || refs == u32::MAX {
            return;
        }
        match s.state.compare_exchange_weak(st, st + 1, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return,
            Err(now) => st = now,
        }
    }
}

/// Drops a reference to live span `id`; the span's sites when it was the last one: the
/// span is closed (no longer live), and the caller then gives its slot back with [`free`].
pub(super) fn close(id: u64) -> Option<&'static Sites> {
    let (s, generation) = decode(id)?;
    let mut st = s.state.load(Ordering::Acquire);
    // SAFETY: null or a `&'static Sites` stored by `create` before the Release store of a
    // live state; checked live (generation, references) in the loop before it is returned.
    let sites = unsafe { s.sites.load(Ordering::Relaxed).as_ref() }?;
    loop {
        let refs = st as u32;
        if (st >> 32) as u32 != generation || refs == 0 {
            return None;
        }
        match s.state.compare_exchange_weak(st, st - 1, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) if refs == 1 => return Some(sites),
            Ok(_) => return None,
            Err(now) => st = now,
        }
    }
}

/// Frees the slot of span `id`, which [`close`] closed (after its `_close` event, so that
/// the event comes before any event of the span that takes the slot next).
pub(super) fn free(id: u64) {
    let Some((s, generation)) = decode(id) else { return };
    // Closed: no reference left, and none can be taken (`clone` refuses a slot without
    // references), so the state is ours to set.
    s.state.store(u64::from(generation.wrapping_add(1)) << 32, Ordering::Release);
    give_index((id as u32).wrapping_sub(1));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_cover_the_indices_without_overlap() {
        assert_eq!(place(0), (0, 0));
        assert_eq!(place(63), (0, 63));
        assert_eq!(place(64), (1, 0));
        assert_eq!(place(191), (1, 127));
        assert_eq!(place(192), (2, 0));
        let (b, off) = place((MAX_INDEX - 1) as u32);
        assert!(b == BUCKETS - 1 && off < BASE << b, "the last index is in the last bucket");
        assert_eq!((INERT as u32).wrapping_sub(1) as u64, MAX_INDEX, "the inert id has no slot");
    }

    #[test]
    fn references_close_once_and_stale_ids_match_nothing() {
        let sites = super::super::sites::test_sites(super::super::sites::test_meta(&[]), 7);
        let id = create(sites);
        assert_eq!(get(id).map(|s| s.ip), Some(7));
        clone(id);
        assert!(close(id).is_none(), "one reference left");
        assert!(is_live(id));
        assert_eq!(close(id).map(|s| s.ip), Some(7), "the last reference closes it");
        assert!(!is_live(id));
        assert!(close(id).is_none(), "closed, not yet freed");
        free(id);
        assert!(close(id).is_none(), "closed already");
        clone(id);
        assert!(!is_live(id), "a stale id gains no reference");
        // The thread reuses the slot first, with the next generation.
        let again = create(sites);
        assert_eq!(again as u32, id as u32);
        assert_eq!(again >> 32, (id >> 32) + 1);
        assert!(get(id).is_none() && close(id).is_none(), "the old id is not the new span");
        assert!(close(again).is_some());
        free(again);
        for bad in [0, INERT, u64::MAX, 1 << 40] {
            assert!(get(bad).is_none() && close(bad).is_none(), "{bad:#x}");
            clone(bad);
        }
    }

    #[test]
    fn spans_closed_on_other_threads_free_their_slots_for_everyone() {
        let sites = super::super::sites::test_sites(super::super::sites::test_meta(&[]), 1);
        let ids: Vec<u64> = (0..1000).map(|_| create(sites)).collect();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "live spans have distinct ids");
        let closer = {
            let ids = ids.clone();
            std::thread::spawn(move || {
                ids.iter()
                    .filter(|&&id| {
                        let last = close(id).is_some();
                        if last {
                            free(id);
                        }
                        last
                    })
                    .count()
            })
        };
        assert_eq!(closer.join().unwrap(), 1000, "each closed once, on another thread");
        assert!(ids.iter().all(|&id| !is_live(id)));
    }
}
