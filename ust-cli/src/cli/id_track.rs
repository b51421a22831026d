//! `ust track/untrack --vuid|--vgid` (LTTng's `lttng track/untrack --userspace
//! --vuid|--vgid`): ids given as numbers or as user and group names, resolved here with
//! the system's user and group databases (`getpwnam_r`, `getgrnam_r`).

use std::ffi::CString;

use ust_ctl::protocol::{Command, Payload};
use ust_ctl::trackers::IdKind;

use super::args::TrackArgs;
use super::connect::{call, unexpected, Failure};
use crate::out::outln;

/// A user or group name's id, or `None` when there is none of that name.
fn lookup(kind: IdKind, name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    let mut buf = vec![0u8; 16384];
    match kind {
        IdKind::Vuid => {
            // SAFETY: all-zero is a valid `passwd` (null pointers, zero ids); it is only
            // read after getpwnam_r filled it.
            let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
            let mut out: *mut libc::passwd = std::ptr::null_mut();
            // SAFETY: `c` is NUL-terminated, `buf` is `buf.len()` writable bytes that
            // outlive the call, `pw` and `out` are valid for writes.
            let r = unsafe { libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut out) };
            (r == 0 && !out.is_null()).then_some(pw.pw_uid)
        }
        IdKind::Vgid => {
            // SAFETY: as above, for `group`.
            let mut gr: libc::group = unsafe { std::mem::zeroed() };
            let mut out: *mut libc::group = std::ptr::null_mut();
            // SAFETY: as above.
            let r = unsafe { libc::getgrnam_r(c.as_ptr(), &mut gr, buf.as_mut_ptr().cast(), buf.len(), &mut out) };
            (r == 0 && !out.is_null()).then_some(gr.gr_gid)
        }
    }
}

/// Parses ids and names.
///
/// # Errors
/// A usage failure naming the unknown name.
pub fn resolve(kind: IdKind, given: &[String]) -> Result<Vec<u32>, Failure> {
    given
        .iter()
        .map(|g| {
            let g = g.trim();
            g.parse::<u32>()
                .ok()
                .or_else(|| lookup(kind, g))
                .ok_or_else(|| Failure::usage(format!("{} {g:?}: no such {} (give an id or a name)", kind.option(), kind.noun())))
        })
        .collect()
}

/// Runs the `--vuid` and `--vgid` parts of `ust track`/`untrack`.
///
/// # Errors
/// A bad name, or the daemon's refusal.
pub fn track_ids(a: &TrackArgs, track: bool) -> Result<(), Failure> {
    for (kind, given) in [(IdKind::Vuid, &a.vuid), (IdKind::Vgid, &a.vgid)] {
        let Some(given) = given else { continue };
        let ids = resolve(kind, given)?;
        if a.all != ids.is_empty() {
            return Err(Failure::usage(format!(
                "{} {}: give ids or {} --all, one or the other",
                if track { "track" } else { "untrack" },
                kind.option(),
                kind.option()
            )));
        }
        let cmd = Command::TrackIds { session: a.session.session.clone(), kind, ids: ids.clone(), all: a.all, track };
        let Payload::IdTracker { session, tracker, unchanged, .. } = call(cmd)? else { return Err(unexpected()) };
        let noun = kind.noun();
        for id in &ids {
            match (unchanged.contains(id), track) {
                (false, true) => outln!("{} ID {id} tracked in session {session}", capital(noun)),
                (false, false) => outln!("{} ID {id} untracked in session {session}", capital(noun)),
                (true, true) => eprintln!("ust: warning: {noun} ID {id} is already tracked in session {session}"),
                (true, false) => eprintln!("ust: warning: {noun} ID {id} is not tracked in session {session}"),
            }
        }
        outln!("Tracked {noun} IDs: {}", tracker.describe());
    }
    Ok(())
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
}
