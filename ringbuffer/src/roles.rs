//! The two roles on a buffer as types, in the manner of rtrb's `Producer`/`Consumer`: a
//! [`Writer`] (the application's emit path: reserve, commit, record, count its drops) and a
//! [`Reader`] (the daemon: take and give back sub-buffers, flush, snapshots, recovery and
//! the completion of packets whose writers died). Each has only its own methods; both
//! dereference to the [`Buffer`] they wrap for what either may look at (configuration,
//! geometry, counters, the memory).
//!
//! ```text
//!  application                         shared file                      daemon
//!  Buffer::open(map)?.into_writer()  ─────────────────  Buffer::create(map, cfg)?.into_reader()
//!  in one process (tests, benches):  Buffer::create_in(mem, cfg)?.split() -> (Writer, Reader)
//! ```
//!
//! A role is a handle of this process: several writer threads share one [`Writer`] by
//! reference (the algorithm is multi-writer), and writers of other processes hold their
//! own. There is one reader per buffer (the daemon); nothing in shared memory stops a
//! second one, as in LTTng-UST.

use core::ops::Deref;

use crate::{frontend, Buffer, Clock, Dropped, MapMemory, Memory, PacketLayout, Reservation, SlotSize};

/// The writer role on a buffer: [`reserve`](Writer::reserve), [`slot`](Writer::slot),
/// [`commit`](Writer::commit), [`record`](Writer::record) (the three in one call, the emit
/// path's form), [`record_dropped`](Writer::record_dropped) and the writer mode
/// ([`claim_writers`](Writer::claim_writers)). Made by [`Buffer::into_writer`] or
/// [`Buffer::split`]. `Send + Sync`: writer threads share it by reference.
///
/// Dereferences to the [`Buffer`] (configuration, geometry, counters). Holds the buffer
/// itself, not a pointer to it, so the emit path reaches the memory with no extra load.
pub struct Writer<M: Memory = MapMemory> {
    pub(crate) buf: Buffer<M>,
}

/// The reader role on a buffer: [`get_subbuf`](Reader::get_subbuf),
/// [`copy_subbuf`](Reader::copy_subbuf), [`put_subbuf`](Reader::put_subbuf),
/// [`flush`](Reader::flush), snapshots ([`snapshot_packet`](Reader::snapshot_packet)),
/// recovery ([`recover_packet`](Reader::recover_packet)) and the completion of packets
/// whose writers died ([`abandoned`](Reader::abandoned),
/// [`complete_abandoned`](Reader::complete_abandoned),
/// [`record_dead_events`](Reader::record_dead_events)). Made by [`Buffer::into_reader`] or
/// [`Buffer::split`].
///
/// Dereferences to the [`Buffer`] (configuration, geometry, counters).
pub struct Reader<M: Memory = MapMemory> {
    pub(crate) buf: Buffer<M>,
}

impl<M: Memory> Deref for Writer<M> {
    type Target = Buffer<M>;
    #[inline(always)]
    fn deref(&self) -> &Buffer<M> {
        &self.buf
    }
}

impl<M: Memory> Deref for Reader<M> {
    type Target = Buffer<M>;
    #[inline(always)]
    fn deref(&self) -> &Buffer<M> {
        &self.buf
    }
}

impl<M: Memory> Buffer<M> {
    /// This handle as a writer (the application, which mapped the buffer the daemon made:
    /// `Buffer::open(map)?.into_writer()`). Its writer mode starts atomic
    /// ([`Writer::claim_writers`] changes it).
    pub fn into_writer(self) -> Writer<M> {
        Writer { buf: self }
    }

    /// This handle as the reader (the daemon, which made the buffer:
    /// `Buffer::create(map, &cfg)?.into_reader()`).
    pub fn into_reader(self) -> Reader<M> {
        Reader { buf: self }
    }

    /// Both roles on one memory in one process (tests, benches, the model checker): two
    /// handles sharing the memory (a clone of `M`, which shares it: [`MapMemory`] counts
    /// references to its mapping), each with its own local copy of the validated geometry,
    /// exactly as a writer and a reader in two processes.
    pub fn split(self) -> (Writer<M>, Reader<M>)
    where
        M: Clone,
    {
        let reader = self.share();
        (self.into_writer(), reader.into_reader())
    }

    /// Another handle of this process on the same memory (a clone of `M`), with this
    /// handle's validated geometry and configuration (not read again from the file, which
    /// may no longer hold a valid header) and an atomic writer mode: what [`split`](Buffer::split)
    /// gives its reader, for a reader of a writer's buffer in tests.
    pub fn share(&self) -> Buffer<M>
    where
        M: Clone,
    {
        Buffer::from_parts(self.mem.clone(), self.geo, self.cfg)
    }
}

impl Writer<MapMemory> {
    /// The bytes of a reserved slot (`r.len` bytes, slot byte 0 first). The caller writes
    /// bytes `1..len` (byte 0 is written by [`commit`](Writer::commit); anything written
    /// there before is overwritten) and then commits. The slice borrows the reservation
    /// mutably, so it cannot outlive it or alias another slice of the same slot.
    ///
    /// Panics if `r` was reserved in another buffer.
    #[inline]
    pub fn slot<'a>(&'a self, r: &'a mut Reservation) -> &'a mut [u8] {
        let off = self.slot_offset(r);
        // SAFETY: the slot `off..off+len` was reserved by the CAS that created `r` and is
        // owned by its holder until commit, which consumes `r`; the slice borrows `r`
        // mutably and `self`, so it lives no longer than both; `slot_offset` checked that
        // `r` belongs to this memory.
        unsafe { self.buf.mem.slice_mut(off, r.len as usize) }
    }

    /// Reserves a slot of `size`, has `write` fill it, and commits it: [`reserve`],
    /// [`slot`] and [`commit`] in one call, the emit path's form (the reservation never
    /// leaves the buffer, so nothing checks whose it is).
    ///
    /// `write` ([`Fill::fill`]) receives the slot and writes it; byte 0, which it
    /// returns, is stored last with Release.
    ///
    /// Errors: those of [`reserve`], each already counted; `write` is then not called.
    ///
    /// [`reserve`]: Writer::reserve
    /// [`slot`]: Writer::slot
    /// [`commit`]: Writer::commit
    #[inline(always)]
    pub fn record<L: PacketLayout, C: Clock>(&self, layout: &L, clock: &C, size: SlotSize, write: impl Fill) -> Result<(), Dropped> {
        self.buf.reserve_then(layout, clock, size, WriteAndCommit { buf: &self.buf, layout, write })
    }
}

/// What [`Writer::record`] writes into the slot it reserved. A trait rather than a
/// closure so that an implementation can mark [`fill`](Fill::fill) `#[inline(always)]`:
/// the record path calls it from its fast and its slow path, and a closure called twice
/// is often not inlined.
pub trait Fill {
    /// Writes bytes `1..len` of `slot` (`len` bytes, byte 0 first: the compact or
    /// extended size asked for), for a record of trace-clock time `timestamp` (ns) that
    /// must use the extended event header if `extended`; returns byte 0, which must be
    /// nonzero (the per-slot commit evidence, see [`Buffer`]).
    fn fill(self, slot: &mut [u8], timestamp: u64, extended: bool) -> u8;
}

/// The rest of [`Writer::record`] once the slot is reserved: `write` fills it, then the
/// commit.
struct WriteAndCommit<'a, L, W> {
    buf: &'a Buffer,
    layout: &'a L,
    write: W,
}

impl<L: PacketLayout, W: Fill> frontend::Then<()> for WriteAndCommit<'_, L, W> {
    #[inline(always)]
    fn then(self, r: Reservation) {
        // SAFETY: `off..off + len` is the slot the reservation just made in this memory,
        // owned by this call until the commit below; the slice does not outlive the call.
        // In bounds by construction, whatever the shared memory holds: every reservation
        // path makes `off = data + phys * subbuf_size + o` with `phys < nphys` (the index
        // masked to the ring, or an id-table entry checked against it) and `o + len <=
        // subbuf_size` (checked before the CAS), and the validated geometry has `data +
        // nphys * subbuf_size <= file_size <= mapping length` (`Geometry::from_header`).
        let bytes = unsafe { self.buf.mem.slice_mut_unchecked(r.off, r.len as usize) };
        let first = self.write.fill(bytes, r.timestamp, r.extended);
        self.buf.commit_own(self.layout, r, first);
    }
}
