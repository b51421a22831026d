//! Loads libz with `dlopen` while traced, for the state-dump test
//! (system-tests/tests/statedump.rs): prints its `/proc/self/maps` before and after (lines
//! prefixed `before ` and `after `), and marks the moments around the `dlopen` with events.
//! Waits 500 ms after the `dlopen` (five of the runtime's 100 ms polls) before `done`.

fn print_maps(tag: &str) {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    for l in maps.lines() {
        println!("{tag} {l}");
    }
}

fn main() {
    let lib = std::env::args().nth(1).unwrap_or_else(|| "libz.so.1".into());
    print_maps("before");
    ust::tracepoint!(dlopener, before_dlopen);
    let name = std::ffi::CString::new(lib.clone()).unwrap();
    // SAFETY: dlopen with a valid C string; the library stays loaded until exit.
    let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW) };
    assert!(!h.is_null(), "dlopen({lib}) failed");
    ust::tracepoint!(dlopener, after_dlopen);
    std::thread::sleep(std::time::Duration::from_millis(500));
    ust::tracepoint!(dlopener, done);
    print_maps("after");
}
