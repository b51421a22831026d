//! The one model of a loaded trace that the report and every export read: each CTF trace
//! under a directory (each directory holding a `metadata` file), opened with
//! [`ctf_reader`] (CTF 1.8 or CTF 2, any tracer: ust, LTTng's kernel and user-space
//! tracers, babeltrace's writer), with where it comes from ([`Origin`]).
//!
//! The directory is what a tracer leaves: `ust trace`'s `<dir>/kernel/` and
//! `<dir>/ust/pid/<proc>/`, an LTTng session's `<session>-<stamp>/kernel/` and
//! `ust/uid/<uid>/64-bit/`, one trace directory itself, or a relay daemon's tree of many
//! hosts (`<root>/<hostname>/<session>-<stamp>/...`). Opening maps the stream files and
//! compiles the metadata; the events are read later, one trace at a time and in time order
//! within it ([`ctf_reader::CtfTrace::messages`]), so what a reader of the set holds is
//! bounded by its streams, not its events.

pub mod origin;

use std::path::{Path, PathBuf};

pub use origin::{Domain, Origin};

/// One CTF trace of a [`TraceSet`].
pub struct Member {
    /// The trace directory (holding `metadata`).
    pub dir: PathBuf,
    /// Where it comes from.
    pub origin: Origin,
    /// The opened trace.
    pub ctf: ctf_reader::CtfTrace,
}

/// Every CTF trace under a directory.
pub struct TraceSet {
    /// The directory given.
    pub root: PathBuf,
    /// The traces, sorted by directory.
    pub members: Vec<Member>,
}

/// Directories under `dir` (itself included) that hold a `metadata` file, sorted; LTTng's
/// `index/` directories and ust's `proc/` snapshots (`/proc/<pid>/maps` copies) are not
/// searched. A symbolic link to a directory is followed (a tree of links to traces kept
/// elsewhere is one set; a trace linked twice is two members, as two hosts' copies would
/// be), unless it leads back up: to a directory holding `dir` (`loop -> ..`, a link to
/// `/`) or to one the search is already inside (the same traces again and again, or the
/// whole file system).
///
/// # Errors
/// More than [`MAX_SEARCHED`] directories searched (links that branch back and forth make
/// exponentially many paths), naming `dir`.
pub fn trace_dirs(dir: &Path) -> Result<Vec<PathBuf>, String> {
    search(dir, MAX_SEARCHED)
}

/// [`trace_dirs`], searching at most `max` directories.
fn search(dir: &Path, max: usize) -> Result<Vec<PathBuf>, String> {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let top = std::fs::canonicalize(dir).ok();
    let mut out = Vec::new();
    // Each directory to search with the directories (device, inode) it lies in, as the
    // search went: one of those reached again is a circle.
    let mut stack: Vec<(PathBuf, Vec<(u64, u64)>)> = vec![(dir.to_path_buf(), Vec::new())];
    let mut searched = 0usize;
    while let Some((d, mut inside)) = stack.pop() {
        searched += 1;
        if searched > max {
            return Err(format!("{}: more than {max} directories to search for traces (links that lead to each other?)", dir.display()));
        }
        let here = id(&d);
        if here.is_some_and(|i| inside.contains(&i)) {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        inside.extend(here);
        let mut has_meta = false;
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                if e.file_name() == "index" || e.file_name() == "proc" {
                    continue;
                }
                let link = e.file_type().is_ok_and(|t| t.is_symlink());
                if link && std::fs::canonicalize(&p).is_ok_and(|to| top.as_ref().is_some_and(|top| top.starts_with(&to))) {
                    continue;
                }
                stack.push((p, inside.clone()));
            } else if e.file_name() == "metadata" {
                has_meta = true;
            }
        }
        if has_meta {
            out.push(d);
        }
    }
    out.sort();
    Ok(out)
}

/// The most directories [`trace_dirs`] searches: a relay daemon's tree of a thousand hosts
/// and sessions is a few thousand.
pub const MAX_SEARCHED: usize = 100_000;

impl TraceSet {
    /// Opens every trace under `dir`.
    ///
    /// # Errors
    /// A message when `dir` holds no trace (no `metadata` file anywhere under it), or when a
    /// trace's metadata cannot be read (empty, not CTF, a syntax or semantic error, a clock
    /// offset beyond 64-bit nanoseconds), naming the file.
    pub fn open(dir: &Path) -> Result<TraceSet, String> {
        let dirs = trace_dirs(dir)?;
        if dirs.is_empty() {
            return Err(format!("no CTF trace (no metadata file) under {}", dir.display()));
        }
        let mut members = Vec::with_capacity(dirs.len());
        for d in dirs {
            let meta = d.join("metadata");
            if std::fs::metadata(&meta).map(|m| m.is_file() && m.len() == 0).unwrap_or(false) {
                return Err(format!("{}: the metadata file is empty: the trace cannot be read", meta.display()));
            }
            let ctf = ctf_reader::CtfTrace::open(&d).map_err(|e| format!("the trace cannot be read: {e}"))?;
            let origin = Origin::of(dir, &d, ctf.metadata());
            members.push(Member { dir: d, origin, ctf });
        }
        Ok(TraceSet { root: dir.to_path_buf(), members })
    }
}

#[cfg(test)]
mod tests {
    use super::trace_dirs;

    /// A link to a directory is followed, unless it leads back up (it found the trace again
    /// under every `loop/` until the path was too long, and a link to `/` walked the whole
    /// file system); a trace linked twice is found twice.
    #[test]
    fn links_back_up_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path().join("session/kernel");
        std::fs::create_dir_all(&t).unwrap();
        std::fs::write(t.join("metadata"), "/* CTF 1.8 */").unwrap();
        std::os::unix::fs::symlink("..", t.join("loop")).unwrap();
        std::os::unix::fs::symlink("/", tmp.path().join("session/root")).unwrap();
        assert_eq!(trace_dirs(&tmp.path().join("session")).unwrap(), std::slice::from_ref(&t));
        // Links to traces elsewhere (a relay daemon's tree assembled by hand), one twice;
        // a link to a directory the search is inside.
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(tree.join("host-a")).unwrap();
        std::os::unix::fs::symlink(&t, tree.join("host-a/kernel")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("session"), tree.join("host-b")).unwrap();
        std::os::unix::fs::symlink(&tree, tree.join("host-a/again")).unwrap();
        assert_eq!(trace_dirs(&tree).unwrap(), [tree.join("host-a/kernel"), tree.join("host-b/kernel")]);
        let inner = tmp.path().join("session/kernel/sub");
        std::fs::create_dir_all(&inner).unwrap();
        std::os::unix::fs::symlink(&t, inner.join("up")).unwrap();
        assert_eq!(trace_dirs(&tmp.path().join("session")).unwrap(), std::slice::from_ref(&t));
        // The directory given may itself be a link.
        std::os::unix::fs::symlink(tmp.path().join("session"), tmp.path().join("latest")).unwrap();
        assert_eq!(trace_dirs(&tmp.path().join("latest")).unwrap(), [tmp.path().join("latest/kernel")]);
        // Twelve directories, each linking to the next twice: 2^12 paths, an error.
        let chain = tmp.path().join("chain");
        for i in 0..=12 {
            std::fs::create_dir_all(chain.join(format!("d{i}"))).unwrap();
        }
        for i in 0..12 {
            for k in ["a", "b"] {
                std::os::unix::fs::symlink(chain.join(format!("d{}", i + 1)), chain.join(format!("d{i}/{k}"))).unwrap();
            }
        }
        let e = super::search(&chain.join("d0"), 1000).unwrap_err();
        assert!(e.contains("more than 1000 directories"), "{e}");
    }
}
