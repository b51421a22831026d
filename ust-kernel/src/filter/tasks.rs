//! What `/proc` and the file system say of a task or a program, for the view's rule: whether
//! a user could ptrace a task ([`may_see`]), whether it still runs its program
//! ([`is_running`]), whether executing a file may raise privileges ([`privileged_program`],
//! [`readable_by`]), and whether a user could have changed what a path names
//! ([`user_could_swap`]).

use std::os::unix::fs::MetadataExt;

/// `PF_KTHREAD` in field 9 (`flags`) of `/proc/<pid>/stat`.
const PF_KTHREAD: u64 = 0x0020_0000;

/// The ids `Uid:` or `Gid:` of `/proc/<pid>/status` lists (real, effective, saved, fs).
fn ids(status: &str, key: &str) -> Option<Vec<u32>> {
    let line = status.lines().find_map(|l| l.strip_prefix(key))?;
    line.split_whitespace().map(|x| x.parse().ok()).collect()
}

/// `PF_EXITING` in `flags`: set by `do_exit` before the task gives up its memory.
const PF_EXITING: u64 = 0x4;

/// What `/proc/TID/stat` says of a task now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Life {
    /// No entry: the task was reaped (or never was).
    Gone,
    /// In `do_exit` (`PF_EXITING`) or a zombie (`Z`, `X`): it runs nothing of its program
    /// any more, and its `/proc` files turn root's once its memory is released, so its
    /// credentials and dumpability can no longer be judged from them.
    Exiting,
    /// Running its program.
    Live,
    /// `/proc` could not be read (the errno): nothing is concluded.
    Unknown(i32),
}

/// True when task `tid` exists and runs its program: not reaped, not a zombie, not in
/// `do_exit`.
pub fn is_running(tid: i32) -> bool {
    tid > 0 && life(tid) == Life::Live
}

pub(super) fn life(tid: i32) -> Life {
    let stat = match std::fs::read_to_string(format!("/proc/{tid}/stat")) {
        Ok(s) => s,
        // Only "no such entry" says gone (ESRCH: it went while being read).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => return Life::Gone,
        Err(e) => return Life::Unknown(e.raw_os_error().unwrap_or(0)),
    };
    let Some((_, rest)) = stat.rsplit_once(')') else { return Life::Unknown(0) };
    let mut f = rest.split_whitespace();
    let state = f.next().unwrap_or("");
    let flags = f.nth(5).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    if matches!(state, "Z" | "X" | "x") || flags & PF_EXITING != 0 {
        Life::Exiting
    } else {
        Life::Live
    }
}

/// True when user `uid`/`gid` could have made `path` name another file since a past exec:
/// the path is relative, or one of the directories it goes through (those of the targets
/// of its symbolic links included) is owned by the user or writable by them (group or
/// other; in a sticky directory such as `/tmp`, only for the user's own entries). A symbolic link in a directory the user cannot write cannot be re-pointed by
/// them, so it is followed (up to [`MAX_LINKS`]; more counts as could). With
/// `fs.protected_hardlinks` (the default), a user cannot link another's set-ID file into
/// their own directory, so a path through root's directories only still names what it
/// named.
pub fn user_could_swap(path: &str, uid: u32, gid: u32) -> bool {
    could_swap_at(std::path::Path::new(path), uid, gid, 0)
}

/// Symbolic links [`user_could_swap`] follows in one path.
pub const MAX_LINKS: usize = 8;

fn could_swap_at(p: &std::path::Path, uid: u32, gid: u32, links: usize) -> bool {
    if !p.is_absolute() || links > MAX_LINKS {
        return true;
    }
    let parts: Vec<_> = p.components().skip(1).collect();
    let mut cur = std::path::PathBuf::from("/");
    for (k, c) in parts.iter().enumerate() {
        // `cur` is a directory (resolved): may the user change what it holds?
        let Ok(dir) = std::fs::symlink_metadata(&cur) else { return true };
        let m = dir.mode();
        let next = match c {
            std::path::Component::Normal(n) => cur.join(n),
            std::path::Component::ParentDir => cur.parent().map_or_else(|| cur.clone(), std::path::Path::to_path_buf),
            _ => continue,
        };
        let Ok(meta) = std::fs::symlink_metadata(&next) else { return true };
        let writable = m & 0o002 != 0 || (m & 0o020 != 0 && dir.gid() == gid);
        // In a sticky directory (/tmp) a user may rename or remove only their own entries.
        let sticky_guard = m & 0o1000 != 0 && meta.uid() != uid;
        if !dir.is_dir() || dir.uid() == uid || (writable && !sticky_guard) {
            return true;
        }
        if meta.file_type().is_symlink() {
            let Ok(target) = std::fs::read_link(&next) else { return true };
            let mut rest = if target.is_absolute() { target } else { cur.join(target) };
            for r in &parts[k + 1..] {
                rest.push(r);
            }
            return could_swap_at(&rest, uid, gid, links + 1);
        }
        cur = next;
    }
    false
}

/// True when user `uid` (primary group `gid`; supplementary groups not counted, so this
/// errs towards false) may read `path`: the kernel makes a task that execs a file its
/// user cannot read non-dumpable (`would_dump`), so that user may not ptrace it.
pub fn readable_by(path: &str, uid: u32, gid: u32) -> bool {
    let Ok(m) = std::fs::metadata(path) else { return false };
    let mode = m.mode();
    if m.uid() == uid {
        mode & 0o400 != 0
    } else if m.gid() == gid {
        mode & 0o040 != 0
    } else {
        mode & 0o004 != 0
    }
}

/// True when `uid`/`gid` could ptrace task `tid` now: its real, effective and saved uid are
/// `uid`, its gids are all `gid` (no set-group-ID program), and it is dumpable (`/proc`
/// shows a non-dumpable task as owned by root). False when the task is gone.
pub fn may_see(tid: i32, uid: u32, gid: u32) -> bool {
    // The files under /proc/TID (not the directory itself, which keeps the task's euid)
    // turn root's when the task is not dumpable (`task_dump_owner` in fs/proc/base.c).
    same_ids(tid, uid, gid) && std::fs::metadata(format!("/proc/{tid}/stat")).map(|m| m.uid() == uid).unwrap_or(false)
}

/// True when task `tid`'s real, effective and saved uid are `uid` and its gids all `gid`
/// (`/proc/TID/status`); false when it is gone.
pub(super) fn same_ids(tid: i32, uid: u32, gid: u32) -> bool {
    if tid <= 0 {
        return false;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else { return false };
    let (Some(u), Some(g)) = (ids(&status, "Uid:"), ids(&status, "Gid:")) else { return false };
    u.len() >= 3 && u[..3].iter().all(|&x| x == uid) && g.len() >= 3 && g[..3].iter().all(|&x| x == gid)
}

/// The parent pid of `pid` (`/proc/<pid>/stat` field 4), if it exists.
pub fn parent_of(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

pub(super) fn is_kernel_thread(tid: i32) -> bool {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{tid}/stat")) else { return false };
    let flags = s.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().nth(6)).and_then(|f| f.parse::<u64>().ok());
    flags.is_some_and(|f| f & PF_KTHREAD != 0)
}

/// True when executing `path` may raise privileges: set-user-ID or set-group-ID bit, or a
/// `security.capability` attribute, on the file or, for a `#!` script, on its interpreter
/// (the kernel gives a script its interpreter's set-ID credentials), up to the kernel's
/// four levels. A file that is neither ELF nor `#!` (a `binfmt_misc` format, whose handler
/// may run with its own credentials) or that cannot be inspected counts as privileged: the
/// view then fails closed.
pub fn privileged_program(path: &str) -> bool {
    privileged_at(path, 0)
}

fn privileged_at(path: &str, depth: usize) -> bool {
    if depth > 4 {
        return true;
    }
    let Ok(m) = std::fs::metadata(path) else { return true };
    if m.mode() & (libc::S_ISUID | libc::S_ISGID) != 0 {
        return true;
    }
    let Ok(c) = std::ffi::CString::new(path) else { return true };
    // SAFETY: both strings are NUL-terminated; a null buffer of size 0 asks only for the
    // attribute's size.
    let n = unsafe { libc::getxattr(c.as_ptr(), c"security.capability".as_ptr(), std::ptr::null_mut(), 0) };
    if n >= 0 {
        return true;
    }
    let mut head = [0u8; 256];
    let Ok(len) = std::fs::File::open(path).and_then(|mut f| std::io::Read::read(&mut f, &mut head)) else { return true };
    let head = &head[..len];
    if head.starts_with(b"\x7fELF") {
        return false;
    }
    let Some(rest) = head.strip_prefix(b"#!") else { return true };
    let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
    let interp = String::from_utf8_lossy(line);
    match interp.split_ascii_whitespace().next() {
        Some(i) => privileged_at(i, depth + 1),
        None => true,
    }
}
