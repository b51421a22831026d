//! `ust trace --kernel --as-user [USER] -- CMD`, for root: the kernel is recorded as root
//! records it ([`crate::kernel::view_recorder::ViewRecorder`]), while CMD runs as USER, not
//! as root — running a program as root only to trace it is a bad habit.
//!
//! - USER is a name or a numeric uid from the password database; without it, the user
//!   `sudo` was run by: `$SUDO_UID` (and `$SUDO_GID`, else that user's primary group). With
//!   neither, `--as-user` is an error.
//! - The drop happens in the forked child before `exec` (`pre_exec`): supplementary groups
//!   as `initgroups(3)` would set them (their list is computed before the fork with
//!   `getgrouplist(3)`, since the child may only make async-signal-safe calls), then the
//!   real, effective and saved gid, then uid (`setresgid`, `setresuid`: raw system calls,
//!   so only the child's one thread changes). `HOME`, `USER` and `LOGNAME` are USER's.
//! - The trace is USER's: root writes it as USER ([`Identity::owner`], the owner of the
//!   output's [`ust_ctf::outdir::TraceDir`]: the output directory is made and opened as
//!   USER, every file created as USER and their group, never through a link), and root's
//!   daemon writes the session's user-space traces as USER too (the session's owner). The
//!   default output is `<USER's home>/ust-traces/…` (`ust-traces` made as USER if
//!   missing); an `--output` USER may not write is an error, before the command runs.

use std::ffi::{CStr, CString};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use super::connect::Failure;

/// Who the traced command runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id (`$SUDO_GID` when it came from sudo).
    pub gid: u32,
    /// Home directory (`HOME` of the command, the default output's parent).
    pub home: PathBuf,
    /// Supplementary groups, as `initgroups` sets them (the primary group included).
    pub groups: Vec<u32>,
}

/// A password-database entry: (name, uid, gid, home).
fn passwd(name: Option<&CStr>, uid: u32) -> Option<(String, u32, u32, PathBuf)> {
    // SAFETY: an all-zero passwd is a valid out-parameter; getpw*_r fill it and point its
    // strings into `buf`, which outlives every read below; `found` is checked before use.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let r = match name {
            Some(n) => libc::getpwnam_r(n.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut found),
            None => libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found),
        };
        if r != 0 || found.is_null() || pw.pw_name.is_null() || pw.pw_dir.is_null() {
            return None;
        }
        let name = CStr::from_ptr(pw.pw_name).to_string_lossy().into_owned();
        let home = PathBuf::from(CStr::from_ptr(pw.pw_dir).to_string_lossy().into_owned());
        Some((name, pw.pw_uid, pw.pw_gid, home))
    }
}

/// The groups `initgroups(name, gid)` would set.
fn group_list(name: &str, gid: u32) -> Result<Vec<u32>, Failure> {
    let c = CString::new(name).map_err(|_| Failure::new(format!("user name {name:?} has a NUL byte")))?;
    let mut n: libc::c_int = 64;
    for _ in 0..8 {
        let mut groups = vec![0 as libc::gid_t; n.max(1) as usize];
        let mut count = n;
        // SAFETY: `groups` holds `count` entries; getgrouplist writes at most that many and
        // sets `count` to the number it has (or needs, returning -1 when that is more).
        let r = unsafe { libc::getgrouplist(c.as_ptr(), gid, groups.as_mut_ptr(), &mut count) };
        if r >= 0 {
            groups.truncate(count.max(0) as usize);
            return Ok(groups);
        }
        n = count.max(n.saturating_mul(2));
    }
    Err(Failure::new(format!("cannot list the groups of {name}")))
}

/// Resolves `--as-user [USER]`: `user` is the value given (`""` when none), `sudo` the
/// values of `SUDO_UID` and `SUDO_GID`.
///
/// # Errors
/// Not root; no USER and no `SUDO_UID`; an unknown user; USER is root.
pub fn resolve(user: &str, sudo: (Option<String>, Option<String>), euid: u32) -> Result<Identity, Failure> {
    if euid != 0 {
        return Err(Failure::new("--as-user is for root: it records the kernel as root and runs the command as USER (an ordinary user runs `ust trace --kernel` as themself: tier 1 or 2)"));
    }
    let (name, uid, mut gid, home) = if user.is_empty() {
        let Some(sudo_uid) = sudo.0.filter(|s| !s.is_empty()) else {
            return Err(Failure::new("--as-user needs a USER: none was given and SUDO_UID is not set (run through sudo, or name the user: --as-user USER)"));
        };
        let uid: u32 = sudo_uid.trim().parse().map_err(|_| Failure::new(format!("SUDO_UID={sudo_uid:?} is not a uid")))?;
        passwd(None, uid).ok_or_else(|| Failure::new(format!("SUDO_UID={uid} is no user of the password database")))?
    } else if let Ok(uid) = user.parse::<u32>() {
        passwd(None, uid).ok_or_else(|| Failure::new(format!("--as-user {uid}: no such user")))?
    } else {
        let c = CString::new(user).map_err(|_| Failure::new("--as-user: a user name has no NUL byte"))?;
        passwd(Some(&c), 0).ok_or_else(|| Failure::new(format!("--as-user {user}: no such user")))?
    };
    if user.is_empty() {
        if let Some(g) = sudo.1.filter(|s| !s.is_empty()) {
            gid = g.trim().parse().map_err(|_| Failure::new(format!("SUDO_GID={g:?} is not a gid")))?;
        }
    }
    if uid == 0 {
        return Err(Failure::new(format!("--as-user {name}: that is root; the command would run as root anyway")));
    }
    let groups = group_list(&name, gid)?;
    Ok(Identity { name, uid, gid, home, groups })
}

impl Identity {
    /// Makes `cmd` run as this user: groups, gids and uids dropped in the child before
    /// `exec`, and `HOME`, `USER`, `LOGNAME` set. A drop that fails fails the spawn (the
    /// command never runs as root).
    pub fn apply(&self, cmd: &mut std::process::Command) {
        cmd.env("HOME", &self.home).env("USER", &self.name).env("LOGNAME", &self.name);
        let (uid, gid, groups) = (self.uid, self.gid, self.groups.clone());
        let drop_to = move || -> std::io::Result<()> {
            // SAFETY: raw system calls only (async-signal-safe, as a forked child needs);
            // `groups` was allocated before the fork and lives as long as the closure.
            unsafe {
                if libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) != 0
                    || libc::syscall(libc::SYS_setresgid, gid, gid, gid) != 0
                    || libc::syscall(libc::SYS_setresuid, uid, uid, uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        };
        // SAFETY: the closure makes raw system calls only, and allocates nothing.
        unsafe {
            cmd.pre_exec(drop_to);
        }
    }

    /// The default output's parent: `<home>/ust-traces` (made as the user, with the
    /// output, when missing).
    pub fn traces_dir(&self) -> PathBuf {
        self.home.join("ust-traces")
    }

    /// Whose file-system identity writes the trace: the user and the group the command
    /// runs with.
    pub fn owner(&self) -> ust_ctf::outdir::Owner {
        ust_ctf::outdir::Owner { uid: self.uid, gid: self.gid }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_names_uids_and_sudo_and_refuses_the_rest() {
        let none = (None, None);
        assert!(resolve("root", none.clone(), 1000).unwrap_err().message.contains("is for root"));
        assert!(resolve("", none.clone(), 0).unwrap_err().message.contains("SUDO_UID is not set"));
        assert!(resolve("no-such-user-ust", none.clone(), 0).unwrap_err().message.contains("no such user"));
        assert!(resolve("root", none.clone(), 0).unwrap_err().message.contains("that is root"));
        assert!(resolve("", (Some("x".into()), None), 0).unwrap_err().message.contains("not a uid"));
        // `nobody` exists on every Debian system.
        let Some((_, uid, gid, _)) = passwd(Some(c"nobody"), 0) else { return };
        let by_name = resolve("nobody", none.clone(), 0).unwrap();
        assert_eq!((by_name.uid, by_name.gid), (uid, gid));
        assert!(by_name.groups.contains(&gid), "initgroups includes the primary group");
        assert_eq!(resolve(&uid.to_string(), none, 0).unwrap(), by_name);
        let sudo = resolve("", (Some(uid.to_string()), Some("4242".into())), 0).unwrap();
        assert_eq!((sudo.name.as_str(), sudo.uid, sudo.gid), ("nobody", uid, 4242), "SUDO_GID wins over the primary group");
    }
}
