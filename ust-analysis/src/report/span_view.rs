//! The report's span view: what a `tracing`-instrumented program's spans took, from the
//! spans [`crate::spans`] pairs.
//!
//! Per span name (`provider:span`): how many spans (calls), how many times entered,
//! the duration of each span from `_new` to `_close` (p50, p90, p99, max; spans the trace
//! began or ended inside are counted apart, as incomplete, and left out of the durations),
//! and the busy and idle time, as `tracing-timing` and tokio-console split a task's: busy is
//! the time the span was entered (summed over its polls: for an `#[instrument]`ed future,
//! each poll), idle the rest of its life, between polls (waiting to be woken and polled
//! again) and around them. A synchronous span, entered once, is almost all busy.
//!
//! The span tree counts spans by their path of names from the root (`request` → `db_query`
//! → `fetch`): a parent is the span that was current when the child was created (`tracing`'s
//! contextual parent) or the one given explicitly.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::report::load::Loaded;
use crate::spans::{pair, Spans};

/// Spans of one name.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct SpanRow {
    /// `provider:span`.
    pub name: String,
    /// Spans of this name in the trace.
    pub calls: u64,
    /// Of which the trace holds no `_new` or no `_close` (left out of the times below).
    pub incomplete: u64,
    /// Times entered, complete spans only: an `#[instrument]`ed future is entered for each
    /// poll, and once more when it is dropped.
    pub entered: u64,
    /// Duration `_new` → `_close`, percentiles over the complete spans (ns).
    pub p50_ns: u64,
    /// 90th percentile (ns).
    pub p90_ns: u64,
    /// 99th percentile (ns).
    pub p99_ns: u64,
    /// Longest (ns).
    pub max_ns: u64,
    /// Time entered, summed over the complete spans (ns).
    pub busy_ns: u64,
    /// Their duration less their busy time, summed (ns).
    pub idle_ns: u64,
}

/// A span name in the span tree, under its parent's.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct SpanNode {
    /// `provider:span`.
    pub name: String,
    /// Spans of this name with this path of ancestors.
    pub calls: u64,
    /// Their children, by name.
    pub children: Vec<SpanNode>,
}

/// The span view.
#[derive(Clone, Debug, Serialize, PartialEq, Eq, Default)]
pub struct SpanView {
    /// Per span name, by name.
    pub spans: Vec<SpanRow>,
    /// The roots of the span tree (spans without a parent in the trace), by name.
    pub tree: Vec<SpanNode>,
}

/// Deepest path kept in the tree (deeper spans count at this depth).
const MAX_DEPTH: usize = 64;

/// The span view of `l`.
pub fn span_view(l: &Loaded) -> SpanView {
    view(&pair(l))
}

/// The span view of paired spans.
pub fn view(s: &Spans) -> SpanView {
    let name = |i: usize| format!("{}:{}", s.spans[i].provider, s.spans[i].name);
    // Per name: durations, and the counts.
    let mut by_name: BTreeMap<String, (Vec<u64>, SpanRow)> = BTreeMap::new();
    let mut paths: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for (i, sp) in s.spans.iter().enumerate() {
        let n = name(i);
        let (durations, row) = by_name.entry(n.clone()).or_insert_with(|| {
            (Vec::new(), SpanRow { name: n.clone(), calls: 0, incomplete: 0, entered: 0, p50_ns: 0, p90_ns: 0, p99_ns: 0, max_ns: 0, busy_ns: 0, idle_ns: 0 })
        });
        row.calls += 1;
        match sp.duration_ns() {
            Some(d) if sp.polls.iter().all(|p| !p.unfinished) => {
                let busy = sp.busy_ns();
                durations.push(d);
                row.entered += sp.polls.len() as u64;
                row.busy_ns += busy;
                row.idle_ns += d.saturating_sub(busy);
            }
            _ => row.incomplete += 1,
        }
        // The path of names from the root; a parent always comes before its child.
        let mut path = vec![n];
        let mut up = sp.parent;
        while let Some(p) = up.filter(|_| path.len() < MAX_DEPTH) {
            path.push(name(p));
            up = s.spans[p].parent;
        }
        path.reverse();
        *paths.entry(path).or_default() += 1;
    }
    let spans = by_name
        .into_values()
        .map(|(mut d, mut row)| {
            d.sort_unstable();
            row.p50_ns = crate::report::stats::percentile(&d, 0.5);
            row.p90_ns = crate::report::stats::percentile(&d, 0.9);
            row.p99_ns = crate::report::stats::percentile(&d, 0.99);
            row.max_ns = d.last().copied().unwrap_or(0);
            row
        })
        .collect();
    SpanView { spans, tree: tree(&paths) }
}

/// The nodes under the common prefix of `paths` (all of the same length-plus-one prefix).
fn tree(paths: &BTreeMap<Vec<String>, u64>) -> Vec<SpanNode> {
    fn children(paths: &BTreeMap<Vec<String>, u64>, prefix: &[String]) -> Vec<SpanNode> {
        let mut names: Vec<&String> = paths.keys().filter(|p| p.len() == prefix.len() + 1 && p.starts_with(prefix)).map(|p| &p[prefix.len()]).collect();
        names.dedup();
        names
            .into_iter()
            .map(|n| {
                let mut path = prefix.to_vec();
                path.push(n.clone());
                let calls = paths.get(&path).copied().unwrap_or(0);
                let children = children(paths, &path);
                SpanNode { name: n.clone(), calls, children }
            })
            .collect()
    }
    // A path whose ancestors have no path of their own (cut at MAX_DEPTH) still needs them.
    let mut all = paths.clone();
    for p in paths.keys() {
        for k in 1..p.len() {
            all.entry(p[..k].to_vec()).or_insert(0);
        }
    }
    children(&all, &[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spans::{Poll, Span};

    fn span(name: &str, parent: Option<usize>, created: Option<u64>, closed: Option<u64>, polls: &[(u64, u64)]) -> Span {
        Span {
            pid: 1,
            id: 1,
            provider: "app".into(),
            name: name.into(),
            parent,
            created,
            closed,
            field_events: Vec::new(),
            follows: Vec::new(),
            polls: polls.iter().map(|&(start, end)| Poll { tid: 1, start, end, unfinished: false }).collect(),
        }
    }

    #[test]
    fn busy_idle_percentiles_and_the_tree() {
        let s = Spans {
            spans: vec![
                // An async request polled three times: 30 busy, 70 idle.
                span("request", None, Some(0), Some(100), &[(0, 10), (40, 50), (90, 100)]),
                span("db", Some(0), Some(5), Some(8), &[(5, 8)]),
                span("db", Some(0), Some(41), Some(49), &[(41, 49)]),
                span("request", None, Some(200), Some(220), &[(200, 220)]),
                span("db", Some(3), Some(201), Some(202), &[(201, 202)]),
                // The trace ended inside this one.
                span("request", None, Some(300), None, &[(300, 310)]),
            ],
        };
        let v = view(&s);
        let req = &v.spans[1];
        assert_eq!((req.name.as_str(), req.calls, req.incomplete, req.entered), ("app:request", 3, 1, 4));
        assert_eq!((req.p50_ns, req.max_ns, req.busy_ns, req.idle_ns), (100, 100, 50, 70));
        let db = &v.spans[0];
        assert_eq!((db.calls, db.p50_ns, db.p90_ns, db.max_ns, db.busy_ns, db.idle_ns), (3, 3, 8, 8, 12, 0));
        assert_eq!(
            v.tree,
            vec![SpanNode { name: "app:request".into(), calls: 3, children: vec![SpanNode { name: "app:db".into(), calls: 3, children: vec![] }] }]
        );
    }
}
