//! Who may talk to the daemon: the peer checks of the `app` and `ctl` sockets (credentials
//! from `SO_PEERCRED`, docs/DESIGN.md#security) and the modes the sockets are created
//! with.

/// Which socket a connection came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `app`: applications registering.
    App,
    /// `ctl`: the `ust` command.
    Ctl,
}

/// Whether a peer with `uid` (primary group `gid`, process `pid`) may use socket `kind` of a
/// daemon running as `daemon_uid`. A user's daemon accepts only that user. Root's daemon
/// accepts every application (it is system-wide) and control from root and members of
/// group `tracing` only.
pub fn peer_allowed(kind: Kind, daemon_uid: u32, uid: u32, gid: u32, pid: i32) -> bool {
    if daemon_uid != 0 {
        return uid == daemon_uid;
    }
    match kind {
        Kind::App => true,
        Kind::Ctl => uid == 0 || in_tracing_group(gid, pid),
    }
}

/// Mode of root's `kview` socket: 0666, since any user may ask for a kernel view of their
/// own command (crate::servers::kview says why it is a socket of its own, not a request on `ctl`).
pub const KVIEW_MODE: u32 = 0o666;

/// Mode (and group) of socket `kind`. A user's daemon: 0600, its user only. Root's daemon
/// (system-wide): `app` 0666, since every user's applications register with it (each
/// connection's credentials are still checked); `ctl` 0660 with group `tracing` when that
/// group exists (root and its members control the daemon), else 0600.
pub fn socket_mode(kind: Kind, root: bool, tracing_gid: Option<u32>) -> (u32, Option<u32>) {
    match (root, kind, tracing_gid) {
        (false, _, _) => (0o600, None),
        (true, Kind::App, _) => (0o666, None),
        (true, Kind::Ctl, Some(g)) => (0o660, Some(g)),
        (true, Kind::Ctl, None) => (0o600, None),
    }
}

/// The gid of group `name` (`getgrnam_r`: reentrant, unlike `getgrnam`, since the daemon's
/// connection threads ask concurrently), or `None` when there is no such group or the
/// group database cannot be read.
pub fn group_id(name: &str) -> Option<u32> {
    let cname = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0u8; 4096];
    loop {
        // SAFETY: all-zero is a valid `struct group` (null pointers, gid 0); getgrnam_r
        // fills it in.
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call: the NUL-terminated name, the
        // struct, the buffer for its strings (with its true length) and the result slot;
        // getgrnam_r writes only into them.
        let rc = unsafe { libc::getgrnam_r(cname.as_ptr(), &mut grp, buf.as_mut_ptr().cast(), buf.len(), &mut result) };
        if rc == libc::ERANGE && buf.len() < (1 << 20) {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        return (rc == 0 && !result.is_null()).then_some(grp.gr_gid);
    }
}

/// The gid of group `tracing`, if it exists.
pub fn tracing_group() -> Option<u32> {
    group_id("tracing")
}

fn in_tracing_group(gid: u32, pid: i32) -> bool {
    tracing_group().is_some_and(|t| in_group(t, gid, pid))
}

/// True when a peer with primary group `gid` and process `pid` is in group `group` (its
/// primary group, or one of the supplementary groups `/proc/<pid>/status` lists).
pub fn in_group(group: u32, gid: u32, pid: i32) -> bool {
    let tracing = group;
    if gid == tracing {
        return true;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("Groups:")).is_some_and(|g| g.split_whitespace().any(|x| x.parse::<u32>() == Ok(tracing)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_looked_up_reentrantly() {
        assert_eq!(group_id("root"), Some(0));
        assert_eq!(group_id("no-such-group-ust"), None);
        assert_eq!(group_id("nul\0byte"), None);
    }
}
