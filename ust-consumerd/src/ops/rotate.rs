//! `ust rotate`: the current trace chunk of a session is archived
//! (`<output>/archives/<begin>-<end>-<n>/`), every stream's files moved there, and fresh
//! files started where they were. Also the last chunk of a rotated session at `destroy`.

use std::path::PathBuf;

use crate::ops::state::Daemon;

/// Archives the current trace chunk of session `name` (see [`ust_ctl::protocol::Command::Rotate`]) and
/// returns the archive directory. Tells the triggers ([`crate::ops::triggers::Triggers::note_rotation`])
/// that it begins and, when it succeeds, that it finished.
///
/// # Errors
/// A message when the session was never started or a file cannot be moved.
pub fn rotate(daemon: &Daemon, name: &str) -> Result<PathBuf, String> {
    let r = rotate_chunk(daemon, name, false);
    if r.is_ok() {
        daemon.lock().triggers.note_rotation(name, true);
        crate::ops::triggers::wake_watch();
    }
    r
}

/// [`rotate`]; with `last`, the session is being destroyed: every trace is finished and its
/// directory goes away with the move. Every directory and file is made, moved and removed
/// through the session's output directory, as its owner ([`ust_ctf::outdir::TraceDir`]).
pub fn rotate_chunk(daemon: &Daemon, name: &str, last: bool) -> Result<PathBuf, String> {
    let (archive, archive_rel, out, jobs) = {
        let mut st = daemon.lock();
        let Some(ss) = st.sessions.get_mut(name) else { return Err(format!("no session named {name:?}")) };
        if ss.session.snapshot {
            return Err(format!("session {name} is a snapshot session: it writes no trace to rotate (use `ust snapshot record`)"));
        }
        if ss.relay.is_some() {
            return Err(format!("session {name} streams to a relay daemon: rotation of network sessions is not supported"));
        }
        if !ss.session.ever_started {
            return Err(format!("session {name} has not been started: there is no trace to rotate"));
        }
        let now = ust_ctf::datetime::now();
        let archive_rel = format!("archives/{}-{}-{}", ust_ctf::datetime::iso_at(ss.session.chunk_begin), ust_ctf::datetime::iso_at(now), ss.session.rotations);
        let archive = ss.session.output.join(&archive_rel);
        ss.session.rotations += 1;
        ss.session.chunk_begin = now;
        let mut jobs = Vec::new();
        for t in ss.traces.values_mut().filter(|t| !t.archived) {
            let rel = crate::ops::trace::rel_dir(t, &ss.session.output).to_string_lossy().into_owned();
            let done = t.gone || last;
            jobs.push((t.dir.clone(), t.out.clone(), rel, t.streams.clone(), done));
            t.archived = done;
        }
        (archive, archive_rel, ss.session.out.clone(), jobs)
    };
    if !last {
        // Past the checks: the rotation begins (session-rotation-starts).
        daemon.lock().triggers.note_rotation(name, false);
    }
    let out = out.ok_or_else(|| format!("session {name} has no output directory"))?;
    let archive_dir = out.dir(&archive_rel, 0o750).map_err(|e| format!("cannot create {}: {e}", archive.display()))?;
    for (dir, trace_out, rel, streams, gone) in jobs {
        let dest = archive_dir.dir(&rel, 0o750).map_err(|e| format!("cannot create {}: {e}", archive.join(&rel).display()))?;
        let Some(trace_out) = trace_out else { continue };
        // The metadata first: the archive is complete before any of its packets is there.
        let copy = || -> std::io::Result<()> {
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut trace_out.open_file("metadata", false)?, &mut text)?;
            dest.write_atomically("metadata", &text, 0o600)
        };
        copy().map_err(|e| format!("cannot copy {}/metadata: {e}", dir.display()))?;
        for s in &streams {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            s.rotate_chunk(&dest).map_err(|e| format!("rotating {}/{e}", dir.display()))?;
        }
        if gone {
            let _ = trace_out.remove_dir_all();
        }
    }
    crate::log!("session {name}: trace chunk archived in {}", archive.display());
    Ok(archive)
}
