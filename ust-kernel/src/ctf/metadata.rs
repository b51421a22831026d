//! The TSDL metadata of the kernel trace ([`render_metadata`]) and what it says besides the
//! event classes ([`KernelMetadata`]: UUID, clock, host, kernel, `env` keys).

use std::fmt::Write as _;

use super::table::EventTable;
use crate::ctf_type::CtfType;

/// What the kernel metadata says besides the event classes.
#[derive(Clone, Debug)]
pub struct KernelMetadata<'a> {
    /// Trace UUID.
    pub uuid: [u8; 16],
    /// Realtime − monotonic (ns): the session's, so the traces merge.
    pub clock_offset_ns: i64,
    /// Boot id.
    pub clock_uuid: &'a str,
    /// Host name.
    pub hostname: &'a str,
    /// Kernel release (`uname -r`).
    pub kernel_release: &'a str,
    /// Kernel version (`uname -v`).
    pub kernel_version: &'a str,
    /// Pid of the traced command (`env.traced_pid`), 0 when unknown.
    pub traced_pid: i32,
    /// `YYYYmmddTHHMMSS+hhmm`.
    pub creation_datetime: &'a str,
    /// `env.kernel_source`: `tracefs` (system-wide ftrace events) or `perf_event_open`
    /// (tier 1: the traced tasks only, `ust_kernel::perf`).
    pub source: &'a str,
    /// More `env` keys and their string values, after `kernel_source` (tier 1's
    /// `syscall_source`, `no_syscalls`: [`crate::perf::SyscallView`]).
    pub extra_env: &'a [(&'a str, &'a str)],
}

/// Renders the TSDL of the kernel trace (CTF 1.8 sections 7 and 8).
pub fn render_metadata(m: &KernelMetadata<'_>, table: &EventTable) -> String {
    use ust_core::event::escape_tsdl;
    let clock = ust_ctf::metadata::CLOCK_NAME;
    let mut s = String::from("/* CTF 1.8 */\n\n");
    s.push_str(&ust_ctf::metadata::trace_block(&m.uuid));
    // lttng-modules 2.13's env (lttng-abi / lttng-events.c `_lttng_session_metadata_statedump`),
    // then this writer's own keys.
    let _ = write!(
        s,
        "env {{\n\thostname = \"{}\";\n\tdomain = \"kernel\";\n\tsysname = \"Linux\";\n\tkernel_release = \"{}\";\n\
         \tkernel_version = \"{}\";\n\ttracer_name = \"{}\";\n\ttracer_major = {};\n\ttracer_minor = {};\n\ttracer_patchlevel = {};\n\
         \ttrace_buffering_scheme = \"global\";\n\ttrace_name = \"ust-kernel\";\n\ttrace_creation_datetime = \"{}\";\n\
         \tust_writer = \"ust-kernel {}\";\n\ttrace_clock = \"mono\";\n\ttraced_pid = {};\n\tkernel_source = \"{}\";\n",
        escape_tsdl(m.hostname),
        escape_tsdl(m.kernel_release),
        escape_tsdl(m.kernel_version),
        crate::lttng::TRACER_NAME,
        crate::lttng::TRACER_MAJOR,
        crate::lttng::TRACER_MINOR,
        crate::lttng::TRACER_PATCHLEVEL,
        escape_tsdl(m.creation_datetime),
        env!("CARGO_PKG_VERSION"),
        m.traced_pid,
        escape_tsdl(m.source)
    );
    for (k, v) in m.extra_env {
        let _ = writeln!(s, "\t{k} = \"{}\";", escape_tsdl(v));
    }
    s.push_str("};\n\n");
    s.push_str(&ust_ctf::metadata::clock_block(m.clock_uuid, "Monotonic Clock", m.clock_offset_ns));
    s.push_str(&ust_core::event_header::tsdl(clock));
    let _ = write!(
        s,
        "\nstream {{\n\tid = 0;\n\tevent.header := struct event_header_compact;\n{}\tevent.context := struct {{\n\t\t{}\n\t}};\n}};\n\n",
        ust_core::packet::tsdl_packet_context(clock),
        CtfType::Int { bytes: 4, signed: true, hex: false }.tsdl("tid")
    );
    // Ids start at 1: a placeholder id 0 for babeltrace2 2.0's debug-info filter.
    s.push_str(&ust_ctf::metadata::reserved_event_tsdl(0));
    for e in &table.events {
        let _ = write!(s, "event {{\n\tname = \"{}\";\n\tid = {};\n\tstream_id = 0;\n\tfields := struct {{\n", escape_tsdl(&e.name), e.id);
        for f in &e.fields {
            let _ = writeln!(s, "\t\t{}", f.ty.tsdl(&f.name));
        }
        s.push_str("\t};\n};\n\n");
    }
    s
}
