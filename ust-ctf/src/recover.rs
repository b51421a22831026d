//! Repairs what a killed daemon left (DESIGN.md, "CTF output": "data files hold whole
//! packets only; recovery truncates a cut-off tail"). `ust view` runs it before reading.
//!
//! For every per-process trace directory under a root (a directory with a `metadata`
//! file, written whole before any packet):
//!
//! * every stream file is cut back to its last whole, valid packet (a packet whose write
//!   the kill interrupted is dropped);
//! * its index is rewritten from the packets that remain, so that file and index agree;
//! * a leftover `.metadata.tmp` (a kill between writing and renaming the metadata) is
//!   removed; a directory with it and no `metadata` holds no packet, and is removed too.
//!
//! Nothing is touched in a trace that is already whole, nor in a stream file that is still
//! growing (a live daemon appending a packet).

use std::path::{Path, PathBuf};

use crate::index::{IndexEntry, IndexFile};
use crate::reader;

/// What [`repair`] changed, one line per change.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Repairs {
    /// Human-readable descriptions of each change.
    pub changes: Vec<String>,
}

/// Repairs every trace under `root` (see the module docs).
///
/// # Errors
/// The first I/O error that stops a repair (reading a directory, truncating a file).
pub fn repair(root: &Path) -> std::io::Result<Repairs> {
    let mut r = Repairs::default();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let mut has_metadata = false;
        let mut has_tmp = false;
        let mut files: Vec<PathBuf> = Vec::new();
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let ft = e.file_type()?;
            let name = e.file_name().to_string_lossy().into_owned();
            if ft.is_dir() {
                if name != "index" {
                    dirs.push(e.path());
                }
            } else if ft.is_file() {
                match name.as_str() {
                    "metadata" => has_metadata = true,
                    ".metadata.tmp" => has_tmp = true,
                    n if !n.starts_with('.') => files.push(e.path()),
                    _ => {}
                }
            }
        }
        if has_tmp {
            std::fs::remove_file(d.join(".metadata.tmp"))?;
            r.changes.push(format!("{}: removed an unfinished .metadata.tmp", d.display()));
            if !has_metadata && files.iter().all(|f| std::fs::metadata(f).map(|m| m.len() == 0).unwrap_or(true)) {
                std::fs::remove_dir_all(&d)?;
                r.changes.push(format!("{}: removed (no metadata, no packet)", d.display()));
                continue;
            }
        }
        if has_metadata {
            for f in files {
                repair_stream(&d, &f, &mut r)?;
            }
        }
    }
    Ok(r)
}

fn repair_stream(dir: &Path, file: &Path, r: &mut Repairs) -> std::io::Result<()> {
    let bytes = std::fs::read(file)?;
    let mut whole = 0usize;
    let mut entries = Vec::new();
    for p in reader::packets(&bytes) {
        let Ok(p) = p else { break };
        let Ok(info) = reader::parse_packet(p) else { break };
        entries.push(IndexEntry::for_packet(whole as u64, &info));
        whole += p.len();
    }
    let name = file.file_name().unwrap_or_default().to_string_lossy().into_owned();
    if whole < bytes.len() {
        // A live daemon may be appending that packet right now (one write per packet):
        // leave a file that is still growing alone.
        std::thread::sleep(std::time::Duration::from_millis(100));
        if std::fs::metadata(file)?.len() != bytes.len() as u64 {
            r.changes.push(format!("{}: still being written; left alone", file.display()));
            return Ok(());
        }
        std::fs::OpenOptions::new().write(true).open(file)?.set_len(whole as u64)?;
        r.changes.push(format!("{}: cut {} bytes of an unfinished packet", file.display(), bytes.len() - whole));
    }
    let idx_path = dir.join("index").join(format!("{name}.idx"));
    let current = std::fs::read(&idx_path).ok().and_then(|b| crate::index::parse(&b).ok());
    if current.as_ref() != Some(&entries) {
        let tmp_name = format!(".{name}.repair");
        let mut f = IndexFile::create(dir, &tmp_name)?;
        for e in &entries {
            f.append(e)?;
        }
        drop(f);
        std::fs::rename(dir.join("index").join(format!("{tmp_name}.idx")), &idx_path)?;
        r.changes.push(format!("{}: rewritten from the {} whole packets", idx_path.display(), entries.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unfinished_metadata_and_empty_dirs_go_whole_traces_stay() {
        let root = tempfile::tempdir().unwrap();
        // Killed between writing the metadata's temporary file and renaming it.
        let cut = root.path().join("ust/pid/a-1-x");
        std::fs::create_dir_all(&cut).unwrap();
        std::fs::write(cut.join(".metadata.tmp"), "/* CTF 1.8 */ trace {").unwrap();
        // A whole trace with no packet yet.
        let whole = root.path().join("ust/pid/b-2-x");
        std::fs::create_dir_all(&whole).unwrap();
        std::fs::write(whole.join("metadata"), "/* CTF 1.8 */").unwrap();
        std::fs::write(whole.join("ch_0"), b"").unwrap();
        drop(IndexFile::create(&whole, "ch_0").unwrap());
        let r = repair(root.path()).unwrap();
        assert!(!cut.exists(), "{r:?}");
        assert!(whole.join("ch_0").exists() && whole.join("metadata").exists());
        assert_eq!(r.changes.len(), 2, "{r:?}");
        assert_eq!(repair(root.path()).unwrap(), Repairs::default(), "a second pass changes nothing");
    }
}
