//! The copies of `/proc/<pid>/maps` a trace directory holds (`ust trace` saves them under
//! `proc/<pid>/`: [`ust_kernel::procfs::MAPS_SAMPLES`] and `maps`), read for the report
//! within one budget of [`MAX_MAP_LINES`] lines for all processes together (each entry
//! is 48 bytes, its path shared), each file capped at
//! [`ust_ctf::files::MAX_TEXT_FILE`] bytes: one forged file of millions of short lines,
//! linked under many pid directories, made as many copies (64 MB of text under four pids:
//! 3 GB of entries). A real trace holds far fewer: a process keeps at most 512 distinct
//! copies of its maps, of a few hundred lines.
//!
//! Directories are taken in pid order, so the budget runs out at the same place on every
//! read; a file whose lines no longer fit is skipped whole, as an unreadable one is. Bytes
//! that are not UTF-8 (a path of another encoding) are read as U+FFFD rather than losing
//! the file.

use std::path::{Path, PathBuf};

use ust_kernel::procfs::MapEntry;

/// The most lines of maps one reader of a report takes, all processes together (4 Mi: 200
/// MB of entries).
pub const MAX_MAP_LINES: usize = 4 << 20;

/// What is left of the budget of one reader.
#[derive(Debug)]
pub struct Budget {
    lines: usize,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget { lines: MAX_MAP_LINES }
    }
}

impl Budget {
    /// The text of the maps file `path` when it is a regular file whose lines fit in what
    /// is left (which they then take); `None` otherwise.
    fn read(&mut self, path: &Path) -> Option<String> {
        let bytes = ust_ctf::files::read_trace_file(path, ust_ctf::files::MAX_TEXT_FILE).ok()?;
        let lines = bytes.iter().filter(|&&b| b == b'\n').count() + usize::from(bytes.last().is_some_and(|&b| b != b'\n'));
        self.lines = self.lines.checked_sub(lines)?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The copies of a [`ust_kernel::procfs::MAPS_SAMPLES`] file.
    pub fn samples(&mut self, path: &Path) -> Option<Vec<(u64, Vec<MapEntry>)>> {
        self.read(path).map(|t| ust_kernel::procfs::parse_maps_samples(&t))
    }

    /// The entries of a `maps` file.
    pub fn maps(&mut self, path: &Path) -> Option<Vec<MapEntry>> {
        self.read(path).map(|t| ust_kernel::procfs::parse_maps(&t))
    }
}

/// The pid directories under `dir/proc`, in pid order.
pub fn pid_dirs(dir: &Path) -> Vec<(i32, PathBuf)> {
    let Ok(rd) = std::fs::read_dir(dir.join(ust_kernel::procfs::PROC_DIR)) else { return Vec::new() };
    let mut out: Vec<(i32, PathBuf)> = rd.flatten().filter_map(|d| Some((d.file_name().to_str()?.parse::<i32>().ok()?, d.path()))).collect();
    out.sort_by_key(|p| p.0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_budget_for_every_process_in_pid_order() {
        let tmp = tempfile::tempdir().unwrap();
        let proc = tmp.path().join("proc");
        for pid in [30, 4, 200] {
            std::fs::create_dir_all(proc.join(pid.to_string())).unwrap();
        }
        std::fs::create_dir_all(proc.join("self")).unwrap();
        let dirs = pid_dirs(tmp.path());
        assert_eq!(dirs.iter().map(|d| d.0).collect::<Vec<_>>(), [4, 30, 200]);
        let big = "1000-2000 r-xp 0 0 0 /a\n".repeat(1000);
        std::fs::write(dirs[0].1.join("maps"), &big).unwrap();
        std::fs::hard_link(dirs[0].1.join("maps"), dirs[1].1.join("maps")).unwrap();
        std::fs::write(dirs[2].1.join("maps"), b"1000-2000 r-xp 0 0 0 /caf\xe9").unwrap();
        let mut b = Budget { lines: 1001 };
        assert_eq!(b.maps(&dirs[0].1.join("maps")).map(|m| m.len()), Some(1000));
        assert_eq!(b.maps(&dirs[1].1.join("maps")), None, "the same lines under another pid do not fit twice");
        let m = b.maps(&dirs[2].1.join("maps")).unwrap();
        assert_eq!(&*m[0].path, "/caf\u{fffd}", "a last line without its newline counts");
        assert_eq!(b.lines, 0);
        assert_eq!(Budget::default().read(&proc.join("4")), None, "a directory is not a maps file");
    }
}
