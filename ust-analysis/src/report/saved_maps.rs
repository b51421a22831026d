//! The copies of `/proc/<pid>/maps` a trace directory holds (`ust trace` saves them under
//! `proc/<pid>/`: [`ust_kernel::procfs::MAPS_SAMPLES`] and `maps`), read for one report
//! within one budget of [`MAX_MAPS_BYTES`] for all processes together: a file is capped on
//! its own too, but one forged file linked under many pid directories made as many copies
//! of its megabytes of lines (64 MB of text under four pids: 3 GB of entries).
//!
//! Directories are taken in pid order, so the budget runs out at the same place on every
//! read; a file that no longer fits is skipped, as an unreadable one is. Bytes that are not
//! UTF-8 (a path of another encoding) are read as U+FFFD rather than losing the file.

use std::path::{Path, PathBuf};

/// The most bytes of maps text one report reads, all processes together (64 MiB, as a
/// single metadata file).
pub const MAX_MAPS_BYTES: u64 = ust_ctf::files::MAX_TEXT_FILE;

/// What is left of the budget of one report.
#[derive(Debug)]
pub struct Budget {
    left: u64,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget { left: MAX_MAPS_BYTES }
    }
}

impl Budget {
    /// The text of the maps file `path` when it is a regular file that fits in what is
    /// left (which it then takes); `None` otherwise.
    pub fn read(&mut self, path: &Path) -> Option<String> {
        let bytes = ust_ctf::files::read_trace_file(path, self.left).ok()?;
        self.left -= bytes.len() as u64;
        Some(String::from_utf8_lossy(&bytes).into_owned())
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
        std::fs::write(dirs[2].1.join("maps"), b"1000-2000 r-xp 0 0 0 /caf\xe9\n").unwrap();
        let mut b = Budget { left: big.len() as u64 + 100 };
        assert_eq!(b.read(&dirs[0].1.join("maps")).map(|t| t.len()), Some(big.len()));
        assert_eq!(b.read(&dirs[1].1.join("maps")), None, "the same bytes under another pid do not fit twice");
        assert_eq!(b.read(&dirs[2].1.join("maps")).as_deref(), Some("1000-2000 r-xp 0 0 0 /caf\u{fffd}\n"));
        assert_eq!(Budget::default().read(&proc.join("4")), None, "a directory is not a maps file");
    }
}
