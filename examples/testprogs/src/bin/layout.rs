//! `layout N`: N events `layout:edge` with the layout edge cases at every byte offset (the
//! string lengths vary, so records start at every alignment and cross sub-buffer ends):
//! a `u8`, then a zero-length `&[u64]`, then a `u64`; a non-ASCII string of 0 to 6 `é`;
//! the empty string; a byte slice of 0 to 4 bytes taken from `ff 00 c3 28` (invalid UTF-8
//! and a NUL: a sequence, never a string); a `u16` to see that nothing shifted.

const RAW: [u8; 4] = [0xff, 0x00, 0xc3, 0x28];

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let none: &[u64] = &[];
    for i in 0..n {
        let s = "é".repeat((i % 7) as usize);
        ust::tracepoint!(layout, edge,
            a: u8 = i as u8, empty: &[u64] = none, b: u64 = i,
            s: &str = &s, e: &str = "", raw: &[u8] = &RAW[..(i % 5) as usize], tail: u16 = 0xbeef);
    }
    println!("layout: {n} events emitted");
}
