//! Events for the filter, exclusion and context tests. A second thread prints `tid <tid>`
//! and emits `filt:num { n: u32, name: &str, x: f64 }` for n in 0..20 (name "even"/"odd",
//! x = n / 2), then `filt:other` and `filt:skipme`; the main thread then emits `filt:main`.

fn main() {
    let t = std::thread::spawn(|| {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc_gettid() };
        println!("tid {tid}");
        for n in 0..20u32 {
            let name = if n % 2 == 0 { "even" } else { "odd" };
            ust::tracepoint!(filt, num, n: u32 = n, name: &str = name, x: f64 = n as f64 / 2.0);
        }
        ust::tracepoint!(filt, other, n: u32 = 1);
        ust::tracepoint!(filt, skipme, n: u32 = 2);
    });
    t.join().unwrap();
    ust::tracepoint!(filt, main, n: u32 = 3);
}

extern "C" {
    #[link_name = "gettid"]
    fn libc_gettid() -> i32;
}
