//! The table of channels this process writes: 64 slots, one per bit of a call site's mask.
//!
//! A slot holds an [`AtomicPtr`] to a [`Channel`] (the mapped per-CPU buffers of one
//! session channel) or null. The runtime thread installs a channel with a `Release` store
//! and removes it by storing null; emitters load the pointer with `Acquire` and use it
//! without any lock or reference count. That is safe because a channel, once installed, is
//! never freed while the process may still run emitters (see [`retire`]): its memory is
//! leaked on purpose (a few hundred bytes per channel per daemon session).

use std::sync::atomic::{AtomicPtr, Ordering};

use ringbuffer::Buffer;
use ust_core::clock::TraceClock;
use ust_core::protocol::MAX_CHANNELS;

/// One session channel as this process sees it: one mapped ring buffer per possible CPU.
pub struct Channel {
    /// Per-CPU buffers, CPU 0 first (never empty).
    pub(crate) buffers: Box<[Buffer]>,
    /// The clock of every record of this channel (the daemon's choice for the session).
    pub(crate) clock: TraceClock,
    /// Session name, for messages.
    pub(crate) session: String,
    /// Channel name, for messages.
    pub(crate) name: String,
    /// Context fields written after the event header of every record, in order.
    pub(crate) contexts: Box<[ust_core::context::ContextType]>,
    /// Their total size in bytes (precomputed: 0 when there is none).
    pub(crate) ctx_len: usize,
}

impl Channel {
    /// A channel over `buffers` (CPU 0 first) with context fields `contexts`.
    pub(crate) fn new(buffers: Box<[Buffer]>, session: String, name: String, contexts: Vec<ust_core::context::ContextType>) -> Channel {
        let ctx_len = ust_core::context::block_size(&contexts);
        Channel { buffers, clock: TraceClock::Monotonic, session, name, contexts: contexts.into_boxed_slice(), ctx_len }
    }

    /// The same channel recording with `clock`.
    pub(crate) fn with_clock(mut self, clock: TraceClock) -> Channel {
        self.clock = clock;
        self
    }

    /// The buffer for `cpu`; a CPU number past the buffer count (more CPUs online than the
    /// daemon allocated for) wraps around.
    #[inline(always)]
    pub(crate) fn buffer(&self, cpu: u32) -> &Buffer {
        let n = self.buffers.len();
        let i = cpu as usize;
        &self.buffers[if i < n { i } else { i % n }]
    }
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: AtomicPtr<Channel> = AtomicPtr::new(std::ptr::null_mut());

/// The slots. Index = bit of the call-site masks.
pub(crate) static CHANNELS: [AtomicPtr<Channel>; MAX_CHANNELS as usize] = [EMPTY; MAX_CHANNELS as usize];

/// The channel in `slot`, if any.
#[inline(always)]
pub(crate) fn get(slot: u32) -> Option<&'static Channel> {
    let p = CHANNELS.get(slot as usize)?.load(Ordering::Acquire);
    // SAFETY: a non-null pointer in the table came from `Box::leak` in `install` and is
    // never freed while emitters may run (`retire` keeps the allocation; only the fork
    // child, which has a single thread, frees them).
    unsafe { p.as_ref() }
}

/// Installs `ch` in `slot`. Returns the channel it replaced, already unlinked.
pub(crate) fn install(slot: u32, ch: Channel) -> Option<&'static Channel> {
    let p = Box::into_raw(Box::new(ch));
    let old = CHANNELS[slot as usize].swap(p, Ordering::AcqRel);
    // SAFETY: as in `get`.
    unsafe { old.as_ref() }
}

/// Unlinks the channel in `slot` (emitters that load the slot from now on see none).
pub(crate) fn take(slot: u32) -> Option<&'static Channel> {
    let old = CHANNELS.get(slot as usize)?.swap(std::ptr::null_mut(), Ordering::AcqRel);
    // SAFETY: as in `get`.
    unsafe { old.as_ref() }
}

/// Releases the shared memory of an unlinked channel while keeping its addresses valid:
/// every buffer mapping is replaced, in place and atomically, by private anonymous memory
/// (`mmap(MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS)` over it). An emitter that loaded the
/// channel before it was unlinked and is still writing finishes into that private memory
/// (its event is lost, as with any event racing a channel removal) instead of faulting,
/// and the daemon's memfd is no longer held by this process. The `Channel` struct itself
/// is leaked.
pub(crate) fn retire(ch: &'static Channel) {
    for b in ch.buffers.iter() {
        let map = b.map();
        // SAFETY: the range is exactly a live mapping owned by `b`, which is never unmapped
        // (the Channel is leaked); MAP_FIXED replaces it atomically, so at no instant is
        // the range unmapped, and the new pages are readable and writable like the old.
        unsafe {
            libc::mmap(
                map.as_mut_ptr().cast(),
                map.len(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
        }
    }
}

/// Unlinks every channel and retires it. Returns how many there were.
pub(crate) fn remove_all() -> usize {
    let mut n = 0;
    for slot in 0..MAX_CHANNELS {
        if let Some(ch) = take(slot) {
            retire(ch);
            n += 1;
        }
    }
    n
}

/// In a fork child (one thread, no emitter running): unlinks every channel and frees it,
/// unmapping the parent's buffers from the child.
pub(crate) fn drop_all_in_child() {
    for slot in CHANNELS.iter() {
        let p = slot.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            // SAFETY: the pointer came from `Box::into_raw` in `install`; in the fork
            // child only the forking thread exists, so no emitter can hold it.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}
