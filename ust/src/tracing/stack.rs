//! The spans the calling thread is in: a per-thread stack of the spans entered and not yet
//! exited, each with its owner, its id and its callsite's sites, kept by the layer and the
//! subscriber from their enter and exit hooks. It gives the contextual parent of a new span,
//! the span a thread returns to on exit (the `span_id` context, [`crate::context::set_span`])
//! and the sites of the span being exited, without asking a span registry.
//!
//! ```text
//! entry = (owner, id, sites)     owner: a layer's number (super::known::next_layer),
//!                                or SUBSCRIBER for ust's subscriber
//! ```
//!
//! Ids are the dispatcher's: two registries on one thread (a scoped dispatcher beside the
//! global one) hand out the same ids, and ust's subscriber its own, so an entry is matched
//! by owner and id together; a new span's contextual parent is the innermost span of its
//! own owner (the one its registry calls current), and an exit takes its own owner's entry
//! even when another dispatcher's span of the same id was entered after it. The `span_id`
//! context is the thread's: the innermost span of any owner.
//!
//! `tracing` exits spans in any order (a guard dropped early, a future's span entered in
//! one poll and another span exited in between): an exit removes the topmost entry of
//! that span wherever it lies. A span entered twice is on the stack twice and needs two
//! exits. An exit of a span this thread never entered (a misuse `tracing` allows) leaves
//! the stack as it is. Spans closed on another thread are no concern here: a span is
//! entered and exited on one thread (an `#[instrument]`ed future is entered and exited
//! around each poll, on the thread that polls it), so an entry never outlives its span in
//! a correct program; the subscriber still checks that the span it reads here is live.

use std::cell::RefCell;

use super::sites::Sites;

/// The owner of the spans of ust's subscriber (its ids are unique in the process, whatever
/// the number of subscribers); layers are numbered from 1 up, 0 for a layer that never
/// joined a subscriber.
pub(super) const SUBSCRIBER: u64 = u64::MAX;

/// One entered span: its owner, its id, its callsite's sites.
type Entry = (u64, u64, &'static Sites);

thread_local! {
    static ENTERED: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// The thread enters span `id` of `owner`, of the callsite of `sites`: pushed, and the
/// thread's `span_id` context is `id`.
#[inline]
pub(super) fn enter(owner: u64, id: u64, sites: &'static Sites) {
    crate::context::set_span(id);
    let _ = ENTERED.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.push((owner, id, sites));
        }
    });
}

/// The thread leaves span `id` of `owner`: its topmost entry is removed, and the `span_id`
/// context is the span on top after that (of any owner; 0: none). The sites of the removed
/// entry, if any.
#[inline]
pub(super) fn exit(owner: u64, id: u64) -> Option<&'static Sites> {
    ENTERED
        .try_with(|s| {
            let mut s = s.try_borrow_mut().ok()?;
            let gone = match s.last() {
                Some(&(o, top, sites)) if top == id && o == owner => {
                    s.pop();
                    Some(sites)
                }
                _ => s.iter().rposition(|e| e.1 == id && e.0 == owner).map(|i| s.remove(i).2),
            };
            crate::context::set_span(s.last().map_or(0, |e| e.1));
            gone
        })
        .ok()
        .flatten()
}

/// The innermost span of `owner` the thread is in for which `live` holds: its id and sites.
#[inline]
pub(super) fn current(owner: u64, live: impl Fn(u64) -> bool) -> Option<(u64, &'static Sites)> {
    ENTERED.try_with(|s| s.try_borrow().ok()?.iter().rev().find(|e| e.0 == owner && live(e.1)).map(|e| (e.1, e.2))).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sites() -> &'static Sites {
        super::super::sites::test_sites(super::super::sites::test_meta(&[]), 0)
    }

    fn span_ctx() -> u64 {
        crate::context::span()
    }

    const O: u64 = 1;

    #[test]
    fn exits_in_any_order_leave_the_innermost_remaining_span_current() {
        let s = sites();
        enter(O, 1, s);
        enter(O, 2, s);
        enter(O, 3, s);
        assert_eq!(span_ctx(), 3);
        assert!(exit(O, 2).is_some(), "out of order: 2 leaves from under 3");
        assert_eq!((current(O, |_| true).map(|e| e.0), span_ctx()), (Some(3), 3));
        assert!(exit(O, 3).is_some());
        assert_eq!((current(O, |_| true).map(|e| e.0), span_ctx()), (Some(1), 1));
        assert!(exit(O, 9).is_none(), "a span this thread never entered");
        assert_eq!(span_ctx(), 1);
        assert!(current(O, |id| id != 1).is_none(), "a span that is not live is skipped");
        assert!(exit(O, 1).is_some());
        assert_eq!((current(O, |_| true).map(|e| e.0), span_ctx()), (None, 0));
    }

    #[test]
    fn a_span_entered_twice_needs_two_exits() {
        let s = sites();
        enter(O, 5, s);
        enter(O, 5, s);
        assert!(exit(O, 5).is_some());
        assert_eq!(current(O, |_| true).map(|e| e.0), Some(5));
        assert!(exit(O, 5).is_some());
        assert!(current(O, |_| true).is_none());
    }

    #[test]
    fn spans_of_two_owners_with_one_id_keep_their_own_entries() {
        let (a, b) = (sites(), sites());
        enter(O, 1, a);
        enter(O + 1, 1, b);
        enter(SUBSCRIBER, 1, b);
        assert_eq!(current(O, |_| true).map(|e| std::ptr::eq(e.1, a)), Some(true), "O's own span 1");
        assert!(current(O + 2, |_| true).is_none(), "an owner with no span entered");
        assert!(exit(O, 1).is_some_and(|s| std::ptr::eq(s, a)), "O's entry, from under the others");
        assert_eq!(span_ctx(), 1, "the thread is still in the others' spans 1");
        assert!(current(O, |_| true).is_none());
        assert!(exit(O, 1).is_none(), "O entered span 1 once");
        assert!(exit(SUBSCRIBER, 1).is_some_and(|s| std::ptr::eq(s, b)));
        assert!(exit(O + 1, 1).is_some_and(|s| std::ptr::eq(s, b)));
        assert_eq!((current(O + 1, |_| true).map(|e| e.0), span_ctx()), (None, 0));
    }
}
