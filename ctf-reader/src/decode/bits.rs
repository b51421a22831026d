//! Bit-level reading of a packet (CTF 1.8 §4.1.5): integers of 1 to 64 bits at any bit
//! position. Little-endian fields fill from the least significant bit of each byte,
//! big-endian fields from the most significant bit. Every read is bounds-checked against
//! the packet's content size.

use crate::error::DecodeFault;

/// A cursor over one packet's bytes; positions are in bits from the packet start.
pub(crate) struct BitReader<'a> {
    buf: &'a [u8],
    /// Current position in bits.
    pub pos: u64,
    /// Readable limit in bits (the packet's content size, at most `buf.len() * 8`).
    pub limit: u64,
}

impl<'a> BitReader<'a> {
    pub(crate) fn new(buf: &'a [u8], limit: u64) -> Self {
        BitReader { buf, pos: 0, limit: limit.min(buf.len() as u64 * 8) }
    }

    /// Bits left before the limit.
    #[inline]
    pub(crate) fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.pos)
    }

    /// Aligns the position up to `align` bits (a power of two).
    #[inline]
    pub(crate) fn align(&mut self, align: u32) -> Result<(), DecodeFault> {
        let a = align as u64;
        let p = (self.pos + a - 1) & !(a - 1);
        if p > self.limit {
            return Err(align_fault(self.pos, align));
        }
        self.pos = p;
        Ok(())
    }

    /// Reads an unsigned integer of `size` (1..=64) bits.
    ///
    /// With 16 bytes of the packet from the current byte on (all but a packet's last
    /// bytes), one 128-bit load and a shift read any size at any bit offset; the bounds
    /// check is against the content size, before the load.
    #[inline(always)]
    pub(crate) fn read(&mut self, size: u32, big_endian: bool) -> Result<u64, DecodeFault> {
        let size64 = size as u64;
        if size64 > self.remaining() {
            return Err(past_end_fault(self.pos, size));
        }
        let byte = (self.pos / 8) as usize;
        let shift = (self.pos % 8) as u32;
        let v = match self.buf.get(byte..byte + 16) {
            Some(w) => {
                let w: [u8; 16] = w.try_into().expect("16 bytes");
                if big_endian {
                    (u128::from_be_bytes(w) >> (128 - shift - size)) as u64
                } else {
                    (u128::from_le_bytes(w) >> shift) as u64
                }
            }
            None => {
                let nbytes = (shift + size).div_ceil(8) as usize;
                let mut a = [0u8; 16];
                let src = &self.buf[byte..byte + nbytes];
                if big_endian {
                    a[16 - nbytes..].copy_from_slice(src);
                    let w = u128::from_be_bytes(a);
                    let total = nbytes as u32 * 8;
                    (w >> (total - shift - size)) as u64
                } else {
                    a[..nbytes].copy_from_slice(src);
                    (u128::from_le_bytes(a) >> shift) as u64
                }
            }
        };
        self.pos += size64;
        Ok(v & (u64::MAX >> (64 - size)))
    }

    /// Reads bytes up to a NUL (byte aligned); returns them without the NUL.
    pub(crate) fn read_cstr(&mut self) -> Result<&'a [u8], DecodeFault> {
        self.align(8)?;
        let start = (self.pos / 8) as usize;
        let end = (self.limit / 8) as usize;
        let hay = &self.buf[start..end];
        let n = hay
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| DecodeFault::new(self.pos, "string without a terminating NUL before the end of the packet content"))?;
        self.pos += (n as u64 + 1) * 8;
        Ok(&hay[..n])
    }

    /// Reads `n` whole bytes (byte aligned).
    pub(crate) fn read_bytes(&mut self, n: u64) -> Result<&'a [u8], DecodeFault> {
        self.align(8)?;
        if n.saturating_mul(8) > self.remaining() {
            return Err(DecodeFault::new(self.pos, format!("{n}-byte array passes the end of the packet content")));
        }
        let start = (self.pos / 8) as usize;
        self.pos += n * 8;
        Ok(&self.buf[start..start + n as usize])
    }
}

#[cold]
fn align_fault(bit: u64, align: u32) -> DecodeFault {
    DecodeFault::new(bit, format!("aligning to {align} bits passes the end of the packet content"))
}

#[cold]
fn past_end_fault(bit: u64, size: u32) -> DecodeFault {
    DecodeFault::new(bit, format!("{size}-bit field passes the end of the packet content"))
}

/// Sign-extends the low `size` bits of `v`.
#[inline]
pub(crate) fn sign_extend(v: u64, size: u32) -> i64 {
    let s = 64 - size;
    ((v << s) as i64) >> s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn little_endian_bit_fields() {
        // 5-bit id = 0b10110 (22), then 27-bit timestamp = 0x5ABCDEF >> 0.
        let word: u32 = 22 | (0x5AB_CDEF << 5);
        let b = word.to_le_bytes();
        let mut r = BitReader::new(&b, 32);
        assert_eq!(r.read(5, false).unwrap(), 22);
        assert_eq!(r.read(27, false).unwrap(), 0x5AB_CDEF);
        assert!(r.read(1, false).is_err());
    }

    #[test]
    fn big_endian_bit_fields() {
        // Big-endian: the first field takes the most significant bits.
        let word: u32 = (22 << 27) | 0x5AB_CDEF;
        let b = word.to_be_bytes();
        let mut r = BitReader::new(&b, 32);
        assert_eq!(r.read(5, true).unwrap(), 22);
        assert_eq!(r.read(27, true).unwrap(), 0x5AB_CDEF);
    }

    #[test]
    fn the_wide_load_and_the_tail_read_alike() {
        let bytes: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37).wrapping_add(11)).collect();
        for be in [false, true] {
            for size in [1u32, 5, 8, 13, 27, 32, 33, 64] {
                for pos in (0..(40 * 8 - size as u64)).step_by(7) {
                    let mut r = BitReader::new(&bytes, 40 * 8);
                    r.pos = pos;
                    let got = r.read(size, be).unwrap();
                    let mut want = 0u64;
                    for i in 0..size as u64 {
                        let bit = pos + i;
                        let byte = bytes[(bit / 8) as usize];
                        let b = if be { (byte >> (7 - bit % 8)) & 1 } else { (byte >> (bit % 8)) & 1 };
                        want = if be { (want << 1) | b as u64 } else { want | ((b as u64) << i) };
                    }
                    assert_eq!(got, want, "size {size} at bit {pos}, big-endian {be}");
                }
            }
        }
    }

    #[test]
    fn unaligned_64_bits_and_signs() {
        let mut b = [0u8; 10];
        let v: u64 = 0xFEDC_BA98_7654_3210;
        let w = (v as u128) << 3;
        b.copy_from_slice(&w.to_le_bytes()[..10]);
        let mut r = BitReader::new(&b, 80);
        r.pos = 3;
        assert_eq!(r.read(64, false).unwrap(), v);
        assert_eq!(sign_extend(0b11111, 5), -1);
        assert_eq!(sign_extend(0b01111, 5), 15);
        let mut r = BitReader::new(b"ab\0cd", 40);
        assert_eq!(r.read_cstr().unwrap(), b"ab");
        assert!(r.read_cstr().is_err());
    }
}
