//! Lock-free per-CPU ring buffers in shared memory, in the line of LTTng-UST's ring buffer
//! (`libringbuffer`: frontend, backend and client).
//!
//! One [`Buffer`] is one per-CPU ring of one channel, living in one shared-memory file that
//! the daemon formats ([`Buffer::create`]) and that the application (writers) and the
//! daemon (reader) both map ([`Buffer::open`]). Each handle then takes its role: a
//! [`Writer`] ([`Buffer::into_writer`]: reserve, commit, record) or a [`Reader`]
//! ([`Buffer::into_reader`]: get, copy and put sub-buffers, flush, snapshots, recovery);
//! in one process [`Buffer::split`] makes both. Sizes are powers
//! of two; positions are free-running 64-bit byte counters ([`position`]). Every counter a
//! writer touches lives in the file and is updated with atomics, so several threads of
//! several processes may write one buffer at once and the daemon may switch it
//! ([`Reader::flush`]).
//!
//! ```text
//!  Writer (application)                                  Reader (daemon)
//!  ────────────────────                                  ───────────────
//!  let _g = nesting::enter()?;        ┌──── shared file ────┐
//!  let mut r = w.reserve(..)?;    ──> │ write (CAS)          │
//!  w.slot(&mut r)[1..] = payload;     │ commit[i] (fetch_add)│ <── get_subbuf(): delivered[i] == (lap+1)*size?
//!  w.commit(.., r, byte0);        ──> │ delivered[i]         │     copy_subbuf(): memcpy out, validate later
//!                                     │ consumed             │ <── put_subbuf(): zero, consumed += size
//!                                     └──────────────────────┘     flush(): close the current packet
//! ```
//!
//! Two modes, as LTTng-UST's: [`Mode::Discard`] (drop new events while the ring is full)
//! and [`Mode::Overwrite`] (flight recorder: writers overwrite the oldest packet; the
//! reader swaps a spare sub-buffer in to read, see [`ids`]). A reader can also copy the
//! packets a buffer holds without consuming them ([`snapshot`]: `ust snapshot record`,
//! post-mortem dumps), and recover the committed prefix of a packet whose writer died
//! between reserve and commit ([`Reader::recover_packet`]).
//!
//! Modules by job: [`layout`] (the file and its offsets), [`atomics`] (the atomics trait
//! the algorithm is written over), [`position`] and [`ids`] (pure position and
//! sub-buffer-id arithmetic), `roles` (the [`Writer`] and [`Reader`] types), `frontend`
//! (reserve and switch), `commit`, `claim` (the writer mode), `reader` (get, copy, put,
//! and skip for a packet with scribbled control words), `flush`, [`snapshot`] (snapshots
//! and recovery), [`abandoned`] (packets of dead writers), [`reclaim`] (giving the memory of unneeded sub-buffers back,
//! measuring what is resident) and [`nesting`]. The algorithm and its proof sketches are in the docs of [`Buffer`].
//!
//! # Example
//!
//! ```
//! use ringbuffer::*;
//! struct NoHeader;
//! impl PacketLayout for NoHeader {
//!     fn header_size(&self) -> usize { 16 }
//!     fn write_begin(&self, _: &StreamIdentity, h: &mut [u8], b: &PacketBegin) {
//!         h[..8].copy_from_slice(&b.timestamp_begin.to_le_bytes());
//!     }
//!     fn write_end(&self, _: &StreamIdentity, h: &mut [u8], e: &PacketEnd) {
//!         h[8..16].copy_from_slice(&e.content_size.to_le_bytes());
//!     }
//! }
//! let cfg = BufferConfig { subbuf_size: 4096, num_subbuf: 2, mode: Mode::Discard,
//!                          header_size: 16, stream: StreamIdentity::default() };
//! let map = memmap2::MmapOptions::new().len(cfg.file_size()?).map_anon()?;
//! let (writer, reader) = Buffer::create(map.into(), &cfg)?.split();
//! let clock = || 42u64; // closures are clocks
//! let mut r = writer.reserve(&NoHeader, &clock, SlotSize { compact: 8, extended: 16 }).unwrap();
//! writer.slot(&mut r)[1..].copy_from_slice(b"payload");
//! writer.commit(&NoHeader, r, 1);
//! reader.flush(&NoHeader, &clock);              // close the partly filled packet
//! let sb = reader.get_subbuf()?.expect("delivered");
//! assert_eq!(sb.content_size, 16 + 8);
//! let mut out = Vec::new();
//! reader.copy_subbuf(&sb, &mut out)?;
//! assert_eq!(&out[16..24], b"\x01payload");
//! reader.put_subbuf(sb)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

/// This crate's version (`Cargo.toml`), for compatibility checks between copies linked
/// into one process.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub mod abandoned;
pub mod atomics;
mod claim;
pub mod client;
#[cfg(not(loom))]
pub mod counters;

mod commit;
mod error;
mod flush;
mod frontend;
pub mod ids;
pub mod layout;
#[cfg(loom)]
pub mod model;
pub mod nesting;
pub mod percpu;
pub mod position;
mod reader;
pub mod reclaim;
mod roles;
#[cfg(not(loom))]
pub mod shm;
pub mod snapshot;
#[cfg(test)]
mod tests;

pub use abandoned::Abandoned;
pub use atomics::{MapMemory, Memory};
pub use client::{PacketBegin, PacketEnd, PacketLayout, StreamIdentity};
pub use error::{LayoutError, ReadError};
pub use layout::Geometry;
pub use nesting::NestingGuard;
pub use reader::SubbufState;
pub use reclaim::{MemoryUse, ReclaimState, Reclaimed, Rule as ReclaimRule};
pub use roles::{Fill, Reader, Writer};
pub use snapshot::{PacketCopy, Recovered, SnapshotRead, WalkStop};

/// Bits of the timestamp field of a compact event header (`id | timestamp << 5` in a
/// 32-bit word, docs/DESIGN.md#event-header). A record gets the extended header when the time
/// since the previous reservation in its buffer does not fit in this many bits. The one
/// definition: `ust_core::event_header::COMPACT_TIMESTAMP_BITS` re-exports it.
pub const TIMESTAMP_BITS: u32 = 27;

/// What a writer does when the buffer is full.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Drop new events while the reader has not released the sub-buffer the writer needs
    /// (counted in [`Counters::lost_full`]); the disk mode, LTTng's `RING_BUFFER_DISCARD`.
    Discard = 0,
    /// Flight recorder, LTTng's `RING_BUFFER_OVERWRITE`: a writer that needs the oldest
    /// sub-buffer pushes `consumed` past it and overwrites it (counted in
    /// [`Counters::overwritten`], shown to the reader as a gap in `packet_seq_num`, not
    /// part of `events_discarded`). Events are still dropped ([`Counters::lost_full`])
    /// when the sub-buffer to open has not been fully committed yet (a slow or dead
    /// writer, as LTTng) or another writer is zeroing it at that instant. The reader
    /// swaps its spare sub-buffer with the one it reads (see [`ids`]), so it never reads
    /// a packet being overwritten.
    Overwrite = 1,
}

/// Geometry and identity of one buffer, chosen by the daemon and stored in the file
/// header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferConfig {
    /// Sub-buffer (packet) size in bytes: a power of two in 4 KiB..=1 GiB.
    pub subbuf_size: u64,
    /// Number of sub-buffers: a power of two in 2..=65536.
    pub num_subbuf: u32,
    /// Discard or overwrite.
    pub mode: Mode,
    /// Packet header + context bytes reserved at the start of every sub-buffer (from
    /// [`PacketLayout::header_size`]); at most half a sub-buffer.
    pub header_size: u32,
    /// Stream this buffer feeds (written in the file header, passed to the client).
    pub stream: StreamIdentity,
}

impl BufferConfig {
    /// Total bytes of the buffer file: header, control block, per-sub-buffer control, id
    /// table, and `num_subbuf + 1` page-aligned sub-buffers (one is the reader's spare).
    /// A multiple of 4096.
    ///
    /// Errors: [`LayoutError::Geometry`] if a size is out of range (see the fields).
    pub fn file_size(&self) -> Result<usize, LayoutError> {
        Ok(Geometry::for_config(self)?.file_size)
    }
}

/// The trace clock, in ns. Called by the ring buffer between its load of `write` and its
/// CAS on every path (reserve, switch, flush), so timestamps follow reservation order
/// within a buffer. Must be monotonic across the threads and processes writing a buffer
/// (`CLOCK_MONOTONIC`, or an invariant TSC read with an ordered instruction).
pub trait Clock {
    /// Current time in ns.
    fn now(&self) -> u64;
    /// `Some` if this clock is the TSC converted by these parameters (`now()` being
    /// `conv.to_ns(rdtscp)`): writers of a per-CPU buffer then read the TSC themselves,
    /// unordered, inside their critical section ([`percpu::reserve_tsc`]). `None` (the
    /// default) for any other clock.
    #[inline(always)]
    fn tsc(&self) -> Option<&percpu::TscConv> {
        None
    }
}

impl<F: Fn() -> u64> Clock for F {
    #[inline]
    fn now(&self) -> u64 {
        self()
    }
}

/// How many bytes a record needs: with a compact event header, and with the extended one.
///
/// The ring buffer picks `extended` when the caller forces it (`compact == extended`,
/// e.g. an event id that does not fit the compact header) or when the time since the
/// previous reservation in this buffer does not fit in [`TIMESTAMP_BITS`] bits. The first
/// record of a packet is compared with the packet's `timestamp_begin`, which is the same
/// clock read (same CAS), so it is compact unless forced. Both sizes include byte 0 and
/// must be at least 1; a size larger than `subbuf_size - header_size` is refused
/// ([`Dropped::TooBig`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotSize {
    /// Bytes with the compact header.
    pub compact: u32,
    /// Bytes with the extended header.
    pub extended: u32,
}

/// A reserved slot: `len` bytes owned by the caller until [`Writer::commit`].
///
/// Not `Clone`: exactly one commit per reservation. Dropping a reservation without
/// committing it leaves its sub-buffer forever incomplete (as a writer that died).
#[derive(Debug)]
#[must_use = "a reservation must be committed, or its sub-buffer is never delivered"]
pub struct Reservation {
    /// Trace-clock time of the reservation, in ns: the clock read between the load of
    /// `write` and the CAS that reserved the slot.
    pub timestamp: u64,
    /// True if the record must use the extended event header (and `len` is
    /// `SlotSize::extended`).
    pub extended: bool,
    /// Slot length in bytes, byte 0 included.
    pub len: u32,
    /// Free-running position of byte 0 of the slot.
    pos: u64,
    /// Byte offset of the slot in the memory (computed once, at reserve).
    off: usize,
    /// Address of the memory the slot belongs to (catches a reservation used on another
    /// buffer).
    owner: usize,
}

impl Reservation {
    /// Free-running byte position of the slot in its buffer.
    pub fn position(&self) -> u64 {
        self.pos
    }
}

/// What happened to an event that was not recorded (it is already counted in
/// [`Counters`] when `reserve` returns it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// No sub-buffer to open ([`Counters::lost_full`]): in discard mode the reader has
    /// not released it; in both modes its previous packet is not fully committed yet; in
    /// overwrite mode another writer may also be zeroing it at that instant.
    Full,
    /// Larger than a sub-buffer minus its packet header, or empty
    /// ([`Counters::lost_big`]).
    TooBig,
    /// Traced deeper than [`nesting::MAX_NESTING`] ([`Counters::lost_nesting`]).
    Nested,
    /// Not counted, and no event is lost yet: the buffer is in per-CPU mode
    /// ([`percpu::Writers::PerCpu`]) and the calling thread no longer runs on its CPU (it
    /// migrated, or has no rseq area). The caller reserves again in the buffer of the CPU
    /// it runs on now, or counts the event with [`Writer::record_dropped`] if it gives up.
    Migrated,
}

/// Snapshot of a buffer's counters (each read atomically, not all at one instant).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Events dropped because no sub-buffer could be opened (see [`Dropped::Full`]).
    pub lost_full: u64,
    /// Events dropped because they were too big for a sub-buffer.
    pub lost_big: u64,
    /// Events dropped because of the nesting limit.
    pub lost_nesting: u64,
    /// Overwrite mode: packets (sub-buffers, not events) that writers overwrote before
    /// the reader took them. Each is a gap in the `packet_seq_num` the reader sees; not
    /// counted in `events_discarded` (as LTTng, which counts only lost events there).
    pub overwritten: u64,
    /// Free-running write (reserve) position, in bytes.
    pub write: u64,
    /// Free-running consumed position, in bytes.
    pub consumed: u64,
}

impl Counters {
    /// `lost_full + lost_big + lost_nesting`: the `events_discarded` of the stream
    /// (`overwritten` packets are not in it).
    pub fn discarded(&self) -> u64 {
        self.lost_full.wrapping_add(self.lost_big).wrapping_add(self.lost_nesting)
    }
}

/// A delivered sub-buffer handed to the reader by [`Reader::get_subbuf`]; give it back
/// with [`Reader::put_subbuf`].
#[derive(Debug, PartialEq, Eq)]
pub struct Subbuf {
    /// Sequence number of the packet in its stream (position / subbuf_size).
    pub packet_seq_num: u64,
    /// Bytes of header, context and records (no end padding); `header_size..=packet_size`.
    pub content_size: u64,
    /// Bytes of the packet: the sub-buffer size.
    pub packet_size: u64,
    /// Ring index.
    index: usize,
    /// Physical sub-buffer.
    phys: usize,
    /// Free-running position of its start (the consumed position when it was got).
    pos: u64,
}

impl Subbuf {
    /// Free-running position of the sub-buffer's start, in bytes.
    pub fn position(&self) -> u64 {
        self.pos
    }
}

/// One per-CPU ring buffer in a mapping (or, for the model checker, in any [`Memory`]):
/// the state both roles share. A handle is made by [`create`](Buffer::create) or
/// [`open`](Buffer::open) and becomes a [`Writer`] or a [`Reader`]
/// ([`into_writer`](Buffer::into_writer), [`into_reader`](Buffer::into_reader),
/// [`split`](Buffer::split)); on its own it only tells its configuration, geometry and
/// counters. `Send + Sync`: share a role between threads by reference.
///
/// Holds the memory and a *local* validated copy of the geometry ([`Geometry`],
/// [`BufferConfig`]): sizes and offsets are never re-read from shared memory after
/// [`create`](Buffer::create)/[`open`](Buffer::open).
///
/// # The algorithm (LTTng-UST `frontend.c` / `frontend_api.h`, simplified)
///
/// * **Reserve** loads `write`, reads the clock, computes the slot, and CASes `write`
///   forward (in a buffer claimed per-CPU, [`percpu`], the CAS is a restartable
///   compare-and-store on the buffer's CPU, indivisible for everyone else who may change
///   `write`: the other writers on that CPU and the flush pinned there). A slot never crosses a sub-buffer end: if it would, the same CAS *closes*
///   the current sub-buffer (the rest of it becomes end padding) and *opens* the next one
///   (packet header, then the slot). Sub-buffers open lazily: a `write` at a sub-buffer
///   start means "closed, next not opened yet", and the next reservation opens it. This
///   is what lets the reader's [`flush`](Reader::flush) close a packet without needing
///   the next sub-buffer to be free.
/// * **Commit**: every byte of a sub-buffer lap is reserved exactly once (header by the
///   opener, records by their writers, padding by the closer), and each party adds its
///   byte count to the sub-buffer's free-running commit counter after writing. Lap `L`
///   of sub-buffer `i` is complete exactly when the counter reaches `(L+1)*subbuf_size`;
///   the committer whose `fetch_add` lands there is unique, calls
///   [`PacketLayout::write_end`] and stores the counter into `delivered[i]` (Release).
/// * **Discard mode**: a writer may open sub-buffer `i` for lap `L` only if the reader
///   has released lap `L-1` (`start + subbuf_size - consumed <= buf_size`) and the commit
///   counter shows lap `L-1` complete; otherwise the event is dropped and `lost_full`
///   counted. The current sub-buffer then stays open until a later reservation or a flush
///   closes it.
/// * **Overwrite mode** (flight recorder, [`ids`] for the id states): the id table maps
///   ring index `i` to a physical sub-buffer with a lap tag and a state. Before a writer
///   may CAS `write` into lap `L` of sub-buffer `i`, the entry must be `Writing(L)`.
///   If it is `Delivered(L-1)` (the oldest packet, unread) or `Spare(L-1)` (the reader
///   took lap `L-1` and left its zeroed spare), the opener *prepares* it first: it
///   pushes `consumed` off lap `L-1` (CAS, LTTng's `push_reader`), CASes the entry to
///   `Claiming(L)` (or straight to `Writing(L)` for the spare), zeroes the sub-buffer
///   and counts it in `overwritten`, and stores `Writing(L)` (Release). If the entry is
///   still `Writing(L-1)` (the previous packet is not fully committed) or `Claiming(L)`
///   (another writer is zeroing it), the event is dropped (`lost_full`): writers never
///   wait. The deliverer of lap `L` writes the packet end, stores `delivered`, then the
///   entry `Delivered(L)` (Release; in that order, or the next lap's delivery could be
///   followed by this lap's store of `delivered`, which the model checker found). The
///   reader takes the packet at `consumed` by CASing the entry from `Delivered(L)` to
///   `Spare(L)` naming its spare, and keeps the packet's physical sub-buffer; on
///   `put_subbuf` it zeroes it and keeps it as its next spare. Exactly one of "reader
///   swaps" and "writer claims" wins the CAS on the entry, so a writer never writes a
///   packet being read, and a packet is either read or counted overwritten (a gap in
///   `packet_seq_num`). A writer pushes `consumed` *before* its claim, so a reader whose
///   swap fails on the claim sees the pushed `consumed` when it retries.
/// * **Which physical sub-buffer a writer writes** (overwrite mode): after its CAS of
///   `write`, a writer loads the entry (Acquire) and finds `Writing(L)`: the opener of
///   lap `L` observed `Writing(L)` before its CAS (AcqRel), every later CAS on `write`
///   reads from it, and the entry cannot change again before lap `L` is delivered,
///   which needs this writer's own commit.
/// * **Timestamps**: the closing CAS's clock read is the packet's `timestamp_end`, the
///   opening CAS's is `timestamp_begin`. A close-and-open CAS uses one read for both,
///   and every record's clock read lies between its packet's opening and closing CAS, so
///   `end(n) <= begin(n+1)` and records lie in `[begin, end]`.
/// * **events_discarded**: the closer reads the lost counters between its load of
///   `write` and its closing CAS and stores the sum with the packet. Closing CASes are
///   ordered on `write` (AcqRel), so these reads happen in packet order and, the counters
///   only growing, never decrease from one packet to the next, even when packets are
///   delivered out of order. (Drops after the close count in the next packet.)
/// * **Compact timestamps**: writers store their timestamp into `last_tsc` (Release)
///   after their CAS, and compare the next timestamp with a `last_tsc` loaded (Acquire)
///   between their load of `write` and their CAS. The value read was stored by a writer
///   whose CAS happens-before this CAS, so it is the timestamp of this record's
///   predecessor or of an earlier record (stores can land out of order, making
///   `last_tsc` go backwards, never forwards past the predecessor). Comparing with an
///   earlier, smaller timestamp only overestimates the gap: it may choose the extended
///   header needlessly, never a compact one whose 27-bit delta would wrap.
///
/// # Per-slot commit evidence (docs/DESIGN.md#per-slot-commit-evidence)
///
/// Byte 0 of every record is nonzero (caller's guarantee: event ids start at 1, the
/// extended tag is 31) and [`commit`](Writer::commit) stores it last, with Release,
/// before adding to the commit counter; the reader zeroes a sub-buffer's data before it
/// releases it (and fresh files are zero). Hence for a sub-buffer whose writers may have
/// died:
///
/// 1. Every slot below its content end was reserved (reservations are contiguous).
/// 2. A slot whose byte 0 is nonzero was committed by its own writer in the current lap:
///    the zeroing happens-before the writer's entry (reader's Release store of
///    `consumed`, writer's Acquire load before opening), so no nonzero byte survives from
///    an earlier lap, and only that slot's writer stores at its byte 0.
/// 3. The payload of such a slot is complete: the writer wrote it before its Release
///    store of byte 0, and a recovery reading byte 0 with Acquire sees it.
///
/// **Overwrite mode.** Sub-buffers are reused without the reader, so whoever makes a
/// sub-buffer available for lap `L` guarantees it is zero before any reservation of lap
/// `L` in it, and never zeroes a byte written in lap `L`:
///
/// 1. *Zero before the first reservation.* No `write` CAS enters lap `L` of sub-buffer
///    `i` before the entry reads `Writing(L)` (see "Which physical sub-buffer" above and
///    the preparation in the algorithm), and the preparer stores `Writing(L)` with
///    Release only after zeroing (or, for the reader's spare, the reader zeroed it before
///    the Release CAS that swapped it in, which the preparer's CAS read). Every writer of
///    lap `L` observed `Writing(L)` with Acquire, directly or through the chain of
///    AcqRel CASes on `write`, so the zeroing happens-before its reservation.
/// 2. *Exclusive zeroing.* The preparer zeroes only after winning the CAS
///    `Delivered(L-1) -> Claiming(L)`. `Delivered(L-1)` is stored by lap `L-1`'s deliverer
///    after every commit of lap `L-1` (the commit counter's release sequence) and after
///    the packet end, so no byte of lap `L-1` is written later; a `Claiming` entry can
///    be swapped by no reader and claimed by no other writer; and no writer of lap `L`
///    exists yet (point 1). So the zeroing races with nothing, and a sub-buffer is
///    zeroed once per lap.
/// 3. *If the zeroing is not done*, the entry is `Claiming(L)`: other writers that need
///    the sub-buffer drop their event and count it, and `write` stays before the
///    sub-buffer. A preparer that dies there leaves lap `L-1`'s packet half zeroed but
///    no reservation in it; recovery sees the `Claiming` id and skips it.
///
/// Hence points 1-3 of discard mode hold in overwrite mode with "the preparer" in place
/// of "the reader", and recovery works the same.
///
/// This holds with commits in any order, unlike a sum of committed bytes (equal-size
/// events make sums collide): recovery walks the records from the packet header, decoding
/// each length from its header, and stops at the first zero byte 0 (or the content end),
/// keeping everything before it. The content end of a closed sub-buffer is stored by the
/// closer (`closed_end`, before it commits the padding); for the sub-buffer still open
/// it is the `write` position. [`Reader::subbuf_state`] exposes both, with the commit
/// counter, for recovery.
pub struct Buffer<M: Memory = MapMemory> {
    mem: M,
    geo: Geometry,
    cfg: BufferConfig,
    hot: frontend::Hot,
    /// How this process's writers advance `write` ([`Writer::claim_writers`]).
    writers: percpu::Writers,
}

impl Buffer<MapMemory> {
    /// Daemon side: formats zeroed memory of at least `cfg.file_size()` bytes (a fresh
    /// memfd or `ftruncate`d file is zeroed): writes the control block, the identity id
    /// table and, last, the self-describing header.
    ///
    /// Errors: [`LayoutError::Geometry`] for invalid sizes, [`LayoutError::TooSmall`] if
    /// the mapping is shorter than [`BufferConfig::file_size`].
    pub fn create(map: memmap2::MmapRaw, cfg: &BufferConfig) -> Result<Buffer, LayoutError> {
        Buffer::create_in(MapMemory::new(map), cfg)
    }

    /// Opens memory formatted by [`create`](Buffer::create) (by any process): checks the
    /// magic, endianness, word size, ABI major version, sizes and every region offset
    /// against the mapping length, then keeps a local copy of the geometry.
    ///
    /// Errors: every [`LayoutError`] variant, for the check that failed.
    pub fn open(map: memmap2::MmapRaw) -> Result<Buffer, LayoutError> {
        Buffer::open_in(MapMemory::new(map))
    }

    /// The mapping.
    pub fn map(&self) -> &memmap2::MmapRaw {
        self.mem.map()
    }
}

impl<M: Memory> Buffer<M> {
    /// [`Buffer::create`] on any [`Memory`] (the model checker's heap memory, tests).
    pub fn create_in(mem: M, cfg: &BufferConfig) -> Result<Buffer<M>, LayoutError> {
        let geo = Geometry::for_config(cfg)?;
        if mem.len() < geo.file_size {
            return Err(LayoutError::TooSmall { needed: geo.file_size as u64, len: mem.len() as u64 });
        }
        let b = Buffer::from_parts(mem, geo, *cfg);
        b.format();
        Ok(b)
    }

    /// [`Buffer::open`] on any [`Memory`].
    pub fn open_in(mem: M) -> Result<Buffer<M>, LayoutError> {
        if mem.len() < layout::HEADER_LEN {
            return Err(LayoutError::TooSmall { needed: layout::HEADER_LEN as u64, len: mem.len() as u64 });
        }
        let mut raw = [0u8; layout::HEADER_LEN];
        mem.read_bytes(0, &mut raw);
        let h = layout::FileHeader::from_bytes(&raw);
        let (geo, cfg) = Geometry::from_header(&h, mem.len())?;
        Ok(Buffer::from_parts(mem, geo, cfg))
    }

    fn from_parts(mem: M, geo: Geometry, cfg: BufferConfig) -> Buffer<M> {
        let hot = frontend::Hot::new(&geo);
        Buffer { mem, geo, cfg, hot, writers: percpu::Writers::Atomic }
    }

    /// The configuration read from (or written to) the file header.
    pub fn config(&self) -> &BufferConfig {
        &self.cfg
    }

    /// The validated local geometry (offsets of every region).
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// The memory the buffer lives in.
    pub fn memory(&self) -> &M {
        &self.mem
    }
}
