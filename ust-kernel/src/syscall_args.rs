//! The system calls' arguments as this machine's tracefs names and types them
//! (`events/syscalls/sys_enter_<name>/format`: the kernel's `SYSCALL_DEFINE` names), by
//! call name. Read by the CTF layout of `syscall_entry_<name>` ([`crate::lttng`]) and by
//! the choice of which arguments the BPF program copies ([`crate::argspec`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

use crate::format::EventFormat;

/// System call arguments by call name: `(argument name, C type)` in order.
pub type SyscallArgs = HashMap<String, Vec<(String, String)>>;

/// Reads the argument lists of every `events/syscalls/sys_enter_<name>/format` under
/// `events` (a tracefs root's or instance's `events` directory); an unreadable one is
/// left out.
pub fn read_syscall_args(events: &Path) -> SyscallArgs {
    let mut out = SyscallArgs::new();
    let Ok(rd) = std::fs::read_dir(events.join("syscalls")) else { return out };
    for e in rd.flatten() {
        let dir = e.file_name().to_string_lossy().into_owned();
        let Some(call) = dir.strip_prefix("sys_enter_") else { continue };
        let Ok(f) = EventFormat::read(events, "syscalls", &dir) else { continue };
        let args = f.fields.iter().filter(|x| x.name != "__syscall_nr").map(|x| (x.name.clone(), x.c_type.clone())).collect();
        out.insert(call.to_string(), args);
    }
    out
}

/// The argument lists of this machine's tracefs (read once; empty without tracefs).
pub fn system_syscall_args() -> &'static SyscallArgs {
    static ARGS: OnceLock<SyscallArgs> = OnceLock::new();
    ARGS.get_or_init(|| crate::tracefs::root().map(|r| read_syscall_args(&r.join("events"))).unwrap_or_default())
}

/// The `SYSCALL_DEFINE` names tracefs and lttng-modules use for the x86-64 calls whose
/// `asm/unistd_64.h` name (the event name, [`crate::syscalls`]) differs.
const DEFINE_NAMES: [(&str, &str); 6] =
    [("stat", "newstat"), ("fstat", "newfstat"), ("lstat", "newlstat"), ("uname", "newuname"), ("sendfile", "sendfile64"), ("umount2", "umount")];

/// The arguments of system call `call` (its `asm/unistd_64.h` name) in `args`, which may
/// name it so or by its `SYSCALL_DEFINE` name (`stat` is `newstat` in tracefs).
pub fn call_args<'a>(args: &'a SyscallArgs, call: &str) -> Option<&'a Vec<(String, String)>> {
    args.get(call).or_else(|| DEFINE_NAMES.iter().find(|(n, _)| *n == call).and_then(|(_, d)| args.get(*d)))
}
