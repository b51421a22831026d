//! Reading the files of a trace, which may be hostile: regular files only, size-capped.

use std::path::Path;

/// Reads a file of a trace, which may be hostile: only a regular file (opened with
/// `O_NONBLOCK`, so a FIFO put in its place cannot block the reader, and checked with
/// `fstat`), and at most `max` bytes (a link to `/dev/zero` or a huge file cannot exhaust
/// memory).
///
/// # Errors
/// `InvalidData` when it is not a regular file or is larger than `max`; the I/O error
/// otherwise.
pub fn read_trace_file(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC).open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{} is not a regular file", path.display())));
    }
    if meta.len() > max {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{} is larger than {max} bytes", path.display())));
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    f.take(max).read_to_end(&mut out)?;
    Ok(out)
}

/// [`read_trace_file`] as UTF-8 text.
///
/// # Errors
/// As [`read_trace_file`]; `InvalidData` when the bytes are not UTF-8.
pub fn read_trace_text(path: &Path, max: u64) -> std::io::Result<String> {
    String::from_utf8(read_trace_file(path, max)?).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Largest metadata or maps file a reader takes (64 MiB).
pub const MAX_TEXT_FILE: u64 = 64 << 20;
/// Largest stream file a reader takes whole into memory (16 GiB: bounded, not a guess at
/// what fits).
pub const MAX_STREAM_FILE: u64 = 16 << 30;
