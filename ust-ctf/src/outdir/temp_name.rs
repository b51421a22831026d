//! A file written for a user that takes its name only when complete, and the hidden
//! temporary name it goes through: made without a name where it can be
//! ([`TraceDir::create_unnamed_file`]: a command killed while writing leaves nothing), else
//! under the temporary name from the start; linked to that name when complete
//! ([`link_temps`]), renamed by its writer ([`TraceDir::rename_all`]) and then
//! [`TempName::renamed`]. A temporary name that exists and was never renamed is removed
//! when its [`TempName`] is dropped (a failed command leaves no part of its own).
//! `ust export -o FILE`, the Parquet export's files and `ust report --flamegraph FILE`
//! write this way.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::{as_owner, check_name, entry_at, TraceDir, BENEATH};

/// Where a process's descriptors are links to its open files (`proc(5)`).
const PROC_SELF_FD: &str = "/proc/self/fd";

/// Why [`TraceDir::link_files`] stopped: `made` names were made, the first ones of the set
/// (also the failing one's, when it was linked before the failure), the file at index
/// `at` failed, with `error`.
struct LinkError {
    made: usize,
    at: usize,
    error: io::Error,
}

/// The temporary name of a file being written in a [`TraceDir`].
#[derive(Debug)]
pub struct TempName {
    dir: TraceDir,
    name: String,
    /// The name exists (the file was made with it, or linked to it).
    exists: bool,
    /// Renamed away: nothing of ours is left at the name.
    renamed: bool,
}

impl TraceDir {
    /// A new regular file in this directory without a name (`O_TMPFILE`, `mode` less the
    /// umask), open for writing, to be named `name` when complete
    /// ([`link_temps`]): a process killed before that leaves nothing (the system
    /// frees the file with its last descriptor), where a temporary name would stay behind,
    /// hidden, as large as the writing had made it. What is at `name` is checked now as
    /// [`TraceDir::check_replaceable`] checks it, not when the file is complete.
    ///
    /// # Errors
    /// `Unsupported` where the file system makes no unnamed files (`EOPNOTSUPP`: FUSE, NFS,
    /// overlayfs before Linux 6.6) or where `/proc/self/fd`, through which
    /// [`link_temps`] names them, is not procfs: the caller then writes under a
    /// temporary name. The refusal of what is at `name`; else as [`TraceDir::create_file`].
    pub fn create_unnamed_file(&self, name: &str, mode: u32) -> io::Result<File> {
        check_name(name)?;
        // The real /proc only: a directory in its place (a container's) could hold links
        // to anything, which linkat would follow. Asked once a process.
        static PROCFS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if !*PROCFS.get_or_init(|| rustix::fs::statfs(PROC_SELF_FD).is_ok_and(|f| f.f_type == rustix::fs::PROC_SUPER_MAGIC)) {
            return Err(io::Error::new(io::ErrorKind::Unsupported, format!("{PROC_SELF_FD} is not procfs: no unnamed files")));
        }
        let flags = OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC;
        let fd = as_owner(self.base.owner, || {
            let d = self.open_beneath(Path::new(""), OFlags::PATH | OFlags::DIRECTORY, 0).map_err(|e| self.explain("", true, e))?;
            self.replaceable(name, entry_at(&d, name).map_err(|e| self.explain(name, false, e))?)?;
            rustix::fs::openat2(&d, ".", flags, Mode::from_raw_mode(mode), BENEATH).map_err(|e| {
                if e == Errno::OPNOTSUPP {
                    io::Error::new(io::ErrorKind::Unsupported, format!("{}: the file system makes no unnamed files: {e}", self.path().display()))
                } else {
                    self.explain("", true, e)
                }
            })
        })?;
        Ok(File::from(fd))
    }

    /// Names each file, made by [`TraceDir::create_unnamed_file`] in this directory, its
    /// name ([`temp_name::link_temps`] for its users), in order, through one descriptor of the directory (an export's files named
    /// together: the fewer system calls, the shorter its end), each through its
    /// `/proc/self/fd` link (`linkat(2)` with `AT_SYMLINK_FOLLOW`, as the owner:
    /// `AT_EMPTY_PATH` would need the credentials that opened the file, which each switch to
    /// the owner makes anew). A regular file already at a name that is not
    /// [`TraceDir::foreign`] (a leftover of a killed command) is replaced. Each name is
    /// checked to be its file's once made (same device and inode).
    ///
    /// # Errors
    /// A [`LinkError`]: a refusal naming the path for anything else at a name (a link, a
    /// directory, another user's file where root writes); `InvalidData` when another file
    /// took the name (another writer's, left to it); the system's error, naming the path.
    fn link_files(&self, files: &[(&File, &str)]) -> Result<(), LinkError> {
        for (at, (_, name)) in files.iter().enumerate() {
            check_name(name).map_err(|error| LinkError { made: 0, at, error })?;
        }
        let mut made = 0;
        let mut at = 0;
        as_owner(self.base.owner, || {
            let d = self.open_beneath(Path::new(""), OFlags::PATH | OFlags::DIRECTORY, 0).map_err(|e| self.explain("", true, e))?;
            for (i, (file, name)) in files.iter().enumerate() {
                at = i;
                let (ours, r) = match self.link_at(&d, file, name) {
                    Ok(()) => (true, Ok(())),
                    Err((ours, e)) => (ours, Err(e)),
                };
                made += usize::from(ours);
                r?;
            }
            Ok(())
        })
        .map_err(|error| LinkError { made, at, error })
    }

    /// [`TraceDir::link_files`]'s work for one file, through `d`, this directory; called as
    /// the owner. An error says whether the name is the file's (linked, then something
    /// failed: removed with its [`TempName`]).
    fn link_at(&self, d: &OwnedFd, file: &File, name: &str) -> Result<(), (bool, io::Error)> {
        let proc_link = format!("{PROC_SELF_FD}/{}", file.as_raw_fd());
        let link = || rustix::fs::linkat(rustix::fs::CWD, proc_link.as_str(), d, name, AtFlags::SYMLINK_FOLLOW);
        // The system's errors name the path (a refusal names it already).
        let sys = |e: Errno| match self.explain(name, false, e) {
            e if e.kind() == io::ErrorKind::Other => e,
            e => io::Error::new(e.kind(), format!("naming {}: {e}", self.path().join(name).display())),
        };
        let not_ours = |e: io::Error| (false, e);
        match link() {
            Err(Errno::EXIST) => {
                self.replaceable(name, entry_at(d, name).map_err(sys).map_err(not_ours)?).map_err(not_ours)?;
                rustix::fs::unlinkat(d, name, AtFlags::empty()).map_err(sys).map_err(not_ours)?;
                link().map_err(sys).map_err(not_ours)?;
            }
            r => r.map_err(sys).map_err(not_ours)?,
        }
        let ours = |e: io::Error| (true, e);
        let (mine, named) =
            (rustix::fs::fstat(file).map_err(sys).map_err(ours)?, rustix::fs::statat(d, name, AtFlags::SYMLINK_NOFOLLOW).map_err(sys).map_err(ours)?);
        if (mine.st_dev, mine.st_ino) != (named.st_dev, named.st_ino) {
            // Another writer's file, named in between (left to it).
            return Err((
                false,
                io::Error::new(io::ErrorKind::InvalidData, format!("naming {}: another file took the name", self.path().join(name).display())),
            ));
        }
        Ok(())
    }

    /// A new file (`mode`, less the umask), open for writing, to go through the temporary
    /// name `tmp` in this directory: without a name when `unnamed` and the file system
    /// allows (then checked as [`TraceDir::create_unnamed_file`] checks it), else under
    /// `tmp` ([`TraceDir::create_file`]: a regular file of the writer's there, a killed
    /// command's, is replaced).
    ///
    /// # Errors
    /// As [`TraceDir::create_unnamed_file`] (but `Unsupported`) and
    /// [`TraceDir::create_file`].
    pub fn create_temp(&self, tmp: &str, mode: u32, unnamed: bool) -> io::Result<(File, TempName)> {
        let made = if unnamed { Some(self.create_unnamed_file(tmp, mode)) } else { None };
        let (file, exists) = match made {
            Some(Ok(f)) => (f, false),
            Some(Err(e)) if e.kind() != io::ErrorKind::Unsupported => return Err(e),
            _ => (self.create_file(tmp, mode)?, true),
        };
        Ok((file, TempName { dir: self.clone(), name: tmp.to_string(), exists, renamed: false }))
    }
}

impl TempName {
    /// The temporary name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The directory it is in.
    pub fn dir(&self) -> &TraceDir {
        &self.dir
    }

    /// The file was renamed from this name to its own: nothing to remove.
    pub fn renamed(&mut self) {
        self.renamed = true;
    }
}

impl Drop for TempName {
    fn drop(&mut self) {
        if self.exists && !self.renamed {
            let _ = self.dir.remove(&self.name);
        }
    }
}

/// Gives each complete file its temporary name, unless it has it: those without, through
/// one descriptor of the directory (they are all in the first's), as
/// [`TraceDir::create_unnamed_file`] says.
///
/// # Errors
/// The index in `files` of the file that could not be named, and why; the names made are
/// marked as existing (removed with their [`TempName`] unless renamed).
pub fn link_temps(files: &mut [(&File, &mut TempName)]) -> Result<(), (usize, io::Error)> {
    let unnamed: Vec<usize> = (0..files.len()).filter(|&i| !files[i].1.exists).collect();
    let Some(&first) = unnamed.first() else { return Ok(()) };
    debug_assert!(unnamed.iter().all(|&i| files[i].1.dir.path() == files[first].1.dir.path()), "temporary names of one directory");
    let pairs: Vec<(&File, &str)> = unnamed.iter().map(|&i| (&*files[i].0, files[i].1.name.as_str())).collect();
    let linked = files[first].1.dir.link_files(&pairs);
    let made = linked.as_ref().err().map_or(unnamed.len(), |e| e.made);
    for &i in &unnamed[..made] {
        files[i].1.exists = true;
    }
    linked.map_err(|e| (unnamed[e.at], e.error))
}
