//! `ust report DIR`: what a traced program did, from the traces under `DIR` (kernel and
//! user space), rendered as text or JSON.
//!
//! - [`load`] merges the events of every trace of `DIR` in time order
//!   ([`crate::traces`]: ust's traces, LTTng's kernel and user-space traces), [`values`]
//!   turns their fields into the report's values and [`layout`] their names into one
//!   layout. Without a kernel trace, whose analyses need every event, the events are
//!   counted as they come ([`user_view::UserTally`], [`brief`]) and only the span events
//!   kept: the report of a user-space trace of any size holds a few numbers per event
//!   name and thread.
//! - [`analysis`] builds the [`model::Report`] (the structures `--format json` serializes):
//!   per task (events, runtime, time blocked),
//!   per system call ([`syscalls`]: count and errors by errno name as `strace -f -c` counts
//!   them, from the traced command's exec on; total, p50/p90/p99, max; per thread and per
//!   process; the slowest calls), with `--wakeups` each blocked interval of the traced
//!   threads longer than `--min-block` with what woke it, up the wake-up chain, and the
//!   blocking call with its descriptor named by path; with `--faults` ([`faults`]) the page
//!   faults per mapped file (minor, major, pages, bytes, time), each mapped to what was
//!   mapped at its time ([`addrspace`]), and, for `--faults FILE`, that file's faults in
//!   time order; ust's own activity ([`tracer`]: its threads, the constructor's wait) apart
//!   from the program's tables; and, from the program's own tracepoints ([`user_view`]),
//!   per event counts and rates and per thread gaps (the whole report when the trace has no
//!   kernel events);
//!   from the `tracing` layer's span events, [`span_view`]: per span name, durations and
//!   busy/idle time, and the span tree; from the dynamic probes' events ([`probes`]: `ust
//!   trace --userspace-probe`), per probed function the calls and, with its return probe,
//!   their durations (p50/p90/p99/max), and in root's traces their callers
//!   ([`probe_stacks`]: `--probe-flamegraph FILE.svg`).
//! - [`loss`] judges what the kernel trace lost against the traced tree: the report's
//!   first lines say whether any of the tree's events, or the context a wake-up chain
//!   needs, may have fallen in a lossy range ("0 of the traced tree's events lost"
//!   otherwise).
//! - [`render_text`] draws it for a terminal (wake-up chains as an indented tree);
//!   `serde_json` renders the same structure for `--format json`; [`pictures`] draws the
//!   blocked intervals as folded stacks (`--format folded`) and an off-wake flame graph
//!   (`--flamegraph FILE.svg`, with `inferno`).

pub mod addrspace;
pub mod analysis;
pub mod brief;
pub mod call_text;
pub mod errno;
pub mod event;
pub mod fast_hash;
pub mod faults;
pub mod fdtable;
pub mod layout;
pub mod load;
pub mod loss;
pub mod model;
pub mod pictures;
pub mod probe_shape;
pub mod probe_stacks;
pub mod probes;
pub mod saved_maps;
pub mod select;
pub mod span_view;
pub mod stacks;
pub mod stats;
pub mod symbols;
pub mod syscalls;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tiers;
pub mod tracer;
pub mod user_view;
pub mod values;

use std::fmt::Write as _;
use std::path::Path;

pub use analysis::{Options, Report};

/// Loads `dir` and analyzes it.
///
/// # Errors
/// A message when `dir` holds no trace, or no process has the name `opt.procname`.
pub fn report(dir: &Path, opt: &Options) -> Result<Report, String> {
    let set = crate::traces::TraceSet::open(dir)?;
    // Without a kernel trace the report is the user-space view: counted as the events
    // come, for a trace of any size; only the span events are kept.
    let user_only = set.members.iter().all(|m| m.origin.domain != load::Domain::Kernel);
    if user_only && user_view::countable(&set) {
        let c = user_view::load_counted(&set);
        let mut opt = opt.clone();
        let others = choose(&c.loaded, &mut opt)?;
        if let Some(mut r) = analysis::analyze_user(&c, &opt) {
            end_notes(&mut r, &c.loaded, &opt, &others);
            return Ok(r);
        }
        // A thread in two traces at once, or a damaged trace's events out of order: the
        // counts cannot give the view, the events are read whole.
    }
    let l = load::load_set(&set);
    let mut opt = opt.clone();
    let others = choose(&l, &mut opt)?;
    let mut r = analysis::analyze(&l, dir, &opt);
    end_notes(&mut r, &l, &opt, &others);
    // Freeing every event is a fifth of a kernel trace's report: off the caller's path.
    std::thread::spawn(move || drop(l));
    Ok(r)
}

/// `--procname`: sets `opt.pid` to the busiest process of the name; the others of the name.
///
/// # Errors
/// No process has the name.
fn choose(l: &load::Loaded, opt: &mut Options) -> Result<Vec<i32>, String> {
    let Some(name) = &opt.procname else { return Ok(Vec::new()) };
    let (pid, others) = select::by_name(l, name)?;
    opt.pid = Some(pid);
    Ok(others)
}

/// The notes on what the report is about and what it could not read: the process chosen by
/// name (first), the records skipped, how the system calls' arguments were captured.
fn end_notes(r: &mut Report, l: &load::Loaded, opt: &Options, others: &[i32]) {
    if let (Some(name), Some(pid)) = (&opt.procname, opt.pid) {
        let also = if others.is_empty() { String::new() } else { format!("; also named so: {:?} (choose one with --pid)", others) };
        r.notes.insert(0, format!("the process named {name:?} with the most events: pid {pid}{also}"));
    }
    if l.problems > 0 {
        let first = l.first_problem.as_ref().map(|p| format!("; the first: {p}")).unwrap_or_default();
        r.notes.push(format!("{} packet(s) or record(s) could not be read and were skipped{first}", l.problems));
    }
    if let Some(n) = l.kernel_env.as_ref().and_then(call_text::capture_note) {
        r.notes.push(n);
    }
}

/// A duration in ns as text: `812 ns`, `12.345 us`, `3.210 ms`, `1.500 s`.
pub fn dur(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{:.3} us", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.3} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

fn waker_text(w: &analysis::Waker) -> String {
    use analysis::Waker::*;
    match w {
        Irq { irq, handler, cpu } => format!("IRQ {irq} ({handler}) on CPU {cpu}"),
        Softirq { softirq, cpu } => format!("softirq {softirq} on CPU {cpu}"),
        TimerInterrupt { hrtimer_function, cpu } => match hrtimer_function {
            Some(f) => format!("timer interrupt (local APIC timer, hrtimer callback {f}) on CPU {cpu}"),
            None => format!("timer interrupt (local APIC timer) on CPU {cpu}"),
        },
        Task { tid, name, doing, cpu, ust: None, .. } => format!("task {name} [{tid}] {doing} on CPU {cpu}"),
        Task { tid, name, doing, cpu, ust: Some(r), .. } => format!("task {name} [{tid}] ({}) {doing} on CPU {cpu}", r.label()),
        OtherUser { cpu } => format!("{} on CPU {cpu}", ust_kernel::filter::OTHER_USER),
        KernelThread { cpu } => format!("{} on CPU {cpu}", ust_kernel::filter::KERNEL_THREAD),
        Unknown => "unknown (no wake-up event in the trace)".into(),
        NeedsRoot => "unknown (needs root's ust-consumerd)".into(),
    }
}

fn wait_text(out: &mut String, w: &analysis::Wait, start: u64, indent: usize) {
    let pad = "  ".repeat(indent);
    let _ = writeln!(
        out,
        "{pad}{} [{}] blocked {} in {}{} (at +{:.6} s)",
        w.name,
        w.tid,
        dur(w.duration_ns),
        w.blocked_in,
        w.call.as_ref().map(|c| format!(": {c}")).unwrap_or_default(),
        w.start_ns.saturating_sub(start) as f64 / 1e9
    );
    let lat = w.wakeup_latency_ns.map(|l| format!(", ran {}{} later", if w.end_inferred { "at most " } else { "" }, dur(l))).unwrap_or_default();
    let _ = writeln!(out, "{pad}  <- woken by: {}{lat}", waker_text(&w.woken_by));
    if let Some(why) = &w.ust {
        let _ = writeln!(out, "{pad}  ust's: {why}");
    }
    for (i, f) in w.stack.iter().enumerate() {
        let _ = writeln!(out, "{pad}     #{i:<2} {}", f.text());
    }
    if let analysis::Waker::Task { chain: Some(c), .. } = &w.woken_by {
        wait_text(out, c, start, indent + 2);
    }
}

/// The report as text.
pub fn render_text(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Trace: {} of events, traced pid {}{}",
        dur(r.span_ns),
        r.traced_pid,
        if r.kernel { ", kernel and user space" } else { ", user space only" }
    );
    if let Some(k) = &r.kernel_loss {
        s.push_str(&loss::text(k, r.start_ns));
    }
    if r.kernel {
        let _ = writeln!(s, "\nTasks of the traced command:");
        let _ = writeln!(s, "  {:>7}  {:<16} {:>8} {:>14} {:>14}", "TID", "NAME", "EVENTS", "RUNTIME", "BLOCKED");
        for t in &r.tasks {
            let _ = writeln!(s, "  {:>7}  {:<16} {:>8} {:>14} {:>14}", t.tid, t.name, t.events, dur(t.runtime_ns), dur(t.blocked_ns));
        }
    }
    // Tier 1 without its system-call view records none: no empty tables (its note says why).
    if r.kernel && !r.syscalls.is_empty() {
        let by = r.syscall_source.as_deref().map(|x| format!(" (recorded with {x})")).unwrap_or_default();
        let _ = writeln!(s, "\nSystem calls of the traced command{by}:");
        let _ = writeln!(s, "  {:<20} {:>7} {:>7} {:>13} {:>13} {:>13} {:>13} {:>13}", "SYSCALL", "COUNT", "ERRORS", "TOTAL", "P50", "P90", "P99", "MAX");
        for c in &r.syscalls {
            let _ = writeln!(
                s,
                "  {:<20} {:>7} {:>7} {:>13} {:>13} {:>13} {:>13} {:>13}",
                c.name,
                c.count,
                if c.errors > 0 { c.errors.to_string() } else { String::new() },
                dur(c.total_ns),
                dur(c.p50_ns),
                dur(c.p90_ns),
                dur(c.p99_ns),
                dur(c.max_ns)
            );
            if !c.errnos.is_empty() {
                let e: Vec<String> = c.errnos.iter().map(|(n, k)| format!("{n} x{k}")).collect();
                let _ = writeln!(s, "  {:<20} errors: {}", "", e.join(", "));
            }
        }
        syscall_totals(&mut s, r);
    }
    if let Some(w) = &r.wakeups {
        let _ = writeln!(s, "\nBlocked intervals ({} found):", w.len());
        for x in w {
            wait_text(&mut s, x, r.start_ns, 1);
        }
    }
    fault_summary(&mut s, r);
    if let (Some(f), None) = (&r.faults, &r.file_faults) {
        let _ = writeln!(s, "\nUser page faults ({}):", f.len());
        let _ = writeln!(s, "  {:>12} {:>7} {:>18} {:>18} {:>4} {:>12}  MAPPING", "AT (s)", "TID", "ADDRESS", "IP", "ERR", "UNTIL USER");
        for x in f {
            let _ = writeln!(
                s,
                "  {:>12.6} {:>7} {:>18} {:>18} {:>4} {:>12}  {}",
                x.ts_ns.saturating_sub(r.start_ns) as f64 / 1e9,
                x.tid,
                x.address,
                x.ip,
                // Tier 1 (which says major/minor) has no error code.
                if x.major.is_some() { "-".to_string() } else { x.error_code.to_string() },
                x.until_user_ns.map(dur).unwrap_or_else(|| "-".into()),
                x.mapping.as_deref().unwrap_or("(no maps)")
            );
            if let Some(f) = x.stack.iter().find(|f| !f.inlined) {
                let kind = match x.major {
                    Some(true) => "major, ",
                    Some(false) => "minor, ",
                    None => "",
                };
                let _ = writeln!(s, "  {:>12} {kind}in {}", "", f.text());
            }
        }
    }
    if !r.user.events.is_empty() {
        let _ = writeln!(s, "\nUser-space events:");
        for e in &r.user.events {
            let _ = writeln!(s, "  {:<40} {:>8} {:>12.1}/s", e.name, e.count, e.rate_per_s);
        }
        let _ = writeln!(s, "\nUser-space events per thread:");
        let _ = writeln!(s, "  {:>7} {:>7} {:<16} {:>8} {:>13} {:>13}", "PID", "TID", "PROCNAME", "EVENTS", "MEAN GAP", "MAX GAP");
        for t in &r.user.threads {
            let ust = t.ust.map(|r| format!("  ({})", r.label())).unwrap_or_default();
            let _ = writeln!(s, "  {:>7} {:>7} {:<16} {:>8} {:>13} {:>13}{ust}", t.pid, t.tid, t.procname, t.events, dur(t.mean_gap_ns), dur(t.max_gap_ns));
        }
    }
    probes_text(&mut s, &r.probes);
    tracer_text(&mut s, r);
    spans_text(&mut s, &r.spans);
    for n in &r.notes {
        let _ = writeln!(s, "\nNote: {n}");
    }
    s
}

/// ust's own activity: what was left out of the tables above, and with `--tracer` its
/// tables.
fn tracer_text(s: &mut String, r: &Report) {
    let t = &r.tracer;
    if t.tasks.is_empty() && t.calls == 0 && t.waits == 0 && t.faults == 0 {
        return;
    }
    let _ = writeln!(s, "\nust's own activity (left out of the tables above):");
    if !t.tasks.is_empty() {
        let _ = writeln!(s, "  {:>7} {:>7}  {:<16} {:<14} {:>8} {:>14} {:>14}", "PID", "TID", "NAME", "WHOSE", "EVENTS", "RUNTIME", "BLOCKED");
        for k in &t.tasks {
            let _ = writeln!(
                s,
                "  {:>7} {:>7}  {:<16} {:<14} {:>8} {:>14} {:>14}",
                k.pid,
                k.tid,
                k.name,
                k.role.label(),
                k.events,
                dur(k.runtime_ns),
                dur(k.blocked_ns)
            );
        }
    }
    let _ = writeln!(
        s,
        "  {} system call(s) ({}), {} wait(s) ({}), {} page fault(s){}",
        t.calls,
        dur(t.calls_ns),
        t.waits,
        dur(t.waits_ns),
        t.faults,
        if t.syscalls.is_empty() && t.wakeups.is_none() { "; `ust report --tracer` shows them" } else { "" }
    );
    if !t.syscalls.is_empty() {
        let _ = writeln!(s, "\n  ust's system calls:");
        let _ = writeln!(s, "  {:<20} {:>7} {:>7} {:>13} {:>13} {:>13}", "SYSCALL", "COUNT", "ERRORS", "TOTAL", "P50", "MAX");
        for c in &t.syscalls {
            let errors = if c.errors > 0 { c.errors.to_string() } else { String::new() };
            let _ = writeln!(s, "  {:<20} {:>7} {:>7} {:>13} {:>13} {:>13}", c.name, c.count, errors, dur(c.total_ns), dur(c.p50_ns), dur(c.max_ns));
        }
        let _ = writeln!(s, "\n  ust's system calls per thread:");
        for c in &t.syscall_threads {
            let _ = writeln!(s, "  {:>7} {:>7}  {:<16} {:>7} calls {:>13}", c.pid, c.tid, c.name, c.calls, dur(c.total_ns));
        }
        let _ = writeln!(s, "\n  ust's slowest system calls:");
        for c in &t.slowest_syscalls {
            let _ = writeln!(s, "  {:>13}  {} [{}] {} = {}", dur(c.duration_ns), c.thread, c.tid, c.call, c.ret);
        }
    }
    if let Some(w) = &t.wakeups {
        let _ = writeln!(s, "\n  ust's blocked intervals ({} found):", w.len());
        for x in w {
            wait_text(s, x, r.start_ns, 2);
        }
    }
}

/// The probe view: per probed function, its calls and, with its return probe, their
/// durations.
fn probes_text(s: &mut String, rows: &[probes::ProbeRow]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(s, "\nProbed functions (uprobes): calls, and entry to return with a %return probe:");
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0).max(5);
    let _ = writeln!(
        s,
        "  {:<width$} {:>8} {:>7} {:>8} {:>10} {:>12} {:>12} {:>12} {:>12}",
        "PROBE", "CALLS", "THREADS", "RETURNED", "UNFINISHED", "P50", "P90", "P99", "MAX"
    );
    for r in rows {
        let lat = |f: fn(&probes::ProbeLatency) -> u64| r.latency.as_ref().map(|l| dur(f(l))).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            s,
            "  {:<width$} {:>8} {:>7} {:>8} {:>10} {:>12} {:>12} {:>12} {:>12}",
            r.name,
            r.calls,
            r.threads,
            if r.return_event.is_some() { r.returned.to_string() } else { "-".into() },
            if r.return_event.is_some() { r.unfinished.to_string() } else { "-".into() },
            lat(|l| l.p50_ns),
            lat(|l| l.p90_ns),
            lat(|l| l.p99_ns),
            lat(|l| l.max_ns)
        );
        let mut also = Vec::new();
        if r.unwound > 0 {
            also.push(format!("{} unwound past (an outer call returned first: panic or longjmp)", r.unwound));
        }
        if r.returns_without_entry > 0 {
            also.push(format!("{} return(s) without their entry in the trace", r.returns_without_entry));
        }
        if !also.is_empty() {
            let _ = writeln!(s, "  {:<width$} {}", "", also.join("; "));
        }
        if r.stacks > 0 {
            let _ = writeln!(s, "  {:<width$} callers ({} hits with a user stack), innermost first:", "", r.stacks);
            for c in r.callers.iter().take(3) {
                let up: Vec<&str> = c.stack.iter().rev().skip(1).take(5).map(String::as_str).collect();
                let more = if c.stack.len() > 6 { " < ..." } else { "" };
                let _ = writeln!(s, "  {:<width$} {:>7}  {}{more}", "", c.hits, up.join(" < "));
            }
        }
    }
    if rows.iter().any(|r| r.unfinished > 0) {
        let _ = writeln!(s, "  (UNFINISHED: calls with no return in the trace: the thread exited inside them, or recording stopped first)");
    }
}

/// The span view: a table per span name, then the span tree.
fn spans_text(s: &mut String, v: &span_view::SpanView) {
    if v.spans.is_empty() {
        return;
    }
    let _ = writeln!(s, "\nSpans (tracing): duration from creation to close; busy = time entered, idle = the rest:");
    let width = v.spans.iter().map(|r| r.name.len()).max().unwrap_or(0).max(4);
    let _ = writeln!(
        s,
        "  {:<width$} {:>7} {:>7} {:>12} {:>12} {:>12} {:>12} {:>13} {:>13}",
        "SPAN", "CALLS", "ENTERED", "P50", "P90", "P99", "MAX", "BUSY", "IDLE"
    );
    for r in &v.spans {
        let _ = writeln!(
            s,
            "  {:<width$} {:>7} {:>7} {:>12} {:>12} {:>12} {:>12} {:>13} {:>13}",
            r.name,
            r.calls,
            r.entered,
            dur(r.p50_ns),
            dur(r.p90_ns),
            dur(r.p99_ns),
            dur(r.max_ns),
            dur(r.busy_ns),
            dur(r.idle_ns)
        );
        if r.incomplete > 0 {
            let _ = writeln!(s, "  {:<width$} {} not both created and closed in the trace, left out of the times", "", r.incomplete);
        }
    }
    let _ = writeln!(s, "\nSpan tree (calls):");
    fn node(s: &mut String, n: &span_view::SpanNode, depth: usize) {
        let _ = writeln!(s, "  {}{}  {}", "  ".repeat(depth), n.name, n.calls);
        for c in &n.children {
            node(s, c, depth + 1);
        }
    }
    for n in &v.tree {
        node(s, n, 0);
    }
}

fn syscall_totals(s: &mut String, r: &Report) {
    let _ = writeln!(s, "\nSystem calls per process:");
    let _ = writeln!(s, "  {:>7}  {:<16} {:>7} {:>7} {:>8} {:>13}", "PID", "NAME", "THREADS", "CALLS", "ERRORS", "TIME");
    for p in &r.syscall_processes {
        let _ = writeln!(s, "  {:>7}  {:<16} {:>7} {:>7} {:>8} {:>13}", p.pid, p.name, p.threads, p.calls, p.errors, dur(p.total_ns));
    }
    let _ = writeln!(s, "\nSystem calls per thread:");
    let _ = writeln!(s, "  {:>7} {:>7}  {:<16} {:>7} {:>8} {:>13}", "PID", "TID", "NAME", "CALLS", "ERRORS", "TIME");
    for t in &r.syscall_threads {
        let _ = writeln!(s, "  {:>7} {:>7}  {:<16} {:>7} {:>8} {:>13}", t.pid, t.tid, t.name, t.calls, t.errors, dur(t.total_ns));
    }
    if !r.slowest_syscalls.is_empty() {
        let _ = writeln!(s, "\nSlowest system calls:");
        for c in &r.slowest_syscalls {
            let ret = call_text::result_text(c.ret);
            let _ = writeln!(
                s,
                "  {:>13}  {} [{}] {} = {ret} (at +{:.6} s)",
                dur(c.duration_ns),
                c.thread,
                c.tid,
                c.call,
                c.ts_ns.saturating_sub(r.start_ns) as f64 / 1e9
            );
        }
    }
}

fn count_text(n: Option<u64>) -> String {
    n.map(|n| n.to_string()).unwrap_or_else(|| "-".into())
}

fn fault_summary(s: &mut String, r: &Report) {
    if let Some(files) = &r.fault_files {
        let _ = writeln!(s, "\nPage faults per mapped file:");
        let _ = writeln!(s, "  {:>7} {:>7} {:>7} {:>7} {:>11} {:>13} {:>13}  FILE", "FAULTS", "MINOR", "MAJOR", "PAGES", "BYTES", "UNTIL USER", "WORST");
        for f in files {
            let _ = writeln!(
                s,
                "  {:>7} {:>7} {:>7} {:>7} {:>11} {:>13} {:>13}  {}",
                f.faults,
                count_text(f.minor),
                count_text(f.major),
                f.pages,
                f.bytes,
                dur(f.until_user_total_ns),
                dur(f.until_user_worst_ns),
                f.file
            );
        }
    }
    if let Some(l) = &r.file_faults {
        let _ = writeln!(s, "\nPage faults on {} ({}), in time order:", l.file, l.faults.len());
        let _ = writeln!(
            s,
            "  {:>12} {:>7} {:>12} {:>9} {:>5} {:>5} {:>12}  FUNCTION / ERROR CODE",
            "AT (s)", "TID", "OFFSET", "PAGE", "KIND", "ACC", "UNTIL USER"
        );
        for x in &l.faults {
            let _ = writeln!(
                s,
                "  {:>12.6} {:>7} {:>12} {:>9} {:>5} {:>5} {:>12}  {}",
                x.ts_ns.saturating_sub(r.start_ns) as f64 / 1e9,
                x.tid,
                x.offset.map(|o| format!("{o:#x}")).unwrap_or_default(),
                count_text(x.page),
                match x.major {
                    Some(true) => "major",
                    Some(false) => "minor",
                    None => "-",
                },
                x.access.as_deref().unwrap_or("-"),
                x.until_user_ns.map(dur).unwrap_or_else(|| "-".into()),
                x.function.as_deref().unwrap_or("?")
            );
            if let Some(e) = &x.error {
                let _ = writeln!(s, "  {:>12} error code {:#x}: {e}", "", x.error_code);
            }
        }
    }
}

/// The report as pretty JSON (the [`Report`] structure; times in ns).
pub fn render_json(r: &Report) -> String {
    serde_json::to_string_pretty(r).unwrap_or_else(|_| "null".into())
}

#[cfg(test)]
mod tests {
    /// A tier-1 report (perf_event_open: switches and faults, no system call) has no empty
    /// system-call tables, and its note says root's daemon alone gives them.
    #[test]
    fn a_tier1_report_has_no_empty_system_call_tables() {
        let r = super::Report { kernel: true, notes: vec![super::tiers::TIER1_NOTE.into()], ..Default::default() };
        let text = super::render_text(&r);
        assert!(text.contains("Tasks of the traced command") && !text.contains("System calls"), "{text}");
        assert!(text.contains("root's ust-consumerd running") && !text.contains("record as root"), "{text}");
    }

    #[test]
    fn durations() {
        assert_eq!(super::dur(5), "5 ns");
        assert_eq!(super::dur(2_500), "2.500 us");
        assert_eq!(super::dur(200_000_000), "200.000 ms");
        assert_eq!(super::dur(3_000_000_000), "3.000 s");
    }
}
