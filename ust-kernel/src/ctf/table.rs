//! The event classes of one kernel recording ([`EventTable`]): one [`KernelEvent`] per
//! ftrace event found, per-call `syscall_entry_*` / `syscall_exit_*` classes for
//! `raw_syscalls`, the state-dump classes, and the map from ftrace event ids to classes.

use std::collections::HashMap;

use super::STATEDUMP_EVENT;
use crate::ctf_type::{CtfField, CtfType, Source};
use crate::format::{read_uint, EventFormat, FieldFormat, FieldKind};

/// One CTF event class of the kernel trace.
#[derive(Clone, Debug)]
pub struct KernelEvent {
    /// CTF event name.
    pub name: String,
    /// CTF id (from 1, in [`EVENTS`](super::EVENTS) order, then the state dump).
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
        FieldKind::DynString { .. } | FieldKind::ProbeText { .. } => CtfType::String,
        FieldKind::Other => return None,
    };
    Some(CtfField { name: f.name.clone(), ty, source: Source::Format(f.clone()) })
}

impl EventTable {
    /// Builds the table from the formats found (`(CTF name, format)` in [`EVENTS`](super::EVENTS) order;
    /// missing events are simply absent), with field names as lttng-modules has them
    /// ([`crate::lttng::fields_of`]), the per-call system call classes when `raw_syscalls`
    /// is there (arguments from this machine's tracefs, [`crate::lttng::system_syscall_args`]),
    /// and the state-dump classes last.
    pub fn new(formats: Vec<(String, EventFormat)>) -> EventTable {
        Self::with_syscall_args(formats, crate::lttng::system_syscall_args())
    }

    fn push(&mut self, name: String, format: Option<EventFormat>, fields: Vec<CtfField>) -> usize {
        let id = self.events.len() as u32 + 1;
        self.events.push(KernelEvent { name, id, format, fields });
        self.events.len() - 1
    }

    /// [`EventTable::new`] with the system call arguments given.
    pub fn with_syscall_args(formats: Vec<(String, EventFormat)>, args: &crate::lttng::SyscallArgs) -> EventTable {
        Self::with_captured_args(formats, args, false)
    }

    /// [`EventTable::with_syscall_args`]; with `captured`, the `syscall_entry_*` classes
    /// have the fields of the arguments [`crate::bpf::Capture`] copies (strings, sockaddrs,
    /// argv: [`crate::lttng::entry_fields`]), written from what
    /// [`CpuStream::push_record_joined`](super::CpuStream::push_record_joined)'s join gives.
    pub fn with_captured_args(formats: Vec<(String, EventFormat)>, args: &crate::lttng::SyscallArgs, captured: bool) -> EventTable {
        let mut t = EventTable::default();
        for (name, fmt) in formats {
            if fmt.system == "raw_syscalls" {
                t.add_syscalls(name, fmt, args, captured);
                continue;
            }
            let fields = crate::lttng::fields_of(&fmt, ctf_field);
            let id = fmt.id;
            let i = t.push(name, Some(fmt), fields);
            t.by_ftrace_id.insert(id, Route::Class(i));
        }
        for (name, fields) in crate::lttng::statedump_classes() {
            t.push(name.into(), None, fields);
        }
        t
    }

    fn add_syscalls(&mut self, name: String, fmt: EventFormat, args: &crate::lttng::SyscallArgs, captured: bool) {
        let entry = fmt.name == "sys_enter";
        let (Some(nr), Some(extra)) = (fmt.field("id").cloned(), fmt.field(if entry { "args" } else { "ret" }).cloned()) else { return };
        let Some(extra_ctf) = ctf_field(&extra) else { return };
        let prefix = if entry { "syscall_entry" } else { "syscall_exit" };
        let mut by_nr = Vec::with_capacity(crate::syscalls::SYSCALLS_X86_64.len());
        for call in crate::syscalls::SYSCALLS_X86_64 {
            if call.is_empty() {
                by_nr.push(None);
                continue;
            }
            let fields = if entry { crate::lttng::entry_fields(crate::lttng::call_args(args, call), &extra, captured) } else { vec![extra_ctf.clone()] };
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
    pub(super) fn syscall_call(&self, id: u16, payload: &[u8]) -> Option<(u32, [u64; 6])> {
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
    pub(super) fn class_of(&self, id: u16, payload: &[u8]) -> Option<usize> {
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
