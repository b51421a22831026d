//! Opening a trace directory: its `metadata` file and its data stream files (every regular
//! file but `metadata` and hidden ones; `index/` is not needed), each `mmap`ed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use crate::compiled::Compiled;
use crate::error::Error;
use crate::merge::Merged;
use crate::model::Trace;
use crate::reader::StreamIter;
use crate::stream::StreamDecoder;

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

/// One data stream file of a trace.
pub struct StreamFile {
    /// Path of the file.
    pub path: Arc<Path>,
    /// File name (the stream's name in dumps).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    pub(crate) data: Arc<FileData>,
}

/// An opened trace: its model and its stream files, ready to iterate.
pub struct CtfTrace {
    dir: PathBuf,
    pub(crate) cx: Arc<Compiled>,
    streams: Vec<StreamFile>,
}

impl CtfTrace {
    /// Opens the trace in directory `dir`: reads and compiles `dir/metadata` and maps every
    /// stream file (sorted by name).
    ///
    /// Errors: metadata errors; [`Error::ClockOverflow`] when a stream class's clock offset
    /// does not fit 64-bit nanoseconds (babeltrace2 refuses those traces too); I/O errors.
    pub fn open(dir: impl AsRef<Path>) -> Result<CtfTrace, Error> {
        let dir = dir.as_ref().to_owned();
        let meta_path = dir.join("metadata");
        let trace = crate::metadata::read_metadata(&meta_path)?;
        let cx = Arc::new(Compiled::new(trace, &meta_path)?);
        let io = |source| Error::Io { path: dir.clone(), source };
        let mut names = Vec::new();
        for e in std::fs::read_dir(&dir).map_err(io)? {
            let e = e.map_err(io)?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "metadata" || name.starts_with('.') || !e.file_type().map_err(io)?.is_file() {
                continue;
            }
            names.push(name);
        }
        names.sort();
        let mut streams = Vec::with_capacity(names.len());
        for name in names {
            let path: Arc<Path> = dir.join(&name).into();
            let data = Arc::new(FileData::open(&path)?);
            streams.push(StreamFile { size: data.len() as u64, path, name, data });
        }
        Ok(CtfTrace { dir, cx, streams })
    }

    /// The trace directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The trace model (environment, clocks, stream and event classes).
    pub fn metadata(&self) -> &Trace {
        &self.cx.trace
    }

    /// The stream files, sorted by name.
    pub fn streams(&self) -> &[StreamFile] {
        &self.streams
    }

    pub(crate) fn decoder(&self, i: usize) -> StreamDecoder {
        let s = &self.streams[i];
        StreamDecoder::new(self.cx.clone(), s.path.clone(), s.data.clone())
    }

    /// Iterates the messages of stream file `i` alone, in file order.
    pub fn stream(&self, i: usize) -> StreamIter<'_> {
        StreamIter::new(self, i)
    }

    /// Iterates the messages of every stream merged by time (ties: stream file order),
    /// decoding on the calling thread.
    pub fn messages(&self) -> Merged<'_> {
        Merged::new(self, false)
    }

    /// Like [`CtfTrace::messages`], with each stream decoded on a thread of its own and
    /// handed over in batches through bounded channels (memory: a few batches per stream).
    pub fn messages_parallel(&self) -> Merged<'_> {
        Merged::new(self, true)
    }
}
