//! `scribbler MODE SEED`: a hostile application. It emits events, then scribbles random
//! 8-byte values over its own shared ring buffers (found in `/proc/self/maps` as
//! `memfd:ust-…`): MODE `head` hits the first 8 KiB of each (file header, control words,
//! commit counters, id table), `data` the packets, `all` anywhere. It also tries to
//! truncate each buffer (which the seals must refuse). Then it emits more events and
//! exits. Prints `scribbler PID: ftruncate refused (N buffers)` (or `ftruncate ALLOWED`).

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "all".into());
    let mut x: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1) | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..2000u64 {
        ust::tracepoint!(scribbler, before, i: u64 = i);
    }
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mut refused = 0;
    let mut allowed = 0;
    let mut n = 0;
    for l in maps.lines().filter(|l| l.contains("memfd:ust-")) {
        let range = l.split_whitespace().next().unwrap();
        let (a, b) = range.split_once('-').unwrap();
        let (start, end) = (usize::from_str_radix(a, 16).unwrap(), usize::from_str_radix(b, 16).unwrap());
        n += 1;
        // Try to shrink the buffer under the daemon's mapping.
        match std::fs::OpenOptions::new().write(true).open(format!("/proc/self/map_files/{range}")) {
            Ok(f) => match f.set_len(0) {
                Ok(()) => allowed += 1,
                Err(_) => refused += 1,
            },
            Err(_) => refused += 1,
        }
        let len = end - start;
        let (lo, span) = match mode.as_str() {
            "head" => (0, 8192.min(len)),
            "data" => (len / 2, len / 2),
            _ => (0, len),
        };
        for _ in 0..16 {
            let off = (lo + (rnd() as usize % (span - 8))) & !7;
            let val = match rnd() % 3 {
                0 => rnd(),
                1 => rnd() % 70_000,
                _ => u64::MAX,
            };
            // SAFETY: inside a live shared mapping of this process; scribbling over it is
            // what this program is for (the ring buffer tolerates it: its loss).
            unsafe { std::ptr::write_volatile((start + off) as *mut u64, val) };
        }
    }
    for i in 0..2000u64 {
        ust::tracepoint!(scribbler, after, i: u64 = i);
    }
    let verdict = if allowed == 0 { "refused" } else { "ALLOWED" };
    println!("scribbler {}: ftruncate {verdict} ({n} buffers, {refused} refused)", std::process::id());
}
