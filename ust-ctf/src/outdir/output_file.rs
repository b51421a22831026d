//! A file named on a command line (`ust export --output FILE`, `ust report --flamegraph
//! FILE`): made as every file ust writes for a user ([`TraceDir`]: by root in a user's
//! directory, as that user; a link refused), through a temporary name ([`TempName`]:
//! without a name while written where the file system allows, `.<name>.<pid>.tmp` when
//! complete) and given its name only when complete ([`OutputFile::commit`]: two commands
//! writing one file each write their own, and the last named wins whole). A command that
//! fails (a full disk) leaves the earlier file of that name as it was and no part of its
//! own, and so does one killed (Ctrl-C) while writing: the system frees a file that has no
//! name (a kill in the instant between the link and the rename leaves the temporary name).
//! Where the file system makes no unnamed files, the file is written under its hidden
//! temporary name from the start, which a killed command leaves behind. The file is not
//! synced before its rename: after a power loss or a system crash the named file may be
//! incomplete.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use super::{link_temps, TempName, TraceDir};

/// An output file being written; removed when dropped before [`OutputFile::commit`].
#[must_use = "an output file is removed unless committed"]
pub struct OutputFile {
    tmp: TempName,
    name: String,
    file: File,
}

/// A new output file for `path` (`mode`, less the umask), its directory opened as
/// [`TraceDir::open`] opens an output directory. What the name would replace is checked
/// before the writing ([`TraceDir::check_replaceable`]: a regular file of the writer's),
/// and again when the file is named.
///
/// # Errors
/// The system's error, a refusal, or `InvalidInput` for a path that names a directory
/// (`dir/`, `dir/.`), has no file name or one that is not UTF-8.
pub fn create_output_file(path: &Path, mode: u32) -> io::Result<OutputFile> {
    create(path, mode, true)
}

/// [`create_output_file`]; `unnamed`: without a name where the file system allows (tests
/// pass `false` for the other way, which some file systems take).
pub(super) fn create(path: &Path, mode: u32, unnamed: bool) -> io::Result<OutputFile> {
    // The caller names the path in its message.
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, why.to_string());
    // `out/` and `out/.` name a directory, not a file `out`.
    let last = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).rsplit(|&b| b == b'/').next().unwrap_or_default();
    if matches!(last, b"" | b"." | b"..") {
        return Err(bad("names a directory, not a file"));
    }
    let name = path.file_name().ok_or_else(|| bad("not a file name"))?.to_str().ok_or_else(|| bad("the file name is not UTF-8"))?;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let dir = TraceDir::open(parent, None)?;
    dir.check_replaceable(name)?;
    // A name is at most 255 bytes: the temporary one keeps room for its dot, pid and
    // `.tmp` by cutting the name (at a character boundary).
    let mut cut = name.len().min(200);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    // A regular file of the writer's at the temporary name is a killed command's (pid
    // reuse: a container's pid 1), replaced.
    let (file, tmp) = dir.create_temp(&format!(".{}.{}.tmp", &name[..cut], std::process::id()), mode, unnamed)?;
    Ok(OutputFile { tmp, name: name.to_string(), file })
}

impl std::fmt::Debug for OutputFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputFile").field("dir", &self.tmp.dir().path()).field("tmp", &self.tmp.name()).field("name", &self.name).finish()
    }
}

impl OutputFile {
    /// Gives the complete file its name (replacing a regular file of the writer's).
    ///
    /// # Errors
    /// The system's error, or a refusal of what is now at the name; the temporary file is
    /// then removed.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.flush()?;
        link_temps(&mut [(&self.file, &mut self.tmp)]).map_err(|(_, e)| e)?;
        self.tmp.dir().rename_all(&[(self.tmp.name().to_string(), self.name.clone())]).map_err(|(_, e)| e)?;
        self.tmp.renamed();
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}
