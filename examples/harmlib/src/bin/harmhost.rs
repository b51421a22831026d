//! Loads `libharmlib.so` (argument 1) with `dlopen` while traced, for
//! system-tests/tests/runtime_harm.rs: fires `harmhost:before`, `dlopen`s the library
//! (`RTLD_NOW | RTLD_LOCAL`), calls its `harmlib_hello(1)` at once, `dlclose`s it, then
//! fires `harmhost:after`. Prints `dlopen_ms <milliseconds the dlopen took>` and
//! `mapped_after_dlclose <true|false>` (the library holds a runtime copy whose sites the
//! process's runtime uses: it must stay mapped).
//!
//! Built in the same package as the library so that `cargo build --bins` builds both.

use std::time::Instant;

fn main() {
    let lib = std::env::args().nth(1).expect("usage: harmhost <path to libharmlib.so>");
    ust::tracepoint!(harmhost, before);
    let name = std::ffi::CString::new(lib.clone()).unwrap();
    let t0 = Instant::now();
    // SAFETY: dlopen with a valid C string; the library stays loaded until exit.
    let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    let took = t0.elapsed();
    assert!(!h.is_null(), "dlopen({lib}) failed");
    // SAFETY: a valid handle and a NUL-terminated symbol name.
    let f = unsafe { libc::dlsym(h, c"harmlib_hello".as_ptr()) };
    assert!(!f.is_null(), "no harmlib_hello in {lib}");
    // SAFETY: `harmlib_hello` is `extern "C" fn(u32)` (src/lib.rs).
    let hello: extern "C" fn(u32) = unsafe { std::mem::transmute(f) };
    hello(1);
    // SAFETY: the handle from dlopen above; nothing of the library is used after this.
    unsafe { libc::dlclose(h) };
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    ust::tracepoint!(harmhost, after);
    println!("dlopen_ms {}", took.as_millis());
    println!("mapped_after_dlclose {}", maps.contains("libharmlib.so"));
}
