//! The bytes of a trace's stream files: each `mmap`ed read-only, its pages released once
//! decoded.

use std::path::Path;

use memmap2::Mmap;

use crate::error::Error;

/// The bytes of one stream file: a read-only map, or nothing for an empty file.
pub(crate) struct FileData {
    map: Option<Mmap>,
}

impl FileData {
    pub(crate) fn open(path: &Path) -> Result<FileData, Error> {
        let io = |source| Error::Io { path: path.to_owned(), source };
        let (f, len) = open_regular(path).map_err(io)?;
        if len == 0 {
            return Ok(FileData { map: None });
        }
        // SAFETY: the map is read-only and private to this reader; a trace file that another
        // process truncates under us is the one hazard of mapping files (SIGBUS), accepted as
        // every mmap-based trace reader (babeltrace2 included) accepts it. All reads of the
        // map are bounds-checked against its length.
        let map = unsafe { Mmap::map(&f) }.map_err(io)?;
        Ok(FileData { map: Some(map) })
    }

    /// Drops the resident pages of `len` bytes from `offset` (rounded out to whole pages)
    /// from this process; a later read of them reads the file again. Errors are ignored: the
    /// pages then just stay resident.
    pub(crate) fn release(&self, offset: usize, len: usize) {
        let Some(map) = &self.map else { return };
        if offset.checked_add(len).is_none_or(|end| end > map.len()) {
            return;
        }
        // SAFETY: the map is a private, read-only mapping of a file that this process never
        // writes: MADV_DONTNEED drops its pages, and the next access reads the same bytes
        // from the file again (madvise(2)), so every slice of it stays valid and unchanged
        // (the file changing under us is the one hazard of mapping it, accepted in `open`).
        let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len) };
    }

    /// The file's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    pub(crate) fn len(&self) -> usize {
        self.bytes().len()
    }
}

/// Opens `path` for reading if it is a regular file itself: not through a symbolic link
/// (`O_NOFOLLOW`: a link planted in a user's trace would have root read a file of root's),
/// and never blocking on what is not a file (`O_NONBLOCK`: a FIFO would block the open, a
/// device need not end), checked with `fstat` of what was opened, so no swap can come
/// between the look and the use. Returns the file and its length (bytes, from that
/// `fstat`).
///
/// # Errors
/// `InvalidData` naming what is in the way (a link, not a regular file); the system's
/// error.
pub(crate) fn open_regular(path: &Path) -> std::io::Result<(std::fs::File, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    let bad = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string());
    let f = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC).open(path) {
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(bad("a symbolic link (trace files are not read through links)")),
        r => r?,
    };
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(bad("not a regular file"));
    }
    Ok((f, m.len()))
}
