//! Clock cycles to nanoseconds from the clock's origin, exactly as babeltrace2 computes
//! them (`bt_util_ns_from_origin_inline` of its library): offset seconds times 10^9 plus the
//! offset cycles and the value converted to ns, each conversion through `f64` unless the
//! frequency is 1 GHz, and an error wherever the result leaves `i64`.

use crate::error::Error;
use crate::model::ClockClass;

/// A clock class prepared for fast conversions.
#[derive(Clone, Debug)]
pub struct Clock {
    /// Name (for errors).
    pub name: String,
    freq: u64,
    offset_s: i64,
    offset_cycles: u64,
    base_ns: i64,
}

const NS_PER_S: i64 = 1_000_000_000;

fn ns_from_value(freq: u64, cycles: u64) -> u64 {
    if freq == NS_PER_S as u64 {
        cycles
    } else {
        let d = (1e9 * cycles as f64) / freq as f64;
        if d >= u64::MAX as f64 {
            u64::MAX
        } else {
            d as u64
        }
    }
}

impl Clock {
    /// Prepares `c`. Errors with [`Error::ClockOverflow`] (cycles 0) when the clock's
    /// offset alone leaves 64-bit signed nanoseconds, as babeltrace2 refuses such clocks
    /// ("Cannot convert clock cycles to nanoseconds from origin").
    pub fn new(c: &ClockClass) -> Result<Clock, Error> {
        let err = || Error::ClockOverflow { path: None, clock: c.name.clone(), cycles: 0, offset_s: c.offset_s, offset_cycles: c.offset_cycles, freq: c.freq };
        // babeltrace2's bounds: offset_s <= MIN/1e9 - 1 or offset_s >= MAX/1e9 - 1.
        if c.offset_s < i64::MIN / NS_PER_S || c.offset_s > i64::MAX / NS_PER_S - 2 {
            return Err(err());
        }
        let base_ns = c.offset_s * NS_PER_S + ns_from_value(c.freq, c.offset_cycles) as i64;
        Ok(Clock { name: c.name.clone(), freq: c.freq, offset_s: c.offset_s, offset_cycles: c.offset_cycles, base_ns })
    }

    /// Nanoseconds from origin of `cycles`.
    #[inline]
    pub fn to_ns(&self, cycles: u64) -> Result<i64, Error> {
        let v = ns_from_value(self.freq, cycles);
        let fail = || Error::ClockOverflow {
            path: None,
            clock: self.name.clone(),
            cycles,
            offset_s: self.offset_s,
            offset_cycles: self.offset_cycles,
            freq: self.freq,
        };
        if v >= i64::MAX as u64 {
            return Err(fail());
        }
        let v = v as i64;
        if self.base_ns > 0 && v > i64::MAX - self.base_ns {
            return Err(fail());
        }
        Ok(self.base_ns + v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc(freq: u64, offset_s: i64, offset_cycles: u64) -> ClockClass {
        ClockClass { name: "c".into(), freq, offset_s, offset_cycles, origin_is_unix_epoch: true, description: None, uuid: None, precision: 0 }
    }

    #[test]
    fn one_ghz_is_exact() {
        let c = Clock::new(&cc(1_000_000_000, 1_565_056_443, 54_742_594)).unwrap();
        assert_eq!(c.to_ns(1000).unwrap(), 1_565_056_443_054_743_594);
    }

    #[test]
    fn other_frequencies_go_through_f64() {
        let c = Clock::new(&cc(1_123_456_789, 0, 1_234_567)).unwrap();
        let expect = ((1e9 * 1_234_567f64) / 1_123_456_789f64) as i64 + ((1e9 * 5e9) / 1_123_456_789f64) as i64;
        assert_eq!(c.to_ns(5_000_000_000).unwrap(), expect);
    }

    #[test]
    fn overflowing_offsets_are_refused() {
        assert!(matches!(Clock::new(&cc(1_123_456_789, 1_351_530_929_945_824_323, 0)), Err(Error::ClockOverflow { .. })));
        let c = Clock::new(&cc(1_000_000_000, 9_000_000_000, 0)).unwrap();
        assert!(c.to_ns(u64::MAX / 2).is_err());
    }
}
