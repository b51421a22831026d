//! Unit tests of the kernel CTF trace: per-call system call classes, lttng-modules' names,
//! read back by babeltrace2.

use super::*;

use crate::format::EventFormat;
use ust_ctf::outdir::TraceDir;

const HEAD: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
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
    let exit = format("raw_syscalls", "sys_exit", 20, "\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n");
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
        table.index_of("syscall_entry_openat").is_some() && table.index_of("syscall_exit_read").is_some() && table.index_of("syscall_entry_unknown").is_some()
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
    assert!(lines[0].contains("syscall_entry_openat: ") && lines[0].contains("{ dfd = -100, filename = 0x1234, flags = 524288, mode = 0 }"), "{}", lines[0]);
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
