//! Surviving SIGBUS on `--shm-path` buffer files (docs/DESIGN.md#hostile-memory).
//!
//! A memfd is sealed against shrinking, a file is not: if an application truncates the
//! buffer file it was given, a daemon access past the new end raises SIGBUS. Streams check
//! the file size before every access (`Stream::shm_intact`, [`crate::ops::stream`]); this
//! module closes the window left between that check and the access. The daemon registers
//! the address range of every file-backed mapping; its SIGBUS handler, for a fault inside
//! a registered range, maps a private zero page over the faulting page (`MAP_FIXED`: the
//! range stays mapped, the access is retried and reads zeros, a zero byte 0 being "not
//! committed" to every reader) and counts it ([`faults`]); the next size check then
//! retires the stream. A fault anywhere else gets the default action, as without this
//! handler. Like LTTng's consumer, the daemon never dies of a shrunk buffer file.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

const SLOTS: usize = 4096;

#[allow(clippy::declare_interior_mutable_const)]
const FREE: AtomicUsize = AtomicUsize::new(0);
/// A slot being registered: its length is not written yet (no mapping starts at 1).
const CLAIMED: usize = 1;
/// Registered ranges: start address (0 = free slot, [`CLAIMED`]) and length in bytes.
static STARTS: [AtomicUsize; SLOTS] = [FREE; SLOTS];
static LENS: [AtomicUsize; SLOTS] = [FREE; SLOTS];
static FAULTS: AtomicU64 = AtomicU64::new(0);
static INSTALL: Once = Once::new();

/// A registered range; unregistered on drop (drop it before or after unmapping: either
/// way no access to the range happens in between).
#[derive(Debug)]
pub struct Guard(usize);

impl Drop for Guard {
    fn drop(&mut self) {
        STARTS[self.0].store(0, Ordering::Release);
    }
}

/// SIGBUS faults absorbed so far (over the process's life).
pub fn faults() -> u64 {
    FAULTS.load(Ordering::Relaxed)
}

/// Registers the mapping `[start, start + len)` (installs the handler on first use).
/// `None` when every slot is taken (the mapping is then only protected by the size checks).
pub fn register(start: *const u8, len: usize) -> Option<Guard> {
    INSTALL.call_once(install);
    if (start as usize) < 2 {
        return None;
    }
    for (i, s) in STARTS.iter().enumerate() {
        // Claim the slot first (CLAIMED matches no address), then the length, then the
        // start with Release: the handler reads the start with Acquire and only then the
        // length, and a concurrent registration cannot overwrite a claimed slot's length.
        if s.load(Ordering::Relaxed) == 0 && s.compare_exchange(0, CLAIMED, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            LENS[i].store(len, Ordering::Relaxed);
            s.store(start as usize, Ordering::Release);
            return Some(Guard(i));
        }
    }
    None
}

fn install() {
    // SAFETY: installs a handler that only reads atomics and calls mmap(2)/signal(2).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
    }
}

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers; si_addr is the
    // faulting address for SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    for (i, s) in STARTS.iter().enumerate() {
        let start = s.load(Ordering::Acquire);
        if start > CLAIMED && addr >= start && addr - start < LENS[i].load(Ordering::Relaxed) {
            let page = addr & !4095;
            // SAFETY: the page lies inside a live mapping this process registered; it is
            // replaced in place by private zeroed memory (never unmapped), which the
            // mapping's owner unmaps with the rest later.
            let r = unsafe {
                libc::mmap(
                    page as *mut libc::c_void,
                    4096,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if r != libc::MAP_FAILED {
                FAULTS.fetch_add(1, Ordering::Relaxed);
                return;
            }
            break;
        }
    }
    // Not ours: the default action, taken when the faulting access is retried.
    // SAFETY: signal(2) is async-signal-safe.
    unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shrunk_registered_file_reads_zeros_instead_of_killing_the_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("buf");
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        f.set_len(3 * 4096).unwrap();
        let map = memmap2::MmapOptions::new().len(3 * 4096).map_raw(&f).unwrap();
        // SAFETY: in bounds of the mapping.
        unsafe { map.as_mut_ptr().add(2 * 4096).write_volatile(7) };
        let guard = register(map.as_ptr(), map.len()).unwrap();
        f.set_len(4096).unwrap();
        let before = faults();
        // SAFETY: in bounds of the mapping; the page is past the file's end now.
        let v = unsafe { map.as_ptr().add(2 * 4096 + 5).read_volatile() };
        assert_eq!(v, 0);
        assert_eq!(faults(), before + 1);
        drop(guard);
    }

    #[test]
    fn concurrent_registrations_keep_their_own_lengths() {
        // Each thread registers ranges of its own length; a slot's length must be the one
        // registered with its start (a registration that stored the length before claiming
        // the slot would let a losing racer overwrite the winner's).
        let threads: Vec<_> = (1..=4usize)
            .map(|t| {
                std::thread::spawn(move || {
                    for k in 0..200usize {
                        let start = (t << 40) + (k << 20);
                        let g = register(start as *const u8, t * 4096).unwrap();
                        assert_eq!(STARTS[g.0].load(Ordering::Acquire), start);
                        assert_eq!(LENS[g.0].load(Ordering::Relaxed), t * 4096);
                        drop(g);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
