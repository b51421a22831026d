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
        let f = std::fs::File::open(path).map_err(io)?;
        let len = f.metadata().map_err(io)?.len();
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
        if offset.checked_add(len).map_or(true, |end| end > map.len()) {
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
