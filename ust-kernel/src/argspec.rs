//! Which system call arguments point at user memory worth copying, from tracefs' own
//! `events/syscalls/sys_enter_<name>/format` files (the kernel's `SYSCALL_DEFINE` types and
//! names), by x86-64 number ([`super::syscalls`]). Both the capture program's spec table
//! ([`super::bpf`]) and the CTF layout of `syscall_entry_*` ([`super::lttng`]) read it.
//!
//! The rules (checked against the 6.18 format files):
//!
//! - a **user string**: type `const char *` (tracefs drops `__user`) named `filename`,
//!   `pathname`, `path`, `oldname`, `newname`, `name`, `from_pathname`, `to_pathname`,
//!   `new_root`, `put_old` or `specialfile`; and `char * filename`, which `utime` and
//!   `utimes` declare without `const`. LTTng's generator (lttng-syscalls-generate-headers.sh)
//!   makes every `char *` whose name holds name/file/path/root/put_old/type a
//!   `ctf_user_string`, output buffers included (`gethostname`'s `name`); this rule keeps
//!   to arguments the kernel reads;
//! - a **sockaddr**: `struct sockaddr *` whose next argument is an `int` length
//!   (`addrlen`, `addr_len`): `connect`, `bind`, `sendto`. `accept`, `getpeername` and
//!   `recvfrom` pass it by pointer and fill it on return: not read at entry;
//! - an **argv**: `const char *const * argv` (`execve`, `execveat`).
//!
//! Calls whose format file is named after the kernel's symbol (`newstat` for `stat`,
//! `newlstat`, `newfstatat` is already its name) are found by [`super::syscall_args::call_args`].

use std::collections::HashMap;

/// What an argument is, for capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// A NUL-terminated path or name.
    String,
    /// A `struct sockaddr *` whose length is the next argument.
    Sockaddr,
    /// A NULL-terminated array of string pointers.
    Argv,
}

impl ArgKind {
    /// The kind's code in the spec map and in records ([`super::bpf::record::Kind`]).
    pub fn code(self) -> u8 {
        match self {
            ArgKind::String => 1,
            ArgKind::Sockaddr => 2,
            ArgKind::Argv => 3,
        }
    }
}

/// The captured arguments of one call, by index (at most 6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallSpec {
    /// `kinds[i]`: what argument `i` is, `None` when it is not captured.
    pub kinds: [Option<ArgKind>; 6],
}

impl CallSpec {
    /// True when nothing is captured.
    pub fn is_empty(&self) -> bool {
        self.kinds.iter().all(Option::is_none)
    }

    /// The 8-byte value of the program's spec map: one kind code per argument, then two
    /// zero bytes.
    pub fn to_bytes(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        for (d, k) in b.iter_mut().zip(self.kinds) {
            *d = k.map_or(0, ArgKind::code);
        }
        b
    }
}

const STRING_NAMES: &[&str] =
    &["filename", "pathname", "path", "oldname", "newname", "name", "from_pathname", "to_pathname", "new_root", "put_old", "specialfile"];

fn compact(c_type: &str) -> String {
    c_type.replace("__user", "").split_whitespace().collect::<Vec<_>>().join(" ").replace(" *", "*")
}

/// What argument `i` of `args` (`(name, C type)` in order, as a format file lists them) is.
pub fn classify(args: &[(String, String)], i: usize) -> Option<ArgKind> {
    let (name, c_type) = args.get(i)?;
    let t = compact(c_type);
    match t.as_str() {
        "const char*" if STRING_NAMES.contains(&name.as_str()) => Some(ArgKind::String),
        "char*" if name == "filename" => Some(ArgKind::String),
        "const char*const*" if name == "argv" => Some(ArgKind::Argv),
        "struct sockaddr*" => {
            let (len_name, len_type) = args.get(i + 1)?;
            (compact(len_type) == "int" && matches!(len_name.as_str(), "addrlen" | "addr_len")).then_some(ArgKind::Sockaddr)
        }
        _ => None,
    }
}

/// The spec of a call from its argument list.
pub fn call_spec(args: &[(String, String)]) -> CallSpec {
    let mut s = CallSpec::default();
    for (i, k) in s.kinds.iter_mut().enumerate() {
        *k = classify(args, i);
    }
    s
}

/// Every x86-64 call with something to capture: `(number, spec)`, by number.
pub fn spec_table(all: &HashMap<String, Vec<(String, String)>>) -> Vec<(u32, CallSpec)> {
    super::syscalls::SYSCALLS_X86_64
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.is_empty())
        .filter_map(|(nr, n)| super::syscall_args::call_args(all, n).map(|a| (nr as u32, call_spec(a))))
        .filter(|(_, s)| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect()
    }

    #[test]
    fn kinds_from_names_and_types() {
        let openat = a(&[("dfd", "int"), ("filename", "const char *"), ("flags", "int"), ("mode", "umode_t")]);
        assert_eq!(call_spec(&openat).kinds, [None, Some(ArgKind::String), None, None, None, None]);
        let gethostname = a(&[("name", "char *"), ("len", "int")]);
        assert!(call_spec(&gethostname).is_empty(), "an output buffer is not read");
        let connect = a(&[("fd", "int"), ("uservaddr", "struct sockaddr *"), ("addrlen", "int")]);
        assert_eq!(classify(&connect, 1), Some(ArgKind::Sockaddr));
        let accept = a(&[("fd", "int"), ("upeer_sockaddr", "struct sockaddr *"), ("upeer_addrlen", "int *")]);
        assert_eq!(classify(&accept, 1), None, "filled on return");
        let execve = a(&[("filename", "const char *"), ("argv", "const char *const *"), ("envp", "const char *const *")]);
        assert_eq!(call_spec(&execve).to_bytes(), [1, 3, 0, 0, 0, 0, 0, 0]);
        assert_eq!(classify(&a(&[("filename", "const char __user *")]), 0), Some(ArgKind::String));
    }

    /// The calls the capture must cover have the arguments expected, on this machine's
    /// format files (skipped without tracefs).
    #[test]
    fn this_kernel_covers_the_usual_calls() {
        let Ok(root) = crate::tracefs::root() else {
            eprintln!("skipped: no tracefs");
            return;
        };
        let all = crate::lttng::read_syscall_args(&root.join("events"));
        if all.is_empty() {
            eprintln!("skipped: no syscalls events (CONFIG_FTRACE_SYSCALLS)");
            return;
        }
        let table: HashMap<&str, CallSpec> = spec_table(&all).into_iter().map(|(nr, s)| (crate::syscalls::SYSCALLS_X86_64[nr as usize], s)).collect();
        let s = ArgKind::String;
        for (call, want) in [
            ("open", vec![(0, s)]),
            ("openat", vec![(1, s)]),
            ("openat2", vec![(1, s)]),
            ("creat", vec![(0, s)]),
            ("execve", vec![(0, s), (1, ArgKind::Argv)]),
            ("execveat", vec![(1, s), (2, ArgKind::Argv)]),
            ("stat", vec![(0, s)]),
            ("lstat", vec![(0, s)]),
            ("newfstatat", vec![(1, s)]),
            ("statx", vec![(1, s)]),
            ("access", vec![(0, s)]),
            ("faccessat", vec![(1, s)]),
            ("faccessat2", vec![(1, s)]),
            ("readlink", vec![(0, s)]),
            ("readlinkat", vec![(1, s)]),
            ("unlink", vec![(0, s)]),
            ("unlinkat", vec![(1, s)]),
            ("rename", vec![(0, s), (1, s)]),
            ("renameat", vec![(1, s), (3, s)]),
            ("renameat2", vec![(1, s), (3, s)]),
            ("mkdir", vec![(0, s)]),
            ("mkdirat", vec![(1, s)]),
            ("rmdir", vec![(0, s)]),
            ("chdir", vec![(0, s)]),
            ("chmod", vec![(0, s)]),
            ("fchmodat", vec![(1, s)]),
            ("chown", vec![(0, s)]),
            ("lchown", vec![(0, s)]),
            ("fchownat", vec![(1, s)]),
            ("truncate", vec![(0, s)]),
            ("symlink", vec![(0, s), (1, s)]),
            ("symlinkat", vec![(0, s), (2, s)]),
            ("link", vec![(0, s), (1, s)]),
            ("linkat", vec![(1, s), (3, s)]),
            ("mknod", vec![(0, s)]),
            ("connect", vec![(1, ArgKind::Sockaddr)]),
            ("bind", vec![(1, ArgKind::Sockaddr)]),
            ("sendto", vec![(4, ArgKind::Sockaddr)]),
        ] {
            let spec = table.get(call).unwrap_or_else(|| panic!("{call} has no spec"));
            let got: Vec<(usize, ArgKind)> = spec.kinds.iter().enumerate().filter_map(|(i, k)| k.map(|k| (i, k))).collect();
            assert_eq!(got, want, "{call}");
        }
    }
}
