//! LTTng's kernel layout: what lttng-modules 2.13 calls the events and fields the kernel CTF
//! writer ([`super::ctf`]) records, so the tools built for LTTng kernel traces (babeltrace 1
//! and lttng-analyses, Trace Compass's kernel analyses) read `<output>/kernel/` as one of
//! theirs. The names come from lttng-modules' `include/instrumentation/events/` (`sched.h`,
//! `irq.h`, `timer.h`, `arch/x86/exceptions.h`, `lttng-statedump.h`) and its system call
//! tables (`syscall_entry_<name>` with the arguments, `syscall_exit_<name>` with `ret`).
//!
//! - The `sched_*` events name thread ids `tid` where ftrace says `pid` (`prev_tid`,
//!   `next_tid`, `tid`, `child_tid`, `parent_tid`, `old_tid`). `sched_process_fork` also
//!   has lttng-modules' `parent_pid` and `child_pid`: ftrace gives no thread-group id there,
//!   so they hold the thread ids too (right for a process, the new thread's own id for a
//!   thread).
//! - System call arguments are named and typed from tracefs' own `syscalls/sys_enter_<name>`
//!   format files (the kernel's `SYSCALL_DEFINE` names, which lttng-modules' tables also
//!   use); pointers are written in base 16, as integers (lttng-modules copies some user
//!   strings, e.g. `openat`'s `filename`; ftrace cannot, the BPF capture does:
//!   [`entry_fields`] with `captured`). A call the tables do not name is
//!   `syscall_entry_unknown { id, args[6] }` / `syscall_exit_unknown { id, ret }`.
//! - The state dump is `lttng_statedump_start`, one `lttng_statedump_process_state` per
//!   thread (the `status` values of lttng-statedump-impl.c), one
//!   `lttng_statedump_file_descriptor` per open descriptor of each process (with lttng-modules
//!   2.8's `pid`, which lttng-analyses reads, before 2.13's fields), and
//!   `lttng_statedump_end`.

use super::ctf_type::{CtfField, CtfType, Source};
use super::format::{EventFormat, FieldFormat};
pub use super::syscall_args::{call_args, read_syscall_args, system_syscall_args, SyscallArgs};

/// `env.tracer_name` of the kernel trace.
pub const TRACER_NAME: &str = "lttng-modules";
/// `env.tracer_major`.
pub const TRACER_MAJOR: u32 = 2;
/// `env.tracer_minor`.
pub const TRACER_MINOR: u32 = 13;
/// `env.tracer_patchlevel` (the last 2.13 release whose layout this follows).
pub const TRACER_PATCHLEVEL: u32 = 23;

/// State-dump event names, in the order they are written.
pub const STATEDUMP_START: &str = "lttng_statedump_start";
/// One per thread.
pub const STATEDUMP_PROCESS_STATE: &str = "lttng_statedump_process_state";
/// One per open file descriptor.
pub const STATEDUMP_FILE_DESCRIPTOR: &str = "lttng_statedump_file_descriptor";
/// After the dump.
pub const STATEDUMP_END: &str = "lttng_statedump_end";

/// lttng-modules' name of an ftrace field of event `event` of system `system`.
pub fn field_name<'a>(system: &str, event: &str, field: &'a str) -> &'a str {
    if system != "sched" {
        return field;
    }
    match (event, field) {
        (_, "pid") => "tid",
        (_, "prev_pid") => "prev_tid",
        (_, "next_pid") => "next_tid",
        (_, "old_pid") => "old_tid",
        ("sched_process_fork", "parent_pid") => "parent_tid",
        ("sched_process_fork", "child_pid") => "child_tid",
        _ => field,
    }
}

/// The exported fields of an ftrace event in lttng-modules' names: the renamed ones, then
/// for `sched_process_fork` the `parent_pid` and `child_pid` lttng-modules also has.
pub fn fields_of(fmt: &EventFormat, export: impl Fn(&FieldFormat) -> Option<CtfField>) -> Vec<CtfField> {
    let mut out: Vec<CtfField> = fmt
        .fields
        .iter()
        .filter_map(|f| {
            let mut c = export(f)?;
            c.name = field_name(&fmt.system, &fmt.name, &f.name).to_string();
            Some(c)
        })
        .collect();
    if fmt.system == "sched" && fmt.name == "sched_process_fork" {
        for n in ["parent_pid", "child_pid"] {
            if let Some(c) = fmt.field(n).and_then(&export) {
                out.push(CtfField { name: n.into(), ..c });
            }
        }
    }
    out
}

/// The CTF type of a system call argument of C type `c_type` (as a `sys_enter_*` format
/// file spells it): pointers as 64-bit base-16 integers, `int`-sized types as 32 bits
/// (so `AT_FDCWD` reads -100), everything else as 64 bits; unsigned where the C type is.
pub fn arg_type(c_type: &str) -> CtfType {
    let t = c_type.trim();
    if t.contains('*') {
        return CtfType::Int { bytes: 8, signed: false, hex: true };
    }
    let t = t.trim_start_matches("const ").trim();
    let unsigned = t.starts_with("unsigned")
        || t.starts_with("u32")
        || t.starts_with("u64")
        || t.starts_with("__u")
        || t.starts_with("size_t")
        || matches!(t, "umode_t" | "uid_t" | "gid_t" | "old_uid_t" | "old_gid_t" | "qid_t" | "aio_context_t" | "key_serial_t" | "fmode_t");
    let small = matches!(
        t,
        "int"
            | "unsigned int"
            | "unsigned"
            | "pid_t"
            | "uid_t"
            | "gid_t"
            | "umode_t"
            | "mode_t"
            | "key_serial_t"
            | "mqd_t"
            | "clockid_t"
            | "timer_t"
            | "qid_t"
            | "rwf_t"
            | "u32"
            | "__u32"
            | "__s32"
            | "old_uid_t"
            | "old_gid_t"
            | "fmode_t"
    );
    CtfType::Int { bytes: if small { 4 } else { 8 }, signed: !unsigned, hex: false }
}

/// The fields of `syscall_entry_<call>`: each named argument read from slot `i` of the
/// `raw_syscalls:sys_enter` record's `args` array (`args_field`). With `captured`, the
/// arguments [`super::argspec`] names get the fields of the values copied from user memory
/// ([`super::bpf`], [`super::captured`]), as lttng-modules records them where it does:
///
/// - a string `<name>` (`filename`, `pathname`, …) is a CTF `string <name>`, as
///   lttng-modules' `ctf_user_string`; beside it `<name>_ptr` (the pointer, base 16) and
///   `<name>_status` (enumeration `ok`, `cut`, `fault`, `null`, `missing`; the string of a
///   value that is not `ok` or `cut` is the marker `(fault)`, `(null)` or `(missing)`,
///   [`super::captured`]);
/// - a sockaddr stays the pointer (lttng-modules' `uservaddr`), and the call gets, after
///   its arguments, lttng-modules' `connect` fields (`family`, `dport` in network order,
///   `v4addr` (u8 sequence), `v6addr` (big-endian u16 sequence)), then `sun_path` (an
///   AF_UNIX path, `@name` for an abstract one) and `<name>_status`: readers that know
///   LTTng's fields find them, the others skip them;
/// - an argv stays the pointer (as lttng-modules' `execve`), followed by
///   `<name>_text` (the first 16 strings, each cut at 1024 bytes, as strace writes them:
///   `["ls", "-l"]`, [`super::captured::CallArgs::argv_text`]) and `<name>_status` (`cut`
///   when more elements or longer strings were left out).
pub fn entry_fields(args: Option<&Vec<(String, String)>>, args_field: &FieldFormat, captured: bool) -> Vec<CtfField> {
    use super::argspec::ArgKind;
    use super::captured::{ArgPart, STATUS_LABELS};
    let Some(a) = args else { return Vec::new() };
    let (mut out, mut tail) = (Vec::new(), Vec::new());
    for (i, (name, c_type)) in a.iter().take(6).enumerate() {
        let raw = CtfField { name: name.clone(), ty: arg_type(c_type), source: Source::RawArg { args: args_field.clone(), index: i } };
        let cap = |n: String, ty: CtfType, part: ArgPart| CtfField { name: n, ty, source: Source::Captured { arg: i as u8, part } };
        let status = || cap(format!("{name}_status"), CtfType::Enum8(STATUS_LABELS), ArgPart::Status);
        match captured.then(|| super::argspec::classify(a, i)).flatten() {
            None => out.push(raw),
            Some(ArgKind::String) => {
                out.push(cap(name.clone(), CtfType::String, ArgPart::Text));
                out.push(CtfField { name: format!("{name}_ptr"), ..raw });
                out.push(status());
            }
            Some(ArgKind::Argv) => {
                out.push(raw);
                out.push(cap(format!("{name}_text"), CtfType::String, ArgPart::ArgvText));
                out.push(status());
            }
            Some(ArgKind::Sockaddr) => {
                out.push(raw);
                tail.push(cap("family".into(), CtfType::Int { bytes: 2, signed: false, hex: false }, ArgPart::Family));
                tail.push(cap("dport".into(), CtfType::NetU16, ArgPart::Dport));
                tail.push(cap("v4addr".into(), CtfType::Seq(Box::new(CtfType::Int { bytes: 1, signed: false, hex: false })), ArgPart::V4addr));
                tail.push(cap("v6addr".into(), CtfType::Seq(Box::new(CtfType::NetU16)), ArgPart::V6addr));
                tail.push(cap("sun_path".into(), CtfType::String, ArgPart::SunPath));
                tail.push(status());
            }
        }
    }
    out.extend(tail);
    out
}

/// lttng-modules' process `status` (lttng-statedump-impl.c) of a `/proc` state letter.
pub fn process_status(state: char) -> i64 {
    match state {
        'R' => 6,             // LTTNG_RUN
        'S' | 'D' | 'I' => 5, // LTTNG_WAIT
        'Z' => 4,             // LTTNG_ZOMBIE
        'X' => 7,             // LTTNG_DEAD
        _ => 0,               // LTTNG_UNNAMED
    }
}

/// The state-dump classes: `(name, fields)` in [`STATEDUMP_START`] … [`STATEDUMP_END`] order.
pub fn statedump_classes() -> Vec<(&'static str, Vec<CtfField>)> {
    let given = |name: &str, ty| CtfField { name: name.into(), ty, source: Source::Given };
    let i32t = || CtfType::Int { bytes: 4, signed: true, hex: false };
    let u32t = || CtfType::Int { bytes: 4, signed: false, hex: false };
    let hex = || CtfType::Int { bytes: 8, signed: false, hex: true };
    vec![
        (STATEDUMP_START, vec![]),
        (
            STATEDUMP_PROCESS_STATE,
            vec![
                given("tid", i32t()),
                given("pid", i32t()),
                given("ppid", i32t()),
                given("name", CtfType::Text(16)),
                given("type", i32t()),
                given("mode", i32t()),
                given("submode", i32t()),
                given("status", i32t()),
                given("cpu", u32t()),
                given("file_table_address", hex()),
            ],
        ),
        (
            STATEDUMP_FILE_DESCRIPTOR,
            vec![
                given("pid", i32t()),
                given("file_table_address", hex()),
                given("fd", i32t()),
                given("flags", u32t()),
                given("fmode", hex()),
                given("filename", CtfType::String),
            ],
        ),
        (STATEDUMP_END, vec![]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_types_follow_the_c_types() {
        assert_eq!(arg_type("const char *"), CtfType::Int { bytes: 8, signed: false, hex: true });
        assert_eq!(arg_type("int"), CtfType::Int { bytes: 4, signed: true, hex: false });
        assert_eq!(arg_type("unsigned int"), CtfType::Int { bytes: 4, signed: false, hex: false });
        assert_eq!(arg_type("size_t"), CtfType::Int { bytes: 8, signed: false, hex: false });
        assert_eq!(arg_type("long"), CtfType::Int { bytes: 8, signed: true, hex: false });
    }

    #[test]
    fn arguments_are_found_by_either_name() {
        let mut args = SyscallArgs::new();
        args.insert("newstat".into(), vec![("filename".into(), "const char *".into())]);
        args.insert("read".into(), vec![("fd".into(), "unsigned int".into())]);
        assert_eq!(call_args(&args, "stat").map(|a| a[0].0.as_str()), Some("filename"));
        assert_eq!(call_args(&args, "read").map(|a| a[0].0.as_str()), Some("fd"));
        assert!(call_args(&args, "write").is_none());
    }

    #[test]
    fn sched_fields_are_renamed_to_tids() {
        assert_eq!(field_name("sched", "sched_switch", "next_pid"), "next_tid");
        assert_eq!(field_name("sched", "sched_waking", "pid"), "tid");
        assert_eq!(field_name("sched", "sched_process_fork", "child_pid"), "child_tid");
        assert_eq!(field_name("irq", "irq_handler_entry", "irq"), "irq");
    }
}
