//! Shared memory for ring buffers, both ends: the daemon creates a buffer's memory
//! ([`create_memfd`], or [`create_file`] for `--shm-path`), and the application maps what it
//! is given ([`open_received`]).
//!
//! A buffer is backed before it is formatted: the whole file is allocated with
//! `fallocate(2)` (a `memfd` is `tmpfs`, which supports it), so a buffer that the memory or
//! file system cannot hold is refused here, at creation, with `ENOSPC`, instead of
//! delivering `SIGBUS` to whichever process — the traced application — first writes past
//! what could be allocated (a sparse file gets its pages at first touch).
//!
//! A `memfd` is then sealed (`F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`): no process can
//! change its size, so no mapping of it can fault. A file cannot be sealed; its users check
//! its size before they touch it (the daemon's `Stream::shm_intact`) and survive `SIGBUS`
//! (the daemon's `sigbus` module).

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::Path;

use crate::{Buffer, BufferConfig, Reader, Writer};

/// Errors while creating or mapping a buffer's memory.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// A system call or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done (`memfd_create`, `fallocate`, `mmap`, …, with the path).
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The memory or file system cannot back the buffer (`fallocate` said `ENOSPC`).
    #[error("{what}: not enough space to back {bytes} bytes of ring buffer ({source}); use smaller or fewer sub-buffers, or a larger file system")]
    NoSpace {
        /// What was being backed.
        what: String,
        /// The size asked for.
        bytes: u64,
        /// The error.
        source: std::io::Error,
    },
    /// The ring buffer refused the geometry or the memory.
    #[error("buffer layout: {0}")]
    Layout(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ShmError {
    let what = what.into();
    move |source| ShmError::Io { what, source }
}

/// Allocates every byte of `file` (`fallocate(2)`, mode 0: the file is at least `size`
/// bytes afterwards, and every page of it exists).
fn back(file: &File, size: u64, what: &str) -> Result<(), ShmError> {
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, size) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::NOSPC || e == rustix::io::Errno::NOMEM => {
            Err(ShmError::NoSpace { what: what.to_string(), bytes: size, source: e.into() })
        }
        Err(e) => Err(ShmError::Io { what: format!("fallocate {what}"), source: e.into() }),
    }
}

/// Creates one buffer in a new `memfd` named `name` (close-on-exec): sized to
/// [`BufferConfig::file_size`], backed, sealed, mapped shared and formatted with
/// [`Buffer::create`]. Returns the creator's handle, the buffer's [`Reader`] (the daemon
/// reads what it made), and the descriptor to hand to the application.
///
/// # Errors
/// [`ShmError::NoSpace`] when the memory cannot back the buffer; [`ShmError::Io`] when
/// `memfd_create`, `fallocate`, `fcntl(F_ADD_SEALS)` or `mmap` fail; [`ShmError::Layout`]
/// when the ring buffer refuses `cfg`.
pub fn create_memfd(cfg: &BufferConfig, name: &str) -> Result<(Reader, OwnedFd), ShmError> {
    create_memfd_as(cfg, name, Backing::Preallocate)
}

/// When a buffer's pages are allocated (LTTng 2.15's `--buffer-preallocation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// Every page now (`fallocate`): what [`create_memfd`] and [`create_file`] do.
    Preallocate,
    /// Only the pages [`Buffer::create`] writes (the control page, and whatever the
    /// geometry puts next to it); the others when a writer first touches them. The memory
    /// is not reserved: a writer faulting a page in when none can be had gets `SIGBUS`.
    OnDemand,
}

/// [`create_memfd`] with the pages allocated as `backing` says.
///
/// # Errors
/// As [`create_memfd`].
pub fn create_memfd_as(cfg: &BufferConfig, name: &str, backing: Backing) -> Result<(Reader, OwnedFd), ShmError> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let size = cfg.file_size().map_err(|e| ShmError::Layout(e.to_string()))?;
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
        .map_err(|e| ShmError::Io { what: "memfd_create".into(), source: e.into() })?;
    let file = File::from(fd);
    match backing {
        Backing::Preallocate => back(&file, size as u64, &format!("memfd {name}"))?,
        Backing::OnDemand => file.set_len(size as u64).map_err(io(format!("ftruncate memfd {name}")))?,
    }
    rustix::fs::fcntl_add_seals(&file, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
        .map_err(|e| ShmError::Io { what: "F_ADD_SEALS".into(), source: e.into() })?;
    let map = memmap2::MmapOptions::new().len(size).map_raw(&file).map_err(io("mmap"))?;
    let buffer = Buffer::create(map, cfg).map_err(|e| ShmError::Layout(e.to_string()))?;
    Ok((buffer.into_reader(), OwnedFd::from(file)))
}

/// Like [`create_memfd`], but the buffer is the file `path` (`--shm-path`): created (it
/// must not exist), mode 0600, close-on-exec, backed, mapped shared and formatted. Returns
/// the creator's handle (the [`Reader`]), a descriptor for the application, and the file (to check its size
/// later: a file cannot be sealed). A file that cannot be made a buffer is removed again.
///
/// # Errors
/// [`ShmError::NoSpace`] when the file system cannot hold the buffer; [`ShmError::Io`]
/// when creating, backing or mapping the file fails; [`ShmError::Layout`] when the ring
/// buffer refuses `cfg`.
pub fn create_file(cfg: &BufferConfig, path: &Path) -> Result<(Reader, OwnedFd, File), ShmError> {
    create_file_as(cfg, path, Backing::Preallocate)
}

/// [`create_file`] with the pages allocated as `backing` says.
///
/// # Errors
/// As [`create_file`].
pub fn create_file_as(cfg: &BufferConfig, path: &Path, backing: Backing) -> Result<(Reader, OwnedFd, File), ShmError> {
    use std::os::unix::fs::OpenOptionsExt;
    let size = cfg.file_size().map_err(|e| ShmError::Layout(e.to_string()))?;
    let what = || format!("buffer file {}", path.display());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(io(format!("creating {}", what())))?;
    // A file that cannot become a buffer is removed again: nothing half-made is left in
    // the shm directory (backed files hold real memory on tmpfs).
    let made = (|| {
        match backing {
            Backing::Preallocate => back(&file, size as u64, &what())?,
            Backing::OnDemand => file.set_len(size as u64).map_err(io(format!("sizing {}", what())))?,
        }
        let map = memmap2::MmapOptions::new().len(size).map_raw(&file).map_err(io(format!("mapping {}", what())))?;
        let buffer = Buffer::create(map, cfg).map_err(|e| ShmError::Layout(e.to_string()))?;
        let fd = OwnedFd::from(file.try_clone().map_err(io(format!("duplicating {}", what())))?);
        Ok((buffer.into_reader(), fd))
    })();
    match made {
        Ok((buffer, fd)) => Ok((buffer, fd, file)),
        Err(e) => {
            let _ = std::fs::remove_file(path);
            Err(e)
        }
    }
}

/// Application side: maps the buffer memory named by `fd` (shared, its whole length) and
/// opens it with [`Buffer::open`], which checks every offset of the layout against the
/// mapping, as a [`Writer`]. The descriptor is only borrowed (the caller decides when, and whether, to close
/// it); the mapping keeps the memory.
///
/// # Errors
/// [`ShmError::Io`] when the memory cannot be mapped; [`ShmError::Layout`] when it is not a
/// valid ring buffer.
pub fn open_received(fd: std::os::fd::BorrowedFd<'_>) -> Result<Writer, ShmError> {
    use std::os::fd::AsRawFd;
    let map = memmap2::MmapOptions::new().map_raw(fd.as_raw_fd()).map_err(io("mmap"))?;
    Buffer::open(map).map(Buffer::into_writer).map_err(|e| ShmError::Layout(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> BufferConfig {
        BufferConfig { subbuf_size: 4096, num_subbuf: 4, mode: crate::Mode::Discard, header_size: 64, stream: crate::StreamIdentity::default() }
    }

    #[test]
    fn memfd_buffers_are_sealed_and_open_on_the_other_end() {
        let (_daemon, fd) = create_memfd(&cfg(), "ust-test").unwrap();
        let seals = rustix::fs::fcntl_get_seals(&fd).unwrap();
        assert!(seals.contains(rustix::fs::SealFlags::SHRINK | rustix::fs::SealFlags::GROW | rustix::fs::SealFlags::SEAL));
        let app = open_received(std::os::fd::AsFd::as_fd(&fd)).unwrap();
        assert_eq!(app.config().subbuf_size, 4096);
    }

    #[test]
    fn file_buffers_are_backed_and_an_existing_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("buf");
        let (_b, _fd, file) = create_file(&cfg(), &path).unwrap();
        let st = rustix::fs::fstat(&file).unwrap();
        assert!(st.st_blocks as u64 * 512 >= st.st_size as u64, "every byte allocated: {} blocks for {} bytes", st.st_blocks, st.st_size);
        assert!(matches!(create_file(&cfg(), &path), Err(ShmError::Io { .. })));
    }

    #[test]
    fn on_demand_buffers_hold_only_the_pages_written() {
        let cfg = BufferConfig { subbuf_size: 65536, num_subbuf: 8, ..cfg() };
        let (r, fd) = create_memfd_as(&cfg, "ust-test", Backing::OnDemand).unwrap();
        let (_p, pfd) = create_memfd(&cfg, "ust-test").unwrap();
        let blocks = |fd: &OwnedFd| rustix::fs::fstat(fd).unwrap().st_blocks as u64 * 512;
        let size = r.config().file_size().unwrap() as u64;
        assert!(blocks(&pfd) >= size, "preallocated: {} of {size}", blocks(&pfd));
        assert_eq!(blocks(&fd), 4096, "on demand: the control page only, of {size} bytes");
        let mut app = open_received(std::os::fd::AsFd::as_fd(&fd)).unwrap();
        assert_eq!(app.config().num_subbuf, 8);
        app.claim_writers(crate::percpu::Writers::Atomic);
        let _ = r.counters();
        assert_eq!(blocks(&fd), 4096, "opened by the writer, claimed and read: still the control page only");
    }

    #[test]
    fn garbage_is_not_a_buffer() {
        let fd = rustix::fs::memfd_create("junk", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, 65536).unwrap();
        rustix::io::write(&fd, &[0xffu8; 512]).unwrap();
        assert!(matches!(open_received(std::os::fd::AsFd::as_fd(&fd)), Err(ShmError::Layout(_))));
    }
}
