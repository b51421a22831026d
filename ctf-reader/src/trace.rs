//! Opening a trace directory: its `metadata` file and its data stream files (every regular
//! file but `metadata` and hidden ones; `index/` is not needed), each `mmap`ed
//! ([`FileData`]). Iterating them is [`CtfTrace::stream`] (in `reader`) and
//! [`CtfTrace::messages`] (in `merge`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::compiled::Compiled;
use crate::error::Error;
use crate::files::FileData;
use crate::model::Trace;

/// One data stream file of a trace (cheap to clone: its data is shared).
#[derive(Clone)]
pub struct StreamFile {
    /// Path of the file.
    pub path: Arc<Path>,
    /// File name (the stream's name in dumps).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// Its index in [`CtfTrace::streams`] (a dense key for per-stream state).
    pub index: usize,
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
            streams.push(StreamFile { size: data.len() as u64, index: streams.len(), path, name, data });
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
}
