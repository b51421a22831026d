//! The runtime's descriptors: kept out of the program's way, and never closed once they
//! are no longer the runtime's.
//!
//! A program may own every descriptor of its process: daemons close `3..1023` (or all of
//! them) at start, and then expect `open` to return 3. The runtime holds **one descriptor
//! per daemon it is registered with** (the connection, which its runtime thread reads and
//! the senders write under a lock), at [`floor`] or above (`F_DUPFD_CLOEXEC`), high enough
//! that such a loop and the program's next `open`s never meet it, and remembers what it is
//! (`st_dev`, `st_ino`). Before every use and before closing it, it checks with `fstat`
//! that the number still names that object: a descriptor the program closed (and perhaps
//! reused) is **abandoned**, never read, written or closed. (With a soft `RLIMIT_NOFILE`
//! of 1024 or less the floor is just under the limit, within such a loop's reach: the
//! connection is then lost and made again, but the program's descriptors stay untouched.)
//!
//! **A low limit.** Under a soft `RLIMIT_NOFILE` of [`MIN_NOFILE`] the runtime opens no
//! descriptor at all and the process runs untraced (`UST_DEBUG=1` says so): at `ulimit -n
//! 16` one descriptor is a sixteenth of the program's. The limit is looked at again before
//! every connection attempt, so a program that raises it is traced from then on. At or
//! above it, when every number from the floor to the limit is taken, the runtime does not
//! connect either (it would otherwise keep the number the program's next `open` gets).
//!
//! Files the runtime reads (`/proc/self/comm` before it connects, the ELF files of the
//! state dump) are opened the same way ([`open`]) and closed at once: one more descriptor
//! for the time of a read.
//!
//! Descriptors received from the daemon (the buffers' memfds, `SCM_RIGHTS`) are mapped
//! and closed at once; their identity is taken on receipt and checked before the close.
//! What cannot be excluded without interposing `close(2)` (LTTng-UST's `liblttng-ust-fd`
//! does that): the program closing and reusing a number in the microseconds between
//! `connect`/`recvmsg` returning it and the runtime's `fstat`.

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;

use super::debug;

/// Descriptors of the runtime start at 1024 (above `FD_SETSIZE`, where `select` users and
/// "close 3..1023" loops never look) when `RLIMIT_NOFILE` allows, else at the top of the
/// allowed range minus [`HEADROOM`].
pub const PREFERRED_FLOOR: u64 = 1024;
/// Room kept under the soft descriptor limit when the floor has to be below
/// [`PREFERRED_FLOOR`].
pub const HEADROOM: u64 = 16;
/// The lowest soft `RLIMIT_NOFILE` at which the runtime takes a descriptor: under it the
/// process runs untraced (see the module docs). 64 leaves the program at least 47
/// descriptors under the floor (`64 - HEADROOM - 1`, and the standard three among them).
pub const MIN_NOFILE: u64 = 64;

/// The soft `RLIMIT_NOFILE` (`None` when `getrlimit` fails).
fn soft_limit() -> Option<u64> {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct passed; no other effect.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0).then_some(r.rlim_cur)
}

/// `Some(soft limit)` when the soft `RLIMIT_NOFILE` is under [`MIN_NOFILE`]: the runtime
/// must not take a descriptor now.
pub(crate) fn too_few_descriptors() -> Option<u64> {
    soft_limit().filter(|&soft| soft < MIN_NOFILE)
}

/// The lowest number the runtime moves its descriptors to (see [`PREFERRED_FLOOR`]).
pub(crate) fn floor() -> RawFd {
    let soft = soft_limit().unwrap_or(PREFERRED_FLOOR);
    let f = if soft > PREFERRED_FLOOR + HEADROOM { PREFERRED_FLOOR } else { soft.saturating_sub(HEADROOM).max(3) };
    f.min(i32::MAX as u64) as RawFd
}

/// `((st_dev, st_ino), st_mode)` of what `fd` names now, `None` when it names nothing.
fn stat(fd: RawFd) -> Option<((u64, u64), libc::mode_t)> {
    // SAFETY: a zeroed `struct stat` is a valid value (plain integers).
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes only the struct passed; any descriptor number is valid input
    // (a closed one gives EBADF).
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    Some(((st.st_dev, st.st_ino), st.st_mode))
}

/// `(st_dev, st_ino)` of what `fd` names now, `None` when it names nothing.
fn identity(fd: RawFd) -> Option<(u64, u64)> {
    stat(fd).map(|(id, _)| id)
}

/// A descriptor of the runtime's, with what it named when the runtime got it.
#[derive(Debug)]
pub(crate) struct Own {
    fd: RawFd,
    id: (u64, u64),
}

impl Own {
    /// Takes `fd` (just returned by the kernel, naming an object of type `kind`, an
    /// `S_IF*` constant), moved to [`floor`] or above when it is below: a copy is made
    /// there and the low number closed, so the program's next `open` gets it back. `None`
    /// when `fd` no longer names such an object (the program closed it, and maybe reused
    /// the number, in between: it is then abandoned, not closed), or when no number is
    /// free from the floor up (then it is closed: the runtime keeps none of the program's
    /// low numbers).
    pub(crate) fn take(fd: OwnedFd, kind: libc::mode_t) -> Option<Own> {
        let raw = fd.into_raw_fd();
        let (id, mode) = stat(raw)?;
        if mode & libc::S_IFMT != kind {
            return None;
        }
        let floor = floor();
        if raw >= floor {
            return Some(Own { fd: raw, id });
        }
        // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor; it touches no memory.
        let high = unsafe { libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, floor) };
        let low = Own { fd: raw, id };
        if high < 0 {
            debug!("no free descriptor from {floor} up to the RLIMIT_NOFILE soft limit: the runtime takes none of the program's lower ones");
            return None;
        }
        drop(low);
        match identity(high) {
            Some(hid) if hid == id => Some(Own { fd: high, id }),
            _ => None,
        }
    }

    /// The descriptor, if it still names what the runtime got (one `fstat`).
    pub(crate) fn check(&self) -> Option<RawFd> {
        (identity(self.fd) == Some(self.id)).then_some(self.fd)
    }

    /// `(number, (st_dev, st_ino))`, for [`close_inherited`].
    pub(crate) fn raw(&self) -> (RawFd, (u64, u64)) {
        (self.fd, self.id)
    }
}

impl Drop for Own {
    /// Closes the descriptor if it is still the runtime's; otherwise abandons the number
    /// (the program closed it, and whatever it names now is not ours).
    fn drop(&mut self) {
        if identity(self.fd) == Some(self.id) {
            // SAFETY: the number names the object the runtime opened (checked just above)
            // and nothing of the runtime uses it after this.
            unsafe { libc::close(self.fd) };
        } else {
            debug!("descriptor {} is no longer the runtime's (the program closed it): left alone", self.fd);
        }
    }
}

/// Closes raw descriptor `fd` in a fork child if it still names `id` (async-signal-safe:
/// `fstat` and `close` only).
pub(crate) fn close_inherited(fd: RawFd, id: (u64, u64)) {
    if identity(fd) == Some(id) {
        // SAFETY: the descriptor is the parent's daemon connection, inherited by the fork
        // and still naming that socket; nothing in the child uses it.
        unsafe { libc::close(fd) };
    }
}

/// An object over a descriptor of the runtime's ([`Own`]): the object is handed out only
/// while the number still names what the runtime got, and it never closes the number
/// itself (only `Own` does, identity-checked).
#[derive(Debug)]
pub(crate) struct Held<T> {
    own: Own,
    /// Over `own`'s number; never dropped.
    obj: std::mem::ManuallyDrop<T>,
}

impl<T: FromRawFd> Held<T> {
    fn new(fd: OwnedFd, kind: libc::mode_t) -> Option<Held<T>> {
        let own = Own::take(fd, kind)?;
        // SAFETY: `own` holds the open descriptor under this number; the object is never
        // dropped (ManuallyDrop), so the number is closed only by `own`, once.
        let obj = std::mem::ManuallyDrop::new(unsafe { T::from_raw_fd(own.fd) });
        Some(Held { own, obj })
    }

    /// The object, if its number still names what the runtime got (one `fstat`).
    pub(crate) fn get(&self) -> Option<&T> {
        self.own.check().map(|_| &*self.obj)
    }

    /// `(number, (st_dev, st_ino))`, for [`close_inherited`].
    pub(crate) fn raw(&self) -> (RawFd, (u64, u64)) {
        self.own.raw()
    }
}

impl<T> AsRawFd for Held<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.own.fd
    }
}

/// The daemon connection, as the runtime holds it.
pub(crate) type Conn = Held<UnixStream>;

impl Held<UnixStream> {
    /// Connects to the Unix socket at `path`. `Ok(None)`: connected, but the descriptor was
    /// taken from under the runtime at once (abandoned), or had no room above the floor
    /// (closed).
    ///
    /// # Errors
    /// The `connect` error.
    pub(crate) fn connect(path: &Path) -> std::io::Result<Option<Conn>> {
        Ok(Held::new(OwnedFd::from(UnixStream::connect(path)?), libc::S_IFSOCK))
    }
}

/// Opens the regular file at `path` read-only, as a descriptor of the runtime's (the
/// runtime thread reads `/proc/self/comm` and ELF files while the program runs).
pub(crate) fn open(path: &Path) -> Option<Held<std::fs::File>> {
    let f = std::fs::File::open(path).ok()?;
    Held::new(OwnedFd::from(f), libc::S_IFREG)
}

/// The contents of the small text file at `path` (`/proc/self/comm`), read through
/// [`open`].
pub(crate) fn read_to_string(path: &Path) -> Option<String> {
    use std::io::Read;
    let f = open(path)?;
    let mut s = String::new();
    let mut r: &std::fs::File = f.get()?;
    r.read_to_string(&mut s).ok()?;
    Some(s)
}

/// A descriptor received from the daemon, with its identity taken on receipt (right after
/// `recvmsg`, [`Received::take_all`]): closed only if it still names that object.
pub(crate) struct Received(Own);

impl Received {
    /// Takes a just-received descriptor. `None` when the number names nothing any more, or
    /// names something that is not a regular file (buffer memory is a memfd or a
    /// `--shm-path` file): then the program closed it and opened something of its own
    /// under that number, which is left alone.
    pub(crate) fn new(fd: OwnedFd) -> Option<Received> {
        let raw = fd.into_raw_fd();
        match stat(raw) {
            Some((id, mode)) if mode & libc::S_IFMT == libc::S_IFREG => Some(Received(Own { fd: raw, id })),
            _ => None,
        }
    }

    /// Every descriptor of a message, taken at once; `None` in a slot whose number was
    /// no longer the daemon's.
    pub(crate) fn take_all(fds: Vec<OwnedFd>) -> Vec<Option<Received>> {
        fds.into_iter().map(Received::new).collect()
    }

    /// The raw number, valid while `self` lives (for `mmap`).
    pub(crate) fn raw(&self) -> Option<RawFd> {
        self.0.check()
    }

    /// Gives the number up without closing it: for memory that turned out not to be a
    /// buffer, which may be a file of the program's that took the number between the
    /// receipt and the check (a leaked descriptor is harmless; closing the program's is not).
    pub(crate) fn abandon(self) {
        std::mem::forget(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_move_above_the_floor_and_a_reused_number_is_never_closed() {
        let (a, _b) = UnixStream::pair().unwrap();
        let low = a.as_raw_fd();
        let c: Conn = Held::new(OwnedFd::from(a), libc::S_IFSOCK).unwrap();
        assert!(c.as_raw_fd() >= floor(), "{} below {}", c.as_raw_fd(), floor());
        // The low number was given back.
        assert!(identity(low).is_none() || low >= floor());
        assert!(c.get().is_some());
        assert!(Held::<UnixStream>::new(OwnedFd::from(std::fs::File::open("/proc/self/exe").unwrap()), libc::S_IFSOCK).is_none(), "a file is not a socket");
        assert_eq!(read_to_string(Path::new("/proc/self/comm")).map(|s| !s.is_empty()), Some(true));

        // The "program" closes the runtime's number and opens something that gets it.
        let fd = c.as_raw_fd();
        // SAFETY: test: closes the descriptor `c` holds, as a hostile program would.
        unsafe { libc::close(fd) };
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        let ffd = f.as_raw_fd();
        // SAFETY: dup2 onto the number the runtime had.
        assert_eq!(unsafe { libc::dup2(ffd, fd) }, fd);
        assert!(c.get().is_none(), "the number names the program's file now");
        drop(c);
        // Still open: the runtime abandoned the number instead of closing it.
        assert!(identity(fd).is_some());
        // SAFETY: test cleanup of the dup2 above.
        unsafe { libc::close(fd) };
    }
}
