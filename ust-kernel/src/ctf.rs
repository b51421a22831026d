//! The kernel CTF 1.8 trace, `<output>/kernel/`: one stream per CPU (`channel0_<cpu>` and
//! `index/channel0_<cpu>.idx`), with the packet header, packet context and compact event
//! header of the user-space traces ([`ust_core::packet`], [`ust_core::event_header`]) and
//! the same `monotonic` clock block (boot-id UUID, the session's offset), so babeltrace2
//! merges `<output>` into one timeline. The trace has its own UUID.
//!
//! Stream class 0 has an event context `{ int32 _tid; }` (the ftrace `common_pid`: the
//! thread the event happened in, 0 for the idle task). Event payloads are the format-file
//! fields after the `common_*` ones, packed, in format order, typed from the format file
//! ([`super::format`]): integers with their size and signedness (pointers in base 16),
//! `char x[N]` as UTF-8 text arrays (babeltrace2 prints them as strings), integer arrays,
//! and `__data_loc char[]` as CTF strings.
//!
//! Event names are LTTng's kernel names where LTTng has them (`sched_switch`,
//! `irq_softirq_entry`, `timer_hrtimer_expire_entry`, `x86_irq_vectors_local_timer_entry`,
//! `x86_exceptions_page_fault_user`, `_kernel`; `filemap_add_to_page_cache` for
//! LTTng's `mm_filemap_add_to_page_cache`). System calls are the generic `syscall_entry` /
//! `syscall_exit` (the `raw_syscalls` events) with an added string field `name` (from the
//! x86-64 table, [`super::syscalls`]), not LTTng's one event per system call. The state dump
//! at the start is `lttng_statedump_process_state`, written first in the stream of the CPU
//! each task last ran on.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use ringbuffer::{PacketEnd, PacketLayout, StreamIdentity};
use ust_core::event_header;
use ust_core::packet::{CtfPacketLayout, HEADER_SIZE};

use super::format::{dyn_string, read_uint, EventFormat, FieldFormat, FieldKind};
use ust_ctf::index::{IndexEntry, IndexFile};
use ust_ctf::stream::StreamFile;

/// The ftrace events recorded: `(system, event, CTF name)`.
pub const EVENTS: &[(&str, &str, &str)] = &[
    ("sched", "sched_switch", "sched_switch"),
    ("sched", "sched_waking", "sched_waking"),
    ("sched", "sched_wakeup", "sched_wakeup"),
    ("sched", "sched_wakeup_new", "sched_wakeup_new"),
    ("sched", "sched_process_fork", "sched_process_fork"),
    ("sched", "sched_process_exec", "sched_process_exec"),
    ("sched", "sched_process_exit", "sched_process_exit"),
    ("irq", "irq_handler_entry", "irq_handler_entry"),
    ("irq", "irq_handler_exit", "irq_handler_exit"),
    ("irq", "softirq_entry", "irq_softirq_entry"),
    ("irq", "softirq_exit", "irq_softirq_exit"),
    ("timer", "hrtimer_expire_entry", "timer_hrtimer_expire_entry"),
    ("timer", "hrtimer_expire_exit", "timer_hrtimer_expire_exit"),
    ("irq_vectors", "local_timer_entry", "x86_irq_vectors_local_timer_entry"),
    ("irq_vectors", "local_timer_exit", "x86_irq_vectors_local_timer_exit"),
    ("raw_syscalls", "sys_enter", "syscall_entry"),
    ("raw_syscalls", "sys_exit", "syscall_exit"),
    ("exceptions", "page_fault_user", "x86_exceptions_page_fault_user"),
    // The kernel touching user memory (perf's page-faults counts these too).
    ("exceptions", "page_fault_kernel", "x86_exceptions_page_fault_kernel"),
    // A page read into the page cache: makes a fault major (report/faults.rs).
    ("filemap", "mm_filemap_add_to_page_cache", "filemap_add_to_page_cache"),
];

/// Name of the state-dump event.
pub const STATEDUMP_EVENT: &str = "lttng_statedump_process_state";
/// Name of the kernel channel (stream files `channel0_<cpu>`).
pub const CHANNEL: &str = "channel0";
/// A packet is closed once its content reaches this many bytes.
pub const PACKET_TARGET: usize = 64 * 1024;

/// CTF type of one exported field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CtfType {
    /// Integer of `bytes` bytes.
    Int {
        /// 1, 2, 4 or 8.
        bytes: usize,
        /// Signed.
        signed: bool,
        /// Printed in base 16.
        hex: bool,
    },
    /// `n` bytes of UTF-8 text (NUL-padded).
    Text(u32),
    /// `n` integers of `bytes` bytes each.
    IntArray {
        /// Element size.
        bytes: usize,
        /// Signed elements.
        signed: bool,
        /// Count.
        n: u32,
    },
    /// NUL-terminated string.
    String,
    /// A sequence of u64 in base 16 (a user-space stack), after its u32 length field
    /// `__<name>_length` (CTF 1.8 section 4.2.4).
    U64Seq,
}

impl CtfType {
    /// The TSDL declaration of a field `name` of this type (field names get a leading `_`).
    pub fn tsdl(&self, name: &str) -> String {
        let int = |bytes: usize, signed: bool, enc: &str, base: u8| {
            format!("integer {{ size = {}; align = 8; signed = {}; encoding = {enc}; base = {base}; }}", bytes * 8, signed as u8)
        };
        match self {
            CtfType::Int { bytes, signed, hex } => format!("{} _{name};", int(*bytes, *signed, "none", if *hex { 16 } else { 10 })),
            CtfType::Text(n) => format!("{} _{name}[{n}];", int(1, false, "UTF8", 10)),
            CtfType::IntArray { bytes, signed, n } => format!("{} _{name}[{n}];", int(*bytes, *signed, "none", 10)),
            CtfType::String => format!("string {{ encoding = UTF8; }} _{name};"),
            CtfType::U64Seq => format!("{} __{name}_length; {} _{name}[__{name}_length];", int(4, false, "none", 10), int(8, false, "none", 16)),
        }
    }
}

/// Where an exported field's bytes come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// A field of the ftrace record.
    Format(FieldFormat),
    /// The name of the system call whose number is the record's `id` field.
    SyscallName(FieldFormat),
    /// Filled by the writer (state dump).
    Given,
}

/// One exported field.
#[derive(Clone, Debug)]
pub struct CtfField {
    /// Name without the leading `_`.
    pub name: String,
    /// Its CTF type.
    pub ty: CtfType,
    /// Where it comes from.
    pub source: Source,
}

/// One CTF event class of the kernel trace.
#[derive(Clone, Debug)]
pub struct KernelEvent {
    /// CTF event name.
    pub name: String,
    /// CTF id (from 1, in [`EVENTS`] order, then the state dump).
    pub id: u32,
    /// The ftrace format (`None` for the state dump).
    pub format: Option<EventFormat>,
    /// Exported fields in record order.
    pub fields: Vec<CtfField>,
}

/// The event classes of one recording, and the ftrace id → class map.
#[derive(Clone, Debug, Default)]
pub struct EventTable {
    /// Classes; `events[i].id == i + 1`.
    pub events: Vec<KernelEvent>,
    by_ftrace_id: HashMap<u16, usize>,
}

fn ctf_field(f: &FieldFormat) -> Option<CtfField> {
    let ty = match f.kind {
        FieldKind::Int { hex } => CtfType::Int { bytes: f.size, signed: f.signed, hex },
        FieldKind::CharArray(n) => CtfType::Text(n),
        FieldKind::IntArray(n) => CtfType::IntArray { bytes: f.elem_size(), signed: f.signed, n },
        FieldKind::DynString { .. } => CtfType::String,
        FieldKind::Other => return None,
    };
    Some(CtfField { name: f.name.clone(), ty, source: Source::Format(f.clone()) })
}

impl EventTable {
    /// Builds the table from the formats found (`(CTF name, format)` in [`EVENTS`] order;
    /// missing events are simply absent) and appends the state-dump event.
    pub fn new(formats: Vec<(String, EventFormat)>) -> EventTable {
        let mut t = EventTable::default();
        for (name, fmt) in formats {
            let mut fields: Vec<CtfField> = fmt.fields.iter().filter_map(ctf_field).collect();
            if fmt.system == "raw_syscalls" {
                if let Some(idf) = fmt.field("id") {
                    fields.push(CtfField { name: "name".into(), ty: CtfType::String, source: Source::SyscallName(idf.clone()) });
                }
            }
            t.by_ftrace_id.insert(fmt.id, t.events.len());
            let id = t.events.len() as u32 + 1;
            t.events.push(KernelEvent { name, id, format: Some(fmt), fields });
        }
        let given = |name: &str, ty| CtfField { name: name.into(), ty, source: Source::Given };
        let i32t = CtfType::Int { bytes: 4, signed: true, hex: false };
        t.events.push(KernelEvent {
            name: STATEDUMP_EVENT.into(),
            id: t.events.len() as u32 + 1,
            format: None,
            fields: vec![
                given("tid", i32t.clone()),
                given("pid", i32t.clone()),
                given("ppid", i32t),
                given("name", CtfType::Text(16)),
                given("state", CtfType::String),
                given("cpu", CtfType::Int { bytes: 4, signed: false, hex: false }),
            ],
        });
        t
    }

    /// A table of events whose fields are all [`Source::Given`] (the perf_event_open
    /// recording, `ust_cli::kernel::perf`): `(CTF name, fields)` get ids from 1 in this order, then
    /// the state dump.
    pub fn given(events: Vec<(String, Vec<CtfField>)>) -> EventTable {
        let mut t = EventTable::new(Vec::new());
        let dump = t.events.pop().expect("new always adds the state dump");
        for (name, fields) in events {
            let id = t.events.len() as u32 + 1;
            t.events.push(KernelEvent { name, id, format: None, fields });
        }
        t.events.push(KernelEvent { id: t.events.len() as u32 + 1, ..dump });
        t
    }

    /// The index of the class named `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.events.iter().position(|e| e.name == name)
    }

    /// The class of ftrace event id `id`.
    pub fn by_ftrace_id(&self, id: u16) -> Option<&KernelEvent> {
        self.by_ftrace_id.get(&id).and_then(|&i| self.events.get(i))
    }

    /// The state-dump class.
    pub fn statedump(&self) -> &KernelEvent {
        self.events.last().expect("the state dump is always there")
    }
}

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
    /// Pid of the traced command (`env.traced_pid`), 0 when unknown.
    pub traced_pid: i32,
    /// `YYYYmmddTHHMMSS+hhmm`.
    pub creation_datetime: &'a str,
    /// `env.kernel_source`: `tracefs` (system-wide ftrace events) or `perf_event_open`
    /// (tier 1: the traced tasks only, `ust_cli::kernel::perf`).
    pub source: &'a str,
}

/// Renders the TSDL of the kernel trace (CTF 1.8 sections 7 and 8).
pub fn render_metadata(m: &KernelMetadata<'_>, table: &EventTable) -> String {
    use ust_core::event::escape_tsdl;
    let clock = ust_ctf::metadata::CLOCK_NAME;
    let mut s = String::from("/* CTF 1.8 */\n\n");
    s.push_str(&ust_ctf::metadata::trace_block(&m.uuid));
    let _ = write!(
        s,
        "env {{\n\thostname = \"{}\";\n\tdomain = \"kernel\";\n\tsysname = \"Linux\";\n\tkernel_release = \"{}\";\n\
         \ttracer_name = \"ust-kernel\";\n\ttracer_major = {};\n\ttracer_minor = {};\n\ttrace_clock = \"mono\";\n\
         \ttraced_pid = {};\n\ttrace_creation_datetime = \"{}\";\n\tkernel_source = \"{}\";\n}};\n\n",
        escape_tsdl(m.hostname),
        escape_tsdl(m.kernel_release),
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
        m.traced_pid,
        escape_tsdl(m.creation_datetime),
        escape_tsdl(m.source)
    );
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

/// A value for a [`Source::Given`] field.
#[derive(Clone, Debug)]
pub enum Given<'a> {
    /// An integer (written in the field's size).
    Int(i64),
    /// Text (truncated to the field; NUL-padded for text arrays).
    Text(&'a str),
    /// The elements of a [`CtfType::U64Seq`].
    U64s(&'a [u64]),
}

/// Counters of one CPU stream.
#[derive(Clone, Debug, Default)]
pub struct StreamStats {
    /// Events written per class index.
    pub counts: Vec<u64>,
    /// Events the kernel reported lost (ftrace "missed events").
    pub lost: u64,
    /// Records or pages that could not be decoded (skipped).
    pub bad: u64,
    /// Packets written.
    pub packets: u64,
}

/// The stream file of one CPU, written packet by packet.
#[derive(Debug)]
pub struct CpuStream {
    table: std::sync::Arc<EventTable>,
    cpu: u32,
    uuid: [u8; 16],
    file: StreamFile,
    index: IndexFile,
    buf: Vec<u8>,
    begin: Option<u64>,
    last_ts: u64,
    seq: u64,
    /// Counters so far.
    pub stats: StreamStats,
}

impl CpuStream {
    /// Creates `dir/channel0_<cpu>` and its index.
    ///
    /// # Errors
    /// The I/O error.
    pub fn create(dir: &Path, table: std::sync::Arc<EventTable>, uuid: [u8; 16], cpu: u32) -> std::io::Result<CpuStream> {
        let name = ust_ctf::stream_file_name(CHANNEL, cpu);
        std::fs::create_dir_all(dir.join("index"))?;
        let file = StreamFile::create(dir, &name)?;
        let index = IndexFile::create(dir, &name)?;
        let n = table.events.len();
        Ok(CpuStream {
            table,
            cpu,
            uuid,
            file,
            index,
            buf: vec![0; HEADER_SIZE],
            begin: None,
            last_ts: 0,
            seq: 0,
            stats: StreamStats { counts: vec![0; n], ..Default::default() },
        })
    }

    fn header(&mut self, id: u32, ts: u64, tid: i32) -> u64 {
        let ts = ts.max(self.last_ts);
        let extended = self.begin.is_none() || ts - self.last_ts >= 1 << event_header::COMPACT_TIMESTAMP_BITS;
        if self.begin.is_none() {
            self.begin = Some(ts);
        }
        let mut h = [0u8; event_header::EXTENDED_SIZE];
        let (b0, len) = event_header::write(&mut h, id, ts, extended);
        h[0] = b0;
        self.buf.extend_from_slice(&h[..len]);
        self.buf.extend_from_slice(&tid.to_le_bytes());
        self.last_ts = ts;
        ts
    }

    /// Appends the state-dump record of one task.
    ///
    /// # Errors
    /// The I/O error of a packet flush.
    pub fn push_given(&mut self, class: usize, ts: u64, tid: i32, values: &[Given<'_>]) -> std::io::Result<()> {
        let table = self.table.clone();
        let Some(ev) = table.events.get(class) else { return Ok(()) };
        let mark = self.buf.len();
        let save = (self.begin, self.last_ts);
        self.header(ev.id, ts, tid);
        for (f, v) in ev.fields.iter().zip(values.iter().chain(std::iter::repeat(&Given::Int(0)))) {
            match (&f.ty, v) {
                (CtfType::Int { bytes, .. }, Given::Int(x)) => self.buf.extend_from_slice(&x.to_le_bytes()[..*bytes]),
                (CtfType::Text(n), Given::Text(t)) => {
                    let mut b = t.as_bytes().to_vec();
                    b.retain(|&c| c != 0);
                    b.resize(*n as usize, 0);
                    self.buf.extend_from_slice(&b);
                }
                (CtfType::String, Given::Text(t)) => {
                    self.buf.extend(t.bytes().filter(|&c| c != 0));
                    self.buf.push(0);
                }
                (CtfType::U64Seq, Given::U64s(v)) => {
                    self.buf.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    for x in *v {
                        self.buf.extend_from_slice(&x.to_le_bytes());
                    }
                }
                _ => {
                    self.buf.truncate(mark);
                    (self.begin, self.last_ts) = save;
                    self.stats.bad += 1;
                    return Ok(());
                }
            }
        }
        self.stats.counts[class] += 1;
        self.maybe_flush()
    }

    /// Decodes one page read from `trace_pipe_raw` and appends its events.
    ///
    /// # Errors
    /// The I/O error of a packet flush (decoding problems are counted, not returned).
    pub fn push_page(&mut self, page: &[u8], layout: &super::ftrace::PageLayout) -> std::io::Result<()> {
        let table = self.table.clone();
        let mut bad = 0u64;
        let res = super::ftrace::decode_page(page, layout, |e| {
            if !self.push_raw(&table, e.timestamp, e.payload) {
                bad += 1;
            }
        });
        self.stats.bad += bad;
        match res {
            Ok(info) => self.stats.lost += info.missed.unwrap_or(0),
            Err(_) => self.stats.bad += 1,
        }
        self.maybe_flush()
    }

    /// Appends one decoded ftrace record (`payload` from `common_type` on, as
    /// [`super::ftrace::RawEvent`] gives it); returns false (and counts it as bad) when it
    /// does not decode.
    ///
    /// # Errors
    /// The I/O error of a packet flush.
    pub fn push_record(&mut self, ts: u64, payload: &[u8]) -> std::io::Result<bool> {
        let table = self.table.clone();
        let ok = self.push_raw(&table, ts, payload);
        if !ok {
            self.stats.bad += 1;
        }
        self.maybe_flush()?;
        Ok(ok)
    }

    /// The trace UUID this stream was created with.
    pub fn uuid(&self) -> [u8; 16] {
        self.uuid
    }

    /// True when the current packet holds events not yet written.
    pub fn pending(&self) -> bool {
        self.begin.is_some()
    }

    fn push_raw(&mut self, table: &EventTable, ts: u64, payload: &[u8]) -> bool {
        let Some(kind) = read_uint(payload, 0, 2) else { return false };
        let Some(ev) = table.by_ftrace_id(kind as u16) else { return false };
        let tid = read_uint(payload, 4, 4).unwrap_or(0) as u32 as i32;
        let mark = self.buf.len();
        let save = (self.begin, self.last_ts);
        self.header(ev.id, ts, tid);
        for f in &ev.fields {
            let ok = match (&f.source, &f.ty) {
                (Source::Format(ff), CtfType::String) => match dyn_string(payload, ff) {
                    Some(s) => {
                        self.buf.extend_from_slice(s);
                        self.buf.push(0);
                        true
                    }
                    None => false,
                },
                (Source::Format(ff), _) => match payload.get(ff.offset..ff.offset + ff.size) {
                    Some(b) => {
                        self.buf.extend_from_slice(b);
                        true
                    }
                    None => false,
                },
                (Source::SyscallName(ff), _) => match read_uint(payload, ff.offset, ff.size) {
                    Some(nr) => {
                        self.buf.extend_from_slice(super::syscalls::syscall_name(nr as i64).as_bytes());
                        self.buf.push(0);
                        true
                    }
                    None => false,
                },
                (Source::Given, _) => false,
            };
            if !ok {
                self.buf.truncate(mark);
                (self.begin, self.last_ts) = save;
                return false;
            }
        }
        self.stats.counts[(ev.id - 1) as usize] += 1;
        true
    }

    fn maybe_flush(&mut self) -> std::io::Result<()> {
        if self.buf.len() >= PACKET_TARGET {
            self.flush()?;
        }
        Ok(())
    }

    /// Closes the current packet (if it holds events) and appends it to the file.
    ///
    /// # Errors
    /// The I/O error.
    pub fn flush(&mut self) -> std::io::Result<()> {
        let Some(begin) = self.begin else { return Ok(()) };
        let stream = StreamIdentity { uuid: self.uuid, stream_id: 0, cpu: self.cpu, stream_instance_id: u64::from(self.cpu) };
        let len = self.buf.len() as u64;
        let end = PacketEnd {
            timestamp_begin: begin,
            timestamp_end: self.last_ts,
            content_size: len,
            packet_size: len,
            packet_seq_num: self.seq,
            events_discarded: self.stats.lost,
        };
        CtfPacketLayout.write_end(&stream, &mut self.buf[..HEADER_SIZE], &end);
        let offset = self.file.append_packet(&self.buf)?;
        self.index.append(&IndexEntry {
            offset,
            packet_size_bits: len * 8,
            content_size_bits: len * 8,
            timestamp_begin: begin,
            timestamp_end: self.last_ts,
            events_discarded: self.stats.lost,
            stream_id: 0,
            stream_instance_id: u64::from(self.cpu),
            packet_seq_num: self.seq,
        })?;
        self.seq += 1;
        self.stats.packets += 1;
        self.buf.truncate(HEADER_SIZE);
        self.begin = None;
        Ok(())
    }
}
