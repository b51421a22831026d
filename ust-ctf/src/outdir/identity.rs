//! Whose file-system identity creates a trace's files ([`Owner`]), and taking it for the
//! length of one call ([`as_owner`]).
//!
//! On Linux, the credentials the kernel checks for file access are per thread: the
//! file-system uid and gid (`setfsuid(2)`, `setfsgid(2)`) and the supplementary groups
//! (the raw `setgroups(2)` system call; glibc's wrapper changes every thread of the
//! process). [`as_owner`] gives the calling thread the owner's file-system uid and gid and
//! no supplementary groups, runs the call, and gives back what the thread had, so that a
//! root process (the `ust` command, root's `ust-consumerd` and its many threads) creates
//! the files of one user's trace as that user while its other threads go on as root.
//! Files are then the user's from their creation (owner, group, quota), and root's
//! privileges (`CAP_DAC_OVERRIDE`, `CAP_FOWNER`, …, which the kernel takes out of the
//! thread's effective set while its file-system uid is not 0) never apply to the user's
//! directory. That is what NFS servers do for each request (knfsd's `nfsd_setuser`),
//! where lttng-tools forks a `run-as` worker (`src/common/runas.cpp`) that changes its
//! effective ids and hands back descriptors.

use std::io;

/// A user whose trace this is: the file-system uid and gid files are created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    /// User id.
    pub uid: u32,
    /// Group id (the user's primary group, or `$SUDO_GID`).
    pub gid: u32,
}

impl Owner {
    /// User `uid` with their primary group from the password database (`getpwuid_r`), or
    /// `fallback_gid` when `uid` has no entry.
    pub fn with_primary_group(uid: u32, fallback_gid: u32) -> Owner {
        Owner { uid, gid: primary_gid(uid).unwrap_or(fallback_gid) }
    }
}

/// The primary group of `uid` in the password database.
fn primary_gid(uid: u32) -> Option<u32> {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: an all-zero passwd is a valid out-parameter; getpwuid_r fills it, pointing its
    // strings into `buf` (of the length given), and sets `found` to it or to null; only
    // the integer `pw_gid` is read, and only when `found` is set.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let r = libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found);
        (r == 0 && !found.is_null()).then_some(pw.pw_gid)
    }
}

/// The calling thread's file-system uid and gid. `setfsuid`/`setfsgid` with an id no user
/// can have (-1) change nothing and return the current one.
pub fn current() -> Owner {
    // SAFETY: with -1 these calls change no credential (the id is invalid) and only return
    // the calling thread's current file-system id.
    unsafe { Owner { uid: libc::setfsuid(u32::MAX) as u32, gid: libc::setfsgid(u32::MAX) as u32 } }
}

/// What [`as_owner`] gives back when it returns (also when the call panics).
struct Restore {
    prev: Owner,
    groups: Vec<rustix::process::Gid>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        // The uid first: back to 0, it gives the thread its file capabilities again, then
        // the gid and the groups (CAP_SETGID is not a file capability: it stayed).
        // SAFETY: setfsuid/setfsgid change only this thread's file-system ids.
        unsafe {
            libc::setfsuid(self.prev.uid);
            libc::setfsgid(self.prev.gid);
        }
        // A failure would leave the thread with fewer rights than it had, never more.
        let _ = rustix::thread::set_thread_groups(&self.groups);
    }
}

/// Runs `f` with the calling thread's file-system identity set to `owner` (its uid, its
/// gid, no supplementary groups), then restores the thread's own. `None`, or an owner the
/// thread already is, runs `f` as the thread is.
///
/// # Errors
/// `PermissionDenied` when the thread may not take that identity (it is not root); else
/// what `f` returns.
pub fn as_owner<T>(owner: Option<Owner>, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    let Some(o) = owner else { return f() };
    let prev = current();
    if prev == o {
        return f();
    }
    let groups = rustix::process::getgroups()?;
    rustix::thread::set_thread_groups(&[]).map_err(|e| refused(o, e.into()))?;
    let restore = Restore { prev, groups };
    // SAFETY: setfsgid/setfsuid change only this thread's file-system ids; whether they
    // took is checked just below (they report no error, only the previous id).
    unsafe {
        libc::setfsgid(o.gid);
        libc::setfsuid(o.uid);
    }
    if current() != o {
        drop(restore);
        return Err(refused(o, io::Error::from_raw_os_error(libc::EPERM)));
    }
    let r = f();
    drop(restore);
    r
}

fn refused(o: Owner, e: io::Error) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, format!("cannot write as uid {} gid {}: {e}", o.uid, o.gid))
}
