//! The names and C types of each system call's arguments, and which of them are user
//! strings the recorder copies.
//!
//! The names and types come from the running kernel's tracefs (`events/syscalls/
//! sys_enter_<call>/format`, [`crate::lttng::system_syscall_args`]) when this user can
//! read it (root's tier 3 does; an ordinary user usually cannot, `/sys/kernel/tracing` is
//! mode 0700), else from the table `args_x86_64.txt` beside this file, generated from Linux
//! 6.18's tracefs (its header says how). Either way the events have the fields the tracefs
//! recording has, so `ust report` reads both alike.
//!
//! The strings are those lttng-modules copies (`ctf_user_string` in its
//! `include/instrumentation/syscalls/` x86-64 tables and overrides: `filename`, `pathname`,
//! `oldname`/`newname`...), recorded as CTF strings under the same names.

use crate::lttng::SyscallArgs;

/// The built-in table's text (see the module docs).
const TABLE: &str = include_str!("args_x86_64.txt");

/// The arguments lttng-modules records as user strings, by call (`asm/unistd_64.h` names).
pub const USER_STRINGS: &[(&str, &[&str])] = &[
    ("access", &["filename"]),
    ("acct", &["name"]),
    ("add_key", &["_type"]),
    ("chdir", &["filename"]),
    ("chmod", &["filename"]),
    ("chown", &["filename"]),
    ("chroot", &["filename"]),
    ("creat", &["pathname"]),
    ("delete_module", &["name_user"]),
    ("execve", &["filename"]),
    ("execveat", &["filename"]),
    ("faccessat", &["filename"]),
    ("faccessat2", &["filename"]),
    ("fanotify_mark", &["pathname"]),
    ("fchmodat", &["filename"]),
    ("fchownat", &["filename"]),
    ("fgetxattr", &["name"]),
    ("fremovexattr", &["name"]),
    ("fsetxattr", &["name"]),
    ("fsopen", &["_fs_name"]),
    ("fspick", &["path"]),
    ("futimesat", &["filename"]),
    ("getxattr", &["pathname", "name"]),
    ("inotify_add_watch", &["pathname"]),
    ("lchown", &["filename"]),
    ("lgetxattr", &["pathname", "name"]),
    ("link", &["oldname", "newname"]),
    ("linkat", &["oldname", "newname"]),
    ("listxattr", &["pathname"]),
    ("llistxattr", &["pathname"]),
    ("lremovexattr", &["pathname", "name"]),
    ("lsetxattr", &["pathname", "name"]),
    ("memfd_create", &["uname"]),
    ("mkdir", &["pathname"]),
    ("mkdirat", &["pathname"]),
    ("mknod", &["filename"]),
    ("mknodat", &["filename"]),
    ("mount", &["dev_name", "dir_name", "type"]),
    ("mount_setattr", &["path"]),
    ("move_mount", &["from_pathname", "to_pathname"]),
    ("mq_open", &["u_name"]),
    ("mq_unlink", &["u_name"]),
    ("name_to_handle_at", &["name"]),
    ("newfstatat", &["filename"]),
    ("lstat", &["filename"]),
    ("stat", &["filename"]),
    ("open", &["filename"]),
    ("open_tree", &["filename"]),
    ("openat", &["filename"]),
    ("openat2", &["filename"]),
    ("pivot_root", &["new_root", "put_old"]),
    ("readlink", &["path"]),
    ("readlinkat", &["pathname"]),
    ("removexattr", &["pathname", "name"]),
    ("rename", &["oldname", "newname"]),
    ("renameat", &["oldname", "newname"]),
    ("renameat2", &["oldname", "newname"]),
    ("request_key", &["_type"]),
    ("rmdir", &["pathname"]),
    ("setdomainname", &["name"]),
    ("sethostname", &["name"]),
    ("setxattr", &["pathname", "name"]),
    ("statfs", &["pathname"]),
    ("statx", &["filename"]),
    ("swapoff", &["specialfile"]),
    ("swapon", &["specialfile"]),
    ("symlink", &["oldname", "newname"]),
    ("symlinkat", &["oldname", "newname"]),
    ("truncate", &["path"]),
    ("umount2", &["name"]),
    ("unlink", &["pathname"]),
    ("unlinkat", &["pathname"]),
    ("utime", &["filename"]),
    ("utimensat", &["filename"]),
    ("utimes", &["filename"]),
];

/// True when argument `arg` of `call` is a user string lttng-modules copies.
pub fn is_user_string(call: &str, arg: &str) -> bool {
    USER_STRINGS.iter().any(|(c, a)| *c == call && a.contains(&arg))
}

/// Parses the built-in table: `name(type arg, type arg)` per line, `#` comments.
pub fn builtin() -> SyscallArgs {
    let mut out = SyscallArgs::new();
    for line in TABLE.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let Some((call, rest)) = line.split_once('(') else { continue };
        let inner = rest.trim_end_matches(')');
        let args = inner
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .filter_map(|decl| {
                let split = decl.rfind(|c: char| c.is_whitespace() || c == '*')?;
                Some((decl[split + 1..].trim().to_string(), decl[..=split].trim().to_string()))
            })
            .collect();
        out.insert(call.to_string(), args);
    }
    out
}

/// The argument lists to use: this machine's tracefs when readable, else [`builtin`].
pub fn syscall_args() -> SyscallArgs {
    let tracefs = crate::lttng::system_syscall_args();
    if tracefs.is_empty() {
        builtin()
    } else {
        tracefs.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_table_parses() {
        let t = builtin();
        assert!(t.len() > 300, "{}", t.len());
        let openat: Vec<(&str, &str)> = t["openat"].iter().map(|(n, c)| (n.as_str(), c.as_str())).collect();
        assert_eq!(openat, [("dfd", "int"), ("filename", "const char *"), ("flags", "int"), ("mode", "umode_t")]);
        assert_eq!(t["execve"][1], ("argv".to_string(), "const char *const *".to_string()));
        assert!(t["getppid"].is_empty());
        // Every user string the list names is an argument of its call in the table.
        for (call, names) in USER_STRINGS {
            let a = crate::lttng::call_args(&t, call).unwrap_or_else(|| panic!("{call} is in the table"));
            for n in *names {
                assert!(a.iter().any(|(x, _)| x == n), "{call}: {n}");
            }
        }
    }

    /// Where tracefs is readable (as root), the table says what it says.
    #[test]
    fn the_builtin_table_agrees_with_this_kernel() {
        let tracefs = crate::lttng::system_syscall_args();
        if tracefs.is_empty() {
            eprintln!("skipped: tracefs is not readable here");
            return;
        }
        let t = builtin();
        for call in crate::syscalls::SYSCALLS_X86_64.iter().filter(|c| !c.is_empty()) {
            if let Some(a) = crate::lttng::call_args(tracefs, call) {
                assert_eq!(crate::lttng::call_args(&t, call), Some(a), "{call}");
            }
        }
    }
}
