//! The spans the calling thread is in: a per-thread stack of the spans entered and not yet
//! exited, each with its callsite's sites, kept by the layer and the subscriber from their
//! enter and exit hooks. It gives the contextual parent of a new span, the span a thread
//! returns to on exit (the `span_id` context, [`crate::context::set_span`]) and the sites of
//! the span being exited, without asking a span registry.
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

thread_local! {
    static ENTERED: RefCell<Vec<(u64, &'static Sites)>> = const { RefCell::new(Vec::new()) };
}

/// The thread enters span `id` of the callsite of `sites`: pushed, and the thread's
/// `span_id` context is `id`.
#[inline]
pub(super) fn enter(id: u64, sites: &'static Sites) {
    crate::context::set_span(id);
    let _ = ENTERED.try_with(|s| {
        if let Ok(mut s) = s.try_borrow_mut() {
            s.push((id, sites));
        }
    });
}

/// The thread leaves span `id`: its topmost entry is removed, and the `span_id` context is
/// the span on top after that (0: none). The sites of the removed entry, if any.
#[inline]
pub(super) fn exit(id: u64) -> Option<&'static Sites> {
    ENTERED
        .try_with(|s| {
            let mut s = s.try_borrow_mut().ok()?;
            let gone = match s.last() {
                Some(&(top, sites)) if top == id => {
                    s.pop();
                    Some(sites)
                }
                _ => s.iter().rposition(|e| e.0 == id).map(|i| s.remove(i).1),
            };
            crate::context::set_span(s.last().map_or(0, |e| e.0));
            gone
        })
        .ok()
        .flatten()
}

/// The innermost span the thread is in for which `live` holds, with its sites.
#[inline]
pub(super) fn current(live: impl Fn(u64) -> bool) -> Option<(u64, &'static Sites)> {
    ENTERED.try_with(|s| s.try_borrow().ok()?.iter().rev().copied().find(|e| live(e.0))).ok().flatten()
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

    #[test]
    fn exits_in_any_order_leave_the_innermost_remaining_span_current() {
        let s = sites();
        enter(1, s);
        enter(2, s);
        enter(3, s);
        assert_eq!(span_ctx(), 3);
        assert!(exit(2).is_some(), "out of order: 2 leaves from under 3");
        assert_eq!((current(|_| true).map(|e| e.0), span_ctx()), (Some(3), 3));
        assert!(exit(3).is_some());
        assert_eq!((current(|_| true).map(|e| e.0), span_ctx()), (Some(1), 1));
        assert!(exit(9).is_none(), "a span this thread never entered");
        assert_eq!(span_ctx(), 1);
        assert!(current(|id| id != 1).is_none(), "a span that is not live is skipped");
        assert!(exit(1).is_some());
        assert_eq!((current(|_| true).map(|e| e.0), span_ctx()), (None, 0));
    }

    #[test]
    fn a_span_entered_twice_needs_two_exits() {
        let s = sites();
        enter(5, s);
        enter(5, s);
        assert!(exit(5).is_some());
        assert_eq!(current(|_| true).map(|e| e.0), Some(5));
        assert!(exit(5).is_some());
        assert!(current(|_| true).is_none());
    }
}
