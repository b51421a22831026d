//! The metadata file of one process's trace: TSDL text (CTF 1.8 section 7), starting with
//! `/* CTF 1.8 */`, written whole before any packet that needs it.
//!
//! Blocks, in order, as LTTng-UST lays them out:
//!
//! 1. `trace` (CTF 1.8 section 7.3): version 1.8, the per-process trace UUID, little-endian,
//!    the packet header ([`ust_core::packet::TSDL_PACKET_HEADER`]).
//! 2. `env`: hostname, domain `ust`, tracer name and version, procname, vpid, trace name,
//!    creation time, word size (babeltrace2 prints `hostname:procname:(vpid)` from it).
//! 3. `clock` (CTF 1.8 section 8): `monotonic`, the boot id as UUID, 1 GHz, and the
//!    realtime − monotonic offset sampled once per session.
//! 4. The event header ([`ust_core::event_header::tsdl`]).
//! 5. One `stream` block per channel: `id` = channel index, compact event header, packet
//!    context ([`ust_core::packet::tsdl_packet_context`]), and the channel's event context
//!    when it has context fields ([`ust_core::context::tsdl_event_context`]).
//! 6. One `event` block per (channel, registered event): `id` = [`ust_core::protocol::event_id`]
//!    of the event's registration index, so ids are equal across the channels of a process.
//!    Ids start at 1, so each stream also declares a placeholder event with id 0
//!    ([`reserved_event_tsdl`]) that no record uses.
//!
//! [`write_atomically`] writes to a hidden temporary file in the same directory and renames
//! it over `metadata`, so a reader never sees half a metadata file (no `fsync`: it runs on
//! every registration, see [`TraceDir::replace_file`]).

use std::fmt::Write as _;

use crate::outdir::TraceDir;

use ust_core::event::escape_tsdl;
use ust_core::EventDesc;

/// Name of the placeholder event class with id 0 ([`reserved_event_tsdl`]).
pub const RESERVED_EVENT_NAME: &str = "ust_reserved:event_id_0";

/// TSDL of an empty event class with id 0 in stream `stream_id`. Records never use id 0
/// (ids start at [`ust_core::event_header::FIRST_EVENT_ID`]), but babeltrace2 2.0's
/// debug-info filter (`flt.lttng-utils.debug-info`, `babeltrace2 --debug-info`) copies a
/// stream's event classes by looking up ids `0 .. count` and aborts on a missing one; with
/// this class the ids are `0 ..= N` and every trace of the project passes through it.
pub fn reserved_event_tsdl(stream_id: usize) -> String {
    format!("event {{\n\tname = \"{RESERVED_EVENT_NAME}\";\n\tid = 0;\n\tstream_id = {stream_id};\n\tfields := struct {{\n\t}};\n}};\n\n")
}

/// Name of the trace clock in the metadata.
pub const CLOCK_NAME: &str = "monotonic";

/// Everything the metadata of one process's trace says.
#[derive(Clone, Debug)]
pub struct TraceMetadata<'a> {
    /// UUID of this per-process trace (also in every packet header).
    pub uuid: [u8; 16],
    /// Realtime − monotonic in ns, sampled once per session.
    pub clock_offset_ns: i64,
    /// UUID of the `monotonic` clock ([`ust_core::clock::boot_id`]).
    pub clock_uuid: &'a str,
    /// Host name.
    pub hostname: &'a str,
    /// Process name.
    pub procname: &'a str,
    /// Process id.
    pub vpid: i32,
    /// Session name (`env.trace_name`).
    pub trace_name: &'a str,
    /// `YYYYmmddTHHMMSS+hhmm` ([`crate::datetime::iso_at`]).
    pub creation_datetime: &'a str,
    /// Channel names; index = CTF stream class id.
    pub channels: &'a [String],
    /// Context fields of each channel (same index; missing or empty = no event context).
    pub contexts: &'a [Vec<ust_core::context::ContextType>],
    /// Registered events of the process; index `i` has id `event_id(i)`.
    pub events: &'a [EventDesc],
    /// The clock block's `description`: which counter the timestamps were read from
    /// ([`ust_core::clock::TraceClock::description`]).
    pub clock_description: &'a str,
    /// `Some(uid)` for a per-UID trace (every process of that user): the env then says
    /// `tracer_buffering_scheme = "uid"`, `tracer_buffering_id = <uid>` and has no `vpid`
    /// or `procname` (as LTTng's per-UID metadata); `procname` and `vpid` are ignored.
    pub uid: Option<u32>,
}

/// The canonical text form of a UUID (8-4-4-4-12 lowercase hex).
pub fn uuid_string(u: &[u8; 16]) -> String {
    uuid::Uuid::from_bytes(*u).hyphenated().to_string()
}

/// The `trace` block (CTF 1.8 section 7.3): version 1.8, `uuid`, little-endian, and the
/// packet header every stream file of ust uses ([`ust_core::packet::TSDL_PACKET_HEADER`]).
/// User-space and kernel traces share it, so that readers merge them.
pub fn trace_block(uuid: &[u8; 16]) -> String {
    format!("trace {{\n\tmajor = 1;\n\tminor = 8;\n\tuuid = \"{}\";\n\tbyte_order = le;\n{}}};\n\n", uuid_string(uuid), ust_core::packet::TSDL_PACKET_HEADER)
}

/// The `clock` block (CTF 1.8 section 8) named [`CLOCK_NAME`]: 1 GHz, `clock_uuid` (the
/// boot id, so that traces of one boot agree), and `offset_ns` (realtime − monotonic,
/// sampled once per session). User-space and kernel traces must give the same clock for
/// babeltrace2 and Trace Compass to merge them on one time line, so both call this.
/// `absolute = true`: the offset is from the Unix epoch; babeltrace2 takes the clock of a
/// trace whose `tracer_name` is `lttng-modules` (the kernel trace) as absolute whatever it
/// says, and its muxer merges only clocks that agree on that.
pub fn clock_block(clock_uuid: &str, description: &str, offset_ns: i64) -> String {
    format!(
        "clock {{\n\tname = \"{CLOCK_NAME}\";\n\tuuid = \"{}\";\n\tdescription = \"{}\";\n\tfreq = 1000000000; /* Frequency, in Hz */\n\
         \t/* clock value offset from Epoch is: offset * (1/freq) */\n\toffset = {offset_ns};\n\tabsolute = true;\n}};\n\n",
        escape_tsdl(clock_uuid),
        escape_tsdl(description),
    )
}

/// Renders the TSDL text.
pub fn render(m: &TraceMetadata<'_>) -> String {
    let mut s = String::with_capacity(4096 + m.events.len() * m.channels.len() * 512);
    s.push_str("/* CTF 1.8 */\n\n");
    s.push_str(&trace_block(&m.uuid));
    let (scheme, id) = match m.uid {
        Some(uid) => ("uid", i64::from(uid)),
        None => ("pid", i64::from(m.vpid)),
    };
    let _ = write!(
        s,
        "env {{\n\
         \thostname = \"{host}\";\n\
         \tdomain = \"ust\";\n\
         \ttracer_name = \"ust\";\n\
         \ttracer_major = {major};\n\
         \ttracer_minor = {minor};\n\
         \ttracer_buffering_scheme = \"{scheme}\";\n\
         \ttracer_buffering_id = {id};\n\
         \tarchitecture_bit_width = {bits};\n\
         \ttrace_name = \"{name}\";\n\
         \ttrace_creation_datetime = \"{dt}\";\n",
        host = escape_tsdl(m.hostname),
        major = env!("CARGO_PKG_VERSION_MAJOR"),
        minor = env!("CARGO_PKG_VERSION_MINOR"),
        bits = usize::BITS,
        name = escape_tsdl(m.trace_name),
        dt = escape_tsdl(m.creation_datetime),
    );
    if m.uid.is_none() {
        let _ = write!(s, "\tvpid = {};\n\tprocname = \"{}\";\n", m.vpid, escape_tsdl(m.procname));
    }
    s.push_str("};\n\n");
    s.push_str(&clock_block(m.clock_uuid, m.clock_description, m.clock_offset_ns));
    s.push_str(&ust_core::event_header::tsdl(CLOCK_NAME));
    s.push('\n');
    let context = ust_core::packet::tsdl_packet_context(CLOCK_NAME);
    for (id, _) in m.channels.iter().enumerate() {
        let ev_ctx = ust_core::context::tsdl_event_context(m.contexts.get(id).map_or(&[][..], |c| &c[..]));
        let _ = write!(s, "stream {{\n\tid = {id};\n\tevent.header := struct event_header_compact;\n{context}{ev_ctx}}};\n\n");
    }
    for (stream_id, _) in m.channels.iter().enumerate() {
        s.push_str(&reserved_event_tsdl(stream_id));
    }
    // Event-major: the declarations of events a process registers later come after all
    // the earlier ones, so the new metadata extends the old (a relay daemon's metadata
    // stream, like LTTng's, is append-only).
    for (i, e) in m.events.iter().enumerate() {
        for (stream_id, _) in m.channels.iter().enumerate() {
            let _ = write!(
                s,
                "event {{\n\tname = \"{}\";\n\tid = {};\n\tstream_id = {stream_id};\n\tloglevel = {};\n\tfields := struct {{\n",
                escape_tsdl(&e.full_name()),
                ust_core::protocol::event_id(i as u32),
                e.level.number()
            );
            for f in e.fields.iter() {
                for line in f.ty.tsdl(&f.name).lines() {
                    let _ = writeln!(s, "\t\t{line}");
                }
            }
            s.push_str("\t};\n};\n\n");
        }
    }
    s
}

/// Writes `text` as `dir/metadata`: to `dir/.metadata.tmp` first (mode 0600), then
/// `rename`, so the file is never seen half written ([`TraceDir::replace_file`]: atomic,
/// not synced).
///
/// # Errors
/// The I/O error, or the refusal of a `metadata` that is not a regular file; the
/// temporary file may remain.
pub fn write_atomically(dir: &TraceDir, text: &str) -> std::io::Result<()> {
    dir.replace_file("metadata", text.as_bytes(), 0o600)
}

/// This machine's host name (`uname(2)`'s `nodename`, as `gethostname` returns it), for the
/// metadata's `env.hostname`; `localhost` when it is empty or not UTF-8.
pub fn hostname() -> String {
    let uts = rustix::system::uname();
    match uts.nodename().to_str() {
        Ok(s) if !s.is_empty() => s.to_string(),
        _ => "localhost".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;
    use ust_core::{FieldDesc, FieldType, IntegerType, Level};

    #[test]
    fn renders_every_block() {
        let events = vec![EventDesc {
            provider: Cow::Borrowed("p"),
            name: Cow::Borrowed("e"),
            level: Level::Info,
            fields: Cow::Owned(vec![FieldDesc { name: Cow::Borrowed("x"), ty: FieldType::Integer(IntegerType::U32) }]),
            location: Cow::Borrowed(""),
        }];
        let channels = vec!["channel0".to_string(), "c1".to_string()];
        let base = TraceMetadata {
            uuid: [1; 16],
            clock_offset_ns: 1_700_000_000_000_000_000,
            clock_uuid: "868f6156-21d0-49a5-9a47-b52643d24559",
            hostname: "h",
            procname: "app",
            vpid: 42,
            trace_name: "s",
            creation_datetime: "20260101T000000+0000",
            channels: &channels,
            contexts: &[vec![], vec![ust_core::context::ContextType::Vtid]],
            events: &events,
            clock_description: "Monotonic Clock",
            uid: None,
        };
        let text = render(&base);
        assert!(text.starts_with("/* CTF 1.8 */"));
        assert!(text.contains("uuid = \"01010101-0101-0101-0101-010101010101\";"));
        assert!(text.contains("offset = 1700000000000000000;"));
        assert_eq!(text.matches("stream {").count(), 2);
        assert_eq!(text.matches("name = \"p:e\";").count(), 2);
        assert!(text.contains("id = 1;\n\tstream_id = 1;\n\tloglevel = 6;"));
        assert!(text.contains("_x;"));
        assert_eq!(text.matches("event.context := struct {").count(), 1, "only the channel with contexts");
        assert!(text.contains("_vtid;"));
        // Events registered later (a dlopen) extend the text: what was sent of it to a
        // relay daemon's append-only metadata stream stays a prefix.
        let mut more = events.clone();
        more.push(EventDesc { name: Cow::Borrowed("late"), ..events[0].clone() });
        let longer = render(&TraceMetadata { events: &more, ..base });
        assert!(longer.starts_with(&text) && longer.matches("name = \"p:late\";").count() == 2, "{longer}");
    }
}
