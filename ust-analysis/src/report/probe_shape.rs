//! Which field names make a kernel event a dynamic probe's (`ust trace --userspace-probe`,
//! LTTng's uprobes and kprobes; see [`super::probes`]): after the context fields, an entry
//! probe's first field is `ip`, a return probe's are `func` and `ret_ip`. A rule on names
//! alone, so that the load ([`super::load`]) can ask it once per event class and the probe
//! view ([`super::probes`]) of each event, without either module depending on the other.

/// Context fields that come before a probe event's payload (ust's `tid`, LTTng's
/// `lttng add-context` kernel contexts).
fn is_context(name: &str) -> bool {
    matches!(
        name,
        "tid"
            | "pid"
            | "vtid"
            | "vpid"
            | "ppid"
            | "vppid"
            | "procname"
            | "prio"
            | "nice"
            | "hostname"
            | "cpu_id"
            | "interruptible"
            | "preemptible"
            | "need_reschedule"
            | "migratable"
    ) || name.starts_with("perf_")
        || name.starts_with("callstack_")
        || name.ends_with("_ns")
}

/// A probe event's kind as its field names (contexts first, in order) tell, without the
/// address: what [`super::probes::kind`] decides before it reads a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// An entry probe's fields (`ip` first).
    Entry,
    /// A return probe's fields (`func`, then `ret_ip`).
    Return,
}

/// The [`Shape`] of an event with these field names, or `None` when it is no probe's. The
/// names of an event class are the same for all its events, so the load asks once per
/// class ([`super::load::Loaded::without_probes`]).
pub fn shape<'n>(names: impl IntoIterator<Item = &'n str>) -> Option<Shape> {
    let mut payload = names.into_iter().skip_while(|n| is_context(n));
    match payload.next()? {
        "ip" => Some(Shape::Entry),
        "func" if payload.next() == Some("ret_ip") => Some(Shape::Return),
        _ => None,
    }
}
