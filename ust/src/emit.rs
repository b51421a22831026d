//! The emit path: from an enabled call site to committed bytes in a per-CPU buffer.
//!
//! ```text
//! nesting guard ─> for each set bit s of the site's mask (fast path: exactly one)
//!                    channel = table()[s]            (Acquire loads; none = gone, skip)
//!                    buffer  = channel.buffer(cpu)   (rseq cpu_id, wrapped to the count)
//!                    r = reserve(header sizes of id + context block + payload length)
//!                    write event header (all but byte 0), context block, payload
//!                    commit(r, byte 0)               (publishes byte 0 last)
//! ```
//!
//! A site with a plan ([`Site::plan`]: enabled in one plain channel, no filter on it)
//! skips the mask, filter, table and channel-kind tests: the plan is the channel, resolved
//! by the runtime when the mask, the filters or the slot's channel change, not per event.
//! A fixed-size event (every field fixed-size: the macro calls [`emit_fixed`]) also takes
//! its record sizes from the site; any other computes them from its payload length.
//!
//! A site with filters on some of its channels (`--filter`) takes a separate path first:
//! the payload is serialized once into a stack scratch area, the filters are evaluated on
//! those bytes, and only the channels whose filter matches reserve and copy it; a
//! non-matching event costs no reservation. A site without filters pays one load and a
//! test for that.
//!
//! A map slot ([`channel::Channel::map`], LTTng 2.16's `incr-map-value`) takes no
//! reservation: the event adds 1 to its key's counter on this CPU ([`count`]); an event
//! fed only to maps writes no record. Over several slots of one event, a `per-event` map
//! counts each key once ([`Seen`]).
//!
//! No allocation, no lock, no system call. An event the buffer cannot take (full in
//! discard mode, larger than a sub-buffer) is counted by the ring buffer itself; an event
//! refused by the nesting guard is counted here with `Dropped::Nested`. A channel in
//! blocking mode (`--blocking-timeout`) waits for room instead ([`crate::blocking`]): the
//! one exception to "no system call", on the full-buffer path only.

use std::sync::atomic::{fence, Ordering};

use ringbuffer::{Dropped, SlotSize};
use ust_core::event_header;
use ust_core::packet::CtfPacketLayout;
use ust_core::protocol::MAX_CHANNELS;

use crate::channel;
use crate::cpu;
use crate::site::{Site, SiteFilter};

/// [`emit`] for an event whose fields are all fixed-size (the macro's call when
/// `payload_len` is a constant): a site with a plan (enabled in one plain channel with
/// no filter on it; see the `plan` field of [`Site`]) records through that channel directly, without the mask, filter, table and
/// channel-kind tests; any other case goes on to [`emit`].
#[inline(never)]
pub fn emit_fixed<F: Fn(&mut [u8])>(site: &Site, ip: u64, payload_len: usize, write: F) {
    // As in `emit`: see what was set up before the mask the call site loaded (the plan is
    // cleared before each mask change and stored after it).
    fence(Ordering::Acquire);
    if let Some(ch) = site.plan() {
        // The macro's constant length comes from the same field descriptions as the
        // sizes; the test keeps any other caller (and every site without fixed sizes,
        // whose `extended` is 0) on the general path.
        let (compact, extended) = site.fixed_sizes_raw();
        if payload_len == (extended as usize).wrapping_sub(event_header::EXTENDED_SIZE) {
            let Some(_nesting) = ringbuffer::nesting::enter() else {
                ch.buffer(cpu::current()).record_dropped(Dropped::Nested);
                return;
            };
            let (id, size) = (site.id(), SlotSize { compact, extended });
            if let Err(Dropped::Migrated) = record_plain(ch, cpu::current(), id, size, &write) {
                migrated(ch, id, ip, size, &write);
            }
            return;
        }
    }
    emit(site, ip, payload_len, write);
}

/// Records one event of `site` whose payload is `payload_len` bytes, written by `write`
/// into a slice of exactly that length, into every channel the site's mask names. `ip`
/// is the call site's address ([`call_site_ip!`](crate::call_site_ip), or 0 when there is
/// none), written only into channels that have the `ip` context.
///
/// Called by the macro expansions after they have seen a nonzero mask and evaluated the
/// arguments. `write` runs once per channel.
///
/// Never inlined: the call site then stays a load, a test and a call on its enabled
/// branch, so the disabled path of a tracepoint is small enough to inline anywhere.
#[inline(never)]
pub fn emit<F: Fn(&mut [u8])>(site: &Site, ip: u64, payload_len: usize, write: F) {
    // A site with a plan (one plain channel, no filter on it): that channel, with the
    // sizes of this payload, and none of the tests below. As in `emit_fixed`, the fence
    // makes the plan (cleared before each mask change, stored after it) follow the mask
    // the call site loaded.
    fence(Ordering::Acquire);
    if let Some(ch) = site.plan() {
        let id = site.id();
        let cpu = cpu::current();
        let Some(size) = slot_size(site, id, payload_len) else {
            ch.buffer(cpu).record_dropped(Dropped::TooBig);
            return;
        };
        let Some(_nesting) = ringbuffer::nesting::enter() else {
            ch.buffer(cpu).record_dropped(Dropped::Nested);
            return;
        };
        if let Err(Dropped::Migrated) = record_plain(ch, cpu, id, size, &write) {
            migrated(ch, id, ip, size, &write);
        }
        return;
    }
    // The mask this call uses, then the fence: a relaxed load followed by an Acquire fence
    // acts as an Acquire load, pairing with the runtime's Release stores of the id, the
    // filters, the mask and the channel slots: having seen this mask, see what was set up
    // before it (a filter published before the mask that needs it).
    let mask = site.mask();
    fence(Ordering::Acquire);
    let id = site.id();
    if mask == 0 || id == 0 {
        return;
    }
    let Some(_nesting) = ringbuffer::nesting::enter() else {
        drop_all(mask, Dropped::Nested);
        return;
    };
    let Some(size) = slot_size(site, id, payload_len) else {
        drop_all(mask, Dropped::TooBig);
        return;
    };
    let cpu = cpu::current();
    if let Some(f) = site.filter() {
        if mask & f.mask != 0 {
            emit_filtered(site, f, mask, cpu, id, ip, size, payload_len, &write);
            return;
        }
    }
    if mask & (mask - 1) == 0 {
        emit_one(mask.trailing_zeros(), cpu, id, ip, size, &write);
    } else {
        emit_many(mask, cpu, id, ip, size, &write);
    }
}

/// The record sizes (header and payload) of a `payload_len`-byte event of `site` with id
/// `id` (nonzero); `None` when they do not fit in `u32`.
#[inline(always)]
fn slot_size(site: &Site, id: u32, payload_len: usize) -> Option<SlotSize> {
    match site.fixed_sizes() {
        // A fixed-size event: computed with the id, for this very payload length (the
        // macro's constant comes from the same field descriptions; the test keeps any
        // other caller of `emit` on the general computation).
        Some((compact, extended)) if payload_len == (extended as usize).wrapping_sub(event_header::EXTENDED_SIZE) => Some(SlotSize { compact, extended }),
        _ => {
            let (compact, extended) = event_header::sizes(id);
            // Both sizes fit in u32 when the extended one does (it is the larger).
            let e = u32::try_from(payload_len.saturating_add(extended)).ok()?;
            Some(SlotSize { compact: e - (extended - compact) as u32, extended: e })
        }
    }
}

/// Payloads up to this size are serialized on the stack for filter evaluation; larger ones
/// (rare: a filtered event of more than 4 KiB) on the heap.
const FILTER_STACK: usize = 4096;

/// The filtered path: the payload is serialized once into a scratch area, each filtered
/// channel's expressions are evaluated on it, and only the channels that pass (and the
/// unfiltered ones) reserve, receiving a copy. A non-matching event reserves nothing.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn emit_filtered<F: Fn(&mut [u8])>(site: &Site, f: &SiteFilter, mask: u64, cpu: u32, id: u32, ip: u64, size: SlotSize, len: usize, write: &F) {
    let mut stack = [std::mem::MaybeUninit::<u8>::uninit(); FILTER_STACK];
    let mut heap = Vec::new();
    let scratch: &mut [u8] = if len <= FILTER_STACK {
        let s = &mut stack[..len];
        for b in s.iter_mut() {
            b.write(0);
        }
        // SAFETY: every byte of `s` was initialized just above; `MaybeUninit<u8>` and `u8`
        // have the same layout.
        unsafe { &mut *(s as *mut [std::mem::MaybeUninit<u8>] as *mut [u8]) }
    } else {
        heap.resize(len, 0);
        &mut heap[..]
    };
    write(scratch);
    let payload: &[u8] = scratch;
    let ctx = crate::context::Lazy { cpu, ip };
    let mut keep = mask & !f.mask;
    for (slot, any_of) in &f.slots {
        let bit = 1u64 << slot;
        if mask & bit != 0 && any_of.iter().any(|e| ust_core::filter::eval(e, site.desc(), payload, &ctx)) {
            keep |= bit;
        }
    }
    let copy = |out: &mut [u8]| out.copy_from_slice(payload);
    if keep & (keep.wrapping_sub(1)) == 0 {
        if keep != 0 {
            emit_one(keep.trailing_zeros(), cpu, id, ip, size, &copy);
        }
    } else {
        emit_many(keep, cpu, id, ip, size, &copy);
    }
}

/// An event enabled in several channels (sessions): not inlined, so that the one-channel
/// path of [`emit`] holds a single copy of the reservation code. Map slots among them
/// share one [`Seen`], so that a `per-event` map counts each key once for this event.
#[inline(never)]
fn emit_many<F: Fn(&mut [u8])>(mask: u64, cpu: u32, id: u32, ip: u64, size: SlotSize, write: &F) {
    // Made at the first map slot only: an event with no map pays nothing for it.
    let mut seen: Option<Seen> = None;
    let mut m = mask;
    while m != 0 {
        let slot = m.trailing_zeros();
        m &= m - 1;
        let Some(ch) = channel::get(slot) else { continue };
        if let Some(map) = &ch.map {
            count(ch, map, cpu, id, Some(seen.get_or_insert(Seen { n: 0, pairs: [(0, 0); MAX_CHANNELS as usize] })));
            continue;
        }
        if let Err(Dropped::Migrated) = emit_in(ch, cpu, id, ip, size, write) {
            migrated(ch, id, ip, size, write);
        }
    }
}

/// The `(map id, key)` pairs one event has incremented so far (at most one per slot).
struct Seen {
    n: usize,
    pairs: [(u32, u32); MAX_CHANNELS as usize],
}

/// Counts event `id` in map slot `ch`: 1 added to its key's counter on `cpu`, unless the
/// event has no key there, or `seen` says this `per-event` map's key was already counted
/// for this event.
#[inline(never)]
fn count(ch: &channel::Channel, map: &channel::MapSlot, cpu: u32, id: u32, seen: Option<&mut Seen>) {
    let Some(keys) = ch.shared_ids.as_deref() else { return };
    let key = match keys.get(id.wrapping_sub(ust_core::event_header::FIRST_EVENT_ID)) {
        0 => return,
        k => k - 1,
    };
    if let (true, Some(seen)) = (map.per_event, seen) {
        let pair = (map.map_id, key);
        if seen.pairs[..seen.n].contains(&pair) {
            return;
        }
        if seen.n < seen.pairs.len() {
            seen.pairs[seen.n] = pair;
            seen.n += 1;
        }
    }
    map.counters.add(cpu, key, 1);
}

/// Reservations refused as [`Dropped::Migrated`] (a per-CPU buffer whose CPU the thread
/// left) that one event retries, each in the buffer of the CPU it runs on then, before it
/// is counted lost. A thread migrates at most once per time slice, so more than one retry
/// means a thread without rseq registration (a raw `clone`) on a per-CPU channel.
const MIGRATION_RETRIES: u32 = 3;

#[inline(always)]
fn emit_one<F: Fn(&mut [u8])>(slot: u32, cpu: u32, id: u32, ip: u64, size: SlotSize, write: &F) {
    let Some(ch) = channel::get(slot) else { return };
    if let Err(Dropped::Migrated) = emit_in(ch, cpu, id, ip, size, write) {
        migrated(ch, id, ip, size, write);
    }
}

/// The thread left the CPU of the buffer it reserved in: again on the CPU it runs on now.
#[cold]
#[inline(never)]
fn migrated<F: Fn(&mut [u8])>(ch: &channel::Channel, id: u32, ip: u64, size: SlotSize, write: &F) {
    for _ in 0..MIGRATION_RETRIES {
        if !matches!(emit_in(ch, cpu::current(), id, ip, size, write), Err(Dropped::Migrated)) {
            return;
        }
    }
    ch.buffer(cpu::current()).record_dropped(Dropped::Migrated);
}

/// One record of the event in `ch`'s buffer for `cpu`. `Err` only for
/// [`Dropped::Migrated`] (every other refusal is counted by the buffer).
///
/// The common channel (per-PID, no context, discard or overwrite mode:
/// [`Channel::plain`](channel::Channel::plain)) takes the short path, one test away:
/// reserve, header, payload, commit through [`ringbuffer::Writer::record`].
#[inline(always)]
fn emit_in<F: Fn(&mut [u8])>(ch: &channel::Channel, cpu: u32, id: u32, ip: u64, size: SlotSize, write: &F) -> Result<(), Dropped> {
    if !ch.plain {
        if let Some(map) = &ch.map {
            count(ch, map, cpu, id, None);
            return Ok(());
        }
        return emit_in_general(ch, cpu, id, ip, size, write);
    }
    record_plain(ch, cpu, id, size, write)
}

/// [`emit_in`] for a [plain](channel::Channel::plain) channel.
#[inline(always)]
fn record_plain<F: Fn(&mut [u8])>(ch: &channel::Channel, cpu: u32, id: u32, size: SlotSize, write: &F) -> Result<(), Dropped> {
    match ch.buffer(cpu).record(&CtfPacketLayout, &ch.clock, size, Record { id, write }) {
        Err(Dropped::Migrated) => Err(Dropped::Migrated),
        // A refused reservation is already counted in the buffer (lost_full / lost_big).
        _ => Ok(()),
    }
}

/// The bytes of one record of a [plain](channel::Channel::plain) channel: the event
/// header, then the payload `write` makes.
struct Record<'a, F> {
    id: u32,
    write: &'a F,
}

impl<F: Fn(&mut [u8])> ringbuffer::Fill for Record<'_, F> {
    #[inline(always)]
    fn fill(self, bytes: &mut [u8], timestamp: u64, ext: bool) -> u8 {
        // The slot was reserved with the sizes of `sizes(id)` for this very id (the site's
        // fixed sizes, or `emit`'s computation): what `write_reserved` asks.
        let (byte0, header_len) = event_header::write_reserved(bytes, self.id, timestamp, ext);
        if let Some(payload) = bytes.get_mut(header_len..) {
            (self.write)(payload);
        }
        byte0
    }
}

/// [`emit_in`] for a channel that is not [plain](channel::Channel::plain): per-UID ids,
/// context fields, or blocking mode.
#[inline(never)]
fn emit_in_general<F: Fn(&mut [u8])>(ch: &channel::Channel, cpu: u32, id: u32, ip: u64, size: SlotSize, write: &F) -> Result<(), Dropped> {
    // A per-UID channel: the id of the trace's registry, and the header sizes for it.
    let (id, size) = match &ch.shared_ids {
        None => (id, size),
        Some(ids) => match ids.get(id - ust_core::event_header::FIRST_EVENT_ID) {
            0 => return Ok(()),
            shared => (shared, resize(size, shared)),
        },
    };
    let buf = ch.buffer(cpu);
    let ctx_len = ch.ctx_len;
    let size = if ctx_len == 0 {
        size
    } else {
        match (size.compact.checked_add(ctx_len as u32), size.extended.checked_add(ctx_len as u32)) {
            (Some(compact), Some(extended)) => SlotSize { compact, extended },
            _ => {
                buf.record_dropped(Dropped::TooBig);
                return Ok(());
            }
        }
    };
    // A refused reservation is already counted in the buffer (lost_full / lost_big).
    let reserved = if ch.blocking_us == 0 { buf.reserve(&CtfPacketLayout, &ch.clock, size) } else { crate::blocking::reserve(buf, ch, size) };
    let mut r = match reserved {
        Ok(r) => r,
        Err(Dropped::Migrated) => return Err(Dropped::Migrated),
        Err(_) => return Ok(()),
    };
    let (timestamp, ext) = (r.timestamp, r.extended);
    let bytes = buf.slot(&mut r);
    let (byte0, header_len) = event_header::write(bytes, id, timestamp, ext);
    if ctx_len == 0 {
        write(&mut bytes[header_len..]);
    } else {
        let n = crate::context::write(&ch.contexts, cpu, ip, &mut bytes[header_len..]);
        write(&mut bytes[header_len + n..]);
    }
    buf.commit(&CtfPacketLayout, r, byte0);
    Ok(())
}

/// `size` (computed for the site's own id) for event id `to`: the payload stays, the
/// compact header is possible only for a small id.
#[inline(always)]
fn resize(size: SlotSize, to: u32) -> SlotSize {
    // The extended size is the payload plus the extended header, whatever the id.
    let payload = size.extended - event_header::EXTENDED_SIZE as u32;
    let (compact, extended) = event_header::sizes(to);
    SlotSize { compact: payload + compact as u32, extended: payload + extended as u32 }
}

#[cold]
fn drop_all(mask: u64, why: Dropped) {
    let cpu = cpu::current();
    let mut m = mask;
    while m != 0 {
        if let Some(ch) = channel::get(m.trailing_zeros()).filter(|c| c.map.is_none()) {
            ch.buffer(cpu).record_dropped(why);
        }
        m &= m - 1;
    }
}
