//! `sdtprog N [PAUSE_MS]`: fires its tracepoints `N` times, as a program built with ust's
//! `sdt` feature (each `tracepoint!` also a SystemTap SDT probe). Call `i` (from 0) fires
//! `sdtprog:tick { i: u64 = i, delta: i32 = -3 * i, even: bool = i % 2 == 0, tag: &str =
//! "tick" }` and, through a `#[ust::provider]` function, `sdtprog:pair { a: u16 = i, b: i64
//! = i - 100 }`; prints the sum of `i` (so the loop is not optimized away). With
//! `PAUSE_MS`, sleeps that long before the loop (time for a tracer to attach by pid).

#[ust::provider]
mod sdtprog {
    /// A provider function: its site is inlined into every caller.
    #[tracepoint(level = Info)]
    pub fn pair(a: u16, b: i64) {}
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    if let Some(ms) = args.next().and_then(|a| a.parse().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    let mut sum = 0u64;
    for i in 0..std::hint::black_box(n) {
        ust::tracepoint!(sdtprog, tick, i: u64 = i, delta: i32 = -3 * i as i32, even: bool = i % 2 == 0, tag: &str = "tick");
        sdtprog::pair(i as u16, i as i64 - 100);
        sum += i;
    }
    println!("{sum}");
}
