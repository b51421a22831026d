//! Trace output directories: every trace file ust writes is created through a
//! [`TraceDir`] — the kernel recorders' `kernel/` and `kernel-stacks/`, the `/proc`
//! samples, the daemon's `ust/` traces, snapshots and archives, `ust crash-dump`, `ust view
//! --repair`.
//!
//! The rule it keeps: **root never opens a path that an ordinary user controls.** Whatever
//! root writes for a user, it writes as that user, through a descriptor, never following
//! a symbolic link.
//!
//! - The output directory is opened once, by name, as its user ([`TraceDir::create`],
//!   [`TraceDir::open`]; how root finds the user when not told is in `outdir/resolve.rs`).
//!   Its descriptor is kept: a directory renamed or replaced by a link while a trace is
//!   written does not move the trace ([`TraceDir::replaced`] tells it afterwards).
//! - Everything below it is reached from that descriptor with `openat2(2)`'s
//!   `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` (Linux 5.6): no
//!   component may be a symbolic link, none may lead out. A [`TraceDir`] below the output
//!   directory is that descriptor and a relative path, resolved again at each use, so a
//!   daemon with thousands of process traces holds one descriptor per session.
//! - Files are created with `O_CREAT | O_EXCL | O_NOFOLLOW`: a name already there is
//!   never opened for writing. A regular file of that name (an earlier run's) is unlinked
//!   first (the name only: a hard link to someone else's file loses a name, the file keeps
//!   its bytes); anything else (a symbolic link, a FIFO, a directory) is refused, with a
//!   message that names it.
//! - Every call runs with the owner's file-system identity ([`as_owner`]), so files are
//!   the user's from their creation (no `chown` afterwards) and the kernel checks the
//!   user's rights, not root's.
//! - Metadata is written to `.<name>.tmp` and renamed within the directory
//!   ([`TraceDir::write_atomically`], synced; [`TraceDir::replace_file`], not synced).
//!   The exports' files are written without a name ([`TraceDir::create_unnamed_file`],
//!   `O_TMPFILE`) and named when complete ([`link_temps`], [`TempName`]): a killed command
//!   leaves nothing of a file it was writing.
//!
//! lttng-tools keeps the same shape (`lttng_directory_handle`,
//! `src/common/compat/directory-handle.cpp`, whose `*_as_user` calls go through its
//! `run-as` worker); it does not refuse links below the handle, which this does.

mod identity;
mod output_file;
pub use output_file::{create_output_file, OutputFile};
mod resolve;
mod temp_name;
pub use temp_name::{link_temps, TempName};
#[cfg(test)]
mod tests;

use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The kind of a directory entry ([`TraceDir::entries`]).
pub use rustix::fs::FileType;
use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

pub use identity::{as_owner, current as current_identity, Owner};

/// How every path below an output directory is resolved: beneath it, through no symbolic
/// link of any kind.
const BENEATH: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_SYMLINKS).union(ResolveFlags::NO_MAGICLINKS);

/// Deepest tree [`TraceDir::remove`] walks (a trace is four levels deep).
const MAX_DEPTH: usize = 32;

/// The output directory: its descriptor, the path it was opened as (for messages), and
/// who writes in it.
#[derive(Debug)]
struct Base {
    fd: OwnedFd,
    path: PathBuf,
    owner: Option<Owner>,
}

/// A directory of trace output (see the module docs): the output directory's descriptor
/// and a path below it. Cheap to clone.
#[derive(Clone, Debug)]
pub struct TraceDir {
    base: Arc<Base>,
    rel: PathBuf,
}

/// A refusal: `path` is not something ust writes through or into.
pub(crate) fn refusal(path: &Path, why: &str) -> io::Error {
    io::Error::other(format!("refusing {}: {why}", path.display()))
}

/// A single component of a path: not empty, no `/`, not `.` or `..`, no NUL byte.
fn check_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{name:?} is not a file name")));
    }
    Ok(())
}

/// The components of `rel` (`a/b/c`), each checked with [`check_name`].
fn split(rel: &str) -> io::Result<Vec<&str>> {
    let parts: Vec<&str> = rel.split('/').collect();
    for p in &parts {
        check_name(p)?;
    }
    Ok(parts)
}

/// What a file type is called in a refusal.
fn kind_name(t: FileType) -> &'static str {
    match t {
        FileType::Symlink => "a symbolic link (trace files are never written through a link)",
        FileType::Directory => "a directory, not a file",
        FileType::RegularFile => "a regular file, not a directory",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Unknown => "of an unknown type",
    }
}

impl TraceDir {
    /// The output directory `path`, made (with its parents) where missing, as `owner`; with
    /// no owner, as this process, except that root follows the path only while root alone
    /// controls it: from the first directory or symbolic link of another user's on, the
    /// path is resolved as that user, who then owns the handle (`outdir/resolve.rs` has the
    /// rules). The owner it was opened as ([`TraceDir::owner`]) writes everything created
    /// under it.
    ///
    /// # Errors
    /// The system's error (`Permission denied` as the owner, …), or a refusal naming the
    /// component root would not follow.
    pub fn create(path: &Path, owner: Option<Owner>) -> io::Result<TraceDir> {
        let (fd, owner) = resolve::output_dir(path, owner, true)?;
        Ok(TraceDir::from_fd(fd, path.to_path_buf(), owner))
    }

    /// The existing directory `path`, opened as [`TraceDir::create`] opens it (for
    /// repairing a trace in place).
    ///
    /// # Errors
    /// As [`TraceDir::create`]; `NotFound` when it does not exist.
    pub fn open(path: &Path, owner: Option<Owner>) -> io::Result<TraceDir> {
        let (fd, owner) = resolve::output_dir(path, owner, false)?;
        Ok(TraceDir::from_fd(fd, path.to_path_buf(), owner))
    }

    /// An output directory from a descriptor opened elsewhere (one a user sent), shown as
    /// `path`, written as `owner` (`None`: as the calling thread is).
    pub fn from_fd(fd: OwnedFd, path: PathBuf, owner: Option<Owner>) -> TraceDir {
        TraceDir { base: Arc::new(Base { fd, path, owner }), rel: PathBuf::new() }
    }

    /// The directory's path as the output directory was named (for messages; nothing is
    /// opened by it).
    pub fn path(&self) -> PathBuf {
        self.base.path.join(&self.rel)
    }

    /// Its path below the output directory (empty for the output directory itself).
    pub fn rel(&self) -> &Path {
        &self.rel
    }

    /// Who writes in it (`None`: the process as it is).
    pub fn owner(&self) -> Option<Owner> {
        self.base.owner
    }

    /// `rel` (below this directory) as `openat2` takes it from the output directory.
    fn beneath(&self, rel: &Path) -> PathBuf {
        let p = self.rel.join(rel);
        if p.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            p
        }
    }

    /// Opens `rel` below this directory with `flags`, beneath the output directory.
    fn open_beneath(&self, rel: &Path, flags: OFlags, mode: u32) -> rustix::io::Result<OwnedFd> {
        rustix::fs::openat2(&self.base.fd, self.beneath(rel), flags | OFlags::CLOEXEC, Mode::from_raw_mode(mode), BENEATH)
    }

    /// Runs `f` on this directory (opened `O_PATH`) as the owner; an error on `name` (a
    /// directory when `want_dir`, else a file) is explained ([`TraceDir::explain`]).
    fn run<T>(&self, name: &str, want_dir: bool, f: impl FnOnce(&OwnedFd) -> rustix::io::Result<T>) -> io::Result<T> {
        as_owner(self.base.owner, || {
            let dir = self.open_beneath(Path::new(""), OFlags::PATH | OFlags::DIRECTORY, 0).map_err(|e| self.explain("", true, e))?;
            f(&dir).map_err(|e| self.explain(name, want_dir, e))
        })
    }

    /// `e`, met on `name` (below this directory; a directory when `want_dir`, else a
    /// file); when a component on the way is not a directory (a link, a file) or `name`
    /// itself is not of the kind wanted, a refusal naming it. Called as the owner.
    fn explain(&self, name: &str, want_dir: bool, e: Errno) -> io::Error {
        if !matches!(e, Errno::LOOP | Errno::XDEV | Errno::NOTDIR | Errno::EXIST | Errno::ISDIR) {
            return e.into();
        }
        let names = name.split('/').filter(|n| !n.is_empty());
        let parts: Vec<std::ffi::OsString> = self.rel.components().map(|c| c.as_os_str().to_os_string()).chain(names.map(Into::into)).collect();
        let mut prefix = PathBuf::new();
        for (i, part) in parts.iter().enumerate() {
            prefix.push(part);
            let Ok(st) = rustix::fs::statat(&self.base.fd, &prefix, AtFlags::SYMLINK_NOFOLLOW) else { break };
            let t = FileType::from_raw_mode(st.st_mode);
            let want = if i + 1 < parts.len() || want_dir { FileType::Directory } else { FileType::RegularFile };
            if t != want {
                return refusal(&self.base.path.join(&prefix), &format!("it is {}", kind_name(t)));
            }
        }
        e.into()
    }

    /// This directory's `name`, without looking at it.
    fn child(&self, name: &str) -> TraceDir {
        TraceDir { base: self.base.clone(), rel: self.rel.join(name) }
    }

    /// The subdirectory `rel` (one name, or several joined by `/`), made as the owner where
    /// missing (`mode`, less the umask), as `mkdir -p` would.
    ///
    /// # Errors
    /// The system's error; a refusal when a component is a link or not a directory.
    pub fn dir(&self, rel: &str, mode: u32) -> io::Result<TraceDir> {
        let mut d = self.clone();
        for name in split(rel)? {
            d = d.subdir(name, mode, false)?;
        }
        Ok(d)
    }

    /// The new subdirectory `name` (`mode`, less the umask).
    ///
    /// # Errors
    /// `AlreadyExists` when the name is taken (by anything); else as [`TraceDir::dir`].
    pub fn new_dir(&self, name: &str, mode: u32) -> io::Result<TraceDir> {
        check_name(name)?;
        self.subdir(name, mode, true)
    }

    fn subdir(&self, name: &str, mode: u32, exclusive: bool) -> io::Result<TraceDir> {
        self.run(name, true, |d| {
            match rustix::fs::mkdirat(d, name, Mode::from_raw_mode(mode)) {
                Err(Errno::EXIST) if !exclusive => {}
                r => r?,
            }
            let st = rustix::fs::statat(d, name, AtFlags::SYMLINK_NOFOLLOW)?;
            if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
                return Err(Errno::NOTDIR);
            }
            Ok(())
        })?;
        Ok(self.child(name))
    }

    /// The existing subdirectory `rel` (names joined by `/`).
    ///
    /// # Errors
    /// `NotFound`; a refusal when a component is a link or not a directory.
    pub fn existing(&self, rel: &str) -> io::Result<TraceDir> {
        split(rel)?;
        as_owner(self.base.owner, || self.open_beneath(Path::new(rel), OFlags::PATH | OFlags::DIRECTORY, 0).map_err(|e| self.explain(rel, true, e)))?;
        Ok(TraceDir { base: self.base.clone(), rel: self.rel.join(rel) })
    }

    /// A new file `name` (`mode`, less the umask), open for writing. A regular file of that
    /// name is replaced; anything else there is refused.
    ///
    /// # Errors
    /// The system's error; a refusal naming what is in the way.
    pub fn create_file(&self, name: &str, mode: u32) -> io::Result<File> {
        self.new_file(name, mode, true)
    }

    /// A new file `name` (`mode`, less the umask), open for writing, where nothing of that
    /// name is.
    ///
    /// # Errors
    /// `AlreadyExists` for a regular file of that name; else as [`TraceDir::create_file`].
    pub fn create_new_file(&self, name: &str, mode: u32) -> io::Result<File> {
        self.new_file(name, mode, false)
    }

    fn new_file(&self, name: &str, mode: u32, replace: bool) -> io::Result<File> {
        check_name(name)?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = self
            .run(name, false, |d| {
                for _ in 0..2 {
                    match rustix::fs::openat2(d, name, flags, Mode::from_raw_mode(mode), BENEATH) {
                        Err(Errno::EXIST) if replace => {
                            let st = rustix::fs::statat(d, name, AtFlags::SYMLINK_NOFOLLOW)?;
                            if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
                                return Err(Errno::EXIST);
                            }
                            if self.foreign(st.st_uid) {
                                return Err(Errno::PERM);
                            }
                            rustix::fs::unlinkat(d, name, AtFlags::empty())?;
                        }
                        r => return r,
                    }
                }
                Err(Errno::EXIST)
            })
            .map_err(|e| if e.raw_os_error() == Some(libc::EPERM) { refusal(&self.path().join(name), "it is another user's file") } else { e })?;
        Ok(File::from(fd))
    }

    /// The existing regular file `rel` (below this directory), for reading, or for
    /// reading and writing when `write`. Opened `O_NONBLOCK` and checked with `fstat`, so
    /// a FIFO in its place neither blocks nor passes.
    ///
    /// # Errors
    /// `NotFound`; `InvalidData` when it is not a regular file; a refusal when a component
    /// is a link.
    pub fn open_file(&self, rel: &str, write: bool) -> io::Result<File> {
        split(rel)?;
        let flags = if write { OFlags::RDWR } else { OFlags::RDONLY } | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let fd = as_owner(self.base.owner, || self.open_beneath(Path::new(rel), flags, 0).map_err(|e| self.explain(rel, false, e)))?;
        if FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) != FileType::RegularFile {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{} is not a regular file", self.path().join(rel).display())));
        }
        Ok(File::from(fd))
    }

    /// Writes `bytes` as `name` (`mode`, less the umask) so that it is never seen half
    /// written, and durably: into `.<name>.tmp`, `fsync`, renamed over `name` within this
    /// directory, and the directory `fsync`ed. For files written once at a user's request
    /// (a saved session); a file rewritten while tracing uses [`TraceDir::replace_file`].
    /// A `name` that is not a regular file is refused (the rename would replace a link,
    /// not follow it; the refusal says it was there).
    ///
    /// # Errors
    /// The system's error or the refusal; the temporary file may remain.
    pub fn write_atomically(&self, name: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
        self.replace(name, bytes, mode, true)
    }

    /// [`TraceDir::write_atomically`] without its two `fsync`s: a reader (and a process or
    /// daemon crash) still never sees `name` half written, since the rename is atomic and
    /// the page cache outlives both; only a power loss may lose the new content. For the
    /// metadata the daemon rewrites on the path of a process's registration, where the
    /// `fsync`s cost milliseconds each on every new process and event (as LTTng's consumer,
    /// which appends metadata without syncing it).
    ///
    /// # Errors
    /// As [`TraceDir::write_atomically`].
    pub fn replace_file(&self, name: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
        self.replace(name, bytes, mode, false)
    }

    fn replace(&self, name: &str, bytes: &[u8], mode: u32, durable: bool) -> io::Result<()> {
        check_name(name)?;
        let tmp = format!(".{name}.tmp");
        let mut f = self.create_file(&tmp, mode)?;
        f.write_all(bytes)?;
        if durable {
            f.sync_all()?;
        }
        drop(f);
        self.run(name, false, |d| {
            match rustix::fs::statat(d, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile => {
                    let _ = rustix::fs::unlinkat(d, tmp.as_str(), AtFlags::empty());
                    return Err(Errno::EXIST);
                }
                _ => {}
            }
            rustix::fs::renameat(d, tmp.as_str(), d, name)
        })?;
        if durable {
            let _ = as_owner(self.base.owner, || Ok(self.open_beneath(Path::new(""), OFlags::RDONLY | OFlags::DIRECTORY, 0).map(rustix::fs::fsync)));
        }
        Ok(())
    }

    /// Renames `from` in this directory to `to_name` in `to` (a directory of the same
    /// output), as this directory's owner.
    ///
    /// # Errors
    /// The system's error (`NotFound` when `from` is missing).
    pub fn rename_to(&self, from: &str, to: &TraceDir, to_name: &str) -> io::Result<()> {
        check_name(from)?;
        check_name(to_name)?;
        as_owner(self.base.owner, || {
            let a = self.open_beneath(Path::new(""), OFlags::PATH | OFlags::DIRECTORY, 0).map_err(|e| self.explain("", true, e))?;
            let b = to.open_beneath(Path::new(""), OFlags::PATH | OFlags::DIRECTORY, 0).map_err(|e| to.explain("", true, e))?;
            Ok(rustix::fs::renameat(&a, from, &b, to_name)?)
        })
    }

    /// Removes `rel` (below this directory; a file, a link, or a directory with everything
    /// in it), never following a link.
    ///
    /// # Errors
    /// The system's error (`NotFound` when it is not there).
    pub fn remove(&self, rel: &str) -> io::Result<()> {
        let (parent, last) = self.parent_of(rel)?;
        parent.run(last, true, |d| remove_entry(d, last.as_ref(), 0))
    }

    /// The directory holding `rel` (below this one), and `rel`'s last name.
    fn parent_of<'r>(&self, rel: &'r str) -> io::Result<(TraceDir, &'r str)> {
        let parts = split(rel)?;
        let (last, parent) = parts.split_last().expect("split gives one part at least");
        let parent = if parent.is_empty() { self.clone() } else { self.existing(&parent.join("/"))? };
        Ok((parent, last))
    }

    /// Removes this directory and everything in it, never following a link (not the output
    /// directory itself).
    ///
    /// # Errors
    /// `InvalidInput` for the output directory; else as [`TraceDir::remove`].
    pub fn remove_dir_all(&self) -> io::Result<()> {
        let (Some(parent), Some(name)) = (self.rel.parent(), self.rel.file_name().and_then(|n| n.to_str())) else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "the output directory itself is not removed"));
        };
        let parent = TraceDir { base: self.base.clone(), rel: parent.to_path_buf() };
        parent.run(name, true, |d| remove_entry(d, name.as_ref(), 0))
    }

    /// Removes the empty directory `rel` (below this directory).
    ///
    /// # Errors
    /// The system's error (`DirectoryNotEmpty`, `NotFound`).
    pub fn remove_empty_dir(&self, rel: &str) -> io::Result<()> {
        let (parent, last) = self.parent_of(rel)?;
        parent.run(last, true, |d| rustix::fs::unlinkat(d, last, AtFlags::REMOVEDIR))
    }

    /// The entries of this directory (not `.` and `..`), with their types as the
    /// directory lists them (a link is a link); names that are not UTF-8 are left out.
    ///
    /// # Errors
    /// The system's error.
    pub fn entries(&self) -> io::Result<Vec<(String, FileType)>> {
        as_owner(self.base.owner, || {
            let fd = self.open_beneath(Path::new(""), OFlags::RDONLY | OFlags::DIRECTORY, 0).map_err(|e| self.explain("", true, e))?;
            let mut out = Vec::new();
            for e in rustix::fs::Dir::read_from(&fd)? {
                let e = e?;
                let Ok(name) = e.file_name().to_str() else { continue };
                if name == "." || name == ".." {
                    continue;
                }
                let t = match e.file_type() {
                    FileType::Unknown => rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW).map(|s| FileType::from_raw_mode(s.st_mode))?,
                    t => t,
                };
                out.push((name.to_string(), t));
            }
            out.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(out)
        })
    }

    /// The user whose files this directory's are: the owner's, or this process's
    /// effective user's.
    pub fn writer_uid(&self) -> u32 {
        self.base.owner.map_or_else(|| rustix::process::geteuid().as_raw(), |o| o.uid)
    }

    /// What is at `name` in this directory, not following a link: its kind and owner's
    /// user id, or `None` when nothing is.
    ///
    /// # Errors
    /// The system's error.
    pub fn entry(&self, name: &str) -> io::Result<Option<(FileType, u32)>> {
        check_name(name)?;
        self.run(name, false, |d| entry_at(d, name))
    }

    /// Whether a file owned by `uid` is another user's that root, writing here as root,
    /// must leave alone (in a shared directory such as `/tmp`, the kernel would let root
    /// replace it). Another writer is held to the kernel's own rules.
    pub fn foreign(&self, uid: u32) -> bool {
        self.writer_uid() == 0 && uid != 0
    }

    /// Refuses `name` (in this directory) unless nothing, or a regular file that is not
    /// [`TraceDir::foreign`], is there: what a rename onto it would replace without a word
    /// (a link, a directory, a FIFO, another user's file where root writes) is refused,
    /// with a message that names it.
    ///
    /// # Errors
    /// The refusal; the system's error.
    pub fn check_replaceable(&self, name: &str) -> io::Result<()> {
        self.replaceable(name, self.entry(name)?)
    }

    /// [`TraceDir::check_replaceable`]'s rule on what is at `name` (`entry`'s answer).
    fn replaceable(&self, name: &str, what: Option<(FileType, u32)>) -> io::Result<()> {
        match what {
            Some((t, _)) if t != FileType::RegularFile => Err(refusal(&self.path().join(name), &format!("it is {}", kind_name(t)))),
            Some((_, uid)) if self.foreign(uid) => Err(refusal(&self.path().join(name), &format!("it is a file of user {uid}'s"))),
            _ => Ok(()),
        }
    }

    /// Renames each `(from, to)` within this directory, in order, through one descriptor of
    /// it, after checking every `to` as [`TraceDir::check_replaceable`] does: the names of
    /// a set of files made under temporary names, given together (the fewer system calls,
    /// the shorter the time in which only some are named).
    ///
    /// # Errors
    /// How many were renamed, and the refusal (naming the path) or the system's error on
    /// the next (naming both names).
    pub fn rename_all(&self, pairs: &[(String, String)]) -> Result<(), (usize, io::Error)> {
        for (from, to) in pairs {
            check_name(from).and_then(|()| check_name(to)).map_err(|e| (0, e))?;
        }
        let mut done = 0;
        as_owner(self.base.owner, || {
            let d = self.open_beneath(Path::new(""), OFlags::PATH | OFlags::DIRECTORY, 0).map_err(|e| self.explain("", true, e))?;
            for (_, to) in pairs {
                self.replaceable(to, entry_at(&d, to).map_err(|e| self.explain(to, false, e))?)?;
            }
            for (from, to) in pairs {
                rustix::fs::renameat(&d, from.as_str(), &d, to.as_str()).map_err(|e| {
                    let e = self.explain(to, false, e);
                    io::Error::new(e.kind(), format!("renaming {from} to {}: {e}", self.path().join(to).display()))
                })?;
                done += 1;
            }
            Ok(())
        })
        .map_err(|e| (done, e))
    }

    /// Takes an exclusive lock on this directory (`flock(2)` on a descriptor of it), held
    /// until the returned descriptor is closed, for one writer at a time of files that
    /// must not be mixed (an export's). Anyone who may open the directory may take the
    /// lock too: in a shared directory such as `/tmp`, another user can hold it.
    ///
    /// # Errors
    /// `WouldBlock` while another holds it; the system's error.
    pub fn try_lock(&self) -> io::Result<OwnedFd> {
        let fd = self.open_fd()?;
        rustix::fs::flock(&fd, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
        Ok(fd)
    }

    /// A new descriptor of this directory (`O_RDONLY | O_DIRECTORY`), to hand to another
    /// process.
    ///
    /// # Errors
    /// The system's error; a refusal when a component is a link.
    pub fn open_fd(&self) -> io::Result<OwnedFd> {
        as_owner(self.base.owner, || self.open_beneath(Path::new(""), OFlags::RDONLY | OFlags::DIRECTORY, 0).map_err(|e| self.explain("", true, e)))
    }

    /// `None` while the output directory's path still leads to the directory this handle
    /// writes; else what happened to it, for the user: it was removed, renamed or replaced
    /// (by a link, another directory) after it was opened. Nothing was written through the
    /// path since: the trace is in the directory that was there, wherever it is now (the
    /// message says where, from `/proc/self/fd`). The path is only looked at (`stat`,
    /// `lstat`), by the calling thread as it is: an ancestor the owner may not search does
    /// not pass for a removal.
    pub fn replaced(&self) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let here = rustix::fs::fstat(&self.base.fd).ok()?;
        let path = &self.base.path;
        let what = match (std::fs::metadata(path), std::fs::symlink_metadata(path)) {
            (Ok(m), _) if (m.dev(), m.ino()) == (here.st_dev, here.st_ino) => return None,
            (_, Ok(l)) if l.file_type().is_symlink() => "was replaced by a symbolic link",
            (_, Ok(_)) => "was replaced by another file or directory",
            (_, Err(_)) => "was removed or renamed",
        };
        let at = match self.now_at() {
            Some(p) => format!(", now {}", p.display()),
            None => ", which has since been deleted".to_string(),
        };
        Some(format!("{} {what} while the trace was written: nothing was written through it; the trace is in the directory that was there{at}", path.display()))
    }

    /// Where the output directory is now, as the kernel names it (`/proc/self/fd`): its
    /// path when it was renamed since it was opened; `None` once it is deleted.
    pub fn now_at(&self) -> Option<PathBuf> {
        let p = std::fs::read_link(format!("/proc/self/fd/{}", self.base.fd.as_raw_fd())).ok()?;
        (!p.to_string_lossy().ends_with(" (deleted)")).then_some(p)
    }
}

/// What is at `name` in `dir`, not following a link: its kind and owner, or `None`.
fn entry_at(dir: &OwnedFd, name: &str) -> rustix::io::Result<Option<(FileType, u32)>> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some((FileType::from_raw_mode(st.st_mode), st.st_uid))),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Removes `name` in `dir` (see [`TraceDir::remove`]).
fn remove_entry(dir: &OwnedFd, name: &std::ffi::OsStr, depth: usize) -> rustix::io::Result<()> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return rustix::fs::unlinkat(dir, name, AtFlags::empty());
    }
    if depth >= MAX_DEPTH {
        return Err(Errno::LOOP);
    }
    let sub = rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())?;
    let names: Vec<std::ffi::OsString> = rustix::fs::Dir::read_from(&sub)?
        .filter_map(Result::ok)
        .map(|e| std::ffi::OsStr::from_bytes(e.file_name().to_bytes()).to_os_string())
        .filter(|n| n != "." && n != "..")
        .collect();
    for n in names {
        remove_entry(&sub, &n, depth + 1)?;
    }
    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)
}
