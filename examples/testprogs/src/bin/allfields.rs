//! Emits one event of every supported field type, with the edge cases the end-to-end test
//! checks value by value in babeltrace2's output: the empty string, a zero-length sequence,
//! a `u8` before a `u64`, negative numbers, NaN and infinities, non-ASCII UTF-8, a string cut
//! at an interior NUL, bytes that are not UTF-8, an enum, `tracef!` and `tracelog!`.

#[derive(ust::Enum, Clone, Copy)]
#[repr(i16)]
enum Color {
    Red = -1,
    Green = 0,
    Blue = 7,
}

#[ust::provider]
mod allprov {
    #[tracepoint(level = Info)]
    pub fn provided(id: u64, status: u16, body: &[u8]) {}
}

fn main() {
    ust::tracepoint!(allprov, ints,
        a: u8 = 255, b: u64 = u64::MAX, c: i8 = -128, d: i16 = -32768, e: i32 = -2147483648,
        f: i64 = i64::MIN, g: u16 = 65535, h: u32 = 4294967295, i: usize = 12345, j: isize = -12345);
    ust::tracepoint!(allprov, floats, level = Notice,
        x: f32 = 1.5, y: f64 = -2.25, nan: f64 = f64::NAN, inf: f32 = f32::INFINITY, tiny: f64 = 1e-300);
    ust::tracepoint!(allprov, misc, yes: bool = true, no: bool = false, letter: char = 'é');
    ust::tracepoint!(allprov, strings,
        empty: &str = "", plain: &str = "hello", utf8: &str = "héllo wörld ✓", cut: &str = "before\0after");
    let none: &[u64] = &[];
    ust::tracepoint!(allprov, sequences,
        small: u8 = 7, empty: &[u64] = none, big: u64 = 1 << 40,
        words: &[i32] = &[-1, 0, 1], bytes: &[u8] = &[0xff, 0x00, 0xc3, 0x28]);
    ust::tracepoint!(allprov, arrays, trio: [i32; 3] = [-5, 0, 5], quad: [u8; 4] = [1, 2, 3, 4]);
    ust::tracepoint!(allprov, enums, red: Color = Color::Red, green: Color = Color::Green, blue: Color = Color::Blue);
    allprov::provided(42, 200, b"ok");
    ust::tracef!("tracef {} and {}", 7, -3);
    ust::tracelog!(Warning, "tracelog at {}%", 93);
    println!("allfields: 10 events emitted");
}
