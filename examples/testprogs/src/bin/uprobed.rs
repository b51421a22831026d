//! uprobed: a program with no tracer at all, for the dynamic-probe tests
//! (system-tests/tests/uprobes.rs, session_uprobes.rs). `uprobed N [SLEEP_MS [AFTER_MS]]`
//! sleeps SLEEP_MS (default 0), then calls `compute(i, i % 2 == 0, -3)` for i in 0..N, each returning `i * -3 + even`,
//! then `uprobed_compute_c(1, false, 1)` (a C-named symbol) and `label("hello", 'x')`
//! once each, then `content` with an empty slice (a dangling pointer), the 40 bytes
//! `0123456789abcdefghijklmnopqrstuvwxyzABCD` and `ok\xff` (not UTF-8), prints the sum of
//! the results of all but `content`, and sleeps AFTER_MS (default 0) before it exits.
//! Both functions are `#[inline(never)]`, so each has a symbol and runs as a call.

/// A data symbol: a probe on it is refused (LTTng's "symbol not a function" case).
#[no_mangle]
#[used]
pub static UPROBED_NOT_A_FUNCTION: [u64; 2] = [1, 2];

/// One call to probe: three integer-class arguments in %rdi, %rsi, %rdx.
#[inline(never)]
#[no_mangle]
pub extern "Rust" fn uprobed_compute_c(i: u64, even: bool, scale: i32) -> i64 {
    std::hint::black_box(i as i64 * i64::from(scale) + i64::from(even))
}

/// The same, as a Rust path (`uprobed::compute`).
#[inline(never)]
fn compute(i: u64, even: bool, scale: i32) -> i64 {
    std::hint::black_box(i as i64 * i64::from(scale) + i64::from(even))
}

/// A `&str` (two registers) and a `char`.
#[inline(never)]
fn label(name: &str, c: char) -> usize {
    std::hint::black_box(name.len() + usize::from(c == '\0'))
}

/// A `&[u8]`: pointer, length, and the first bytes of its content in a probe.
#[inline(never)]
fn content(data: &[u8]) -> usize {
    std::hint::black_box(data.len())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let sleep: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    std::thread::sleep(std::time::Duration::from_millis(sleep));
    let f: fn(u64, bool, i32) -> i64 = std::hint::black_box(compute);
    let mut sum = 0i64;
    for i in 0..n {
        sum += f(std::hint::black_box(i), i % 2 == 0, std::hint::black_box(-3));
    }
    let g: fn(u64, bool, i32) -> i64 = std::hint::black_box(uprobed_compute_c);
    sum += g(1, false, 1);
    sum += label(std::hint::black_box("hello"), 'x') as i64;
    // An empty Vec's slice: length 0 at a dangling (never mapped) pointer.
    let empty: Vec<u8> = Vec::new();
    for data in [empty.as_slice(), b"0123456789abcdefghijklmnopqrstuvwxyzABCD", b"ok\xff"] {
        std::hint::black_box(content(std::hint::black_box(data)));
    }
    println!("{sum}");
    let after: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    std::thread::sleep(std::time::Duration::from_millis(after));
}
