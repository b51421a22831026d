//! Finding (and making) the output directory itself: the one path of a trace that is
//! resolved by name, as the user resolves it, before everything else is created beneath
//! its descriptor ([`super::TraceDir`]).
//!
//! - With an owner ([`Owner`]): the whole path is resolved, and its missing directories
//!   made, as that user ([`super::identity::as_owner`]). Their symbolic links are followed
//!   with their rights, so the path leads only where they could write themselves — except
//!   `/proc`'s magic links (`/proc/<pid>/cwd`, `/proc/self/fd/3`), which root's
//!   capabilities (`CAP_SYS_PTRACE`) would open for them whatever their file-system
//!   identity: when root walks for a user, a path through one is refused
//!   (`RESOLVE_NO_MAGICLINKS`).
//! - Without, in a process that is not root: as the process (the kernel's checks are the
//!   user's own).
//! - Without, as root: root follows the path only while root alone controls it, and hands
//!   the rest to the user who does ([`root_walk`]): every component is opened without
//!   following it (`O_PATH | O_NOFOLLOW`) and looked at (`fstat` of what was opened, so no
//!   swap can come between the look and the use). A directory or a symbolic link owned by
//!   another user is where that user's control begins: the rest of the path is resolved,
//!   and everything later created, as them (their primary group). Root follows a symbolic
//!   link only when root owns it and it has no other hard link (a user may hard-link
//!   root's links into a directory of theirs when `fs.protected_hardlinks` is 0), and
//!   enters a directory of root's only when no one else may change its entries (not
//!   writable by group or others, or sticky, as `/tmp` is): in a directory others may
//!   write, they could rename root's own links into the path. This is systemd's
//!   `chase()` rule with `CHASE_SAFE` ("never transition from unprivileged to privileged")
//!   turned from a refusal into a change of identity, so that `sudo ust …` writing into a
//!   user's home writes as that user.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};

use super::identity::{as_owner, Owner};
use super::refusal;

/// Most symbolic links [`root_walk`] follows in one path (Linux's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// The directory `path` (absolute, or relative to the working directory), made with its
/// missing parents (mode `0o777` less the umask, as `mkdir -p`) when `create`, opened
/// `O_RDONLY | O_DIRECTORY`; and who owns what is created under it (see the module docs).
///
/// # Errors
/// The system's error, or a refusal naming the component root would not follow.
pub(super) fn output_dir(path: &Path, owner: Option<Owner>, create: bool) -> io::Result<(OwnedFd, Option<Owner>)> {
    let path = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir()?.join(path) };
    if owner.is_none() && rustix::process::geteuid().is_root() {
        return root_walk(&path, create);
    }
    let for_user = owner.is_some() && rustix::process::geteuid().is_root();
    let fd = as_owner(owner, || {
        let root = rustix::fs::open("/", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        walk_as_user(root, components(&path), create, for_user)
    })?;
    Ok((fd, owner))
}

/// The components of an absolute path after `/`, `..` kept (resolved by the walks
/// against what they opened, not by text).
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// Resolves `rest` from `start` with the calling thread's identity (a user's), following
/// symbolic links and making missing directories when `create`; the last one opened for
/// reading. `for_user`: root walks for the user, so no magic link of `/proc` is followed
/// (see the module docs).
fn walk_as_user(start: OwnedFd, rest: VecDeque<OsString>, create: bool, for_user: bool) -> io::Result<OwnedFd> {
    let resolve = if for_user { ResolveFlags::NO_MAGICLINKS } else { ResolveFlags::empty() };
    let mut cur = start;
    for c in rest {
        let open = |at: &OwnedFd| rustix::fs::openat2(at, c.as_os_str(), OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty(), resolve);
        cur = match open(&cur) {
            Err(rustix::io::Errno::NOENT) if create && c != ".." => {
                mkdir(&cur, &c, 0o777)?;
                open(&cur)?
            }
            r => r?,
        };
    }
    Ok(rustix::fs::openat(&cur, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?)
}

/// `mkdirat(at, name, mode)`; an existing entry is fine (what it is, the caller's open
/// tells).
fn mkdir(at: &OwnedFd, name: &OsStr, mode: u32) -> io::Result<()> {
    match rustix::fs::mkdirat(at, name, Mode::from_raw_mode(mode)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Root's walk (see the module docs): `(directory, None)` when root controls the whole
/// path, `(directory, Some(user))` when a user controls part of it and the rest was
/// resolved as them.
fn root_walk(path: &Path, create: bool) -> io::Result<(OwnedFd, Option<Owner>)> {
    let slash = || rustix::fs::open("/", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty());
    let mut todo = components(path);
    let mut cur = slash()?;
    let mut at = PathBuf::from("/");
    let mut links = 0;
    while let Some(c) = todo.pop_front() {
        if c == ".." {
            cur = rustix::fs::openat(&cur, "..", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
            at.pop();
            continue;
        }
        let open = |dir: &OwnedFd| rustix::fs::openat(dir, c.as_os_str(), OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty());
        let fd = match open(&cur) {
            // Root's own: never open to others, whatever the umask.
            Err(rustix::io::Errno::NOENT) if create => {
                mkdir(&cur, &c, 0o755)?;
                open(&cur)?
            }
            r => r?,
        };
        let st = rustix::fs::fstat(&fd)?;
        let kind = FileType::from_raw_mode(st.st_mode);
        if st.st_uid != 0 && matches!(kind, FileType::Symlink | FileType::Directory) {
            // Another user's: from here on, the path is theirs to resolve.
            let owner = Owner::with_primary_group(st.st_uid, st.st_gid);
            let (start, rest) = if kind == FileType::Directory {
                (fd, todo)
            } else {
                todo.push_front(c);
                (cur, todo)
            };
            let dir = as_owner(Some(owner), || walk_as_user(start, rest, create, true))?;
            return Ok((dir, Some(owner)));
        }
        at.push(&c);
        match kind {
            FileType::Symlink => {
                if st.st_nlink > 1 {
                    return Err(refusal(&at, "a symbolic link with other hard links to it: root does not follow it"));
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(io::Error::from_raw_os_error(libc::ELOOP));
                }
                let target = PathBuf::from(OsString::from_vec(rustix::fs::readlinkat(&fd, "", Vec::new())?.into_bytes()));
                at.pop();
                if target.is_absolute() {
                    cur = slash()?;
                    at = PathBuf::from("/");
                }
                for t in components(&target).into_iter().rev() {
                    todo.push_front(t);
                }
            }
            FileType::Directory => {
                let mode = st.st_mode;
                if mode & 0o022 != 0 && mode & libc::S_ISVTX == 0 {
                    return Err(refusal(&at, &format!("a directory others may write (mode {:o}, no sticky bit): root writes nothing below it", mode & 0o7777)));
                }
                cur = fd;
            }
            _ => return Err(io::Error::new(io::Error::from_raw_os_error(libc::ENOTDIR).kind(), format!("{}: not a directory", at.display()))),
        }
    }
    let dir = rustix::fs::openat(&cur, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    Ok((dir, None))
}
