//! The table of channels this process writes: 64 slots, one per bit of a call site's mask.
//!
//! A slot is a [`Published`] [`Channel`] (the mapped per-CPU buffers of one session
//! channel) or nothing. The runtime thread installs a channel and removes it; emitters load
//! it and use it without any lock or reference count. A channel, once installed, is never
//! freed (see [`retire`]): its descriptor is leaked on purpose (a few hundred bytes per
//! channel per daemon session).

use std::sync::atomic::{AtomicPtr, Ordering};

use ringbuffer::Writer;
use ust_core::clock::TraceClock;
use ust_core::protocol::MAX_CHANNELS;

use crate::published::Published;

/// One session channel as this process sees it: one mapped ring buffer per possible CPU.
pub struct Channel {
    /// Per-CPU buffers (this process's writer handles), CPU 0 first (never empty).
    pub(crate) buffers: Box<[Writer]>,
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
    /// A per-UID channel's event ids ([`crate::shared_ids`]); `None` for a per-PID
    /// channel, whose records carry the site's own id.
    pub(crate) shared_ids: Option<Box<crate::shared_ids::SharedIds>>,
    /// Blocking mode (`--blocking-timeout`, in µs): 0 discards when the buffer is full,
    /// `u64::MAX` waits for room without limit, else waits at most that long
    /// ([`crate::emit`]).
    pub(crate) blocking_us: u64,
    /// No shared ids, no context and no blocking: the emit path's short case, decided by
    /// one test ([`Channel::new`] and each `with_*` keep it current).
    pub(crate) plain: bool,
    /// A map slot ([`Channel::new_map`]): events are counted there, not recorded; then
    /// `buffers` is empty and `shared_ids` holds each event's key index + 1.
    pub(crate) map: Option<Box<MapSlot>>,
}

/// The counter map of a map slot (LTTng 2.16's `incr-map-value` action).
pub(crate) struct MapSlot {
    /// The mapped counters (shared with the daemon).
    pub(crate) counters: ringbuffer::counters::Counters,
    /// The daemon's id of the map: slots with one id share counters.
    pub(crate) map_id: u32,
    /// `per-event` update policy: one increment per key per event across slots.
    pub(crate) per_event: bool,
}

impl Channel {
    /// A channel over `buffers` (CPU 0 first) with context fields `contexts`, recording
    /// with `clock`.
    ///
    /// Claims the writer mode of each buffer ([`Writer::claim_writers`]): per-CPU (rseq,
    /// no `lock` prefix on the reservation, the TSC read unordered inside the section)
    /// when the clock is the TSC, this process has rseq ([`ringbuffer::percpu::available`],
    /// not `UST_RSEQ=0`) and there is a buffer for every possible CPU (so `buffer(cpu)`
    /// never wraps: two CPUs sharing a buffer would defeat the per-CPU exclusion); the
    /// compare-and-swap writers otherwise. With `CLOCK_MONOTONIC` the per-CPU section saves
    /// nothing (the vDSO read is ordered anyway) and measured 3–5 ns slower per event than
    /// the compare-and-swap (BENCHMARKS.md), so those channels keep it.
    pub(crate) fn new(mut buffers: Box<[Writer]>, session: String, name: String, contexts: Vec<ust_core::context::ContextType>, clock: TraceClock) -> Channel {
        use ringbuffer::percpu::{self, Writers};
        use ringbuffer::Clock as _;
        let per_cpu = clock.tsc().is_some() && percpu::available() && buffers.len() >= crate::cpu::possible() as usize;
        for (i, b) in buffers.iter_mut().enumerate() {
            b.claim_writers(if per_cpu { Writers::PerCpu(i as u32) } else { Writers::Atomic });
        }
        let ctx_len = ust_core::context::block_size(&contexts);
        Channel {
            buffers,
            clock,
            session,
            name,
            contexts: contexts.into_boxed_slice(),
            ctx_len,
            shared_ids: None,
            blocking_us: 0,
            plain: ctx_len == 0,
            map: None,
        }
    }

    /// A map slot over `counters`: no buffer; each event's key comes in the shared-ids
    /// table (index + 1, 0 = none). Never plain, so the emit path's short cases skip it.
    pub(crate) fn new_map(counters: ringbuffer::counters::Counters, session: String, name: String, map_id: u32, per_event: bool) -> Channel {
        Channel {
            buffers: Box::new([]),
            clock: TraceClock::Monotonic,
            session,
            name,
            contexts: Box::new([]),
            ctx_len: 0,
            shared_ids: Some(Box::new(crate::shared_ids::SharedIds::new())),
            blocking_us: 0,
            plain: false,
            map: Some(Box::new(MapSlot { counters, map_id, per_event })),
        }
    }

    /// The same channel as a per-UID one: records take the ids the daemon sends.
    pub(crate) fn with_shared_ids(mut self) -> Channel {
        self.shared_ids = Some(Box::new(crate::shared_ids::SharedIds::new()));
        self.plain = false;
        self
    }

    /// The same channel in blocking mode with a timeout of `us` µs (see
    /// [`Channel::blocking_us`]).
    pub(crate) fn with_blocking(mut self, us: u64) -> Channel {
        self.blocking_us = us;
        self.plain &= us == 0;
        self
    }

    /// The buffer for `cpu`; a CPU number past the buffer count (more CPUs online than the
    /// daemon allocated for) wraps around. Not for a map slot (no buffer): the emit path
    /// tests [`Channel::map`] first.
    #[inline(always)]
    pub(crate) fn buffer(&self, cpu: u32) -> &Writer {
        let n = self.buffers.len();
        let i = cpu as usize;
        &self.buffers[if i < n { i } else { i % n }]
    }
}

/// The 64 slots. Index = bit of the call-site masks.
pub(crate) type Table = [Published<Channel>; MAX_CHANNELS as usize];

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Published<Channel> = Published::empty();

/// This copy's own slots.
pub(crate) static OWN: Table = [EMPTY; MAX_CHANNELS as usize];

/// The slots this copy of the crate reads: its own ([`OWN`]); in a `dlopen`ed object
/// whose process already has a runtime, that runtime's table (see `runtime::process`), so
/// every copy of the crate in a process writes the same channels. Never null: it points to
/// [`OWN`] from the start (one load on the emit path, no test).
static TABLE: AtomicPtr<Table> = AtomicPtr::new(&OWN as *const Table as *mut Table);

/// The slots in use.
#[inline(always)]
pub(crate) fn table() -> &'static Table {
    // SAFETY: `TABLE` holds the address of `OWN` or, after `use_table`, that of another
    // `&'static Table`: never null, never freed; `Table` is `Sync` (atomic slots).
    unsafe { &*TABLE.load(Ordering::Acquire) }
}

/// Makes this copy read and write `t` (the process runtime's table) instead of its own.
/// Called once, from the constructor of a copy that joins another one, before any of its
/// sites can be enabled.
pub(crate) fn use_table(t: &'static Table) {
    TABLE.store(t as *const Table as *mut Table, Ordering::Release);
}

/// The channel in `slot`, if any.
#[inline(always)]
pub(crate) fn get(slot: u32) -> Option<&'static Channel> {
    table().get(slot as usize)?.get()
}

/// Installs `ch` in `slot`. Returns the channel it replaced, already unlinked.
pub(crate) fn install(slot: u32, ch: Channel) -> Option<&'static Channel> {
    table()[slot as usize].publish(ch)
}

/// Unlinks the channel in `slot` (emitters that load the slot from now on see none).
pub(crate) fn take(slot: u32) -> Option<&'static Channel> {
    table().get(slot as usize)?.take()
}

/// Releases the shared memory of an unlinked channel while keeping its addresses valid:
/// every buffer mapping is replaced, in place and atomically, by private anonymous memory
/// (`mmap(MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS)` over it). An emitter that loaded the
/// channel before it was unlinked and is still writing finishes into that private memory
/// (its event is lost, as with any event racing a channel removal) instead of faulting,
/// and the daemon's memfd is no longer held by this process. The `Channel` struct itself
/// is leaked.
pub(crate) fn retire(ch: &'static Channel) {
    if let Some(m) = &ch.map {
        m.counters.detach();
    }
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

/// In a fork child (one thread, no emitter running): unlinks every channel and releases
/// the parent's buffers from the child, as [`retire`] does (the descriptors stay leaked,
/// like every published value).
pub(crate) fn drop_all_in_child() {
    remove_all();
}
