//! An instrumented shared object for the `dlopen` tests: `libharmlib.so`, loaded by
//! `harmhost` (src/bin/harmhost.rs) with `dlopen`. It links its own copy of `ust`, whose
//! constructor runs inside the `dlopen` call.

/// Fires `harmlib:hello { n }`, then `tracef!("harmlib {n}")` (the library's copy of
/// `ust`'s own `lttng_ust_tracef:event`): the host calls it right after `dlopen` returns.
#[no_mangle]
pub extern "C" fn harmlib_hello(n: u32) {
    ust::tracepoint!(harmlib, hello, n: u32 = n);
    ust::tracef!("harmlib {n}");
}
