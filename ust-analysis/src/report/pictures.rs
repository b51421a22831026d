//! Pictures of where the traced command waited: `--format folded` (Brendan Gregg's folded
//! stacks, one line per distinct stack with its blocked time in ns) and `--flamegraph
//! FILE.svg` (the same lines drawn by `inferno`): an off-wake flame graph, off-CPU time by
//! user stack with what woke the thread stacked on top.
//!
//! A line, root first: the thread name; its user stack when the trace has one (tier 1),
//! outermost frame first; what it was blocked in (`syscall read`); then `--` and the waker
//! (`task pong`, `timer interrupt`, ...) with, up the wake-up chain, what the waker was
//! itself blocked in and its stack reversed (innermost frame first: as in an off-wake
//! graph, the two stacks meet at their leaves):
//!
//! ```text
//! pingpong;main;pingpong::player;read;syscall read;--;task pong in write;syscall read 1234
//! ```

use std::collections::BTreeMap;

use super::analysis::{Report, Wait, Waker};

/// One frame name, safe in a folded line (no `;`, no line break).
fn clean(s: &str) -> String {
    s.replace(';', ":").replace(['\n', '\r'], " ")
}

fn stack_frames(w: &Wait, out: &mut Vec<String>) {
    for f in w.stack.iter().rev() {
        out.push(clean(&f.function.clone().unwrap_or_else(|| format!("{:#x}", f.ip))));
    }
}

fn waker_frame(w: &Waker) -> String {
    match w {
        Waker::Irq { handler, .. } => format!("IRQ {}", clean(handler)),
        Waker::Softirq { softirq, .. } => format!("softirq {softirq}"),
        Waker::TimerInterrupt { .. } => "timer interrupt".into(),
        Waker::Task { name, doing, ust: None, .. } => format!("task {} {}", clean(name), clean(doing)),
        Waker::Task { name, doing, ust: Some(r), .. } => format!("task {} ({}) {}", clean(name), clean(r.label()), clean(doing)),
        Waker::Unknown => "waker unknown".into(),
        Waker::NeedsRoot => "waker unknown (needs root)".into(),
        Waker::OtherUser { .. } => clean(ust_kernel::filter::OTHER_USER),
        Waker::KernelThread { .. } => clean(ust_kernel::filter::KERNEL_THREAD),
    }
}

/// The folded line's stack (without the count) of one wait.
pub fn folded_stack(w: &Wait) -> String {
    let mut f = vec![clean(&w.name)];
    stack_frames(w, &mut f);
    f.push(clean(&w.blocked_in));
    f.push("--".into());
    f.push(waker_frame(&w.woken_by));
    let mut next = &w.woken_by;
    while let Waker::Task { chain: Some(c), .. } = next {
        let mut up = Vec::new();
        stack_frames(c, &mut up);
        up.reverse();
        f.push(clean(&c.blocked_in));
        f.extend(up);
        next = &c.woken_by;
    }
    f.join(";")
}

/// The folded lines of `r`'s blocked intervals (empty without `--wakeups`' data), one per
/// distinct stack, sorted, each `stack ns`.
pub fn folded(r: &Report) -> Vec<String> {
    let mut by: BTreeMap<String, u64> = BTreeMap::new();
    for w in r.wakeups.iter().flatten() {
        *by.entry(folded_stack(w)).or_default() += w.duration_ns;
    }
    by.into_iter().filter(|(_, n)| *n > 0).map(|(s, n)| format!("{s} {n}")).collect()
}

/// Why `r` has nothing to draw (no blocked interval: no kernel events, or none long
/// enough), or `None` when it has something.
pub fn nothing_to_draw(r: &Report) -> Option<String> {
    if !folded(r).is_empty() {
        return None;
    }
    Some(if r.kernel {
        "the trace has no blocked interval of the traced command to draw (at least --min-block long)".to_string()
    } else {
        "the trace has no kernel events: a flame graph of where the program waited needs them (record with `ust trace --kernel`)".to_string()
    })
}

/// Draws the off-wake flame graph of `r` as SVG into `out`.
///
/// # Errors
/// Writing failed, or there was no blocked interval to draw (inferno refuses an empty
/// graph).
pub fn flamegraph(r: &Report, out: impl std::io::Write) -> std::io::Result<()> {
    let lines = folded(r);
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = "Off-CPU time by user stack (waker on top, after --)".into();
    opt.subtitle = Some(format!("traced pid {}; blocked time in ns", r.traced_pid));
    opt.count_name = "ns".into();
    inferno::flamegraph::from_lines(&mut opt, lines.iter().map(String::as_str), out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::symbols::Frame;

    fn frame(f: &str) -> Frame {
        Frame { ip: 1, module: None, offset: None, function: Some(f.into()), file: None, line: None, inlined: false }
    }

    fn wait(name: &str, blocked_in: &str, d: u64, stack: &[&str], woken_by: Waker) -> Wait {
        Wait {
            tid: 1,
            name: name.into(),
            start_ns: 0,
            duration_ns: d,
            wakeup_latency_ns: None,
            end_inferred: false,
            blocked_in: blocked_in.into(),
            woken_by,
            stack: stack.iter().map(|s| frame(s)).collect(),
            call: None,
            ust: None,
        }
    }

    #[test]
    fn folded_lines_and_svg() {
        let waker = wait("pong", "syscall read", 7, &["read", "pong::run"], Waker::Unknown);
        let w = wait(
            "ping",
            "syscall read",
            100,
            &["read", "ping::play<[u8; 4]>", "main"],
            Waker::Task { tid: 2, name: "pong".into(), doing: "in write".into(), cpu: 0, chain: Some(Box::new(waker)), ust: None },
        );
        let t = wait("ping", "syscall clock_nanosleep", 50, &[], Waker::TimerInterrupt { hrtimer_function: None, cpu: 1 });
        let r = Report { wakeups: Some(vec![w.clone(), w, t]), ..Default::default() };
        let l = folded(&r);
        assert_eq!(
            l,
            vec![
                "ping;main;ping::play<[u8: 4]>;read;syscall read;--;task pong in write;syscall read;read;pong::run 200".to_string(),
                "ping;syscall clock_nanosleep;--;timer interrupt 50".to_string(),
            ]
        );
        let mut svg = Vec::new();
        flamegraph(&r, &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.contains("<svg") && svg.contains("ping::play") && svg.contains("timer interrupt"));
        assert_eq!(nothing_to_draw(&r), None);
    }

    #[test]
    fn an_empty_graph_says_why() {
        let user_only = Report::default();
        assert!(nothing_to_draw(&user_only).unwrap().contains("no kernel events"));
        let kernel = Report { kernel: true, wakeups: Some(Vec::new()), ..Default::default() };
        assert!(nothing_to_draw(&kernel).unwrap().contains("no blocked interval"));
    }
}
