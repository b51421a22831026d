//! Running a compiled [`Node`] over a packet: values go to a flat slot list (no allocation
//! per event once the buffers have grown), lengths and selectors to registers, meanings to
//! the [`DecState`], clock-mapped integers to the stream clock (CTF 1.8 §8: a field of N < 64
//! bits replaces the clock's low N bits, adding 2^N when the new low bits are smaller).

use super::bits::{sign_extend, BitReader};
use super::compile::{Len, Node, NO_OPTION, NO_REG};
use crate::error::DecodeFault;
use crate::model::Role;

/// One decoded value, in the order of a depth-first walk of the field type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Slot {
    /// Unsigned integer or enumeration value.
    U(u64),
    /// Signed integer or enumeration value.
    I(i64),
    /// Float (binary32 values widened exactly).
    F(f64),
    /// Text: byte range in the batch's text arena.
    Str {
        /// Start offset.
        off: u32,
        /// Length in bytes.
        len: u32,
    },
    /// Element count of the array or sequence whose elements follow.
    Len(u64),
    /// Index of the variant option that follows.
    Opt(u32),
}

/// Most slots one event may produce (bounds time and memory on hostile lengths).
pub(crate) const MAX_SLOTS_PER_EVENT: usize = 1 << 22;
/// Most elements of an array whose elements may take no bits at all.
pub(crate) const MAX_EMPTY_ELEMS: u64 = 1 << 20;

/// Decoding state of one stream: registers, clock, and the meanings read so far.
#[derive(Debug, Default, Clone)]
pub(crate) struct DecState {
    pub regs: Vec<u64>,
    pub clock: u64,
    pub event_id: Option<u64>,
    pub magic: Option<u64>,
    pub stream_class_id: Option<u64>,
    pub stream_instance_id: Option<u64>,
    pub ts_begin: Option<u64>,
    pub ts_end: Option<u64>,
    pub content_size: Option<u64>,
    pub packet_size: Option<u64>,
    pub discarded: Option<u64>,
    pub seq_num: Option<u64>,
    /// Elements that may take no bits (an array of empty structures) the packet may still
    /// hold: as many as its content has bits (the stream sets it per packet; a valid trace
    /// with more is refused, where babeltrace2 reads any number). Without it a few bytes of
    /// lengths made millions of values per event, and a reader that keeps events (the
    /// report) held gigabytes for a trace of kilobytes.
    pub empty_budget: u64,
}

impl DecState {
    fn role(&mut self, role: Role, v: u64) {
        let slot = match role {
            Role::Magic => &mut self.magic,
            Role::StreamClassId => &mut self.stream_class_id,
            Role::StreamInstanceId => &mut self.stream_instance_id,
            Role::PacketBeginTime => &mut self.ts_begin,
            Role::PacketEndTime => &mut self.ts_end,
            Role::ContentSize => &mut self.content_size,
            Role::PacketSize => &mut self.packet_size,
            Role::DiscardedEvents => &mut self.discarded,
            Role::PacketSeqNum => &mut self.seq_num,
            Role::EventClassId => &mut self.event_id,
        };
        *slot = Some(v);
    }

    /// Updates the stream clock from an N-bit clock-mapped value.
    #[inline]
    pub(crate) fn update_clock(&mut self, v: u64, size: u32) {
        if size >= 64 {
            self.clock = v;
            return;
        }
        let mask = (1u64 << size) - 1;
        if v < self.clock & mask {
            self.clock = self.clock.wrapping_add(mask + 1);
        }
        self.clock = (self.clock & !mask) | v;
    }
}

/// Output buffers of decoding: slots and the text arena.
#[derive(Debug, Default)]
pub(crate) struct Out {
    pub slots: Vec<Slot>,
    pub text: Vec<u8>,
}

impl Out {
    fn text(&mut self, bytes: &[u8], bit: u64) -> Result<Slot, DecodeFault> {
        let off = u32::try_from(self.text.len()).map_err(|_| DecodeFault::new(bit, "text arena over 4 GiB"))?;
        let len = u32::try_from(bytes.len()).map_err(|_| DecodeFault::new(bit, "string over 4 GiB"))?;
        self.text.extend_from_slice(bytes);
        Ok(Slot::Str { off, len })
    }
}

/// Decodes one field of type `node` at the reader's position.
///
/// Only arrays make an event's slots grow beyond its type's fixed count: the bound on slots
/// per event ([`MAX_SLOTS_PER_EVENT`]) is checked before each array element.
pub(crate) fn exec(node: &Node, r: &mut BitReader<'_>, st: &mut DecState, out: &mut Out, slot_base: usize) -> Result<(), DecodeFault> {
    match node {
        Node::Int { .. } => int(node, r, st, out)?,
        Node::Float { size, align, be } => {
            r.align(*align)?;
            let v = r.read(*size, *be)?;
            out.slots.push(Slot::F(if *size == 32 { f32::from_bits(v as u32) as f64 } else { f64::from_bits(v) }));
        }
        Node::CStr => {
            let at = r.pos;
            let b = r.read_cstr()?;
            let s = out.text(b, at)?;
            out.slots.push(s);
        }
        Node::Text { align, len } => {
            r.align(*align)?;
            let n = length(*len, st);
            let at = r.pos;
            let b = r.read_bytes(n)?;
            let s = out.text(b, at)?;
            out.slots.push(s);
        }
        Node::Struct { align, fields } => {
            r.align(*align)?;
            // Integers, most members, without a call each.
            for f in fields.iter() {
                match f {
                    Node::Int { .. } => int(f, r, st, out)?,
                    _ => exec(f, r, st, out, slot_base)?,
                }
            }
        }
        Node::Array { align, len, elem, elem_min_bits } => {
            let n = length(*len, st);
            // Aligned even when empty (CTF 1.8 §4.2.3, as babeltrace2 does).
            r.align(*align)?;
            if n.saturating_mul(*elem_min_bits) > r.remaining() {
                return Err(DecodeFault::new(r.pos, format!("array of {n} elements of at least {elem_min_bits} bits passes the end of the packet content")));
            }
            if *elem_min_bits == 0 {
                if n > MAX_EMPTY_ELEMS {
                    return Err(DecodeFault::new(r.pos, format!("array of {n} elements that may be empty")));
                }
                if n > st.empty_budget {
                    return Err(DecodeFault::new(
                        r.pos,
                        format!("array of {n} elements that may be empty: the packet may hold {} more (one per bit of its content)", st.empty_budget),
                    ));
                }
                st.empty_budget -= n;
            }
            out.slots.push(Slot::Len(n));
            for _ in 0..n {
                if out.slots.len() - slot_base > MAX_SLOTS_PER_EVENT {
                    return Err(too_many_values(r.pos));
                }
                exec(elem, r, st, out, slot_base)?;
            }
        }
        Node::Variant { reg, signed, ranges, table, options } => {
            let raw = st.regs[*reg as usize];
            let v: i128 = if *signed { raw as i64 as i128 } else { raw as i128 };
            let opt = match table.get(raw as usize).filter(|_| v >= 0 && v < table.len() as i128) {
                Some(&o) => Some(o).filter(|&o| o != NO_OPTION),
                None => ranges.iter().find(|(lo, hi, _)| *lo <= v && v <= *hi).map(|r| r.2),
            }
            .ok_or_else(|| DecodeFault::new(r.pos, format!("variant selector value {v} selects no option")))?;
            out.slots.push(Slot::Opt(opt));
            exec(&options[opt as usize], r, st, out, slot_base)?;
        }
    }
    Ok(())
}

/// Decodes an integer node (the caller checked the kind).
#[inline(always)]
fn int(node: &Node, r: &mut BitReader<'_>, st: &mut DecState, out: &mut Out) -> Result<(), DecodeFault> {
    let Node::Int { size, align, be, signed, clock, reg, role } = node else { return Ok(()) };
    r.align(*align)?;
    let v = r.read(*size, *be)?;
    let s = if *signed { Slot::I(sign_extend(v, *size)) } else { Slot::U(v) };
    if *clock {
        st.update_clock(v, *size);
    }
    if let Some(role) = role {
        st.role(*role, v);
    }
    if *reg != NO_REG {
        st.regs[*reg as usize] = match s {
            Slot::I(x) => x as u64,
            _ => v,
        };
    }
    out.slots.push(s);
    Ok(())
}

#[cold]
fn too_many_values(bit: u64) -> DecodeFault {
    DecodeFault::new(bit, format!("event has more than {MAX_SLOTS_PER_EVENT} values"))
}

#[inline]
fn length(len: Len, st: &DecState) -> u64 {
    match len {
        Len::Fixed(n) => n,
        Len::Reg(r) => st.regs[r as usize],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_wraps_on_smaller_low_bits() {
        let mut st = DecState { clock: 0x1234_0000_07FF_FFF0, ..Default::default() };
        st.update_clock(0x10, 27);
        assert_eq!(st.clock, 0x1234_0000_0800_0010);
        st.update_clock(0x20, 27);
        assert_eq!(st.clock, 0x1234_0000_0800_0020);
        st.update_clock(7, 64);
        assert_eq!(st.clock, 7);
    }
}
