//! Local-time stamps in the forms LTTng uses: `YYYYmmdd-HHMMSS` in directory and session
//! names, `YYYYmmddTHHMMSS+hhmm` in the metadata `env` block (`trace_creation_datetime`).

/// Broken-down local time of `secs` since the Epoch, and its offset from UTC in seconds.
fn local(secs: i64) -> (libc::tm, i64) {
    // SAFETY: an all-zero `tm` is a valid value (integers and a null zone pointer).
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let t: libc::time_t = secs as libc::time_t;
    // SAFETY: both pointers are valid for the call; localtime_r is thread-safe.
    unsafe { libc::localtime_r(&t, &mut tm) };
    let off = tm.tm_gmtoff;
    (tm, off)
}

fn now_secs() -> (i64, u32) {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (d.as_secs() as i64, d.subsec_millis())
}

/// `YYYYmmdd-HHMMSS` of `secs` (seconds since the Epoch), local time.
pub fn stamp_at(secs: i64) -> String {
    let (tm, _) = local(secs);
    format!("{:04}{:02}{:02}-{:02}{:02}{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec)
}

/// `YYYYmmdd-HHMMSS` now, local time (directory and default session names).
pub fn stamp() -> String {
    stamp_at(now_secs().0)
}

/// `YYYYmmddTHHMMSS+hhmm` of `secs`, local time with its UTC offset (ISO 8601 basic form, as
/// LTTng's `trace_creation_datetime`).
pub fn iso_at(secs: i64) -> String {
    let (tm, off) = local(secs);
    let sign = if off < 0 { '-' } else { '+' };
    let off = off.abs();
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}{}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        sign,
        off / 3600,
        (off % 3600) / 60
    )
}

/// Seconds since the Epoch, now.
pub fn now() -> i64 {
    now_secs().0
}

/// `YYYY-mm-dd HH:MM:SS.mmm` now, local time, for log lines.
pub fn log_stamp() -> String {
    let (s, ms) = now_secs();
    let (tm, _) = local(s);
    format!("{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let s = stamp();
        assert_eq!(s.len(), 15, "{s}");
        assert_eq!(&s[8..9], "-");
        let i = iso_at(now());
        assert_eq!(i.len(), 20, "{i}");
        assert_eq!(&i[8..9], "T");
    }
}
