//! `bigevent K SIZE...`: emits K events `big:small { i }` (i from 0), then for each SIZE a
//! `big:huge { data }` with SIZE bytes of data followed by K more `big:small` (i counting
//! on). With sub-buffers smaller than a SIZE, that event is refused and counted
//! as discarded; every `big:small` must still be in the trace.

fn main() {
    let k: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).expect("K");
    let sizes: Vec<usize> = std::env::args().skip(2).map(|a| a.parse().expect("size in bytes")).collect();
    let mut i = 0u32;
    let small = |i: &mut u32| {
        for _ in 0..k {
            ust::tracepoint!(big, small, i: u32 = *i);
            *i += 1;
        }
    };
    small(&mut i);
    for s in &sizes {
        let data = vec![0xabu8; *s];
        ust::tracepoint!(big, huge, data: &[u8] = &data);
        small(&mut i);
    }
    println!("bigevent: {i} small and {} huge events emitted", sizes.len());
}
