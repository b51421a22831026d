//! The kernel CTF 1.8 trace, `<output>/kernel/`: one stream per CPU (`channel0_<cpu>` and
//! `index/channel0_<cpu>.idx`), with the packet header, packet context (`cpu_id` included)
//! and compact event header of the user-space traces ([`ust_core::packet`],
//! [`ust_core::event_header`]: the layout of lttng-modules' own ring-buffer client, a 5-bit
//! id and 27-bit timestamp or the extended form) and the same `monotonic` clock block
//! (boot-id UUID, the session's offset), so babeltrace2 merges `<output>` into one timeline.
//! The trace has its own UUID.
//!
//! The trace is in LTTng's kernel layout ([`super::lttng`]): the metadata `env` of
//! lttng-modules 2.13 (`domain = "kernel"`, `tracer_name = "lttng-modules"`, version,
//! `sysname`, `kernel_release`, `kernel_version`, `hostname`; plus `ust_writer`, naming
//! this writer, and `traced_pid`, `kernel_source`), and lttng-modules' event and field names,
//! so babeltrace 1, lttng-analyses and Trace Compass's kernel analyses read it.
//!
//! Stream class 0 has an event context `{ int32 _tid; }` (the ftrace `common_pid`: the
//! thread the event happened in, 0 for the idle task; what `lttng add-context -k -t tid`
//! adds). Event payloads are the format-file fields after the `common_*` ones, packed, in
//! format order, typed from the format file ([`super::format`]): integers with their size
//! and signedness (pointers in base 16), `char x[N]` as UTF-8 text arrays (babeltrace2
//! prints them as strings), integer arrays, and `__data_loc char[]` as CTF strings.
//!
//! Event names are LTTng's kernel names (`sched_switch`, `irq_softirq_entry`,
//! `timer_hrtimer_expire_entry`, `x86_irq_vectors_local_timer_entry`,
//! `x86_exceptions_page_fault_user`, `_kernel`; `filemap_add_to_page_cache`, which
//! lttng-modules lacks). A `raw_syscalls` record becomes `syscall_entry_<name>` with the
//! call's named arguments or `syscall_exit_<name>` with `ret`, by its number (the x86-64
//! table, [`super::syscalls`]); with [`EventTable::with_captured_args`], the strings,
//! sockaddrs and argv the BPF capture copied ([`super::bpf`]), joined to the record by
//! [`CpuStream::push_record_joined`]. The state dump at the start ([`super::lttng`]) is written in
//! the stream of the CPU each task last ran on.

use std::collections::HashMap;
use std::fmt::Write as _;

use ringbuffer::{PacketEnd, PacketLayout, StreamIdentity};
use ust_core::event_header;
use ust_core::packet::{CtfPacketLayout, PacketInfo, HEADER_SIZE};

use super::captured::{ArgPart, CallArgs};
use super::format::{dyn_string, read_uint, EventFormat, FieldFormat, FieldKind};
use ust_ctf::outdir::TraceDir;
use ust_ctf::writer::{StreamWriter, WriteBack};

/// The ftrace events recorded: `(system, event, CTF name)`.
pub const EVENTS: &[(&str, &str, &str)] = &[
    ("sched", "sched_switch", "sched_switch"),
    ("sched", "sched_waking", "sched_waking"),
    ("sched", "sched_wakeup", "sched_wakeup"),
    ("sched", "sched_wakeup_new", "sched_wakeup_new"),
    ("sched", "sched_process_fork", "sched_process_fork"),
    ("sched", "sched_process_exec", "sched_process_exec"),
    ("sched", "sched_process_exit", "sched_process_exit"),
    // A new task's clone flags (ftrace's name; lttng-modules has no such event): tells a
    // thread (`CLONE_THREAD`, `CLONE_VM`) from a process, which `sched_process_fork` does
    // not (report/addrspace.rs).
    ("task", "task_newtask", "task_newtask"),
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

/// Events root's own recording ([`crate::filter::ViewFilter::everything`]) adds to [`EVENTS`]
/// (lttng-modules records them; the tier-2 view does not, its filter has no rule for them).
pub const ROOT_EVENTS: &[(&str, &str, &str)] = &[
    ("sched", "sched_process_free", "sched_process_free"),
    ("sched", "sched_migrate_task", "sched_migrate_task"),
    ("irq", "softirq_raise", "irq_softirq_raise"),
];

/// Name of the state-dump event.
pub const STATEDUMP_EVENT: &str = super::lttng::STATEDUMP_PROCESS_STATE;
/// Name of the kernel channel (stream files `channel0_<cpu>`): everything, or, beside
/// [`TREE_CHANNEL`], what is recorded system-wide (scheduling, interrupts, timers).
pub const CHANNEL: &str = "channel0";
/// Name of the channel of the traced tree's own high-rate events (system calls, page
/// faults, page-cache reads), filtered to the tree in the kernel (stream files `tree_<cpu>`;
/// their stream instance ids are [`TREE_INSTANCE_BASE`] + CPU).
pub const TREE_CHANNEL: &str = "tree";
/// Stream instance id of [`TREE_CHANNEL`]'s stream of CPU 0 (those of [`CHANNEL`] are the
/// CPU numbers): babeltrace2 takes files with the same stream class and instance id for
/// pieces of one stream.
pub const TREE_INSTANCE_BASE: u64 = 1 << 32;
/// A packet is closed once its content reaches this many bytes.
pub const PACKET_TARGET: usize = 64 * 1024;

pub use super::ctf_type::CtfType;

/// Where an exported field's bytes come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// A field of the ftrace record.
    Format(FieldFormat),
    /// The name of the system call whose number is the record's `id` field.
    SyscallName(FieldFormat),
    /// Filled by the writer (state dump).
    Given,
    /// Slot `index` of the `args` array of a `raw_syscalls:sys_enter` record (a system
    /// call argument, truncated to the field's size).
    RawArg {
        /// The `args` field.
        args: FieldFormat,
        /// 0 to 5.
        index: usize,
    },
    /// A value copied from user memory for argument `arg` of a `raw_syscalls:sys_enter`
    /// record ([`crate::captured`]): written from the call's [`CallArgs`] joined to the
    /// record, or as missing.
    Captured {
        /// 0 to 5.
        arg: u8,
        /// Which field of it.
        part: ArgPart,
    },
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

/// How the records of one ftrace event id become CTF events.
#[derive(Clone, Debug)]
enum Route {
    /// Always the class of this index.
    Class(usize),
    /// A `raw_syscalls` record: the class of its system call number.
    Syscall {
        /// The ftrace event (named `syscall_entry` or `syscall_exit`, never written).
        proto: Box<KernelEvent>,
        /// Its `id` field (the system call number).
        nr: FieldFormat,
        /// Class index by number.
        by_nr: Vec<Option<usize>>,
        /// `syscall_{entry,exit}_unknown`.
        unknown: usize,
    },
}

/// The event classes of one recording, and the ftrace id → class map.
#[derive(Clone, Debug, Default)]
pub struct EventTable {
    /// Classes; `events[i].id == i + 1`.
    pub events: Vec<KernelEvent>,
    by_ftrace_id: HashMap<u16, Route>,
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
    /// missing events are simply absent), with field names as lttng-modules has them
    /// ([`super::lttng::fields_of`]), the per-call system call classes when `raw_syscalls`
    /// is there (arguments from this machine's tracefs, [`super::lttng::system_syscall_args`]),
    /// and the state-dump classes last.
    pub fn new(formats: Vec<(String, EventFormat)>) -> EventTable {
        Self::with_syscall_args(formats, super::lttng::system_syscall_args())
    }

    fn push(&mut self, name: String, format: Option<EventFormat>, fields: Vec<CtfField>) -> usize {
        let id = self.events.len() as u32 + 1;
        self.events.push(KernelEvent { name, id, format, fields });
        self.events.len() - 1
    }

    /// [`EventTable::new`] with the system call arguments given.
    pub fn with_syscall_args(formats: Vec<(String, EventFormat)>, args: &super::lttng::SyscallArgs) -> EventTable {
        Self::with_captured_args(formats, args, false)
    }

    /// [`EventTable::with_syscall_args`]; with `captured`, the `syscall_entry_*` classes
    /// have the fields of the arguments [`super::bpf::Capture`] copies (strings, sockaddrs,
    /// argv: [`super::lttng::entry_fields`]), written from what
    /// [`CpuStream::push_record_joined`]'s join gives.
    pub fn with_captured_args(formats: Vec<(String, EventFormat)>, args: &super::lttng::SyscallArgs, captured: bool) -> EventTable {
        let mut t = EventTable::default();
        for (name, fmt) in formats {
            if fmt.system == "raw_syscalls" {
                t.add_syscalls(name, fmt, args, captured);
                continue;
            }
            let fields = super::lttng::fields_of(&fmt, ctf_field);
            let id = fmt.id;
            let i = t.push(name, Some(fmt), fields);
            t.by_ftrace_id.insert(id, Route::Class(i));
        }
        for (name, fields) in super::lttng::statedump_classes() {
            t.push(name.into(), None, fields);
        }
        t
    }

    fn add_syscalls(&mut self, name: String, fmt: EventFormat, args: &super::lttng::SyscallArgs, captured: bool) {
        let entry = fmt.name == "sys_enter";
        let (Some(nr), Some(extra)) = (fmt.field("id").cloned(), fmt.field(if entry { "args" } else { "ret" }).cloned()) else { return };
        let Some(extra_ctf) = ctf_field(&extra) else { return };
        let prefix = if entry { "syscall_entry" } else { "syscall_exit" };
        let mut by_nr = Vec::with_capacity(super::syscalls::SYSCALLS_X86_64.len());
        for call in super::syscalls::SYSCALLS_X86_64 {
            if call.is_empty() {
                by_nr.push(None);
                continue;
            }
            let fields = if entry { super::lttng::entry_fields(super::lttng::call_args(args, call), &extra, captured) } else { vec![extra_ctf.clone()] };
            by_nr.push(Some(self.push(format!("{prefix}_{call}"), Some(fmt.clone()), fields)));
        }
        let id_field = ctf_field(&nr).into_iter();
        let unknown = self.push(format!("{prefix}_unknown"), Some(fmt.clone()), id_field.chain([extra_ctf]).collect());
        let fields = ctf_field(&nr).into_iter().collect();
        let proto = Box::new(KernelEvent { name, id: 0, format: Some(fmt.clone()), fields });
        self.by_ftrace_id.insert(fmt.id, Route::Syscall { proto, nr, by_nr, unknown });
    }

    /// A table of events whose fields are all [`Source::Given`] (the perf_event_open
    /// recording, `ust_kernel::perf`): the state-dump classes, then `(CTF name, fields)`
    /// with the next ids in this order.
    pub fn given(events: Vec<(String, Vec<CtfField>)>) -> EventTable {
        let mut t = EventTable::with_syscall_args(Vec::new(), &Default::default());
        for (name, fields) in events {
            t.push(name, None, fields);
        }
        t
    }

    /// The index of the class named `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.events.iter().position(|e| e.name == name)
    }

    /// The ftrace event of id `id`: its class, or for `raw_syscalls` the event the view
    /// filter reads (named `syscall_entry` / `syscall_exit`; its records are written as the
    /// class of their call).
    pub fn by_ftrace_id(&self, id: u16) -> Option<&KernelEvent> {
        match self.by_ftrace_id.get(&id)? {
            Route::Class(i) => self.events.get(*i),
            Route::Syscall { proto, .. } => Some(proto),
        }
    }

    /// The system call number and `args` of a `raw_syscalls` record of ftrace id `id`
    /// (`None` for other events, or a number beyond 32 bits; `args` are 0 when the record
    /// has none).
    fn syscall_call(&self, id: u16, payload: &[u8]) -> Option<(u32, [u64; 6])> {
        let Route::Syscall { nr, proto, .. } = self.by_ftrace_id.get(&id)? else { return None };
        let nr = u32::try_from(read_uint(payload, nr.offset, nr.size)?).ok()?;
        let mut args = [0u64; 6];
        if let Some(f) = proto.format.as_ref().and_then(|f| f.field("args")).filter(|f| f.size >= 48) {
            for (i, a) in args.iter_mut().enumerate() {
                *a = read_uint(payload, f.offset + 8 * i, 8).unwrap_or(0);
            }
        }
        Some((nr, args))
    }

    /// The class index a record of ftrace id `id` is written as (`payload` from
    /// `common_type` on).
    fn class_of(&self, id: u16, payload: &[u8]) -> Option<usize> {
        match self.by_ftrace_id.get(&id)? {
            Route::Class(i) => Some(*i),
            Route::Syscall { nr, by_nr, unknown, .. } => {
                let n = read_uint(payload, nr.offset, nr.size)?;
                Some(usize::try_from(n).ok().and_then(|n| by_nr.get(n).copied().flatten()).unwrap_or(*unknown))
            }
        }
    }

    /// The `lttng_statedump_process_state` class.
    pub fn statedump(&self) -> &KernelEvent {
        self.index_of(STATEDUMP_EVENT).and_then(|i| self.events.get(i)).expect("the state dump is always there")
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
        super::lttng::TRACER_NAME,
        super::lttng::TRACER_MAJOR,
        super::lttng::TRACER_MINOR,
        super::lttng::TRACER_PATCHLEVEL,
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

/// A value for a [`Source::Given`] field.
#[derive(Clone, Debug)]
pub enum Given<'a> {
    /// An integer (written in the field's size).
    Int(i64),
    /// Text (truncated to the field; NUL-padded for text arrays).
    Text(&'a str),
    /// The elements of a [`CtfType::U64Seq`], a [`CtfType::Seq`] or a [`CtfType::IntArray`]
    /// (each truncated to the element size; an array takes the first `n`, zero-padded).
    U64s(&'a [u64]),
    /// Bytes of a [`CtfType::String`] (a user-space string, not necessarily UTF-8; NULs are
    /// left out) or a [`CtfType::Text`].
    Bytes(&'a [u8]),
}

/// The captured arguments of the `sys_enter` record of thread `tid` (ftrace's
/// `common_pid`), system call `nr`, with `args`, at `ts` (ns): what
/// [`CpuStream::push_record_joined`] asks (`join(ts, tid, nr, args)`).
pub type Join<'a> = dyn FnMut(u64, i32, u32, &[u64; 6]) -> Option<CallArgs> + 'a;

/// Counters of one CPU stream.
#[derive(Clone, Debug, Default)]
pub struct StreamStats {
    /// Events written per class index.
    pub counts: Vec<u64>,
    /// Events lost before they were written (ftrace's missed events, perf's lost records,
    /// records the merge had to drop): the stream's cumulative `events_discarded`.
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
    /// `stream_instance_id` of the packet header and index.
    instance: u64,
    writer: StreamWriter,
    buf: Vec<u8>,
    begin: Option<u64>,
    last_ts: u64,
    seq: u64,
    /// Counters so far.
    pub stats: StreamStats,
}

impl CpuStream {
    /// Creates `dir/channel0_<cpu>` and its index `dir/index/channel0_<cpu>.idx`, through
    /// `dir` ([`TraceDir`]: as its owner, never through a link); stream instance id: the CPU.
    ///
    /// # Errors
    /// The I/O error, or the refusal of what is in the way.
    pub fn create(dir: &TraceDir, table: std::sync::Arc<EventTable>, uuid: [u8; 16], cpu: u32) -> std::io::Result<CpuStream> {
        Self::create_named(dir, &ust_ctf::stream_file_name(CHANNEL, cpu), table, uuid, cpu, u64::from(cpu))
    }

    /// Creates `dir/<name>` and its index: a stream whose packets say `cpu_id` = `cpu` and
    /// `stream_instance_id` = `instance` (unique within the trace: babeltrace2 takes the
    /// files of one instance id as one stream).
    ///
    /// # Errors
    /// The I/O error, or the refusal of what is in the way.
    pub fn create_named(dir: &TraceDir, name: &str, table: std::sync::Arc<EventTable>, uuid: [u8; 16], cpu: u32, instance: u64) -> std::io::Result<CpuStream> {
        let writer = StreamWriter::create(dir, name, WriteBack::Cached)?;
        let n = table.events.len();
        Ok(CpuStream {
            table,
            cpu,
            uuid,
            instance,
            writer,
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
                (CtfType::Text(n), Given::Bytes(t)) => {
                    let mut b: Vec<u8> = t.iter().copied().filter(|&c| c != 0).collect();
                    b.resize(*n as usize, 0);
                    self.buf.extend_from_slice(&b);
                }
                (CtfType::String, Given::Text(t)) => {
                    self.buf.extend(t.bytes().filter(|&c| c != 0));
                    self.buf.push(0);
                }
                (CtfType::String, Given::Bytes(t)) => {
                    self.buf.extend(t.iter().copied().filter(|&c| c != 0));
                    self.buf.push(0);
                }
                (CtfType::U64Seq, Given::U64s(v)) => {
                    self.buf.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    for x in *v {
                        self.buf.extend_from_slice(&x.to_le_bytes());
                    }
                }
                (CtfType::Seq(elem), Given::U64s(v)) => {
                    self.buf.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    for x in *v {
                        match **elem {
                            // Network byte order (lttng-modules' `ctf_sequence_network`).
                            CtfType::NetU16 => self.buf.extend_from_slice(&(*x as u16).to_be_bytes()),
                            CtfType::Int { bytes, .. } => self.buf.extend_from_slice(&x.to_le_bytes()[..bytes.min(8)]),
                            _ => self.buf.extend_from_slice(&x.to_le_bytes()[..1]),
                        }
                    }
                }
                (CtfType::IntArray { bytes, n, .. }, Given::U64s(v)) => {
                    for i in 0..*n as usize {
                        self.buf.extend_from_slice(&v.get(i).copied().unwrap_or(0).to_le_bytes()[..*bytes]);
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

    /// Appends the `lttng_statedump_process_state` record of task `t` (a user thread, in
    /// user mode: `/proc` says no more).
    ///
    /// # Errors
    /// The I/O error of a packet flush.
    pub fn push_process_state(&mut self, ts: u64, t: &super::procfs::TaskState) -> std::io::Result<()> {
        let Some(class) = self.table.index_of(STATEDUMP_EVENT) else { return Ok(()) };
        let status = super::lttng::process_status(t.state);
        let v = [
            Given::Int(t.tid.into()),
            Given::Int(t.pid.into()),
            Given::Int(t.ppid.into()),
            Given::Text(&t.comm),
            Given::Int(0),
            Given::Int(0),
            Given::Int(0),
            Given::Int(status),
            Given::Int(t.cpu.into()),
            Given::Int(0),
        ];
        self.push_given(class, ts, t.tid, &v)
    }

    /// Appends an event of state-dump class `name` with `values` (no record when the class
    /// is absent).
    ///
    /// # Errors
    /// The I/O error of a packet flush.
    pub fn push_named(&mut self, name: &str, ts: u64, tid: i32, values: &[Given<'_>]) -> std::io::Result<()> {
        match self.table.index_of(name) {
            Some(class) => self.push_given(class, ts, tid, values),
            None => Ok(()),
        }
    }

    /// Appends one decoded ftrace record (`payload` from `common_type` on, as
    /// [`super::ftrace::RawEvent`] gives it); returns false (and counts it as bad) when it
    /// does not decode.
    ///
    /// # Errors
    /// The I/O error of a packet flush.
    pub fn push_record(&mut self, ts: u64, payload: &[u8]) -> std::io::Result<bool> {
        self.push_record_joined(ts, payload, &mut |_, _, _, _| None)
    }

    /// [`CpuStream::push_record`] with the captured arguments of a `sys_enter` record from
    /// `join`, as [`CpuStream::push_record_joined`].
    ///
    /// # Errors
    /// The I/O error of a packet flush.
    pub fn push_record_joined(&mut self, ts: u64, payload: &[u8], join: &mut Join<'_>) -> std::io::Result<bool> {
        let table = self.table.clone();
        let ok = self.push_raw(&table, ts, payload, join);
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

    /// Counts `n` events lost before time `ts` (ns) and after the last event appended: the
    /// packet being filled is closed, and an empty packet at `ts` carries the new cumulative
    /// `events_discarded`. A reader then sees the loss between the end of the packet before
    /// and `ts` (babeltrace2: a "discarded events" message with that time range), as
    /// LTTng's packet context tells it (CTF 1.8 section 5, `events_discarded`).
    ///
    /// # Errors
    /// The I/O error of the packet writes.
    pub fn note_discarded(&mut self, ts: u64, n: u64) -> std::io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.flush()?;
        self.stats.lost += n;
        self.empty_packet(ts)
    }

    /// Closes the packet being filled and writes an empty one at `ts` (or the last event's
    /// time, if later) with the stream's `events_discarded`: a stream's first packet, so
    /// that a loss before its first event has a packet before it (babeltrace2 cannot tell
    /// the count of a loss in a stream's first packet), or the packet of a loss.
    ///
    /// # Errors
    /// The I/O error of the packet writes.
    pub fn write_empty(&mut self, ts: u64) -> std::io::Result<()> {
        self.flush()?;
        self.empty_packet(ts)
    }

    fn empty_packet(&mut self, ts: u64) -> std::io::Result<()> {
        self.last_ts = self.last_ts.max(ts);
        self.begin = Some(self.last_ts);
        self.flush()
    }

    /// The time of the last event appended (or of the last loss noted), ns.
    pub fn last_ts(&self) -> u64 {
        self.last_ts
    }

    /// True when the current packet holds events not yet written.
    pub fn pending(&self) -> bool {
        self.begin.is_some()
    }

    fn push_raw(&mut self, table: &EventTable, ts: u64, payload: &[u8], join: &mut Join<'_>) -> bool {
        let Some(kind) = read_uint(payload, 0, 2) else { return false };
        let Some(ev) = table.class_of(kind as u16, payload).and_then(|i| table.events.get(i)) else { return false };
        let tid = read_uint(payload, 4, 4).unwrap_or(0) as u32 as i32;
        let captured = match ev.fields.iter().any(|f| matches!(f.source, Source::Captured { .. })) {
            true => table.syscall_call(kind as u16, payload).and_then(|(nr, args)| join(ts, tid, nr, &args)),
            false => None,
        };
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
                (Source::RawArg { args, index }, CtfType::Int { bytes, .. }) => match payload.get(args.offset + 8 * index..args.offset + 8 * index + 8) {
                    Some(b) if 8 * index + 8 <= args.size => {
                        self.buf.extend_from_slice(&b[..*bytes]);
                        true
                    }
                    _ => false,
                },
                (Source::Captured { arg, part }, _) => {
                    super::captured::encode(captured.as_ref(), *arg, *part, &mut self.buf);
                    true
                }
                (Source::Given, _) | (Source::RawArg { .. }, _) => false,
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

    /// Closes the current packet (if it holds events, or is the empty packet of
    /// [`CpuStream::note_discarded`]) and appends it to the file.
    ///
    /// # Errors
    /// The I/O error.
    pub fn flush(&mut self) -> std::io::Result<()> {
        let Some(begin) = self.begin else { return Ok(()) };
        let stream = StreamIdentity { uuid: self.uuid, stream_id: 0, cpu: self.cpu, stream_instance_id: self.instance };
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
        let info = PacketInfo {
            uuid: self.uuid,
            stream_id: 0,
            stream_instance_id: self.instance,
            timestamp_begin: begin,
            timestamp_end: self.last_ts,
            content_size: len,
            packet_size: len,
            packet_seq_num: self.seq,
            events_discarded: self.stats.lost,
            cpu_id: self.cpu,
        };
        // On failure neither file keeps any of the packet (ust_ctf::writer's rule), and the
        // packet stays here, so the next flush writes it once.
        self.writer.append(&self.buf, &info).map_err(|e| e.error)?;
        self.seq += 1;
        self.stats.packets += 1;
        self.buf.truncate(HEADER_SIZE);
        self.begin = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str =
        "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n";

    fn format(system: &str, name: &str, id: u16, fields: &str) -> EventFormat {
        EventFormat::parse(system, &format!("name: {name}\nID: {id}\nformat:\n{HEAD}\n{fields}")).unwrap()
    }

    fn record(kind: u16, tid: i32, rest: &[u8]) -> Vec<u8> {
        let mut p = kind.to_le_bytes().to_vec();
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(&tid.to_le_bytes());
        p.extend_from_slice(rest);
        p
    }

    /// `raw_syscalls` records become lttng-modules' per-call events with the arguments the
    /// `sys_enter_<name>` formats name, `sched_switch` gets the `_tid` names, and
    /// babeltrace2 reads the result back.
    #[test]
    fn syscalls_and_sched_switch_in_lttng_names() {
        let enter = format(
            "raw_syscalls",
            "sys_enter",
            21,
            "\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n",
        );
        let exit =
            format("raw_syscalls", "sys_exit", 20, "\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n");
        let switch = format(
            "sched",
            "sched_switch",
            30,
            "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
             \tfield:char next_comm[16];\toffset:28;\tsize:16;\tsigned:0;\n\tfield:pid_t next_pid;\toffset:44;\tsize:4;\tsigned:1;\n",
        );
        let mut args = super::super::lttng::SyscallArgs::new();
        args.insert(
            "openat".into(),
            vec![("dfd".into(), "int".into()), ("filename".into(), "const char *".into()), ("flags".into(), "int".into()), ("mode".into(), "umode_t".into())],
        );
        let table = std::sync::Arc::new(EventTable::with_syscall_args(
            vec![("syscall_entry".into(), enter), ("syscall_exit".into(), exit), ("sched_switch".into(), switch)],
            &args,
        ));
        assert!(
            table.index_of("syscall_entry_openat").is_some()
                && table.index_of("syscall_exit_read").is_some()
                && table.index_of("syscall_entry_unknown").is_some()
        );
        assert!(table.index_of("syscall_entry").is_none(), "no generic class is declared");
        assert_eq!(table.by_ftrace_id(21).map(|e| e.name.as_str()), Some("syscall_entry"), "what the view filter reads");
        let dir = tempfile::tempdir().unwrap();
        let out = TraceDir::create(dir.path(), None).unwrap();
        let mut s = CpuStream::create(&out, table.clone(), [7; 16], 0).unwrap();
        let mut openat = 257i64.to_le_bytes().to_vec();
        for a in [-100i64 as u64, 0x1234, 0x80000, 0, 0, 0] {
            openat.extend_from_slice(&a.to_le_bytes());
        }
        assert!(s.push_record(1_000, &record(21, 42, &openat)).unwrap());
        let ret: Vec<u8> = [257i64.to_le_bytes(), 3i64.to_le_bytes()].concat();
        assert!(s.push_record(2_000, &record(20, 42, &ret)).unwrap());
        let odd: Vec<u8> = [100_000i64.to_le_bytes(), (-38i64).to_le_bytes()].concat();
        assert!(s.push_record(3_000, &record(20, 42, &odd)).unwrap());
        let mut sw = Vec::new();
        sw.extend_from_slice(b"sh\0\0\0\0\0\0\0\0\0\0\0\0\0\0");
        sw.extend_from_slice(&42i32.to_le_bytes());
        sw.extend_from_slice(b"swapper/0\0\0\0\0\0\0\0");
        sw.extend_from_slice(&0i32.to_le_bytes());
        assert!(s.push_record(4_000, &record(30, 42, &sw)).unwrap());
        s.flush().unwrap();
        crate::write_metadata(&out, [7; 16], &table, "20260101T000000+0000", 42, 0, "tracefs").unwrap();
        let o = std::process::Command::new("babeltrace2").arg(dir.path()).output().expect("babeltrace2 runs");
        assert!(o.status.success() && o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8(o.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[0].contains("syscall_entry_openat: ") && lines[0].contains("{ dfd = -100, filename = 0x1234, flags = 524288, mode = 0 }"),
            "{}",
            lines[0]
        );
        assert!(lines[1].contains("syscall_exit_openat: ") && lines[1].contains("{ ret = 3 }"), "{}", lines[1]);
        assert!(lines[2].contains("syscall_exit_unknown: ") && lines[2].contains("{ id = 100000, ret = -38 }"), "{}", lines[2]);
        assert!(
            lines[3].contains("sched_switch: ") && lines[3].contains("prev_comm = \"sh\", prev_tid = 42, next_comm = \"swapper/0\", next_tid = 0"),
            "{}",
            lines[3]
        );
        let meta = std::fs::read_to_string(dir.path().join("metadata")).unwrap();
        assert!(meta.contains("tracer_name = \"lttng-modules\";") && meta.contains("domain = \"kernel\";"));
    }
}
