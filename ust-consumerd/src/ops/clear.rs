//! `ust clear` (LTTng's `lttng clear`): discard what a session recorded so far, in its
//! buffers and in its trace files, while it goes on recording.
//!
//! A session that writes its trace: every stream is switched and drained (so that no
//! packet begun before the clear lands in the new files), its files move out of the
//! trace into a scratch directory that is then removed, and fresh files start where they
//! were, with the metadata left in place ([`crate::ops::stream::Stream::rotate_chunk`], the
//! same step as `ust rotate`). Traces of processes that are gone are removed whole.
//! Archives of earlier rotations are not touched, as LTTng. A snapshot session has no
//! files: its buffers are emptied (a reader-side switch, then every delivered sub-buffer
//! consumed unread), so the next snapshot holds only what was recorded after the clear.

use std::sync::{Arc, Mutex};

use ust_ctf::outdir::TraceDir;

use crate::ops::state::Daemon;
use crate::ops::stream::Stream;

/// One process trace to clear: its directory (as named, and where its files are), its
/// streams, and whether it is gone.
type Job = (std::path::PathBuf, Option<TraceDir>, Vec<Arc<Mutex<Stream>>>, bool);

/// Clears session `name`.
///
/// # Errors
/// A message when the session does not exist, or when moving or removing files fails
/// (the trace is then left as the failure found it; nothing is half-deleted silently).
pub fn clear(daemon: &Daemon, name: &str) -> Result<(), String> {
    let (snapshot, output, jobs) = {
        let mut st = daemon.lock();
        st.maps.clear(name);
        let Some(ss) = st.sessions.get_mut(name) else { return Err(format!("no session named {name:?}")) };
        if ss.relay.is_some() {
            // Its files are the relay daemon's: there is nothing here to clear.
            return Err(format!("session {name} streams to a relay daemon: clearing network sessions is not supported"));
        }
        let snapshot = ss.session.snapshot;
        let mut jobs: Vec<Job> = Vec::new();
        for t in ss.traces.values_mut().filter(|t| !t.archived) {
            let gone = t.gone && !t.retained;
            jobs.push((t.dir.clone(), t.out.clone(), t.streams.clone(), gone));
            if gone && !snapshot {
                t.archived = true;
            }
        }
        (snapshot, ss.session.out.clone(), jobs)
    };
    if snapshot {
        let mut emptied = 0u64;
        for (_, _, streams, _) in &jobs {
            for s in streams {
                emptied += s.lock().unwrap_or_else(|e| e.into_inner()).discard_held();
            }
        }
        crate::log!("session {name}: cleared ({emptied} sub-buffers discarded from its buffers)");
        return Ok(());
    }
    // Everything through the session's output directory, as its owner ([`TraceDir`]).
    let output = output.ok_or_else(|| format!("session {name} has no output directory"))?;
    let scratch = format!(".clear-{}-{}", std::process::id(), ust_ctf::datetime::stamp());
    let not_found_is_done = |r: std::io::Result<()>| match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    for (i, (dir, out, streams, gone)) in jobs.iter().enumerate() {
        if *gone {
            if let Some(out) = out {
                not_found_is_done(out.remove_dir_all()).map_err(|e| format!("removing {}: {e}", dir.display()))?;
            }
            continue;
        }
        let to = output.dir(&format!("{scratch}/{i}"), 0o750).map_err(|e| format!("creating {}: {e}", output.path().join(&scratch).display()))?;
        for s in streams {
            let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
            s.rotate_chunk(&to).map_err(|e| format!("clearing {}/{e}", dir.display()))?;
        }
    }
    not_found_is_done(output.remove(&scratch)).map_err(|e| format!("removing {}: {e}", output.path().join(&scratch).display()))?;
    crate::log!("session {name}: cleared ({} process trace(s))", jobs.len());
    Ok(())
}
