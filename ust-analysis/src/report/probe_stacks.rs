//! The callers of each probed function: root's recording samples the user stack of every
//! hit of a dynamic probe's entry (`perf_probe_stack` events of the side trace
//! `kernel-stacks/`, `ust_kernel::perf`: a perf tracepoint event on a twin of the probe,
//! DWARF-unwound), which [`attach`] symbolizes with the report's symbol code
//! ([`super::stacks::Tier1`]) and counts per distinct chain of callers; [`folded`] and
//! [`flamegraph`] draw them (`ust report --probe-flamegraph FILE.svg`): a flame graph of
//! callers per probe, the probed function on top.
//!
//! A function with a pending `%return` probe has its return address replaced by the
//! kernel's uretprobe trampoline (`[uprobes]`, at the top of the address space) until it
//! returns: a stack taken inside it is unwound up to that frame only, which is shown as
//! [`TRAMPOLINE`].

use std::collections::BTreeMap;

use super::load::Loaded;
use super::model::Report;
pub use super::probes::Callers;
use super::probes::ProbeRow;

/// The frame shown where a stack stops at the uretprobe trampoline.
pub const TRAMPOLINE: &str = "[callers of a pending %return probe: not unwound]";

/// Most distinct chains kept per probe (the rest are counted in [`ProbeRow::stacks`]).
pub const MAX_CHAINS: usize = 200;

/// The uretprobe trampoline's page: the kernel's `[uprobes]` area is the last page below
/// x86-64's 47-bit user address space (`TASK_SIZE - PAGE_SIZE`).
fn is_trampoline(ip: u64) -> bool {
    (0x7fff_ffff_e000..0x7fff_ffff_f000).contains(&ip)
}

/// Fills each row's [`ProbeRow::stacks`] and [`ProbeRow::callers`] from the trace's
/// `perf_probe_stack` events, symbolized by `t1`.
pub fn attach(rows: &mut [ProbeRow], l: &Loaded, t1: &mut super::stacks::Tier1) {
    let mut by: BTreeMap<String, BTreeMap<Vec<String>, u64>> = BTreeMap::new();
    let mut hits: BTreeMap<String, u64> = BTreeMap::new();
    for e in l.events.iter().filter(|e| e.name == "perf_probe_stack") {
        let (Some(probe), Some(pid)) = (e.text("probe").map(|s| s.into_owned()), e.int("pid")) else { continue };
        let mut ips = super::stacks::u64s(e, "stack");
        let cut = ips.iter().position(|&ip| is_trampoline(ip));
        if let Some(i) = cut {
            ips.truncate(i);
        }
        let frames = t1.symbolize(pid as i32, e.ts, &ips);
        let mut chain: Vec<String> = frames.iter().rev().map(|f| f.function.clone().unwrap_or_else(|| format!("{:#x}", f.ip))).collect();
        if cut.is_some() {
            chain.insert(0, TRAMPOLINE.to_string());
        }
        *by.entry(probe.clone()).or_default().entry(chain).or_default() += 1;
        *hits.entry(probe).or_default() += 1;
    }
    for r in rows.iter_mut() {
        let Some(chains) = by.remove(&r.name) else { continue };
        r.stacks = hits.get(&r.name).copied().unwrap_or(0);
        let mut v: Vec<Callers> = chains.into_iter().map(|(stack, hits)| Callers { stack, hits }).collect();
        v.sort_by(|a, b| b.hits.cmp(&a.hits).then_with(|| a.stack.cmp(&b.stack)));
        v.truncate(MAX_CHAINS);
        r.callers = v;
    }
}

/// One frame name, safe in a folded line.
fn clean(s: &str) -> String {
    s.replace(';', ":").replace(['\n', '\r'], " ")
}

/// The folded lines of the probes' callers (`probe NAME;outermost;...;probed hits`), one
/// per distinct chain, sorted.
pub fn folded(r: &Report) -> Vec<String> {
    let mut out: Vec<String> = r
        .probes
        .iter()
        .flat_map(|p| {
            p.callers.iter().map(move |c| {
                let mut f = vec![format!("probe {}", clean(&p.name))];
                f.extend(c.stack.iter().map(|s| clean(s)));
                format!("{} {}", f.join(";"), c.hits)
            })
        })
        .collect();
    out.sort();
    out
}

/// Why there is no flame graph of the probes' callers, or `None` when there is one.
pub fn nothing_to_draw(r: &Report) -> Option<String> {
    if !folded(r).is_empty() {
        return None;
    }
    Some(if r.probes.is_empty() {
        "the trace has no dynamic probe events (`ust trace --userspace-probe`)".into()
    } else {
        "the trace has no user stacks of its probes' hits: root's recording samples them (kernel-stacks/); a trace recorded through root's daemon has none"
            .into()
    })
}

/// Draws the flame graph of the probes' callers as SVG into `out`.
///
/// # Errors
/// Writing failed, or there was nothing to draw.
pub fn flamegraph(r: &Report, out: impl std::io::Write) -> std::io::Result<()> {
    let lines = folded(r);
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = "Callers of the probed functions (hits by user stack)".into();
    opt.subtitle = Some(format!("traced pid {}; the probed function on top", r.traced_pid));
    opt.count_name = "hits".into();
    inferno::flamegraph::from_lines(&mut opt, lines.iter().map(String::as_str), out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::load::{Domain, Event};
    use ust_ctf::reader::Value;

    fn sample(ts: u64, probe: &str, ips: &[u64]) -> Event {
        Event {
            ts,
            cpu: 0,
            name: "perf_probe_stack".into(),
            tid: 7,
            pid: -1,
            domain: Domain::Kernel,
            fields: vec![
                ("tid".into(), Value::Signed(7)),
                ("pid".into(), Value::Signed(7)),
                ("probe".into(), Value::Str(probe.into())),
                ("ip".into(), Value::Unsigned(ips[0])),
                ("stack".into(), Value::List(ips.iter().map(|&i| Value::Unsigned(i)).collect())),
            ],
        }
    }

    fn row(name: &str) -> ProbeRow {
        ProbeRow {
            name: name.into(),
            return_event: None,
            address: "0x1".into(),
            calls: 3,
            threads: 1,
            returned: 0,
            unfinished: 0,
            unwound: 0,
            returns_without_entry: 0,
            latency: None,
            stacks: 0,
            callers: Vec::new(),
        }
    }

    /// Without mappings the frames are their addresses: chains counted per probe, cut at
    /// the uretprobe trampoline, folded with the probe's name at the root, drawn.
    #[test]
    fn chains_are_counted_cut_at_the_trampoline_and_drawn() {
        let l = Loaded {
            events: vec![sample(1, "f", &[0x10, 0x20, 0x30]), sample(2, "f", &[0x10, 0x20, 0x30]), sample(3, "f", &[0x10, 0x7fff_ffff_e000, 0x99])],
            ..Default::default()
        };
        let mut t1 = super::super::stacks::Tier1::default();
        let mut rows = vec![row("f"), row("g")];
        attach(&mut rows, &l, &mut t1);
        assert_eq!(rows[0].stacks, 3);
        assert_eq!(
            rows[0].callers,
            vec![
                Callers { stack: vec!["0x30".into(), "0x20".into(), "0x10".into()], hits: 2 },
                Callers { stack: vec![TRAMPOLINE.into(), "0x10".into()], hits: 1 },
            ]
        );
        assert!(rows[1].callers.is_empty());
        let r = Report { probes: rows, ..Default::default() };
        assert_eq!(folded(&r), vec![format!("probe f;0x30;0x20;0x10 2"), format!("probe f;{TRAMPOLINE};0x10 1")]);
        let mut svg = Vec::new();
        flamegraph(&r, &mut svg).unwrap();
        assert!(String::from_utf8(svg).unwrap().contains("probe f"));
        assert_eq!(nothing_to_draw(&r), None);
        assert!(nothing_to_draw(&Report::default()).unwrap().contains("no dynamic probe events"));
    }
}
